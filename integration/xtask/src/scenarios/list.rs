//! The catalogue `cargo xtask test` runs: the scenarios here, then the
//! fault (`faults`), paravirtual (`paravirt`) and PMU-snapshot
//! (`snapshot`) ones. Which kernel runs which is `select`'s.

use super::checks::*;
use crate::scenario::{Expect, OnMarker, RunOutput, Scenario, SpeRun, ICOUNT_AUTO, ICOUNT_FIXED};
use crate::{
    attributes, driver_bugs, faults, memory, paravirt, perf_test, proofs, snapshot, stock, uefi,
};
use spe_protocol::profile::CpuProfile;
use std::time::Duration;

type CheckFn = fn(&RunOutput) -> Result<(), String>;

/// The stop/cont pairs of `spe-exit-requests`.
pub const STOP_CONTS: u32 = 400;

fn n1() -> SpeRun {
    SpeRun::new(CpuProfile::NeoverseN1)
}

/// The backend's `max` profile: every feature it models (FEAT_SPEv1p4
/// with EFT and FnE, discard, SVE, FEAT_PMUv3_SS).
fn max() -> SpeRun {
    SpeRun::new(CpuProfile::Max)
}

pub fn all() -> Vec<Scenario> {
    let mut all = booted_with_a_device_tree();
    all.extend(uefi::scenarios(booted_with_a_device_tree));
    all
}

/// The catalogue but its UEFI copies ([`uefi::scenarios`]).
fn booted_with_a_device_tree() -> Vec<Scenario> {
    vec![
        // The SPE PMU the guest sees is the backend's profile, on every vCPU.
        Scenario::new("boot", "boot", 120, Expect::pass(check_boot)).spe(n1()),
        Scenario::new(
            "virtio-device",
            "virtio-device",
            120,
            Expect::pass(check_virtio_device),
        )
        .backend(),
        Scenario::new("perf", "perf", 120, Expect::pass(check_perf_version)),
        Scenario::new("workload", "workload", 180, Expect::pass(check_workload)),
        Scenario::new(
            "panic-is-reported",
            "panic",
            120,
            Expect::RunnerFailure {
                reason: "kernel panic",
                console: "Kernel panic - not syncing",
            },
        ),
        // Long enough to reach /init on a slow machine, short enough not
        // to dominate the suite.
        Scenario::new(
            "hang-times-out",
            "hang",
            25,
            Expect::RunnerFailure {
                reason: "timeout after",
                console: "SPE-RESULT kernel=",
            },
        ),
        // QEMU must outlive its back end (the series' "only stop a started
        // device"). The backend
        // is killed once the guest runs /init; the crash must end the run
        // long before the timeout.
        Scenario::new(
            "backend-crash-is-reported",
            "hang",
            60,
            Expect::RunnerFailure {
                reason: "QEMU survived",
                console: "SPE-RESULT kernel=",
            },
        )
        .backend()
        .kill_backend_when("SPE-RESULT kernel="),
        Scenario::new(
            "spe-probe",
            "spe-probe",
            120,
            Expect::pass(|o| check_spe_probe(o, CpuProfile::NeoverseN1)),
        )
        .spe(n1()),
        // Each profile on its core: the V1 (SVE, no E0PD) too.
        Scenario::new(
            "spe-probe-v1",
            "spe-probe",
            120,
            Expect::pass(|o| check_spe_probe(o, CpuProfile::NeoverseV1)),
        )
        .spe(SpeRun::new(CpuProfile::NeoverseV1)),
        // The backend must model EL2 for a kernel running there.
        Scenario::new(
            "spe-probe-vhe",
            "spe-probe",
            120,
            Expect::pass(|o| check_spe_probe(o, CpuProfile::Max)),
        )
        .spe(SpeRun {
            virtualization: true,
            ..max()
        }),
        Scenario::new("spe-perf", "spe-perf", 240, Expect::pass(check_spe_perf)).spe(SpeRun {
            synthetic: Some(1_000_000),
            ..n1()
        }),
        Scenario::new(
            "spe-buffer-full",
            "spe-buffer-full",
            240,
            Expect::pass(check_spe_buffer_full),
        )
        .spe(SpeRun {
            synthetic: Some(4_000_000),
            ..n1()
        }),
        // Where records land: QEMU's sampler picks the guest's real
        // operations (see proofs.rs).
        proof("spe-profile", proofs::check_spe_profile),
        proof("spe-filter-load", proofs::check_spe_filter_load),
        proof("spe-min-latency", proofs::check_spe_min_latency),
        // The interval proofs count instructions exactly.
        exact_proof("spe-jitter", proofs::check_spe_jitter),
        exact_proof("spe-interval-others", proofs::check_spe_interval_others),
        // The same under -icount: TBs count SPE operations the slow way and
        // timestamps read the virtual clock only where icount allows.
        proof("spe-interval-others", proofs::check_spe_interval_others)
            .named("spe-interval-others-icount")
            .spe(
                SpeRun {
                    icount: Some(ICOUNT_AUTO),
                    ..n1()
                }
                .exact(),
            ),
        exact_proof("spe-interval-faults", proofs::check_spe_interval_faults),
        // The operation model: the default (micro-operations) samples
        // every instruction of a loop whose length divides the period;
        // counting instructions exactly samples one of them (the negative
        // control: check_spe_alias must reject that run).
        proof("spe-alias", proofs::check_spe_alias),
        exact_proof("spe-alias", proofs::check_spe_alias_exact).named("spe-alias-exact"),
        proof("spe-smp2-pinned", proofs::check_spe_smp2_pinned),
        // Load: every one of eight vCPUs sampling the guest's real
        // operations at once, each record accounted for.
        Scenario::new("spe-smp8", "spe-smp8", 480, Expect::pass(check_spe_smp8))
            .spe(n1())
            .vcpus(SMP8_VCPUS),
        // FEAT_PMUv3_SS: the guest driver's interface, and a capture the
        // host requests.
        Scenario::new(
            "pmu-snapshot",
            "pmu-snapshot",
            300,
            Expect::pass(snapshot::check_pmu_snapshot),
        )
        .spe(SpeRun {
            pmu_ss: true,
            on_marker: Some(OnMarker::ctl(snapshot::HOST_MARKER, &["snapshot"])),
            ..max()
        }),
        // PMSCR's three names from a kernel at EL2 with E2H (QEMU's E2H
        // alias table): the backend must model EL2.
        Scenario::new("spe-el2", "spe-el2", 120, Expect::pass(check_spe_el2)).spe(SpeRun {
            virtualization: true,
            ..max()
        }),
        // Each filtering attribute of the driver (attributes.rs).
        Scenario::new(
            "spe-attributes",
            "spe-attributes",
            480,
            Expect::pass(attributes::check),
        )
        .spe(max()),
        // SVE operations, on the profile of a PE with SVE.
        proof("spe-sve", proofs::check_spe_sve).spe(max()),
        // Tag-checked accesses, on a machine with MTE.
        proof("spe-mte", proofs::check_spe_mte).spe(SpeRun { mte: true, ..max() }),
        Scenario::new(
            "spe-snapshot",
            "spe-snapshot",
            240,
            Expect::pass(check_spe_snapshot),
        )
        .spe(n1()),
        // perf's own Arm SPE tests. `max` has discard (FEAT_SPEv1p2); a
        // fixed icount gives perf the guest time its tests' `sleep 1`
        // assumes. Its guest time is fixed, so a slow host makes it
        // longer: 326 s on 7.3 on one day, over 480 s on a slower one.
        Scenario::new(
            "perf-test-spe",
            "perf-test-spe",
            900,
            Expect::pass(perf_test::check_perf_test_spe),
        )
        .spe(SpeRun {
            icount: Some(ICOUNT_FIXED),
            ..max()
        }),
        // The launcher: spe-qemu, installed into a prefix of the build
        // tree, from QEMU's own -M virt -kernel -initrd -append command
        // line.
        Scenario::new(
            "spe-qemu-launcher",
            "spe-launcher",
            180,
            Expect::pass(check_launcher),
        )
        .spe(SpeRun {
            launcher: true,
            ..n1()
        }),
        // The host's view. The backend keeps every record it writes
        // (--record); `vhost-device-spe report` of them, with the
        // kernel's symbols, must find the hottest kernel symbols perf in
        // the guest found in the same records.
        Scenario::new("spe-report", "spe-report", 240, Expect::pass(check_report)).spe(SpeRun {
            record: true,
            ..n1()
        }),
        // A backend stopped for 4 s, less than QEMU's bound (10 s): the VM
        // pauses, then profiling goes on.
        Scenario::new(
            "spe-backend-stall",
            "spe-stall",
            240,
            Expect::pass(check_stall),
        )
        .spe(SpeRun {
            on_marker: Some(OnMarker::stall("SPE-STALL-NOW", Duration::from_secs(4))),
            ..n1()
        }),
        // Exit requests while the vCPU counts to its next sample: QMP
        // stop and cont, 400 times while perf records, on one vCPU (with
        // two, the other's pause makes QEMU kick the first again, which
        // would hide a request the count lost). Each stop must be taken;
        // the vCPU's tick takes a lost one within 4 ms, so spe-ipis is the
        // run that tells a lost request.
        Scenario::new(
            "spe-exit-requests",
            "spe-exit-requests",
            240,
            Expect::pass(check_stop_cont),
        )
        .spe(SpeRun {
            on_marker: Some(OnMarker::stop_cont("SPE-STOP-CONT-NOW", STOP_CONTS)),
            ..n1()
        })
        .vcpus(1),
        // Exit requests from another vCPU's thread: IPIs (membarrier) to
        // vCPUs that count to their next sample, tickless so that nothing
        // else would stop a vCPU that lost one. Each within IPI_SLOW_MS.
        Scenario::new("spe-ipis", "spe-ipis", 240, Expect::pass(check_ipis))
            .spe(SpeRun {
                kernel_args: " nohz_full=1",
                ..n1()
            })
            .vcpus(2),
        // The same with seven targets on eight vCPUs (on two host CPUs).
        Scenario::new("spe-ipis-smp8", "spe-ipis", 480, Expect::pass(check_ipis))
            .spe(SpeRun {
                kernel_args: " nohz_full=1-7",
                ..n1()
            })
            .vcpus(8),
        // A backend killed while perf records and started again on the
        // same socket: QEMU reconnects, restores the registers and the
        // loss shows as TRUNCATED|PARTIAL AUX data; SPE works on.
        Scenario::new(
            "spe-backend-restart",
            "spe-restart",
            240,
            Expect::pass(check_restart),
        )
        .spe(SpeRun {
            on_marker: Some(OnMarker::restart("SPE-RESTART-NOW")),
            ..n1()
        }),
        // The same with virtualization=on: spe-qemu must give the backend
        // --el2, or the VHE kernel dies before its console.
        Scenario::new(
            "spe-qemu-launcher-vhe",
            "spe-launcher",
            180,
            Expect::pass(check_launcher),
        )
        .spe(SpeRun {
            launcher: true,
            virtualization: true,
            ..max()
        }),
        // Deterministic replay. Two boots of the same run write the same
        // AUX bytes and deliver the fault on the same record.
        replay("spe-replay-a", proofs::check_spe_replay_first),
        replay("spe-replay-b", proofs::check_spe_replay),
        // A known driver bug on demand. The AUX buffer fills with its
        // consumer stopped and some room left below the tail's page; from
        // the backend's register log, 6.1 goes on (the bug), 6.12 and 7.3
        // stop the event (the fix): driver_bugs.rs.
        Scenario::new(
            "spe-no-room",
            "spe-no-room",
            180,
            Expect::pass(driver_bugs::check_no_room),
        )
        .spe(SpeRun {
            // Every SPE register access in the backend's log.
            log: Some("info,vhost_device_spe::qemu=debug"),
            // Records 64-byte aligned: the buffer fills to its limit.
            backend_args: &["--align", "64"],
            ..n1()
        }),
    ]
    .into_iter()
    // Faults on demand and the driver's reaction.
    .chain(memory::scenarios())
    .chain(faults::scenarios())
    .chain(paravirt::scenarios())
    .chain(stock::scenarios())
    .chain(snapshot::scenarios())
    .collect()
}

/// A full-emulation scenario without a synthetic source (the samples are
/// QEMU's), the guest script of its name, checked by `check`.
pub fn proof(name: &'static str, check: CheckFn) -> Scenario {
    Scenario::new(name, name, 240, Expect::pass(check)).spe(n1())
}

/// A [`proof`] with operations counted as instructions, exactly.
fn exact_proof(name: &'static str, check: CheckFn) -> Scenario {
    proof(name, check).spe(n1().exact())
}

/// A boot of `spe-replay` that repeats byte for byte: the backend
/// `--deterministic`, QEMU under a fixed `-icount` with `-seed` and its
/// RTC on the virtual clock, a buffer full armed after 300 records.
fn replay(name: &'static str, check: CheckFn) -> Scenario {
    Scenario::new(name, "spe-replay", 240, Expect::pass(check)).spe(SpeRun {
        icount: Some(ICOUNT_FIXED),
        qemu_args: &["-seed", "1", "-rtc", "base=2026-01-01,clock=vm"],
        backend_args: &["--deterministic"],
        // The pair's check compares every record the backend wrote.
        record: true,
        faults: Some(
            r#"{"seed": 7, "faults": [{"vcpu": "all", "kind": "buffer-full", "trigger": "after-records", "count": 300}]}"#,
        ),
        ..n1()
    })
}
