use spe_protocol::regs::SysReg;
use spe_protocol::virtio::{
    CtrlOp, CtrlStatus, Event, EventKind, CONTROL_QUEUE, EVENT_QUEUE, REG_SCTLR_EL1, REG_TCR_EL1,
    REG_TTBR1_EL1,
};
use vhost_user_backend::VhostUserBackendMut;
use vm_memory::{Bytes, GuestAddress, GuestMemoryAtomic};

use crate::spu::Features;
use crate::synthetic;
use crate::vhu_spe::ctrl::PMSSCR_SS;
use crate::vhu_spe::test_rig::{raw_req, req, Rig, DATA, EVENT_RING};
use crate::vhu_spe::{VhostUserSpeBackend, SYNTHETIC_EVENT};

#[test]
fn pmbirq_change_completes_an_event_buffer() {
    let mut rig = Rig::new(2);
    const PMBSR_S: u64 = 1 << 17;
    // Raise PMBIRQ on vCPU 1 with no event buffer posted: it waits.
    let resp = rig.post_ctrl(0, &req(1, CtrlOp::Write, SysReg::PmbsrEl1, PMBSR_S), 1);
    rig.kick(CONTROL_QUEUE);
    let r = rig.responses(resp, 1)[0];
    assert_eq!(r.status, CtrlStatus::Ok);
    assert!(r.pmbirq);
    assert_eq!(rig.backend.pending_events(), 1);
    assert_eq!(rig.used(EVENT_RING, 0), None);

    // A too-small buffer is returned empty and the event stays pending.
    let ev_addr = DATA + 0x8000;
    rig.post(EVENT_RING, 0, &[(ev_addr, 8, true)]);
    rig.post(EVENT_RING, 1, &[(ev_addr, Event::SIZE as u32, true)]);
    rig.kick(EVENT_QUEUE);
    assert_eq!(rig.used(EVENT_RING, 0), Some((0, 0)));
    assert_eq!(rig.used(EVENT_RING, 1), Some((1, Event::SIZE as u32)));
    assert_eq!(rig.backend.pending_events(), 0);
    let mut b = [0u8; Event::SIZE];
    rig.mem_ref()
        .read_slice(&mut b, GuestAddress(ev_addr))
        .unwrap();
    let ev = Event::from_bytes(&b).unwrap();
    assert_eq!(ev.vcpu, 1);
    assert_eq!(ev.kind, EventKind::PmbirqChanged);
    assert!(ev.pmbirq);
    assert_ne!(ev.pmbsr & PMBSR_S, 0);

    // Clearing S lowers the line; a posted buffer completes at once.
    rig.post(EVENT_RING, 2, &[(ev_addr, Event::SIZE as u32, true)]);
    rig.post_ctrl(1, &req(1, CtrlOp::Write, SysReg::PmbsrEl1, 0), 1);
    rig.kick(CONTROL_QUEUE);
    rig.mem_ref()
        .read_slice(&mut b, GuestAddress(ev_addr))
        .unwrap();
    let ev = Event::from_bytes(&b).unwrap();
    assert!(!ev.pmbirq);
    assert_eq!(rig.used(EVENT_RING, 2), Some((2, Event::SIZE as u32)));

    // Writing the same level again is no change, so no event.
    rig.post_ctrl(2, &req(1, CtrlOp::Write, SysReg::PmbsrEl1, 0), 1);
    rig.kick(CONTROL_QUEUE);
    assert_eq!(rig.backend.pending_events(), 0);
}

#[test]
fn snapshot_capture_completes_an_event_buffer() {
    let mut rig = Rig::new(1);
    rig.backend = VhostUserSpeBackend::new(1, Features::max()).unwrap();
    rig.backend
        .update_memory(GuestMemoryAtomic::new(rig.gm.clone()))
        .unwrap();
    let ev_addr = DATA + 0x8000;
    rig.post(EVENT_RING, 0, &[(ev_addr, Event::SIZE as u32, true)]);
    let resp = rig.post_ctrl(0, &req(0, CtrlOp::Write, SysReg::PmsscrEl1, 1), 1);
    rig.kick(CONTROL_QUEUE);
    assert_eq!(rig.responses(resp, 1)[0].status, CtrlStatus::Ok);
    assert_eq!(rig.used(EVENT_RING, 0), Some((0, Event::SIZE as u32)));
    let mut b = [0u8; Event::SIZE];
    rig.mem_ref()
        .read_slice(&mut b, GuestAddress(ev_addr))
        .unwrap();
    let ev = Event::from_bytes(&b).unwrap();
    assert_eq!(ev.kind, EventKind::SnapshotDone);
    // SS reads 0 once the capture is over, whether it was taken or not (NC).
    assert_eq!(ev.data & PMSSCR_SS, 0);
}

#[test]
fn synthetic_ticks_fill_the_buffer_and_report_pmbirq() {
    use crate::spu::tables::{tcr_el1, TableBuilder, PAGE_RW};
    use crate::spu::translate::Granule;
    use spe_protocol::regs::{pmbsr_bsc, pmbsr_ec, PMBSR};

    const BUF_VA: u64 = 0xFFFF_8000_1000_0000;
    let mut rig = Rig::new(1);
    rig.backend = VhostUserSpeBackend::new(1, Features::default())
        .unwrap()
        .with_synthetic(1_000_000)
        .unwrap();
    assert!(rig.backend.synthetic_timer().is_some());
    rig.backend
        .update_memory(GuestMemoryAtomic::new(rig.gm.clone()))
        .unwrap();
    let mut tb = TableBuilder::new(rig.gm, Granule::K4, 48, 0x4_0000).unwrap();
    tb.map(rig.gm, BUF_VA, 0x8_0000, PAGE_RW).unwrap();
    let mut reqs = raw_req(0, CtrlOp::Write, REG_SCTLR_EL1, 1);
    reqs.extend(raw_req(
        0,
        CtrlOp::Write,
        REG_TCR_EL1,
        tcr_el1(Granule::K4, 48),
    ));
    reqs.extend(raw_req(0, CtrlOp::Write, REG_TTBR1_EL1, tb.root));
    for (reg, v) in [
        (SysReg::PmbptrEl1, BUF_VA),
        (SysReg::PmblimitrEl1, (BUF_VA + 4096) | 1),
        (SysReg::PmsirrEl1, 1 << 8),
        (SysReg::PmscrEl1, 0b11_0011),
    ] {
        reqs.extend(req(0, CtrlOp::Write, reg, v));
    }
    let resp = rig.post_ctrl(0, &reqs, 7);
    rig.kick(CONTROL_QUEUE);
    assert!(rig
        .responses(resp, 7)
        .iter()
        .all(|r| r.status == CtrlStatus::Ok));

    let ev_addr = DATA + 0xC000;
    rig.post(EVENT_RING, 0, &[(ev_addr, Event::SIZE as u32, true)]);
    let start = std::time::Instant::now();
    while rig.used(EVENT_RING, 0).is_none() {
        assert!(start.elapsed() < std::time::Duration::from_secs(5));
        std::thread::sleep(synthetic::TICK);
        rig.kick(SYNTHETIC_EVENT);
    }
    let mut b = [0u8; Event::SIZE];
    rig.mem_ref()
        .read_slice(&mut b, GuestAddress(ev_addr))
        .unwrap();
    let ev = Event::from_bytes(&b).unwrap();
    assert_eq!(
        (ev.vcpu, ev.kind, ev.pmbirq),
        (0, EventKind::PmbirqChanged, true)
    );
    assert_eq!(PMBSR::EC.get(ev.pmbsr), pmbsr_ec::BUFFER);
    assert_eq!(PMBSR::BSC.get(ev.pmbsr), pmbsr_bsc::BUFFER_FILLED);
    assert!(rig.backend.spus[0].stats().records > 0);
    // The records went to the translated page.
    assert_ne!(rig.gm.read_obj::<u64>(GuestAddress(0x8_0000)).unwrap(), 0);
}
