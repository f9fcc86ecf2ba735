//! `vhost-device-spe report`: the CLI of [`vhost_device_spe::report`].

use std::io;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use vhost_device_spe::report::{self, Options};

/// Summarise what --record DIR kept, as `perf report` would: the
/// hottest symbols per exception level (kernel PCs named from the
/// guest kernel's System.map), data addresses and latencies.
#[derive(Debug, Args)]
pub struct ReportArgs {
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

pub fn run(args: ReportArgs) -> ExitCode {
    let opts = Options {
        dir: args.dir,
        system_map: args.system_map,
        kaslr_offset: args.kaslr_offset,
        top: args.top,
        json: args.json,
        flamegraph: args.flamegraph,
    };
    match report::run(&opts, &mut io::stdout().lock()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
