//! SPE sample-record packets: encoder, decoder and perf-style text.
//!
//! Layout follows Arm ARM D18.2 and matches what Linux perf
//! (`tools/perf/util/arm-spe-decoder`) decodes. Multi-byte payloads are
//! little-endian.

use core::fmt;

/// Longest packet: extended header (2 bytes) + 8-byte address payload.
pub const MAX_PACKET_LEN: usize = 10;

const HDR_PAD: u8 = 0x00;
const HDR_END: u8 = 0x01;
const HDR_TIMESTAMP: u8 = 0x71;
const HDR_EVENTS: u8 = 0x42;
const HDR_DATA_SOURCE: u8 = 0x43;
/// Mask selecting the fixed bits of the Events / Data-source headers (size in 5:4 is free).
const HDR_SIZED_MASK: u8 = 0xCF;
const HDR_CONTEXT: u8 = 0x64;
const HDR_OP_TYPE: u8 = 0x48;
const HDR_EXTENDED: u8 = 0x20;
const HDR_ADDRESS: u8 = 0xB0;
const HDR_COUNTER: u8 = 0x98;
const ADDR_BYTES_0_6: u64 = (1 << 56) - 1;

/// Payload size of a sized packet, header bits [5:4].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PayloadLen {
    B1,
    B2,
    B4,
    B8,
}

impl PayloadLen {
    /// Payload size in bytes.
    pub const fn bytes(self) -> usize {
        match self {
            PayloadLen::B1 => 1,
            PayloadLen::B2 => 2,
            PayloadLen::B4 => 4,
            PayloadLen::B8 => 8,
        }
    }

    /// The two-bit size field (0..=3).
    pub const fn size_field(self) -> u8 {
        match self {
            PayloadLen::B1 => 0,
            PayloadLen::B2 => 1,
            PayloadLen::B4 => 2,
            PayloadLen::B8 => 3,
        }
    }

    /// Size encoded in bits [5:4] of a header byte.
    pub const fn from_header(hdr: u8) -> Self {
        match (hdr >> 4) & 3 {
            0 => PayloadLen::B1,
            1 => PayloadLen::B2,
            2 => PayloadLen::B4,
            _ => PayloadLen::B8,
        }
    }

    /// Smallest size that holds `v` without loss.
    pub const fn fitting(v: u64) -> Self {
        if v <= 0xFF {
            PayloadLen::B1
        } else if v <= 0xFFFF {
            PayloadLen::B2
        } else if v <= 0xFFFF_FFFF {
            PayloadLen::B4
        } else {
            PayloadLen::B8
        }
    }

    /// Mask of the payload bits that survive encoding at this size.
    pub const fn mask(self) -> u64 {
        match self {
            PayloadLen::B8 => u64::MAX,
            l => (1u64 << (8 * l.bytes())) - 1,
        }
    }
}

/// Address packet index (5 bits). Indices above 7 need the extended header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddressIndex {
    Pc,
    BranchTarget,
    DataVirtual,
    DataPhysical,
    PrevBranchTarget,
    /// Any other index (5..=31). Values 0..=4 are normalised by [`AddressIndex::from_raw`];
    /// the encoder keeps only the low 5 bits.
    Other(u8),
}

impl AddressIndex {
    /// Canonical variant for a raw 5-bit index.
    pub const fn from_raw(idx: u8) -> Self {
        match idx & 0x1F {
            0 => AddressIndex::Pc,
            1 => AddressIndex::BranchTarget,
            2 => AddressIndex::DataVirtual,
            3 => AddressIndex::DataPhysical,
            4 => AddressIndex::PrevBranchTarget,
            n => AddressIndex::Other(n),
        }
    }

    /// Raw 5-bit index.
    pub const fn raw(self) -> u8 {
        match self {
            AddressIndex::Pc => 0,
            AddressIndex::BranchTarget => 1,
            AddressIndex::DataVirtual => 2,
            AddressIndex::DataPhysical => 3,
            AddressIndex::PrevBranchTarget => 4,
            AddressIndex::Other(n) => n & 0x1F,
        }
    }
}

/// Counter packet index (5 bits). Indices above 7 need the extended header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CounterIndex {
    /// 0x98
    TotalLatency,
    /// 0x99
    IssueLatency,
    /// 0x9A
    TranslationLatency,
    /// 0x9C (index 4)
    AltClockIssue,
    /// Any other index; normalised by [`CounterIndex::from_raw`], low 5 bits encoded.
    Other(u8),
}

impl CounterIndex {
    /// Canonical variant for a raw 5-bit index.
    pub const fn from_raw(idx: u8) -> Self {
        match idx & 0x1F {
            0 => CounterIndex::TotalLatency,
            1 => CounterIndex::IssueLatency,
            2 => CounterIndex::TranslationLatency,
            4 => CounterIndex::AltClockIssue,
            n => CounterIndex::Other(n),
        }
    }

    /// Raw 5-bit index.
    pub const fn raw(self) -> u8 {
        match self {
            CounterIndex::TotalLatency => 0,
            CounterIndex::IssueLatency => 1,
            CounterIndex::TranslationLatency => 2,
            CounterIndex::AltClockIssue => 4,
            CounterIndex::Other(n) => n & 0x1F,
        }
    }
}

/// Operation-type packet: the header class selects the variant, the byte is the payload.
/// See [`op`] for payload bits.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OpType {
    /// Header 0x48.
    Other(u8),
    /// Header 0x49 (load, store, atomic).
    LoadStore(u8),
    /// Header 0x4A (branch or exception return).
    Branch(u8),
}

/// One SPE packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Packet {
    /// 0x00
    Padding,
    /// 0x01
    End,
    /// 0x71, 8-byte generic-timer count.
    Timestamp(u64),
    /// 0b01SS0010; bits above `len` are dropped when encoding.
    Events {
        len: PayloadLen,
        bits: u64,
    },
    /// 0b01SS0011; bits above `len` are dropped when encoding.
    DataSource {
        len: PayloadLen,
        value: u64,
    },
    /// 0x64 (CONTEXTIDR_EL1) / 0x65 (CONTEXTIDR_EL2).
    Context {
        el2: bool,
        id: u32,
    },
    OpType(OpType),
    /// 0xB0|idx, or 0x20|idx[4:3], 0xB0|idx[2:0]; 8-byte payload.
    Address {
        index: AddressIndex,
        payload: u64,
    },
    /// 0x98|idx, or extended form; 2-byte payload.
    Counter {
        index: CounterIndex,
        value: u16,
    },
}

/// Payload of a PC / branch-target / previous-branch-target address packet:
/// `addr[55:0]`, NS bit 63, EL bits 62:61, NSE bit 60.
#[inline]
pub const fn address_payload(addr: u64, el: u8, ns: bool, nse: bool) -> u64 {
    (addr & ADDR_BYTES_0_6) | ((ns as u64) << 63) | (((el & 3) as u64) << 61) | ((nse as u64) << 60)
}

/// Payload of a data physical-address packet: `pa[55:0]`, NS bit 63, CH bit 62,
/// NSE bit 60, PAT bits 59:56.
#[inline]
pub const fn data_pa_payload(pa: u64, ns: bool, nse: bool, ch: bool, pat: u8) -> u64 {
    (pa & ADDR_BYTES_0_6)
        | ((ns as u64) << 63)
        | ((ch as u64) << 62)
        | ((nse as u64) << 60)
        | (((pat & 0xF) as u64) << 56)
}

/// Events packet payload bits.
pub mod events {
    pub const EXCEPTION_GEN: u64 = 1 << 0;
    pub const RETIRED: u64 = 1 << 1;
    pub const L1D_ACCESS: u64 = 1 << 2;
    pub const L1D_REFILL: u64 = 1 << 3;
    pub const TLB_ACCESS: u64 = 1 << 4;
    pub const TLB_WALK: u64 = 1 << 5;
    pub const NOT_TAKEN: u64 = 1 << 6;
    pub const MISPRED: u64 = 1 << 7;
    pub const LLC_ACCESS: u64 = 1 << 8;
    pub const LLC_MISS: u64 = 1 << 9;
    pub const REMOTE_ACCESS: u64 = 1 << 10;
    pub const MISALIGNED: u64 = 1 << 11;
    pub const TRANSACTIONAL: u64 = 1 << 16;
    pub const PARTIAL_PREDICATE: u64 = 1 << 17;
    pub const EMPTY_PREDICATE: u64 = 1 << 18;
    pub const L2D_ACCESS: u64 = 1 << 19;
    pub const L2D_MISS: u64 = 1 << 20;
    pub const CACHE_DATA_MODIFIED: u64 = 1 << 21;
    pub const RECENTLY_FETCHED: u64 = 1 << 22;
    pub const DATA_SNOOPED: u64 = 1 << 23;
    pub const STREAMING_SVE: u64 = 1 << 24;
    pub const SMCU: u64 = 1 << 25;
    /// IMPLEMENTATION DEFINED bits 15:12 and 63:48.
    pub const IMPDEF_MASK: u64 = 0xF000 | (0xFFFF << 48);
}

/// Operation-type payload bits, as perf reads them (the subclass is compared
/// in place, i.e. `payload & LDST_SUBCLASS_MASK == LDST_SIMD_FP`, not shifted).
pub mod op {
    // Load/store/atomic (header 0x49).
    /// Bit 0: store (else load).
    pub const LDST_STORE: u8 = 1 << 0;
    /// Bits 7:1: subclass, compared unshifted.
    pub const LDST_SUBCLASS_MASK: u8 = 0xFE;
    pub const LDST_GP: u8 = 0x00;
    pub const LDST_SIMD_FP: u8 = 0x04;
    pub const LDST_UNSPEC: u8 = 0x10;
    pub const LDST_NV_SYSREG: u8 = 0x30;
    pub const LDST_MTE_TAG: u8 = 0x14;
    pub const LDST_MEMCPY: u8 = 0x20;
    /// Compared against the whole byte (bit 0 included).
    pub const LDST_MEMSET: u8 = 0x25;
    /// Atomic / exclusive / acquire-release form: `(v & LDST_EXT_MASK) == LDST_EXT`.
    pub const LDST_EXT_MASK: u8 = 0xE2;
    pub const LDST_EXT: u8 = 0x02;
    pub const LDST_AT: u8 = 1 << 2;
    pub const LDST_EXCL: u8 = 1 << 3;
    pub const LDST_AR: u8 = 1 << 4;
    /// SVE/SME register form: `(v & LDST_SVE_MASK) == LDST_SVE`.
    pub const LDST_SVE_MASK: u8 = 0x0A;
    pub const LDST_SVE: u8 = 0x08;
    pub const LDST_SVE_PRED: u8 = 1 << 2;
    pub const LDST_SVE_SG: u8 = 1 << 7;
    /// GCS form: `(v & LDST_GCS_MASK) == LDST_GCS`.
    pub const LDST_GCS_MASK: u8 = 0xFA;
    pub const LDST_GCS: u8 = 0x40;
    pub const LDST_GCS_COMM: u8 = 1 << 2;

    // Branch (header 0x4A).
    pub const BRANCH_COND: u8 = 1 << 0;
    pub const BRANCH_IND: u8 = 1 << 1;
    pub const BRANCH_GCS: u8 = 1 << 2;
    /// Call-return field, bits 4:3.
    pub const BRANCH_CR_MASK: u8 = 3 << 3;
    pub const BRANCH_CR_BL: u8 = 1 << 3;
    pub const BRANCH_CR_RET: u8 = 2 << 3;
    pub const BRANCH_CR_NON_BL_RET: u8 = 3 << 3;

    // Other (header 0x48).
    pub const OTHER_COND_SELECT: u8 = 1 << 0;
    pub const OTHER_FP: u8 = 1 << 1;
    pub const OTHER_ASE: u8 = 1 << 2;
    /// Plain "other" form: `(v & OTHER_OTHER_MASK) == 0`.
    pub const OTHER_OTHER_MASK: u8 = 0xF8;
    /// SVE / SME forms: `(v & OTHER_SVE_SME_MASK) == OTHER_SVE` or `OTHER_SME`.
    pub const OTHER_SVE_SME_MASK: u8 = 0x89;
    pub const OTHER_SVE: u8 = 0x08;
    pub const OTHER_SME: u8 = 0x88;
    pub const OTHER_SVE_PRED: u8 = 1 << 2;

    /// SVE effective vector length field (bits 6:4) for `evl_bits` = 32 << n.
    pub const fn sve_evl(evl_bits: u32) -> u8 {
        let n = (evl_bits / 32).trailing_zeros();
        ((n as u8) & 7) << 4
    }
}

impl Packet {
    /// Appends the encoded packet to `out`.
    #[inline]
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut buf = [0u8; MAX_PACKET_LEN];
        let n = self.encode_to_array(&mut buf);
        out.extend_from_slice(&buf[..n]);
    }

    /// Encodes into a fixed buffer and returns the length; for callers writing
    /// straight into guest memory.
    #[inline]
    pub fn encode_to_array(&self, buf: &mut [u8; MAX_PACKET_LEN]) -> usize {
        // Writes the header(s) then a full 8-byte LE word; the returned length
        // cuts it to the real payload size, which keeps this branch-light.
        let (hdr_len, payload, payload_len) = match *self {
            Packet::Padding => {
                buf[0] = HDR_PAD;
                return 1;
            }
            Packet::End => {
                buf[0] = HDR_END;
                return 1;
            }
            Packet::Timestamp(ts) => {
                buf[0] = HDR_TIMESTAMP;
                (1, ts, 8)
            }
            Packet::Events { len, bits } => {
                buf[0] = HDR_EVENTS | (len.size_field() << 4);
                (1, bits, len.bytes())
            }
            Packet::DataSource { len, value } => {
                buf[0] = HDR_DATA_SOURCE | (len.size_field() << 4);
                (1, value, len.bytes())
            }
            Packet::Context { el2, id } => {
                buf[0] = HDR_CONTEXT | el2 as u8;
                (1, id as u64, 4)
            }
            Packet::OpType(op) => {
                let (class, v) = match op {
                    OpType::Other(v) => (0, v),
                    OpType::LoadStore(v) => (1, v),
                    OpType::Branch(v) => (2, v),
                };
                buf[0] = HDR_OP_TYPE | class;
                (1, v as u64, 1)
            }
            Packet::Address { index, payload } => {
                (Self::put_indexed(buf, HDR_ADDRESS, index.raw()), payload, 8)
            }
            Packet::Counter { index, value } => (
                Self::put_indexed(buf, HDR_COUNTER, index.raw()),
                value as u64,
                2,
            ),
        };
        buf[hdr_len..hdr_len + 8].copy_from_slice(&payload.to_le_bytes());
        hdr_len + payload_len
    }

    /// Writes a short or extended address/counter header; returns its length.
    #[inline]
    fn put_indexed(buf: &mut [u8; MAX_PACKET_LEN], base: u8, idx: u8) -> usize {
        if idx < 8 {
            buf[0] = base | idx;
            1
        } else {
            buf[0] = HDR_EXTENDED | ((idx >> 3) & 3);
            buf[1] = base | (idx & 7);
            2
        }
    }

    /// Number of bytes [`Packet::encode`] appends.
    #[inline]
    pub fn encoded_len(&self) -> usize {
        match *self {
            Packet::Padding | Packet::End => 1,
            Packet::Timestamp(_) => 9,
            Packet::Events { len, .. } | Packet::DataSource { len, .. } => 1 + len.bytes(),
            Packet::Context { .. } => 5,
            Packet::OpType(_) => 2,
            Packet::Address { index, .. } => 8 + if index.raw() < 8 { 1 } else { 2 },
            Packet::Counter { index, .. } => 2 + if index.raw() < 8 { 1 } else { 2 },
        }
    }
}
