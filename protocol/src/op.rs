//! The sampled operation: what a front end (QEMU, or the synthetic source)
//! tells the model about one operation the interval counter selected.
//!
//! The layout is fixed little-endian so it can cross a socket or sit in a
//! shared-memory ring: [`SampledOp::to_bytes`] / [`SampledOp::from_bytes`].

use crate::le::{u32_at, u64_at};
use crate::regs::El;

/// Operation class, with the SPE operation-type payload byte it produces.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpClass {
    /// Not a load, store or branch. `cond_select`: a conditional select
    /// or compare (NOT_TAKEN in `events` when its condition failed).
    /// `subclass` is the SPE operation-type payload without its
    /// cond-select bit 0: `packet::op::OTHER_FP`, `OTHER_ASE` (SIMD).
    Other { cond_select: bool, subclass: u8 },
    /// A load, store or atomic. `subclass` is the SPE operation-type payload
    /// without its store bit 0: `packet::op::LDST_GP`, `LDST_SIMD_FP`, the
    /// extended (atomic/exclusive) and SVE forms, and so on. `vector`: a
    /// SIMD&FP one of vector structures (LD1–LD4, ST1–ST4), SIMD for
    /// `SPEFilterByType()`; the other SIMD&FP ones are scalar, FP (the
    /// payload is the same).
    LoadStore {
        store: bool,
        subclass: u8,
        vector: bool,
    },
    /// A branch: conditional and/or indirect. A conditional branch whose
    /// condition failed carries `packet::events::NOT_TAKEN` in `events`.
    Branch { conditional: bool, indirect: bool },
}

/// One sampled operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SampledOp {
    /// Virtual address of the instruction.
    pub pc: u64,
    /// Exception level it executed at.
    pub el: El,
    /// Executed in Non-secure state.
    pub ns: bool,
    /// SCR_EL3.NSE when it executed (Realm/Root states).
    pub nse: bool,
    pub class: OpClass,
    /// Data virtual address of a load/store.
    pub data_va: u64,
    /// Data physical address of a load/store (when known).
    pub data_pa: u64,
    /// Physical address is valid (`data_pa` was translated).
    pub data_pa_valid: bool,
    /// A load/store that accessed nothing (an SVE one with no active
    /// element): its record has no data address.
    pub no_data_address: bool,
    /// Access size in bytes (loads/stores).
    pub size: u8,
    /// Branch target address.
    pub target: u64,
    /// Event bits, as SPE's Events packet (see `packet::events`).
    pub events: u64,
    /// Total latency in cycles (issue to complete).
    pub total_latency: u32,
    /// Issue latency in cycles.
    pub issue_latency: u32,
    /// Translation latency in cycles (loads/stores).
    pub translation_latency: u32,
    pub contextidr_el1: u32,
    pub contextidr_el2: u32,
    /// Physical generic-timer count when the operation completed.
    pub physical_count: u64,
    /// The result of a watch that ended: the front end watches the cache
    /// line of some loads and stores (StatCache's watchpoints, several
    /// at once) until the vCPU's next access to it, and reports each
    /// result with a later operation: the operations the vCPU counted
    /// until that access.
    pub reuse: Reuse,
    /// The PC of the load or store whose line that watch followed.
    pub reuse_pc: u64,
}

/// A watched line's reuse distance ([`SampledOp::reuse`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reuse {
    /// No watch ended since the last operation.
    #[default]
    None,
    /// Accessed again after this many operations (saturating).
    After(u32),
    /// Not accessed again before the front end gave up watching.
    NotWithin(u32),
}

impl Default for SampledOp {
    fn default() -> Self {
        SampledOp {
            pc: 0,
            el: El::El0,
            ns: true,
            nse: false,
            class: OpClass::Other {
                cond_select: false,
                subclass: 0,
            },
            data_va: 0,
            data_pa: 0,
            data_pa_valid: false,
            no_data_address: false,
            size: 0,
            target: 0,
            events: 0,
            total_latency: 0,
            issue_latency: 0,
            translation_latency: 0,
            contextidr_el1: 0,
            contextidr_el2: 0,
            physical_count: 0,
            reuse: Reuse::None,
            reuse_pc: 0,
        }
    }
}

/// Malformed bytes for a [`SampledOp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpDecodeError {
    Length(usize),
    El(u8),
    Class(u8),
}

impl std::fmt::Display for OpDecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpDecodeError::Length(n) => write!(
                f,
                "sampled op is {n} bytes, expected {}",
                SampledOp::WIRE_SIZE
            ),
            OpDecodeError::El(v) => write!(f, "sampled op has exception level {v}"),
            OpDecodeError::Class(v) => write!(f, "sampled op has unknown class {v}"),
        }
    }
}

impl std::error::Error for OpDecodeError {}

impl SampledOp {
    /// Bytes on the wire.
    pub const WIRE_SIZE: usize = 96;

    // Flag bits of byte 9.
    const F_NS: u8 = 1 << 0;
    const F_NSE: u8 = 1 << 1;
    const F_PA_VALID: u8 = 1 << 2;
    const F_A: u8 = 1 << 3; // store / cond_select / conditional
    const F_B: u8 = 1 << 4; // indirect
    const F_V: u8 = 1 << 5; // vector structures
    const F_NO_VA: u8 = 1 << 6; // no data address

    // Byte 13: the kind of `reuse` (0 none, 1 After, 2 NotWithin); its
    // operations at 80, its PC at 88.
    const REUSE_AFTER: u8 = 1;
    const REUSE_NOT_WITHIN: u8 = 2;

    /// Encodes: pc u64 | el u8 | flags u8 | class u8 | subclass u8 | size u8 |
    /// reuse kind u8 | pad[2] | data_va u64 | data_pa u64 | target u64 |
    /// events u64 | total u32 | issue u32 | xlat u32 | ctx1 u32 | ctx2 u32 |
    /// pad u32 | count u64 | reuse ops u32 | pad u32 | reuse pc u64, all
    /// little-endian.
    pub fn to_bytes(&self) -> [u8; Self::WIRE_SIZE] {
        let mut b = [0u8; Self::WIRE_SIZE];
        let vector = matches!(self.class, OpClass::LoadStore { vector: true, .. });
        let (class, subclass, a, ind) = match self.class {
            OpClass::Other {
                cond_select,
                subclass,
            } => (0u8, subclass, cond_select, false),
            OpClass::LoadStore {
                store, subclass, ..
            } => (1, subclass, store, false),
            OpClass::Branch {
                conditional,
                indirect,
            } => (2, 0, conditional, indirect),
        };
        let mut flags = 0;
        for (on, bit) in [
            (self.ns, Self::F_NS),
            (self.nse, Self::F_NSE),
            (self.data_pa_valid, Self::F_PA_VALID),
            (a, Self::F_A),
            (ind, Self::F_B),
            (vector, Self::F_V),
            (self.no_data_address, Self::F_NO_VA),
        ] {
            if on {
                flags |= bit;
            }
        }
        b[0..8].copy_from_slice(&self.pc.to_le_bytes());
        b[8] = self.el as u8;
        b[9] = flags;
        b[10] = class;
        b[11] = subclass;
        b[12] = self.size;
        b[16..24].copy_from_slice(&self.data_va.to_le_bytes());
        b[24..32].copy_from_slice(&self.data_pa.to_le_bytes());
        b[32..40].copy_from_slice(&self.target.to_le_bytes());
        b[40..48].copy_from_slice(&self.events.to_le_bytes());
        b[48..52].copy_from_slice(&self.total_latency.to_le_bytes());
        b[52..56].copy_from_slice(&self.issue_latency.to_le_bytes());
        b[56..60].copy_from_slice(&self.translation_latency.to_le_bytes());
        b[60..64].copy_from_slice(&self.contextidr_el1.to_le_bytes());
        b[64..68].copy_from_slice(&self.contextidr_el2.to_le_bytes());
        b[72..80].copy_from_slice(&self.physical_count.to_le_bytes());
        let (kind, ops) = match self.reuse {
            Reuse::None => (0, 0),
            Reuse::After(n) => (Self::REUSE_AFTER, n),
            Reuse::NotWithin(n) => (Self::REUSE_NOT_WITHIN, n),
        };
        b[13] = kind;
        b[80..84].copy_from_slice(&ops.to_le_bytes());
        b[88..96].copy_from_slice(&self.reuse_pc.to_le_bytes());
        b
    }

    /// Decodes [`SampledOp::to_bytes`]'s layout; reserved bytes are ignored.
    pub fn from_bytes(b: &[u8]) -> Result<SampledOp, OpDecodeError> {
        if b.len() != Self::WIRE_SIZE {
            return Err(OpDecodeError::Length(b.len()));
        }
        let u64_at = |o| u64_at(b, o);
        let u32_at = |o| u32_at(b, o);
        let el = El::from_u8(b[8]).ok_or(OpDecodeError::El(b[8]))?;
        let flags = b[9];
        let a = flags & Self::F_A != 0;
        let class = match b[10] {
            0 => OpClass::Other {
                cond_select: a,
                subclass: b[11] & 0xFE,
            },
            1 => OpClass::LoadStore {
                store: a,
                subclass: b[11] & 0xFE,
                vector: flags & Self::F_V != 0,
            },
            2 => OpClass::Branch {
                conditional: a,
                indirect: flags & Self::F_B != 0,
            },
            c => return Err(OpDecodeError::Class(c)),
        };
        Ok(SampledOp {
            pc: u64_at(0),
            el,
            ns: flags & Self::F_NS != 0,
            nse: flags & Self::F_NSE != 0,
            class,
            data_va: u64_at(16),
            data_pa: u64_at(24),
            data_pa_valid: flags & Self::F_PA_VALID != 0,
            no_data_address: flags & Self::F_NO_VA != 0,
            size: b[12],
            target: u64_at(32),
            events: u64_at(40),
            total_latency: u32_at(48),
            issue_latency: u32_at(52),
            translation_latency: u32_at(56),
            contextidr_el1: u32_at(60),
            contextidr_el2: u32_at(64),
            physical_count: u64_at(72),
            // An unknown kind is no result: a newer front end's.
            reuse: match b[13] {
                Self::REUSE_AFTER => Reuse::After(u32_at(80)),
                Self::REUSE_NOT_WITHIN => Reuse::NotWithin(u32_at(80)),
                _ => Reuse::None,
            },
            reuse_pc: u64_at(88),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn arb_class() -> impl Strategy<Value = OpClass> {
        prop_oneof![
            (any::<bool>(), 0u8..0x80).prop_map(|(cond_select, s)| OpClass::Other {
                cond_select,
                subclass: s << 1
            }),
            (any::<bool>(), 0u8..0x80, any::<bool>()).prop_map(|(store, s, vector)| {
                OpClass::LoadStore {
                    store,
                    subclass: s << 1,
                    vector,
                }
            }),
            (any::<bool>(), any::<bool>()).prop_map(|(conditional, indirect)| {
                OpClass::Branch {
                    conditional,
                    indirect,
                }
            }),
        ]
    }

    prop_compose! {
        fn arb_op()(pc in any::<u64>(), el in 0u8..4, ns in any::<bool>(), nse in any::<bool>(),
            class in arb_class(), data_va in any::<u64>(), data_pa in any::<u64>(),
            data_pa_valid in any::<bool>(), no_data_address in any::<bool>(),
            size in any::<u8>(), target in any::<u64>(),
            events in any::<u64>(), lat in any::<[u32; 3]>(), ctx in any::<[u32; 2]>(),
            physical_count in any::<u64>(),
            reuse in prop_oneof![
                Just(Reuse::None),
                any::<u32>().prop_map(Reuse::After),
                any::<u32>().prop_map(Reuse::NotWithin),
            ], reuse_pc in any::<u64>()) -> SampledOp {
            SampledOp { pc, el: El::from_u8(el).unwrap(), ns, nse, class, data_va, data_pa,
                data_pa_valid, no_data_address, size, target, events, total_latency: lat[0],
                issue_latency: lat[1], translation_latency: lat[2],
                contextidr_el1: ctx[0], contextidr_el2: ctx[1], physical_count,
                reuse, reuse_pc }
        }
    }

    proptest! {
        #[test]
        fn round_trip(op in arb_op()) {
            prop_assert_eq!(SampledOp::from_bytes(&op.to_bytes()), Ok(op));
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..100)) {
            let _ = SampledOp::from_bytes(&bytes);
        }
    }

    #[test]
    fn rejects_bad_fields() {
        let mut b = SampledOp::default().to_bytes();
        b[8] = 4;
        assert_eq!(SampledOp::from_bytes(&b), Err(OpDecodeError::El(4)));
        b[8] = 1;
        b[10] = 3;
        assert_eq!(SampledOp::from_bytes(&b), Err(OpDecodeError::Class(3)));
        assert_eq!(
            SampledOp::from_bytes(&b[..10]),
            Err(OpDecodeError::Length(10))
        );
    }
}
