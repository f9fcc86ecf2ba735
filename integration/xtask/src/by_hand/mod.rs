//! The tools run by hand, not in CI: the overhead benchmark, the soak,
//! the LAVA job and its lab, virtme-ng, the KVM selftests, and the QEMU series'
//! workflow.

pub mod bench;
pub mod kvm_selftests;
pub mod lab;
pub mod lava;
pub mod soak;
pub mod vng;

use crate::cli::Bench;
use crate::host;
use crate::kernels::{self, KernelSpec};
use crate::prepare::prepare;
use crate::runner::{self, Measure};
use crate::setup::{self, Paths, QemuRelease};
use anyhow::{bail, Result};
use std::path::{Path, PathBuf};

/// `cargo xtask bench-overhead`.
pub fn bench_overhead(o: &Bench) -> Result<bool> {
    let instructions = o.instructions.is_some();
    // A count does not vary with the machine: one run each.
    let runs = o
        .runs
        .map_or(if instructions { 1 } else { 3 }, |n| n as usize);
    // Callgrind's QEMU runs one TCG thread (icount implies it).
    if instructions && o.vcpus > 1 && o.qemu.release.is_some_and(|q| q.stock) {
        bail!(
            "--qemu stock --instructions needs --vcpus 1: on one TCG thread QEMU \
             10.2.2 instruments several vCPUs wrongly and the plugin does not \
             sample (plugin/src/threads.rs)"
        );
    }
    if o.ab.len() == 1 {
        bail!("--ab compares builds: give two or more");
    }
    let paths = Paths::discover()?;
    // The overhead is measured on the kernel BENCHMARKS.md names.
    // `--qemu stock`: the stock-QEMU path's rows on the unpatched build.
    let release = o.qemu.release.unwrap_or_else(QemuRelease::main);
    let mut rig = prepare(&paths, &[&kernels::MATRIX[0]], &[release])?.remove(0);
    rig.pin_vcpu0 = o.pin;
    rig.vcpus = o.vcpus;
    let measure = match o.instructions {
        Some(c) => {
            host::install_missing(&[runner::callgrind::PACKAGE])?;
            Measure::Instructions(c)
        }
        None => Measure::Nothing,
    };
    if o.ab.is_empty() {
        return bench::run(&rig, runs, measure, o.rows.as_deref());
    }
    // The default period, or the one row asked for.
    let row = match o.rows.as_deref() {
        None => 4,
        Some(&[n]) => n,
        Some(_) => bail!("--rows: --ab compares one row with spe=off"),
    };
    bench::run_ab(&rig, runs, &o.ab, row, measure)
}

/// `cargo xtask soak`.
pub fn soak(options: &soak::Options, kernel: &'static KernelSpec) -> Result<bool> {
    let paths = Paths::discover()?;
    let rig = prepare(&paths, &[kernel], &[QemuRelease::main()])?.remove(0);
    soak::soak(&rig, options)
}

/// `cargo xtask lava`.
pub fn lava(kernel: &'static KernelSpec) -> Result<bool> {
    let paths = Paths::discover()?;
    let rig = prepare(&paths, &[kernel], &[QemuRelease::main()])?.remove(0);
    lava::run_lava(&rig, &paths.repo, &paths.target.join("integration"))
}

/// `cargo xtask lab`.
pub fn lab(kernels: &[&'static KernelSpec], remove: bool) -> Result<bool> {
    let paths = Paths::discover()?;
    let work = paths.target.join("integration");
    if remove {
        return lab::remove(&work);
    }
    let rigs = prepare(&paths, kernels, &[QemuRelease::main()])?;
    lab::run_lab(&rigs, &paths.repo, &work)
}

/// `cargo xtask virtme-ng`.
pub fn virtme_ng(kernel: &'static KernelSpec) -> Result<bool> {
    let paths = Paths::discover()?;
    let rig = prepare(&paths, &[kernel], &[QemuRelease::main()])?.remove(0);
    vng::run_vng(&rig, &paths.target.join("integration"))
}

/// `cargo xtask kvm-selftests`.
pub fn kvm_selftests(kernel: &'static KernelSpec, mode: Option<String>) -> Result<bool> {
    let paths = Paths::discover()?;
    let rig = prepare(&paths, &[kernel], &[QemuRelease::main()])?.remove(0);
    let modes: Vec<&str> = match &mode {
        Some(m) => vec![m.as_str()],
        None => crate::kvm::MODES.to_vec(),
    };
    kvm_selftests::run_selftests(&paths, rig, &modes)
}

/// `cargo xtask series-tree DIR`.
pub fn series_tree(dir: &Path) -> Result<bool> {
    let paths = Paths::discover()?;
    setup::new_series_tree(&paths, QemuRelease::main(), dir)?;
    Ok(true)
}

/// `cargo xtask series-export [--check] DIR`: DIR is series-tree's, or
/// its `src`.
pub fn series_export(dir: &Path, check: bool) -> Result<bool> {
    let paths = Paths::discover()?;
    let release = QemuRelease::main();
    let tree = match dir.join("src") {
        t if t.join(".git").is_dir() => t,
        _ => PathBuf::from(dir),
    };
    if check {
        setup::check_round_trip(&paths, release, &tree)?;
        println!(
            "qemu-patches/{}/ is {}'s branch",
            release.version,
            tree.display()
        );
    } else {
        setup::series_export(&paths, release, &tree)?;
    }
    Ok(true)
}

/// Runs `check` on the series of `qemu`, or of every patched release;
/// whether each passed.
pub fn each_series(
    cmd: &str,
    qemu: Option<&'static QemuRelease>,
    check: fn(&Paths, &'static QemuRelease) -> Result<bool>,
) -> Result<bool> {
    let paths = Paths::discover()?;
    let releases = match qemu {
        Some(q) if q.stock => bail!("{cmd}: QEMU {} has no series", q.label()),
        Some(q) => vec![q],
        None => QemuRelease::patched().collect(),
    };
    let mut all = true;
    for release in releases {
        all &= check(&paths, release)?;
    }
    Ok(all)
}
