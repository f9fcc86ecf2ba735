//! The guest initramfs: busybox, the kernel modules the guest needs, `/init`
//! and the scenario scripts, written as an uncompressed newc cpio archive.
//!
//! Written in Rust rather than with `cpio` so the archive can hold
//! `/dev/console` (the kernel opens it for /init's output before devtmpfs is
//! mounted) without mknod, and so the archive is reproducible (fixed owner
//! and mtime).

use crate::setup::{Guest, GUEST_MODULES, GUEST_PROGRAMS};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fs;
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

#[derive(Debug, Clone, PartialEq)]
pub enum Node {
    Dir,
    /// Host file copied in with the given permission bits.
    File(PathBuf, u32),
    Data(Vec<u8>, u32),
    Symlink(String),
    CharDev(u32, u32),
}

/// An archive under construction: guest path (no leading slash) → node.
/// Parent directories are added automatically.
#[derive(Default)]
pub struct Archive {
    nodes: BTreeMap<String, Node>,
}

impl Archive {
    pub fn add(&mut self, path: &str, node: Node) {
        let path = path.trim_start_matches('/').to_string();
        let mut parent = Path::new(&path).parent();
        while let Some(p) = parent {
            let s = p.to_string_lossy();
            if s.is_empty() {
                break;
            }
            self.nodes.entry(s.into_owned()).or_insert(Node::Dir);
            parent = p.parent();
        }
        self.nodes.insert(path, node);
    }

    /// Adds a host file or symlink at `dest`.
    pub fn add_host(&mut self, src: &Path, dest: &str) -> Result<()> {
        let meta =
            fs::symlink_metadata(src).with_context(|| format!("reading {}", src.display()))?;
        if meta.file_type().is_symlink() {
            self.add(
                dest,
                Node::Symlink(fs::read_link(src)?.to_string_lossy().into_owned()),
            );
        } else {
            self.add(
                dest,
                Node::File(src.to_path_buf(), meta.permissions().mode() & 0o7777),
            );
        }
        Ok(())
    }

    /// Writes the archive in the kernel's "newc" cpio format.
    pub fn write(&self, out: &Path) -> Result<()> {
        let tmp = out.with_extension("tmp");
        let mut w = BufWriter::new(
            fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?,
        );
        for (ino, (name, node)) in self.nodes.iter().enumerate() {
            let (mode, data, rdev) = match node {
                Node::Dir => (0o040755, Vec::new(), (0, 0)),
                Node::File(p, perm) => (
                    0o100000 | perm,
                    fs::read(p).with_context(|| format!("reading {}", p.display()))?,
                    (0, 0),
                ),
                Node::Data(d, perm) => (0o100000 | perm, d.clone(), (0, 0)),
                Node::Symlink(t) => (0o120777, t.as_bytes().to_vec(), (0, 0)),
                Node::CharDev(maj, min) => (0o020600, Vec::new(), (*maj, *min)),
            };
            entry(&mut w, ino as u32 + 1, name, mode, &data, rdev)?;
        }
        entry(&mut w, 0, "TRAILER!!!", 0, &[], (0, 0))?;
        w.flush()?;
        drop(w);
        fs::rename(&tmp, out).with_context(|| format!("writing {}", out.display()))?;
        Ok(())
    }
}

fn entry(
    w: &mut impl Write,
    ino: u32,
    name: &str,
    mode: u32,
    data: &[u8],
    rdev: (u32, u32),
) -> Result<()> {
    let namesize = name.len() + 1;
    let nlink = if mode & 0o170000 == 0o040000 { 2 } else { 1 };
    let fields = [
        ino,
        mode,
        0, // uid
        0, // gid
        nlink,
        0, // mtime: fixed for reproducible images
        data.len() as u32,
        0,
        0,
        rdev.0,
        rdev.1,
        namesize as u32,
        0,
    ];
    let mut hdr = String::from("070701");
    for f in fields {
        hdr.push_str(&format!("{f:08x}"));
    }
    w.write_all(hdr.as_bytes())?;
    w.write_all(name.as_bytes())?;
    w.write_all(&[0])?;
    w.write_all(&[0; 3][..pad4(110 + namesize)])?;
    w.write_all(data)?;
    w.write_all(&[0; 3][..pad4(data.len())])?;
    Ok(())
}

fn pad4(n: usize) -> usize {
    (4 - n % 4) % 4
}

/// Every module file under `dir`, by module name (dashes as underscores,
/// as modinfo writes them): `.ko`, or `.ko.xz` as Debian's newer kernels
/// ship them.
fn module_index(dir: &Path, index: &mut BTreeMap<String, PathBuf>) -> Result<()> {
    for e in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            module_index(&p, index)?;
        } else if let Some(f) = p.file_name().and_then(|f| f.to_str()) {
            if let Some(stem) = f.strip_suffix(".ko").or_else(|| f.strip_suffix(".ko.xz")) {
                index.insert(stem.replace('-', "_"), p.clone());
            }
        }
    }
    Ok(())
}

/// A module's bytes, decompressed: busybox's insmod loads plain ELF only.
fn module_bytes(p: &Path) -> Result<Vec<u8>> {
    if p.extension().is_some_and(|x| x == "xz") {
        let out = Command::new("xz")
            .arg("-dc")
            .arg(p)
            .output()
            .with_context(|| format!("starting xz -dc {}", p.display()))?;
        if !out.status.success() {
            bail!(
                "xz -dc {}: {}",
                p.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        return Ok(out.stdout);
    }
    fs::read(p).with_context(|| format!("reading {}", p.display()))
}

/// The `depends=` of a module's .modinfo: the modules it needs loaded
/// first.
pub fn modinfo_depends(ko: &[u8]) -> Vec<String> {
    ko.split(|&b| b == 0)
        .find_map(|f| f.strip_prefix(b"depends="))
        .map(|v| {
            String::from_utf8_lossy(v)
                .split(',')
                .filter(|s| !s.is_empty())
                .map(|s| s.replace('-', "_"))
                .collect()
        })
        .unwrap_or_default()
}

/// The modules to put in the image for `roots`, in load order (what a
/// module depends on first), as (file stem, modules-tree path, bytes).
/// A root with no module file is built into the kernel and skipped; a
/// missing dependency is an error.
pub fn module_closure(modules: &Path, roots: &[&str]) -> Result<Vec<(String, String, Vec<u8>)>> {
    let mut index = BTreeMap::new();
    module_index(&modules.join("kernel"), &mut index)?;
    let mut order = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    fn visit(
        name: &str,
        root: bool,
        modules: &Path,
        index: &BTreeMap<String, PathBuf>,
        seen: &mut std::collections::BTreeSet<String>,
        order: &mut Vec<(String, String, Vec<u8>)>,
    ) -> Result<()> {
        if !seen.insert(name.to_string()) {
            return Ok(());
        }
        let Some(p) = index.get(name) else {
            if root {
                return Ok(());
            }
            bail!(
                "initramfs: module {name} is a dependency but not under {}",
                modules.display()
            );
        };
        let bytes = module_bytes(p)?;
        for d in modinfo_depends(&bytes) {
            visit(&d, false, modules, index, seen, order)?;
        }
        let rel = p
            .strip_prefix(modules)
            .expect("module is under the modules tree")
            .to_string_lossy();
        let rel = rel.strip_suffix(".xz").unwrap_or(&rel).to_string();
        let stem = Path::new(&rel)
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        order.push((stem, rel, bytes));
        Ok(())
    }
    for r in roots {
        visit(r, true, modules, &index, &mut seen, &mut order)?;
    }
    if !order.iter().any(|(stem, _, _)| stem == "arm_spe_pmu") && roots.contains(&"arm_spe_pmu") {
        bail!(
            "initramfs: arm_spe_pmu not found under {}",
            modules.display()
        );
    }
    Ok(order)
}

/// Builds the guest initramfs at `out`. `guest_dir` is the repository's
/// `integration/guest` (init + scenarios); `extra_modules` are our own
/// modules, placed in lib/modules/<kver>/extra for scenarios to insmod;
/// `programs` (the guest workloads) go to usr/bin.
pub fn build(
    guest: &Guest,
    perf: Option<&Path>,
    guest_dir: &Path,
    extra_modules: &[PathBuf],
    programs: &[PathBuf],
    out: &Path,
) -> Result<()> {
    let mut a = Archive::default();
    a.add("bin/busybox", Node::File(guest.busybox.clone(), 0o755));
    // /init's interpreter must exist before `busybox --install` runs.
    a.add("bin/sh", Node::Symlink("busybox".into()));
    a.add("dev/console", Node::CharDev(5, 1));
    for d in ["proc", "sys", "tmp", "sbin", "usr/bin", "usr/sbin", "etc"] {
        a.add(d, Node::Dir);
    }
    a.add("init", Node::File(guest_dir.join("init"), 0o755));
    // The scenario scripts and the helpers they source (scenarios/lib).
    for dir in ["scenarios", "scenarios/lib"] {
        let src = guest_dir.join(dir);
        let entries = match fs::read_dir(&src) {
            Ok(d) => d,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && dir != "scenarios" => continue,
            Err(e) => return Err(e).with_context(|| format!("reading {}", src.display())),
        };
        for e in entries {
            let p = e?.path();
            if p.extension().is_some_and(|x| x == "sh") {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                a.add(&format!("{dir}/{name}"), Node::File(p, 0o644));
            }
        }
    }

    // The filtering attributes' table, for the guest's judge (LAVA).
    a.add(
        "scenarios/lib/attributes.tab",
        Node::Data(crate::attributes::table().into_bytes(), 0o644),
    );

    let kmods = format!("lib/modules/{}", guest.kver);
    let mut list = String::new();
    for (stem, rel, bytes) in module_closure(&guest.modules, GUEST_MODULES)? {
        a.add(&format!("{kmods}/{rel}"), Node::Data(bytes, 0o644));
        list.push_str(&stem);
        list.push('\n');
    }
    a.add("etc/spe-modules", Node::Data(list.into_bytes(), 0o644));
    a.add(&format!("{kmods}/extra"), Node::Dir);
    for m in extra_modules {
        let name = m
            .file_name()
            .context("module path has no file name")?
            .to_string_lossy()
            .into_owned();
        a.add(
            &format!("{kmods}/extra/{name}"),
            Node::File(m.clone(), 0o644),
        );
    }
    for p in programs {
        let name = p.file_name().context("program path has no file name")?;
        a.add(
            &format!("usr/bin/{}", name.to_string_lossy()),
            Node::File(p.clone(), 0o755),
        );
    }
    if let Some(root) = perf {
        add_perf(&mut a, root)?;
    }
    a.write(out)
}

/// perf, the dynamic loader and the libraries of perf's closure, as listed
/// by the set-up in `closure.txt` next to the unpacked tree.
fn add_perf(a: &mut Archive, root: &Path) -> Result<()> {
    let list = root.with_file_name("closure.txt");
    let text = fs::read_to_string(&list).with_context(|| format!("reading {}", list.display()))?;
    let files: Vec<&str> = text.lines().filter(|l| !l.is_empty()).collect();
    for rel in &files {
        a.add_host(&root.join(rel), rel)?;
    }
    // Merged-/usr suites ship bash in /usr/bin; scripts ask for /bin/bash.
    // (busybox --install leaves these alone: it skips existing names.)
    for prog in GUEST_PROGRAMS {
        let (bin, usr) = (format!("bin/{prog}"), format!("usr/bin/{prog}"));
        if !files.contains(&bin.as_str()) && files.contains(&usr.as_str()) {
            a.add(&bin, Node::Symlink(format!("/{usr}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modules_load_after_their_dependencies() {
        let d = std::env::temp_dir().join(format!("xtask-mods-{}", std::process::id()));
        let k = d.join("kernel/drivers");
        fs::create_dir_all(&k).unwrap();
        let ko = |deps: &str| format!("\x7fELF\0name=x\0depends={deps}\0vermagic=y\0").into_bytes();
        fs::write(
            k.join("virtio_pci.ko"),
            ko("virtio_pci_modern_dev,virtio-pci-legacy-dev"),
        )
        .unwrap();
        fs::write(k.join("virtio_pci_modern_dev.ko"), ko("")).unwrap();
        fs::write(
            k.join("virtio-pci-legacy-dev.ko"),
            ko("virtio_pci_modern_dev"),
        )
        .unwrap();
        fs::write(k.join("arm_spe_pmu.ko"), ko("")).unwrap();
        let got = module_closure(&d, &["virtio_pci", "virtio_mmio", "arm_spe_pmu"]).unwrap();
        let stems: Vec<&str> = got.iter().map(|(s, _, _)| s.as_str()).collect();
        // virtio_mmio is built in (no file); deps come first, once each.
        assert_eq!(
            stems,
            [
                "virtio_pci_modern_dev",
                "virtio-pci-legacy-dev",
                "virtio_pci",
                "arm_spe_pmu"
            ]
        );
        assert_eq!(got[3].1, "kernel/drivers/arm_spe_pmu.ko");
        // A dependency with no file is an error, not a silent skip.
        fs::write(k.join("virtio_pci.ko"), ko("virtio_gone")).unwrap();
        let err = module_closure(&d, &["virtio_pci"]).unwrap_err().to_string();
        assert!(err.contains("virtio_gone"), "{err}");
        fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn newc_archive_layout() {
        let mut a = Archive::default();
        a.add("a/b", Node::Data(b"hi".to_vec(), 0o644));
        a.add("dev/console", Node::CharDev(5, 1));
        let out = std::env::temp_dir().join(format!("xtask-cpio-{}", std::process::id()));
        a.write(&out).unwrap();
        let bytes = fs::read(&out).unwrap();
        fs::remove_file(&out).unwrap();
        assert_eq!(bytes.len() % 4, 0);
        let text = String::from_utf8_lossy(&bytes);
        // Parents come first (BTreeMap order: "a" < "a/b" < "dev" < ...).
        let names: Vec<&str> = ["a\0", "a/b\0", "dev\0", "dev/console\0", "TRAILER!!!\0"]
            .into_iter()
            .collect();
        let mut pos = 0;
        for n in names {
            let at = text[pos..]
                .find(n)
                .unwrap_or_else(|| panic!("{n:?} missing"))
                + pos;
            assert_eq!(&text[at - 110..at - 104], "070701");
            pos = at;
        }
        // The char device carries rdev 5:1.
        let at = text.find("dev/console\0").unwrap() - 110;
        assert_eq!(&text[at + 6 + 9 * 8..at + 6 + 11 * 8], "0000000500000001");
    }
}
