//! The host-side control socket ([`spe_protocol::control`]): query the
//! SPUs, arm faults, request PMU snapshots, and watch what happens.
//!
//! The SPUs belong to a front end's thread, which never takes a lock on
//! its hot path. The [`Hub`] is what the socket's threads and the front
//! end share: a client's command is queued and the front end is woken
//! through an eventfd; it runs the command on its SPUs between two
//! requests of its own and answers; what its SPUs did (faults delivered,
//! PMBIRQ changes) goes back to every client as an event line. With no
//! front end attached, commands run on the hub's own state (faults armed
//! for the next VM).
//!
//! Nothing here knows QEMU: a front end hands over its `&mut [Spu]`.
//!
//! The same hub serves the guest control port ([`Origin::Guest`]): the
//! commands reach only the guest's own VM (no faults kept for a later
//! one, no choices for later VMs), and its events wait in the
//! connection's queue for `query-events`.

mod server;

pub mod client;
pub use server::{spawn, Handle};

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use log::{info, warn};
use serde_json::Value;
use spe_protocol::control::{
    ArmFault, ArmedFault, ArmedFaultInfo, BufferFullData, CancelArgs, Choice, ChoiceList, Command,
    Empty, ErrorBody, ErrorClass, Event, EventLine, FaultDeliveredData, FaultKind, FaultList,
    Greeting, Hex, NoArgs, PmbirqData, Profiling, ProfilingByEl, Reply, Request, Scenario,
    ServerLine, SetChoiceArgs, SnapshotList, SnapshotOutcome, SnapshotResult, SpuInfo, SpuList,
    SpuRegisters, Timestamp, Trigger, VcpuArgs, VcpuSel, VersionInfo,
};
use spe_protocol::regs::{pmbsr_bsc, pmbsr_ec, El, PMBSR};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::lock;
use crate::spu::inject::{check_fault, Delivered};
use crate::spu::unpredictable::Choices;
use crate::spu::{CaptureOutcome, Features, Spu};

/// How long a client waits for the front end to take its command.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(2);
/// Event lines queued for one slow client before it misses some.
const CLIENT_QUEUE: usize = 1024;

/// Who sent a command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A client of the host's control socket.
    Host,
    /// The guest, through its control port (`--guest-control-socket`).
    Guest,
}

/// A command waiting for the front end.
struct Call {
    req: Request,
    origin: Origin,
    reply: Sender<ServerLine>,
}

/// A connection's queue of event lines, and how many it had no room for.
struct Subscriber {
    tx: SyncSender<String>,
    missed: Arc<AtomicU64>,
}

/// What [`Hub::subscribe`] hands a connection.
pub(crate) struct Subscription {
    pub tx: SyncSender<String>,
    pub rx: Receiver<String>,
    pub missed: Arc<AtomicU64>,
}

/// What the control socket and the front end share. See the module
/// documentation.
pub struct Hub {
    features: Features,
    inbox: Mutex<VecDeque<Call>>,
    wake: EventFd,
    /// Front ends that serve calls (0 or 1).
    attached: AtomicUsize,
    clients: Mutex<Vec<Subscriber>>,
    has_clients: AtomicBool,
    next_id: AtomicU32,
    /// Faults armed while no VM was connected, for the next one.
    pending: Mutex<Vec<(u32, ArmFault)>>,
    scenario: Scenario,
    /// The choices for the next VM (`--choice`, then `set-choice`).
    choices: Mutex<Choices>,
    /// `after-ms` faults waiting for their time, with the VM's SPUs.
    timed: Mutex<Vec<(Instant, u32, ArmFault)>>,
}

impl std::fmt::Debug for Hub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hub")
            .field("attached", &self.attached)
            .field("has_clients", &self.has_clients)
            .field("scenario", &self.scenario)
            .finish_non_exhaustive()
    }
}

fn err(class: ErrorClass, desc: impl Into<String>) -> ErrorBody {
    ErrorBody::new(class, desc)
}

/// The vCPUs `sel` names among `n`.
fn vcpus(sel: VcpuSel, n: usize) -> Result<std::ops::Range<usize>, ErrorBody> {
    match sel {
        VcpuSel::All => Ok(0..n),
        VcpuSel::One(v) if (v as usize) < n => Ok(v as usize..v as usize + 1),
        VcpuSel::One(v) => Err(err(
            ErrorClass::InvalidParameter,
            format!("vCPU {v} does not exist (the VM has {n})"),
        )),
    }
}

fn now() -> Timestamp {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp {
        seconds: d.as_secs(),
        microseconds: d.subsec_micros(),
    }
}

impl Hub {
    pub fn new(features: Features, scenario: Scenario) -> std::io::Result<Hub> {
        Ok(Hub {
            features,
            inbox: Mutex::new(VecDeque::new()),
            wake: EventFd::new(EFD_NONBLOCK)?,
            attached: AtomicUsize::new(0),
            clients: Mutex::new(Vec::new()),
            has_clients: AtomicBool::new(false),
            next_id: AtomicU32::new(1),
            pending: Mutex::new(Vec::new()),
            scenario,
            choices: Mutex::new(Choices::default()),
            timed: Mutex::new(Vec::new()),
        })
    }

    /// The CONSTRAINED UNPREDICTABLE choices VMs start with.
    pub fn with_choices(self, choices: Choices) -> Hub {
        *lock(&self.choices) = choices;
        self
    }

    /// The eventfd a front end watches: readable when commands wait.
    pub fn wake_fd(&self) -> &EventFd {
        &self.wake
    }

    /// A front end will serve calls from now on ([`Hub::serve_calls`]).
    pub fn attach(&self) {
        self.attached.fetch_add(1, Ordering::SeqCst);
    }

    pub fn detach(&self) {
        self.attached.fetch_sub(1, Ordering::SeqCst);
    }

    /// Runs `req` (from a client thread): through the front end when one
    /// is attached, else on the hub's own state.
    pub(crate) fn call(&self, req: Request, origin: Origin) -> ServerLine {
        let id = req.id.clone();
        if self.attached.load(Ordering::SeqCst) == 0 {
            return self.run_command(&req, None, origin);
        }
        let (tx, rx) = mpsc::channel();
        lock(&self.inbox).push_back(Call {
            req,
            origin,
            reply: tx,
        });
        let _ = self.wake.write(1);
        match rx.recv_timeout(CALL_TIMEOUT) {
            Ok(l) => l,
            Err(_) => line(
                Err(err(
                    ErrorClass::GenericError,
                    "the device model did not take the command in time",
                )),
                id,
            ),
        }
    }

    /// The front end's side: runs every queued command on `spus` (`None`:
    /// no VM connected). Call when [`Hub::wake_fd`] is readable; then
    /// publish PMBIRQ levels, since commands may change them.
    pub fn serve_calls(&self, mut spus: Option<&mut [Spu]>) {
        let _ = self.wake.read();
        self.deliver_due(spus.as_deref_mut());
        loop {
            let call = lock(&self.inbox).pop_front();
            let Some(call) = call else {
                break;
            };
            let _ = call
                .reply
                .send(self.run_command(&call.req, spus.as_deref_mut(), call.origin));
        }
    }

    /// Arms an `after-ms` fault: the front end is woken at its time
    /// (through the same eventfd as commands) and delivers it as `now`.
    fn arm_timed(&self, id: u32, a: ArmFault, ms: u64) {
        let at = Instant::now() + Duration::from_millis(ms);
        lock(&self.timed).push((at, id, a));
        match self.wake.try_clone() {
            Ok(wake) => {
                let _ = std::thread::Builder::new()
                    .name("fault-timer".into())
                    .spawn(move || {
                        std::thread::sleep(Duration::from_millis(ms));
                        let _ = wake.write(1);
                    });
            }
            Err(e) => warn!("fault {id}: cannot arm its timer: {e}"),
        }
        info!(
            "fault {id} armed: {}",
            serde_json::to_string(&a).unwrap_or_default()
        );
    }

    /// Delivers the `after-ms` faults whose time has come.
    fn deliver_due(&self, spus: Option<&mut [Spu]>) {
        let now = Instant::now();
        let due: Vec<(Instant, u32, ArmFault)> = {
            let mut timed = lock(&self.timed);
            let (due, later) = timed.drain(..).partition(|(at, _, _)| *at <= now);
            *timed = later;
            due
        };
        let Some(spus) = spus else {
            for (_, id, _) in due {
                warn!("fault {id} not delivered: no VM is connected at its time");
            }
            return;
        };
        for (_, id, a) in due {
            for v in vcpus(a.vcpu, spus.len()).unwrap_or(0..0) {
                let spu = &mut spus[v];
                if spu.spe_profiling_stopped() {
                    // No PE raises a second event while S is 1.
                    let d = Delivered {
                        id,
                        kind: a.kind,
                        delivered: false,
                        why: Some("a management event is pending (PMBSR.S = 1)"),
                        pmbsr: spu.pmbsr(),
                        pmbptr: spu.regs().pmbptr,
                    };
                    self.fault_delivered(v as u32, &d);
                } else {
                    spu.arm_fault(id, a.kind, Trigger::Now);
                }
            }
        }
    }

    /// Runs one command on `spus` (or the hub's own state) and returns
    /// the reply line: what the front end does for each queued call, and
    /// what the fuzz target drives directly.
    pub fn run_command(
        &self,
        req: &Request,
        spus: Option<&mut [Spu]>,
        origin: Origin,
    ) -> ServerLine {
        let ret = self.execute(req, spus, origin).and_then(|r| {
            serde_json::to_value(r).map_err(|e| err(ErrorClass::GenericError, e.to_string()))
        });
        line(ret, req.id.clone())
    }

    /// A VM connected with these SPUs: seed them, and arm the scenario's
    /// faults and those armed while no VM was connected.
    pub fn vm_started(&self, spus: &mut [Spu]) {
        let choices = *lock(&self.choices);
        spus.iter_mut().for_each(|s| s.set_choices(choices));
        if let Some(seed) = self.scenario.seed {
            for (v, spu) in spus.iter_mut().enumerate() {
                spu.seed(seed, v as u32);
            }
        }
        let mut arms: Vec<(u32, ArmFault)> = self
            .scenario
            .faults
            .iter()
            .map(|a| (self.next_id.fetch_add(1, Ordering::Relaxed), *a))
            .collect();
        arms.append(&mut lock(&self.pending));
        for (id, a) in arms {
            if let Trigger::AfterMs { ms } = a.trigger {
                self.arm_timed(id, a, ms);
                continue;
            }
            match vcpus(a.vcpu, spus.len()) {
                Ok(range) => {
                    for v in range {
                        spus[v].arm_fault(id, a.kind, a.trigger);
                    }
                    info!(
                        "fault {id} armed: {}",
                        serde_json::to_string(&a).unwrap_or_default()
                    );
                }
                Err(e) => warn!("fault {id} not armed: {}", e.desc),
            }
        }
    }

    /// Whether any client listens for events.
    pub fn has_clients(&self) -> bool {
        self.has_clients.load(Ordering::Relaxed)
    }

    /// Reports (logs, and sends as events) the faults `vcpu`'s SPU
    /// delivered since the last call.
    pub fn report_delivered(&self, vcpu: u32, spu: &mut Spu) {
        if spu.has_delivered() {
            for d in spu.take_delivered() {
                self.fault_delivered(vcpu, &d);
            }
        }
    }

    /// `vcpu`'s PMBIRQ changed to `level`: an event, and one for a buffer
    /// full when that is why it rose.
    pub fn report_irq(&self, vcpu: u32, level: bool, spu: &Spu) {
        if !self.has_clients() {
            return;
        }
        let pmbsr = spu.pmbsr();
        self.emit(Event::Pmbirq(PmbirqData {
            vcpu,
            level,
            pmbsr: Hex(pmbsr),
        }));
        let full = PMBSR::S.is_set(pmbsr)
            && PMBSR::EC.get(pmbsr) == pmbsr_ec::BUFFER
            && PMBSR::BSC.get(pmbsr) == pmbsr_bsc::BUFFER_FILLED;
        if level && full {
            self.emit(Event::BufferFull(BufferFullData {
                vcpu,
                pmbsr: Hex(pmbsr),
                pmbptr: Hex(spu.regs().pmbptr),
            }));
        }
    }

    fn fault_delivered(&self, vcpu: u32, d: &Delivered) {
        let kind = serde_json::to_string(&d.kind).unwrap_or_default();
        match d.why {
            None => info!(
                "fault {} delivered on vCPU {vcpu}: {kind} PMBSR={:#x} PMBPTR={:#x}",
                d.id, d.pmbsr, d.pmbptr
            ),
            Some(why) => warn!("fault {} not delivered on vCPU {vcpu}: {kind}: {why}", d.id),
        }
        self.emit(Event::FaultDelivered(FaultDeliveredData {
            id: d.id,
            vcpu,
            fault: d.kind,
            delivered: d.delivered,
            why: d.why.map(Into::into),
            pmbsr: Hex(d.pmbsr),
            pmbptr: Hex(d.pmbptr),
        }));
    }

    /// Sends an event line to every client; a client whose queue is full
    /// misses it, one that left is forgotten.
    fn emit(&self, event: Event) {
        if !self.has_clients() {
            return;
        }
        let Ok(l) = EventLine::new(&event, now()) else {
            return;
        };
        let Ok(text) = serde_json::to_string(&ServerLine::Event(l)) else {
            return;
        };
        let mut clients = lock(&self.clients);
        clients.retain(|c| match c.tx.try_send(text.clone()) {
            Err(TrySendError::Disconnected(_)) => false,
            Err(TrySendError::Full(_)) => {
                c.missed.fetch_add(1, Ordering::Relaxed);
                true
            }
            Ok(()) => true,
        });
        self.has_clients
            .store(!clients.is_empty(), Ordering::Relaxed);
    }

    /// A new client: its queue of event lines.
    pub(crate) fn subscribe(&self) -> Subscription {
        let (tx, rx) = mpsc::sync_channel(CLIENT_QUEUE);
        let missed = Arc::new(AtomicU64::new(0));
        let mut clients = lock(&self.clients);
        clients.push(Subscriber {
            tx: tx.clone(),
            missed: missed.clone(),
        });
        self.has_clients.store(true, Ordering::Relaxed);
        Subscription { tx, rx, missed }
    }

    pub(crate) fn greeting() -> String {
        serde_json::to_string(&ServerLine::Greeting(Greeting::current())).unwrap_or_default()
    }

    /// Types `req` and runs it: one function a command, each returning its
    /// typed reply, serialised by [`Hub::run_command`].
    fn execute(
        &self,
        req: &Request,
        spus: Option<&mut [Spu]>,
        origin: Origin,
    ) -> Result<Reply, ErrorBody> {
        let command = Command::from_request(req)?;
        // The guest's own VM only: nothing kept for a later one.
        if origin == Origin::Guest
            && spus.is_none()
            && matches!(command, Command::ArmFault(_) | Command::SetChoice(_))
        {
            return Err(err(ErrorClass::NoVm, "the guest's VM is not connected"));
        }
        match command {
            Command::QueryVersion(NoArgs {}) => Ok(Reply::Version(VersionInfo::current())),
            Command::QuerySpu(a) => query_spu(a, spus).map(Reply::Spus),
            Command::ArmFault(a) => self.arm_fault(a, spus).map(Reply::Armed),
            Command::QueryFaults(NoArgs {}) => Ok(Reply::Faults(self.query_faults(spus))),
            Command::CancelFault(a) => self.cancel_fault(a, spus).map(Reply::Done),
            Command::Snapshot(a) => self.snapshot(a, spus).map(Reply::Snapshots),
            Command::ResetStats(a) => reset_stats(a, spus).map(Reply::Done),
            Command::QueryChoices(NoArgs {}) => Ok(Reply::Choices(self.query_choices(spus))),
            Command::SetChoice(a) => self.set_choice(a, spus, origin).map(Reply::Done),
            // The guest port's connection answers it from its own queue.
            Command::QueryEvents(NoArgs {}) => Err(err(
                ErrorClass::Unsupported,
                "events are pushed on this socket; query-events is the guest control port's",
            )),
        }
    }

    fn arm_fault(&self, arm: ArmFault, spus: Option<&mut [Spu]>) -> Result<ArmedFault, ErrorBody> {
        check_fault(&self.features, &arm.kind).map_err(|e| err(ErrorClass::Unsupported, e.0))?;
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let Some(spus) = spus else {
            if arm.trigger == Trigger::Now {
                return Err(err(
                    ErrorClass::NoVm,
                    "no VM is connected to deliver it now",
                ));
            }
            lock(&self.pending).push((id, arm));
            return Ok(ArmedFault { id, pending: true });
        };
        let range = vcpus(arm.vcpu, spus.len())?;
        if let Trigger::AfterMs { ms } = arm.trigger {
            self.arm_timed(id, arm, ms);
            return Ok(ArmedFault { id, pending: false });
        }
        if arm.trigger == Trigger::Now {
            if let Some(v) = range.clone().find(|&v| spus[v].spe_profiling_stopped()) {
                return Err(err(
                    ErrorClass::InvalidParameter,
                    format!("vCPU {v} has a management event pending (PMBSR.S = 1); a PE raises no other until software clears it"),
                ));
            }
        }
        for v in range {
            spus[v].arm_fault(id, arm.kind, arm.trigger);
        }
        info!(
            "fault {id} armed: {}",
            serde_json::to_string(&arm).unwrap_or_default()
        );
        Ok(ArmedFault { id, pending: false })
    }

    fn query_faults(&self, spus: Option<&mut [Spu]>) -> FaultList {
        let mut out: Vec<ArmedFaultInfo> = lock(&self.pending)
            .iter()
            .map(|(id, a)| ArmedFaultInfo {
                id: *id,
                vcpu: None,
                kind: a.kind,
                trigger: a.trigger,
            })
            .collect();
        out.extend(lock(&self.timed).iter().map(|(_, id, a)| ArmedFaultInfo {
            id: *id,
            vcpu: match a.vcpu {
                VcpuSel::One(v) => Some(v),
                VcpuSel::All => None,
            },
            kind: a.kind,
            trigger: a.trigger,
        }));
        for (v, spu) in spus.into_iter().flatten().enumerate() {
            out.extend(spu.armed_faults().iter().map(|f| ArmedFaultInfo {
                id: f.id,
                vcpu: Some(v as u32),
                kind: f.kind,
                trigger: f.trigger,
            }));
        }
        FaultList { faults: out }
    }

    fn cancel_fault(&self, c: CancelArgs, spus: Option<&mut [Spu]>) -> Result<Empty, ErrorBody> {
        let mut found = false;
        lock(&self.pending).retain(|(id, _)| {
            found |= *id == c.id;
            *id != c.id
        });
        lock(&self.timed).retain(|(_, id, _)| {
            found |= *id == c.id;
            *id != c.id
        });
        for spu in spus.into_iter().flatten() {
            found |= spu.cancel_fault(c.id);
        }
        if !found {
            return Err(err(
                ErrorClass::InvalidParameter,
                format!("no armed fault has id {}", c.id),
            ));
        }
        Ok(Empty {})
    }

    fn snapshot(&self, a: VcpuArgs, spus: Option<&mut [Spu]>) -> Result<SnapshotList, ErrorBody> {
        let spus = need_vm(spus)?;
        if !self.features.pmu_ss {
            return Err(err(
                ErrorClass::Unsupported,
                "this CPU profile has no FEAT_PMUv3_SS (use --cpu max)",
            ));
        }
        let vcpus = vcpus(a.vcpu, spus.len())?
            .map(|v| {
                let spu = &mut spus[v];
                let counters = spu.pmu_counters();
                let outcome = match spu.external_snapshot_request(counters) {
                    CaptureOutcome::Disabled => SnapshotOutcome::Disabled,
                    CaptureOutcome::Prohibited => SnapshotOutcome::Prohibited,
                    CaptureOutcome::Allowed { .. } => SnapshotOutcome::Captured,
                };
                SnapshotResult {
                    vcpu: v as u32,
                    outcome,
                    pmsscr: Hex(spu.regs().pmsscr),
                }
            })
            .collect();
        Ok(SnapshotList { vcpus })
    }

    fn query_choices(&self, spus: Option<&mut [Spu]>) -> ChoiceList {
        let c = match spus {
            Some(spus) if !spus.is_empty() => spus[0].choices(),
            _ => *lock(&self.choices),
        };
        let choices = c
            .list()
            .iter()
            .map(|i| Choice {
                name: i.name.into(),
                value: i.value.into(),
                permitted: i.permitted.iter().map(|&p| p.into()).collect(),
                rule: i.rule.into(),
            })
            .collect();
        ChoiceList { choices }
    }

    fn set_choice(
        &self,
        a: SetChoiceArgs,
        spus: Option<&mut [Spu]>,
        origin: Origin,
    ) -> Result<Empty, ErrorBody> {
        let mut next = *lock(&self.choices);
        next.set(&a.name, &a.value)
            .map_err(|e| err(ErrorClass::InvalidParameter, e.to_string()))?;
        if origin == Origin::Host {
            *lock(&self.choices) = next;
        }
        for spu in spus.into_iter().flatten() {
            let mut c = spu.choices();
            c.set(&a.name, &a.value)
                .map_err(|e| err(ErrorClass::InvalidParameter, e.to_string()))?;
            spu.set_choices(c);
        }
        info!("choice {}={}", a.name, a.value);
        Ok(Empty {})
    }
}

fn query_spu(a: VcpuArgs, spus: Option<&mut [Spu]>) -> Result<SpuList, ErrorBody> {
    let spus = need_vm(spus)?;
    let vcpus = vcpus(a.vcpu, spus.len())?
        .map(|v| spu_info(v, &spus[v]))
        .collect();
    Ok(SpuList { vcpus })
}

fn reset_stats(a: VcpuArgs, spus: Option<&mut [Spu]>) -> Result<Empty, ErrorBody> {
    let spus = need_vm(spus)?;
    for v in vcpus(a.vcpu, spus.len())? {
        spus[v].reset_stats();
    }
    Ok(Empty {})
}

/// Whether the PE of `features` could produce `kind` (a scenario file's
/// check at start-up).
pub fn check(features: &Features, kind: &FaultKind) -> Result<(), String> {
    check_fault(features, kind).map_err(|e| format!("{kind:?}: {}", e.0))
}

fn need_vm(spus: Option<&mut [Spu]>) -> Result<&mut [Spu], ErrorBody> {
    spus.ok_or_else(|| err(ErrorClass::NoVm, "no VM is connected"))
}

fn line(r: Result<Value, ErrorBody>, id: Option<Value>) -> ServerLine {
    match r {
        Ok(ret) => ServerLine::Return { ret, id },
        Err(error) => ServerLine::Error { error, id },
    }
}

/// `query-spu`'s answer for one vCPU.
fn spu_info(v: usize, spu: &Spu) -> SpuInfo {
    let r = spu.regs();
    let why = |el| Profiling::from_why(spu.why_profiling_disabled(el));
    SpuInfo {
        vcpu: v as u32,
        el: spu.context().el as u8,
        profiling: ProfilingByEl {
            el0: why(El::El0),
            el1: why(El::El1),
            el2: why(El::El2),
        },
        pmbirq: spu.pmbirq(),
        owning_regime: spu.owning_translation_regime().to_string(),
        registers: SpuRegisters {
            pmscr_el1: Hex(r.pmscr_el1),
            pmscr_el2: Hex(r.pmscr_el2),
            pmsicr_el1: Hex(r.pmsicr),
            pmsirr_el1: Hex(r.pmsirr),
            pmsfcr_el1: Hex(r.pmsfcr),
            pmsevfr_el1: Hex(r.pmsevfr),
            pmsnevfr_el1: Hex(r.pmsnevfr),
            pmslatfr_el1: Hex(r.pmslatfr),
            pmsdsfr_el1: Hex(r.pmsdsfr),
            pmsidr_el1: Hex(spu.features().pmsidr()),
            pmbidr_el1: Hex(spu.features().pmbidr()),
            pmblimitr_el1: Hex(r.pmblimitr),
            pmbptr_el1: Hex(r.pmbptr),
            pmbsr_el1: Hex(r.pmbsr_el1),
            pmbsr_el2: Hex(r.pmbsr_el2),
            pmbsr_el3: Hex(r.pmbsr_el3),
            pmsscr_el1: Hex(r.pmsscr),
            pmecr_el1: Hex(r.pmecr),
        },
        stats: spu.stats(),
        armed_faults: spu.armed_faults().iter().map(|f| f.id).collect(),
    }
}

#[cfg(test)]
mod tests;
