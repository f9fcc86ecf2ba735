//! Property tests over random register programming, random page tables and
//! random operation streams: the Profiling Buffer's safety properties.

use super::test_util::*;
use super::translate::Granule;
use super::*;
use proptest::prelude::*;
use spe_protocol::op::OpClass;
use vm_memory::{Bytes, GuestAddress};

const RAM: usize = 4 << 20;
/// Buffer pages live in [2 MiB, 4 MiB), or outside RAM.
const PAGE_POOL: u64 = 2 << 20;

#[derive(Clone, Debug)]
struct Setup {
    /// Per buffer page: None = unmapped, Some(page index) = mapped there;
    /// index >= 512 is outside guest RAM.
    pages: Vec<Option<u64>>,
    ptr_off: u64,
    limit_pages: u64,
    reg_writes: Vec<(usize, u64)>,
    pmscr: u64,
    maxsize: u64,
    align: u64,
    ops: Vec<(u8, u8, u64, u32, bool)>,
    rearm: bool,
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        prop::collection::vec(prop::option::weighted(0.85, 0u64..520), 1..6),
        0u64..6 * 4096 + 64,
        0u64..7,
        prop::collection::vec((0usize..53, any::<u64>()), 0..12),
        any::<u64>(),
        6u64..12,
        0u64..12,
        prop::collection::vec(
            (0u8..3, 0u8..4, any::<u64>(), 0u32..5000, any::<bool>()),
            1..300,
        ),
        any::<bool>(),
    )
        .prop_map(
            |(pages, ptr_off, limit_pages, reg_writes, pmscr, maxsize, align, ops, rearm)| Setup {
                pages,
                ptr_off,
                limit_pages,
                reg_writes,
                pmscr,
                maxsize,
                align,
                ops,
                rearm,
            },
        )
}

fn op_of(&(class, el, events, lat, flag): &(u8, u8, u64, u32, bool)) -> SampledOp {
    let class = match class {
        0 => OpClass::Other {
            cond_select: flag,
            subclass: 0,
        },
        1 => OpClass::LoadStore {
            store: flag,
            subclass: 0,
            vector: false,
        },
        _ => OpClass::Branch {
            conditional: flag,
            indirect: !flag,
        },
    };
    SampledOp {
        class,
        el: El::from_u8(el & 1).unwrap(),
        events,
        total_latency: lat,
        issue_latency: lat / 2,
        pc: events.rotate_left(7),
        data_va: events,
        data_pa: u64::from(lat) << 12,
        data_pa_valid: flag,
        target: events ^ 0xFFFF,
        physical_count: u64::from(lat) * 1000,
        ..load(0, 0)
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// No write lands outside [PMBPTR, LIMIT) or outside guest RAM; PMBPTR
    /// only moves forward, by whole records; buffer-full fires at the first
    /// record that crosses LIMIT - 2^MaxSize and never before.
    #[test]
    fn buffer_writes_stay_inside_the_buffer(s in setup()) {
        let m = mem(RAM);
        let mut tb = TableBuilder::new(&m, Granule::K4, 48, TABLE_POOL).unwrap();
        for (i, p) in s.pages.iter().enumerate() {
            if let Some(p) = p {
                tb.map(&m, BUF_VA + i as u64 * 4096, PAGE_POOL + p * 4096, PAGE_RW).unwrap();
            }
        }
        let mut f = Features::max();
        f.pmsidr = PMSIDR_EL1::MAXSIZE.set(f.pmsidr, s.maxsize);
        f.pmbidr = s.align.min(s.maxsize);
        prop_assert!(f.validate().is_ok());
        let max = f.max_record_size();
        let mut spu = Spu::new(f);
        spu.set_translation(TranslationRegs {
            sctlr_el1: 1,
            tcr_el1: tcr_el1(Granule::K4, 48),
            ttbr1_el1: tb.root,
            ..Default::default()
        });
        // Random register programming first, then the buffer.
        let regs: Vec<SysReg> = SysReg::all().collect();
        for &(r, v) in &s.reg_writes {
            let _ = spu.write_sysreg(regs[r], v);
        }
        let ptr0 = BUF_VA + s.ptr_off;
        let limit = BUF_VA + s.limit_pages * 4096;
        spu.write_sysreg(SysReg::PmbsrEl1, 0).unwrap();
        spu.write_sysreg(SysReg::PmbptrEl1, ptr0).unwrap();
        spu.write_sysreg(SysReg::PmblimitrEl1, limit | 1).unwrap();
        spu.write_sysreg(SysReg::PmscrEl1, s.pmscr).unwrap();

        // What the buffer [ptr0, limit) may touch in RAM.
        let mut allowed = vec![false; RAM];
        let mut va = ptr0;
        while va < limit {
            let page = ((va - BUF_VA) / 4096) as usize;
            if let Some(Some(p)) = s.pages.get(page) {
                let pa = PAGE_POOL + p * 4096 + (va & 4095);
                if (pa as usize) < RAM {
                    allowed[pa as usize] = true;
                }
            }
            va += 1;
        }
        let mut before = vec![0u8; RAM];
        m.read_slice(&mut before, GuestAddress(0)).unwrap();

        for o in &s.ops {
            let op = op_of(o);
            let p = spu.regs().pmbptr;
            let out = spu.sample(&op, &m);
            let after = spu.regs().pmbptr;
            match out {
                SampleOutcome::Written { bytes, full } => {
                    prop_assert_eq!(bytes, spu.last_record().len());
                    prop_assert!(bytes as u64 <= max);
                    prop_assert_eq!(after, p + bytes as u64, "moves by the record");
                    prop_assert!(after <= limit);
                    prop_assert_eq!(full, after > limit.saturating_sub(max) || limit < max);
                }
                _ => prop_assert_eq!(after, p, "{:?} leaves PMBPTR", out),
            }
            if s.rearm && spu.pmbirq() {
                // A driver that restarts from where it was after clearing S.
                spu.write_sysreg(SysReg::PmbsrEl1, 0).unwrap();
                spu.write_sysreg(SysReg::PmbptrEl1, ptr0).unwrap();
            }
        }

        let mut now = vec![0u8; RAM];
        m.read_slice(&mut now, GuestAddress(0)).unwrap();
        for (a, (b, n)) in before.iter().zip(&now).enumerate() {
            if b != n {
                prop_assert!(allowed[a], "write at PA {:#x} outside the buffer", a);
            }
        }
    }

    /// Any register value, any access: never a panic, and RES0/RAZ bits
    /// read back as zero.
    #[test]
    fn register_file_never_panics(writes in prop::collection::vec((0usize..53, any::<u64>(), 0u8..4), 1..64)) {
        let regs: Vec<SysReg> = SysReg::all().collect();
        let mut spu = Spu::new(Features::max().with_el2_el3());
        for (r, v, el) in writes {
            let mut c = *spu.context();
            c.el = El::from_u8(el).unwrap();
            spu.set_context(c);
            // PMSSCR_EL1.NC reports a capture's outcome, not a write.
            if spu.write_sysreg(regs[r], v).is_ok() && regs[r] != SysReg::PmsscrEl1 {
                if let Ok(back) = spu.read_sysreg(regs[r]) {
                    prop_assert_eq!(back & !v, 0, "{} set bits not written", regs[r].name());
                }
            }
            let _ = spu.pmbirq();
        }
    }
}

#[test]
fn cpu_profiles_validate() {
    for f in [
        Features::neoverse_n1(),
        Features::neoverse_v1(),
        Features::max(),
    ] {
        assert_eq!(f.validate(), Ok(()));
    }
    let mut f = Features::default();
    f.pmsidr = PMSIDR_EL1::MAXSIZE.set(f.pmsidr, 4);
    assert_eq!(
        f.validate(),
        Err(FeatureError::RecordSize(16)),
        "16-byte records cannot hold ours"
    );
}
