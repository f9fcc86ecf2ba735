//! spe-qemu's processes, with stand-ins for QEMU and the backend (shell
//! scripts that log what they were given and what happened to them): the
//! backend starts first and stops when QEMU exits, however it exits, and
//! QEMU's status becomes spe-qemu's. The real ones are proven in booted
//! guests (`cargo xtask test spe-qemu-launcher`).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::sleep;
use std::time::{Duration, Instant};

/// A backend that makes its socket (`--qemu-socket PATH` is its first
/// option) and logs SIGTERM.
const BACKEND: &str = r#"echo "$@" > "$T/backend.args"
echo "backend listening" >&2
trap 'echo term > "$T/backend.term"; exit 0' TERM
touch "$2"
while :; do sleep 0.02; done"#;

struct Sandbox(PathBuf);

impl Sandbox {
    fn new(name: &str) -> Sandbox {
        let d = std::env::temp_dir().join(format!("spe-qemu-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        Sandbox(d)
    }

    fn script(&self, name: &str, body: &str) -> PathBuf {
        let p = self.0.join(name);
        fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn command(&self, qemu: &str) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_spe-qemu"));
        c.env("T", &self.0)
            .env("XDG_RUNTIME_DIR", &self.0)
            .arg("--spe-qemu")
            .arg(self.script("qemu", qemu))
            .arg("--spe-backend")
            .arg(self.script("vhost-device-spe", BACKEND))
            .args(["-M", "virt", "-cpu", "max", "-smp", "2", "-m", "256M"]);
        c
    }

    fn read(&self, name: &str) -> String {
        fs::read_to_string(self.0.join(name)).unwrap_or_default()
    }

    fn wait_for(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.0.join(name).exists() {
            assert!(Instant::now() < deadline, "no {name}");
            sleep(Duration::from_millis(10));
        }
    }

    /// spe-qemu's private directories left behind.
    fn runtime_dirs(&self) -> usize {
        fs::read_dir(&self.0)
            .unwrap()
            .filter(|e| {
                let name = e.as_ref().unwrap().file_name();
                name.to_string_lossy().starts_with("spe-qemu.")
            })
            .count()
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn run(c: &mut Command) -> Output {
    c.stdin(Stdio::null()).output().unwrap()
}

fn signal(child: &Child, sig: libc::c_int) {
    // SAFETY: kill(2) on our own, not yet reaped child.
    unsafe { libc::kill(child.id() as libc::pid_t, sig) };
}

#[test]
fn the_backend_stops_when_qemu_exits_and_qemus_status_is_passed_on() {
    let s = Sandbox::new("exit");
    let out = run(&mut s.command(r#"echo "$@" > "$T/qemu.args"; exit 3"#));
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(s.read("backend.term"), "term\n");
    let backend = s.read("backend.args");
    // The backend models the -cpu's core.
    assert!(backend.contains("--vcpus 2 --cpu max"), "{backend}");
    let qemu = s.read("qemu.args");
    assert!(qemu.contains("virt,memory-backend=spe-ram"), "{qemu}");
    assert!(qemu.contains("max,spe=on,spe-socket="), "{qemu}");
    assert!(qemu.contains("size=268435456,share=on"), "{qemu}");
    assert_eq!(s.runtime_dirs(), 0);
    // A failed QEMU gets the backend's log shown.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the backend's log") && err.contains("backend listening"),
        "{err}"
    );
}

#[test]
fn a_backend_that_does_not_start_is_an_error_and_qemu_never_runs() {
    let s = Sandbox::new("nobackend");
    let mut c = s.command(r#"echo "$@" > "$T/qemu.args""#);
    c.arg("--spe-backend")
        .arg(s.script("broken", "echo cannot bind >&2; exit 1"));
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("the backend did not start"), "{err}");
    assert!(err.contains("cannot bind"), "{err}");
    assert!(!s.0.join("qemu.args").exists());
    assert_eq!(s.runtime_dirs(), 0);
}

/// spe-qemu with a QEMU that runs until SIGTERM, once that QEMU is up.
fn start_waiting_qemu(s: &Sandbox) -> Child {
    let child = s
        .command(
            r#"trap 'echo term > "$T/qemu.term"; exit 0' TERM
echo up > "$T/qemu.up"
while :; do sleep 0.02; done"#,
        )
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    s.wait_for("qemu.up");
    child
}

#[test]
fn sigterm_goes_to_qemu_and_then_the_backend_stops() {
    let s = Sandbox::new("term");
    let mut child = start_waiting_qemu(&s);
    signal(&child, libc::SIGTERM);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert_eq!(s.read("qemu.term"), "term\n");
    assert_eq!(s.read("backend.term"), "term\n");
    assert_eq!(s.runtime_dirs(), 0);
}

#[test]
fn qemu_and_the_backend_die_with_a_killed_spe_qemu() {
    let s = Sandbox::new("kill");
    let mut child = start_waiting_qemu(&s);
    signal(&child, libc::SIGKILL);
    child.wait().unwrap();
    s.wait_for("qemu.term");
    s.wait_for("backend.term");
}

#[test]
fn what_cannot_have_spe_is_refused_before_anything_runs() {
    let s = Sandbox::new("refused");
    let mut c = Command::new(env!("CARGO_BIN_EXE_spe-qemu"));
    c.env("T", &s.0)
        .arg("--spe-qemu")
        .arg(s.script("qemu", r#"echo "$@" > "$T/qemu.args""#))
        .arg("--spe-backend")
        .arg(s.script("vhost-device-spe", BACKEND))
        .args(["-M", "q35", "-cpu", "max"]);
    let out = run(&mut c);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("virt machine only"), "{err}");
    assert!(!Path::new(&s.0.join("backend.args")).exists());
}

#[test]
fn help_and_version_go_to_qemu_alone() {
    let s = Sandbox::new("help");
    let mut c = Command::new(env!("CARGO_BIN_EXE_spe-qemu"));
    c.env("T", &s.0)
        .arg("--spe-qemu")
        .arg(s.script("qemu", r#"echo "$@""#))
        .arg("--version");
    let out = run(&mut c);
    assert!(out.status.success());
    assert_eq!(String::from_utf8_lossy(&out.stdout), "--version\n");
    let own = run(Command::new(env!("CARGO_BIN_EXE_spe-qemu")).arg("--spe-help"));
    assert!(String::from_utf8_lossy(&own.stdout).contains("--spe-cpu PROFILE"));
}
