//! The catalogue `cargo xtask test` runs: the scenarios here, then the
//! fault (`faults`), paravirtual (`paravirt`) and PMU-snapshot
//! (`snapshot`) ones. Which kernel runs which is `select`'s.

use super::checks::*;
use crate::scenario::{
    Expect, OnMarker, RunOutput, Scenario, SpeRun, ICOUNT_AUTO, ICOUNT_CORE, ICOUNT_FIXED,
};
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
    all.extend(crate::kvm::scenarios());
    all.extend(crate::selftest::scenarios());
    all
}

/// The catalogue but its UEFI copies ([`uefi::scenarios`]).
fn booted_with_a_device_tree() -> Vec<Scenario> {
    vec![
        // The SPE PMU the guest sees is the backend's profile, on every vCPU.
        Scenario::new("boot", "boot", 120, Expect::pass(check_boot))
            .spe(n1())
            .proves(
                "The guest reaches /init with 2 vCPUs and a PCI bus, and its unmodified \
                 `arm_spe_pmu` shows the backend's PMU: `arm_spe_0`, a device PMU `type`, \
                 `cpumask` 0-1, and `caps/min_interval`, `count_size` and `arch_inst` as Linux \
                 decodes the PMSIDR_EL1 the backend answers in `query-spu`, which serves every \
                 vCPU. Negative control: `cargo xtask run --no-backend boot` (`-cpu max` without \
                 SPE) reports `spe_pmu=none`, which the check rejects (a unit test holds that \
                 run's results).",
            ),
        Scenario::new(
            "virtio-device",
            "virtio-device",
            120,
            Expect::pass(check_virtio_device),
        )
        .backend()
        .proves(
            "The guest sees PCI 1af4:107a, a virtio device of ID 0x003a (58), and reads \
             `num_vcpus` from its config space (through `devmem`: no driver binds it), and the \
             backend log has `vhost-user connection accepted` and `vhost-user GET_CONFIG`: the \
             plain vhost-user handshake.",
        ),
        Scenario::new("perf", "perf", 120, Expect::pass(check_perf_version)).proves(
            "The suite's perf runs in the guest and is the kernel's own line (6.1.x on 6.1, 7.3.x \
             on 7.3), and `perf stat -e cpu-clock` counts.",
        ),
        Scenario::new("workload", "workload", 180, Expect::pass(check_workload)).proves(
            "`spe-workload 1000` runs and reports what the proofs match records against: a \
             page-aligned array VA with the physical addresses of its first two pages, and the PCs \
             of its two loops.",
        ),
        Scenario::new(
            "panic-is-reported",
            "panic",
            120,
            Expect::RunnerFailure {
                reason: "kernel panic",
                console: "Kernel panic - not syncing",
            },
        )
        .proves(
            "An inverted verdict: a guest panic (sysrq crash) must make the runner report the \
             failure \"kernel panic\" with the panic in the console tail.",
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
        )
        .proves(
            "An inverted verdict: a guest that sleeps forever must make the runner report the \
             failure \"timeout after 25 s\" and kill QEMU.",
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
        .kill_backend_when("SPE-RESULT kernel=")
        .proves(
            "An inverted verdict: the runner SIGKILLs the backend once /init prints and must \
             report the failure \"backend crashed …; QEMU survived and was stopped\" at once, not \
             at the timeout; QEMU outliving its back end needs the series' \
             \"hw/virtio/vhost-user-base: only stop a started device on disconnect\".",
        ),
        Scenario::new(
            "spe-probe",
            "spe-probe",
            120,
            Expect::pass(|o| check_spe_probe(o, CpuProfile::NeoverseN1)),
        )
        .spe(n1())
        .proves(
            "Full emulation (`-cpu neoverse-n1,spe=on,spe-socket=…`): Debian's unmodified \
             `arm_spe_pmu` probes for CPUs 0-1, `arm_spe_0` exists, the guest's MIDR_EL1 is the \
             profile's core, and the backend logged the control channel's `HELLO: 2 vCPU(s)`.",
        ),
        // Each profile on its core: the V1 (SVE, no E0PD) too.
        Scenario::new(
            "spe-probe-v1",
            "spe-probe",
            120,
            Expect::pass(|o| check_spe_probe(o, CpuProfile::NeoverseV1)),
        )
        .spe(SpeRun::new(CpuProfile::NeoverseV1))
        .proves(
            "`spe-probe` on `-cpu neoverse-v1` with the backend's V1 profile (SVE, no E0PD): the \
             driver probes and the guest's MIDR_EL1 is a V1's; another core's MIDR fails the check \
             (unit test).",
        ),
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
        })
        .proves(
            "`spe-probe` with `-M virt,virtualization=on` on the `max` profile: the kernel runs at \
             EL2 (VHE), so PMSCR_EL1 reaches PMSCR_EL2 and the early EL2 set-up touches PMBIDR_EL1 \
             and PMSCR_EL2. The backend must model EL2 (`--el2`): otherwise it answers UNDEFINED \
             and the kernel dies before its console.",
        ),
        Scenario::new("spe-perf", "spe-perf", 240, Expect::pass(check_spe_perf))
            .spe(SpeRun {
                synthetic: Some(1_000_000),
                ..n1()
            })
            .proves(
                "`perf record -e arm_spe_0/ts_enable=1,pa_enable=1/ -a -- sleep 2` over the \
                 backend's synthetic source succeeds, `perf report -D` decodes with no decoder \
                 error, and perf decoded exactly the records the backend wrote (`query-spu` at the \
                 guest's power-off, every vCPU); a count one off fails (unit test).",
            ),
        Scenario::new(
            "spe-buffer-full",
            "spe-buffer-full",
            240,
            Expect::pass(check_spe_buffer_full),
        )
        .spe(SpeRun {
            synthetic: Some(4_000_000),
            ..n1()
        })
        .proves(
            "`perf record -m,4` (4-page AUX buffers) at a high synthetic rate: the SPE PPI's count \
             in /proc/interrupts rises by at least 2, the backend counts at least 2 buffer \
             management events, and perf still decodes records without errors, no more than the \
             backend wrote.",
        ),
        // Where records land: QEMU's sampler picks the guest's real
        // operations (see proofs.rs).
        proof("spe-profile", proofs::check_spe_profile).proves(
            "QEMU's sampler on the guest's own operations, `perf record -e \
             arm_spe_0/load_filter=1,store_filter=1,branch_filter=1,pa_enable=1,ts_enable=1/ -- \
             spe-workload 10 0 PAGEMAP`: (a) over 75 % of perf's user-space samples in the \
             workload's two loops; (b) every load or store of `spe_workload_strided` has a data VA \
             in the array and (c) the PA the workload's `/proc/self/pagemap` gives for it; (d) \
             taken branches have a target, not-taken ones none, and the workload's direct branches \
             exactly the target their encoding gives; (e) timestamps never decrease per CPU in \
             buffer order; (f) on perf's clock no record is after the workload's exit and its \
             records span at least half its loop's time; perf decoded as many records as the \
             backend wrote. Negative controls in every run: PAs a page off, the array moved, the \
             records reversed, targets one instruction off and the exit moved halfway must each be \
             caught.",
        ),
        proof("spe-filter-load", proofs::check_spe_filter_load).proves(
            "`load_filter=1` alone: load records and no store, branch or other one. Negative \
             control in every run: the same workload without the filter has stores and branches.",
        ),
        proof("spe-min-latency", proofs::check_spe_min_latency).proves(
            "Loads and stores under `min_latency=16`: no total latency below 16. Negative control \
             in every run: without the filter most are below 16.",
        ),
        // The interval proofs count instructions exactly.
        exact_proof("spe-jitter", proofs::check_spe_jitter).proves(
            "`spe-workload loads 4` on CPU 1 under `arm_spe_0/load_filter=1,jitter=J/u -c 1024`, \
             operations counted as instructions: without jitter every spacing between consecutive \
             sampled loads is 1025 operations (INTERVAL + 1); with it all are in [1025, 1280], at \
             least 16 distinct, their mean in [1024, 1280]; at least 500 spacings each, gaps at \
             most 10 %. The two runs are each other's negative control: each would fail the \
             other's bounds.",
        ),
        exact_proof("spe-interval-others", proofs::check_spe_interval_others).proves(
            "`spe-workload others 1000` (a loop of 4096 `add`s and two loop instructions) on CPU 1 \
             under `arm_spe_0/jitter=0/u -c 1024`, every operation sampled and counted as an \
             instruction: each spacing between consecutive samples in the loop, from their PCs, is \
             exactly 1025 operations; at least 2000 spacings and 2000 records of the `add`s, which \
             QEMU selects without leaving the TB where it can.",
        ),
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
            )
            .proves(
                "`spe-interval-others`'s checks under `-icount shift=auto`: TBs then count SPE \
                 operations outside the exit check, and the sampler may read the virtual clock \
                 only where a TB allows I/O (a sampler that reads it wherever it samples makes \
                 QEMU exit with \"Bad icount read\").",
            ),
        exact_proof("spe-interval-faults", proofs::check_spe_interval_faults).proves(
            "`spe-workload faults 1000`: the adds of `spe-interval-others` behind a load from an \
             untouched page, so that every pass starts its TB with a page fault (at EL1, not \
             sampled): every spacing in the loop is exactly 1025 operations (but the one that \
             starts at the load: a selected load that faults is sampled where it faulted), with at \
             least 2000 spacings and 1000 page faults. It fails on a QEMU that leaves a faulting \
             TB's unexecuted instructions counted, or counts the faulting load twice (the \
             give-back of the series' \"accel/tcg: let a target count instructions in the TB-start \
             exit check\" and \"target/arm: a sampled-operation source for the SPE model\").",
        ),
        // The operation model: the default (micro-operations) samples
        // every instruction of a loop whose length divides the period;
        // counting instructions exactly samples one of them (the negative
        // control: check_spe_alias must reject that run).
        proof("spe-alias", proofs::check_spe_alias).proves(
            "`spe-workload alias 1000000` (a 5-instruction loop: a load, two adds, `subs`, `b.ne`) \
             on CPU 1 under `arm_spe_0/jitter=0/u -c 1024`, the period (1025 operations) a \
             multiple of the loop's length: under the default operation model (micro-operations) \
             at least 2000 records of the loop, each of its 5 instructions sampled with at least a \
             quarter of its fair share, the load too. Negative control: `spe-alias-exact`.",
        ),
        exact_proof("spe-alias", proofs::check_spe_alias_exact)
            .named("spe-alias-exact")
            .proves(
                "The negative control of `spe-alias`, in every run: counting instructions exactly \
                 (`--choice operations=instructions`), every record of the loop is at one \
                 instruction, and `check_spe_alias` must reject the run.",
            ),
        proof("spe-smp2-pinned", proofs::check_spe_smp2_pinned).proves(
            "Two vCPUs; copies `spe-cpu0` and `spe-cpu1` of the workload pinned with `taskset` to \
             CPU 0 and 1 under `perf record -a`: on each CPU at least 500 records of its own copy \
             (perf script's `cpu` and `comm`) and none of the other's.",
        ),
        // Load: every one of eight vCPUs sampling the guest's real
        // operations at once, each record accounted for.
        Scenario::new("spe-smp8", "spe-smp8", 480, Expect::pass(check_spe_smp8))
            .spe(n1())
            .vcpus(SMP8_VCPUS)
            .proves(
                "Eight vCPUs (`-smp 8`, the backend's `--vcpus 8`), a copy of the workload pinned \
                 to each under `perf record -a` at perf's default period: every CPU has records \
                 (the AUX chunks' CPUs in `perf report -D`), and perf decodes exactly the \
                 backend's `records` with no decoder error; a difference is reported with the AUX \
                 records perf flagged truncated, partial or collided, its lost events and the \
                 backend's `discarded`. Negative control (by hand): decoding CPUs 0-6 only (`perf \
                 report -C 0-6`) fails.",
            ),
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
            on_marker: Some(OnMarker::ctl(snapshot::HOST_MARKER, &[&["snapshot"]])),
            ..max()
        })
        .proves(
            "FEAT_PMUv3_SS (`pmu-ss=on`) through the driver `guest-driver/pmu_snapshot` (sysfs \
             under `/sys/devices/system/cpu/cpuN/pmu_snapshot/`) while `perf stat -a -e \
             cycles,r11` counts: a `capture` on cpu0 gives `seq` 0→1, `source` guest, `nc` 0 and a \
             PMCCNTSVR_EL1 between the two PMCCNTR_EL0 reads around the request; with `prohibit=1` \
             a capture reports `nc` 1 with the registers unchanged; the host's `vhost-device-spe \
             ctl snapshot` while a loop runs shows as a new `seq` with `source` host; cpu1 goes \
             offline and online again, and `rmmod` works, without a kernel warning. Negative \
             control: `pmu-snapshot-no-pmss`.",
        ),
        // PMSCR's three names from a kernel at EL2 with E2H (QEMU's E2H
        // alias table): the backend must model EL2.
        Scenario::new("spe-el2", "spe-el2", 120, Expect::pass(check_spe_el2))
            .spe(SpeRun {
                virtualization: true,
                ..max()
            })
            .proves(
                "The test module `integration/guest/modules/spe_el2`, in a kernel at EL2 with E2H \
                 (VHE), zeroes PMSCR_EL2 and PMSCR_EL12, writes 1 through PMSCR_EL1 and 2 through \
                 PMSCR_EL12: PMSCR_EL1 and PMSCR_EL2 read 1 and PMSCR_EL12 reads 2 (QEMU's E2H \
                 alias table sends PMSCR_EL1 to PMSCR_EL2, and PMSCR_EL12 reaches the backend as \
                 itself). Negative control (by hand): a QEMU that forwards PMSCR_EL12 as PMSCR_EL1 \
                 (`SPE_QEMU=`) must fail.",
            ),
        // Each filtering attribute of the driver (attributes.rs).
        Scenario::new(
            "spe-attributes",
            "spe-attributes",
            480,
            Expect::pass(attributes::check),
        )
        .spe(max())
        .proves(
            "Every filtering format attribute of the guest's driver, one `perf record` of \
             `spe-workload classes 100000` each on the `max` profile (FEAT_SPEv1p4, FnE, EFT): \
             each filter keeps exactly its classes of record, and the unfiltered control has every \
             class and some records with and some without each event filtered on; an attribute the \
             kernel's driver lacks must be absent, and one it refuses refused, as `attributes.rs` \
             says of that kernel.",
        ),
        // SVE operations, on the profile of a PE with SVE.
        proof("spe-sve", proofs::check_spe_sve).spe(max()).proves(
            "`spe-workload sve 100000` on the `max` profile (a PE with SVE) under `arm_spe_0//u`: \
             every SVE operation of its loop (`ld1w` with a full, a partial and an empty \
             predicate, a gather, predicated `fadd` and `add`, an unpredicated `add`, `st1w`) is \
             recorded as itself (EVL the process's vector length, PRED, SG, FP; the data address \
             of the first active element, none for the empty predicate; the Partial and Empty \
             predicate events); `event_filter=0x20000` and `0x40000` keep only records with the \
             partial or empty predicate, `inv_event_filter=0x20000` none with it, and \
             `float_filter=1` the `fadd` alone, where the driver has them. Negative control: the \
             records of a core without SVE (`--cpu neoverse-n1`) are rejected \
             (`proofs::check_spe_sve`).",
        ),
        // Tag-checked accesses, on a machine with MTE.
        proof("spe-mte", proofs::check_spe_mte)
            .spe(SpeRun { mte: true, ..max() })
            .proves(
                "`spe-workload mte 200000` on `-M virt,mte=on` (synchronous tag checks, a \
                 `PROT_MTE` page tagged with `irg` and `stg`, a loop of a tag-checked `ldr` and \
                 `str` through the tagged pointer) under `arm_spe_0//u`: every record of the load \
                 and the store carries its data address, tag included (`proofs::check_spe_mte`).",
            ),
        Scenario::new(
            "spe-aux-snapshot",
            "spe-aux-snapshot",
            240,
            Expect::pass(check_spe_aux_snapshot),
        )
        .spe(n1())
        .proves(
            "perf's snapshot mode as perf's own test drives it (`perf record -e arm_spe// -S -- dd \
             …`, SIGUSR2, then SIGTERM), signalled once `dd` runs: `perf script` shows samples of \
             `dd`, the events perf synthesises from SPE records.",
        ),
        // perf's own Arm SPE tests. `max` has discard (FEAT_SPEv1p2); a
        // fixed icount at a server core's rate gives perf the guest time
        // its tests' `sleep 1` assumes. Its guest time is fixed, so a
        // slow host makes it longer: 479 s on 7.3 at four a nanosecond
        // beside other runs, over 900 s at eight beside two more.
        Scenario::new(
            "perf-test-spe",
            "perf-test-spe",
            1500,
            Expect::pass(perf_test::check_perf_test_spe),
        )
        .spe(SpeRun {
            icount: Some(ICOUNT_CORE),
            ..max()
        })
        .proves(
            "`perf test 'Arm SPE'` of the guest's perf, unmodified, on the `max` profile under a \
             fixed icount of eight instructions a nanosecond (`-icount shift=-3,sleep=off`, the \
             series' negative shift; `spe-qemu --spe-guest-ghz 8`), four for each of the two \
             vCPUs when both are busy, so that the tests' `sleep 1` holds what a server core \
             executes in a second: both tests `Ok` and every part of \
             the trace-data test `PASS`, but for one checked exception, the fork test's skip \
             without a C compiler in the guest (`SKIP`). Negative control (by hand): at one \
             instruction a nanosecond (`shift=0`) 7.3's snapshot part fails.",
        ),
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
        })
        .proves(
            "No backend or QEMU of the runner's own: the installed `spe-qemu` \
             (`target/integration/prefix/bin/`) given QEMU's documented command line (`-M virt \
             -cpu max -smp 2 -m 1G -nographic -nic none -no-reboot -kernel … -initrd … -append \
             …`), its stdout the console, starts its own backend: the driver probes for CPUs 0-1, \
             the backend log has the channel's HELLO, and `perf record -e \
             arm_spe_0/ts_enable=1,pa_enable=1/ -- spe-workload 3` gives records that decode \
             without errors. Negative control (by hand): a `spe-qemu` that does not add \
             `spe=on,spe-socket=` to `-cpu` must fail (\"arm_spe_pmu did not probe\").",
        ),
        // The host's view. The backend keeps every record it writes
        // (--record); `vhost-device-spe report` of them, with the
        // kernel's symbols, must find the hottest kernel symbols perf in
        // the guest found in the same records.
        Scenario::new("spe-report", "spe-report", 240, Expect::pass(check_report))
            .spe(SpeRun {
                record: true,
                ..n1()
            })
            .proves(
                "The host's view: the backend keeps every record (`--record <run>/records`) while \
                 the guest runs `perf record -e arm_spe_0/ts_enable=1/k -a -- dd …` and prints \
                 `perf report --itrace=i1i --sort sym -n`'s three hottest kernel symbols and its \
                 `/proc/kallsyms` text symbols (`SPE-KSYM`; Debian's `System.map` is a \
                 placeholder); `vhost-device-spe report <run>/records --system-map <run>/kallsyms \
                 --json` must rank perf's three first, with exactly perf's sample counts, and \
                 decode every record. Negative control (by hand): a wrong `--kaslr-offset` changes \
                 the ranking.",
            ),
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
        })
        .proves(
            "`perf record -e arm_spe_0/ts_enable=1,period=65536/ -- spe-workload 0 6`; at \
             `SPE-STALL-NOW` the runner stops the backend (SIGSTOP) for 4 s, below QEMU's 10 s \
             bound (the series' channel client), then lets it go on (`stall.log`): perf exits 0, \
             its records and those of a second recording decode, and QEMU never said \"SPE is \
             off\". Negative control (by hand): a QEMU whose bound is shorter than the stall \
             (`SPE_QEMU=`) must drop the backend and fail.",
        ),
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
        .vcpus(1)
        .proves(
            "One vCPU; while `perf record -e arm_spe_0/ts_enable=1,period=65536/ -- spe-workload 0 \
             8` runs, at `SPE-STOP-CONT-NOW` the runner makes 400 QMP `stop`/`cont` pairs \
             (`stop-cont.log`): every stop is taken within QEMU's grace (10 s) and the recording \
             decodes. It cannot tell a lost exit request on its own (the vCPU's timer tick takes \
             one within 4 ms): `spe-ipis` can.",
        ),
        // Exit requests from another vCPU's thread: IPIs (membarrier) to
        // vCPUs that count to their next sample, tickless so that nothing
        // else would stop a vCPU that lost one. Each within IPI_SLOW_MS.
        Scenario::new("spe-ipis", "spe-ipis", 240, Expect::pass(check_ipis))
            .spe(SpeRun {
                kernel_args: " nohz_full=1",
                ..n1()
            })
            .vcpus(2)
            .proves(
                "`perf record -e arm_spe_0/period=262144/ -- spe-workload ipis 6 2` with the \
                 guest's CPU 1 tickless (`nohz_full=1`): the strided loop on CPU 1 while CPU 0 \
                 makes `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)` calls, each an IPI, that is \
                 an exit request from another vCPU's thread, which returns once CPU 1 took it: \
                 every call within 100 ms (`ipi_slow=0`), calls made, and the recording decodes. \
                 Negative control (by hand, `cargo xtask series-tree` and `SPE_QEMU=`): the series \
                 with `spe_disarm()`'s restore of `cpu->exit_request` removed must fail with slow \
                 calls.",
            ),
        // The same with seven targets on eight vCPUs (on two host CPUs).
        Scenario::new("spe-ipis-smp8", "spe-ipis", 480, Expect::pass(check_ipis))
            .spe(SpeRun {
                kernel_args: " nohz_full=1-7",
                ..n1()
            })
            .vcpus(8)
            .proves(
                "`spe-ipis` on eight vCPUs over the host's CPUs (`nohz_full=1-7`, `spe-workload \
                 ipis 6 8`): seven targets, every call within 100 ms, and the recording decodes.",
            ),
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
        })
        .proves(
            "A recording of 3 s; at `SPE-RESTART-NOW` the runner SIGKILLs the backend and starts \
             it again with the same options on the same socket (`restart.log`): QEMU said \"SPE is \
             off until the backend is back\" and \"reconnected\" once each, the new backend logged \
             the vCPUs' registers restored, the interrupted recording has AUX data flagged \
             TRUNCATED and PARTIAL (the loss reported, not silent), and a second `perf record` \
             decodes with records and no decoder error. Negative control (by hand): a QEMU without \
             the channel client's reconnection and the register restore (`SPE_QEMU=`) must fail, \
             its loss silent.",
        ),
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
        })
        .proves(
            "`spe-qemu-launcher` with `-M virt,virtualization=on` and `--spe-cpu max`: the kernel \
             runs at EL2, which works only if `spe-qemu` gave its backend `--el2`.",
        ),
        // Deterministic replay. Two boots of the same run write the same
        // AUX bytes and deliver the fault on the same record.
        replay("spe-replay-a", proofs::check_spe_replay_first).proves(
            "The first boot of a replay pair: the backend `--deterministic` with a buffer full \
             armed after 300 records, QEMU under `-icount shift=0,sleep=off -seed 1` with its RTC \
             on the virtual clock from a fixed base; `perf record -e \
             arm_spe_0/ts_enable=1,pa_enable=1/u -c 1024 -- spe-workload 30` on CPU 1 has at least \
             1000 records without decoder errors and the armed fault delivered, and the backend \
             keeps its records (`--record`) for `spe-replay-b`.",
        ),
        replay("spe-replay-b", proofs::check_spe_replay).proves(
            "The second boot, judged against `spe-replay-a`'s: as many records, the same SHA-256 \
             over every AUX byte perf saved (`perf report -D`'s dump lines), the same faults \
             delivered on the same vCPUs at the same PMBPTR, and the same records written \
             (`--record`, compared record by record; a difference names each vCPU's first). \
             Negative control (by hand): without `--deterministic` the two boots differ.",
        ),
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
        })
        .proves(
            "Linux's \"perf: arm_spe: Properly set hw.state on failures\" (in Debian's 6.12 and \
             7.3, not in 6.1): `spe-workload no-room` profiles itself into a 4-page AUX buffer \
             whose tail it leaves 64 bytes in; with 64-byte aligned records (`--align 64`) the \
             buffer fills to each limit exactly, so that after the wrap the driver finds no room \
             and writes PMBLIMITR_EL1 = buffer base with E = 0. From the backend's register log, \
             the next write of PMSCR_EL1, PMBSR_EL1 or PMSFCR_EL1: with the fix PMSCR_EL1 = 0 (the \
             event stopped), without it PMBSR_EL1 = 0 with profiling still enabled (the IRQ \
             handler resuming); no kernel warning either way (`driver_bugs.rs`). Each kernel is \
             held to its own behaviour, so each run is the other's negative control.",
        ),
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
