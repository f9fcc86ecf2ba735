//! `vhost-device-spe decode`: the CLI of [`vhost_device_spe::decode`].

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Args;

/// Print the packets of an SPE buffer in `perf report -D` style.
///
/// A --record file (vcpu<N>.rec) is recognised by its magic and its
/// records decoded as the guest's buffer held them, after a `#` line
/// naming it; a --record directory, each vCPU's file in turn.
#[derive(Debug, Args)]
pub struct DecodeArgs {
    /// File holding raw SPE records (e.g. an `export`ed vcpu<N>.spe),
    /// a --record file or directory, or `-` for stdin.
    input: String,
}

pub fn run(args: DecodeArgs) -> ExitCode {
    let mut out = io::BufWriter::new(io::stdout().lock());
    let res = vhost_device_spe::decode::run(&args.input, &mut out);
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
