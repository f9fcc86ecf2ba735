//! `bench-overhead`: the host CPU time QEMU's vCPU threads, QEMU's other
//! threads and the backend take between two console markers the guest's
//! workload prints around its timed loop: what each side of the design
//! costs, apart, and none of the time the threads waited for a CPU. (It
//! does not take out a host CPU that runs slower at times: on the
//! project's build machine it moves as wall time does, BENCHMARKS.md.)

use super::process::read_lossy;
use crate::scenario::CpuTimes;
use std::fs;
use std::time::Duration;

/// Printed by the guest just before and just after its timed run
/// (`spe-workload` with `SPE_WORKLOAD_MARK`).
pub const START: &str = "SPE-BENCH-START";
pub const END: &str = "SPE-BENCH-END";

/// The first field of a thread's `schedstat`: nanoseconds it ran on a CPU.
fn parse_schedstat(s: &str) -> Option<u64> {
    s.split_whitespace().next()?.parse().ok()
}

/// Which of [`CpuTimes`]' groups a thread counts in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Group {
    Vcpu0,
    Vcpu,
    QemuOther,
    Backend,
}

fn qemu_group(comm: &str) -> Group {
    match comm {
        "CPU 0/TCG" => Group::Vcpu0,
        c if c.starts_with("CPU ") && c.ends_with("/TCG") => Group::Vcpu,
        _ => Group::QemuOther,
    }
}

/// Each thread of `pid`: its id, group and the nanoseconds it has run.
fn threads(pid: u32, group: impl Fn(&str) -> Group) -> Vec<(String, Group, u64)> {
    let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|t| {
            let ns = parse_schedstat(&read_lossy(&t.path().join("schedstat")))?;
            let comm = read_lossy(&t.path().join("comm"));
            let tid = format!("{pid}/{}", t.file_name().to_string_lossy());
            Some((tid, group(comm.trim()), ns))
        })
        .collect()
}

type Snapshot = Vec<(String, Group, u64)>;

fn snapshot(qemu: u32, backend: Option<u32>) -> Snapshot {
    let mut s = threads(qemu, qemu_group);
    if let Some(b) = backend {
        s.extend(threads(b, |_| Group::Backend));
    }
    s
}

/// What each thread ran between the two snapshots, by group. Threads come
/// and go (QEMU's worker threads, the backend's per-connection ones): one
/// that began in between counts from 0, one that ended is lost.
fn since(now: &Snapshot, before: &Snapshot) -> CpuTimes {
    let mut t = CpuTimes::default();
    for (tid, group, ns) in now {
        let was = before
            .iter()
            .find(|(b, _, _)| b == tid)
            .map_or(0, |(_, _, n)| *n);
        let d = Duration::from_nanos(ns.saturating_sub(was));
        match group {
            Group::Vcpu0 => {
                t.vcpu0 += d;
                t.vcpus += d;
            }
            Group::Vcpu => t.vcpus += d,
            Group::QemuOther => t.qemu_other += d,
            Group::Backend => t.backend += d,
        }
    }
    t
}

/// The window of one run: a snapshot at [`START`], the difference at
/// [`END`].
#[derive(Debug, Default)]
pub struct CpuWindow {
    at_start: Option<Snapshot>,
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
        if let Some(start) = self.at_start.as_ref().filter(|_| console.contains(END)) {
            self.taken = Some(since(&snapshot(qemu, backend), start));
        }
    }

    pub fn taken(&self) -> Option<CpuTimes> {
        self.taken
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

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
        assert_eq!(qemu_group("CPU 0/TCG"), Group::Vcpu0);
        assert_eq!(qemu_group("CPU 7/TCG"), Group::Vcpu);
        assert_eq!(qemu_group("qemu-system-aar"), Group::QemuOther);
        assert_eq!(qemu_group("call_rcu"), Group::QemuOther);
    }

    #[test]
    fn threads_that_come_and_go_count_their_own_time() {
        let g = |t: &str, group, ns| (t.to_string(), group, ns);
        let before = vec![
            g("1/1", Group::Vcpu0, 1000),
            g("1/2", Group::Vcpu, 500),
            g("1/3", Group::QemuOther, 700),
        ];
        // 1/3 ended; 1/4 began.
        let now = vec![
            g("1/1", Group::Vcpu0, 1600),
            g("1/2", Group::Vcpu, 900),
            g("1/4", Group::QemuOther, 50),
            g("2/9", Group::Backend, 30),
        ];
        let t = since(&now, &before);
        assert_eq!(t.vcpu0, Duration::from_nanos(600));
        assert_eq!(t.vcpus, Duration::from_nanos(1000));
        assert_eq!(t.qemu_other, Duration::from_nanos(50));
        assert_eq!(t.backend, Duration::from_nanos(30));
    }

    #[test]
    fn this_process_runs_between_two_markers() {
        let me = std::process::id();
        let mut w = CpuWindow::default();
        w.poll("booting", me, Some(me));
        assert!(w.pending());
        w.poll(START, me, Some(me));
        // Burn 30 ms of this thread's CPU time (not of wall time: a loaded
        // machine may run it for less) so that the window cannot be empty.
        let ran = || parse_schedstat(&read_lossy(Path::new("/proc/thread-self/schedstat")));
        let from = ran().expect("this kernel gives schedstat");
        let mut x = 0u64;
        while ran().unwrap_or(u64::MAX) - from < 30_000_000 {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            }
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
