//! The paravirtual path: the guest's `virtio_spe` module (guest-driver/)
//! drives the backend's vhost-user device (virtio ID 58) on a CPU without
//! SPE, and perf uses the PMU it registers as it would `arm_spe_pmu`'s.
//! The fault scenarios of this path are in faults.rs (`VIRTIO_CASES`).

use crate::runner::{RunOutput, SpeRun};
use crate::scenarios::{backend_stat, num, verdict, Expect, Scenario};
use std::time::Duration;

/// The synthetic source's operations per second per vCPU: about a
/// thousand records a second each at the default interval.
pub const RATE: u64 = 1_000_000;

pub fn scenarios() -> Vec<Scenario> {
    let run = |name, guest, expect| Scenario {
        name,
        guest,
        backend: true,
        timeout: Duration::from_secs(180),
        expect,
        kill_backend_when: None,
        spe: Some(SpeRun::paravirt("neoverse-n1", RATE)),
    };
    vec![
        run(
            "virtio-spe-perf",
            "virtio-spe-perf",
            Expect::Pass(check_perf),
        ),
        // The negative control: without the module there is no PMU.
        run(
            "virtio-spe-no-module",
            "virtio-spe-no-module",
            Expect::RunnerFailure {
                reason: "perf record failed",
                console: "pmu=absent",
            },
        ),
        run(
            "virtio-spe-rmmod",
            "virtio-spe-rmmod",
            Expect::Pass(check_rmmod),
        ),
        Scenario {
            spe: Some(SpeRun {
                restart_when: Some("SPE-VIRTIO-RESTART"),
                ..SpeRun::paravirt("neoverse-n1", RATE)
            }),
            ..run(
                "virtio-spe-restart",
                "virtio-spe-restart",
                Expect::Pass(check_restart),
            )
        },
    ]
}

/// The module probed, the PMU looks like `arm_spe_pmu`'s, the CPU's own
/// SPE driver found nothing, perf decoded every record the backend wrote,
/// without errors or kernel warnings, and perf report, perf mem and perf
/// c2c found samples in them.
fn check_perf(out: &RunOutput) -> Result<(), String> {
    let mut errs = Vec::new();
    if out.result("pmu") != Some("present") {
        errs.push("no arm_spe_0 PMU".to_string());
    }
    let formats = out.result("pmu_formats").unwrap_or("");
    for f in [
        "ts_enable",
        "pa_enable",
        "load_filter",
        "min_latency",
        "event_filter",
    ] {
        if !formats.split(',').any(|x| x == f) {
            errs.push(format!("format attribute {f} missing ({formats})"));
        }
    }
    if out.result("pmu_min_interval") != Some("1024") {
        errs.push(format!(
            "caps/min_interval is {:?}, the device's PMSIDR_EL1 says 1024",
            out.result("pmu_min_interval")
        ));
    }
    if out.result("pmu_cpumask") != Some("0-1") {
        errs.push(format!("cpumask {:?}", out.result("pmu_cpumask")));
    }
    if num(out, "native_spe_probes")? != 0 {
        errs.push("arm_spe_pmu probed: the guest CPU has SPE".into());
    }
    if num(out, "kernel_warnings")? != 0 {
        errs.push("the guest kernel warned".into());
    }
    // spe-perf.sh's recording, then perf mem's and perf c2c's: together
    // every record the backend wrote.
    if num(out, "spe_records")? == 0 || num(out, "spe_bad_packets")? != 0 {
        errs.push("perf decoded no records, or with errors".into());
    }
    let all = num(out, "all_records")?;
    match backend_stat(&out.backend_log, "records") {
        Some(b) if b == all => {}
        b => errs.push(format!(
            "perf decoded {all} records in all, the backend wrote {b:?}"
        )),
    }
    // perf report, perf mem and perf c2c on the same PMU.
    for key in [
        "report_rc",
        "mem_rc",
        "mem_report_rc",
        "c2c_rc",
        "c2c_report_rc",
    ] {
        if num(out, key)? != 0 {
            errs.push(format!("{key}={}", num(out, key)?));
        }
    }
    for key in ["report_samples", "mem_samples", "c2c_loads"] {
        if num(out, key)? == 0 {
            errs.push(format!("{key}=0"));
        }
    }
    if !out.backend_log.contains("vhost-user connection accepted") {
        errs.push("the backend served no vhost-user connection".into());
    }
    verdict(errs)
}

/// rmmod refused while perf recorded, worked once it was done, and the
/// module loaded and recorded again, without kernel warnings.
fn check_rmmod(out: &RunOutput) -> Result<(), String> {
    let mut errs = Vec::new();
    if num(out, "rmmod_busy_rc")? == 0 {
        errs.push("rmmod succeeded while perf was recording".into());
    }
    if num(out, "rmmod_idle_rc")? != 0 {
        errs.push("rmmod failed once perf was done".into());
    }
    if out.result("pmu_after_rmmod") != Some("absent") {
        errs.push("arm_spe_0 outlived the module".into());
    }
    if num(out, "spe_records")? == 0 || num(out, "again_records")? == 0 {
        errs.push("a recording got no records".into());
    }
    if num(out, "kernel_warnings")? != 0 {
        errs.push("the guest kernel warned".into());
    }
    if backend_stat(&out.backend_log, "records").unwrap_or(0) == 0 {
        errs.push("the backend wrote no records".into());
    }
    verdict(errs)
}

/// The backend was restarted mid-record: the guest neither hung nor
/// warned, and the next recording works. Whether the interrupted one
/// was told of its loss depends on where the kill lands (see
/// integration/README.md), so it is reported, not judged.
fn check_restart(out: &RunOutput) -> Result<(), String> {
    let mut errs = Vec::new();
    let restarted = std::fs::read_to_string(out.dir.join("restart.log")).unwrap_or_default();
    if !restarted.contains("started again") {
        errs.push(format!("the backend was not restarted: {restarted:?}"));
    }
    if num(out, "kernel_warnings")? != 0 {
        errs.push("the guest kernel warned".into());
    }
    if num(out, "perf_rc")? != 0 || num(out, "after_rc")? != 0 {
        errs.push("a perf record failed".into());
    }
    if num(out, "after_records")? == 0 {
        errs.push("the recording after the restart got no records".into());
    }
    verdict(errs)
}
