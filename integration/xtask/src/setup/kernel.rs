//! The guest kernels: the Debian arm64 image and its headers tree, with
//! the cross tools a newer suite's tree needs.

use super::apt::{apt_download, depends_with_prefix, unpack_debs, Candidates};
use super::userland::{busybox, library_closure, walk};
use super::{Guest, Paths};
use crate::kernels::Apt;
use crate::util::{run, write_atomic, Step};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
/// Downloads and unpacks the Debian arm64 kernel, its headers tree and
/// busybox-static, keyed by their package versions.
pub(super) fn guest(paths: &Paths, apt: &Apt, host_apt: &Apt, c: &Candidates) -> Result<Guest> {
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
pub(super) fn headers(paths: &Paths, apt: &Apt, c: &Candidates) -> Result<PathBuf> {
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
pub(super) fn toolchain_packages(apt: &Apt, deps: &HeadersDeps) -> Result<Vec<String>> {
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
pub(super) fn fix_headers_makefile(tree: &Path, root: &Path) -> Result<()> {
    let mk = tree.join("Makefile");
    let text = fs::read_to_string(&mk)
        .with_context(|| format!("kernel headers: reading {}", mk.display()))?;
    let src = root.join("usr/src/");
    let fixed = text.replace("/usr/src/", &src.to_string_lossy());
    fs::write(&mk, fixed).with_context(|| format!("patching {}", mk.display()))?;
    Ok(())
}

/// The unpacked C library's directory and loader.
pub(super) const UNPACKED_LIBDIR: &str = "usr/lib/x86_64-linux-gnu";
pub(super) const UNPACKED_LOADER: &str = "usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2";

/// Makes every amd64 program under `root` run on the C library unpacked
/// there rather than the host's older one: each becomes a shell script
/// that starts the unpacked loader on the original (`<name>.real`) with the
/// unpacked libraries first. `--argv0` keeps the name the program was
/// called by (gcc finds cc1 and as, and kbuild's modpost finds its
/// `modpost.real-lsb-64`, next to it). The loader's `--library-path` does
/// not reach the programs they start: each of those has its own script, and
/// host programs run as usual.
pub(super) fn run_on_unpacked_libc(root: &Path) -> Result<()> {
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
pub(super) fn is_amd64_program(path: &Path) -> Result<bool> {
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

pub(super) fn is_elf64_le_x86_64(elf: &[u8]) -> bool {
    const EM_X86_64: u16 = 62;
    elf.len() >= 20
        && &elf[..4] == b"\x7fELF"
        && elf[4] == 2
        && elf[5] == 1
        && u16::from_le_bytes([elf[18], elf[19]]) == EM_X86_64
}

/// Whether a 64-bit little-endian ELF file has a PT_INTERP program header.
pub(super) fn has_interpreter(elf: &[u8]) -> bool {
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
pub(super) fn sh_quote(p: &Path) -> String {
    format!("'{}'", p.to_string_lossy().replace('\'', r"'\''"))
}

/// Points the headers at the unpacked cross tools: their
/// `.kernelvariables`, read by the common Makefile after its defaults,
/// already overrides CROSS_COMPILE (and names gcc-<version>); a later
/// override wins over it and over the command line's. Then checks the
/// compiler runs and is the one the kernel was built with.
pub(super) fn use_unpacked_toolchain(tree: &Path, root: &Path, deps: &HeadersDeps) -> Result<()> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
