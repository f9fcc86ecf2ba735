//! `cargo xtask`: set-up, tests and demo of vhost-device-spe on real Debian
//! arm64 guests under a patched QEMU. See integration/README.md.

mod attributes;
mod bench;
mod checkpatch;
mod driver_bugs;
mod faults;
mod host;
mod initramfs;
mod install;
mod kernels;
mod lava;
mod memory;
mod paravirt;
mod perf_test;
mod proofs;
mod records;
mod runner;
mod scenario;
mod scenarios;
mod setup;
mod snapshot;
mod soak;
mod stock;
mod uefi;
mod util;
mod vng;
mod workloads;

use anyhow::{bail, Context, Result};
use kernels::KernelSpec;
use runner::{GuestRun, Measure, Rig};
use scenario::{SpeRun, Verdict, VCPUS};
use setup::{Paths, QemuRelease, QEMU_RELEASES};
use spe_protocol::profile::CpuProfile;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};
use util::{tail, Step};

const USAGE: &str = "usage: cargo xtask <command>
  setup [--kernel K] [--qemu V]
                     install and build everything the guests need (cached)
  test [--no-lint] [--full] [--kernel K] [--qemu V] [SCENARIO...]
                     setup, fmt/clippy/unit tests, then the guest scenarios
                     on every kernel of the matrix (or on K only) on the
                     patched QEMU 10.2.2 and the stock path's scenarios on
                     the unpatched 10.2.2 (7.3); --full: also the runs
                     left to be run by hand; --qemu V: on that QEMU only
  demo [--kernel K]  setup, then boot a guest with the backend attached
  run [--no-backend] [--spe] [--kernel K] [--qemu V] SCENARIO
                     boot one guest scenario script (integration/guest/scenarios);
                     --spe: full emulation for a script no test scenario names
  install [--prefix DIR] [--qemu V]
                     build and install qemu-system-aarch64-spe (QEMU 10.2.2
                     patched; none for stock), vhost-device-spe and the spe-qemu
                     launcher into DIR/bin (default ~/.local), and the TCG
                     plugin into DIR/lib/vhost-device-spe
  scenarios [--full] [--kernel K] [--qemu V]
                     list the scenarios of `test`, with the kernels they run on;
                     --full: also those of `test --full`
  --kernel K         a guest kernel of the matrix: 6.1 (bookworm), 6.12
                     (trixie), 7.3 (trixie-backports); run and demo default
                     to the newest, setup and test to all of them
  --qemu V           10.2.2 (also `10.2`; the default): QEMU with the series
                     (qemu-patches/10.2.2); or `stock`: QEMU 10.2.2
                     unpatched, the stock path's
  soak [--minutes N] [--seed S] [--kernel K]
                     profile in a loop for N minutes (default 60) under
                     full emulation while faults of every kind, stalls,
                     choice changes and two backend restarts come on a
                     seeded schedule (S, default 1); the records written
                     and decoded must add up, the backend's memory and
                     descriptors stay flat, the guest log no WARN (by
                     hand, not in CI; report and plot in the run's folder)
  lava [--kernel K]   the SPE checks as a LAVA job (integration/lava/), run
                     by lava-run (installs Debian's lava-dispatcher) with
                     spe-qemu as the qemu device's QEMU, each check a
                     test case; then on the patched QEMU alone, where the
                     SPE checks must fail (by hand, not in CI; as root)
  virtme-ng [--kernel K]
                     boot K under virtme-ng (from PyPI) with spe-qemu as its
                     QEMU and record with perf; then with the patched QEMU
                     alone, which must have no SPE (by hand, not in CI)
  series-tree DIR    a QEMU 10.2.2 git tree in DIR/src (DIR new) with the
                     series as branch `spe` (git am of qemu-patches/10.2.2/;
                     the cover letter is its description) and DIR/build
                     configured through the set-up's ccache, to work on it
  series-export [--check] DIR
                     write qemu-patches/10.2.2/ from DIR's branch with git
                     format-patch (--check: only compare; `test` checks
                     the set-up's branch gives the committed files)
  series-build       apply the series one patch at a time to a clean QEMU
                     and build after each (slow: by hand, not in CI)
  bios-tables-test
                     QEMU's own ACPI table test of the virt machine
                     (tests/qtest/bios-tables-test) on the patched build,
                     Debian's edk2 as its firmware (by hand, not in CI)
  bench-overhead [--qemu stock] [--runs N] [--pin] [--vcpus 1]
                 [--instructions[=icount|host]] [--ab NAME=QEMU ...]
                 [--rows N,...]
                     time the guest workload with SPE off, on, and sampling
                     (--qemu stock: the stock path's plugin against the
                     same QEMU without it);
                     print a markdown table; --pin: QEMU's vCPU 0 thread
                     alone on the first host CPU this process may use,
                     everything else on the others; --instructions: QEMU
                     under callgrind (installs valgrind), its host
                     instructions in the workload's loop instead of CPU
                     times (3-8 min a run; --runs default 1), under icount
                     (exact on a busy host, not the design's path) or on
                     the host's clock (=host: the design's path, idle
                     host only); --ab (twice or more): spe=off and the
                     default period only, with each QEMU build in turn,
                     and each build's overhead in points (--rows N:
                     row N in place of the default period); --vcpus 1: a
                     guest of one vCPU (perf shares it with the workload;
                     needed with --qemu stock --instructions);
                     --rows 4,2: only those rows of the table (counted
                     from 1) besides the first, which the others are
                     measured against";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match real_main(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn real_main(args: &[String]) -> Result<bool> {
    let Some(cmd) = args.first() else {
        eprintln!("{USAGE}");
        return Ok(false);
    };
    let (kernel, rest) = take_value(&args[1..], "--kernel")?;
    let (prefix, rest) = if cmd == "install" {
        take_value(&rest, "--prefix")?
    } else {
        (None, rest)
    };
    let (qemu, rest) = take_value(&rest, "--qemu")?;
    let kernel = kernel.map(|k| KernelSpec::by_name(&k)).transpose()?;
    let qemu = qemu.map(|q| QemuRelease::by_version(&q)).transpose()?;
    let rest = &rest[..];
    let options: &[&str] = match cmd.as_str() {
        "test" => &["--no-lint", "--full"],
        "scenarios" => &["--full"],
        "run" => &["--no-backend", "--spe"],
        "bench-overhead" => &[
            "--runs",
            "--pin",
            "--instructions",
            "--ab",
            "--vcpus",
            "--rows",
        ],
        "soak" => &["--minutes", "--seed"],
        "series-export" => &["--check"],
        _ => &[],
    };
    if wants_help(cmd, rest, options)? {
        return Ok(true);
    }
    if kernel.is_some()
        && ![
            "setup",
            "test",
            "demo",
            "run",
            "scenarios",
            "virtme-ng",
            "soak",
            "lava",
        ]
        .contains(&cmd.as_str())
    {
        bail!("{cmd}: unknown option \"--kernel\"\n{USAGE}");
    }
    if qemu.is_some()
        && ![
            "setup",
            "test",
            "install",
            "run",
            "series-build",
            "bios-tables-test",
            "scenarios",
            "bench-overhead",
        ]
        .contains(&cmd.as_str())
    {
        bail!("{cmd}: unknown option \"--qemu\"\n{USAGE}");
    }
    let all_releases: Vec<&'static QemuRelease> = QEMU_RELEASES.iter().collect();
    let one_release = vec![qemu.unwrap_or_else(QemuRelease::main)];
    let all_kernels: Vec<&'static KernelSpec> = kernels::MATRIX.iter().collect();
    let one_kernel = vec![kernel.unwrap_or_else(KernelSpec::newest)];
    let kernels = match kernel {
        Some(k) => vec![k],
        None => all_kernels,
    };
    match cmd.as_str() {
        "setup" => {
            let paths = Paths::discover()?;
            let releases = qemu.map_or(all_releases, |q| vec![q]);
            for rig in prepare(&paths, &kernels, &releases)? {
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
        "test" => test(rest, &kernels, qemu),
        "install" => {
            let prefix = match prefix {
                Some(p) => PathBuf::from(p),
                None => PathBuf::from(std::env::var_os("HOME").context("no $HOME: give --prefix")?)
                    .join(".local"),
            };
            let paths = Paths::discover()?;
            let env = setup::setup(&paths, &[], &one_release)?;
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
            println!("  spe-qemu  (spe-qemu --spe-help)");
            println!(
                "  {}/{}  (spe-qemu --spe-stock)",
                install::PLUGIN_DIR,
                install::PLUGIN_NAME
            );
            Ok(true)
        }
        "demo" => demo(&one_kernel),
        "run" => {
            let backend = !rest.iter().any(|a| a == "--no-backend");
            let name = rest
                .iter()
                .find(|a| !a.starts_with("--"))
                .context("run: which scenario script?")?;
            let paths = Paths::discover()?;
            let rig = prepare(&paths, &one_kernel, &one_release)?.remove(0);
            // A scenario of `test` with this guest script lends its SPE set-up.
            let spe = scenarios::all()
                .into_iter()
                .find(|s| s.guest == name.as_str() || s.name == name.as_str())
                .and_then(|s| s.spe)
                .or_else(|| {
                    // Scripts outside `test` (the bench's) get full emulation on request.
                    rest.iter()
                        .any(|a| a == "--spe")
                        .then(|| SpeRun::new(CpuProfile::NeoverseN1))
                });
            let out = rig.run(&GuestRun {
                scenario: name.clone(),
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
        "bench-overhead" => {
            let clock = match rest.iter().find(|a| a.starts_with("--instructions")) {
                None => None,
                Some(a) => Some(match a.strip_prefix("--instructions=") {
                    None => runner::callgrind::Clock::Icount,
                    Some(c) => runner::callgrind::Clock::parse(c)
                        .context("--instructions=icount or --instructions=host")?,
                }),
            };
            let instructions = clock.is_some();
            let runs = match number_after(rest, "--runs", |&n: &usize| n > 0)
                .context("--runs needs a positive number")?
            {
                Some(n) => n,
                // A count does not vary with the machine: one run each.
                None if instructions => 1,
                None => 3,
            };
            let vcpus = number_after(rest, "--vcpus", |n| (1..=VCPUS).contains(n))
                .with_context(|| format!("--vcpus needs a number from 1 to {VCPUS}"))?
                .unwrap_or(VCPUS);
            // Callgrind's QEMU runs one TCG thread (icount implies it).
            if instructions && vcpus > 1 && qemu.is_some_and(|q| q.stock) {
                bail!(
                    "--qemu stock --instructions needs --vcpus 1: on one TCG thread QEMU \
                     10.2.2 instruments several vCPUs wrongly and the plugin does not \
                     sample (plugin/src/threads.rs)"
                );
            }
            let paths = Paths::discover()?;
            // The overhead is measured on the kernel BENCHMARKS.md names.
            // `--qemu stock`: the stock-QEMU path's rows on the unpatched build.
            let mut rig = prepare(&paths, &[&kernels::MATRIX[0]], &one_release)?.remove(0);
            rig.pin_vcpu0 = rest.iter().any(|a| a == "--pin");
            rig.vcpus = vcpus;
            let builds = ab_builds(rest)?;
            let measure = match clock {
                Some(c) => {
                    host::install_missing(&[runner::callgrind::PACKAGE])?;
                    Measure::Instructions(c)
                }
                None => Measure::Nothing,
            };
            let rows = match rest.iter().position(|a| a == "--rows") {
                None => None,
                Some(i) => Some(
                    bench::parse_rows(rest.get(i + 1).map_or("", String::as_str))
                        .context("--rows: numbers of the table's rows, as 2,4")?,
                ),
            };
            if builds.is_empty() {
                bench::run(&rig, runs, measure, rows.as_deref())
            } else {
                // The default period, or the one row asked for.
                let row = match rows.as_deref() {
                    None => 4,
                    Some(&[n]) => n,
                    Some(_) => bail!("--rows: --ab compares one row with spe=off"),
                };
                bench::run_ab(&rig, runs, &builds, row, measure)
            }
        }
        "series-build" => each_series(cmd, qemu, setup::series_build),
        "series-tree" | "series-export" => {
            let dir = rest
                .iter()
                .find(|a| !a.starts_with("--"))
                .with_context(|| format!("{cmd}: which folder? (cargo xtask {cmd} DIR)"))?;
            let paths = Paths::discover()?;
            let release = QemuRelease::main();
            // series-tree's DIR, or its DIR/src.
            let tree = match Path::new(dir).join("src") {
                t if t.join(".git").is_dir() => t,
                _ => PathBuf::from(dir),
            };
            if cmd == "series-tree" {
                setup::new_series_tree(&paths, release, Path::new(dir))?;
            } else if rest.iter().any(|a| a == "--check") {
                setup::check_round_trip(&paths, release, &tree)?;
                println!(
                    "qemu-patches/{}/ is {}'s branch",
                    release.version,
                    tree.display()
                );
            } else {
                setup::series_export(&paths, release, &tree)?;
            }
            Ok(true)
        }
        "bios-tables-test" => each_series(cmd, qemu, setup::bios_tables_test),
        "virtme-ng" => {
            let paths = Paths::discover()?;
            let rig = prepare(&paths, &one_kernel, &one_release)?.remove(0);
            vng::run_vng(&rig, &paths.target.join("integration"))
        }
        "lava" => {
            let paths = Paths::discover()?;
            let rig = prepare(&paths, &one_kernel, &one_release)?.remove(0);
            lava::run_lava(&rig, &paths.repo, &paths.target.join("integration"))
        }
        "soak" => {
            let options = soak::Options {
                minutes: number_after(rest, "--minutes", |&n: &u64| n > 0)?.unwrap_or(60),
                seed: number_after(rest, "--seed", |_: &u64| true)?.unwrap_or(1),
            };
            let paths = Paths::discover()?;
            let rig = prepare(&paths, &one_kernel, &one_release)?.remove(0);
            soak::soak(&rig, &options)
        }
        "scenarios" => {
            let releases = qemu.map_or(all_releases, |q| vec![q]);
            list_scenarios(&kernels, &releases, rest.iter().any(|a| a == "--full"));
            Ok(true)
        }
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(true)
        }
        other => bail!("unknown command {other:?}\n{USAGE}"),
    }
}

/// `cargo xtask scenarios`: each scenario with the kernels `test` runs
/// it on (and the QEMU, when not the main one); `full`: also those
/// `test --full` adds, marked "by hand".
fn list_scenarios(kernels: &[&'static KernelSpec], releases: &[&'static QemuRelease], full: bool) {
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

/// Prints the usage for `-h`/`--help` anywhere after the command, and
/// refuses options the command does not take: a mistyped option must not
/// start a ten-minute run that ignores it.
fn wants_help(cmd: &str, rest: &[String], options: &[&str]) -> Result<bool> {
    for a in rest.iter().filter(|a| a.starts_with('-')) {
        if a == "-h" || a == "--help" {
            println!("{USAGE}");
            return Ok(true);
        }
        // `--opt=value` is `--opt`'s (`--instructions=host`).
        let name = a.split_once('=').map_or(a.as_str(), |(n, _)| n);
        if !options.contains(&name) {
            bail!("{cmd}: unknown option {a:?}\n{USAGE}");
        }
    }
    Ok(false)
}

/// The number after `option` in `rest`: `None` without the option, an
/// error when what follows is not a number `valid` accepts.
fn number_after<T: std::str::FromStr>(
    rest: &[String],
    option: &str,
    valid: impl Fn(&T) -> bool,
) -> Result<Option<T>> {
    let Some(i) = rest.iter().position(|a| a == option) else {
        return Ok(None);
    };
    match rest.get(i + 1).and_then(|n| n.parse::<T>().ok()) {
        Some(n) if valid(&n) => Ok(Some(n)),
        _ => bail!("{option}: not a valid number"),
    }
}

/// `bench-overhead`'s `--ab NAME=QEMU` options, in order.
fn ab_builds(args: &[String]) -> Result<Vec<(String, PathBuf)>> {
    let mut builds = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a != "--ab" {
            continue;
        }
        let v = it.next().map(String::as_str).unwrap_or_default();
        let (name, qemu) = v
            .split_once('=')
            .filter(|(n, q)| !n.is_empty() && !q.is_empty())
            .with_context(|| format!("--ab needs NAME=QEMU, not {v:?}\n{USAGE}"))?;
        let qemu = PathBuf::from(qemu);
        if !qemu.is_file() {
            bail!("--ab {name}={}: no such file", qemu.display());
        }
        builds.push((name.to_string(), qemu));
    }
    if builds.len() == 1 {
        bail!("--ab compares builds: give two or more\n{USAGE}");
    }
    Ok(builds)
}

/// `OPTION VALUE` taken out of `args`.
fn take_value(args: &[String], option: &str) -> Result<(Option<String>, Vec<String>)> {
    let mut rest = Vec::new();
    let mut value = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if a == option {
            let v = it
                .next()
                .filter(|v| !v.starts_with('-'))
                .with_context(|| format!("{option} needs a value\n{USAGE}"))?;
            value = Some(v.clone());
        } else {
            rest.push(a.clone());
        }
    }
    Ok((value, rest))
}

/// Set-up, the backend binary and the guest images: everything a run
/// needs, one rig per QEMU release and kernel (release by release).
fn prepare(
    paths: &Paths,
    kernels: &[&'static KernelSpec],
    releases: &[&'static QemuRelease],
) -> Result<Vec<Rig>> {
    let t = Instant::now();
    let env = setup::setup(paths, kernels, releases)?;
    let backend = build_backend(paths)?;
    let work = paths.work();
    std::fs::create_dir_all(&work)?;
    // Each QEMU installed with the backend and `spe-qemu` in its own
    // prefix (`cargo xtask install`'s layout), for the launcher's runs.
    let mut launchers = Vec::new();
    for q in &env.qemus {
        let prefix = if q.release.is_main() {
            work.join("prefix")
        } else {
            work.join(format!("prefix-{}", q.release.label()))
        };
        // The stock path runs the user's own QEMU (`--spe-qemu`).
        launchers.push(install::install(
            (!q.release.stock).then_some(q.binary.as_path()),
            &paths.target.join("release"),
            &prefix,
        )?);
    }
    let programs = workloads::build(
        &paths.repo.join("integration/guest/workloads"),
        &work.join("workloads"),
    )?;
    let mut images = Vec::new();
    for g in env.guests {
        let initrd = work.join(format!("initramfs-{}.cpio", g.guest.kver));
        let modules = guest_modules(paths, &g.guest)?;
        let t_img = Instant::now();
        initramfs::build(
            &g.guest,
            Some(&g.perf),
            &paths.repo.join("integration/guest"),
            &modules,
            &programs,
            &initrd,
        )
        .with_context(|| format!("building the guest initramfs for {}", g.guest.kver))?;
        eprintln!(
            "==> initramfs {} ({} MB) in {:.1} s (kernel {} from {})",
            initrd.display(),
            std::fs::metadata(&initrd)?.len() >> 20,
            t_img.elapsed().as_secs_f64(),
            g.guest.kver,
            g.guest.kpkg_version,
        );
        images.push((g, initrd, !modules.is_empty()));
    }
    let mut rigs = Vec::new();
    for (q, launcher) in env.qemus.iter().zip(&launchers) {
        for (g, initrd, has_extra_modules) in &images {
            // The main QEMU's runs keep their folders' names.
            let runs = if q.release.is_main() {
                g.spec.name.to_string()
            } else {
                format!("{}-qemu-{}", g.spec.name, q.release.label())
            };
            rigs.push(Rig {
                spec: g.spec,
                qemu: q.binary.clone(),
                qemu_release: q.release,
                kernel: g.guest.kernel.clone(),
                initrd: initrd.clone(),
                backend: backend.clone(),
                launcher: launcher.clone(),
                runs_dir: work.join("runs").join(runs),
                pin_vcpu0: false,
                vcpus: VCPUS,
                has_extra_modules: *has_extra_modules,
                grub_efi: env.grub_efi.clone(),
            });
        }
    }
    let versions: Vec<String> = env.qemus.iter().map(|q| q.release.label()).collect();
    eprintln!(
        "==> set-up complete in {:.1} s (QEMU {})",
        t.elapsed().as_secs_f64(),
        versions.join(", ")
    );
    Ok(rigs)
}

/// Cross-builds the guest drivers (each folder of `guest-driver/`) and
/// every test module under `integration/guest/modules/` against the
/// Debian headers, each in a copy so the source tree stays clean. The
/// modules land in the initramfs under lib/modules/<kver>/extra.
fn guest_modules(paths: &Paths, guest: &setup::Guest) -> Result<Vec<PathBuf>> {
    let Some(headers) = &guest.headers else {
        return Ok(Vec::new());
    };
    let mut dirs = Vec::new();
    for (top, label) in [
        ("guest-driver", "guest-driver"),
        ("integration/guest/modules", "modules"),
    ] {
        let top = paths.repo.join(top);
        if !top.is_dir() {
            continue;
        }
        let mut found: Vec<PathBuf> = std::fs::read_dir(&top)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        found.sort();
        for d in found {
            let name = format!("{label}/{}", d.file_name().unwrap().to_string_lossy());
            dirs.push((name, d));
        }
    }
    let mut kos = Vec::new();
    for (name, src) in dirs {
        kos.extend(build_module_dir(paths, headers, &guest.kver, &name, &src)?);
    }
    Ok(kos)
}

/// `make modules` for one module directory (`name` is its build directory
/// under the work directory and its label), if it has a Kbuild or Makefile.
fn build_module_dir(
    paths: &Paths,
    headers: &Path,
    kver: &str,
    name: &str,
    src: &Path,
) -> Result<Vec<PathBuf>> {
    if !src.join("Kbuild").exists() && !src.join("Makefile").exists() {
        return Ok(Vec::new());
    }
    let step = Step::new(format!("{name}: cross-building the module"));
    let build = paths.work().join(kver).join(name);
    let _ = std::fs::remove_dir_all(&build);
    std::fs::create_dir_all(&build)?;
    for e in std::fs::read_dir(src)? {
        let p = e?.path();
        if p.is_file() {
            std::fs::copy(&p, build.join(p.file_name().unwrap()))?;
        }
    }
    util::run(
        &format!("{name}: make modules (aarch64-linux-gnu-gcc, Debian headers)"),
        Command::new("make")
            .arg("-C")
            .arg(headers)
            .arg(format!("M={}", build.display()))
            .args(["ARCH=arm64", "CROSS_COMPILE=aarch64-linux-gnu-", "modules"]),
    )?;
    let mut kos: Vec<PathBuf> = std::fs::read_dir(&build)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "ko"))
        .collect();
    kos.sort();
    step.done(&format!("{} module(s)", kos.len()));
    Ok(kos)
}

fn cargo() -> Command {
    Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()))
}

/// The guests get the release build: a debug backend writes records about
/// 20 times slower, and under QEMU's sampler it, not the guest, was the
/// bottleneck (about 450 k records/s).
fn build_backend(paths: &Paths) -> Result<PathBuf> {
    let what = "cargo build --release -p vhost-device-spe -p spe-qemu -p spe-plugin";
    let step = Step::new(what);
    let st = cargo()
        .current_dir(&paths.repo)
        .args(["build", "--quiet", "--release"])
        .args([
            "-p",
            "vhost-device-spe",
            "-p",
            "spe-qemu",
            "-p",
            "spe-plugin",
        ])
        .status()
        .context("starting cargo build --release")?;
    if !st.success() {
        bail!("{what} failed ({st})");
    }
    step.done("built");
    Ok(paths.target.join("release/vhost-device-spe"))
}

/// A cargo check of the whole workspace, output passed through.
fn cargo_step(paths: &Paths, args: &[&str]) -> Result<()> {
    let step = Step::new(format!("cargo {}", args.join(" ")));
    let st = cargo()
        .current_dir(&paths.repo)
        .args(args)
        .status()
        .with_context(|| format!("starting cargo {}", args.join(" ")))?;
    if !st.success() {
        bail!("cargo {} failed ({st})", args.join(" "));
    }
    step.done("ok");
    Ok(())
}

fn test(
    args: &[String],
    kernels: &[&'static KernelSpec],
    qemu: Option<&'static QemuRelease>,
) -> Result<bool> {
    let lint = !args.iter().any(|a| a == "--no-lint");
    let full = args.iter().any(|a| a == "--full");
    let only: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let paths = Paths::discover()?;
    // The other QEMUs' smoke set runs on the newest kernel: build them
    // only when it will run (named scenarios run on the main QEMU).
    let releases: Vec<&'static QemuRelease> = match qemu {
        Some(q) => vec![q],
        None if only.is_empty() && kernels.contains(&KernelSpec::newest()) => {
            QEMU_RELEASES.iter().collect()
        }
        None => vec![QemuRelease::main()],
    };
    let rigs = prepare(&paths, kernels, &releases)?;
    if lint {
        cargo_step(&paths, &["fmt", "--all", "--check"])?;
        cargo_step(
            &paths,
            &[
                "clippy",
                "--workspace",
                "--all-targets",
                "--",
                "-D",
                "warnings",
            ],
        )?;
        cargo_step(&paths, &["test", "--workspace"])?;
        checkpatch::check(&paths)?;
        series_checks(&paths, &rigs)?;
    }
    let all = scenarios::all();
    for o in &only {
        if !all.iter().any(|s| &s.name == o) {
            bail!("unknown scenario {o:?}; see `cargo xtask scenarios`");
        }
    }
    let (mut passed, mut failed, mut expected) = (0, 0, 0);
    for rig in &rigs {
        // Named scenarios run wherever they can; otherwise the matrix's
        // selection (see scenarios::selection).
        let chosen: Vec<&scenario::Scenario> = all
            .iter()
            .filter(|s| {
                if only.is_empty() {
                    match scenarios::selection_on(s, rig.spec, rig.qemu_release) {
                        Some(scenarios::Set::Ci) => true,
                        Some(scenarios::Set::ByHand) => full,
                        None => false,
                    }
                } else {
                    only.iter().any(|o| *o == s.name) && scenarios::can_run(s, rig)
                }
            })
            .collect();
        if chosen.is_empty() {
            continue;
        }
        let on = format!("{} on QEMU {}", rig.spec.name, rig.qemu_release.label());
        eprintln!("==> guest scenarios on {on} ({} of them)", chosen.len());
        let sum = scenarios::run_all(rig, &chosen)?;
        println!(
            "kernel {on}: {} passed, {} failed, {} expected failure(s) or skip(s) in passing runs",
            sum.passed, sum.failed, sum.expected
        );
        passed += sum.passed;
        failed += sum.failed;
        expected += sum.expected;
    }
    println!(
        "{passed} passed, {failed} failed, {expected} expected failure(s) or skip(s) in passing runs"
    );
    Ok(failed == 0 && passed > 0)
}

/// The series' round trip (`git format-patch` of the set-up's branch
/// gives the committed files) and QEMU's own checkpatch on each patch,
/// when the patched QEMU was set up from the series.
fn series_checks(paths: &Paths, rigs: &[Rig]) -> Result<()> {
    let release = QemuRelease::main();
    if !rigs.iter().any(|r| r.qemu_release == release) {
        return Ok(());
    }
    if std::env::var_os(release.override_var).is_some_and(|v| !v.is_empty()) {
        eprintln!(
            "==> series checks skipped: {} names the QEMU",
            release.override_var
        );
        return Ok(());
    }
    let tree = setup::series_tree(paths, release)?;
    let step = Step::new(format!(
        "qemu-patches/{}/: git format-patch of the branch gives the committed files",
        release.version
    ));
    setup::check_round_trip(paths, release, &tree)?;
    step.done("byte for byte");
    checkpatch::check_qemu_series(paths, release, &tree)
}

fn demo(kernel: &[&'static KernelSpec]) -> Result<bool> {
    let paths = Paths::discover()?;
    let rig = prepare(&paths, kernel, &[QemuRelease::main()])?.remove(0);
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

/// Runs `check` on the series of `qemu`, or of every patched release;
/// whether each passed.
fn each_series(
    cmd: &str,
    qemu: Option<&'static QemuRelease>,
    check: fn(&Paths, &'static QemuRelease) -> Result<bool>,
) -> Result<bool> {
    let paths = Paths::discover()?;
    let releases = match qemu {
        Some(q) if q.stock => bail!("{cmd}: QEMU {} has no series", q.label()),
        Some(q) => vec![q],
        None => QemuRelease::patched().collect(),
    };
    let mut all = true;
    for release in releases {
        all &= check(&paths, release)?;
    }
    Ok(all)
}
