//! The shared ring (SET_RING's memfd), all little-endian:
//!
//! ```text
//! 0                 RingHeader (64 bytes): magic "SPER", version, num_vcpus,
//!                   slots, slot_size, irq_offset, ring_offset
//! irq_offset        per vCPU, 64 bytes (IRQ entry, the backend writes):
//!                   +0 level u32, +4 reserved u32, +8 pmbsr u64,
//!                   +16 seq u64 (bumped after each PMBIRQ change),
//!                   +24 state_seq u64, +32 sampling state (16 bytes,
//!                   [`ring::SamplingState`]), +48 reserved
//! ring_offset       per vCPU: producer index u64 at +0 and ops_counted
//!                   u64 at +8 (QEMU writes), consumer index u64 at +64
//!                   (backend writes), then `slots` slots of SLOT_SIZE
//!                   bytes at +128
//! ```
//!
//! Each vCPU's ring has one producer (that vCPU's thread) and one consumer
//! (the backend): the producer writes slot `head % slots` then stores
//! `head + 1` with release ordering; the consumer reads slots up to the
//! producer index it loaded with acquire ordering, then stores the new
//! consumer index. A full ring (head - tail == slots) means the producer
//! sends SYNC and retries. Writing the doorbell eventfd wakes the backend;
//! SYNC and SYSREG also drain.
//!
//! QEMU writes the header ([`ring::Layout::header`](Layout::header)) into the memfd (which
//! is otherwise zero) before SET_RING; the backend refuses a ring whose
//! header differs with [`Status::BAD_RESOURCE`](super::Status::BAD_RESOURCE), so both sides agree on the
//! layout. Every per-vCPU request drains that vCPU's ring before it takes
//! effect (operations published before a register access happened before
//! it); ALL_VCPUS requests and SET_MEM_TABLE/SET_RING drain every ring.
//!
//! # Sampling state and counted operations
//!
//! With [`feature::SAMPLING_STATE`](super::feature::SAMPLING_STATE), the backend also publishes in each IRQ
//! entry what a sampled-operation source in QEMU needs to count operations
//! itself (so that its translator can emit no counting code at all where
//! sampling is off): [`ring::SamplingState`](SamplingState), the ELs at which
//! `StatisticalProfilingEnabled()` holds in the PE's current Security
//! state, PMSIRR's interval and RND, and PMSICR's COUNT and ECOUNT. It is
//! rewritten after every request and every drain in which it changed, as
//! a seqlock: `state_seq` is made odd, the 16 bytes are written, then
//! `state_seq` is made even with release ordering. A reader loads
//! `state_seq` (acquire), retries while it is odd, copies the 16 bytes,
//! and retries if `state_seq` changed meanwhile. The backend signals the
//! IRQ eventfd when `enabled_els` changed other than in the reply to that
//! vCPU's own request (a buffer filling in a doorbell drain stops
//! profiling), as it does for PMBIRQ; `seq` is not bumped for it, so a
//! reader that only knows PMBIRQ sees nothing new.
//!
//! QEMU hands back what it counted through `ops_counted`: the total number
//! of operations its interval counter has counted on that vCPU (every
//! operation executed where sampling was enabled, selected or not), a
//! wrapping u64 stored with release ordering before the producer index
//! and before any request for that vCPU. Each drain applies the operations
//! counted since the previous one to PMSICR as that many
//! `SPEToCollectSample()` calls would (their selections are the slots
//! QEMU published), so a PMSICR read or a context switch sees the count
//! the guest's execution left. After the reply to each of its requests for
//! a vCPU, QEMU reloads its counter from `pmsicr_count`: it has handed
//! back everything it counted before the request, and the request may
//! have written PMSICR. It must not reload on an asynchronous change,
//! which would count again what it counted since its last hand-back.
//! With `ops_counted` QEMU may also store `count_now` (before it):
//! `COUNT_NOW_VALID` with, in bits 31:0, the operations until its
//! counter selects the next one, which is what PMSICR_EL1.COUNT holds then.
//! In the drain for one of a vCPU's own requests (QEMU is waiting for the
//! reply, so the two fields agree) the backend sets PMSICR.COUNT to it
//! after applying `ops_counted`: with RND the two sides draw different
//! random reload bytes, and a driver that saves PMSICR across a context
//! switch must get back the count QEMU stopped at.
//! A cumulative field in shared memory rather than a message: it costs no
//! round trip, cannot be lost or reordered against the slots, and a QEMU
//! that never writes it leaves it zero, which the backend reads as
//! nothing counted.

use crate::op::SampledOp;

pub const MAGIC: u32 = 0x5245_5053; // "SPER"
pub const HEADER_SIZE: usize = 64;
pub const IRQ_ENTRY_SIZE: usize = 64;
pub const CONTROL_SIZE: usize = 128;
pub const PRODUCER_OFFSET: usize = 0;
/// Operations QEMU's interval counter counted (u64, QEMU writes).
pub const OPS_COUNTED_OFFSET: usize = 8;
/// QEMU's interval counter at the last `ops_counted` (u64, QEMU
/// writes): [`COUNT_NOW_VALID`] | count, or 0 if not provided.
pub const COUNT_NOW_OFFSET: usize = 16;
pub const COUNT_NOW_VALID: u64 = 1 << 63;
pub const CONSUMER_OFFSET: usize = 64;
/// Offsets in an IRQ entry.
pub const IRQ_LEVEL: usize = 0;
pub const IRQ_PMBSR: usize = 8;
pub const IRQ_SEQ: usize = 16;
pub const IRQ_STATE_SEQ: usize = 24;
pub const IRQ_STATE: usize = 32;
/// A [`SampledOp`] padded to a multiple of 8.
pub const SLOT_SIZE: usize = 96;
const _: () = assert!(SampledOp::WIRE_SIZE <= SLOT_SIZE);
/// About 11 ms of samples at 1.4 M/s (interval 256 under TCG): enough
/// for a backend thread that waits for a CPU on a busy host. 1.5 MiB
/// per vCPU.
pub const DEFAULT_SLOTS: u32 = 16384;

/// Bits of [`SamplingState::flags`].
pub mod flags {
    /// PMSIRR_EL1.RND.
    pub const RND: u8 = 1 << 0;
    /// RND with FEAT_SPE_ERnd: COUNT reloads without a random low
    /// byte, and a selection is delayed by a random ECOUNT instead.
    pub const ERND: u8 = 1 << 1;
    /// The counter counts micro-operations: each reload spans a
    /// pseudo-random number of instructions fewer, from none to an
    /// eighth of the period (the backend's `operations` choice).
    pub const UOPS: u8 = 1 << 2;
    /// The backend is deterministic: hand each batch of samples over
    /// with a SYNC (and wait for it) instead of the doorbell, so that
    /// records and PMBIRQ changes happen at the same guest instruction
    /// in every run.
    pub const SYNC: u8 = 1 << 3;
}

/// What a sampled-operation source needs to count one vCPU's
/// operations itself, 16 bytes at [`IRQ_STATE`]: interval u32,
/// pmsicr_count u32, enabled_els u8, flags u8, pmsicr_ecount u8,
/// reserved[5].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SamplingState {
    /// PMSIRR_EL1.INTERVAL << 8: the operations COUNT reloads to.
    pub interval: u32,
    /// PMSICR_EL1.COUNT.
    pub pmsicr_count: u32,
    /// Bit n set: `StatisticalProfilingEnabled(ELn)` holds in the PE's
    /// current Security state (bit 3 is never set).
    pub enabled_els: u8,
    /// [`flags`].
    pub flags: u8,
    /// PMSICR_EL1.ECOUNT.
    pub pmsicr_ecount: u8,
}

impl SamplingState {
    pub const SIZE: usize = 16;

    /// Whether operations at `el` (0-3) are counted.
    pub fn enabled_at(&self, el: u8) -> bool {
        el < 8 && self.enabled_els >> el & 1 != 0
    }

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..4].copy_from_slice(&self.interval.to_le_bytes());
        b[4..8].copy_from_slice(&self.pmsicr_count.to_le_bytes());
        b[8] = self.enabled_els;
        b[9] = self.flags;
        b[10] = self.pmsicr_ecount;
        b
    }

    /// Any 16 bytes parse: the reserved bytes are ignored.
    pub fn from_bytes(b: &[u8; Self::SIZE]) -> SamplingState {
        SamplingState {
            interval: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            pmsicr_count: u32::from_le_bytes([b[4], b[5], b[6], b[7]]),
            enabled_els: b[8],
            flags: b[9],
            pmsicr_ecount: b[10],
        }
    }
}

const _: () = assert!(IRQ_STATE + SamplingState::SIZE <= IRQ_ENTRY_SIZE);

/// Where each part of a ring of `vcpus` × `slots` lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub vcpus: u32,
    pub slots: u32,
}

impl Layout {
    pub fn irq_offset(&self) -> usize {
        HEADER_SIZE
    }
    pub fn irq_entry(&self, vcpu: u32) -> usize {
        self.irq_offset() + vcpu as usize * IRQ_ENTRY_SIZE
    }
    pub fn ring_offset(&self) -> usize {
        self.irq_offset() + self.vcpus as usize * IRQ_ENTRY_SIZE
    }
    pub fn ring_stride(&self) -> usize {
        CONTROL_SIZE + self.slots as usize * SLOT_SIZE
    }
    pub fn ring(&self, vcpu: u32) -> usize {
        self.ring_offset() + vcpu as usize * self.ring_stride()
    }
    pub fn slot(&self, vcpu: u32, index: u64) -> usize {
        self.ring(vcpu) + CONTROL_SIZE + (index % u64::from(self.slots)) as usize * SLOT_SIZE
    }
    pub fn size(&self) -> usize {
        self.ring_offset() + self.vcpus as usize * self.ring_stride()
    }
    /// The 64-byte header at offset 0.
    pub fn header(&self) -> [u8; HEADER_SIZE] {
        let mut b = [0u8; HEADER_SIZE];
        for (i, v) in [
            MAGIC,
            super::VERSION,
            self.vcpus,
            self.slots,
            SLOT_SIZE as u32,
            self.irq_offset() as u32,
            self.ring_offset() as u32,
        ]
        .into_iter()
        .enumerate()
        {
            b[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        b
    }
}
