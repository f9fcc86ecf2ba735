//! The launcher under another tool: `spe-qemu` as the QEMU of virtme-ng
//! (`cargo xtask virtme-ng`, by hand: it installs virtme-ng from PyPI).
//! virtme-ng boots the matrix kernel with a root directory made from the
//! harness's initramfs (shared over 9p, as virtme-ng does for another
//! architecture), loads the SPE driver and records with perf. The same
//! run with the patched QEMU alone as virtme-ng's QEMU is the negative
//! control: no SPE there.

use crate::host::install_missing;
use crate::runner::Rig;
use crate::util::{run, Step};
use anyhow::{bail, Context, Result};
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The virtme-ng release the run was proven with.
const VIRTME_NG: &str = "virtme-ng==1.42";

/// Host packages virtme-ng runs (depmod) and the root is unpacked with.
const PACKAGES: &[&str] = &["kmod", "cpio"];

/// What virtme-ng's guest init and its shell stub run that the harness's
/// initramfs has only as busybox applets.
const APPLETS: &[&str] = &[
    "mount", "umount", "mkdir", "ln", "cat", "cp", "cut", "chmod", "chown", "echo", "grep",
    "hostname", "ip", "mknod", "rm", "sed", "setsid", "stty", "sync", "touch", "true", "false",
    "poweroff", "printf", "base64", "ls", "sleep", "uname", "insmod", "env", "id", "head", "tail",
    "tr", "wc", "mv",
];

/// The guest's commands: the driver, the PMUs, a perf record of the
/// workload and the records perf decodes, as `SPE-RESULT` lines.
const SCRIPT: &str = "insmod /lib/modules/$(uname -r)/kernel/drivers/perf/arm_spe_pmu.ko; \
     echo SPE-RESULT vng_pmus=$(ls /sys/bus/event_source/devices | tr '\\n' ,); \
     perf record -e arm_spe_0// -o /tmp/p.data -- spe-workload 20 > /tmp/rec.log 2>&1; \
     echo SPE-RESULT vng_record_rc=$?; \
     echo SPE-RESULT vng_records=$(perf report -D -i /tmp/p.data 2>/dev/null | grep -c ' PC 0x')";

/// One virtme-ng boot's results.
struct Outcome {
    spe_pmu: bool,
    record_rc: Option<i32>,
    records: u64,
}

impl Outcome {
    fn parse(log: &str) -> Outcome {
        let value = |key: &str| {
            log.lines()
                .filter_map(|l| l.trim().strip_prefix("SPE-RESULT "))
                .find_map(|l| l.strip_prefix(&format!("{key}=")))
                .map(str::trim)
        };
        Outcome {
            spe_pmu: value("vng_pmus").is_some_and(|p| p.split(',').any(|d| d == "arm_spe_0")),
            record_rc: value("vng_record_rc").and_then(|v| v.parse().ok()),
            records: value("vng_records")
                .and_then(|v| v.parse().ok())
                .unwrap_or(0),
        }
    }

    fn works(&self) -> bool {
        self.spe_pmu && self.record_rc == Some(0) && self.records > 0
    }
}

pub fn run_vng(rig: &Rig, work: &Path) -> Result<bool> {
    install_missing(PACKAGES)?;
    let dir = work.join("virtme-ng");
    let venv = dir.join("venv");
    crate::util::pip_venv(&venv, VIRTME_NG, "vng")?;
    let root = dir.join(format!("root-{}", rig.spec.name));
    make_root(&rig.initrd, &root)?;

    let qemu = rig
        .launcher
        .parent()
        .context("the launcher's prefix")?
        .join(crate::install::QEMU_NAME);
    let mut table = String::from(
        "| virtme-ng's QEMU | arm_spe_0 | perf record | records |\n|---|---|---|---|\n",
    );
    let mut ok = true;
    for (name, q, want) in [
        ("spe-qemu", &rig.launcher, true),
        (crate::install::QEMU_NAME, &qemu, false),
    ] {
        let log = dir.join(format!("{name}-{}.log", rig.spec.name));
        let step = Step::new(format!("virtme-ng with {name} ({})", rig.spec.name));
        let path = format!(
            "{}:{}:{}",
            venv.join("bin").display(),
            rig.launcher.parent().unwrap().display(),
            std::env::var("PATH").unwrap_or_default()
        );
        // timeout(1) signals its whole process group: vng, QEMU and the
        // backend of a run that hangs.
        let out = Command::new("timeout")
            .args([
                "600",
                "vng",
                "--verbose",
                "--arch",
                "arm64",
                "--memory",
                "1G",
            ])
            .arg("--root")
            .arg(&root)
            .arg("--busybox")
            .arg(root.join("bin/busybox"))
            .arg("--run")
            .arg(&rig.kernel)
            .arg("--qemu")
            .arg(q)
            .arg("--qemu-opts=-cpu max")
            .args(["--exec", SCRIPT])
            .env("PATH", path)
            .output()
            .context("running vng")?;
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        fs::write(&log, &text)?;
        let o = Outcome::parse(&text);
        let good = o.works() == want && (want || !o.spe_pmu);
        ok &= good;
        table.push_str(&format!(
            "| `{name}` | {} | {} | {} |\n",
            if o.spe_pmu { "probed" } else { "absent" },
            o.record_rc
                .map_or("not run".into(), |rc| format!("exit {rc}")),
            o.records
        ));
        step.done(if good {
            "as expected"
        } else {
            "NOT as expected (see its log)"
        });
        if !good {
            eprintln!("{}", crate::util::tail(&text, 30));
        }
    }
    let md = work.join("virtme-ng.md");
    fs::write(&md, &table)?;
    print!("{table}");
    eprintln!("==> {} (logs in {})", md.display(), dir.display());
    Ok(ok)
}

/// virtme-ng's root for another architecture: the harness's initramfs
/// unpacked, with the directories and commands virtme-ng's init expects of
/// a distribution's root.
fn make_root(initrd: &Path, root: &Path) -> Result<()> {
    let _ = fs::remove_dir_all(root);
    fs::create_dir_all(root)?;
    run(
        "unpacking the initramfs",
        Command::new("cpio")
            .current_dir(root)
            .args(["-idm", "--quiet", "--no-absolute-filenames", "-F"])
            .arg(initrd),
    )?;
    for d in [
        "run", "home", "root", "var", "opt", "srv", "mnt", "etc", "usr/bin",
    ] {
        fs::create_dir_all(root.join(d))?;
    }
    fs::write(root.join("etc/fstab"), "")?;
    let mut links: Vec<PathBuf> = APPLETS.iter().map(|a| root.join("bin").join(a)).collect();
    links.push(root.join("usr/bin/env"));
    for l in links {
        if l.symlink_metadata().is_err() {
            symlink("/bin/busybox", &l)?;
        }
    }
    if !root.join("bin/busybox").exists() {
        bail!("{} has no /bin/busybox", initrd.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_read_from_the_console() {
        let o = Outcome::parse(
            "x\nSPE-RESULT vng_pmus=arm_spe_0,armv8_pmuv3,\nSPE-RESULT vng_record_rc=0\n\
             SPE-RESULT vng_records=49817\n",
        );
        assert!(o.works());
        let none =
            Outcome::parse("SPE-RESULT vng_pmus=armv8_pmuv3,\nSPE-RESULT vng_record_rc=255\n");
        assert!(!none.spe_pmu && !none.works());
        assert_eq!(none.records, 0);
    }
}
