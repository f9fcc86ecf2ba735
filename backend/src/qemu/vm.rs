//! The state of one connected VM: its SPUs, its guest memory, and the
//! shared ring QEMU publishes sampled operations to and reads the PMBIRQ
//! levels and sampling states from.

use std::fs::File;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::sync::Arc;
use std::time::Duration;

use log::{debug, error, info, warn};
use spe_protocol::channel::{
    self,
    ring::{Layout, SamplingState},
    RingSetup, ALL_VCPUS,
};
use vmm_sys_util::eventfd::EventFd;
use vmm_sys_util::timerfd::TimerFd;

use super::error::{ProtocolError, ResourceError};
use super::{Mem, ServerConfig};
use crate::control::Hub;
use crate::record::Recorder;
use crate::spu::Spu;
use crate::synthetic::Synthetic;
use crate::uarch::MemoryHierarchy;
use spe_channel::ring::Consumer;

/// How often the rings are drained while any vCPU samples. QEMU rings the
/// doorbell only when a ring is half full: each doorbell costs the vCPU
/// thread a system call and, on a small host, a cross-CPU wake-up, while
/// this timer wakes only the backend. It also bounds how late a
/// buffer-full management event is seen at a low sampling rate.
const DRAIN_PERIOD: Duration = Duration::from_millis(1);

/// The state of one connected VM, created by HELLO.
pub(super) struct Vm {
    pub(super) spus: Vec<Spu>,
    /// Where the sampled loads and stores are served from.
    pub(super) hierarchy: MemoryHierarchy,
    pub(super) mem: Mem,
    pub(super) ring: Option<Ring>,
    pub(super) synthetic: Option<Synthetic>,
    /// Malformed ring slots seen (logged, skipped).
    bad_slots: u64,
    control: Option<Arc<Hub>>,
    recorder: Option<Recorder>,
    /// [`ServerConfig::deterministic`].
    pub(super) deterministic: bool,
}

/// The shared ring of SET_RING and its eventfds.
pub(super) struct Ring {
    consumer: Consumer,
    pub(super) doorbell: EventFd,
    irq: EventFd,
    /// Drains the ring every DRAIN_PERIOD while `draining`.
    pub(super) drain: TimerFd,
    draining: bool,
    /// The PMBIRQ level last written to each IRQ entry.
    published: Vec<bool>,
    /// The sampling state last written to each IRQ entry.
    states: Vec<SamplingState>,
}

impl Vm {
    pub(super) fn new(cfg: &ServerConfig, vcpus: u32) -> Vm {
        let mut spus: Vec<Spu> = (0..vcpus)
            .map(|_| {
                let mut spu = Spu::new(cfg.features.clone());
                spu.set_choices(cfg.choices);
                spu
            })
            .collect();
        let recorder = cfg
            .record
            .as_ref()
            .and_then(|dir| match Recorder::start(dir, &mut spus) {
                Ok(r) => Some(r),
                Err(e) => {
                    error!("--record {}: {e}; not recording", dir.display());
                    None
                }
            });
        Vm {
            spus,
            hierarchy: MemoryHierarchy::new(cfg.cpu, vcpus),
            mem: Mem::new(),
            ring: None,
            synthetic: cfg.synthetic_rate.map(|r| Synthetic::new(vcpus, r)),
            bad_slots: 0,
            control: cfg.control.clone(),
            recorder,
            deterministic: cfg.deterministic,
        }
    }

    /// The number of vCPUs HELLO announced.
    pub(super) fn vcpus(&self) -> u32 {
        self.spus.len() as u32
    }

    /// Runs `f` on `vcpu`'s SPU, or on every SPU for [`ALL_VCPUS`].
    pub(super) fn for_each_spu(&mut self, vcpu: u32, mut f: impl FnMut(&mut Spu)) {
        if vcpu == ALL_VCPUS {
            self.spus.iter_mut().for_each(f);
        } else {
            f(&mut self.spus[vcpu as usize]);
        }
    }

    /// What the SPUs wrote since the last publish reaches the record
    /// files, flushed: they are complete once this returns.
    pub(super) fn finish_recording(&mut self) {
        if let Some(mut r) = self.recorder.take() {
            r.store(&mut self.spus);
        }
    }

    /// Applies everything published to `vcpu`'s ring (or every ring).
    pub(super) fn drain(&mut self, vcpu: u32) -> Result<(), ProtocolError> {
        let Some(ring) = self.ring.as_mut() else {
            return Ok(());
        };
        let range = if vcpu == ALL_VCPUS {
            0..self.spus.len() as u32
        } else {
            vcpu..vcpu + 1
        };
        let mut bad = 0u64;
        for v in range {
            let spu = &mut self.spus[v as usize];
            let mem = &self.mem;
            let hierarchy = &mut self.hierarchy;
            ring.consumer.drain(v, |op| match op {
                Ok(mut op) => {
                    hierarchy.serve(v, &mut op);
                    spu.sample(&op, mem);
                }
                Err(_) => bad += 1,
            })?;
            // QEMU's selections were the slots above; the operations it
            // counted move PMSICR on as the guest's execution did.
            let counted = ring.consumer.take_counted(v);
            if counted > 0 {
                spu.skip_operations(counted);
            }
            // In a drain for the vCPU's own request QEMU waits, so its
            // counter is where it stopped: with RND the model's reloads
            // drew other random bytes than QEMU's did.
            if vcpu != ALL_VCPUS {
                if let Some(count) = ring.consumer.count_now(v) {
                    spu.set_interval_count(count);
                }
            }
        }
        if bad > 0 {
            if self.bad_slots == 0 {
                warn!("malformed sampled operations in the ring skipped (logged once per VM)");
            }
            self.bad_slots += bad;
        }
        Ok(())
    }

    /// Publishes the PMBIRQ level and sampling state of `vcpu` (or every
    /// vCPU) where they changed since last published, and signals QEMU
    /// once if a level changed, or if the ELs that sample changed other
    /// than in the reply to `requester`'s own request (which QEMU reads
    /// the state after).
    pub(super) fn publish(&mut self, vcpu: u32, requester: Option<u32>) {
        if let Some(r) = &mut self.recorder {
            r.store(&mut self.spus);
        }
        let range = if vcpu == ALL_VCPUS {
            0..self.spus.len()
        } else {
            vcpu as usize..vcpu as usize + 1
        };
        if let Some(hub) = &self.control {
            for v in range.clone() {
                hub.report_delivered(v as u32, &mut self.spus[v]);
            }
        }
        let Some(ring) = self.ring.as_mut() else {
            return;
        };
        let mut signal = false;
        for v in range {
            let spu = &self.spus[v];
            let level = spu.pmbirq();
            // Deterministic: the reply to the vCPU's own request carries
            // the level, and an eventfd wake-up would land anywhere.
            let in_reply = self.deterministic && requester == Some(v as u32);
            if level != ring.published[v] {
                ring.consumer.publish_irq(v as u32, level, spu.pmbsr());
                ring.published[v] = level;
                signal |= !in_reply;
                if let Some(hub) = &self.control {
                    hub.report_irq(v as u32, level, spu);
                }
                debug!("vCPU {v} PMBIRQ {}", u8::from(level));
            }
            let mut state = spu.sampling_state();
            if self.deterministic {
                state.flags |= channel::ring::flags::SYNC;
            }
            let old = ring.states[v];
            if state != old {
                ring.consumer.publish_state(v as u32, &state);
                ring.states[v] = state;
                if state.enabled_els != old.enabled_els {
                    debug!("vCPU {v} samples at ELs {:#05b}", state.enabled_els);
                    signal |= requester != Some(v as u32);
                }
            }
        }
        let sampling = !self.deterministic && ring.states.iter().any(|s| s.enabled_els != 0);
        if sampling != ring.draining {
            let res = if sampling {
                ring.drain.reset(DRAIN_PERIOD, Some(DRAIN_PERIOD))
            } else {
                ring.drain.clear()
            };
            match res {
                Ok(()) => ring.draining = sampling,
                Err(e) => error!("cannot set the ring's drain timer: {e}"),
            }
        }
        // An eventfd write only blocks at a counter of 2^64-2: never here.
        if signal {
            if let Err(e) = ring.irq.write(1) {
                error!("cannot signal the IRQ eventfd: {e}");
            }
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.finish_recording();
        let s = self.hierarchy.stats();
        if s.reuse_samples > 0 {
            info!("memory model: {s}");
        }
    }
}

/// Maps SET_RING's ring (the first of `fds`) after checking it is the
/// layout's size and sealed, and takes its doorbell and IRQ eventfds (the
/// other two). The TCG plugin's feed (`vhu_spe::feed`) hands over its
/// ring the same way.
pub(crate) fn map_ring(
    setup: &RingSetup,
    layout: Layout,
    fds: Vec<File>,
) -> Result<(Consumer, EventFd, EventFd), ResourceError> {
    let [mem, doorbell, irq]: [File; 3] = fds
        .try_into()
        .map_err(|f: Vec<File>| ResourceError::RingFds(f.len()))?;
    if setup.size != layout.size() as u64 {
        return Err(ResourceError::RingSize {
            size: setup.size,
            layout: layout.size(),
        });
    }
    // The ring is written by the other process and read here for the
    // VM's life: one it could shrink would fault this thread with SIGBUS.
    spe_channel::shm::check_mappable(&mem, 0, setup.size)
        .map_err(ResourceError::RingNotMappable)?;
    let consumer = Consumer::new(&mem, layout).map_err(ResourceError::Ring)?;
    // SAFETY: each File owns its descriptor; ownership moves to the EventFd.
    let (doorbell, irq) = unsafe {
        (
            EventFd::from_raw_fd(doorbell.into_raw_fd()),
            EventFd::from_raw_fd(irq.into_raw_fd()),
        )
    };
    Ok((consumer, doorbell, irq))
}

impl Ring {
    /// Maps SET_RING's ring (the first of `fds`) and takes its doorbell and
    /// IRQ eventfds (the other two).
    pub(super) fn new(
        setup: &RingSetup,
        layout: Layout,
        fds: Vec<File>,
    ) -> Result<Ring, ResourceError> {
        let (consumer, doorbell, irq) = map_ring(setup, layout, fds)?;
        let drain = TimerFd::new()
            .map_err(std::io::Error::from)
            .and_then(crate::synthetic::nonblocking)
            .map_err(ResourceError::DrainTimer)?;
        // A new memfd is zeroed; a ring QEMU hands over again after a restart
        // holds what the previous process published.
        let (published, states) = (0..layout.vcpus).map(|v| consumer.published(v)).unzip();
        Ok(Ring {
            consumer,
            doorbell,
            irq,
            drain,
            draining: false,
            published,
            states,
        })
    }
}
