//! The QEMU control channel (the full-emulation path): the backend side of
//! [`spe_protocol::channel`].
//!
//! One thread owns every SPU of the connected VM and runs an
//! [`event_manager`] loop over the listening socket, the connection, the
//! ring's doorbell eventfd, its drain timer, the synthetic source's timer
//! and an exit eventfd. Nothing on the hot path takes a lock, and the
//! thread never waits on QEMU: it answers requests and signals the IRQ
//! eventfd, and a socket that stalls mid-message or stops reading replies
//! hits a timeout and is dropped.

pub mod client;

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, RawFd};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use event_manager::{EventManager, EventOps, EventSet, Events, MutEventSubscriber, SubscriberOps};
use log::{debug, error, info, warn};
use spe_protocol::channel::{
    self, feature,
    ring::{Layout, SamplingState},
    ChannelError, Header, Hello, HelloReply, MemTable, MsgType, Restore, RingSetup, Status,
    SysregAccess, SysregReply, ALL_VCPUS, MAX_PAYLOAD, MAX_REGIONS,
};
use spe_protocol::regs::SysReg;
use vm_memory::{
    FileOffset, GuestAddress, GuestMemoryMmap, GuestMemoryRegion, GuestRegionMmap, MmapRegion,
};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use vmm_sys_util::sock_ctrl_msg::ScmSocket;
use vmm_sys_util::timerfd::TimerFd;

use crate::control::Hub;
use crate::record::Recorder;
use crate::ring::Consumer;
use crate::spu::unpredictable::Choices;
use crate::spu::{Features, PmuCounters, Spu};
use crate::synthetic::Synthetic;

/// Guest memory as the channel maps it.
pub type Mem = GuestMemoryMmap<()>;

/// Most vCPUs a VM may announce in HELLO.
pub const MAX_VCPUS: u32 = 512;
/// How long a started message or a reply may take before the peer is
/// considered stuck and dropped.
pub const IO_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a new connection may take to send HELLO. The channel serves
/// one VM at a time, so a client that connects and says nothing would
/// otherwise keep every later VM waiting.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// What the channel serves.
#[derive(Clone, Debug)]
pub struct Config {
    pub features: Features,
    /// Synthetic sampled operations per second per vCPU (`--synthetic`).
    pub synthetic_rate: Option<u64>,
    /// Slots per vCPU ring announced in HELLO (a power of two).
    pub ring_slots: u32,
    /// The control socket's hub (`--control-socket`, `--scenario`).
    pub control: Option<Arc<Hub>>,
    /// The CONSTRAINED UNPREDICTABLE choices (`--choice`).
    pub choices: Choices,
    /// Keep a copy of every record written (`--record DIR`).
    pub record: Option<PathBuf>,
    /// Write records and change PMBIRQ only in replies to the vCPU's own
    /// requests (`--deterministic`): QEMU then hands over every batch of
    /// samples with a SYNC, and a run under `-icount` with `-seed`
    /// repeats byte for byte. No drain timer, no doorbell.
    pub deterministic: bool,
}

impl Config {
    pub fn new(features: Features) -> Config {
        Config {
            features,
            synthetic_rate: None,
            ring_slots: channel::ring::DEFAULT_SLOTS,
            control: None,
            choices: Choices::default(),
            record: None,
            deterministic: false,
        }
    }
}

/// A running channel server. Dropping it (or [`Handle::shutdown`]) stops
/// the thread, closes any connection and removes the socket.
#[derive(Debug)]
pub struct Handle {
    exit: EventFd,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl Handle {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the server thread is still running.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    pub fn shutdown(self) {}
}

impl Drop for Handle {
    fn drop(&mut self) {
        let _ = self.exit.write(1);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        match std::fs::remove_file(&self.path) {
            Ok(()) => info!("removed {}", self.path.display()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => error!("cannot remove {}: {e}", self.path.display()),
        }
    }
}

/// Binds `path` (replacing a stale socket) and serves VMs on a new thread,
/// one after another, until the [`Handle`] is dropped.
pub fn spawn(path: &Path, config: Config) -> io::Result<Handle> {
    if let Err(e) = config.features.validate() {
        return Err(io::Error::other(e));
    }
    let listener = crate::listen::bind_replacing(path)?;
    let exit = EventFd::new(EFD_NONBLOCK)?;
    let server = Server {
        cfg: config,
        listener,
        exit: exit.try_clone()?,
        stop: Arc::new(AtomicBool::new(false)),
        timer: TimerFd::new()?,
        hello_timer: TimerFd::new()?,
        conn: None,
        payload: vec![0; MAX_PAYLOAD as usize].into_boxed_slice(),
    };
    let stop = server.stop.clone();
    // This thread serves the control socket's commands while it runs.
    let control = server.cfg.control.clone();
    if let Some(hub) = &control {
        hub.attach();
    }
    let thread = std::thread::Builder::new()
        .name("qemu-channel".into())
        .spawn(move || {
            run(server, &stop);
            if let Some(hub) = control {
                hub.detach();
            }
        })?;
    Ok(Handle {
        exit,
        thread: Some(thread),
        path: path.to_path_buf(),
    })
}

fn run(server: Server, stop: &AtomicBool) {
    let mut em = match EventManager::<Server>::new() {
        Ok(em) => em,
        Err(e) => {
            error!("QEMU channel: cannot create the event loop: {e}");
            return;
        }
    };
    em.add_subscriber(server);
    while !stop.load(Ordering::Relaxed) {
        if let Err(e) = em.run() {
            error!("QEMU channel: event loop failed: {e}");
            break;
        }
    }
    info!("QEMU channel stopped");
}

// Event tokens.
const LISTENER: u32 = 0;
const CONN: u32 = 1;
const DOORBELL: u32 = 2;
const TIMER: u32 = 3;
const EXIT: u32 = 4;
const DRAIN: u32 = 5;
const CONTROL: u32 = 6;
const HELLO_DEADLINE: u32 = 7;

/// How often the rings are drained while any vCPU samples. QEMU rings the
/// doorbell only when a ring is half full: each doorbell costs the vCPU
/// thread a system call and, on a small host, a cross-CPU wake-up, while
/// this timer wakes only the backend. It also bounds how late a
/// buffer-full management event is seen at a low sampling rate.
const DRAIN_PERIOD: Duration = Duration::from_millis(1);

/// How long the thread polls for the next request after serving one,
/// before it sleeps in epoll. A guest's driver accesses the registers in
/// bursts (an interrupt handler reads two and writes three), and waking a
/// sleeping thread costs about as much again.
const REQUEST_SPIN: Duration = Duration::from_micros(50);

/// Requests served in one burst before the other events get their turn.
const MAX_BURST: usize = 32;

/// Whether `stream` has input (or has hung up) within `within`.
fn input_within(stream: &UnixStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut pfd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one pollfd that lives across the call, and no timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        if n != 0 {
            return n > 0;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::hint::spin_loop();
    }
}

/// Why a connection ends.
#[derive(Debug)]
enum ConnError {
    /// The peer closed it.
    Closed,
    Io(io::Error),
    /// Malformed or out-of-order input: the connection is dropped.
    Protocol(String),
}

impl From<io::Error> for ConnError {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::UnexpectedEof => ConnError::Closed,
            _ => ConnError::Io(e),
        }
    }
}

impl From<ChannelError> for ConnError {
    fn from(e: ChannelError) -> Self {
        ConnError::Protocol(e.to_string())
    }
}

fn protocol(msg: impl Into<String>) -> ConnError {
    ConnError::Protocol(msg.into())
}

struct Server {
    cfg: Config,
    listener: UnixListener,
    exit: EventFd,
    stop: Arc<AtomicBool>,
    timer: TimerFd,
    /// Runs from accept to HELLO (HELLO_TIMEOUT).
    hello_timer: TimerFd,
    conn: Option<Conn>,
    /// Reused payload buffer: no allocation per request.
    payload: Box<[u8]>,
}

struct Conn {
    stream: UnixStream,
    vm: Option<Vm>,
}

/// The state of one connected VM, created by HELLO.
pub(crate) struct Vm {
    pub(crate) spus: Vec<Spu>,
    pub(crate) mem: Mem,
    ring: Option<Ring>,
    synthetic: Option<Synthetic>,
    /// Malformed ring slots seen (logged, skipped).
    bad_slots: u64,
    control: Option<Arc<Hub>>,
    recorder: Option<Recorder>,
    /// [`Config::deterministic`].
    deterministic: bool,
}

impl Vm {
    /// What the SPUs wrote since the last publish reaches the record
    /// files, flushed: they are complete once this returns.
    fn finish_recording(&mut self) {
        if let Some(mut r) = self.recorder.take() {
            r.store(&mut self.spus);
        }
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.finish_recording();
    }
}

struct Ring {
    consumer: Consumer,
    doorbell: EventFd,
    irq: EventFd,
    /// Drains the ring every DRAIN_PERIOD while `draining`.
    drain: TimerFd,
    draining: bool,
    /// The PMBIRQ level last written to each IRQ entry.
    published: Vec<bool>,
    /// The sampling state last written to each IRQ entry.
    states: Vec<SamplingState>,
}

impl Vm {
    fn new(cfg: &Config, vcpus: u32) -> Vm {
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
            mem: Mem::new(),
            ring: None,
            synthetic: cfg.synthetic_rate.map(|r| Synthetic::new(vcpus, r)),
            bad_slots: 0,
            control: cfg.control.clone(),
            recorder,
            deterministic: cfg.deterministic,
        }
    }

    /// Applies everything published to `vcpu`'s ring (or every ring).
    fn drain(&mut self, vcpu: u32) -> Result<(), ConnError> {
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
            ring.consumer
                .drain(v, |op| match op {
                    Ok(op) => {
                        spu.sample(&op, mem);
                    }
                    Err(_) => bad += 1,
                })
                .map_err(|e| protocol(e.to_string()))?;
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
    fn publish(&mut self, vcpu: u32, requester: Option<u32>) {
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

/// Stops a connection's HELLO deadline (on HELLO or when it ends).
fn stop_hello_deadline(ops: &mut EventOps, timer: &mut TimerFd) {
    let _ = ops.remove(Events::with_data(&*timer, HELLO_DEADLINE, EventSet::IN));
    let _ = timer.clear();
}

impl Server {
    fn accept(&mut self, ops: &mut EventOps) {
        let stream = match self.listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => {
                error!("QEMU channel: accept failed: {e}");
                return;
            }
        };
        // Blocking with timeouts: a request is read whole once it starts,
        // and a peer that stalls is dropped instead of hanging the loop.
        let setup = stream
            .set_nonblocking(false)
            .and_then(|()| stream.set_read_timeout(Some(IO_TIMEOUT)))
            .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)));
        if let Err(e) = setup {
            error!("QEMU channel: cannot configure the connection: {e}");
            return;
        }
        if let Err(e) = ops.add(Events::with_data(&stream, CONN, EventSet::IN)) {
            error!("QEMU channel: cannot watch the connection: {e}");
            return;
        }
        // One VM at a time: the next one waits in the backlog, so this
        // one must say HELLO in time.
        let _ = ops.remove(Events::with_data(&self.listener, LISTENER, EventSet::IN));
        let armed = self
            .hello_timer
            .reset(HELLO_TIMEOUT, None)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                ops.add(Events::with_data(
                    &self.hello_timer,
                    HELLO_DEADLINE,
                    EventSet::IN,
                ))
                .map_err(|e| format!("{e:?}"))
            });
        if let Err(e) = armed {
            error!("QEMU channel: cannot arm the HELLO deadline: {e}");
        }
        info!("QEMU connected");
        self.conn = Some(Conn { stream, vm: None });
    }

    fn disconnect(&mut self, ops: &mut EventOps, why: ConnError) {
        match why {
            ConnError::Closed => info!("QEMU disconnected"),
            ConnError::Io(e) => error!("QEMU connection failed: {e}; dropping it"),
            ConnError::Protocol(m) => {
                error!("QEMU channel protocol error: {m}; dropping the connection")
            }
        }
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if let Some(vm) = &mut conn.vm {
            // Before the stats line, which tells a waiting harness the VM
            // is done with.
            vm.finish_recording();
            crate::stats::log_stats(&vm.spus);
        }
        // Unregister before the fds close: epoll keys on the fd number.
        let _ = ops.remove(Events::with_data(&conn.stream, CONN, EventSet::IN));
        stop_hello_deadline(ops, &mut self.hello_timer);
        if let Some(ring) = conn.vm.as_ref().and_then(|vm| vm.ring.as_ref()) {
            unwatch_ring(ops, ring);
        }
        if conn.vm.as_ref().is_some_and(|vm| vm.synthetic.is_some()) {
            let _ = ops.remove(Events::with_data(&self.timer, TIMER, EventSet::IN));
            let _ = self.timer.clear();
        }
        drop(conn);
        if let Err(e) = ops.add(Events::with_data(&self.listener, LISTENER, EventSet::IN)) {
            error!("QEMU channel: cannot watch the listener again: {e}");
        }
        info!("state reset; waiting for the next VM");
    }

    /// Reads one message: the header (with any fds), then its payload.
    fn read_message(
        stream: &mut UnixStream,
        payload: &mut [u8],
    ) -> Result<(Header, usize, Vec<File>), ConnError> {
        let mut hdr = [0u8; Header::SIZE];
        let mut raw_fds: [RawFd; MAX_REGIONS] = [-1; MAX_REGIONS];
        let mut iov = [libc::iovec {
            iov_base: hdr.as_mut_ptr().cast(),
            iov_len: hdr.len(),
        }];
        let (n, nfds) = loop {
            // SAFETY: the iovec points at `hdr`, which lives across the call.
            match unsafe { stream.recv_with_fds(&mut iov, &mut raw_fds) } {
                Ok(r) => break r,
                Err(e) if e.errno() == libc::EINTR => continue,
                Err(e) => return Err(ConnError::Io(io::Error::from_raw_os_error(e.errno()))),
            }
        };
        // SAFETY: recvmsg gave us these descriptors; we own them now.
        let fds: Vec<File> = raw_fds[..nfds]
            .iter()
            .map(|&fd| unsafe { File::from_raw_fd(fd) })
            .collect();
        if n == 0 {
            return Err(ConnError::Closed);
        }
        stream.read_exact(&mut hdr[n..])?;
        let h = Header::from_bytes(&hdr)?;
        let size = h.size as usize;
        stream.read_exact(&mut payload[..size])?;
        Ok((h, size, fds))
    }

    fn on_conn(&mut self, ops: &mut EventOps) -> Result<(), ConnError> {
        let conn = self.conn.as_mut().expect("CONN events need a connection");
        let (h, size, fds) = Self::read_message(&mut conn.stream, &mut self.payload)?;
        let payload = &self.payload[..size];
        if h.is_reply() {
            return Err(protocol(format!(
                "reply type {:#x} sent as a request",
                h.msg_type
            )));
        }
        let kind = h.kind()?;
        debug!(
            "request {kind:?} vCPU {:#x} size {size} fds {}",
            h.vcpu,
            fds.len()
        );
        let wants_fds = matches!(kind, MsgType::SetMemTable | MsgType::SetRing);
        if !wants_fds && !fds.is_empty() {
            return Err(protocol(format!("{kind:?} carried {} fds", fds.len())));
        }

        if kind == MsgType::Hello {
            if conn.vm.is_some() {
                return Err(protocol("second HELLO"));
            }
            let hello = Hello::from_bytes(payload)?;
            let (reply, vm) = hello_reply(&self.cfg, &hello);
            send(&conn.stream, &h, &reply.to_bytes())?;
            let Some(vm) = vm else {
                return Err(protocol(format!(
                    "HELLO refused (status {}): version {}, {} vCPUs",
                    reply.status, hello.version, hello.num_vcpus
                )));
            };
            info!(
                "HELLO: {} vCPU(s), ring of {} slots each ({} bytes)",
                hello.num_vcpus, reply.ring_slots, reply.ring_size
            );
            stop_hello_deadline(ops, &mut self.hello_timer);
            let mut vm = vm;
            if let Some(hub) = &self.cfg.control {
                hub.vm_started(&mut vm.spus);
            }
            if let Some(s) = &vm.synthetic {
                crate::synthetic::arm(&mut self.timer).map_err(ConnError::Io)?;
                ops.add(Events::with_data(&self.timer, TIMER, EventSet::IN))
                    .map_err(|e| ConnError::Io(io::Error::other(e)))?;
                info!("synthetic source: {} ops/s per vCPU", s.rate());
            }
            conn.vm = Some(vm);
            return Ok(());
        }
        let Some(vm) = conn.vm.as_mut() else {
            return Err(protocol(format!("{kind:?} before HELLO")));
        };
        let nvcpus = vm.spus.len() as u32;
        let vcpu_ok = h.vcpu < nvcpus || h.vcpu == ALL_VCPUS;

        if kind == MsgType::Sysreg {
            // SYSREG has no status to carry a bad vCPU: QEMU is broken.
            if h.vcpu >= nvcpus {
                return Err(protocol(format!(
                    "SYSREG for vCPU {:#x} of {nvcpus}",
                    h.vcpu
                )));
            }
            let req = SysregAccess::from_bytes(payload)?;
            let reply = sysreg(vm, h.vcpu, &req)?;
            vm.publish(h.vcpu, Some(h.vcpu));
            return send(&conn.stream, &h, &reply.to_bytes());
        }

        let status = if !vcpu_ok {
            warn!("{kind:?} for vCPU {:#x} of {nvcpus}", h.vcpu);
            Status::BAD_VCPU
        } else {
            match kind {
                MsgType::SetMemTable => {
                    let table = MemTable::from_bytes(payload)?;
                    vm.drain(ALL_VCPUS)?;
                    match map_memory(&table, fds) {
                        Ok(mem) => {
                            info!("guest memory: {} region(s)", table.regions.len());
                            vm.mem = mem;
                            vm.spus.iter_mut().for_each(Spu::invalidate_tlb);
                            Status::OK
                        }
                        Err(e) => {
                            error!("SET_MEM_TABLE refused: {e}");
                            Status::BAD_RESOURCE
                        }
                    }
                }
                MsgType::SetRing => {
                    let setup = RingSetup::from_bytes(payload)?;
                    vm.drain(ALL_VCPUS)?;
                    let layout = Layout {
                        vcpus: nvcpus,
                        slots: self.cfg.ring_slots,
                    };
                    match make_ring(&setup, layout, fds) {
                        Ok(ring) => {
                            if let Some(old) = vm.ring.take() {
                                unwatch_ring(ops, &old);
                            }
                            for ev in [
                                Events::with_data(&ring.doorbell, DOORBELL, EventSet::IN),
                                Events::with_data(&ring.drain, DRAIN, EventSet::IN),
                            ] {
                                ops.add(ev)
                                    .map_err(|e| ConnError::Io(io::Error::other(e)))?;
                            }
                            info!("sampled-operation ring: {} bytes", setup.size);
                            vm.ring = Some(ring);
                            Status::OK
                        }
                        Err(e) => {
                            error!("SET_RING refused: {e}");
                            Status::BAD_RESOURCE
                        }
                    }
                }
                MsgType::SetTranslation => {
                    let t = channel::translation_from_bytes(payload)?;
                    vm.drain(h.vcpu)?;
                    for_each(vm, h.vcpu, |s| s.set_translation(t));
                    Status::OK
                }
                MsgType::SetContext => {
                    let c = channel::context_from_bytes(payload)?;
                    vm.drain(h.vcpu)?;
                    for_each(vm, h.vcpu, |s| s.set_context(c));
                    Status::OK
                }
                MsgType::PmuCounters => {
                    let (event, cycle, instruction) = channel::pmu_counters_from_bytes(payload)?;
                    vm.drain(h.vcpu)?;
                    let c = PmuCounters {
                        event,
                        cycle,
                        instruction,
                    };
                    for_each(vm, h.vcpu, |s| s.set_pmu_counters(c));
                    Status::OK
                }
                MsgType::Sync => {
                    expect_empty(kind, payload)?;
                    vm.drain(h.vcpu)?;
                    Status::OK
                }
                MsgType::Reset => {
                    expect_empty(kind, payload)?;
                    vm.drain(h.vcpu)?;
                    for_each(vm, h.vcpu, Spu::reset);
                    Status::OK
                }
                MsgType::Restore => {
                    let req = Restore::from_bytes(payload)?;
                    restore(vm, h.vcpu, &req)?
                }
                MsgType::Hello | MsgType::Sysreg => unreachable!("handled above"),
            }
        };
        // ALL_VCPUS requests come from QEMU's main loop, not a vCPU that
        // reads its state after the reply: they signal.
        if vcpu_ok {
            vm.publish(h.vcpu, (h.vcpu != ALL_VCPUS).then_some(h.vcpu));
        }
        let pmbirq = status == Status::OK
            && h.vcpu != ALL_VCPUS
            && vm.spus.get(h.vcpu as usize).is_some_and(Spu::pmbirq);
        send(&conn.stream, &h, &Status { status, pmbirq }.to_bytes())
    }
}

fn hello_reply(cfg: &Config, hello: &Hello) -> (HelloReply, Option<Vm>) {
    let f = &cfg.features;
    let layout = Layout {
        vcpus: hello.num_vcpus.clamp(1, MAX_VCPUS),
        slots: cfg.ring_slots,
    };
    let mut features = 0;
    for (on, bit) in [
        (f.pmu_ss, feature::PMU_SS),
        (f.pmu_icntr, feature::PMU_ICNTR),
        (f.spe_exc, feature::SPE_EXC),
        (f.spe_nvm, feature::SPE_NVM),
        (true, feature::SAMPLING_STATE),
        (true, feature::RESTORE),
    ] {
        if on {
            features |= bit;
        }
    }
    let status = if hello.version != channel::VERSION {
        Status::BAD_VERSION
    } else if !(1..=MAX_VCPUS).contains(&hello.num_vcpus) {
        Status::BAD_VCPU
    } else {
        Status::OK
    };
    let reply = HelloReply {
        version: channel::VERSION,
        status,
        features,
        pmsver: f.pms_ver as u32,
        pmss: u32::from(f.pmu_ss),
        pmsidr: f.pmsidr(),
        pmbidr: f.pmbidr(),
        pmu_counters: u32::from(f.pmu_counters),
        ring_slots: layout.slots,
        ring_size: layout.size() as u64,
    };
    let vm = (status == Status::OK).then(|| Vm::new(cfg, hello.num_vcpus));
    (reply, vm)
}

impl Server {
    fn on_doorbell(&mut self) -> Result<(), ConnError> {
        let Some(vm) = self.conn.as_mut().and_then(|c| c.vm.as_mut()) else {
            return Ok(());
        };
        if let Some(ring) = &vm.ring {
            // Readable, so this does not block; the count is irrelevant.
            let _ = ring.doorbell.read();
        }
        if vm.deterministic {
            // Only QEMU's own requests drain (QEMU does not ring then).
            return Ok(());
        }
        vm.drain(ALL_VCPUS)?;
        vm.publish(ALL_VCPUS, None);
        Ok(())
    }

    fn on_drain(&mut self) -> Result<(), ConnError> {
        let Some(vm) = self.conn.as_mut().and_then(|c| c.vm.as_mut()) else {
            return Ok(());
        };
        if let Some(ring) = &mut vm.ring {
            // Non-blocking: a spurious wake-up reads nothing.
            let _ = ring.drain.wait();
        }
        vm.drain(ALL_VCPUS)?;
        vm.publish(ALL_VCPUS, None);
        Ok(())
    }

    /// Commands from the control socket, run between QEMU's requests.
    fn on_control(&mut self) {
        let Some(hub) = self.cfg.control.clone() else {
            return;
        };
        match self.conn.as_mut().and_then(|c| c.vm.as_mut()) {
            Some(vm) => {
                // The rings first, so a query sees what QEMU sampled;
                // deterministic, only what QEMU handed over.
                if !vm.deterministic {
                    if let Err(e) = vm.drain(ALL_VCPUS) {
                        warn!("draining before a control command: {e:?}");
                    }
                }
                hub.serve_calls(Some(&mut vm.spus));
                vm.publish(ALL_VCPUS, None);
            }
            None => hub.serve_calls(None),
        }
    }

    fn on_timer(&mut self) {
        let Some(vm) = self.conn.as_mut().and_then(|c| c.vm.as_mut()) else {
            let _ = self.timer.wait();
            return;
        };
        if let Some(s) = vm.synthetic.as_mut() {
            s.tick(&mut self.timer, &mut vm.spus, Some(&vm.mem));
        } else {
            let _ = self.timer.wait();
        }
        vm.publish(ALL_VCPUS, None);
    }
}

fn for_each(vm: &mut Vm, vcpu: u32, mut f: impl FnMut(&mut Spu)) {
    if vcpu == ALL_VCPUS {
        vm.spus.iter_mut().for_each(f);
    } else {
        f(&mut vm.spus[vcpu as usize]);
    }
}

fn expect_empty(kind: MsgType, payload: &[u8]) -> Result<(), ConnError> {
    if payload.is_empty() {
        Ok(())
    } else {
        Err(protocol(format!(
            "{kind:?} with a {}-byte payload",
            payload.len()
        )))
    }
}

fn sysreg(vm: &mut Vm, vcpu: u32, req: &SysregAccess) -> Result<SysregReply, ConnError> {
    // Operations sampled before the access happened before it.
    vm.drain(vcpu)?;
    let spu = &mut vm.spus[vcpu as usize];
    let Some(reg) = SysReg::from_encoding(req.encoding) else {
        warn!("SYSREG: unknown encoding {:#x}", req.encoding);
        return Ok(SysregReply {
            outcome: Status::UNKNOWN_REGISTER,
            pmbirq: spu.pmbirq(),
            reg: 0,
            value: 0,
        });
    };
    // set_context drops the buffer TLB, so only when it really changed.
    if *spu.context() != req.ctx {
        spu.set_context(req.ctx);
    }
    let result = if req.is_write {
        spu.write_sysreg(reg, req.value).map(|()| 0)
    } else {
        spu.read_sysreg(reg)
    };
    debug!(
        "vCPU {vcpu} {} {} {:#x} -> {result:?}",
        if req.is_write { "MSR" } else { "MRS" },
        reg.name(),
        req.value
    );
    let (outcome, value) = match result {
        Ok(v) => (0, v),
        Err(o) => (o as u8, 0),
    };
    // The context is unchanged since the access: the same route.
    let reg = match outcome {
        0 => spu.reached(reg).map_or(0, SysReg::encoding),
        _ => 0,
    };
    Ok(SysregReply {
        outcome,
        pmbirq: spu.pmbirq(),
        reg,
        value,
    })
}

/// RESTORE: the registers of one vCPU's SPU back from QEMU after a
/// restart, then the loss of what was in flight reported, then the
/// operations QEMU sampled meanwhile (the restored state decides them).
fn restore(vm: &mut Vm, vcpu: u32, req: &Restore) -> Result<u32, ConnError> {
    if vcpu == ALL_VCPUS {
        warn!("RESTORE for every vCPU: it restores one");
        return Ok(Status::BAD_VCPU);
    }
    let spu = &mut vm.spus[vcpu as usize];
    for &(enc, value) in &req.regs {
        let restored = SysReg::from_encoding(enc)
            .ok_or(enc)
            .and_then(|reg| spu.restore_register(reg, value).map_err(|_| enc));
        if let Err(enc) = restored {
            error!(
                "RESTORE of vCPU {vcpu}: register {enc:#x} cannot be restored; the SPU is reset"
            );
            spu.reset();
            return Ok(Status::BAD_STATE);
        }
    }
    let lost = spu.restore_done();
    info!(
        "vCPU {vcpu}: {} registers restored{}",
        req.regs.len(),
        if lost {
            "; the buffer was enabled, so its records in flight are reported lost (PMBSR.DL)"
        } else {
            ""
        }
    );
    vm.drain(vcpu)?;
    Ok(Status::OK)
}

fn send(stream: &UnixStream, req: &Header, payload: &[u8]) -> Result<(), ConnError> {
    let mut buf = [0u8; Header::SIZE + HelloReply::SIZE];
    let n = Header::SIZE + payload.len();
    buf[..Header::SIZE].copy_from_slice(&req.reply_to(payload.len()).to_bytes());
    buf[Header::SIZE..n].copy_from_slice(payload);
    // One write: header and payload leave together. MSG_NOSIGNAL: a peer
    // that vanished is an error here, not a SIGPIPE for a host process
    // whose main is not Rust's (which would not ignore it).
    let mut sent = 0;
    while sent < n {
        // SAFETY: sends initialised bytes of `buf` on a socket we own.
        let r = unsafe {
            libc::send(
                stream.as_raw_fd(),
                buf[sent..n].as_ptr().cast(),
                n - sent,
                libc::MSG_NOSIGNAL,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(ConnError::Io(e));
        }
        sent += r as usize;
    }
    Ok(())
}

/// Maps SET_MEM_TABLE's regions, one fd each, as vhost-user back ends do.
fn map_memory(table: &MemTable, fds: Vec<File>) -> Result<Mem, String> {
    if fds.len() != table.regions.len() {
        return Err(format!(
            "{} regions but {} fds",
            table.regions.len(),
            fds.len()
        ));
    }
    if table.regions.is_empty() {
        return Ok(Mem::new());
    }
    let mut regions = Vec::with_capacity(fds.len());
    for (r, file) in table.regions.iter().zip(fds) {
        // A shared mapping past the end of its file faults with SIGBUS, and
        // so does one the peer shrinks later.
        crate::shm::check_mappable(&file, r.fd_offset, r.size)
            .map_err(|e| format!("region gpa {:#x}: {e}", r.gpa))?;
        if usize::try_from(r.size).is_err() {
            return Err(format!("region gpa {:#x} is too large to map", r.gpa));
        }
        let mapping =
            MmapRegion::<()>::from_file(FileOffset::new(file, r.fd_offset), r.size as usize)
                .map_err(|e| format!("cannot map region gpa {:#x}: {e}", r.gpa))?;
        let region = GuestRegionMmap::new(mapping, GuestAddress(r.gpa))
            .ok_or_else(|| format!("region gpa {:#x} size {:#x} wraps", r.gpa, r.size))?;
        regions.push(region);
    }
    regions.sort_by_key(|r| r.start_addr());
    Mem::from_regions(regions).map_err(|e| e.to_string())
}

fn make_ring(setup: &RingSetup, layout: Layout, fds: Vec<File>) -> Result<Ring, String> {
    let [mem, doorbell, irq]: [File; 3] = fds
        .try_into()
        .map_err(|f: Vec<File>| format!("{} fds, expected 3", f.len()))?;
    if setup.size != layout.size() as u64 {
        return Err(format!(
            "ring of {} bytes, the layout is {}",
            setup.size,
            layout.size()
        ));
    }
    // The ring is written by QEMU and read here for the VM's life: one it
    // could shrink would fault this thread with SIGBUS on the next drain.
    crate::shm::check_mappable(&mem, 0, setup.size).map_err(|e| format!("the ring: {e}"))?;
    let consumer = Consumer::new(&mem, layout).map_err(|e| e.to_string())?;
    // SAFETY: each File owns its descriptor; ownership moves to the EventFd.
    let (doorbell, irq) = unsafe {
        (
            EventFd::from_raw_fd(doorbell.into_raw_fd()),
            EventFd::from_raw_fd(irq.into_raw_fd()),
        )
    };
    let drain = TimerFd::new()
        .map_err(|e| e.to_string())
        .and_then(|t| crate::synthetic::nonblocking(t).map_err(|e| e.to_string()))
        .map_err(|e| format!("cannot create the drain timer: {e}"))?;
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

/// Stops watching `ring`'s descriptors (before they close: epoll keys on
/// the fd number).
fn unwatch_ring(ops: &mut EventOps, ring: &Ring) {
    let _ = ops.remove(Events::with_data(&ring.doorbell, DOORBELL, EventSet::IN));
    let _ = ops.remove(Events::with_data(&ring.drain, DRAIN, EventSet::IN));
}

impl MutEventSubscriber for Server {
    fn init(&mut self, ops: &mut EventOps) {
        for ev in [
            Events::with_data(&self.listener, LISTENER, EventSet::IN),
            Events::with_data(&self.exit, EXIT, EventSet::IN),
        ] {
            if let Err(e) = ops.add(ev) {
                error!("QEMU channel: cannot watch fd {}: {e}", ev.fd());
                self.stop.store(true, Ordering::Relaxed);
            }
        }
        if let Some(hub) = &self.cfg.control {
            if let Err(e) = ops.add(Events::with_data(hub.wake_fd(), CONTROL, EventSet::IN)) {
                error!("QEMU channel: cannot watch the control socket's eventfd: {e}");
            }
        }
    }

    fn process(&mut self, events: Events, ops: &mut EventOps) {
        let set = events.event_set();
        match events.data() {
            LISTENER => self.accept(ops),
            CONN => {
                let mut res = if set.contains(EventSet::IN) {
                    self.on_conn(ops)
                } else {
                    Err(ConnError::Closed)
                };
                for _ in 1..MAX_BURST {
                    let follows = self
                        .conn
                        .as_ref()
                        .is_some_and(|c| input_within(&c.stream, REQUEST_SPIN));
                    if res.is_err() || !follows {
                        break;
                    }
                    res = self.on_conn(ops);
                }
                if let Err(e) = res {
                    self.disconnect(ops, e);
                }
            }
            DOORBELL => {
                if let Err(e) = self.on_doorbell() {
                    self.disconnect(ops, e);
                }
            }
            TIMER => self.on_timer(),
            CONTROL => self.on_control(),
            HELLO_DEADLINE => {
                let _ = self.hello_timer.wait();
                if self.conn.as_ref().is_some_and(|c| c.vm.is_none()) {
                    self.disconnect(
                        ops,
                        ConnError::Protocol(format!(
                            "no HELLO within {} s of connecting",
                            HELLO_TIMEOUT.as_secs()
                        )),
                    );
                }
            }
            DRAIN => {
                if let Err(e) = self.on_drain() {
                    self.disconnect(ops, e);
                }
            }
            EXIT => {
                let _ = self.exit.read();
                if self.conn.is_some() {
                    self.disconnect(ops, ConnError::Closed);
                }
                self.stop.store(true, Ordering::Relaxed);
            }
            d => warn!("QEMU channel: event for unknown token {d}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn input_within_sees_waiting_input_hangup_and_nothing() {
        let (a, mut b) = UnixStream::pair().unwrap();
        // Nothing sent: false once the time is up, not before.
        let t = Instant::now();
        assert!(!input_within(&a, Duration::from_millis(2)));
        assert!(t.elapsed() >= Duration::from_millis(2));
        // A request waiting: true at once, and the poll does not consume it.
        b.write_all(&[7]).unwrap();
        assert!(input_within(&a, Duration::ZERO));
        let mut byte = [0u8];
        (&a).read_exact(&mut byte).unwrap();
        assert_eq!(byte, [7]);
        // The peer gone: true, so that the caller reads and sees it closed.
        drop(b);
        assert!(input_within(&a, Duration::ZERO));
    }
}
