//! The paravirtual path: the guest's `virtio_spe` module (guest-driver/)
//! drives the backend's vhost-user device (virtio ID 58) on a CPU without
//! SPE, and perf uses the PMU it registers as it would `arm_spe_pmu`'s.
//! The fault scenarios of this path are in faults.rs (`VIRTIO_OF_CASES`,
//! `VIRTIO_LIVE`).

use crate::scenario::{cpu_list, Expect, Judge, OnMarker, RunOutput, Scenario, SpeRun};

/// The synthetic source's operations per second per vCPU: about a
/// thousand records a second each at the default interval.
pub const RATE: u64 = 1_000_000;

pub fn scenarios() -> Vec<Scenario> {
    let run = |name, expect| {
        Scenario::new(name, name, 180, expect).spe(SpeRun::paravirt("neoverse-n1", RATE))
    };
    vec![
        run("virtio-spe-perf", Expect::pass(check_perf)),
        // The negative control: without the module there is no PMU.
        run(
            "virtio-spe-no-module",
            Expect::RunnerFailure {
                reason: "perf record failed",
                console: "pmu=absent",
            },
        ),
        run("virtio-spe-rmmod", Expect::pass(check_rmmod)),
        run("virtio-spe-restart", Expect::pass(check_restart)).spe(SpeRun {
            on_marker: Some(OnMarker::restart("SPE-VIRTIO-RESTART")),
            ..SpeRun::paravirt("neoverse-n1", RATE)
        }),
    ]
}

/// The module probed, the PMU looks like `arm_spe_pmu`'s, the CPU's own
/// SPE driver found nothing, perf decoded every record the backend wrote,
/// without errors or kernel warnings, and perf report, perf mem and perf
/// c2c found samples in them.
fn check_perf(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.check(j.text("pmu") == Some("present"), || {
        "no arm_spe_0 PMU".into()
    });
    let formats = j.text("pmu_formats").unwrap_or("");
    for f in [
        "ts_enable",
        "pa_enable",
        "load_filter",
        "min_latency",
        "event_filter",
    ] {
        j.check(formats.split(',').any(|x| x == f), || {
            format!("format attribute {f} missing ({formats})")
        });
    }
    // caps/min_interval as the device's PMSIDR_EL1 says.
    if let Some(caps) = j.backend_caps() {
        j.is("pmu_min_interval", &caps.min_interval.to_string());
    }
    j.is("pmu_cpumask", &cpu_list());
    j.require(
        "native_spe_probes",
        |n| n == 0,
        |_| "arm_spe_pmu probed: the guest CPU has SPE".into(),
    );
    j.require(
        "kernel_warnings",
        |n| n == 0,
        |_| "the guest kernel warned".into(),
    );
    // spe-perf.sh's recording, then perf mem's and perf c2c's: together
    // every record the backend wrote.
    j.require(
        "spe_records",
        |n| n > 0,
        |_| "perf decoded no records".into(),
    );
    j.require(
        "spe_bad_packets",
        |n| n == 0,
        |_| "perf's decoder reported errors".into(),
    );
    if let (Some(all), Some(b)) = (j.num("all_records"), j.stat("records")) {
        j.check(all == b, || {
            format!("perf decoded {all} records in all, the backend wrote {b}")
        });
    }
    // perf report, perf mem and perf c2c on the same PMU.
    for key in [
        "report_rc",
        "mem_rc",
        "mem_report_rc",
        "c2c_rc",
        "c2c_report_rc",
    ] {
        j.require(key, |n| n == 0, |n| format!("{key}={n}"));
    }
    for key in ["report_samples", "mem_samples", "c2c_loads"] {
        j.require(key, |n| n > 0, |_| format!("{key}=0"));
    }
    // The handshake is logged, and no query answers it.
    j.check(
        out.backend_log.contains("vhost-user connection accepted"),
        || "the backend served no vhost-user connection".into(),
    );
    j.finish()
}

/// rmmod refused while perf recorded, worked once it was done, and the
/// module loaded and recorded again, without kernel warnings.
fn check_rmmod(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.require(
        "rmmod_busy_rc",
        |n| n != 0,
        |_| "rmmod succeeded while perf was recording".into(),
    );
    j.require(
        "rmmod_idle_rc",
        |n| n == 0,
        |_| "rmmod failed once perf was done".into(),
    );
    j.check(j.text("pmu_after_rmmod") == Some("absent"), || {
        "arm_spe_0 outlived the module".into()
    });
    for key in ["spe_records", "again_records"] {
        j.require(
            key,
            |n| n > 0,
            |_| format!("a recording got no records ({key})"),
        );
    }
    j.require(
        "kernel_warnings",
        |n| n == 0,
        |_| "the guest kernel warned".into(),
    );
    if let Some(n) = j.stat("records") {
        j.check(n > 0, || "the backend wrote no records".into());
    }
    j.finish()
}

/// The backend was restarted mid-record: the guest neither hung nor
/// warned, and the next recording works. Whether the interrupted one
/// was told of its loss depends on where the kill lands (see
/// integration/README.md), so it is reported, not judged.
fn check_restart(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let restarted = std::fs::read_to_string(out.dir.join("restart.log")).unwrap_or_default();
    j.check(restarted.contains("started again"), || {
        format!("the backend was not restarted: {restarted:?}")
    });
    j.require(
        "kernel_warnings",
        |n| n == 0,
        |_| "the guest kernel warned".into(),
    );
    for key in ["perf_rc", "after_rc"] {
        j.require(key, |n| n == 0, |_| format!("a perf record failed ({key})"));
    }
    j.require(
        "after_records",
        |n| n > 0,
        |_| "the recording after the restart got no records".into(),
    );
    j.finish()
}
