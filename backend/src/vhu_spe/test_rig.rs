//! A backend with both queues on mock virtqueues in shared guest memory,
//! for the tests of each part of the device.

use spe_protocol::regs::SysReg;
use spe_protocol::virtio::{CtrlOp, CtrlRequest, CtrlResponse};
use vhost_user_backend::{VhostUserBackendMut, VringRwLock, VringT};
use virtio_queue::mock::MockSplitQueue;
use vm_memory::{Bytes, GuestAddress, GuestMemoryAtomic, GuestMemoryMmap};

use super::{GuestMemory, VhostUserSpeBackend};
use crate::desc_chain::desc_chain;
use crate::spu::Features;

const QSIZE: u16 = 16;
pub(super) const CTRL_RING: GuestAddress = GuestAddress(0);
pub(super) const EVENT_RING: GuestAddress = GuestAddress(0x1000);
pub(super) const DATA: u64 = 0x1_0000;

pub(super) struct Rig {
    /// Shares its mapping with the backend's copy. Leaked so the mock
    /// queues can borrow it for the whole test.
    pub(super) gm: &'static GuestMemory,
    queues: [MockSplitQueue<'static, GuestMemory>; 2],
    pub(super) backend: VhostUserSpeBackend,
    pub(super) vrings: Vec<VringRwLock>,
}

impl Rig {
    pub(super) fn new(vcpus: u32) -> Self {
        // Shared and sealed, as a front end must hand it over.
        let ram = spe_channel::shm::sealed_memfd("rig-ram", 0x10_0000).unwrap();
        let gm: &'static GuestMemory = Box::leak(Box::new(
            GuestMemoryMmap::from_ranges_with_files([(
                GuestAddress(0),
                0x10_0000,
                Some(vm_memory::FileOffset::new(ram, 0)),
            )])
            .unwrap(),
        ));
        let mem = GuestMemoryAtomic::new(gm.clone());
        let mut backend = VhostUserSpeBackend::new(vcpus, Features::default()).unwrap();
        backend.update_memory(mem.clone()).unwrap();
        let queues = [CTRL_RING, EVENT_RING].map(|base| MockSplitQueue::create(gm, base, QSIZE));
        let vrings = queues
            .iter()
            .map(|q| {
                let vring = VringRwLock::new(mem.clone(), QSIZE).unwrap();
                vring.set_queue_size(QSIZE);
                vring
                    .set_queue_info(q.desc_table_addr().0, q.avail_addr().0, q.used_addr().0)
                    .unwrap();
                vring.set_queue_ready(true);
                vring
            })
            .collect();
        Rig {
            gm,
            queues,
            backend,
            vrings,
        }
    }

    pub(super) fn queue(&self, base: GuestAddress) -> &MockSplitQueue<'static, GuestMemory> {
        &self.queues[usize::from(base == EVENT_RING)]
    }

    pub(super) fn mem_ref(&self) -> &GuestMemory {
        self.gm
    }

    /// Posts a chain of (addr, len, writable) descriptors at table index `first`.
    pub(super) fn post(&self, base: GuestAddress, first: u16, descs: &[(u64, u32, bool)]) {
        self.queue(base)
            .add_desc_chains(&desc_chain(first, descs), first)
            .unwrap();
    }

    /// Posts a control buffer with these requests and room for
    /// `resp_slots` responses; returns the response address.
    pub(super) fn post_ctrl(&self, first: u16, reqs: &[u8], resp_slots: usize) -> u64 {
        let req_addr = DATA + first as u64 * 0x1000;
        let resp_addr = req_addr + 0x800;
        self.mem_ref()
            .write_slice(reqs, GuestAddress(req_addr))
            .unwrap();
        self.post(
            CTRL_RING,
            first,
            &[
                (req_addr, reqs.len() as u32, false),
                (resp_addr, (resp_slots * CtrlResponse::SIZE) as u32, true),
            ],
        );
        resp_addr
    }

    pub(super) fn kick(&mut self, queue: u16) {
        // Call the inner handler so a queue error fails the test
        // (handle_event only logs it).
        self.backend.handle(queue, &self.vrings).unwrap();
    }

    /// (id, len) of used element `i` of the ring at `base`.
    pub(super) fn used(&self, base: GuestAddress, i: usize) -> Option<(u32, u32)> {
        let q = self.queue(base);
        let idx = q.used().idx().load();
        (i < idx as usize).then(|| {
            let e = q.used().ring().ref_at(i).unwrap().load();
            (e.id(), e.len())
        })
    }

    pub(super) fn responses(&self, addr: u64, n: usize) -> Vec<CtrlResponse> {
        let mut b = vec![0u8; n * CtrlResponse::SIZE];
        self.mem_ref()
            .read_slice(&mut b, GuestAddress(addr))
            .unwrap();
        b.chunks(CtrlResponse::SIZE)
            .map(|c| CtrlResponse::from_bytes(c).unwrap())
            .collect()
    }
}

pub(super) fn req(vcpu: u32, op: CtrlOp, reg: SysReg, value: u64) -> Vec<u8> {
    raw_req(vcpu, op, reg.encoding(), value)
}

pub(super) fn raw_req(vcpu: u32, op: CtrlOp, reg: u32, value: u64) -> Vec<u8> {
    CtrlRequest {
        vcpu,
        reg,
        op,
        value,
    }
    .to_bytes()
    .to_vec()
}
