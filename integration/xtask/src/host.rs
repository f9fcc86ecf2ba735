//! The host's side of the set-up: the Debian packages the harness needs and
//! a check, after installing them, that every tool it runs works.
//!
//! The check exists because a package list can be wrong in ways a green run
//! on a used machine hides: `gcc-aarch64-linux-gnu` only *recommends* the
//! arm64 C library, so with `--no-install-recommends` a new machine had a
//! cross compiler that could not build a static program.

use crate::util::{run, Step};
use crate::workloads;
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::Path;
use std::process::Command;

pub const SUITE: &str = "bookworm";
pub const BACKPORTS: &str = "bookworm-backports";

/// Host packages from bookworm, each for a tool in [`TOOLS`].
pub const HOST_PACKAGES: &[&str] = &[
    "build-essential",
    "pkg-config",
    "git",
    "bzip2",
    "xz-utils",
    "python3-venv",
    "ninja-build",
    "ccache",
    "libglib2.0-dev",
    "libpixman-1-dev",
    "libslirp-dev",
    "libfdt-dev",
    "flex",
    "bison",
    "libcapstone-dev",
    "gcc-aarch64-linux-gnu",
    // Only recommended by gcc-aarch64-linux-gnu: without it `-static`
    // finds no arm64 C library headers (bits/wordsize.h).
    "libc6-dev-arm64-cross",
    "binutils-aarch64-linux-gnu",
    // taskset, for pinning QEMU's vCPU threads (`bench-overhead --pin`).
    "util-linux",
    // UEFI boots (uefi.rs): Debian's edk2, the disk's tools, GRUB's
    // grub-mkstandalone (its arm64 modules are unpacked, not installed),
    // and ACPICA's disassembler for the guest's MADT.
    "qemu-efi-aarch64",
    "dosfstools",
    "mtools",
    "e2fsprogs",
    "gdisk",
    "grub-common",
    "acpica-tools",
    // LAVA's job and device schemas, for the unit test of the LAVA job
    // (integration/lava/); small: `cargo xtask lava` installs the rest.
    "lava-common",
];

/// From backports: bookworm's meson 1.0 is too old for QEMU 10.
pub const BACKPORTS_PACKAGES: &[&str] = &["meson", "python3-pycotap"];

/// How the set-up proves a tool works.
#[derive(Clone, Copy, Debug)]
pub enum Probe {
    /// The command exits 0.
    Runs(&'static [&'static str]),
    /// `meson --version` is at least this (major, minor).
    Meson(u32, u32),
    /// The cross compiler builds a static, fixed-address aarch64 program.
    StaticAarch64,
}

/// A tool the harness runs and the packages that provide it.
#[derive(Clone, Copy, Debug)]
pub struct Tool {
    pub what: &'static str,
    pub probe: Probe,
    pub packages: &'static [&'static str],
}

/// Every host tool the harness or QEMU's build runs. The set-up checks each
/// after installing the packages; a unit test checks each package is
/// installed by the set-up and each package serves a tool.
pub const TOOLS: &[Tool] = &[
    Tool {
        what: "edk2 for -bios and the pflash pair (UEFI boots)",
        probe: Probe::Runs(&[
            "test",
            "-f",
            crate::uefi::QEMU_EFI,
            "-a",
            "-f",
            crate::uefi::AAVMF_CODE,
            "-a",
            "-f",
            crate::uefi::AAVMF_VARS,
        ]),
        packages: &["qemu-efi-aarch64"],
    },
    Tool {
        what: "mkfs.vfat, mtools, mkfs.ext4 and sgdisk (the GPT disk)",
        probe: Probe::Runs(&[
            "sh",
            "-c",
            "mkfs.vfat --help >/dev/null && mcopy --version && mkfs.ext4 -V && sgdisk --version",
        ]),
        packages: &["dosfstools", "mtools", "e2fsprogs", "gdisk"],
    },
    Tool {
        what: "grub-mkstandalone (GRUB's EFI image for the disk)",
        probe: Probe::Runs(&["grub-mkstandalone", "--version"]),
        packages: &["grub-common"],
    },
    Tool {
        what: "iasl (the guest's MADT disassembled)",
        probe: Probe::Runs(&["iasl", "-v"]),
        packages: &["acpica-tools"],
    },
    Tool {
        what: "make and the host C compiler (QEMU, guest modules)",
        probe: Probe::Runs(&["sh", "-c", "make --version && cc --version"]),
        packages: &["build-essential"],
    },
    Tool {
        what: "glib for QEMU (pkg-config glib-2.0)",
        probe: Probe::Runs(&["pkg-config", "--exists", "glib-2.0"]),
        packages: &["pkg-config", "libglib2.0-dev"],
    },
    Tool {
        what: "pixman for QEMU (pkg-config pixman-1)",
        probe: Probe::Runs(&["pkg-config", "--exists", "pixman-1"]),
        packages: &["pkg-config", "libpixman-1-dev"],
    },
    Tool {
        what: "slirp for QEMU (pkg-config slirp)",
        probe: Probe::Runs(&["pkg-config", "--exists", "slirp"]),
        packages: &["pkg-config", "libslirp-dev"],
    },
    Tool {
        what: "capstone for QEMU (pkg-config capstone)",
        probe: Probe::Runs(&["pkg-config", "--exists", "capstone"]),
        packages: &["pkg-config", "libcapstone-dev"],
    },
    Tool {
        // Debian's libfdt-dev has no .pc file; QEMU looks for the header
        // and library.
        what: "libfdt for QEMU (libfdt.h)",
        probe: Probe::Runs(&[
            "sh",
            "-c",
            "echo '#include <libfdt.h>' | cc -E -x c - >/dev/null",
        ]),
        packages: &["libfdt-dev"],
    },
    Tool {
        what: "git (applies qemu-patches/)",
        probe: Probe::Runs(&["git", "--version"]),
        packages: &["git"],
    },
    Tool {
        what: "bzip2 and xz (QEMU's source and firmware placeholders)",
        probe: Probe::Runs(&["sh", "-c", "bzip2 --help 2>/dev/null && xz --version"]),
        packages: &["bzip2", "xz-utils"],
    },
    Tool {
        what: "Debian's python3 with venv (QEMU's configure)",
        probe: Probe::Runs(&["/usr/bin/python3", "-m", "venv", "--help"]),
        packages: &["python3-venv"],
    },
    Tool {
        what: "ninja",
        probe: Probe::Runs(&["ninja", "--version"]),
        packages: &["ninja-build"],
    },
    Tool {
        what: "ccache (the QEMU builds share their unchanged objects)",
        probe: Probe::Runs(&["ccache", "--version"]),
        packages: &["ccache"],
    },
    Tool {
        what: "meson >= 1.5 with pycotap",
        probe: Probe::Meson(1, 5),
        packages: &["meson", "python3-pycotap"],
    },
    Tool {
        what: "flex and bison (QEMU's build)",
        probe: Probe::Runs(&["sh", "-c", "flex --version && bison --version"]),
        packages: &["flex", "bison"],
    },
    Tool {
        what: "aarch64-linux-gnu-gcc -static (guest workloads and modules)",
        probe: Probe::StaticAarch64,
        packages: &["gcc-aarch64-linux-gnu", "libc6-dev-arm64-cross"],
    },
    Tool {
        what: "aarch64-linux-gnu-readelf (perf's library closure)",
        probe: Probe::Runs(&["aarch64-linux-gnu-readelf", "--version"]),
        packages: &["binutils-aarch64-linux-gnu"],
    },
    Tool {
        what: "taskset",
        probe: Probe::Runs(&["taskset", "--version"]),
        packages: &["util-linux"],
    },
    Tool {
        what: "LAVA's schemas (Debian's python3)",
        probe: Probe::Runs(&["/usr/bin/python3", "-c", "import lava_common.schemas"]),
        packages: &["lava-common"],
    },
];

/// Installs what is missing, then checks every tool in [`TOOLS`].
/// `apt_update` refreshes the package lists (retried once when an install
/// fails, since stale lists are the usual cause).
pub fn packages(apt_update: impl Fn() -> Result<()>) -> Result<()> {
    let mut missing = missing_packages(HOST_PACKAGES);
    let bp_missing = missing_packages(BACKPORTS_PACKAGES);
    if !missing.is_empty() || !bp_missing.is_empty() || !meson_recent() {
        // pkg/suite takes only these two from backports.
        missing.extend(
            BACKPORTS_PACKAGES
                .iter()
                .map(|p| format!("{p}/{BACKPORTS}")),
        );
        let step = Step::new(format!("apt-get install {}", missing.join(" ")));
        let install = |step_name: &str| {
            run(
                step_name,
                privileged("apt-get")
                    .env("DEBIAN_FRONTEND", "noninteractive")
                    .args(["-q", "-y", "--no-install-recommends", "install"])
                    .args(&missing),
            )
        };
        if install("apt-get install").is_err() {
            apt_update()?;
            install("apt-get install of the build and guest packages")?;
        }
        step.done("installed");
    }
    check_tools(TOOLS)
}

/// Runs every tool's probe; the error names each failed tool, why, and the
/// packages to install.
pub fn check_tools(tools: &[Tool]) -> Result<()> {
    let failed: Vec<String> = tools
        .iter()
        .filter_map(|t| {
            probe(t.probe).err().map(|e| {
                format!(
                    "  {}: {e:#}\n    install: apt-get install {}",
                    t.what,
                    t.packages.join(" ")
                )
            })
        })
        .collect();
    if !failed.is_empty() {
        bail!(
            "host check: {} tool(s) do not work after the set-up:\n{}",
            failed.len(),
            failed.join("\n")
        );
    }
    Ok(())
}

fn probe(p: Probe) -> Result<()> {
    match p {
        Probe::Runs(argv) => {
            run(&argv.join(" "), Command::new(argv[0]).args(&argv[1..]))?;
        }
        Probe::Meson(maj, min) => {
            let v = run("meson --version", Command::new("meson").arg("--version"))?;
            if !version_at_least(v.trim(), maj, min) {
                bail!("meson {} is older than {maj}.{min}", v.trim());
            }
            run(
                "import pycotap",
                Command::new("/usr/bin/python3").args(["-c", "import pycotap"]),
            )?;
        }
        Probe::StaticAarch64 => static_aarch64(workloads::CC, &[])?,
    }
    Ok(())
}

/// Builds a one-line C program with `cc -static` and checks the result the
/// way the guest workloads are checked. `extra` is for the unit test's
/// negative control.
pub fn static_aarch64(cc: &str, extra: &[&str]) -> Result<()> {
    let dir = std::env::temp_dir().join(format!("xtask-cc-probe-{}", std::process::id()));
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let src = dir.join("probe.c");
    let exe = dir.join("probe");
    let res = (|| {
        fs::write(
            &src,
            "#include <stdio.h>\nint main(void) { return puts(\"ok\") < 0; }\n",
        )?;
        run(
            &format!("{cc} -static"),
            Command::new(cc)
                .args(extra)
                .args(["-static", "-O1", "-o"])
                .arg(&exe)
                .arg(&src),
        )?;
        workloads::check_static_aarch64(&fs::read(&exe)?)
    })();
    let _ = fs::remove_dir_all(&dir);
    res
}

/// `1.7.0` ≥ (1, 5).
pub fn version_at_least(v: &str, maj: u32, min: u32) -> bool {
    let mut it = v.split(['.', '-', '~', '+']).map(|x| x.parse::<u32>().ok());
    matches!((it.next(), it.next()), (Some(Some(a)), Some(Some(b))) if (a, b) >= (maj, min))
}

pub fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// A command that may change the system; goes through sudo unless root.
pub fn privileged(program: &str) -> Command {
    if is_root() {
        Command::new(program)
    } else {
        let mut c = Command::new("sudo");
        c.arg(program);
        c
    }
}

/// apt-get install of those of `pkgs` that are not installed (by-hand
/// commands' own tools; the set-up's are [`HOST_PACKAGES`]).
pub fn install_missing(pkgs: &[&str]) -> Result<()> {
    let missing = missing_packages(pkgs);
    if missing.is_empty() {
        return Ok(());
    }
    let step = Step::new(format!("apt-get install {}", missing.join(" ")));
    run(
        "apt-get install",
        privileged("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["-q", "-y", "--no-install-recommends", "install"])
            .args(&missing),
    )?;
    step.done("installed");
    Ok(())
}

/// `dpkg-query` status of each package: those not fully installed.
pub fn missing_packages(pkgs: &[&str]) -> Vec<String> {
    let out = Command::new("dpkg-query")
        .args(["-W", "-f", "${Package} ${db:Status-Abbrev}\n"])
        .args(pkgs)
        .output();
    let installed: Vec<String> = match out {
        Ok(o) => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.trim_end().ends_with(" ii"))
            .filter_map(|l| {
                l.split_whitespace()
                    .next()
                    .map(|p| p.split(':').next().unwrap_or(p).to_string())
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    pkgs.iter()
        .filter(|p| !installed.iter().any(|i| i == *p))
        .map(|p| p.to_string())
        .collect()
}

/// meson must be the backports one (>= 1.5); bookworm's 1.0 fails QEMU 10.
fn meson_recent() -> bool {
    Command::new("dpkg-query")
        .args(["-W", "-f", "${Version}", "meson"])
        .output()
        .is_ok_and(|o| version_at_least(&String::from_utf8_lossy(&o.stdout), 1, 5))
}

/// The file the host's Debian mirror is read from: deb822 first, then the
/// one-line `sources.list` (older installs and some images have only that).
pub fn host_sources() -> Result<String> {
    let deb822 = Path::new("/etc/apt/sources.list.d/debian.sources");
    if let Ok(text) = fs::read_to_string(deb822) {
        return Ok(text);
    }
    let list = fs::read_to_string("/etc/apt/sources.list").context(
        "apt sources: neither /etc/apt/sources.list.d/debian.sources nor /etc/apt/sources.list is readable",
    )?;
    Ok(one_line_to_deb822(&list))
}

/// `deb [signed-by=K] URI SUITE COMPONENTS…` lines as deb822 stanzas, so
/// one parser serves both formats.
pub fn one_line_to_deb822(list: &str) -> String {
    let mut out = Vec::new();
    for l in list.lines().map(str::trim) {
        let Some(rest) = l.strip_prefix("deb ") else {
            continue;
        };
        let mut words: Vec<&str> = rest.split_whitespace().collect();
        let mut signed_by = None;
        if words.first().is_some_and(|w| w.starts_with('[')) {
            let end = words.iter().position(|w| w.ends_with(']')).unwrap_or(0);
            for opt in &words[..=end] {
                let opt = opt.trim_matches(['[', ']']);
                if let Some(k) = opt.strip_prefix("signed-by=") {
                    signed_by = Some(k.to_string());
                }
            }
            words.drain(..=end);
        }
        if words.len() < 2 {
            continue;
        }
        let mut s = format!("Types: deb\nURIs: {}\nSuites: {}\n", words[0], words[1]);
        if let Some(k) = signed_by {
            s.push_str(&format!("Signed-By: {k}\n"));
        }
        out.push(s);
    }
    out.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_package_is_installed_and_every_package_serves_a_tool() {
        let installed: Vec<&str> = HOST_PACKAGES
            .iter()
            .chain(BACKPORTS_PACKAGES)
            .copied()
            .collect();
        for t in TOOLS {
            for p in t.packages {
                assert!(installed.contains(p), "{}: {p} is not installed", t.what);
            }
        }
        for p in &installed {
            assert!(
                TOOLS.iter().any(|t| t.packages.contains(p)),
                "{p} is installed but no tool check uses it"
            );
        }
        // The package whose absence broke new machines.
        assert!(HOST_PACKAGES.contains(&"libc6-dev-arm64-cross"));
    }

    #[test]
    fn a_missing_tool_names_its_package() {
        let t = Tool {
            what: "a tool nobody has",
            probe: Probe::Runs(&["vhost-device-spe-no-such-tool", "--version"]),
            packages: &["no-such-package"],
        };
        let e = check_tools(&[t]).unwrap_err().to_string();
        assert!(e.contains("a tool nobody has"), "{e}");
        assert!(e.contains("apt-get install no-such-package"), "{e}");
        assert!(check_tools(&[]).is_ok());
    }

    /// The cross compiler's probe, with a negative control: without the
    /// C library's headers on its search path (`-nostdinc`, as on a new
    /// machine without libc6-dev-arm64-cross) it must fail.
    #[test]
    fn static_probe_fails_without_the_arm64_c_library() {
        let e = static_aarch64("vhost-device-spe-no-such-cc", &[]).unwrap_err();
        assert!(format!("{e:#}").contains("cannot start"), "{e:#}");
        if Command::new(workloads::CC)
            .arg("--version")
            .output()
            .is_err()
        {
            eprintln!(
                "skipped: {} is not installed (cargo xtask setup installs it)",
                workloads::CC
            );
            return;
        }
        static_aarch64(workloads::CC, &[]).unwrap();
        let e = static_aarch64(workloads::CC, &["-nostdinc"]).unwrap_err();
        assert!(format!("{e:#}").contains("stdio.h"), "{e:#}");
    }

    #[test]
    fn meson_versions() {
        assert!(version_at_least("1.7.0", 1, 5));
        assert!(version_at_least("1.5.1-1~bpo12+1", 1, 5));
        assert!(!version_at_least("1.0.1-5", 1, 5));
        assert!(!version_at_least("", 1, 5));
    }

    #[test]
    fn one_line_sources_become_deb822() {
        let list = "# c\ndeb [arch=amd64 signed-by=/usr/share/keyrings/k.gpg] http://m.example/debian bookworm main\ndeb-src http://m.example/debian bookworm main\ndeb http://m.example/debian-security bookworm-security main\n";
        let s = one_line_to_deb822(list);
        assert_eq!(
            s,
            "Types: deb\nURIs: http://m.example/debian\nSuites: bookworm\nSigned-By: /usr/share/keyrings/k.gpg\n\nTypes: deb\nURIs: http://m.example/debian-security\nSuites: bookworm-security\n"
        );
    }
}
