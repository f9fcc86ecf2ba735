//! `cargo xtask bios-tables-test [--qemu V]`: QEMU's own check of the
//! virt machine's ACPI tables (`tests/qtest/bios-tables-test`, every
//! `/aarch64/acpi/virt` case) on the patched build, against the expected
//! tables the series updates. Its MADTs hold the table bytes: a table
//! that moves the SPE field, or the revision, fails it.
//!
//! The `+ds` tarball has no EDK2 images; the test boots Debian's
//! (`qemu-efi-aarch64`) in their place, from a scratch folder laid out
//! as the build folder the test expects (`pc-bios/`, `tests/data`).

use super::qemu::ccache;
use super::{setup, Paths, QemuRelease};
use crate::uefi::{AAVMF_CODE, AAVMF_VARS};
use crate::util::{run, run_logged, write_atomic, Step};
use anyhow::{Context, Result};
use std::fs;
use std::os::unix::fs::symlink;
use std::process::Command;

/// Cases that fail without the series too, on the release's own
/// expected tables (seen with the series before its MADT patches), and
/// the table each mismatches: not the series' to fix. (release, case,
/// table.)
const KNOWN: &[(&str, &str, &str)] = &[
    ("10.2.2", "/aarch64/acpi/virt/memhp", "SSDT"),
    ("10.2.2", "/aarch64/acpi/virt", "HEST"),
];

/// One case's outcome: passed, or the tables it found different.
#[derive(Debug, PartialEq, Eq)]
pub struct Case {
    pub name: String,
    pub passed: bool,
    pub mismatched: Vec<String>,
}

impl Case {
    /// Whether the case is as it must be on QEMU `version`: passed, or
    /// failed only by the mismatches [`KNOWN`] lists for it.
    pub fn acceptable(&self, version: &str) -> bool {
        self.passed
            || (!self.mismatched.is_empty()
                && self
                    .mismatched
                    .iter()
                    .all(|t| KNOWN.contains(&(version, self.name.as_str(), t.as_str()))))
    }
}

/// The tables a case's log names as mismatched ("acpi-test: Warning! APIC
/// binary file mismatch. ...").
pub fn mismatched_tables(log: &str) -> Vec<String> {
    let mut t: Vec<String> = log
        .lines()
        .filter_map(|l| {
            l.split_once("acpi-test: Warning! ")?
                .1
                .split_once(" binary file mismatch")
        })
        .map(|(table, _)| table.to_string())
        .collect();
    t.dedup();
    t
}

/// Runs the test; writes `target/integration/bios-tables-test-V.md` and
/// returns whether every case is [`Case::acceptable`].
pub fn bios_tables_test(paths: &Paths, release: &'static QemuRelease) -> Result<bool> {
    let env = setup(paths, &[], &[release])?;
    let qemu = &env.qemus[0].binary;
    let build = qemu.parent().context("QEMU's build folder")?;
    let src = build.with_file_name("src");
    let step = Step::new(format!(
        "QEMU {}: ninja tests/qtest/bios-tables-test",
        release.label()
    ));
    run_logged(
        "bios-tables-test build (ninja)",
        ccache(paths, Command::new("ninja").current_dir(build)).arg("tests/qtest/bios-tables-test"),
        &build.join("ninja-bios-tables-test.log"),
    )?;
    step.done("built");
    let test = build.join("tests/qtest/bios-tables-test");

    let work = paths
        .work()
        .join(format!("bios-tables-test-{}", release.label()));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(work.join("pc-bios"))?;
    fs::create_dir_all(work.join("tests"))?;
    symlink(AAVMF_CODE, work.join("pc-bios/edk2-aarch64-code.fd"))?;
    symlink(AAVMF_VARS, work.join("pc-bios/edk2-arm-vars.fd"))?;
    symlink(src.join("tests/data"), work.join("tests/data"))?;

    let listed = run(
        "bios-tables-test -l",
        Command::new(&test)
            .current_dir(&work)
            .env("QTEST_QEMU_BINARY", qemu)
            .arg("-l"),
    )?;
    let names: Vec<String> = listed
        .lines()
        .filter(|l| l.starts_with("/aarch64/acpi/virt"))
        .map(str::to_string)
        .collect();
    let mut cases = Vec::new();
    for name in &names {
        let step = Step::new(format!("bios-tables-test -p {name}"));
        // -p takes every case below the path too: skip those.
        let below = names.iter().filter(|n| n.starts_with(&format!("{name}/")));
        let out = Command::new(&test)
            .current_dir(&work)
            .env("QTEST_QEMU_BINARY", qemu)
            .args(["-p", name])
            .args(below.flat_map(|n| ["-s", n.as_str()]))
            .output()
            .with_context(|| format!("running {}", test.display()))?;
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let file = name.trim_start_matches('/').replace('/', "_");
        fs::write(work.join(format!("{file}.log")), &log)?;
        let case = Case {
            name: name.clone(),
            passed: out.status.success(),
            mismatched: mismatched_tables(&log),
        };
        step.done(if case.passed { "ok" } else { "failed" });
        cases.push(case);
    }
    let mut md = format!(
        "# bios-tables-test on QEMU {} with qemu-patches/{}/\n\n\
         Debian's edk2 as the firmware. Logs in `{}`.\n\n\
         | case | result | tables that differ |\n|---|---|---|\n",
        release.label(),
        release.version,
        work.display()
    );
    for c in &cases {
        let result = match (c.passed, c.acceptable(release.version)) {
            (true, _) => "ok",
            (false, true) => "failed, as without the series",
            (false, false) => "FAILED",
        };
        md.push_str(&format!(
            "| `{}` | {result} | {} |\n",
            c.name,
            c.mismatched.join(", ")
        ));
    }
    let report = paths
        .work()
        .join(format!("bios-tables-test-{}.md", release.label()));
    write_atomic(&report, md.as_bytes())?;
    print!("{md}");
    let all = cases.iter().all(|c| c.acceptable(release.version));
    Ok(all && has_madt_case(&cases))
}

/// The plain virt case, whose expected MADT the series changes, ran.
fn has_madt_case(cases: &[Case]) -> bool {
    cases.iter().any(|c| c.name == "/aarch64/acpi/virt")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_mismatch_is_read_from_the_log_and_only_known_ones_are_accepted() {
        let log = "acpi-test: Warning! APIC binary file mismatch. Actual [aml:/tmp/a], Expected [aml:tests/data/acpi/aarch64/virt/APIC].\n\
                   acpi-test: Warning! APIC mismatch. Actual [asl:/tmp/b.dsl, aml:/tmp/a]\n";
        assert_eq!(mismatched_tables(log), vec!["APIC"]);
        let case = |name: &str, passed, t: &[&str]| Case {
            name: name.into(),
            passed,
            mismatched: t.iter().map(|s| s.to_string()).collect(),
        };
        let v = "10.2.2";
        assert!(case("/aarch64/acpi/virt", true, &[]).acceptable(v));
        assert!(!case("/aarch64/acpi/virt", false, &["APIC"]).acceptable(v));
        assert!(!case("/aarch64/acpi/virt", false, &["HEST", "APIC"]).acceptable(v));
        assert!(case("/aarch64/acpi/virt", false, &["HEST"]).acceptable(v));
        assert!(!case("/aarch64/acpi/virt", false, &["HEST"]).acceptable("11.1.3"));
        assert!(case("/aarch64/acpi/virt/memhp", false, &["SSDT"]).acceptable(v));
        assert!(!case("/aarch64/acpi/virt/memhp", false, &["SSDT", "APIC"]).acceptable(v));
        // A failure without a table named (a crash) is never accepted.
        assert!(!case("/aarch64/acpi/virt/memhp", false, &[]).acceptable(v));
    }
}
