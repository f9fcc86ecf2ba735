//! `cargo xtask`: set-up, tests and demo of vhost-device-spe on real Debian
//! arm64 guests under QEMU. See integration/README.md.

mod attributes;
mod by_hand;
mod checkpatch;
mod ci;
mod cli;
mod commands;
mod driver_bugs;
mod faults;
mod host;
#[cfg(test)]
mod house;
mod initramfs;
mod install;
mod kernels;
mod kvm;
mod memory;
mod paravirt;
mod perf_test;
mod prepare;
mod proofs;
mod records;
mod runner;
mod scenario;
mod scenarios;
mod selftest;
mod setup;
mod snapshot;
mod stock;
mod uefi;
mod util;
mod workloads;

use anyhow::Result;
use clap::Parser;
use cli::{Cli, Command};
use kernels::KernelSpec;
use setup::{QemuRelease, QEMU_RELEASES};
use std::process::ExitCode;

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Whether the command succeeded.
fn run(command: Command) -> Result<bool> {
    // Kernels: the one asked for, else every kernel of the matrix (or the
    // newest, for the commands that boot one guest).
    let every = |k: cli::Kernel| match k.spec {
        Some(k) => vec![k],
        None => kernels::MATRIX.iter().collect(),
    };
    let one = |k: cli::Kernel| k.spec.unwrap_or_else(KernelSpec::newest);
    let releases = |q: cli::Qemu| match q.release {
        Some(q) => vec![q],
        None => QEMU_RELEASES.iter().collect(),
    };
    let main_or = |q: cli::Qemu| q.release.unwrap_or_else(QemuRelease::main);
    match command {
        Command::Setup { kernel, qemu } => commands::setup(&every(kernel), &releases(qemu)),
        Command::Test {
            no_lint,
            full,
            kernel,
            qemu,
            only,
        } => ci::test(!no_lint, full, &only, &every(kernel), qemu.release),
        Command::Demo { kernel } => commands::demo(one(kernel)),
        Command::Run {
            no_backend,
            spe,
            kernel,
            qemu,
            scenario,
        } => commands::run(&scenario, !no_backend, spe, one(kernel), main_or(qemu)),
        Command::Install { prefix, qemu } => commands::install(prefix, main_or(qemu)),
        Command::Scenarios { markdown: true, .. } => {
            print!("{}", scenarios::markdown());
            Ok(true)
        }
        Command::Scenarios {
            full, kernel, qemu, ..
        } => {
            commands::list_scenarios(&every(kernel), &releases(qemu), full);
            Ok(true)
        }
        Command::Soak {
            minutes,
            seed,
            kernel,
        } => by_hand::soak(&by_hand::soak::Options { minutes, seed }, one(kernel)),
        Command::Lava { kernel } => by_hand::lava(one(kernel)),
        Command::Lab { remove, kernel } => by_hand::lab(&every(kernel), remove),
        Command::VirtmeNg { kernel } => by_hand::virtme_ng(one(kernel)),
        Command::KvmSelftests { kernel, mode } => by_hand::kvm_selftests(one(kernel), mode),
        Command::SeriesTree { dir } => by_hand::series_tree(&dir),
        Command::SeriesExport { check, dir } => by_hand::series_export(&dir, check),
        Command::SeriesBuild { qemu } => {
            by_hand::each_series("series-build", qemu.release, setup::series_build)
        }
        Command::BiosTablesTest { qemu } => {
            by_hand::each_series("bios-tables-test", qemu.release, setup::bios_tables_test)
        }
        Command::BenchOverhead(bench) => by_hand::bench_overhead(&bench),
    }
}
