//! The interval counter, kept in one u64 per vCPU that TCG code updates
//! inline (a plugin scoreboard entry), as arithmetic the translator can
//! bake into immediates.
//!
//! The entry holds `BIAS + left`, where `left` is the number of operations
//! until the next selection, counted from the end of the TB now running.
//! Each TB subtracts its `n` instructions once, at its start (one inline
//! add per TB, not per instruction). Instruction `i` of the TB (0-based)
//! is the selected one exactly when `left` was `i + 1` before the TB, so
//! after the add the entry equals [`select_imm`]`(i, n)`.
//!
//! One conditional callback per TB, at its start, fires when the entry
//! is at most [`BIAS`]: the selection is in this TB ([`selected_index`])
//! or was missed. An instruction whose record needs the registers as they
//! are just before it runs (a load or store: its address; a conditional
//! select: the flags) carries its own conditional callback comparing the
//! entry with its immediate; the TB's callback leaves those to it and
//! takes the others itself. A selection adds the next period to the
//! entry, which may select again later in the same TB.
//!
//! A TB that ends early (an exception, an interrupt between instructions
//! that QEMU takes mid-TB) has already had all of its `n` subtracted, so
//! the counter runs a little ahead of execution; if the selection was
//! among the instructions that did not run, the entry falls below every
//! immediate a TB can test, and the next TB's callback sees it below
//! [`resync_below`] and reloads.

/// Keeps the entry far from 0 and from wrapping either way. A vCPU's
/// entry starts here (a counter that ran out, which its first TB reloads),
/// not at the scoreboard's 0, which would wrap below every immediate.
pub const BIAS: u64 = 1 << 62;

/// The entry while a sampled branch at a TB's end waits for the next
/// TB's address: below every immediate a TB can test, so the next TB's
/// callback fires and finds the branch; it then puts back the entry the
/// selection left. Far from [`resync_below`]'s values, though either
/// reads the same there.
pub const WAITING: u64 = BIAS - (1 << 32);

/// Operations between two looks at the sampling state while nothing
/// samples on this vCPU: the cost of noticing that profiling started.
pub const RECHECK: u64 = 1 << 16;

/// What a TB of `n` instructions adds to the entry at its start.
pub fn tb_add(n: usize) -> u64 {
    (n as u64).wrapping_neg()
}

/// The entry's value after a TB of `n` instructions started when its
/// instruction `i` is the selected one.
pub fn select_imm(i: usize, n: usize) -> u64 {
    BIAS.wrapping_add(i as u64 + 1).wrapping_sub(n as u64)
}

/// The index of the selected instruction in a TB of `n` whose start left
/// the entry at `entry`, if the selection is in it.
pub fn selected_index(entry: u64, n: usize) -> Option<usize> {
    let first = select_imm(0, n);
    (entry >= first && entry <= BIAS).then(|| (entry - first) as usize)
}

/// Below this (after a TB of `n` started) the selection was missed.
pub fn resync_below(n: usize) -> u64 {
    select_imm(0, n)
}

/// The entry after a resync at the start of a TB of `n`: the next
/// selection `period` operations from that TB's first instruction.
pub fn resynced(period: u64, n: usize) -> u64 {
    BIAS.wrapping_add(period).wrapping_sub(n as u64)
}

/// `spe_period()` of the series (patch "a sampled operation source"): the
/// operations until the next selection, from the sampling state the
/// backend publishes. `random` is called for each random value needed
/// (16 bits each).
pub fn period(
    state: &spe_protocol::channel::ring::SamplingState,
    mut random: impl FnMut() -> u32,
) -> u64 {
    use spe_protocol::channel::ring::flags;
    let mut p = u64::from(state.interval);
    if state.flags & flags::RND != 0 {
        // RND: COUNT reloads with random low 8 bits (ERnd: the same).
        p |= u64::from(random() & 0xff);
    } else if p == 0 {
        return i32::MAX as u64; // reloads to zero forever: never selects
    }
    p += 1;
    if state.flags & flags::UOPS != 0 {
        // Micro-operations: up to an eighth of the period's instructions
        // count twice, so it spans d instructions fewer, d uniform in
        // [0, p / 8].
        let r = u64::from(random() & 0xffff) << 16 | u64::from(random() & 0xffff);
        p -= (r * ((p >> 3) + 1)) >> 32;
    }
    p.min(i32::MAX as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use spe_protocol::channel::ring::{flags, SamplingState};

    /// Runs TBs of the given lengths through the arithmetic as TCG would
    /// and returns the global indices of the selected instructions.
    fn run(tbs: &[usize], first: u64, period: u64) -> Vec<u64> {
        let mut entry = BIAS + first;
        let mut selected = Vec::new();
        let mut done = 0u64;
        for &n in tbs {
            entry = entry.wrapping_add(tb_add(n));
            if entry < resync_below(n) {
                entry = resynced(period, n);
            }
            for i in 0..n {
                if entry == select_imm(i, n) {
                    selected.push(done + i as u64);
                    entry = entry.wrapping_add(period);
                }
            }
            done += n as u64;
        }
        selected
    }

    #[test]
    fn a_waiting_branch_fires_the_next_tbs_callback_and_no_instructions() {
        for n in 1..=512 {
            let e = WAITING.wrapping_add(tb_add(n));
            assert!(e <= BIAS, "n={n}: the TB's callback (entry <= BIAS) fires");
            assert!(e < resync_below(n), "n={n}");
            assert_eq!(selected_index(e, n), None, "n={n}");
            assert!((0..n).all(|i| e != select_imm(i, n)), "n={n}");
        }
    }

    #[test]
    fn selects_every_period_across_tb_boundaries() {
        let tbs = [3, 7, 1, 12, 5, 9, 2, 30, 4];
        let total: usize = tbs.iter().sum();
        for period in 1..=20u64 {
            let got = run(&tbs, period, period);
            let want: Vec<u64> = (1..)
                .map(|k| k * period - 1)
                .take_while(|&i| i < total as u64)
                .collect();
            assert_eq!(got, want, "period {period}");
        }
    }

    #[test]
    fn the_tb_callback_finds_the_selected_instruction() {
        let n = 7;
        for i in 0..n {
            assert_eq!(selected_index(select_imm(i, n), n), Some(i));
        }
        assert_eq!(selected_index(BIAS + 1, n), None, "after this TB");
        assert_eq!(selected_index(resync_below(n) - 1, n), None, "missed");
    }

    #[test]
    fn a_vcpu_starting_at_bias_reloads_in_its_first_tb() {
        let n = 5;
        let entry = BIAS.wrapping_add(tb_add(n));
        assert!(entry < resync_below(n));
        // A scoreboard's own 0 would wrap past every immediate instead.
        assert!(0u64.wrapping_add(tb_add(n)) > resync_below(n));
    }

    #[test]
    fn a_missed_selection_resyncs_at_the_next_tb() {
        // The entry fell behind (a TB that ended early): the next TB
        // reloads and selects `period` operations into itself.
        let mut entry = BIAS - 50;
        let n = 6;
        entry = entry.wrapping_add(tb_add(n));
        assert!(entry < resync_below(n));
        entry = resynced(4, n);
        assert_eq!(entry, select_imm(3, n));
    }

    #[test]
    fn period_is_the_series_spe_period() {
        let plain = SamplingState {
            interval: 1024,
            ..Default::default()
        };
        assert_eq!(period(&plain, || unreachable!()), 1025);
        let zero = SamplingState::default();
        assert_eq!(period(&zero, || 0), i32::MAX as u64);
        let rnd = SamplingState {
            interval: 1024,
            flags: flags::RND,
            ..Default::default()
        };
        assert_eq!(period(&rnd, || 0x1ab), 1024 + 0xab + 1);
        let uops = SamplingState {
            interval: 1024,
            flags: flags::UOPS,
            ..Default::default()
        };
        // The largest draw takes an eighth of the period off, at most.
        let p = period(&uops, || 0xffff);
        assert!((1025 - 1025 / 8 - 1..1025).contains(&p), "{p}");
        assert_eq!(period(&uops, || 0), 1025);
    }
}
