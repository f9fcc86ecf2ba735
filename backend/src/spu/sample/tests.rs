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
    // The same PC was taken before: the predictor expected it again.
    assert!(
        t.contains(&"EV RETIRED NOT-TAKEN MISPRED".to_string()),
        "{t:?}"
    );
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
        vector: false,
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
            vector: false,
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
    // FE with nothing to filter on: BADPMSFCR keeps the record by
    // default, and rejects it when that behaviour is selected.
    spu.write_sysreg(SysReg::PmsevfrEl1, 0).unwrap();
    spu.write_sysreg(SysReg::PmsfcrEl1, PMSFCR_EL1::FE.mask())
        .unwrap();
    assert!(matches!(
        spu.sample(&load(0, 0), &m),
        SampleOutcome::Written { .. }
    ));
    let mut c = crate::spu::unpredictable::Choices::default();
    c.set("badpmsfcr", "reject").unwrap();
    spu.set_choices(c);
    assert_eq!(spu.sample(&load(0, 0), &m), SampleOutcome::Filtered);
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

/// `n` calls of the interval counter, one by one: what `skip_operations`
/// must match.
fn count_one_by_one(spu: &mut Spu, n: u64) -> u64 {
    (0..n).map(|_| u64::from(spu.spe_to_collect_sample())).sum()
}

fn counter_spu(features: Features, pmsirr: u64, pmsicr: u64) -> Spu {
    let mut spu = Spu::new(features);
    spu.write_sysreg(SysReg::PmsirrEl1, pmsirr).unwrap();
    spu.write_sysreg(SysReg::PmsicrEl1, pmsicr).unwrap();
    spu
}

mod skip {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        /// Same selections, same PMSICR (COUNT and ECOUNT) and the same
        /// random stream afterwards, with and without RND and ERnd, from
        /// any starting count, in one call or split in two.
        #[test]
        fn matches_counting_one_by_one(
            ernd in any::<bool>(),
            interval in 0u64..5,
            rnd in any::<bool>(),
            count in prop_oneof![0u64..3, 0u64..1300],
            ecount in prop_oneof![Just(0u64), 0u64..256],
            n in prop_oneof![0u64..4, 0u64..6000],
            split in 0u64..6000,
        ) {
            let f = if ernd { Features::neoverse_v1() } else { Features::neoverse_n1() };
            let pmsirr = interval << 8 | u64::from(rnd);
            let spu = counter_spu(f, pmsirr, ecount << 56 | count);
            let mut want = spu.clone();
            let selected = count_one_by_one(&mut want, n);
            let mut got = spu.clone();
            prop_assert_eq!(got.skip_operations(n), selected);
            prop_assert_eq!(got.regs.pmsicr, want.regs.pmsicr);
            prop_assert_eq!(got.rng, want.rng);
            let first = split.min(n);
            let mut halves = spu;
            let s = halves.skip_operations(first) + halves.skip_operations(n - first);
            prop_assert_eq!(s, selected);
            prop_assert_eq!(halves.regs.pmsicr, want.regs.pmsicr);
        }
    }
}

#[test]
fn skip_matches_the_interval_counter_test() {
    // The same stream as interval_counter_selects_every_interval: 2000
    // operations at INTERVAL 1 from COUNT 0 select 7 and leave COUNT 56.
    let mut spu = counter_spu(Features::default(), 256, 0);
    assert_eq!(spu.skip_operations(2000), 7);
    assert_eq!(PMSICR_EL1::COUNT.get(spu.regs().pmsicr), 56);
}

#[test]
fn skip_is_per_period_not_per_operation() {
    // 10^15 operations would take days one by one.
    let n = 1_000_000_000_000_000u64;
    let mut spu = counter_spu(Features::default(), 1 << 8, 0);
    let period = 257;
    assert_eq!(spu.skip_operations(n), n / period);
    // n % 257 operations into a period: one reload to 256, then
    // decrements.
    let r = n % period;
    assert_eq!(r, 151);
    assert_eq!(PMSICR_EL1::COUNT.get(spu.regs().pmsicr), 257 - r);
    // INTERVAL 0 without RND reloads zero forever and never selects.
    let mut spu = counter_spu(Features::default(), 0, 0);
    assert_eq!(spu.skip_operations(n), 0);
    assert_eq!(spu.regs().pmsicr, 0);
    // The largest interval from a nonzero count.
    let mut spu = counter_spu(Features::default(), 0xFFFF_FF00, 5);
    assert_eq!(spu.skip_operations(n), 1 + (n - 5) / 0xFFFF_FF01);
}

#[test]
fn sampling_state_follows_the_registers() {
    use spe_protocol::channel::ring::flags;
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::neoverse_v1(), 1);
    let s = spu.sampling_state();
    // program(): E0SPE and E1SPE, INTERVAL 1, COUNT 0.
    assert_eq!(s.enabled_els, 0b011);
    // The default operation model counts micro-operations.
    assert_eq!((s.interval, s.pmsicr_count, s.flags), (256, 0, flags::UOPS));
    spu.write_sysreg(SysReg::PmscrEl1, 0b10_0010).unwrap(); // E1SPE only
    assert_eq!(spu.sampling_state().enabled_els, 0b010);
    spu.write_sysreg(SysReg::PmsirrEl1, 0x12_3400 | 1).unwrap();
    spu.write_sysreg(SysReg::PmsicrEl1, 7 << 56 | 99).unwrap();
    let s = spu.sampling_state();
    assert_eq!(s.interval, 0x12_3400);
    assert_eq!((s.pmsicr_count, s.pmsicr_ecount), (99, 7));
    // Neoverse V1 has ERnd.
    assert_eq!(s.flags, flags::RND | flags::ERND | flags::UOPS);
    // The exact operation model: no UOPS, the front end counts instructions.
    let mut c = spu.choices();
    c.set("operations", "instructions").unwrap();
    spu.set_choices(c);
    assert_eq!(spu.sampling_state().flags, flags::RND | flags::ERND);
    // A stopped buffer (PMBSR.S) disables profiling at every EL.
    spu.write_sysreg(SysReg::PmbsrEl1, 1 << 17).unwrap();
    assert_eq!(spu.sampling_state().enabled_els, 0);
    spu.write_sysreg(SysReg::PmbsrEl1, 0).unwrap();
    assert_eq!(spu.sampling_state().enabled_els, 0b010);
    // With EL2 and EL3: the buffer's owner and the Security state count.
    let (mut spu, _) = linux_spu(&m, Features::default().with_el2_el3(), 1);
    let ns_el1_owns = PeContext {
        scr_el3: 1, // NS
        mdcr_el3: MDCR_EL3::NSPB.set(0, 0b11),
        mdcr_el2: MDCR_EL2::E2PB.set(0, 0b11),
        ..Default::default()
    };
    spu.set_context(ns_el1_owns);
    assert_eq!(spu.sampling_state().enabled_els, 0b011);
    // EL2 owns the buffer: E2SPE enables EL2 as well.
    spu.set_context(PeContext {
        el: El::El2,
        mdcr_el2: 0,
        ..ns_el1_owns
    });
    spu.write_sysreg(SysReg::PmscrEl2, 0b10).unwrap(); // E2SPE
    assert_eq!(spu.sampling_state().enabled_els, 0b111);
    // In Secure state the Non-secure buffer samples nothing.
    spu.set_context(PeContext {
        scr_el3: 0,
        ..ns_el1_owns
    });
    assert_eq!(spu.sampling_state().enabled_els, 0);
}

#[test]
fn skip_with_rnd_is_exact_up_to_the_limit_and_bounded_beyond() {
    for f in [Features::neoverse_n1(), Features::neoverse_v1()] {
        let spu = counter_spu(f.clone(), 256 | 1, 0);
        let mut want = spu.clone();
        let mut got = spu.clone();
        let n = Spu::SKIP_EXACT;
        assert_eq!(got.skip_operations(n), count_one_by_one(&mut want, n));
        assert_eq!((got.regs.pmsicr, got.rng), (want.regs.pmsicr, want.rng));

        // Any u64 QEMU hands back returns at once, with about one
        // selection per mean period and a COUNT the counter could hold.
        let mut spu = spu;
        let n = u64::MAX / 2;
        let start = std::time::Instant::now();
        let selected = spu.skip_operations(n);
        assert!(start.elapsed() < std::time::Duration::from_secs(1));
        let mean = if f.spe_ernd() { 257.0 } else { 257.0 + 127.5 };
        let ratio = selected as f64 / (n as f64 / mean);
        assert!((ratio - 1.0).abs() < 0.01, "{selected} selections");
        assert!(PMSICR_EL1::COUNT.get(spu.regs().pmsicr) <= 256 + 255);
    }
    // ERnd with INTERVAL 0: COUNT never leaves zero, and a pending ECOUNT
    // runs out once.
    let mut spu = counter_spu(Features::neoverse_v1(), 1, 3 << 56);
    assert_eq!(spu.skip_operations(u64::MAX), 1);
    assert_eq!(spu.regs().pmsicr, 0);
}

/// PMSFCR_EL1 exactly as Linux 7.3's driver writes it for the mask
/// attributes (seen in a 7.3 guest), on a PE with FEAT_SPE_EFT.
#[test]
fn linux_7_3_mask_filters() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::max(), 16);
    let kept =
        |spu: &mut Spu, op: &SampledOp| matches!(spu.sample(op, &m), SampleOutcome::Written { .. });
    // load_filter_mask=1: FT | LDm, exclude loads.
    spu.write_sysreg(SysReg::PmsfcrEl1, 0x2_0000_0000_0002)
        .unwrap();
    assert_eq!(spu.regs().pmsfcr, 0x2_0000_0000_0002, "LDm is writable");
    assert!(!kept(&mut spu, &load(0, 0)));
    assert!(kept(&mut spu, &store(0, 0)));
    assert!(kept(&mut spu, &branch(0, 0x40, true)));
    // branch_filter=1,branch_filter_mask=1: FT | B | Bm, branches only.
    spu.write_sysreg(SysReg::PmsfcrEl1, 0x1_0000_0001_0002)
        .unwrap();
    assert!(kept(&mut spu, &branch(0, 0x40, true)));
    assert!(!kept(&mut spu, &load(0, 0)));
    assert!(!kept(&mut spu, &store(0, 0)));
    // Without FEAT_SPE_EFT the masks are RES0: writes are ignored.
    let (mut n1, _) = linux_spu(&m, Features::neoverse_n1(), 16);
    n1.write_sysreg(SysReg::PmsfcrEl1, 0x2_0000_0000_0002)
        .unwrap();
    assert_eq!(n1.regs().pmsfcr, 0x2);
}

/// `SPEGetDataSource()` as `unpredictable` encodes it: loads of guest RAM
/// on a PE with data sources, by the level the memory model chose.
#[test]
fn data_source_packets() {
    let m = mem(8 << 20);
    let ds = |features: Features, op: &SampledOp| {
        let (mut spu, _) = linux_spu(&m, features, 16);
        let SampleOutcome::Written { bytes, .. } = spu.sample(op, &m) else {
            panic!("not written")
        };
        let rec = spu.read_buffer(BUF_VA, bytes, &m).unwrap();
        let texts = texts(&rec);
        let found: Vec<_> = texts
            .iter()
            .filter(|t| t.starts_with("DATA-SOURCE"))
            .collect();
        assert!(found.len() <= 1, "{texts:?}");
        found.first().map(|t| t.to_string())
    };
    let mut refill = load(0, 0x1000);
    refill.events |= events::L1D_REFILL;
    let mut outside = load(0, 0x1000);
    outside.data_pa = 0xF000_0000;
    let mut no_pa = load(0, 0x1000);
    no_pa.data_pa_valid = false;
    let mut llc = refill;
    llc.events |= events::L2D_MISS | events::LLC_ACCESS;
    let mut dram = llc;
    dram.events |= events::LLC_MISS;
    let mut peer = refill;
    peer.events |= events::L2D_MISS | events::LLC_ACCESS | events::CACHE_DATA_MODIFIED;
    let rows: [(&str, Features, SampledOp, Option<&str>); 10] = [
        (
            "L1 hit",
            Features::max(),
            load(0, 0x1000),
            Some("DATA-SOURCE 0"),
        ),
        ("L1 refill", Features::max(), refill, Some("DATA-SOURCE 8")),
        ("L2 miss", Features::max(), llc, Some("DATA-SOURCE 11")),
        ("LLC miss", Features::max(), dram, Some("DATA-SOURCE 14")),
        (
            "peer's modified line",
            Features::max(),
            peer,
            Some("DATA-SOURCE 9"),
        ),
        ("store", Features::max(), store(0, 0x1000), None),
        ("outside RAM", Features::max(), outside, None),
        ("no PA", Features::max(), no_pa, None),
        (
            "neoverse-n1",
            Features::neoverse_n1(),
            load(0, 0x1000),
            Some("DATA-SOURCE 0"),
        ),
        (
            "neoverse-n1, from a peer",
            Features::neoverse_n1(),
            peer,
            Some("DATA-SOURCE 9"),
        ),
    ];
    for (what, features, op, want) in rows {
        assert_eq!(ds(features, &op).as_deref(), want, "{what}");
    }
}

/// `SPEFilterByDataSource()`'s rows: only loads with a data source are
/// judged, and only while PMSFCR_EL1.FDS is set; a load is kept iff
/// PMSDSFR_EL1 has its data source's bit.
#[test]
fn data_source_filter() {
    let m = mem(8 << 20);
    let mut refill = load(0, 0x1000);
    refill.events |= events::L1D_REFILL;
    let l1 = 1u64 << cu::DATA_SOURCE_L1D;
    let l2 = 1u64 << cu::DATA_SOURCE_L2;
    let fds = PMSFCR_EL1::FDS.mask();
    let rows: [(u64, u64, SampledOp, bool); 8] = [
        // (PMSFCR_EL1, PMSDSFR_EL1, operation, kept)
        (0, 0, load(0, 0x1000), true),
        (fds, 0, load(0, 0x1000), false),
        (fds, l1, load(0, 0x1000), true),
        (fds, l1, refill, false),
        (fds, l2, refill, true),
        (fds, !l1, load(0, 0x1000), false),
        (fds, 0, store(0, 0x1000), true),
        (fds, 0, branch(0, 0x40, true), true),
    ];
    for (i, (fcr, dsfr, op, kept)) in rows.into_iter().enumerate() {
        let (mut spu, _) = linux_spu(&m, Features::max(), 16);
        spu.write_sysreg(SysReg::PmsdsfrEl1, dsfr).unwrap();
        spu.write_sysreg(SysReg::PmsfcrEl1, fcr).unwrap();
        let out = spu.sample(&op, &m);
        assert_eq!(
            matches!(out, SampleOutcome::Written { .. }),
            kept,
            "row {i}: {out:?}"
        );
    }
}

fn other(subclass: u8) -> SampledOp {
    SampledOp {
        class: OpClass::Other {
            cond_select: false,
            subclass,
        },
        ..load(0x40_0000, 0)
    }
}

/// `SPEFilterByType()` on "other" operations with their FP and SIMD bits
/// (`SPEConstructClass()`: `Zeros(5):simd:fp:cond`), PMSFCR_EL1 as Linux
/// 7.3 writes it: FT with FP (bit 19) or SIMD (bit 20), and their masks
/// (FPm 51, SIMDm 52). Rows: PMSFCR, then kept for plain, FP, SIMD.
#[test]
fn fp_and_simd_other_operations() {
    use packet::op::{OTHER_ASE, OTHER_FP};
    let m = mem(8 << 20);
    let ft = PMSFCR_EL1::FT.mask();
    let rows: [(u64, [bool; 3]); 6] = [
        (0, [true, true, true]),
        (ft | 1 << 19, [false, true, false]),
        (ft | 1 << 20, [false, false, true]),
        (ft | 1 << 19 | 1 << 20, [false, true, true]),
        // FPm alone: FP excluded.
        (ft | 1 << 51, [true, false, true]),
        // SIMD | SIMDm: SIMD required.
        (ft | 1 << 20 | 1 << 52, [false, false, true]),
    ];
    for (fcr, kept) in rows {
        let (mut spu, _) = linux_spu(&m, Features::max(), 16);
        spu.write_sysreg(SysReg::PmsfcrEl1, fcr).unwrap();
        for (sub, want) in [0, OTHER_FP, OTHER_ASE].into_iter().zip(kept) {
            let got = matches!(spu.sample(&other(sub), &m), SampleOutcome::Written { .. });
            assert_eq!(got, want, "PMSFCR {fcr:#x}, subclass {sub:#x}");
        }
    }
    // The payload carries the bits on a PE with FEAT_SPE_EFT, and not on
    // Neoverse N1 (unpredictable::other_fp_simd_recorded).
    for (features, want) in [
        (
            Features::max(),
            ["OTHER FP INSN-OTHER", "OTHER ASE INSN-OTHER"],
        ),
        (
            Features::neoverse_n1(),
            ["OTHER INSN-OTHER", "OTHER INSN-OTHER"],
        ),
    ] {
        for (sub, text) in [OTHER_FP, OTHER_ASE].into_iter().zip(want) {
            let (mut spu, _) = linux_spu(&m, features.clone(), 16);
            let SampleOutcome::Written { bytes, .. } = spu.sample(&other(sub), &m) else {
                panic!("not written")
            };
            let t = texts(&spu.read_buffer(BUF_VA, bytes, &m).unwrap());
            assert!(t.iter().any(|p| p == text), "{t:?}");
        }
    }
}

/// `SPESampleSIMDFPLoadStore()`: a scalar SIMD&FP load (`ldr q0`) is
/// floating point, one of vector structures (`ld1 {v0.4s}`) SIMD; the
/// record's payload is the same (`LD SIMD-FP`).
#[test]
fn simd_fp_loads_are_fp_when_scalar_and_simd_when_vector() {
    let m = mem(8 << 20);
    let simd_fp = |vector| SampledOp {
        class: OpClass::LoadStore {
            store: false,
            subclass: packet::op::LDST_SIMD_FP,
            vector,
        },
        ..load(0x40_0000, 0x1000)
    };
    let ft = PMSFCR_EL1::FT.mask();
    // PMSFCR, then kept for scalar, vector.
    let rows: [(u64, [bool; 2]); 4] = [
        (ft | 1 << 19, [true, false]),
        (ft | 1 << 20, [false, true]),
        (ft | 1 << 17, [true, true]),
        // LD with SIMDm: loads that are not SIMD.
        (ft | 1 << 17 | 1 << 52, [true, false]),
    ];
    for (fcr, kept) in rows {
        let (mut spu, _) = linux_spu(&m, Features::max(), 16);
        spu.write_sysreg(SysReg::PmsfcrEl1, fcr).unwrap();
        for (vector, want) in [false, true].into_iter().zip(kept) {
            let got = matches!(
                spu.sample(&simd_fp(vector), &m),
                SampleOutcome::Written { .. }
            );
            assert_eq!(got, want, "PMSFCR {fcr:#x}, vector {vector}");
        }
    }
}

/// `SPESampleOpSVEOther()` and `SPEConstructClass()`'s
/// `'0':evl:'1':pred:fp:'0'`: on a PE with SVE the payload carries EVL,
/// PRED and FP, the type filters see FP only (bit 2 is PRED, not SIMD),
/// and a PE without SVE records a plain "other" operation.
#[test]
fn sve_other_operations() {
    use packet::op::{sve_evl, OTHER_FP, OTHER_SVE, OTHER_SVE_PRED};
    let m = mem(8 << 20);
    let fp_pred = OTHER_SVE | sve_evl(256) | OTHER_SVE_PRED | OTHER_FP;
    let int_unpred = OTHER_SVE | sve_evl(128);
    for (features, sub, text) in [
        (Features::max(), fp_pred, "SVE-OTHER EVLEN 256 FP PRED"),
        (Features::neoverse_v1(), int_unpred, "SVE-OTHER EVLEN 128"),
        (Features::neoverse_n1(), fp_pred, "OTHER INSN-OTHER"),
    ] {
        let (mut spu, _) = linux_spu(&m, features, 16);
        let SampleOutcome::Written { bytes, .. } = spu.sample(&other(sub), &m) else {
            panic!("not written")
        };
        let t = texts(&spu.read_buffer(BUF_VA, bytes, &m).unwrap());
        assert!(t.iter().any(|p| p == text), "{t:?}");
    }
    let ft = PMSFCR_EL1::FT.mask();
    // PMSFCR, then kept for the FP predicated and the integer one.
    let rows: [(u64, [bool; 2]); 3] = [
        (ft | 1 << 19, [true, false]),
        (ft | 1 << 20, [false, false]),
        (ft | 1 << 51, [false, true]),
    ];
    for (fcr, kept) in rows {
        let (mut spu, _) = linux_spu(&m, Features::max(), 16);
        spu.write_sysreg(SysReg::PmsfcrEl1, fcr).unwrap();
        for (sub, want) in [fp_pred, int_unpred].into_iter().zip(kept) {
            let got = matches!(spu.sample(&other(sub), &m), SampleOutcome::Written { .. });
            assert_eq!(got, want, "PMSFCR {fcr:#x}, subclass {sub:#x}");
        }
    }
}

/// `SPEFilterByEvents()`'s `mask<18:17>` exists with FEAT_SPEv1p1 and
/// FEAT_SVE: the predicate events are recorded (in a 4-byte Events
/// payload on Neoverse V1, whose SPEv1p1 would otherwise write 2) and
/// PMSEVFR_EL1 filters on them; without SVE the bits are RES0.
#[test]
fn sve_predicate_events() {
    let m = mem(8 << 20);
    let partial = events::RETIRED | events::PARTIAL_PREDICATE;
    let mut sve_load = load(0x40_0000, 0x1000);
    sve_load.events |= partial;
    for (features, mask, text) in [
        (Features::max(), true, "SVE-PARTIAL-PRED"),
        (Features::neoverse_v1(), true, "SVE-PARTIAL-PRED"),
        (Features::neoverse_n1(), false, "RETIRED"),
    ] {
        let (mut spu, _) = linux_spu(&m, features, 16);
        assert_eq!(
            spu.event_filter_mask() & (events::PARTIAL_PREDICATE | events::EMPTY_PREDICATE),
            if mask { 3 << 17 } else { 0 }
        );
        let SampleOutcome::Written { bytes, .. } = spu.sample(&sve_load, &m) else {
            panic!("not written")
        };
        let t = texts(&spu.read_buffer(BUF_VA, bytes, &m).unwrap());
        let ev = t.iter().find(|p| p.starts_with("EV ")).expect("events");
        assert!(ev.contains(text), "{ev}");
        assert_eq!(ev.contains("SVE-PARTIAL-PRED"), mask, "{ev}");
    }
    // PMSEVFR_EL1 = Empty predicate: a partial one is filtered out.
    let (mut spu, _) = linux_spu(&m, Features::max(), 16);
    spu.write_sysreg(SysReg::PmsevfrEl1, events::EMPTY_PREDICATE)
        .unwrap();
    spu.write_sysreg(SysReg::PmsfcrEl1, PMSFCR_EL1::FE.mask())
        .unwrap();
    assert_eq!(spu.sample(&sve_load, &m), SampleOutcome::Filtered);
    sve_load.events |= events::EMPTY_PREDICATE;
    assert!(matches!(
        spu.sample(&sve_load, &m),
        SampleOutcome::Written { .. }
    ));
}

/// An SVE load whose predicate is empty accessed nothing: its record has
/// the predicate events and no data address (nor data source).
#[test]
fn a_load_that_accessed_nothing_has_no_data_address() {
    let m = mem(8 << 20);
    let (mut spu, _) = linux_spu(&m, Features::max(), 16);
    let op = SampledOp {
        no_data_address: true,
        events: events::RETIRED | events::PARTIAL_PREDICATE | events::EMPTY_PREDICATE,
        ..load(0x40_0000, 0x1000)
    };
    let SampleOutcome::Written { bytes, .. } = spu.sample(&op, &m) else {
        panic!("not written")
    };
    let t = texts(&spu.read_buffer(BUF_VA, bytes, &m).unwrap());
    assert!(
        !t.iter()
            .any(|p| p.starts_with("VA ") || p.starts_with("PA ")),
        "{t:?}"
    );
    assert!(!t.iter().any(|p| p.starts_with("DATA-SOURCE")), "{t:?}");
    assert!(t.iter().any(|p| p.contains("SVE-EMPTY-PRED")), "{t:?}");
}
