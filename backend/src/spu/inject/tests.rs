//! The fault catalogue: each kind's PMBSR, PMBPTR, PMBIRQ and the bytes it
//! leaves in the buffer, and each trigger's record.

use super::*;
use crate::spu::test_util::*;
use crate::spu::{Features, SampleOutcome};
use spe_protocol::control::{FaultKind as K, Trigger as T, XlatFault as X};
use vm_memory::{Bytes, GuestAddress};

const PAGES: u64 = 4;

fn rig() -> (Mem, Spu) {
    let m = mem(8 << 20);
    let (spu, _) = linux_spu(&m, Features::default(), PAGES);
    (m, spu)
}

/// Samples until a fault is delivered (or `max` samples): the number of
/// records written before it.
fn run_until_delivered(spu: &mut Spu, m: &Mem, max: usize) -> usize {
    let mut written = 0;
    for _ in 0..max {
        if let SampleOutcome::Written { .. } = spu.sample(&load(0x1000, 0x2000), m) {
            written += 1;
        }
        if spu.has_delivered() {
            break;
        }
    }
    written
}

fn buffer_bytes(m: &Mem) -> Vec<u8> {
    let mut b = vec![0u8; (PAGES * 4096) as usize];
    m.read_slice(&mut b, GuestAddress(BUF_PA)).unwrap();
    b
}

/// One row per kind: the PMBSR fields after delivery at the third record,
/// whether profiling stops, whether PMBIRQ is asserted, whether the record
/// is dropped.
#[test]
fn each_kind_sets_the_syndrome_the_architecture_gives_it() {
    struct Row {
        kind: K,
        ec: u64,
        mss: u64,
        s: bool,
        ea: bool,
        dl: bool,
        coll: bool,
        irq: bool,
        dropped: bool,
    }
    let row = |kind, ec, mss, s, flags: &str, irq, dropped| Row {
        kind,
        ec,
        mss,
        s,
        ea: flags.contains("EA"),
        dl: flags.contains("DL"),
        coll: flags.contains("COLL"),
        irq,
        dropped,
    };
    let rows = [
        row(K::BufferFull, 0, 1, true, "", true, true),
        row(K::DataLoss { event: true }, 0, 1, true, "DL", true, true),
        row(K::DataLoss { event: false }, 0, 0, false, "DL", false, true),
        row(K::ExternalAbort, 0x24, 0x10, true, "EA", true, true),
        row(
            K::Stage1 {
                fault: X::Translation,
                level: 3,
            },
            0x24,
            0x07,
            true,
            "",
            true,
            true,
        ),
        row(
            K::Stage1 {
                fault: X::AccessFlag,
                level: 2,
            },
            0x24,
            0x0A,
            true,
            "",
            true,
            true,
        ),
        row(
            K::Stage1 {
                fault: X::Permission,
                level: 1,
            },
            0x24,
            0x0D,
            true,
            "",
            true,
            true,
        ),
        row(
            K::Stage1 {
                fault: X::Translation,
                level: -1,
            },
            0x24,
            0x2B,
            true,
            "",
            true,
            true,
        ),
        row(
            K::ImpDef { syndrome: 0x1234 },
            0x1F,
            0x1234,
            true,
            "",
            true,
            true,
        ),
        row(K::SizeTooLarge, 0, 4, true, "", true, true),
        row(K::UnknownBsc { bsc: 0x3F }, 0, 0x3F, true, "", true, true),
        row(K::UnknownEc { ec: 0x2A }, 0x2A, 0, true, "", true, true),
        row(K::Collision { event: true }, 0, 1, true, "COLL", true, true),
        row(
            K::Collision { event: false },
            0,
            0,
            false,
            "COLL",
            false,
            true,
        ),
        row(K::SpuriousIrq, 0, 0, false, "", true, false),
        row(K::LostIrq, 0, 1, true, "", false, true),
        row(
            K::StuckPointer { records: 1 },
            0,
            0,
            false,
            "",
            false,
            false,
        ),
    ];
    for r in rows {
        let (m, mut spu) = rig();
        check_fault(spu.features(), &r.kind).unwrap();
        spu.arm_fault(7, r.kind, T::AfterRecords { count: 2 });
        let before = buffer_bytes(&m);
        let written = if r.dropped { 2 } else { 3 };
        assert_eq!(
            run_until_delivered(&mut spu, &m, 3),
            written,
            "{:?}",
            r.kind
        );
        let ptr = spu.regs().pmbptr;
        let d = spu.take_delivered();
        assert_eq!(d.len(), 1, "{:?}", r.kind);
        assert!(d[0].delivered && d[0].id == 7, "{:?}", r.kind);
        let pmbsr = spu.regs().pmbsr_el1;
        assert_eq!(d[0].pmbsr, pmbsr);
        let what = format!("{:?}: PMBSR {pmbsr:#x}", r.kind);
        assert_eq!(PMBSR::EC.get(pmbsr), r.ec, "{what}");
        assert_eq!(PMBSR::MSS.get(pmbsr), r.mss, "{what}");
        assert_eq!(PMBSR::S.is_set(pmbsr), r.s, "{what}");
        assert_eq!(PMBSR::EA.is_set(pmbsr), r.ea, "{what}");
        assert_eq!(PMBSR::DL.is_set(pmbsr), r.dl, "{what}");
        assert_eq!(PMBSR::COLL.is_set(pmbsr), r.coll, "{what}");
        assert_eq!(spu.pmbirq(), r.irq, "{what}");
        assert_eq!(spu.spe_profiling_stopped(), r.s, "{what}");
        let rec = spu.last_record().len() as u64;
        if r.dropped {
            // The record that met the fault is not written, in whole or in
            // part, and PMBPTR stays where it would have gone.
            assert_eq!(ptr, BUF_VA + 2 * rec, "{what}");
            let after = buffer_bytes(&m);
            let tail = (2 * rec) as usize;
            assert_eq!(after[tail..], before[tail..], "{what}");
        } else if matches!(r.kind, K::StuckPointer { .. }) {
            // Written, but the pointer stayed; the next one moves it.
            assert_eq!(ptr, BUF_VA + 2 * rec, "{what}");
            spu.sample(&load(0x1000, 0x2000), &m);
            assert_eq!(spu.regs().pmbptr, BUF_VA + 3 * rec, "{what}");
        } else {
            assert_eq!(ptr, BUF_VA + 3 * rec, "{what}");
        }
    }
}

#[test]
fn triggers_pick_their_record() {
    let rec = {
        let (m, mut spu) = rig();
        spu.sample(&load(0x1000, 0x2000), &m);
        spu.last_record().len() as u64
    };
    // (trigger, records written before the fault)
    let rows = [
        (T::NextRecord, 0),
        (T::AfterRecords { count: 0 }, 0),
        (T::AfterRecords { count: 5 }, 5),
        // The record that would write byte 4 * rec is the fifth: PMBPTR
        // stops exactly there.
        (T::AtByte { offset: 4 * rec }, 4),
        (
            T::AtByte {
                offset: 4 * rec + 1,
            },
            4,
        ),
        (
            T::AtByte {
                offset: 4 * rec - 1,
            },
            3,
        ),
        (
            T::AtVa {
                va: BUF_VA + 10 * rec,
            },
            10,
        ),
        (
            T::AtVa {
                va: BUF_VA + 10 * rec - 1,
            },
            9,
        ),
    ];
    for (trigger, before) in rows {
        let (m, mut spu) = rig();
        spu.arm_fault(1, K::BufferFull, trigger);
        assert_eq!(spu.armed_faults().len(), 1);
        assert_eq!(run_until_delivered(&mut spu, &m, 50), before, "{trigger:?}");
        assert_eq!(
            spu.regs().pmbptr,
            BUF_VA + before as u64 * rec,
            "{trigger:?}"
        );
        assert!(spu.armed_faults().is_empty());
    }
}

#[test]
fn at_byte_counts_from_where_the_buffer_was_enabled() {
    let (m, mut spu) = rig();
    // Re-enable the buffer one page in, as the driver does after a wrap.
    spu.write_sysreg(SysReg::PmblimitrEl1, 0).unwrap();
    spu.write_sysreg(SysReg::PmbptrEl1, BUF_VA + 4096).unwrap();
    spu.write_sysreg(SysReg::PmblimitrEl1, (BUF_VA + PAGES * 4096) | 1)
        .unwrap();
    spu.arm_fault(1, K::BufferFull, T::AtByte { offset: 64 });
    run_until_delivered(&mut spu, &m, 10);
    assert!(spu.regs().pmbptr >= BUF_VA + 4096);
    assert!(spu.regs().pmbptr <= BUF_VA + 4096 + 64);
}

#[test]
fn now_delivers_at_once_and_cancel_disarms() {
    let (_m, mut spu) = rig();
    spu.arm_fault(3, K::ExternalAbort, T::Now);
    assert!(spu.armed_faults().is_empty());
    let d = spu.take_delivered();
    assert_eq!(d[0].id, 3);
    assert!(spu.pmbirq());
    assert!(spu.take_delivered().is_empty());

    let (m, mut spu) = rig();
    spu.arm_fault(4, K::BufferFull, T::NextRecord);
    assert!(spu.cancel_fault(4));
    assert!(!spu.cancel_fault(4));
    assert!(matches!(
        spu.sample(&load(0, 0), &m),
        SampleOutcome::Written { .. }
    ));
    assert!(!spu.has_delivered());
}

#[test]
fn spurious_irq_ends_at_the_next_register_access() {
    let (_m, mut spu) = rig();
    spu.arm_fault(1, K::SpuriousIrq, T::Now);
    assert!(spu.pmbirq());
    assert!(!PMBSR::S.is_set(spu.regs().pmbsr_el1));
    spu.read_sysreg(SysReg::PmbsrEl1).unwrap();
    assert!(!spu.pmbirq());
}

#[test]
fn lost_irq_ends_when_software_clears_s() {
    let (m, mut spu) = rig();
    spu.arm_fault(1, K::LostIrq, T::NextRecord);
    spu.sample(&load(0, 0), &m);
    assert!(spu.spe_profiling_stopped());
    assert!(!spu.pmbirq());
    // Reading PMBSR does not bring the interrupt back: S is still 1.
    spu.read_sysreg(SysReg::PmbsrEl1).unwrap();
    assert!(!spu.pmbirq());
    spu.write_sysreg(SysReg::PmbsrEl1, 0).unwrap();
    assert!(!spu.pmbirq());
    // The next real event raises PMBIRQ again.
    spu.arm_fault(2, K::BufferFull, T::Now);
    assert!(spu.pmbirq());
}

#[test]
fn stage2_needs_a_stage2_regime() {
    let n1 = Features::neoverse_n1();
    let s2 = K::Stage2 {
        fault: X::Translation,
        level: 1,
    };
    assert!(check_fault(&n1, &s2).is_err(), "no EL2 on this profile");
    let el2 = Features::neoverse_n1().with_el2_el3();
    check_fault(&el2, &s2).unwrap();
    // EL2 implemented but the guest runs without stage 2: not delivered,
    // and the record is written as usual.
    let (m, _) = rig();
    let (mut spu, _) = linux_spu(&m, el2, PAGES);
    spu.arm_fault(1, s2, T::NextRecord);
    assert!(matches!(
        spu.sample(&load(0, 0), &m),
        SampleOutcome::Written { .. }
    ));
    let d = spu.take_delivered();
    assert!(!d[0].delivered && d[0].why.is_some());
}

#[test]
fn impossible_kinds_are_refused() {
    let f = Features::max();
    for k in [
        K::GranuleProtection,
        K::UnknownBsc { bsc: 1 },
        K::UnknownBsc { bsc: 4 },
        K::UnknownBsc { bsc: 64 },
        K::UnknownEc { ec: 0x24 },
        K::UnknownEc { ec: 0 },
        K::UnknownEc { ec: 0x40 },
        K::StuckPointer { records: 0 },
        K::Stage1 {
            fault: X::AccessFlag,
            level: -1,
        },
        K::Stage1 {
            fault: X::Translation,
            level: 4,
        },
    ] {
        assert!(check_fault(&f, &k).is_err(), "{k:?}");
    }
}

/// With FEAT_SPE_EXC and PMSCR_EL2.EE routing to EL2, an injected stage 2
/// fault lands in PMBSR_EL2 as a real one would, and PMBSR_EL1 is clean.
#[test]
fn faults_go_to_the_owning_els_pmbsr() {
    let (m, _) = rig();
    let mut f = Features::max().with_el2_el3();
    f.have_el3 = false;
    let (mut spu, _) = linux_spu(&m, f, PAGES);
    let mut ctx = *spu.context();
    ctx.el = El::El2;
    spu.set_context(ctx);
    spu.write_sysreg(SysReg::PmscrEl2, PMSCR_EL2::EE.set(0, 0b11))
        .unwrap();
    ctx.el = El::El1;
    spu.set_context(ctx);
    spu.arm_fault(1, K::ImpDef { syndrome: 5 }, T::Now);
    let d = spu.take_delivered();
    assert_eq!(PMBSR::EC.get(spu.regs().pmbsr_el2), 0x1F);
    assert_eq!(spu.regs().pmbsr_el1, 0);
    assert_eq!(d[0].pmbsr, spu.regs().pmbsr_el2);
}

/// QEMU resets the vCPUs after the VM connects, when the scenario's faults
/// are already armed: they must survive it.
#[test]
fn armed_faults_survive_a_reset() {
    let (m, mut spu) = rig();
    spu.arm_fault(1, K::BufferFull, T::NextRecord);
    spu.reset();
    assert_eq!(spu.armed_faults().len(), 1);
    program(&mut spu, BUF_VA, BUF_VA + PAGES * 4096);
    assert_eq!(run_until_delivered(&mut spu, &m, 3), 0);
}
