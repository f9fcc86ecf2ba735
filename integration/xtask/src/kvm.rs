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

use crate::kernels::KernelSpec;
use crate::scenario::{Expect, Judge, RunOutput, Scenario, SpeRun};
use crate::scenarios::Set;
use spe_protocol::profile::CpuProfile;

/// KVM's modes, as `kvm-arm.mode` names them and the guest script
/// reports them.
pub const MODES: &[&str] = &["vhe", "nvhe", "protected"];

/// The scenario of `mode`.
fn name(mode: &str) -> &'static str {
    match mode {
        "vhe" => "kvm-guest-vhe",
        "nvhe" => "kvm-guest-nvhe",
        _ => "kvm-guest-protected",
    }
}

fn kernel_args(mode: &str) -> &'static str {
    match mode {
        // The default of a kernel at EL2 with VHE: 7.3 refuses the
        // option's "vhe" as malformed.
        "vhe" => "",
        "nvhe" => " kvm-arm.mode=nvhe",
        _ => " kvm-arm.mode=protected",
    }
}

pub fn is_kvm(name: &str) -> bool {
    name.starts_with("kvm-guest-")
}

/// Which set runs the KVM scenario `name` on `k` (None: not at all);
/// None for a scenario that is not one of them. Every mode on every
/// kernel is run by hand for now.
pub fn selection(name: &str, _k: &KernelSpec) -> Option<Option<Set>> {
    is_kvm(name).then_some(Some(Set::ByHand))
}

/// One scenario per mode.
pub fn scenarios() -> Vec<Scenario> {
    MODES
        .iter()
        .map(|&mode| {
            Scenario::new(name(mode), "kvm-guest", 600, Expect::pass(move |o| check(o, mode)))
                .spe(SpeRun {
                    virtualization: true,
                    kernel_args: kernel_args(mode),
                    // Every SPE register access, for KVM's sequence.
                    log: Some("debug"),
                    ..SpeRun::new(CpuProfile::NeoverseN1)
                })
                .proves(format!(
                    "The kernel at EL2 with `kvm-arm.mode={mode}` runs a KVM guest (`spe-kvm`: \
                     one vCPU, loads, stores and branches at IPA 0x1000000000, MMU off) between \
                     two runs of `spe-workload`, all under `perf record -e arm_spe_0/ts_enable=1,period=4096/ \
                     -a -m ,8`: the guest completes, reads PMSVer 0, and each of its SPE register \
                     accesses (PMSCR_EL1 and PMBLIMITR_EL1 read, PMSCR_EL1 written) is \
                     UNDEFINED (an exception with EC 0), and PMBIDR_EL1, which nothing but \
                     FEAT_FGT traps, reads with P set; no host record has a PC of the guest's \
                     code; the host has records before, during and after the guest's run, with \
                     no decoder error, and PMBIRQs."
                ))
        })
        .collect()
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
/// written 0, PMBLIMITR_EL1 written 0 (the drain's barriers are not
/// register accesses); then `__debug_restore_spe` at exit: PMBLIMITR_EL1
/// and PMSCR_EL1 written back, before any other access of that vCPU.
pub fn entries(log: &str) -> Entries {
    let is_pmscr = |r: &str| r == "PMSCR_EL1" || r == "PMSCR_EL12";
    // Per vCPU: the accesses since a PMBLIMITR_EL1 read with E set.
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
        if let [(false, true, lim), (false, false, scr), (true, false, 0), (true, true, 0), ref rest @ ..] =
            run[..]
        {
            match *rest {
                [] => out.entries += 1,
                [(true, true, l)] if l == lim => {}
                [(true, true, l), (true, false, v)] if l == lim && v == scr => {
                    out.restored += 1;
                    run.clear();
                }
                _ => run.clear(),
            }
        } else if run.len() >= 4 {
            run.clear();
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

/// What [`scenarios`] proves, in `mode`.
pub fn check(out: &RunOutput, mode: &str) -> Result<(), String> {
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
    j.finish()
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
            ("kernel_warnings", "0"),
        ])
    }

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
        assert_eq!(all.len(), MODES.len());
        for (s, mode) in all.iter().zip(MODES) {
            assert!(is_kvm(s.name));
            let spe = s.spe.as_ref().unwrap();
            assert!(spe.virtualization);
            let arg = format!(" kvm-arm.mode={mode}");
            assert_eq!(spe.kernel_args, if *mode == "vhe" { "" } else { &arg });
            assert_eq!(check(&passing(mode), mode), Ok(()));
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
            let e = check(&passing("vhe").with(key, value), "vhe").unwrap_err();
            assert!(e.contains(why), "{key}={value}: {e}");
        }
        assert!(check(&RunOutput::from_line(""), "vhe").is_err());
        // Trapped, PMBIDR_EL1 is UNDEFINED like the others (FEAT_FGT).
        let trapped = passing("vhe").with("kvm_pmbidr_read_esr", "0x2000000");
        assert_eq!(check(&trapped, "vhe"), Ok(()));
    }
}
