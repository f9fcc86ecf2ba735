use spe_protocol::regs::SysReg;
use spe_protocol::virtio::{
    Config, CtrlOp, CONTROL_QUEUE, VIRTIO_SPE_CONFIG_SIZE, VIRTIO_SPE_F_SNAPSHOT,
    VIRTIO_SPE_VERSION,
};
use vhost::vhost_user::message::VhostUserProtocolFeatures;
use vhost_user_backend::VhostUserBackendMut;
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use vmm_sys_util::epoll::EventSet;

use super::test_rig::{req, Rig};
use super::{VhostUserSpeBackend, SYNTHETIC_EVENT};
use crate::spu::Features;
use crate::synthetic;

#[test]
fn config_space() {
    let b = VhostUserSpeBackend::new(4, Features::neoverse_n1()).unwrap();
    let bytes = b.get_config(0, VIRTIO_SPE_CONFIG_SIZE as u32);
    let cfg = Config::from_bytes(&bytes).unwrap();
    assert_eq!(cfg.num_vcpus, 4);
    assert_eq!(cfg.pmsidr, Features::neoverse_n1().pmsidr());
    assert_eq!(cfg.pmbidr, Features::neoverse_n1().pmbidr());
    assert_eq!(cfg.version, VIRTIO_SPE_VERSION);
    assert_eq!(cfg.features & VIRTIO_SPE_F_SNAPSHOT, 0);
    let max = VhostUserSpeBackend::new(1, Features::max()).unwrap();
    assert_ne!(max.config().features & VIRTIO_SPE_F_SNAPSHOT, 0);
    // Partial reads and out-of-range reads.
    assert_eq!(b.get_config(8, 8), bytes[8..16].to_vec());
    assert!(b.get_config(60, 8).is_empty());
    assert!(b.get_config(u32::MAX, 2).is_empty());
}

#[test]
fn features_and_queues() {
    let b = VhostUserSpeBackend::new(1, Features::default()).unwrap();
    assert_eq!(b.num_queues(), 2);
    assert_ne!(b.features() & (1 << VIRTIO_F_VERSION_1), 0);
    assert!(b
        .protocol_features()
        .contains(VhostUserProtocolFeatures::CONFIG | VhostUserProtocolFeatures::MQ));
    assert!(b.exit_event(0).is_some());
}

#[test]
fn reset_device_clears_state() {
    let mut rig = Rig::new(1);
    rig.post_ctrl(0, &req(0, CtrlOp::Write, SysReg::PmscrEl1, 0x3), 1);
    rig.kick(CONTROL_QUEUE);
    rig.backend.reset_device();
    let resp = rig.post_ctrl(1, &req(0, CtrlOp::Read, SysReg::PmscrEl1, 0), 1);
    rig.kick(CONTROL_QUEUE);
    assert_eq!(rig.responses(resp, 1)[0].value, 0);
}

#[test]
fn unknown_events_and_missing_memory_do_not_fail_the_worker() {
    let mut rig = Rig::new(1);
    assert!(rig
        .backend
        .handle_event(7, EventSet::IN, &rig.vrings, 0)
        .is_ok());
    assert!(rig
        .backend
        .handle_event(CONTROL_QUEUE, EventSet::OUT, &rig.vrings, 0)
        .is_err());
    let mut fresh = VhostUserSpeBackend::new(1, Features::default()).unwrap();
    assert!(fresh
        .handle_event(CONTROL_QUEUE, EventSet::IN, &rig.vrings, 0)
        .is_ok());
    // A timer tick before SET_MEM_TABLE, or a spurious one (nothing to
    // read from the non-blocking timer), samples nothing.
    assert!(fresh.handle(SYNTHETIC_EVENT, &rig.vrings).is_ok());
    let mut fresh = fresh.with_synthetic(1_000_000).unwrap();
    fresh.handle(SYNTHETIC_EVENT, &rig.vrings).unwrap();
    std::thread::sleep(synthetic::TICK * 2);
    fresh.handle(SYNTHETIC_EVENT, &rig.vrings).unwrap();
    fresh.handle(SYNTHETIC_EVENT, &rig.vrings).unwrap();
    assert_eq!(fresh.spus[0].stats().samples, 0);
    assert_eq!(fresh.pending_events(), 0);
}
