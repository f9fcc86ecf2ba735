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
/// workload and the records perf decodes, and the SPE kselftest suite's
/// KTAP totals, as `SPE-RESULT` lines (virtio_console, for the guest
/// control port, is a module on 6.1).
const SCRIPT: &str = "insmod /lib/modules/$(uname -r)/kernel/drivers/perf/arm_spe_pmu.ko; \
     insmod /lib/modules/$(uname -r)/kernel/drivers/char/virtio_console.ko 2>/dev/null; \
     echo SPE-RESULT vng_pmus=$(ls /sys/bus/event_source/devices | tr '\\n' ,); \
     perf record -e arm_spe_0// -o /tmp/p.data -- spe-workload 20 > /tmp/rec.log 2>&1; \
     echo SPE-RESULT vng_record_rc=$?; \
     echo SPE-RESULT vng_records=$(perf report -D -i /tmp/p.data 2>/dev/null | grep -c ' PC 0x'); \
     arm_spe_test > /tmp/suite.log 2>&1; \
     echo SPE-RESULT vng_suite=$(sed -n 's/^# Totals: pass:\\([0-9]*\\) fail:\\([0-9]*\\) .* skip:\\([0-9]*\\).*/\\1\\/\\2\\/\\3/p' /tmp/suite.log)";

/// One virtme-ng boot's results.
struct Outcome {
    spe_pmu: bool,
    record_rc: Option<i32>,
    records: u64,
    /// The suite's pass/fail/skip, if it printed its totals.
    suite: Option<(u32, u32, u32)>,
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
            suite: value("vng_suite").and_then(|v| {
                let n: Vec<u32> = v.split('/').filter_map(|n| n.parse().ok()).collect();
                (n.len() == 3).then(|| (n[0], n[1], n[2]))
            }),
        }
    }

    /// SPE works and the suite passes, its fault cases through the port
    /// (only stage2 and granule-protection skip).
    fn works(&self) -> bool {
        self.spe_pmu
            && self.record_rc == Some(0)
            && self.records > 0
            && matches!(self.suite, Some((p, 0, 2)) if p > 0)
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
        "| virtme-ng's QEMU | arm_spe_0 | perf record | records | kselftest suite (pass/fail/skip) |\n\
         |---|---|---|---|---|\n",
    );
    let mut ok = true;
    for (name, q, opts, want) in [
        (
            "spe-qemu",
            &rig.launcher,
            "--qemu-opts=-cpu max --spe-guest-control",
            true,
        ),
        (
            crate::install::QEMU_NAME,
            &qemu,
            "--qemu-opts=-cpu max",
            false,
        ),
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
            .arg(opts)
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
            "| `{name}` | {} | {} | {} | {} |\n",
            if o.spe_pmu { "probed" } else { "absent" },
            o.record_rc
                .map_or("not run".into(), |rc| format!("exit {rc}")),
            o.records,
            o.suite
                .map_or("no totals".into(), |(p, f, s)| format!("{p}/{f}/{s}"))
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
             SPE-RESULT vng_records=49817\nSPE-RESULT vng_suite=29/0/2\n",
        );
        assert!(o.works());
        let failing = Outcome::parse(
            "SPE-RESULT vng_pmus=arm_spe_0,\nSPE-RESULT vng_record_rc=0\n\
             SPE-RESULT vng_records=5\nSPE-RESULT vng_suite=28/1/2\n",
        );
        assert_eq!(failing.suite, Some((28, 1, 2)));
        assert!(!failing.works());
        let none =
            Outcome::parse("SPE-RESULT vng_pmus=armv8_pmuv3,\nSPE-RESULT vng_record_rc=255\n");
        assert!(!none.spe_pmu && !none.works());
        assert_eq!(none.records, 0);
    }
}
