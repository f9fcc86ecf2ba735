//! Debian's own QEMU for the stock path: a newer suite's binary package
//! with the libraries it links, in that suite's versions, unpacked into
//! the cache and started through that suite's dynamic loader. The host's
//! apt and libraries are untouched (bookworm's glibc is older than the
//! one the binary needs).

use super::apt::{apt_download, stanzas, unpack_debs};
use super::userland::library_closure;
use super::{DebianBinary, Paths, QemuRelease};
use crate::kernels::Apt;
use crate::util::{run, write_atomic, Step};
use anyhow::{bail, Result};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What the binary reads from its data directory (`-L`): keymaps and
/// device trees, and the option ROMs of its PCI network cards (the
/// `virt` machine's default NIC is a virtio one).
const DATA_PACKAGES: &[&str] = &["qemu-system-data", "ipxe-qemu"];

/// The host's Debian architecture and its multiarch triplet and loader.
struct HostArch {
    debian: &'static str,
    triplet: &'static str,
    loader: &'static str,
}

fn host_arch() -> Result<HostArch> {
    Ok(match std::env::consts::ARCH {
        "x86_64" => HostArch {
            debian: "amd64",
            triplet: "x86_64-linux-gnu",
            loader: "ld-linux-x86-64.so.2",
        },
        "aarch64" => HostArch {
            debian: "arm64",
            triplet: "aarch64-linux-gnu",
            loader: "ld-linux-aarch64.so.1",
        },
        other => bail!("Debian's QEMU binary: no package for a {other} host"),
    })
}

/// The wrapper that runs `deb`'s `qemu-system-aarch64`, downloading and
/// unpacking it first if the cache has not got it.
pub(super) fn binary(paths: &Paths, release: &QemuRelease, deb: &DebianBinary) -> Result<PathBuf> {
    let dir = paths.cache.join("qemu").join(release.label());
    let wrapper = dir.join("qemu-system-aarch64");
    let complete = dir.join(".complete");
    if complete.exists() && wrapper.exists() {
        return Ok(wrapper);
    }
    let arch = host_arch()?;
    let apt = Apt::private(deb.suite, &paths.cache)?;
    let mut fresh = false;
    if !apt.lists_present() {
        apt.update()?;
        fresh = true;
    }
    let step = Step::new(format!(
        "{} {} ({}) and its libraries: download and unpack",
        deb.package, deb.package_version, deb.suite
    ));
    loop {
        let have = candidate(&apt, deb, arch.debian)?;
        if have.as_deref() == Some(deb.package_version) {
            break;
        }
        if !fresh {
            // Lists older than the mirror's: refresh once, ask again.
            apt.update()?;
            fresh = true;
            continue;
        }
        bail!(
            "QEMU {v}: {suite} has {what} of {pkg}:{a}, not the pinned {pin}; the \
             suite may have moved on. Point {var}=PATH at a qemu-system-aarch64 {v} \
             with plugins, or change the pinned version in QEMU_RELEASES. No other \
             version is used.",
            v = release.version,
            suite = deb.suite,
            what = have.map_or("no version".to_string(), |h| format!("version {h}")),
            pkg = deb.package,
            a = arch.debian,
            pin = deb.package_version,
            var = release.override_var,
        );
    }
    let _ = fs::remove_dir_all(&dir);
    let debs = dir.join("debs");
    fs::create_dir_all(&debs)?;
    // The package, pinned, and its library closure and data, the
    // suite's candidates.
    let mut pkgs: Vec<String> = library_closure(&apt, deb.package, &[deb.package], arch.debian)?
        .into_iter()
        .map(|p| {
            if p == deb.package {
                format!("{p}:{}={}", arch.debian, deb.package_version)
            } else {
                format!("{p}:{}", arch.debian)
            }
        })
        .collect();
    pkgs.extend(DATA_PACKAGES.iter().map(|p| p.to_string()));
    apt_download(
        &apt,
        &format!("apt-get download of {} and its libraries", deb.package),
        &debs,
        &pkgs,
    )?;
    let root = dir.join("root");
    unpack_debs(&debs, &root)?;
    fs::remove_dir_all(&debs)?;
    let script = wrapper_script(&root, &arch, deb);
    for needed in [
        format!("usr/lib/{}/{}", arch.triplet, arch.loader),
        "usr/bin/qemu-system-aarch64".to_string(),
    ] {
        if !root.join(&needed).exists() {
            bail!(
                "Debian's QEMU: {needed} missing after unpacking {}",
                deb.package
            );
        }
    }
    write_atomic(&wrapper, script.as_bytes())?;
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755))?;
    write_atomic(&complete, b"ok\n")?;
    step.done(&format!("{} packages", pkgs.len()));
    Ok(wrapper)
}

/// The suite's candidate version of `deb`'s package, if it has one.
fn candidate(apt: &Apt, deb: &DebianBinary, arch: &str) -> Result<Option<String>> {
    let show = run(
        &format!("apt-cache show {}", deb.package),
        apt.command("apt-cache").args([
            "show",
            "--no-all-versions",
            &format!("{}:{arch}", deb.package),
        ]),
    );
    // apt-cache exits non-zero for a package the lists do not have.
    let Ok(show) = show else {
        return Ok(None);
    };
    Ok(stanzas(&show)
        .into_iter()
        .find_map(|(_, f)| f.get("Version").cloned()))
}

/// A shell script that runs the unpacked binary on the unpacked
/// libraries, through their own loader, with its own firmware and data.
fn wrapper_script(root: &Path, arch: &HostArch, deb: &DebianBinary) -> String {
    let r = root.display();
    let t = arch.triplet;
    format!(
        "#!/bin/sh\n\
         # {pkg} {ver} ({suite}), on the libraries of its suite.\n\
         r='{r}'\n\
         exec \"$r/usr/lib/{t}/{loader}\" --library-path \"$r/usr/lib/{t}:$r/lib/{t}\" \
         \"$r/usr/bin/qemu-system-aarch64\" -L \"$r/usr/share/qemu\" \"$@\"\n",
        pkg = deb.package,
        ver = deb.package_version,
        suite = deb.suite,
        loader = arch.loader,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wrapper_runs_the_binary_through_the_suites_loader() {
        let arch = HostArch {
            debian: "amd64",
            triplet: "x86_64-linux-gnu",
            loader: "ld-linux-x86-64.so.2",
        };
        let deb = DebianBinary {
            package: "qemu-system-arm",
            package_version: "1:11.1.3+ds-2~bpo13+1",
            suite: "trixie-backports",
        };
        let s = wrapper_script(Path::new("/c/root"), &arch, &deb);
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.contains(
            "exec \"$r/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2\" --library-path \
             \"$r/usr/lib/x86_64-linux-gnu:$r/lib/x86_64-linux-gnu\" \
             \"$r/usr/bin/qemu-system-aarch64\" -L \"$r/usr/share/qemu\" \"$@\"\n"
        ));
        assert!(s.contains("r='/c/root'\n"));
    }
}
