//! The guest's userland besides the initramfs's own files: bookworm's
//! static busybox, and perf (with bash, coreutils' mktemp and util-linux's
//! taskset) with its shared-library closure, in each suite's versions.

use super::apt::{apt_download, depends_with_prefix, stanzas, unpack_debs, Candidates};
use super::Paths;
use crate::kernels::Apt;
use crate::util::{run, write_atomic, Step};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
/// bookworm's static busybox: one for every kernel of the matrix.
pub(super) fn busybox(paths: &Paths, host_apt: &Apt) -> Result<PathBuf> {
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
pub(super) const LIBRARY_PREFIXES: &[&str] = &["lib", "zlib1g"];

/// `linux-perf` and the arm64 library packages it depends on, transitively,
/// in the suite's own versions (trixie's glibc and loader for newer perf).
pub(super) fn perf_packages(apt: &Apt) -> Result<Vec<String>> {
    library_closure(apt, "perf", GUEST_PACKAGES, "arm64")
}

/// `roots` and the library packages they depend on, transitively, that
/// are built for `arch`, from `apt`'s suite. `Architecture: all` ones
/// (data, configuration) hold no libraries.
pub(super) fn library_closure(
    apt: &Apt,
    what: &str,
    roots: &[&str],
    arch: &str,
) -> Result<Vec<String>> {
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
pub(super) const GUEST_PACKAGES: &[&str] = &["linux-perf", "bash", "coreutils", "util-linux"];

/// The programs of [`GUEST_PACKAGES`] the guest gets (at their path in the
/// package, /bin or /usr/bin), with their shared-library closure.
pub const GUEST_PROGRAMS: &[&str] = &["perf", "bash", "mktemp", "taskset"];

/// perf's shell tests, under the unpacked root.
pub(super) const PERF_TESTS: &str = "usr/lib/perf-core/tests/shell";

/// The library directories the guest's ld.so searches without a cache.
pub const GUEST_LIB_DIRS: &[&str] = &["lib/aarch64-linux-gnu", "usr/lib/aarch64-linux-gnu"];

/// perf's ELF interpreter.
pub(super) const LOADER: &str = "lib/ld-linux-aarch64.so.1";

/// Downloads and unpacks perf with its closure, keyed by perf's version.
pub(super) fn perf(paths: &Paths, apt: &Apt, c: &Candidates) -> Result<PathBuf> {
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
pub(super) fn perf_closure(root: &Path) -> Result<Vec<String>> {
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
pub(super) fn walk(dir: &Path) -> Result<Vec<PathBuf>> {
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
pub(super) fn lexical_normal(p: &Path) -> Option<PathBuf> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_hops_normalise_inside_the_tree() {
        assert_eq!(
            lexical_normal(Path::new("lib/../usr/lib/aarch64-linux-gnu/x.so")).unwrap(),
            Path::new("usr/lib/aarch64-linux-gnu/x.so")
        );
        assert!(lexical_normal(Path::new("lib/../../etc/passwd")).is_none());
    }
}
