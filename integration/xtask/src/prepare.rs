//! What every guest run needs: the set-up, the release build of the
//! backend, launcher and plugin, the guest modules and initramfs, as one
//! [`Rig`] per QEMU release and kernel.

use crate::kernels::KernelSpec;
use crate::runner::Rig;
use crate::scenario::VCPUS;
use crate::setup::{self, Paths, QemuRelease};
use crate::util::{self, Step};
use crate::{initramfs, install, workloads};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

/// Set-up, the backend binary and the guest images: everything a run
/// needs, one rig per QEMU release and kernel (release by release).
pub fn prepare(
    paths: &Paths,
    kernels: &[&'static KernelSpec],
    releases: &[&'static QemuRelease],
) -> Result<Vec<Rig>> {
    let t = Instant::now();
    let env = setup::setup(paths, kernels, releases)?;
    let backend = build_backend(paths)?;
    let work = paths.work();
    std::fs::create_dir_all(&work)?;
    // Each QEMU installed with the backend and `spe-qemu` in its own
    // prefix (`cargo xtask install`'s layout), for the launcher's runs.
    let mut launchers = Vec::new();
    for q in &env.qemus {
        let prefix = if q.release.is_main() {
            work.join("prefix")
        } else {
            work.join(format!("prefix-{}", q.release.label()))
        };
        // The stock path runs the user's own QEMU (`--spe-qemu`).
        launchers.push(install::install(
            (!q.release.stock).then_some(q.binary.as_path()),
            &paths.target.join("release"),
            &prefix,
        )?);
    }
    let mut programs = workloads::build(
        &paths.repo.join("integration/guest/workloads"),
        &work.join("workloads"),
    )?;
    programs.extend(workloads::build_suite(
        &paths.repo.join(workloads::SUITE_DIR),
        &work.join("selftests"),
    )?);
    let mut images = Vec::new();
    for g in env.guests {
        let initrd = work.join(format!("initramfs-{}.cpio", g.guest.kver));
        let modules = guest_modules(paths, &g.guest)?;
        let t_img = Instant::now();
        initramfs::build(
            &g.guest,
            Some(&g.perf),
            &paths.repo.join("integration/guest"),
            &modules,
            &programs,
            &initrd,
        )
        .with_context(|| format!("building the guest initramfs for {}", g.guest.kver))?;
        eprintln!(
            "==> initramfs {} ({} MB) in {:.1} s (kernel {} from {})",
            initrd.display(),
            std::fs::metadata(&initrd)?.len() >> 20,
            t_img.elapsed().as_secs_f64(),
            g.guest.kver,
            g.guest.kpkg_version,
        );
        images.push((g, initrd, !modules.is_empty()));
    }
    let mut rigs = Vec::new();
    for (q, launcher) in env.qemus.iter().zip(&launchers) {
        for (g, initrd, has_extra_modules) in &images {
            // The main QEMU's runs keep their folders' names.
            let runs = if q.release.is_main() {
                g.spec.name.to_string()
            } else {
                format!("{}-qemu-{}", g.spec.name, q.release.label())
            };
            rigs.push(Rig {
                spec: g.spec,
                qemu: q.binary.clone(),
                qemu_release: q.release,
                kernel: g.guest.kernel.clone(),
                initrd: initrd.clone(),
                backend: backend.clone(),
                launcher: launcher.clone(),
                runs_dir: work.join("runs").join(runs),
                pin_vcpu0: false,
                vcpus: VCPUS,
                has_extra_modules: *has_extra_modules,
                grub_efi: env.grub_efi.clone(),
            });
        }
    }
    let versions: Vec<String> = env.qemus.iter().map(|q| q.release.label()).collect();
    eprintln!(
        "==> set-up complete in {:.1} s (QEMU {})",
        t.elapsed().as_secs_f64(),
        versions.join(", ")
    );
    Ok(rigs)
}

/// Cross-builds the guest drivers (each folder of `guest-driver/`) and
/// every test module under `integration/guest/modules/` against the
/// Debian headers, each in a copy so the source tree stays clean. The
/// modules land in the initramfs under lib/modules/<kver>/extra.
fn guest_modules(paths: &Paths, guest: &setup::Guest) -> Result<Vec<PathBuf>> {
    let Some(headers) = &guest.headers else {
        return Ok(Vec::new());
    };
    let mut dirs = Vec::new();
    for (top, label) in [
        ("guest-driver", "guest-driver"),
        ("integration/guest/modules", "modules"),
    ] {
        let top = paths.repo.join(top);
        if !top.is_dir() {
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(&top)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        found.sort();
        for d in found {
            let name = format!("{label}/{}", d.file_name().unwrap().to_string_lossy());
            dirs.push((name, d));
        }
    }
    let mut kos = Vec::new();
    for (name, src) in dirs {
        kos.extend(build_module_dir(paths, headers, &guest.kver, &name, &src)?);
    }
    Ok(kos)
}

/// `make modules` for one module directory (`name` is its build directory
/// under the work directory and its label), if it has a Kbuild or Makefile.
fn build_module_dir(
    paths: &Paths,
    headers: &Path,
    kver: &str,
    name: &str,
    src: &Path,
) -> Result<Vec<PathBuf>> {
    if !src.join("Kbuild").exists() && !src.join("Makefile").exists() {
        return Ok(Vec::new());
    }
    let step = Step::new(format!("{name}: cross-building the module"));
    let build = paths.work().join(kver).join(name);
    let _ = std::fs::remove_dir_all(&build);
    std::fs::create_dir_all(&build)?;
    for e in std::fs::read_dir(src)? {
        let p = e?.path();
        if p.is_file() {
            std::fs::copy(&p, build.join(p.file_name().unwrap()))?;
        }
    }
    util::run(
        &format!("{name}: make modules (aarch64-linux-gnu-gcc, Debian headers)"),
        Command::new("make")
            .arg("-C")
            .arg(headers)
            .arg(format!("M={}", build.display()))
            .args(["ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-", "modules"]),
    )?;
    let mut kos: Vec<PathBuf> = std::fs::read_dir(&build)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ko"))
        .collect();
    kos.sort();
    step.done(&format!("{} module(s)", kos.len()));
    Ok(kos)
}

pub fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// The guests get the release build: a debug backend writes records about
/// 20 times slower, and under QEMU's sampler it, not the guest, was the
/// bottleneck (about 450 k records/s).
pub fn build_backend(paths: &Paths) -> Result<PathBuf> {
    let what = "cargo build --release -p vhost-device-spe -p spe-qemu -p spe-plugin";
    let step = Step::new(what);
    let st = cargo()
        .current_dir(&paths.repo)
        .args(["build", "--quiet", "--release"])
        .args([
            "-p",
            "vhost-device-spe",
            "-p",
            "spe-qemu",
            "-p",
            "spe-plugin",
        ])
        .status()
        .context("starting cargo build --release")?;
    if !st.success() {
        bail!("{what} failed ({st})");
    }
    step.done("built");
    Ok(paths.target.join("release/vhost-device-spe"))
}
