//! `perf-test-spe`: perf's own Arm SPE tests in the guest, unmodified
//! (tests/shell/test_arm_spe.sh with its snapshot, system-wide and discard
//! parts, and test_arm_spe_fork.sh), judged by their parts.

use crate::scenario::{Expected, Judge, RunOutput};

/// perf's own Arm SPE tests passed: both tests `Ok`, and every part of
/// the trace-data test that this perf's script has (snapshot and
/// system-wide at least) `PASS`, but for one expected outcome: the fork
/// test skips without a C compiler in the guest (6.1's compiles its
/// workload), checked by `guest_cc`. The scenario's guest clock
/// (`ICOUNT_CORE`) is what lets perf start within the snapshot part's
/// one-second wait.
pub fn check_perf_test_spe(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    match j.text("perf_test_fork") {
        Some("Ok") => {}
        Some("Skip") if j.text("guest_cc") == Some("no") => j.expected(Expected::Skip(
            "perf test's fork test: no C compiler in the guest".into(),
        )),
        v => j.fail(format!("perf_test_fork={v:?}, want Ok")),
    }
    let parts: Vec<&str> = j
        .text("perf_test_parts")
        .unwrap_or("")
        .split(',')
        .filter(|p| !p.is_empty())
        .collect();
    for need in ["snapshot", "system_wide"] {
        j.check(parts.contains(&need), || {
            format!("the trace-data test has no {need} part ({parts:?})")
        });
    }
    let startup = j.num("perf_startup_ms").unwrap_or(0);
    for p in &parts {
        let key = format!("perf_test_part_{p}");
        match j.text(&key) {
            Some("PASS") => {}
            // 6.12's perf test prints a test's output only when it fails;
            // the script exits non-zero on any failed part.
            Some("none") if j.text("perf_test_trace") == Some("Ok") => {}
            v => j.fail(format!(
                "{key}={v:?}, want PASS (perf record starts in {startup} ms)"
            )),
        }
    }
    match j.text("perf_test_trace") {
        Some("Ok") => {}
        v => j.fail(format!("perf_test_trace={v:?}, want Ok")),
    }
    j.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::take_expected;

    const GOOD: &[(&str, &str)] = &[
        ("kernel", "6.1.0-56-arm64"),
        ("perf_startup_ms", "1300"),
        ("perf_test_trace", "Ok"),
        ("perf_test_fork", "Ok"),
        ("perf_test_part_snapshot", "PASS"),
        ("perf_test_part_system_wide", "PASS"),
        ("perf_test_part_discard", "PASS"),
        ("perf_test_parts", "snapshot,system_wide,discard"),
    ];

    fn judge(change: &[(&str, &str)]) -> Result<(), String> {
        let mut out = RunOutput::from_pairs(GOOD);
        for (k, v) in change {
            out = out.with(k, v);
        }
        check_perf_test_spe(&out)
    }

    #[test]
    fn perf_test_spe_needs_every_part() {
        assert_eq!(judge(&[]), Ok(()));
        assert!(judge(&[("perf_test_fork", "FAILED!")]).is_err());
        assert!(judge(&[("perf_test_fork", "Skip")]).is_err());
        take_expected();
        assert_eq!(
            judge(&[("perf_test_fork", "Skip"), ("guest_cc", "no")]),
            Ok(())
        );
        assert!(matches!(take_expected().as_slice(), [Expected::Skip(_)]));
        assert!(judge(&[("perf_test_part_discard", "SKIPPED")]).is_err());
        assert!(judge(&[("perf_test_parts", "discard")]).is_err());
        // A part without output passes only inside a passing test.
        assert_eq!(judge(&[("perf_test_part_snapshot", "none")]), Ok(()));
        assert!(judge(&[
            ("perf_test_part_snapshot", "none"),
            ("perf_test_trace", "FAILED!")
        ])
        .is_err());
    }

    #[test]
    fn a_failed_part_fails_on_every_kernel() {
        let failed = [
            ("perf_test_trace", "FAILED!"),
            ("perf_test_part_snapshot", "FAIL"),
            ("perf_startup_ms", "2920"),
        ];
        assert!(judge(&failed).is_err());
        let on_73 = [failed.as_slice(), &[("kernel", "7.3.4+deb13-arm64")]].concat();
        assert!(judge(&on_73).is_err());
        assert_eq!(judge(&[("kernel", "7.3.4+deb13-arm64")]), Ok(()));
    }
}
