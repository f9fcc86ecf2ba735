//! The stock-QEMU path: an unpatched QEMU (10.2.2 built here, Debian's
//! 11.1.3) with the TCG plugin (`plugin/`) feeding the paravirtual
//! device, which the guest's `virtio_spe` module drives.

use crate::kernels::KernelSpec;
use crate::proofs;
use crate::scenario::{Expect, Judge, RunOutput, Scenario, SpeRun};
use crate::scenarios::Set;
use crate::setup::QemuRelease;
use spe_protocol::profile::CpuProfile;

/// The scenarios of [`scenarios`]: the only ones the unpatched QEMU runs.
pub const SCENARIOS: &[&str] = &[
    "stock-profile",
    "stock-profile-single",
    "stock-single-smp2",
    "stock-no-plugin",
    "stock-validate",
    "stock-launcher",
    "stock-perf-test",
];

/// QEMU's single-threaded TCG: every vCPU on one thread.
const SINGLE_THREAD: &[&str] = &["-accel", "tcg,thread=single"];

/// Of [`SCENARIOS`], those run by hand on every kernel: perf's own test
/// takes minutes of guest time.
const BY_HAND: &[&str] = &["stock-perf-test"];

pub fn is_stock(name: &str) -> bool {
    SCENARIOS.contains(&name)
}

/// Of [`SCENARIOS`], those CI runs on Debian's QEMU too: the profile,
/// and its negative control (the same QEMU without the plugin).
const ON_DEBIAN_IN_CI: &[&str] = &["stock-profile", "stock-no-plugin"];

/// Which kernels run them on the stock QEMU `q`. The unpatched build:
/// the newest in CI, the middle one by hand (its build already costs CI
/// about 8 minutes); [`BY_HAND`] by hand on both. Debian's binary: the
/// newest only, [`ON_DEBIAN_IN_CI`] in CI and the rest by hand.
pub fn selection(name: &str, k: &KernelSpec, q: &QemuRelease) -> Option<Set> {
    if q.source().is_none() {
        return (k == KernelSpec::newest()).then(|| {
            if ON_DEBIAN_IN_CI.contains(&name) {
                Set::Ci
            } else {
                Set::ByHand
            }
        });
    }
    if BY_HAND.contains(&name) && (k == KernelSpec::newest() || k.private_apt) {
        Some(Set::ByHand)
    } else if k == KernelSpec::newest() {
        Some(Set::Ci)
    } else if k.private_apt {
        Some(Set::ByHand)
    } else {
        None
    }
}

pub fn scenarios() -> Vec<Scenario> {
    let run = |name, guest, expect, spe| Scenario::new(name, guest, 300, expect).spe(spe);
    // The device and `arm_spe_0` are there, and nothing samples.
    let no_records = |name, spe| {
        let expect = Expect::RunnerFailure {
            reason: "no records",
            console: "spe_records=0",
        };
        run(name, "stock-profile", expect, spe)
    };
    vec![
        run(
            "stock-profile",
            "stock-profile",
            Expect::pass(check_profile),
            SpeRun::stock(CpuProfile::NeoverseN1),
        )
        .proves(
            "The stock path (`SpeRun::stock`) on an unpatched QEMU: the core without SPE, \
             `vhost-user-test-device-pci,virtio-id=38` and `-plugin libspe_plugin.so` feeding the \
             backend's `--plugin-socket`, the guest's init loading `virtio_spe virtio_id=38`. \
             `spe-profile`'s whole proof on the plugin's samples, with a higher bar for the \
             workload's share (at least 85 % of the user-space records); `arm_spe_pmu` probed \
             nothing, no kernel warning. Negative control: `stock-no-plugin`.",
        ),
        // The same on one TCG thread (as under callgrind), with one
        // vCPU: QEMU calls no resume callback there, so the plugin's
        // clock starts at the first block a vCPU runs.
        run(
            "stock-profile-single",
            "stock-profile",
            Expect::pass(check_profile),
            SpeRun {
                qemu_args: SINGLE_THREAD,
                ..SpeRun::stock(CpuProfile::NeoverseN1)
            },
        )
        .vcpus(1)
        .proves(
            "`stock-profile`'s proof on one TCG thread (`-accel tcg,thread=single`) with one vCPU, \
             as under callgrind: QEMU calls no resume callback there, so the plugin's clock must \
             start at the first block a vCPU runs (otherwise every record is dated after the \
             workload's exit).",
        ),
        // One thread for two vCPUs, which QEMU 10.2.2 instruments wrongly
        // (plugin/src/threads.rs): the plugin must refuse to sample and
        // the guest run on, not QEMU abort.
        no_records(
            "stock-single-smp2",
            SpeRun {
                qemu_args: SINGLE_THREAD,
                ..SpeRun::stock(CpuProfile::NeoverseN1)
            },
        )
        .proves(
            "Two vCPUs on one TCG thread, which QEMU 10.2.2 instruments wrongly \
             (`plugin/src/threads.rs`): the plugin must refuse to sample and say so on QEMU's \
             stderr, and the runner report the failure \"no records\" with `spe_records=0`, the \
             guest running on rather than QEMU aborting.",
        ),
        // The negative control: the same guest without `-plugin`. The
        // device is there and the driver probes, but nothing samples.
        no_records(
            "stock-no-plugin",
            SpeRun {
                plugin: false,
                ..SpeRun::stock(CpuProfile::NeoverseN1)
            },
        )
        .proves(
            "The negative control of the stock path: `stock-profile` without `-plugin`; the device \
             and `arm_spe_0` are there and nothing samples, so the runner must report the failure \
             \"no records\" with `spe_records=0`.",
        ),
        // The plugin's promise that a load or store it takes at its TB's
        // start has the address it would have at the instruction
        // (`a64::writes`), checked at every such instruction of a run.
        run(
            "stock-validate",
            "stock-profile",
            Expect::pass(check_validate),
            SpeRun {
                plugin_validate: true,
                ..SpeRun::stock(CpuProfile::NeoverseN1)
            },
        )
        .proves(
            "`stock-profile`'s proof with `-plugin …,validate=on`: every load or store address the \
             plugin took at its TB's start (`spe_protocol::a64::writes`) is computed again from \
             the registers at its instruction, and none differs (the summary in `plugin.log`). \
             Negative control (by hand): a `writes` without pre- and post-indexed writebacks fails \
             with mismatches.",
        ),
        // `spe-qemu --spe-stock` from a plain command line, installed as
        // `cargo xtask install` does (the plugin under lib/).
        run(
            "stock-launcher",
            "stock-launcher",
            Expect::pass(check_launcher),
            SpeRun {
                launcher: true,
                ..SpeRun::stock(CpuProfile::NeoverseN1)
            },
        )
        .proves(
            "`spe-qemu --spe-stock --spe-qemu <the unpatched QEMU>` from a plain command line, \
             installed as `cargo xtask install` does (the plugin found in \
             `lib/vhost-device-spe/`): it adds the device, the plugin and the backend, `arm_spe_0` \
             is there, and `perf record` of `spe-workload 3` decodes records without errors.",
        ),
        // perf's own `perf test 'Arm SPE'` on the paravirtual PMU, which
        // takes arm_spe_pmu's name and format: as `perf-test-spe`, on
        // the plugin's samples of the guest (no icount: the plugin's
        // clock is the host's).
        Scenario::new(
            "stock-perf-test",
            "perf-test-spe",
            900,
            Expect::pass(crate::perf_test::check_perf_test_spe),
        )
        .spe(SpeRun::stock(CpuProfile::NeoverseN1))
        .proves(
            "perf's own `perf test 'Arm SPE'` on the paravirtual PMU (named and laid out as \
             `arm_spe_pmu`'s) with the plugin's samples and no icount (the plugin's clock is the \
             host's), judged as `perf-test-spe`: its parts that wait a fixed second for perf fail \
             where perf starts slower than that, and the stock set-up's core has no discard mode.",
        ),
    ]
}

/// The plugin's summary (`plugin.log`): addresses taken at a TB's start
/// were checked at their instruction, and none differed.
fn check_validate(out: &RunOutput) -> Result<(), String> {
    let log = std::fs::read_to_string(out.dir.join("plugin.log"))
        .map_err(|e| format!("plugin.log: {e}"))?;
    match validation(&log) {
        Some((checked, 0)) if checked > 0 => check_profile(out),
        Some((checked, differed)) => Err(format!(
            "{differed} of {checked} addresses taken at a TB's start differed at their instruction"
        )),
        None => Err("plugin.log has no validation summary".into()),
    }
}

/// (checked, differed) from the summary line of a `validate=on` run (not
/// from the lines it writes for the first addresses that differed).
fn validation(log: &str) -> Option<(u64, u64)> {
    let summary = log
        .lines()
        .filter(|l| l.contains("checked at their instruction"))
        .find_map(|l| l.rsplit_once("validate: "))?
        .1;
    let mut n = summary
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|w| w.parse().ok());
    Some((n.next()?, n.next()?))
}

/// The device's PMU is there and perf decoded its records.
fn check_launcher(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.is("pmu", "present");
    j.positive(&["launcher_records"]);
    j.zero(&["launcher_bad"]);
    j.finish()
}

/// `spe-profile`'s proof, with the bar for the workload's share
/// (85 % of the user-space records), on a guest CPU without SPE.
fn check_profile(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.want("workload_share_pct", ">= 85", |v| v >= 85.0);
    j.zero(&["native_spe_probes", "kernel_warnings"]);
    j.finish()?;
    proofs::check_spe_profile(out)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_list_names_every_stock_scenario() {
        let names: Vec<&str> = super::scenarios().iter().map(|s| s.name).collect();
        assert_eq!(names, super::SCENARIOS);
    }

    #[test]
    fn the_validation_summary_not_the_lines_before_it() {
        let log = "spe-plugin: validate: 0x4213c0 (0xa90363f7) taken at its TB's start with VA \
                   0xfffff2722c70, 0xfffff2722c30 at the instruction (0x7f1e04a08bb0)\n\
                   spe-plugin: 304800 selections: ...; validate: 2111 addresses taken at a TB's \
                   start checked at their instruction, 73 differed\n";
        assert_eq!(super::validation(log), Some((2111, 73)));
        assert_eq!(super::validation("spe-plugin: 1 selections\n"), None);
    }
}
