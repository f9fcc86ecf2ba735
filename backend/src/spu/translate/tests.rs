//! Stage 1/2 walks over tables built in guest memory.

use super::*;
use crate::spu::test_util::*;
use vm_memory::Bytes;

fn two_range(tb: &TableBuilder, upper: bool, tbi: bool) -> Stage1 {
    let tsz = u64::from(64 - tb.ia_bits);
    let tg0 = match tb.granule {
        Granule::K4 => 0b00,
        Granule::K64 => 0b01,
        Granule::K16 => 0b10,
    };
    let tg1 = match tb.granule {
        Granule::K16 => 0b01,
        Granule::K4 => 0b10,
        Granule::K64 => 0b11,
    };
    let ds = u64::from(tb.ia_bits == 52 && tb.granule != Granule::K64);
    let ips = if tb.ia_bits == 52 { 0b110 } else { 0b101 };
    let tbi_bits = if tbi { 0b11 << 37 } else { 0 };
    let tcr = tsz | tg0 << 14 | tsz << 16 | tg1 << 30 | ips << 32 | tbi_bits | ds << 59;
    let (t0, t1) = if upper { (0, tb.root) } else { (tb.root, 0) };
    Stage1::two_range(1, tcr, t0, t1)
}

#[test]
fn start_levels() {
    assert_eq!(start_level(48, Granule::K4), 0);
    assert_eq!(start_level(39, Granule::K4), 1);
    assert_eq!(start_level(52, Granule::K4), -1);
    assert_eq!(start_level(48, Granule::K16), 0);
    assert_eq!(start_level(47, Granule::K16), 1);
    assert_eq!(start_level(42, Granule::K64), 2);
    assert_eq!(start_level(48, Granule::K64), 1);
    assert_eq!(start_level(52, Granule::K64), 1);
}

#[test]
fn every_granule_and_va_size_translates() {
    for granule in [Granule::K4, Granule::K16, Granule::K64] {
        for ia_bits in [39, 42, 47, 48, 52] {
            for upper in [false, true] {
                let m = mem(16 << 20);
                let mut tb = TableBuilder::new(&m, granule, ia_bits, 0x10_0000).unwrap();
                let page = 1u64 << granule.bits();
                let off = (1u64 << (ia_bits - 1)) + 5 * page;
                let va = if upper {
                    off.wrapping_neg() & !(page - 1)
                } else {
                    off
                };
                // DS = 1 puts OA[51:50] in bits 9:8, so no shareability bits.
                let attrs = if ia_bits == 52 { 1 << 10 } else { PAGE_RW };
                tb.map(&m, va, 0x80_0000, attrs).unwrap();
                let s1 = two_range(&tb, upper, false);
                let what = format!("{granule:?} {ia_bits} upper={upper} va={va:#x}");
                let got = translate(&m, &s1, None, va + 0x18).expect(&what);
                assert_eq!(
                    got,
                    Mapping {
                        pa: 0x80_0018,
                        len: page - 0x18
                    },
                    "{what}"
                );
                // The next page is not mapped.
                let f = translate(&m, &s1, None, va + page).unwrap_err();
                assert_eq!(f, Fault::Stage1(fsc::translation(3)), "{what}");
                // An address outside the range faults at the start level.
                let bad = if upper { 0x1000 } else { 1u64 << 63 };
                assert!(
                    matches!(translate(&m, &s1, None, bad), Err(Fault::Stage1(_))),
                    "{what}"
                );
            }
        }
    }
}

#[test]
fn top_byte_ignore() {
    let m = mem(16 << 20);
    let mut tb = TableBuilder::new(&m, Granule::K4, 48, 0x10_0000).unwrap();
    let va = 0x0000_7000_0000_0000;
    tb.map(&m, va, 0x80_0000, PAGE_RW).unwrap();
    let tagged = va | 0x5A << 56;
    let with_tbi = two_range(&tb, false, true);
    assert_eq!(
        translate(&m, &with_tbi, None, tagged).unwrap().pa,
        0x80_0000
    );
    let without = two_range(&tb, false, false);
    assert!(translate(&m, &without, None, tagged).is_err());
}

#[test]
fn access_flag_and_dirty_state() {
    let m = mem(16 << 20);
    let mut tb = TableBuilder::new(&m, Granule::K4, 48, 0x10_0000).unwrap();
    let va = 0x4000_0000;
    tb.map(&m, va, 0x80_0000, 0).unwrap(); // AF = 0
    let mut s1 = two_range(&tb, false, false);
    assert_eq!(
        translate(&m, &s1, None, va),
        Err(Fault::Stage1(fsc::access_flag(3)))
    );
    // TCR.HA: the walker sets AF.
    s1.lower.as_mut().unwrap().ha = true;
    assert!(translate(&m, &s1, None, va).is_ok());
    let slot = tb.leaf_slot(&m, va).unwrap();
    let desc: u64 = m.read_obj(slot).unwrap();
    assert_ne!(desc & 1 << 10, 0, "AF set in memory");
    // AP[2] = 1: read-only, a permission fault...
    m.write_obj(desc | 1 << 7, slot).unwrap();
    assert_eq!(
        translate(&m, &s1, None, va),
        Err(Fault::Stage1(fsc::permission(3)))
    );
    // ...unless DBM with TCR.HD: the walker clears AP[2].
    m.write_obj(desc | 1 << 7 | 1 << 51, slot).unwrap();
    s1.lower.as_mut().unwrap().hd = true;
    assert!(translate(&m, &s1, None, va).is_ok());
    let desc: u64 = m.read_obj(slot).unwrap();
    assert_eq!(desc & 1 << 7, 0, "AP[2] cleared: the page is dirty");
}

#[test]
fn one_range_el2_regime() {
    let m = mem(16 << 20);
    let mut tb = TableBuilder::new(&m, Granule::K4, 48, 0x10_0000).unwrap();
    tb.map(&m, 0x8000_0000, 0x80_0000, PAGE_RW).unwrap();
    let s1 = Stage1::one_range(1, 16, tb.root);
    assert_eq!(translate(&m, &s1, None, 0x8000_0010).unwrap().pa, 0x80_0010);
    // No upper range in a one-range regime.
    assert!(translate(&m, &s1, None, 0xFFFF_8000_8000_0000).is_err());
}

#[test]
fn mmu_off_is_flat() {
    let m = mem(1 << 20);
    let s1 = Stage1::two_range(0, 0, 0, 0);
    assert_eq!(translate(&m, &s1, None, 0x1234).unwrap().pa, 0x1234);
}

#[test]
fn block_mappings() {
    let m = mem(16 << 20);
    let tb = TableBuilder::new(&m, Granule::K4, 39, 0x10_0000).unwrap();
    // A level-1 1 GiB block at index 1 of the root.
    m.write_obj(0x4000_0000u64 | PAGE_RW | 0b01, GuestAddress(tb.root + 8))
        .unwrap();
    let s1 = two_range(&tb, false, false);
    let got = translate(&m, &s1, None, 0x4000_1234).unwrap();
    assert_eq!(
        got,
        Mapping {
            pa: 0x4000_1234,
            len: (1 << 30) - 0x1234
        }
    );
}

#[test]
fn stage2_permission() {
    let m = mem(16 << 20);
    let mut s2 = TableBuilder::new(&m, Granule::K4, 39, 0x10_0000).unwrap();
    s2.map(&m, 0x20_0000, 0x30_0000, PAGE_RW).unwrap(); // S2AP[1] clear: no write
    let t = stage2(25 | 1 << 6, s2.root);
    assert_eq!(
        translate_stage2(&m, &t, 0x20_0000),
        Err(Fault::Stage2(fsc::permission(3)))
    );
    s2.map(&m, 0x20_0000, 0x30_0000, PAGE_RW | 1 << 7).unwrap();
    assert_eq!(translate_stage2(&m, &t, 0x20_0008).unwrap().pa, 0x30_0008);
}
