//! The checks of the scenarios `list` defines itself: the guest machine,
//! the full-emulation basics, the launcher, the host's report and the
//! backend incidents. Each reads its run through a [`Judge`].

use crate::scenario::{cpu_list, Judge, RunOutput, VCPUS, VIRTIO_ID};
use spe_protocol::profile::CpuProfile;

/// The backend log lines that prove the vhost-user handshake happened.
pub const BACKEND_CONNECTED: &str = "vhost-user connection accepted";
pub const BACKEND_GET_CONFIG: &str = "vhost-user GET_CONFIG";

/// The backend log line of the patched QEMU's control-channel handshake,
/// for every vCPU.
pub fn backend_qemu_hello() -> String {
    format!("HELLO: {VCPUS} vCPU(s)")
}

/// The kernel's first dynamic PMU type (`PERF_TYPE_MAX`): a device PMU's
/// `type` is at least this.
const PERF_TYPE_MAX: u64 = 6;

/// The guest booted on every vCPU, with its PCI bus, and its unmodified
/// SPE driver shows the PMU the backend's CPU profile describes: a device
/// PMU on every vCPU whose `caps/` are what Linux makes of the
/// PMSIDR_EL1 the backend advertised, for as many vCPUs as the guest has.
pub fn check_boot(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.is("cpus", &VCPUS.to_string());
    j.positive(&["pci_devices"]);
    j.is("spe_pmu", "arm_spe_0");
    j.require(
        "spe_pmu_type",
        |t| t >= PERF_TYPE_MAX,
        |t| format!("the SPE PMU's type {t} is not a device PMU's"),
    );
    j.is("spe_pmu_cpumask", &cpu_list());
    if let Some(caps) = j.backend_caps() {
        j.is("spe_caps_min_interval", &caps.min_interval.to_string());
        j.is("spe_caps_count_size", &caps.count_size.to_string());
        j.is("spe_caps_arch_inst", &caps.arch_inst.to_string());
    }
    match out.control.spus().map(<[_]>::len) {
        Ok(n) => j.check(n == VCPUS as usize, || {
            format!("the backend serves {n} vCPU(s), the guest has {VCPUS}")
        }),
        Err(e) => j.fail(format!("backend: {e}")),
    }
    j.finish()
}

/// Guest saw the device with our IDs, backend saw the handshake.
pub fn check_virtio_device(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.is("pci_device_id", &format!("0x{:04x}", 0x1040 + VIRTIO_ID));
    j.is("virtio_device_id", &format!("0x{VIRTIO_ID:04x}"));
    // Config offset 0 is num_vcpus (spe_protocol::virtio::Config): the
    // guest read what the backend serves, through QEMU.
    j.is("config_dword0", &format!("0x{VCPUS:08x}"));
    // The handshake only shows in the log: a plain vhost-user device has
    // no control socket to ask.
    for line in [BACKEND_CONNECTED, BACKEND_GET_CONFIG] {
        j.check(out.backend_log.contains(line), || {
            format!("backend log lacks {line:?}")
        });
    }
    j.finish()
}

/// The guest's perf is the one of its kernel's line (each suite's own).
pub fn check_perf_version(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let kernel = j.text("kernel").unwrap_or("");
    let line: Vec<&str> = kernel.split(['.', '-', '+']).take(2).collect();
    let want = format!("{}.", line.join("."));
    let v = j.text("perf_version");
    j.check(
        line.len() == 2 && v.is_some_and(|v| v.starts_with(&want)),
        || format!("guest perf version {v:?} on kernel {kernel:?}, want {want}*"),
    );
    j.finish()
}

/// What integration/guest/scenarios/workload.sh runs spe-workload for.
pub const WORKLOAD_ITERATIONS: &str = "1000";

/// The guest workload reported what the proofs match records against: a
/// page-aligned array with a physical address, and its loops' PCs.
pub fn check_workload(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    if let Some(va) = j.hex("workload_array_va") {
        j.check(va != 0 && va % 4096 == 0, || {
            format!("array VA {va:#x} is not page-aligned")
        });
    }
    if let (Some(pa0), Some(pa1)) = (j.hex("workload_array_pa0"), j.hex("workload_array_pa1")) {
        let page = |pa: u64| pa != 0 && pa & 0xfff == 0;
        j.check(page(pa0) && page(pa1), || {
            format!("array PAs {pa0:#x} {pa1:#x}: not page addresses")
        });
    }
    let pcs = (j.hex("workload_strided_pc"), j.hex("workload_branchy_pc"));
    if let (Some(strided), Some(branchy)) = pcs {
        j.check(strided != 0 && branchy != 0 && strided != branchy, || {
            format!("loop PCs {strided:#x} {branchy:#x}")
        });
    }
    let n = j.text("workload_iterations");
    j.check(n == Some(WORKLOAD_ITERATIONS), || {
        format!("{n:?} iterations, want {WORKLOAD_ITERATIONS}")
    });
    j.finish()
}

/// The unmodified driver probed on every vCPU, through the backend.
/// The driver probed, on the core `profile` names (the guest's MIDR_EL1).
pub fn check_spe_probe(out: &RunOutput, profile: CpuProfile) -> Result<(), String> {
    let j = Judge::new(out);
    probed(&j);
    let midr = out
        .result("cpu_midr")
        .and_then(|m| u64::from_str_radix(m.trim_start_matches("0x"), 16).ok());
    j.check(midr.is_some_and(|m| profile.matches_midr(m as u32)), || {
        format!("the guest's MIDR_EL1 {midr:x?} is not a {profile}'s")
    });
    j.finish()
}

/// [`check_spe_probe`]'s part.
fn probed(j: &Judge) {
    j.is("spe_probed_cpus", &cpu_list());
    j.is("spe_pmu", "arm_spe_0");
    // From the log: spe-qemu starts a backend of its own, without a
    // control socket the runner could ask.
    let hello = backend_qemu_hello();
    j.check(j.out().backend_log.contains(&hello), || {
        format!("backend log lacks {hello:?}")
    });
}

/// Through spe-qemu: the driver probed on every vCPU, the backend it
/// started served the channel, and perf decoded the records.
pub fn check_launcher(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    probed(&j);
    j.positive(&["launcher_records"]);
    j.zero(&["launcher_bad"]);
    j.finish()
}

/// At EL2 with E2H, PMSCR_EL1 is PMSCR_EL2 (the 1 written through it) and
/// PMSCR_EL12 is PMSCR_EL1 (the 2 written through it).
pub fn check_spe_el2(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    for (reg, want) in [("pmscr_el1", 1), ("pmscr_el2", 1), ("pmscr_el12", 2)] {
        if let Some(got) = j.hex(reg) {
            j.check(got == want, || format!("{reg} {got:#x}, want {want:#x}"));
        }
    }
    j.finish()
}

/// The records perf decoded in the guest, without decoder errors, and
/// those the backend wrote: (guest, backend).
fn decoded(j: &Judge) -> Option<(u64, u64)> {
    j.zero(&["spe_bad_packets"]);
    Some((j.num("spe_records")?, j.stat(|s| s.records)?))
}

/// perf decoded every record the backend wrote, without decoder errors.
pub fn check_spe_perf(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    if let Some((guest, backend)) = decoded(&j) {
        j.check(guest > 0 && guest == backend, || {
            format!("perf decoded {guest} records, the backend wrote {backend}")
        });
    }
    j.finish()
}

/// The vCPUs of `spe-smp8`.
pub const SMP8_VCPUS: u32 = 8;

/// Every one of eight vCPUs sampled at once, and perf decoded exactly the
/// records the backend wrote; a difference is shown with what perf and
/// the backend reported lost.
pub fn check_spe_smp8(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.check(j.num("cpus") == Some(SMP8_VCPUS.into()), || {
        format!("the guest has {:?} CPUs, want {SMP8_VCPUS}", j.num("cpus"))
    });
    for c in 0..SMP8_VCPUS {
        j.positive(&[&format!("cpu{c}_records")]);
    }
    if let Some((guest, backend)) = decoded(&j) {
        j.check(guest > 0 && guest == backend, || {
            format!(
                "perf decoded {guest} records, the backend wrote {backend}: perf flagged \
                 {:?} AUX records (truncated, partial or collided) and {:?} lost events, \
                 the backend discarded {:?}",
                j.num("aux_flagged"),
                j.num("lost_events"),
                j.stat(|s| s.discarded)
            )
        });
    }
    j.finish()
}

/// Buffer-full PMBIRQs happened and were handled, and perf kept
/// collecting.
pub fn check_spe_buffer_full(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let irqs = (j.num("spe_irqs_before"), j.num("spe_irqs_after"));
    if let ((Some(before), Some(after)), Some(events)) = (irqs, j.stat(|s| s.management_events)) {
        j.check(after >= before + 2 && events >= 2, || {
            format!("PMBIRQ count {before} -> {after}, backend management events {events}")
        });
    }
    if let Some((guest, backend)) = decoded(&j) {
        j.check(guest > 0 && guest <= backend, || {
            format!("perf decoded {guest} records, the backend wrote {backend}")
        });
    }
    j.finish()
}

/// perf's snapshot mode: a snapshot taken while `dd` ran holds its samples.
pub fn check_spe_aux_snapshot(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.check(j.text("snapshot_workload_started") == Some("yes"), || {
        "perf never started dd".into()
    });
    j.positive(&["snapshot_samples"]);
    j.finish()
}

/// The host's report of the recorded records names the same three
/// hottest kernel symbols, with the same sample counts, as perf in the
/// guest (`perf_topN=SYMBOL perf_topN_samples=N`).
pub fn check_report(out: &RunOutput) -> Result<(), String> {
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
    let j = Judge::new(out);
    j.check(bad == Some(0), || {
        format!("{bad:?} records of the report did not decode")
    });
    for i in 1..=3 {
        let Some(sym) = j.text(&format!("perf_top{i}")) else {
            j.fail(format!("no perf_top{i} from the guest"));
            continue;
        };
        let n = j.num(&format!("perf_top{i}_samples"));
        let found = report
            .iter()
            .find(|s| s["symbol"] == sym)
            .and_then(|s| s["samples"].as_u64());
        j.check(found == n, || {
            format!("{sym}: perf has {n:?} samples, the report {found:?}")
        });
        let nth = report.get(i - 1).and_then(|s| s["samples"].as_u64());
        j.check(nth == n, || {
            format!("perf's #{i} has {n:?} samples, the report's #{i} {nth:?}")
        });
    }
    j.finish()
}

/// The backend was stopped while perf recorded, QEMU kept it (no "SPE is
/// off"), and both recordings have records that decode.
pub fn check_stall(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let stall = std::fs::read_to_string(out.dir.join("stall.log")).unwrap_or_default();
    j.check(stall.starts_with("backend stopped for"), || {
        "the backend was never stopped".into()
    });
    let qemu = std::fs::read_to_string(out.dir.join("qemu.stderr.log")).unwrap_or_default();
    j.check(!qemu.contains("SPE is off"), || {
        format!("QEMU dropped the backend: {}", qemu.trim())
    });
    recorded_on(&j, &["stall_records", "after_records"]);
    j.finish()
}

/// Every stop of the loop was taken (the runner ends the run at the
/// first one that is not), and the recording across them decodes.
pub fn check_stop_cont(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let log = std::fs::read_to_string(out.dir.join("stop-cont.log")).unwrap_or_default();
    let want = format!("stops taken: {n} of {n}\n", n = super::list::STOP_CONTS);
    j.check(log.starts_with(&want), || {
        format!("not every stop was taken: {:?}", log.trim())
    });
    recorded_on(&j, &["exit_records"]);
    j.finish()
}

/// Every membarrier() call's IPIs were taken within the guest's bound
/// (`ipi_slow` 0 of `ipi_calls`), and the recording around them decodes.
pub fn check_ipis(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.positive(&["ipi_calls", "ipi_targets"]);
    j.zero(&["ipi_slow"]);
    recorded_on(&j, &["ipi_records"]);
    j.finish()
}

/// Each of `keys` a positive count, and no decoder errors (`bad`): the
/// recordings around a backend incident decode.
fn recorded_on(j: &Judge, keys: &[&str]) {
    j.positive(keys);
    j.zero(&["bad"]);
}

/// The backend was killed and started again; QEMU said so once and
/// reconnected; the recording it happened in has AUX data flagged
/// TRUNCATED and PARTIAL (the data loss reported, not silence), and the
/// next recording decodes with records.
pub fn check_restart(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let restart = std::fs::read_to_string(out.dir.join("restart.log")).unwrap_or_default();
    j.check(
        restart.starts_with("backend killed and started again"),
        || format!("the backend was not restarted: {restart:?}"),
    );
    let qemu = std::fs::read_to_string(out.dir.join("qemu.stderr.log")).unwrap_or_default();
    for (text, want) in [("SPE is off until", 1), ("reconnected", 1)] {
        let n = qemu.matches(text).count();
        j.check(n == want, || {
            format!("QEMU said {text:?} {n} times, not {want}")
        });
    }
    // Logged: the restore is an event of the new backend's start, which
    // no query reports.
    j.check(out.backend_log.contains("registers restored"), || {
        "QEMU restored no vCPU's registers in the new backend".into()
    });
    recorded_on(&j, &["aux_truncated", "aux_partial", "after_records"]);
    j.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Control;
    use serde_json::json;

    /// The probe passes on the profile's core only (a 7.3 guest's
    /// `midr_el1` files: N1 r4p1, V1 r1p2, QEMU's max).
    #[test]
    fn the_probe_is_on_the_profiles_core() {
        let probe = |midr: &str| {
            let mut o = RunOutput::from_line(&format!(
                "spe_probed_cpus={} spe_pmu=arm_spe_0 cpu_midr={midr}",
                cpu_list()
            ));
            o.backend_log = backend_qemu_hello();
            o
        };
        let n1 = probe("0x00000000414fd0c1");
        assert_eq!(check_spe_probe(&n1, CpuProfile::NeoverseN1), Ok(()));
        let e = check_spe_probe(&n1, CpuProfile::NeoverseV1).unwrap_err();
        assert!(e.contains("not a neoverse-v1"), "{e}");
        let v1 = probe("0x00000000411fd402");
        assert_eq!(check_spe_probe(&v1, CpuProfile::NeoverseV1), Ok(()));
        let max = probe("0x00000000000f0510");
        assert_eq!(check_spe_probe(&max, CpuProfile::Max), Ok(()));
        assert!(check_spe_probe(&probe("none"), CpuProfile::Max).is_err());
    }
    use spe_protocol::control::{Hex, Stats};

    fn named(name: &str) -> crate::scenario::Scenario {
        super::super::all()
            .into_iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("no scenario {name}"))
    }

    /// What the backend's `neoverse-n1` profile answered on a real run of
    /// `boot` (6.1): two vCPUs, PMSIDR_EL1 with Interval 4 (1024),
    /// CountSize 2 (12 bits) and ArchInst.
    fn n1_backend() -> Control {
        let mut c = Control::with_stats(&[Stats::default(), Stats::default()]);
        for v in 0..2 {
            c.vcpu(v).registers.pmsidr_el1 = Hex(0x2641f);
        }
        c
    }

    const BOOT: &str = "kernel=6.1.0-56-arm64 cpus=2 pci_devices=1 spe_pmu=arm_spe_0 \
        spe_pmu_type=9 spe_pmu_cpumask=0-1 spe_caps_min_interval=1024 \
        spe_caps_count_size=12 spe_caps_arch_inst=1";

    #[test]
    fn boot_needs_the_backends_pmu_on_every_vcpu() {
        let good = || RunOutput {
            control: n1_backend(),
            ..RunOutput::from_line(BOOT)
        };
        assert_eq!(check_boot(&good()), Ok(()));
        for (key, bad) in [
            ("cpus", "1"),
            ("pci_devices", "0"),
            ("spe_pmu_type", "4"),
            ("spe_pmu_cpumask", "0"),
            ("spe_caps_min_interval", "256"),
            ("spe_caps_count_size", "16"),
            ("spe_caps_arch_inst", "0"),
        ] {
            let e = check_boot(&good().with(key, bad)).unwrap_err();
            assert!(e.contains(key) || e.contains(bad), "{key}={bad}: {e}");
        }
        // The backend advertising another interval, or serving one vCPU.
        let mut other = good();
        other.control.vcpu(0).registers.pmsidr_el1 = Hex(0x2621f);
        assert!(check_boot(&other).unwrap_err().contains("min_interval"));
        let mut one = good();
        if let Ok(spu) = &mut one.control.spu {
            spu.vcpus.pop();
        }
        assert!(check_boot(&one).unwrap_err().contains("serves 1 vCPU"));
    }

    /// The negative control: the results of `cargo xtask run --no-backend
    /// --kernel 6.1 boot` (`-cpu max` without SPE, no backend), as it
    /// printed them on 2026-11-26; the guest itself passed.
    #[test]
    fn boot_without_spe_fails() {
        let no_spe =
            RunOutput::from_line("kernel=6.1.0-56-arm64 cpus=2 pci_devices=1 spe_pmu=none");
        let e = check_boot(&no_spe).unwrap_err();
        assert!(e.contains("spe_pmu=Some(\"none\")"), "{e}");
        assert!(e.contains("no query-spu answer"), "{e}");
    }

    #[test]
    fn virtio_device_needs_ids_and_handshake() {
        let s = named("virtio-device");
        let good = RunOutput {
            backend_log:
                "[INFO] vhost-user connection accepted\n[INFO] vhost-user GET_CONFIG size=64\n"
                    .into(),
            ..RunOutput::from_line(
                "pci_device_id=0x107a virtio_device_id=0x003a config_dword0=0x00000002",
            )
        };
        assert_eq!(super::super::evaluate(&s, &good), Ok(()));
        let no_backend = RunOutput::from_line("pci_device_id=0x107a virtio_device_id=0x003a");
        let e = super::super::evaluate(&s, &no_backend).unwrap_err();
        assert!(
            e.contains("connection accepted")
                && e.contains("GET_CONFIG")
                && e.contains("config_dword0"),
            "{e}"
        );
        let wrong = RunOutput::from_line("pci_device_id=0x1079");
        assert!(super::super::evaluate(&s, &wrong)
            .unwrap_err()
            .contains("want 0x107a"));
    }

    #[test]
    fn spe_perf_needs_matching_record_counts() {
        let run = |records: &str| RunOutput {
            control: Control::with_records(&[4, 3]),
            ..RunOutput::from_line(&format!("spe_records={records} spe_bad_packets=0"))
        };
        assert_eq!(check_spe_perf(&run("7")), Ok(()));
        assert!(check_spe_perf(&run("6")).unwrap_err().contains("wrote 7"));
        let no_stats = RunOutput::from_line("spe_records=7 spe_bad_packets=0");
        assert!(check_spe_perf(&no_stats)
            .unwrap_err()
            .contains("no query-spu answer"));
    }

    #[test]
    fn buffer_full_needs_interrupts_and_events() {
        let run = |line: &str, events: u64| RunOutput {
            control: Control::with_stats(&[Stats {
                records: 90,
                management_events: events,
                ..Stats::default()
            }]),
            ..RunOutput::from_line(line)
        };
        let line = "spe_records=80 spe_bad_packets=0 spe_irqs_before=3 spe_irqs_after=6";
        assert_eq!(check_spe_buffer_full(&run(line, 3)), Ok(()));
        assert!(check_spe_buffer_full(&run(line, 1)).is_err());
        let one_irq = line.replace("spe_irqs_after=6", "spe_irqs_after=4");
        assert!(check_spe_buffer_full(&run(&one_irq, 3)).is_err());
        let more = line.replace("spe_records=80", "spe_records=91");
        assert!(check_spe_buffer_full(&run(&more, 3)).is_err());
    }

    #[test]
    fn el12_reaches_the_el1_register() {
        let r = |el12: &str| {
            RunOutput::from_line(&format!(
                "vhe=1 pmscr_el1=0x1 pmscr_el2=0x1 pmscr_el12={el12}"
            ))
        };
        assert_eq!(check_spe_el2(&r("0x2")), Ok(()));
        // PMSCR_EL12 sent on as PMSCR_EL1, which a host EL2 redirects.
        let bad = RunOutput::from_line("pmscr_el1=0x2 pmscr_el2=0x2 pmscr_el12=0x2");
        let e = check_spe_el2(&bad).unwrap_err();
        assert!(e.contains("pmscr_el2 0x2"), "{e}");
        assert!(check_spe_el2(&r("0x0")).is_err());
        assert!(check_spe_el2(&RunOutput::from_line("")).is_err());
    }

    #[test]
    fn workload_needs_addresses_and_iterations() {
        let s = named("workload");
        let good = "workload_array_va=0x494000 workload_array_pa0=0x4a2c000 \
            workload_array_pa1=0x4a2d000 workload_strided_pc=0x4006d4 \
            workload_branchy_pc=0x400708 workload_iterations=1000";
        let judge = |key: &str, value: &str| {
            super::super::evaluate(&s, &RunOutput::from_line(good).with(key, value))
        };
        assert_eq!(judge("", ""), Ok(()));
        let e = judge("workload_array_pa0", "0x0").unwrap_err();
        assert!(e.contains("not page addresses"), "{e}");
        let e = judge("workload_iterations", "12").unwrap_err();
        assert!(e.contains("want 1000"), "{e}");
        let e = judge("workload_array_va", "").unwrap_err();
        assert!(e.contains("workload_array_va=None"), "{e}");
        let e = judge("workload_branchy_pc", "0x4006d4").unwrap_err();
        assert!(e.contains("loop PCs"), "{e}");
    }

    #[test]
    fn the_top_three_must_match_perfs() {
        let out = RunOutput::from_line(
            "perf_top1=a perf_top1_samples=90 perf_top2=b perf_top2_samples=5 \
             perf_top3=c perf_top3_samples=5",
        );
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

    #[test]
    fn a_stall_needs_the_stop_and_both_recordings() {
        let dir = std::env::temp_dir().join(format!("xtask-stall-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let run = |line: &str| RunOutput {
            dir: dir.clone(),
            ..RunOutput::from_line(line)
        };
        let line = "stall_records=40 after_records=50 bad=0";
        assert!(check_stall(&run(line))
            .unwrap_err()
            .contains("never stopped"));
        std::fs::write(dir.join("stall.log"), "backend stopped for 4.0 s\n").unwrap();
        assert_eq!(check_stall(&run(line)), Ok(()));
        assert!(check_stall(&run(&line.replace("bad=0", "bad=2"))).is_err());
        assert!(check_stall(&run(&line.replace("after_records=50", "after_records=0"))).is_err());
        std::fs::write(dir.join("qemu.stderr.log"), "SPE is off: backend lost\n").unwrap();
        assert!(check_stall(&run(line)).unwrap_err().contains("dropped"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
