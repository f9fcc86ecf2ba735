//! Faults on demand: armed from the control socket or a scenario file,
//! delivered by the model exactly where and as the pseudocode would have
//! delivered a real one (`SPEWriteToBuffer()`'s faults, `DebugWriteFault()`,
//! `OtherSPEManagementEvent()`), so a driver sees nothing it could tell
//! from hardware.
//!
//! Record triggers are checked as a record is about to be written at
//! PMBPTR. A fault that stops profiling drops that record whole and leaves
//! PMBPTR where it would have gone; nothing is written.

use super::buffer::WriteError;
use super::translate::{fsc, Fault};
use super::Spu;
use spe_protocol::control::{FaultKind, Trigger, XlatFault};
use spe_protocol::regs::*;

/// A fault waiting for its trigger.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ArmedFault {
    pub id: u32,
    pub kind: FaultKind,
    pub trigger: Trigger,
    /// Records written since it was armed (for `after-records`).
    seen: u64,
}

/// A fault that reached its trigger, for the front end to report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Delivered {
    pub id: u32,
    pub kind: FaultKind,
    /// What the model did; `false` with `why` when the PE's state at the
    /// trigger gave the fault no architectural way to happen.
    pub delivered: bool,
    pub why: Option<&'static str>,
    /// The PMBSR that took it (of the EL `ReportSPEEvent()` chose) and
    /// PMBPTR, after delivery.
    pub pmbsr: u64,
    pub pmbptr: u64,
}

/// What the model does to PMBIRQ on top of `SPEInterruptEnabled() && S`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum IrqOverride {
    #[default]
    None,
    /// Asserted with S = 0 until the guest's next SPE register access.
    Spurious,
    /// Never asserted until software clears S.
    Lost,
}

/// Why a fault cannot be armed on this PE.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported(pub String);

/// Checks `kind` is something this PE could produce at all.
pub fn check_fault(f: &super::Features, kind: &FaultKind) -> Result<(), Unsupported> {
    let bad = |m: &str| Err(Unsupported(m.to_string()));
    match *kind {
        FaultKind::Stage1 { fault, level } | FaultKind::Stage2 { fault, level } => {
            let lo = if fault == XlatFault::Translation || fault == XlatFault::AddressSize {
                -1
            } else {
                0
            };
            if !(lo..=3).contains(&level) {
                return Err(Unsupported(format!(
                    "a {fault:?} fault has levels {lo} to 3, not {level}"
                )));
            }
            if matches!(kind, FaultKind::Stage2 { .. }) && !f.have_el2 {
                return bad("a stage 2 fault needs EL2 (run with --el2 and -M virt,virtualization=on)");
            }
            Ok(())
        }
        FaultKind::GranuleProtection => bad(
            "granule protection faults (EC 0x1E) need FEAT_RME, which the model does not implement for the buffer",
        ),
        FaultKind::UnknownBsc { bsc } => {
            if u64::from(bsc) > PMBSR::BSC.mask() {
                return bad("BSC is a 6-bit field");
            }
            if [pmbsr_bsc::BUFFER_FILLED, pmbsr_bsc::SIZE_TOO_LARGE].contains(&u64::from(bsc)) {
                return bad("that BSC is defined: use buffer-full or size-too-large");
            }
            Ok(())
        }
        FaultKind::UnknownEc { ec } => {
            if ec > 0x3F {
                return bad("EC is a 6-bit field");
            }
            let defined = [
                pmbsr_ec::BUFFER,
                pmbsr_ec::GPC_FAULT,
                pmbsr_ec::IMP_DEF,
                pmbsr_ec::STAGE1_DATA_ABORT,
                pmbsr_ec::STAGE2_DATA_ABORT,
            ];
            if defined.contains(&u64::from(ec)) {
                return bad("that EC is defined: use its own fault kind");
            }
            Ok(())
        }
        FaultKind::StuckPointer { records: 0 } => bad("stuck-pointer needs records >= 1"),
        _ => Ok(()),
    }
}

fn xlat_fsc(fault: XlatFault, level: i8) -> u8 {
    let l = i32::from(level);
    match fault {
        XlatFault::Translation => fsc::translation(l),
        XlatFault::AccessFlag => fsc::access_flag(l),
        XlatFault::Permission => fsc::permission(l),
        XlatFault::AddressSize => fsc::address_size(l),
    }
}

impl Spu {
    /// Arms a fault (checked with [`check_fault`] by the caller). A `now`
    /// trigger is delivered at once; its outcome is in [`Spu::take_delivered`].
    pub fn arm_fault(&mut self, id: u32, kind: FaultKind, trigger: Trigger) {
        let f = ArmedFault {
            id,
            kind,
            trigger,
            seen: 0,
        };
        if trigger == Trigger::Now {
            self.deliver(f);
        } else {
            self.faults.push(f);
        }
    }

    pub fn armed_faults(&self) -> &[ArmedFault] {
        &self.faults
    }

    /// Cancels an armed fault; whether it was armed here.
    pub fn cancel_fault(&mut self, id: u32) -> bool {
        let n = self.faults.len();
        self.faults.retain(|f| f.id != id);
        self.faults.len() != n
    }

    /// Faults delivered since the last call.
    pub fn take_delivered(&mut self) -> Vec<Delivered> {
        std::mem::take(&mut self.delivered)
    }

    /// Whether anything was delivered since the last [`Spu::take_delivered`].
    pub fn has_delivered(&self) -> bool {
        !self.delivered.is_empty()
    }

    /// A write enabled the buffer: `at-byte` offsets count from here.
    pub(crate) fn note_buffer_enable(&mut self, old_limit: u64) {
        if !PMBLIMITR_EL1::E.is_set(old_limit) && PMBLIMITR_EL1::E.is_set(self.regs.pmblimitr) {
            self.buffer_base = self.regs.pmbptr;
        }
    }

    /// The guest touched an SPE register: a spurious PMBIRQ ends.
    pub(crate) fn note_register_access(&mut self) {
        if self.irq_override == IrqOverride::Spurious {
            self.irq_override = IrqOverride::None;
        }
    }

    /// A PMBSR write: a lost PMBIRQ ends when software clears S.
    pub(crate) fn note_pmbsr_write(&mut self) {
        if self.irq_override == IrqOverride::Lost && !self.spe_profiling_stopped() {
            self.irq_override = IrqOverride::None;
        }
    }

    /// Called for a record about to be written at PMBPTR, only when faults
    /// are armed: delivers the first whose trigger fires. Returns whether
    /// the record must not be written (the fault took its place).
    pub(crate) fn check_record_triggers(&mut self, ptr: u64, len: usize) -> bool {
        let end = u128::from(ptr) + len as u128;
        let base = self.buffer_base;
        let fired = self.faults.iter().position(|f| match f.trigger {
            // Timed faults are the hub's; they reach the SPU as `now`.
            Trigger::Now | Trigger::NextRecord | Trigger::AfterMs { .. } => true,
            Trigger::AfterRecords { count } => f.seen >= count,
            Trigger::AtByte { offset } => end > u128::from(base) + u128::from(offset),
            Trigger::AtVa { va } => end > u128::from(va),
        });
        let Some(i) = fired else {
            return false;
        };
        let f = self.faults.remove(i);
        self.deliver(f)
    }

    /// A record was written: `after-records` counts it.
    pub(crate) fn count_record_for_triggers(&mut self) {
        for f in &mut self.faults {
            f.seen += 1;
        }
    }

    /// Whether the next record's PMBPTR must stay put (stuck-pointer).
    pub(crate) fn pointer_stuck(&mut self) -> bool {
        if self.stuck_records == 0 {
            return false;
        }
        self.stuck_records -= 1;
        true
    }

    /// Delivers `f`; returns whether the record at hand (if any) is dropped.
    fn deliver(&mut self, f: ArmedFault) -> bool {
        let mut why = None;
        let mut drop_record = true;
        match f.kind {
            FaultKind::BufferFull => self.raise(pmbsr_ec::BUFFER, pmbsr_bsc::BUFFER_FILLED, 0),
            FaultKind::DataLoss { event } => {
                if event {
                    self.raise(pmbsr_ec::BUFFER, pmbsr_bsc::BUFFER_FILLED, 0);
                }
                self.set_flag(PMBSR::DL);
            }
            FaultKind::Collision { event } => {
                if event {
                    self.raise(pmbsr_ec::BUFFER, pmbsr_bsc::BUFFER_FILLED, 0);
                }
                self.set_flag(PMBSR::COLL);
            }
            FaultKind::ExternalAbort => self.debug_write_fault(WriteError::ExternalAbort),
            FaultKind::Stage1 { fault, level } => self.debug_write_fault(WriteError::Translation(
                Fault::Stage1(xlat_fsc(fault, level)),
            )),
            FaultKind::Stage2 { fault, level } => {
                if self.buffer_has_stage2() {
                    self.debug_write_fault(WriteError::Translation(Fault::Stage2(xlat_fsc(
                        fault, level,
                    ))));
                } else {
                    why = Some("the owning translation regime has no stage 2 (EL2 disabled or HCR_EL2.VM = 0)");
                    drop_record = false;
                }
            }
            FaultKind::ImpDef { syndrome } => self.raise(pmbsr_ec::IMP_DEF, u64::from(syndrome), 0),
            FaultKind::SizeTooLarge => self.raise(pmbsr_ec::BUFFER, pmbsr_bsc::SIZE_TOO_LARGE, 0),
            FaultKind::UnknownBsc { bsc } => self.raise(pmbsr_ec::BUFFER, u64::from(bsc), 0),
            FaultKind::UnknownEc { ec } => self.raise(u64::from(ec), 0, 0),
            FaultKind::SpuriousIrq => {
                self.irq_override = IrqOverride::Spurious;
                drop_record = false;
            }
            FaultKind::LostIrq => {
                self.raise(pmbsr_ec::BUFFER, pmbsr_bsc::BUFFER_FILLED, 0);
                self.irq_override = IrqOverride::Lost;
            }
            FaultKind::StuckPointer { records } => {
                self.stuck_records = records;
                drop_record = false;
            }
            FaultKind::GranuleProtection => {
                why = Some("granule protection faults are not modelled");
                drop_record = false;
            }
        }
        self.delivered.push(Delivered {
            id: f.id,
            kind: f.kind,
            delivered: why.is_none(),
            why,
            pmbsr: self.pmbsr(),
            pmbptr: self.regs.pmbptr,
        });
        drop_record
    }

    /// A management event with this syndrome, to the PMBSR that
    /// `ReportSPEEvent()` picks, as `OtherSPEManagementEvent()` raises one.
    pub(super) fn raise(&mut self, ec: u64, mss: u64, flags: u64) {
        let fsc = if ec == pmbsr_ec::BUFFER {
            0
        } else {
            mss & 0x3F
        };
        let target = self.report_spe_event(ec, fsc);
        let r = self.pmbsr_mut(target);
        let mut v = PMBSR::S.set(*r, 1);
        v = PMBSR::EC.set(v, ec);
        v = PMBSR::MSS.set(v, mss & PMBSR::MSS.mask());
        v = PMBSR::MSS2.set(v, 0);
        *r = v | flags;
        self.stats.management_events += 1;
        self.tlb.invalidate();
    }

    fn set_flag(&mut self, flag: Field) {
        let target = self.default_spe_event();
        let r = self.pmbsr_mut(target);
        *r = flag.set(*r, 1);
    }
}

#[cfg(test)]
mod tests;
