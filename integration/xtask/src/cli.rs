//! `cargo xtask`'s command line. A mistyped option must not start a
//! ten-minute run that ignores it, so clap refuses what a command does
//! not take.

use crate::kernels::KernelSpec;
use crate::runner::callgrind::Clock;
use crate::scenario::VCPUS;
use crate::setup::QemuRelease;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

/// Set-up, tests and demo of vhost-device-spe on real Debian arm64 guests
/// under QEMU (integration/README.md).
#[derive(Parser)]
#[command(name = "cargo xtask", bin_name = "cargo xtask")]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// `--kernel K`: a guest kernel of the matrix.
#[derive(Args, Clone, Copy)]
pub struct Kernel {
    /// A guest kernel of the matrix: 6.1 (bookworm), 6.12 (trixie), 7.3
    /// (trixie-backports); run and demo default to the newest, setup and
    /// test to all of them
    #[arg(long = "kernel", value_name = "K", value_parser = kernel)]
    pub spec: Option<&'static KernelSpec>,
}

/// `--qemu V`: one QEMU of the set-up.
#[derive(Args, Clone, Copy)]
pub struct Qemu {
    /// 10.2.2 (also `10.2`; the default): QEMU with the series
    /// (qemu-patches/10.2.2); `stock`: QEMU 10.2.2 unpatched, the stock
    /// path's; `11.1.3`: Debian's QEMU, for the stock path's smoke set
    #[arg(long = "qemu", value_name = "V", value_parser = qemu)]
    pub release: Option<&'static QemuRelease>,
}

#[derive(Subcommand)]
pub enum Command {
    /// Install and build everything the guests need (cached)
    Setup {
        #[command(flatten)]
        kernel: Kernel,
        #[command(flatten)]
        qemu: Qemu,
    },
    /// Set-up, fmt/clippy/unit tests, then the guest scenarios on every
    /// kernel of the matrix (or on K only) on the patched QEMU and the
    /// stock path's scenarios on the unpatched one (7.3); writes the
    /// results to target/integration/results.md
    Test {
        /// Skip the cargo fmt/clippy/test steps, checkpatch and the
        /// series' round trip
        #[arg(long)]
        no_lint: bool,
        /// Also the runs left to be run by hand
        #[arg(long)]
        full: bool,
        #[command(flatten)]
        kernel: Kernel,
        #[command(flatten)]
        qemu: Qemu,
        /// Only these scenarios, wherever they can run
        #[arg(value_name = "SCENARIO")]
        only: Vec<String>,
    },
    /// Set-up, then boot a guest with the backend attached and show its
    /// profile
    Demo {
        #[command(flatten)]
        kernel: Kernel,
    },
    /// Boot one guest scenario script (integration/guest/scenarios) and
    /// print its console and backend log
    Run {
        /// Without the backend
        #[arg(long)]
        no_backend: bool,
        /// Full emulation for a script no test scenario names
        #[arg(long)]
        spe: bool,
        #[command(flatten)]
        kernel: Kernel,
        #[command(flatten)]
        qemu: Qemu,
        /// The script (or a scenario of `test`, whose SPE set-up it lends)
        scenario: String,
    },
    /// Build and install qemu-system-aarch64-spe (none for stock),
    /// vhost-device-spe and spe-qemu into DIR/bin, and the TCG plugin into
    /// DIR/lib/vhost-device-spe
    Install {
        /// Where to install [default: ~/.local]
        #[arg(long, value_name = "DIR")]
        prefix: Option<PathBuf>,
        #[command(flatten)]
        qemu: Qemu,
    },
    /// List the scenarios of `test`, with the kernels they run on
    Scenarios {
        /// Also those of `test --full`
        #[arg(long)]
        full: bool,
        /// Print the table of every scenario and what it proves, for
        /// integration/README.md
        #[arg(long, conflicts_with_all = ["full", "spec", "release"])]
        markdown: bool,
        #[command(flatten)]
        kernel: Kernel,
        #[command(flatten)]
        qemu: Qemu,
    },
    /// By hand: profile in a loop under faults, stalls, choice changes and
    /// backend restarts on a seeded schedule; the records must add up and
    /// the backend's memory and descriptors stay flat
    Soak {
        /// How long
        #[arg(long, default_value_t = 60, value_parser = clap::value_parser!(u64).range(1..))]
        minutes: u64,
        /// The schedule's seed
        #[arg(long, default_value_t = 1)]
        seed: u64,
        #[command(flatten)]
        kernel: Kernel,
    },
    /// By hand, as root: the SPE checks as a LAVA job (integration/lava/)
    /// run by lava-run with spe-qemu as the device's QEMU, then on the
    /// patched QEMU alone, where they must fail
    Lava {
        #[command(flatten)]
        kernel: Kernel,
    },
    /// By hand, as root: a LAVA lab on this machine (lava-server, its
    /// PostgreSQL, lava-dispatcher as its worker, two qemu-spe devices and
    /// a plain qemu one) that runs the SPE job for each kernel and reads
    /// the results from the server's API
    Lab {
        /// Purge the packages the lab installed instead
        #[arg(long)]
        remove: bool,
        #[command(flatten)]
        kernel: Kernel,
    },
    /// By hand: boot K under virtme-ng with spe-qemu as its QEMU and record
    /// with perf; then with the patched QEMU alone, which has no SPE
    #[command(name = "virtme-ng")]
    VirtmeNg {
        #[command(flatten)]
        kernel: Kernel,
    },
    /// By hand: the kernel's KVM selftests (set_id_regs, debug-exceptions,
    /// vpmu_counter_access, get-reg-list), built from K's source package,
    /// in the guest at EL2 in each KVM mode, alone and while perf records
    /// SPE; their outcomes must not differ
    #[command(name = "kvm-selftests")]
    KvmSelftests {
        #[command(flatten)]
        kernel: Kernel,
        /// Only this KVM mode (vhe, nvhe, protected); all three by default
        #[arg(long, value_parser = ["vhe", "nvhe", "protected"])]
        mode: Option<String>,
    },
    /// A QEMU git tree in DIR/src (DIR new) with the series as branch
    /// `spe`, and DIR/build configured through the set-up's ccache
    SeriesTree { dir: PathBuf },
    /// Write qemu-patches/10.2.2/ from DIR's branch with git format-patch
    SeriesExport {
        /// Only compare (`test` checks the set-up's branch gives the
        /// committed files)
        #[arg(long)]
        check: bool,
        dir: PathBuf,
    },
    /// By hand: apply the series one patch at a time to a clean QEMU and
    /// build after each
    SeriesBuild {
        #[command(flatten)]
        qemu: Qemu,
    },
    /// By hand: QEMU's own ACPI table test of the virt machine on the
    /// patched build, Debian's edk2 as its firmware
    BiosTablesTest {
        #[command(flatten)]
        qemu: Qemu,
    },
    /// By hand: time the guest workload with SPE off, on, and sampling,
    /// as a markdown table (BENCHMARKS.md)
    BenchOverhead(Bench),
}

/// `bench-overhead`'s options.
#[derive(Args)]
pub struct Bench {
    /// `stock`: the stock path's plugin against the same QEMU without it
    #[command(flatten)]
    pub qemu: Qemu,
    /// Rounds per configuration [default: 3, or 1 with --instructions]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub runs: Option<u32>,
    /// QEMU's vCPU 0 thread alone on the first host CPU this process may
    /// use, everything else on the others
    #[arg(long)]
    pub pin: bool,
    /// The guest's vCPUs (1: perf shares the workload's; needed with
    /// --qemu stock --instructions)
    #[arg(long, default_value_t = VCPUS, value_parser = clap::value_parser!(u32).range(1..=VCPUS as i64))]
    pub vcpus: u32,
    /// QEMU under callgrind (installs valgrind): its host instructions in
    /// the workload's loop instead of CPU times, under icount (exact on a
    /// busy host) or on the host's clock (the design's path, idle host
    /// only)
    #[arg(long, value_name = "CLOCK", num_args = 0..=1, require_equals = true,
          default_missing_value = "icount", value_parser = clock)]
    pub instructions: Option<Clock>,
    /// Compare builds (twice or more): spe=off and the default period (or
    /// the one row --rows names) with each QEMU in turn
    #[arg(long, value_name = "NAME=QEMU", value_parser = ab_build)]
    pub ab: Vec<(String, PathBuf)>,
    /// Only these rows of the table (counted from 1) besides the first,
    /// which the others are measured against
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = row)]
    pub rows: Option<Vec<usize>>,
}

fn kernel(name: &str) -> Result<&'static KernelSpec, String> {
    KernelSpec::by_name(name).map_err(|e| format!("{e:#}"))
}

fn qemu(version: &str) -> Result<&'static QemuRelease, String> {
    QemuRelease::by_version(version).map_err(|e| format!("{e:#}"))
}

fn clock(s: &str) -> Result<Clock, String> {
    Clock::parse(s).ok_or_else(|| "icount or host".into())
}

fn row(n: &str) -> Result<usize, String> {
    match n.trim().parse() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err("a row number, counted from 1".into()),
    }
}

fn ab_build(v: &str) -> Result<(String, PathBuf), String> {
    let (name, qemu) = v
        .split_once('=')
        .filter(|(n, q)| !n.is_empty() && !q.is_empty())
        .ok_or("NAME=QEMU")?;
    let qemu = PathBuf::from(qemu);
    if !qemu.is_file() {
        return Err(format!("{}: no such file", qemu.display()));
    }
    Ok((name.to_string(), qemu))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    fn parse(args: &str) -> Result<Cli, clap::Error> {
        Cli::try_parse_from(std::iter::once("xtask").chain(args.split_whitespace()))
    }

    #[test]
    fn the_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn test_takes_options_between_scenarios() {
        let Command::Test {
            no_lint,
            kernel,
            only,
            ..
        } = parse("test --no-lint --kernel 7.3 spe-ipis spe-perf")
            .unwrap()
            .command
        else {
            panic!("not test");
        };
        assert!(no_lint);
        assert_eq!(kernel.spec.unwrap().name, "7.3");
        assert_eq!(only, ["spe-ipis", "spe-perf"]);
    }

    #[test]
    fn the_markdown_table_is_of_every_scenario() {
        assert!(matches!(
            parse("scenarios --markdown").unwrap().command,
            Command::Scenarios { markdown: true, .. }
        ));
        assert!(parse("scenarios --markdown --full").is_err());
        assert!(parse("scenarios --markdown --kernel 7.3").is_err());
    }

    #[test]
    fn a_mistyped_option_is_refused() {
        assert!(parse("test --no-lnt").is_err());
        assert!(parse("demo --qemu stock").is_err());
        assert!(parse("test --kernel 5.10").is_err());
    }

    #[test]
    fn instructions_takes_its_clock_after_an_equals_sign() {
        let bench = |args| match parse(args).unwrap().command {
            Command::BenchOverhead(b) => b,
            _ => panic!("not bench-overhead"),
        };
        assert!(bench("bench-overhead").instructions.is_none());
        assert!(matches!(
            bench("bench-overhead --instructions").instructions,
            Some(Clock::Icount)
        ));
        assert!(matches!(
            bench("bench-overhead --instructions=host --runs 3").instructions,
            Some(Clock::Host)
        ));
        assert_eq!(bench("bench-overhead --rows 4,2").rows, Some(vec![4, 2]));
        assert!(parse("bench-overhead --rows 0").is_err());
        assert!(parse("bench-overhead --instructions=wall").is_err());
        assert!(parse("bench-overhead --ab A").is_err());
        assert!(parse("bench-overhead --vcpus 0").is_err());
    }
}
