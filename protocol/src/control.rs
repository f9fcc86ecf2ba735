//! The backend's host-side control socket: line-delimited JSON in the shape
//! QMP users know. See `protocol/README.md` ("The control socket").
//!
//! ```text
//! S: {"SPE":{"version":{"major":1,"minor":0},"product":"vhost-device-spe"}}
//! C: {"execute":"arm-fault","arguments":{"vcpu":0,"kind":"buffer-full","trigger":"at-byte","offset":4096},"id":1}
//! S: {"return":{"id":1,"pending":false},"id":1}
//! S: {"event":"PMBIRQ","data":{"vcpu":0,"level":true,"pmbsr":"0x20001"},"timestamp":{"seconds":1795000000,"microseconds":12}}
//! C: {"execute":"cancel-fault","arguments":{"id":"1"},"id":2}
//! S: {"error":{"class":"InvalidParameter","desc":"invalid type: string \"1\", expected u32"},"id":2}
//! ```
//!
//! A request line is a [`Request`]; [`Command::from_request`] types it
//! (or says which [`ErrorClass`] it earns), and [`Command::to_request`]
//! is the way back. Each command's `return` value is a [`Reply`], which
//! only the command can tell apart ([`Command::parse_reply`]). Events are
//! [`Event`]s, carried by [`EventLine`]s, whose names and data a client of
//! an older version may not know, so a [`ServerLine`] keeps them as JSON.
//!
//! The server, the `ctl` client and the integration harness share these
//! types; the fault model takes [`FaultKind`] and [`Trigger`] as they are.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{json, Map, Value};

/// Major version: bumped when a message changes incompatibly.
pub const VERSION_MAJOR: u32 = 1;
/// Minor version: bumped when commands or fields are added.
pub const VERSION_MINOR: u32 = 0;
/// Longest line the server reads; a longer one is an error and closes the
/// connection (a peer that never sends a newline cannot grow our memory).
pub const MAX_LINE: usize = 64 * 1024;

/// The first line the server sends.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Greeting {
    #[serde(rename = "SPE")]
    pub spe: GreetingBody,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GreetingBody {
    pub version: Version,
    pub product: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Version {
    pub major: u32,
    pub minor: u32,
}

impl Version {
    pub const CURRENT: Version = Version {
        major: VERSION_MAJOR,
        minor: VERSION_MINOR,
    };
}

impl Greeting {
    pub fn current() -> Greeting {
        Greeting {
            spe: GreetingBody {
                version: Version::CURRENT,
                product: "vhost-device-spe".into(),
            },
        }
    }
}

/// A request line as it is read, before its command is known: what
/// [`Command::from_request`] types.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    pub execute: String,
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub arguments: Value,
    /// Echoed in the reply, as QMP does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
}

/// The error classes a reply can carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ErrorClass {
    /// Malformed JSON or a request of the wrong shape.
    GenericError,
    /// No command of that name.
    CommandNotFound,
    /// Arguments missing, unknown or out of range (a vCPU that does not
    /// exist, a fault id nobody armed).
    InvalidParameter,
    /// The CPU profile cannot produce that, architecturally.
    Unsupported,
    /// The command needs a connected VM and there is none.
    NoVm,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub class: ErrorClass,
    pub desc: String,
}

impl ErrorBody {
    pub fn new(class: ErrorClass, desc: impl Into<String>) -> ErrorBody {
        ErrorBody {
            class,
            desc: desc.into(),
        }
    }
}

impl std::fmt::Display for ErrorBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}: {}", self.class, self.desc)
    }
}

impl std::error::Error for ErrorBody {}

/// A reply or an event line from the server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ServerLine {
    /// A command's [`Reply`], as JSON: which one depends on the command.
    Return {
        #[serde(rename = "return")]
        ret: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<Value>,
    },
    Error {
        error: ErrorBody,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<Value>,
    },
    Event(EventLine),
    Greeting(Greeting),
}

/// An event's time since the Unix epoch, as QMP gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timestamp {
    pub seconds: u64,
    pub microseconds: u32,
}

/// The commands and their arguments: `{"execute": NAME, "arguments": …}`.
///
/// Commands without arguments take `{}` (or none, or `null`: see
/// [`Command::from_request`], which a server uses rather than
/// deserialising this directly).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "execute", content = "arguments", rename_all = "kebab-case")]
pub enum Command {
    /// → [`Reply::Version`].
    QueryVersion(NoArgs),
    /// → [`Reply::Spus`]; needs a VM.
    QuerySpu(VcpuArgs),
    /// → [`Reply::Armed`].
    ArmFault(ArmFault),
    /// → [`Reply::Faults`].
    QueryFaults(NoArgs),
    /// → [`Reply::Done`].
    CancelFault(CancelArgs),
    /// → [`Reply::Snapshots`]; needs a VM and FEAT_PMUv3_SS.
    Snapshot(VcpuArgs),
    /// → [`Reply::Done`]; needs a VM.
    ResetStats(VcpuArgs),
    /// → [`Reply::Choices`].
    QueryChoices(NoArgs),
    /// → [`Reply::Done`]: for the VM's SPUs and the next VMs.
    SetChoice(SetChoiceArgs),
}

impl Command {
    /// Every command's name, as `query-version` lists them.
    pub const NAMES: &'static [&'static str] = &[
        "query-version",
        "query-spu",
        "arm-fault",
        "query-faults",
        "cancel-fault",
        "snapshot",
        "reset-stats",
        "query-choices",
        "set-choice",
    ];

    /// Types a request: `CommandNotFound` for a name no command has,
    /// `InvalidParameter` (with serde's account of what is wrong) for
    /// arguments the command does not take. Arguments are an object;
    /// missing or `null` ones are `{}`.
    pub fn from_request(req: &Request) -> Result<Command, ErrorBody> {
        if !Command::NAMES.contains(&req.execute.as_str()) {
            return Err(ErrorBody::new(
                ErrorClass::CommandNotFound,
                format!("no command {:?}; query-version lists them", req.execute),
            ));
        }
        // Serde would also read a struct from an array of its fields.
        let arguments = match &req.arguments {
            Value::Null => Value::Object(Map::new()),
            a @ Value::Object(_) => a.clone(),
            _ => {
                return Err(ErrorBody::new(
                    ErrorClass::InvalidParameter,
                    "arguments: expected an object",
                ))
            }
        };
        serde_json::from_value(json!({"execute": req.execute, "arguments": arguments}))
            .map_err(|e| ErrorBody::new(ErrorClass::InvalidParameter, e.to_string()))
    }

    /// The request line that carries this command.
    pub fn to_request(&self, id: Option<Value>) -> serde_json::Result<Request> {
        let r: Request = serde_json::from_value(serde_json::to_value(self)?)?;
        Ok(Request { id, ..r })
    }

    /// Reads this command's `return` value.
    pub fn parse_reply(&self, ret: Value) -> serde_json::Result<Reply> {
        use serde_json::from_value;
        Ok(match self {
            Command::QueryVersion(_) => Reply::Version(from_value(ret)?),
            Command::QuerySpu(_) => Reply::Spus(from_value(ret)?),
            Command::ArmFault(_) => Reply::Armed(from_value(ret)?),
            Command::QueryFaults(_) => Reply::Faults(from_value(ret)?),
            Command::Snapshot(_) => Reply::Snapshots(from_value(ret)?),
            Command::QueryChoices(_) => Reply::Choices(from_value(ret)?),
            Command::CancelFault(_) | Command::ResetStats(_) | Command::SetChoice(_) => {
                Reply::Done(from_value(ret)?)
            }
        })
    }
}

/// The arguments of a command that takes none: `{}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// Arguments that name vCPUs only.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct VcpuArgs {
    #[serde(default)]
    pub vcpu: VcpuSel,
}

/// `set-choice`'s arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SetChoiceArgs {
    pub name: String,
    pub value: String,
}

/// `cancel-fault`'s arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelArgs {
    pub id: u32,
}

/// A command's `return` value. Replies may gain fields in a minor
/// version, so none refuses names it does not know.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Reply {
    Version(VersionInfo),
    Spus(SpuList),
    Armed(ArmedFault),
    Faults(FaultList),
    Snapshots(SnapshotList),
    Choices(ChoiceList),
    /// `{}`: `cancel-fault`, `reset-stats`, `set-choice`.
    Done(Empty),
}

/// `{}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Empty {}

/// `query-version`'s reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct VersionInfo {
    pub version: Version,
    pub commands: Vec<String>,
}

impl VersionInfo {
    pub fn current() -> VersionInfo {
        VersionInfo {
            version: Version::CURRENT,
            commands: Command::NAMES.iter().map(|&n| n.into()).collect(),
        }
    }
}

/// `query-spu`'s reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpuList {
    pub vcpus: Vec<SpuInfo>,
}

/// One vCPU's SPU, as `query-spu` shows it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpuInfo {
    pub vcpu: u32,
    /// The EL the PE is at.
    pub el: u8,
    pub profiling: ProfilingByEl,
    pub pmbirq: bool,
    /// The owning translation regime of the Profiling Buffer.
    pub owning_regime: String,
    pub registers: SpuRegisters,
    pub stats: Stats,
    /// The ids of the faults armed on it.
    pub armed_faults: Vec<u32>,
}

/// Whether profiling is enabled at each EL.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProfilingByEl {
    pub el0: Profiling,
    pub el1: Profiling,
    pub el2: Profiling,
}

/// `{"enabled": true}`, or `{"enabled": false, "why": …}` with why, in
/// `StatisticalProfilingEnabled()`'s terms.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Profiling {
    pub enabled: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl Profiling {
    /// Enabled unless there is a reason it is not.
    pub fn from_why(why: Option<String>) -> Profiling {
        Profiling {
            enabled: why.is_none(),
            why,
        }
    }
}

/// The SPU's registers, by their architectural names.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub struct SpuRegisters {
    pub pmscr_el1: Hex,
    pub pmscr_el2: Hex,
    pub pmsicr_el1: Hex,
    pub pmsirr_el1: Hex,
    pub pmsfcr_el1: Hex,
    pub pmsevfr_el1: Hex,
    pub pmsnevfr_el1: Hex,
    pub pmslatfr_el1: Hex,
    pub pmsdsfr_el1: Hex,
    pub pmsidr_el1: Hex,
    pub pmbidr_el1: Hex,
    pub pmblimitr_el1: Hex,
    pub pmbptr_el1: Hex,
    pub pmbsr_el1: Hex,
    pub pmbsr_el2: Hex,
    pub pmbsr_el3: Hex,
    pub pmsscr_el1: Hex,
    pub pmecr_el1: Hex,
}

/// Counts of what an SPU did since it was made or `reset-stats`: the
/// model's own, for logs, tests and the daemon's stats too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stats {
    /// Operations selected by the interval counter.
    pub samples: u64,
    /// Operations a front end counted itself and handed back.
    pub counted: u64,
    /// Records rejected by the filters.
    pub filtered: u64,
    /// Records written to the Profiling Buffer.
    pub records: u64,
    /// Record bytes written.
    pub bytes: u64,
    /// Records dropped in Discard mode.
    pub discarded: u64,
    /// Buffer management events raised.
    pub management_events: u64,
}

/// `arm-fault`'s reply.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmedFault {
    pub id: u32,
    /// No VM is connected: armed when the next one connects.
    pub pending: bool,
}

/// `query-faults`' reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultList {
    pub faults: Vec<ArmedFaultInfo>,
}

/// `snapshot`'s reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotList {
    pub vcpus: Vec<SnapshotResult>,
}

/// One vCPU's answer to the external snapshot request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotResult {
    pub vcpu: u32,
    pub outcome: SnapshotOutcome,
    /// PMSSCR_EL1 after the request.
    pub pmsscr: Hex,
}

/// Table D13-10's outcome of an external snapshot request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SnapshotOutcome {
    /// Capture events are disabled (PMECR_EL1).
    Disabled,
    /// {NC, SS} = {1, 0}: the counters were not copied.
    Prohibited,
    /// The counters were copied.
    Captured,
}

/// `query-choices`' reply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChoiceList {
    pub choices: Vec<Choice>,
}

/// A CONSTRAINED UNPREDICTABLE choice: its value, the values the Arm ARM
/// permits, and the rule that permits them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    pub name: String,
    pub value: String,
    pub permitted: Vec<String>,
    pub rule: String,
}

/// What the server reports unasked: `{"event": NAME, "data": …}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "SCREAMING_SNAKE_CASE")]
pub enum Event {
    /// An armed fault reached its trigger.
    FaultDelivered(FaultDeliveredData),
    /// PMBIRQ changed level.
    Pmbirq(PmbirqData),
    /// A buffer-full management event raised PMBIRQ.
    BufferFull(BufferFullData),
}

/// `FAULT_DELIVERED`'s data.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FaultDeliveredData {
    pub id: u32,
    pub vcpu: u32,
    pub fault: FaultKind,
    /// `false` when the PE's state at the trigger gave the fault no
    /// architectural way to happen, with `why`.
    pub delivered: bool,
    #[serde(default)]
    pub why: Option<String>,
    pub pmbsr: Hex,
    pub pmbptr: Hex,
}

/// `PMBIRQ`'s data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmbirqData {
    pub vcpu: u32,
    pub level: bool,
    pub pmbsr: Hex,
}

/// `BUFFER_FULL`'s data.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferFullData {
    pub vcpu: u32,
    pub pmbsr: Hex,
    pub pmbptr: Hex,
}

/// An event line, with its name and data as JSON.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventLine {
    pub event: String,
    pub data: Value,
    pub timestamp: Timestamp,
}

impl EventLine {
    pub fn new(event: &Event, timestamp: Timestamp) -> serde_json::Result<EventLine> {
        let mut v = serde_json::to_value(event)?;
        if let Value::Object(m) = &mut v {
            m.insert("timestamp".into(), serde_json::to_value(timestamp)?);
        }
        serde_json::from_value(v)
    }

    /// The event, if this version knows it.
    pub fn parse(&self) -> serde_json::Result<Event> {
        serde_json::from_value(json!({"event": self.event, "data": self.data}))
    }
}

/// A register or an address: a `"0x…"` string on the wire, since a u64
/// does not fit a double; a number is read too.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hex(pub u64);

impl Serialize for Hex {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(&format_args!("{:#x}", self.0))
    }
}

impl<'de> Deserialize<'de> for Hex {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        u64_or_hex::deserialize(d).map(Hex)
    }
}

/// Which vCPUs a command applies to: a number or `"all"`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum VcpuSel {
    #[default]
    All,
    One(u32),
}

impl Serialize for VcpuSel {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            VcpuSel::All => s.serialize_str("all"),
            VcpuSel::One(n) => s.serialize_u32(*n),
        }
    }
}

impl<'de> Deserialize<'de> for VcpuSel {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        match Value::deserialize(d)? {
            Value::String(s) if s == "all" => Ok(VcpuSel::All),
            Value::Number(n) => n
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(VcpuSel::One)
                .ok_or_else(|| serde::de::Error::custom("vcpu: not a vCPU number")),
            _ => Err(serde::de::Error::custom(
                "vcpu: expected a number or \"all\"",
            )),
        }
    }
}

impl std::str::FromStr for VcpuSel {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s == "all" {
            return Ok(VcpuSel::All);
        }
        s.parse()
            .map(VcpuSel::One)
            .map_err(|_| format!("{s:?} is not a vCPU number or \"all\""))
    }
}

/// A u64 given as a JSON number or as a string (`"0x…"` or decimal), since
/// virtual addresses do not fit a double and people write them in hex.
pub mod u64_or_hex {
    use serde::{Deserialize, Deserializer, Serializer};
    use serde_json::Value;

    pub fn serialize<S: Serializer>(v: &u64, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_u64(*v)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
        match Value::deserialize(d)? {
            Value::Number(n) => n
                .as_u64()
                .ok_or_else(|| serde::de::Error::custom("expected an unsigned integer")),
            Value::String(s) => super::parse_u64(&s).map_err(serde::de::Error::custom),
            _ => Err(serde::de::Error::custom(
                "expected an unsigned integer or a \"0x…\" string",
            )),
        }
    }
}

/// `0x…` hex or decimal.
pub fn parse_u64(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let r = match t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(&h.replace('_', ""), 16),
        None => t.replace('_', "").parse(),
    };
    r.map_err(|_| format!("{s:?} is not a decimal or 0x-hex number"))
}

/// What kind of translation fault to report.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum XlatFault {
    Translation,
    AccessFlag,
    Permission,
    AddressSize,
}

fn yes() -> bool {
    true
}

/// The catalogue of faults the model can deliver. Each is documented with
/// the PMBSR it produces in `protocol/README.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum FaultKind {
    /// EC 0, BSC 1 "buffer filled", where the record would have gone.
    BufferFull,
    /// DL = 1 and the record dropped; with `event` also S = 1 and BSC 1.
    DataLoss {
        #[serde(default = "yes")]
        event: bool,
    },
    /// EC 0x24, FSC 0x10 (synchronous External abort), EA = 1.
    ExternalAbort,
    /// EC 0x24 with the fault's FSC at `level` (-1..=3).
    Stage1 { fault: XlatFault, level: i8 },
    /// EC 0x25 with the fault's FSC at `level`: only where the owning
    /// regime has stage 2 (EL1&0 with EL2 enabled and HCR_EL2.VM = 1).
    Stage2 { fault: XlatFault, level: i8 },
    /// EC 0x1E: needs FEAT_RME, which the model does not implement for
    /// the buffer; refused.
    GranuleProtection,
    /// EC 0x1F with this 16-bit IMPLEMENTATION DEFINED syndrome in MSS.
    ImpDef {
        #[serde(default)]
        syndrome: u16,
    },
    /// EC 0, BSC 4 "buffer size too large" (DEN0154).
    SizeTooLarge,
    /// EC 0 with a BSC the architecture does not define.
    UnknownBsc { bsc: u8 },
    /// An EC the architecture does not define for PMBSR.
    UnknownEc { ec: u8 },
    /// COLL = 1 and the record dropped; with `event` also S = 1, BSC 1.
    Collision {
        #[serde(default = "yes")]
        event: bool,
    },
    /// PMBIRQ asserted with PMBSR.S = 0, until the guest's next access to
    /// an SPE register.
    SpuriousIrq,
    /// A buffer-full event (S = 1) whose PMBIRQ is never asserted, until
    /// software clears S.
    LostIrq,
    /// The next `records` records are written but PMBPTR does not move.
    StuckPointer {
        #[serde(default = "one")]
        records: u32,
    },
}

fn one() -> u32 {
    1
}

/// When an armed fault fires. Record triggers are checked as a record is
/// about to be written at PMBPTR.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "trigger", rename_all = "kebab-case")]
pub enum Trigger {
    /// At once, when armed.
    Now,
    /// The next record.
    NextRecord,
    /// The record after `count` more have been written.
    AfterRecords { count: u64 },
    /// The first record that would write the byte `offset` bytes past the
    /// PMBPTR value the buffer was last enabled with (so a buffer-full
    /// there leaves PMBPTR at the last record boundary at or below it).
    AtByte {
        #[serde(with = "u64_or_hex")]
        offset: u64,
    },
    /// The first record that would write the byte at virtual address `va`.
    AtVa {
        #[serde(with = "u64_or_hex")]
        va: u64,
    },
    /// `ms` milliseconds after it is armed (a scenario file's, or one armed
    /// with no VM connected: after the VM connects), then as `now`.
    AfterMs { ms: u64 },
}

/// `arm-fault`'s arguments, and a scenario file's entries: flat, with the
/// kind's and the trigger's fields beside `vcpu`. Names no field of that
/// kind and trigger takes are refused (serde's `deny_unknown_fields` does
/// not combine with `flatten`, hence [`TryFrom<Value>`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Value")]
pub struct ArmFault {
    #[serde(default)]
    pub vcpu: VcpuSel,
    #[serde(flatten)]
    pub kind: FaultKind,
    #[serde(flatten)]
    pub trigger: Trigger,
}

impl TryFrom<Value> for ArmFault {
    type Error = String;

    fn try_from(v: Value) -> Result<ArmFault, String> {
        let e = |e: serde_json::Error| e.to_string();
        let a = ArmFault {
            vcpu: v
                .get("vcpu")
                .map_or(Ok(VcpuSel::All), VcpuSel::deserialize)
                .map_err(e)?,
            kind: FaultKind::deserialize(&v).map_err(e)?,
            trigger: Trigger::deserialize(&v).map_err(e)?,
        };
        let known = serde_json::to_value(a).map_err(e)?;
        if let (Some(given), Some(known)) = (v.as_object(), known.as_object()) {
            if let Some(k) = given.keys().find(|k| !known.contains_key(*k)) {
                return Err(format!("unknown argument {k:?} for this kind and trigger"));
            }
        }
        Ok(a)
    }
}

/// A fault as `query-faults` lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmedFaultInfo {
    pub id: u32,
    /// `None` while no VM is connected (armed for the next one).
    pub vcpu: Option<u32>,
    #[serde(flatten)]
    pub kind: FaultKind,
    #[serde(flatten)]
    pub trigger: Trigger,
}

/// A scenario file (`--scenario FILE`): faults armed for every VM that
/// connects, and the seed of the model's random numbers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    #[serde(default)]
    pub seed: Option<u64>,
    #[serde(default, deserialize_with = "checked_faults")]
    pub faults: Vec<ArmFault>,
}

/// The faults, each named by its index when it is wrong.
fn checked_faults<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ArmFault>, D::Error> {
    Vec::<Value>::deserialize(d)?
        .into_iter()
        .enumerate()
        .map(|(i, v)| ArmFault::try_from(v).map_err(|e| format!("faults[{i}]: {e}")))
        .collect::<Result<_, _>>()
        .map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests;
