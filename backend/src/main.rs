//! `vhost-device-spe`: serves the virtio-spe device to QEMU over vhost-user
//! and/or the SPE model to a patched QEMU over the QEMU control channel.

mod ctl;

use std::io::{self, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use clap::{ArgGroup, Args, Parser, Subcommand, ValueEnum};
use log::{error, info};
use spe_protocol::control::Scenario;
use vhost::vhost_user::Listener;
use vhost_device_spe::spu::unpredictable::Choices;
use vhost_device_spe::spu::Features;
use vhost_device_spe::{control, qemu, vhu_spe};

/// Arm SPE and PMU-snapshot device model for QEMU guests.
///
/// Without a subcommand, listens on --socket-path for a vhost-user front end
/// (QEMU's vhost-user-device-pci with virtio-id=58,num_vqs=2,config_size=64)
/// and/or on --qemu-socket for a patched QEMU's SPE control channel (the
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

/// Options of the default (serving) mode.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("sockets").required(true).multiple(true)
    .args(["socket_path", "qemu_socket"])))]
struct ServeArgs {
    /// Unix socket to listen on for the vhost-user front end (replaced if it
    /// exists). One front end is served at a time; one that asks for no
    /// features within 5 s is dropped.
    #[arg(long, value_name = "PATH")]
    socket_path: Option<PathBuf>,

    /// Unix socket to listen on for a patched QEMU's SPE control channel
    /// (replaced if it exists). The vCPU count comes from QEMU's HELLO. One
    /// VM is served at a time; a connection that sends no HELLO within 5 s,
    /// or stalls for 1 s within a message, is dropped.
    #[arg(long, value_name = "PATH")]
    qemu_socket: Option<PathBuf>,

    /// Feed RATE synthetic sampled operations per second to each vCPU of the
    /// VM(s) on --socket-path and --qemu-socket (an EL1 load/store/branch mix
    /// through the guest's own interval counter and filters), to exercise
    /// buffers and PMBIRQ without a TCG feed or a guest workload.
    #[arg(long, value_name = "RATE",
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    synthetic: Option<u64>,

    /// Number of vCPUs, i.e. of SPUs, of the vhost-user device (the QEMU
    /// channel takes the count from QEMU's HELLO).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=512))]
    vcpus: u32,

    /// CPU whose ID register values (PMSIDR_EL1, PMBIDR_EL1, ID_AA64DFR0_EL1.PMSVer) the device advertises.
    #[arg(long, value_enum, default_value_t = CpuModel::NeoverseN1)]
    cpu: CpuModel,

    /// Override the sampling interval the CPU recommends in
    /// PMSIDR_EL1.Interval (Linux's minimum period, and perf's default):
    /// one of 256, 512, 768, 1024, 1536, 2048, 3072, 4096 operations.
    #[arg(long, value_name = "OPS", value_parser = parse_interval)]
    min_interval: Option<u32>,

    /// QEMU channel: write records and raise PMBIRQ only when a vCPU asks
    /// (QEMU then hands over every 16 samples synchronously): with QEMU's
    /// `-icount shift=N,sleep=off -seed S`, and faults triggered by records
    /// or bytes (not by time or a live `ctl`), two runs write the same
    /// bytes. Slower: a round trip per 16 samples.
    #[arg(long)]
    deterministic: bool,

    /// Override PMBIDR_EL1.Align: records are written BYTES-aligned (padded
    /// with PAD packets), so the buffer fills to exactly its limit. A power
    /// of two up to the CPU's maximum record size (64 on these profiles).
    #[arg(long, value_name = "BYTES")]
    align: Option<u64>,

    /// The VM's CPUs implement EL2 (QEMU `-M virt,virtualization=on`): the
    /// model then serves PMSCR_EL2 and the EL2 access checks.
    #[arg(long)]
    el2: bool,

    /// The VM's CPUs implement EL3 (QEMU `-M virt,secure=on`).
    #[arg(long)]
    el3: bool,

    /// Unix socket for the host-side control interface (line-delimited
    /// JSON, QMP-shaped): query the SPUs, arm faults, request PMU
    /// snapshots, watch events. `vhost-device-spe ctl` is its client.
    /// Serves the VM on --qemu-socket if given, else the vhost-user one.
    #[arg(long, value_name = "PATH")]
    control_socket: Option<PathBuf>,

    /// Select a CONSTRAINED UNPREDICTABLE behaviour among those the Arm ARM
    /// permits, NAME=VALUE (repeatable): overrun=buffer-full-dl|buffer-full|imp-def
    /// (RPGGHS: a record that does not fit below the limit),
    /// badpmsfcr=keep|reject (a filter with nothing to filter on),
    /// operations=micro-ops|instructions (what the interval counter counts:
    /// micro-ops vary the instructions per sample, instructions are exact).
    #[arg(long, value_name = "NAME=VALUE")]
    choice: Vec<String>,

    /// Keep a copy of every record written into a guest's buffer, per vCPU,
    /// in DIR/vcpu<N>.rec (the QEMU channel's VM, or without one the
    /// vhost-user front end's; each VM truncates the files of the one
    /// before), for `vhost-device-spe report DIR`.
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,

    /// JSON file of faults to arm for every VM that connects, and a seed
    /// for the model's random numbers: {"seed": N, "faults": [arm-fault
    /// arguments, ...]} (see protocol/README.md).
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
}

/// Modes other than serving.
#[derive(Debug, Subcommand)]
enum Command {
    /// Print the packets of an SPE buffer in `perf report -D` style.
    Decode {
        /// File holding raw SPE records, or `-` for stdin.
        input: String,
    },
    /// Talk to a running backend's --control-socket.
    Ctl(ctl::CtlArgs),
    /// Summarise what --record DIR kept, as `perf report` would: the
    /// hottest symbols per exception level (kernel PCs named from the
    /// guest kernel's System.map), data addresses and latencies.
    Report(ReportArgs),
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

/// An interval PMSIDR_EL1.Interval can encode.
fn parse_interval(s: &str) -> Result<u32, String> {
    let valid = || {
        Features::INTERVALS
            .iter()
            .map(|(_, n)| n.to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    match s.parse::<u32>() {
        Ok(n) if Features::INTERVALS.iter().any(|(_, ops)| *ops == n) => Ok(n),
        _ => Err(format!("PMSIDR_EL1.Interval encodes only {}", valid())),
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum CpuModel {
    /// FEAT_SPEv1p1, Neoverse N1-like (PMSIDR_EL1 0x2641f)
    NeoverseN1,
    /// FEAT_SPEv1p1 with ERnd, Neoverse V1-like (PMSIDR_EL1 0x2643f)
    NeoverseV1,
    /// Everything modelled: FEAT_SPEv1p4, FnE, EFT, FDS, ERnd, nVM, EXC,
    /// FEAT_PMUv3_SS (PMSIDR_EL1 0x40264ff)
    Max,
}

impl CpuModel {
    fn features(self) -> Features {
        match self {
            CpuModel::NeoverseN1 => Features::neoverse_n1(),
            CpuModel::NeoverseV1 => Features::neoverse_v1(),
            CpuModel::Max => Features::max(),
        }
    }
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
    let mut features = args.cpu.features();
    if let Some(ops) = args.min_interval {
        // parse_interval admits only intervals with an encoding.
        features = features.clone().with_min_interval(ops).unwrap_or(features);
    }
    if let Some(bytes) = args.align {
        features = match features.with_align(bytes) {
            Ok(f) => f,
            Err(e) => {
                error!("--align: {e}");
                return ExitCode::FAILURE;
            }
        };
    }
    features.have_el2 |= args.el2;
    features.have_el3 |= args.el3;

    let signals = match block_termination_signals() {
        Ok(s) => s,
        Err(e) => {
            error!("cannot block SIGINT/SIGTERM: {e}");
            return ExitCode::FAILURE;
        }
    };

    let mut choices = Choices::default();
    for c in &args.choice {
        if let Err(e) = choices.set_from(c) {
            error!("--choice: {e}");
            return ExitCode::FAILURE;
        }
    }
    let hub = match control_hub(&args, &features, choices) {
        Ok(h) => h,
        Err(e) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    // Before the channel, whose thread serves it, and dropped after it.
    let _control = match (&args.control_socket, &hub) {
        (Some(path), Some(hub)) => match control::spawn(path, hub.clone()) {
            Ok(h) => Some(h),
            Err(e) => {
                error!("cannot listen on {}: {e}", path.display());
                return ExitCode::FAILURE;
            }
        },
        _ => None,
    };

    // The QEMU channel first: its thread owns its socket and removes it
    // when the handle drops.
    let channel = match &args.qemu_socket {
        Some(path) => {
            let mut config = qemu::ServerConfig::new(features.clone());
            config.synthetic_rate = args.synthetic;
            config.control = hub.clone();
            config.choices = choices;
            config.record = args.record.clone();
            config.deterministic = args.deterministic;
            match qemu::spawn(path, config) {
                Ok(h) => {
                    info!(
                        "QEMU control channel listening on {} (cpu {:?}{})",
                        path.display(),
                        args.cpu,
                        args.synthetic
                            .map(|r| format!(", synthetic {r} ops/s per vCPU"))
                            .unwrap_or_default()
                    );
                    Some(h)
                }
                Err(e) => {
                    error!("cannot listen on {}: {e}", path.display());
                    return ExitCode::FAILURE;
                }
            }
        }
        None => None,
    };

    if let Some(socket) = &args.socket_path {
        let mut listener = match Listener::new(socket, true) {
            Ok(l) => l,
            Err(e) => {
                error!("cannot listen on {}: {e}", socket.display());
                return ExitCode::FAILURE;
            }
        };
        info!(
            "vhost-device-spe listening on {} ({} vCPU(s), cpu {:?}, PMSIDR_EL1={:#x}, PMBIDR_EL1={:#x}{})",
            socket.display(),
            args.vcpus,
            args.cpu,
            features.pmsidr(),
            features.pmbidr(),
            args.synthetic
                .map(|r| format!(", synthetic {r} ops/s per vCPU"))
                .unwrap_or_default()
        );
        let vcpus = args.vcpus;
        let synthetic = args.synthetic;
        let features = features.clone();
        // One front end serves the control socket: the QEMU channel when
        // there is one.
        let control = hub.clone().filter(|_| args.qemu_socket.is_none());
        // So too --record: the files are per vCPU of one VM.
        let record = args.record.clone().filter(|_| args.qemu_socket.is_none());
        let server = std::thread::Builder::new()
            .name("vhu-listener".into())
            .spawn(move || {
                let res = vhu_spe::serve(
                    &mut listener,
                    vcpus,
                    &features,
                    synthetic,
                    choices,
                    control,
                    record.as_deref(),
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
            });
        if let Err(e) = server {
            error!("cannot start the listener thread: {e}");
            return ExitCode::FAILURE;
        }
    }

    let sig = wait_for_signal(&signals);
    info!("received signal {sig}, shutting down");
    // Stops the channel thread (closing any connection) and removes its socket.
    drop(channel);
    // The vhost-user thread is blocked in accept() or serving a VM; exiting
    // ends both and closes the connection. Only the socket file needs care.
    if let Some(socket) = &args.socket_path {
        match std::fs::remove_file(socket) {
            Ok(()) => info!("removed {}", socket.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => error!("cannot remove {}: {e}", socket.display()),
        }
    }
    if LISTENER_FAILED.load(Ordering::SeqCst) {
        error!("exiting: the vhost-user listener failed");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}

/// The control socket's hub, when --control-socket or --scenario asks for
/// one; a scenario file that does not parse is an error naming it.
fn control_hub(
    args: &ServeArgs,
    features: &Features,
    choices: Choices,
) -> Result<Option<Arc<control::Hub>>, String> {
    if args.control_socket.is_none() && args.scenario.is_none() {
        return Ok(None);
    }
    let scenario = match &args.scenario {
        None => Scenario::default(),
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read the scenario {}: {e}", path.display()))?;
            let s: Scenario = serde_json::from_str(&text)
                .map_err(|e| format!("scenario {}: {e}", path.display()))?;
            for a in &s.faults {
                control::check(features, &a.kind)
                    .map_err(|e| format!("scenario {}: {e}", path.display()))?;
            }
            info!(
                "scenario {}: {} fault(s) armed for each VM{}",
                path.display(),
                s.faults.len(),
                s.seed.map(|n| format!(", seed {n}")).unwrap_or_default()
            );
            s
        }
    };
    control::Hub::new(features.clone(), scenario)
        .map(|h| Some(Arc::new(h.with_choices(choices))))
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
