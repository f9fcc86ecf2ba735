//! The kernel's `scripts/checkpatch.pl --strict` over guest-driver/, as a
//! kernel maintainer would run it: the script of the newest kernel of
//! the matrix, from its Debian `linux-source` package (only the script
//! and its two data files are kept). And QEMU's own over the QEMU series.

use crate::kernels::{Apt, KernelSpec};
use crate::setup::{Paths, QemuRelease};
use crate::util::{run, write_atomic, Step};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What checkpatch.pl reads besides itself.
const FILES: &[&str] = &["checkpatch.pl", "spelling.txt", "const_structs.checkpatch"];

/// The cached `scripts/` folder with checkpatch.pl, downloading the
/// newest kernel's source package once.
fn scripts(paths: &Paths) -> Result<PathBuf> {
    let spec = KernelSpec::newest();
    let apt = Apt::for_kernel(spec, &paths.cache)?;
    let pkg = format!("linux-source-{}", spec.name);
    let dir = paths.cache.join("checkpatch").join(&pkg);
    let scripts = dir.join(format!("{pkg}/scripts"));
    if dir.join(".complete").exists() {
        return Ok(scripts);
    }
    let step = Step::new(format!("{pkg}: checkpatch.pl from the kernel source"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir)?;
    let deb = apt.download(&pkg, &dir)?;
    let members: Vec<String> = FILES.iter().map(|f| format!("{pkg}/scripts/{f}")).collect();
    let script = format!(
        "dpkg-deb --fsys-tarfile \"$1\" | tar -xO ./usr/src/{pkg}.tar.xz | tar -xJ {}",
        members.join(" ")
    );
    run(
        &format!("unpacking checkpatch.pl from {}", deb.display()),
        Command::new("sh")
            .current_dir(&dir)
            .args(["-c", &script, "sh"])
            .arg(&deb),
    )?;
    fs::remove_file(&deb)?;
    if !scripts.join("checkpatch.pl").exists() {
        bail!("{pkg}: no scripts/checkpatch.pl after unpacking");
    }
    write_atomic(&dir.join(".complete"), b"ok\n")?;
    step.done("ready");
    Ok(scripts)
}

/// The sources of every module in guest-driver/ (a folder with a Kbuild).
fn driver_files(repo: &Path) -> Result<Vec<PathBuf>> {
    let mut files = Vec::new();
    for e in fs::read_dir(repo.join("guest-driver"))? {
        let d = e?.path();
        if !d.join("Kbuild").exists() {
            continue;
        }
        for f in fs::read_dir(&d)? {
            let p = f?.path();
            let name = p.file_name().unwrap_or_default().to_string_lossy();
            if name == "Kbuild"
                || name == "Makefile"
                || p.extension().is_some_and(|x| x == "c" || x == "h")
            {
                files.push(p);
            }
        }
    }
    files.sort();
    Ok(files)
}

/// checkpatch.pl --strict on every guest driver source; fails on any
/// error, warning or check.
pub fn check(paths: &Paths) -> Result<()> {
    let scripts = scripts(paths)?;
    let files = driver_files(&paths.repo)?;
    let step = Step::new(format!(
        "checkpatch.pl --strict on {} guest-driver file(s)",
        files.len()
    ));
    // It leaves a camel-case cache in its working directory.
    let out = Command::new("perl")
        .current_dir(&scripts)
        .arg(scripts.join("checkpatch.pl"))
        .args(["--strict", "--no-tree", "--quiet", "--file"])
        .args(&files)
        .output()
        .context("running perl checkpatch.pl")?;
    if !out.status.success() {
        bail!(
            "checkpatch.pl --strict found problems:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    step.done("clean");
    Ok(())
}

/// QEMU's `scripts/checkpatch.pl` from `tree` on each patch of the
/// series; fails on a patch it rejects (an error; its warnings are
/// printed).
pub fn check_qemu_series(paths: &Paths, release: &QemuRelease, tree: &Path) -> Result<()> {
    let patches = crate::setup::series_patches(&release.patch_dir(&paths.repo))?;
    let step = Step::new(format!(
        "QEMU's checkpatch.pl on the {} patches of qemu-patches/{}/",
        patches.len(),
        release.version
    ));
    let mut rejected = Vec::new();
    let mut warned = 0;
    for p in &patches {
        let out = Command::new("perl")
            .current_dir(tree)
            .arg("scripts/checkpatch.pl")
            .arg(p)
            .output()
            .context("running QEMU's checkpatch.pl")?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        if !out.status.success() {
            rejected.push(format!("{name}:\n{text}"));
        } else if text.contains("WARNING:") {
            warned += 1;
            eprintln!("    {name}:\n{text}");
        }
    }
    if !rejected.is_empty() {
        bail!("QEMU's checkpatch.pl rejects:\n{}", rejected.join("\n"));
    }
    step.done(&if warned == 0 {
        "clean".to_string()
    } else {
        format!("no errors; {warned} with warnings (above)")
    });
    Ok(())
}
