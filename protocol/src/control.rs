//! The backend's host-side control socket: line-delimited JSON in the shape
//! QMP users know. See `protocol/README.md` ("The control socket").
//!
//! ```text
//! S: {"SPE": {"version": {"major": 1, "minor": 0}, "product": "vhost-device-spe"}}
//! C: {"execute": "arm-fault", "arguments": {"vcpu": 0, "kind": "buffer-full",
//!     "trigger": "at-byte", "offset": 4096}, "id": 1}
//! S: {"return": {"ids": [1]}, "id": 1}
//! S: {"event": "FAULT_DELIVERED", "data": {...}, "timestamp": {...}}
//! ```
//!
//! The message types here are shared by the server, the `ctl` client and
//! the fault model, which takes [`FaultKind`] and [`Trigger`] as they are.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

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

impl Greeting {
    pub fn current() -> Greeting {
        Greeting {
            spe: GreetingBody {
                version: Version {
                    major: VERSION_MAJOR,
                    minor: VERSION_MINOR,
                },
                product: "vhost-device-spe".into(),
            },
        }
    }
}

/// A client's request line.
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

/// A reply or an event line from the server.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ServerLine {
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
    Event {
        event: String,
        data: Value,
        timestamp: Timestamp,
    },
    Greeting(Greeting),
}

/// An event's time since the Unix epoch, as QMP gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timestamp {
    pub seconds: u64,
    pub microseconds: u32,
}

/// Event names.
pub mod event {
    /// An armed fault reached its trigger: `{"id", "vcpu", "fault", "pmbsr", "pmbptr", "delivered"}`.
    pub const FAULT_DELIVERED: &str = "FAULT_DELIVERED";
    /// PMBIRQ changed level: `{"vcpu", "level", "pmbsr"}`.
    pub const PMBIRQ: &str = "PMBIRQ";
    /// A buffer-full management event was raised: `{"vcpu", "pmbptr", "pmbsr"}`.
    pub const BUFFER_FULL: &str = "BUFFER_FULL";
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

/// `arm-fault`'s arguments, and a scenario file's entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArmFault {
    #[serde(default)]
    pub vcpu: VcpuSel,
    #[serde(flatten)]
    pub kind: FaultKind,
    #[serde(flatten)]
    pub trigger: Trigger,
}

impl ArmFault {
    /// Parses `arm-fault`'s arguments, refusing names no field takes
    /// (serde's `deny_unknown_fields` does not combine with `flatten`).
    pub fn from_value(v: Value) -> Result<ArmFault, String> {
        let a: ArmFault = serde_json::from_value(v.clone()).map_err(|e| e.to_string())?;
        let known = serde_json::to_value(a).map_err(|e| e.to_string())?;
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

fn checked_faults<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<ArmFault>, D::Error> {
    Vec::<Value>::deserialize(d)?
        .into_iter()
        .enumerate()
        .map(|(i, v)| ArmFault::from_value(v).map_err(|e| format!("faults[{i}]: {e}")))
        .collect::<Result<_, _>>()
        .map_err(serde::de::Error::custom)
}

/// Commands, by name.
pub mod command {
    /// `{"vcpu"?}` → `{"vcpus": [per-vCPU state]}`.
    pub const QUERY_SPU: &str = "query-spu";
    /// [`super::ArmFault`] → `{"ids": [..]}`.
    pub const ARM_FAULT: &str = "arm-fault";
    /// → `{"faults": [ArmedFaultInfo]}`.
    pub const QUERY_FAULTS: &str = "query-faults";
    /// `{"id"}` → `{}`.
    pub const CANCEL_FAULT: &str = "cancel-fault";
    /// `{"vcpu"?}` → `{"vcpus": [{"vcpu", "outcome", "pmsscr"}]}`.
    pub const SNAPSHOT: &str = "snapshot";
    /// `{"vcpu"?}` → `{}`.
    pub const RESET_STATS: &str = "reset-stats";
    /// → `{"version", "commands"}`.
    pub const QUERY_VERSION: &str = "query-version";
    /// → `{"choices": [{"name", "value", "permitted", "rule"}]}`.
    pub const QUERY_CHOICES: &str = "query-choices";
    /// `{"name", "value"}` → `{}`: for the VM's SPUs and the next VMs.
    pub const SET_CHOICE: &str = "set-choice";

    pub const ALL: &[&str] = &[
        QUERY_SPU,
        ARM_FAULT,
        QUERY_FAULTS,
        CANCEL_FAULT,
        SNAPSHOT,
        RESET_STATS,
        QUERY_VERSION,
        QUERY_CHOICES,
        SET_CHOICE,
    ];
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn arm_fault_arguments_are_flat() {
        let a: ArmFault = serde_json::from_value(json!({
            "vcpu": 1, "kind": "stage1", "fault": "translation", "level": 3,
            "trigger": "at-va", "va": "0xffff_8000_0000_1000"
        }))
        .unwrap();
        assert_eq!(a.vcpu, VcpuSel::One(1));
        assert_eq!(
            a.kind,
            FaultKind::Stage1 {
                fault: XlatFault::Translation,
                level: 3
            }
        );
        assert_eq!(
            a.trigger,
            Trigger::AtVa {
                va: 0xffff_8000_0000_1000
            }
        );
        // Defaults: all vCPUs, an event with the data loss.
        let a: ArmFault =
            serde_json::from_value(json!({"kind": "data-loss", "trigger": "next-record"})).unwrap();
        assert_eq!(a.vcpu, VcpuSel::All);
        assert_eq!(a.kind, FaultKind::DataLoss { event: true });
        // And back: the same flat shape.
        let v = serde_json::to_value(a).unwrap();
        assert_eq!(
            v,
            json!({"vcpu": "all", "kind": "data-loss", "event": true, "trigger": "next-record"})
        );
    }

    #[test]
    fn bad_arguments_are_refused() {
        for bad in [
            json!({"kind": "no-such-fault", "trigger": "now"}),
            json!({"kind": "buffer-full"}),
            json!({"kind": "buffer-full", "trigger": "at-byte"}),
            json!({"kind": "buffer-full", "trigger": "at-byte", "offset": -1}),
            json!({"kind": "buffer-full", "trigger": "at-va", "va": "0xzz"}),
            json!({"kind": "stage1", "fault": "translation", "trigger": "now"}),
            json!({"vcpu": "some", "kind": "buffer-full", "trigger": "now"}),
            json!({"vcpu": -1, "kind": "buffer-full", "trigger": "now"}),
            json!({"kind": "buffer-full", "trigger": "now", "level": 1}),
            json!({"kind": "buffer-full", "trigger": "now", "count": 1}),
        ] {
            assert!(ArmFault::from_value(bad.clone()).is_err(), "{bad}");
        }
    }

    #[test]
    fn server_lines_round_trip() {
        for line in [
            ServerLine::Greeting(Greeting::current()),
            ServerLine::Return {
                ret: json!({}),
                id: Some(json!(7)),
            },
            ServerLine::Error {
                error: ErrorBody {
                    class: ErrorClass::CommandNotFound,
                    desc: "x".into(),
                },
                id: None,
            },
            ServerLine::Event {
                event: event::PMBIRQ.into(),
                data: json!({"vcpu": 0, "level": true}),
                timestamp: Timestamp {
                    seconds: 1,
                    microseconds: 2,
                },
            },
        ] {
            let text = serde_json::to_string(&line).unwrap();
            assert!(!text.contains('\n'));
            assert_eq!(serde_json::from_str::<ServerLine>(&text).unwrap(), line);
        }
        let g = serde_json::to_value(Greeting::current()).unwrap();
        assert_eq!(g["SPE"]["version"]["major"], VERSION_MAJOR);
    }

    #[test]
    fn requests_and_scenarios() {
        let r: Request = serde_json::from_str(r#"{"execute":"query-spu"}"#).unwrap();
        assert_eq!(r.execute, "query-spu");
        assert!(r.arguments.is_null());
        assert!(serde_json::from_str::<Request>(r#"{"exec":"x"}"#).is_err());
        let s: Scenario = serde_json::from_str(
            r#"{"seed": 5, "faults": [{"kind": "buffer-full", "trigger": "after-records", "count": 100}]}"#,
        )
        .unwrap();
        assert_eq!(s.seed, Some(5));
        assert_eq!(s.faults[0].trigger, Trigger::AfterRecords { count: 100 });
        assert!(serde_json::from_str::<Scenario>(r#"{"fault": []}"#).is_err());
        let typo = r#"{"faults": [{"kind": "buffer-full", "trigger": "now", "cnt": 1}]}"#;
        let e = serde_json::from_str::<Scenario>(typo)
            .unwrap_err()
            .to_string();
        assert!(e.contains("faults[0]") && e.contains("cnt"), "{e}");
    }

    #[test]
    fn numbers_in_hex_or_decimal() {
        assert_eq!(parse_u64("0x10"), Ok(16));
        assert_eq!(parse_u64("4_096"), Ok(4096));
        assert!(parse_u64("-1").is_err());
        assert_eq!("all".parse::<VcpuSel>(), Ok(VcpuSel::All));
        assert_eq!("3".parse::<VcpuSel>(), Ok(VcpuSel::One(3)));
        assert!("x".parse::<VcpuSel>().is_err());
    }
}
