//! The paravirtual path: the guest's `virtio_spe` module (guest-driver/)
//! drives the backend's vhost-user device (virtio ID 58) on a CPU without
//! SPE, and perf uses the PMU it registers as it would `arm_spe_pmu`'s.
//! The fault scenarios of this path are in faults.rs (`VIRTIO_OF_CASES`,
//! `VIRTIO_LIVE`).

use crate::scenario::{cpu_list, Expect, Judge, OnMarker, RunOutput, Scenario, SpeRun};
use spe_protocol::profile::CpuProfile;

/// The synthetic source's operations per second per vCPU: about a
/// thousand records a second each at the default interval.
pub const RATE: u64 = 1_000_000;

pub fn scenarios() -> Vec<Scenario> {
    let run = |name, expect| {
        Scenario::new(name, name, 180, expect).spe(SpeRun::paravirt(CpuProfile::NeoverseN1, RATE))
    };
    vec![
        run("virtio-spe-perf", Expect::pass(check_perf)).proves(
            "The paravirtual path (`SpeRun::paravirt`): the core without SPE and the backend as \
             `vhost-user-test-device-pci,virtio-id=58` over its synthetic source. `insmod \
             virtio_spe` binds the device and registers `arm_spe_0` with `arm_spe_pmu`'s format \
             attributes, `caps/min_interval` the device's and `cpumask` 0-1, while `arm_spe_pmu` \
             probed nothing; `perf record -e arm_spe_0/ts_enable=1,pa_enable=1/ -a -- sleep 2` \
             decodes with no decoder error; with the perf mem and perf c2c recordings after it, \
             perf decoded every record the backend wrote, and perf report, perf mem and perf c2c \
             find samples; no kernel warning. Negative control: `virtio-spe-no-module`.",
        ),
        // The negative control: without the module there is no PMU.
        run(
            "virtio-spe-no-module",
            Expect::RunnerFailure {
                reason: "perf record failed",
                console: "pmu=absent",
            },
        )
        .proves(
            "The negative control of the paravirtual path: `virtio-spe-perf`'s steps without the \
             module; the runner must report the failure \"perf record failed\" with `pmu=absent`.",
        ),
        run("virtio-spe-rmmod", Expect::pass(check_rmmod)).proves(
            "`rmmod virtio_spe` while `perf record -a` runs is refused (each event holds the \
             module), succeeds once perf is done (`arm_spe_0` gone), and the module loads and \
             records again; no kernel warning.",
        ),
        run("virtio-spe-restart", Expect::pass(check_restart))
            .spe(SpeRun {
                on_marker: Some(OnMarker::restart("SPE-VIRTIO-RESTART")),
                ..SpeRun::paravirt(CpuProfile::NeoverseN1, RATE)
            })
            .proves(
                "The runner kills the backend and starts it again at `SPE-VIRTIO-RESTART`, while \
                 perf records: no CPU hangs, no kernel warning, both `perf record`s exit 0 and the \
                 next one gets records. It needs the series' \"hw/virtio/vhost-user-base: set the \
                 vhost device up again on reconnect\" and the runner's `reconnect-ms=1000`: QEMU \
                 sets the device up again for the new backend and offers it the requests the old \
                 one left. The interrupted recording's loss is reported, not judged: a kill that \
                 lands before perf enabled its event loses nothing.",
            ),
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
    // Not arm_spe_pmu: the guest CPU has no SPE.
    j.zero(&["native_spe_probes", "kernel_warnings", "spe_bad_packets"]);
    // spe-perf.sh's recording, then perf mem's and perf c2c's: together
    // every record the backend wrote.
    j.positive(&["spe_records"]);
    if let (Some(all), Some(b)) = (j.num("all_records"), j.stat(|s| s.records)) {
        j.check(all == b, || {
            format!("perf decoded {all} records in all, the backend wrote {b}")
        });
    }
    // perf report, perf mem and perf c2c on the same PMU.
    j.zero(&[
        "report_rc",
        "mem_rc",
        "mem_report_rc",
        "c2c_rc",
        "c2c_report_rc",
    ]);
    j.positive(&["report_samples", "mem_samples", "c2c_loads"]);
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
    // rmmod refused while perf recorded, and not after.
    j.positive(&["rmmod_busy_rc", "spe_records", "again_records"]);
    j.zero(&["rmmod_idle_rc", "kernel_warnings"]);
    j.check(j.text("pmu_after_rmmod") == Some("absent"), || {
        "arm_spe_0 outlived the module".into()
    });
    if let Some(n) = j.stat(|s| s.records) {
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
    j.zero(&["kernel_warnings", "perf_rc", "after_rc"]);
    j.positive(&["after_records"]);
    j.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Control;
    use spe_protocol::control::Hex;
    use spe_protocol::control::Stats;

    const PERF: &str = "pmu=present pmu_formats=ts_enable,pa_enable,pct_enable,jitter,\
        branch_filter,load_filter,store_filter,event_filter,min_latency \
        pmu_min_interval=1024 pmu_cpumask=0-1 native_spe_probes=0 kernel_warnings=0 \
        spe_records=1200 spe_bad_packets=0 all_records=3949 report_rc=0 mem_rc=0 \
        mem_report_rc=0 c2c_rc=0 c2c_report_rc=0 report_samples=1200 mem_samples=900 \
        c2c_loads=400";

    /// The backend of 6.1's run: 3949 records, `neoverse-n1`'s PMSIDR_EL1.
    fn backend(records: u64) -> Control {
        let mut c = Control::with_stats(&[Stats {
            records,
            ..Stats::default()
        }]);
        c.vcpu(0).registers.pmsidr_el1 = Hex(0x2641f);
        c
    }

    fn run(key: &str, value: &str, records: u64) -> RunOutput {
        RunOutput {
            control: backend(records),
            backend_log: "[INFO] vhost-user connection accepted\n".into(),
            ..RunOutput::from_line(PERF).with(key, value)
        }
    }

    #[test]
    fn perf_needs_the_pmu_every_record_and_perfs_tools() {
        assert_eq!(check_perf(&run("", "", 3949)), Ok(()));
        assert!(check_perf(&run("", "", 3950))
            .unwrap_err()
            .contains("the backend wrote 3950"));
        for (key, bad) in [
            ("pmu", "absent"),
            ("pmu_formats", "ts_enable"),
            ("pmu_min_interval", "256"),
            ("pmu_cpumask", "0"),
            ("native_spe_probes", "1"),
            ("spe_bad_packets", "2"),
            ("c2c_rc", "1"),
            ("mem_samples", "0"),
        ] {
            assert!(check_perf(&run(key, bad, 3949)).is_err(), "{key}={bad}");
        }
        let no_handshake = RunOutput {
            backend_log: String::new(),
            ..run("", "", 3949)
        };
        assert!(check_perf(&no_handshake).is_err());
    }

    #[test]
    fn rmmod_must_be_refused_while_recording() {
        let good = "rmmod_busy_rc=1 rmmod_idle_rc=0 pmu_after_rmmod=absent \
                    spe_records=900 again_records=800 kernel_warnings=0";
        let run = |key: &str, value: &str| RunOutput {
            control: backend(1700),
            ..RunOutput::from_line(good).with(key, value)
        };
        assert_eq!(check_rmmod(&run("", "")), Ok(()));
        for (key, bad) in [
            ("rmmod_busy_rc", "0"),
            ("rmmod_idle_rc", "1"),
            ("pmu_after_rmmod", "present"),
            ("again_records", "0"),
        ] {
            assert!(check_rmmod(&run(key, bad)).is_err(), "{key}={bad}");
        }
    }
}
