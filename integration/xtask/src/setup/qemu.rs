//! The patched QEMUs: each release's source (Debian's tarball), its patch
//! series applied, configured and built once per series.

use super::{series, setup, Paths, QemuOrigin, QemuRelease, QemuSource};
use crate::kernels::Apt;
use crate::util::{run, run_logged, write_atomic, Step};
use anyhow::{bail, Context, Result};
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
    if let QemuOrigin::Debian(deb) = &release.origin {
        return super::debian_qemu::binary(paths, release, deb);
    }
    let version = release.version;
    let patch_dir = release.patch_dir(&paths.repo);
    let dir = build_dir(paths, release)?;
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
            format!(
                "QEMU {version}: unpacking, branch {} = git am qemu-patches/{version}/",
                series::BRANCH
            )
        });
        let _ = fs::remove_dir_all(&src);
        source_tree(
            &tarball,
            &src,
            (!release.stock).then_some(&patch_dir),
            release,
        )?;
        write_atomic(&src_ok, b"ok\n")?;
        step.done("ready");
    }

    if !build.join("build.ninja").exists() {
        let step = Step::new(format!("QEMU {label}: configure"));
        let _ = fs::remove_dir_all(&build);
        configure(paths, &src, &build, "ccache cc")?;
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

/// The cache folder of `release`'s build: `src/` (for the series, a
/// repository: see [`series`]) and `build/`.
fn build_dir(paths: &Paths, release: &QemuRelease) -> Result<PathBuf> {
    let qemu = paths.cache.join("qemu");
    Ok(if release.stock {
        qemu.join(release.label())
    } else {
        let key = series_key(&release.patch_dir(&paths.repo), release.version)?;
        qemu.join(format!("{}-{key}", release.version))
    })
}

/// The set-up's tree of the series, with its branch: made by [`qemu`].
pub fn series_tree(paths: &Paths, release: &QemuRelease) -> Result<PathBuf> {
    let src = build_dir(paths, release)?.join("src");
    if !src.join(".git").is_dir() {
        bail!(
            "{}: no series branch (run `cargo xtask setup --qemu {}` first)",
            src.display(),
            release.version
        );
    }
    Ok(src)
}

/// `cargo xtask series-tree DIR`: the set-up's layout in DIR (new): a QEMU
/// tree with the series' branch in DIR/src and DIR/build configured as
/// the set-up's, to work on the series (`ninja -C DIR/build
/// qemu-system-aarch64`, the harness pointed at it with the release's
/// `override_var`) and write it back with `cargo xtask series-export
/// DIR/src`. DIR/cc runs the compiler through the set-up's ccache with
/// DIR as its base, so the first build reuses the set-up's objects.
pub fn new_series_tree(paths: &Paths, release: &QemuRelease, dir: &Path) -> Result<()> {
    if dir.exists() && fs::read_dir(dir)?.next().is_some() {
        bail!("series-tree: {} exists and is not empty", dir.display());
    }
    setup(paths, &[], &[])?;
    let tarball = qemu_source(paths, release)?;
    fs::create_dir_all(dir)?;
    let dir = dir.canonicalize()?;
    let (src, build) = (dir.join("src"), dir.join("build"));
    let step = Step::new(format!(
        "{}: QEMU {}, branch {} (git am qemu-patches/{}/)",
        src.display(),
        release.version,
        series::BRANCH,
        release.version
    ));
    source_tree(
        &tarball,
        &src,
        Some(&release.patch_dir(&paths.repo)),
        release,
    )?;
    step.done("ready");
    let cc = cc_wrapper(paths, &dir)?;
    let step = Step::new(format!("{}: configure", build.display()));
    configure(paths, &src, &build, &cc.to_string_lossy())?;
    step.done("configured");
    println!(
        "{d}/src: branch {b} on tag {t}\n  build:  ninja -C {d}/build qemu-system-aarch64\n  \
         use it: {var}={d}/build/qemu-system-aarch64 cargo xtask test ...\n  \
         cover letter: git -C {d}/src branch --edit-description {b}\n  \
         write back:   cargo xtask series-export {d}/src",
        d = dir.display(),
        b = series::BRANCH,
        t = series::base_tag(release),
        var = release.override_var,
    );
    Ok(())
}

/// `dir`/cc: the compiler through the set-up's ccache with `dir` as its
/// base, for a `dir/src` and `dir/build` pair outside the cache: their
/// compilations hash as the set-up's own (see [`ccache`]), so a first
/// build there mostly hits.
fn cc_wrapper(paths: &Paths, dir: &Path) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let cc = dir.join("cc");
    fs::write(
        &cc,
        format!(
            "#!/bin/sh\n# The set-up's compiler cache, paths taken relative to this folder.\n\
             CCACHE_DIR={} CCACHE_BASEDIR={} CCACHE_NOHASHDIR=1 exec ccache cc \"$@\"\n",
            super::kernel::sh_quote(&paths.cache.join("ccache")),
            super::kernel::sh_quote(dir),
        ),
    )?;
    fs::set_permissions(&cc, fs::Permissions::from_mode(0o755))?;
    Ok(cc)
}

/// The tarball unpacked into `src` (created), with the series' branch
/// when `patch_dir` is given, and the placeholders the build wants kept
/// out of `git status`.
fn source_tree(
    tarball: &Path,
    src: &Path,
    patch_dir: Option<&PathBuf>,
    release: &QemuRelease,
) -> Result<()> {
    unpack(tarball, src)?;
    if let Some(patch_dir) = patch_dir {
        series::create(src, patch_dir, release)?;
    }
    let added = blob_placeholders(src)?;
    series::exclude(src, &added)
}

/// Unpacks the QEMU tarball into `src` (created).
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
    Ok(())
}

/// Configures a build of `src` in `build` (created) with [`CONFIGURE`],
/// compiling through ccache ([`ccache`]).
fn configure(paths: &Paths, src: &Path, build: &Path, cc: &str) -> Result<()> {
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
                .arg(format!("--cc={cc}"))
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
    blob_placeholders(&src)?;
    let cc = cc_wrapper(paths, &work)?;
    configure(paths, &src, &build, &cc.to_string_lossy())?;
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

/// `release`'s source tarball: `SPE_QEMU_TARBALL` when set, else the
/// cached download, else `apt-get source` of the pinned Debian version.
/// Debian's file must have its pinned SHA-256; any other file must be
/// QEMU's own release tarball of the same version (its `VERSION` file
/// says so): the same source with the firmware Debian strips. Another
/// version is never used.
fn qemu_source(paths: &Paths, release: &QemuRelease) -> Result<PathBuf> {
    let source = release
        .source()
        .with_context(|| format!("QEMU {} is Debian's binary: no source", release.label()))?;
    if let Some(t) = std::env::var_os(TARBALL_VAR).filter(|t| !t.is_empty()) {
        let t = PathBuf::from(t);
        check_tarball(&t, release.version, source)
            .with_context(|| format!("{TARBALL_VAR}={}", t.display()))?;
        return Ok(t);
    }
    let dl = paths.cache.join("downloads");
    fs::create_dir_all(&dl)?;
    let tarball = dl.join(source.tarball);
    if !tarball.exists() {
        download(paths, release.version, source, &dl)?;
    }
    check_tarball(&tarball, release.version, source)?;
    Ok(tarball)
}

/// Names a QEMU source tarball to use instead of Debian's download.
const TARBALL_VAR: &str = "SPE_QEMU_TARBALL";

/// `apt-get source --download-only qemu=<pinned>` from unstable into `dl`.
fn download(paths: &Paths, version: &str, source: &QemuSource, dl: &Path) -> Result<()> {
    let apt = Apt::for_unstable_sources(&paths.cache)?;
    if !apt.lists_present() {
        apt.update()?;
    }
    let pin = format!("qemu={}", source.package_version);
    let step = Step::new(format!("apt-get source {pin} (Debian unstable)"));
    // The mirror serves the orig tarball but not always the .dsc/.debian
    // parts, so apt may exit non-zero; the tarball is what counts.
    let res = run(
        "apt-get source qemu",
        apt.command("apt-get")
            .args(["source", "--download-only", &pin])
            .current_dir(dl),
    );
    if dl.join(source.tarball).exists() {
        step.done("downloaded");
        return Ok(());
    }
    let why = match res {
        Err(e) => format!("{e:#}"),
        Ok(_) => "apt-get exited 0 without it".to_string(),
    };
    bail!(
        "QEMU {v} source: `apt-get source {pin}` from Debian unstable did not give {t} \
         ({why}); unstable may have dropped that version. The same source is QEMU's \
         release tarball qemu-{v}.tar.xz (from QEMU's download page, with its signature) \
         or Debian's {t} (SHA-256 {sha}) from a snapshot of the archive: name either \
         with {TARBALL_VAR}=PATH and run again. No other version is used.",
        v = version,
        t = source.tarball,
        sha = source.sha256,
    )
}

/// Debian's tarball by its SHA-256, or QEMU's own by its `VERSION` file.
fn check_tarball(tarball: &Path, want: &str, source: &QemuSource) -> Result<()> {
    let mut hasher = Sha256::new();
    std::io::copy(
        &mut fs::File::open(tarball).with_context(|| format!("opening {}", tarball.display()))?,
        &mut hasher,
    )
    .with_context(|| format!("reading {}", tarball.display()))?;
    let sha: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    if sha == source.sha256 {
        return Ok(());
    }
    let out = Command::new("tar")
        .args(["-xOf"])
        .arg(tarball)
        .args(["--wildcards", "--no-wildcards-match-slash", "*/VERSION"])
        .output()
        .context("running tar")?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if version != want {
        bail!(
            "{} is neither Debian's {} (SHA-256 {}, this file's is {sha}) nor QEMU {}'s \
             release tarball (its VERSION: {version:?}); if it is a stale download, \
             delete it and run again",
            tarball.display(),
            source.tarball,
            source.sha256,
            want,
        );
    }
    eprintln!(
        "==> {}: QEMU {version}'s own release tarball (SHA-256 {sha}), not Debian's",
        tarball.display()
    );
    Ok(())
}

/// The +ds tarball drops prebuilt firmware: meson still wants EDK2's .bz2
/// inputs and, without `dtc` (10.1 on), the device trees it would compile.
/// `-kernel` boots of `virt` need neither, so empty files do. Returns the
/// files it added.
fn blob_placeholders(src: &Path) -> Result<Vec<PathBuf>> {
    let mut added = Vec::new();
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
                added.push(p);
            }
        }
    }
    for word in quoted("pc-bios/dtb/meson.build")? {
        if word.ends_with(".dtb") && !word.contains('/') {
            let p = src.join("pc-bios/dtb").join(&word);
            if !p.exists() {
                fs::write(&p, b"")?;
                added.push(p);
            }
        }
    }
    Ok(added)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn series_key_changes_with_the_patches() {
        let d = std::env::temp_dir().join(format!("xtask-key-{}", std::process::id()));
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join("0001-a.patch"), "one").unwrap();
        let k1 = series_key(&d, "11.1.3").unwrap();
        assert_ne!(k1, series_key(&d, "10.2.2").unwrap());
        fs::write(d.join("README"), "ignored").unwrap();
        fs::write(d.join("0000-cover-letter.patch"), "no diff").unwrap();
        assert_eq!(k1, series_key(&d, "11.1.3").unwrap());
        assert_eq!(series_patches(&d).unwrap(), vec![d.join("0001-a.patch")]);
        fs::write(d.join("0002-b.patch"), "two").unwrap();
        assert_ne!(k1, series_key(&d, "11.1.3").unwrap());
        fs::remove_dir_all(&d).unwrap();
    }
}
