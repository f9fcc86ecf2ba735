//! The vhost-user front end of the paravirtual virtio-spe device.
//!
//! One [`Spu`] per vCPU. The guest driver reads and writes SPU registers
//! through the control queue and learns about PMBIRQ level changes and
//! completed snapshot captures through buffers it keeps posted on the event
//! queue (vhost 0.18 gives a back end no way to send a config-change
//! interrupt, so completing an event buffer is the device's interrupt).
//! Message layouts live in [`spe_protocol::virtio`].
//!
//! The driver also mirrors its EL1 translation registers to the device
//! through the control queue, since the buffer it programs is in kernel
//! virtual addresses. With `--synthetic` the [`Synthetic`] source feeds
//! every SPU from a timer registered in the vhost-user worker's epoll loop
//! (event [`SYNTHETIC_EVENT`]), so records land in the guest memory of
//! SET_MEM_TABLE, and PMBIRQ changes it causes go out on the event queue.
//!
//! This file holds the backend and its [`VhostUserBackendMut`] side; the
//! control queue's requests are in `ctrl`, the event queue (the device's
//! interrupts) in `events`, and the loop that serves one front end after
//! another in `serve`.

mod ctrl;
mod events;
mod feed;
mod serve;
#[cfg(test)]
mod test_rig;

pub use feed::{Feed, DRAIN_PERIOD};
pub use serve::{serve, DeviceOptions, HANDSHAKE_TIMEOUT};

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use log::{debug, error, info, warn};
use spe_protocol::virtio::{
    Config, Event, CONTROL_QUEUE, EVENT_QUEUE, MAX_BATCH, NUM_QUEUES, VIRTIO_SPE_F_SNAPSHOT,
    VIRTIO_SPE_VERSION,
};
use vhost::vhost_user::message::{VhostUserProtocolFeatures, VhostUserVirtioFeatures};
use vhost_user_backend::{VhostUserBackendMut, VringRwLock};
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;
use vm_memory::{
    GuestAddressSpace, GuestMemoryAtomic, GuestMemoryLoadGuard, GuestMemoryMmap, GuestMemoryRegion,
};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{
    new_event_consumer_and_notifier, EventConsumer, EventFlag, EventNotifier,
};
use vmm_sys_util::timerfd::TimerFd;

use crate::control::Hub;
use crate::lock;
use crate::spu::{Features, Spu};
use crate::synthetic::{self, Synthetic};

/// Largest virtqueue the device accepts.
pub const QUEUE_SIZE: usize = 1024;
/// Events kept while the driver has no event buffer posted. Older ones are
/// dropped first: PMBIRQ is level-triggered, so the newest event per vCPU
/// is the one that matters.
pub const MAX_PENDING_EVENTS: usize = 1024;
/// Epoll data of the synthetic source's timer. The worker reserves
/// `0..=NUM_QUEUES` for the queues and its exit/vring-enable event.
pub const SYNTHETIC_EVENT: u16 = NUM_QUEUES as u16 + 1;
/// Device event of the control socket's commands (`--control-socket`).
pub const CONTROL_EVENT: u16 = NUM_QUEUES as u16 + 2;
/// Device event of the TCG plugin's samples (`--plugin-socket`).
pub const FEED_EVENT: u16 = NUM_QUEUES as u16 + 3;

type GuestMemory = GuestMemoryMmap<()>;
type GuestMem = GuestMemoryAtomic<GuestMemory>;
type MemGuard = GuestMemoryLoadGuard<GuestMemory>;

/// Errors of the vhost-user front end. Each one ends the handling of one
/// event, never the daemon.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An event arrived on something other than EPOLLIN.
    #[error("event is not EPOLLIN")]
    HandleEventNotEpollIn,
    /// An event arrived for a source we did not register.
    #[error("unknown device event {0}")]
    HandleEventUnknown(u16),
    /// A queue event arrived before SET_MEM_TABLE.
    #[error("queue event before the guest memory table")]
    NoMemory,
    /// The queue could not be walked (bad avail index, not ready, ...).
    #[error("virtqueue error: {0}")]
    Queue(virtio_queue::Error),
    /// Signalling the used queue failed.
    #[error("cannot signal used queue: {0}")]
    Notify(io::Error),
}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        io::Error::other(e)
    }
}

/// The device's state for one front-end connection (one VM).
pub struct VhostUserSpeBackend {
    config: Config,
    spus: Vec<Spu>,
    /// The PMBIRQ level last reported to the driver, per vCPU.
    irq_level: Vec<bool>,
    pending: VecDeque<Event>,
    event_idx: bool,
    mem: Option<GuestMem>,
    /// The `--synthetic` source and the timer that paces it.
    synthetic: Option<(Synthetic, TimerFd)>,
    exit_consumer: EventConsumer,
    exit_notifier: EventNotifier,
    /// The raw fds of the consumers handed out by `exit_event`: the
    /// vhost-user-backend crate (0.24) registers each with its worker's
    /// epoll through `into_raw_fd()` and never closes it, one fd per
    /// connection. [`serve`] closes them once the daemon is gone.
    handed_out: std::sync::Mutex<Vec<RawFd>>,
    /// The control socket's hub, when this device serves it.
    control: Option<Arc<Hub>>,
    /// The front end asked for the features (QEMU's first request).
    negotiated: Arc<std::sync::atomic::AtomicBool>,
    /// `--plugin-socket`: the TCG plugin's samples.
    feed: Option<Arc<Feed>>,
    /// `--record DIR`, and the recording of the connected VM.
    record_dir: Option<std::path::PathBuf>,
    recorder: Option<crate::record::Recorder>,
}

impl VhostUserSpeBackend {
    pub fn new(num_vcpus: u32, features: Features) -> io::Result<Self> {
        let (exit_consumer, exit_notifier) = new_event_consumer_and_notifier(EventFlag::NONBLOCK)?;
        let id_aa64dfr0 = features.id_aa64dfr0_spe_fields();
        let config = Config {
            num_vcpus,
            features: if features.pmu_ss {
                VIRTIO_SPE_F_SNAPSHOT
            } else {
                0
            },
            pmsidr: features.pmsidr(),
            pmbidr: features.pmbidr(),
            id_aa64dfr0,
            version: VIRTIO_SPE_VERSION,
            max_batch: MAX_BATCH,
        };
        let spus = (0..num_vcpus).map(|_| Spu::new(features.clone())).collect();
        Ok(VhostUserSpeBackend {
            config,
            spus,
            irq_level: vec![false; num_vcpus as usize],
            pending: VecDeque::new(),
            event_idx: false,
            mem: None,
            synthetic: None,
            exit_consumer,
            exit_notifier,
            handed_out: std::sync::Mutex::new(Vec::new()),
            control: None,
            negotiated: Arc::default(),
            feed: None,
            record_dir: None,
            recorder: None,
        })
    }

    /// Keeps a copy of every record written, per vCPU (`--record DIR`),
    /// from the front end's connection on.
    pub fn with_record(mut self, dir: Option<std::path::PathBuf>) -> Self {
        self.record_dir = dir;
        self
    }

    /// Stores what the SPUs wrote since the last call (`--record`).
    fn store_records(&mut self) {
        if let Some(r) = &mut self.recorder {
            r.store(&mut self.spus);
        }
    }

    /// The CONSTRAINED UNPREDICTABLE choices (`--choice`).
    pub fn with_choices(mut self, choices: crate::spu::unpredictable::Choices) -> Self {
        self.spus.iter_mut().for_each(|s| s.set_choices(choices));
        self
    }

    /// Serves the control socket's commands on this VM's SPUs (register
    /// [`Hub::wake_fd`] with the worker under [`CONTROL_EVENT`]). The
    /// scenario's faults are armed by [`Self::front_end_connected`].
    pub fn with_control(mut self, hub: Arc<Hub>) -> Self {
        self.control = Some(hub);
        self
    }

    /// Takes the TCG plugin's samples from `feed` (register
    /// [`Feed::wake_fd`] with the worker under [`FEED_EVENT`]).
    pub fn with_feed(mut self, feed: Arc<Feed>) -> Self {
        self.feed = Some(feed);
        self
    }

    /// Applies the plugin's samples and reports the PMBIRQ changes they
    /// caused (buffer full, faults).
    fn feed_tick(&mut self) {
        let Some(feed) = self.feed.clone() else {
            return;
        };
        let mem = self.mem.as_ref().map(|m| m.memory());
        let drained = feed.drain(&mut self.spus, mem.as_deref());
        if drained.dropped > 0 {
            debug!(
                "{} plugin samples dropped: no guest memory yet",
                drained.dropped
            );
        }
        for vcpu in 0..self.spus.len() {
            self.note_pmbirq(vcpu);
        }
        self.store_records();
    }

    /// A front end connected: arms the scenario's faults and those armed
    /// while no VM was connected. Not at construction: the backend for
    /// the next connection is made before anyone connects, and faults
    /// armed in between belong to the hub until a VM is there.
    fn front_end_connected(&mut self) {
        if let Some(hub) = &self.control {
            hub.vm_started(&mut self.spus);
        }
        if let Some(dir) = &self.record_dir {
            match crate::record::Recorder::start(dir, &mut self.spus) {
                Ok(r) => self.recorder = Some(r),
                Err(e) => error!("--record {}: {e}; not recording", dir.display()),
            }
        }
    }

    /// Closes the exit-event fds the daemon leaked. Call only once the
    /// daemon and its workers are gone, when nothing else can use them.
    fn close_leaked_exit_fds(&self) {
        let fds = std::mem::take(&mut *lock(&self.handed_out));
        for fd in fds {
            // SAFETY: `fd` is a dup this backend created and handed over;
            // the crate took it as a raw fd and never closes it, and its
            // epoll and worker thread are gone, so this is the last owner.
            unsafe { libc::close(fd) };
        }
    }

    /// Feeds `rate` synthetic operations per second to every vCPU's SPU.
    /// The timer starts now; register [`Self::synthetic_timer`] with the
    /// worker under [`SYNTHETIC_EVENT`] so its ticks reach `handle_event`.
    pub fn with_synthetic(mut self, rate: u64) -> io::Result<Self> {
        let mut timer = TimerFd::new().map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
        synthetic::arm(&mut timer)?;
        self.synthetic = Some((Synthetic::new(self.config.num_vcpus, rate), timer));
        Ok(self)
    }

    /// The synthetic source's timer, if there is one.
    pub fn synthetic_timer(&self) -> Option<RawFd> {
        self.synthetic.as_ref().map(|(_, t)| t.as_raw_fd())
    }

    /// The config space the device serves.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Events not yet delivered for want of an event-queue buffer.
    pub fn pending_events(&self) -> usize {
        self.pending.len()
    }

    fn memory(&self) -> Result<MemGuard, Error> {
        self.mem.as_ref().map(|m| m.memory()).ok_or(Error::NoMemory)
    }

    /// One tick of the synthetic source: sample on every vCPU, then report
    /// the PMBIRQ changes (buffer full, faults) that caused.
    fn synthetic_tick(&mut self) {
        let Some((source, timer)) = self.synthetic.as_mut() else {
            return;
        };
        let mem = self.mem.as_ref().map(|m| m.memory());
        source.tick(timer, &mut self.spus, mem.as_deref());
        for vcpu in 0..self.spus.len() {
            self.note_pmbirq(vcpu);
        }
        self.store_records();
    }

    fn handle(&mut self, device_event: u16, vrings: &[VringRwLock]) -> Result<(), Error> {
        match device_event {
            CONTROL_QUEUE => {
                debug!("control queue kick");
                // The plugin's samples so far first, as the patched QEMU
                // flushes its ring before a register access: a stop
                // must not find them still queued (they would be dropped
                // as taken with profiling off, or land after a PMBPTR
                // the driver already read).
                self.feed_tick();
                self.handle_ctrl(&vrings[CONTROL_QUEUE as usize])?;
                self.flush_events(&vrings[EVENT_QUEUE as usize])
            }
            EVENT_QUEUE => {
                debug!("event queue kick");
                self.flush_events(&vrings[EVENT_QUEUE as usize])
            }
            SYNTHETIC_EVENT => {
                self.synthetic_tick();
                self.flush_events(&vrings[EVENT_QUEUE as usize])
            }
            CONTROL_EVENT => {
                if let Some(hub) = self.control.clone() {
                    hub.serve_calls(Some(&mut self.spus));
                    for v in 0..self.spus.len() {
                        self.note_pmbirq(v);
                    }
                    self.store_records();
                }
                self.flush_events(&vrings[EVENT_QUEUE as usize])
            }
            FEED_EVENT => {
                self.feed_tick();
                self.flush_events(&vrings[EVENT_QUEUE as usize])
            }
            e => Err(Error::HandleEventUnknown(e)),
        }
    }
}

impl VhostUserBackendMut for VhostUserSpeBackend {
    type Bitmap = ();
    type Vring = VringRwLock;

    fn num_queues(&self) -> usize {
        NUM_QUEUES
    }

    fn max_queue_size(&self) -> usize {
        QUEUE_SIZE
    }

    fn features(&self) -> u64 {
        self.negotiated
            .store(true, std::sync::atomic::Ordering::Relaxed);
        (1 << VIRTIO_F_VERSION_1)
            | (1 << VIRTIO_RING_F_EVENT_IDX)
            | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits()
    }

    fn acked_features(&mut self, features: u64) {
        info!("vhost-user acked features {features:#x}");
    }

    fn protocol_features(&self) -> VhostUserProtocolFeatures {
        VhostUserProtocolFeatures::MQ | VhostUserProtocolFeatures::CONFIG
    }

    fn reset_device(&mut self) {
        info!("device reset");
        self.spus.iter_mut().for_each(Spu::reset_keeping_stats);
        self.irq_level.fill(false);
        self.pending.clear();
        if let Some(feed) = &self.feed {
            feed.publish(&self.spus);
        }
    }

    fn set_event_idx(&mut self, enabled: bool) {
        debug!("EVENT_IDX {}", if enabled { "on" } else { "off" });
        self.event_idx = enabled;
    }

    fn get_config(&self, offset: u32, size: u32) -> Vec<u8> {
        info!("vhost-user GET_CONFIG offset={offset} size={size}");
        let bytes = self.config.to_bytes();
        let (start, len) = (offset as usize, size as usize);
        match start.checked_add(len) {
            Some(end) if end <= bytes.len() => bytes[start..end].to_vec(),
            // An empty reply is the vhost-user way of saying "error".
            _ => {
                error!("GET_CONFIG offset={offset} size={size} is outside the config space");
                Vec::new()
            }
        }
    }

    fn set_config(&mut self, offset: u32, buf: &[u8]) -> io::Result<()> {
        warn!(
            "SET_CONFIG offset={offset} size={} ignored: the config space is read-only",
            buf.len()
        );
        Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            "config space is read-only",
        ))
    }

    fn update_memory(&mut self, mem: GuestMem) -> io::Result<()> {
        // Refused before anything touches the new mapping: a region the
        // front end could still shrink would be a SIGBUS waiting to happen.
        for region in vm_memory::GuestMemoryBackend::iter(&*mem.memory()) {
            let fo = region.file_offset().ok_or_else(|| {
                io::Error::other("guest memory region without a file: not shared memory")
            })?;
            spe_channel::shm::check_mappable(fo.file(), fo.start(), region.len()).map_err(|e| {
                error!(
                    "SET_MEM_TABLE refused: region gpa {:#x}: {e}",
                    region.start_addr().0
                );
                io::Error::other(e)
            })?;
        }
        info!(
            "guest memory table updated: {} region(s)",
            vm_memory::GuestMemoryBackend::num_regions(&*mem.memory())
        );
        self.mem = Some(mem);
        Ok(())
    }

    fn exit_event(&self, _thread_index: usize) -> Option<(EventConsumer, EventNotifier)> {
        let consumer = self.exit_consumer.try_clone().ok()?;
        let notifier = self.exit_notifier.try_clone().ok()?;
        lock(&self.handed_out).push(consumer.as_raw_fd());
        Some((consumer, notifier))
    }

    fn handle_event(
        &mut self,
        device_event: u16,
        evset: EventSet,
        vrings: &[VringRwLock],
        _thread_id: usize,
    ) -> io::Result<()> {
        if evset != EventSet::IN {
            return Err(Error::HandleEventNotEpollIn.into());
        }
        // An error here is the guest's fault (bad ring) or a lost front end:
        // log it and keep the worker alive for the next kick.
        if let Err(e) = self.handle(device_event, vrings) {
            error!("queue {device_event}: {e}");
        }
        // A register write may have started or stopped sampling: the
        // plugin reads the interval and the ELs from the ring.
        if let Some(feed) = &self.feed {
            feed.publish(&self.spus);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
