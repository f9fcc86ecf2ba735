//! `bench-overhead --pin`: QEMU's vCPU 0 thread alone on a host CPU.

use super::process::read_lossy;
use anyhow::{Context, Result};
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Gives QEMU's vCPU 0 thread (`CPU 0/TCG`) the first host CPU this
/// process may use to itself, and every other thread of QEMU and of the
/// backend the other allowed host CPUs, so that what the guest's perf and
/// the backend do does not take the profiled vCPU's host CPU. The vCPU
/// threads exist once QEMU has realized its CPUs, before the guest runs.
pub fn pin_vcpu0(qemu: u32, backend: Option<u32>) -> Result<()> {
    // The CPUs this process may use, which need not be 0..n-1 (a cpuset).
    let status = read_lossy(Path::new("/proc/self/status"));
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .context("no Cpus_allowed_list in /proc/self/status")?;
    let cpus = parse_cpu_list(allowed)?;
    anyhow::ensure!(
        cpus.len() >= 2,
        "pinning vCPU 0 needs 2 host CPUs, this process may use {}",
        allowed.trim()
    );
    let first = cpus[0].to_string();
    let rest = cpus[1..]
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let deadline = Instant::now() + Duration::from_secs(10);
    let vcpu0 = loop {
        let found = fs::read_dir(format!("/proc/{qemu}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .find(|t| read_lossy(&t.path().join("comm")).trim() == "CPU 0/TCG");
        if let Some(t) = found {
            break t.file_name().to_string_lossy().into_owned();
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "QEMU's vCPU 0 thread did not appear within 10 s"
        );
        sleep(Duration::from_millis(20));
    };
    let taskset = |args: &[&str]| -> Result<()> {
        let st = Command::new("taskset")
            .args(args)
            .stdout(Stdio::null())
            .status()
            .context("running taskset (util-linux)")?;
        anyhow::ensure!(st.success(), "taskset {} failed ({st})", args.join(" "));
        Ok(())
    };
    taskset(&["-a", "-p", "-c", &rest, &qemu.to_string()])?;
    if let Some(b) = backend {
        taskset(&["-a", "-p", "-c", &rest, &b.to_string()])?;
    }
    taskset(&["-p", "-c", &first, &vcpu0])
}

/// A kernel CPU list ("0-3,8,10-11") as CPU numbers, in order.
fn parse_cpu_list(list: &str) -> Result<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let bad = || anyhow::anyhow!("bad CPU list {:?}", list.trim());
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?),
            None => {
                let c: u32 = part.parse().map_err(|_| bad())?;
                (c, c)
            }
        };
        anyhow::ensure!(lo <= hi, "bad CPU list {:?}", list.trim());
        cpus.extend(lo..=hi);
    }
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("\t0-1\n").unwrap(), vec![0, 1]);
        assert_eq!(parse_cpu_list("2,4-6,9").unwrap(), vec![2, 4, 5, 6, 9]);
        assert_eq!(parse_cpu_list("3").unwrap(), vec![3]);
        assert!(parse_cpu_list("1-x").is_err());
        assert!(parse_cpu_list("5-2").is_err());
    }
}
