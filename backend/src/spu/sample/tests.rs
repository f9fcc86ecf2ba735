//! Interval counter, filters and record construction.

use super::*;
use crate::spu::test_util::*;
use crate::spu::Features;
use spe_protocol::packet::decode;

fn texts(bytes: &[u8]) -> Vec<String> {
    decode(bytes)
        .map(|r| r.expect("model records decode").1.to_string())
        .collect()
}

fn branch(pc: u64, target: u64, taken: bool) -> SampledOp {
    SampledOp {
        pc,
        el: El::El1,
        ns: true,
        class: OpClass::Branch {
            conditional: true,
            indirect: false,
        },
        target,
        events: events::RETIRED | if taken { 0 } else { events::NOT_TAKEN },
        total_latency: 3,
        issue_latency: 1,
        ..Default::default()
    }
}

#[test]
fn load_record_matches_perf_notation() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 4);
    let op = load(0xffff_8000_1029_d3f4, 0xffff_0000_0f29_3bc0);
    let out = spu.sample(&op, &m);
    let SampleOutcome::Written { bytes, full: false } = out else {
        panic!("{out:?}")
    };
    let rec = spu.read_buffer(BUF_VA, bytes, &m).unwrap();
    assert_eq!(rec, spu.last_record());
    assert_eq!(
        texts(&rec),
        [
            "LAT 7 TOT",
            "LAT 2 ISSUE",
            "LAT 1 XLAT",
            "PC 0xff80001029d3f4 el1 ns=1",
            "VA 0xffff00000f293bc0",
            "PA 0xf293bc0 ns=1 ch=0 pat=0",
            "LD GP-REG",
            "EV RETIRED L1D-ACCESS TLB-ACCESS",
            "TS 39395093558",
        ]
    );
    // The real-hardware golden bytes appear in the record unchanged.
    let golden: [&[u8]; 4] = [
        &[0xb0, 0xf4, 0xd3, 0x29, 0x10, 0x00, 0x80, 0xff, 0xa0],
        &[0xb2, 0xc0, 0x3b, 0x29, 0x0f, 0x00, 0x00, 0xff, 0xff],
        &[0x52, 0x16, 0x00],
        &[0x71, 0x36, 0x6c, 0x21, 0x2c, 0x09, 0x00, 0x00, 0x00],
    ];
    for g in golden {
        assert!(
            rec.windows(g.len()).any(|w| w == g),
            "{g:02x?} in {rec:02x?}"
        );
    }
    assert_eq!(spu.regs().pmbptr, BUF_VA + bytes as u64);
}

#[test]
fn branches_carry_targets_when_taken() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 4);
    spu.sample(
        &branch(0xffff_8000_0000_1000, 0xffff_8000_0000_2000, true),
        &m,
    );
    let t = texts(spu.last_record());
    assert!(
        t.contains(&"TGT 0xff800000002000 el1 ns=1".to_string()),
        "{t:?}"
    );
    assert!(t.contains(&"B COND".to_string()), "{t:?}");
    spu.sample(
        &branch(0xffff_8000_0000_1000, 0xffff_8000_0000_2000, false),
        &m,
    );
    let t = texts(spu.last_record());
    assert!(!t.iter().any(|s| s.starts_with("TGT")), "{t:?}");
    assert!(t.contains(&"EV RETIRED NOT-TAKEN".to_string()), "{t:?}");
}

#[test]
fn context_and_end_packets() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 4);
    spu.write_sysreg(SysReg::PmscrEl1, 0b1011).unwrap(); // E0SPE E1SPE CX, no TS
    let mut op = load(0x1000, 0x2000);
    op.contextidr_el1 = 0x1234;
    op.el = El::El0;
    spu.sample(&op, &m);
    let t = texts(spu.last_record());
    assert_eq!(t.first().map(String::as_str), Some("CONTEXT 0x1234 el1"));
    assert_eq!(t.last().map(String::as_str), Some("END"));
    assert!(
        !t.iter().any(|s| s.starts_with("PA")),
        "PA not enabled: {t:?}"
    );
}

#[test]
fn latency_counters_saturate_per_countsize() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 4);
    let mut op = load(0x1000, 0x2000);
    op.total_latency = 70_000;
    spu.sample(&op, &m);
    assert_eq!(texts(spu.last_record())[0], "LAT 4095 TOT");
    let mut f = Features::default();
    f.pmsidr = PMSIDR_EL1::COUNTSIZE.set(f.pmsidr, 3);
    let (mut spu, _) = linux_spu(&m, f, 4);
    spu.sample(&op, &m);
    assert_eq!(texts(spu.last_record())[0], "LAT 65535 TOT");
}

#[test]
fn records_are_padded_to_pmbidr_align() {
    let m = mem(8 << 20);
    let f = Features {
        pmbidr: 6, // 64-byte alignment
        ..Default::default()
    };
    let (mut spu, _) = linux_spu(&m, f, 4);
    let out = spu.sample(&branch(0x1000, 0x2000, true), &m);
    assert_eq!(
        out,
        SampleOutcome::Written {
            bytes: 64,
            full: false
        }
    );
    let t = texts(spu.last_record());
    assert_eq!(t.last().map(String::as_str), Some("PAD"));
}

#[test]
fn interval_counter_selects_every_interval() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 64);
    spu.write_sysreg(SysReg::PmsirrEl1, 256).unwrap(); // INTERVAL = 1: 256 operations
    let op = load(0x1000, 0x2000);
    let mut selected = vec![];
    for i in 0..2000 {
        if spu.operation(&op, &m) != SampleOutcome::NotSelected {
            selected.push(i);
        }
    }
    // SPEToCollectSample(): an operation that finds COUNT zero reloads it
    // and is not sampled, so the first sample is operation 256 and the
    // rest are INTERVAL + 1 apart.
    assert_eq!(selected, vec![256, 513, 770, 1027, 1284, 1541, 1798]);
    // 1799 reloaded COUNT to 256; 1800..=1999 counted it down by 200.
    assert_eq!(PMSICR_EL1::COUNT.get(spu.regs().pmsicr), 56);
}

#[test]
fn random_jitter_keeps_the_mean() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 64);
    spu.write_sysreg(SysReg::PmsirrEl1, 1024 | 1).unwrap(); // INTERVAL 1024, RND
    let op = load(0x1000, 0x2000);
    let mut last = None;
    let mut gaps = vec![];
    for i in 0..400_000u64 {
        if spu.operation(&op, &m) != SampleOutcome::NotSelected {
            if let Some(l) = last {
                gaps.push(i - l);
            }
            last = Some(i);
        }
        if spu.pmbirq() {
            program(&mut spu, BUF_VA, BUF_VA + 64 * 4096);
            spu.write_sysreg(SysReg::PmsirrEl1, 1024 | 1).unwrap();
        }
    }
    let min = *gaps.iter().min().unwrap();
    let max = *gaps.iter().max().unwrap();
    let mean = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64;
    // Gap = reload op + INTERVAL + COUNT<7:0>, COUNT<7:0> uniform in 0..=255.
    assert!(min > 1024 && max <= 1024 + 255 + 1, "{min}..{max}");
    assert!(max - min > 128, "jitter spreads gaps: {min}..{max}");
    assert!((mean - 1152.5).abs() < 10.0, "mean {mean}");
}

#[test]
fn ernd_uses_ecount() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::neoverse_v1(), 64);
    spu.write_sysreg(SysReg::PmsirrEl1, 256 | 1).unwrap();
    let op = load(0x1000, 0x2000);
    let mut gaps = vec![];
    let mut last = 0;
    for i in 0..50_000u64 {
        if spu.operation(&op, &m) != SampleOutcome::NotSelected {
            gaps.push(i - last);
            last = i;
        }
        if spu.pmbirq() {
            program(&mut spu, BUF_VA, BUF_VA + 64 * 4096);
            spu.write_sysreg(SysReg::PmsirrEl1, 256 | 1).unwrap();
        }
    }
    // With ERnd, COUNT keeps its period (INTERVAL + 1) and each sample is
    // delayed by a fresh random ECOUNT: gap = 257 + e(n) - e(n-1).
    let gaps = &gaps[2..];
    let mean = gaps.iter().sum::<u64>() as f64 / gaps.len() as f64;
    assert!(
        gaps.iter().all(|&g| (2..=257 + 255).contains(&g)),
        "{gaps:?}"
    );
    assert!(gaps.iter().any(|&g| g > 300) && gaps.iter().any(|&g| g < 200));
    assert!((mean - 257.0).abs() < 10.0, "mean {mean}");
}

fn store(pc: u64, va: u64) -> SampledOp {
    let mut op = load(pc, va);
    op.class = OpClass::LoadStore {
        store: true,
        subclass: 0,
    };
    op
}

#[test]
fn type_filter() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 16);
    let fcr = PMSFCR_EL1::FT.mask() | PMSFCR_EL1::LD.mask();
    spu.write_sysreg(SysReg::PmsfcrEl1, fcr).unwrap();
    assert!(matches!(
        spu.sample(&load(0, 0), &m),
        SampleOutcome::Written { .. }
    ));
    assert_eq!(spu.sample(&store(0, 0), &m), SampleOutcome::Filtered);
    assert_eq!(spu.sample(&branch(0, 0, true), &m), SampleOutcome::Filtered);
    let atomic = SampledOp {
        class: OpClass::LoadStore {
            store: false,
            subclass: packet::op::LDST_EXT | packet::op::LDST_AT,
        },
        ..load(0, 0)
    };
    assert!(
        matches!(spu.sample(&atomic, &m), SampleOutcome::Written { .. }),
        "an atomic with return is a load and a store"
    );
    spu.write_sysreg(
        SysReg::PmsfcrEl1,
        PMSFCR_EL1::FT.mask() | PMSFCR_EL1::B.mask(),
    )
    .unwrap();
    assert_eq!(spu.sample(&load(0, 0), &m), SampleOutcome::Filtered);
    assert!(matches!(
        spu.sample(&branch(0, 0, true), &m),
        SampleOutcome::Written { .. }
    ));
    assert_eq!(spu.stats().filtered, 3);
}

#[test]
fn event_filters() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::max(), 16);
    // FE: only records with TLB-WALK.
    spu.write_sysreg(SysReg::PmsevfrEl1, events::TLB_WALK)
        .unwrap();
    spu.write_sysreg(SysReg::PmsfcrEl1, PMSFCR_EL1::FE.mask())
        .unwrap();
    let mut walk = load(0, 0);
    walk.events |= events::TLB_WALK;
    assert_eq!(spu.sample(&load(0, 0), &m), SampleOutcome::Filtered);
    assert!(matches!(
        spu.sample(&walk, &m),
        SampleOutcome::Written { .. }
    ));
    // FnE: reject records with TLB-WALK.
    spu.write_sysreg(SysReg::PmsnevfrEl1, events::TLB_WALK)
        .unwrap();
    spu.write_sysreg(SysReg::PmsfcrEl1, PMSFCR_EL1::FNE.mask())
        .unwrap();
    assert_eq!(spu.sample(&walk, &m), SampleOutcome::Filtered);
    assert!(matches!(
        spu.sample(&load(0, 0), &m),
        SampleOutcome::Written { .. }
    ));
    // FE with nothing to filter on: BADPMSFCR keeps the record.
    spu.write_sysreg(SysReg::PmsevfrEl1, 0).unwrap();
    spu.write_sysreg(SysReg::PmsfcrEl1, PMSFCR_EL1::FE.mask())
        .unwrap();
    assert!(matches!(
        spu.sample(&load(0, 0), &m),
        SampleOutcome::Written { .. }
    ));
}

#[test]
fn latency_filter() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 16);
    spu.write_sysreg(SysReg::PmslatfrEl1, 8).unwrap();
    spu.write_sysreg(SysReg::PmsfcrEl1, PMSFCR_EL1::FL.mask())
        .unwrap();
    let mut op = load(0, 0);
    op.total_latency = 7;
    assert_eq!(spu.sample(&op, &m), SampleOutcome::Filtered);
    op.total_latency = 8;
    assert!(matches!(spu.sample(&op, &m), SampleOutcome::Written { .. }));
}

#[test]
fn discard_mode_writes_nothing() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::max(), 16);
    spu.write_sysreg(SysReg::PmblimitrEl1, PMBLIMITR_EL1::FM.set(0, 0b10) | 1)
        .unwrap();
    assert_eq!(spu.sample(&load(0, 0), &m), SampleOutcome::Discarded);
    assert_eq!(spu.regs().pmbptr, BUF_VA);
    // Before FEAT_SPEv1p2 FM = 0b10 is not discard.
    let (mut spu, _) = linux_spu(&m, Features::neoverse_n1(), 16);
    spu.write_sysreg(
        SysReg::PmblimitrEl1,
        (BUF_VA + 16 * 4096) | PMBLIMITR_EL1::FM.set(0, 0b10) | 1,
    )
    .unwrap();
    assert!(matches!(
        spu.sample(&load(0, 0), &m),
        SampleOutcome::Written { .. }
    ));
}

#[test]
fn disabled_el_is_not_sampled() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::default(), 16);
    spu.write_sysreg(SysReg::PmscrEl1, 0b10).unwrap(); // E1SPE only
    let mut op = load(0, 0);
    op.el = El::El0;
    assert_eq!(spu.sample(&op, &m), SampleOutcome::Disabled);
    assert_eq!(spu.operation(&op, &m), SampleOutcome::Disabled);
    op.el = El::El1;
    assert!(matches!(spu.sample(&op, &m), SampleOutcome::Written { .. }));
}
