//! Known driver bugs that a scenario reproduces on demand on the kernel of
//! the matrix that has them, and holds the fixed kernels to their
//! behaviour (`spe-no-room`).

use crate::scenario::{Judge, RunOutput};

/// Linux 283182c1c239, "perf: arm_spe: Properly set hw.state on failures":
/// which kernels of the matrix have it, by `uname -r` prefix, from each
/// Debian package's changelog (6.12.117-1 lists it among its stable
/// updates, 6.1.192-2 does not; 7.3 is newer than the fix).
pub const HW_STATE_FIX: &[(&str, bool)] = &[("6.1.", false), ("6.12.", true), ("7.", true)];

/// Whether `kernel` (`uname -r`) has the hw.state fix.
pub fn has_hw_state_fix(kernel: &str) -> Option<bool> {
    HW_STATE_FIX
        .iter()
        .find(|(prefix, _)| kernel.starts_with(prefix))
        .map(|(_, fixed)| *fixed)
}

/// The vCPU `spe-workload no-room` runs on.
const VCPU: u32 = 1;
/// PMSCR_EL1.E0SPE and E1SPE.
const PMSCR_E0E1: u64 = 0b11;
/// PMBLIMITR_EL1.E.
const PMBLIMITR_E: u64 = 1;

/// What the driver did right after it found no room.
#[derive(Debug, PartialEq, Eq)]
pub enum Reaction {
    /// It stopped the event: PMSCR_EL1 written with profiling disabled.
    Stopped,
    /// It went on: the register it wrote next, and the value.
    WentOn(String, u64),
}

/// The guest's SPE register writes on `vcpu`, in order, from the backend's
/// debug log (`vCPU 1 MSR PMSCR_EL1 0x21 -> Ok(0)`).
fn writes(log: &str, vcpu: u32) -> Vec<(String, u64)> {
    let prefix = format!("vCPU {vcpu} MSR ");
    log.lines()
        .filter_map(|l| {
            let rest = &l[l.find(&prefix)? + prefix.len()..];
            let mut words = rest.split_whitespace();
            let reg = words.next()?;
            let value = u64::from_str_radix(words.next()?.strip_prefix("0x")?, 16).ok()?;
            Some((reg.to_string(), value))
        })
        .collect()
}

/// The driver's reaction to finding no room: after the first PMBLIMITR_EL1
/// write with a limit but E = 0 (only `arm_spe_perf_aux_output_begin()`
/// with `arm_spe_pmu_next_off()` returning 0 writes one: `0 + buf->base`;
/// a stop writes 0), the next write of PMSCR_EL1, PMBSR_EL1 (the IRQ
/// handler resuming) or PMSFCR_EL1 (`arm_spe_pmu_start()` programming the
/// filters).
pub fn no_room_reaction(log: &str, vcpu: u32) -> Result<Reaction, String> {
    let w = writes(log, vcpu);
    let at = w
        .iter()
        .position(|(r, v)| r == "PMBLIMITR_EL1" && *v != 0 && v & PMBLIMITR_E == 0)
        .ok_or_else(|| {
            format!(
                "vCPU {vcpu} never had its buffer disabled for want of room \
                 ({} register writes logged)",
                w.len()
            )
        })?;
    let (reg, value) = w[at + 1..]
        .iter()
        .find(|(r, _)| ["PMSCR_EL1", "PMBSR_EL1", "PMSFCR_EL1"].contains(&r.as_str()))
        .ok_or("no PMSCR_EL1, PMBSR_EL1 or PMSFCR_EL1 write after the limit of 0")?;
    Ok(if reg == "PMSCR_EL1" && value & PMSCR_E0E1 == 0 {
        Reaction::Stopped
    } else {
        Reaction::WentOn(reg.clone(), *value)
    })
}

/// Whether `reaction` is the driver's with (`fixed`) or without the fix.
fn judge(fixed: bool, reaction: &Reaction) -> Result<(), String> {
    match (fixed, reaction) {
        (true, Reaction::Stopped) | (false, Reaction::WentOn(..)) => Ok(()),
        (true, Reaction::WentOn(r, v)) => Err(format!(
            "the driver went on ({r}={v:#x}) after finding no room, although \
             this kernel has the hw.state fix"
        )),
        (false, Reaction::Stopped) => Err(
            "the driver stopped the event after finding no room, which a kernel \
             without the hw.state fix does not do"
                .into(),
        ),
    }
}

/// `spe-no-room`: the AUX buffer filled with its consumer stopped, and
/// the driver found some room, but not up to a page boundary.
pub fn check_no_room(out: &RunOutput) -> Result<(), String> {
    let kernel = out.result("kernel").unwrap_or("none");
    let fixed = has_hw_state_fix(kernel)
        .ok_or_else(|| format!("kernel {kernel} is not in driver_bugs::HW_STATE_FIX"))?;
    let j = Judge::new(out);
    // The order of the guest's register writes is only in the backend's
    // debug log: the control socket shows the registers as they are.
    j.include(no_room_reaction(&out.backend_log, VCPU).and_then(|r| judge(fixed, &r)));
    // The buffer filled (4 pages, less the tail's 64 bytes) and the driver
    // padded what it could not use: 6.1 up to one byte short of the tail
    // (16447), 6.12 to the end of the buffer (16383).
    j.zero(&["workload_rc", "kernel_warnings"]);
    j.want("no_room_aux_head", ">= 16320 (the buffer filled)", |v| {
        v >= (4 * 4096 - 64) as f64
    });
    j.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str =
        "[t DEBUG vhost_device_spe::qemu] vCPU 1 MSR PMBLIMITR_EL1 0xffff800008250001 -> Ok(0)
[t DEBUG vhost_device_spe::qemu] vCPU 0 MSR PMBLIMITR_EL1 0xffff800008260000 -> Ok(0)
[t DEBUG vhost_device_spe::qemu] vCPU 1 MRS PMBSR_EL1 0x0 -> Ok(4194305)
[t DEBUG vhost_device_spe::qemu] vCPU 1 MSR PMBPTR_EL1 0xffff80000824c000 -> Ok(0)
[t DEBUG vhost_device_spe::qemu] vCPU 1 MSR PMBLIMITR_EL1 0xffff80000824c000 -> Ok(0)
";

    #[test]
    fn the_matrix_kernels_are_in_the_table() {
        assert_eq!(has_hw_state_fix("6.1.0-56-arm64"), Some(false));
        assert_eq!(has_hw_state_fix("6.12.117+deb13-arm64"), Some(true));
        assert_eq!(has_hw_state_fix("7.3.4+deb13-arm64"), Some(true));
        assert_eq!(has_hw_state_fix("5.10.0-1-arm64"), None);
    }

    #[test]
    fn the_reaction_is_the_write_after_the_limit_of_zero() {
        let line = |r: &str, v: &str| {
            format!("[t DEBUG vhost_device_spe::qemu] vCPU 1 MSR {r} {v} -> Ok(0)\n")
        };
        // The fixed driver stops the event before it clears PMBSR.
        let fixed = format!(
            "{LOG}{}{}",
            line("PMSCR_EL1", "0x0"),
            line("PMBSR_EL1", "0x0")
        );
        assert_eq!(no_room_reaction(&fixed, 1), Ok(Reaction::Stopped));
        assert_eq!(judge(true, &Reaction::Stopped), Ok(()));
        // The old one clears PMBSR (IRQ path) or programs the filters
        // (start path) with profiling still on.
        let old = format!("{LOG}{}", line("PMBSR_EL1", "0x0"));
        let r = no_room_reaction(&old, 1).unwrap();
        assert_eq!(r, Reaction::WentOn("PMBSR_EL1".into(), 0));
        assert_eq!(judge(false, &r), Ok(()));
        let start = format!("{LOG}{}", line("PMSFCR_EL1", "0x0"));
        assert!(matches!(
            no_room_reaction(&start, 1),
            Ok(Reaction::WentOn(..))
        ));
        // Each seen on the other kernel fails.
        assert!(judge(true, &r).is_err());
        assert!(judge(false, &Reaction::Stopped).is_err());
        // A PMSCR write that enables profiling is not a stop.
        let enable = format!("{LOG}{}", line("PMSCR_EL1", "0x21"));
        assert!(matches!(
            no_room_reaction(&enable, 1),
            Ok(Reaction::WentOn(..))
        ));
        // No limit of 0 (the buffer never ran out of room), or nothing
        // after it: no verdict.
        assert!(no_room_reaction(&fixed, 0).is_err());
        assert!(no_room_reaction(LOG, 1).is_err());
    }

    #[test]
    fn no_room_holds_each_kernel_to_its_reaction_and_the_buffer_full() {
        let stop = "[t DEBUG vhost_device_spe::qemu] vCPU 1 MSR PMSCR_EL1 0x0 -> Ok(0)\n";
        let run = |kernel: &str, log: &str, head: &str| RunOutput {
            backend_log: log.into(),
            ..RunOutput::from_line(&format!(
                "kernel={kernel} workload_rc=0 no_room_aux_head={head} kernel_warnings=0"
            ))
        };
        let fixed = format!("{LOG}{stop}");
        assert_eq!(
            check_no_room(&run("7.3.4+deb13-arm64", &fixed, "16383")),
            Ok(())
        );
        assert!(check_no_room(&run("6.1.0-56-arm64", &fixed, "16447")).is_err());
        assert!(check_no_room(&run("7.3.4+deb13-arm64", &fixed, "8192")).is_err());
        assert!(check_no_room(&run("5.10.0-1-arm64", &fixed, "16383")).is_err());
    }
}
