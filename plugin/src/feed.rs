//! The plugin's end of the backend's sample feed: the QEMU channel's
//! HELLO and SET_RING, as the patched QEMU sends them, then sampled
//! operations in the shared ring and the sampling state the backend
//! publishes beside them.

use std::io;
use std::path::Path;

use spe_channel::client::{ChannelClient, FrontRing};
use spe_channel::ring::Producer;
use spe_protocol::channel::{feature, ring::Layout, ring::SamplingState, Status};
use spe_protocol::op::SampledOp;
use vmm_sys_util::eventfd::EventFd;

use crate::select::Backend;

/// A connected feed: the channel, kept open (the backend sees the VM go
/// when it closes), and the ring's interrupt eventfd it was given.
pub struct Feed {
    _client: ChannelClient,
    _irq: EventFd,
}

/// One vCPU's end of the ring: its own mapping and doorbell handle, so
/// that vCPU threads publish without a lock or a cache line in common.
pub struct VcpuFeed {
    vcpu: u32,
    producer: Producer,
    doorbell: EventFd,
    slots: u64,
}

fn refused(what: &str, status: u32) -> io::Error {
    io::Error::other(format!("the backend refused {what} (status {status})"))
}

impl Feed {
    /// Connects to the backend's `--plugin-socket` for `vcpus` vCPUs.
    pub fn connect(path: &Path, vcpus: u32) -> io::Result<(Feed, Vec<VcpuFeed>)> {
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
        let ring = FrontRing::create(layout)?;
        let status = client.attach_ring(&ring)?;
        if status.status != Status::OK {
            return Err(refused("SET_RING", status.status));
        }
        // A producer per vCPU thread: no lock, no producer state shared.
        let others = (1..vcpus)
            .map(|_| Producer::map(&ring.file, layout))
            .collect::<Result<Vec<_>, _>>()
            .map_err(io::Error::other)?;
        let FrontRing {
            producer,
            doorbell,
            irq,
            ..
        } = ring;
        let vcpu_feeds = std::iter::once(producer)
            .chain(others)
            .zip(0..)
            .map(|(producer, vcpu)| {
                Ok(VcpuFeed {
                    vcpu,
                    producer,
                    doorbell: doorbell.try_clone()?,
                    slots: u64::from(layout.slots),
                })
            })
            .collect::<io::Result<_>>()?;
        Ok((
            Feed {
                _client: client,
                _irq: irq,
            },
            vcpu_feeds,
        ))
    }
}

impl Backend for VcpuFeed {
    /// What the backend last published for this vCPU.
    fn state(&self) -> SamplingState {
        self.producer.sampling_state(self.vcpu).1
    }

    /// Publishes `op` to the vCPU's ring and hands back the `counted`
    /// operations its period spanned; false if the ring was full (the
    /// operation is lost). Rings the doorbell once the ring is half full,
    /// as QEMU does: the backend drains on a timer otherwise.
    fn push(&mut self, op: &SampledOp, counted: u64) -> bool {
        let vcpu = self.vcpu;
        let pushed = self.producer.push(vcpu, std::slice::from_ref(op)) == 1;
        self.producer.count(vcpu, counted);
        if self.producer.space(vcpu) < self.slots / 2 {
            // Nonblocking: a full eventfd counter already says "drain".
            let _ = self.doorbell.write(1);
        }
        pushed
    }
}
