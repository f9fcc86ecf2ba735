//! The plugin's end of the backend's sample feed: the QEMU channel's
//! HELLO and SET_RING, as the patched QEMU sends them, then sampled
//! operations in the shared ring and the sampling state the backend
//! publishes beside them.

use std::io;
use std::path::Path;

use spe_protocol::channel::{feature, ring::Layout, ring::SamplingState, Status};
use spe_protocol::op::SampledOp;
use vhost_device_spe::qemu::client::ChannelClient;
use vhost_device_spe::ring::Producer;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

/// A connected feed.
pub struct Feed {
    /// Kept open: the backend sees the VM go when it closes.
    _client: ChannelClient,
    producer: Producer,
    doorbell: EventFd,
    _irq: EventFd,
    slots: u64,
}

fn refused(what: &str, status: u32) -> io::Error {
    io::Error::other(format!("the backend refused {what} (status {status})"))
}

impl Feed {
    /// Connects to the backend's `--plugin-socket` for `vcpus` vCPUs.
    pub fn connect(path: &Path, vcpus: u32) -> io::Result<Feed> {
        let mut client = ChannelClient::connect(path)?;
        let hello = client.hello(vcpus)?;
        if hello.status != Status::OK {
            return Err(refused(&format!("HELLO for {vcpus} vCPU(s)"), hello.status));
        }
        if hello.features & feature::SAMPLING_STATE == 0 {
            return Err(io::Error::other(
                "the backend publishes no sampling state (too old for the plugin)",
            ));
        }
        let layout = Layout {
            vcpus,
            slots: hello.ring_slots,
        };
        if hello.ring_size != layout.size() as u64 || hello.ring_slots == 0 {
            return Err(io::Error::other(format!(
                "the backend's ring ({} slots, {} bytes) is not a ring for {vcpus} vCPU(s)",
                hello.ring_slots, hello.ring_size
            )));
        }
        let (mem, producer) = Producer::create(layout)?;
        let doorbell = EventFd::new(EFD_NONBLOCK)?;
        let irq = EventFd::new(EFD_NONBLOCK)?;
        let status = client.set_ring(hello.ring_size, &mem, &doorbell, &irq)?;
        if status.status != Status::OK {
            return Err(refused("SET_RING", status.status));
        }
        Ok(Feed {
            _client: client,
            producer,
            doorbell,
            _irq: irq,
            slots: u64::from(layout.slots),
        })
    }

    /// What the backend last published for `vcpu`.
    pub fn state(&self, vcpu: u32) -> SamplingState {
        self.producer.sampling_state(vcpu).1
    }

    /// Publishes `op` to `vcpu`'s ring and hands back the `counted`
    /// operations its period spanned; false if the ring was full (the
    /// operation is lost). Rings the doorbell once the ring is half full,
    /// as QEMU does: the backend drains on a timer otherwise.
    pub fn push(&mut self, vcpu: u32, op: &SampledOp, counted: u64) -> bool {
        let pushed = self.producer.push(vcpu, std::slice::from_ref(op)) == 1;
        self.producer.count(vcpu, counted);
        if self.producer.space(vcpu) < self.slots / 2 {
            // Nonblocking: a full eventfd counter already says "drain".
            let _ = self.doorbell.write(1);
        }
        pushed
    }
}
