//! Boots as distributions boot: through UEFI firmware (Debian's edk2,
//! `qemu-efi-aarch64`), which hands Linux ACPI tables instead of QEMU's
//! device tree, so that the guest finds SPE in the MADT. Either `-bios`
//! with the kernel still from `-kernel` ([`Boot::Bios`]), or the pflash
//! pair (code read-only, a copy of the variables writable, as libvirt
//! does) and a GPT disk whose EFI system partition holds GRUB, which loads
//! the kernel and initramfs from a root partition ([`Boot::Disk`]).
//!
//! The disk is built without loop devices, mounts or a network: each
//! partition is made in a file of its own (`mkfs.vfat` and mtools for the
//! ESP, `mkfs.ext4 -d` for the root), the GPT by `sgdisk`, and the
//! partitions copied in at their offsets.

use crate::kernels::KernelSpec;
use crate::scenario::{Boot, Expect, Judge, RunOutput, Scenario, SpeRun, VCPUS};
use crate::scenarios::Set;
use crate::util::run;
use anyhow::{Context, Result};
use std::fs;
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::process::Command;

/// edk2 for `-bios` (Debian's `qemu-efi-aarch64`).
pub const QEMU_EFI: &str = "/usr/share/qemu-efi-aarch64/QEMU_EFI.fd";
/// The pflash pair of the same package: the code, mapped read-only...
pub const AAVMF_CODE: &str = "/usr/share/AAVMF/AAVMF_CODE.fd";
/// ...and the variables' template, of which each run gets a copy.
pub const AAVMF_VARS: &str = "/usr/share/AAVMF/AAVMF_VARS.fd";

/// The PPI of PMBIRQ (INTID 21), which the MADT must name on every GICC.
pub const SPE_GSIV: u16 = 21;
/// The MADT revision of the ACPI 6.3 layout, whose 80-byte GICC has the
/// SPE overflow interrupt at offset 78 (ACPI 6.5's revision 6 adds the
/// TRBE interrupt at 80, GICC length 82).
pub const MADT_REVISION: u8 = 5;

/// The scenarios booted through UEFI: each is the device-tree scenario it
/// names, booted as it says, with [`check_acpi`] before that scenario's
/// own check.
pub const SCENARIOS: &[(&str, &str, Boot)] = &[
    ("uefi-spe-probe", "spe-probe", Boot::Bios),
    ("uefi-spe-perf", "spe-perf", Boot::Bios),
    ("uefi-spe-profile", "spe-profile", Boot::Bios),
    (
        "uefi-fault-stage1-translation",
        "fault-stage1-translation",
        Boot::Bios,
    ),
    ("uefi-spe-attributes", "spe-attributes", Boot::Bios),
    ("uefi-virtio-spe-perf", "virtio-spe-perf", Boot::Bios),
    ("uefi-disk-spe-profile", "spe-profile", Boot::Disk),
    // spe-qemu given a distribution's command line: the pflash pair and
    // a virtio-blk disk, no -kernel.
    ("uefi-disk-spe-qemu", "spe-qemu-launcher", Boot::Disk),
];

/// What the newest kernel runs in CI: the probe, a decoded profile from
/// each boot path, the paravirtual device and `spe-qemu` booting the
/// disk. The rest (the attributes' 155 s among them: the device-tree
/// run covers the same driver code in CI), and every one on the older
/// kernels, by hand (`--full`).
const NEWEST_IN_CI: &[&str] = &[
    "uefi-spe-probe",
    "uefi-spe-profile",
    "uefi-virtio-spe-perf",
    "uefi-disk-spe-profile",
    "uefi-disk-spe-qemu",
];

/// Those the older kernels run (by hand); the attributes and the disk are
/// the newest kernel's alone, as the issue that added them asks.
const ON_EVERY_KERNEL: &[&str] = &[
    "uefi-spe-probe",
    "uefi-spe-perf",
    "uefi-spe-profile",
    "uefi-fault-stage1-translation",
];

pub fn is_uefi(name: &str) -> bool {
    SCENARIOS.iter().any(|(n, _, _)| *n == name)
}

/// Which set runs the UEFI scenario `name` on `k` (None: not at all);
/// None for a scenario that is not one of them.
pub fn selection(name: &str, k: &KernelSpec) -> Option<Option<Set>> {
    if !is_uefi(name) {
        return None;
    }
    Some(if k == KernelSpec::newest() {
        Some(if NEWEST_IN_CI.contains(&name) {
            Set::Ci
        } else {
            Set::ByHand
        })
    } else if ON_EVERY_KERNEL.contains(&name) {
        Some(Set::ByHand)
    } else {
        None
    })
}

/// The UEFI copies of the scenarios [`SCENARIOS`] names, each taken from
/// a catalogue `catalogue` builds anew (a scenario's check is not
/// `Clone`, and one scenario may be booted two ways).
pub fn scenarios(catalogue: impl Fn() -> Vec<Scenario>) -> Vec<Scenario> {
    let mut out = Vec::new();
    for &(name, base, boot) in SCENARIOS {
        let Some(s) = catalogue().into_iter().find(|s| s.name == base) else {
            continue;
        };
        let (Expect::Pass(check), Some(mut spe)) = (s.expect, s.spe) else {
            continue;
        };
        spe.boot = boot;
        // The paravirtual path's CPUs have no SPE: their GICCs name none.
        let cpu_has_spe = !spe.paravirt;
        let proves = format!("{} Then `{base}`'s check. {}", proves(&spe), s.proves);
        out.push(Scenario {
            name,
            guest: s.guest,
            backend: s.backend,
            // Firmware and GRUB add about 10 s of guest time.
            timeout: s.timeout + std::time::Duration::from_secs(60),
            expect: Expect::pass(move |o| {
                check_acpi(o, cpu_has_spe)?;
                check(o)
            }),
            kill_backend_when: s.kill_backend_when,
            spe: Some(spe),
            vcpus: s.vcpus,
            proves: proves.into(),
        });
    }
    out
}

/// What a UEFI copy proves before its base's check (the scenario
/// table's text): `spe` is the copy's set-up.
fn proves(spe: &SpeRun) -> String {
    let how = match (spe.boot, spe.launcher) {
        (Boot::Disk, true) => {
            "Booted as a distribution's image through `spe-qemu`, given such an image's command \
             line (the pflash pair, `-drive if=none,…` and `-device virtio-blk-pci`, no \
             `-kernel`): edk2, then GRUB from the GPT disk's EFI system partition, the kernel \
             and initramfs from its ext4 root"
        }
        (Boot::Disk, false) => {
            "Booted as a distribution's image: edk2 in the pflash pair, then GRUB from the GPT \
             disk's EFI system partition, the kernel and initramfs from its ext4 root"
        }
        _ => "Booted through UEFI (`-bios` edk2, the kernel from `-kernel`)",
    };
    let (gicc, control) = match spe.paravirt {
        false => (
            format!("naming SPE overflow interrupt {SPE_GSIV}"),
            " Negative control (by hand): the series without its MADT change (`SPE_QEMU=`) must \
             fail, the driver finding no SPE.",
        ),
        true => ("naming no SPE interrupt (the CPUs have none)".into(), ""),
    };
    format!(
        "{how}, so that Linux reads ACPI tables: the MADT (parsed, and as `iasl -d` \
         disassembles it) is revision {MADT_REVISION}, the ACPI 6.3 layout, with an 80-byte \
         GICC per vCPU {gicc}; the series' MADT before its MADT change is refused (unit test).\
         {control}"
    )
}

/// The guest booted through UEFI and ACPI, and its MADT (the bytes its
/// `/init` printed as `acpi_apic=`, from /sys/firmware/acpi/tables/APIC)
/// describes SPE as [`check_madt`] says, both as parsed here and as
/// `iasl -d` disassembles it (written to the run's `APIC.dsl`).
pub fn check_acpi(o: &RunOutput, spe: bool) -> Result<(), String> {
    let j = Judge::new(o);
    j.is("efi", "1");
    let vcpus = VCPUS as usize;
    match o.result("acpi_apic").map(hex) {
        None => j.fail("no ACPI MADT in the guest (booted with a device tree?)"),
        Some(Err(e)) => j.fail(format!("acpi_apic: {e}")),
        Some(Ok(bytes)) => {
            j.include(parse_madt(&bytes).and_then(|m| check_madt(&m, vcpus, spe)));
            j.include(
                disassemble(&bytes, &o.dir)
                    .map_err(|e| format!("iasl: {e:#}"))
                    .and_then(|dsl| check_dsl(&dsl, vcpus, spe)),
            );
        }
    }
    j.finish()
}

fn hex(s: &str) -> Result<Vec<u8>, String> {
    if !s.len().is_multiple_of(2) {
        return Err(format!("odd length {}", s.len()));
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).map_err(|e| format!("at {i}: {e}")))
        .collect()
}

/// A MADT, as far as SPE needs it.
#[derive(Debug, PartialEq, Eq)]
pub struct Madt {
    pub revision: u8,
    pub giccs: Vec<Gicc>,
}

/// One GIC CPU interface structure (ACPI 6.5, 5.2.12.14).
#[derive(Debug, PartialEq, Eq)]
pub struct Gicc {
    pub length: u8,
    /// The SPE overflow interrupt (offset 78, from ACPI 6.3), if the
    /// structure is long enough to hold it.
    pub spe_gsiv: Option<u16>,
    /// The TRBE interrupt (offset 80, from ACPI 6.5), likewise.
    pub trbe_gsiv: Option<u16>,
}

const GICC: u8 = 0x0b;
const HEADER: usize = 44;

/// Parses the MADT's header and GICC structures; a table whose length
/// or checksum is wrong, or whose structures overrun it, is refused.
pub fn parse_madt(b: &[u8]) -> Result<Madt, String> {
    if b.len() < HEADER || &b[..4] != b"APIC" {
        return Err("not a MADT".into());
    }
    let len = u32::from_le_bytes(b[4..8].try_into().unwrap()) as usize;
    if len != b.len() {
        return Err(format!("length {len}, {} bytes read", b.len()));
    }
    if b.iter().fold(0u8, |s, x| s.wrapping_add(*x)) != 0 {
        return Err("checksum does not sum to 0".into());
    }
    let u16_at = |s: &[u8], o: usize| u16::from_le_bytes([s[o], s[o + 1]]);
    let mut giccs = Vec::new();
    let mut off = HEADER;
    while off < len {
        let (kind, l) = (b[off], b.get(off + 1).copied().unwrap_or(0) as usize);
        if l < 2 || off + l > len {
            return Err(format!(
                "structure at {off} of length {l} overruns the table"
            ));
        }
        let s = &b[off..off + l];
        if kind == GICC {
            giccs.push(Gicc {
                length: l as u8,
                spe_gsiv: (l >= 80).then(|| u16_at(s, 78)),
                trbe_gsiv: (l >= 82).then(|| u16_at(s, 80)),
            });
        }
        off += l;
    }
    Ok(Madt {
        revision: b[8],
        giccs,
    })
}

/// What Linux's `arm_spe_acpi_register_device()` needs and the layout
/// must say: one GICC per vCPU, each 80 bytes (the TRBE field left out:
/// the model has no TRBE) with the SPE overflow interrupt [`SPE_GSIV`]
/// when the CPUs have SPE and 0 when not, and the revision of that
/// layout.
pub fn check_madt(m: &Madt, vcpus: usize, spe: bool) -> Result<(), String> {
    if m.revision != MADT_REVISION {
        return Err(format!(
            "MADT revision {}, want {MADT_REVISION} (ACPI 6.3's GICC layout)",
            m.revision
        ));
    }
    if m.giccs.len() != vcpus {
        return Err(format!(
            "{} GICC structures for {vcpus} vCPUs",
            m.giccs.len()
        ));
    }
    let want = if spe { SPE_GSIV } else { 0 };
    for (i, g) in m.giccs.iter().enumerate() {
        if g.length != 80 || g.trbe_gsiv.is_some() {
            return Err(format!("GICC {i}: length {}, want 80", g.length));
        }
        if g.spe_gsiv != Some(want) {
            return Err(format!(
                "GICC {i}: SPE overflow interrupt {:?}, want {want}",
                g.spe_gsiv
            ));
        }
    }
    Ok(())
}

/// `iasl -d` of the table, kept as the run's `APIC.dsl`.
fn disassemble(bytes: &[u8], dir: &Path) -> Result<String> {
    let aml = dir.join("APIC.aml");
    fs::write(&aml, bytes)?;
    run(
        "iasl -d APIC.aml",
        Command::new("iasl")
            .current_dir(dir)
            .args(["-d", "APIC.aml"]),
    )?;
    fs::read_to_string(dir.join("APIC.dsl")).context("reading APIC.dsl")
}

/// The same as [`check_madt`], read from ACPICA's disassembly: the
/// revision and one `SPE Overflow Interrupt` line per GICC.
pub fn check_dsl(dsl: &str, vcpus: usize, spe: bool) -> Result<(), String> {
    let field = |name: &str| -> Vec<String> {
        dsl.lines()
            .filter_map(|l| l.split_once(']').map(|(_, r)| r))
            .filter_map(|r| r.split_once(" : "))
            .filter(|(k, _)| k.trim() == name)
            .map(|(_, v)| v.trim().to_string())
            .collect()
    };
    let rev = field("Revision");
    let want_rev = format!("{MADT_REVISION:02X}");
    if rev.first() != Some(&want_rev) {
        return Err(format!("iasl: Revision {rev:?}, want {want_rev}"));
    }
    let want = format!("{:04X}", if spe { SPE_GSIV } else { 0 });
    let spe_lines = field("SPE Overflow Interrupt");
    if spe_lines.len() != vcpus || spe_lines.iter().any(|v| *v != want) {
        return Err(format!(
            "iasl: SPE Overflow Interrupt {spe_lines:?}, want {want} on {vcpus} GICCs"
        ));
    }
    Ok(())
}

/// The files of a disk boot, in the run's folder.
pub struct DiskFiles {
    pub disk: PathBuf,
    pub vars: PathBuf,
}

impl DiskFiles {
    pub fn in_dir(dir: &Path) -> DiskFiles {
        DiskFiles {
            disk: dir.join("disk.img"),
            vars: dir.join("AAVMF_VARS.fd"),
        }
    }

    /// QEMU's options for them: the firmware's code read-only and the
    /// run's copy of its variables as the two pflash units, the disk on
    /// virtio-blk, and nothing else to boot from.
    pub fn qemu_args(&self) -> Vec<String> {
        vec![
            "-drive".into(),
            format!("if=pflash,format=raw,unit=0,readonly=on,file={AAVMF_CODE}"),
            "-drive".into(),
            format!("if=pflash,format=raw,unit=1,file={}", self.vars.display()),
            "-drive".into(),
            format!("if=none,id=disk0,format=raw,file={}", self.disk.display()),
            "-device".into(),
            "virtio-blk-pci,drive=disk0".into(),
        ]
    }

    /// Removes the disk and the variables (about 150 MB a run).
    pub fn remove(&self) {
        let _ = fs::remove_file(&self.disk);
        let _ = fs::remove_file(&self.vars);
    }
}

/// GRUB's configuration on the root partition: boot the kernel and the
/// initramfs at once, with `cmdline`.
pub fn grub_cfg(cmdline: &str) -> String {
    format!(
        "set timeout=0\nset default=0\nmenuentry 'Debian GNU/Linux' {{\n\
         \tlinux /boot/vmlinuz {cmdline}\n\tinitrd /boot/initrd.img\n}}\n"
    )
}

/// The configuration built into GRUB's EFI image (Debian's does the
/// same with the root's UUID): find the partition holding the kernel and
/// read its grub.cfg. Searching for grub.cfg itself would find the
/// image's own memdisk.
pub const EARLY_CFG: &str = "search --no-floppy --file --set=root /boot/vmlinuz\n\
set prefix=($root)/boot/grub\nconfigfile $prefix/grub.cfg\n";

const MIB: u64 = 1 << 20;
/// The ESP's size: GRUB's standalone image is about 10 MB.
const ESP_MIB: u64 = 32;
/// The first partition's start (sector 2048, as partitioning tools
/// align it).
const FIRST_LBA: u64 = 2048;

/// Builds the run's GPT disk: an EFI system partition with `grub_efi` as
/// the removable-media loader `\EFI\BOOT\BOOTAA64.EFI` (the path the
/// firmware boots with empty variables), and an ext4 root holding
/// `/boot/vmlinuz`, `/boot/initrd.img` and `/boot/grub/grub.cfg`; and the
/// run's copy of the firmware's variables.
pub fn build_disk(
    grub_efi: &Path,
    kernel: &Path,
    initrd: &Path,
    cmdline: &str,
    files: &DiskFiles,
) -> Result<()> {
    let dir = files.disk.parent().context("the disk's folder")?;
    let stage = dir.join("disk-root");
    let _ = fs::remove_dir_all(&stage);
    fs::create_dir_all(stage.join("boot/grub"))?;
    fs::copy(kernel, stage.join("boot/vmlinuz")).context("copying the kernel")?;
    fs::copy(initrd, stage.join("boot/initrd.img")).context("copying the initramfs")?;
    fs::write(stage.join("boot/grub/grub.cfg"), grub_cfg(cmdline))?;
    let payload = fs::metadata(kernel)?.len() + fs::metadata(initrd)?.len();
    // ext4's metadata and some room.
    let root_mib = payload.div_ceil(MIB) + 32;

    let esp = dir.join("esp.img");
    let root = dir.join("root.img");
    let _ = fs::remove_file(&esp);
    run(
        "mkfs.vfat (the ESP)",
        Command::new("mkfs.vfat")
            .args(["-C", "-n", "EFI"])
            .arg(&esp)
            .arg((ESP_MIB * 1024).to_string()),
    )?;
    let mtools = |step: &str, tool: &str, args: &[&std::ffi::OsStr]| {
        run(
            step,
            Command::new(tool)
                .arg("-i")
                .arg(&esp)
                .args(args)
                // mtools refuses a FAT whose geometry it doubts unless told.
                .env("MTOOLS_SKIP_CHECK", "1"),
        )
    };
    mtools(
        "mmd (the ESP)",
        "mmd",
        &["::/EFI".as_ref(), "::/EFI/BOOT".as_ref()],
    )?;
    mtools(
        "mcopy (GRUB into the ESP)",
        "mcopy",
        &[grub_efi.as_os_str(), "::/EFI/BOOT/BOOTAA64.EFI".as_ref()],
    )?;
    run(
        "mkfs.ext4 -d (the root)",
        Command::new("mkfs.ext4")
            .args(["-q", "-F", "-L", "root", "-d"])
            .arg(&stage)
            .arg(&root)
            .arg(format!("{root_mib}M")),
    )?;

    let _ = fs::remove_file(&files.disk);
    let disk_bytes = FIRST_LBA * 512 + (ESP_MIB + root_mib) * MIB + MIB;
    fs::File::create(&files.disk)?.set_len(disk_bytes)?;
    let root_lba = FIRST_LBA + ESP_MIB * MIB / 512;
    run(
        "sgdisk (the GPT)",
        Command::new("sgdisk")
            .arg(format!("--new=1:{FIRST_LBA}:+{ESP_MIB}M"))
            .args(["--typecode=1:ef00", "--change-name=1:EFI System"])
            .arg(format!("--new=2:{root_lba}:+{root_mib}M"))
            .args(["--typecode=2:8300", "--change-name=2:root"])
            .arg(&files.disk),
    )?;
    copy_at(&esp, &files.disk, FIRST_LBA * 512)?;
    copy_at(&root, &files.disk, root_lba * 512)?;
    for f in [&esp, &root] {
        let _ = fs::remove_file(f);
    }
    let _ = fs::remove_dir_all(&stage);
    fs::copy(AAVMF_VARS, &files.vars).with_context(|| format!("copying {AAVMF_VARS}"))?;
    Ok(())
}

/// Writes `part` into `disk` at byte `offset`, as `dd conv=notrunc`.
fn copy_at(part: &Path, disk: &Path, offset: u64) -> Result<()> {
    let mut from = fs::File::open(part)?;
    let mut to = fs::OpenOptions::new().write(true).open(disk)?;
    to.seek(SeekFrom::Start(offset))?;
    std::io::copy(&mut from, &mut to)
        .with_context(|| format!("writing {} into the disk", part.display()))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A MADT as QEMU's virt machine builds it: the GIC distributor and
    /// one 80-byte GICC per CPU, `spe` at offset 78 of each.
    fn madt(revision: u8, cpus: usize, spe: u16) -> Vec<u8> {
        let mut b = b"APIC".to_vec();
        b.extend([0; 4]);
        b.extend([revision, 0]);
        b.extend(b"BOCHS BXPC    ");
        b.extend([1, 0, 0, 0]);
        b.extend(b"BXPC");
        b.extend([1, 0, 0, 0]);
        b.extend([0; 8]);
        assert_eq!(b.len(), HEADER);
        let mut gicd = vec![0u8; 24];
        gicd[..2].copy_from_slice(&[0x0c, 24]);
        b.extend(gicd);
        for i in 0..cpus {
            let mut g = vec![0u8; 80];
            g[..2].copy_from_slice(&[GICC, 80]);
            g[4] = i as u8;
            g[78..80].copy_from_slice(&spe.to_le_bytes());
            b.extend(g);
        }
        let len = b.len() as u32;
        b[4..8].copy_from_slice(&len.to_le_bytes());
        let sum = b.iter().fold(0u8, |s, x| s.wrapping_add(*x));
        b[9] = 0u8.wrapping_sub(sum);
        b
    }

    #[test]
    fn the_spe_interrupt_is_read_at_offset_78_of_each_gicc() {
        let m = parse_madt(&madt(5, 2, 21)).unwrap();
        assert_eq!(m.revision, 5);
        assert_eq!(m.giccs.len(), 2);
        assert!(m
            .giccs
            .iter()
            .all(|g| g.spe_gsiv == Some(21) && g.trbe_gsiv.is_none()));
        assert_eq!(check_madt(&m, 2, true), Ok(()));
        // The same CPUs without SPE: the field must be 0.
        assert!(check_madt(&m, 2, false).is_err());
        assert_eq!(
            check_madt(&parse_madt(&madt(5, 2, 0)).unwrap(), 2, false),
            Ok(())
        );
    }

    /// The series without the MADT change: revision 4, the field 0.
    #[test]
    fn the_acpi_6_0_layout_is_refused() {
        let m = parse_madt(&madt(4, 2, 0)).unwrap();
        assert!(check_madt(&m, 2, true).unwrap_err().contains("revision 4"));
        let m = parse_madt(&madt(5, 2, 0)).unwrap();
        assert!(check_madt(&m, 2, true).unwrap_err().contains("want 21"));
        assert!(check_madt(&parse_madt(&madt(5, 1, 21)).unwrap(), 2, true).is_err());
    }

    #[test]
    fn a_broken_table_is_refused() {
        let mut b = madt(5, 2, 21);
        b[9] ^= 1;
        assert!(parse_madt(&b).unwrap_err().contains("checksum"));
        let mut b = madt(5, 2, 21);
        b.pop();
        assert!(parse_madt(&b).is_err());
        let mut b = madt(5, 2, 21);
        let last = b.len() - 80 + 1;
        b[last] = 90;
        b[9] = b[9].wrapping_sub(10);
        assert!(parse_madt(&b).unwrap_err().contains("overruns"));
        assert!(hex("0g").is_err() && hex("abc").is_err());
        assert_eq!(hex("00ff15").unwrap(), vec![0, 255, 21]);
    }

    /// The MADTs a 7.3 guest read from /sys/firmware/acpi/tables/APIC,
    /// booted with `-bios` on `-cpu neoverse-n1,spe=on -smp 2`: with the
    /// series, and with the series before the MADT change (the two differ
    /// in the revision, the checksum and offset 78 of each GICC alone).
    #[test]
    fn the_tables_a_guest_read_with_and_without_the_change() {
        let read = |text: &str| hex(&text.split_whitespace().collect::<String>()).unwrap();
        let with = read(include_str!("../testdata/madt-virt-spe.hex"));
        let before = read(include_str!("../testdata/madt-virt-before.hex"));
        let m = parse_madt(&with).unwrap();
        assert_eq!(check_madt(&m, 2, true), Ok(()));
        let gicc = HEADER + 24;
        assert_eq!(with[gicc], GICC);
        assert_eq!(
            u16::from_le_bytes([with[gicc + 78], with[gicc + 79]]),
            SPE_GSIV
        );
        let differ: Vec<usize> = (0..with.len()).filter(|&i| with[i] != before[i]).collect();
        assert_eq!(differ, [8, 9, gicc + 78, gicc + 80 + 78]);
        let err = check_madt(&parse_madt(&before).unwrap(), 2, true).unwrap_err();
        assert!(err.contains("revision 4"), "{err}");
    }

    /// ACPICA's disassembly, as iasl 20200925 prints a GICC.
    #[test]
    fn the_disassembly_is_read_field_by_field() {
        let dsl = |rev: &str, spe: &str| {
            format!(
                "[008h 0008   1]                     Revision : {rev}\n\
                 [090h 0144   1]             Efficiency Class : 00\n\
                 [092h 0146   2]       SPE Overflow Interrupt : {spe}\n\
                 [0E2h 0226   2]       SPE Overflow Interrupt : {spe}\n"
            )
        };
        assert_eq!(check_dsl(&dsl("05", "0015"), 2, true), Ok(()));
        assert!(check_dsl(&dsl("04", "0015"), 2, true).is_err());
        assert!(check_dsl(&dsl("05", "0000"), 2, true).is_err());
        assert_eq!(check_dsl(&dsl("05", "0000"), 2, false), Ok(()));
        assert!(check_dsl(&dsl("05", "0015"), 3, true).is_err());
    }

    #[test]
    fn each_uefi_scenario_names_a_scenario_of_the_catalogue() {
        let all = crate::scenarios::all();
        for (name, base, _) in SCENARIOS {
            let s = all.iter().find(|s| s.name == *name).expect(name);
            let b = all.iter().find(|s| s.name == *base).expect(base);
            assert_eq!(s.guest, b.guest);
            assert_ne!(s.spe.as_ref().unwrap().boot, Boot::DeviceTree, "{name}");
            assert_eq!(b.spe.as_ref().unwrap().boot, Boot::DeviceTree, "{base}");
        }
        for n in NEWEST_IN_CI.iter().chain(ON_EVERY_KERNEL) {
            assert!(is_uefi(n), "{n}");
        }
    }

    /// The newest kernel runs some in CI and the rest by hand; the older
    /// ones the probe, perf, the profile and a fault, by hand.
    #[test]
    fn the_newest_kernel_runs_them_in_ci() {
        use crate::kernels::MATRIX;
        for (name, _, _) in SCENARIOS {
            let want = if NEWEST_IN_CI.contains(name) {
                Set::Ci
            } else {
                Set::ByHand
            };
            assert_eq!(selection(name, KernelSpec::newest()), Some(Some(want)));
            for k in &MATRIX[..MATRIX.len() - 1] {
                let want = ON_EVERY_KERNEL.contains(name).then_some(Set::ByHand);
                assert_eq!(selection(name, k), Some(want), "{name} on {}", k.name);
            }
        }
        assert_eq!(selection("spe-probe", &MATRIX[0]), None);
    }

    #[test]
    fn the_disk_boots_grub_from_the_removable_path_with_the_runs_command_line() {
        let cfg = grub_cfg("console=ttyAMA0 spe.scenario=spe-probe");
        assert!(cfg.contains("linux /boot/vmlinuz console=ttyAMA0 spe.scenario=spe-probe\n"));
        assert!(cfg.contains("initrd /boot/initrd.img"));
        assert!(!EARLY_CFG.contains("--file --set=root /boot/grub/grub.cfg"));
        let f = DiskFiles::in_dir(Path::new("run"));
        let a = f.qemu_args();
        assert!(a.contains(&format!(
            "if=pflash,format=raw,unit=0,readonly=on,file={AAVMF_CODE}"
        )));
        assert!(a.contains(&"if=pflash,format=raw,unit=1,file=run/AAVMF_VARS.fd".to_string()));
        assert!(a.contains(&"virtio-blk-pci,drive=disk0".to_string()));
    }
}
