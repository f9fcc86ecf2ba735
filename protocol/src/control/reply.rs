//! Each command's `return` value, and the events the server sends.

use super::*;

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
    Events(EventList),
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

/// `query-events`' reply: the oldest events queued for the connection,
/// oldest first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventList {
    pub events: Vec<EventLine>,
    /// Whether more are queued than this reply carries.
    pub more: bool,
    /// Events the connection's queue had no room for since the last
    /// `query-events`.
    pub missed: u64,
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
