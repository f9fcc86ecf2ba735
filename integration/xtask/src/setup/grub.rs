//! GRUB for the disk boots: bookworm's arm64 EFI modules
//! (`grub-efi-arm64-bin:arm64`, unpacked, never installed) made into one
//! standalone EFI image by the host's `grub-mkstandalone`, with
//! [`EARLY_CFG`] built in.

use super::apt::{apt_download, stanzas, unpack_debs};
use super::Paths;
use crate::kernels::Apt;
use crate::uefi::EARLY_CFG;
use crate::util::{run, write_atomic, Step};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::PathBuf;
use std::process::Command;

const PACKAGE: &str = "grub-efi-arm64-bin:arm64";

/// What GRUB needs to find and boot the kernel: the GPT, the two file
/// systems, `search`, `linux`, and reading a configuration.
const MODULES: &str = "part_gpt fat ext2 search search_fs_file normal configfile linux";

/// `BOOTAA64.EFI`, built once per GRUB version.
pub(super) fn grub_efi(paths: &Paths, host_apt: &Apt) -> Result<PathBuf> {
    let show = run(
        &format!("apt-cache show {PACKAGE}"),
        host_apt
            .command("apt-cache")
            .args(["show", "--no-all-versions", PACKAGE]),
    )?;
    let version = stanzas(&show)
        .into_iter()
        .find_map(|(_, f)| f.get("Version").cloned())
        .with_context(|| format!("apt-cache show: no Version for {PACKAGE}"))?;
    let dir = paths.cache.join("grub").join(version.replace(':', "_"));
    let efi = dir.join("BOOTAA64.EFI");
    if dir.join(".complete").exists() && efi.exists() {
        return Ok(efi);
    }
    let step = Step::new(format!(
        "GRUB {version} for arm64 EFI: download, grub-mkstandalone"
    ));
    let _ = fs::remove_dir_all(&dir);
    let debs = dir.join("debs");
    fs::create_dir_all(&debs)?;
    apt_download(
        host_apt,
        &format!("apt-get download {PACKAGE}"),
        &debs,
        &[PACKAGE.to_string()],
    )?;
    let root = dir.join("root");
    unpack_debs(&debs, &root)?;
    let modules = root.join("usr/lib/grub/arm64-efi");
    if !modules.join("linux.mod").exists() {
        bail!("{PACKAGE}: no arm64-efi modules in {}", modules.display());
    }
    let cfg = dir.join("early.cfg");
    fs::write(&cfg, EARLY_CFG)?;
    run(
        "grub-mkstandalone -O arm64-efi",
        Command::new("grub-mkstandalone")
            .args(["-O", "arm64-efi", "-d"])
            .arg(&modules)
            .arg("-o")
            .arg(&efi)
            .arg(format!("--modules={MODULES}"))
            .arg(format!("boot/grub/grub.cfg={}", cfg.display())),
    )?;
    write_atomic(&dir.join(".complete"), b"ok\n")?;
    step.done("built");
    Ok(efi)
}
