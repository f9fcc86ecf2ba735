//! Guest workloads: the C programs in `integration/guest/workloads`,
//! cross-compiled static for aarch64 and put in the initramfs's /usr/bin
//! (the proofs of where records land sample what they execute;
//! `bench-overhead` times them).

use crate::util::{self, Step};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The cross compiler the set-up installs (gcc-aarch64-linux-gnu).
pub const CC: &str = "aarch64-linux-gnu-gcc";

/// The `*.c` in `dir` (sorted), none if there is no `dir`.
fn c_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(d) => d
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "c"))
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e).with_context(|| format!("reading {}", dir.display())),
    };
    files.sort();
    Ok(files)
}

/// Compiles every `*.c` in `src` to a static aarch64 executable of the
/// same stem in `out`, linked with the `*.c` of the folder of that stem
/// if there is one (`spe-workload/`: a program split by concern), checks
/// each is one, and returns their paths (sorted).
pub fn build(src: &Path, out: &Path) -> Result<Vec<PathBuf>> {
    let sources = c_files(src)?;
    if sources.is_empty() {
        return Ok(Vec::new());
    }
    let step = Step::new(format!("guest workloads: {CC} -static -O1"));
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let mut built = Vec::new();
    for s in &sources {
        let stem = s.file_stem().context("workload source has no name")?;
        let exe = out.join(stem);
        let parts = c_files(&src.join(stem))?;
        util::run(
            &format!("guest workloads: compiling {}", s.display()),
            // -O1: loops stay loops (the proofs look for their PCs and
            // strides) without -O0's stack traffic on every access.
            Command::new(CC)
                .args(["-static", "-O1", "-Wall", "-Wextra", "-Werror", "-o"])
                .arg(&exe)
                .arg(s)
                .args(&parts),
        )?;
        let bytes = fs::read(&exe).with_context(|| format!("reading {}", exe.display()))?;
        check_static_aarch64(&bytes).with_context(|| format!("{}", exe.display()))?;
        built.push(exe);
    }
    step.done(&format!("{} program(s)", built.len()));
    Ok(built)
}

/// The SPE kselftest suite's directory, shaped as in a kernel tree.
pub const SUITE_DIR: &str = "tools/testing/selftests/perf_events/arm_spe";

/// The suite's programs as its Makefile builds them on its own (static,
/// with our KTAP writer), for the initramfs's /usr/bin.
pub const SUITE_PROGRAMS: &[&str] = &["arm_spe_test", "spe_guest_ctl"];

/// Builds the suite in `src` with its own Makefile into `out`, checks
/// each program is a static aarch64 executable, and returns their paths.
pub fn build_suite(src: &Path, out: &Path) -> Result<Vec<PathBuf>> {
    let step = Step::new("SPE kselftest suite: make, static, for aarch64");
    fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let cross = CC.strip_suffix("gcc").unwrap_or(CC);
    util::run(
        "SPE kselftest suite: make",
        Command::new("make")
            .arg("-s")
            .arg("-C")
            .arg(src)
            .arg(format!("CROSS_COMPILE={cross}"))
            .arg(format!("OUTPUT={}", out.display()))
            .arg("CFLAGS=-Wall -Wextra -Werror -O1"),
    )?;
    let mut built = Vec::new();
    for p in SUITE_PROGRAMS {
        let exe = out.join(p);
        let bytes = fs::read(&exe).with_context(|| format!("reading {}", exe.display()))?;
        check_static_aarch64(&bytes).with_context(|| format!("{}", exe.display()))?;
        built.push(exe);
    }
    step.done(&format!("{} program(s)", built.len()));
    Ok(built)
}

/// Checks `elf` is a 64-bit little-endian aarch64 executable that is not
/// position-independent (its globals are at link-time addresses) and has
/// no program interpreter (the initramfs has no dynamic loader for it).
pub fn check_static_aarch64(elf: &[u8]) -> Result<()> {
    const EM_AARCH64: u16 = 183;
    const ET_EXEC: u16 = 2;
    const PT_INTERP: u32 = 3;
    if elf.len() < 64 || &elf[..4] != b"\x7fELF" {
        bail!("not an ELF file");
    }
    if elf[4] != 2 || elf[5] != 1 {
        bail!("not a 64-bit little-endian ELF file");
    }
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]);
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap());
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap());
    if u16_at(18) != EM_AARCH64 {
        bail!("machine {} is not aarch64", u16_at(18));
    }
    if u16_at(16) != ET_EXEC {
        bail!("ELF type {} is not a fixed-address executable", u16_at(16));
    }
    let (phoff, phentsize, phnum) = (u64_at(32) as usize, u16_at(54) as usize, u16_at(56));
    for i in 0..phnum as usize {
        let o = phoff + i * phentsize;
        if o + 4 > elf.len() {
            bail!("program header {i} is outside the file");
        }
        if u32_at(o) == PT_INTERP {
            bail!("dynamically linked (has PT_INTERP)");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal ELF header with `phnum` program headers of type `pt`.
    fn elf(machine: u16, etype: u16, pt: Option<u32>) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2;
        b[5] = 1;
        b[16..18].copy_from_slice(&etype.to_le_bytes());
        b[18..20].copy_from_slice(&machine.to_le_bytes());
        b[32..40].copy_from_slice(&64u64.to_le_bytes());
        b[54..56].copy_from_slice(&56u16.to_le_bytes());
        if let Some(pt) = pt {
            b[56..58].copy_from_slice(&1u16.to_le_bytes());
            b[64..68].copy_from_slice(&pt.to_le_bytes());
        }
        b
    }

    #[test]
    fn elf_check_accepts_only_static_fixed_address_aarch64() {
        assert!(check_static_aarch64(&elf(183, 2, Some(1))).is_ok());
        let e = |b: Vec<u8>| check_static_aarch64(&b).unwrap_err().to_string();
        assert!(e(elf(62, 2, None)).contains("not aarch64"));
        assert!(e(elf(183, 3, None)).contains("fixed-address"), "PIE");
        assert!(e(elf(183, 2, Some(3))).contains("PT_INTERP"));
        assert!(check_static_aarch64(b"#!/bin/sh\n").is_err());
    }

    /// The real build of the real workload, where the cross compiler is
    /// installed (`cargo xtask setup` installs it; CI runs the unit tests
    /// after the set-up).
    #[test]
    fn builds_the_guest_workload() {
        if Command::new(CC).arg("--version").output().is_err() {
            eprintln!("skipped: {CC} is not installed (cargo xtask setup installs it)");
            return;
        }
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest/workloads");
        let out = std::env::temp_dir().join(format!("xtask-workloads-{}", std::process::id()));
        let built = build(&src, &out).unwrap();
        let names: Vec<_> = built
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert!(names.contains(&"spe-workload".to_string()), "{names:?}");
        // The proofs find the array and the loops by these symbols.
        let syms = fs::read(out.join("spe-workload")).unwrap();
        for sym in [
            "spe_workload_array",
            "spe_workload_strided",
            "spe_workload_branchy",
            "spe_workload_loads",
        ] {
            assert!(
                syms.windows(sym.len()).any(|w| w == sym.as_bytes()),
                "{sym} missing"
            );
        }
        fs::remove_dir_all(&out).unwrap();
    }
}
