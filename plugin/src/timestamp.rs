//! Timestamps between readings of the host's clock, as the series'
//! `spe_timestamp()` gives them: reading the clock for every sample cost
//! more than the rest of the record (a fifth of the plugin's time at
//! `-c 256`), so it is read every [`READ_EVERY`] samples and, in between,
//! advances with the operations counted since. The rate per operation
//! follows the readings down at once and up slowly, so the guess lags
//! the truth rather than runs ahead of it, and a timestamp never goes
//! backwards. Whatever stops the counting without stopping time (the
//! vCPU idling, an exception) makes the next sample read it afresh
//! ([`Timestamps::stale`]).

/// Samples between readings of the clock (the series' `SPE_TS_READ`).
pub const READ_EVERY: u32 = 16;

/// The largest rate, as a multiple of the current one, that a reading
/// may pull the rate toward.
const MAX_RISE: u64 = 4;

/// One vCPU's timestamps.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timestamps {
    /// Samples to the next reading; 0: read at the next sample.
    left: u32,
    /// The last interval says nothing of the rate (the series'
    /// `SPE_TS_STALE`).
    stale: bool,
    /// The operations counted and the clock at the last reading.
    ops_at: u64,
    count_at: u64,
    /// Counts per operation, 32.32 fixed point; 0 until two readings.
    mult: u64,
    /// The last timestamp given.
    last: u64,
}

impl Timestamps {
    /// A new vCPU's: its first sample reads the clock.
    pub fn new() -> Timestamps {
        Timestamps {
            stale: true,
            ..Default::default()
        }
    }

    /// Time went on without counting: the next sample reads the clock
    /// and does not learn a rate from the interval.
    pub fn stale(&mut self) {
        self.left = 0;
        self.stale = true;
    }

    /// The timestamp of a sample taken when `ops` operations had been
    /// counted on the vCPU; `read` reads the clock.
    pub fn next(&mut self, ops: u64, read: impl FnOnce() -> u64) -> u64 {
        let since = ops.wrapping_sub(self.ops_at);
        let ts = if self.left == 0 {
            let count = read();
            let d = count.wrapping_sub(self.count_at);
            if !self.stale && since != 0 && count > self.count_at && d <= u64::from(u32::MAX) {
                let rate = (d << 32) / since;
                self.mult = if self.mult == 0 || rate < self.mult {
                    rate
                } else {
                    // An eighth of the way up, and at most from a
                    // fourfold rate: an idle stretch nobody marked stale
                    // (single-threaded TCG reports no idling) moves the
                    // guess little.
                    let rate = rate.min(self.mult.saturating_mul(MAX_RISE));
                    self.mult + (rate - self.mult) / 8
                };
            }
            self.stale = false;
            self.ops_at = ops;
            self.count_at = count;
            self.left = READ_EVERY - 1;
            count
        } else {
            self.left -= 1;
            let ahead = (u128::from(since) * u128::from(self.mult)) >> 32;
            u64::try_from(ahead)
                .ok()
                .and_then(|a| self.count_at.checked_add(a))
                .unwrap_or(self.last)
        };
        self.last = self.last.max(ts);
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A clock at `rate` counts per operation; returns the timestamps of
    /// samples every `period` operations and how often it was read.
    fn run(t: &mut Timestamps, samples: u64, period: u64, rate: u64, from: u64) -> (Vec<u64>, u32) {
        let mut reads = 0;
        let out = (1..=samples)
            .map(|i| {
                let ops = from + i * period;
                t.next(ops, || {
                    reads += 1;
                    ops * rate
                })
            })
            .collect();
        (out, reads)
    }

    #[test]
    fn the_clock_is_read_every_sixteenth_sample_and_interpolated_between() {
        let mut t = Timestamps::new();
        let (ts, reads) = run(&mut t, 64, 1000, 3, 0);
        assert_eq!(reads, 4);
        // After two readings the rate is learned: every sample exact.
        for (i, &v) in ts.iter().enumerate().skip(16) {
            assert_eq!(v, (i as u64 + 1) * 1000 * 3, "sample {i}");
        }
        // Before it, the first reading's count holds (no guess ahead).
        assert!(ts[..16].iter().all(|&v| v == 3000));
    }

    #[test]
    fn timestamps_never_decrease_when_the_clock_slows() {
        let mut t = Timestamps::new();
        let (fast, _) = run(&mut t, 48, 1000, 10, 0);
        // The same operations now take a tenth of the time: the guess
        // runs ahead of the next reading, which must not go back.
        let (slow, _) = run(&mut t, 48, 1000, 1, 48_000);
        let all: Vec<u64> = fast.into_iter().chain(slow).collect();
        assert!(all.windows(2).all(|w| w[0] <= w[1]), "{all:?}");
    }

    #[test]
    fn a_stale_interval_reads_again_and_learns_no_rate() {
        let mut t = Timestamps::new();
        run(&mut t, 32, 1000, 2, 0);
        t.stale();
        // Idle: the clock jumped far ahead with few operations.
        let mut read = false;
        let ts = t.next(33_000, || {
            read = true;
            1_000_000_000
        });
        assert!(read);
        assert_eq!(ts, 1_000_000_000);
        // The rate stays 2 counts per operation, not the idle's.
        assert_eq!(t.next(34_000, || unreachable!()), 1_000_002_000);
    }

    #[test]
    fn an_unmarked_idle_stretch_raises_the_rate_by_at_most_three_eighths() {
        let mut t = Timestamps::new();
        run(&mut t, 32, 1000, 2, 0);
        assert_eq!(t.mult, 2 << 32);
        // 16 samples' operations, then an idle of a second nobody marked.
        let (at, count) = (t.ops_at + 16_000, t.count_at + 16_000 * 2 + 1_000_000_000);
        t.left = 0;
        t.next(at, || count);
        assert_eq!(t.mult, (2 << 32) + (3 * (2 << 32)) / 8);
    }

    #[test]
    fn a_guess_that_would_overflow_repeats_the_last_timestamp() {
        let mut t = Timestamps::new();
        // Read at the first and the seventeenth: the next one guesses.
        run(&mut t, 31, 1000, 2, 0);
        let last = t.last;
        assert_eq!(t.next(u64::MAX - 1, || unreachable!()), last);
    }
}
