//! `vhost-device-spe export`: the CLI of [`vhost_device_spe::record::export`].

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;

/// Write what --record DIR kept as raw SPE data, one vcpu<N>.spe per
/// vCPU.
///
/// Each file holds that vCPU's records alone, in order, as the guest's
/// buffer held them (no framing), for tools that read raw SPE buffers
/// (Arm's spe-parser, `decode`). Prints each file written.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The --record directory.
    dir: PathBuf,
    /// Where to write the vcpu<N>.spe files (created if missing; default:
    /// DIR).
    #[arg(long, short, value_name = "OUT")]
    output: Option<PathBuf>,
}

pub fn run(args: ExportArgs) -> ExitCode {
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
