//! Where a sampled branch's MISPRED event comes from. QEMU executes no
//! speculation, so the model predicts the branches it samples, with the
//! IMPLEMENTATION DEFINED predictor `unpredictable` describes: a two-bit
//! counter per PC for conditional branches and a last target per PC for
//! indirect ones, trained by the sampled branches only. It is
//! deterministic: the same sampled branches give the same events.

use super::unpredictable as cu;

/// The predictor's tables, indexed by a hash of the branch's PC.
#[derive(Clone, Debug)]
pub(crate) struct BranchPredictor {
    counters: Vec<u8>,
    targets: Vec<u64>,
}

impl Default for BranchPredictor {
    fn default() -> Self {
        BranchPredictor {
            counters: vec![cu::PREDICTOR_INITIAL_COUNTER; cu::PREDICTOR_ENTRIES],
            targets: vec![0; cu::PREDICTOR_ENTRIES],
        }
    }
}

impl BranchPredictor {
    fn index(pc: u64) -> usize {
        ((pc >> 2 ^ pc >> 12) % cu::PREDICTOR_ENTRIES as u64) as usize
    }

    /// Predicts the branch at `pc`, then trains with what it did; true if
    /// the prediction was wrong (direction, or an indirect branch's
    /// target).
    pub(crate) fn mispredicted(
        &mut self,
        pc: u64,
        conditional: bool,
        indirect: bool,
        taken: bool,
        target: u64,
    ) -> bool {
        let i = Self::index(pc);
        let mut wrong = false;
        if conditional {
            let c = &mut self.counters[i];
            wrong = (*c >= 2) != taken;
            *c = if taken {
                (*c + 1).min(3)
            } else {
                c.saturating_sub(1)
            };
        }
        if indirect && taken {
            wrong |= self.targets[i] != target;
            self.targets[i] = target;
        }
        wrong
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A conditional branch's outcomes and the predictions' misses, from
    /// the initial weakly-taken counter.
    #[test]
    fn two_bit_counter_rows() {
        let rows: [(&str, &[bool], &[bool]); 4] = [
            ("always taken", &[true; 4], &[false; 4]),
            ("never taken", &[false; 4], &[true, false, false, false]),
            (
                "one not-taken in a loop",
                &[true, true, false, true, true],
                &[false, false, true, false, false],
            ),
            // Between weakly taken and weakly not-taken: every one missed.
            ("alternating", &[false, true, false, true], &[true; 4]),
        ];
        for (what, outcomes, misses) in rows {
            let mut p = BranchPredictor::default();
            let got: Vec<bool> = outcomes
                .iter()
                .map(|&t| p.mispredicted(0x40_0000, true, false, t, 0))
                .collect();
            assert_eq!(got, misses, "{what}");
        }
    }

    #[test]
    fn indirect_branches_predict_the_last_target() {
        let mut p = BranchPredictor::default();
        let targets = [0x1000, 0x1000, 0x2000, 0x2000];
        let got: Vec<bool> = targets
            .iter()
            .map(|&t| p.mispredicted(0x40_0000, false, true, true, t))
            .collect();
        assert_eq!(got, [true, false, true, false]);
        // Unconditional direct branches are always predicted right.
        assert!(!p.mispredicted(0x40_0100, false, false, true, 0x5000));
    }

    #[test]
    fn branches_at_other_pcs_train_other_entries() {
        let mut p = BranchPredictor::default();
        for _ in 0..3 {
            p.mispredicted(0x40_0000, true, false, false, 0);
        }
        assert!(!p.mispredicted(0x40_0004, true, false, true, 0));
        assert!(!p.mispredicted(0x40_0000, true, false, false, 0));
    }
}
