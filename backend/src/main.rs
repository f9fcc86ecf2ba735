//! `vhost-device-spe`: serves the virtio-spe device to QEMU over vhost-user
//! and/or the SPE model to a patched QEMU over the QEMU channel.

mod daemon;
mod tools;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use tools::{ctl, decode, export, report};

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
    serve: daemon::ServeArgs,

    #[command(subcommand)]
    command: Option<Command>,
}

/// Modes other than serving (their help is their arguments' doc comment).
#[derive(Debug, Subcommand)]
enum Command {
    Decode(decode::DecodeArgs),
    Ctl(ctl::CtlArgs),
    Report(report::ReportArgs),
    Export(export::ExportArgs),
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info")).init();
    let cli = Cli::parse();
    match cli.command {
        None => daemon::run(cli.serve),
        Some(Command::Decode(args)) => decode::run(args),
        Some(Command::Ctl(args)) => ctl::run(args),
        Some(Command::Report(args)) => report::run(args),
        Some(Command::Export(args)) => export::run(args),
    }
}
