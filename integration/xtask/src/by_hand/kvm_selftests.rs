//! The kernel's own KVM selftests in the test guest (`cargo xtask
//! kvm-selftests`, by hand): built for arm64 from the kernel's Debian
//! source package (`linux-source-X.Y` of its suite), added to the
//! harness's initramfs as a second cpio archive, and run by
//! `kvm-selftests.sh`, alone and while perf records SPE system-wide, in
//! each of KVM's modes. A test whose outcome differs with SPE recording
//! fails the command: a finding to write down with its logs.

use crate::initramfs::{Archive, Node};
use crate::kernels::Apt;
use crate::kvm;
use crate::runner::{GuestRun, Measure, Rig};
use crate::scenario::SpeRun;
use crate::setup::Paths;
use crate::util::{run, Step};
use crate::workloads::{check_static_aarch64, CC};
use anyhow::{bail, Context, Result};
use spe_protocol::profile::CpuProfile;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The selftests run, by their path under tools/testing/selftests/kvm
/// (`arm64/` is `aarch64/` before 6.14; a test the source lacks is left
/// out): the ID registers KVM gives a guest (PMSVer among them), the
/// debug state MDCR_EL2 also holds, the PMU, and the registers KVM lists.
pub const TESTS: &[&str] = &[
    "arm64/set_id_regs",
    "arm64/debug-exceptions",
    "arm64/vpmu_counter_access",
    "get-reg-list",
];

/// Where the guest script finds them.
const GUEST_DIR: &str = "usr/lib/kvm-selftests";

/// `cargo xtask kvm-selftests` on `rig`'s kernel: whether every test
/// had the same outcome with and without SPE recording, in each of
/// `modes`.
pub fn run_selftests(paths: &Paths, mut rig: Rig, modes: &[&str]) -> Result<bool> {
    let bins = build(paths, &rig)?;
    rig.initrd = with_selftests(&rig.initrd, &bins)?;
    let mut table = format!(
        "# KVM selftests on {} with and without SPE recording\n\n\
         `cargo xtask kvm-selftests --kernel {}{}`; each test alone, then under \
         `perf record -e arm_spe_0/ts_enable=1/ -a`. Exit status 0 passed, 4 \
         skipped; totals are KTAP's pass/fail/skip/error.\n\n\
         | mode | test | alone | with SPE | totals alone | totals with SPE | records |\n\
         |---|---|---|---|---|---|---|\n",
        rig.spec.name,
        rig.spec.name,
        match modes {
            [m] => format!(" --mode {m}"),
            _ => String::new(),
        }
    );
    let mut same = true;
    for &mode in modes {
        let out = rig.run(&GuestRun {
            scenario: "kvm-selftests".into(),
            params: Vec::new(),
            run_name: format!("kvm-selftests-{mode}"),
            backend: true,
            timeout: Duration::from_secs(3600),
            kill_backend_when: None,
            spe: Some(SpeRun {
                virtualization: true,
                kernel_args: kvm::kernel_args(mode),
                ..SpeRun::new(CpuProfile::NeoverseN1)
            }),
            measure: Measure::Nothing,
        })?;
        let rows = rows(&out.console);
        if out.result("kvm_mode") != Some(mode) || rows.len() != bins.len() {
            eprintln!(
                "==> {mode}: KVM in mode {:?}, {} of {} tests reported ({})",
                out.result("kvm_mode"),
                rows.len(),
                bins.len(),
                out.dir.display()
            );
            same = false;
        }
        for r in &rows {
            let differs = r.plain_rc != r.spe_rc || r.plain_totals != r.spe_totals;
            same &= !differs && r.bad_packets == "0";
            table += &format!(
                "| {mode} | `{}` | {} | {}{} | {} | {} | {} |\n",
                r.name,
                outcome(&r.plain_rc),
                outcome(&r.spe_rc),
                if differs { " (differs)" } else { "" },
                r.plain_totals,
                r.spe_totals,
                r.records
            );
        }
    }
    let file = paths.target.join("integration/kvm-selftests.md");
    fs::write(&file, &table).with_context(|| format!("writing {}", file.display()))?;
    print!("{table}");
    eprintln!("==> {}", file.display());
    Ok(same)
}

/// An exit status in words.
fn outcome(rc: &str) -> String {
    match rc {
        "0" => "pass".into(),
        "4" => "skip".into(),
        rc => format!("fail ({rc})"),
    }
}

/// One `SPE-RESULT kvm_selftest=…` line of the guest script.
#[derive(Debug, Default, PartialEq, Eq)]
struct Row {
    name: String,
    plain_rc: String,
    spe_rc: String,
    plain_totals: String,
    spe_totals: String,
    records: String,
    bad_packets: String,
}

fn rows(console: &str) -> Vec<Row> {
    console
        .lines()
        .filter_map(|l| l.trim().strip_prefix("SPE-RESULT kvm_selftest="))
        .map(|l| {
            let mut words = l.split_whitespace();
            let mut r = Row {
                name: words.next().unwrap_or_default().into(),
                ..Row::default()
            };
            for (k, v) in words.filter_map(|w| w.split_once('=')) {
                let field = match k {
                    "plain_rc" => &mut r.plain_rc,
                    "spe_rc" => &mut r.spe_rc,
                    "plain_totals" => &mut r.plain_totals,
                    "spe_totals" => &mut r.spe_totals,
                    "spe_records" => &mut r.records,
                    "spe_bad_packets" => &mut r.bad_packets,
                    _ => continue,
                };
                *field = v.into();
            }
            r
        })
        .collect()
}

/// The selftests of `rig`'s kernel, built once into the cache (static
/// aarch64 executables).
fn build(paths: &Paths, rig: &Rig) -> Result<Vec<PathBuf>> {
    let spec = rig.spec;
    let dir = paths.cache.join("kvm-selftests").join(spec.name);
    let bin = dir.join("bin");
    let done = dir.join(".complete");
    if !done.exists() {
        let step = Step::new(format!("KVM selftests of {}", spec.name));
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        let debs = dir.join("debs");
        fs::create_dir_all(&debs)?;
        let apt = Apt::for_kernel(spec, &paths.cache)?;
        if !apt.lists_present() {
            apt.update()?;
        }
        let package = format!("linux-source-{}", spec.name);
        let deb = apt.download(&package, &debs)?;
        let unpacked = dir.join("deb");
        run(
            "unpacking the source package",
            Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked),
        )?;
        let tarball = unpacked.join(format!("usr/src/{package}.tar.xz"));
        run(
            "unpacking the kernel source",
            Command::new("tar")
                .arg("-xf")
                .arg(&tarball)
                .arg("-C")
                .arg(&dir),
        )?;
        let src = dir.join(&package);
        let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
        run(
            "make headers",
            Command::new("make").arg("-C").arg(&src).args([
                "ARCH=arm64",
                "headers",
                &format!("-j{jobs}"),
            ]),
        )?;
        let kvm = src.join("tools/testing/selftests/kvm");
        let tests: Vec<PathBuf> = TESTS
            .iter()
            .filter_map(|t| {
                let old = t.replacen("arm64/", "aarch64/", 1);
                [kvm.join(t), kvm.join(old)]
                    .into_iter()
                    .find(|p| p.with_extension("c").is_file())
            })
            .collect();
        if tests.is_empty() {
            bail!("{} has none of the selftests {TESTS:?}", kvm.display());
        }
        let cross = CC.strip_suffix("gcc").unwrap_or(CC);
        run(
            "make the KVM selftests",
            Command::new("make")
                .arg("-C")
                .arg(&kvm)
                .args([
                    "ARCH=arm64",
                    &format!("CROSS_COMPILE={cross}"),
                    "LDFLAGS=-static",
                    &format!("-j{jobs}"),
                ])
                .args(&tests),
        )?;
        fs::create_dir_all(&bin)?;
        for t in &tests {
            let bytes = fs::read(t).with_context(|| format!("reading {}", t.display()))?;
            check_static_aarch64(&bytes).with_context(|| format!("{}", t.display()))?;
            fs::write(
                bin.join(t.file_name().context("a test has no name")?),
                bytes,
            )?;
        }
        // The source is large and read only for the build.
        fs::remove_dir_all(&src)?;
        fs::remove_dir_all(&unpacked)?;
        fs::write(&done, "")?;
        step.done(&format!("{} test(s)", tests.len()));
    }
    let mut bins: Vec<PathBuf> = fs::read_dir(&bin)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    bins.sort();
    Ok(bins)
}

/// `initrd` with a second cpio archive appended that holds `bins` in
/// [`GUEST_DIR`]: the kernel unpacks one archive after another.
fn with_selftests(initrd: &Path, bins: &[PathBuf]) -> Result<PathBuf> {
    let mut a = Archive::default();
    a.add(GUEST_DIR, Node::Dir);
    for b in bins {
        let name = b.file_name().context("a test has no name")?;
        a.add(
            &format!("{GUEST_DIR}/{}", name.to_string_lossy()),
            Node::File(b.clone(), 0o755),
        );
    }
    let extra = initrd.with_extension("kvm-selftests.part");
    a.write(&extra)?;
    let mut bytes = fs::read(initrd).with_context(|| format!("reading {}", initrd.display()))?;
    // Each archive starts on a 4-byte boundary; pad to a block.
    bytes.resize(bytes.len().div_ceil(512) * 512, 0);
    bytes.extend(fs::read(&extra)?);
    let out = initrd.with_extension("kvm-selftests.cpio");
    fs::write(&out, bytes).with_context(|| format!("writing {}", out.display()))?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_tests_line_becomes_a_row() {
        let console = "SPE-RESULT kvm_mode=vhe\n\
            SPE-RESULT kvm_selftest=set_id_regs plain_rc=0 spe_rc=0 perf_rc=0 \
            plain_totals=80/0/2/0 spe_totals=80/0/2/0 spe_records=1234 spe_bad_packets=0\n\
            SPE-RESULT kvm_selftest=vpmu_counter_access plain_rc=4 spe_rc=1 perf_rc=0 \
            plain_totals= spe_totals= spe_records=7 spe_bad_packets=0\n";
        let r = rows(console);
        assert_eq!(r.len(), 2);
        assert_eq!(r[0].name, "set_id_regs");
        assert_eq!(
            (r[0].plain_totals.as_str(), r[0].records.as_str()),
            ("80/0/2/0", "1234")
        );
        assert_eq!((r[1].plain_rc.as_str(), r[1].spe_rc.as_str()), ("4", "1"));
        assert_eq!(outcome(&r[1].plain_rc), "skip");
        assert_eq!(outcome(&r[1].spe_rc), "fail (1)");
        assert!(rows("SPE-RESULT kvm_mode=vhe").is_empty());
    }
}
