//! Buffer full, faults, and where records land.

use super::*;
use crate::spu::test_util::*;
use crate::spu::translate::fsc;
use crate::spu::Features;

#[test]
fn records_land_at_the_translated_address() {
    let m = mem(8 << 20);
    let mut tb = TableBuilder::new(&m, translate::Granule::K4, 48, TABLE_POOL).unwrap();
    // Two virtually contiguous pages, physically apart and out of order.
    tb.map(&m, BUF_VA, 0x50_0000, PAGE_RW).unwrap();
    tb.map(&m, BUF_VA + 4096, 0x30_0000, PAGE_RW).unwrap();
    let mut spu = Spu::new(Features::default());
    spu.set_translation(TranslationRegs {
        sctlr_el1: 1,
        tcr_el1: tcr_el1(translate::Granule::K4, 48),
        ttbr1_el1: tb.root,
        ..Default::default()
    });
    // Start 8 bytes before the page boundary so the first record straddles.
    program(&mut spu, BUF_VA + 4096 - 8, BUF_VA + 2 * 4096);
    let out = spu.sample(&load(0x1000, 0x2000), &m);
    let SampleOutcome::Written { bytes, .. } = out else {
        panic!("{out:?}")
    };
    let rec = spu.last_record().to_vec();
    let mut first = [0u8; 8];
    m.read_slice(&mut first, GuestAddress(0x50_0000 + 4096 - 8))
        .unwrap();
    assert_eq!(first, rec[..8]);
    let mut rest = vec![0u8; bytes - 8];
    m.read_slice(&mut rest, GuestAddress(0x30_0000)).unwrap();
    assert_eq!(rest, rec[8..]);
}

#[test]
fn buffer_full_fires_at_the_first_record_past_limit_minus_max() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 1);
    let limit = BUF_VA + 4096;
    let mut n = 0;
    loop {
        let before = spu.regs().pmbptr;
        let out = spu.sample(&load(0x1000, 0x2000), &m);
        n += 1;
        let SampleOutcome::Written { bytes, full } = out else {
            panic!("{out:?}")
        };
        let after = before + bytes as u64;
        assert_eq!(spu.regs().pmbptr, after);
        assert_eq!(full, after > limit - 64, "record {n}");
        assert_eq!(spu.pmbirq(), full);
        if full {
            break;
        }
    }
    let pmbsr = spu.regs().pmbsr_el1;
    assert_eq!(PMBSR::EC.get(pmbsr), pmbsr_ec::BUFFER);
    assert_eq!(PMBSR::BSC.get(pmbsr), pmbsr_bsc::BUFFER_FILLED);
    assert!(PMBSR::S.is_set(pmbsr));
    assert!(!PMBSR::DL.is_set(pmbsr));
    // Profiling is stopped: nothing more is written.
    assert_eq!(spu.sample(&load(0, 0), &m), SampleOutcome::Disabled);
    // The driver re-arms: clear PMBSR, move the pointer, profiling resumes.
    spu.write_sysreg(SysReg::PmbptrEl1, BUF_VA).unwrap();
    spu.write_sysreg(SysReg::PmbsrEl1, 0).unwrap();
    assert!(!spu.pmbirq());
    assert!(matches!(
        spu.sample(&load(0, 0), &m),
        SampleOutcome::Written { .. }
    ));
}

#[test]
fn unmapped_buffer_is_a_stage1_translation_fault() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 1);
    // Point the buffer at the unmapped page after the mapped one.
    program(&mut spu, BUF_VA + 4096, BUF_VA + 3 * 4096);
    let before = m.read_slice(&mut [0u8; 1], GuestAddress(BUF_PA + 4096));
    assert!(before.is_ok());
    assert_eq!(spu.sample(&load(0, 0), &m), SampleOutcome::Fault);
    let pmbsr = spu.regs().pmbsr_el1;
    assert_eq!(PMBSR::EC.get(pmbsr), pmbsr_ec::STAGE1_DATA_ABORT);
    assert_eq!(PMBSR::FSC.get(pmbsr), u64::from(fsc::translation(3)));
    assert!(PMBSR::S.is_set(pmbsr) && spu.pmbirq());
    assert_eq!(
        spu.regs().pmbptr,
        BUF_VA + 4096,
        "PMBPTR stays at the record"
    );
}

#[test]
fn a_record_is_written_whole_or_not_at_all() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 1);
    // The record would straddle into the unmapped second page.
    program(&mut spu, BUF_VA + 4096 - 16, BUF_VA + 3 * 4096);
    m.write_slice(&[0xAA; 16], GuestAddress(BUF_PA + 4096 - 16))
        .unwrap();
    assert_eq!(spu.sample(&load(0, 0), &m), SampleOutcome::Fault);
    let mut tail = [0u8; 16];
    m.read_slice(&mut tail, GuestAddress(BUF_PA + 4096 - 16))
        .unwrap();
    assert_eq!(tail, [0xAA; 16], "no partial record");
    assert_eq!(spu.regs().pmbptr, BUF_VA + 4096 - 16);
}

#[test]
fn buffer_outside_guest_ram_is_an_external_abort() {
    let m = mem(8 << 20);
    let (mut spu, mut tb) = linux_spu(&m, Features::default(), 1);
    tb.map(&m, BUF_VA + 4096, 0x4000_0000, PAGE_RW).unwrap(); // past the end of RAM
    program(&mut spu, BUF_VA + 4096, BUF_VA + 3 * 4096);
    assert_eq!(spu.sample(&load(0, 0), &m), SampleOutcome::Fault);
    let pmbsr = spu.regs().pmbsr_el1;
    assert_eq!(PMBSR::EC.get(pmbsr), pmbsr_ec::STAGE1_DATA_ABORT);
    assert_eq!(PMBSR::FSC.get(pmbsr), u64::from(fsc::EXTERNAL_ABORT));
    assert!(PMBSR::EA.is_set(pmbsr));
}

#[test]
fn tables_outside_guest_ram_are_an_external_abort_on_walk() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 1);
    spu.set_translation(TranslationRegs {
        sctlr_el1: 1,
        tcr_el1: tcr_el1(translate::Granule::K4, 48),
        ttbr1_el1: 0x8000_0000,
        ..Default::default()
    });
    assert_eq!(spu.sample(&load(0, 0), &m), SampleOutcome::Fault);
    let pmbsr = spu.regs().pmbsr_el1;
    assert_eq!(
        PMBSR::FSC.get(pmbsr),
        u64::from(fsc::external_abort_on_walk(0))
    );
}

/// RPGGHS, each selectable behaviour: the event it raises, and never a
/// byte written at or past the limit.
#[test]
fn a_pointer_past_the_limit_never_writes_beyond_it() {
    use crate::spu::unpredictable::{Choices, Overrun};
    // (choice, EC, MSS, DL)
    let rows = [
        (
            Overrun::BufferFullDataLoss,
            pmbsr_ec::BUFFER,
            pmbsr_bsc::BUFFER_FILLED,
            true,
        ),
        (
            Overrun::BufferFull,
            pmbsr_ec::BUFFER,
            pmbsr_bsc::BUFFER_FILLED,
            false,
        ),
        (Overrun::ImpDef, pmbsr_ec::IMP_DEF, 0, true),
    ];
    for (overrun, ec, mss, dl) in rows {
        let m = mem(8 << 20);
        let (mut spu, _) = linux_spu(&m, Features::default(), 2);
        spu.set_choices(Choices {
            overrun,
            ..Choices::default()
        });
        // RHXSYK broken: PMBPTR 8 bytes below LIMIT.
        program(&mut spu, BUF_VA + 4096 - 8, BUF_VA + 4096);
        m.write_slice(&[0x55; 64], GuestAddress(BUF_PA + 4096 - 8))
            .unwrap();
        assert_eq!(spu.sample(&load(0, 0), &m), SampleOutcome::Fault);
        let pmbsr = spu.regs().pmbsr_el1;
        assert!(PMBSR::S.is_set(pmbsr), "{overrun:?}");
        assert_eq!(PMBSR::EC.get(pmbsr), ec, "{overrun:?}");
        assert_eq!(PMBSR::MSS.get(pmbsr), mss, "{overrun:?}");
        assert_eq!(PMBSR::DL.is_set(pmbsr), dl, "{overrun:?}");
        assert_eq!(spu.regs().pmbptr, BUF_VA + 4096 - 8, "{overrun:?}");
        let mut after = [0u8; 64];
        m.read_slice(&mut after, GuestAddress(BUF_PA + 4096 - 8))
            .unwrap();
        assert_eq!(after, [0x55; 64], "{overrun:?}");
    }
}

#[test]
fn choices_are_set_by_name_and_listed() {
    use crate::spu::unpredictable::{BadPmsfcr, ChoiceError, Choices, Operations, Overrun};
    let mut c = Choices::default();
    assert_eq!(c.list()[0].value, "buffer-full-dl");
    assert_eq!(c.list()[2].value, "micro-ops");
    c.set_from("operations=instructions").unwrap();
    assert_eq!(c.operations, Operations::Instructions);
    assert_eq!(c.list()[2].value, "instructions");
    c.set_from("overrun=imp-def").unwrap();
    c.set("badpmsfcr", "reject").unwrap();
    assert_eq!(c.overrun, Overrun::ImpDef);
    assert_eq!(c.badpmsfcr, BadPmsfcr::Reject);
    assert_eq!(c.list()[0].value, "imp-def");
    assert_eq!(c.list()[1].value, "reject");
    for info in c.list() {
        assert!(info.permitted.contains(&info.value));
        assert!(!info.rule.is_empty());
        // Every permitted name is accepted.
        for v in info.permitted {
            Choices::default().set(info.name, v).unwrap();
        }
    }
    let e = c.set("overrun", "write-anywhere").unwrap_err();
    assert_eq!(
        e.to_string(),
        "overrun is one of buffer-full-dl, buffer-full, imp-def, not \"write-anywhere\""
    );
    assert!(matches!(c.set("nope", "x"), Err(ChoiceError::Name { .. })));
    assert!(matches!(
        c.set_from("overrun"),
        Err(ChoiceError::Syntax { .. })
    ));
    // A refused choice changes nothing.
    assert_eq!(c.overrun, Overrun::ImpDef);
}

#[test]
fn stage2_fault_reports_ec_0x25() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default().with_el2_el3(), 1);
    // EL2 enabled with stage 2 on, and an empty stage 2 table.
    let s2 = TableBuilder::new(&m, translate::Granule::K4, 39, 0x60_0000).unwrap();
    let mut c = *spu.context();
    c.hcr_el2 = HCR_EL2::VM.mask();
    spu.set_context(c);
    let mut x = spu.xlat;
    x.vtcr_el2 = 25 | 1 << 6; // T0SZ 25 (39-bit IPA), SL0 1 (level 1), 4K
    x.vttbr_el2 = s2.root;
    spu.set_translation(x);
    assert_eq!(spu.sample(&load(0, 0), &m), SampleOutcome::Fault);
    let pmbsr = spu.regs().pmbsr_el1;
    assert_eq!(PMBSR::EC.get(pmbsr), pmbsr_ec::STAGE2_DATA_ABORT);
    assert_eq!(PMBSR::FSC.get(pmbsr), u64::from(fsc::translation(1)));
}

#[test]
fn stage2_identity_lets_records_through() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default().with_el2_el3(), 1);
    let mut s2 = TableBuilder::new(&m, translate::Granule::K4, 39, 0x60_0000).unwrap();
    for page in (0..0x40_0000u64).step_by(4096) {
        s2.map(
            &m,
            page,
            page + 0x40_0000 * u64::from((BUF_PA..BUF_PA + 4096).contains(&page)),
            PAGE_RW | 1 << 7,
        )
        .unwrap();
    }
    let mut c = *spu.context();
    c.hcr_el2 = HCR_EL2::VM.mask();
    spu.set_context(c);
    let mut x = spu.xlat;
    x.vtcr_el2 = 25 | 1 << 6;
    x.vttbr_el2 = s2.root;
    spu.set_translation(x);
    let out = spu.sample(&load(0, 0), &m);
    assert!(matches!(out, SampleOutcome::Written { .. }), "{out:?}");
    // The buffer's IPA page was remapped by stage 2 to 0x40_0000 higher.
    let mut got = vec![0u8; spu.last_record().len()];
    m.read_slice(&mut got, GuestAddress(BUF_PA + 0x40_0000))
        .unwrap();
    assert_eq!(got, spu.last_record());
}

#[test]
fn a_record_across_two_ram_regions_lands_whole() {
    // Guest RAM in two regions that meet inside a buffer page, so the
    // record's one chunk takes the general write rather than one slice.
    let split = BUF_PA + 0x800;
    let m = Mem::from_ranges(&[
        (GuestAddress(0), split as usize),
        (GuestAddress(split), (8 << 20) - split as usize),
    ])
    .unwrap();
    let (mut spu, _) = linux_spu(&m, Features::default(), 1);
    program(&mut spu, BUF_VA + 0x800 - 8, BUF_VA + 4096);
    let out = spu.sample(&load(0x1000, 0x2000), &m);
    let SampleOutcome::Written { bytes, .. } = out else {
        panic!("{out:?}")
    };
    let rec = spu.last_record().to_vec();
    let mut landed = vec![0u8; bytes];
    m.read_slice(&mut landed, GuestAddress(split - 8)).unwrap();
    assert_eq!(landed, rec);
    assert_eq!(spu.regs().pmbptr, BUF_VA + 0x800 - 8 + bytes as u64);
}
