use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Arm SPE device model for QEMU aarch64 guests.
#[derive(Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the packets of an SPE buffer in `perf report -D` style.
    Decode {
        /// File holding raw SPE records, or `-` for stdin.
        input: String,
    },
}

fn main() -> ExitCode {
    env_logger::init();
    let cli = Cli::parse();
    match cli.command {
        Command::Decode { input } => {
            let mut out = io::BufWriter::new(io::stdout().lock());
            let res = vhost_device_spe::decode::run(&input, &mut out);
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
    }
}
