//! The SPE kselftest suite (`tools/testing/selftests/perf_events/arm_spe`)
//! in a booted guest: the guest runs `arm_spe_test`, whose fault cases arm
//! their faults through the guest control port, and the host judges its
//! KTAP case by case.

use crate::kernels::KernelSpec;
use crate::scenario::{Expect, RunOutput, Scenario, SpeRun};
use crate::scenarios::Set;
use spe_protocol::profile::CpuProfile;

/// One KTAP result line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    pub name: String,
    pub outcome: Outcome,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Pass,
    Fail,
    /// `ok N # SKIP name: reason`.
    Skip(String),
}

/// The suite's KTAP from the console: its plan and its result lines
/// (`ok N name`, `not ok N name[: why]`, `ok N # SKIP name: reason`).
pub fn ktap(console: &str) -> (Option<usize>, Vec<Case>) {
    let mut plan = None;
    let mut cases = Vec::new();
    for l in console.lines() {
        let l = l.trim_end();
        if let Some(n) = l.strip_prefix("1..") {
            plan = n.split_whitespace().next().and_then(|n| n.parse().ok());
            continue;
        }
        let (rest, failed) = match (l.strip_prefix("ok "), l.strip_prefix("not ok ")) {
            (Some(r), _) => (r, false),
            (_, Some(r)) => (r, true),
            _ => continue,
        };
        let Some((_, text)) = rest.split_once(' ') else {
            continue;
        };
        let (text, skip) = match text.strip_prefix("# SKIP ") {
            Some(t) => (t, true),
            None => (text, false),
        };
        let (name, why) = text.split_once(": ").unwrap_or((text, ""));
        cases.push(Case {
            name: name.to_string(),
            outcome: match (failed, skip) {
                (true, _) => Outcome::Fail,
                (false, true) => Outcome::Skip(why.to_string()),
                (false, false) => Outcome::Pass,
            },
        });
    }
    (plan, cases)
}

/// Skips the suite may report, whatever the run: faults the PE cannot
/// have (no EL2 in these guests; the model has no FEAT_RME), and format
/// attributes a kernel predates.
fn allowed_skip(name: &str, why: &str) -> bool {
    (name == "fault_stage2" || name == "fault_granule-protection") && why.starts_with("refused")
        || why.starts_with("the kernel has no")
}

/// How a run of the suite must come out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Want {
    /// Every case passes (or skips as [`allowed_skip`] says).
    AllPass,
    /// No control port: the fault cases and the caps case skip saying so,
    /// the rest pass.
    NoPort,
    /// Each fault case armed another fault's: every fault case the
    /// backend delivered fails, the rest pass.
    WrongFault,
}

pub fn check_ktap(console: &str, want: Want) -> Result<(), String> {
    let (plan, cases) = ktap(console);
    let Some(plan) = plan else {
        return Err("no KTAP plan (1..N) on the console".into());
    };
    if plan != cases.len() || cases.is_empty() {
        return Err(format!("KTAP plan 1..{plan}, {} results", cases.len()));
    }
    let mut wrong = Vec::new();
    let mut faults = 0;
    for c in &cases {
        let fault = c.name.starts_with("fault_");
        faults += usize::from(fault && !matches!(&c.outcome, Outcome::Skip(_)));
        let ok = match (&c.outcome, want) {
            (Outcome::Skip(why), _) if allowed_skip(&c.name, why) => true,
            (Outcome::Skip(why), Want::NoPort) => {
                (fault || c.name == "caps_match_pmsidr") && why.contains("no guest control port")
            }
            (Outcome::Fail, Want::WrongFault) => fault,
            (Outcome::Pass, Want::WrongFault) => !fault,
            (Outcome::Pass, Want::NoPort) => !fault && c.name != "caps_match_pmsidr",
            (Outcome::Pass, Want::AllPass) => true,
            _ => false,
        };
        if !ok {
            wrong.push(format!("{}: {:?}", c.name, c.outcome));
        }
    }
    if want != Want::NoPort && faults == 0 {
        wrong.push("no fault case ran".into());
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("{want:?}: {}", wrong.join(", ")))
    }
}

fn check(want: Want) -> impl Fn(&RunOutput) -> Result<(), String> {
    move |out: &RunOutput| {
        check_ktap(&out.console, want)?;
        match out.result("kernel_warnings") {
            Some("0") => Ok(()),
            w => Err(format!("kernel_warnings={w:?}, want 0")),
        }
    }
}

const SUITE: &str = "The SPE kselftest suite (`tools/testing/selftests/perf_events/arm_spe`, C on \
    `perf_event_open` and the AUX buffer, KTAP out) on `max`: the PMU's formats, its caps \
    against the PMSIDR_EL1 `query-spu` gives through the guest control port, a workload's \
    records decoded (EL0, timestamps, half or more in the workload's own section), each \
    filter the kernel has (load, store, branch, latency, events, inverted events, PA, \
    jitter, PCT: every record obeys it), `discard` (no AUX data), AUX snapshot mode (the \
    buffer wraps, OVERWRITE), and every fault kind of the catalogue armed by the guest on \
    vCPU 0 after 50 records, judged by the fault's FAULT_DELIVERED event (`query-events`), \
    the PERF_RECORD_AUX flags (TRUNCATED, PARTIAL, COLLISION), the pieces of AUX data \
    (collection restarted, stopped at the fault, or unseen) and CPU 0's PMBIRQs. \
    stage2 and granule-protection are refused (no EL2; no FEAT_RME) and skip; every \
    other case passes.";

pub fn scenarios() -> Vec<Scenario> {
    let max = SpeRun {
        guest_control: true,
        ..SpeRun::new(CpuProfile::Max)
    };
    vec![
        Scenario::new(
            "spe-selftest",
            "spe-selftest",
            600,
            Expect::pass(check(Want::AllPass)),
        )
        .spe(max.clone())
        .proves(SUITE),
        Scenario::new(
            "spe-selftest-wrong-fault",
            "spe-selftest-wrong-fault",
            600,
            Expect::pass(check(Want::WrongFault)),
        )
        .spe(max.clone())
        .proves(
            "The suite's negative control: with `SPE_TEST_WRONG_FAULT=1` each fault case arms \
             a fault whose reaction differs (a buffer full for a fatal fault, an external abort \
             for one collection survives): every fault case delivered fails, the others pass.",
        ),
        Scenario::new(
            "spe-selftest-no-port",
            "spe-selftest",
            600,
            Expect::pass(check(Want::NoPort)),
        )
        .spe(SpeRun {
            guest_control: false,
            ..max
        })
        .proves(
            "The suite without a guest control port, as on hardware: the fault cases and the \
             caps case skip, saying there is no port; the rest pass.",
        ),
    ]
}

/// What CI runs of the suite: the suite on the newest kernel. Its
/// controls, and the other kernels, are run by hand.
const IN_CI: &[&str] = &["spe-selftest"];

/// Which set runs the suite's scenario `name` on `k`; None for a
/// scenario that is not one of them.
pub fn selection(name: &str, k: &KernelSpec) -> Option<Option<Set>> {
    let ci = k == KernelSpec::newest() && IN_CI.contains(&name);
    name.starts_with("spe-selftest")
        .then_some(Some(if ci { Set::Ci } else { Set::ByHand }))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "\
TAP version 13
1..4
ok 1 pmu_formats
# records 700 in workload 690
ok 2 records_decode
ok 3 # SKIP fault_stage2: refused: \"stage2 needs EL2\"
ok 4 fault_collision
# Totals: pass:3 fail:0 xfail:0 xpass:0 skip:1 error:0
";

    #[test]
    fn ktap_lines_become_cases() {
        let (plan, cases) = ktap(RUN);
        assert_eq!(plan, Some(4));
        assert_eq!(cases[0].name, "pmu_formats");
        assert_eq!(
            cases[2].outcome,
            Outcome::Skip("refused: \"stage2 needs EL2\"".into())
        );
        assert_eq!(cases[3].name, "fault_collision");
    }

    #[test]
    fn each_want_accepts_its_run_and_rejects_others() {
        assert_eq!(check_ktap(RUN, Want::AllPass), Ok(()));
        assert!(check_ktap(RUN, Want::WrongFault).is_err());
        assert!(check_ktap(RUN, Want::NoPort).is_err());
        let wrong = RUN.replace("ok 4 fault_collision", "not ok 4 fault_collision");
        assert!(check_ktap(&wrong, Want::AllPass).is_err());
        assert_eq!(check_ktap(&wrong, Want::WrongFault), Ok(()));
        let no_port = RUN.replace(
            "ok 4 fault_collision",
            "ok 4 # SKIP fault_collision: no guest control port",
        );
        assert_eq!(check_ktap(&no_port, Want::NoPort), Ok(()));
        // A lost result line, or no fault case at all, fails.
        assert!(check_ktap(&RUN.replace("ok 2 records_decode\n", ""), Want::AllPass).is_err());
        assert!(check_ktap(&no_port, Want::AllPass).is_err());
        // A skip for another reason fails.
        let skip = RUN.replace("ok 2 records_decode", "ok 2 # SKIP records_decode: why");
        assert!(check_ktap(&skip, Want::AllPass).is_err());
    }

    #[test]
    fn ci_runs_the_suite_on_the_newest_kernel() {
        let newest = KernelSpec::newest();
        assert_eq!(selection("spe-selftest", newest), Some(Some(Set::Ci)));
        assert_eq!(
            selection("spe-selftest-no-port", newest),
            Some(Some(Set::ByHand))
        );
        assert_eq!(selection("spe-probe", newest), None);
    }
}
