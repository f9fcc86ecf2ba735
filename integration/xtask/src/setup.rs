//! Idempotent, cached set-up: apt sources and packages, the patched QEMU and
//! the Debian arm64 guest kernel and userland.
//!
//! Every step checks a cheap marker first (dpkg state, apt lists, a
//! `.complete` file in the cache) so a second run with nothing changed only
//! pays for a few `dpkg-query`/`apt-cache` calls.

use crate::host::{self, is_root, privileged, BACKPORTS, SUITE};
use crate::kernels::{self, Apt, KernelSpec};
use crate::util::{run, run_logged, write_atomic, Step};
use anyhow::{anyhow, bail, Context, Result};
use sha2::{Digest, Sha256};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The QEMU release the patch series applies to.
pub const QEMU_VERSION: &str = "10.0.2";
const QEMU_TARBALL: &str = "qemu_10.0.2+ds.orig.tar.xz";
const BACKPORTS_FILE: &str = "/etc/apt/sources.list.d/vhost-device-spe-backports.sources";

/// The kernel modules the guest needs; the initramfs adds what they depend
/// on, and skips the ones a kernel has built in (7.x: virtio_pci).
pub const GUEST_MODULES: &[&str] = &["virtio_pci", "virtio_mmio", "arm_spe_pmu"];

/// Where things live: the repository, its cargo target directory, and the
/// shared cache outside the repository.
pub struct Paths {
    pub repo: PathBuf,
    pub target: PathBuf,
    pub cache: PathBuf,
}

impl Paths {
    pub fn discover() -> Result<Self> {
        // integration/xtask -> repository root
        let repo = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .canonicalize()
            .context("locating the repository root")?;
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| repo.join("target"));
        let cache = match std::env::var_os("XDG_CACHE_HOME") {
            Some(x) if !x.is_empty() => PathBuf::from(x),
            _ => PathBuf::from(std::env::var_os("HOME").context("HOME is not set")?).join(".cache"),
        }
        .join("vhost-device-spe");
        fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
        Ok(Paths {
            repo,
            target,
            cache,
        })
    }

    /// Scratch space for guest images and run logs.
    pub fn work(&self) -> PathBuf {
        self.target.join("integration")
    }
}

/// Everything a guest run needs, all inside the cache.
#[derive(Clone, Debug)]
pub struct Guest {
    /// Kernel release, e.g. `6.1.0-56-arm64`.
    pub kver: String,
    /// Debian package version of the kernel, e.g. `6.1.192-2`.
    pub kpkg_version: String,
    /// Raw arm64 `Image` for `-kernel`.
    pub kernel: PathBuf,
    /// `lib/modules/<kver>` of the unpacked image package.
    pub modules: PathBuf,
    /// Headers tree usable as `make -C` for out-of-tree modules (see
    /// [`headers`]); every kernel of the matrix has one.
    pub headers: Option<PathBuf>,
    /// Statically linked arm64 busybox.
    pub busybox: PathBuf,
}

/// One kernel of the matrix, ready to boot.
pub struct GuestEnv {
    pub spec: &'static KernelSpec,
    pub guest: Guest,
    /// Unpacked `linux-perf:arm64` of the same suite and its shared-library
    /// closure.
    pub perf: PathBuf,
}

pub struct Env {
    pub qemu: PathBuf,
    /// One per kernel asked for, in the matrix's order.
    pub guests: Vec<GuestEnv>,
}

/// Runs the whole set-up for `kernels` and returns where the results are.
pub fn setup(paths: &Paths, kernels: &[&'static KernelSpec]) -> Result<Env> {
    check_host()?;
    let lists_changed = apt_sources()?;
    let fresh_lists = apt_update_if_needed(lists_changed)?;
    host::packages(apt_update)?;
    let qemu = qemu(paths)?;
    let mut guests = Vec::new();
    for &spec in kernels {
        guests.push(guest_env(paths, spec, fresh_lists)?);
    }
    Ok(Env { qemu, guests })
}

/// The kernel, busybox and perf of one kernel of the matrix.
fn guest_env(paths: &Paths, spec: &'static KernelSpec, fresh_host_lists: bool) -> Result<GuestEnv> {
    let apt = Apt::for_kernel(spec, &paths.cache)?;
    let mut fresh = if apt.is_private() {
        if !apt.lists_present() {
            apt.update()?;
            true
        } else {
            false
        }
    } else {
        fresh_host_lists
    };
    let host_apt = Apt::for_kernel(&kernels::MATRIX[0], &paths.cache)?;
    let attempt = || -> Result<GuestEnv> {
        let c = candidates(&apt, spec)?;
        let guest = guest(paths, &apt, &host_apt, &c)?;
        let perf = perf(paths, &apt, &c)?;
        Ok(GuestEnv { spec, guest, perf })
    };
    loop {
        match attempt() {
            Ok(g) => return Ok(g),
            // Lists present but older than the mirror (a used machine's)
            // name versions it no longer serves: refresh once, resolve again.
            Err(e) if !fresh => {
                eprintln!("==> {e:#}\n    refreshing the apt lists and trying again");
                if apt.is_private() {
                    apt.update()?;
                } else {
                    apt_update()?;
                }
                fresh = true;
            }
            Err(e) => return Err(e),
        }
    }
}

fn check_host() -> Result<()> {
    let os = fs::read_to_string("/etc/os-release").context("reading /etc/os-release")?;
    if !os.lines().any(|l| l == format!("VERSION_CODENAME={SUITE}")) {
        bail!("host check: only Debian {SUITE} hosts are supported (bookworm-backports has QEMU {QEMU_VERSION})");
    }
    Ok(())
}

/// The deb822 stanza for bookworm-backports, from the host's bookworm
/// stanza, so it uses the same mirror and keyring as the host already
/// trusts.
pub fn backports_stanza(sources: &str) -> Result<String> {
    let (uris, key) = kernels::host_mirror(sources)?;
    let mut out =
        format!("Types: deb deb-src\nURIs: {uris}\nSuites: {BACKPORTS}\nComponents: main\n");
    if let Some(key) = key {
        out.push_str(&format!("Signed-By: {key}\n"));
    }
    Ok(out)
}

/// Adds bookworm-backports (with deb-src, for QEMU's source) and the arm64
/// architecture. Returns whether anything changed, i.e. apt lists are stale.
fn apt_sources() -> Result<bool> {
    let mut changed = false;
    let wanted = backports_stanza(&host::host_sources()?)?;
    if fs::read_to_string(BACKPORTS_FILE).ok().as_deref() != Some(wanted.as_str()) {
        let step = Step::new("apt sources: adding bookworm-backports");
        if is_root() {
            fs::write(BACKPORTS_FILE, &wanted)
                .with_context(|| format!("apt sources: writing {BACKPORTS_FILE}"))?;
        } else {
            let tmp = std::env::temp_dir().join("vhost-device-spe-backports.sources");
            fs::write(&tmp, &wanted)?;
            run(
                "apt sources: installing the backports file",
                privileged("install")
                    .args(["-m", "644"])
                    .arg(&tmp)
                    .arg(BACKPORTS_FILE),
            )?;
        }
        step.done("written");
        changed = true;
    }
    let foreign = run(
        "dpkg --print-foreign-architectures",
        Command::new("dpkg").arg("--print-foreign-architectures"),
    )?;
    if !foreign.split_whitespace().any(|a| a == "arm64") {
        run(
            "dpkg --add-architecture arm64",
            privileged("dpkg").args(["--add-architecture", "arm64"]),
        )?;
        changed = true;
    }
    Ok(changed)
}

/// True when apt has package lists for arm64 and backports sources.
fn lists_present() -> bool {
    let Ok(dir) = fs::read_dir("/var/lib/apt/lists") else {
        return false;
    };
    let names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    let has = |a: &str, b: &str| names.iter().any(|n| n.contains(a) && n.contains(b));
    has("_bookworm_", "binary-arm64_Packages")
        && has("bookworm-backports", "_source_Sources")
        && has("bookworm-backports", "binary-amd64_Packages")
}

/// Returns whether it updated the lists.
fn apt_update_if_needed(changed: bool) -> Result<bool> {
    if !changed && lists_present() {
        return Ok(false);
    }
    apt_update()?;
    Ok(true)
}

fn apt_update() -> Result<()> {
    let step = Step::new("apt-get update");
    run(
        "apt-get update (is a package registry reachable?)",
        privileged("apt-get").args(["-q", "update"]),
    )?;
    step.done("done");
    Ok(())
}

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
const CONFIGURE: &[&str] = &[
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
fn qemu(paths: &Paths) -> Result<PathBuf> {
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
    edk2_placeholders(src)
}

/// Configures a build of `src` in `build` (created) with [`CONFIGURE`].
fn configure(src: &Path, build: &Path) -> Result<()> {
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
fn qemu_source(paths: &Paths) -> Result<PathBuf> {
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

/// The +ds tarball drops the EDK2 firmware images but meson still wants their
/// .bz2 inputs; `-kernel` boots need no firmware, so empty bzip2 streams do.
fn edk2_placeholders(src: &Path) -> Result<()> {
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

/// Candidate versions of the guest packages, from one `apt-cache show`
/// (apt's binary cache may be disabled, making each call cost seconds).
pub struct Candidates {
    /// Kernel release the `linux-image-arm64` metapackage points at.
    pub kver: String,
    /// Debian version of that kernel image package.
    pub kernel: String,
    pub perf: String,
}

const CANDIDATE_PACKAGES: &[&str] = &["linux-image-arm64:arm64", "linux-perf:arm64"];

fn candidates(apt: &Apt, spec: &KernelSpec) -> Result<Candidates> {
    let out = run(
        "apt-cache show of the guest packages",
        apt.command("apt-cache")
            .args(["show", "--no-all-versions"])
            .args(CANDIDATE_PACKAGES),
    )?;
    let c = parse_candidates(&out)?;
    if !spec.matches(&c.kver) {
        bail!(
            "{}: linux-image-arm64 of {} is now {} ({}), not a {} kernel; \
             update the matrix in integration/xtask/src/kernels.rs",
            spec.name,
            spec.release,
            c.kver,
            c.kernel,
            spec.name
        );
    }
    Ok(c)
}

/// The fields of each stanza of an `apt-cache show`, by package.
fn stanzas(text: &str) -> Vec<(String, std::collections::HashMap<String, String>)> {
    let mut out: Vec<(String, std::collections::HashMap<String, String>)> = Vec::new();
    for l in text.lines() {
        if let Some(p) = l.strip_prefix("Package: ") {
            out.push((p.trim().to_string(), Default::default()));
        } else if let (Some((k, v)), Some(last)) = (l.split_once(": "), out.last_mut()) {
            if !l.starts_with(' ') {
                last.1.insert(k.to_string(), v.trim().to_string());
            }
        }
    }
    out
}

/// Parses `apt-cache show` stanzas of [`CANDIDATE_PACKAGES`].
pub fn parse_candidates(text: &str) -> Result<Candidates> {
    let st = stanzas(text);
    let get = |p: &str, k: &str| {
        st.iter()
            .find(|(name, _)| name == p)
            .and_then(|(_, f)| f.get(k).cloned())
            .with_context(|| format!("apt-cache show: no {k} for {p}:arm64"))
    };
    // "linux-image-6.1.0-56-arm64 (= 6.1.192-2)"; 7.x lists linux-base-arm64
    // first.
    let dep = get("linux-image-arm64", "Depends")?;
    let (kpkg, kernel) = dep
        .split(',')
        .find_map(|d| {
            let (name, ver) = d.trim().split_once(" (= ")?;
            Some((
                name.strip_prefix("linux-image-")?,
                ver.trim_end_matches(')'),
            ))
        })
        .with_context(|| {
            format!("resolving the guest kernel from linux-image-arm64's Depends: {dep:?}")
        })?;
    Ok(Candidates {
        kver: kpkg.to_string(),
        kernel: kernel.to_string(),
        perf: get("linux-perf", "Version")?,
    })
}

/// The packages named in Depends/Pre-Depends of `stanzas` that start with
/// `prefixes` (first alternative of each, without version or arch).
pub fn depends_with_prefix(text: &str, prefixes: &[&str]) -> Vec<String> {
    let mut out = Vec::new();
    for (_, f) in stanzas(text) {
        for field in ["Pre-Depends", "Depends"] {
            let Some(v) = f.get(field) else { continue };
            for d in v.split(',') {
                let first = d.split('|').next().unwrap_or("").trim();
                let name = first
                    .split([' ', '('])
                    .next()
                    .unwrap_or("")
                    .split(':')
                    .next()
                    .unwrap_or("");
                if prefixes.iter().any(|p| name.starts_with(p)) && !out.iter().any(|o| o == name) {
                    out.push(name.to_string());
                }
            }
        }
    }
    out
}

/// Downloads and unpacks the Debian arm64 kernel, its headers tree and
/// busybox-static, keyed by their package versions.
fn guest(paths: &Paths, apt: &Apt, host_apt: &Apt, c: &Candidates) -> Result<Guest> {
    let kver = c.kver.clone();
    let image_pkg = format!("linux-image-{kver}:arm64");
    let kpkg_version = c.kernel.clone();

    let kdir = paths
        .cache
        .join("kernel")
        .join(format!("{kver}_{kpkg_version}"));
    let root = kdir.join("root");
    let complete = kdir.join(".complete");
    if !complete.exists() {
        let step = Step::new(format!(
            "guest kernel {kver} ({kpkg_version}): download and unpack"
        ));
        let debs = kdir.join("debs");
        let _ = fs::remove_dir_all(&kdir);
        fs::create_dir_all(&debs)?;
        // 7.x: the image package is a stub depending on the kernel and its
        // modules.
        let show = run(
            "apt-cache show of the guest kernel image",
            apt.command("apt-cache")
                .args(["show", "--no-all-versions"])
                .arg(&image_pkg),
        )?;
        let mut pkgs = vec![image_pkg.clone()];
        pkgs.extend(
            depends_with_prefix(&show, &["linux-binary-", "linux-modules-"])
                .into_iter()
                .map(|p| format!("{p}:arm64")),
        );
        apt_download(
            apt,
            "apt-get download of the guest kernel packages",
            &debs,
            &pkgs,
        )?;
        unpack_debs(&debs, &root)?;
        write_atomic(&complete, b"ok\n")?;
        step.done("ready");
    }

    let busybox = busybox(paths, host_apt)?;
    // 7.x (and merged-/usr suites) put modules and the kernel under /usr.
    let first = |cands: &[String]| {
        cands
            .iter()
            .map(|c| root.join(c))
            .find(|p| p.exists())
            .with_context(|| {
                format!(
                    "guest set-up: none of {cands:?} under {} after unpacking",
                    root.display()
                )
            })
    };
    let kernel = first(&[
        format!("boot/vmlinuz-{kver}"),
        format!("usr/lib/modules/{kver}/vmlinuz"),
    ])?;
    let modules = first(&[
        format!("lib/modules/{kver}"),
        format!("usr/lib/modules/{kver}"),
    ])?;
    let headers = headers(paths, apt, c)?;
    Ok(Guest {
        kernel,
        modules,
        headers: Some(headers),
        busybox,
        kver,
        kpkg_version,
    })
}

/// The kernel's headers tree for out-of-tree modules, keyed by the kernel's
/// package version: `make -C <tree> M=<dir> ARCH=arm64
/// CROSS_COMPILE=aarch64-linux-gnu- modules` builds against it.
///
/// The host suite's tree is the arm64 headers, their common part and the
/// amd64 kbuild, built with the host's gcc. A newer suite's tree needs more,
/// because its kbuild and kernel come from a newer distribution: modpost
/// and resolve_btfids need its C library (GLIBC_2.38), its kernels were
/// built with its gcc (gcc 14's `-fmin-function-alignment` is unknown to
/// the host's gcc 12) and with a pahole newer than the host's (module BTF).
/// So the tree also gets that suite's cross gcc, binutils and pahole with
/// their amd64 libraries and C library, and each of its amd64 programs runs
/// through that C library's loader (see [`run_on_unpacked_libc`]).
fn headers(paths: &Paths, apt: &Apt, c: &Candidates) -> Result<PathBuf> {
    let kver = &c.kver;
    let dir = paths
        .cache
        .join("headers")
        .join(format!("{kver}_{}", c.kernel));
    let root = dir.join("root");
    let tree = root.join(format!("usr/src/linux-headers-{kver}"));
    let complete = dir.join(".complete");
    if complete.exists() {
        return Ok(tree);
    }
    let step = Step::new(format!(
        "guest kernel headers {kver}{}: download and unpack",
        if apt.is_private() {
            " with its suite's cross gcc, binutils and pahole"
        } else {
            ""
        }
    ));
    let debs = dir.join("debs");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&debs)?;
    let arm64 = format!("linux-headers-{kver}:arm64");
    let show = run(
        "apt-cache show of the kernel headers",
        apt.command("apt-cache")
            .args(["show", "--no-all-versions"])
            .arg(&arm64),
    )?;
    let deps = HeadersDeps::parse(&show)?;
    let mut pkgs = vec![arm64, deps.common.clone(), deps.kbuild.clone()];
    if apt.is_private() {
        pkgs.extend(toolchain_packages(apt, &deps)?);
    }
    apt_download(apt, "apt-get download of the kernel headers", &debs, &pkgs)?;
    unpack_debs(&debs, &root)?;
    fix_headers_makefile(&tree, &root)?;
    if apt.is_private() {
        run_on_unpacked_libc(&root)?;
        use_unpacked_toolchain(&tree, &root, &deps)?;
    }
    write_atomic(&complete, b"ok\n")?;
    step.done("ready");
    Ok(tree)
}

/// What the arm64 headers package depends on: its common part, its kbuild
/// (`linux-kbuild-6.1`; newer suites: `linux-kbuild-6.12.117+deb13`) and
/// the gcc its kernel was built with (`gcc-12`; `gcc-14-for-host`).
#[derive(Debug, PartialEq, Eq)]
pub struct HeadersDeps {
    pub common: String,
    pub kbuild: String,
    /// gcc's major version, e.g. `14`.
    pub gcc: String,
}

impl HeadersDeps {
    /// From the `apt-cache show` of `linux-headers-<kver>:arm64`.
    pub fn parse(show: &str) -> Result<Self> {
        let deps = depends_with_prefix(show, &["linux-headers-", "linux-kbuild-", "gcc-"]);
        let find = |prefix: &str, suffix: &str| {
            deps.iter()
                .find(|d| d.starts_with(prefix) && d.ends_with(suffix))
                .cloned()
                .with_context(|| {
                    format!("kernel headers: no {prefix}…{suffix} in their Depends ({deps:?})")
                })
        };
        let gcc: String = find("gcc-", "")?["gcc-".len()..]
            .chars()
            .take_while(|c| c.is_ascii_digit())
            .collect();
        if gcc.is_empty() {
            bail!("kernel headers: no gcc version in their Depends ({deps:?})");
        }
        Ok(HeadersDeps {
            common: find("linux-headers-", "-common")?,
            kbuild: find("linux-kbuild-", "")?,
            gcc,
        })
    }
}

/// The cross tools a newer suite's kernel was built with, from that suite:
/// gcc and its cc1, gcc's own headers (`-nostdinc` builds include its
/// stdarg.h), binutils and pahole; with the amd64 libraries they and kbuild
/// need, the C library among them.
fn toolchain_packages(apt: &Apt, deps: &HeadersDeps) -> Result<Vec<String>> {
    let gcc = format!("gcc-{}-aarch64-linux-gnu", deps.gcc);
    let cpp = format!("cpp-{}-aarch64-linux-gnu", deps.gcc);
    let roots = [
        gcc.as_str(),
        cpp.as_str(),
        "binutils-aarch64-linux-gnu",
        "pahole",
        deps.kbuild.as_str(),
    ];
    let mut pkgs: Vec<String> = library_closure(apt, "the cross toolchain", &roots, "amd64")?
        .into_iter()
        .filter(|p| *p != deps.kbuild)
        .map(|p| format!("{p}:amd64"))
        .collect();
    pkgs.push(format!("libgcc-{}-dev-arm64-cross", deps.gcc));
    Ok(pkgs)
}

/// The arm64 headers' Makefile names the common headers (and, on 7.x, its
/// own directory as KBUILD_OUTPUT) by absolute /usr/src path; point those
/// at the unpacked copy so `make -C` works in the cache without installing
/// anything.
fn fix_headers_makefile(tree: &Path, root: &Path) -> Result<()> {
    let mk = tree.join("Makefile");
    let text = fs::read_to_string(&mk)
        .with_context(|| format!("kernel headers: reading {}", mk.display()))?;
    let src = root.join("usr/src/");
    let fixed = text.replace("/usr/src/", &src.to_string_lossy());
    fs::write(&mk, fixed).with_context(|| format!("patching {}", mk.display()))?;
    Ok(())
}

/// The unpacked C library's directory and loader.
const UNPACKED_LIBDIR: &str = "usr/lib/x86_64-linux-gnu";
const UNPACKED_LOADER: &str = "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";

/// Makes every amd64 program under `root` run on the C library unpacked
/// there rather than the host's older one: each becomes a shell script
/// that starts the unpacked loader on the original (`<name>.real`) with the
/// unpacked libraries first. `--argv0` keeps the name the program was
/// called by (gcc finds cc1 and as, and kbuild's modpost finds its
/// `modpost.real-lsb-64`, next to it). The loader's `--library-path` does
/// not reach the programs they start: each of those has its own script, and
/// host programs run as usual.
fn run_on_unpacked_libc(root: &Path) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let loader = root.join(UNPACKED_LOADER);
    if !loader.exists() {
        bail!(
            "kernel headers: {} missing after unpacking libc6",
            loader.display()
        );
    }
    let libdir = root.join(UNPACKED_LIBDIR);
    let mut wrapped = 0;
    for p in walk(root)? {
        let name = p
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        // Shared libraries (libc.so.6 itself has an interpreter).
        if name.contains(".so") || !fs::symlink_metadata(&p)?.is_file() || !is_amd64_program(&p)? {
            continue;
        }
        let real = p.with_file_name(format!("{name}.real"));
        fs::rename(&p, &real).with_context(|| format!("renaming {}", p.display()))?;
        let script = format!(
            "#!/bin/sh\nexec {} --library-path {} --argv0 \"$0\" {} \"$@\"\n",
            sh_quote(&loader),
            sh_quote(&libdir),
            sh_quote(&real)
        );
        fs::write(&p, script).with_context(|| format!("writing {}", p.display()))?;
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755))?;
        wrapped += 1;
    }
    if wrapped == 0 {
        bail!("kernel headers: no amd64 program under {}", root.display());
    }
    Ok(())
}

/// Whether `path` is a dynamically linked x86-64 ELF file.
fn is_amd64_program(path: &Path) -> Result<bool> {
    use std::io::Read;
    let mut head = Vec::new();
    fs::File::open(path)
        .and_then(|f| f.take(20).read_to_end(&mut head))
        .with_context(|| format!("reading {}", path.display()))?;
    if !is_elf64_le_x86_64(&head) {
        return Ok(false);
    }
    let elf = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    Ok(has_interpreter(&elf))
}

fn is_elf64_le_x86_64(elf: &[u8]) -> bool {
    const EM_X86_64: u16 = 62;
    elf.len() >= 20
        && &elf[..4] == b"\x7fELF"
        && elf[4] == 2
        && elf[5] == 1
        && u16::from_le_bytes([elf[18], elf[19]]) == EM_X86_64
}

/// Whether a 64-bit little-endian ELF file has a PT_INTERP program header.
fn has_interpreter(elf: &[u8]) -> bool {
    const PT_INTERP: u32 = 3;
    if elf.len() < 64 {
        return false;
    }
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[32..40].try_into().unwrap()) as usize;
    let (phentsize, phnum) = (u16_at(54), u16_at(56));
    (0..phnum)
        .map(|i| phoff.saturating_add(i * phentsize))
        .take_while(|&o| o.saturating_add(4) <= elf.len())
        .any(|o| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) == PT_INTERP)
}

/// `p` in single quotes for sh.
fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.to_string_lossy().replace('\'', r"'\''"))
}

/// Points the headers at the unpacked cross tools: their
/// `.kernelvariables`, read by the common Makefile after its defaults,
/// already overrides CROSS_COMPILE (and names gcc-<version>); a later
/// override wins over it and over the command line's. Then checks the
/// compiler runs and is the one the kernel was built with.
fn use_unpacked_toolchain(tree: &Path, root: &Path, deps: &HeadersDeps) -> Result<()> {
    let vars = tree.join(".kernelvariables");
    let mut text = fs::read_to_string(&vars)
        .with_context(|| format!("kernel headers: reading {}", vars.display()))?;
    let bin = root.join("usr/bin");
    text.push_str(&format!(
        "# vhost-device-spe: the suite's own cross tools, unpacked beside\n\
         # these headers (the host's are older than the kernel's).\n\
         override CROSS_COMPILE = {}/aarch64-linux-gnu-\n\
         PAHOLE = {}/pahole\n",
        bin.display(),
        bin.display()
    ));
    fs::write(&vars, text).with_context(|| format!("patching {}", vars.display()))?;

    let cc = bin.join(format!("aarch64-linux-gnu-gcc-{}", deps.gcc));
    let version = run(
        "the unpacked cross compiler (--version)",
        Command::new(&cc).arg("--version"),
    )?;
    let config = fs::read_to_string(tree.join(".config"))
        .with_context(|| format!("kernel headers: reading {}/.config", tree.display()))?;
    let built_with = config
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_CC_VERSION_TEXT="))
        .map(|v| v.trim_matches('"'))
        .unwrap_or_default();
    let got = version.lines().next().unwrap_or_default();
    if got != built_with {
        // kbuild warns too; modules still build.
        eprintln!("    note: the kernel was built with {built_with:?}, the suite now has {got:?}");
    }
    Ok(())
}

/// bookworm's static busybox: one for every kernel of the matrix.
fn busybox(paths: &Paths, host_apt: &Apt) -> Result<PathBuf> {
    let show = run(
        "apt-cache show busybox-static:arm64",
        host_apt
            .command("apt-cache")
            .args(["show", "--no-all-versions", "busybox-static:arm64"]),
    )?;
    let version = stanzas(&show)
        .into_iter()
        .find_map(|(_, f)| f.get("Version").cloned())
        .context("apt-cache show: no Version for busybox-static:arm64")?;
    let bdir = paths.cache.join("busybox").join(version.replace(':', "_"));
    let bin = bdir.join("root/bin/busybox");
    if !bdir.join(".complete").exists() {
        let step = Step::new(format!("busybox-static {version}: download and unpack"));
        let debs = bdir.join("debs");
        let _ = fs::remove_dir_all(&bdir);
        fs::create_dir_all(&debs)?;
        apt_download(
            host_apt,
            "apt-get download busybox-static:arm64",
            &debs,
            &["busybox-static:arm64".to_string()],
        )?;
        unpack_debs(&debs, &bdir.join("root"))?;
        if !bin.exists() {
            bail!("guest set-up: {} missing after unpacking", bin.display());
        }
        write_atomic(&bdir.join(".complete"), b"ok\n")?;
        step.done("ready");
    }
    Ok(bin)
}

/// Packages a program's closure may need: shared libraries only (perf
/// runs without its perl and python scripting packages).
const LIBRARY_PREFIXES: &[&str] = &["lib", "zlib1g"];

/// `linux-perf` and the arm64 library packages it depends on, transitively,
/// in the suite's own versions (trixie's glibc and loader for newer perf).
fn perf_packages(apt: &Apt) -> Result<Vec<String>> {
    library_closure(apt, "perf", GUEST_PACKAGES, "arm64")
}

/// `roots` and the library packages they depend on, transitively, that
/// are built for `arch`, from `apt`'s suite. `Architecture: all` ones
/// (data, configuration) hold no libraries.
fn library_closure(apt: &Apt, what: &str, roots: &[&str], arch: &str) -> Result<Vec<String>> {
    let mut seen: Vec<String> = roots.iter().map(|p| p.to_string()).collect();
    let mut found = Vec::new();
    let mut frontier = seen.clone();
    while !frontier.is_empty() {
        let show = run(
            &format!("apt-cache show of {what}'s dependencies"),
            apt.command("apt-cache")
                .args(["show", "--no-all-versions"])
                .args(frontier.iter().map(|p| format!("{p}:{arch}"))),
        )?;
        for (name, fields) in stanzas(&show) {
            if fields.get("Architecture").is_some_and(|a| a == arch) && !found.contains(&name) {
                found.push(name);
            }
        }
        frontier = depends_with_prefix(&show, LIBRARY_PREFIXES)
            .into_iter()
            .filter(|p| !seen.contains(p))
            .collect();
        seen.extend(frontier.iter().cloned());
    }
    Ok(found)
}

/// The suite's packages whose programs join busybox in the guest: perf,
/// and what perf's shell tests need that busybox lacks (`#!/bin/bash`, a
/// `mktemp` that takes five X's, a `taskset` that takes `--cpu-list`).
const GUEST_PACKAGES: &[&str] = &["linux-perf", "bash", "coreutils", "util-linux"];

/// The programs of [`GUEST_PACKAGES`] the guest gets (at their path in the
/// package, /bin or /usr/bin), with their shared-library closure.
pub const GUEST_PROGRAMS: &[&str] = &["perf", "bash", "mktemp", "taskset"];

/// perf's shell tests, under the unpacked root.
const PERF_TESTS: &str = "usr/lib/perf-core/tests/shell";

/// The library directories the guest's ld.so searches without a cache.
pub const GUEST_LIB_DIRS: &[&str] = &["lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu"];

/// perf's ELF interpreter.
const LOADER: &str = "lib/ld-linux-aarch64.so.1";

/// Downloads and unpacks perf with its closure, keyed by perf's version.
fn perf(paths: &Paths, apt: &Apt, c: &Candidates) -> Result<PathBuf> {
    let version = c.perf.clone();
    // Keyed by what goes in too, so a changed package list unpacks anew.
    let dir = paths
        .cache
        .join("perf")
        .join(format!("{version}+{}", GUEST_PACKAGES.join("+")));
    let root = dir.join("root");
    let complete = dir.join(".complete");
    if complete.exists() {
        return Ok(root);
    }
    let step = Step::new(format!(
        "guest perf {version} and its libraries: download and unpack"
    ));
    let debs = dir.join("debs");
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&debs)?;
    let pkgs: Vec<String> = perf_packages(apt)?
        .into_iter()
        .map(|p| format!("{p}:arm64"))
        .collect();
    apt_download(
        apt,
        "apt-get download of linux-perf:arm64 and its libraries",
        &debs,
        &pkgs,
    )?;
    unpack_debs(&debs, &root)?;
    // Merged-/usr suites ship the loader in /usr/lib only; base-files'
    // /lib symlink is not in the closure, so link the interpreter itself.
    if fs::symlink_metadata(root.join(LOADER)).is_err() {
        let usr = Path::new("..").join("usr").join(LOADER);
        if root.join("usr").join(LOADER).exists() {
            fs::create_dir_all(root.join("lib"))?;
            std::os::unix::fs::symlink(&usr, root.join(LOADER))
                .with_context(|| format!("linking {LOADER}"))?;
        }
    }
    let files = perf_closure(&root)?;
    write_atomic(
        &dir.join("closure.txt"),
        (files.join("\n") + "\n").as_bytes(),
    )?;
    write_atomic(&complete, b"ok\n")?;
    step.done("ready");
    Ok(root)
}

/// Walks DT_NEEDED from perf and returns the guest paths (relative to
/// `root`) of every library it loads, soname links and their targets. A
/// missing soname fails here rather than as a loader error in the guest.
fn perf_closure(root: &Path) -> Result<Vec<String>> {
    let needed = |elf: &Path| -> Result<Vec<String>> {
        let out = run(
            "aarch64-linux-gnu-readelf -d",
            Command::new("aarch64-linux-gnu-readelf").arg("-d").arg(elf),
        )?;
        Ok(out
            .lines()
            .filter(|l| l.contains("(NEEDED)"))
            .filter_map(|l| l.split('[').nth(1)?.split(']').next().map(str::to_string))
            .collect())
    };
    // A guest path and every link hop to the file it resolves to (the
    // loader resolves each hop in the guest).
    let with_target = |link: &str, files: &mut Vec<String>| -> Result<PathBuf> {
        let mut rel = PathBuf::from(link);
        for _ in 0..16 {
            files.push(rel.to_string_lossy().into_owned());
            let p = root.join(&rel);
            let meta = fs::symlink_metadata(&p)
                .with_context(|| format!("perf closure: {} does not exist", rel.display()))?;
            if !meta.file_type().is_symlink() {
                return Ok(p);
            }
            let target = fs::read_link(&p)?;
            let joined = if target.is_absolute() {
                target.strip_prefix("/").unwrap_or(&target).to_path_buf()
            } else {
                rel.parent().unwrap_or(Path::new("")).join(target)
            };
            rel = lexical_normal(&joined).with_context(|| {
                format!("perf closure: {link} points outside the unpacked tree")
            })?;
        }
        bail!("perf closure: {link}: too many levels of links")
    };
    let mut files = Vec::new();
    with_target(LOADER, &mut files)?;
    let mut todo = Vec::new();
    for prog in GUEST_PROGRAMS {
        let found = ["usr/bin", "bin"]
            .iter()
            .map(|d| format!("{d}/{prog}"))
            .find(|p| root.join(p).exists())
            .with_context(|| format!("guest userland: no {prog} in the unpacked packages"))?;
        let real = with_target(&found, &mut files)?;
        todo.extend(needed(&real)?);
    }
    // perf's own shell tests (`perf test`), with the helpers they source.
    let tests = root.join(PERF_TESTS);
    for e in walk(&tests)? {
        let rel = e.strip_prefix(root).expect("under root");
        files.push(rel.to_string_lossy().into_owned());
    }
    let mut seen = std::collections::BTreeSet::new();
    while let Some(so) = todo.pop() {
        if !seen.insert(so.clone()) {
            continue;
        }
        let Some(dir) = GUEST_LIB_DIRS
            .iter()
            .find(|d| fs::symlink_metadata(root.join(d).join(&so)).is_ok())
        else {
            bail!("perf closure: {so} is needed but no library package of perf's provides it");
        };
        let real = with_target(&format!("{dir}/{so}"), &mut files)?;
        todo.extend(needed(&real)?);
    }
    files.sort();
    files.dedup();
    Ok(files)
}

/// Every file (and link) under `dir`, recursively.
fn walk(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if fs::symlink_metadata(&p)?.is_dir() {
            out.extend(walk(&p)?);
        } else {
            out.push(p);
        }
    }
    Ok(out)
}

/// `a/b/../c` as `a/c`; `None` if it climbs above its start.
fn lexical_normal(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir if !out.pop() => return None,
            std::path::Component::Normal(n) => out.push(n),
            _ => {}
        }
    }
    Some(out)
}

/// `apt-get download` into `dir`.
fn apt_download(apt: &Apt, step: &str, dir: &Path, pkgs: &[String]) -> Result<()> {
    run(
        step,
        apt.command("apt-get")
            .current_dir(dir)
            .arg("download")
            .args(pkgs),
    )?;
    Ok(())
}

fn unpack_debs(debs: &Path, root: &Path) -> Result<()> {
    fs::create_dir_all(root)?;
    for e in fs::read_dir(debs)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "deb") {
            run(
                &format!("unpacking {}", p.display()),
                Command::new("dpkg-deb").arg("-x").arg(&p).arg(root),
            )?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const SOURCES: &str = "Types: deb\n# comment\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/k.gpg\n\nTypes: deb\nURIs: http://mirror.example/debian-security\nSuites: bookworm-security\nComponents: main\n";

    #[test]
    fn backports_stanza_reuses_mirror_and_key() {
        let s = backports_stanza(SOURCES).unwrap();
        assert_eq!(
            s,
            "Types: deb deb-src\nURIs: http://mirror.example/debian\nSuites: bookworm-backports\nComponents: main\nSigned-By: /usr/share/keyrings/k.gpg\n"
        );
    }

    #[test]
    fn backports_stanza_needs_bookworm() {
        assert!(backports_stanza("Types: deb\nURIs: x\nSuites: bookworm-security\n").is_err());
    }

    #[test]
    fn candidates_resolve_the_kernel_abi() {
        let show = "Package: linux-image-arm64\nVersion: 6.1.192-2\nArchitecture: arm64\nDepends: linux-image-6.1.0-56-arm64 (= 6.1.192-2)\n\nPackage: busybox-static\nVersion: 1:1.35.0-4+b1\n\nPackage: linux-perf\nVersion: 6.1.192-2\nDepends: libc6 (>= 2.34), perl:any\n";
        let c = parse_candidates(show).unwrap();
        assert_eq!(c.kver, "6.1.0-56-arm64");
        assert_eq!(c.kernel, "6.1.192-2");
        assert_eq!(c.perf, "6.1.192-2");
        assert!(parse_candidates("Package: linux-image-arm64\nDepends: foo\n").is_err());
        // 7.x: the metapackage names linux-base-arm64 first.
        let show = "Package: linux-image-arm64\nVersion: 7.3.4-1~bpo13+1\nDepends: linux-base-arm64 (= 7.3.4-1~bpo13+1), linux-image-7.3.4+deb13-arm64 (= 7.3.4-1~bpo13+1), linux-modules-arm64 (= 7.3.4-1~bpo13+1)\n\nPackage: linux-perf\nVersion: 7.3.4-1~bpo13+1\n";
        let c = parse_candidates(show).unwrap();
        assert_eq!(c.kver, "7.3.4+deb13-arm64");
        assert_eq!(c.kernel, "7.3.4-1~bpo13+1");
    }

    #[test]
    fn library_depends_skip_interpreters_and_versions() {
        let show = "Package: linux-perf\nDepends: perl:any, python3:any, libc6 (>= 2.38), libdw1t64 (>= 0.161), zlib1g (>= 1:1.2.3.4), libfoo1 | libbar1\nDescription: x\n Depends: libnot-a-field\n\nPackage: libdw1t64\nPre-Depends: libc6\nDepends: libelf1t64 (= 0.192)\n";
        assert_eq!(
            depends_with_prefix(show, LIBRARY_PREFIXES),
            ["libc6", "libdw1t64", "zlib1g", "libfoo1", "libelf1t64"]
        );
        let image = "Package: linux-image-7.3.4+deb13-arm64\nDepends: dracut | initramfs-tools (>= 0.120+deb8u2) | linux-initramfs-tool, linux-base-7.3.4+deb13-arm64 (= 7.3.4-1~bpo13+1), linux-binary-7.3.4+deb13-arm64 (= 7.3.4-1~bpo13+1), linux-modules-7.3.4+deb13-arm64 (= 7.3.4-1~bpo13+1)\n";
        assert_eq!(
            depends_with_prefix(image, &["linux-binary-", "linux-modules-"]),
            [
                "linux-binary-7.3.4+deb13-arm64",
                "linux-modules-7.3.4+deb13-arm64"
            ]
        );
    }

    #[test]
    fn headers_deps_name_common_kbuild_and_gcc() {
        let show = "Package: linux-headers-6.1.0-56-arm64\nDepends: linux-headers-6.1.0-56-common (= 6.1.192-2), linux-kbuild-6.1 (>= 6.1.192-2), gcc-12\n";
        assert_eq!(
            HeadersDeps::parse(show).unwrap(),
            HeadersDeps {
                common: "linux-headers-6.1.0-56-common".into(),
                kbuild: "linux-kbuild-6.1".into(),
                gcc: "12".into(),
            }
        );
        let show = "Package: linux-headers-6.12.117+deb13-arm64\nDepends: linux-base (>= 4.12~), linux-headers-6.12.117+deb13-common (= 6.12.117-1), linux-image-6.12.117+deb13-arm64 (= 6.12.117-1) | linux-image-6.12.117+deb13-arm64-unsigned (= 6.12.117-1), linux-kbuild-6.12.117+deb13, gcc-14\n";
        let d = HeadersDeps::parse(show).unwrap();
        assert_eq!(d.kbuild, "linux-kbuild-6.12.117+deb13");
        assert_eq!(d.common, "linux-headers-6.12.117+deb13-common");
        let show = "Package: linux-headers-7.3.4+deb13-arm64\nDepends: gcc-14-for-host, linux-base (>= 4.12~), linux-base-7.3.4+deb13-arm64 (= 7.3.4-1~bpo13+1), linux-headers-7.3.4+deb13-common (= 7.3.4-1~bpo13+1), linux-kbuild-7.3.4+deb13\n";
        let d = HeadersDeps::parse(show).unwrap();
        assert_eq!(d.gcc, "14");
        assert_eq!(d.kbuild, "linux-kbuild-7.3.4+deb13");
        assert!(HeadersDeps::parse("Package: x\nDepends: linux-kbuild-6.1, gcc-12\n").is_err());
        assert!(HeadersDeps::parse(
            "Package: x\nDepends: linux-headers-1-common, linux-kbuild-1, gcc-for-host\n"
        )
        .is_err());
    }

    #[test]
    fn headers_makefile_points_into_the_cache() {
        let d = std::env::temp_dir().join(format!("xtask-hdr-{}", std::process::id()));
        let tree = d.join("root/usr/src/linux-headers-7.3.4+deb13-arm64");
        fs::create_dir_all(&tree).unwrap();
        fs::write(
            tree.join("Makefile"),
            "KBUILD_OUTPUT=/usr/src/linux-headers-7.3.4+deb13-arm64\ninclude /usr/src/linux-headers-7.3.4+deb13-common/Makefile\n",
        )
        .unwrap();
        fix_headers_makefile(&tree, &d.join("root")).unwrap();
        let r = d.join("root").display().to_string();
        assert_eq!(
            fs::read_to_string(tree.join("Makefile")).unwrap(),
            format!("KBUILD_OUTPUT={r}/usr/src/linux-headers-7.3.4+deb13-arm64\ninclude {r}/usr/src/linux-headers-7.3.4+deb13-common/Makefile\n")
        );
        fs::remove_dir_all(&d).unwrap();
        assert!(fix_headers_makefile(&tree, &d).is_err(), "no Makefile");
    }

    #[test]
    fn amd64_programs_are_told_apart() {
        // A 64-bit little-endian header for `machine` with one program
        // header of type `pt`.
        let elf = |machine: u16, pt: u32| {
            let mut b = vec![0u8; 64 + 56];
            b[..4].copy_from_slice(b"\x7fELF");
            b[4] = 2;
            b[5] = 1;
            b[18..20].copy_from_slice(&machine.to_le_bytes());
            b[32..40].copy_from_slice(&64u64.to_le_bytes());
            b[54..56].copy_from_slice(&56u16.to_le_bytes());
            b[56..58].copy_from_slice(&1u16.to_le_bytes());
            b[64..68].copy_from_slice(&pt.to_le_bytes());
            b
        };
        assert!(is_elf64_le_x86_64(&elf(62, 3)) && has_interpreter(&elf(62, 3)));
        assert!(!has_interpreter(&elf(62, 1)), "static");
        assert!(!is_elf64_le_x86_64(&elf(183, 3)), "aarch64 (vmlinux)");
        assert!(!is_elf64_le_x86_64(b"#!/bin/sh\n"));
        let mut cut = elf(62, 3);
        cut.truncate(66);
        assert!(!has_interpreter(&cut), "program headers past the end");
        assert_eq!(sh_quote(Path::new("/a b/it's")), r"'/a b/it'\''s'");
    }

    /// The wrapping with the host's own loader and C library standing in
    /// for a newer suite's: the program runs, keeps the name it was called
    /// by, and the libraries stay as they are.
    #[test]
    fn wrapped_programs_run_through_the_unpacked_loader() {
        let (loader, libc) = (
            Path::new("/lib64/ld-linux-x86-64.so.2"),
            Path::new("/lib/x86_64-linux-gnu/libc.so.6"),
        );
        if !loader.exists() || !libc.exists() || !Path::new("/bin/dash").exists() {
            eprintln!("skipped: not an x86-64 Debian host");
            return;
        }
        let d = std::env::temp_dir().join(format!("xtask-wrap-{}", std::process::id()));
        let lib = d.join(UNPACKED_LIBDIR);
        fs::create_dir_all(&lib).unwrap();
        fs::create_dir_all(d.join("usr/bin")).unwrap();
        fs::copy(loader, d.join(UNPACKED_LOADER)).unwrap();
        fs::copy(libc, lib.join("libc.so.6")).unwrap();
        fs::copy("/bin/dash", d.join("usr/bin/sh")).unwrap();
        fs::write(d.join("usr/bin/script"), "#!/bin/sh\n").unwrap();
        run_on_unpacked_libc(&d).unwrap();
        let sh = d.join("usr/bin/sh");
        assert!(d.join("usr/bin/sh.real").exists());
        assert!(!lib.join("libc.so.6.real").exists(), "a library");
        assert!(!d.join("usr/bin/script.real").exists(), "not ELF");
        let out = run("wrapped sh", Command::new(&sh).args(["-c", "echo $0"])).unwrap();
        assert_eq!(out.trim(), sh.display().to_string());
        fs::remove_dir_all(&d).unwrap();
        assert!(run_on_unpacked_libc(&d).is_err(), "no loader");
    }

    #[test]
    fn link_hops_normalise_inside_the_tree() {
        assert_eq!(
            lexical_normal(Path::new("lib/../usr/lib/aarch64-linux-gnu/x.so")).unwrap(),
            Path::new("usr/lib/aarch64-linux-gnu/x.so")
        );
        assert!(lexical_normal(Path::new("lib/../../etc/passwd")).is_none());
    }

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
