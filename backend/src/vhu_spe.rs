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

use std::collections::VecDeque;
use std::fmt;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;

use log::{debug, error, info, warn};
use spe_protocol::regs::{SysReg, TranslationRegs};
use spe_protocol::virtio::{
    Config, CtrlOp, CtrlRequest, CtrlResponse, CtrlStatus, Event, EventKind, CONTROL_QUEUE,
    EVENT_QUEUE, MAX_BATCH, NUM_QUEUES, REG_SCTLR_EL1, REG_TCR_EL1, REG_TTBR0_EL1, REG_TTBR1_EL1,
    VIRTIO_SPE_F_SNAPSHOT, VIRTIO_SPE_VERSION,
};
use vhost::vhost_user::message::{VhostUserProtocolFeatures, VhostUserVirtioFeatures};
use vhost_user_backend::{VhostUserBackendMut, VringRwLock, VringT};
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_ring::VIRTIO_RING_F_EVENT_IDX;
use virtio_queue::{DescriptorChain, QueueOwnedT, QueueT};
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
/// PMSSCR_EL1.SS: writing 1 requests a PMU snapshot capture.
const PMSSCR_SS: u64 = 1;
/// Epoll data of the synthetic source's timer. The worker reserves
/// `0..=NUM_QUEUES` for the queues and its exit/vring-enable event.
pub const SYNTHETIC_EVENT: u16 = NUM_QUEUES as u16 + 1;
/// Device event of the control socket's commands (`--control-socket`).
pub const CONTROL_EVENT: u16 = NUM_QUEUES as u16 + 2;

/// The field of `x` that holds translation register `enc` (a `REG_*`
/// encoding of [`spe_protocol::virtio`]), or `None` if `enc` is not one.
fn translation_reg(x: &mut TranslationRegs, enc: u32) -> Option<&mut u64> {
    Some(match enc {
        REG_SCTLR_EL1 => &mut x.sctlr_el1,
        REG_TCR_EL1 => &mut x.tcr_el1,
        REG_TTBR0_EL1 => &mut x.ttbr0_el1,
        REG_TTBR1_EL1 => &mut x.ttbr1_el1,
        _ => return None,
    })
}

/// A register the control queue reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CtrlReg {
    Spe(SysReg),
    /// One of the EL1 translation registers, by encoding.
    Translation(u32),
}

impl fmt::Display for CtrlReg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CtrlReg::Spe(r) => f.write_str(&r.name()),
            CtrlReg::Translation(REG_SCTLR_EL1) => f.write_str("SCTLR_EL1"),
            CtrlReg::Translation(REG_TCR_EL1) => f.write_str("TCR_EL1"),
            CtrlReg::Translation(REG_TTBR0_EL1) => f.write_str("TTBR0_EL1"),
            CtrlReg::Translation(REG_TTBR1_EL1) => f.write_str("TTBR1_EL1"),
            CtrlReg::Translation(enc) => write!(f, "register {enc:#x}"),
        }
    }
}

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
            features,
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

    /// The model features every vCPU's SPU was built with.
    pub fn model_features(&self) -> &Features {
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

    /// Queues a PMBIRQ event if vCPU `vcpu`'s level is not the one last
    /// reported.
    fn note_pmbirq(&mut self, vcpu: usize) {
        if let Some(hub) = &self.control {
            hub.report_delivered(vcpu as u32, &mut self.spus[vcpu]);
        }
        let spu = &self.spus[vcpu];
        let (pmbirq, pmbsr) = (spu.pmbirq(), spu.pmbsr());
        if pmbirq != self.irq_level[vcpu] {
            self.irq_level[vcpu] = pmbirq;
            if let Some(hub) = &self.control {
                hub.report_irq(vcpu as u32, pmbirq, spu);
            }
            self.queue_event(Event {
                vcpu: vcpu as u32,
                kind: EventKind::PmbirqChanged,
                pmbirq,
                pmbsr,
                data: 0,
            });
        }
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
        let mut xlat = *spu.translation();
        let reg = if translation_reg(&mut xlat, req.reg).is_some() {
            CtrlReg::Translation(req.reg)
        } else if let Some(r) = SysReg::from_encoding(req.reg) {
            CtrlReg::Spe(r)
        } else {
            error!(
                "control request for unknown register encoding {:#x}",
                req.reg
            );
            return CtrlResponse::error(CtrlStatus::UnknownRegister);
        };
        let result = match (reg, req.op) {
            (CtrlReg::Spe(r), CtrlOp::Read) => spu.read_sysreg(r),
            (CtrlReg::Spe(r), CtrlOp::Write) => spu.write_sysreg(r, req.value).map(|()| 0),
            (CtrlReg::Translation(enc), op) => {
                // Checked above: `enc` is a translation register.
                let slot = translation_reg(&mut xlat, enc).expect("translation register");
                if op == CtrlOp::Write {
                    *slot = req.value;
                    // Also drops the cached buffer translation, as documented.
                    spu.set_translation(xlat);
                    Ok(0)
                } else {
                    Ok(*slot)
                }
            }
        };
        debug!(
            "vCPU {} {:?} {} {:#x} -> {:?}",
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
            && reg == CtrlReg::Spe(SysReg::PmsscrEl1)
            && req.value & PMSSCR_SS != 0)
            .then(|| spu.read_sysreg(SysReg::PmsscrEl1).unwrap_or(0));

        self.note_pmbirq(vcpu);
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
            crate::shm::check_mappable(fo.file(), fo.start(), region.len()).map_err(|e| {
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
        Ok(())
    }
}

/// How long a vhost-user front end may take to ask for the features (QEMU
/// does at once) before it is dropped.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Drops the connection behind `h` unless `negotiated` is set within
/// [`HANDSHAKE_TIMEOUT`]; ends early when the returned sender is dropped.
fn handshake_watchdog(
    h: vhost_user_backend::ShutdownHandle,
    negotiated: Arc<std::sync::atomic::AtomicBool>,
) -> io::Result<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)> {
    use std::sync::mpsc::{channel, RecvTimeoutError};
    let (done, wait) = channel::<()>();
    let thread = std::thread::Builder::new()
        .name("vhu-handshake".into())
        .spawn(move || {
            let expired = wait.recv_timeout(HANDSHAKE_TIMEOUT) == Err(RecvTimeoutError::Timeout);
            if expired && !negotiated.load(std::sync::atomic::Ordering::Relaxed) {
                warn!(
                    "vhost-user front end asked for no features within {} s; dropping it",
                    HANDSHAKE_TIMEOUT.as_secs()
                );
                h.shutdown();
            }
        })?;
    Ok((done, thread))
}

/// Serves one front end after another on `listener`, forever.
///
/// Each connection gets a fresh backend and daemon, so every VM starts with
/// reset SPUs; dropping the daemon after a disconnect stops its worker
/// threads. A connection that fails (garbage on the socket, a bad message)
/// is logged and closed, and the next one is accepted; one that asks for
/// no features within [`HANDSHAKE_TIMEOUT`] is dropped, so a silent client
/// cannot keep later VMs out. Returns only if accepting fails. `synthetic` is the `--synthetic` rate, if any.
pub fn serve(
    listener: &mut vhost::vhost_user::Listener,
    num_vcpus: u32,
    features: &Features,
    synthetic: Option<u64>,
    choices: crate::spu::unpredictable::Choices,
    control: Option<Arc<Hub>>,
    record: Option<&std::path::Path>,
) -> io::Result<()> {
    use std::sync::RwLock;
    use vhost::vhost_user::Error as VhostUserError;
    use vhost_user_backend::{Error as DaemonError, VhostUserDaemon};

    loop {
        let mut backend = VhostUserSpeBackend::new(num_vcpus, features.clone())?
            .with_choices(choices)
            .with_record(record.map(|d| d.to_path_buf()));
        if let Some(rate) = synthetic {
            backend = backend.with_synthetic(rate)?;
        }
        if let Some(hub) = &control {
            backend = backend.with_control(hub.clone());
        }
        let timer = backend.synthetic_timer();
        let backend = Arc::new(RwLock::new(backend));
        let mut daemon = VhostUserDaemon::new(
            "vhost-device-spe".to_string(),
            backend.clone(),
            GuestMemoryAtomic::new(GuestMemoryMmap::new()),
        )
        .map_err(|e| io::Error::other(format!("cannot create daemon: {e}")))?;

        daemon
            .start(listener)
            .map_err(|e| io::Error::other(format!("cannot accept a connection: {e}")))?;
        info!("vhost-user connection accepted");
        let negotiated = backend
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .negotiated
            .clone();
        let watchdog = daemon
            .shutdown_handle()
            .map(|h| handshake_watchdog(h, negotiated))
            .transpose()?;
        backend
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .front_end_connected();
        // Registered only now so an idle daemon does not wake every tick.
        // One worker thread serves both queues (the default
        // queues_per_thread), so its handler is the one to tick.
        if let (Some(fd), Some(rate)) = (timer, synthetic) {
            let registered = daemon
                .get_epoll_handlers()
                .first()
                .map(|h| h.register_listener(fd, EventSet::IN, u64::from(SYNTHETIC_EVENT)));
            match registered {
                Some(Ok(())) => info!("synthetic source: {rate} ops/s per vCPU"),
                Some(Err(e)) => error!("synthetic source not started: {e}"),
                None => error!("synthetic source not started: no vhost-user worker"),
            }
        }

        // The control socket's commands reach this VM's SPUs while it is
        // connected; in between they run on the hub (faults wait for the
        // next VM).
        let control_on = control.as_ref().filter(|hub| {
            let registered = daemon.get_epoll_handlers().first().map(|h| {
                h.register_listener(
                    hub.wake_fd().as_raw_fd(),
                    EventSet::IN,
                    u64::from(CONTROL_EVENT),
                )
            });
            match registered {
                Some(Ok(())) => true,
                Some(Err(e)) => {
                    error!("control socket not served: {e}");
                    false
                }
                None => false,
            }
        });
        if let Some(hub) = control_on {
            hub.attach();
        }
        let ended = daemon.wait();
        if let Some(hub) = control_on {
            hub.detach();
        }
        if let Some((done, thread)) = watchdog {
            drop(done);
            let _ = thread.join();
        }
        match ended {
            Ok(())
            | Err(DaemonError::HandleRequest(
                VhostUserError::Disconnected | VhostUserError::PartialMessage,
            )) => info!("vhost-user front end disconnected"),
            Err(e) => error!("vhost-user connection closed on error: {e}"),
        }
        drop(daemon);
        {
            let backend = backend.read().unwrap_or_else(|e| e.into_inner());
            crate::stats::log_stats(&backend.spus);
            backend.close_leaked_exit_fds();
        }
        info!("device state reset; waiting for the next front end");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::desc_chain::desc_chain;
    use spe_protocol::virtio::{Config, VIRTIO_SPE_CONFIG_SIZE};
    use virtio_queue::mock::MockSplitQueue;
    use vm_memory::{Bytes, GuestAddress};

    const QSIZE: u16 = 16;
    const CTRL_RING: GuestAddress = GuestAddress(0);
    const EVENT_RING: GuestAddress = GuestAddress(0x1000);
    const DATA: u64 = 0x1_0000;

    struct Rig {
        /// Shares its mapping with the backend's copy. Leaked so the mock
        /// queues can borrow it for the whole test.
        gm: &'static GuestMemory,
        queues: [MockSplitQueue<'static, GuestMemory>; 2],
        backend: VhostUserSpeBackend,
        vrings: Vec<VringRwLock>,
    }

    impl Rig {
        fn new(vcpus: u32) -> Self {
            // Shared and sealed, as a front end must hand it over.
            let ram = crate::shm::sealed_memfd("rig-ram", 0x10_0000).unwrap();
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
            let queues =
                [CTRL_RING, EVENT_RING].map(|base| MockSplitQueue::create(gm, base, QSIZE));
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

        fn queue(&self, base: GuestAddress) -> &MockSplitQueue<'static, GuestMemory> {
            &self.queues[usize::from(base == EVENT_RING)]
        }

        fn mem_ref(&self) -> &GuestMemory {
            self.gm
        }

        /// Posts a chain of (addr, len, writable) descriptors at table index `first`.
        fn post(&self, base: GuestAddress, first: u16, descs: &[(u64, u32, bool)]) {
            self.queue(base)
                .add_desc_chains(&desc_chain(first, descs), first)
                .unwrap();
        }

        /// Posts a control buffer with these requests and room for
        /// `resp_slots` responses; returns the response address.
        fn post_ctrl(&self, first: u16, reqs: &[u8], resp_slots: usize) -> u64 {
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

        fn kick(&mut self, queue: u16) {
            // Call the inner handler so a queue error fails the test
            // (handle_event only logs it).
            self.backend.handle(queue, &self.vrings).unwrap();
        }

        /// (id, len) of used element `i` of the ring at `base`.
        fn used(&self, base: GuestAddress, i: usize) -> Option<(u32, u32)> {
            let q = self.queue(base);
            let idx = q.used().idx().load();
            (i < idx as usize).then(|| {
                let e = q.used().ring().ref_at(i).unwrap().load();
                (e.id(), e.len())
            })
        }

        fn responses(&self, addr: u64, n: usize) -> Vec<CtrlResponse> {
            let mut b = vec![0u8; n * CtrlResponse::SIZE];
            self.mem_ref()
                .read_slice(&mut b, GuestAddress(addr))
                .unwrap();
            b.chunks(CtrlResponse::SIZE)
                .map(|c| CtrlResponse::from_bytes(c).unwrap())
                .collect()
        }
    }

    fn req(vcpu: u32, op: CtrlOp, reg: SysReg, value: u64) -> Vec<u8> {
        raw_req(vcpu, op, reg.encoding(), value)
    }

    fn raw_req(vcpu: u32, op: CtrlOp, reg: u32, value: u64) -> Vec<u8> {
        CtrlRequest {
            vcpu,
            reg,
            op,
            value,
        }
        .to_bytes()
        .to_vec()
    }

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
}
