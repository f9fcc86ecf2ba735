//! The patched QEMUs: each release's source (Debian's tarball), its patch
//! series applied, configured and built once per series.

use super::{setup, Paths, QemuRelease, QemuSource};
use crate::host::BACKPORTS;
use crate::kernels::Apt;
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
pub fn series_key(patch_dir: &Path, version: &str) -> Result<String> {
    let patches = series_patches(patch_dir)?;
    let mut h = Sha256::new();
    h.update(format!("{version}\n"));
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

/// Builds the patched `qemu-system-aarch64` of `release` once per patch
/// series. `SPE_QEMU=/path/to/qemu-system-aarch64` (the release's
/// `override_var`) uses that binary instead, for iterating on a patch in a
/// QEMU tree without a full rebuild per edit.
pub(super) fn qemu(paths: &Paths, release: &QemuRelease) -> Result<PathBuf> {
    let var = release.override_var;
    if let Some(q) = std::env::var_os(var).filter(|q| !q.is_empty()) {
        let q = PathBuf::from(q);
        if !q.is_file() {
            bail!("{var}={} is not a file", q.display());
        }
        eprintln!("==> QEMU {} from {var}: {}", release.label(), q.display());
        return Ok(q);
    }
    let version = release.version;
    let patch_dir = release.patch_dir(&paths.repo);
    let dir = if release.stock {
        paths.cache.join("qemu").join(release.label())
    } else {
        let key = series_key(&patch_dir, version)?;
        paths.cache.join("qemu").join(format!("{version}-{key}"))
    };
    let label = release.label();
    let build = dir.join("build");
    let binary = build.join("qemu-system-aarch64");
    let complete = dir.join(".complete");
    if complete.exists() && binary.exists() {
        return Ok(binary);
    }
    fs::create_dir_all(&dir)?;

    let tarball = qemu_source(paths, release)?;
    let src = dir.join("src");
    let src_ok = dir.join(".src-complete");
    if !src_ok.exists() {
        let step = Step::new(if release.stock {
            format!("QEMU {label}: unpacking, no patches")
        } else {
            format!("QEMU {version}: unpacking and applying qemu-patches/{version}/")
        });
        let _ = fs::remove_dir_all(&src);
        unpack(&tarball, &src)?;
        if !release.stock {
            apply_series(&patch_dir, &src)?;
        }
        write_atomic(&src_ok, b"ok\n")?;
        step.done("ready");
    }

    if !build.join("build.ninja").exists() {
        let step = Step::new(format!("QEMU {label}: configure"));
        let _ = fs::remove_dir_all(&build);
        configure(paths, &src, &build)?;
        step.done("configured");
    }

    let jobs = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(2);
    let step = Step::new(format!(
        "QEMU {label}: ninja -j{jobs} qemu-system-aarch64 (about 8 min on 2 cores; log in {})",
        build.join("ninja.log").display()
    ));
    run_logged(
        "QEMU build (ninja)",
        ccache(paths, Command::new("ninja").current_dir(&build))
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
fn unpack(tarball: &Path, src: &Path) -> Result<()> {
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
    blob_placeholders(src)
}

/// Configures a build of `src` in `build` (created) with [`CONFIGURE`],
/// compiling through ccache ([`ccache`]).
fn configure(paths: &Paths, src: &Path, build: &Path) -> Result<()> {
    fs::create_dir_all(build)?;
    run_logged(
        "QEMU configure",
        ccache(
            paths,
            Command::new(src.join("configure"))
                .current_dir(build)
                // The default python3 may be a pyenv build that cannot see
                // Debian's meson.
                .arg("--python=/usr/bin/python3")
                .arg("--cc=ccache cc")
                .args(CONFIGURE),
        ),
        &build.join("configure.log"),
    )
}

/// ccache's settings for a QEMU build: one cache for every build under
/// `qemu/`, its absolute paths made relative to there (each build is
/// `<dir>/build` beside `<dir>/src`), and the compiler's working directory
/// left out of the hash (`-g` would put it in). The unpatched 10.2.2 then
/// reuses all but the objects the series touches from the patched one:
/// 1602 of 1789 compilations hit, its build 161 s instead of about 490.
pub(super) fn ccache<'a>(paths: &Paths, cmd: &'a mut Command) -> &'a mut Command {
    cmd.env("CCACHE_DIR", paths.cache.join("ccache"))
        .env("CCACHE_BASEDIR", paths.cache.join("qemu"))
        .env("CCACHE_NOHASHDIR", "1")
}

/// `cargo xtask series-build [--qemu V]`: applies `qemu-patches/V/` one
/// patch at a time to a clean QEMU tree and builds `qemu-system-aarch64`
/// after each, so that a patch that does not build on its own is found (a
/// posted series must bisect). Slow, one build per patch (the first a full
/// one): run by hand, not by `.ci/run`. Writes a table to
/// `target/integration/series-build-V.md`; returns whether every patch
/// built.
pub fn series_build(paths: &Paths, release: &QemuRelease) -> Result<bool> {
    // The host's packages, as for the real build.
    setup(paths, &[], &[])?;
    let version = release.version;
    let tarball = qemu_source(paths, release)?;
    let work = paths
        .target
        .join("integration")
        .join(format!("series-build-{version}"));
    let (src, build) = (work.join("src"), work.join("build"));
    let _ = fs::remove_dir_all(&work);
    unpack(&tarball, &src)?;
    configure(paths, &src, &build)?;
    let patches = series_patches(&release.patch_dir(&paths.repo))?;
    let mut table = format!(
        "# qemu-patches/{version}/ built one patch at a time on QEMU {version}\n\n| patch | builds | seconds |\n|---|---|---|\n"
    );
    let out = paths
        .target
        .join("integration")
        .join(format!("series-build-{version}.md"));
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
            ccache(paths, Command::new("ninja").current_dir(&build)).arg("qemu-system-aarch64"),
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

/// Fetches `release`'s upstream tarball through Debian's source package.
fn qemu_source(paths: &Paths, release: &QemuRelease) -> Result<PathBuf> {
    let dl = paths.cache.join("downloads");
    fs::create_dir_all(&dl)?;
    let tarball = dl.join(release.tarball);
    if tarball.exists() {
        return Ok(tarball);
    }
    let (mut cmd, from) = match release.source {
        QemuSource::Backports => {
            let mut c = Command::new("apt-get");
            c.args(["source", "--download-only", "-t", BACKPORTS, "qemu"]);
            (c, BACKPORTS.to_string())
        }
        QemuSource::Unstable(pin) => {
            let apt = Apt::for_unstable_sources(&paths.cache)?;
            if !apt.lists_present() {
                apt.update()?;
            }
            let mut c = apt.command("apt-get");
            c.args(["source", "--download-only", &format!("qemu={pin}")]);
            (c, format!("unstable, {pin}"))
        }
    };
    let step = Step::new(format!("apt-get source qemu ({}, {from})", release.version));
    // The mirror serves the orig tarball but not always the .dsc/.debian
    // parts, so apt may exit non-zero; the tarball is what counts.
    let res = run("apt-get source qemu", cmd.current_dir(&dl));
    if !tarball.exists() {
        let found: Vec<String> = fs::read_dir(&dl)?
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("qemu_"))
            .collect();
        let name = release.tarball;
        return Err(match res {
            Err(e) => e.context(format!("QEMU source: {name} was not downloaded")),
            Ok(_) => anyhow!("QEMU source: expected {name} from {from}, got {found:?}"),
        });
    }
    step.done("downloaded");
    Ok(tarball)
}

/// Applies the format-patch series in order. `git apply` works outside a
/// repository; the ceiling stops it from finding one above the cache.
fn apply_series(patch_dir: &Path, src: &Path) -> Result<()> {
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

/// The +ds tarball drops prebuilt firmware: meson still wants EDK2's .bz2
/// inputs and, without `dtc` (10.1 on), the device trees it would compile.
/// `-kernel` boots of `virt` need neither, so empty files do.
fn blob_placeholders(src: &Path) -> Result<()> {
    const EMPTY_BZ2: &[u8] = b"BZh9\x17\x72\x45\x38\x50\x90\x00\x00\x00\x00";
    let quoted = |meson: &str| -> Result<Vec<String>> {
        let p = src.join(meson);
        if !p.exists() {
            return Ok(Vec::new());
        }
        let text = fs::read_to_string(&p).with_context(|| format!("reading {meson}"))?;
        Ok(text.split('\'').map(str::to_string).collect())
    };
    for word in quoted("pc-bios/meson.build")? {
        if word.starts_with("edk2-") && word.ends_with(".fd") {
            let p = src.join("pc-bios").join(format!("{word}.bz2"));
            if !p.exists() {
                fs::write(&p, EMPTY_BZ2)?;
            }
        }
    }
    for word in quoted("pc-bios/dtb/meson.build")? {
        if word.ends_with(".dtb") && !word.contains('/') {
            let p = src.join("pc-bios/dtb").join(&word);
            if !p.exists() {
                fs::write(&p, b"")?;
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::setup::QEMU_RELEASES;

    /// A patch's subject without its `[PATCH n/m]` (folded lines joined).
    fn subject(patch: &str) -> Option<String> {
        let mut lines = patch.lines().skip_while(|l| !l.starts_with("Subject: "));
        let first = lines.next()?.strip_prefix("Subject: ")?;
        let mut s = first.to_string();
        for cont in lines.take_while(|l| l.starts_with(' ')) {
            s.push_str(cont);
        }
        Some(match s.strip_prefix('[') {
            Some(rest) => rest
                .split_once("] ")
                .map_or(s.clone(), |(_, t)| t.to_string()),
            None => s,
        })
    }

    fn subjects(release: &QemuRelease) -> Vec<String> {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        series_patches(&release.patch_dir(&repo))
            .unwrap()
            .iter()
            .map(|p| subject(&fs::read_to_string(p).unwrap()).expect("a subject"))
            .collect()
    }

    /// The 10.2.2 series carries every change of the 10.0.2 one, in the
    /// same order, but 10.0.2's first: 10.2 makes the generic vhost-user
    /// device user-creatable itself.
    #[test]
    fn the_series_are_in_step() {
        let (old, new) = (subjects(&QEMU_RELEASES[0]), subjects(&QEMU_RELEASES[1]));
        assert!(!QEMU_RELEASES[1].stock);
        assert_eq!(
            old[0],
            "hw/virtio: make the generic vhost-user device user-creatable"
        );
        assert_eq!(old[1..], new[..]);
        assert!(new.len() >= 12, "{new:?}");
    }

    #[test]
    fn subjects_are_read_without_the_prefix_and_unfolded() {
        let p = "From x\nSubject: [PATCH 05/13] target/arm: FEAT_SPE registers served by\n vhost-device-spe\n\nbody\n";
        assert_eq!(
            subject(p).unwrap(),
            "target/arm: FEAT_SPE registers served by vhost-device-spe"
        );
        assert_eq!(subject("Subject: plain\n").unwrap(), "plain");
        assert_eq!(subject("no header"), None);
    }

    #[test]
    fn series_key_changes_with_the_patches() {
        let d = std::env::temp_dir().join(format!("xtask-key-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("0001-a.patch"), "one").unwrap();
        let k1 = series_key(&d, "10.0.2").unwrap();
        assert_ne!(k1, series_key(&d, "10.2.2").unwrap());
        fs::write(d.join("README"), "ignored").unwrap();
        fs::write(d.join("0000-cover-letter.patch"), "no diff").unwrap();
        assert_eq!(k1, series_key(&d, "10.0.2").unwrap());
        assert_eq!(series_patches(&d).unwrap(), vec![d.join("0001-a.patch")]);
        fs::write(d.join("0002-b.patch"), "two").unwrap();
        assert_ne!(k1, series_key(&d, "10.0.2").unwrap());
        fs::remove_dir_all(&d).unwrap();
    }
}
