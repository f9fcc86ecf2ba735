//! `vhost-device-spe`: serves the virtio-spe device to QEMU over vhost-user
//! and/or the SPE model to a patched QEMU over the QEMU channel.

mod config;
mod ctl;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::{Args, Parser, Subcommand};
use log::{error, info};
use spe_protocol::control::Scenario;
use vhost::vhost_user::Listener;
use vhost_device_spe::{control, qemu, vhu_spe};

use config::{Config, ServeArgs};

/// Arm SPE and PMU-snapshot device model for QEMU guests.
///
/// Without a subcommand, listens on --socket-path for a vhost-user front end
/// (QEMU 10.2's vhost-user-test-device-pci,
/// with virtio-id=58,num_vqs=2,config_size=64)
/// and/or on --qemu-socket for a patched QEMU's SPE channel (the
/// full-emulation path), and serves one VM after another on each until
/// SIGINT or SIGTERM.
/// Log verbosity follows RUST_LOG (default: info).
#[derive(Debug, Parser)]
#[command(
    name = "vhost-device-spe",
    version,
    about,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct Cli {
    #[command(flatten)]
    serve: ServeArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

/// Modes other than serving.
#[derive(Debug, Subcommand)]
enum Command {
    /// Print the packets of an SPE buffer in `perf report -D` style.
    ///
    /// A --record file (vcpu<N>.rec) is recognised by its magic and its
    /// records decoded as the guest's buffer held them, after a `#` line
    /// naming it; a --record directory, each vCPU's file in turn.
    Decode {
        /// File holding raw SPE records (e.g. an `export`ed vcpu<N>.spe),
        /// a --record file or directory, or `-` for stdin.
        input: String,
    },
    /// Talk to a running backend's --control-socket.
    Ctl(ctl::CtlArgs),
    /// Summarise what --record DIR kept, as `perf report` would: the
    /// hottest symbols per exception level (kernel PCs named from the
    /// guest kernel's System.map), data addresses and latencies.
    Report(ReportArgs),
    /// Write what --record DIR kept as raw SPE data, one vcpu<N>.spe per
    /// vCPU.
    ///
    /// Each file holds that vCPU's records alone, in order, as the guest's
    /// buffer held them (no framing), for tools that read raw SPE buffers
    /// (Arm's spe-parser, `decode`). Prints each file written.
    Export(ExportArgs),
}

#[derive(Debug, Args)]
struct ExportArgs {
    /// The --record directory.
    dir: PathBuf,
    /// Where to write the vcpu<N>.spe files (created if missing; default:
    /// DIR).
    #[arg(long, short, value_name = "OUT")]
    output: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// The --record directory.
    dir: PathBuf,
    /// The guest kernel's System.map, to name EL1/EL2 PCs.
    #[arg(long, value_name = "PATH")]
    system_map: Option<PathBuf>,
    /// The guest kernel's KASLR offset (hex): `_text` in its /proc/kallsyms
    /// minus `_text` in System.map; 0 for a kernel booted with nokaslr.
    #[arg(long, value_name = "HEX", default_value = "0", value_parser = parse_hex)]
    kaslr_offset: u64,
    /// How many symbols to list.
    #[arg(long, value_name = "N", default_value_t = 20)]
    top: usize,
    /// JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Also draw a flame graph (EL, then symbol) to this SVG file.
    #[arg(long, value_name = "SVG")]
    flamegraph: Option<PathBuf>,
}

fn parse_hex(s: &str) -> Result<u64, String> {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|e| format!("{s:?}: {e}"))
}

/// Blocks SIGINT and SIGTERM in this thread (and so in every thread it
/// spawns afterwards) and returns the set, for `sigwait` in `main`. Waiting
/// synchronously keeps all shutdown work out of signal-handler context.
fn block_termination_signals() -> std::io::Result<libc::sigset_t> {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset/pthread_sigmask
    // only touch the set we own, and their results are checked.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok(set)
    }
}

fn wait_for_signal(set: &libc::sigset_t) -> i32 {
    let mut sig = 0;
    // SAFETY: `set` is initialised and `sig` is a valid out pointer.
    while unsafe { libc::sigwait(set, &mut sig) } != 0 {}
    sig
}

/// Set when the vhost-user listener ends on an error: the process then
/// exits non-zero.
static LISTENER_FAILED: AtomicBool = AtomicBool::new(false);

fn run_server(args: ServeArgs) -> ExitCode {
    let config = match Config::try_from(args) {
        Ok(c) => c,
        Err(e) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    match serve(&config) {
        Ok(()) if !LISTENER_FAILED.load(Ordering::SeqCst) => ExitCode::SUCCESS,
        Ok(()) => {
            error!("exiting: the vhost-user listener failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Starts what `config` asks for and serves until SIGINT or SIGTERM;
/// an error is one of starting up.
fn serve(config: &Config) -> Result<(), String> {
    let signals =
        block_termination_signals().map_err(|e| format!("cannot block SIGINT/SIGTERM: {e}"))?;
    let hub = control_hub(config)?;
    // Before the channel, whose thread serves it, and dropped after it.
    let _control = match (&config.control_socket, &hub) {
        (Some(path), Some(hub)) => Some(
            control::spawn(path, hub.clone())
                .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?,
        ),
        _ => None,
    };
    let synthetic = config
        .synthetic
        .map(|r| format!(", synthetic {r} ops/s per vCPU"))
        .unwrap_or_default();

    // The QEMU channel first: its thread owns its socket and removes it
    // when the handle drops.
    let channel = match &config.qemu {
        Some(q) => {
            let mut c = qemu::ServerConfig::new(config.features.clone());
            c.cpu = config.cpu;
            c.synthetic_rate = config.synthetic;
            c.control = hub.clone();
            c.choices = config.choices;
            c.record = q.record.clone();
            c.deterministic = q.deterministic;
            let h = qemu::spawn(&q.socket, c)
                .map_err(|e| format!("cannot listen on {}: {e}", q.socket.display()))?;
            info!(
                "QEMU channel listening on {} (cpu {:?}{synthetic})",
                q.socket.display(),
                config.cpu,
            );
            Some(h)
        }
        None => None,
    };

    if let Some(v) = &config.vhost_user {
        let mut listener = Listener::new(&v.socket, true)
            .map_err(|e| format!("cannot listen on {}: {e}", v.socket.display()))?;
        info!(
            "vhost-device-spe listening on {} ({} vCPU(s), cpu {:?}, PMSIDR_EL1={:#x}, PMBIDR_EL1={:#x}{synthetic})",
            v.socket.display(),
            v.vcpus,
            config.cpu,
            config.features.pmsidr(),
            config.features.pmbidr(),
        );
        let vcpus = v.vcpus;
        let synthetic = config.synthetic;
        let features = config.features.clone();
        let choices = config.choices;
        let control = hub.clone().filter(|_| v.control);
        let record = v.record.clone();
        let feed = match &v.plugin_socket {
            Some(path) => Some(
                vhu_spe::Feed::listen(path, vcpus)
                    .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?,
            ),
            None => None,
        };
        std::thread::Builder::new()
            .name("vhu-listener".into())
            .spawn(move || {
                let res = vhu_spe::serve(
                    &mut listener,
                    vhu_spe::DeviceOptions {
                        num_vcpus: vcpus,
                        features,
                        synthetic,
                        choices,
                        control,
                        feed,
                        record,
                    },
                );
                if let Err(e) = &res {
                    error!("{e}");
                    LISTENER_FAILED.store(true, Ordering::SeqCst);
                }
                drop(listener);
                // Wake `main` so the process exits instead of hanging. The
                // signal must be process-directed: raise() would direct it
                // at this thread, which blocks it, and main's sigwait would
                // never see it.
                // SAFETY: kill() on our own pid with a valid signal number.
                unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
                res
            })
            .map_err(|e| format!("cannot start the listener thread: {e}"))?;
    }

    let sig = wait_for_signal(&signals);
    info!("received signal {sig}, shutting down");
    // Stops the channel thread (closing any connection) and removes its socket.
    drop(channel);
    // The vhost-user thread is blocked in accept() or serving a VM; exiting
    // ends both and closes the connection. Only the socket file needs care.
    if let Some(v) = &config.vhost_user {
        match std::fs::remove_file(&v.socket) {
            Ok(()) => info!("removed {}", v.socket.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => error!("cannot remove {}: {e}", v.socket.display()),
        }
    }
    Ok(())
}

/// The control socket's hub, when --control-socket or --scenario asks for
/// one.
fn control_hub(config: &Config) -> Result<Option<Arc<control::Hub>>, String> {
    if !config.wants_hub() {
        return Ok(None);
    }
    let scenario = match &config.scenario {
        None => Scenario::default(),
        Some(s) => {
            info!(
                "scenario {}: {} fault(s) armed for each VM{}",
                s.path.display(),
                s.scenario.faults.len(),
                s.scenario
                    .seed
                    .map(|n| format!(", seed {n}"))
                    .unwrap_or_default()
            );
            s.scenario.clone()
        }
    };
    control::Hub::new(config.features.clone(), scenario)
        .map(|h| Some(Arc::new(h.with_choices(config.choices))))
        .map_err(|e| format!("cannot create the control hub: {e}"))
}

fn decode(input: &str) -> ExitCode {
    let mut out = io::BufWriter::new(io::stdout().lock());
    let res = vhost_device_spe::decode::run(input, &mut out);
    // Output already flushed by run(); ignore a second flush error on a closed pipe.
    let _ = out.flush();
    match res {
        Ok(_) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    match cli.command {
        None => run_server(cli.serve),
        Some(Command::Decode { input }) => decode(&input),
        Some(Command::Ctl(args)) => ctl::run(args),
        Some(Command::Report(args)) => report(args),
        Some(Command::Export(args)) => export(args),
    }
}

fn export(args: ExportArgs) -> ExitCode {
    let out = args.output.as_deref().unwrap_or(&args.dir);
    match vhost_device_spe::record::export(&args.dir, out) {
        Ok(files) => {
            for f in files {
                println!(
                    "{}: {} record(s), {} bytes",
                    f.path.display(),
                    f.records,
                    f.bytes
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

fn report(args: ReportArgs) -> ExitCode {
    let opts = vhost_device_spe::report::Options {
        dir: args.dir,
        system_map: args.system_map,
        kaslr_offset: args.kaslr_offset,
        top: args.top,
        json: args.json,
        flamegraph: args.flamegraph,
    };
    match vhost_device_spe::report::run(&opts, &mut io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
