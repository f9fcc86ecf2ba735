//! System-register accesses: the access checks of each register's MRS/MSR
//! pseudocode, RES0 bits, feature gating, and the side effects of writes.
//!
//! Fine-grained traps (HDFGRTR_EL2/HDFGWTR_EL2), FEAT_NV redirection and
//! EL3SDDUndef are not modelled: the front end applies those before asking.

use super::Spu;
use spe_protocol::packet::events;
use spe_protocol::regs::*;

type Access<T> = Result<T, AccessOutcome>;

/// Which access-check family a register belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Family {
    /// PMS* registers: `CheckStatisticalProfilingAccess()` (MDCR_EL2.TPMS).
    Sampling,
    /// PMB* registers: `CheckProfilingBufferAccess()` (MDCR_EL2.E2PB<0>).
    Buffer,
    /// PMSSCR/PMECR and the snapshot registers. D13.9 makes disabled
    /// Capture events ignore SS writes rather than trap them, and the seeds
    /// give no traps for these registers, so none are modelled.
    Snapshot,
}

impl Spu {
    fn ok_if(cond: bool) -> Access<()> {
        if cond {
            Ok(())
        } else {
            Err(AccessOutcome::Undefined)
        }
    }

    /// `CheckStatisticalProfilingAccess()` / `CheckProfilingBufferAccess()`
    /// (seed 003) with the newer `CheckMDCR_EL3_NSPBTrap()`.
    fn check_access(&self, family: Family) -> Access<()> {
        let el = self.ctx.el;
        if el == El::El0 {
            return Err(AccessOutcome::Undefined);
        }
        if el == El::El1 && self.el2_enabled() {
            let trap = match family {
                Family::Sampling => MDCR_EL2::TPMS.is_set(self.ctx.mdcr_el2),
                Family::Buffer => MDCR_EL2::E2PB.get(self.ctx.mdcr_el2) & 1 == 0,
                Family::Snapshot => false,
            };
            if trap {
                return Err(AccessOutcome::TrapToEl2);
            }
        }
        if el != El::El3 && self.have_el(El::El3) {
            let trap = match family {
                Family::Sampling | Family::Buffer => self.check_mdcr_el3_nspb_trap(),
                Family::Snapshot => false,
            };
            if trap {
                return Err(AccessOutcome::TrapToEl3);
            }
        }
        Ok(())
    }

    /// PMSCR_EL2 and PMBSR_EL2: EL2 registers.
    fn check_el2_access(&self) -> Access<()> {
        match self.ctx.el {
            El::El0 | El::El1 => Err(AccessOutcome::Undefined),
            El::El2 if self.have_el(El::El3) && self.check_mdcr_el3_nspb_trap() => {
                Err(AccessOutcome::TrapToEl3)
            }
            _ => Ok(()),
        }
    }

    /// PMSCR_EL12: the EL1 register from a host EL2 (or EL3 with E2H).
    fn check_el12_access(&self) -> Access<()> {
        let e2h = self.have_el(El::El2) && HCR_EL2::E2H.is_set(self.ctx.hcr_el2);
        match self.ctx.el {
            El::El2 if e2h => self.check_el2_access(),
            El::El3 if e2h && self.el2_enabled() => Ok(()),
            _ => Err(AccessOutcome::Undefined),
        }
    }

    /// Resolves the register an access reaches (PMSCR_EL1 at a host EL2 is
    /// PMSCR_EL2; PMSCR_EL12 is PMSCR_EL1) after its access checks.
    pub(super) fn route(&self, reg: SysReg) -> Access<SysReg> {
        let f = &self.features;
        match reg {
            SysReg::PmscrEl1 => {
                self.check_access(Family::Sampling)?;
                if self.ctx.el == El::El2 && self.el_is_in_host(El::El2) {
                    return Ok(SysReg::PmscrEl2);
                }
            }
            SysReg::PmscrEl12 => {
                self.check_el12_access()?;
                return Ok(SysReg::PmscrEl1);
            }
            SysReg::PmscrEl2 => {
                Self::ok_if(f.have_el2 || self.ctx.el == El::El3)?;
                self.check_el2_access()?;
            }
            SysReg::PmsnevfrEl1 => {
                Self::ok_if(f.spe_fne())?;
                self.check_access(Family::Sampling)?;
            }
            SysReg::PmsdsfrEl1 => {
                Self::ok_if(f.spe_fds())?;
                self.check_access(Family::Sampling)?;
            }
            SysReg::PmsicrEl1
            | SysReg::PmsirrEl1
            | SysReg::PmsfcrEl1
            | SysReg::PmsevfrEl1
            | SysReg::PmslatfrEl1
            | SysReg::PmsidrEl1 => self.check_access(Family::Sampling)?,
            SysReg::PmbmarEl1 => {
                Self::ok_if(f.spe_nvm)?;
                self.check_access(Family::Buffer)?;
            }
            SysReg::PmblimitrEl1 | SysReg::PmbptrEl1 | SysReg::PmbsrEl1 => {
                self.check_access(Family::Buffer)?
            }
            // PMBIDR_EL1 is readable from EL1 whoever owns the buffer: its
            // P bit is how software learns that it does not.
            SysReg::PmbidrEl1 => Self::ok_if(self.ctx.el != El::El0)?,
            SysReg::PmbsrEl2 => {
                Self::ok_if(f.spe_exc && f.have_el2)?;
                self.check_el2_access()?;
            }
            SysReg::PmbsrEl3 => Self::ok_if(f.spe_exc && self.ctx.el == El::El3)?,
            SysReg::PmsscrEl1 | SysReg::PmecrEl1 | SysReg::PmccntsvrEl1 => {
                Self::ok_if(f.pmu_ss)?;
                self.check_access(Family::Snapshot)?;
            }
            SysReg::PmicntsvrEl1 => {
                Self::ok_if(f.pmu_ss && f.pmu_icntr)?;
                self.check_access(Family::Snapshot)?;
            }
            SysReg::PmevcntsvrEl1(n) => {
                Self::ok_if(f.pmu_ss && n < f.pmu_counters)?;
                self.check_access(Family::Snapshot)?;
            }
        }
        Ok(reg)
    }

    /// PMBIDR_EL1 with P computed: 1 when the buffer is owned by a higher
    /// EL or another Security state than the reader's.
    fn pmbidr(&self) -> u64 {
        let (ss, el) = self.profiling_buffer_owner();
        let mine = el <= self.ctx.el && ss == self.security_state_at_el(self.ctx.el);
        let p = if mine { 0 } else { 1 };
        PMBIDR_EL1::P.set(self.features.pmbidr, p)
    }

    /// `MRS Xt, <reg>` from the context's EL.
    pub fn read_sysreg(&mut self, reg: SysReg) -> Access<u64> {
        self.note_register_access();
        let r = &self.regs;
        Ok(match self.route(reg)? {
            SysReg::PmscrEl1 | SysReg::PmscrEl12 => r.pmscr_el1,
            SysReg::PmscrEl2 => {
                if self.have_el(El::El2) {
                    r.pmscr_el2
                } else {
                    0 // RES0 from EL3 without EL2
                }
            }
            SysReg::PmsnevfrEl1 => r.pmsnevfr,
            SysReg::PmsicrEl1 => r.pmsicr,
            SysReg::PmsirrEl1 => r.pmsirr,
            SysReg::PmsfcrEl1 => r.pmsfcr,
            SysReg::PmsevfrEl1 => r.pmsevfr,
            SysReg::PmslatfrEl1 => r.pmslatfr,
            SysReg::PmsidrEl1 => self.features.pmsidr,
            SysReg::PmblimitrEl1 => r.pmblimitr,
            SysReg::PmbptrEl1 => r.pmbptr,
            SysReg::PmbsrEl1 => r.pmbsr_el1,
            SysReg::PmbsrEl2 => r.pmbsr_el2,
            SysReg::PmbsrEl3 => r.pmbsr_el3,
            SysReg::PmsdsfrEl1 => r.pmsdsfr,
            SysReg::PmbmarEl1 => r.pmbmar,
            SysReg::PmbidrEl1 => self.pmbidr(),
            SysReg::PmsscrEl1 => r.pmsscr,
            SysReg::PmecrEl1 => r.pmecr,
            SysReg::PmevcntsvrEl1(n) => r.pmevcntsvr[n as usize],
            SysReg::PmccntsvrEl1 => r.pmccntsvr,
            SysReg::PmicntsvrEl1 => r.pmicntsvr,
        })
    }

    /// The PMSEVFR_EL1/PMSNEVFR_EL1 bits this PE implements: the mask of
    /// `SPEFilterByEvents()`. Other bits are RAZ/WI.
    pub fn event_filter_mask(&self) -> u64 {
        use super::unpredictable::IMPDEF_EVENT_MASK as impdef;
        let f = &self.features;
        let v1p1 = f.pms_ver >= PmsVer::V1p1;
        let v1p4 = f.pms_ver >= PmsVer::V1p4;
        let mut mask = impdef & 0xFFFF_0000_0000_0000;
        if v1p4 {
            mask |= 0b11111 << 19;
        } else {
            mask |= impdef & 0xFF00_0000;
        }
        mask |= impdef & 0xF000;
        if v1p1 && f.sve {
            mask |= events::PARTIAL_PREDICATE | events::EMPTY_PREDICATE;
        }
        if v1p1 {
            mask |= 1 << 11;
        }
        mask |= if v1p4 { 0b111 << 8 } else { impdef & 0x700 };
        mask |= 1 << 7;
        if f.spe_fne() {
            mask |= 1 << 6;
        }
        mask |= 1 << 5 | 1 << 3 | 1 << 1;
        mask |= if v1p4 { 1 << 4 | 1 << 2 } else { impdef & 0x14 };
        mask
    }

    /// Bits software can write, per register (everything else is RES0 or
    /// read-only).
    pub(super) fn writable_mask(&self, reg: SysReg) -> u64 {
        let f = &self.features;
        let exc = if f.spe_exc { 0b111 << 8 } else { 0 };
        let pct = if f.have_ecv { 0b11 << 6 } else { 1 << 6 };
        match reg {
            SysReg::PmscrEl1 => 0b11_1011 | pct | exc,
            SysReg::PmscrEl2 => {
                let envm = if f.spe_nvm { 1 << 11 } else { 0 };
                0b11_1011 | pct | exc | envm
            }
            SysReg::PmsicrEl1 => {
                let ecount = if f.spe_ernd() { 0xFF << 56 } else { 0 };
                0xFFFF_FFFF | ecount
            }
            SysReg::PmsirrEl1 => PMSIRR_EL1::INTERVAL.mask() | 1,
            SysReg::PmsfcrEl1 => {
                let mut m = 0b111 | 0b111 << 16;
                if f.spe_fne() {
                    m |= 1 << 3;
                }
                if f.spe_fds() {
                    m |= PMSFCR_EL1::FDS.mask();
                }
                if f.spe_eft() {
                    m |= 0b11 << 19 | PMSFCR_EL1::TYPEM.mask();
                }
                m
            }
            SysReg::PmsevfrEl1 | SysReg::PmsnevfrEl1 => self.event_filter_mask(),
            SysReg::PmslatfrEl1 => u64::from(f.counter_max()),
            SysReg::PmblimitrEl1 => {
                let mut m = PMBLIMITR_EL1::LIMIT.mask() | PMBLIMITR_EL1::FM.mask() | 1;
                if f.pms_ver >= PmsVer::V1p2 {
                    m |= PMBLIMITR_EL1::PMFZ.mask();
                }
                if f.spe_nvm {
                    m |= PMBLIMITR_EL1::NVM.mask();
                }
                m
            }
            SysReg::PmbptrEl1 | SysReg::PmsdsfrEl1 => u64::MAX,
            SysReg::PmbsrEl1 | SysReg::PmbsrEl2 | SysReg::PmbsrEl3 => {
                let mss2 = if f.pms_ver >= PmsVer::V1p4 {
                    PMBSR::MSS2.mask()
                } else {
                    0
                };
                PMBSR::EC.mask() | 0xF_FFFF | mss2
            }
            SysReg::PmbmarEl1 => 0x3FF,
            SysReg::PmecrEl1 => PMECR_EL1::SSE.mask(),
            SysReg::PmsscrEl1 => PMSSCR_EL1::SS.mask(),
            _ => 0,
        }
    }

    /// `MSR <reg>, Xt` from the context's EL, with its side effects.
    pub fn write_sysreg(&mut self, reg: SysReg, value: u64) -> Access<()> {
        self.note_register_access();
        let target = self.route(reg)?;
        let v = value & self.writable_mask(target);
        let r = &mut self.regs;
        match target {
            SysReg::PmscrEl1 | SysReg::PmscrEl12 => r.pmscr_el1 = v,
            SysReg::PmscrEl2 => {
                if self.features.have_el2 {
                    r.pmscr_el2 = v;
                }
            }
            SysReg::PmsnevfrEl1 => r.pmsnevfr = v,
            SysReg::PmsicrEl1 => r.pmsicr = v,
            SysReg::PmsirrEl1 => r.pmsirr = v,
            SysReg::PmsfcrEl1 => r.pmsfcr = v,
            SysReg::PmsevfrEl1 => r.pmsevfr = v,
            SysReg::PmslatfrEl1 => r.pmslatfr = v,
            SysReg::PmblimitrEl1 => {
                let old = std::mem::replace(&mut r.pmblimitr, v);
                self.tlb.invalidate();
                self.note_buffer_enable(old);
            }
            SysReg::PmbptrEl1 => {
                r.pmbptr = v;
                self.tlb.invalidate();
            }
            SysReg::PmbsrEl1 | SysReg::PmbsrEl2 | SysReg::PmbsrEl3 => {
                match target {
                    SysReg::PmbsrEl1 => r.pmbsr_el1 = v,
                    SysReg::PmbsrEl2 => r.pmbsr_el2 = v,
                    _ => r.pmbsr_el3 = v,
                }
                self.note_pmbsr_write();
            }
            SysReg::PmsdsfrEl1 => r.pmsdsfr = v,
            SysReg::PmbmarEl1 => r.pmbmar = v,
            SysReg::PmecrEl1 => r.pmecr = v,
            SysReg::PmsscrEl1 => {
                if PMSSCR_EL1::SS.is_set(v) {
                    self.pmsscr_ss_write();
                }
            }
            // Read-only registers: MSR has no encoding for them.
            SysReg::PmsidrEl1
            | SysReg::PmbidrEl1
            | SysReg::PmevcntsvrEl1(_)
            | SysReg::PmccntsvrEl1
            | SysReg::PmicntsvrEl1 => return Err(AccessOutcome::Undefined),
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
