//! Table D13-10 and the capture rules of D13.9.

use super::*;
use crate::spu::Features;

/// Table D13-10 "PMU Capture events". Columns: MDCR_EL3.PMSSE,
/// MDCR_EL2.PMSSE, PMECR_EL1.SSE, Capture Events.
const TABLE_D13_10: &[[&str; 4]] = &[
    ["0b00", "xx", "xx", "Disabled"],
    ["0b01", "0b00", "xx", "Disabled"],
    ["0b01", "0b01", "0b00", "Disabled"],
    ["0b01", "0b01", "0b10", "Prohibited"],
    ["0b01", "0b01", "0b11", "Allowed"],
    ["0b01", "0b10", "xx", "Prohibited"],
    ["0b01", "0b11", "xx", "Allowed"],
    ["0b10", "xx", "xx", "Prohibited"],
    ["0b11", "xx", "xx", "Allowed"],
];

fn values(cell: &str) -> Vec<u64> {
    match cell {
        "xx" => (0..4).collect(),
        c => vec![u64::from_str_radix(c.trim_start_matches("0b"), 2).unwrap()],
    }
}

fn spu(el3: u64, el2: u64, sse: u64) -> Spu {
    let mut spu = Spu::new(Features::max().with_el2_el3());
    let mut c = PeContext::default();
    c.mdcr_el3 = MDCR_EL3::PMSSE.set(c.mdcr_el3, el3);
    c.mdcr_el2 = MDCR_EL2::PMSSE.set(c.mdcr_el2, el2);
    spu.set_context(c);
    spu.regs.pmecr = PMECR_EL1::SSE.set(0, sse);
    spu
}

fn counters() -> PmuCounters {
    let mut c = PmuCounters::default();
    for (i, e) in c.event.iter_mut().enumerate() {
        *e = 1000 + i as u64;
    }
    c.cycle = 0xC1C1E;
    c.instruction = 0x1257;
    c
}

#[test]
fn table_d13_10_capture_events() {
    let mut checked = 0;
    for row in TABLE_D13_10 {
        for el3 in values(row[0]) {
            for el2 in values(row[1]) {
                for sse in values(row[2]) {
                    // PMECR_EL1.SSE = 0b01 is reserved; the table's "xx"
                    // covers it only where a higher level decides.
                    if sse == 0b01 && el3 == 0b01 && el2 == 0b01 {
                        continue;
                    }
                    let what = format!("{row:?} {el3:02b} {el2:02b} {sse:02b}");
                    let mut s = spu(el3, el2, sse);
                    s.set_pmu_counters(counters());
                    s.regs.pmsscr = 0;
                    s.write_sysreg(SysReg::PmsscrEl1, 1).unwrap();
                    let r = &s.regs;
                    match row[3] {
                        "Disabled" => {
                            assert!(!s.pmu_capture_event_enabled(), "{what}");
                            assert_eq!(r.pmsscr, 0, "{what}: SS ignores the write");
                            assert_eq!(r.pmccntsvr, 0, "{what}");
                        }
                        "Prohibited" => {
                            assert!(s.pmu_capture_event_enabled(), "{what}");
                            assert_eq!(
                                r.pmsscr,
                                PMSSCR_EL1::NC.mask(),
                                "{what}: {{NC,SS}}={{1,0}}"
                            );
                            assert_eq!(r.pmccntsvr, 0, "{what}: counters unchanged");
                            assert_eq!(r.pmevcntsvr[0], 0, "{what}");
                        }
                        "Allowed" => {
                            assert!(s.pmu_capture_event_allowed(), "{what}");
                            assert_eq!(r.pmsscr, 0, "{what}: {{NC,SS}}={{0,0}}");
                            assert_eq!(r.pmccntsvr, 0xC1C1E, "{what}");
                            assert_eq!(r.pmicntsvr, 0x1257, "{what}");
                            assert_eq!(&r.pmevcntsvr[..6], &[1000, 1001, 1002, 1003, 1004, 1005]);
                            assert_eq!(r.pmevcntsvr[6], 0, "{what}: only PMCR_EL0.N counters");
                        }
                        _ => unreachable!(),
                    }
                    checked += 1;
                }
            }
        }
    }
    assert_eq!(checked, 16 + 4 + 1 + 1 + 1 + 4 + 4 + 16 + 16);
}

#[test]
fn allowed_capture_reports_pmu_snapshot_event() {
    let mut s = spu(0b11, 0b01, 0);
    assert_eq!(
        s.external_snapshot_request(counters()),
        CaptureOutcome::Allowed {
            pmu_snapshot_event: true
        }
    );
    assert_eq!(s.read_sysreg(SysReg::PmevcntsvrEl1(5)), Ok(1005));
    assert_eq!(s.read_sysreg(SysReg::PmccntsvrEl1), Ok(0xC1C1E));
    let mut s = spu(0b10, 0b01, 0);
    assert_eq!(
        s.external_snapshot_request(counters()),
        CaptureOutcome::Prohibited
    );
    let mut s = spu(0b00, 0b01, 0);
    assert_eq!(
        s.external_snapshot_request(counters()),
        CaptureOutcome::Disabled
    );
}

#[test]
fn os_lock_and_debug_state_prohibit() {
    let mut s = spu(0b11, 0b01, 0);
    let mut c = *s.context();
    c.os_lock = true;
    s.set_context(c);
    assert_eq!(
        s.external_snapshot_request(counters()),
        CaptureOutcome::Prohibited
    );
    c.os_lock = false;
    c.halted = true;
    s.set_context(c);
    assert_eq!(
        s.external_snapshot_request(counters()),
        CaptureOutcome::Prohibited
    );
}

#[test]
fn linux_guest_without_el2_el3_uses_pmecr() {
    // The paravirtual guest's view: no EL2/EL3, PMECR_EL1.SSE decides.
    let mut s = Spu::new(Features::max());
    assert_eq!(
        s.external_snapshot_request(counters()),
        CaptureOutcome::Disabled
    );
    s.write_sysreg(SysReg::PmecrEl1, PMECR_EL1::SSE.set(0, 0b11))
        .unwrap();
    assert!(matches!(
        s.external_snapshot_request(counters()),
        CaptureOutcome::Allowed { .. }
    ));
    s.write_sysreg(SysReg::PmecrEl1, PMECR_EL1::SSE.set(0, 0b01))
        .unwrap();
    assert_eq!(
        s.external_snapshot_request(counters()),
        CaptureOutcome::Disabled,
        "reserved SSE 0b01 is constrained to disabled"
    );
}

#[test]
fn snapshot_registers_need_the_feature() {
    let mut s = Spu::new(Features::neoverse_n1());
    assert_eq!(
        s.read_sysreg(SysReg::PmsscrEl1),
        Err(AccessOutcome::Undefined)
    );
    assert_eq!(
        s.write_sysreg(SysReg::PmsscrEl1, 1),
        Err(AccessOutcome::Undefined)
    );
    assert_eq!(
        s.read_sysreg(SysReg::PmccntsvrEl1),
        Err(AccessOutcome::Undefined)
    );
    let mut s = Spu::new(Features::max());
    assert_eq!(
        s.read_sysreg(SysReg::PmevcntsvrEl1(6)),
        Err(AccessOutcome::Undefined)
    );
    assert_eq!(
        s.write_sysreg(SysReg::PmccntsvrEl1, 1),
        Err(AccessOutcome::Undefined)
    );
}
