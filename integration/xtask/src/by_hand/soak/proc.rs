//! The backend's memory, descriptors and threads over time, from /proc,
//! and whether they stay flat once warm.
//!
//! Memory is judged by `RssAnon`, the process's own heap and stacks:
//! `VmRSS` also counts the guest's RAM, shared from a memfd, as the
//! backend touches more of it (each new AUX buffer lands on pages it has
//! not written yet), which is no leak. Both are recorded.

use serde_json::{json, Value};
use std::fs;

/// One reading of a process.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Sample {
    /// Seconds into the run.
    pub t: f64,
    pub pid: u32,
    pub rss_kib: u64,
    pub anon_kib: u64,
    pub fds: u64,
    pub threads: u64,
    /// User and system CPU time so far, in seconds.
    pub cpu_s: f64,
}

impl Sample {
    pub fn to_json(self) -> Value {
        json!({
            "t": self.t, "pid": self.pid, "rss_kib": self.rss_kib,
            "anon_kib": self.anon_kib, "fds": self.fds,
            "threads": self.threads, "cpu_s": self.cpu_s,
        })
    }
}

/// `pid` now, or `None` once it is gone.
pub fn sample(pid: u32, t: f64) -> Option<Sample> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fds = fs::read_dir(format!("/proc/{pid}/fd")).ok()?.count() as u64;
    Some(Sample {
        t,
        pid,
        rss_kib: status_kib(&status, "VmRSS:")?,
        anon_kib: status_kib(&status, "RssAnon:")?,
        fds,
        threads: status_kib(&status, "Threads:")?,
        cpu_s: cpu_seconds(&stat)?,
    })
}

/// A `/proc/PID/status` field's number (kB, or a count).
fn status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// utime + stime of a `/proc/PID/stat` line, in seconds.
fn cpu_seconds(stat: &str) -> Option<f64> {
    // The command name may hold spaces: fields count from its ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1);
    Some(ticks as f64 / hz as f64)
}

/// How long a process is young. The memory model's tables (4096
/// instructions with a histogram of their own per vCPU, 8192 remembered
/// lines) fill as the guest shows it more instructions and lines: the
/// hour's soak measured anonymous memory from 0.7 to 2.8 MiB over a
/// process's first 10 minutes, then within 0.5 MiB for the next 10.
pub const WARM_UP_S: f64 = 600.0;

/// How much a warm process may grow: allocator slack on top of the
/// tables, and the descriptors of a control connection or two open at
/// the moment of a reading.
pub const ANON_SLACK_KIB: u64 = 1024;
pub const FD_SLACK: u64 = 2;

/// Whether each process (by PID) stayed flat after `warm_up` seconds of
/// its life: its anonymous memory, descriptors and threads at most the
/// slack above their values at its first reading after warm-up. Returns
/// the problems, one per process and measure, and one if no process
/// lived long enough to be judged.
pub fn flat(samples: &[Sample], warm_up: f64) -> Vec<String> {
    let mut pids: Vec<u32> = samples.iter().map(|s| s.pid).collect();
    pids.dedup();
    let mut problems = Vec::new();
    let mut judged = 0;
    for pid in pids {
        let life: Vec<&Sample> = samples.iter().filter(|s| s.pid == pid).collect();
        let born = life[0].t;
        let warm: Vec<&&Sample> = life.iter().filter(|s| s.t >= born + warm_up).collect();
        let Some(base) = warm.first() else { continue };
        if warm.len() >= 2 {
            judged += 1;
        }
        let top = |f: fn(&Sample) -> u64| warm.iter().map(|s| f(s)).max().unwrap_or(0);
        let checks: [(&str, u64, u64, u64); 3] = [
            (
                "anonymous memory (KiB)",
                base.anon_kib,
                top(|s| s.anon_kib),
                ANON_SLACK_KIB,
            ),
            ("descriptors", base.fds, top(|s| s.fds), FD_SLACK),
            ("threads", base.threads, top(|s| s.threads), 0),
        ];
        for (what, at_warm, most, slack) in checks {
            if most > at_warm + slack {
                problems.push(format!(
                    "backend {pid}: {what} grew from {at_warm} at {:.0} s to {most} (slack {slack})",
                    base.t
                ));
            }
        }
    }
    if judged == 0 {
        problems.push(format!(
            "no backend process lived {warm_up:.0} s past its start: too short a soak to judge its memory"
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(t: f64, pid: u32, anon_kib: u64, fds: u64) -> Sample {
        Sample {
            t,
            pid,
            rss_kib: anon_kib + 1000,
            anon_kib,
            fds,
            threads: 4,
            cpu_s: 0.0,
        }
    }

    #[test]
    fn this_process_reads() {
        let me = sample(std::process::id(), 1.0).unwrap();
        assert!(me.rss_kib > 0 && me.fds >= 3 && me.threads >= 1, "{me:?}");
        assert_eq!(sample(u32::MAX, 1.0), None);
    }

    #[test]
    fn a_stat_line_gives_cpu_time() {
        let line = "42 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 300 200 0 0 20 0 1";
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        assert_eq!(cpu_seconds(line), Some(500.0 / hz));
    }

    #[test]
    fn growth_before_warm_up_and_across_a_restart_is_not_a_leak() {
        let run = [
            s(0.0, 1, 100, 10),
            s(50.0, 1, 5000, 20),
            s(130.0, 1, 5000, 20),
            s(400.0, 1, 6000, 21),
            // The restarted process starts small again.
            s(500.0, 2, 100, 10),
            s(700.0, 2, 4000, 20),
            s(900.0, 2, 4100, 20),
        ];
        assert_eq!(flat(&run, 120.0), Vec::<String>::new());
        // Nobody old enough: that is a problem too.
        let p = flat(&run[..2], 120.0);
        assert!(p[0].contains("too short a soak"), "{p:?}");
    }

    #[test]
    fn a_leak_after_warm_up_is_one() {
        let mut run: Vec<Sample> = (0..60)
            .map(|i| s(i as f64 * 10.0, 1, 5000 + i * 100, 20 + i / 10))
            .collect();
        let p = flat(&run, 120.0);
        assert_eq!(p.len(), 2, "{p:?}");
        assert!(p[0].contains("anonymous memory") && p[1].contains("descriptors"));
        run.iter_mut().for_each(|x| x.anon_kib = 5000);
        run.iter_mut().for_each(|x| x.fds = 20);
        assert!(flat(&run, 120.0).is_empty());
    }
}
