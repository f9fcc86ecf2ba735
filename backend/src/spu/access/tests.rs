use super::*;
use crate::spu::Features;

fn at(spu: &mut Spu, el: El) {
    let mut c = *spu.context();
    c.el = el;
    spu.set_context(c);
}

#[test]
fn linux_probe_sequence() {
    let mut spu = Spu::new(Features::default());
    let pmsidr = spu.read_sysreg(SysReg::PmsidrEl1).unwrap();
    assert_eq!(PMSIDR_EL1::MAXSIZE.get(pmsidr), 6);
    assert_eq!(PMSIDR_EL1::INTERVAL.get(pmsidr), 4);
    let pmbidr = spu.read_sysreg(SysReg::PmbidrEl1).unwrap();
    assert!(!PMBIDR_EL1::P.is_set(pmbidr), "EL1 owns the buffer");
    // Linux 6.18 writes all-ones and reads back the implemented mask.
    spu.write_sysreg(SysReg::PmsevfrEl1, u64::MAX).unwrap();
    let mask = spu.read_sysreg(SysReg::PmsevfrEl1).unwrap();
    assert_eq!(
        mask,
        1 << 11 | 1 << 7 | 1 << 5 | 1 << 3 | 1 << 1,
        "v1p1 without FnE"
    );
    // Per-CPU reset.
    for r in [
        SysReg::PmscrEl1,
        SysReg::PmblimitrEl1,
        SysReg::PmbptrEl1,
        SysReg::PmbsrEl1,
    ] {
        spu.write_sysreg(r, 0).unwrap();
        assert_eq!(spu.read_sysreg(r), Ok(0));
    }
}

#[test]
fn res0_bits_read_as_zero() {
    let mut spu = Spu::new(Features::neoverse_n1());
    let cases = [
        (SysReg::PmscrEl1, 0b111_1011u64), // E0SPE E1SPE CX PA TS PCT<0>
        (SysReg::PmsirrEl1, 0xFFFF_FF01),
        (SysReg::PmsicrEl1, 0xFFFF_FFFF), // no ECOUNT without ERnd
        (SysReg::PmsfcrEl1, 0x7_0007),
        (SysReg::PmslatfrEl1, 0xFFF), // 12-bit counters
        (SysReg::PmblimitrEl1, 0xFFFF_FFFF_FFFF_F007),
        (SysReg::PmbptrEl1, u64::MAX),
        (SysReg::PmbsrEl1, 0xFC0F_FFFF),
    ];
    for (r, want) in cases {
        spu.write_sysreg(r, u64::MAX).unwrap();
        assert_eq!(spu.read_sysreg(r), Ok(want), "{}", r.name());
    }
    let mut spu = Spu::new(Features::max());
    spu.write_sysreg(SysReg::PmsicrEl1, u64::MAX).unwrap();
    assert_eq!(
        spu.read_sysreg(SysReg::PmsicrEl1),
        Ok(0xFF00_0000_FFFF_FFFF),
        "ERnd: ECOUNT"
    );
    spu.write_sysreg(SysReg::PmblimitrEl1, u64::MAX).unwrap();
    assert_eq!(
        spu.read_sysreg(SysReg::PmblimitrEl1),
        Ok(0xFFFF_FFFF_FFFF_F0A7),
        "PMFZ, nVM"
    );
}

#[test]
fn read_only_and_feature_gated_registers() {
    let mut spu = Spu::new(Features::neoverse_n1());
    assert_eq!(
        spu.write_sysreg(SysReg::PmsidrEl1, 0),
        Err(AccessOutcome::Undefined)
    );
    assert_eq!(
        spu.write_sysreg(SysReg::PmbidrEl1, 0),
        Err(AccessOutcome::Undefined)
    );
    for r in [
        SysReg::PmsnevfrEl1,
        SysReg::PmbmarEl1,
        SysReg::PmsdsfrEl1,
        SysReg::PmbsrEl2,
    ] {
        assert_eq!(
            spu.read_sysreg(r),
            Err(AccessOutcome::Undefined),
            "{}",
            r.name()
        );
    }
    assert_eq!(
        spu.read_sysreg(SysReg::PmscrEl2),
        Err(AccessOutcome::Undefined),
        "no EL2"
    );
    let mut spu = Spu::new(Features::max().with_el2_el3());
    at(&mut spu, El::El2);
    for r in [
        SysReg::PmsnevfrEl1,
        SysReg::PmbmarEl1,
        SysReg::PmsdsfrEl1,
        SysReg::PmbsrEl2,
    ] {
        assert!(spu.read_sysreg(r).is_ok(), "{}", r.name());
    }
    assert_eq!(
        spu.read_sysreg(SysReg::PmbsrEl3),
        Err(AccessOutcome::Undefined),
        "EL3 only"
    );
    // PMSDSFR_EL1 and PMSFCR_EL1.FDS are FEAT_SPE_FDS's, not SPEv1p4's.
    let mut no_fds = Features::max();
    no_fds.pmsidr &= !PMSIDR_EL1::FDS.mask();
    let mut v1p4 = Spu::new(no_fds);
    at(&mut v1p4, El::El1);
    assert_eq!(
        v1p4.read_sysreg(SysReg::PmsdsfrEl1),
        Err(AccessOutcome::Undefined)
    );
    v1p4.write_sysreg(SysReg::PmsfcrEl1, PMSFCR_EL1::FDS.mask())
        .unwrap();
    assert_eq!(v1p4.regs().pmsfcr, 0, "FDS is RES0 without FEAT_SPE_FDS");
    at(&mut spu, El::El3);
    assert!(spu.read_sysreg(SysReg::PmbsrEl3).is_ok());
}

#[test]
fn el0_is_undefined() {
    let mut spu = Spu::new(Features::max());
    at(&mut spu, El::El0);
    for r in SysReg::all() {
        assert_eq!(
            spu.read_sysreg(r),
            Err(AccessOutcome::Undefined),
            "{}",
            r.name()
        );
    }
}

#[test]
fn traps_to_el2_and_el3() {
    let mut spu = Spu::new(Features::neoverse_n1().with_el2_el3());
    let mut c = *spu.context();
    c.mdcr_el2 = MDCR_EL2::TPMS.set(c.mdcr_el2, 1);
    spu.set_context(c);
    assert_eq!(
        spu.read_sysreg(SysReg::PmscrEl1),
        Err(AccessOutcome::TrapToEl2)
    );
    assert!(
        spu.read_sysreg(SysReg::PmblimitrEl1).is_ok(),
        "TPMS leaves PMB* alone"
    );
    c.mdcr_el2 = MDCR_EL2::E2PB.set(0, 0b10);
    spu.set_context(c);
    assert!(spu.read_sysreg(SysReg::PmscrEl1).is_ok());
    assert_eq!(
        spu.read_sysreg(SysReg::PmbptrEl1),
        Err(AccessOutcome::TrapToEl2)
    );
    // MDCR_EL3.NSPB = 0b01: Secure owns the buffer, Non-secure traps.
    c.mdcr_el2 = MDCR_EL2::E2PB.set(0, 0b11);
    c.mdcr_el3 = MDCR_EL3::NSPB.set(c.mdcr_el3, 0b01);
    spu.set_context(c);
    assert_eq!(
        spu.read_sysreg(SysReg::PmscrEl1),
        Err(AccessOutcome::TrapToEl3)
    );
    assert_eq!(
        spu.read_sysreg(SysReg::PmbsrEl1),
        Err(AccessOutcome::TrapToEl3)
    );
    at(&mut spu, El::El2);
    assert_eq!(
        spu.write_sysreg(SysReg::PmscrEl2, 1),
        Err(AccessOutcome::TrapToEl3)
    );
    at(&mut spu, El::El3);
    assert!(spu.write_sysreg(SysReg::PmscrEl2, 1).is_ok());
}

#[test]
fn vhe_aliases() {
    let mut spu = Spu::new(Features::neoverse_n1().with_el2_el3());
    let mut c = *spu.context();
    c.el = El::El2;
    spu.set_context(c);
    assert_eq!(
        spu.read_sysreg(SysReg::PmscrEl12),
        Err(AccessOutcome::Undefined),
        "E2H = 0"
    );
    spu.write_sysreg(SysReg::PmscrEl1, 0b11).unwrap();
    assert_eq!(spu.regs.pmscr_el1, 0b11, "no E2H: PMSCR_EL1 itself");
    c.hcr_el2 = HCR_EL2::E2H.set(0, 1);
    spu.set_context(c);
    spu.write_sysreg(SysReg::PmscrEl1, 0b10).unwrap();
    assert_eq!(spu.regs.pmscr_el2, 0b10, "E2H: PMSCR_EL1 is PMSCR_EL2");
    spu.write_sysreg(SysReg::PmscrEl12, 0b01).unwrap();
    assert_eq!(spu.regs.pmscr_el1, 0b01, "PMSCR_EL12 is PMSCR_EL1");
    c.el = El::El1;
    spu.set_context(c);
    assert_eq!(
        spu.read_sysreg(SysReg::PmscrEl12),
        Err(AccessOutcome::Undefined)
    );
}

#[test]
fn pmbidr_p_when_a_higher_el_owns_the_buffer() {
    let mut spu = Spu::new(Features::neoverse_n1().with_el2_el3());
    let mut c = *spu.context();
    c.mdcr_el2 = MDCR_EL2::E2PB.set(0, 0b00);
    spu.set_context(c);
    let p = |s: &mut Spu| PMBIDR_EL1::P.is_set(s.read_sysreg(SysReg::PmbidrEl1).unwrap());
    assert!(p(&mut spu), "EL2 owns it, EL1 reads");
    at(&mut spu, El::El2);
    assert!(!p(&mut spu), "the owner reads");
}

#[test]
fn pmbirq_follows_pmbsr_s() {
    let mut spu = Spu::new(Features::default());
    assert!(!spu.pmbirq());
    spu.write_sysreg(SysReg::PmbsrEl1, PMBSR::S.mask()).unwrap();
    assert!(spu.pmbirq(), "software setting S raises it");
    spu.write_sysreg(SysReg::PmbsrEl1, 0).unwrap();
    assert!(!spu.pmbirq());
}

#[test]
fn pmbirq_not_driven_when_spe_exceptions_enabled() {
    // FEAT_SPE_EXC with PMSCR_EL2.EE = 0b11 routes events as exceptions.
    let mut spu = Spu::new(Features::max().with_el2_el3());
    spu.regs.pmscr_el2 = PMSCR_EL2::EE.set(0, 0b11);
    spu.regs.pmscr_el1 = PMSCR_EL1::EE.set(0, 0b11);
    spu.regs.pmbsr_el1 = PMBSR::S.mask();
    assert!(!spu.spe_interrupt_enabled());
    assert!(!spu.pmbirq());
}
