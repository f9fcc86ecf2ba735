//! Idempotent, cached set-up: apt sources and packages, the patched QEMUs
//! and the Debian arm64 guest kernel and userland.
//!
//! Every step checks a cheap marker first (dpkg state, apt lists, a
//! `.complete` file in the cache) so a second run with nothing changed only
//! pays for a few `dpkg-query`/`apt-cache` calls.

mod acpi_test;
mod apt;
mod debian_qemu;
mod grub;
mod kernel;
mod qemu;
mod series;
mod userland;

pub use acpi_test::bios_tables_test;
pub use qemu::{new_series_tree, series_build, series_patches, series_tree};
pub use series::{check_round_trip, export as series_export};
pub use userland::GUEST_PROGRAMS;

use crate::host::{self, SUITE};
use crate::kernels::{self, Apt, KernelSpec};
use anyhow::{bail, Context, Result};
use apt::{apt_sources, apt_update, apt_update_if_needed, candidates};
use kernel::guest;
use std::fs;
use std::path::{Path, PathBuf};
use userland::perf;

/// A QEMU release's source: Debian's `+ds` orig tarball (QEMU's release
/// without its prebuilt firmware) of one source package version, read
/// from unstable through a private apt configuration (the host's apt is
/// untouched), and its SHA-256, which `SPE_QEMU_TARBALL` must match too.
#[derive(Debug, PartialEq, Eq)]
pub struct QemuSource {
    pub package_version: &'static str,
    pub tarball: &'static str,
    pub sha256: &'static str,
}

/// A Debian binary package of QEMU, from one suite of the private apt
/// configuration (`kernels::Apt`), unpacked with the suite's own
/// libraries and run through the suite's dynamic loader.
#[derive(Debug, PartialEq, Eq)]
pub struct DebianBinary {
    pub package: &'static str,
    pub package_version: &'static str,
    pub suite: &'static str,
}

/// Where a release's QEMU comes from.
#[derive(Debug, PartialEq, Eq)]
pub enum QemuOrigin {
    /// Built here from a source tarball.
    Source(QemuSource),
    /// Debian's own build: what users of that suite run.
    Debian(DebianBinary),
}

/// A QEMU release: the series' (`qemu-patches/<version>/`), the stock
/// path's unpatched build of the same source, or Debian's own binary of
/// a newer QEMU for the stock path.
#[derive(Debug, PartialEq, Eq)]
pub struct QemuRelease {
    pub version: &'static str,
    pub origin: QemuOrigin,
    /// The generic vhost-user device the paravirtual path plugs in.
    pub vhost_user_device: &'static str,
    /// The variable that points the harness at a hand-built binary instead.
    pub override_var: &'static str,
    /// Without the series (built as the tarball has it, or Debian's): a
    /// stock-QEMU path's QEMU (the TCG plugin and the paravirtual device).
    pub stock: bool,
}

/// QEMU 10.2.2 from Debian unstable: the series' release and the stock
/// path's QEMU, one source for both.
const QEMU_10_2_2: QemuSource = QemuSource {
    package_version: "1:10.2.2+ds-1",
    tarball: "qemu_10.2.2+ds.orig.tar.xz",
    sha256: "be05230fe47a6937cd29f28f562932c8125f9c93c2a82c625198f7a4aa601dfb",
};
/// QEMU 10.2's user-creatable generic vhost-user device.
const VHOST_USER_TEST_DEVICE: &str = "vhost-user-test-device-pci";

/// The releases, the patched one first: `cargo xtask test`'s matrix, the
/// demo and `install` run on it; the stock ones run the stock path's
/// scenarios: the unpatched 10.2.2 (the oldest plugin API the plugin
/// speaks, 5) and Debian's QEMU 11.1 (the newest, 7).
pub const QEMU_RELEASES: &[QemuRelease] = &[
    QemuRelease {
        version: "10.2.2",
        origin: QemuOrigin::Source(QEMU_10_2_2),
        vhost_user_device: VHOST_USER_TEST_DEVICE,
        override_var: "SPE_QEMU",
        stock: false,
    },
    QemuRelease {
        version: "10.2.2",
        origin: QemuOrigin::Source(QEMU_10_2_2),
        vhost_user_device: VHOST_USER_TEST_DEVICE,
        override_var: "SPE_QEMU_STOCK",
        stock: true,
    },
    QemuRelease {
        version: "11.1.3",
        origin: QemuOrigin::Debian(DebianBinary {
            package: "qemu-system-arm",
            package_version: "1:11.1.3+ds-2~bpo13+1",
            suite: "trixie-backports",
        }),
        vhost_user_device: VHOST_USER_TEST_DEVICE,
        override_var: "SPE_QEMU_DEBIAN",
        stock: true,
    },
];

impl QemuRelease {
    /// The release `cargo xtask test`'s matrix, the demo and `install` use.
    pub fn main() -> &'static QemuRelease {
        &QEMU_RELEASES[0]
    }

    /// Whether this is [`QemuRelease::main`].
    pub fn is_main(&self) -> bool {
        self == Self::main()
    }

    /// `--qemu V`: a release by its version, or by its first two numbers
    /// (`10.2`: the patched one of that version), or by its label;
    /// `stock` is the unpatched 10.2.2.
    pub fn by_version(v: &str) -> Result<&'static QemuRelease> {
        QEMU_RELEASES
            .iter()
            .find(|r| {
                if v == "stock" {
                    return r.stock && r.source().is_some();
                }
                r.label() == v
                    || r.version == v
                    || r.version.rsplit_once('.').is_some_and(|(mm, _)| mm == v)
            })
            .with_context(|| {
                let all: Vec<String> = QEMU_RELEASES.iter().map(|r| r.label()).collect();
                format!(
                    "--qemu {v:?}: the QEMUs are {} (stock: `--qemu stock`)",
                    all.join(", ")
                )
            })
    }

    /// The version, with `-stock` for the unpatched build and `-debian`
    /// for Debian's: the name of its cache folder, runs folder and
    /// install prefix.
    pub fn label(&self) -> String {
        match (&self.origin, self.stock) {
            (QemuOrigin::Debian(_), _) => format!("{}-debian", self.version),
            (QemuOrigin::Source(_), true) => format!("{}-stock", self.version),
            (QemuOrigin::Source(_), false) => self.version.to_string(),
        }
    }

    /// The source it is built from; `None` for a Debian binary.
    pub fn source(&self) -> Option<&QemuSource> {
        match &self.origin {
            QemuOrigin::Source(s) => Some(s),
            QemuOrigin::Debian(_) => None,
        }
    }

    /// The releases a series is kept for (`qemu-patches/<version>/`).
    pub fn patched() -> impl Iterator<Item = &'static QemuRelease> {
        QEMU_RELEASES.iter().filter(|r| !r.stock)
    }

    /// `qemu-patches/<version>`.
    pub fn patch_dir(&self, repo: &Path) -> PathBuf {
        repo.join("qemu-patches").join(self.version)
    }
}

/// A built QEMU of one release.
#[derive(Clone, Debug)]
pub struct Qemu {
    pub release: &'static QemuRelease,
    pub binary: PathBuf,
}
pub(super) const BACKPORTS_FILE: &str =
    "/etc/apt/sources.list.d/vhost-device-spe-backports.sources";

/// The kernel modules the guest needs (virtio_console: the guest control
/// port); the initramfs adds what they depend on, and skips the ones a
/// kernel has built in (7.x: virtio_pci).
pub const GUEST_MODULES: &[&str] = &["virtio_pci", "virtio_mmio", "arm_spe_pmu", "virtio_console"];

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
    /// `kernel.rs`'s `headers()`); every kernel of the matrix has one.
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
    /// One per release asked for, in [`QEMU_RELEASES`]' order.
    pub qemus: Vec<Qemu>,
    /// GRUB's EFI image, for the disk boots.
    pub grub_efi: PathBuf,
    /// One per kernel asked for, in the matrix's order.
    pub guests: Vec<GuestEnv>,
}

/// Runs the whole set-up for `kernels` and the QEMU `releases` and
/// returns where the results are.
pub fn setup(
    paths: &Paths,
    kernels: &[&'static KernelSpec],
    releases: &[&'static QemuRelease],
) -> Result<Env> {
    check_host()?;
    let lists_changed = apt_sources()?;
    let fresh_lists = apt_update_if_needed(lists_changed)?;
    host::packages(apt_update)?;
    let qemus = releases
        .iter()
        .map(|&release| {
            Ok(Qemu {
                release,
                binary: qemu::qemu(paths, release)?,
            })
        })
        .collect::<Result<_>>()?;
    let mut guests = Vec::new();
    for &spec in kernels {
        guests.push(guest_env(paths, spec, fresh_lists)?);
    }
    let grub_efi = grub::grub_efi(paths, &Apt::for_kernel(&kernels::MATRIX[0], &paths.cache)?)?;
    Ok(Env {
        qemus,
        grub_efi,
        guests,
    })
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
        bail!("host check: only Debian {SUITE} hosts are supported (the set-up installs its packages)");
    }
    Ok(())
}
