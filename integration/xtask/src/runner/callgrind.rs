//! `bench-overhead --instructions`: QEMU under callgrind, counting the host
//! instructions it executes (its generated code included) between the
//! workload's markers. A count does not move with the host CPU's speed,
//! which wall time and CPU time do on the project's machine
//! (BENCHMARKS.md), so one run per configuration sizes a few points.
//!
//! Valgrind runs one thread at a time, and QEMU's multi-threaded TCG does
//! not get through a boot under it. Two ways to run one TCG thread for
//! every vCPU ([`Clock`]): under icount, exact on a busy host but not the
//! design's path; or on the host's clock, the design's path but only on
//! an idle host.
//!
//! `sleep=on`, so that the workload's sleep after each marker
//! ([`PAUSE_S`]) is the host's time: `callgrind_control` (about two
//! seconds) then acts with the guest idle, and the window is exact, not
//! as late as the runner.

use super::cputime::{END, START};
use crate::scenario::Instructions;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Which clock the guest runs on under callgrind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// `-icount` ([`ICOUNT`]): the guest's clock is its instructions, so
    /// its timer ticks, the switches between its vCPUs and every wait of
    /// one vCPU for the other come at the same instructions however fast
    /// the host runs QEMU, and the backend's records and interrupts come
    /// only in its replies ([`BACKEND_ARGS`]). Two runs agree to 0.05 %
    /// with a fresh-machine run beside them. But QEMU's sampler then counts
    /// at each TB's start instead of in its exit check, and the backend
    /// hands its records over with a SYNC per batch: the A/B of two builds
    /// is exact, the total is not the design's.
    Icount,
    /// The host's clock, one TCG thread (`-accel tcg,thread=single`), the
    /// workload's CPU tickless (`nohz_full=0`; Debian's kernels have
    /// NO_HZ_FULL): what runs without callgrind. Two runs on an idle host
    /// agreed to 0.1 point; a QEMU build beside them added 41 points to
    /// the default period (a vCPU spinning on the other, which runs only
    /// at the next switch of host time, and the guest's other time-driven
    /// work grow with the host's slowness).
    Host,
}

impl Clock {
    /// `--instructions[=icount|host]`.
    pub fn parse(s: &str) -> Option<Clock> {
        match s {
            "icount" => Some(Clock::Icount),
            "host" => Some(Clock::Host),
            _ => None,
        }
    }

    /// QEMU's options under callgrind.
    pub fn qemu_args(self) -> &'static [&'static str] {
        match self {
            Clock::Icount => &["-icount", ICOUNT],
            Clock::Host => &["-accel", "tcg,thread=single"],
        }
    }

    /// What the guest's command line gets.
    pub fn cmdline(self) -> &'static str {
        match self {
            Clock::Icount => "",
            Clock::Host => " nohz_full=0",
        }
    }

    /// The backend's options.
    pub fn backend_args(self) -> &'static [&'static str] {
        match self {
            Clock::Icount => BACKEND_ARGS,
            Clock::Host => &[],
        }
    }
}

/// QEMU's `-icount` for [`Clock::Icount`].
pub const ICOUNT: &str = "shift=0,sleep=on";

/// The backend's under [`Clock::Icount`]: records and interrupts only in
/// its replies to QEMU's requests, QEMU handing over each batch of samples
/// with a SYNC, so that they do not come earlier or later with the
/// backend's share of the host.
pub const BACKEND_ARGS: &[&str] = &["--deterministic"];

/// Guest seconds the workload sleeps after each marker (`spe.mark_pause=`).
pub const PAUSE_S: u32 = 5;

/// The package that has valgrind and `callgrind_control`.
pub const PACKAGE: &str = "valgrind";

/// `qemu` under callgrind with instrumentation off until the window opens,
/// its data into `out` (a dump adds `.1`).
pub fn wrap(qemu: &Path, out: &Path) -> Command {
    let mut c = Command::new("valgrind");
    c.args(["--tool=callgrind", "--instr-atstart=no"])
        .arg(format!("--callgrind-out-file={}", out.display()))
        .arg(qemu);
    c
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Before,
    Counting,
    Dumped,
}

/// The counting window of one run: instrumentation on at [`START`], a
/// dump at [`END`].
#[derive(Debug)]
pub struct InstrWindow {
    out: PathBuf,
    state: State,
    error: Option<String>,
}

impl InstrWindow {
    pub fn new(out: PathBuf) -> Self {
        InstrWindow {
            out,
            state: State::Before,
            error: None,
        }
    }

    pub fn pending(&self) -> bool {
        self.state != State::Dumped && self.error.is_none()
    }

    /// Acts on the marker the console shows now.
    pub fn poll(&mut self, console: &str, pid: u32) {
        let step = match self.state {
            State::Before if console.contains(START) => {
                control(pid, &["--instr=on"]).map(|()| State::Counting)
            }
            State::Counting if console.contains(END) => control(pid, &["--dump=window"])
                .and_then(|()| control(pid, &["--instr=off"]))
                .map(|()| State::Dumped),
            s => Ok(s),
        };
        match step {
            Ok(s) => self.state = s,
            Err(e) => self.error = Some(e),
        }
    }

    /// The window's count and where it went, once QEMU has exited.
    pub fn taken(&self) -> Result<Instructions, String> {
        if let Some(e) = &self.error {
            return Err(e.clone());
        }
        if self.state != State::Dumped {
            return Err("the console never showed both markers".into());
        }
        let dump = PathBuf::from(format!("{}.1", self.out.display()));
        let text = std::fs::read_to_string(&dump)
            .map_err(|e| format!("reading {}: {e}", dump.display()))?;
        let total = totals(&text).ok_or_else(|| format!("no totals in {}", dump.display()))?;
        // Self cost per function only: no call trees, no source.
        let annotated = Command::new("callgrind_annotate")
            .args([
                "--inclusive=no",
                "--tree=none",
                "--auto=no",
                "--threshold=100",
            ])
            .arg(&dump)
            .output()
            .map_err(|e| format!("callgrind_annotate: {e}"))?;
        let text = String::from_utf8_lossy(&annotated.stdout);
        let _ = std::fs::write(self.out.with_extension("annotated"), text.as_bytes());
        Ok(Instructions {
            total,
            by_function: by_function(&text),
        })
    }
}

/// `callgrind_control ARGS PID`; it says `OK` once valgrind took it.
fn control(pid: u32, args: &[&str]) -> Result<(), String> {
    let out = Command::new("callgrind_control")
        .args(args)
        .arg(pid.to_string())
        .output()
        .map_err(|e| format!("callgrind_control: {e}"))?;
    let said = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && said.contains("OK") {
        Ok(())
    } else {
        Err(format!(
            "callgrind_control {} {pid}: {}{}",
            args.join(" "),
            said.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// A callgrind file's `totals:` line (instructions: the only event).
fn totals(text: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix("totals:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

/// Generated code, as `callgrind_annotate` names it: no symbol, no file.
pub const GENERATED: &str = "(generated code)";

/// `callgrind_annotate`'s per-function lines (`  1,234 (12.34%)
/// path/file.c:function [object]`), summed by function name, largest
/// first.
fn by_function(text: &str) -> Vec<(String, u64)> {
    let mut sums: HashMap<String, u64> = HashMap::new();
    for line in text.lines() {
        let Some((count, rest)) = line.trim_start().split_once(' ') else {
            continue;
        };
        let Ok(n) = count.replace(',', "").parse::<u64>() else {
            continue;
        };
        let Some(loc) = rest.trim_start().split_once(")  ").map(|(_, l)| l) else {
            continue;
        };
        if loc == "PROGRAM TOTALS" {
            continue;
        }
        let loc = loc.split(" [").next().unwrap_or(loc);
        let func = loc.rsplit_once(':').map_or(loc, |(_, f)| f);
        let name = if func.starts_with("0x") {
            GENERATED
        } else {
            func
        };
        *sums.entry(name.to_string()).or_default() += n;
    }
    let mut v: Vec<_> = sums.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_come_from_the_dump() {
        let dump = "events: Ir\nsummary: 18924396599\ntotals: 18924396599\n";
        assert_eq!(totals(dump), Some(18_924_396_599));
        assert_eq!(totals("events: Ir\n"), None);
    }

    #[test]
    fn functions_are_summed_by_name_and_generated_code_is_one() {
        let annotated = "\
--------------------------------------------------------------------------------
18,924,396,599 (100.0%)  PROGRAM TOTALS
--------------------------------------------------------------------------------
Ir                       file:function
--------------------------------------------------------------------------------
15,320,168,168 (80.95%)  ???:0x000000000c000000 [???]
   631,407,354 ( 3.34%)  /q/build/../src/target/arm/ptw.c:get_phys_addr_nogpc [/q/build/qemu-system-aarch64]
    79,077,995 ( 0.42%)  /q/build/../src/target/arm/internals.h:get_phys_addr_nogpc
     1,000,000 ( 0.01%)  ???:0x000000000c100000 [???]
";
        let f = by_function(annotated);
        assert_eq!(f[0], (GENERATED.to_string(), 15_321_168_168));
        assert_eq!(f[1], ("get_phys_addr_nogpc".to_string(), 710_485_349));
        assert_eq!(f.len(), 2);
    }

    #[test]
    fn a_request_that_fails_ends_the_window() {
        // No such process: the first marker's request fails, and the
        // window says so instead of waiting.
        let mut w = InstrWindow::new(PathBuf::from("/nonexistent/callgrind.out"));
        w.poll("booting", u32::MAX);
        assert!(w.pending());
        w.poll(START, u32::MAX);
        assert!(!w.pending());
        assert!(w.taken().unwrap_err().contains("callgrind_control"));
    }
}
