//! `spe-qemu`: a drop-in `qemu-system-aarch64` that gives the guest the
//! Arm Statistical Profiling Extension. It takes a QEMU command line as it
//! is, starts a private `vhost-device-spe` (its socket in a private
//! runtime directory), runs the patched QEMU with the options SPE needs
//! added (`cmdline`), passes the terminal through, and stops the backend
//! when QEMU exits, however it exits.

mod cmdline;

use std::fs;
use std::io::{self, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, ExitStatus, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

use cmdline::SpeOptions;

const HELP: &str = "\
spe-qemu: qemu-system-aarch64 with the Arm Statistical Profiling Extension

  spe-qemu [--spe-OPTION ...] QEMU-OPTIONS...

Takes a qemu-system-aarch64 command line unchanged, starts a private
vhost-device-spe for it and adds what SPE needs: the machine's RAM as a
shared memfd of the -m size (memory-backend= on -M), spe=on and
spe-socket= on the -cpu; the backend gets the -smp vCPU count and EL2
with virtualization=on. RAM the command line already shares (a
memory-backend-memfd or -file with share=on, as -M memory-backend= or
-numa node,memdev=) is kept as it is. Needs -M virt, TCG and one of
the cores the backend models as -cpu: neoverse-n1, neoverse-v1 or max.
The backend models the -cpu's core, so the guest's MIDR and ID
registers, the records and perf's decoding of them agree.
The backend stops when QEMU exits; spe-qemu exits with QEMU's status.

Options (taken out before QEMU sees the command line):
  --spe-cpu PROFILE          the core when the command line has no -cpu (it
                             adds -cpu PROFILE): neoverse-n1 (FEAT_SPEv1p1),
                             neoverse-v1, max (FEAT_SPEv1p4, FnE, EFT, FDS,
                             ERnd, PMUv3_SS); with a -cpu it must name the
                             same core
  --spe-log FILE             the backend's log (default: a private file, shown
                             when QEMU fails)
  --spe-control-socket PATH  the backend's control socket, for
                             `vhost-device-spe ctl` (faults on demand, queries)
  --spe-guest-control        a virtio-serial port, org.vhost-device-spe.control,
                             through which the guest arms faults and reads
                             events for its own VM (protocol/README.md)
  --spe-guest-ghz N          a guest clock that counts N instructions a
                             nanosecond (1, 2, 4 or 8: -icount shift=0 to -3,
                             sleep=off), so that a guest second holds as many
                             instructions as a real core's; the vCPUs take
                             turns and share it (8 with two busy vCPUs: four
                             each); guest time is instructions, not host time
  --spe-record DIR           keep every record the backend writes, per vCPU, for
                             `vhost-device-spe report DIR --system-map System.map`
                             (no perf needed in the guest)
  --spe-qemu PATH            the patched QEMU (default: $SPE_QEMU, else
                             qemu-system-aarch64-spe beside spe-qemu, else on PATH);
                             with --spe-stock, the QEMU you have (default:
                             qemu-system-aarch64 on PATH)
  --spe-stock                an unpatched QEMU (10.2 or 11.1, built with
                             plugins): no spe=on; the guest gets the paravirtual
                             device (vhost-user-test-device-pci) and its driver
                             (guest-driver/virtio_spe) profiles the samples the
                             TCG plugin takes; any AArch64 -cpu
  --spe-plugin PATH          the TCG plugin (default: $SPE_PLUGIN, else
                             ../lib/vhost-device-spe/libspe_plugin.so from
                             spe-qemu, else libspe_plugin.so beside it)
  --spe-backend PATH         vhost-device-spe (default: beside spe-qemu, else on
                             PATH)
  --spe-help                 this text (--help: this text, then QEMU's)

Booting: the QEMU built by this project has no firmware blobs of its own.
Boot with -kernel (and the device tree QEMU makes), or through UEFI
firmware, as distribution images boot, with Debian's qemu-efi-aarch64:
  -bios /usr/share/qemu-efi-aarch64/QEMU_EFI.fd -kernel ... (ACPI), or
  a distribution's cloud image, its command line unchanged:
    cp /usr/share/AAVMF/AAVMF_VARS.fd vars.fd
    spe-qemu -M virt -cpu neoverse-n1 -smp 2 -m 2G -nographic -nic none \\
      -drive if=pflash,format=raw,unit=0,readonly=on,file=/usr/share/AAVMF/AAVMF_CODE.fd \\
      -drive if=pflash,format=raw,unit=1,file=vars.fd \\
      -drive if=none,id=hd0,file=debian-13-genericcloud-arm64.qcow2 \\
      -device virtio-blk-pci,drive=hd0
Under ACPI the guest finds SPE in the MADT (ACPI 6.3's SPE overflow
interrupt, 21, on every GICC). Its kernel needs CONFIG_ARM_SPE_PMU and,
on a core without FEAT_E0PD (neoverse-n1, -v1), kpti=off on its command
line (in the image's GRUB configuration). Add -nic none unless Debian's
ipxe-qemu ROMs are on QEMU's -L path.
";

/// How long the backend may take to create its socket.
const BACKEND_START: Duration = Duration::from_secs(10);
/// How long the backend may take to stop after SIGTERM.
const BACKEND_STOP: Duration = Duration::from_secs(2);
/// The signals spe-qemu forwards to QEMU instead of dying of them.
const FORWARDED: [libc::c_int; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

#[derive(Debug, thiserror::Error)]
enum LaunchError {
    #[error("{0}")]
    Cmdline(#[from] cmdline::Error),
    #[error("{what} not found: {hint}")]
    NotFound {
        what: &'static str,
        hint: &'static str,
    },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("the backend did not start: {0}")]
    Backend(String),
    #[error("argument {0:?} is not UTF-8")]
    NotUtf8(std::ffi::OsString),
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> LaunchError {
    let what = what.into();
    move |source| LaunchError::Io { what, source }
}

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("spe-qemu: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, LaunchError> {
    let args = std::env::args_os()
        .skip(1)
        .map(|a| a.into_string().map_err(LaunchError::NotUtf8))
        .collect::<Result<Vec<_>, _>>()?;
    let (spe, qemu_args) = cmdline::split_spe_options(&args)?;
    if spe.help || cmdline::asks_for_help(&qemu_args) {
        print!("{HELP}");
        if spe.help {
            return Ok(ExitCode::SUCCESS);
        }
    }
    let found = if spe.stock {
        find_stock_qemu(&spe)
    } else {
        find_qemu(&spe)
    };
    let qemu = match found {
        Ok(q) => q,
        // `spe-qemu --help` without a QEMU: its own help is what was asked.
        Err(e) if cmdline::asks_for_help(&qemu_args) => {
            println!("\nQEMU's own options: {e}");
            return Ok(ExitCode::SUCCESS);
        }
        Err(e) => return Err(e),
    };
    if cmdline::asks_for_help(&qemu_args) {
        println!("\nQEMU's own options ({} --help):\n", qemu.display());
        io::stdout().flush().map_err(io_err("writing the help"))?;
    }
    if cmdline::asks_only_for_information(&qemu_args) {
        let e = Command::new(&qemu).args(&qemu_args).exec();
        return Err(io_err(format!("running {}", qemu.display()))(e));
    }
    let backend = find_backend(&spe)?;
    let dir = RuntimeDir::new()?;
    let socket = dir.0.join("spe.sock");
    let stock = if spe.stock {
        Some(cmdline::Stock {
            plugin: find_plugin(&spe)?,
            plugin_socket: dir.0.join("plugin.sock"),
        })
    } else {
        None
    };
    let plan = cmdline::plan(&qemu_args, &spe, &socket, stock.as_ref())?;
    let log = spe.log.clone().unwrap_or_else(|| dir.0.join("backend.log"));
    for note in &plan.notes {
        eprintln!("spe-qemu: note: {note}");
    }

    block_forwarded_signals();
    let mut backend = start_backend(&backend, &plan.backend_args, &log, &socket)?;
    // QEMU dies with spe-qemu, as the backend does.
    let mut cmd = Command::new(&qemu);
    cmd.args(&plan.qemu_args);
    // SAFETY: prctl is async-signal-safe; nothing else runs in the child.
    unsafe { cmd.pre_exec(|| die_with_parent(libc::SIGTERM)) };
    let status = match cmd.spawn() {
        Ok(mut qemu) => {
            forward_signals_to(qemu.id());
            qemu.wait()
                .map_err(io_err(format!("waiting for {}", qemu_path(&qemu))))
        }
        Err(e) => Err(io_err(format!("running {}", qemu.display()))(e)),
    };
    stop(&mut backend);
    let status = status?;
    if !status.success() && spe.log.is_none() {
        show_tail(&log);
    }
    Ok(exit_code(status))
}

fn qemu_path(qemu: &Child) -> String {
    format!("QEMU (pid {})", qemu.id())
}

/// QEMU's exit status as spe-qemu's: its code, or 128 + the signal.
fn exit_code(status: ExitStatus) -> ExitCode {
    let code = status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(1);
    ExitCode::from(code.clamp(0, 255) as u8)
}

/// `explicit`, else `$env`, else `name` beside this executable, else `name`
/// on PATH.
fn find(explicit: &Option<PathBuf>, env: Option<&str>, name: &str) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.clone());
    }
    if let Some(p) = env.and_then(std::env::var_os) {
        return Some(PathBuf::from(p));
    }
    let beside = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|d| d.join(name)));
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name));
    beside.into_iter().chain(on_path).find(|p| p.is_file())
}

fn find_qemu(spe: &SpeOptions) -> Result<PathBuf, LaunchError> {
    find(&spe.qemu, Some("SPE_QEMU"), "qemu-system-aarch64-spe").ok_or(LaunchError::NotFound {
        what: "qemu-system-aarch64-spe",
        hint: "install it with `cargo xtask install`, or name the patched QEMU with --spe-qemu",
    })
}

/// `--spe-stock`'s QEMU: the user's own, unpatched.
fn find_stock_qemu(spe: &SpeOptions) -> Result<PathBuf, LaunchError> {
    find(&spe.qemu, None, "qemu-system-aarch64").ok_or(LaunchError::NotFound {
        what: "qemu-system-aarch64",
        hint: "--spe-stock runs the QEMU on PATH (10.2 or 11.1, with plugins), or name it with --spe-qemu",
    })
}

/// The TCG plugin: `--spe-plugin`, `$SPE_PLUGIN`, where `cargo xtask
/// install` puts it (`PREFIX/lib/vhost-device-spe/`), or beside spe-qemu.
fn find_plugin(spe: &SpeOptions) -> Result<PathBuf, LaunchError> {
    const NAME: &str = "libspe_plugin.so";
    if let Some(p) = spe
        .plugin
        .clone()
        .or_else(|| std::env::var_os("SPE_PLUGIN").map(PathBuf::from))
    {
        return Ok(p);
    }
    let exe = std::env::current_exe().ok();
    let dir = exe.as_deref().and_then(Path::parent);
    dir.into_iter()
        .flat_map(|d| [d.join("../lib/vhost-device-spe").join(NAME), d.join(NAME)])
        .find(|p| p.is_file())
        .ok_or(LaunchError::NotFound {
            what: NAME,
            hint: "install it with `cargo xtask install`, or name it with --spe-plugin",
        })
}

fn find_backend(spe: &SpeOptions) -> Result<PathBuf, LaunchError> {
    find(&spe.backend, None, "vhost-device-spe").ok_or(LaunchError::NotFound {
        what: "vhost-device-spe",
        hint: "install it with `cargo xtask install`, or name it with --spe-backend",
    })
}

/// A private directory (mode 0700) for the backend's socket and log,
/// removed when dropped.
struct RuntimeDir(PathBuf);

impl RuntimeDir {
    fn new() -> Result<RuntimeDir, LaunchError> {
        let base = std::env::var_os("XDG_RUNTIME_DIR")
            .map(PathBuf::from)
            .filter(|d| d.is_dir())
            .unwrap_or_else(std::env::temp_dir);
        // A Unix socket path has at most 107 bytes.
        let base = if base.as_os_str().len() > 60 {
            PathBuf::from("/tmp")
        } else {
            base
        };
        let mut template = base.join("spe-qemu.XXXXXX").as_os_str().as_bytes().to_vec();
        template.push(0);
        // SAFETY: `template` is a writable NUL-terminated buffer that
        // mkdtemp fills in place.
        let p = unsafe { libc::mkdtemp(template.as_mut_ptr().cast()) };
        if p.is_null() {
            return Err(io_err(format!(
                "creating a directory in {}",
                base.display()
            ))(io::Error::last_os_error()));
        }
        template.pop();
        Ok(RuntimeDir(PathBuf::from(std::ffi::OsStr::from_bytes(
            &template,
        ))))
    }
}

impl Drop for RuntimeDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// In the child, before exec: the forwarded signals unblocked (a child
/// inherits its parent's mask across fork and exec, and QEMU's handlers
/// would then never see a SIGTERM: it outlived a killed spe-qemu), and
/// `sig` when the parent dies.
fn die_with_parent(sig: libc::c_int) -> io::Result<()> {
    let set = forwarded_set();
    // SAFETY: sigprocmask and prctl are async-signal-safe, on the calling
    // (child, single-threaded) process.
    unsafe {
        if libc::sigprocmask(libc::SIG_UNBLOCK, &set, std::ptr::null_mut()) != 0
            || libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong) != 0
        {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

fn start_backend(
    path: &Path,
    args: &[String],
    log: &Path,
    socket: &Path,
) -> Result<Child, LaunchError> {
    let out = fs::File::create(log).map_err(io_err(format!("creating {}", log.display())))?;
    let err = out
        .try_clone()
        .map_err(io_err(format!("opening {}", log.display())))?;
    let mut cmd = Command::new(path);
    cmd.args(args)
        .env(
            "RUST_LOG",
            std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
        )
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    // SAFETY: setpgid and prctl are async-signal-safe. Its own process
    // group keeps the terminal's ^C for QEMU; it must not outlive us.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setpgid(0, 0) != 0 {
                return Err(io::Error::last_os_error());
            }
            die_with_parent(libc::SIGTERM)
        })
    };
    let mut child = cmd
        .spawn()
        .map_err(io_err(format!("running {}", path.display())))?;
    let deadline = Instant::now() + BACKEND_START;
    loop {
        if socket.exists() {
            return Ok(child);
        }
        let failed = match child.try_wait() {
            Ok(Some(st)) => Some(format!("{} exited ({st})", path.display())),
            Ok(None) if Instant::now() > deadline => Some(format!(
                "{} made no socket within {} s",
                path.display(),
                BACKEND_START.as_secs()
            )),
            Ok(None) => None,
            Err(e) => Some(e.to_string()),
        };
        if let Some(why) = failed {
            stop(&mut child);
            show_tail(log);
            return Err(LaunchError::Backend(why));
        }
        sleep(Duration::from_millis(10));
    }
}

/// SIGTERM, then SIGKILL if it has not exited in time; reaped either way.
fn stop(child: &mut Child) {
    // SAFETY: kill(2) on our own child's pid, not yet reaped.
    unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
    let deadline = Instant::now() + BACKEND_STOP;
    while Instant::now() < deadline {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        sleep(Duration::from_millis(10));
    }
    let _ = child.kill();
    let _ = child.wait();
}

fn forwarded_set() -> libc::sigset_t {
    // SAFETY: sigset_t is plain data, initialised by sigemptyset.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in FORWARDED {
            libc::sigaddset(&mut set, s);
        }
        set
    }
}

/// Blocks the forwarded signals in every thread (children unblock them:
/// `die_with_parent`).
fn block_forwarded_signals() {
    let set = forwarded_set();
    // SAFETY: changes this thread's mask only; called before any thread.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) };
}

/// Passes SIGINT, SIGTERM, SIGHUP and SIGQUIT on to QEMU, which decides
/// what they mean (a ^C at a cooked terminal reaches it directly too).
fn forward_signals_to(pid: u32) {
    std::thread::spawn(move || loop {
        let set = forwarded_set();
        let mut sig = 0;
        // SAFETY: sigwait on signals blocked in every thread.
        if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
            // SAFETY: kill(2) on QEMU's pid; the main thread reaps it
            // only after QEMU exits, and then the process exits too.
            unsafe { libc::kill(pid as libc::pid_t, sig) };
        }
    });
}

/// The end of the backend's log, for a QEMU that failed.
fn show_tail(log: &Path) {
    if let Ok(text) = fs::read_to_string(log) {
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(20)..];
        if !tail.is_empty() {
            eprintln!("spe-qemu: the backend's log ({}):", log.display());
            for l in tail {
                eprintln!("  {l}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use spe_protocol::profile::CpuProfile;

    /// The signal mask of a child spawned after `block_forwarded_signals`,
    /// with the children's set-up or without.
    fn child_mask(set_up: bool) -> u64 {
        std::thread::spawn(move || {
            block_forwarded_signals();
            let mut cmd = Command::new("grep");
            cmd.args(["SigBlk", "/proc/self/status"]);
            if set_up {
                // SAFETY: as spe-qemu's own children.
                unsafe { cmd.pre_exec(|| die_with_parent(libc::SIGTERM)) };
            }
            let out = cmd.output().unwrap();
            let text = String::from_utf8(out.stdout).unwrap();
            u64::from_str_radix(text.trim().trim_start_matches("SigBlk:").trim(), 16).unwrap()
        })
        .join()
        .unwrap()
    }

    #[test]
    fn children_take_the_signals_spe_qemu_forwards() {
        let bits: u64 = FORWARDED.iter().map(|&s| 1 << (s - 1)).sum();
        // The stand-ins of tests/lifecycle.rs are shell scripts, and the
        // shell clears its mask: this is where an inherited one shows.
        assert_eq!(child_mask(false) & bits, bits, "the control");
        assert_eq!(child_mask(true) & bits, 0);
    }

    #[test]
    fn help_names_every_profile() {
        for p in CpuProfile::ALL {
            assert!(HELP.contains(p.name()), "{p}");
        }
    }

    #[test]
    fn exit_codes_follow_qemu() {
        let st = |raw| ExitStatus::from_raw(raw);
        assert_eq!(exit_code(st(0)), ExitCode::SUCCESS);
        assert_eq!(exit_code(st(3 << 8)), ExitCode::from(3));
        assert_eq!(exit_code(st(libc::SIGKILL)), ExitCode::from(137));
    }

    #[test]
    fn the_runtime_directory_is_private_and_removed() {
        use std::os::unix::fs::PermissionsExt;
        let d = RuntimeDir::new().unwrap();
        let path = d.0.clone();
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        fs::write(path.join("backend.log"), "x").unwrap();
        drop(d);
        assert!(!path.exists());
    }
}
