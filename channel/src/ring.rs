//! The shared sampled-operation ring of the QEMU channel
//! ([`spe_protocol::channel::ring`]): the backend's consumer side, the IRQ
//! area it publishes PMBIRQ levels and sampling state in, and a producer
//! (QEMU's side: the TCG plugin's, and tests' and benchmarks').
//!
//! The memory is shared with another process that may write anything at
//! any time, so every index read from it is checked and every slot is
//! copied out before it is parsed, as guest memory is.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use spe_protocol::channel::ring::{
    Layout, SamplingState, CONSUMER_OFFSET, COUNT_NOW_OFFSET, COUNT_NOW_VALID, HEADER_SIZE,
    IRQ_ENTRY_SIZE, IRQ_LEVEL, IRQ_PMBSR, IRQ_SEQ, IRQ_STATE, IRQ_STATE_SEQ, OPS_COUNTED_OFFSET,
    PRODUCER_OFFSET, SLOT_SIZE,
};
use spe_protocol::op::{OpDecodeError, SampledOp};

/// A ring that cannot be used.
#[derive(Debug)]
pub enum RingError {
    /// The file is smaller than the layout.
    TooSmall {
        file: u64,
        need: usize,
    },
    /// The header at offset 0 is not [`Layout::header`].
    BadHeader,
    /// The producer index is more than `slots` ahead of the consumer's.
    Corrupt {
        vcpu: u32,
        head: u64,
        tail: u64,
    },
    Io(io::Error),
}

impl std::fmt::Display for RingError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RingError::TooSmall { file, need } => {
                write!(f, "ring memory is {file} bytes, the layout needs {need}")
            }
            RingError::BadHeader => write!(f, "ring header does not match the layout"),
            RingError::Corrupt { vcpu, head, tail } => write!(
                f,
                "vCPU {vcpu} ring corrupt: producer {head}, consumer {tail}"
            ),
            RingError::Io(e) => write!(f, "ring mapping: {e}"),
        }
    }
}

impl std::error::Error for RingError {}

impl From<io::Error> for RingError {
    fn from(e: io::Error) -> Self {
        RingError::Io(e)
    }
}

/// A shared, read-write mapping of a whole ring file.
#[derive(Debug)]
struct Mapping {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; all access to it goes
// through atomics or byte copies, never through references to its bytes.
unsafe impl Send for Mapping {}
// SAFETY: as above.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(file: &File, len: usize) -> Result<Mapping, RingError> {
        let size = file.metadata()?.len();
        if size < len as u64 || len == 0 {
            // Touching a shared mapping past the end of its file is SIGBUS.
            return Err(RingError::TooSmall {
                file: size,
                need: len,
            });
        }
        // SAFETY: a fresh mapping of a file we hold; the result is checked.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error().into());
        }
        Ok(Mapping {
            ptr: ptr.cast(),
            len,
        })
    }

    /// The u64 at `off` (8-aligned and inside the mapping: the layout's
    /// offsets are, and the mapping is page-aligned).
    fn u64_at(&self, off: usize) -> &AtomicU64 {
        assert!(off & 7 == 0 && off + 8 <= self.len);
        // SAFETY: in bounds and aligned (checked above); AtomicU64 has the
        // layout of u64 and the memory lives as long as `self`.
        unsafe { &*self.ptr.add(off).cast::<AtomicU64>() }
    }

    fn u32_at(&self, off: usize) -> &AtomicU32 {
        assert!(off & 3 == 0 && off + 4 <= self.len);
        // SAFETY: as for `u64_at`.
        unsafe { &*self.ptr.add(off).cast::<AtomicU32>() }
    }

    fn read(&self, off: usize, out: &mut [u8]) {
        assert!(off + out.len() <= self.len);
        // SAFETY: in bounds; a byte copy out of shared memory, which the
        // other side may be writing (a misbehaving producer only garbles
        // the copy, which is parsed as untrusted bytes).
        unsafe { std::ptr::copy_nonoverlapping(self.ptr.add(off), out.as_mut_ptr(), out.len()) }
    }

    fn write(&self, off: usize, data: &[u8]) {
        assert!(off + data.len() <= self.len);
        // SAFETY: in bounds; see `read`.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.ptr.add(off), data.len()) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly what `new` mapped.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// Creates an anonymous memory file of `size` bytes (zeroed).
pub fn memfd(name: &str, size: u64) -> io::Result<File> {
    let cname = std::ffi::CString::new(name).map_err(io::Error::other)?;
    // SAFETY: a valid C string; the result is checked and then owned.
    let fd = unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nobody else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(size)?;
    Ok(file)
}

/// One PMBIRQ entry of the IRQ area.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IrqEntry {
    pub level: bool,
    pub pmbsr: u64,
    pub seq: u64,
}

/// The backend's view of the ring: consumer of every vCPU's ring, writer
/// of the IRQ area.
#[derive(Debug)]
pub struct Consumer {
    map: Mapping,
    layout: Layout,
    /// Our consumer indices; the shared copies are only ever written.
    tails: Vec<u64>,
    seqs: Vec<u64>,
    state_seqs: Vec<u64>,
    /// `ops_counted` as last taken, per vCPU.
    counted: Vec<u64>,
}

/// The u64 at `offset` of every vCPU's ring control block.
fn ring_words(map: &Mapping, layout: Layout, offset: usize, order: Ordering) -> Vec<u64> {
    (0..layout.vcpus)
        .map(|v| map.u64_at(layout.ring(v) + offset).load(order))
        .collect()
}

impl Consumer {
    /// Maps `file` and checks it holds the header of `layout` (which the
    /// producer writes before handing the ring over).
    pub fn new(file: &File, layout: Layout) -> Result<Consumer, RingError> {
        let map = Mapping::new(file, layout.size())?;
        let mut header = [0u8; HEADER_SIZE];
        map.read(0, &mut header);
        if header != layout.header() {
            return Err(RingError::BadHeader);
        }
        let tails = ring_words(&map, layout, CONSUMER_OFFSET, Ordering::Acquire);
        let load = |off: usize| -> Vec<u64> {
            (0..layout.vcpus)
                .map(|v| {
                    map.u64_at(off + layout.irq_entry(v))
                        .load(Ordering::Relaxed)
                })
                .collect()
        };
        let seqs = load(IRQ_SEQ);
        // Rounded up to even: a writer that died mid-update left it odd.
        let state_seqs = load(IRQ_STATE_SEQ)
            .into_iter()
            .map(|s| s.wrapping_add(s & 1))
            .collect();
        // What a previous session counted was applied by it, not by us.
        let counted = ring_words(&map, layout, OPS_COUNTED_OFFSET, Ordering::Acquire);
        Ok(Consumer {
            map,
            layout,
            tails,
            seqs,
            state_seqs,
            counted,
        })
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// Operations published to `vcpu`'s ring and not yet consumed.
    pub fn pending(&self, vcpu: u32) -> u64 {
        let head = self
            .map
            .u64_at(self.layout.ring(vcpu) + PRODUCER_OFFSET)
            .load(Ordering::Acquire);
        head.wrapping_sub(self.tails[vcpu as usize])
    }

    /// Consumes everything published to `vcpu`'s ring, in order, passing
    /// each slot's parse to `f`. Returns the number of slots consumed. A
    /// producer index that is impossible (more than `slots` ahead) is an
    /// error and nothing is consumed: the other side is broken.
    pub fn drain(
        &mut self,
        vcpu: u32,
        mut f: impl FnMut(Result<SampledOp, OpDecodeError>),
    ) -> Result<u64, RingError> {
        let l = self.layout;
        let base = l.ring(vcpu);
        let tail = self.tails[vcpu as usize];
        let head = self
            .map
            .u64_at(base + PRODUCER_OFFSET)
            .load(Ordering::Acquire);
        let avail = head.wrapping_sub(tail);
        if avail > u64::from(l.slots) {
            return Err(RingError::Corrupt { vcpu, head, tail });
        }
        let mut slot = [0u8; SampledOp::WIRE_SIZE];
        for i in 0..avail {
            self.map.read(l.slot(vcpu, tail.wrapping_add(i)), &mut slot);
            f(SampledOp::from_bytes(&slot));
        }
        if avail > 0 {
            let new = tail.wrapping_add(avail);
            self.tails[vcpu as usize] = new;
            // Release: the slots are free for the producer only now.
            self.map
                .u64_at(base + CONSUMER_OFFSET)
                .store(new, Ordering::Release);
        }
        Ok(avail)
    }

    /// Operations QEMU counted on `vcpu` since the last call (its
    /// `ops_counted` is cumulative and wraps).
    pub fn take_counted(&mut self, vcpu: u32) -> u64 {
        let now = self
            .map
            .u64_at(self.layout.ring(vcpu) + OPS_COUNTED_OFFSET)
            .load(Ordering::Acquire);
        let n = now.wrapping_sub(self.counted[vcpu as usize]);
        self.counted[vcpu as usize] = now;
        n
    }

    /// QEMU's interval counter at its last `ops_counted`, if it gave it:
    /// the PMSICR_EL1.COUNT its execution left.
    pub fn count_now(&self, vcpu: u32) -> Option<u32> {
        let v = self
            .map
            .u64_at(self.layout.ring(vcpu) + COUNT_NOW_OFFSET)
            .load(Ordering::Acquire);
        (v & COUNT_NOW_VALID != 0).then_some(v as u32)
    }

    /// What `vcpu`'s IRQ entry holds: the PMBIRQ level and sampling state
    /// last published in it. A ring handed over again (QEMU reconnecting
    /// after a restart) holds the previous process's, which the next
    /// publish must compare against. Read without the seqlock: this
    /// process is its only writer, and the previous one is gone.
    pub fn published(&self, vcpu: u32) -> (bool, SamplingState) {
        let e = self.layout.irq_entry(vcpu);
        let level = self.map.u32_at(e + IRQ_LEVEL).load(Ordering::Relaxed) != 0;
        let a = self.map.u64_at(e + IRQ_STATE).load(Ordering::Relaxed);
        let b = self.map.u64_at(e + IRQ_STATE + 8).load(Ordering::Relaxed);
        (level, state_from_words(a, b))
    }

    /// Writes `vcpu`'s IRQ entry: level and PMBSR, then the bumped sequence
    /// number (release), so a reader that sees the new seq sees the rest.
    pub fn publish_irq(&mut self, vcpu: u32, level: bool, pmbsr: u64) {
        let e = self.layout.irq_entry(vcpu);
        self.map
            .u32_at(e + IRQ_LEVEL)
            .store(u32::from(level), Ordering::Relaxed);
        self.map
            .u64_at(e + IRQ_PMBSR)
            .store(pmbsr, Ordering::Relaxed);
        let seq = self.seqs[vcpu as usize].wrapping_add(1);
        self.seqs[vcpu as usize] = seq;
        self.map.u64_at(e + IRQ_SEQ).store(seq, Ordering::Release);
    }

    /// Writes `vcpu`'s sampling state under its seqlock: `state_seq` odd,
    /// the state, `state_seq` even again (release).
    pub fn publish_state(&mut self, vcpu: u32, state: &SamplingState) {
        let e = self.layout.irq_entry(vcpu);
        let seq = &self.map.u64_at(e + IRQ_STATE_SEQ);
        let s = self.state_seqs[vcpu as usize];
        seq.store(s.wrapping_add(1), Ordering::Relaxed);
        // The odd seq is visible before any byte of the new state.
        fence(Ordering::Release);
        let [a, b] = state_words(state);
        self.map.u64_at(e + IRQ_STATE).store(a, Ordering::Relaxed);
        self.map
            .u64_at(e + IRQ_STATE + 8)
            .store(b, Ordering::Relaxed);
        let s = s.wrapping_add(2);
        self.state_seqs[vcpu as usize] = s;
        seq.store(s, Ordering::Release);
    }
}

/// The state's 16 bytes as two u64 words (the fields are stored with
/// atomics, as the reader on the other side loads them).
fn state_words(state: &SamplingState) -> [u64; 2] {
    let b = state.to_bytes();
    let w = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
    [w(0), w(8)]
}

fn state_from_words(a: u64, b: u64) -> SamplingState {
    let mut bytes = [0u8; SamplingState::SIZE];
    bytes[..8].copy_from_slice(&a.to_le_bytes());
    bytes[8..].copy_from_slice(&b.to_le_bytes());
    SamplingState::from_bytes(&bytes)
}

/// QEMU's side of the ring: creates the memory, produces operations, reads
/// the IRQ area. Used by tests, benchmarks and the channel client.
#[derive(Debug)]
pub struct Producer {
    map: Mapping,
    layout: Layout,
    heads: Vec<u64>,
    counted: Vec<u64>,
}

impl Producer {
    /// Creates the ring memory for `layout` with its header written,
    /// sealed against resizing as QEMU's is.
    pub fn create(layout: Layout) -> io::Result<(File, Producer)> {
        let file = crate::shm::sealed_memfd("spe-ring", layout.size() as u64)?;
        let p = Producer::map(&file, layout).map_err(io::Error::other)?;
        p.map.write(0, &layout.header());
        Ok((file, p))
    }

    /// Maps an existing ring (its header is not checked).
    pub fn map(file: &File, layout: Layout) -> Result<Producer, RingError> {
        let map = Mapping::new(file, layout.size())?;
        let heads = ring_words(&map, layout, PRODUCER_OFFSET, Ordering::Acquire);
        let counted = ring_words(&map, layout, OPS_COUNTED_OFFSET, Ordering::Relaxed);
        Ok(Producer {
            map,
            layout,
            heads,
            counted,
        })
    }

    /// Free slots in `vcpu`'s ring.
    pub fn space(&self, vcpu: u32) -> u64 {
        let tail = self
            .map
            .u64_at(self.layout.ring(vcpu) + CONSUMER_OFFSET)
            .load(Ordering::Acquire);
        u64::from(self.layout.slots).saturating_sub(self.heads[vcpu as usize].wrapping_sub(tail))
    }

    /// Writes `ops` into free slots and publishes them with one index
    /// store. Returns how many fit.
    pub fn push(&mut self, vcpu: u32, ops: &[SampledOp]) -> usize {
        let n = (self.space(vcpu) as usize).min(ops.len());
        let head = self.heads[vcpu as usize];
        for (i, op) in ops[..n].iter().enumerate() {
            self.map.write(
                self.layout.slot(vcpu, head.wrapping_add(i as u64)),
                &op.to_bytes(),
            );
        }
        self.publish(vcpu, n as u64);
        n
    }

    /// Writes raw slot bytes (tests of malformed slots).
    pub fn push_raw(&mut self, vcpu: u32, slot: &[u8; SLOT_SIZE]) -> bool {
        if self.space(vcpu) == 0 {
            return false;
        }
        let head = self.heads[vcpu as usize];
        self.map.write(self.layout.slot(vcpu, head), slot);
        self.publish(vcpu, 1);
        true
    }

    /// Stores an arbitrary producer index (tests of a corrupt ring).
    pub fn set_head(&mut self, vcpu: u32, head: u64) {
        self.heads[vcpu as usize] = head;
        self.map
            .u64_at(self.layout.ring(vcpu) + PRODUCER_OFFSET)
            .store(head, Ordering::Release);
    }

    fn publish(&mut self, vcpu: u32, n: u64) {
        if n == 0 {
            return;
        }
        let head = self.heads[vcpu as usize].wrapping_add(n);
        self.set_head(vcpu, head);
    }

    /// Hands back `n` operations counted on `vcpu` (adds to its
    /// cumulative `ops_counted`, release).
    pub fn count(&mut self, vcpu: u32, n: u64) {
        let c = self.counted[vcpu as usize].wrapping_add(n);
        self.counted[vcpu as usize] = c;
        self.map
            .u64_at(self.layout.ring(vcpu) + OPS_COUNTED_OFFSET)
            .store(c, Ordering::Release);
    }

    /// Stores QEMU's interval counter as `count_now` (release).
    pub fn set_count_now(&mut self, vcpu: u32, count: u32) {
        self.map
            .u64_at(self.layout.ring(vcpu) + COUNT_NOW_OFFSET)
            .store(COUNT_NOW_VALID | u64::from(count), Ordering::Release);
    }

    /// `vcpu`'s IRQ entry, as QEMU's main loop reads it.
    pub fn irq(&self, vcpu: u32) -> IrqEntry {
        let e = self.layout.irq_entry(vcpu);
        let seq = self.map.u64_at(e + IRQ_SEQ).load(Ordering::Acquire);
        IrqEntry {
            level: self.map.u32_at(e + IRQ_LEVEL).load(Ordering::Relaxed) != 0,
            pmbsr: self.map.u64_at(e + IRQ_PMBSR).load(Ordering::Relaxed),
            seq,
        }
    }

    /// `vcpu`'s sampling state and its (even) `state_seq`, read under the
    /// seqlock as a vCPU thread would.
    pub fn sampling_state(&self, vcpu: u32) -> (u64, SamplingState) {
        let e = self.layout.irq_entry(vcpu);
        let seq = self.map.u64_at(e + IRQ_STATE_SEQ);
        loop {
            let s1 = seq.load(Ordering::Acquire);
            if s1 & 1 != 0 {
                std::hint::spin_loop();
                continue;
            }
            let a = self.map.u64_at(e + IRQ_STATE).load(Ordering::Relaxed);
            let b = self.map.u64_at(e + IRQ_STATE + 8).load(Ordering::Relaxed);
            // The state loads complete before seq is checked again.
            fence(Ordering::Acquire);
            if seq.load(Ordering::Relaxed) == s1 {
                return (s1, state_from_words(a, b));
            }
        }
    }
}

const _: () = assert!(IRQ_ENTRY_SIZE >= IRQ_STATE + SamplingState::SIZE);

#[cfg(test)]
mod tests {
    use super::*;
    use spe_protocol::regs::El;

    fn layout() -> Layout {
        Layout { vcpus: 2, slots: 8 }
    }

    #[test]
    fn produce_consume_wraps() {
        let (file, mut p) = Producer::create(layout()).unwrap();
        let mut c = Consumer::new(&file, layout()).unwrap();
        let mut seen = Vec::new();
        for round in 0..5u64 {
            let ops: Vec<_> = (0..6)
                .map(|i| SampledOp {
                    pc: round * 100 + i,
                    el: El::El1,
                    ..Default::default()
                })
                .collect();
            assert_eq!(p.push(1, &ops), 6);
            assert_eq!(p.space(1), 2);
            assert_eq!(c.pending(1), 6);
            assert_eq!(c.drain(0, |_| panic!("vCPU 0 is empty")).unwrap(), 0);
            c.drain(1, |op| seen.push(op.unwrap().pc)).unwrap();
            assert_eq!(p.space(1), 8);
        }
        let want: Vec<u64> = (0..5u64)
            .flat_map(|r| (0..6).map(move |i| r * 100 + i))
            .collect();
        assert_eq!(seen, want);
    }

    #[test]
    fn full_ring_refuses() {
        let (file, mut p) = Producer::create(layout()).unwrap();
        let mut c = Consumer::new(&file, layout()).unwrap();
        let ops = vec![SampledOp::default(); 20];
        assert_eq!(p.push(0, &ops), 8);
        assert_eq!(p.push(0, &ops), 0);
        assert_eq!(c.drain(0, |_| {}).unwrap(), 8);
        assert_eq!(p.push(0, &ops), 8);
    }

    #[test]
    fn corrupt_index_and_bad_slot_are_reported() {
        let (file, mut p) = Producer::create(layout()).unwrap();
        let mut c = Consumer::new(&file, layout()).unwrap();
        p.set_head(0, 9);
        assert!(matches!(
            c.drain(0, |_| {}),
            Err(RingError::Corrupt { head: 9, .. })
        ));
        p.set_head(0, 0);
        let mut bad = [0u8; SLOT_SIZE];
        bad[8] = 9; // EL 9
        assert!(p.push_raw(0, &bad));
        let mut errs = 0;
        c.drain(0, |op| errs += usize::from(op.is_err())).unwrap();
        assert_eq!(errs, 1);
    }

    #[test]
    fn header_and_size_are_checked() {
        let file = memfd("bad", layout().size() as u64).unwrap();
        assert!(matches!(
            Consumer::new(&file, layout()),
            Err(RingError::BadHeader)
        ));
        let small = memfd("small", 64).unwrap();
        assert!(matches!(
            Consumer::new(&small, layout()),
            Err(RingError::TooSmall { .. })
        ));
    }

    #[test]
    fn irq_entries() {
        let (file, p) = Producer::create(layout()).unwrap();
        let mut c = Consumer::new(&file, layout()).unwrap();
        c.publish_irq(1, true, 0x0400_0001);
        assert_eq!(
            p.irq(1),
            IrqEntry {
                level: true,
                pmbsr: 0x0400_0001,
                seq: 1
            }
        );
        assert_eq!(p.irq(0), IrqEntry::default());
        // The state lives beside the IRQ fields and does not bump seq.
        c.publish_state(
            1,
            &SamplingState {
                interval: 256,
                enabled_els: 0b11,
                ..Default::default()
            },
        );
        assert_eq!(p.irq(1).seq, 1);
        assert!(p.irq(1).level);
    }

    #[test]
    fn sampling_state_seqlock_and_counted() {
        let (file, mut p) = Producer::create(layout()).unwrap();
        let mut c = Consumer::new(&file, layout()).unwrap();
        assert_eq!(p.sampling_state(0), (0, SamplingState::default()));
        let st = SamplingState {
            interval: 0xFFFF_FF00,
            pmsicr_count: 0x8000_0001,
            enabled_els: 0b101,
            flags: 3,
            pmsicr_ecount: 0xAB,
        };
        c.publish_state(0, &st);
        assert_eq!(p.sampling_state(0), (2, st));
        assert_eq!(p.sampling_state(1).0, 0);
        // ops_counted is cumulative on the wire and a delta to the reader,
        // across wrap-around.
        assert_eq!(c.take_counted(0), 0);
        p.count(0, u64::MAX - 5);
        assert_eq!(c.take_counted(0), u64::MAX - 5);
        p.count(0, 10);
        p.count(0, 7);
        assert_eq!(c.take_counted(0), 17);
        assert_eq!(c.take_counted(1), 0);
        // A new consumer of the same memory does not apply old counts.
        let mut c2 = Consumer::new(&file, layout()).unwrap();
        assert_eq!(c2.take_counted(0), 0);
        c2.publish_state(0, &SamplingState::default());
        assert_eq!(p.sampling_state(0), (4, SamplingState::default()));
    }

    #[test]
    fn seqlock_reader_never_sees_a_torn_state() {
        let (file, p) = Producer::create(layout()).unwrap();
        let mut c = Consumer::new(&file, layout()).unwrap();
        // Every published state has count == !interval: a torn read would
        // mix two of them.
        let writer = std::thread::spawn(move || {
            for i in 0..200_000u32 {
                c.publish_state(
                    1,
                    &SamplingState {
                        interval: i,
                        pmsicr_count: !i,
                        enabled_els: i as u8,
                        ..Default::default()
                    },
                );
            }
        });
        let mut last = 0;
        while !writer.is_finished() {
            let (seq, s) = p.sampling_state(1);
            assert_eq!(seq & 1, 0);
            assert!(seq >= last);
            last = seq;
            if seq != 0 {
                assert_eq!(s.pmsicr_count, !s.interval, "{s:?}");
                assert_eq!(s.enabled_els, s.interval as u8);
            }
        }
        writer.join().unwrap();
        assert_eq!(p.sampling_state(1).1.interval, 199_999);
    }
}
