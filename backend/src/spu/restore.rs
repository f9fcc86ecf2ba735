//! Coming back after a restart: QEMU keeps the last value the guest wrote
//! to (or read from) each register and hands them back to a backend that
//! restarted on the same socket (`spe_protocol::channel::Restore`).

use super::unpredictable::RESTART_LOSS_EVENT;
use super::Spu;
use spe_protocol::regs::*;

/// Why a register cannot be restored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotRestorable(pub SysReg);

impl Spu {
    /// The register an access to `reg` from the context's EL reaches (the
    /// storage a front end keeps the value under: PMSCR_EL2 for
    /// PMSCR_EL1 at a host EL2, PMSCR_EL1 for PMSCR_EL12), or None if the
    /// access is refused.
    pub fn reached(&self, reg: SysReg) -> Option<SysReg> {
        self.route(reg).ok()
    }

    /// Stores `value` in `reg` as it was before a restart: masked like a
    /// write, without a write's side effects. PMSCR_EL12 names PMSCR_EL1
    /// (a front end that could not ask where an access went keeps it
    /// under the encoding used). ID registers are this process's own and
    /// what a capture copied is lost: those values are ignored. A register
    /// this PE does not have is refused.
    pub fn restore_register(&mut self, reg: SysReg, value: u64) -> Result<(), NotRestorable> {
        let present = match reg {
            SysReg::PmscrEl2 => self.features.have_el2,
            SysReg::PmsnevfrEl1 => self.features.spe_fne(),
            SysReg::PmsdsfrEl1 => self.features.spe_fds(),
            SysReg::PmbmarEl1 => self.features.spe_nvm,
            SysReg::PmbsrEl2 => self.features.spe_exc && self.features.have_el2,
            SysReg::PmbsrEl3 => self.features.spe_exc,
            SysReg::PmecrEl1 => self.features.pmu_ss,
            _ => true,
        };
        let reg = match reg {
            SysReg::PmscrEl12 => SysReg::PmscrEl1,
            r => r,
        };
        let v = value & self.writable_mask(reg);
        let r = &mut self.regs;
        let slot = match reg {
            SysReg::PmscrEl1 => &mut r.pmscr_el1,
            SysReg::PmscrEl2 => &mut r.pmscr_el2,
            SysReg::PmsnevfrEl1 => &mut r.pmsnevfr,
            SysReg::PmsicrEl1 => &mut r.pmsicr,
            SysReg::PmsirrEl1 => &mut r.pmsirr,
            SysReg::PmsfcrEl1 => &mut r.pmsfcr,
            SysReg::PmsevfrEl1 => &mut r.pmsevfr,
            SysReg::PmslatfrEl1 => &mut r.pmslatfr,
            SysReg::PmblimitrEl1 => &mut r.pmblimitr,
            SysReg::PmbptrEl1 => &mut r.pmbptr,
            SysReg::PmbsrEl1 => &mut r.pmbsr_el1,
            SysReg::PmbsrEl2 => &mut r.pmbsr_el2,
            SysReg::PmbsrEl3 => &mut r.pmbsr_el3,
            SysReg::PmsdsfrEl1 => &mut r.pmsdsfr,
            SysReg::PmbmarEl1 => &mut r.pmbmar,
            SysReg::PmecrEl1 => &mut r.pmecr,
            SysReg::PmscrEl12
            | SysReg::PmsidrEl1
            | SysReg::PmbidrEl1
            | SysReg::PmsscrEl1
            | SysReg::PmccntsvrEl1
            | SysReg::PmicntsvrEl1
            | SysReg::PmevcntsvrEl1(_) => return Ok(()),
        };
        if !present {
            return Err(NotRestorable(reg));
        }
        *slot = v;
        Ok(())
    }

    /// After the registers are back: the buffer walk starts afresh, and
    /// with the buffer enabled what the old process had in flight is
    /// reported lost ([`RESTART_LOSS_EVENT`]). Returns whether it was.
    pub fn restore_done(&mut self) -> bool {
        self.tlb.invalidate();
        self.buffer_base = self.regs.pmbptr;
        if !PMBLIMITR_EL1::E.is_set(self.regs.pmblimitr) {
            return false;
        }
        let (ec, bsc) = RESTART_LOSS_EVENT;
        self.raise(ec, bsc, PMBSR::DL.mask());
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spu::Features;

    /// A Linux guest at EL1 Non-secure, on a PE with EL2 and EL3.
    fn spu() -> Spu {
        Spu::new(Features::max().with_el2_el3())
    }

    #[test]
    fn values_come_back_without_side_effects() {
        let mut s = spu();
        s.restore_register(SysReg::PmbptrEl1, 0xffff_8000_0010_0040)
            .unwrap();
        s.restore_register(SysReg::PmblimitrEl1, 0xffff_8000_0020_0000)
            .unwrap();
        s.restore_register(SysReg::PmscrEl1, 0x3).unwrap();
        assert_eq!(s.regs().pmbptr, 0xffff_8000_0010_0040);
        assert_eq!(s.regs().pmscr_el1, 0x3);
        // E is 0: nothing was in flight.
        assert!(!s.restore_done());
        assert!(!PMBSR::S.is_set(s.pmbsr()));
    }

    #[test]
    fn an_enabled_buffer_reports_the_loss() {
        let mut s = spu();
        s.restore_register(SysReg::PmblimitrEl1, 0xffff_8000_0020_0001)
            .unwrap();
        assert!(s.restore_done());
        let pmbsr = s.pmbsr();
        assert!(PMBSR::S.is_set(pmbsr));
        assert!(PMBSR::DL.is_set(pmbsr));
        assert_eq!(PMBSR::EC.get(pmbsr), RESTART_LOSS_EVENT.0);
        assert_eq!(PMBSR::MSS.get(pmbsr), RESTART_LOSS_EVENT.1);
        assert!(s.pmbirq());
    }

    #[test]
    fn res0_bits_are_masked_like_a_write() {
        let mut s = spu();
        s.restore_register(SysReg::PmsirrEl1, u64::MAX).unwrap();
        assert_eq!(s.regs().pmsirr, PMSIRR_EL1::INTERVAL.mask() | 1);
    }

    #[test]
    fn ids_and_captures_are_ignored_and_absent_registers_refused() {
        let mut s = spu();
        let before = s.regs().clone();
        for reg in [
            SysReg::PmsidrEl1,
            SysReg::PmbidrEl1,
            SysReg::PmsscrEl1,
            SysReg::PmccntsvrEl1,
            SysReg::PmevcntsvrEl1(0),
        ] {
            assert_eq!(s.restore_register(reg, u64::MAX), Ok(()));
        }
        assert_eq!(*s.regs(), before);
        assert_eq!(
            s.features().pmsidr(),
            s.read_sysreg(SysReg::PmsidrEl1).unwrap()
        );
        s.restore_register(SysReg::PmscrEl12, 0x1).unwrap();
        assert_eq!(s.regs().pmscr_el1, 0x1);
        let mut n1 = Spu::new(Features::neoverse_n1());
        // No FEAT_SPE_EXC, no EL2: there is no PMBSR_EL2 or PMSCR_EL2.
        for reg in [SysReg::PmbsrEl2, SysReg::PmscrEl2, SysReg::PmsnevfrEl1] {
            assert_eq!(n1.restore_register(reg, 1), Err(NotRestorable(reg)));
        }
    }

    #[test]
    fn the_register_reached_is_the_storage() {
        let mut s = spu();
        assert_eq!(s.reached(SysReg::PmscrEl1), Some(SysReg::PmscrEl1));
        let mut host = *s.context();
        host.el = El::El2;
        host.hcr_el2 = HCR_EL2::E2H.set(host.hcr_el2, 1);
        host.hcr_el2 = HCR_EL2::TGE.set(host.hcr_el2, 1);
        s.set_context(host);
        assert_eq!(s.reached(SysReg::PmscrEl1), Some(SysReg::PmscrEl2));
        assert_eq!(s.reached(SysReg::PmscrEl12), Some(SysReg::PmscrEl1));
        host.el = El::El0;
        s.set_context(host);
        assert_eq!(s.reached(SysReg::PmscrEl1), None);
    }
}
