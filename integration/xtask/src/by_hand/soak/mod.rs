//! `cargo xtask soak`: the load held over time. A guest profiles the
//! workload in a loop (`integration/guest/scenarios/soak.sh`) for N
//! minutes under full emulation while the host, on a seeded
//! [`schedule`], arms faults of every kind through the control socket,
//! stalls the backend below QEMU's bound, changes its choices and
//! restarts it twice. Every iteration's records as written by the backend
//! and as decoded by perf must add up ([`tally`]); the backend's memory,
//! descriptors and threads must stay flat after warm-up ([`proc`], with a
//! plot); the guest must log no WARN, BUG or Oops. The run's folder gets
//! `soak.json` (everything), `soak.svg` and `soak.txt` (the summary).

mod plot;
mod proc;
mod schedule;
mod tally;

use crate::runner::{GuestRun, Live, Measure, Rig, Watcher};
use crate::scenario::{SpeRun, Verdict};
use anyhow::{bail, Context, Result};
use schedule::{Action, Schedule};
use serde_json::{json, Value};
use spe_protocol::control::{
    ArmFault, CancelArgs, Command, NoArgs, Reply, SetChoiceArgs, VcpuArgs, VcpuSel,
};
use spe_protocol::profile::CpuProfile;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::time::{Duration, Instant};
use tally::{Decoded, FaultOutcome, Iteration};

/// How often the backend and QEMU are read from /proc.
const SAMPLE_EVERY: Duration = Duration::from_secs(5);
/// The vCPUs drain what QEMU has handed the backend before the count of
/// a paused VM is read.
const DRAIN: Duration = Duration::from_millis(300);

pub struct Options {
    pub minutes: u64,
    pub seed: u64,
}

/// Runs the soak on `rig`; whether it held.
pub fn soak(rig: &Rig, o: &Options) -> Result<bool> {
    let length = Duration::from_secs(o.minutes * 60);
    let spec = GuestRun {
        scenario: "soak".into(),
        params: vec![("soak_seconds", length.as_secs().to_string())],
        run_name: "soak".into(),
        backend: true,
        // The loop starts its last iteration before the time is up.
        timeout: length + Duration::from_secs(900),
        kill_backend_when: None,
        spe: Some(SpeRun::new(CpuProfile::NeoverseN1)),
        measure: Measure::Nothing,
    };
    println!(
        "soak: {} min on {} (seed {}); the run's folder: {}",
        o.minutes,
        rig.spec.name,
        o.seed,
        rig.runs_dir.join("soak").display()
    );
    let mut s = Soak::new(o.seed, length);
    let out = rig.run_watched(&spec, &mut s)?;
    let mut problems = Vec::new();
    if let Verdict::Fail(why) = &out.verdict {
        problems.push(format!("the run: {why}"));
    }
    for it in &s.its {
        for p in tally::problems(it) {
            problems.push(format!("iteration {} (cpu {}): {p}", it.index, it.cpu));
        }
    }
    problems.extend(proc::flat(&s.samples, proc::WARM_UP_S));
    if s.restarts_min.len() != 2 {
        problems.push(format!(
            "{} restarts, not 2 (the schedule put them at {:?})",
            s.restarts_min.len(),
            s.schedule.restarts()
        ));
    }
    let fired = s
        .its
        .iter()
        .filter(|i| i.fault == Some(FaultOutcome::Fired))
        .count();
    if fired != out.control.faults.len() {
        problems.push(format!(
            "{fired} faults fired by the host's count, the backend sent {} FAULT_DELIVERED events",
            out.control.faults.len()
        ));
    }
    let report = s.report(&problems);
    let dir = &out.dir;
    fs::write(
        dir.join("soak.json"),
        serde_json::to_string_pretty(&report)?,
    )?;
    let title = format!(
        "vhost-device-spe soak: {} min, {}, seed {}",
        o.minutes, rig.spec.name, o.seed
    );
    plot::draw(&dir.join("soak.svg"), &s.samples, &s.restarts_min, &title)?;
    let text = summary(&report, &problems);
    fs::write(dir.join("soak.txt"), &text)?;
    print!("{text}");
    Ok(problems.is_empty())
}

/// The backend's counts summed over its vCPUs.
#[derive(Clone, Copy, Debug, Default)]
struct Counts {
    records: u64,
    discarded: u64,
}

impl Counts {
    /// What was counted since `base`, an earlier reading of the same
    /// process: an error if a count went back (reset, or not the same
    /// process).
    fn since(self, base: Counts) -> Result<Counts> {
        match (
            self.records.checked_sub(base.records),
            self.discarded.checked_sub(base.discarded),
        ) {
            (Some(records), Some(discarded)) => Ok(Counts { records, discarded }),
            _ => bail!("the backend's counts went back from {base:?} to {self:?}"),
        }
    }
}

struct Soak {
    schedule: Schedule,
    started: Instant,
    /// Console bytes read so far (whole lines only).
    seen: usize,
    its: Vec<Iteration>,
    /// A stall or restart waiting for its moment in the recording.
    due: Option<Instant>,
    /// The current backend process's counts at the last boundary, and
    /// what earlier processes wrote in the current iteration.
    base: Counts,
    carry: Counts,
    /// The choices set so far (applied again after a restart).
    choices: BTreeMap<&'static str, &'static str>,
    armed: Option<u32>,
    samples: Vec<proc::Sample>,
    qemu: Option<proc::Sample>,
    next_sample: Instant,
    restarts_min: Vec<f64>,
    log: Option<fs::File>,
}

impl Soak {
    fn new(seed: u64, length: Duration) -> Soak {
        Soak {
            schedule: Schedule::new(seed, length),
            started: Instant::now(),
            seen: 0,
            its: Vec::new(),
            due: None,
            base: Counts::default(),
            carry: Counts::default(),
            choices: BTreeMap::new(),
            armed: None,
            samples: Vec::new(),
            qemu: None,
            next_sample: Instant::now(),
            restarts_min: Vec::new(),
            log: None,
        }
    }

    fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    fn log(&mut self, line: &str) {
        if let Some(f) = self.log.as_mut() {
            let _ = writeln!(f, "{:8.1} {line}", self.started.elapsed().as_secs_f64());
        }
    }

    fn sample(&mut self, live: &Live) {
        let t = self.elapsed().as_secs_f64();
        if let Some(s) = live.backend_pid().and_then(|p| proc::sample(p, t)) {
            self.samples.push(s);
        }
        if let Some(q) = proc::sample(live.qemu_pid(), t) {
            self.qemu = Some(q);
        }
    }

    /// Lines of the guest's loop, in order.
    fn line(&mut self, live: &mut Live, line: &str, later: &str) -> Result<()> {
        let mut w = line.split_whitespace();
        let (Some(tag), Some(i)) = (w.next(), w.next().and_then(|i| i.parse::<u32>().ok())) else {
            return Ok(());
        };
        match tag {
            "SOAK-START" => self.start(live, i, w.next()),
            "SOAK-RECORDING" => {
                if self
                    .its
                    .last()
                    .is_some_and(|it| matches!(it.action, Action::Stall(_) | Action::Restart))
                {
                    self.due = Some(Instant::now() + self.schedule.delay());
                }
                Ok(())
            }
            "SOAK-STOPPED" => {
                self.act(live)?;
                // The next iteration may not have begun when the count
                // is read, or the count is not this iteration's alone.
                let late = later.contains(&format!("SOAK-START {} ", i + 1));
                self.stopped(live, late);
                Ok(())
            }
            "SOAK-ITER" => {
                if let (Some((n, d)), Some(it)) = (Decoded::parse(line), self.its.last_mut()) {
                    if n == it.index {
                        it.decoded = Some(d);
                    }
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }

    fn start(&mut self, live: &mut Live, index: u32, cpu: Option<&str>) -> Result<()> {
        let cpu = cpu
            .and_then(|c| c.strip_prefix("cpu="))
            .and_then(|c| c.parse().ok())
            .context("SOAK-START without cpu=")?;
        let action = self.schedule.next(self.elapsed());
        let mut it = Iteration {
            index,
            cpu,
            start_s: self.elapsed().as_secs_f64(),
            action: action.clone(),
            fault: None,
            action_error: None,
            written: None,
            discarded: 0,
            decoded: None,
        };
        self.armed = None;
        match action {
            Action::Fault { kind, trigger } => {
                let arm = Command::ArmFault(ArmFault {
                    vcpu: VcpuSel::One(cpu),
                    kind,
                    trigger,
                });
                match live.ctl(&arm) {
                    Ok(Reply::Armed(a)) => self.armed = Some(a.id),
                    Ok(other) => it.action_error = Some(format!("arm-fault answered {other:?}")),
                    Err(e) => it.fault = Some(FaultOutcome::Refused(format!("{e:#}"))),
                }
            }
            Action::Choice { name, value } => {
                self.choices.insert(name, value);
                if let Err(e) = set_choice(live, name, value) {
                    it.action_error = Some(e);
                }
            }
            _ => {}
        }
        self.log(&format!(
            "iteration {index} cpu {cpu}: {}",
            action.describe()
        ));
        self.its.push(it);
        Ok(())
    }

    /// A stall or restart whose moment has come (or the recording ended
    /// before it did).
    fn act(&mut self, live: &mut Live) -> Result<()> {
        if self.due.take().is_none() {
            return Ok(());
        }
        let action = self.its.last().map(|i| i.action.clone());
        let error = match action {
            Some(Action::Stall(d)) => live.stall(d).err().map(|e| format!("{e:#}")),
            Some(Action::Restart) => self.restart(live)?,
            _ => None,
        };
        if let (Some(e), Some(it)) = (error, self.its.last_mut()) {
            it.action_error = Some(e);
        }
        Ok(())
    }

    /// The VM paused so that the dying process's count is whole, the
    /// backend killed and started again, the choices set again, the VM
    /// resumed. An error only if the backend did not come back.
    fn restart(&mut self, live: &mut Live) -> Result<Option<String>> {
        let mut problem = None;
        if let Err(e) = live.pause() {
            problem = Some(format!("pausing the VM: {e:#}"));
        }
        std::thread::sleep(DRAIN);
        // The dying process's last reading (its CPU time), taken before
        // the query: a control connection's thread outlives its reply
        // for a moment.
        self.sample(live);
        match counts(live).and_then(|c| c.since(self.base)) {
            Ok(d) => {
                self.carry.records += d.records;
                self.carry.discarded += d.discarded;
            }
            Err(e) => problem = Some(format!("the count before the restart: {e:#}")),
        }
        let took = live.restart().context("restarting the backend")?;
        self.base = Counts::default();
        self.restarts_min.push(self.elapsed().as_secs_f64() / 60.0);
        self.log(&format!("restarted in {:.2} s", took.as_secs_f64()));
        for (name, value) in self.choices.clone() {
            if let Err(e) = set_choice(live, name, value) {
                problem = Some(e);
            }
        }
        if let Err(e) = live.resume() {
            problem = Some(format!("resuming the VM: {e:#}"));
        }
        Ok(problem)
    }

    /// perf has exited: the iteration's count, and its fault's fate.
    fn stopped(&mut self, live: &mut Live, late: bool) {
        let now = counts(live);
        let armed = self.armed.take();
        let fate = armed.map(
            |id| match live.ctl(&Command::QueryFaults(NoArgs::default())) {
                Ok(Reply::Faults(f)) if f.faults.iter().any(|a| a.id == id) => {
                    let _ = live.ctl(&Command::CancelFault(CancelArgs { id }));
                    FaultOutcome::NotFired
                }
                Ok(_) => FaultOutcome::Fired,
                Err(e) => FaultOutcome::Refused(format!("query-faults: {e:#}")),
            },
        );
        let (base, carry) = (self.base, std::mem::take(&mut self.carry));
        let Some(it) = self.its.last_mut() else {
            return;
        };
        if fate.is_some() {
            it.fault = fate;
        }
        match now.and_then(|c| Ok((c, c.since(base)?))) {
            Ok((c, d)) => {
                if !late {
                    it.written = Some(carry.records + d.records);
                    it.discarded = carry.discarded + d.discarded;
                }
                self.base = c;
            }
            Err(e) => {
                it.action_error.get_or_insert(format!("query-spu: {e:#}"));
            }
        }
        let line = format!(
            "iteration {} stopped: written {:?}, fault {:?}",
            it.index, it.written, it.fault
        );
        self.log(&line);
    }

    fn report(&self, problems: &[String]) -> Value {
        let backend_cpu: f64 = {
            let mut last: BTreeMap<u32, f64> = BTreeMap::new();
            for s in &self.samples {
                last.insert(s.pid, s.cpu_s);
            }
            last.values().sum()
        };
        let its: Vec<Value> = self
            .its
            .iter()
            .map(|it| {
                json!({
                    "index": it.index, "cpu": it.cpu,
                    "start_s": (it.start_s * 10.0).round() / 10.0,
                    "action": it.action.describe(),
                    "fault": it.fault.as_ref().map(|f| format!("{f:?}")),
                    "action_error": it.action_error,
                    "written": it.written, "discarded": it.discarded,
                    "decoded": it.decoded.as_ref().map(|d| d.records),
                    "aux_flagged": it.decoded.as_ref().map(|d| d.aux_flagged),
                    "lost_events": it.decoded.as_ref().map(|d| d.lost_events),
                    "warns": it.decoded.as_ref().map(|d| d.warns),
                })
            })
            .collect();
        let kinds: std::collections::BTreeSet<String> = self
            .its
            .iter()
            .filter_map(|i| match &i.action {
                Action::Fault { kind, .. } => Some(schedule::kind_name(kind)),
                _ => None,
            })
            .collect();
        // The last process's first reading once warm, and its last.
        let first_warm = |f: fn(&proc::Sample) -> u64| {
            let last = self.samples.last()?;
            let born = self.samples.iter().find(|s| s.pid == last.pid)?.t;
            let warm = self
                .samples
                .iter()
                .find(|s| s.pid == last.pid && s.t >= born + proc::WARM_UP_S)?;
            Some((f(warm), f(last)))
        };
        json!({
            "minutes": self.schedule.run().as_secs_f64() / 60.0,
            "books": tally::totals(&self.its),
            "fault_kinds_armed": kinds,
            "restarts_at_min": self.restarts_min,
            "stalls": self.its.iter().filter(|i| matches!(i.action, Action::Stall(_))).count(),
            "choice_changes": self.its.iter().filter(|i| matches!(i.action, Action::Choice { .. })).count(),
            "guest_warnings": self.its.iter().filter_map(|i| i.decoded.as_ref()).map(|d| d.warns).sum::<u64>(),
            "cpu_s": {
                "qemu": self.qemu.map(|q| (q.cpu_s * 10.0).round() / 10.0),
                "backend": (backend_cpu * 100.0).round() / 100.0,
            },
            "backend_last_process": {
                "anon_kib_warm_then_end": first_warm(|s| s.anon_kib),
                "rss_kib_warm_then_end": first_warm(|s| s.rss_kib),
                "fds_warm_then_end": first_warm(|s| s.fds),
                "threads_warm_then_end": first_warm(|s| s.threads),
            },
            "problems": problems,
            "iterations": its,
            "samples": self.samples.iter().map(|s| s.to_json()).collect::<Vec<_>>(),
        })
    }
}

impl Watcher for Soak {
    fn poll(&mut self, live: &mut Live<'_>) -> Result<()> {
        if self.log.is_none() {
            self.log = Some(fs::File::create(live.dir().join("soak.log"))?);
        }
        if Instant::now() >= self.next_sample {
            self.sample(live);
            self.next_sample = Instant::now() + SAMPLE_EVERY;
        }
        // Whole lines only; a part of one waits for the next poll.
        let console = live.console;
        let end = console[self.seen..].rfind('\n').map(|n| self.seen + n + 1);
        if let Some(end) = end {
            let text = console[self.seen..end].to_string();
            self.seen = end;
            let lines: Vec<&str> = text.lines().collect();
            for (n, line) in lines.iter().enumerate() {
                let later = lines[n + 1..].join("\n");
                self.line(live, line.trim_end_matches('\r'), &later)?;
            }
        }
        if self.due.is_some_and(|t| Instant::now() >= t) {
            self.act(live)?;
        }
        Ok(())
    }
}

fn set_choice(live: &Live, name: &str, value: &str) -> Result<(), String> {
    let cmd = Command::SetChoice(SetChoiceArgs {
        name: name.into(),
        value: value.into(),
    });
    live.ctl(&cmd)
        .map(|_| ())
        .map_err(|e| format!("set-choice {name}={value}: {e:#}"))
}

/// The backend's records and discarded records over every vCPU.
fn counts(live: &Live) -> Result<Counts> {
    match live.ctl(&Command::QuerySpu(VcpuArgs::default()))? {
        Reply::Spus(l) => Ok(l.vcpus.iter().fold(Counts::default(), |c, v| Counts {
            records: c.records + v.stats.records,
            discarded: c.discarded + v.stats.discarded,
        })),
        other => bail!("query-spu answered {other:?}"),
    }
}

/// The summary printed and kept in `soak.txt`.
fn summary(r: &Value, problems: &[String]) -> String {
    let b = &r["books"];
    let mut t = String::new();
    let _ = writeln!(
        t,
        "soak: {:.0} min, {} iterations ({} unmeasured)",
        r["minutes"].as_f64().unwrap_or(0.0),
        b["iterations"],
        b["unmeasured"]
    );
    let _ = writeln!(
        t,
        "  records: written {}, decoded {}, lost by cause {}",
        b["written"], b["decoded"], b["lost"]
    );
    let _ = writeln!(t, "  faults fired by kind: {}", b["faults_fired"]);
    let _ = writeln!(
        t,
        "  fault kinds armed: {} of {}; restarts at {} min; {} stalls; {} choice changes",
        r["fault_kinds_armed"].as_array().map_or(0, Vec::len),
        schedule::KINDS,
        r["restarts_at_min"],
        r["stalls"],
        r["choice_changes"]
    );
    let _ = writeln!(t, "  guest WARN/BUG/Oops lines: {}", r["guest_warnings"]);
    let _ = writeln!(
        t,
        "  CPU time: QEMU {} s, backend {} s",
        r["cpu_s"]["qemu"], r["cpu_s"]["backend"]
    );
    let _ = writeln!(
        t,
        "  backend (last process, after warm-up → end): RssAnon {} KiB, VmRSS {} KiB, fds {}, threads {}",
        r["backend_last_process"]["anon_kib_warm_then_end"],
        r["backend_last_process"]["rss_kib_warm_then_end"],
        r["backend_last_process"]["fds_warm_then_end"],
        r["backend_last_process"]["threads_warm_then_end"]
    );
    if problems.is_empty() {
        let _ = writeln!(t, "SOAK PASS");
    } else {
        for p in problems {
            let _ = writeln!(t, "  problem: {p}");
        }
        let _ = writeln!(t, "SOAK FAIL: {} problems", problems.len());
    }
    t
}
