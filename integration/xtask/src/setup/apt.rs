//! apt: the backports source the host needs, its lists, and the guest
//! packages' candidates, downloads and unpacking.

use super::BACKPORTS_FILE;
use crate::host::{self, is_root, privileged, BACKPORTS};
use crate::kernels::{self, Apt, KernelSpec};
use crate::util::{run, Step};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::Path;
use std::process::Command;
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
pub(super) fn apt_sources() -> Result<bool> {
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
pub(super) fn lists_present() -> bool {
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
pub(super) fn apt_update_if_needed(changed: bool) -> Result<bool> {
    if !changed && lists_present() {
        return Ok(false);
    }
    apt_update()?;
    Ok(true)
}

pub(super) fn apt_update() -> Result<()> {
    let step = Step::new("apt-get update");
    run(
        "apt-get update (is a package registry reachable?)",
        privileged("apt-get").args(["-q", "update"]),
    )?;
    step.done("done");
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

pub(super) const CANDIDATE_PACKAGES: &[&str] = &["linux-image-arm64:arm64", "linux-perf:arm64"];

pub(super) fn candidates(apt: &Apt, spec: &KernelSpec) -> Result<Candidates> {
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
pub(super) fn stanzas(text: &str) -> Vec<(String, std::collections::HashMap<String, String>)> {
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

/// `apt-get download` into `dir`.
pub(super) fn apt_download(apt: &Apt, step: &str, dir: &Path, pkgs: &[String]) -> Result<()> {
    run(
        step,
        apt.command("apt-get")
            .current_dir(dir)
            .arg("download")
            .args(pkgs),
    )?;
    Ok(())
}

pub(super) fn unpack_debs(debs: &Path, root: &Path) -> Result<()> {
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
    use crate::setup::userland::LIBRARY_PREFIXES;

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
}
