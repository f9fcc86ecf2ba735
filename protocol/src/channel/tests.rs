use super::*;
use crate::regs::{El, PeContext, TranslationRegs};
use proptest::prelude::*;

#[test]
fn header_round_trip_and_checks() {
    let h = Header::request(MsgType::Sysreg, 3, SysregAccess::SIZE);
    let b = h.to_bytes();
    assert_eq!(&b[..4], b"SPE1");
    let back = Header::from_bytes(&b).unwrap();
    assert_eq!(back, h);
    assert_eq!(back.kind(), Ok(MsgType::Sysreg));
    let r = h.reply_to(SysregReply::SIZE);
    assert!(r.is_reply() && r.kind() == Ok(MsgType::Sysreg));
    let mut bad = b;
    bad[0] = 0;
    assert!(matches!(
        Header::from_bytes(&bad),
        Err(ChannelError::BadMagic(_))
    ));
    let mut big = b;
    big[12..16].copy_from_slice(&(MAX_PAYLOAD + 1).to_le_bytes());
    assert!(matches!(
        Header::from_bytes(&big),
        Err(ChannelError::TooLarge(_))
    ));
    let mut t = b;
    t[4] = 0x7f;
    assert!(matches!(
        Header::from_bytes(&t).unwrap().kind(),
        Err(ChannelError::UnknownType(_))
    ));
}

#[test]
fn messages_round_trip() {
    let ctx = PeContext {
        el: El::El2,
        halted: true,
        hcr_el2: 1 << 34,
        cntvoff_el2: 77,
        ..Default::default()
    };
    let a = SysregAccess {
        encoding: 0xC4C8,
        is_write: true,
        value: 0x33,
        ctx,
    };
    assert_eq!(SysregAccess::from_bytes(&a.to_bytes()), Ok(a));
    let r = SysregReply {
        outcome: 2,
        pmbirq: true,
        reg: 0xC4C8,
        value: 9,
    };
    assert_eq!(SysregReply::from_bytes(&r.to_bytes()), Ok(r));
    let rs = Restore {
        regs: vec![(0xC4C8, 1), (0xC4D1, u64::MAX)],
    };
    assert_eq!(Restore::from_bytes(&rs.to_bytes()), Ok(rs));
    let most = Restore {
        regs: vec![(1, 2); Restore::MAX_ENTRIES],
    };
    assert!(most.to_bytes().len() <= MAX_PAYLOAD as usize);
    assert_eq!(Restore::from_bytes(&most.to_bytes()), Ok(most));
    let m = MemTable {
        regions: vec![
            MemRegion {
                gpa: 0x4000_0000,
                size: 1 << 30,
                fd_offset: 0,
            },
            MemRegion {
                gpa: 0,
                size: 0x1000,
                fd_offset: 0x2000,
            },
        ],
    };
    assert_eq!(MemTable::from_bytes(&m.to_bytes()), Ok(m));
    let t = TranslationRegs {
        tcr_el1: 5,
        vttbr_el2: 9,
        ..Default::default()
    };
    assert_eq!(translation_from_bytes(&translation_to_bytes(&t)), Ok(t));
    let h = HelloReply {
        version: 1,
        status: 0,
        features: 3,
        pmsver: 2,
        pmss: 1,
        pmsidr: 0x26007,
        pmbidr: 0,
        pmu_counters: 6,
        ring_slots: 4096,
        ring_size: 1 << 20,
    };
    assert_eq!(HelloReply::from_bytes(&h.to_bytes()), Ok(h));
    let mut ev = [0u64; 31];
    ev[30] = 7;
    assert_eq!(
        pmu_counters_from_bytes(&pmu_counters_to_bytes(&ev, 8, 9)),
        Ok((ev, 8, 9))
    );
}

#[test]
fn ring_layout() {
    let l = ring::Layout {
        vcpus: 2,
        slots: 16,
    };
    assert_eq!(l.irq_entry(1), 128);
    assert_eq!(l.ring_offset(), 192);
    assert_eq!(l.slot(0, 17), 192 + 128 + 96);
    assert_eq!(l.ring(1), 192 + 128 + 16 * 96);
    assert_eq!(l.size(), 192 + 2 * (128 + 16 * 96));
    assert_eq!(&l.header()[..4], b"SPER");
}

#[test]
fn sampling_state_layout() {
    let s = ring::SamplingState {
        interval: 1024,
        pmsicr_count: 0x0102_0304,
        enabled_els: 0b011,
        flags: ring::flags::RND,
        pmsicr_ecount: 9,
    };
    let b = s.to_bytes();
    assert_eq!(
        b,
        [0, 4, 0, 0, 4, 3, 2, 1, 0b011, 1, 9, 0, 0, 0, 0, 0],
        "little-endian, in field order"
    );
    assert_eq!(ring::SamplingState::from_bytes(&b), s);
    assert!(s.enabled_at(0) && s.enabled_at(1) && !s.enabled_at(2));
    assert!(!s.enabled_at(200));
    // The new fields live in what version 1 left reserved, after the
    // IRQ entry's seq and the producer index: old peers are unaffected.
    assert_eq!(
        (ring::IRQ_SEQ, ring::IRQ_STATE_SEQ, ring::IRQ_STATE),
        (16, 24, 32)
    );
    assert_eq!((ring::PRODUCER_OFFSET, ring::OPS_COUNTED_OFFSET), (0, 8));
    assert_eq!(ring::COUNT_NOW_OFFSET, 16);
}

proptest! {
    #[test]
    fn parsers_never_panic(b in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = Header::from_bytes(&b);
        let _ = MemTable::from_bytes(&b);
        let _ = SysregAccess::from_bytes(&b);
        let _ = HelloReply::from_bytes(&b);
        let _ = translation_from_bytes(&b);
        let _ = context_from_bytes(&b);
        let _ = pmu_counters_from_bytes(&b);
    }
}
