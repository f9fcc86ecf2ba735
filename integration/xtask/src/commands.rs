//! The commands around a guest run: set-up, install, one script's run,
//! the demo, and the catalogue's listing.

use crate::install;
use crate::kernels::KernelSpec;
use crate::prepare::{build_backend, prepare};
use crate::runner::{GuestRun, Measure};
use crate::scenario::{SpeRun, Verdict};
use crate::scenarios;
use crate::setup::{self, Paths, QemuRelease};
use crate::util::tail;
use anyhow::{Context, Result};
use spe_protocol::profile::CpuProfile;
use std::path::PathBuf;
use std::time::Duration;

/// `cargo xtask setup`: every rig, with the paths it uses.
pub fn setup(kernels: &[&'static KernelSpec], releases: &[&'static QemuRelease]) -> Result<bool> {
    let paths = Paths::discover()?;
    for rig in prepare(&paths, kernels, releases)? {
        println!(
            "kernel {} on QEMU {}:",
            rig.spec.name,
            rig.qemu_release.label()
        );
        println!("  qemu:    {}", rig.qemu.display());
        println!("  kernel:  {}", rig.kernel.display());
        println!("  initrd:  {}", rig.initrd.display());
        println!("  backend: {}", rig.backend.display());
    }
    Ok(true)
}

/// `cargo xtask install`: the binaries and the plugin into `prefix`
/// (default `~/.local`).
pub fn install(prefix: Option<PathBuf>, release: &'static QemuRelease) -> Result<bool> {
    let prefix = match prefix {
        Some(p) => p,
        None => PathBuf::from(std::env::var_os("HOME").context("no $HOME: give --prefix")?)
            .join(".local"),
    };
    let paths = Paths::discover()?;
    let env = setup::setup(&paths, &[], &[release])?;
    build_backend(&paths)?;
    let q = &env.qemus[0];
    let launcher = install::install(
        (!q.release.stock).then_some(q.binary.as_path()),
        &paths.target.join("release"),
        &prefix,
    )?;
    println!("installed into {}:", launcher.parent().unwrap().display());
    if q.release.stock {
        println!(
            "  (no QEMU: the stock path runs yours; this build is {})",
            q.binary.display()
        );
    } else {
        println!(
            "  {}  (QEMU {}, patched)",
            install::QEMU_NAME,
            q.release.version
        );
    }
    println!("  vhost-device-spe");
    println!("  spe-qemu  (spe-qemu --help)");
    println!(
        "  {}/{}  (spe-qemu --spe-stock)",
        install::PLUGIN_DIR,
        install::PLUGIN_NAME
    );
    Ok(true)
}

/// `cargo xtask run`: one guest script, its console and backend log
/// printed whole.
pub fn run(
    name: &str,
    backend: bool,
    spe: bool,
    kernel: &'static KernelSpec,
    release: &'static QemuRelease,
) -> Result<bool> {
    let paths = Paths::discover()?;
    let rig = prepare(&paths, &[kernel], &[release])?.remove(0);
    // A scenario of `test` with this guest script, or of this name (whose
    // script then runs), lends its SPE set-up.
    let mut all = scenarios::all();
    let lender = match all.iter().position(|s| s.name == name) {
        Some(i) => Some(all.swap_remove(i)),
        None => all.into_iter().find(|s| s.guest == name),
    };
    let script = lender.as_ref().map_or(name, |s| s.guest);
    let spe = lender.and_then(|s| s.spe).or_else(|| {
        // Scripts outside `test` (the bench's) get full emulation on request.
        spe.then(|| SpeRun::new(CpuProfile::NeoverseN1))
    });
    let out = rig.run(&GuestRun {
        scenario: script.to_string(),
        params: Vec::new(),
        run_name: format!("run-{name}"),
        backend,
        timeout: Duration::from_secs(300),
        kill_backend_when: None,
        spe,
        measure: Measure::Nothing,
    })?;
    print!("{}", out.console);
    eprintln!("--- backend log ---\n{}", out.backend_log);
    eprintln!("{:?} in {:.1} s", out.verdict, out.elapsed.as_secs_f64());
    Ok(out.verdict == Verdict::Pass)
}

/// `cargo xtask demo`: a guest profiled under full emulation, what it saw.
pub fn demo(kernel: &'static KernelSpec) -> Result<bool> {
    let paths = Paths::discover()?;
    let rig = prepare(&paths, &[kernel], &[QemuRelease::main()])?.remove(0);
    eprintln!(
        "==> booting a Debian arm64 guest whose SPE is served by vhost-device-spe \
         (patched QEMU sampling the guest, unmodified kernel, perf around a workload)"
    );
    let out = rig.run(&GuestRun {
        scenario: "spe-demo".into(),
        params: Vec::new(),
        run_name: "demo".into(),
        backend: true,
        timeout: Duration::from_secs(240),
        kill_backend_when: None,
        spe: Some(SpeRun::new(CpuProfile::NeoverseN1)),
        measure: Measure::Nothing,
    })?;
    println!("--- what the guest saw and recorded ---");
    for l in out.console.lines() {
        let l = l.trim_end_matches('\r');
        if let Some(p) = l.strip_prefix("SPE-PROFILE ") {
            println!("  {p}");
        } else if l.contains("SPE-RESULT") || l.contains("arm_spe") {
            println!("  {l}");
        }
    }
    println!("--- backend log ---");
    print!("{}", tail(&out.backend_log, 20));
    println!("--- logs in {} ---", out.dir.display());
    match &out.verdict {
        Verdict::Pass => {
            if let Err(e) = scenarios::check_spe_perf(&out) {
                println!("demo: guest passed but host checks failed: {e}");
                return Ok(false);
            }
            println!(
                "demo: perf in the guest decoded the SPE records vhost-device-spe wrote ({:.1} s)",
                out.elapsed.as_secs_f64()
            );
            Ok(true)
        }
        Verdict::Fail(r) => {
            println!("demo failed: {r}\n--- console tail ---");
            print!("{}", tail(&out.console, scenarios::CONSOLE_TAIL));
            Ok(false)
        }
    }
}

/// `cargo xtask scenarios`: each scenario with the kernels `test` runs
/// it on (and the QEMU, when not the main one); `full`: also those
/// `test --full` adds, marked "by hand".
pub fn list_scenarios(
    kernels: &[&'static KernelSpec],
    releases: &[&'static QemuRelease],
    full: bool,
) {
    let mut by_hand = 0;
    for s in scenarios::all() {
        let mut on = Vec::new();
        for r in releases {
            for k in kernels {
                let name = if r.is_main() {
                    k.name.to_string()
                } else {
                    format!("{}@{}", k.name, r.label())
                };
                match scenarios::selection_on(&s, k, r) {
                    Some(scenarios::Set::Ci) => on.push(name),
                    Some(scenarios::Set::ByHand) if full => on.push(format!("{name} (by hand)")),
                    Some(scenarios::Set::ByHand) => by_hand += 1,
                    None => {}
                }
            }
        }
        if !on.is_empty() {
            println!("{:40} {}", s.name, on.join(" "));
        }
    }
    if by_hand > 0 {
        println!("(and {by_hand} run(s) by hand: `cargo xtask scenarios --full`)");
    }
}
