use spe_protocol::regs::{SysReg, TranslationRegs};
use spe_protocol::virtio::{
    CtrlOp, CtrlRequest, CtrlResponse, CtrlStatus, CONTROL_QUEUE, REG_SCTLR_EL1, REG_TCR_EL1,
    REG_TTBR0_EL1, REG_TTBR1_EL1,
};
use vhost_user_backend::VhostUserBackendMut;

use crate::vhu_spe::test_rig::{raw_req, req, Rig, CTRL_RING, DATA};

#[test]
fn batched_write_then_read_back() {
    let mut rig = Rig::new(2);
    let limit = 0xffff_0000_1000_0000;
    let mut reqs = req(1, CtrlOp::Write, SysReg::PmscrEl1, 0x23);
    reqs.extend(req(1, CtrlOp::Write, SysReg::PmblimitrEl1, limit));
    reqs.extend(req(1, CtrlOp::Read, SysReg::PmscrEl1, 0));
    reqs.extend(req(1, CtrlOp::Read, SysReg::PmblimitrEl1, 0));
    reqs.extend(req(0, CtrlOp::Read, SysReg::PmblimitrEl1, 0));
    let resp = rig.post_ctrl(0, &reqs, 5);
    rig.kick(CONTROL_QUEUE);

    assert_eq!(
        rig.used(CTRL_RING, 0),
        Some((0, 5 * CtrlResponse::SIZE as u32))
    );
    let r = rig.responses(resp, 5);
    assert!(r.iter().all(|r| r.status == CtrlStatus::Ok && !r.pmbirq));
    assert_eq!(r[2].value, 0x23);
    assert_eq!(r[3].value, limit);
    // vCPUs have separate SPUs.
    assert_eq!(r[4].value, 0);
}

#[test]
fn bad_requests_get_error_statuses() {
    let mut rig = Rig::new(1);
    let mut reqs = req(1, CtrlOp::Read, SysReg::PmscrEl1, 0);
    let mut unknown = req(0, CtrlOp::Read, SysReg::PmscrEl1, 0);
    unknown[4..8].copy_from_slice(&0xdead_u32.to_le_bytes());
    reqs.extend(unknown);
    let mut bad_op = req(0, CtrlOp::Read, SysReg::PmscrEl1, 0);
    bad_op[8] = 9;
    reqs.extend(bad_op);
    reqs.extend(req(0, CtrlOp::Write, SysReg::PmsidrEl1, 1));
    let resp = rig.post_ctrl(0, &reqs, 4);
    rig.kick(CONTROL_QUEUE);

    let r = rig.responses(resp, 4);
    assert_eq!(r[0].status, CtrlStatus::BadVcpu);
    assert_eq!(r[1].status, CtrlStatus::UnknownRegister);
    assert_eq!(r[2].status, CtrlStatus::Malformed);
    // PMSIDR_EL1 is read-only: an architectural outcome, not a device error.
    assert_eq!(r[3].status, CtrlStatus::Undefined);
}

#[test]
fn malformed_buffers_are_rejected() {
    let mut rig = Rig::new(1);
    // Not a whole number of requests: one MALFORMED response.
    let r0 = rig.post_ctrl(0, &[0u8; CtrlRequest::SIZE + 1], 2);
    // Too little room for the responses: dropped, used length 0.
    let mut two = req(0, CtrlOp::Write, SysReg::PmscrEl1, 1);
    two.extend(req(0, CtrlOp::Read, SysReg::PmscrEl1, 0));
    rig.post_ctrl(2, &two, 1);
    // Descriptor pointing outside guest memory: dropped.
    rig.post(CTRL_RING, 4, &[(0x4000_0000, 24, false), (DATA, 16, true)]);
    // No writable descriptor at all.
    rig.post(CTRL_RING, 6, &[(DATA, 24, false)]);
    rig.kick(CONTROL_QUEUE);

    assert_eq!(rig.used(CTRL_RING, 0), Some((0, CtrlResponse::SIZE as u32)));
    assert_eq!(rig.responses(r0, 1)[0].status, CtrlStatus::Malformed);
    assert_eq!(rig.used(CTRL_RING, 1), Some((2, 0)));
    assert_eq!(rig.used(CTRL_RING, 2), Some((4, 0)));
    assert_eq!(rig.used(CTRL_RING, 3), Some((6, 0)));
    // The dropped batch did not run.
    let resp = rig.post_ctrl(8, &req(0, CtrlOp::Read, SysReg::PmscrEl1, 0), 1);
    rig.kick(CONTROL_QUEUE);
    assert_eq!(rig.responses(resp, 1)[0].value, 0);
}

#[test]
fn translation_registers_are_per_vcpu_and_reach_the_spu() {
    let mut rig = Rig::new(2);
    let regs = [
        (REG_SCTLR_EL1, 0x30d0_1805),
        (REG_TCR_EL1, 0x5_b510_3510),
        (REG_TTBR0_EL1, 0x4_1000),
        (REG_TTBR1_EL1, 0x4_2000),
    ];
    let mut reqs = Vec::new();
    for (enc, v) in regs {
        reqs.extend(raw_req(1, CtrlOp::Write, enc, v));
    }
    for (enc, _) in regs {
        reqs.extend(raw_req(1, CtrlOp::Read, enc, 0));
    }
    reqs.extend(raw_req(0, CtrlOp::Read, REG_TTBR1_EL1, 0));
    let resp = rig.post_ctrl(0, &reqs, 9);
    rig.kick(CONTROL_QUEUE);
    let r = rig.responses(resp, 9);
    assert!(r.iter().all(|r| r.status == CtrlStatus::Ok), "{r:?}");
    let read: Vec<u64> = r[4..8].iter().map(|r| r.value).collect();
    assert_eq!(read, regs.map(|(_, v)| v));
    assert_eq!(r[8].value, 0);
    assert_eq!(
        *rig.backend.spus[1].translation(),
        TranslationRegs {
            sctlr_el1: 0x30d0_1805,
            tcr_el1: 0x5_b510_3510,
            ttbr0_el1: 0x4_1000,
            ttbr1_el1: 0x4_2000,
            ..Default::default()
        }
    );
    // Device reset forgets them with the rest of the SPU.
    rig.backend.reset_device();
    assert_eq!(
        *rig.backend.spus[1].translation(),
        TranslationRegs::default()
    );
}
