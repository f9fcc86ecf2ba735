//! Boots one guest: starts the backend (optionally) and QEMU, waits with a
//! timeout, collects the console, the backend log and what the backend's
//! control socket says, and decides the run's verdict from the guest's
//! result lines.
//!
//! A run whose backend the runner starts for full emulation or the
//! paravirtual path is *controlled*: the backend gets a control socket,
//! which the runner watches for delivered faults, and QEMU pauses at the
//! guest's power-off instead of exiting, so that the runner can ask the
//! backend for its SPUs (`query-spu`) while it still has the VM; then it
//! ends QEMU through QMP. The answers go to the run's `control.json` and
//! [`RunOutput::control`].

pub mod callgrind;
mod command;
mod control;
pub mod cputime;
mod live;
mod marker;
mod pin;
mod process;
mod qmp;
mod wait;

use live::Unwatched;
pub use live::{Live, Watcher};
use wait::Ending;

use crate::kernels::KernelSpec;
use crate::scenario::{parse_console, Boot, Control, RunOutput, Scenario, SpeRun};
use crate::setup::QemuRelease;
use anyhow::{Context, Result};
use command::ctl_socket;
use control::FaultWatch;
use process::{read_lossy, socket_dir, ChildGuard, RemoveOnDrop};
use qmp::Qmp;
use std::cell::RefCell;
use std::fs;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// What to boot: a [`Scenario`]'s guest, or a guest script of a command
/// (`run`, `demo`, the bench) with the same settings.
#[derive(Clone, Debug)]
pub struct GuestRun {
    /// The guest script (`spe.scenario=`, [`Scenario::guest`]).
    pub scenario: String,
    /// More `spe.KEY=VALUE` parameters for the guest script (its
    /// `$spe_KEY`).
    pub params: Vec<(&'static str, String)>,
    /// The folder of this run's logs ([`Scenario::name`]).
    pub run_name: String,
    pub backend: bool,
    pub timeout: Duration,
    pub kill_backend_when: Option<&'static str>,
    pub spe: Option<SpeRun>,
    /// What the runner measures between the guest's [`cputime::START`]
    /// and [`cputime::END`] markers.
    pub measure: Measure,
}

/// What a run measures in the guest's timed window (the bench's).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Measure {
    #[default]
    Nothing,
    /// Host CPU time by thread ([`RunOutput::cpu`]).
    CpuTime,
    /// QEMU's host instructions, under callgrind
    /// ([`RunOutput::instructions`]).
    Instructions(callgrind::Clock),
}

impl Measure {
    /// Whether the guest's own times mean anything: under callgrind the
    /// workload's clock is icount's, or the host's stretched by callgrind.
    pub fn times_the_guest(self) -> bool {
        self.callgrind().is_none()
    }

    /// The clock of a run under callgrind, if it is one.
    pub fn callgrind(self) -> Option<callgrind::Clock> {
        match self {
            Measure::Instructions(c) => Some(c),
            _ => None,
        }
    }
}

impl GuestRun {
    /// The run of scenario `s`.
    pub fn of(s: &Scenario) -> GuestRun {
        GuestRun {
            scenario: s.guest.to_string(),
            params: Vec::new(),
            run_name: s.name.to_string(),
            backend: s.backend,
            timeout: s.timeout,
            kill_backend_when: s.kill_backend_when,
            spe: s.spe.clone(),
            measure: Measure::Nothing,
        }
    }

    /// Whether the runner starts a backend for SPE (not `spe-qemu`'s own),
    /// with a control socket it asks (see the module's documentation).
    fn controlled(&self) -> bool {
        self.backend && self.spe.as_ref().is_some_and(|s| !s.launcher)
    }

    /// How long QEMU may take to answer QMP at its start, and to exit
    /// after QMP's `quit`: longer under callgrind, which runs it tens of
    /// times slower.
    fn qemu_grace(&self) -> Duration {
        Duration::from_secs(if self.measure.callgrind().is_some() {
            120
        } else {
            10
        })
    }

    fn launcher(&self) -> bool {
        self.spe.as_ref().is_some_and(|s| s.launcher)
    }
}

/// Fixed inputs shared by every run.
#[derive(Clone)]
pub struct Rig {
    /// The kernel of the matrix this rig boots.
    pub spec: &'static KernelSpec,
    pub qemu: PathBuf,
    /// The release `qemu` is built from (its vhost-user device's name).
    pub qemu_release: &'static QemuRelease,
    pub kernel: PathBuf,
    pub initrd: PathBuf,
    /// Whether the image holds the modules built against the kernel's
    /// headers (guest-driver/, integration/guest/modules): every kernel of
    /// the matrix once its headers are set up.
    pub has_extra_modules: bool,
    pub backend: PathBuf,
    /// `spe-qemu`, installed with the QEMU and backend above into a
    /// prefix of the build tree (`cargo xtask install`'s layout).
    pub launcher: PathBuf,
    pub runs_dir: PathBuf,
    /// Give QEMU's vCPU 0 thread a host CPU to itself (the bench's
    /// `--pin`): see [`pin::pin_vcpu0`].
    pub pin_vcpu0: bool,
    /// The guest's vCPUs (`-smp`, and the backend's `--vcpus`):
    /// [`crate::scenario::VCPUS`] but in the bench's `--vcpus 1`.
    pub vcpus: u32,
    /// GRUB's EFI image for the disk boots ([`crate::uefi::build_disk`]).
    pub grub_efi: PathBuf,
}

impl Rig {
    pub fn run(&self, spec: &GuestRun) -> Result<RunOutput> {
        self.run_watched(spec, &mut Unwatched)
    }

    /// [`Rig::run`], with `watcher` called on every poll while the guest
    /// runs.
    pub fn run_watched(&self, spec: &GuestRun, watcher: &mut dyn Watcher) -> Result<RunOutput> {
        let run = Run::new(self, spec)?;
        let start = Instant::now();
        let (mut backend, early_failure) = run.start_backend()?;
        let (ending, control) = match early_failure {
            Some(reason) => (Ending::BackendDied(reason), Control::default()),
            None => run.boot(backend.as_mut(), watcher)?,
        };
        let elapsed = start.elapsed();
        if let Some(b) = backend.as_mut() {
            run.stop_backend(b);
        }
        crate::uefi::DiskFiles::in_dir(&run.dir).remove();
        run.output(&ending, elapsed, control)
    }
}

/// One run under way: its folder, files and sockets.
struct Run<'a> {
    rig: &'a Rig,
    spec: &'a GuestRun,
    dir: PathBuf,
    console: PathBuf,
    backend_log: PathBuf,
    /// The backend's channel socket; its control socket and QEMU's QMP
    /// socket are named after it.
    socket: PathBuf,
    /// The timed window's CPU time or instructions, when
    /// [`GuestRun::measure`] asks (the wait loop fills them in).
    cpu: RefCell<Option<cputime::CpuWindow>>,
    instr: RefCell<Option<callgrind::InstrWindow>>,
    _cleanup: [RemoveOnDrop; 3],
}

impl<'a> Run<'a> {
    /// A fresh folder for the run's logs, and socket names.
    fn new(rig: &'a Rig, spec: &'a GuestRun) -> Result<Self> {
        let dir = rig.runs_dir.join(&spec.run_name);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        // Unix socket paths are limited to 108 bytes, and the checkout path
        // is not ours to choose: keep the socket in the temp directory.
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let socket = socket_dir(&std::env::temp_dir()).join(format!(
            "vhost-device-spe-{}-{}.sock",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_file(&socket);
        let instr = spec
            .measure
            .callgrind()
            .map(|_| callgrind::InstrWindow::new(callgrind_out(&dir)));
        Ok(Run {
            rig,
            spec,
            console: dir.join("console.log"),
            backend_log: dir.join("backend.log"),
            _cleanup: [
                RemoveOnDrop(socket.clone()),
                RemoveOnDrop(ctl_socket(&socket)),
                RemoveOnDrop(command::qmp_socket(&socket)),
            ],
            socket,
            dir,
            cpu: RefCell::new((spec.measure == Measure::CpuTime).then(cputime::CpuWindow::default)),
            instr: RefCell::new(instr),
        })
    }

    fn ctl_socket(&self) -> PathBuf {
        ctl_socket(&self.socket)
    }

    /// The backend, if the run has one the runner starts, once it has
    /// made its socket (QEMU's chardev connects once, at start-up); or
    /// why it did not.
    fn start_backend(&self) -> Result<(Option<ChildGuard>, Option<String>)> {
        if !self.spec.backend || self.spec.launcher() {
            return Ok((None, None));
        }
        let mut b = self.spawn_backend(false)?;
        let deadline = Instant::now() + Duration::from_secs(10);
        let failure = loop {
            if self.socket.exists() {
                break None;
            }
            if let Some(st) = b.try_wait()? {
                break Some(format!("backend exited ({st}) before creating its socket"));
            }
            if Instant::now() > deadline {
                break Some("backend did not create its socket within 10 s".into());
            }
            sleep(Duration::from_millis(20));
        };
        Ok((Some(b), failure))
    }

    /// Starts the backend the run needs, its output to `backend.log`
    /// (`append`: after a previous process's, for a restart).
    fn spawn_backend(&self, append: bool) -> Result<ChildGuard> {
        let log = fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(&self.backend_log)?;
        if let Some(json) = self.spec.spe.as_ref().and_then(|s| s.faults) {
            let file = self.dir.join("faults.json");
            fs::write(&file, json).with_context(|| format!("writing {}", file.display()))?;
        }
        ChildGuard::spawn(
            "the backend",
            self.rig
                .backend_command(self.spec, &self.dir, &self.socket)
                .stdout(log.try_clone()?)
                .stderr(log),
        )
    }

    /// QEMU (or `spe-qemu`), its console to `console.log`; for a disk
    /// boot, on the disk built for it.
    fn start_qemu(&self) -> Result<ChildGuard> {
        if self.spec.spe.as_ref().is_some_and(|s| s.boot == Boot::Disk) {
            crate::uefi::build_disk(
                &self.rig.grub_efi,
                &self.rig.kernel,
                &self.rig.initrd,
                &self.rig.cmdline(self.spec),
                &crate::uefi::DiskFiles::in_dir(&self.dir),
            )
            .context("building the run's disk")?;
        }
        let stderr = fs::File::create(self.dir.join("qemu.stderr.log"))?;
        let qemu = if self.spec.launcher() {
            // -nographic: the serial console is spe-qemu's stdout.
            ChildGuard::spawn(
                "spe-qemu",
                self.rig
                    .launcher_command(self.spec, &self.backend_log)
                    .stdout(fs::File::create(&self.console)?)
                    .stderr(stderr),
            )?
        } else {
            ChildGuard::spawn(
                "QEMU",
                self.rig
                    .qemu_command(self.spec, &self.console, &self.socket)
                    .stdout(fs::File::create(self.dir.join("qemu.log"))?)
                    .stderr(stderr),
            )?
        };
        fs::write(self.dir.join("qemu.pid"), qemu.pid().to_string())?;
        Ok(qemu)
    }

    /// Boots the guest and waits for the run to end; for a controlled run,
    /// with what the backend's control socket said.
    fn boot(
        &self,
        backend: Option<&mut ChildGuard>,
        watcher: &mut dyn Watcher,
    ) -> Result<(Ending, Control)> {
        let controlled = self.spec.controlled();
        let watch = match controlled
            .then(|| FaultWatch::start(&self.ctl_socket()))
            .transpose()
        {
            Ok(w) => w,
            Err(e) => {
                let why = format!("the backend's control socket: {e:#}");
                return Ok((Ending::BackendDied(why), Control::default()));
            }
        };
        let mut qemu = self.start_qemu()?;
        if self.rig.pin_vcpu0 {
            pin::pin_vcpu0(qemu.pid(), backend.as_ref().map(|b| b.pid()))?;
        }
        let qmp_socket = command::qmp_socket(&self.socket);
        let mut qmp = match controlled
            .then(|| Qmp::connect(&qmp_socket, &mut qemu, self.spec.qemu_grace()))
            .transpose()
        {
            Ok(q) => q,
            Err(e) => {
                qemu.kill();
                return Ok((Ending::QmpFailed(format!("{e:#}")), Control::default()));
            }
        };
        let (ending, spu) = self.wait(&mut qemu, backend, qmp.as_mut(), watcher)?;
        let faults = watch.map(FaultWatch::finish).unwrap_or_default();
        Ok((ending, Control { spu, faults }))
    }

    /// Stops the backend once QEMU is gone.
    fn stop_backend(&self, b: &mut ChildGuard) {
        // The backend logs its statistics when QEMU hangs up: give it a
        // moment to, so that backend.log is whole for a reader (the
        // checks read control.json).
        if self.spec.spe.is_some() {
            let deadline = Instant::now() + Duration::from_secs(2);
            while Instant::now() < deadline
                && !read_lossy(&self.backend_log).contains("stats total:")
                && matches!(b.try_wait(), Ok(None))
            {
                sleep(Duration::from_millis(20));
            }
        }
        b.kill();
    }

    /// The run's logs and results, and its verdict.
    fn output(&self, ending: &Ending, elapsed: Duration, control: Control) -> Result<RunOutput> {
        let console = read_lossy(&self.console);
        let mut qemu_stderr = read_lossy(&self.dir.join("qemu.stderr.log"));
        qemu_stderr.push_str(&read_lossy(&self.dir.join("qemu.log")));
        let parsed = parse_console(&console, &self.spec.scenario);
        if self.spec.spe.as_ref().is_some_and(|s| s.record) {
            self.report(&console)?;
        }
        if self.spec.controlled() {
            fs::write(
                self.dir.join(Control::FILE),
                serde_json::to_string_pretty(&control.to_json())?,
            )?;
        }
        Ok(RunOutput {
            verdict: wait::decide(ending, &parsed, &qemu_stderr),
            results: parsed.results,
            console,
            backend_log: read_lossy(&self.backend_log),
            elapsed,
            dir: self.dir.clone(),
            control,
            cpu: self
                .cpu
                .borrow()
                .as_ref()
                .and_then(cputime::CpuWindow::taken),
            instructions: self.instr.borrow().as_ref().map(|w| w.taken()),
        })
    }

    /// `vhost-device-spe report --json` of the run's records into
    /// `report.json` (stderr into `report.err`), with the kernel's text
    /// symbols from the console's `SPE-KSYM` lines in `kallsyms` (run-time
    /// addresses: no KASLR offset).
    fn report(&self, console: &str) -> Result<()> {
        let dir = &self.dir;
        let ksyms: String = console
            .lines()
            .filter_map(|l| l.trim_end_matches('\r').strip_prefix("SPE-KSYM "))
            .map(|l| format!("{l}\n"))
            .collect();
        fs::write(dir.join("kallsyms"), ksyms)?;
        let st = std::process::Command::new(&self.rig.backend)
            .arg("report")
            .arg(dir.join("records"))
            .args(["--json", "--top", "10", "--system-map"])
            .arg(dir.join("kallsyms"))
            .stdout(fs::File::create(dir.join("report.json"))?)
            .stderr(fs::File::create(dir.join("report.err"))?)
            .status()
            .context("running vhost-device-spe report")?;
        fs::write(dir.join("report.status"), st.to_string())?;
        Ok(())
    }
}

/// Where callgrind writes in a run's folder ([`Measure::Instructions`]).
fn callgrind_out(dir: &std::path::Path) -> PathBuf {
    dir.join("callgrind.out")
}
