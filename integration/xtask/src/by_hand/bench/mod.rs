//! `cargo xtask bench-overhead`: what SPE costs the guest. Boots the same
//! workload (integration/guest/workloads/spe-workload.c, via the
//! `workload*` scenarios) under the same patched QEMU several ways and
//! reports the workload's own run time (measured in the guest, so boot
//! time does not dilute it) and the boot-to-exit wall time, as ratios to
//! `spe=off`, in a markdown table. With `--instructions`, QEMU runs under
//! callgrind instead and the tables give its host instructions
//! (`instructions.rs`).

mod instructions;

use crate::runner::{GuestRun, Measure, Rig};
use crate::scenario::{CpuTimes, Instructions, SpeRun, Verdict, VCPUS};
use anyhow::{bail, Result};
use spe_protocol::profile::CpuProfile;
use std::path::PathBuf;
use std::time::Duration;

/// One way of running the workload.
#[derive(Clone, Debug)]
pub struct Config {
    pub name: &'static str,
    /// The scenario script (integration/guest/scenarios/<guest>.sh).
    pub guest: &'static str,
    /// Full emulation with the backend attached; `None` is the same core
    /// ([`CORE`]) without SPE and without a backend.
    pub spe: Option<SpeRun>,
}

/// The core every row runs on, SPE off included.
const CORE: CpuProfile = CpuProfile::NeoverseN1;

/// The stock-QEMU path's rows, on the unpatched QEMU: the same runs,
/// against the same QEMU without the plugin (and without the device).
pub fn stock_configs() -> Vec<Config> {
    let stock = || Some(SpeRun::stock(CORE));
    let stock256 = || {
        Some(SpeRun {
            min_interval: Some(256),
            ..SpeRun::stock(CORE)
        })
    };
    let row = |name, guest, spe| Config { name, guest, spe };
    vec![
        row("stock QEMU, no plugin", "workload", None),
        row("plugin and device, not profiling", "workload", stock()),
        row(
            "perf -c 1048576 arm_spe_0//u: counting only",
            "workload-perf-counting",
            stock(),
        ),
        row(
            "perf arm_spe_0//, default period (1024)",
            "workload-perf",
            stock(),
        ),
        row(
            "  same, every record filtered in the backend",
            "workload-perf-filtered",
            stock(),
        ),
        row(
            "perf -c 256 arm_spe_0// (PMSIDR interval 256)",
            "workload-perf-256",
            stock256(),
        ),
        row(
            "  same, every record filtered in the backend",
            "workload-perf-256-filtered",
            stock256(),
        ),
    ]
}

pub fn configs() -> Vec<Config> {
    let spe = || Some(SpeRun::new(CORE));
    // Linux raises a period below PMSIDR_EL1.Interval to it.
    let spe256 = || {
        Some(SpeRun {
            min_interval: Some(256),
            ..SpeRun::new(CORE)
        })
    };
    let row = |name, guest, spe| Config { name, guest, spe };
    vec![
        row("spe=off", "workload", None),
        row("spe=on, not profiling", "workload", spe()),
        row(
            "perf -c 1048576 arm_spe_0//u: counting only",
            "workload-perf-counting",
            spe(),
        ),
        row(
            "perf arm_spe_0//, default period (1024)",
            "workload-perf",
            spe(),
        ),
        row(
            "  same, operations counted as instructions",
            "workload-perf",
            spe().map(SpeRun::exact),
        ),
        row(
            "  same, every record filtered in the backend",
            "workload-perf-filtered",
            spe(),
        ),
        row(
            "perf -c 256 arm_spe_0// (PMSIDR interval 256)",
            "workload-perf-256",
            spe256(),
        ),
        row(
            "  same, every record filtered in the backend",
            "workload-perf-256-filtered",
            spe256(),
        ),
    ]
}

/// One timed run.
#[derive(Clone, Debug, PartialEq)]
pub struct Sample {
    /// The guest's `workload_ns`.
    pub workload: Duration,
    /// QEMU start to exit, as the runner saw it.
    pub wall: Duration,
    /// The workload's time with its warm-up run's (`warmup_ns`), which
    /// runs the same way: what the backend's statistics cover.
    pub sampled: Duration,
    /// Operations QEMU selected for the busiest vCPU (written or
    /// filtered out): less than the period implies where the guest's
    /// driver had stopped profiling.
    pub samples: Option<u64>,
    /// Records the backend wrote for its busiest vCPU.
    pub records: Option<u64>,
    /// Host CPU time taken while the workload's loop ran.
    pub cpu: Option<CpuTimes>,
    /// QEMU's host instructions while it ran (`--instructions`).
    pub instructions: Option<Instructions>,
}

/// A configuration's outcome.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    Measured(Vec<Sample>),
    Failed(String),
}

pub fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    let n = v.len();
    if n == 0 {
        Duration::ZERO
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

/// The markdown report: medians and fastest runs, and their ratios to the
/// first row's. The machine's noise only ever adds time, so the fastest
/// runs are the better estimate of a configuration's own cost, the
/// medians of what a user sees.
pub fn table(rows: &[(&str, Outcome)]) -> String {
    let medians = |o: &Outcome| match o {
        Outcome::Measured(s) if !s.is_empty() => Some((
            median(s.iter().map(|x| x.workload).collect()),
            median(s.iter().map(|x| x.wall).collect()),
            s.iter().map(|x| x.workload).min().unwrap_or_default(),
        )),
        _ => None,
    };
    let base = rows.first().and_then(|(_, o)| medians(o));
    let ratio = |v: Duration, b: Option<Duration>| match b {
        Some(b) if !b.is_zero() => format!("{:.2}×", v.as_secs_f64() / b.as_secs_f64()),
        _ => "–".into(),
    };
    let rate = |s: &[Sample], n: fn(&Sample) -> Option<u64>| {
        let r: Vec<f64> = s
            .iter()
            .filter_map(|x| Some(n(x)? as f64 / x.sampled.as_secs_f64()))
            .collect();
        if r.is_empty() || r.iter().all(|&x| x == 0.0) {
            "–".to_string()
        } else {
            let mut r = r;
            r.sort_by(f64::total_cmp);
            format!("{:.0} k/s", r[r.len() / 2] / 1e3)
        }
    };
    let mut t = String::from(
        "| configuration | runs | workload (median) | vs spe=off | workload (fastest) | vs spe=off | boot to exit (median) | vs spe=off | samples per vCPU | records per vCPU |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for (name, o) in rows {
        let line = match (o, medians(o)) {
            (Outcome::Measured(s), Some((w, wall, fastest))) => format!(
                "| {name} | {} | {:.3} s | {} | {:.3} s | {} | {:.1} s | {} | {} | {} |",
                s.len(),
                w.as_secs_f64(),
                ratio(w, base.map(|b| b.0)),
                fastest.as_secs_f64(),
                ratio(fastest, base.map(|b| b.2)),
                wall.as_secs_f64(),
                ratio(wall, base.map(|b| b.1)),
                rate(s, |x| x.samples),
                rate(s, |x| x.records),
            ),
            (Outcome::Measured(_), None) => {
                format!("| {name} | 0 | failed: no runs | | | | | | | |")
            }
            (Outcome::Failed(why), _) => format!("| {name} | – | failed: {why} | | | | | | | |"),
        };
        t.push_str(&line);
        t.push('\n');
    }
    t
}

/// The first configuration (every ratio's base) and those of `rows`, in
/// the table's order.
fn pick(configs: Vec<Config>, rows: &[usize]) -> Result<Vec<Config>> {
    if let Some(n) = rows.iter().find(|&&n| n > configs.len()) {
        bail!(
            "--rows: there is no row {n}: the table has {}",
            configs.len()
        );
    }
    Ok(configs
        .into_iter()
        .enumerate()
        .filter(|(i, _)| *i == 0 || rows.contains(&(i + 1)))
        .map(|(_, c)| c)
        .collect())
}

/// Runs every configuration (or `rows` of them) `runs` times, interleaved
/// so that a slow spell of the machine spreads over all of them, and
/// prints the table.
pub fn run(rig: &Rig, runs: usize, measure: Measure, rows: Option<&[usize]>) -> Result<bool> {
    let configs = if rig.qemu_release.stock {
        stock_configs()
    } else {
        configs()
    };
    let configs = match rows {
        Some(rows) => pick(configs, rows)?,
        None => configs,
    };
    if rig.pin_vcpu0 {
        eprintln!("==> every run: QEMU's vCPU 0 thread alone on the first allowed host CPU");
    }
    let mut outcomes: Vec<Outcome> = configs
        .iter()
        .map(|_| Outcome::Measured(Vec::new()))
        .collect();
    for round in 0..runs {
        for (c, o) in configs.iter().zip(outcomes.iter_mut()) {
            time_one(rig, c, &round.to_string(), o, measure)?;
        }
    }
    let rows: Vec<(&str, Outcome)> = configs
        .iter()
        .map(|c| c.name)
        .zip(outcomes.iter().cloned())
        .collect();
    if measure.times_the_guest() {
        println!("{}", table(&rows));
    }
    print_measure(&rows, rows.len(), measure);
    Ok(!outcomes.iter().any(|o| matches!(o, Outcome::Failed(_))))
}

/// The tables of what the runs measured besides the guest's own times.
fn print_measure(rows: &[(&str, Outcome)], group: usize, measure: Measure) {
    match measure {
        Measure::Instructions(_) => {
            println!("{}", instructions::table(rows, group));
            println!("{}", instructions::growth_table(rows, group, 8));
        }
        _ => println!("{}", cpu_table(rows, group)),
    }
}

/// One timed run of `c`, added to `o` (which a failure replaces).
fn time_one(rig: &Rig, c: &Config, tag: &str, o: &mut Outcome, measure: Measure) -> Result<()> {
    let Outcome::Measured(samples) = o else {
        return Ok(());
    };
    let out = rig.run(&GuestRun {
        scenario: c.guest.to_string(),
        params: Vec::new(),
        run_name: match rig.vcpus {
            VCPUS => format!("bench-{}-{tag}", c.guest),
            n => format!("bench-{}-smp{n}-{tag}", c.guest),
        },
        backend: c.spe.is_some(),
        // Under callgrind a run takes 3 to 8 minutes.
        timeout: Duration::from_secs(if measure.callgrind().is_some() {
            3600
        } else {
            600
        }),
        kill_backend_when: None,
        // Without a backend: the core, without spe=on.
        spe: Some(c.spe.clone().unwrap_or(SpeRun::new(CORE))),
        measure: match measure {
            Measure::Nothing => Measure::CpuTime,
            m => m,
        },
    })?;
    let instructions = match out.instructions.clone() {
        Some(Err(why)) => {
            eprintln!("    {}: no instruction count ({why})", c.name);
            *o = Outcome::Failed(why);
            return Ok(());
        }
        Some(Ok(i)) => Some(i),
        None => None,
    };
    let ns = out
        .result("workload_ns")
        .and_then(|v| v.parse::<u64>().ok());
    let warm_up = out
        .result("warmup_ns")
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(0);
    match (&out.verdict, ns) {
        (Verdict::Pass, Some(ns)) => {
            eprintln!(
                "    {}: workload {:.3} s, boot to exit {:.1} s{}{}",
                c.name,
                ns as f64 / 1e9,
                out.elapsed.as_secs_f64(),
                instructions.as_ref().map_or(String::new(), |i| format!(
                    ", QEMU: {:.3} G instructions",
                    i.total as f64 / 1e9
                )),
                out.cpu.map_or(String::new(), |t| format!(
                    ", CPU: vCPU 0 {:.3} s, all vCPUs {:.3} s, QEMU's other threads {:.3} s, \
                     backend {:.3} s",
                    t.vcpu0.as_secs_f64(),
                    t.vcpus.as_secs_f64(),
                    t.qemu_other.as_secs_f64(),
                    t.backend.as_secs_f64()
                ))
            );
            samples.push(Sample {
                workload: Duration::from_nanos(ns),
                wall: out.elapsed,
                sampled: Duration::from_nanos(ns + warm_up),
                samples: out.control.busiest(|s| s.samples),
                records: out.control.busiest(|s| s.records),
                cpu: out.cpu,
                instructions,
            });
        }
        (v, _) => {
            let why = match v {
                Verdict::Fail(r) => r.clone(),
                Verdict::Pass => "no workload_ns result".into(),
            };
            eprintln!(
                "    {}: failed ({why}); logs in {}",
                c.name,
                out.dir.display()
            );
            *o = Outcome::Failed(why);
        }
    }
    Ok(())
}

/// `bench-overhead --ab NAME=QEMU ...`: the overhead of row `row` of
/// [`configs`] (counted from 1; the default period unless `--rows N`)
/// for each QEMU build, booting them in turn (each round: every build's
/// `spe=off`, then its run of the row), so that the builds share the
/// machine's slow spells. Prints each build's rows and its overhead in
/// points of `spe=off`, medians and fastest runs.
pub fn run_ab(
    rig: &Rig,
    runs: usize,
    builds: &[(String, PathBuf)],
    row: usize,
    measure: Measure,
) -> Result<bool> {
    let all = configs();
    // Row 1 is spe=off itself.
    let Some(on) = all.get(row.wrapping_sub(1)).filter(|_| row > 1) else {
        bail!("--rows: there is no row {row} to compare with spe=off");
    };
    let pair = [all[0].clone(), on.clone()];
    let mut outcomes: Vec<[Outcome; 2]> = builds
        .iter()
        .map(|_| [Outcome::Measured(Vec::new()), Outcome::Measured(Vec::new())])
        .collect();
    for round in 0..runs {
        for ((name, qemu), o) in builds.iter().zip(outcomes.iter_mut()) {
            eprintln!("==> round {round}, QEMU {name}");
            let r = Rig {
                qemu: qemu.clone(),
                ..rig.clone()
            };
            for (c, o) in pair.iter().zip(o.iter_mut()) {
                time_one(&r, c, &format!("{name}-{round}"), o, measure)?;
            }
        }
    }
    let names: Vec<_> = builds.iter().map(|(n, _)| n.as_str()).collect();
    if measure.times_the_guest() {
        println!("{}", ab_table(&names, &outcomes));
    }
    let rows: Vec<(String, Outcome)> = names
        .iter()
        .zip(&outcomes)
        .flat_map(|(n, [off, on])| {
            [
                (format!("{n}: spe=off"), off.clone()),
                (format!("{n}: {}", pair[1].name.trim()), on.clone()),
            ]
        })
        .collect();
    let rows: Vec<(&str, Outcome)> = rows.iter().map(|(n, o)| (n.as_str(), o.clone())).collect();
    print_measure(&rows, 2, measure);
    Ok(!outcomes
        .iter()
        .flatten()
        .any(|o| matches!(o, Outcome::Failed(_))))
}

/// Each build's default-period overhead over its own `spe=off`, in
/// points (100 × (ratio − 1)), from the medians and the fastest runs.
pub fn ab_table(names: &[&str], outcomes: &[[Outcome; 2]]) -> String {
    let stats = |o: &Outcome| match o {
        Outcome::Measured(s) if !s.is_empty() => Some((
            median(s.iter().map(|x| x.workload).collect()),
            s.iter().map(|x| x.workload).min().unwrap_or_default(),
            s.len(),
        )),
        _ => None,
    };
    let mut t = String::from(
        "| QEMU | runs | spe=off (median) | default period (median) | overhead (medians) | spe=off (fastest) | default period (fastest) | overhead (fastest) |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let points = |on: Duration, off: Duration| {
        format!(
            "{:+.1} points",
            100.0 * (on.as_secs_f64() / off.as_secs_f64() - 1.0)
        )
    };
    for (name, [off, on]) in names.iter().zip(outcomes) {
        let line = match (stats(off), stats(on)) {
            (Some((off_m, off_f, n)), Some((on_m, on_f, _))) => format!(
                "| {name} | {n} | {:.3} s | {:.3} s | {} | {:.3} s | {:.3} s | {} |",
                off_m.as_secs_f64(),
                on_m.as_secs_f64(),
                points(on_m, off_m),
                off_f.as_secs_f64(),
                on_f.as_secs_f64(),
                points(on_f, off_f),
            ),
            _ => format!("| {name} | – | failed | | | | | |"),
        };
        t.push_str(&line);
        t.push('\n');
    }
    t
}

/// The host CPU time of each configuration's timed loop, each side apart:
/// QEMU's vCPU 0 thread (the workload's), all its vCPU threads (perf's
/// too), its other threads and the backend, medians; vCPU 0's spread over
/// the runs ((slowest − fastest) / median), and the ratios of vCPU 0's and
/// of the total to the baseline: the first row of each group of `group`
/// rows (all of them in the bench; in the A/B, each build's `spe=off` and
/// default-period rows).
pub fn cpu_table(rows: &[(&str, Outcome)], group: usize) -> String {
    let cpu = |o: &Outcome| -> Option<Vec<CpuTimes>> {
        match o {
            Outcome::Measured(s) => {
                let v: Vec<CpuTimes> = s.iter().filter_map(|x| x.cpu).collect();
                (!v.is_empty()).then_some(v)
            }
            Outcome::Failed(_) => None,
        }
    };
    let med = |v: &[CpuTimes], f: fn(&CpuTimes) -> Duration| median(v.iter().map(f).collect());
    let total = |t: &CpuTimes| t.vcpus + t.qemu_other + t.backend;
    let ratio = |v: Duration, b: Duration| {
        if b.is_zero() {
            "–".to_string()
        } else {
            format!("{:.3}×", v.as_secs_f64() / b.as_secs_f64())
        }
    };
    let mut t = String::from(
        "| configuration | runs | vCPU 0 (median) | spread | vs baseline | all vCPUs | QEMU's other threads | backend | all (median) | vs baseline |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    let mut base: Option<(Duration, Duration)> = None;
    for (i, (name, o)) in rows.iter().enumerate() {
        if i % group.max(1) == 0 {
            base = None;
        }
        let Some(v) = cpu(o) else {
            t.push_str(&format!("| {name} | – | no CPU times | | | | | | | |\n"));
            continue;
        };
        let vcpus = med(&v, |t| t.vcpu0);
        let all = med(&v, total);
        let (bv, ba) = *base.get_or_insert((vcpus, all));
        let lo = v.iter().map(|t| t.vcpu0).min().unwrap_or_default();
        let hi = v.iter().map(|t| t.vcpu0).max().unwrap_or_default();
        let spread = if vcpus.is_zero() {
            "–".to_string()
        } else {
            format!(
                "{:.1} %",
                100.0 * (hi - lo).as_secs_f64() / vcpus.as_secs_f64()
            )
        };
        t.push_str(&format!(
            "| {name} | {} | {:.3} s | {spread} | {} | {:.3} s | {:.3} s | {:.3} s | {:.3} s | {} |\n",
            v.len(),
            vcpus.as_secs_f64(),
            ratio(vcpus, bv),
            med(&v, |t| t.vcpus).as_secs_f64(),
            med(&v, |t| t.qemu_other).as_secs_f64(),
            med(&v, |t| t.backend).as_secs_f64(),
            all.as_secs_f64(),
            ratio(all, ba),
        ));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_keep_the_base_and_the_tables_order() {
        let names = |rows: &[usize]| -> Vec<&str> {
            pick(stock_configs(), rows)
                .unwrap()
                .iter()
                .map(|c| c.name)
                .collect()
        };
        assert_eq!(
            names(&[4, 2]),
            [
                "stock QEMU, no plugin",
                "plugin and device, not profiling",
                "perf arm_spe_0//, default period (1024)",
            ]
        );
        assert_eq!(names(&[1]), ["stock QEMU, no plugin"]);
        assert!(pick(stock_configs(), &[8]).is_err());
    }

    fn s(workload_ms: u64, wall_ms: u64) -> Sample {
        Sample {
            workload: Duration::from_millis(workload_ms),
            wall: Duration::from_millis(wall_ms),
            sampled: Duration::from_millis(workload_ms),
            samples: None,
            records: None,
            cpu: None,
            instructions: None,
        }
    }

    fn c(vcpus_ms: u64, backend_ms: u64) -> Sample {
        Sample {
            cpu: Some(CpuTimes {
                vcpu0: Duration::from_millis(vcpus_ms),
                vcpus: Duration::from_millis(vcpus_ms + 100),
                qemu_other: Duration::from_millis(10),
                backend: Duration::from_millis(backend_ms),
            }),
            ..s(1000, 1)
        }
    }

    #[test]
    fn cpu_times_against_the_baseline_and_their_spread() {
        let m = |v: Vec<Sample>| Outcome::Measured(v);
        let t = cpu_table(
            &[
                ("spe=off", m(vec![c(2000, 0), c(2200, 0), c(1800, 0)])),
                ("perf", m(vec![c(2400, 90)])),
                ("no cpu", m(vec![s(1, 1)])),
                ("B: spe=off", m(vec![c(1000, 0)])),
                ("B: default period", m(vec![c(1100, 40)])),
            ],
            3,
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[2],
            "| spe=off | 3 | 2.000 s | 20.0 % | 1.000× | 2.100 s | 0.010 s | 0.000 s | 2.110 s | 1.000× |"
        );
        assert_eq!(
            lines[3],
            "| perf | 1 | 2.400 s | 0.0 % | 1.200× | 2.500 s | 0.010 s | 0.090 s | 2.600 s | 1.232× |"
        );
        assert!(lines[4].contains("no CPU times"));
        // A second build is compared with its own spe=off.
        assert!(lines[6].contains("| 1.100× |"), "{}", lines[6]);
        assert!(lines[6].ends_with("| 1.250 s | 1.126× |"), "{}", lines[6]);
    }

    #[test]
    fn rates_per_second_come_from_the_busiest_vcpu() {
        let t = table(&[(
            "perf",
            Outcome::Measured(vec![Sample {
                samples: Some(6000),
                records: Some(3000),
                ..s(1500, 4000)
            }]),
        )]);
        assert!(
            t.lines().nth(2).unwrap().ends_with("| 4 k/s | 2 k/s |"),
            "{t}"
        );
        // The statistics also cover the warm-up run: all of it is divided.
        let t = table(&[(
            "perf",
            Outcome::Measured(vec![Sample {
                samples: Some(6000),
                records: Some(3000),
                sampled: Duration::from_millis(2000),
                ..s(1500, 4000)
            }]),
        )]);
        assert!(
            t.lines().nth(2).unwrap().ends_with("| 3 k/s | 2 k/s |"),
            "{t}"
        );
    }

    #[test]
    fn medians_and_ratios_to_the_first_row() {
        assert_eq!(
            median(vec![3, 1, 2].into_iter().map(Duration::from_secs).collect()),
            Duration::from_secs(2)
        );
        assert_eq!(
            median(
                vec![4, 1, 2, 3]
                    .into_iter()
                    .map(Duration::from_secs)
                    .collect()
            ),
            Duration::from_millis(2500)
        );
        let t = table(&[
            (
                "spe=off",
                Outcome::Measured(vec![s(1000, 4000), s(1200, 5000), s(900, 4500)]),
            ),
            ("spe=on", Outcome::Measured(vec![s(1500, 9000)])),
            ("broken", Outcome::Failed("timeout after 600 s".into())),
        ]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5);
        assert_eq!(
            lines[2],
            "| spe=off | 3 | 1.000 s | 1.00× | 0.900 s | 1.00× | 4.5 s | 1.00× | – | – |"
        );
        assert_eq!(
            lines[3],
            "| spe=on | 1 | 1.500 s | 1.50× | 1.500 s | 1.67× | 9.0 s | 2.00× | – | – |"
        );
        assert!(lines[4].contains("failed: timeout after 600 s"));
    }

    #[test]
    fn each_build_is_compared_with_its_own_spe_off() {
        let m = |v: Vec<Sample>| Outcome::Measured(v);
        let t = ab_table(
            &["A", "B", "C"],
            &[
                [
                    m(vec![s(1000, 1), s(1100, 1)]),
                    m(vec![s(1100, 1), s(1300, 1)]),
                ],
                [m(vec![s(2000, 1)]), m(vec![s(2600, 1)])],
                [m(vec![s(1000, 1)]), Outcome::Failed("timeout".into())],
            ],
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[2],
            "| A | 2 | 1.050 s | 1.200 s | +14.3 points | 1.000 s | 1.100 s | +10.0 points |"
        );
        assert_eq!(
            lines[3],
            "| B | 1 | 2.000 s | 2.600 s | +30.0 points | 2.000 s | 2.600 s | +30.0 points |"
        );
        assert!(lines[4].contains("failed"));
    }

    #[test]
    fn only_the_baseline_runs_without_spe() {
        let c = configs();
        assert_eq!(c[0].name, "spe=off");
        assert!(c[0].spe.is_none());
        assert!(c[1..].iter().all(|c| c.spe.is_some()));
        // Every configuration's scenario script exists.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../guest/scenarios");
        for c in &c {
            assert!(dir.join(format!("{}.sh", c.guest)).is_file(), "{}", c.guest);
        }
    }
}
