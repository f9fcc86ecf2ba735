//! The patched QEMU: its source (Debian's tarball), the patch series
//! applied, configured and built once per series.

use super::{setup, Paths, QEMU_TARBALL, QEMU_VERSION};
use crate::host::BACKPORTS;
use crate::util::{run, run_logged, write_atomic, Step};
use anyhow::{anyhow, bail, Context, Result};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
/// The series' patches in order: every `*.patch` of `patch_dir` but the
/// cover letter (`0000-cover-letter.patch`), which changes no file.
pub fn series_patches(patch_dir: &Path) -> Result<Vec<PathBuf>> {
    let mut patches: Vec<PathBuf> = fs::read_dir(patch_dir)
        .with_context(|| format!("reading {}", patch_dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "patch"))
        .filter(|p| !p.ends_with("0000-cover-letter.patch"))
        .collect();
    patches.sort();
    Ok(patches)
}

/// Hash of the QEMU version and every patch of the series, in name order:
/// the key of the QEMU build directory.
pub fn series_key(patch_dir: &Path) -> Result<String> {
    let patches = series_patches(patch_dir)?;
    let mut h = Sha256::new();
    h.update(format!("{QEMU_VERSION}\n"));
    for p in &patches {
        h.update(fs::read(p).with_context(|| format!("reading {}", p.display()))?);
    }
    let digest = h.finalize();
    Ok(digest.iter().take(8).map(|b| format!("{b:02x}")).collect())
}

/// QEMU's configure options: the one target, what the guests use.
pub(super) const CONFIGURE: &[&str] = &[
    "--target-list=aarch64-softmmu",
    "--enable-plugins",
    "--disable-docs",
    "--disable-werror",
    "--enable-slirp",
    "--enable-fdt=system",
    "--enable-capstone",
    "--disable-download",
    "--disable-tools",
    "--disable-guest-agent",
    "--disable-rust",
    "--disable-install-blobs",
];

/// Builds the patched `qemu-system-aarch64` once per patch series.
/// `SPE_QEMU=/path/to/qemu-system-aarch64` uses that binary instead, for
/// iterating on a patch in a QEMU tree without a full rebuild per edit.
pub(super) fn qemu(paths: &Paths) -> Result<PathBuf> {
    if let Some(q) = std::env::var_os("SPE_QEMU").filter(|q| !q.is_empty()) {
        let q = PathBuf::from(q);
        if !q.is_file() {
            bail!("SPE_QEMU={} is not a file", q.display());
        }
        eprintln!("==> QEMU from SPE_QEMU: {}", q.display());
        return Ok(q);
    }
    let patch_dir = paths.repo.join("qemu-patches");
    let key = series_key(&patch_dir)?;
    let dir = paths
        .cache
        .join("qemu")
        .join(format!("{QEMU_VERSION}-{key}"));
    let build = dir.join("build");
    let binary = build.join("qemu-system-aarch64");
    let complete = dir.join(".complete");
    if complete.exists() && binary.exists() {
        return Ok(binary);
    }
    fs::create_dir_all(&dir)?;

    let tarball = qemu_source(paths)?;
    let src = dir.join("src");
    let src_ok = dir.join(".src-complete");
    if !src_ok.exists() {
        let step = Step::new(format!(
            "QEMU {QEMU_VERSION}: unpacking and applying qemu-patches/"
        ));
        let _ = fs::remove_dir_all(&src);
        unpack(&tarball, &src)?;
        apply_series(&patch_dir, &src)?;
        write_atomic(&src_ok, b"ok\n")?;
        step.done("ready");
    }

    if !build.join("build.ninja").exists() {
        let step = Step::new("QEMU: configure");
        let _ = fs::remove_dir_all(&build);
        configure(&src, &build)?;
        step.done("configured");
    }

    let jobs = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let step = Step::new(format!(
        "QEMU: ninja -j{jobs} qemu-system-aarch64 (about 8 min on 2 cores; log in {})",
        build.join("ninja.log").display()
    ));
    run_logged(
        "QEMU build (ninja)",
        Command::new("ninja")
            .current_dir(&build)
            .arg(format!("-j{jobs}"))
            .arg("qemu-system-aarch64"),
        &build.join("ninja.log"),
    )?;
    write_atomic(&complete, b"ok\n")?;
    step.done("built");
    Ok(binary)
}

/// Unpacks the QEMU tarball into `src` (created), with the firmware
/// placeholders its meson wants.
pub(super) fn unpack(tarball: &Path, src: &Path) -> Result<()> {
    fs::create_dir_all(src)?;
    run(
        "unpacking the QEMU source",
        Command::new("tar")
            .arg("xf")
            .arg(tarball)
            .arg("-C")
            .arg(src)
            .arg("--strip-components=1"),
    )?;
    edk2_placeholders(src)
}

/// Configures a build of `src` in `build` (created) with [`CONFIGURE`].
pub(super) fn configure(src: &Path, build: &Path) -> Result<()> {
    fs::create_dir_all(build)?;
    run_logged(
        "QEMU configure",
        Command::new(src.join("configure"))
            .current_dir(build)
            // The default python3 may be a pyenv build that cannot see
            // Debian's meson.
            .arg("--python=/usr/bin/python3")
            .args(CONFIGURE),
        &build.join("configure.log"),
    )
}

/// `cargo xtask series-build`: applies `qemu-patches/` one patch at a
/// time to a clean QEMU tree and builds `qemu-system-aarch64` after each,
/// so that a patch that does not build on its own is found (a posted
/// series must bisect). Slow, one build per patch (the first a full one):
/// run by hand, not by `.ci/run`. Writes a table to
/// `target/integration/series-build.md`; returns whether every patch built.
pub fn series_build(paths: &Paths) -> Result<bool> {
    // The host's packages and the source tarball, as for the real build.
    setup(paths, &[])?;
    let tarball = qemu_source(paths)?;
    let work = paths.target.join("integration").join("series-build");
    let (src, build) = (work.join("src"), work.join("build"));
    let _ = fs::remove_dir_all(&work);
    unpack(&tarball, &src)?;
    configure(&src, &build)?;
    let patches = series_patches(&paths.repo.join("qemu-patches"))?;
    let mut table = format!(
        "# qemu-patches/ built one patch at a time on QEMU {QEMU_VERSION}\n\n| patch | builds | seconds |\n|---|---|---|\n"
    );
    let out = paths.target.join("integration").join("series-build.md");
    let mut all = true;
    for p in &patches {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        let step = Step::new(format!("series-build: {name}"));
        let t = std::time::Instant::now();
        run(
            &format!("applying {name}"),
            Command::new("git")
                .current_dir(&src)
                .env("GIT_CEILING_DIRECTORIES", &work)
                .args(["apply", "-p1", "--whitespace=nowarn"])
                .arg(p),
        )?;
        let log = build.join(format!("{name}.log"));
        let built = run_logged(
            &format!("building with {name}"),
            Command::new("ninja")
                .current_dir(&build)
                .arg("qemu-system-aarch64"),
            &log,
        )
        .is_ok();
        all &= built;
        let secs = t.elapsed().as_secs();
        table.push_str(&format!(
            "| `{name}` | {} | {secs} |\n",
            if built { "yes" } else { "**no**" }
        ));
        step.done(if built {
            "built"
        } else {
            "does not build (see its log)"
        });
        // Written as it goes: a run stopped half-way keeps its rows.
        fs::write(&out, &table)?;
    }
    print!("{table}");
    eprintln!("==> {} (build logs in {})", out.display(), build.display());
    Ok(all)
}

/// Fetches QEMU's upstream tarball through Debian's source package.
pub(super) fn qemu_source(paths: &Paths) -> Result<PathBuf> {
    let dl = paths.cache.join("downloads");
    fs::create_dir_all(&dl)?;
    let tarball = dl.join(QEMU_TARBALL);
    if tarball.exists() {
        return Ok(tarball);
    }
    let step = Step::new(format!(
        "apt-get source qemu ({QEMU_VERSION}, bookworm-backports)"
    ));
    // The mirror serves the orig tarball but not always the .dsc/.debian
    // parts, so apt may exit non-zero; the tarball is what counts.
    let res = run(
        "apt-get source qemu",
        Command::new("apt-get").current_dir(&dl).args([
            "source",
            "--download-only",
            "-t",
            BACKPORTS,
            "qemu",
        ]),
    );
    if !tarball.exists() {
        let found: Vec<String> = fs::read_dir(&dl)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("qemu_"))
            .collect();
        return Err(match res {
            Err(e) => e.context(format!("QEMU source: {QEMU_TARBALL} was not downloaded")),
            Ok(_) => anyhow!(
                "QEMU source: expected {QEMU_TARBALL} from bookworm-backports, got {found:?}"
            ),
        });
    }
    step.done("downloaded");
    Ok(tarball)
}

/// Applies the format-patch series in order. `git apply` works outside a
/// repository; the ceiling stops it from finding one above the cache.
pub(super) fn apply_series(patch_dir: &Path, src: &Path) -> Result<()> {
    for p in series_patches(patch_dir)? {
        run(
            &format!("applying {}", p.display()),
            Command::new("git")
                .current_dir(src)
                .env("GIT_CEILING_DIRECTORIES", src.parent().unwrap_or(src))
                .args(["apply", "-p1", "--whitespace=nowarn"])
                .arg(&p),
        )?;
    }
    Ok(())
}

/// The +ds tarball drops the EDK2 firmware images but meson still wants their
/// .bz2 inputs; `-kernel` boots need no firmware, so empty bzip2 streams do.
pub(super) fn edk2_placeholders(src: &Path) -> Result<()> {
    const EMPTY_BZ2: &[u8] = b"BZh9\x17\x72\x45\x38\x50\x90\x00\x00\x00\x00";
    let meson = fs::read_to_string(src.join("pc-bios/meson.build"))
        .context("reading pc-bios/meson.build")?;
    for word in meson.split('\'') {
        if word.starts_with("edk2-") && word.ends_with(".fd") {
            let p = src.join("pc-bios").join(format!("{word}.bz2"));
            if !p.exists() {
                fs::write(&p, EMPTY_BZ2)?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_key_changes_with_the_patches() {
        let d = std::env::temp_dir().join(format!("xtask-key-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("0001-a.patch"), "one").unwrap();
        let k1 = series_key(&d).unwrap();
        fs::write(d.join("README"), "ignored").unwrap();
        fs::write(d.join("0000-cover-letter.patch"), "no diff").unwrap();
        assert_eq!(k1, series_key(&d).unwrap());
        assert_eq!(series_patches(&d).unwrap(), vec![d.join("0001-a.patch")]);
        fs::write(d.join("0002-b.patch"), "two").unwrap();
        assert_ne!(k1, series_key(&d).unwrap());
        fs::remove_dir_all(&d).unwrap();
    }
}
