//! The guest scenarios and what the host checks after each run.

use crate::kernels::KernelSpec;
use crate::proofs;
use crate::runner::{GuestRun, Rig, RunOutput, SpeRun, Verdict, VCPUS, VIRTIO_ID};
use crate::util::tail;
use anyhow::Result;
use std::time::Duration;

/// The backend log lines that prove the vhost-user handshake happened.
pub const BACKEND_CONNECTED: &str = "vhost-user connection accepted";
pub const BACKEND_GET_CONFIG: &str = "vhost-user GET_CONFIG";
/// The backend log line of the patched QEMU's control-channel handshake.
pub const BACKEND_QEMU_HELLO: &str = "HELLO: 2 vCPU(s)";

pub enum Expect {
    /// The guest must pass and `check` must accept the run.
    Pass(fn(&RunOutput) -> Result<(), String>),
    /// The runner must report a failure whose reason contains `reason`,
    /// with a console tail containing `console` (proves failures surface).
    RunnerFailure {
        reason: &'static str,
        console: &'static str,
    },
    /// A fault scenario: the guest must pass and react as the case says
    /// (see faults.rs).
    Fault(&'static crate::faults::Case),
}

pub struct Scenario {
    pub name: &'static str,
    /// integration/guest/scenarios/<guest>.sh
    pub guest: &'static str,
    pub backend: bool,
    pub timeout: Duration,
    pub expect: Expect,
    /// See [`GuestRun::kill_backend_when`].
    pub kill_backend_when: Option<&'static str>,
    /// See [`GuestRun::spe`].
    pub spe: Option<SpeRun>,
}

pub fn all() -> Vec<Scenario> {
    vec![
        Scenario {
            name: "boot",
            guest: "boot",
            backend: false,
            timeout: Duration::from_secs(120),
            expect: Expect::Pass(|_| Ok(())),
            kill_backend_when: None,
            spe: None,
        },
        Scenario {
            name: "virtio-device",
            guest: "virtio-device",
            backend: true,
            timeout: Duration::from_secs(120),
            expect: Expect::Pass(check_virtio_device),
            kill_backend_when: None,
            spe: None,
        },
        Scenario {
            name: "perf",
            guest: "perf",
            backend: false,
            timeout: Duration::from_secs(120),
            expect: Expect::Pass(check_perf_version),
            kill_backend_when: None,
            spe: None,
        },
        Scenario {
            name: "workload",
            guest: "workload",
            backend: false,
            timeout: Duration::from_secs(180),
            expect: Expect::Pass(check_workload),
            kill_backend_when: None,
            spe: None,
        },
        Scenario {
            name: "panic-is-reported",
            guest: "panic",
            backend: false,
            timeout: Duration::from_secs(120),
            expect: Expect::RunnerFailure {
                reason: "kernel panic",
                console: "Kernel panic - not syncing",
            },
            kill_backend_when: None,
            spe: None,
        },
        Scenario {
            name: "hang-times-out",
            guest: "hang",
            backend: false,
            // Long enough to reach /init on a slow machine, short enough
            // not to dominate the suite.
            timeout: Duration::from_secs(25),
            expect: Expect::RunnerFailure {
                reason: "timeout after",
                console: "SPE-RESULT kernel=",
            },
            kill_backend_when: None,
            spe: None,
        },
        Scenario {
            name: "backend-crash-is-reported",
            guest: "hang",
            backend: true,
            timeout: Duration::from_secs(60),
            expect: Expect::RunnerFailure {
                // QEMU must outlive its back end (qemu-patches/0003).
                reason: "QEMU survived",
                console: "SPE-RESULT kernel=",
            },
            // Once the guest runs /init; the crash must end the run long
            // before the timeout.
            kill_backend_when: Some("SPE-RESULT kernel="),
            spe: None,
        },
        Scenario {
            name: "spe-probe",
            guest: "spe-probe",
            backend: true,
            timeout: Duration::from_secs(120),
            expect: Expect::Pass(check_spe_probe),
            kill_backend_when: None,
            spe: Some(SpeRun::new("neoverse-n1")),
        },
        Scenario {
            name: "spe-probe-vhe",
            guest: "spe-probe",
            backend: true,
            timeout: Duration::from_secs(120),
            expect: Expect::Pass(check_spe_probe),
            kill_backend_when: None,
            // The backend must model EL2 for a kernel running there.
            spe: Some(SpeRun {
                virtualization: true,
                ..SpeRun::new("max")
            }),
        },
        Scenario {
            name: "spe-perf",
            guest: "spe-perf",
            backend: true,
            timeout: Duration::from_secs(240),
            expect: Expect::Pass(check_spe_perf),
            kill_backend_when: None,
            spe: Some(SpeRun {
                synthetic: Some(1_000_000),
                ..SpeRun::new("neoverse-n1")
            }),
        },
        Scenario {
            name: "spe-buffer-full",
            guest: "spe-buffer-full",
            backend: true,
            timeout: Duration::from_secs(240),
            expect: Expect::Pass(check_spe_buffer_full),
            kill_backend_when: None,
            spe: Some(SpeRun {
                synthetic: Some(4_000_000),
                ..SpeRun::new("neoverse-n1")
            }),
        },
        // Issue 6's proofs: QEMU's sampler picks the guest's real
        // operations; where their records land (see proofs.rs).
        proof("spe-profile", proofs::check_spe_profile),
        proof("spe-filter-load", proofs::check_spe_filter_load),
        proof("spe-min-latency", proofs::check_spe_min_latency),
        // The interval proofs count instructions exactly.
        exact_proof("spe-jitter", proofs::check_spe_jitter),
        exact_proof("spe-interval-others", proofs::check_spe_interval_others),
        // The same under -icount: TBs count SPE operations the slow way and
        // timestamps read the virtual clock only where icount allows.
        Scenario {
            name: "spe-interval-others-icount",
            spe: Some(
                SpeRun {
                    icount: Some(crate::runner::ICOUNT_AUTO),
                    ..SpeRun::new("neoverse-n1")
                }
                .exact(),
            ),
            ..proof("spe-interval-others", proofs::check_spe_interval_others)
        },
        exact_proof("spe-interval-faults", proofs::check_spe_interval_faults),
        // Issue 18: the default operation model (micro-operations) samples
        // every instruction of a loop whose length divides the period;
        // counting instructions exactly samples one of them (the negative
        // control: check_spe_alias must reject that run).
        proof("spe-alias", proofs::check_spe_alias),
        Scenario {
            name: "spe-alias-exact",
            ..exact_proof("spe-alias", proofs::check_spe_alias_exact)
        },
        proof("spe-smp2-pinned", proofs::check_spe_smp2_pinned),
        Scenario {
            name: "pmu-snapshot",
            guest: "pmu-snapshot",
            backend: true,
            timeout: Duration::from_secs(300),
            expect: Expect::Pass(check_pmu_snapshot),
            kill_backend_when: None,
            // FEAT_PMUv3_SS: the backend's `max` profile has it. The
            // guest driver's interface, and a capture the host requests.
            spe: Some(SpeRun {
                pmu_ss: true,
                ctl_when: Some((crate::snapshot::HOST_MARKER, &["snapshot"])),
                ..SpeRun::new("max")
            }),
        },
        // PMSCR's three names from a kernel at EL2 with E2H (QEMU's E2H
        // alias table): the backend must model EL2.
        Scenario {
            name: "spe-el2",
            guest: "spe-el2",
            backend: true,
            timeout: Duration::from_secs(120),
            expect: Expect::Pass(check_spe_el2),
            kill_backend_when: None,
            spe: Some(SpeRun {
                virtualization: true,
                ..SpeRun::new("max")
            }),
        },
        // Issue 17: each filtering attribute of the driver, on the
        // profile that has them all (FEAT_SPEv1p4 with EFT and FnE).
        Scenario {
            name: "spe-attributes",
            guest: "spe-attributes",
            backend: true,
            timeout: Duration::from_secs(480),
            expect: Expect::Pass(crate::attributes::check),
            kill_backend_when: None,
            spe: Some(SpeRun::new("max")),
        },
        // Issue 21: SVE operations, on the profile of a PE with SVE.
        Scenario {
            spe: Some(SpeRun::new("max")),
            ..proof("spe-sve", proofs::check_spe_sve)
        },
        // Issue 21: tag-checked accesses, on a machine with MTE.
        Scenario {
            spe: Some(SpeRun {
                mte: true,
                ..SpeRun::new("max")
            }),
            ..proof("spe-mte", proofs::check_spe_mte)
        },
        Scenario {
            name: "spe-snapshot",
            guest: "spe-snapshot",
            backend: true,
            timeout: Duration::from_secs(240),
            expect: Expect::Pass(|out| {
                if out.result("snapshot_workload_started") != Some("yes") {
                    return Err("perf never started dd".into());
                }
                match num(out, "snapshot_samples")? {
                    0 => Err("the snapshot holds no samples of dd".into()),
                    _ => Ok(()),
                }
            }),
            kill_backend_when: None,
            spe: Some(SpeRun::new("neoverse-n1")),
        },
        Scenario {
            name: "perf-test-spe",
            guest: "perf-test-spe",
            backend: true,
            timeout: Duration::from_secs(480),
            expect: Expect::Pass(check_perf_test_spe),
            kill_backend_when: None,
            // `max` has discard (FEAT_SPEv1p2); a fixed icount gives perf
            // the guest time its tests' `sleep 1` assumes.
            spe: Some(SpeRun {
                icount: Some(crate::runner::ICOUNT_FIXED),
                ..SpeRun::new("max")
            }),
        },
        // Issue 19: spe-qemu, installed into a prefix of the build tree,
        // from QEMU's own -M virt -kernel -initrd -append command line.
        Scenario {
            name: "spe-qemu-launcher",
            guest: "spe-launcher",
            backend: true,
            timeout: Duration::from_secs(180),
            expect: Expect::Pass(check_launcher),
            kill_backend_when: None,
            spe: Some(SpeRun {
                launcher: true,
                ..SpeRun::new("neoverse-n1")
            }),
        },
        // Issue 19: the host's view. The backend keeps every record it
        // writes (--record); `vhost-device-spe report` of them, with the
        // kernel's symbols, must find the hottest kernel symbols perf in
        // the guest found in the same records.
        Scenario {
            name: "spe-report",
            guest: "spe-report",
            backend: true,
            timeout: Duration::from_secs(240),
            expect: Expect::Pass(check_report),
            kill_backend_when: None,
            spe: Some(SpeRun {
                record: true,
                ..SpeRun::new("neoverse-n1")
            }),
        },
        // Issue 20: a backend stopped for 4 s, less than QEMU's bound
        // (10 s): the VM pauses, then profiling goes on.
        Scenario {
            name: "spe-backend-stall",
            guest: "spe-stall",
            backend: true,
            timeout: Duration::from_secs(240),
            expect: Expect::Pass(check_stall),
            kill_backend_when: None,
            spe: Some(SpeRun {
                stall_when: Some(("SPE-STALL-NOW", Duration::from_secs(4))),
                ..SpeRun::new("neoverse-n1")
            }),
        },
        // Issue 20: a backend killed while perf records and started again
        // on the same socket: QEMU reconnects, restores the registers and
        // the loss shows as TRUNCATED|PARTIAL AUX data; SPE works on.
        Scenario {
            name: "spe-backend-restart",
            guest: "spe-restart",
            backend: true,
            timeout: Duration::from_secs(240),
            expect: Expect::Pass(check_restart),
            kill_backend_when: None,
            spe: Some(SpeRun {
                restart_when: Some("SPE-RESTART-NOW"),
                ..SpeRun::new("neoverse-n1")
            }),
        },
        // The same with virtualization=on: spe-qemu must give the backend
        // --el2, or the VHE kernel dies before its console.
        Scenario {
            name: "spe-qemu-launcher-vhe",
            guest: "spe-launcher",
            backend: true,
            timeout: Duration::from_secs(180),
            expect: Expect::Pass(check_launcher),
            kill_backend_when: None,
            spe: Some(SpeRun {
                launcher: true,
                virtualization: true,
                ..SpeRun::new("max")
            }),
        },
        // Issue 18: deterministic replay. Two boots of the same run write
        // the same AUX bytes and deliver the fault on the same record.
        replay("spe-replay-a", |_| Ok(())),
        replay("spe-replay-b", proofs::check_spe_replay),
        // Issue 18: a known driver bug on demand. The AUX buffer fills
        // with its consumer stopped and some room left below the tail's
        // page; from the backend's register log, 6.1 goes on (the bug),
        // 6.12 and 7.3 stop the event (the fix): driver_bugs.rs.
        Scenario {
            name: "spe-no-room",
            guest: "spe-no-room",
            backend: true,
            timeout: Duration::from_secs(180),
            expect: Expect::Pass(crate::driver_bugs::check_no_room),
            kill_backend_when: None,
            spe: Some(SpeRun {
                // Every SPE register access in the backend's log.
                log: Some("info,vhost_device_spe::qemu=debug"),
                // Records 64-byte aligned: the buffer fills to its limit.
                backend_args: &["--align", "64"],
                ..SpeRun::new("neoverse-n1")
            }),
        },
    ]
    .into_iter()
    // Issue 18: faults on demand and the driver's reaction.
    .chain(crate::faults::scenarios())
    .chain(crate::paravirt::scenarios())
    .chain(crate::snapshot::scenarios())
    .collect()
}

/// Test modules of integration/guest/modules that only the host suite's
/// kernel gets in CI (they ran on it alone before the newer suites had
/// headers).
const NEEDS_EXTRA_MODULES: &[&str] = &["spe-el2"];

/// What needs a test module or a guest driver (guest-driver/pmu_snapshot:
/// [`crate::snapshot::NEEDS_MODULE`]).
fn needs_extra_modules(s: &Scenario) -> bool {
    NEEDS_EXTRA_MODULES.contains(&s.name) || crate::snapshot::NEEDS_MODULE.contains(&s.name)
}

/// The paravirtual scenarios the newest kernel runs in `cargo xtask test`
/// (the oldest runs them all, the middle one `virtio-spe-perf`): the rest
/// run by hand (`cargo xtask test --kernel 7.3 NAME...`), so CI stays
/// inside its time.
const PARAVIRT_ON_NEWEST: &[&str] = &[
    "virtio-spe-perf",
    "virtio-spe-rmmod",
    "virtio-fault-data-loss",
    "virtio-fault-buffer-full",
    "virtio-spe-restart",
];

/// What the middle kernel of the matrix (6.12) runs in `cargo xtask test`:
/// a sample, so CI stays well inside its time on 2 cores. The oldest kernel
/// runs everything, the newest every SPE scenario.
const ON_MIDDLE_KERNELS: &[&str] = &[
    "boot",
    "perf",
    "spe-probe",
    "spe-probe-vhe",
    "spe-perf",
    "spe-buffer-full",
    "spe-profile",
    "fault-data-loss",
    "fault-stage1-translation",
    "spe-attributes",
    "spe-no-room",
    "virtio-spe-perf",
];

fn is_paravirt(s: &Scenario) -> bool {
    s.spe.as_ref().is_some_and(|spe| spe.paravirt)
}

/// Whether `s` can run on `rig`'s kernel at all: the paravirtual ones and
/// the test modules need modules built against its headers.
pub fn can_run(s: &Scenario, rig: &Rig) -> bool {
    rig.has_extra_modules || !(needs_extra_modules(s) || is_paravirt(s))
}

/// Whether `cargo xtask test` runs `s` on kernel `k`.
pub fn in_matrix(s: &Scenario, k: &KernelSpec) -> bool {
    if !k.private_apt {
        return true;
    }
    if needs_extra_modules(s) {
        return false;
    }
    if k == KernelSpec::newest() {
        if is_paravirt(s) {
            return PARAVIRT_ON_NEWEST.contains(&s.name);
        }
        return s.spe.is_some() || ["boot", "perf"].contains(&s.name);
    }
    ON_MIDDLE_KERNELS.contains(&s.name)
}

/// The guest's perf is the one of its kernel's line (each suite's own).
fn check_perf_version(out: &RunOutput) -> Result<(), String> {
    let kernel = out.result("kernel").unwrap_or("");
    let line: Vec<&str> = kernel.split(['.', '-', '+']).take(2).collect();
    let want = format!("{}.", line.join("."));
    match out.result("perf_version") {
        Some(v) if line.len() == 2 && v.starts_with(&want) => Ok(()),
        v => Err(format!(
            "guest perf version {v:?} on kernel {kernel:?}, want {want}*"
        )),
    }
}

/// A check's result from the failures it collected.
pub fn verdict(errs: Vec<String>) -> Result<(), String> {
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

/// How long perf's test_arm_spe.sh waits before it asks for a snapshot.
const PERF_TEST_SNAPSHOT_WAIT_MS: u64 = 1000;

/// perf's own Arm SPE tests passed: both tests `Ok`, and every part of
/// the trace-data test that this perf's script has (snapshot and
/// system-wide at least) `PASS`.
pub fn check_perf_test_spe(out: &RunOutput) -> Result<(), String> {
    let mut errs = Vec::new();
    for key in ["perf_test_trace", "perf_test_fork"] {
        match out.result(key) {
            Some("Ok") => {}
            // 6.1's fork test compiles its workload and skips without a
            // compiler, which the guest does not have yet.
            Some("Skip") if key == "perf_test_fork" && out.result("guest_cc") == Some("no") => {
                println!("  note: perf test's fork test skipped: no C compiler in the guest");
            }
            v => errs.push(format!("{key}={v:?}, want Ok")),
        }
    }
    let parts: Vec<&str> = out
        .result("perf_test_parts")
        .unwrap_or("")
        .split(',')
        .filter(|p| !p.is_empty())
        .collect();
    for need in ["snapshot", "system_wide"] {
        if !parts.contains(&need) {
            errs.push(format!(
                "the trace-data test has no {need} part ({parts:?})"
            ));
        }
    }
    let startup = num(out, "perf_startup_ms")?;
    for p in parts {
        let key = format!("perf_test_part_{p}");
        match out.result(&key) {
            Some("PASS") => {}
            // 6.12's perf test prints a test's output only when it fails;
            // the script exits non-zero on any failed part.
            Some("none") if out.result("perf_test_trace") == Some("Ok") => {}
            // The snapshot part signals perf `sleep 1` after starting it;
            // when perf record alone takes longer than that to start and
            // stop around `true` (here: under emulation, reading the
            // kernel's symbols), it signals a perf that has not begun.
            // spe-snapshot proves snapshot mode instead.
            Some("FAIL") if p == "snapshot" && startup >= PERF_TEST_SNAPSHOT_WAIT_MS => {
                println!(
                    "  note: perf test's snapshot part failed: perf record takes {startup} ms \
                     to start in this guest, its test waits {PERF_TEST_SNAPSHOT_WAIT_MS} ms"
                );
            }
            v => errs.push(format!(
                "{key}={v:?}, want PASS (perf record starts in {startup} ms)"
            )),
        }
    }
    // The parent test fails with any of its parts: judge it by its parts.
    if out.result("perf_test_trace") != Some("Ok")
        && out.result("perf_test_part_snapshot") == Some("FAIL")
        && startup >= PERF_TEST_SNAPSHOT_WAIT_MS
    {
        errs.retain(|e| !e.starts_with("perf_test_trace="));
    }
    verdict(errs)
}

/// A full-emulation scenario without a synthetic source (the samples are
/// QEMU's), the guest script of its name, checked by `check`.
/// A boot of `spe-replay` that repeats byte for byte: the backend
/// `--deterministic`, QEMU under a fixed `-icount` with `-seed` and its
/// RTC on the virtual clock, a buffer full armed after 300 records.
fn replay(name: &'static str, check: fn(&RunOutput) -> Result<(), String>) -> Scenario {
    Scenario {
        name,
        guest: "spe-replay",
        spe: Some(SpeRun {
            icount: Some(crate::runner::ICOUNT_FIXED),
            qemu_args: &["-seed", "1", "-rtc", "base=2026-01-01,clock=vm"],
            backend_args: &["--deterministic"],
            faults: Some(
                r#"{"seed": 7, "faults": [{"vcpu": "all", "kind": "buffer-full", "trigger": "after-records", "count": 300}]}"#,
            ),
            ..SpeRun::new("neoverse-n1")
        }),
        ..proof(name, check)
    }
}

/// A [`proof`] with operations counted as instructions, exactly.
fn exact_proof(name: &'static str, check: fn(&RunOutput) -> Result<(), String>) -> Scenario {
    let p = proof(name, check);
    Scenario {
        spe: p.spe.map(SpeRun::exact),
        ..p
    }
}

fn proof(name: &'static str, check: fn(&RunOutput) -> Result<(), String>) -> Scenario {
    Scenario {
        name,
        guest: name,
        backend: true,
        timeout: Duration::from_secs(240),
        expect: Expect::Pass(check),
        kill_backend_when: None,
        spe: Some(SpeRun::new("neoverse-n1")),
    }
}

fn hex(out: &RunOutput, key: &str) -> Result<u64, String> {
    out.result(key)
        .and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok())
        .ok_or_else(|| format!("guest result {key}={:?} is not hex", out.result(key)))
}

/// At EL2 with E2H, PMSCR_EL1 is PMSCR_EL2 (the 1 written through it) and
/// PMSCR_EL12 is PMSCR_EL1 (the 2 written through it).
pub fn check_spe_el2(out: &RunOutput) -> Result<(), String> {
    let mut errs = Vec::new();
    for (reg, want) in [("pmscr_el1", 1), ("pmscr_el2", 1), ("pmscr_el12", 2)] {
        let got = hex(out, reg)?;
        if got != want {
            errs.push(format!("{reg} {got:#x}, want {want:#x}"));
        }
    }
    verdict(errs)
}

/// The guest's pmu_snapshot driver: a capture from user space, one from
/// the host, a prohibited one; see [`crate::snapshot::check_pmu_snapshot`].
pub fn check_pmu_snapshot(out: &RunOutput) -> Result<(), String> {
    crate::snapshot::check_pmu_snapshot(out)
}

/// A `key=N` field of the backend's last `stats total:` line.
pub fn backend_stat(log: &str, key: &str) -> Option<u64> {
    let line = log.lines().rev().find(|l| l.contains("stats total:"))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

pub fn num(out: &RunOutput, key: &str) -> Result<u64, String> {
    out.result(key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("guest result {key}={:?} is not a number", out.result(key)))
}

/// What integration/guest/scenarios/workload.sh runs spe-workload for.
pub const WORKLOAD_ITERATIONS: &str = "1000";

/// The issue-6 workload reported what the proofs match records against:
/// a page-aligned array with a physical address, and its loops' PCs.
pub fn check_workload(out: &RunOutput) -> Result<(), String> {
    let hex = |key: &str| -> Result<u64, String> {
        let v = out.result(key).ok_or(format!("no {key} result"))?;
        u64::from_str_radix(v.trim_start_matches("0x"), 16)
            .map_err(|_| format!("{key}={v} is not a hex address"))
    };
    let va = hex("workload_array_va")?;
    let pa0 = hex("workload_array_pa0")?;
    let pa1 = hex("workload_array_pa1")?;
    if va == 0 || va % 4096 != 0 {
        return Err(format!("array VA {va:#x} is not page-aligned"));
    }
    if pa0 == 0 || pa1 == 0 || pa0 % 4096 != 0 || pa1 % 4096 != 0 {
        return Err(format!("array PAs {pa0:#x} {pa1:#x}: not page addresses"));
    }
    let (strided, branchy) = (hex("workload_strided_pc")?, hex("workload_branchy_pc")?);
    if strided == 0 || branchy == 0 || strided == branchy {
        return Err(format!("loop PCs {strided:#x} {branchy:#x}"));
    }
    match out.result("workload_iterations") {
        Some(n) if n == WORKLOAD_ITERATIONS => Ok(()),
        v => Err(format!("{v:?} iterations, want {WORKLOAD_ITERATIONS}")),
    }
}

/// perf decoded every record the backend wrote, without decoder errors.
pub fn check_spe_perf(out: &RunOutput) -> Result<(), String> {
    let guest = num(out, "spe_records")?;
    if num(out, "spe_bad_packets")? != 0 {
        return Err("perf's decoder reported errors".into());
    }
    let backend = backend_stat(&out.backend_log, "records")
        .ok_or("backend log has no `stats total:` line")?;
    if guest == 0 || guest != backend {
        return Err(format!(
            "perf decoded {guest} records, the backend wrote {backend}"
        ));
    }
    Ok(())
}

/// Buffer-full PMBIRQs happened and were handled, and perf kept
/// collecting.
pub fn check_spe_buffer_full(out: &RunOutput) -> Result<(), String> {
    let guest = num(out, "spe_records")?;
    if num(out, "spe_bad_packets")? != 0 {
        return Err("perf's decoder reported errors".into());
    }
    let before = num(out, "spe_irqs_before")?;
    let after = num(out, "spe_irqs_after")?;
    let events = backend_stat(&out.backend_log, "management_events")
        .ok_or("backend log has no `stats total:` line")?;
    let backend = backend_stat(&out.backend_log, "records").unwrap_or(0);
    if after < before + 2 || events < 2 {
        return Err(format!(
            "PMBIRQ count {before} -> {after}, backend management events {events}"
        ));
    }
    if guest == 0 || guest > backend {
        return Err(format!(
            "perf decoded {guest} records, the backend wrote {backend}"
        ));
    }
    Ok(())
}

/// The unmodified driver probed on both vCPUs, through the backend.
pub fn check_spe_probe(out: &RunOutput) -> Result<(), String> {
    let mut errs = Vec::new();
    if out.result("spe_probed_cpus") != Some("0-1") {
        errs.push(format!(
            "arm_spe_pmu probed for CPUs {:?}, want 0-1",
            out.result("spe_probed_cpus")
        ));
    }
    if out.result("spe_pmu") != Some("arm_spe_0") {
        errs.push(format!("event source {:?}", out.result("spe_pmu")));
    }
    if !out.backend_log.contains(BACKEND_QEMU_HELLO) {
        errs.push(format!("backend log lacks {BACKEND_QEMU_HELLO:?}"));
    }
    verdict(errs)
}

/// Through spe-qemu: the driver probed on both vCPUs, the backend it
/// started served the channel, and perf decoded the records.
fn check_launcher(out: &RunOutput) -> Result<(), String> {
    let mut errs: Vec<String> = check_spe_probe(out).err().into_iter().collect();
    match out
        .result("launcher_records")
        .and_then(|n| n.parse::<u64>().ok())
    {
        Some(n) if n > 0 => {}
        n => errs.push(format!("{n:?} records")),
    }
    if out.result("launcher_bad") != Some("0") {
        errs.push(format!("decoder errors: {:?}", out.result("launcher_bad")));
    }
    verdict(errs)
}

/// The host's report of the recorded records names the same three
/// hottest kernel symbols, with the same sample counts, as perf in the
/// guest (`perf_topN=SYMBOL perf_topN_samples=N`).
fn check_report(out: &RunOutput) -> Result<(), String> {
    let path = out.dir.join("report.json");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| {
        let err = std::fs::read_to_string(out.dir.join("report.err")).unwrap_or_default();
        format!("report.json: {e}; report said: {}", err.trim())
    })?;
    let report = v["symbols"].as_array().cloned().unwrap_or_default();
    check_top3(out, &report, v["bad_records"].as_u64())
}

/// [`check_report`] on the report's `symbols`.
fn check_top3(
    out: &RunOutput,
    report: &[serde_json::Value],
    bad: Option<u64>,
) -> Result<(), String> {
    let mut errs = Vec::new();
    if bad != Some(0) {
        errs.push(format!("{bad:?} records of the report did not decode"));
    }
    for i in 1..=3 {
        let Some(sym) = out.result(&format!("perf_top{i}")) else {
            errs.push(format!("no perf_top{i} from the guest"));
            continue;
        };
        let n: Option<u64> = out
            .result(&format!("perf_top{i}_samples"))
            .and_then(|n| n.parse().ok());
        let found = report
            .iter()
            .find(|s| s["symbol"] == sym)
            .and_then(|s| s["samples"].as_u64());
        if found != n {
            errs.push(format!(
                "{sym}: perf has {n:?} samples, the report {found:?}"
            ));
        }
        let nth = report.get(i - 1).and_then(|s| s["samples"].as_u64());
        if nth != n {
            errs.push(format!(
                "perf's #{i} has {n:?} samples, the report's #{i} {nth:?}"
            ));
        }
    }
    verdict(errs)
}

#[cfg(test)]
mod report_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_top_three_must_match_perfs() {
        let out = RunOutput {
            verdict: Verdict::Pass,
            results: [
                ("perf_top1", "a"),
                ("perf_top1_samples", "90"),
                ("perf_top2", "b"),
                ("perf_top2_samples", "5"),
                ("perf_top3", "c"),
                ("perf_top3_samples", "5"),
            ]
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .to_vec(),
            console: String::new(),
            backend_log: String::new(),
            elapsed: Duration::ZERO,
            dir: Default::default(),
        };
        let sym = |s: &str, n: u64| json!({"symbol": s, "el": 1, "samples": n});
        let good = [sym("a", 90), sym("c", 5), sym("b", 5), sym("d", 1)];
        assert_eq!(
            check_top3(&out, &good, Some(0)),
            Ok(()),
            "a tie in either order"
        );
        for bad in [
            vec![sym("a", 90), sym("b", 5), sym("d", 5)],
            vec![sym("a", 89), sym("b", 5), sym("c", 5)],
            vec![sym("b", 90), sym("a", 5), sym("c", 5)],
        ] {
            assert!(check_top3(&out, &bad, Some(0)).is_err(), "{bad:?}");
        }
        assert!(
            check_top3(&out, &good, Some(1)).is_err(),
            "undecodable records"
        );
    }
}

/// The backend was stopped while perf recorded, QEMU kept it (no "SPE is
/// disabled"), and both recordings have records that decode.
fn check_stall(out: &RunOutput) -> Result<(), String> {
    let mut errs = Vec::new();
    let stall = std::fs::read_to_string(out.dir.join("stall.log")).unwrap_or_default();
    if !stall.starts_with("backend stopped for") {
        errs.push("the backend was never stopped".to_string());
    }
    let qemu = std::fs::read_to_string(out.dir.join("qemu.stderr.log")).unwrap_or_default();
    if qemu.contains("SPE is off") {
        errs.push(format!("QEMU dropped the backend: {}", qemu.trim()));
    }
    recorded_on(out, &["stall_records", "after_records"], &mut errs);
    verdict(errs)
}

/// Each of `keys` a positive count, and no decoder errors (`bad`): the
/// recordings around a backend incident decode.
fn recorded_on(out: &RunOutput, keys: &[&str], errs: &mut Vec<String>) {
    for key in keys {
        match out.result(key).and_then(|n| n.parse::<u64>().ok()) {
            Some(n) if n > 0 => {}
            n => errs.push(format!("{key} {n:?}")),
        }
    }
    if out.result("bad") != Some("0") {
        errs.push(format!("decoder errors: {:?}", out.result("bad")));
    }
}

/// The backend was killed and started again; QEMU said so once and
/// reconnected; the recording it happened in has AUX data flagged
/// TRUNCATED and PARTIAL (the data loss reported, not silence), and the
/// next recording decodes with records.
fn check_restart(out: &RunOutput) -> Result<(), String> {
    let mut errs = Vec::new();
    let restart = std::fs::read_to_string(out.dir.join("restart.log")).unwrap_or_default();
    if !restart.starts_with("backend killed and started again") {
        errs.push(format!("the backend was not restarted: {restart:?}"));
    }
    let qemu = std::fs::read_to_string(out.dir.join("qemu.stderr.log")).unwrap_or_default();
    for (text, want) in [("SPE is off until", 1), ("reconnected", 1)] {
        let n = qemu.matches(text).count();
        if n != want {
            errs.push(format!("QEMU said {text:?} {n} times, not {want}"));
        }
    }
    if !out.backend_log.contains("registers restored") {
        errs.push("QEMU restored no vCPU's registers in the new backend".into());
    }
    recorded_on(
        out,
        &["aux_truncated", "aux_partial", "after_records"],
        &mut errs,
    );
    verdict(errs)
}

/// Guest saw the device with our IDs, backend saw the handshake.
pub fn check_virtio_device(out: &RunOutput) -> Result<(), String> {
    let want_pci = format!("0x{:04x}", 0x1040 + VIRTIO_ID);
    let want_virtio = format!("0x{VIRTIO_ID:04x}");
    let mut errs = Vec::new();
    if out.result("pci_device_id") != Some(want_pci.as_str()) {
        errs.push(format!(
            "guest PCI device id {:?}, want {want_pci}",
            out.result("pci_device_id")
        ));
    }
    if out.result("virtio_device_id") != Some(want_virtio.as_str()) {
        errs.push(format!(
            "guest virtio device id {:?}, want {want_virtio}",
            out.result("virtio_device_id")
        ));
    }
    // Config offset 0 is num_vcpus (spe_protocol::virtio::Config): the
    // guest read what the backend serves, through QEMU.
    let want_dword0 = format!("0x{VCPUS:08x}");
    if out.result("config_dword0") != Some(want_dword0.as_str()) {
        errs.push(format!(
            "guest config dword 0 (num_vcpus) {:?}, want {want_dword0}",
            out.result("config_dword0")
        ));
    }
    for line in [BACKEND_CONNECTED, BACKEND_GET_CONFIG] {
        if !out.backend_log.contains(line) {
            errs.push(format!("backend log lacks {line:?}"));
        }
    }
    verdict(errs)
}

/// Judges a run against the scenario's expectation.
pub fn evaluate(s: &Scenario, out: &RunOutput) -> Result<(), String> {
    match (&s.expect, &out.verdict) {
        (Expect::Pass(check), Verdict::Pass) => check(out),
        (Expect::Fault(case), Verdict::Pass) => crate::faults::judge(case, out),
        (Expect::Pass(_) | Expect::Fault(_), Verdict::Fail(r)) => Err(r.clone()),
        (Expect::RunnerFailure { .. }, Verdict::Pass) => {
            Err("the runner reported PASS for a run that must fail".into())
        }
        (Expect::RunnerFailure { reason, console }, Verdict::Fail(r)) => {
            if !r.contains(reason) {
                Err(format!(
                    "runner failed for the wrong reason: {r} (want {reason:?})"
                ))
            } else if !tail(&out.console, CONSOLE_TAIL).contains(console) {
                Err(format!("console tail lacks {console:?}"))
            } else {
                Ok(())
            }
        }
    }
}

/// Lines of console shown for a failed run.
pub const CONSOLE_TAIL: usize = 30;

pub struct Summary {
    pub passed: usize,
    pub failed: usize,
}

/// Runs `scenarios` in order and prints each result; failures show the
/// console and backend log tails.
pub fn run_all(rig: &Rig, scenarios: &[&Scenario]) -> Result<Summary> {
    let mut sum = Summary {
        passed: 0,
        failed: 0,
    };
    for s in scenarios {
        let out = rig.run(&GuestRun {
            scenario: s.guest.to_string(),
            run_name: s.name.to_string(),
            backend: s.backend,
            timeout: s.timeout,
            kill_backend_when: s.kill_backend_when,
            spe: s.spe.clone(),
        })?;
        let secs = out.elapsed.as_secs_f64();
        let booted = out.result("kernel").unwrap_or("");
        let judged = if !booted.is_empty() && !rig.spec.matches(booted) {
            Err(format!(
                "the guest booted kernel {booted}, not {}",
                rig.spec.name
            ))
        } else {
            evaluate(s, &out)
        };
        match judged {
            Ok(()) => {
                sum.passed += 1;
                match &out.verdict {
                    Verdict::Pass => println!("PASS {} ({secs:.1} s)", s.name),
                    Verdict::Fail(r) => {
                        println!("PASS {} ({secs:.1} s): runner reported {r:?} as expected; console tail:", s.name);
                        print_indented(&tail(&out.console, 5));
                    }
                }
            }
            Err(why) => {
                sum.failed += 1;
                println!("FAIL {} ({secs:.1} s): {why}", s.name);
                println!(
                    "  --- console tail ({}) ---",
                    out.dir.join("console.log").display()
                );
                print_indented(&tail(&out.console, CONSOLE_TAIL));
                if s.backend {
                    println!(
                        "  --- backend log tail ({}) ---",
                        out.dir.join("backend.log").display()
                    );
                    print_indented(&tail(&out.backend_log, 20));
                }
            }
        }
    }
    Ok(sum)
}

fn print_indented(text: &str) {
    for l in text.lines() {
        println!("  | {}", l.trim_end_matches('\r'));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn out(verdict: Verdict, results: &[(&str, &str)], console: &str, backend: &str) -> RunOutput {
        RunOutput {
            verdict,
            results: results
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            console: console.into(),
            backend_log: backend.into(),
            elapsed: Duration::ZERO,
            dir: PathBuf::new(),
        }
    }

    #[test]
    fn perf_test_spe_needs_every_part() {
        let good = [
            ("perf_startup_ms", "300"),
            ("perf_test_trace", "Ok"),
            ("perf_test_fork", "Ok"),
            ("perf_test_part_snapshot", "PASS"),
            ("perf_test_part_system_wide", "PASS"),
            ("perf_test_part_discard", "PASS"),
            ("perf_test_parts", "snapshot,system_wide,discard"),
        ];
        let judge = |change: &[(&str, &str)]| {
            let mut r: Vec<(&str, &str)> = good.to_vec();
            for (k, v) in change {
                r.retain(|(rk, _)| rk != k);
                r.push((k, v));
            }
            check_perf_test_spe(&out(Verdict::Pass, &r, "", ""))
        };
        assert_eq!(judge(&[]), Ok(()));
        assert!(judge(&[("perf_test_fork", "FAILED!")]).is_err());
        assert!(judge(&[("perf_test_fork", "Skip")]).is_err());
        assert_eq!(
            judge(&[("perf_test_fork", "Skip"), ("guest_cc", "no")]),
            Ok(())
        );
        assert!(judge(&[("perf_test_part_discard", "SKIPPED")]).is_err());
        assert!(judge(&[("perf_test_parts", "discard")]).is_err());
        // A part without output passes only inside a passing test.
        assert_eq!(judge(&[("perf_test_part_snapshot", "none")]), Ok(()));
        assert!(judge(&[
            ("perf_test_part_snapshot", "none"),
            ("perf_test_trace", "FAILED!")
        ])
        .is_err());
        // A failed snapshot part passes only with perf's start-up measured
        // longer than the test's wait.
        let snap_failed = [
            ("perf_test_trace", "FAILED!"),
            ("perf_test_part_snapshot", "FAIL"),
        ];
        assert!(judge(&snap_failed).is_err());
        let slow = [snap_failed.as_slice(), &[("perf_startup_ms", "1600")]].concat();
        assert_eq!(judge(&slow), Ok(()));
        let slow_and_broken = [slow.as_slice(), &[("perf_test_part_system_wide", "FAIL")]].concat();
        assert!(judge(&slow_and_broken).is_err());
    }

    #[test]
    fn virtio_device_needs_ids_and_handshake() {
        let s = &all()[1];
        let good = out(
            Verdict::Pass,
            &[
                ("pci_device_id", "0x107a"),
                ("virtio_device_id", "0x003a"),
                ("config_dword0", "0x00000002"),
            ],
            "",
            "[INFO] vhost-user connection accepted\n[INFO] vhost-user GET_CONFIG size=64\n",
        );
        assert_eq!(evaluate(s, &good), Ok(()));
        let no_backend = out(
            Verdict::Pass,
            &[("pci_device_id", "0x107a"), ("virtio_device_id", "0x003a")],
            "",
            "",
        );
        let e = evaluate(s, &no_backend).unwrap_err();
        assert!(
            e.contains("connection accepted") && e.contains("GET_CONFIG"),
            "{e}"
        );
        let wrong = out(Verdict::Pass, &[("pci_device_id", "0x1079")], "", "");
        assert!(evaluate(s, &wrong).unwrap_err().contains("want 0x107a"));
    }

    #[test]
    fn spe_perf_needs_matching_record_counts() {
        let log = "[INFO] stats total: samples=9 filtered=0 records=7 bytes=448 discarded=0 management_events=3\n";
        assert_eq!(backend_stat(log, "records"), Some(7));
        assert_eq!(backend_stat(log, "management_events"), Some(3));
        assert_eq!(backend_stat("", "records"), None);
        let good = out(
            Verdict::Pass,
            &[("spe_records", "7"), ("spe_bad_packets", "0")],
            "",
            log,
        );
        assert_eq!(check_spe_perf(&good), Ok(()));
        let short = out(
            Verdict::Pass,
            &[("spe_records", "6"), ("spe_bad_packets", "0")],
            "",
            log,
        );
        assert!(check_spe_perf(&short).unwrap_err().contains("wrote 7"));
    }

    #[test]
    fn el12_reaches_the_el1_register() {
        let r = |el12: &'static str| {
            [
                ("vhe", "1"),
                ("pmscr_el1", "0x1"),
                ("pmscr_el2", "0x1"),
                ("pmscr_el12", el12),
            ]
        };
        assert_eq!(
            check_spe_el2(&out(Verdict::Pass, &r("0x2"), "", "")),
            Ok(())
        );
        // PMSCR_EL12 sent on as PMSCR_EL1, which a host EL2 redirects.
        let bad = [
            ("pmscr_el1", "0x2"),
            ("pmscr_el2", "0x2"),
            ("pmscr_el12", "0x2"),
        ];
        let e = check_spe_el2(&out(Verdict::Pass, &bad, "", "")).unwrap_err();
        assert!(e.contains("pmscr_el2 0x2"), "{e}");
        assert!(check_spe_el2(&out(Verdict::Pass, &r("0x0"), "", "")).is_err());
        assert!(check_spe_el2(&out(Verdict::Pass, &[], "", "")).is_err());
    }

    #[test]
    fn workload_needs_addresses_and_iterations() {
        let s = all().into_iter().find(|s| s.name == "workload").unwrap();
        let mut results = vec![
            ("workload_array_va", "0x494000"),
            ("workload_array_pa0", "0x4a2c000"),
            ("workload_array_pa1", "0x4a2d000"),
            ("workload_strided_pc", "0x4006d4"),
            ("workload_branchy_pc", "0x400708"),
            ("workload_iterations", "1000"),
        ];
        assert_eq!(evaluate(&s, &out(Verdict::Pass, &results, "", "")), Ok(()));
        results[1].1 = "0x0";
        let e = evaluate(&s, &out(Verdict::Pass, &results, "", "")).unwrap_err();
        assert!(e.contains("not page addresses"), "{e}");
        results[1].1 = "0x4a2c000";
        results[5].1 = "12";
        let e = evaluate(&s, &out(Verdict::Pass, &results, "", "")).unwrap_err();
        assert!(e.contains("want 1000"), "{e}");
        results.remove(0);
        let e = evaluate(&s, &out(Verdict::Pass, &results, "", "")).unwrap_err();
        assert!(e.contains("no workload_array_va"), "{e}");
    }

    #[test]
    fn expected_failures_need_reason_and_console() {
        let s = all()
            .into_iter()
            .find(|s| s.name == "panic-is-reported")
            .unwrap();
        let s = &s;
        let ok = out(
            Verdict::Fail("kernel panic: Kernel panic - not syncing: sysrq".into()),
            &[],
            "x\nKernel panic - not syncing: sysrq\n",
            "",
        );
        assert_eq!(evaluate(s, &ok), Ok(()));
        assert!(evaluate(s, &out(Verdict::Pass, &[], "", "")).is_err());
        let wrong = out(
            Verdict::Fail("timeout after 5 s".into()),
            &[],
            "Kernel panic - not syncing",
            "",
        );
        assert!(evaluate(s, &wrong).is_err());
    }
}
