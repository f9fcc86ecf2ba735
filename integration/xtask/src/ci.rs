//! `cargo xtask test`: the lint steps, the series' checks and the guest
//! scenarios, with a results table a run writes
//! (`target/integration/results.md`).

use crate::checkpatch;
use crate::kernels::KernelSpec;
use crate::prepare::{cargo, prepare};
use crate::runner::Rig;
use crate::scenario::{self, Expected};
use crate::scenarios;
use crate::setup::{self, Paths, QemuRelease, QEMU_RELEASES};
use crate::util::Step;
use anyhow::{bail, Context, Result};
use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

/// `cargo xtask test`: what CI runs. `only`: these scenarios, wherever
/// they can run; `full`: also the by-hand set.
pub fn test(
    lint: bool,
    full: bool,
    only: &[String],
    kernels: &[&'static KernelSpec],
    qemu: Option<&'static QemuRelease>,
) -> Result<bool> {
    let paths = Paths::discover()?;
    // The other QEMUs' smoke set runs on the newest kernel: build them
    // only when it will run (named scenarios run on the main QEMU).
    let releases: Vec<&'static QemuRelease> = match qemu {
        Some(q) => vec![q],
        None if only.is_empty() && kernels.contains(&KernelSpec::newest()) => {
            QEMU_RELEASES.iter().collect()
        }
        None => vec![QemuRelease::main()],
    };
    let rigs = prepare(&paths, kernels, &releases)?;
    if lint {
        cargo_step(&paths, &["fmt", "--all", "--check"])?;
        cargo_step(
            &paths,
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        )?;
        cargo_step(&paths, &["test", "--workspace"])?;
        checkpatch::check(&paths)?;
        series_checks(&paths, &rigs)?;
    }
    let all = scenarios::all();
    for o in only {
        if !all.iter().any(|s| s.name == o) {
            bail!("unknown scenario {o:?}; see `cargo xtask scenarios`");
        }
    }
    let (mut passed, mut failed, mut expected) = (0, 0, 0);
    let mut results = Results::new(&paths)?;
    for rig in &rigs {
        // Named scenarios run wherever they can; otherwise the matrix's
        // selection (see scenarios::selection).
        let chosen: Vec<&scenario::Scenario> = all
            .iter()
            .filter(|s| {
                if only.is_empty() {
                    match scenarios::selection_on(s, rig.spec, rig.qemu_release) {
                        Some(scenarios::Set::Ci) => true,
                        Some(scenarios::Set::ByHand) => full,
                        None => false,
                    }
                } else {
                    only.iter().any(|o| o == s.name) && scenarios::can_run(s, rig)
                }
            })
            .collect();
        if chosen.is_empty() {
            continue;
        }
        let on = format!("{} on QEMU {}", rig.spec.name, rig.qemu_release.label());
        eprintln!("==> guest scenarios on {on} ({} of them)", chosen.len());
        let sum = scenarios::run_all(rig, &chosen)?;
        results.add(rig, &sum)?;
        println!(
            "kernel {on}: {} passed, {} failed, {} expected failure(s) or skip(s) in passing runs",
            sum.passed, sum.failed, sum.expected
        );
        passed += sum.passed;
        failed += sum.failed;
        expected += sum.expected;
    }
    println!(
        "{passed} passed, {failed} failed, {expected} expected failure(s) or skip(s) in passing runs"
    );
    println!("results: {}", results.path.display());
    Ok(failed == 0 && passed > 0)
}

/// The series' round trip (`git format-patch` of the set-up's branch
/// gives the committed files) and QEMU's own checkpatch on each patch,
/// when the patched QEMU was set up from the series.
fn series_checks(paths: &Paths, rigs: &[Rig]) -> Result<()> {
    let release = QemuRelease::main();
    if !rigs.iter().any(|r| r.qemu_release == release) {
        return Ok(());
    }
    if std::env::var_os(release.override_var).is_some_and(|v| !v.is_empty()) {
        eprintln!(
            "==> series checks skipped: {} names the QEMU",
            release.override_var
        );
        return Ok(());
    }
    let tree = setup::series_tree(paths, release)?;
    let step = Step::new(format!(
        "qemu-patches/{}/: git format-patch of the branch gives the committed files",
        release.version
    ));
    setup::check_round_trip(paths, release, &tree)?;
    step.done("byte for byte");
    checkpatch::check_qemu_series(paths, release, &tree)
}

/// A cargo check of the whole workspace, output passed through.
fn cargo_step(paths: &Paths, args: &[&str]) -> Result<()> {
    let step = Step::new(format!("cargo {}", args.join(" ")));
    let st = cargo()
        .current_dir(&paths.repo)
        .args(args)
        .status()
        .with_context(|| format!("starting cargo {}", args.join(" ")))?;
    if !st.success() {
        bail!("cargo {} failed ({st})", args.join(" "));
    }
    step.done("ok");
    Ok(())
}

/// The results table of one `test` run, written as each kernel's runs
/// end, so that an interrupted run leaves what it had.
struct Results {
    path: PathBuf,
    table: String,
}

impl Results {
    fn new(paths: &Paths) -> Result<Results> {
        let path = paths.work().join("results.md");
        let commit = output(
            Command::new("git")
                .current_dir(&paths.repo)
                .args(["describe", "--always", "--dirty"]),
        );
        let date = output(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]));
        let table = format!(
            "# cargo xtask test\n\ncommit {commit}, {date}\n\n\
             | kernel | QEMU | scenario | result | seconds |\n|---|---|---|---|---|\n"
        );
        std::fs::create_dir_all(paths.work())?;
        std::fs::write(&path, &table).with_context(|| format!("writing {}", path.display()))?;
        Ok(Results { path, table })
    }

    fn add(&mut self, rig: &Rig, sum: &scenarios::Summary) -> Result<()> {
        for run in &sum.runs {
            let result = match &run.result {
                Ok(expected) if expected.is_empty() => "PASS".to_string(),
                Ok(expected) => {
                    let notes: Vec<String> = expected
                        .iter()
                        .map(|e| match e {
                            Expected::Fail(why) => format!("XFAIL {why}"),
                            Expected::Skip(why) => format!("SKIP {why}"),
                        })
                        .collect();
                    format!("PASS ({})", notes.join("; "))
                }
                Err(why) => format!("FAIL: {why}"),
            };
            let line = format!(
                "| {} | {} | `{}` | {} | {:.1} |\n",
                rig.spec.name,
                rig.qemu_release.label(),
                run.scenario,
                cell(&result),
                run.seconds
            );
            self.table.push_str(&line);
        }
        let mut f = std::fs::File::create(&self.path)?;
        f.write_all(self.table.as_bytes())
            .with_context(|| format!("writing {}", self.path.display()))
    }
}

/// A command's first line of output, or "unknown".
fn output(cmd: &mut Command) -> String {
    cmd.output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.lines().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".into())
}

/// Text for one markdown table cell: one line, no column breaks.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace(['\n', '\r'], " ")
}

#[cfg(test)]
mod tests {
    use super::cell;

    #[test]
    fn a_failure_reason_stays_in_its_cell() {
        assert_eq!(cell("a|b\nc"), "a\\|b c");
    }
}
