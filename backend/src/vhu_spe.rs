//! The vhost-user front end of the paravirtual virtio-spe device.
//!
//! One [`Spu`] per vCPU. The guest driver reads and writes SPU registers
//! through the control queue and learns about PMBIRQ level changes and
//! completed snapshot captures through buffers it keeps posted on the event
//! queue (vhost 0.18 gives a back end no way to send a config-change
//! interrupt, so completing an event buffer is the device's interrupt).
//! Message layouts live in [`spe_protocol::virtio`].

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};

use log::{debug, error, info, warn};
use spe_protocol::regs::SysReg;
use spe_protocol::virtio::{
    Config, CtrlOp, CtrlRequest, CtrlResponse, CtrlStatus, Event, EventKind, CONTROL_QUEUE,
    EVENT_QUEUE, MAX_BATCH, NUM_QUEUES, VIRTIO_SPE_F_SNAPSHOT, VIRTIO_SPE_VERSION,
};
use vhost::vhost_user::message::{VhostUserProtocolFeatures, VhostUserVirtioFeatures};
use vhost_user_backend::{VhostUserBackendMut, VringRwLock, VringT};
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;
use virtio_queue::{DescriptorChain, QueueOwnedT, QueueT};
use vm_memory::{GuestAddressSpace, GuestMemoryAtomic, GuestMemoryLoadGuard, GuestMemoryMmap};
use vmm_sys_util::epoll::EventSet;
use vmm_sys_util::event::{
    new_event_consumer_and_notifier, EventConsumer, EventFlag, EventNotifier,
};

use crate::spu::{Features, Spu};

/// Largest virtqueue the device accepts.
pub const QUEUE_SIZE: usize = 1024;
/// Events kept while the driver has no event buffer posted. Older ones are
/// dropped first: PMBIRQ is level-triggered, so the newest event per vCPU
/// is the one that matters.
pub const MAX_PENDING_EVENTS: usize = 1024;
/// PMSSCR_EL1.SS: writing 1 requests a PMU snapshot capture.
const PMSSCR_SS: u64 = 1;

type GuestMemory = GuestMemoryMmap<()>;
type GuestMem = GuestMemoryAtomic<GuestMemory>;
type MemGuard = GuestMemoryLoadGuard<GuestMemory>;

/// Errors of the vhost-user front end. Each one ends the handling of one
/// event, never the daemon.
#[derive(Debug)]
pub enum Error {
    /// An event arrived on something other than EPOLLIN.
    HandleEventNotEpollIn,
    /// An event arrived for a source we did not register.
    HandleEventUnknown(u16),
    /// A queue event arrived before SET_MEM_TABLE.
    NoMemory,
    /// The queue could not be walked (bad avail index, not ready, ...).
    Queue(virtio_queue::Error),
    /// Signalling the used queue failed.
    Notify(io::Error),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::HandleEventNotEpollIn => write!(f, "event is not EPOLLIN"),
            Error::HandleEventUnknown(e) => write!(f, "unknown device event {e}"),
            Error::NoMemory => write!(f, "queue event before the guest memory table"),
            Error::Queue(e) => write!(f, "virtqueue error: {e}"),
            Error::Notify(e) => write!(f, "cannot signal used queue: {e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<Error> for io::Error {
    fn from(e: Error) -> Self {
        io::Error::other(e)
    }
}

/// The device's state for one front-end connection (one VM).
pub struct VhostUserSpeBackend {
    features: Features,
    config: Config,
    spus: Vec<Spu>,
    /// The PMBIRQ level last reported to the driver, per vCPU.
    irq_level: Vec<bool>,
    pending: VecDeque<Event>,
    event_idx: bool,
    mem: Option<GuestMem>,
    exit_consumer: EventConsumer,
    exit_notifier: EventNotifier,
}

impl VhostUserSpeBackend {
    pub fn new(num_vcpus: u32, features: Features) -> io::Result<Self> {
        let (exit_consumer, exit_notifier) = new_event_consumer_and_notifier(EventFlag::NONBLOCK)?;
        let id_aa64dfr0 = features.id_aa64dfr0_spe_fields();
        // ID_AA64DFR0_EL1.PMSS [51:48] advertises FEAT_PMUv3_SS.
        let snapshot = (id_aa64dfr0 >> 48) & 0xf != 0;
        let config = Config {
            num_vcpus,
            features: if snapshot { VIRTIO_SPE_F_SNAPSHOT } else { 0 },
            pmsidr: features.pmsidr(),
            pmbidr: features.pmbidr(),
            id_aa64dfr0,
            version: VIRTIO_SPE_VERSION,
            max_batch: MAX_BATCH,
        };
        let spus = (0..num_vcpus).map(|_| Spu::new(features.clone())).collect();
        Ok(VhostUserSpeBackend {
            features,
            config,
            spus,
            irq_level: vec![false; num_vcpus as usize],
            pending: VecDeque::new(),
            event_idx: false,
            mem: None,
            exit_consumer,
            exit_notifier,
        })
    }

    /// The config space the device serves.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The model features every vCPU's SPU was built with.
    pub fn features(&self) -> &Features {
        &self.features
    }

    /// Events not yet delivered for want of an event-queue buffer.
    pub fn pending_events(&self) -> usize {
        self.pending.len()
    }

    fn memory(&self) -> Result<MemGuard, Error> {
        self.mem.as_ref().map(|m| m.memory()).ok_or(Error::NoMemory)
    }

    fn queue_event(&mut self, ev: Event) {
        if self.pending.len() == MAX_PENDING_EVENTS {
            warn!("event queue overflow: dropping oldest undelivered event");
            self.pending.pop_front();
        }
        debug!("event {:?}", ev);
        self.pending.push_back(ev);
    }

    /// Executes one control request and queues the events it causes.
    fn execute(&mut self, raw: &[u8]) -> CtrlResponse {
        let req = match CtrlRequest::from_bytes(raw) {
            Ok(r) => r,
            Err(e) => {
                error!("malformed control request: {e}");
                return CtrlResponse::error(CtrlStatus::Malformed);
            }
        };
        let vcpu = req.vcpu as usize;
        let Some(spu) = self.spus.get_mut(vcpu) else {
            error!(
                "control request for vCPU {} of {}",
                req.vcpu, self.config.num_vcpus
            );
            return CtrlResponse::error(CtrlStatus::BadVcpu);
        };
        let Some(reg) = SysReg::from_encoding(req.reg) else {
            error!(
                "control request for unknown register encoding {:#x}",
                req.reg
            );
            return CtrlResponse::error(CtrlStatus::UnknownRegister);
        };
        let result = match req.op {
            CtrlOp::Read => spu.read_sysreg(reg),
            CtrlOp::Write => spu.write_sysreg(reg, req.value).map(|()| 0),
        };
        debug!(
            "vCPU {} {:?} {:?} {:#x} -> {:?}",
            req.vcpu, req.op, reg, req.value, result
        );
        let (status, value) = match result {
            Ok(v) => (CtrlStatus::Ok, v),
            Err(outcome) => (CtrlStatus::from(outcome), 0),
        };
        let pmbirq = spu.pmbirq();
        let pmbsr = spu.pmbsr();
        // The model captures synchronously, so a successful SS write has
        // completed its capture by now; PMSSCR_EL1 tells how it went.
        let snapshot = (status == CtrlStatus::Ok
            && req.op == CtrlOp::Write
            && reg == SysReg::PmsscrEl1
            && req.value & PMSSCR_SS != 0)
            .then(|| spu.read_sysreg(SysReg::PmsscrEl1).unwrap_or(0));

        if pmbirq != self.irq_level[vcpu] {
            self.irq_level[vcpu] = pmbirq;
            self.queue_event(Event {
                vcpu: req.vcpu,
                kind: EventKind::PmbirqChanged,
                pmbirq,
                pmbsr,
                data: 0,
            });
        }
        if let Some(pmsscr) = snapshot {
            self.queue_event(Event {
                vcpu: req.vcpu,
                kind: EventKind::SnapshotDone,
                pmbirq,
                pmbsr,
                data: pmsscr,
            });
        }
        CtrlResponse {
            status,
            pmbirq,
            value,
        }
    }

    /// Handles one control buffer and returns the used length.
    fn process_ctrl_chain(
        &mut self,
        mem: &GuestMemory,
        chain: DescriptorChain<MemGuard>,
    ) -> io::Result<u32> {
        let mut reader = chain
            .clone()
            .reader(mem)
            .map_err(|e| io::Error::other(format!("bad descriptor chain: {e}")))?;
        let mut writer = chain
            .writer(mem)
            .map_err(|e| io::Error::other(format!("bad descriptor chain: {e}")))?;
        let in_len = reader.available_bytes();
        let out_len = writer.available_bytes();
        let count = in_len / CtrlRequest::SIZE;

        if in_len == 0 || in_len % CtrlRequest::SIZE != 0 || count > MAX_BATCH as usize {
            error!(
                "malformed control buffer: {in_len} readable bytes (requests are {} bytes, at most {MAX_BATCH})",
                CtrlRequest::SIZE
            );
            if out_len < CtrlResponse::SIZE {
                return Ok(0);
            }
            writer.write_all(&CtrlResponse::error(CtrlStatus::Malformed).to_bytes())?;
            return Ok(CtrlResponse::SIZE as u32);
        }
        if out_len < count * CtrlResponse::SIZE {
            error!(
                "control buffer has {out_len} writable bytes for {count} responses of {} bytes; dropped",
                CtrlResponse::SIZE
            );
            return Ok(0);
        }

        let mut requests = vec![0u8; in_len];
        reader.read_exact(&mut requests)?;
        let mut responses = Vec::with_capacity(count * CtrlResponse::SIZE);
        for raw in requests.chunks_exact(CtrlRequest::SIZE) {
            responses.extend_from_slice(&self.execute(raw).to_bytes());
        }
        writer.write_all(&responses)?;
        Ok(responses.len() as u32)
    }

    /// Drains the control queue. Returns whether anything was used.
    fn process_ctrl_queue(&mut self, vring: &VringRwLock) -> Result<bool, Error> {
        let mem = self.memory()?;
        let chains: Vec<_> = vring
            .get_mut()
            .get_queue_mut()
            .iter(mem.clone())
            .map_err(Error::Queue)?
            .collect();
        let used_any = !chains.is_empty();
        for chain in chains {
            let head = chain.head_index();
            let len = self.process_ctrl_chain(&mem, chain).unwrap_or_else(|e| {
                error!("control request dropped: {e}");
                0
            });
            vring.add_used(head, len).map_err(Error::Queue)?;
        }
        Ok(used_any)
    }

    /// Completes posted event buffers with pending events. Events stay
    /// pending while no buffer is available.
    fn flush_events(&mut self, vring: &VringRwLock) -> Result<(), Error> {
        if self.pending.is_empty() || !vring.get_ref().get_queue().ready() {
            return Ok(());
        }
        let Ok(mem) = self.memory() else {
            return Ok(());
        };
        let mut used_any = false;
        while let Some(ev) = self.pending.front().copied() {
            let Some(chain) = vring
                .get_mut()
                .get_queue_mut()
                .pop_descriptor_chain(mem.clone())
            else {
                break;
            };
            let head = chain.head_index();
            let written = match chain.writer(&mem) {
                Ok(mut w) if w.available_bytes() >= Event::SIZE => {
                    w.write_all(&ev.to_bytes()).map(|()| Event::SIZE as u32)
                }
                Ok(w) => Err(io::Error::other(format!(
                    "event buffer has {} writable bytes, needs {}",
                    w.available_bytes(),
                    Event::SIZE
                ))),
                Err(e) => Err(io::Error::other(format!("bad descriptor chain: {e}"))),
            };
            let len = match written {
                Ok(len) => {
                    self.pending.pop_front();
                    len
                }
                // The event stays pending for the next (hopefully good) buffer.
                Err(e) => {
                    error!("event buffer dropped: {e}");
                    0
                }
            };
            vring.add_used(head, len).map_err(Error::Queue)?;
            used_any = true;
        }
        if used_any {
            self.signal(vring)?;
        }
        Ok(())
    }

    fn signal(&self, vring: &VringRwLock) -> Result<(), Error> {
        let needed = !self.event_idx || vring.needs_notification().map_err(Error::Queue)?;
        if needed {
            vring.signal_used_queue().map_err(Error::Notify)?;
        }
        Ok(())
    }

    fn handle_ctrl(&mut self, vring: &VringRwLock) -> Result<(), Error> {
        let mut used_any = false;
        if self.event_idx {
            // With EVENT_IDX the driver is only notified when we re-enable
            // notifications, so loop until no buffer slipped in meanwhile.
            loop {
                vring.disable_notification().map_err(Error::Queue)?;
                used_any |= self.process_ctrl_queue(vring)?;
                if !vring.enable_notification().map_err(Error::Queue)? {
                    break;
                }
            }
        } else {
            used_any = self.process_ctrl_queue(vring)?;
        }
        if used_any {
            self.signal(vring)?;
        }
        Ok(())
    }

    fn handle(&mut self, device_event: u16, vrings: &[VringRwLock]) -> Result<(), Error> {
        match device_event {
            CONTROL_QUEUE => {
                debug!("control queue kick");
                self.handle_ctrl(&vrings[CONTROL_QUEUE as usize])?;
                self.flush_events(&vrings[EVENT_QUEUE as usize])
            }
            EVENT_QUEUE => {
                debug!("event queue kick");
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
        self.spus.iter_mut().for_each(Spu::reset);
        self.irq_level.fill(false);
        self.pending.clear();
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
        info!(
            "guest memory table updated: {} region(s)",
            vm_memory::GuestMemoryBackend::num_regions(&*mem.memory())
        );
        self.mem = Some(mem);
        Ok(())
    }

    fn exit_event(&self, _thread_index: usize) -> Option<(EventConsumer, EventNotifier)> {
        Some((
            self.exit_consumer.try_clone().ok()?,
            self.exit_notifier.try_clone().ok()?,
        ))
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
        Ok(())
    }
}

/// Serves one front end after another on `listener`, forever.
///
/// Each connection gets a fresh backend and daemon, so every VM starts with
/// reset SPUs; dropping the daemon after a disconnect stops its worker
/// threads. A connection that fails (garbage on the socket, a bad message)
/// is logged and closed, and the next one is accepted. Returns only if
/// accepting fails.
pub fn serve(
    listener: &mut vhost::vhost_user::Listener,
    num_vcpus: u32,
    features: &Features,
) -> io::Result<()> {
    use std::sync::{Arc, RwLock};
    use vhost::vhost_user::Error as VhostUserError;
    use vhost_user_backend::{Error as DaemonError, VhostUserDaemon};

    loop {
        let backend = Arc::new(RwLock::new(VhostUserSpeBackend::new(
            num_vcpus,
            features.clone(),
        )?));
        let mut daemon = VhostUserDaemon::new(
            "vhost-device-spe".to_string(),
            backend,
            GuestMemoryAtomic::new(GuestMemoryMmap::new()),
        )
        .map_err(|e| io::Error::other(format!("cannot create daemon: {e}")))?;

        daemon
            .start(listener)
            .map_err(|e| io::Error::other(format!("cannot accept a connection: {e}")))?;
        info!("vhost-user connection accepted");

        match daemon.wait() {
            Ok(())
            | Err(DaemonError::HandleRequest(
                VhostUserError::Disconnected | VhostUserError::PartialMessage,
            )) => info!("vhost-user front end disconnected"),
            Err(e) => error!("vhost-user connection closed on error: {e}"),
        }
        drop(daemon);
        info!("device state reset; waiting for the next front end");
    }
}
