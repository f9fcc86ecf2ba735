//! When profiling is enabled, stopped and who owns the buffer: D17.4,
//! D17.7.5, Tables D17-1, D17-2 and D17-4, and the Effective values of
//! PMSCR_EL2.EE, PMSCR_EL2.EnVM and PMBLIMITR_EL1.nVM.

use super::unpredictable as cu;
use super::Spu;
use spe_protocol::op::SampledOp;
use spe_protocol::regs::*;

/// `TimeStamp`: which counter a record's timestamp comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeStamp {
    None,
    Physical,
    OffsetPhysical,
    Virtual,
}

/// The owning translation regime, as Table D17-4 names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OwningRegime {
    /// PMBLIMITR_EL1.E is 0.
    Disabled,
    /// The buffer is owned by another Security state than the PE's.
    DisabledIn(SecurityState),
    /// MDCR_EL3.{NSPBE, NSPB} is reserved.
    Reserved,
    /// `el` is EL1 (EL1&0) or EL2; `host` is EL2&0 (E2H = 1).
    Regime {
        ss: SecurityState,
        el: El,
        host: bool,
    },
}

fn state_name(ss: SecurityState) -> &'static str {
    match ss {
        SecurityState::Secure => "Secure",
        SecurityState::NonSecure => "Non-secure",
        SecurityState::Realm => "Realm",
        SecurityState::Root => "Root",
    }
}

impl std::fmt::Display for OwningRegime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match *self {
            OwningRegime::Disabled => write!(f, "Disabled"),
            OwningRegime::DisabledIn(ss) => write!(f, "Disabled in {} state", state_name(ss)),
            OwningRegime::Reserved => write!(f, "Reserved"),
            OwningRegime::Regime { ss, el, host } => {
                let r = match (el, host) {
                    (El::El2, true) => "EL2&0",
                    (El::El2, false) => "EL2",
                    _ => "EL1&0",
                };
                write!(f, "{} {r}", state_name(ss))
            }
        }
    }
}

impl Spu {
    pub(crate) fn have_el(&self, el: El) -> bool {
        match el {
            El::El0 | El::El1 => true,
            El::El2 => self.features.have_el2,
            El::El3 => self.features.have_el3,
        }
    }

    /// `EffectiveSCR_EL3_NS()`; without EL3 the PE is Non-secure only.
    pub(crate) fn effective_scr_el3_ns(&self) -> bool {
        !self.features.have_el3 || SCR_EL3::NS.is_set(self.ctx.scr_el3)
    }

    /// `EffectiveSCR_EL3_NSE()`.
    pub(crate) fn effective_scr_el3_nse(&self) -> bool {
        self.features.have_el3 && self.features.have_rme && SCR_EL3::NSE.is_set(self.ctx.scr_el3)
    }

    /// `IsSecureEL2Enabled()`.
    pub(crate) fn is_secure_el2_enabled(&self) -> bool {
        self.features.have_el2
            && self.features.have_sel2
            && self.features.have_el3
            && SCR_EL3::EEL2.is_set(self.ctx.scr_el3)
    }

    /// `EL2Enabled()`: EL2 is implemented and enabled in the current
    /// Security state.
    pub(crate) fn el2_enabled(&self) -> bool {
        self.features.have_el2
            && (!self.features.have_el3
                || SCR_EL3::NS.is_set(self.ctx.scr_el3)
                || self.is_secure_el2_enabled())
    }

    /// `EffectiveTGE()` as `EL2Enabled() && HCR_EL2.TGE == '1'`.
    pub(crate) fn tge_set(&self) -> bool {
        self.el2_enabled() && HCR_EL2::TGE.is_set(self.ctx.hcr_el2)
    }

    /// `ELIsInHost(el)`.
    pub(crate) fn el_is_in_host(&self, el: El) -> bool {
        let e2h = self.el2_enabled() && HCR_EL2::E2H.is_set(self.ctx.hcr_el2);
        match el {
            El::El2 => e2h,
            El::El0 => e2h && HCR_EL2::TGE.is_set(self.ctx.hcr_el2),
            _ => false,
        }
    }

    /// `SecurityStateAtEL(el)`.
    pub(crate) fn security_state_at_el(&self, el: El) -> SecurityState {
        if !self.features.have_el3 {
            return SecurityState::NonSecure;
        }
        if el == El::El3 {
            return if self.features.have_rme {
                SecurityState::Root
            } else {
                SecurityState::Secure
            };
        }
        match (self.effective_scr_el3_nse(), self.effective_scr_el3_ns()) {
            (false, false) => SecurityState::Secure,
            (false, true) => SecurityState::NonSecure,
            (true, true) => SecurityState::Realm,
            // NSE:NS = 10 is Root, only at EL3.
            (true, false) => SecurityState::Root,
        }
    }

    /// `EffectiveMDCR_EL3_NSPB()`: {NSPBE, NSPB} and whether it is reserved.
    pub(crate) fn effective_mdcr_el3_nspb(&self) -> (u8, bool) {
        let nspb = MDCR_EL3::NSPB.get(self.ctx.mdcr_el3) as u8;
        if self.features.have_rme {
            let bits = (MDCR_EL3::NSPBE.get(self.ctx.mdcr_el3) as u8) << 2 | nspb;
            if bits >> 1 == 0b10 {
                return (cu::RESERVED_NSXB_VALUE, true);
            }
            (bits, false)
        } else {
            (nspb, false)
        }
    }

    /// `CheckMDCR_EL3_NSPBTrap()`.
    pub(crate) fn check_mdcr_el3_nspb_trap(&self) -> bool {
        let (bits, reserved) = self.effective_mdcr_el3_nspb();
        (reserved && cu::RESERVED_NSXB_TRAPS)
            || bits & 1 == 0
            || (bits >> 1 & 1 == 1) != SCR_EL3::NS.is_set(self.ctx.scr_el3)
            || (self.features.have_rme
                && (bits >> 2 & 1 == 1) != SCR_EL3::NSE.is_set(self.ctx.scr_el3))
    }

    /// `ProfilingBufferOwner()`: the owning Security state and EL.
    pub fn profiling_buffer_owner(&self) -> (SecurityState, El) {
        let bits = if self.have_el(El::El3) {
            self.effective_mdcr_el3_nspb().0
        } else {
            0b011
        };
        let owning_ss = match bits >> 1 {
            0b00 => SecurityState::Secure,
            0b01 => SecurityState::NonSecure,
            0b11 => SecurityState::Realm,
            // 0b10x is reserved and was replaced above.
            _ => SecurityState::Secure,
        };
        let owning_el = if self.have_el(El::El2)
            && (owning_ss != SecurityState::Secure || self.is_secure_el2_enabled())
            && MDCR_EL2::E2PB.get(self.ctx.mdcr_el2) == 0b00
        {
            El::El2
        } else {
            El::El1
        };
        (owning_ss, owning_el)
    }

    /// `ProfilingBufferEnabled()`.
    pub fn profiling_buffer_enabled(&self) -> bool {
        if self.ctx.halted {
            return false;
        }
        let (owning_ss, _) = self.profiling_buffer_owner();
        let state_match = match owning_ss {
            SecurityState::Secure => !self.effective_scr_el3_nse() && !self.effective_scr_el3_ns(),
            SecurityState::NonSecure => {
                !self.effective_scr_el3_nse() && self.effective_scr_el3_ns()
            }
            SecurityState::Realm => self.effective_scr_el3_nse() && self.effective_scr_el3_ns(),
            SecurityState::Root => false,
        };
        state_match && PMBLIMITR_EL1::E.is_set(self.regs.pmblimitr) && !self.spe_profiling_stopped()
    }

    /// `StatisticalProfilingEnabled(el)`.
    pub fn statistical_profiling_enabled(&self, el: El) -> bool {
        self.statistical_profiling_enabled_in(el, self.security_state_at_el(el))
    }

    /// `StatisticalProfilingEnabled()` for the EL and Security state an
    /// operation executed in.
    pub(crate) fn statistical_profiling_enabled_for(&self, op: &SampledOp) -> bool {
        let ss = if !self.features.have_el3 {
            SecurityState::NonSecure
        } else {
            match (op.nse, op.ns) {
                (false, false) => SecurityState::Secure,
                (false, true) => SecurityState::NonSecure,
                (true, true) => SecurityState::Realm,
                (true, false) => SecurityState::Root,
            }
        };
        self.statistical_profiling_enabled_in(op.el, ss)
    }

    fn statistical_profiling_enabled_in(&self, el: El, ss: SecurityState) -> bool {
        if !self.profiling_buffer_enabled() {
            return false;
        }
        let tge_set = self.tge_set();
        let (owning_ss, owning_el) = self.profiling_buffer_owner();
        if owning_el < el || (tge_set && owning_el == El::El1) || owning_ss != ss {
            return false;
        }
        let r = &self.regs;
        match el {
            El::El3 => false,
            El::El2 => PMSCR_EL2::E2SPE.is_set(r.pmscr_el2),
            El::El1 => PMSCR_EL1::E1SPE.is_set(r.pmscr_el1),
            El::El0 if tge_set => PMSCR_EL2::E0HSPE.is_set(r.pmscr_el2),
            El::El0 => PMSCR_EL1::E0SPE.is_set(r.pmscr_el1),
        }
    }

    /// Why `StatisticalProfilingEnabled(el)` is FALSE, in the terms of the
    /// pseudocode's tests in their order; `None` when it is TRUE.
    pub fn why_profiling_disabled(&self, el: El) -> Option<String> {
        let (owning_ss, owning_el) = self.profiling_buffer_owner();
        let ss = self.security_state_at_el(el);
        if self.ctx.halted {
            return Some("ProfilingBufferEnabled(): the PE is halted (Debug state)".into());
        }
        if !PMBLIMITR_EL1::E.is_set(self.regs.pmblimitr) {
            return Some("ProfilingBufferEnabled(): PMBLIMITR_EL1.E is 0".into());
        }
        if self.spe_profiling_stopped() {
            return Some(
                "ProfilingBufferEnabled(): SPEProfilingStopped(), PMBSR.S is 1 (a management event is pending)"
                    .into(),
            );
        }
        if !self.profiling_buffer_enabled() {
            return Some(format!(
                "ProfilingBufferEnabled(): the buffer is owned by {} state, not the PE's",
                state_name(owning_ss)
            ));
        }
        if owning_el < el {
            return Some(format!(
                "EL{} is above the owning EL{}",
                el as u8, owning_el as u8
            ));
        }
        if self.tge_set() && owning_el == El::El1 {
            return Some("HCR_EL2.TGE is 1 and EL1 owns the buffer".into());
        }
        if owning_ss != ss {
            return Some(format!(
                "EL{} is in {} state; the buffer is owned by {} state",
                el as u8,
                state_name(ss),
                state_name(owning_ss)
            ));
        }
        if self.statistical_profiling_enabled(el) {
            return None;
        }
        Some(
            match el {
                El::El3 => "profiling is never enabled at EL3",
                El::El2 => "PMSCR_EL2.E2SPE is 0",
                El::El1 => "PMSCR_EL1.E1SPE is 0",
                El::El0 if self.tge_set() => "PMSCR_EL2.E0HSPE is 0",
                El::El0 => "PMSCR_EL1.E0SPE is 0",
            }
            .into(),
        )
    }

    /// `SPEProfilingStopped()`.
    pub fn spe_profiling_stopped(&self) -> bool {
        let r = &self.regs;
        let mut stopped = PMBSR::S.is_set(r.pmbsr_el1);
        if self.features.spe_exc {
            if self.have_el(El::El3) && MDCR_EL3::PMSEE.get(self.ctx.mdcr_el3) & 0b10 != 0 {
                stopped |= PMBSR::S.is_set(r.pmbsr_el3);
            }
            if self.effective_pmscr_el2_ee() & 0b10 != 0 {
                stopped |= PMBSR::S.is_set(r.pmbsr_el2);
            }
        }
        stopped
    }

    /// `EffectivePMSCR_EL2_EE()`.
    pub fn effective_pmscr_el2_ee(&self) -> u8 {
        if !self.features.spe_exc {
            return 0b00;
        }
        if self.have_el(El::El3) && MDCR_EL3::PMSEE.get(self.ctx.mdcr_el3) == 0b00 {
            return 0b00;
        }
        let check_el2 =
            self.have_el(El::El2) && (self.effective_scr_el3_ns() || self.is_secure_el2_enabled());
        if check_el2 {
            PMSCR_EL2::EE.get(self.regs.pmscr_el2) as u8
        } else {
            0b01
        }
    }

    /// `EffectivePMSCR_EL1_EE()`.
    pub fn effective_pmscr_el1_ee(&self) -> u8 {
        if self.effective_pmscr_el2_ee() == 0b00 {
            return 0b00;
        }
        let ee = PMSCR_EL1::EE.get(self.regs.pmscr_el1) as u8;
        if ee == 0b01 || ee == 0b10 {
            // Reserved; FEAT_NV is not modelled.
            return if cu::RESERVED_EE_SSE_DISABLED {
                0b00
            } else {
                ee
            };
        }
        ee
    }

    /// Effective PMSCR_EL2.EnVM: 1 if EL2 is disabled in the owning Security
    /// state or the owning EL is EL2.
    pub fn effective_pmscr_el2_envm(&self) -> bool {
        let (owning_ss, owning_el) = self.profiling_buffer_owner();
        let el2_in_owning_ss = self.have_el(El::El2)
            && (owning_ss != SecurityState::Secure || self.is_secure_el2_enabled());
        !el2_in_owning_ss || owning_el == El::El2 || PMSCR_EL2::ENVM.is_set(self.regs.pmscr_el2)
    }

    /// `EffectivePMBLIMITR_EL1_nVM()`.
    pub fn effective_pmblimitr_el1_nvm(&self) -> bool {
        if !self.features.spe_nvm {
            return false;
        }
        if self.have_el(El::El2) && !self.effective_pmscr_el2_envm() {
            return false;
        }
        PMBLIMITR_EL1::NVM.is_set(self.regs.pmblimitr)
    }

    /// `SPEInterruptEnabled()`.
    pub fn spe_interrupt_enabled(&self) -> bool {
        self.effective_pmscr_el1_ee() == 0b00
    }

    /// `ReportSPEEvent(ec, fsc)`: the EL whose PMBSR records an event.
    pub(crate) fn report_spe_event(&self, ec: u64, fsc: u64) -> El {
        if !self.features.spe_exc {
            return El::El1;
        }
        let s1fault = ec == pmbsr_ec::STAGE1_DATA_ABORT;
        let s2fault = ec == pmbsr_ec::STAGE2_DATA_ABORT;
        let _ = fsc;
        // SCR_EL3.EA, HCR_EL2.TEA and granule protection are not modelled,
        // so external aborts and GPC faults route like any other fault.
        let (_, owning_el) = self.profiling_buffer_owner();
        if self.have_el(El::El3) && MDCR_EL3::PMSEE.get(self.ctx.mdcr_el3) == 0b11 {
            return El::El3;
        }
        let ee2 = PMSCR_EL2::EE.get(self.regs.pmscr_el2);
        if self.effective_pmscr_el2_ee() & 0b10 != 0
            && (ee2 == 0b11 || (s1fault && owning_el == El::El2) || s2fault)
        {
            return El::El2;
        }
        El::El1
    }

    /// `DefaultSPEEvent()`.
    pub(crate) fn default_spe_event(&self) -> El {
        self.report_spe_event(0, 0)
    }

    /// `CollectPhysicalAddress()`.
    pub(crate) fn collect_physical_address(&self) -> bool {
        let (owning_ss, owning_el) = self.profiling_buffer_owner();
        let r = &self.regs;
        if self.have_el(El::El2)
            && (owning_ss != SecurityState::Secure || self.is_secure_el2_enabled())
        {
            PMSCR_EL2::PA.is_set(r.pmscr_el2)
                && (owning_el == El::El2 || PMSCR_EL1::PA.is_set(r.pmscr_el1))
        } else {
            PMSCR_EL1::PA.is_set(r.pmscr_el1)
        }
    }

    /// `CollectContextIDR1()` for an operation at `el`.
    pub(crate) fn collect_context_idr1(&self, el: El) -> bool {
        el != El::El2 && !self.tge_set() && PMSCR_EL1::CX.is_set(self.regs.pmscr_el1)
    }

    /// `CollectContextIDR2()`.
    pub(crate) fn collect_context_idr2(&self) -> bool {
        self.el2_enabled() && PMSCR_EL2::CX.is_set(self.regs.pmscr_el2)
    }

    fn pct(&self, reg: u64, field: Field) -> u8 {
        let mut pct = field.get(reg) as u8;
        if !self.features.have_ecv {
            pct &= 1;
        }
        if pct == 0b10 {
            pct = cu::RESERVED_PCT_VALUE;
        }
        pct
    }

    /// `CollectTimeStamp()` for an operation at `el`.
    pub(crate) fn collect_time_stamp(&self, el: El) -> TimeStamp {
        let (_, owning_el) = self.profiling_buffer_owner();
        let r = &self.regs;
        let ts = if owning_el == El::El2 {
            PMSCR_EL2::TS.is_set(r.pmscr_el2)
        } else {
            PMSCR_EL1::TS.is_set(r.pmscr_el1)
        };
        if !ts {
            return TimeStamp::None;
        }
        let in_host = self.el_is_in_host(el);
        let virt_or_host = if in_host {
            TimeStamp::Physical
        } else {
            TimeStamp::Virtual
        };
        let pct_el1 = self.pct(r.pmscr_el1, PMSCR_EL1::PCT);
        if self.el2_enabled() {
            match self.pct(r.pmscr_el2, PMSCR_EL2::PCT) {
                0b00 => return virt_or_host,
                0b01 if owning_el == El::El2 => return TimeStamp::Physical,
                0b01 => {}
                _ if owning_el == El::El1 && pct_el1 == 0b00 => return virt_or_host,
                _ => return TimeStamp::OffsetPhysical,
            }
        }
        match pct_el1 {
            0b00 => virt_or_host,
            0b01 => TimeStamp::Physical,
            _ => TimeStamp::OffsetPhysical,
        }
    }

    /// Table D17-4: the owning translation regime.
    pub fn owning_translation_regime(&self) -> OwningRegime {
        if !PMBLIMITR_EL1::E.is_set(self.regs.pmblimitr) {
            return OwningRegime::Disabled;
        }
        if self.effective_mdcr_el3_nspb().1 {
            return OwningRegime::Reserved;
        }
        let (ss, el) = self.profiling_buffer_owner();
        let pe_ss = self.security_state_at_el(El::El1);
        if ss != pe_ss {
            return OwningRegime::DisabledIn(pe_ss);
        }
        let host = el == El::El2 && HCR_EL2::E2H.is_set(self.ctx.hcr_el2);
        OwningRegime::Regime { ss, el, host }
    }
}

#[cfg(test)]
mod tests;
