//! `vhost-device-spe ctl`: a client of the backend's control socket for
//! shell scripts and people. The arguments become the protocol's typed
//! [`Command`]s, read by the same code as the server reads them with, so
//! there is one validator; the server checks the rest (vCPUs, the CPU
//! profile).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{ArgGroup, Args, Subcommand};
use serde::Serialize;
use serde_json::{json, Map, Value};
use spe_protocol::control::{
    parse_u64, ArmFault, CancelArgs, Command, NoArgs, Request, SetChoiceArgs, VcpuArgs, VcpuSel,
};
use vhost_device_spe::control::client::ControlClient;

/// Talk to a running backend's --control-socket.
#[derive(Debug, Args)]
pub struct CtlArgs {
    /// The backend's --control-socket.
    #[arg(long, value_name = "PATH")]
    socket: PathBuf,

    /// Print each reply or event as one line of JSON (for scripts)
    /// instead of indented.
    #[arg(long, global = true)]
    json: bool,

    #[command(subcommand)]
    cmd: CtlCommand,
}

#[derive(Debug, Subcommand)]
enum CtlCommand {
    /// Each vCPU's SPU: registers, statistics, and whether profiling is
    /// enabled at EL0-EL2 and, if not, why (StatisticalProfilingEnabled()).
    Query {
        #[arg(long, default_value = "all")]
        vcpu: VcpuSel,
    },
    /// Arm a fault (the catalogue is in protocol/README.md).
    Arm(ArmArgs),
    /// List the armed faults.
    Faults,
    /// Cancel an armed fault.
    Cancel { id: u32 },
    /// Request a PMU snapshot capture from the host (the IMPLEMENTATION
    /// DEFINED external request of D13.9) and print Table D13-10's outcome.
    Snapshot {
        #[arg(long, default_value = "all")]
        vcpu: VcpuSel,
    },
    /// Reset the statistics.
    ResetStats {
        #[arg(long, default_value = "all")]
        vcpu: VcpuSel,
    },
    /// Print events as they come: until COUNT have come (exit 1 if they do
    /// not within TIMEOUT seconds), or for TIMEOUT seconds.
    Events {
        #[arg(long)]
        count: Option<u64>,
        #[arg(long, default_value_t = 10.0)]
        timeout: f64,
        /// Only events of this name (FAULT_DELIVERED, PMBIRQ, BUFFER_FULL).
        #[arg(long, value_name = "NAME")]
        only: Option<String>,
    },
    /// The protocol version and the commands the server knows.
    Version,
    /// The CONSTRAINED UNPREDICTABLE choices, their values and what the Arm
    /// ARM permits.
    Choices,
    /// Select one of those behaviours, for the VM and the next ones.
    SetChoice { name: String, value: String },
    /// Any command, with its arguments as a JSON object.
    Execute {
        name: String,
        #[arg(value_name = "JSON")]
        arguments: Option<String>,
    },
}

/// `ctl arm`: a fault kind, its parameters, and exactly one trigger.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("trigger").required(true)
    .args(["now", "next_record", "after_records", "at_byte", "at_va", "after_ms"])))]
struct ArmArgs {
    /// buffer-full, data-loss, external-abort, stage1, stage2,
    /// granule-protection, imp-def, size-too-large, unknown-bsc,
    /// unknown-ec, collision, spurious-irq, lost-irq, stuck-pointer.
    kind: String,
    /// A vCPU number or "all".
    #[arg(long, default_value = "all")]
    vcpu: VcpuSel,
    /// stage1/stage2: translation, access-flag, permission, address-size.
    #[arg(long)]
    fault: Option<String>,
    /// stage1/stage2: the lookup level (-1 to 3).
    #[arg(long, allow_hyphen_values = true)]
    level: Option<i8>,
    /// imp-def: the syndrome; unknown-bsc: the BSC; unknown-ec: the EC.
    #[arg(long, value_parser = parse_u64)]
    code: Option<u64>,
    /// data-loss, collision: set the flag without a management event.
    #[arg(long)]
    no_event: bool,
    /// stuck-pointer: how many records leave PMBPTR where it is.
    #[arg(long)]
    records: Option<u32>,
    /// Deliver at once.
    #[arg(long)]
    now: bool,
    /// At the next record.
    #[arg(long)]
    next_record: bool,
    /// After N more records.
    #[arg(long, value_name = "N", value_parser = parse_u64)]
    after_records: Option<u64>,
    /// At the record that would write byte OFFSET of the buffer (counted
    /// from PMBPTR when the buffer was enabled).
    #[arg(long, value_name = "OFFSET", value_parser = parse_u64)]
    at_byte: Option<u64>,
    /// At the record that would write virtual address VA.
    #[arg(long, value_name = "VA", value_parser = parse_u64)]
    at_va: Option<u64>,
    /// MS milliseconds from now, then as --now.
    #[arg(long, value_name = "MS", value_parser = parse_u64)]
    after_ms: Option<u64>,
}

impl ArmArgs {
    /// `arm-fault`'s arguments. Options that do not belong to the kind are
    /// passed on too, for [`ArmFault`] to refuse by name.
    fn to_fault(&self) -> Result<ArmFault, String> {
        let mut m = Map::new();
        m.insert(
            "vcpu".into(),
            serde_json::to_value(self.vcpu).unwrap_or(Value::Null),
        );
        m.insert("kind".into(), json!(self.kind));
        if let Some(f) = &self.fault {
            m.insert("fault".into(), json!(f));
        } else if matches!(self.kind.as_str(), "stage1" | "stage2") {
            m.insert("fault".into(), json!("translation"));
        }
        if let Some(l) = self.level {
            m.insert("level".into(), json!(l));
        } else if matches!(self.kind.as_str(), "stage1" | "stage2") {
            m.insert("level".into(), json!(3));
        }
        if let Some(c) = self.code {
            let name = match self.kind.as_str() {
                "imp-def" => "syndrome",
                "unknown-bsc" => "bsc",
                "unknown-ec" => "ec",
                _ => "code",
            };
            m.insert(name.into(), json!(c));
        }
        if self.no_event {
            m.insert("event".into(), json!(false));
        }
        if let Some(r) = self.records {
            m.insert("records".into(), json!(r));
        }
        let (trigger, param) = if self.now {
            ("now", None)
        } else if self.next_record {
            ("next-record", None)
        } else if let Some(n) = self.after_records {
            ("after-records", Some(("count", n)))
        } else if let Some(o) = self.at_byte {
            ("at-byte", Some(("offset", o)))
        } else if let Some(ms) = self.after_ms {
            ("after-ms", Some(("ms", ms)))
        } else {
            ("at-va", self.at_va.map(|v| ("va", v)))
        };
        m.insert("trigger".into(), json!(trigger));
        if let Some((k, v)) = param {
            m.insert(k.into(), json!(v));
        }
        ArmFault::try_from(Value::Object(m))
    }
}

fn print(v: &impl Serialize, one_line: bool) {
    let text = if one_line {
        serde_json::to_string(v)
    } else {
        serde_json::to_string_pretty(v)
    };
    println!("{}", text.unwrap_or_default());
}

pub fn run(args: CtlArgs) -> ExitCode {
    if let CtlCommand::Events {
        count,
        timeout,
        only,
    } = &args.cmd
    {
        return connected(&args, |c| {
            events(c, *count, *timeout, only.as_deref(), args.json)
        });
    }
    // Checked before connecting: a typo needs no daemon to be refused.
    match command(&args.cmd) {
        Ok(cmd) => connected(&args, |c| call(c, &cmd, args.json)),
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn connected(args: &CtlArgs, f: impl FnOnce(&mut ControlClient) -> ExitCode) -> ExitCode {
    match ControlClient::connect(&args.socket) {
        Ok(mut c) => f(&mut c),
        Err(e) => {
            eprintln!("error: cannot reach {}: {e}", args.socket.display());
            ExitCode::FAILURE
        }
    }
}

/// The command `cmd` sends.
fn command(cmd: &CtlCommand) -> Result<Command, String> {
    let vcpu = |&vcpu: &VcpuSel| VcpuArgs { vcpu };
    Ok(match cmd {
        CtlCommand::Query { vcpu: v } => Command::QuerySpu(vcpu(v)),
        CtlCommand::Arm(a) => Command::ArmFault(a.to_fault()?),
        CtlCommand::Faults => Command::QueryFaults(NoArgs {}),
        CtlCommand::Cancel { id } => Command::CancelFault(CancelArgs { id: *id }),
        CtlCommand::Snapshot { vcpu: v } => Command::Snapshot(vcpu(v)),
        CtlCommand::ResetStats { vcpu: v } => Command::ResetStats(vcpu(v)),
        CtlCommand::Version => Command::QueryVersion(NoArgs {}),
        CtlCommand::Choices => Command::QueryChoices(NoArgs {}),
        CtlCommand::SetChoice { name, value } => Command::SetChoice(SetChoiceArgs {
            name: name.clone(),
            value: value.clone(),
        }),
        CtlCommand::Execute { name, arguments } => {
            let arguments = match arguments.as_deref().map(serde_json::from_str) {
                None => Value::Null,
                Some(Ok(v)) => v,
                Some(Err(e)) => return Err(format!("the arguments are not JSON: {e}")),
            };
            let req = Request {
                execute: name.clone(),
                arguments,
                id: None,
            };
            Command::from_request(&req).map_err(|e| e.to_string())?
        }
        CtlCommand::Events { .. } => return Err("events sends no command".into()),
    })
}

fn call(c: &mut ControlClient, cmd: &Command, one_line: bool) -> ExitCode {
    match c.execute(cmd) {
        Ok(r) => {
            print(&r, one_line);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn events(
    c: &mut ControlClient,
    count: Option<u64>,
    timeout: f64,
    only: Option<&str>,
    one_line: bool,
) -> ExitCode {
    let end = Instant::now() + Duration::from_secs_f64(timeout.max(0.0));
    let mut seen = 0u64;
    while count.is_none_or(|n| seen < n) {
        let left = end.saturating_duration_since(Instant::now());
        match c.next_event(left) {
            Ok(Some(e)) => {
                if only.is_some_and(|o| e.event != o) {
                    continue;
                }
                print(&e, one_line);
                seen += 1;
            }
            Ok(None) => break,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    match count {
        Some(n) if seen < n => {
            eprintln!("error: {seen} of {n} event(s) within {timeout} s");
            ExitCode::FAILURE
        }
        _ => ExitCode::SUCCESS,
    }
}
