//! The top of the harness: the catalogue `cargo xtask test` runs
//! ([`list::all`]), which kernel runs what ([`select`]), and running and
//! judging it ([`run_all`]).

mod checks;
mod doc;
mod list;
mod select;

pub use checks::check_spe_perf;
pub use doc::markdown;
pub use list::{all, proof};
pub use select::{can_run, selection_on, Set};

use crate::runner::{GuestRun, Rig};
use crate::scenario::{take_expected, Expect, Expected, RunOutput, Scenario, Verdict};
use crate::util::tail;
use anyhow::Result;

/// Judges a run against the scenario's expectation.
pub fn evaluate(s: &Scenario, out: &RunOutput) -> Result<(), String> {
    match (&s.expect, &out.verdict) {
        (Expect::Pass(check), Verdict::Pass) => check(out),
        (Expect::Pass(_), Verdict::Fail(r)) => Err(r.clone()),
        (Expect::RunnerFailure { .. }, Verdict::Pass) => {
            Err("the runner reported PASS for a run that must fail".into())
        }
        (Expect::RunnerFailure { reason, console }, Verdict::Fail(r)) => {
            if !r.contains(reason) {
                Err(format!(
                    "runner failed for the wrong reason: {r} (want {reason:?})"
                ))
            } else if !tail(&out.console, CONSOLE_TAIL).contains(console) {
                Err(format!("console tail lacks {console:?}"))
            } else {
                Ok(())
            }
        }
    }
}

/// Lines of console shown for a failed run.
pub const CONSOLE_TAIL: usize = 30;

pub struct Summary {
    pub passed: usize,
    pub failed: usize,
    /// Expected failures and skips inside passing runs.
    pub expected: usize,
    /// Each run's outcome, in order (`test`'s results file).
    pub runs: Vec<Outcome>,
}

/// One scenario's run, for the results table.
pub struct Outcome {
    pub scenario: &'static str,
    pub seconds: f64,
    /// `Ok`: passed, with its expected failures and skips; `Err`: why not.
    pub result: Result<Vec<Expected>, String>,
}

/// Runs `scenarios` in order and prints each result; failures show the
/// console and backend log tails.
pub fn run_all(rig: &Rig, scenarios: &[&Scenario]) -> Result<Summary> {
    let mut sum = Summary {
        passed: 0,
        failed: 0,
        expected: 0,
        runs: Vec::new(),
    };
    for s in scenarios {
        let out = match s.vcpus {
            Some(vcpus) if vcpus != rig.vcpus => Rig {
                vcpus,
                ..rig.clone()
            }
            .run(&GuestRun::of(s))?,
            _ => rig.run(&GuestRun::of(s))?,
        };
        let secs = out.elapsed.as_secs_f64();
        let booted = out.result("kernel").unwrap_or("");
        let judged = if !booted.is_empty() && !rig.spec.matches(booted) {
            Err(format!(
                "the guest booted kernel {booted}, not {}",
                rig.spec.name
            ))
        } else {
            take_expected();
            evaluate(s, &out)
        };
        let expected = take_expected();
        match judged {
            Ok(()) => {
                sum.passed += 1;
                match &out.verdict {
                    Verdict::Pass => println!("PASS {} ({secs:.1} s)", s.name),
                    Verdict::Fail(r) => {
                        println!("PASS {} ({secs:.1} s): runner reported {r:?} as expected; console tail:", s.name);
                        print_indented(&tail(&out.console, 5));
                    }
                }
                sum.expected += expected.len();
                for e in &expected {
                    match e {
                        Expected::Fail(why) => println!("  XFAIL {why}"),
                        Expected::Skip(why) => println!("  SKIP {why}"),
                    }
                }
                sum.runs.push(Outcome {
                    scenario: s.name,
                    seconds: secs,
                    result: Ok(expected),
                });
            }
            Err(why) => {
                sum.failed += 1;
                println!("FAIL {} ({secs:.1} s): {why}", s.name);
                sum.runs.push(Outcome {
                    scenario: s.name,
                    seconds: secs,
                    result: Err(why),
                });
                println!(
                    "  --- console tail ({}) ---",
                    out.dir.join("console.log").display()
                );
                print_indented(&tail(&out.console, CONSOLE_TAIL));
                if s.backend {
                    println!(
                        "  --- backend log tail ({}) ---",
                        out.dir.join("backend.log").display()
                    );
                    print_indented(&tail(&out.backend_log, 20));
                }
            }
        }
    }
    Ok(sum)
}

fn print_indented(text: &str) {
    for l in text.lines() {
        println!("  | {}", l.trim_end_matches('\r'));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(name: &str) -> Scenario {
        all()
            .into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no scenario {name}"))
    }

    #[test]
    fn expected_failures_need_reason_and_console() {
        let s = named("panic-is-reported");
        let failed = |reason: &str, console: &str| RunOutput {
            verdict: Verdict::Fail(reason.into()),
            console: console.into(),
            ..RunOutput::from_line("")
        };
        let ok = failed(
            "kernel panic: Kernel panic - not syncing: sysrq",
            "x\nKernel panic - not syncing: sysrq\n",
        );
        assert_eq!(evaluate(&s, &ok), Ok(()));
        assert!(evaluate(&s, &RunOutput::from_line("")).is_err());
        let wrong = failed("timeout after 5 s", "Kernel panic - not syncing");
        assert!(evaluate(&s, &wrong).is_err());
    }

    #[test]
    fn a_failed_run_fails_whatever_its_check() {
        let s = named("perf");
        let out = RunOutput {
            verdict: Verdict::Fail("guest reported: x".into()),
            ..RunOutput::from_line("")
        };
        assert_eq!(evaluate(&s, &out), Err("guest reported: x".into()));
    }

    #[test]
    fn scenario_names_are_unique() {
        let all = all();
        for (i, s) in all.iter().enumerate() {
            assert!(
                all[..i].iter().all(|o| o.name != s.name),
                "{} twice",
                s.name
            );
        }
    }
}
