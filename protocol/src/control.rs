//! The backend's host-side control socket: line-delimited JSON in the shape
//! QMP users know. See `protocol/README.md` ("The control socket").
//!
//! ```text
//! S: {"SPE":{"version":{"major":1,"minor":1},"product":"vhost-device-spe"}}
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
/// Minor version: bumped when commands or fields are added (1: the
/// guest control port and `query-events`).
pub const VERSION_MINOR: u32 = 1;
/// Longest line the server reads; a longer one is an error and closes the
/// connection (a peer that never sends a newline cannot grow our memory).
pub const MAX_LINE: usize = 64 * 1024;
/// Longest line the guest control port reads: a longer one gets an error
/// and is skipped to its newline, and the port stays usable (the guest
/// cannot reconnect a virtio-serial port).
pub const MAX_GUEST_LINE: usize = 4096;
/// Most events one `query-events` reply carries (it says `more`), so that
/// a reply stays within what a guest reads in one go.
pub const MAX_EVENTS_PER_QUERY: usize = 16;

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
    /// → [`Reply::Done`]: for the VM's SPUs and the next VMs (from the
    /// guest control port, for its VM only).
    SetChoice(SetChoiceArgs),
    /// → [`Reply::Events`]; the guest control port's, where events are
    /// queued rather than pushed.
    QueryEvents(NoArgs),
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
        "query-events",
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
            Command::QueryEvents(_) => Reply::Events(from_value(ret)?),
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

mod fault;
mod reply;
mod value;

pub use fault::*;
pub use reply::*;
pub use value::*;

#[cfg(test)]
mod tests;
