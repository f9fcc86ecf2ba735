//! `bench-overhead`: the host CPU time QEMU's vCPU threads, QEMU's other
//! threads and the backend take between two console markers the guest's
//! workload script prints around its timed run. Unlike wall time it
//! counts no time the host gave to others (steal), which moves these
//! shared machines' wall times by ±10 % from boot to boot.

use super::process::read_lossy;
use crate::scenario::CpuTimes;
use std::fs;
use std::time::Duration;

/// Printed by the guest just before and just after its timed run
/// (`spe-workload` with `SPE_WORKLOAD_MARK`).
pub const START: &str = "SPE-BENCH-START";
pub const END: &str = "SPE-BENCH-END";

/// `now` less `before`, thread group by thread group.
fn since(now: CpuTimes, before: CpuTimes) -> CpuTimes {
    CpuTimes {
        vcpu0: now.vcpu0.saturating_sub(before.vcpu0),
        vcpus: now.vcpus.saturating_sub(before.vcpus),
        qemu_other: now.qemu_other.saturating_sub(before.qemu_other),
        backend: now.backend.saturating_sub(before.backend),
    }
}

/// The first field of a thread's `schedstat`: nanoseconds it ran on a CPU.
fn parse_schedstat(s: &str) -> Option<u64> {
    s.split_whitespace().next()?.parse().ok()
}

/// Each thread of `pid`: its name and the nanoseconds it has run.
fn threads(pid: u32) -> Vec<(String, u64)> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|t| {
            let ns = parse_schedstat(&read_lossy(&t.path().join("schedstat")))?;
            Some((read_lossy(&t.path().join("comm")).trim().to_string(), ns))
        })
        .collect()
}

fn is_vcpu(comm: &str) -> bool {
    comm.starts_with("CPU ") && comm.ends_with("/TCG")
}

fn snapshot(qemu: u32, backend: Option<u32>) -> CpuTimes {
    let mut t = CpuTimes::default();
    for (comm, ns) in threads(qemu) {
        let d = Duration::from_nanos(ns);
        if comm == "CPU 0/TCG" {
            t.vcpu0 = d;
        }
        if is_vcpu(&comm) {
            t.vcpus += d;
        } else {
            t.qemu_other += d;
        }
    }
    if let Some(b) = backend {
        t.backend = threads(b)
            .into_iter()
            .map(|(_, ns)| Duration::from_nanos(ns))
            .sum();
    }
    t
}

/// The window of one run: a snapshot at [`START`], the difference at
/// [`END`].
#[derive(Debug, Default)]
pub struct CpuWindow {
    at_start: Option<CpuTimes>,
    taken: Option<CpuTimes>,
}

impl CpuWindow {
    /// Whether the console still has a marker to show.
    pub fn pending(&self) -> bool {
        self.taken.is_none()
    }

    /// Snapshots at the marker the console shows now (polled by the
    /// runner every 10 ms, which bounds the window's error).
    pub fn poll(&mut self, console: &str, qemu: u32, backend: Option<u32>) {
        if self.at_start.is_none() && console.contains(START) {
            self.at_start = Some(snapshot(qemu, backend));
        }
        if let Some(start) = self.at_start.filter(|_| console.contains(END)) {
            self.taken = Some(since(snapshot(qemu, backend), start));
        }
    }

    pub fn taken(&self) -> Option<CpuTimes> {
        self.taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_gives_the_run_time() {
        assert_eq!(parse_schedstat("1234567 89 10\n"), Some(1_234_567));
        assert_eq!(parse_schedstat(""), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
    }

    #[test]
    fn the_workload_prints_the_markers() {
        let c = include_str!("../../../guest/workloads/spe-workload.c");
        assert!(c.contains(&format!("mark(\"{START}\")")));
        assert!(c.contains(&format!("mark(\"{END}\")")));
    }

    #[test]
    fn vcpu_threads_are_told_from_the_others() {
        assert!(is_vcpu("CPU 0/TCG"));
        assert!(is_vcpu("CPU 7/TCG"));
        assert!(!is_vcpu("qemu-system-aar"));
        assert!(!is_vcpu("call_rcu"));
    }

    #[test]
    fn this_process_runs_between_two_markers() {
        let me = std::process::id();
        let mut w = CpuWindow::default();
        w.poll("booting", me, Some(me));
        assert!(w.pending());
        w.poll(START, me, Some(me));
        // Burn some CPU so that the window cannot come out empty.
        let mut x = 0u64;
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_millis(30) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
        }
        w.poll(&format!("{START}\n{END}"), me, Some(me));
        let taken = w.taken().expect("both markers seen");
        assert!(!w.pending());
        // This process's threads are none of QEMU's vCPUs.
        assert_eq!(taken.vcpus, Duration::ZERO);
        assert_eq!(taken.vcpu0, Duration::ZERO);
        assert!(taken.backend >= Duration::from_millis(10), "{taken:?}");
        assert!(taken.qemu_other >= Duration::from_millis(10), "{taken:?}");
    }
}
