//! Hypervisors under test: the guest kernel runs at EL2 (`-M
//! virt,virtualization=on`) with KVM in one of its modes, and KVM runs a
//! guest of its own (`spe-kvm`, a VMM of ours) while the host records SPE
//! system-wide. That is when KVM's SPE code runs: the buffer's ownership
//! and traps in MDCR_EL2, PMSCR_EL1 saved, zeroed and restored around
//! entry in nVHE and protected mode, `ID_AA64DFR0_EL1.PMSVer` hidden.
//!
//! What the guest sees: KVM gives it no SPE, so its SPE register
//! accesses are UNDEFINED (KVM traps them with MDCR_EL2.TPMS and E2PB
//! 0b00 and injects an undefined instruction), but for PMBIDR_EL1:
//! neither MDCR_EL2 bit traps it, only FEAT_FGT's HDFGRTR_EL2 can, and
//! Neoverse N1 has no FGT. So the guest reads it, with P set: the
//! buffer's owning Exception level is above the guest's.
//!
//! What the records may hold: nothing profiles the guest's own EL1. In VHE the host's buffer stays owned by EL2
//! (MDCR_EL2.E2PB 0b00) while the guest runs, and the guest's
//! PMSCR_EL1, which controls sampling at EL1 and EL0 of the guest
//! (`StatisticalProfilingEnabled`, Table D17-1's EL1 row with E2H
//! clear for the guest's regime), is the one KVM zeroes at
//! initialisation; in nVHE and protected mode KVM stops the host's
//! profiling before entry (PMSCR_EL1 = 0, then drains the buffer). Either
//! way no record may carry a PC of the guest's code: the check is that
//! none does, whatever perf event the host asked for (perf's SPE PMU has
//! no attribute that asks for guest samples).

use crate::faults::armed_on_the_vm;
use crate::kernels::KernelSpec;
use crate::scenario::{Expect, Expected, Judge, OnMarker, RunOutput, Scenario, SpeRun};
use crate::scenarios::Set;
use spe_protocol::control::FaultKind;
use spe_protocol::profile::CpuProfile;

/// KVM's modes, as `kvm-arm.mode` names them and the guest script
/// reports them.
pub const MODES: &[&str] = &["vhe", "nvhe", "protected"];

/// The scenario of `mode`, and its copy with [`FAULTS`].
fn name(mode: &str, faults: bool) -> &'static str {
    match (mode, faults) {
        ("vhe", false) => "kvm-guest-vhe",
        ("nvhe", false) => "kvm-guest-nvhe",
        (_, false) => "kvm-guest-protected",
        ("vhe", true) => "kvm-fault-vhe",
        ("nvhe", true) => "kvm-fault-nvhe",
        (_, true) => "kvm-fault-protected",
    }
}

/// What `spe-kvm` logs as it enters the guest.
const RUNNING: &str = "SPE-KVM-GUEST-RUNNING";

/// The faults armed on vCPU 1, where the script runs the VMM, once the
/// guest runs: a buffer full at the next record, then a stage 1
/// translation fault at level 3 fifty records later.
const FAULTS: &[&[&str]] = &[
    &["arm", "buffer-full", "--vcpu", "1", "--next-record"],
    &[
        "arm",
        "stage1",
        "--fault",
        "translation",
        "--level",
        "3",
        "--vcpu",
        "1",
        "--after-records",
        "50",
    ],
];

/// Their PMBSR_EL1: S and BSC 1 (buffer filled); EC 0x24, S and FSC
/// 0x07 (translation fault, level 3).
const BUFFER_FULL_PMBSR: u64 = 0x2_0001;
const STAGE1_PMBSR: u64 = 0x9002_0007;

pub(crate) fn kernel_args(mode: &str) -> &'static str {
    match mode {
        // The default of a kernel at EL2 with VHE: 7.3 refuses the
        // option's "vhe" as malformed.
        "vhe" => "",
        "nvhe" => " kvm-arm.mode=nvhe",
        _ => " kvm-arm.mode=protected",
    }
}

pub fn is_kvm(name: &str) -> bool {
    name.starts_with("kvm-guest-") || name.starts_with("kvm-fault-")
}

/// The KVM runs CI makes, on the newest kernel: VHE, the mode a kernel
/// at EL2 takes by default. The others are run by hand.
const IN_CI: &[&str] = &["kvm-guest-vhe", "kvm-fault-vhe"];

/// Which set runs the KVM scenario `name` on `k` (None: not at all);
/// None for a scenario that is not one of them.
pub fn selection(name: &str, k: &KernelSpec) -> Option<Option<Set>> {
    let ci = k == KernelSpec::newest() && IN_CI.contains(&name);
    is_kvm(name).then_some(Some(if ci { Set::Ci } else { Set::ByHand }))
}

/// Two scenarios per mode: the guest's run, and the same with
/// [`FAULTS`] armed while the guest runs.
pub fn scenarios() -> Vec<Scenario> {
    MODES
        .iter()
        .flat_map(|&mode| [(mode, false), (mode, true)])
        .map(|(mode, faults)| {
            let spe = SpeRun {
                virtualization: true,
                kernel_args: kernel_args(mode),
                // Every SPE register access, for KVM's sequence.
                log: Some("debug"),
                on_marker: faults.then_some(OnMarker::ctl(RUNNING, FAULTS)),
                ..SpeRun::new(CpuProfile::NeoverseN1)
            };
            let expect = Expect::pass(move |o| {
                let ctl = std::fs::read_to_string(o.dir.join("ctl.log")).ok();
                check(
                    o,
                    mode,
                    faults.then_some(ctl.as_deref().unwrap_or_default()),
                )
            });
            let guest = if faults { "kvm-fault" } else { "kvm-guest" };
            Scenario::new(name(mode, faults), guest, 600, expect)
                .spe(spe)
                .proves(proves(mode, faults))
        })
        .collect()
}

fn proves(mode: &str, faults: bool) -> String {
    let run = format!(
        "The kernel at EL2 with `kvm-arm.mode={mode}` runs a KVM guest (`spe-kvm`: one vCPU \
         pinned to CPU 1, loads, stores and branches at IPA 0x1000000000, MMU off) between two \
         runs of `spe-workload` on CPU 0, all under `perf record -e \
         arm_spe_0/ts_enable=1,period=4096/ -a -m ,8`"
    );
    let guest = "the guest completes, reads PMSVer 0, and each of its SPE register accesses \
         (PMSCR_EL1 and PMBLIMITR_EL1 read, PMSCR_EL1 written) is UNDEFINED (an exception with \
         EC 0), and PMBIDR_EL1, which nothing but FEAT_FGT traps, reads with P set; no host \
         record has a PC of the guest's code";
    let pkvm = if mode == "protected" {
        " A stage 2 fault of the host's buffer (pKVM's host stage 2, docs/results/kvm.md) makes \
         the run an expected failure, the guest's checks still applied."
    } else {
        ""
    };
    if faults {
        return format!(
            "{run}; once the guest runs, `vhost-device-spe ctl arm` puts a buffer full and then \
             a stage 1 translation fault on vCPU 1: both are delivered there, the driver reports \
             the stage 1 fault (\"Unexpected buffer fault\" on CPU 1, PMBSR 0x90020007) \
             while the guest runs, and {guest}.{pkvm}"
        );
    }
    format!(
        "{run}: {guest}; the host has records before, during and after the guest's run, with \
         no decoder error and no driver error, and PMBIRQs; in nVHE and protected mode the \
         backend's register log shows KVM saving and zeroing the host's buffer at entry and \
         restoring it at exit.{pkvm}"
    )
}

/// One SPE register access of the backend's debug log: "vCPU 0 MRS
/// PMSCR_EL1 0x0 -> Ok(43)" as (vCPU, is a write, register, the value
/// written or read).
fn access(line: &str) -> Option<(u32, bool, &str, u64)> {
    let rest = &line[line.find("] vCPU ")? + 2..];
    let t: Vec<&str> = rest.split_whitespace().collect();
    let [_, vcpu, op, reg, written, "->", result] = t[..] else {
        return None;
    };
    let value = match op {
        "MSR" => u64::from_str_radix(written.strip_prefix("0x")?, 16).ok()?,
        "MRS" => result
            .strip_prefix("Ok(")?
            .strip_suffix(')')?
            .parse()
            .ok()?,
        _ => return None,
    };
    Some((vcpu.parse().ok()?, op == "MSR", reg, value))
}

/// KVM's entries with a host buffer, as the backend's register log
/// shows them on each vCPU, and those whose exit restored what the
/// entry saved.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Entries {
    pub entries: u64,
    pub restored: u64,
}

/// nVHE and protected mode's `__debug_save_spe`: PMBLIMITR_EL1 read
/// with E set, PMSCR_EL1 read (PMSCR_EL12 from an hVHE hypervisor) and
/// written 0, and in newer kernels (7.3's; not 6.1's) PMBLIMITR_EL1
/// written 0 too (the drain's barriers are not register accesses); then
/// `__debug_restore_spe` at exit: PMBLIMITR_EL1 (if it was zeroed) and
/// PMSCR_EL1 written back, before any other access of that vCPU.
pub fn entries(log: &str) -> Entries {
    let is_pmscr = |r: &str| r == "PMSCR_EL1" || r == "PMSCR_EL12";
    // Per vCPU: the accesses since a PMBLIMITR_EL1 read with E set, as
    // (is a write, is PMBLIMITR_EL1, value).
    let mut seen: std::collections::HashMap<u32, Vec<(bool, bool, u64)>> = Default::default();
    let mut out = Entries::default();
    for (vcpu, write, reg, value) in log.lines().filter_map(access) {
        let limitr = reg == "PMBLIMITR_EL1";
        if !limitr && !is_pmscr(reg) {
            seen.remove(&vcpu);
            continue;
        }
        let run = seen.entry(vcpu).or_default();
        if !write && limitr && value & 1 != 0 {
            run.clear();
        } else if run.is_empty() {
            continue;
        }
        run.push((write, limitr, value));
        let [(false, true, lim), (false, false, scr), (true, false, 0), ref rest @ ..] = run[..]
        else {
            if run.len() >= 3 {
                run.clear();
            }
            continue;
        };
        let restores_scr = |&(w, l, v): &(bool, bool, u64)| w && !l && v == scr;
        let restores_lim = |&(w, l, v): &(bool, bool, u64)| w && l && v == lim;
        match rest {
            [] => out.entries += 1,
            // PMBLIMITR_EL1 zeroed, then given back before PMSCR_EL1.
            [(true, true, 0)] => {}
            [(true, true, 0), l] if restores_lim(l) => {}
            [(true, true, 0), l, s] if restores_lim(l) && restores_scr(s) => {
                out.restored += 1;
                run.clear();
            }
            // Kernels that leave PMBLIMITR_EL1 alone: PMSCR_EL1 back.
            [s] if restores_scr(s) => {
                out.restored += 1;
                run.clear();
            }
            _ => run.clear(),
        }
    }
    out
}

/// PMBIDR_EL1.P: the Profiling Buffer is owned by a higher Exception
/// level than the reader's.
const PMBIDR_P: u64 = 1 << 4;

/// The ESR's exception class.
fn ec(esr: u64) -> u64 {
    esr >> 26 & 0x3f
}

/// What [`scenarios`] proves, in `mode`; with `ctl_log` (the runner's
/// `ctl.log`), for the run with [`FAULTS`].
pub fn check(out: &RunOutput, mode: &str, ctl_log: Option<&str>) -> Result<(), String> {
    let j = Judge::new(out);
    j.is("kvm_mode", mode);
    j.zero(&[
        "perf_record_rc",
        "kvm_rc",
        "kvm_pmsver",
        "spe_bad_packets",
        "host_guest_pc_records",
        "kernel_warnings",
    ]);
    j.check(j.text("kvm_unexpected_esr").is_none(), || {
        format!(
            "the guest took an unexpected exception, ESR {}",
            j.text("kvm_unexpected_esr").unwrap_or_default()
        )
    });
    for access in [
        "kvm_pmscr_read_esr",
        "kvm_pmblimitr_read_esr",
        "kvm_pmbidr_read_esr",
        "kvm_pmscr_write_esr",
    ] {
        let Some(esr) = j.hex(access) else { continue };
        if esr == u64::MAX && access == "kvm_pmbidr_read_esr" {
            // Untrapped without FEAT_FGT: it must say the buffer is not
            // the guest's.
            if let Some(pmbidr) = j.hex("kvm_pmbidr") {
                j.check(pmbidr & PMBIDR_P != 0, || {
                    format!("PMBIDR_EL1 {pmbidr:#x} read by the guest without P")
                });
            }
            continue;
        }
        j.check(esr != u64::MAX, || format!("{access}: not trapped"));
        j.check(esr == u64::MAX || ec(esr) == 0, || {
            format!("{access} {esr:#x}: EC {:#x}, not UNDEFINED", ec(esr))
        });
    }
    j.is("kvm_done", "0x1");
    if lost_to_pkvm(&j, mode) {
        return j.finish();
    }
    j.zero(&["fault_stage2_msgs"]);
    j.positive(&[
        "spe_records",
        // The PC range test matches where PCs are: spe-workload's.
        "host_static_pc_records",
        "host_records_before",
        "host_records_during",
        "host_records_after",
    ]);
    // In VHE the host's profiling goes on while the guest runs (its EL2
    // is not the guest's), so its buffer fills then; in nVHE and
    // protected mode KVM stops it at entry.
    if mode == "vhe" {
        j.positive(&["kvm_spe_irqs_during"]);
    }
    // A full AUX buffer is a loss perf reports (aux_truncated): allowed.
    // One not reported would show as a decoder error, or as no records
    // after the guest's run (profiling not given back at exit).
    // The register log against KVM's sequence: nVHE and protected mode
    // save and restore the host's buffer at every entry with one; VHE
    // leaves it to EL2 (no such sequence).
    if out.backend_log.contains(" MSR ") {
        let e = entries(&out.backend_log);
        if mode == "vhe" {
            j.check(e.entries == 0, || {
                format!(
                    "VHE: {} entries saved and zeroed the host's buffer",
                    e.entries
                )
            });
        } else {
            j.check(e.entries > 0, || {
                format!("{mode}: no entry saved the host's buffer")
            });
            // The last may not have exited when the log ends.
            j.check(e.restored + 1 >= e.entries, || {
                format!(
                    "{mode}: {} entries, {} exits restored them",
                    e.entries, e.restored
                )
            });
        }
    }
    if let (Some(before), Some(after)) = (j.num("spe_irqs_before"), j.num("spe_irqs_after")) {
        j.check(after > before, || {
            format!("no PMBIRQ while recording ({before} before, {after} after)")
        });
    }
    match ctl_log {
        None => j.zero(&["fault_msgs"]),
        Some(log) => check_faults(&j, out, log),
    }
    j.finish()
}

/// Whether the run is protected mode's known failure (docs/results/kvm.md):
/// pKVM replaces a block of the host's stage 2 with a table holding only
/// the page it needed (arch/arm64/kvm/hyp/pgtable.c: "Accesses beyond
/// 'end' that fall within the new table will be mapped lazily"), which a
/// CPU's access faults back in but an SPE buffer write does not: the
/// write reports a stage 2 fault (EC 0x25) and arm_spe_pmu stops
/// profiling on that CPU. Then the host's side cannot be judged; the
/// guest's checks still hold, and the run is an expected failure. In
/// another mode such a fault is a failure.
fn lost_to_pkvm(j: &Judge, mode: &str) -> bool {
    if mode != "protected" || j.num("fault_stage2_msgs").is_none_or(|n| n == 0) {
        return false;
    }
    j.expected(Expected::Fail(format!(
        "protected mode: the buffer's write took a stage 2 fault in pKVM's host stage 2 \
         ({} driver line(s), the first PMBSR {}), and profiling stopped there",
        j.num("fault_stage2_msgs").unwrap_or(0),
        j.text("fault_pmbsr").unwrap_or("none")
    )));
    true
}

/// [`FAULTS`]: armed on the running VM, delivered on vCPU 1, and the
/// stage 1 fault reported by the host's driver while the guest ran.
fn check_faults(j: &Judge, out: &RunOutput, ctl_log: &str) {
    j.check(armed_on_the_vm(ctl_log), || {
        format!("ctl did not arm every fault on the VM: {ctl_log:?}")
    });
    let delivered: Vec<_> = out.control.delivered().collect();
    let on_vcpu1 = |kind: fn(&FaultKind) -> bool, pmbsr: u64| {
        delivered
            .iter()
            .any(|f| f.vcpu == 1 && kind(&f.fault) && f.pmbsr.0 == pmbsr)
    };
    j.check(
        on_vcpu1(|k| matches!(k, FaultKind::BufferFull), BUFFER_FULL_PMBSR),
        || format!("no buffer full delivered on vCPU 1 with PMBSR {BUFFER_FULL_PMBSR:#x}: {delivered:x?}"),
    );
    j.check(
        on_vcpu1(|k| matches!(k, FaultKind::Stage1 { .. }), STAGE1_PMBSR),
        || {
            format!(
                "no stage 1 fault delivered on vCPU 1 with PMBSR {STAGE1_PMBSR:#x}: {delivered:x?}"
            )
        },
    );
    j.is("fault_msg", "Unexpected_buffer_fault");
    j.is("fault_cpu", "1");
    j.check(j.hex("fault_pmbsr") == Some(STAGE1_PMBSR), || {
        format!(
            "the driver's error line has PMBSR {}, want {STAGE1_PMBSR:#x}",
            j.text("fault_pmbsr").unwrap_or("none")
        )
    });
    // The driver flags no AUX data for a fatal fault (the catalogue's
    // fault-stage1-translation); truncation from a full buffer is
    // allowed here as in every KVM run.
    j.positive(&["fault_msgs_during"]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn passing(mode: &str) -> RunOutput {
        RunOutput::from_pairs(&[
            ("kvm_mode", mode),
            ("perf_record_rc", "0"),
            ("kvm_rc", "0"),
            ("kvm_dfr0", "0x10305408"),
            ("kvm_pmsver", "0"),
            ("kvm_pmscr_read_esr", "0x2000000"),
            ("kvm_pmblimitr_read_esr", "0x2000000"),
            ("kvm_pmbidr_read_esr", "0xffffffffffffffff"),
            ("kvm_pmbidr", "0x10"),
            ("kvm_pmscr_write_esr", "0x2000000"),
            ("kvm_done", "0x1"),
            ("spe_records", "5000"),
            ("spe_bad_packets", "0"),
            ("host_guest_pc_records", "0"),
            ("host_static_pc_records", "900"),
            ("host_records_before", "100"),
            ("host_records_during", "100"),
            ("host_records_after", "100"),
            ("spe_irqs_before", "0"),
            ("spe_irqs_after", "40"),
            ("kvm_spe_irqs_during", "5"),
            ("aux_truncated", "0"),
            ("fault_msgs", "0"),
            ("fault_stage2_msgs", "0"),
            ("kernel_warnings", "0"),
        ])
    }

    /// What a run with [`FAULTS`] reports when they landed as armed.
    fn faulted(mode: &str) -> RunOutput {
        let mut out = passing(mode)
            .with("fault_msgs", "1")
            .with("fault_msgs_during", "1")
            .with("fault_msg", "Unexpected_buffer_fault")
            .with("fault_cpu", "1")
            .with("fault_pmbsr", "0x0000000090020007");
        out.control.faults = [
            (FaultKind::BufferFull, BUFFER_FULL_PMBSR),
            (
                FaultKind::Stage1 {
                    fault: spe_protocol::control::XlatFault::Translation,
                    level: 3,
                },
                STAGE1_PMBSR,
            ),
        ]
        .into_iter()
        .enumerate()
        .map(
            |(i, (fault, pmbsr))| spe_protocol::control::FaultDeliveredData {
                id: i as u32 + 1,
                vcpu: 1,
                fault,
                delivered: true,
                why: None,
                pmbsr: spe_protocol::control::Hex(pmbsr),
                pmbptr: spe_protocol::control::Hex(0),
            },
        )
        .collect();
        out
    }

    const CTL_LOG: &str = "$ ctl arm buffer-full\n{\"id\":1,\"pending\":false}\nexit status: 0\n\
                           $ ctl arm stage1\n{\"id\":2,\"pending\":false}\nexit status: 0\n";

    /// A log line of the backend at debug level.
    fn line(vcpu: u32, op: &str, reg: &str, value: u64, result: u64) -> String {
        format!(
            "[2026-12-03T08:00:00Z DEBUG vhost_device_spe::qemu::requests] vCPU {vcpu} {op} {reg} \
             {value:#x} -> Ok({result})"
        )
    }

    fn entry(vcpu: u32, scr: &str, restore: bool) -> Vec<String> {
        let lim = 0xffff_8000_804c_9001u64;
        let mut v = vec![
            line(vcpu, "MRS", "PMBLIMITR_EL1", 0, lim),
            line(vcpu, "MRS", scr, 0, 0x2b),
            line(vcpu, "MSR", scr, 0, 0),
            line(vcpu, "MSR", "PMBLIMITR_EL1", 0, 0),
        ];
        if restore {
            v.push(line(vcpu, "MSR", "PMBLIMITR_EL1", lim, 0));
            v.push(line(vcpu, "MSR", scr, 0x2b, 0));
        }
        v
    }

    /// An older kernel's entry: PMSCR_EL1 alone saved and restored.
    fn old_entry(vcpu: u32, restore: Option<u64>) -> Vec<String> {
        let mut v = vec![
            line(vcpu, "MRS", "PMBLIMITR_EL1", 0, 0xffff_8000_0821_c001),
            line(vcpu, "MRS", "PMSCR_EL1", 0, 0x2b),
            line(vcpu, "MSR", "PMSCR_EL1", 0, 0),
        ];
        v.extend(restore.map(|scr| line(vcpu, "MSR", "PMSCR_EL1", scr, 0)));
        v
    }

    #[test]
    fn kvms_save_and_restore_are_read_from_the_register_log() {
        let log = |parts: &[Vec<String>]| parts.concat().join("\n");
        let rows: &[(String, Entries)] = &[
            (
                log(&[entry(0, "PMSCR_EL1", true)]),
                Entries {
                    entries: 1,
                    restored: 1,
                },
            ),
            // hVHE's hypervisor reaches PMSCR_EL1 as PMSCR_EL12; two
            // vCPUs interleave.
            (
                log(&[entry(1, "PMSCR_EL12", true), entry(0, "PMSCR_EL1", true)]),
                Entries {
                    entries: 2,
                    restored: 2,
                },
            ),
            // An exit that does not give the buffer back.
            (
                log(&[entry(0, "PMSCR_EL1", false), entry(0, "PMSCR_EL1", true)]),
                Entries {
                    entries: 2,
                    restored: 1,
                },
            ),
            // 6.1: PMBLIMITR_EL1 left alone; a restore of another value
            // is none.
            (
                log(&[old_entry(0, Some(0x2b)), old_entry(1, Some(0x2b))]),
                Entries {
                    entries: 2,
                    restored: 2,
                },
            ),
            (
                log(&[old_entry(0, Some(0x3)), old_entry(0, None)]),
                Entries {
                    entries: 2,
                    restored: 0,
                },
            ),
            // The driver's own accesses are no entry.
            (
                log(&[vec![
                    line(0, "MRS", "PMBSR_EL1", 0, 0x20001),
                    line(0, "MSR", "PMBLIMITR_EL1", 0xffff_8000_804c_9001, 0),
                    line(0, "MSR", "PMSCR_EL1", 0, 0),
                    line(0, "MSR", "PMBLIMITR_EL1", 0, 0),
                ]]),
                Entries::default(),
            ),
        ];
        for (text, want) in rows {
            assert_eq!(&entries(text), want, "{text}");
        }
    }

    #[test]
    fn each_mode_has_its_scenario_and_kernel_option() {
        let all = scenarios();
        assert_eq!(all.len(), 2 * MODES.len());
        let guests: Vec<_> = all.iter().filter(|s| s.guest == "kvm-guest").collect();
        for (s, mode) in guests.iter().zip(MODES) {
            assert!(is_kvm(s.name));
            let spe = s.spe.as_ref().unwrap();
            assert!(spe.virtualization);
            let arg = format!(" kvm-arm.mode={mode}");
            assert_eq!(spe.kernel_args, if *mode == "vhe" { "" } else { &arg });
            assert_eq!(check(&passing(mode), mode, None), Ok(()));
        }
    }

    #[test]
    fn what_the_guest_and_the_host_saw_must_hold() {
        let rows: &[(&str, &str, &str)] = &[
            ("kvm_mode", "nvhe", "kvm_mode"),
            ("kvm_pmsver", "1", "kvm_pmsver"),
            (
                "kvm_pmblimitr_read_esr",
                "0xffffffffffffffff",
                "not trapped",
            ),
            ("kvm_pmbidr", "0x0", "without P"),
            ("kvm_pmscr_write_esr", "0x62000000", "not UNDEFINED"),
            ("host_guest_pc_records", "3", "host_guest_pc_records"),
            ("host_records_during", "0", "host_records_during"),
            ("spe_irqs_after", "0", "no PMBIRQ"),
            ("kvm_done", "0x0", "kvm_done"),
            ("kvm_spe_irqs_during", "0", "kvm_spe_irqs_during"),
            ("kvm_unexpected_esr", "0x96000000", "unexpected exception"),
        ];
        for &(key, value, why) in rows {
            let e = check(&passing("vhe").with(key, value), "vhe", None).unwrap_err();
            assert!(e.contains(why), "{key}={value}: {e}");
        }
        assert!(check(&RunOutput::from_line(""), "vhe", None).is_err());
        // Trapped, PMBIDR_EL1 is UNDEFINED like the others (FEAT_FGT).
        let trapped = passing("vhe").with("kvm_pmbidr_read_esr", "0x2000000");
        assert_eq!(check(&trapped, "vhe", None), Ok(()));
        // A driver error in a run without faults.
        let e = check(&passing("vhe").with("fault_msgs", "1"), "vhe", None).unwrap_err();
        assert!(e.contains("fault_msgs"), "{e}");
    }

    #[test]
    fn a_stage2_buffer_fault_is_expected_in_protected_mode_only() {
        let lost = passing("protected")
            .with("fault_stage2_msgs", "1")
            .with("fault_msgs", "1")
            .with("fault_pmbsr", "0x0000000094020007")
            .with("host_records_after", "0");
        crate::scenario::take_expected();
        assert_eq!(check(&lost, "protected", None), Ok(()));
        assert!(matches!(
            crate::scenario::take_expected()[..],
            [Expected::Fail(ref why)] if why.contains("0x0000000094020007")
        ));
        // The guest's side is still judged.
        let e = check(&lost.with("kvm_pmsver", "1"), "protected", None).unwrap_err();
        assert!(e.contains("kvm_pmsver"), "{e}");
        // Elsewhere it fails.
        let nvhe = passing("nvhe").with("fault_stage2_msgs", "1");
        assert!(check(&nvhe, "nvhe", None)
            .unwrap_err()
            .contains("fault_stage2_msgs"));
        crate::scenario::take_expected();
    }

    #[test]
    fn ci_runs_vhe_on_the_newest_kernel_and_the_rest_is_by_hand() {
        use crate::kernels::MATRIX;
        for s in scenarios() {
            for k in MATRIX {
                let ci = k == KernelSpec::newest() && s.name.ends_with("-vhe");
                let want = if ci { Set::Ci } else { Set::ByHand };
                assert_eq!(
                    selection(s.name, k),
                    Some(Some(want)),
                    "{} on {}",
                    s.name,
                    k.name
                );
            }
        }
        assert_eq!(selection("stock", KernelSpec::newest()), None);
    }

    #[test]
    fn the_faults_must_land_on_the_guests_cpu_while_it_runs() {
        for mode in MODES {
            assert_eq!(check(&faulted(mode), mode, Some(CTL_LOG)), Ok(()));
        }
        let rows: &[(&str, &str, &str)] = &[
            ("fault_msgs_during", "0", "fault_msgs_during"),
            ("fault_cpu", "0", "fault_cpu"),
            ("fault_msg", "none", "fault_msg"),
            ("fault_pmbsr", "0x0000000090020004", "PMBSR"),
        ];
        for &(key, value, why) in rows {
            let e = check(&faulted("nvhe").with(key, value), "nvhe", Some(CTL_LOG)).unwrap_err();
            assert!(e.contains(why), "{key}={value}: {e}");
        }
        // Pending for the next VM; delivered elsewhere; not delivered.
        let pending = CTL_LOG.replace("\"id\":2,\"pending\":false", "\"id\":2,\"pending\":true");
        assert!(check(&faulted("vhe"), "vhe", Some(&pending)).is_err());
        let mut elsewhere = faulted("vhe");
        elsewhere.control.faults[1].vcpu = 0;
        assert!(check(&elsewhere, "vhe", Some(CTL_LOG))
            .unwrap_err()
            .contains("stage 1"));
        let mut undelivered = faulted("vhe");
        undelivered.control.faults[0].delivered = false;
        assert!(check(&undelivered, "vhe", Some(CTL_LOG))
            .unwrap_err()
            .contains("buffer full"));
        // The run without faults must not pass as one with them.
        assert!(check(&passing("vhe"), "vhe", Some(CTL_LOG)).is_err());
    }
}
