//! The guest initramfs: busybox, the kernel modules the guest needs, `/init`
//! and the scenario scripts, written as an uncompressed newc cpio archive.
//!
//! Written in Rust rather than with `cpio` so the archive can hold
//! `/dev/console` (the kernel opens it for /init's output before devtmpfs is
//! mounted) without mknod, and so the archive is reproducible (fixed owner
//! and mtime).

use crate::setup::{Guest, GUEST_MODULES};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fs;
use std::io::{BufWriter, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

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

/// Finds `name.ko` (or a compressed variant) under the image's modules tree.
fn find_module(dir: &Path, name: &str) -> Option<PathBuf> {
    for e in fs::read_dir(dir).ok()?.flatten() {
        let p = e.path();
        if p.is_dir() {
            if let Some(found) = find_module(&p, name) {
                return Some(found);
            }
        } else if let Some(f) = p.file_name().and_then(|f| f.to_str()) {
            if f == format!("{name}.ko") {
                return Some(p);
            }
        }
    }
    None
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

    let kmods = format!("lib/modules/{}", guest.kver);
    let mut list = String::new();
    for m in GUEST_MODULES {
        let Some(p) = find_module(&guest.modules.join("kernel"), m) else {
            bail!(
                "initramfs: module {m} not found under {}",
                guest.modules.display()
            );
        };
        let rel = p
            .strip_prefix(&guest.modules)
            .expect("module is under the modules tree");
        a.add(
            &format!("{kmods}/{}", rel.display()),
            Node::File(p.clone(), 0o644),
        );
        list.push_str(m);
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
    for rel in text.lines().filter(|l| !l.is_empty()) {
        a.add_host(&root.join(rel), rel)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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
