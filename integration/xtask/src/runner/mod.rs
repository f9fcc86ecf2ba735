//! Boots one guest: starts the backend (optionally) and QEMU, waits with a
//! timeout, collects the console and the backend log, and decides the
//! scenario's verdict from the guest's result lines.
//!
//! Every process started here is owned by a [`ChildGuard`], which kills it by
//! PID when dropped, so no exit path (error, timeout, panic) leaves QEMU or
//! the backend running.

use crate::kernels::KernelSpec;
use crate::util::tail;
use anyhow::{Context, Result};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// The paravirtual device's identity, as the guest must see it.
pub const VIRTIO_ID: u32 = spe_protocol::virtio::VIRTIO_ID_SPE;
pub const NUM_VQS: usize = spe_protocol::virtio::NUM_QUEUES;
pub const CONFIG_SIZE: usize = spe_protocol::virtio::VIRTIO_SPE_CONFIG_SIZE;
pub const VCPUS: u32 = 2;

/// Kills and reaps its child on drop unless it has already exited.
pub struct ChildGuard {
    what: String,
    child: Child,
}

impl ChildGuard {
    pub fn spawn(what: &str, cmd: &mut Command) -> Result<Self> {
        // If xtask itself is killed (SIGKILL, CI timeout), Drop never runs:
        // have the kernel kill the child when its parent dies.
        // SAFETY: prctl is async-signal-safe and touches no parent state.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {what} ({:?})", cmd.get_program()))?;
        Ok(ChildGuard {
            what: what.to_string(),
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        self.child
            .try_wait()
            .with_context(|| format!("waiting for {}", self.what))
    }

    /// Sends SIGKILL without reaping, so a later `try_wait` sees the death.
    pub fn signal_kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Kills the process (by its PID, SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Deletes a file (the backend's socket) when dropped.
struct RemoveOnDrop(PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Where the sockets go: `tmp` (`$TMPDIR`) when it is a directory with
/// room for a socket name under the 108-byte limit, else `/tmp`, so a long
/// or missing `$TMPDIR` does not fail a run.
pub fn socket_dir(tmp: &Path) -> PathBuf {
    const ROOM: usize = 108 - "/vhost-device-spe-4294967295-4294967295.sock".len() - 1;
    if tmp.is_dir() && tmp.as_os_str().len() <= ROOM {
        tmp.to_path_buf()
    } else {
        PathBuf::from("/tmp")
    }
}

/// The backend's control socket, next to its channel socket.
fn ctl_socket(channel: &Path) -> PathBuf {
    channel.with_extension("ctl")
}

/// What to boot.
#[derive(Clone, Debug)]
pub struct GuestRun {
    /// Passed to the guest as `spe.scenario=`; names integration/guest/scenarios/<name>.sh.
    pub scenario: String,
    /// Directory name for this run's logs (a scenario may be booted by
    /// several tests).
    pub run_name: String,
    /// Attach the backend through vhost-user-device-pci.
    pub backend: bool,
    pub timeout: Duration,
    /// Fault injection for testing the runner itself: SIGKILL the backend
    /// once the console shows this text, as a backend crash would look.
    pub kill_backend_when: Option<&'static str>,
    /// Full emulation: the backend serves the patched QEMU's SPE control
    /// channel (`--qemu-socket`) instead of a vhost-user device.
    pub spe: Option<SpeRun>,
}

/// How a full-emulation (`-cpu max,spe=on`) run is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpeRun {
    /// The backend's `--cpu` (which ID registers it advertises).
    pub backend_cpu: &'static str,
    /// The backend's `--synthetic RATE`.
    pub synthetic: Option<u64>,
    /// `-M virt,virtualization=on`: the guest kernel runs at EL2 (VHE).
    pub virtualization: bool,
    /// `-M virt,mte=on`: the guest has FEAT_MTE (tag-checked accesses).
    pub mte: bool,
    /// Also `pmu-ss=on` (FEAT_PMUv3_SS).
    pub pmu_ss: bool,
    /// The backend's `--min-interval OPS` (PMSIDR_EL1.Interval).
    pub min_interval: Option<u32>,
    /// QEMU's `-icount OPTIONS` (see [`ICOUNT_AUTO`], [`ICOUNT_FIXED`]):
    /// TBs cannot count SPE operations in their exit check, and the
    /// virtual clock may only be read where a TB allows I/O.
    pub icount: Option<&'static str>,
    /// The backend's `--scenario` file (faults to arm), as JSON text.
    pub faults: Option<&'static str>,
    /// Once the console shows the text, run `vhost-device-spe ctl --json
    /// ARGS…` against the backend's `--control-socket` (output in the
    /// run's `ctl.log`): the control socket used live, as a user would.
    pub ctl_when: Option<(&'static str, &'static [&'static str])>,
    /// Boot through the installed `spe-qemu` ([`Rig::launcher`]) from a
    /// plain QEMU command line, which starts and stops its own backend.
    pub launcher: bool,
    /// The backend keeps its records (`--record <run>/records`); after the
    /// run, `vhost-device-spe report --json` of them goes to the run's
    /// `report.json`, kernel PCs named from the `SPE-KSYM` lines the guest
    /// printed (its /proc/kallsyms: Debian's System.map is a placeholder,
    /// the real one is in the 800 MB -dbg package).
    pub record: bool,
    /// Once the console shows the text, stop the backend (SIGSTOP) for
    /// the time given, then let it go on (SIGCONT): a stalled backend.
    pub stall_when: Option<(&'static str, Duration)>,
    /// Once the console shows the text, kill the backend (SIGKILL) and
    /// start it again, with the same options, on the same socket: a
    /// backend that crashed and was restarted (its log goes on in
    /// `backend.log`, the time taken in `restart.log`).
    pub restart_when: Option<&'static str>,
    /// The backend's `RUST_LOG` instead of the harness's (`info` unless
    /// set): e.g. `debug` logs every SPE register access.
    pub log: Option<&'static str>,
    /// More QEMU options (e.g. `-seed`).
    pub qemu_args: &'static [&'static str],
    /// More backend options (e.g. `--choice NAME=VALUE`: CONSTRAINED
    /// UNPREDICTABLE and IMPLEMENTATION DEFINED behaviours other than the
    /// defaults; `--align BYTES`).
    pub backend_args: &'static [&'static str],
    /// The paravirtual path instead: a guest CPU without SPE (`-cpu max`)
    /// and the backend as QEMU's vhost-user device (virtio ID 58), which
    /// the guest's `virtio_spe` module drives. The other options apply
    /// to the backend as on the QEMU channel.
    pub paravirt: bool,
}

impl SpeRun {
    pub const fn new(backend_cpu: &'static str) -> SpeRun {
        SpeRun {
            backend_cpu,
            synthetic: None,
            virtualization: false,
            mte: false,
            pmu_ss: false,
            min_interval: None,
            icount: None,
            faults: None,
            ctl_when: None,
            launcher: false,
            record: false,
            stall_when: None,
            restart_when: None,
            log: None,
            qemu_args: &[],
            backend_args: &[],
            paravirt: false,
        }
    }

    /// The paravirtual path (see [`SpeRun::paravirt`]) with the backend's
    /// `--cpu` and synthetic source.
    pub const fn paravirt(backend_cpu: &'static str, synthetic: u64) -> SpeRun {
        SpeRun {
            paravirt: true,
            synthetic: Some(synthetic),
            ..SpeRun::new(backend_cpu)
        }
    }

    /// Operations are instructions, exactly (`--choice
    /// operations=instructions`): the interval proofs count them.
    pub const fn exact(self) -> SpeRun {
        SpeRun {
            backend_args: &["--choice", "operations=instructions"],
            ..self
        }
    }
}

/// `-icount`: virtual time paced to the host's speed.
pub const ICOUNT_AUTO: &str = "shift=auto";

/// `-icount`: one instruction per virtual nanosecond and idle time skipped,
/// so guest time is what the guest executed, not how slowly the host
/// emulated it. Tests that wait a fixed time for a program (perf's
/// `sleep 1` before its snapshot signal) see the program as far as it
/// would get on a 1 GHz in-order CPU.
pub const ICOUNT_FIXED: &str = "shift=0,sleep=off";

/// Fixed inputs shared by every run.
#[derive(Clone)]
pub struct Rig {
    /// The kernel of the matrix this rig boots.
    pub spec: &'static KernelSpec,
    pub qemu: PathBuf,
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
    /// `--pin`): see [`pin_vcpu0`].
    pub pin_vcpu0: bool,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Pass,
    Fail(String),
}

#[derive(Debug)]
pub struct RunOutput {
    pub verdict: Verdict,
    /// `SPE-RESULT key=value` pairs, in order.
    pub results: Vec<(String, String)>,
    pub console: String,
    pub backend_log: String,
    pub elapsed: Duration,
    pub dir: PathBuf,
}

impl RunOutput {
    pub fn result(&self, key: &str) -> Option<&str> {
        self.results
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// Why the runner stopped waiting, before looking at the console.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    QemuExited(String),
    Timeout(Duration),
    BackendDied(String),
}

impl Rig {
    pub fn run(&self, spec: &GuestRun) -> Result<RunOutput> {
        let dir = self.runs_dir.join(&spec.run_name);
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let console_path = dir.join("console.log");
        let backend_log = dir.join("backend.log");
        // Unix socket paths are limited to 108 bytes, and the checkout path
        // is not ours to choose: keep the socket in the temp directory.
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let socket = socket_dir(&std::env::temp_dir()).join(format!(
            "vhost-device-spe-{}-{}.sock",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = fs::remove_file(&socket);
        let _cleanup = RemoveOnDrop(socket.clone());
        let _cleanup_ctl = RemoveOnDrop(ctl_socket(&socket));

        let start = Instant::now();
        let mut backend = None;
        let mut early_failure = None;
        let launcher = spec.spe.as_ref().is_some_and(|s| s.launcher);
        if spec.backend && !launcher {
            let mut b = self.spawn_backend(spec, &dir, &socket, &backend_log, false)?;
            // QEMU's chardev connects once at start-up, so the socket must
            // exist first.
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                if socket.exists() {
                    break;
                }
                if let Some(st) = b.try_wait()? {
                    early_failure =
                        Some(format!("backend exited ({st}) before creating its socket"));
                    break;
                }
                if Instant::now() > deadline {
                    early_failure = Some("backend did not create its socket within 10 s".into());
                    break;
                }
                sleep(Duration::from_millis(20));
            }
            backend = Some(b);
        }

        let ending = match early_failure {
            Some(reason) => Ending::BackendDied(reason),
            None => {
                let mut qemu = if launcher {
                    // -nographic: the serial console is spe-qemu's stdout.
                    ChildGuard::spawn(
                        "spe-qemu",
                        self.launcher_command(spec, &backend_log)
                            .stdin(std::process::Stdio::null())
                            .stdout(fs::File::create(&console_path)?)
                            .stderr(fs::File::create(dir.join("qemu.stderr.log"))?),
                    )?
                } else {
                    ChildGuard::spawn(
                        "QEMU",
                        self.qemu_command(spec, &console_path, &socket)
                            .stdout(fs::File::create(dir.join("qemu.log"))?)
                            .stderr(fs::File::create(dir.join("qemu.stderr.log"))?),
                    )?
                };
                fs::write(dir.join("qemu.pid"), qemu.pid().to_string())?;
                if self.pin_vcpu0 {
                    pin_vcpu0(qemu.pid(), backend.as_ref().map(|b| b.pid()))?;
                }
                let ctl = spec.spe.as_ref().and_then(|s| s.ctl_when);
                let ctl_log = dir.join("ctl.log");
                let mut run_ctl = |_: Option<&mut ChildGuard>| {
                    let (_, args) = ctl.expect("only called with ctl_when");
                    let out = Command::new(&self.backend)
                        .arg("ctl")
                        .arg("--socket")
                        .arg(ctl_socket(&socket))
                        .arg("--json")
                        .args(args)
                        .output();
                    let text = match out {
                        Ok(o) => format!(
                            "$ ctl {}\n{}{}{}\n",
                            args.join(" "),
                            String::from_utf8_lossy(&o.stdout),
                            String::from_utf8_lossy(&o.stderr),
                            o.status
                        ),
                        Err(e) => format!("cannot run ctl: {e}\n"),
                    };
                    let _ = fs::write(&ctl_log, text);
                };
                let stall = spec.spe.as_ref().and_then(|s| s.stall_when);
                let mut run_stall = |b: Option<&mut ChildGuard>| {
                    let (Some((_, pause)), Some(pid)) = (stall, b.map(|b| b.pid())) else {
                        return;
                    };
                    let t = Instant::now();
                    // SAFETY: kill(2) on our own child, reaped only later.
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGSTOP) };
                    sleep(pause);
                    // SAFETY: as above.
                    unsafe { libc::kill(pid as libc::pid_t, libc::SIGCONT) };
                    let _ = fs::write(
                        dir.join("stall.log"),
                        format!("backend stopped for {:.1} s\n", t.elapsed().as_secs_f64()),
                    );
                };
                let restart = spec.spe.as_ref().and_then(|s| s.restart_when);
                let mut run_restart = |b: Option<&mut ChildGuard>| {
                    let Some(b) = b else { return };
                    let t = Instant::now();
                    b.kill();
                    let text = match self.spawn_backend(spec, &dir, &socket, &backend_log, true) {
                        Ok(new) => {
                            *b = new;
                            format!(
                                "backend killed and started again in {:.1} s\n",
                                t.elapsed().as_secs_f64()
                            )
                        }
                        Err(e) => format!("cannot start the backend again: {e:#}\n"),
                    };
                    let _ = fs::write(dir.join("restart.log"), text);
                };
                // A scenario uses at most one of them.
                let on_marker: Option<(&str, OnMarker)> = match (ctl, stall, restart) {
                    (Some((marker, _)), _, _) => Some((marker, &mut run_ctl)),
                    (None, Some((marker, _)), _) => Some((marker, &mut run_stall)),
                    (None, None, Some(marker)) => Some((marker, &mut run_restart)),
                    (None, None, None) => None,
                };
                wait(
                    &mut qemu,
                    backend.as_mut(),
                    spec.timeout,
                    &console_path,
                    spec.kill_backend_when,
                    on_marker,
                )?
            }
        };
        let elapsed = start.elapsed();
        if let Some(mut b) = backend {
            // The control channel's backend logs its statistics when QEMU
            // hangs up: give it a moment to do so before it is killed.
            if spec.spe.is_some() {
                let deadline = Instant::now() + Duration::from_secs(2);
                while Instant::now() < deadline
                    && !read_lossy(&backend_log).contains("stats total:")
                    && matches!(b.try_wait(), Ok(None))
                {
                    sleep(Duration::from_millis(20));
                }
            }
            b.kill();
        }

        let console = read_lossy(&console_path);
        let mut qemu_stderr = read_lossy(&dir.join("qemu.stderr.log"));
        qemu_stderr.push_str(&read_lossy(&dir.join("qemu.log")));
        let backend_text = read_lossy(&backend_log);
        let parsed = parse_console(&console, &spec.scenario);
        if spec.spe.as_ref().is_some_and(|s| s.record) {
            self.report(&dir, &console)?;
        }
        let verdict = decide(&ending, &parsed, &qemu_stderr);
        Ok(RunOutput {
            verdict,
            results: parsed.results,
            console,
            backend_log: backend_text,
            elapsed,
            dir,
        })
    }

    /// Starts the backend `spec` needs on `socket`, its output to `log`
    /// (`append`: after a previous process's, for a restart).
    fn spawn_backend(
        &self,
        spec: &GuestRun,
        dir: &Path,
        socket: &Path,
        log: &Path,
        append: bool,
    ) -> Result<ChildGuard> {
        let log = fs::OpenOptions::new()
            .create(true)
            .write(true)
            .append(append)
            .truncate(!append)
            .open(log)?;
        let mut cmd = Command::new(&self.backend);
        match &spec.spe {
            None => {
                cmd.arg("--socket-path").arg(socket);
            }
            Some(spe) => {
                cmd.arg(if spe.paravirt {
                    "--socket-path"
                } else {
                    "--qemu-socket"
                })
                .arg(socket)
                .args(["--cpu", spe.backend_cpu]);
                if spe.virtualization {
                    cmd.arg("--el2");
                }
                if let Some(rate) = spe.synthetic {
                    cmd.args(["--synthetic", &rate.to_string()]);
                }
                if spe.ctl_when.is_some() {
                    cmd.arg("--control-socket").arg(ctl_socket(socket));
                }
                if let Some(json) = spe.faults {
                    let file = dir.join("faults.json");
                    fs::write(&file, json)
                        .with_context(|| format!("writing {}", file.display()))?;
                    cmd.arg("--scenario").arg(file);
                }
                if let Some(ops) = spe.min_interval {
                    cmd.args(["--min-interval", &ops.to_string()]);
                }
                if spe.record {
                    cmd.arg("--record").arg(dir.join("records"));
                }
                cmd.args(spe.backend_args);
            }
        }
        ChildGuard::spawn(
            "the backend",
            cmd.arg("--vcpus")
                .arg(VCPUS.to_string())
                .env(
                    "RUST_LOG",
                    spec.spe
                        .as_ref()
                        .and_then(|s| s.log)
                        .map(str::to_string)
                        .or_else(|| std::env::var("RUST_LOG").ok())
                        .unwrap_or_else(|| "info".into()),
                )
                .stdout(log.try_clone()?)
                .stderr(log),
        )
    }

    /// `vhost-device-spe report --json` of the run's records into
    /// `report.json` (stderr into `report.err`), with the kernel's text
    /// symbols from the console's `SPE-KSYM` lines in `kallsyms` (run-time
    /// addresses: no KASLR offset).
    fn report(&self, dir: &Path, console: &str) -> Result<()> {
        let ksyms: String = console
            .lines()
            .filter_map(|l| l.trim_end_matches('\r').strip_prefix("SPE-KSYM "))
            .map(|l| format!("{l}\n"))
            .collect();
        fs::write(dir.join("kallsyms"), ksyms)?;
        let st = Command::new(&self.backend)
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

    /// `spe-qemu` with QEMU's documented `-M virt -kernel -initrd -append`
    /// command line, unchanged but for `-nic none` (this QEMU has no
    /// option ROMs) and `-no-reboot` (so `panic=-1` ends the run).
    fn launcher_command(&self, spec: &GuestRun, backend_log: &Path) -> Command {
        let spe = spec.spe.as_ref().expect("a launcher run is an SPE run");
        let mut c = Command::new(&self.launcher);
        c.args(["--spe-cpu", spe.backend_cpu])
            .arg("--spe-log")
            .arg(backend_log)
            .arg("-M")
            .arg(if spe.virtualization {
                "virt,virtualization=on"
            } else {
                "virt"
            })
            .args(["-cpu", "max", "-smp", &VCPUS.to_string(), "-m", "1G"])
            .args(["-nographic", "-nic", "none", "-no-reboot"]);
        self.boot_args(&mut c, &format!("spe.scenario={}", spec.scenario));
        c
    }

    /// The kernel, the initramfs and the command line (`panic=-1` reboots
    /// at once; `-no-reboot` turns that into an exit).
    fn boot_args(&self, c: &mut Command, append: &str) {
        c.arg("-kernel")
            .arg(&self.kernel)
            .arg("-initrd")
            .arg(&self.initrd)
            .arg("-append")
            .arg(format!("console=ttyAMA0 panic=-1 {append}"));
    }

    fn qemu_command(&self, spec: &GuestRun, console: &Path, socket: &Path) -> Command {
        let mut c = Command::new(&self.qemu);
        let mem = "1G";
        let (machine, cpu) = match &spec.spe {
            Some(spe) if spec.backend && !spe.paravirt => (
                format!(
                    "virt,gic-version=3,memory-backend=mem{}{}",
                    if spe.virtualization {
                        ",virtualization=on"
                    } else {
                        ""
                    },
                    if spe.mte { ",mte=on" } else { "" }
                ),
                format!(
                    "max,spe=on{},spe-socket={}",
                    if spe.pmu_ss { ",pmu-ss=on" } else { "" },
                    socket.display()
                ),
            ),
            _ => (
                "virt,gic-version=3,memory-backend=mem".to_string(),
                "max".to_string(),
            ),
        };
        // Named threads ("CPU 0/TCG"), for pin_vcpu0() and for top.
        c.args(["-name", "vhost-device-spe,debug-threads=on"])
            .args(["-M", &machine])
            .args(["-cpu", &cpu, "-smp", &VCPUS.to_string(), "-m", mem])
            // vhost-user back ends map guest RAM: it must be a shared memfd.
            .args([
                "-object",
                &format!("memory-backend-memfd,id=mem,size={mem},share=on"),
            ])
            // -M virt would add a NIC needing an option ROM we do not build.
            .args(["-nic", "none", "-display", "none", "-monitor", "none"])
            .arg("-serial")
            .arg(format!("file:{}", console.display()))
            .arg("-no-reboot");
        self.boot_args(
            &mut c,
            &format!("spe.scenario={} spe.virtio_id={VIRTIO_ID}", spec.scenario),
        );
        if spec.backend && spec.spe.as_ref().is_none_or(|s| s.paravirt) {
            c.arg("-chardev")
                .arg(format!("socket,id=spe0,path={},reconnect-ms=1000", socket.display()))
                .arg("-device")
                .arg(format!(
                    "vhost-user-device-pci,chardev=spe0,virtio-id={VIRTIO_ID},num_vqs={NUM_VQS},config_size={CONFIG_SIZE}"
                ));
        }
        if let Some(spe) = &spec.spe {
            if let Some(icount) = spe.icount {
                c.args(["-icount", icount]);
            }
            c.args(spe.qemu_args);
        }
        c
    }
}

/// Gives QEMU's vCPU 0 thread (`CPU 0/TCG`) the first host CPU this
/// process may use to itself, and every other thread of QEMU and of the
/// backend the other allowed host CPUs, so that what the guest's perf and
/// the backend do does not take the profiled vCPU's host CPU. The vCPU
/// threads exist once QEMU has realized its CPUs, before the guest runs.
fn pin_vcpu0(qemu: u32, backend: Option<u32>) -> Result<()> {
    // The CPUs this process may use, which need not be 0..n-1 (a cpuset).
    let status = read_lossy(Path::new("/proc/self/status"));
    let allowed = status
        .lines()
        .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
        .context("no Cpus_allowed_list in /proc/self/status")?;
    let cpus = parse_cpu_list(allowed)?;
    anyhow::ensure!(
        cpus.len() >= 2,
        "pinning vCPU 0 needs 2 host CPUs, this process may use {}",
        allowed.trim()
    );
    let first = cpus[0].to_string();
    let rest = cpus[1..]
        .iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let deadline = Instant::now() + Duration::from_secs(10);
    let vcpu0 = loop {
        let found = fs::read_dir(format!("/proc/{qemu}/task"))
            .into_iter()
            .flatten()
            .flatten()
            .find(|t| read_lossy(&t.path().join("comm")).trim() == "CPU 0/TCG");
        if let Some(t) = found {
            break t.file_name().to_string_lossy().into_owned();
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "QEMU's vCPU 0 thread did not appear within 10 s"
        );
        sleep(Duration::from_millis(20));
    };
    let taskset = |args: &[&str]| -> Result<()> {
        let st = Command::new("taskset")
            .args(args)
            .stdout(Stdio::null())
            .status()
            .context("running taskset (util-linux)")?;
        anyhow::ensure!(st.success(), "taskset {} failed ({st})", args.join(" "));
        Ok(())
    };
    taskset(&["-a", "-p", "-c", &rest, &qemu.to_string()])?;
    if let Some(b) = backend {
        taskset(&["-a", "-p", "-c", &rest, &b.to_string()])?;
    }
    taskset(&["-p", "-c", &first, &vcpu0])
}

/// A kernel CPU list ("0-3,8,10-11") as CPU numbers, in order.
fn parse_cpu_list(list: &str) -> Result<Vec<u32>> {
    let mut cpus = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let bad = || anyhow::anyhow!("bad CPU list {:?}", list.trim());
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?),
            None => {
                let c: u32 = part.parse().map_err(|_| bad())?;
                (c, c)
            }
        };
        anyhow::ensure!(lo <= hi, "bad CPU list {:?}", list.trim());
        cpus.extend(lo..=hi);
    }
    Ok(cpus)
}

fn read_lossy(p: &Path) -> String {
    fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// Polls QEMU (and the backend) until QEMU exits, the backend dies, or the
/// timeout passes; QEMU is killed on the last two.
/// What the runner does once the console shows a scenario's marker, given
/// the backend (which it may replace).
type OnMarker<'a> = &'a mut dyn FnMut(Option<&mut ChildGuard>);

fn wait(
    qemu: &mut ChildGuard,
    mut backend: Option<&mut ChildGuard>,
    timeout: Duration,
    console: &Path,
    kill_backend_when: Option<&str>,
    mut ctl_when: Option<(&str, OnMarker)>,
) -> Result<Ending> {
    let deadline = Instant::now() + timeout;
    let mut injected = false;
    loop {
        if let (Some(marker), Some(b)) = (kill_backend_when, backend.as_deref_mut()) {
            if !injected && read_lossy(console).contains(marker) {
                injected = true;
                b.signal_kill();
            }
        }
        if ctl_when
            .as_ref()
            .is_some_and(|(marker, _)| read_lossy(console).contains(marker))
        {
            if let Some((_, run)) = ctl_when.take() {
                run(backend.as_deref_mut());
            }
        }
        if let Some(st) = qemu.try_wait()? {
            // QEMU may die of the backend's crash (10.0.2 can abort on a
            // vhost-user disconnect) before we saw it: name the first cause.
            if let Some(b) = backend.as_deref_mut() {
                if let Some(bst) = b.try_wait()? {
                    if !bst.success() {
                        return Ok(Ending::BackendDied(format!(
                            "backend crashed ({bst}); QEMU then exited ({st})"
                        )));
                    }
                }
            }
            return Ok(Ending::QemuExited(st.to_string()));
        }
        if let Some(b) = backend.as_deref_mut() {
            if let Some(st) = b.try_wait()? {
                // A clean exit after QEMU hung up is the backend's business;
                // anything else while the guest runs is a crash.
                if !st.success() {
                    // Give QEMU a moment to show whether it survives the
                    // loss of its back end (it must: the guest keeps running).
                    let grace = Instant::now() + Duration::from_secs(1);
                    while Instant::now() < grace {
                        if let Some(qst) = qemu.try_wait()? {
                            return Ok(Ending::BackendDied(format!(
                                "backend crashed ({st}); QEMU then exited ({qst})"
                            )));
                        }
                        sleep(Duration::from_millis(50));
                    }
                    qemu.kill();
                    return Ok(Ending::BackendDied(format!(
                        "backend crashed ({st}); QEMU survived and was stopped"
                    )));
                }
            }
        }
        if Instant::now() >= deadline {
            qemu.kill();
            return Ok(Ending::Timeout(timeout));
        }
        sleep(Duration::from_millis(50));
    }
}

#[derive(Debug, Default, PartialEq)]
pub struct Parsed {
    pub results: Vec<(String, String)>,
    pub pass: bool,
    pub fail: Option<String>,
    pub panic: Option<String>,
}

/// Extracts result lines, the verdict and any kernel panic from the console.
pub fn parse_console(console: &str, scenario: &str) -> Parsed {
    let mut p = Parsed::default();
    for line in console.lines() {
        let line = line.trim_end_matches('\r');
        // Kernel messages may share a line with ours; find our marker.
        if let Some(i) = line.find("SPE-RESULT ") {
            for kv in line[i + "SPE-RESULT ".len()..].split_whitespace() {
                if let Some((k, v)) = kv.split_once('=') {
                    p.results.push((k.to_string(), v.to_string()));
                }
            }
        } else if let Some(i) = line.find("SPE-SCENARIO-PASS ") {
            if line[i + "SPE-SCENARIO-PASS ".len()..].trim() == scenario {
                p.pass = true;
            }
        } else if let Some(i) = line.find("SPE-SCENARIO-FAIL ") {
            let rest = line[i + "SPE-SCENARIO-FAIL ".len()..].trim();
            let (name, reason) = rest.split_once(' ').unwrap_or((rest, ""));
            if name == scenario {
                p.fail = Some(reason.to_string());
            }
        } else if let Some(i) = line.find("Kernel panic - not syncing") {
            p.panic.get_or_insert_with(|| line[i..].to_string());
        }
    }
    p
}

/// The verdict: a failure from any source beats a PASS line.
pub fn decide(ending: &Ending, parsed: &Parsed, qemu_stderr: &str) -> Verdict {
    if let Some(panic) = &parsed.panic {
        return Verdict::Fail(format!("kernel panic: {panic}"));
    }
    match ending {
        Ending::Timeout(t) => return Verdict::Fail(format!("timeout after {} s", t.as_secs())),
        Ending::BackendDied(why) => return Verdict::Fail(why.clone()),
        Ending::QemuExited(_) => {}
    }
    if let Some(reason) = &parsed.fail {
        return Verdict::Fail(format!("guest reported: {reason}"));
    }
    if parsed.pass {
        return Verdict::Pass;
    }
    let err = tail(qemu_stderr, 5);
    if let Ending::QemuExited(st) = ending {
        if !err.trim().is_empty() {
            return Verdict::Fail(format!(
                "QEMU exited ({st}) without a verdict: {}",
                err.trim()
            ));
        }
    }
    Verdict::Fail("guest gave no verdict (no SPE-SCENARIO-PASS line)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_go_where_their_path_fits() {
        let here = std::env::temp_dir();
        assert_eq!(socket_dir(Path::new("/tmp")), Path::new("/tmp"));
        let long = here.join("x".repeat(90));
        fs::create_dir_all(&long).unwrap();
        assert_eq!(socket_dir(&long), Path::new("/tmp"), "too long");
        fs::remove_dir_all(&long).unwrap();
        assert_eq!(socket_dir(Path::new("/no/such/dir")), Path::new("/tmp"));
    }

    fn qemu_args(spe: Option<SpeRun>) -> Vec<String> {
        let rig = Rig {
            spec: &crate::kernels::MATRIX[0],
            has_extra_modules: true,
            qemu: "qemu".into(),
            kernel: "Image".into(),
            initrd: "initrd".into(),
            backend: "backend".into(),
            launcher: "spe-qemu".into(),
            runs_dir: "runs".into(),
            pin_vcpu0: false,
        };
        let spec = GuestRun {
            scenario: "boot".into(),
            run_name: "boot".into(),
            backend: spe.is_some(),
            timeout: Duration::from_secs(1),
            kill_backend_when: None,
            spe,
        };
        rig.qemu_command(&spec, Path::new("console"), Path::new("sock"))
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn icount_runs_add_icount_and_others_do_not() {
        let on = SpeRun {
            icount: Some(ICOUNT_FIXED),
            ..SpeRun::new("neoverse-n1")
        };
        let args = qemu_args(Some(on));
        assert!(
            args.windows(2).any(|w| w == ["-icount", ICOUNT_FIXED]),
            "{args:?}"
        );
        assert!(!qemu_args(Some(SpeRun::new("neoverse-n1"))).contains(&"-icount".into()));
        assert!(!qemu_args(None).contains(&"-icount".into()));
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("\t0-1\n").unwrap(), vec![0, 1]);
        assert_eq!(parse_cpu_list("2,4-6,9").unwrap(), vec![2, 4, 5, 6, 9]);
        assert_eq!(parse_cpu_list("3").unwrap(), vec![3]);
        assert!(parse_cpu_list("1-x").is_err());
        assert!(parse_cpu_list("5-2").is_err());
    }

    const OK: &str = "[    0.1] booting\r\nSPE-RESULT kernel=6.1 cpus=2\r\n[ 1.0] virtio: SPE-RESULT a=1 b=x=y\nSPE-SCENARIO-PASS boot\n";

    #[test]
    fn parses_results_and_pass() {
        let p = parse_console(OK, "boot");
        assert!(p.pass);
        assert_eq!(p.fail, None);
        assert_eq!(
            p.results,
            vec![
                ("kernel".into(), "6.1".into()),
                ("cpus".into(), "2".into()),
                ("a".into(), "1".into()),
                ("b".into(), "x=y".into())
            ]
        );
        assert_eq!(
            decide(&Ending::QemuExited("exit status: 0".into()), &p, ""),
            Verdict::Pass
        );
    }

    #[test]
    fn pass_of_another_scenario_does_not_count() {
        let p = parse_console(OK, "other");
        assert!(!p.pass);
        assert!(matches!(
            decide(&Ending::QemuExited("0".into()), &p, ""),
            Verdict::Fail(_)
        ));
    }

    #[test]
    fn fail_line_gives_reason() {
        let p = parse_console("SPE-SCENARIO-FAIL x no PCI device 1af4:107a\n", "x");
        assert_eq!(
            decide(&Ending::QemuExited("0".into()), &p, ""),
            Verdict::Fail("guest reported: no PCI device 1af4:107a".into())
        );
    }

    #[test]
    fn panic_and_timeout_beat_pass() {
        let p = parse_console(
            "SPE-SCENARIO-PASS x\n[ 2.0] Kernel panic - not syncing: sysrq triggered crash\n",
            "x",
        );
        match decide(&Ending::QemuExited("0".into()), &p, "") {
            Verdict::Fail(r) => assert!(r.contains("Kernel panic - not syncing: sysrq"), "{r}"),
            v => panic!("{v:?}"),
        }
        let p = parse_console("SPE-SCENARIO-PASS x\n", "x");
        assert_eq!(
            decide(&Ending::Timeout(Duration::from_secs(7)), &p, ""),
            Verdict::Fail("timeout after 7 s".into())
        );
        assert_eq!(
            decide(
                &Ending::BackendDied("backend crashed (signal: 9)".into()),
                &p,
                ""
            ),
            Verdict::Fail("backend crashed (signal: 9)".into())
        );
    }

    #[test]
    fn qemu_error_is_reported_without_verdict() {
        let p = parse_console("", "x");
        match decide(
            &Ending::QemuExited("exit status: 1".into()),
            &p,
            "qemu: bad option\n",
        ) {
            Verdict::Fail(r) => assert!(r.contains("bad option"), "{r}"),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn guard_kills_its_child() {
        let mut g = ChildGuard::spawn("sleep", Command::new("sleep").arg("30")).unwrap();
        let pid = g.pid();
        assert!(g.try_wait().unwrap().is_none());
        drop(g);
        // Reaped, so the PID no longer names our child.
        assert!(
            !Path::new(&format!("/proc/{pid}/cmdline")).exists()
                || fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .map_or(true, |c| !c.starts_with("sleep"))
        );
    }
}
