//! StatCache (Berg & Hagersten, "StatCache: a probabilistic approach to
//! efficient and accurate data locality analysis", ISPASS 2004): the miss
//! ratio of a cache of any size from a sparse sample of reuse distances.
//!
//! A reuse distance is the number of memory accesses between an access
//! and the next one to the same cache line. In a cache of `L` lines with
//! random replacement, each miss evicts a given line with probability
//! `1/L`, so a line reused after `d` accesses is still there with
//! probability `(1 - 1/L)^(d·m)`, `m` being the miss ratio. The miss
//! ratio is then the fixed point of
//!
//! `m = Σ h(d) · (1 - (1 - 1/L)^(d·m))`
//!
//! over the histogram `h` of sampled distances, a line never seen again
//! counting as a miss. The paper also gives one access's own miss
//! probability from its distances and the program's `m`, which is what
//! [`Histogram::miss_probability`] computes for one instruction.

/// Distances fall into powers of two: bucket `k` holds `[2^k, 2^(k+1))`.
const BUCKETS: usize = 33;

/// The weight the histogram keeps of its past at each new sample: it
/// follows a program's phases over about `1 / (1 - DECAY)` samples.
const DECAY: f64 = 1.0 - 1.0 / 512.0;

/// A decaying histogram of reuse distances, in memory accesses.
#[derive(Clone, Debug)]
pub struct Histogram {
    reused: [f64; BUCKETS],
    /// Lines not reused within what the front end watched: misses at
    /// every level.
    not_reused: f64,
    total: f64,
    samples: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            reused: [0.0; BUCKETS],
            not_reused: 0.0,
            total: 0.0,
            samples: 0,
        }
    }
}

/// The representative distance of bucket `k`: its geometric middle.
fn distance_of(k: usize) -> f64 {
    (k as f64 + 0.5).exp2()
}

impl Histogram {
    /// Adds one sample: reused after `accesses`, or (`None`) not within
    /// the watch.
    pub fn add(&mut self, accesses: Option<f64>) {
        for w in &mut self.reused {
            *w *= DECAY;
        }
        self.not_reused *= DECAY;
        self.total = self.total * DECAY + 1.0;
        self.samples += 1;
        match accesses {
            Some(d) => {
                let k = (d.max(1.0).log2() as usize).min(BUCKETS - 1);
                self.reused[k] += 1.0;
            }
            None => self.not_reused += 1.0,
        }
    }

    /// Samples added so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// `Σ h(d) · (1 - (1 - 1/L)^(d·m))` for a cache of `lines` lines,
    /// with distances scaled by `scale` (a shared cache sees the other
    /// cores' accesses in between too).
    fn expected_misses(&self, lines: f64, scale: f64, m: f64) -> f64 {
        if self.total <= 0.0 {
            return 0.0;
        }
        let keep = (1.0 - 1.0 / lines).ln();
        let reused: f64 = self
            .reused
            .iter()
            .enumerate()
            .filter(|(_, w)| **w > 0.0)
            .map(|(k, w)| w * (1.0 - (keep * distance_of(k) * scale * m).exp()))
            .sum();
        (reused + self.not_reused) / self.total
    }

    /// The miss ratio of a random-replacement cache of `lines` lines: the
    /// fixed point above, by bisection (the right side grows with `m`, is
    /// at least the never-reused share at 0 and at most 1 at 1).
    pub fn miss_ratio(&self, lines: f64, scale: f64) -> f64 {
        let (mut lo, mut hi) = (0.0f64, 1.0f64);
        // 2^-24: far finer than the samples allow.
        for _ in 0..24 {
            let m = (lo + hi) / 2.0;
            if self.expected_misses(lines, scale, m) > m {
                lo = m;
            } else {
                hi = m;
            }
        }
        (lo + hi) / 2.0
    }

    /// The miss probability of the accesses this histogram sampled (one
    /// instruction's) in a cache of `lines` lines whose miss ratio over
    /// the whole program is `m`.
    pub fn miss_probability(&self, lines: f64, scale: f64, m: f64) -> f64 {
        self.expected_misses(lines, scale, m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distances of a program that reads `n` lines in a random order:
    /// geometric with mean `n` (each access hits a given line with
    /// probability 1/n).
    fn random_over(n: f64, samples: usize) -> Histogram {
        let mut h = Histogram::default();
        let mut state = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..samples {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let u = (state >> 11) as f64 / (1u64 << 53) as f64;
            h.add(Some((1.0 - u).ln() / (1.0 - 1.0 / n).ln()));
        }
        h
    }

    /// The closed form for that program in a random-replacement cache:
    /// every line is equally likely to be resident, so a hit has
    /// probability L/n.
    #[test]
    fn random_accesses_miss_as_the_closed_form_says() {
        for (n, lines) in [(4096.0, 1024.0), (65536.0, 16384.0), (8192.0, 1024.0)] {
            let h = random_over(n, 20_000);
            let m = h.miss_ratio(lines, 1.0);
            let want = 1.0 - lines / n;
            // Log-2 buckets cost a few points.
            assert!((m - want).abs() < 0.06, "n {n} L {lines}: {m} vs {want}");
        }
    }

    #[test]
    fn a_footprint_that_fits_hits_and_one_that_does_not_misses() {
        // A loop over 256 lines, every line reused after 256 accesses.
        let mut small = Histogram::default();
        // A stream: 8 accesses per line, then the line is never seen
        // again.
        let mut stream = Histogram::default();
        for i in 0..4000 {
            small.add(Some(256.0));
            stream.add(if i % 8 == 7 { None } else { Some(1.0) });
        }
        assert!(small.miss_ratio(1024.0, 1.0) < 0.01);
        assert!(small.miss_ratio(64.0, 1.0) > 0.9);
        let m = stream.miss_ratio(1024.0, 1.0);
        assert!((m - 0.125).abs() < 0.01, "{m}");
        // No cache size helps a stream.
        assert!((stream.miss_ratio(1e9, 1.0) - 0.125).abs() < 0.01);
    }

    #[test]
    fn a_bigger_cache_never_misses_more_and_sharing_it_does() {
        let h = random_over(30_000.0, 5_000);
        let ratios: Vec<f64> = [512.0, 1024.0, 16384.0, 524288.0]
            .iter()
            .map(|&l| h.miss_ratio(l, 1.0))
            .collect();
        assert!(ratios.windows(2).all(|w| w[1] <= w[0]), "{ratios:?}");
        assert!(h.miss_ratio(16384.0, 4.0) > h.miss_ratio(16384.0, 1.0));
    }

    #[test]
    fn nothing_sampled_misses_nothing_and_old_samples_fade() {
        let mut h = Histogram::default();
        assert!(h.miss_ratio(1024.0, 1.0) < 1e-6);
        for _ in 0..4000 {
            h.add(None);
        }
        assert!(h.miss_ratio(1024.0, 1.0) > 0.99);
        for _ in 0..4000 {
            h.add(Some(4.0));
        }
        // A new phase takes over within a few thousand samples.
        assert!(h.miss_ratio(1024.0, 1.0) < 0.01);
        assert_eq!(h.samples(), 8000);
    }
}
