//! Which cache lines another vCPU has modified, as the sampled stores
//! show: the coherence half of the memory model.
//!
//! A line a peer core wrote after this core last touched it is not in
//! this core's caches any more (the write invalidated it) but in the
//! peer's, modified: the access is served from there (a HITM). The model
//! sees the stores the interval counter selected, not every store, so it
//! finds the lines written often — which is what false sharing is, and
//! what `perf c2c` looks for — and misses a line written once.

use std::collections::{HashMap, VecDeque};

/// Cache-line size of every modelled core.
pub const LINE: u64 = 64;

/// How many sampled stores' lines are remembered (the oldest forgotten
/// first): a peer's write older than that many sampled stores is taken
/// to have left its cache.
const REMEMBERED: usize = 8192;

#[derive(Clone, Debug, Default)]
struct Line {
    /// The vCPU whose sampled store was the last, and its timestamp.
    writer: u32,
    written: u64,
    /// Each vCPU's last sampled access to the line (timestamps).
    seen: Vec<(u32, u64)>,
}

/// The lines sampled stores wrote, by physical line address.
#[derive(Debug, Default)]
pub struct Lines {
    lines: HashMap<u64, Line>,
    /// The order lines were last written in, to forget the oldest.
    order: VecDeque<(u64, u64)>,
}

impl Lines {
    /// A sampled access by `vcpu` to physical address `pa` at time `ts`
    /// (the generic timer's count, which all vCPUs share): whether it is
    /// served from a peer's modified copy, which vCPU's. A store then
    /// makes `vcpu` the line's writer.
    pub fn access(&mut self, vcpu: u32, pa: u64, ts: u64, store: bool) -> Option<u32> {
        let addr = pa & !(LINE - 1);
        let peer = self.lines.get(&addr).and_then(|l| {
            let own = l
                .seen
                .iter()
                .find(|(v, _)| *v == vcpu)
                .map_or(0, |(_, t)| *t);
            (l.writer != vcpu && l.written > own).then_some(l.writer)
        });
        if store {
            let line = self.lines.entry(addr).or_default();
            line.writer = vcpu;
            line.written = ts;
            self.order.push_back((addr, ts));
            self.forget_old();
        }
        if let Some(line) = self.lines.get_mut(&addr) {
            match line.seen.iter_mut().find(|(v, _)| *v == vcpu) {
                Some(e) => e.1 = e.1.max(ts),
                None => line.seen.push((vcpu, ts)),
            }
        }
        peer
    }

    fn forget_old(&mut self) {
        while self.order.len() > REMEMBERED {
            let Some((addr, ts)) = self.order.pop_front() else {
                break;
            };
            // Only the line's last write forgets it.
            if self.lines.get(&addr).is_some_and(|l| l.written == ts) {
                self.lines.remove(&addr);
            }
        }
    }

    /// Lines remembered (for tests and statistics).
    pub fn len(&self) -> usize {
        self.lines.len()
    }

    pub fn is_empty(&self) -> bool {
        self.lines.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_a_peer_wrote_since_is_served_from_the_peer() {
        let mut l = Lines::default();
        // vCPU 0 writes, vCPU 1 reads: from vCPU 0's cache.
        assert_eq!(l.access(0, 0x1000, 10, true), None);
        assert_eq!(l.access(1, 0x1008, 20, false), Some(0));
        // Now vCPU 1 has it: a second read is its own.
        assert_eq!(l.access(1, 0x1010, 30, false), None);
        // vCPU 1 writes (it has the line shared: no peer holds it
        // modified), then vCPU 0 reads and writes: from vCPU 1.
        assert_eq!(l.access(1, 0x1000, 40, true), None);
        assert_eq!(l.access(0, 0x1020, 50, false), Some(1));
        assert_eq!(l.access(0, 0x1020, 60, true), None);
        // A store to a line a peer modified is served from it too.
        assert_eq!(l.access(1, 0x1000, 70, true), Some(0));
    }

    #[test]
    fn private_lines_and_other_lines_are_never_a_peers() {
        let mut l = Lines::default();
        for t in 0..100 {
            assert_eq!(l.access(t as u32 % 2, 0x10000 * (t % 2), t, true), None);
            assert_eq!(
                l.access(t as u32 % 2, 0x10000 * (t % 2) + 8, t, false),
                None
            );
        }
        // The next line over is another line.
        assert_eq!(l.access(0, 0x2000, 1, true), None);
        assert_eq!(l.access(1, 0x2040, 2, false), None);
    }

    #[test]
    fn old_writes_are_forgotten() {
        let mut l = Lines::default();
        l.access(0, 0, 1, true);
        for i in 0..REMEMBERED as u64 {
            l.access(0, (i + 1) * LINE, i + 2, true);
        }
        assert_eq!(l.len(), REMEMBERED);
        assert_eq!(l.access(1, 0, 1 << 20, false), None);
        // Rewritten lines are remembered once.
        for i in 0..3 * REMEMBERED as u64 {
            l.access(0, LINE, i + (1 << 21), true);
        }
        assert!(l.len() <= REMEMBERED);
        assert!(!l.is_empty());
    }
}
