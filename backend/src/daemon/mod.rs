//! The serving mode: starts the front ends [`Config`] asks for and serves
//! them until SIGINT or SIGTERM.

mod config;

use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use log::{error, info};
use spe_protocol::control::Scenario;
use vhost::vhost_user::Listener;
use vhost_device_spe::{control, qemu, vhu_spe};

use config::Config;
pub use config::ServeArgs;

/// Set when the vhost-user listener ends on an error: the process then
/// exits non-zero.
static LISTENER_FAILED: AtomicBool = AtomicBool::new(false);

/// Checks `args` and serves what they ask for until SIGINT or SIGTERM.
pub fn run(args: ServeArgs) -> ExitCode {
    let config = match Config::try_from(args) {
        Ok(c) => c,
        Err(e) => {
            error!("{e}");
            return ExitCode::FAILURE;
        }
    };
    match serve(&config) {
        Ok(()) if !LISTENER_FAILED.load(Ordering::SeqCst) => ExitCode::SUCCESS,
        Ok(()) => {
            error!("exiting: the vhost-user listener failed");
            ExitCode::FAILURE
        }
        Err(e) => {
            error!("{e}");
            ExitCode::FAILURE
        }
    }
}

/// Starts what `config` asks for and serves until SIGINT or SIGTERM;
/// an error is one of starting up.
fn serve(config: &Config) -> Result<(), String> {
    let signals =
        block_termination_signals().map_err(|e| format!("cannot block SIGINT/SIGTERM: {e}"))?;
    let hub = control_hub(config)?;
    // Before the channel, whose thread serves it, and dropped after it.
    let mut _control = Vec::new();
    for (path, origin) in [
        (&config.control_socket, control::Origin::Host),
        (&config.guest_control_socket, control::Origin::Guest),
    ] {
        if let (Some(path), Some(hub)) = (path, &hub) {
            _control.push(
                control::spawn(path, hub.clone(), origin)
                    .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?,
            );
        }
    }
    let synthetic = config
        .synthetic
        .map(|r| format!(", synthetic {r} ops/s per vCPU"))
        .unwrap_or_default();

    // The QEMU channel first: its thread owns its socket and removes it
    // when the handle drops.
    let channel = match &config.qemu {
        Some(q) => {
            let mut c = qemu::ServerConfig::new(config.features.clone());
            c.cpu = config.cpu;
            c.synthetic_rate = config.synthetic;
            c.control = hub.clone();
            c.choices = config.choices;
            c.record = q.record.clone();
            c.deterministic = q.deterministic;
            let h = qemu::spawn(&q.socket, c)
                .map_err(|e| format!("cannot listen on {}: {e}", q.socket.display()))?;
            info!(
                "QEMU channel listening on {} (cpu {:?}{synthetic})",
                q.socket.display(),
                config.cpu,
            );
            Some(h)
        }
        None => None,
    };

    if let Some(v) = &config.vhost_user {
        let mut listener = Listener::new(&v.socket, true)
            .map_err(|e| format!("cannot listen on {}: {e}", v.socket.display()))?;
        info!(
            "vhost-device-spe listening on {} ({} vCPU(s), cpu {:?}, PMSIDR_EL1={:#x}, PMBIDR_EL1={:#x}{synthetic})",
            v.socket.display(),
            v.vcpus,
            config.cpu,
            config.features.pmsidr(),
            config.features.pmbidr(),
        );
        let vcpus = v.vcpus;
        let synthetic = config.synthetic;
        let features = config.features.clone();
        let choices = config.choices;
        let control = hub.clone().filter(|_| v.control);
        let record = v.record.clone();
        let feed = match &v.plugin_socket {
            Some(path) => Some(
                vhu_spe::Feed::listen(path, vcpus)
                    .map_err(|e| format!("cannot listen on {}: {e}", path.display()))?,
            ),
            None => None,
        };
        std::thread::Builder::new()
            .name("vhu-listener".into())
            .spawn(move || {
                let res = vhu_spe::serve(
                    &mut listener,
                    vhu_spe::DeviceOptions {
                        num_vcpus: vcpus,
                        features,
                        synthetic,
                        choices,
                        control,
                        feed,
                        record,
                    },
                );
                if let Err(e) = &res {
                    error!("{e}");
                    LISTENER_FAILED.store(true, Ordering::SeqCst);
                }
                drop(listener);
                // Wake the main thread so the process exits instead of
                // hanging. The signal must be process-directed: raise()
                // would direct it at this thread, which blocks it, and the
                // main thread's sigwait would never see it.
                // SAFETY: kill() on our own pid with a valid signal number.
                unsafe { libc::kill(libc::getpid(), libc::SIGTERM) };
                res
            })
            .map_err(|e| format!("cannot start the listener thread: {e}"))?;
    }

    let sig = wait_for_signal(&signals);
    info!("received signal {sig}, shutting down");
    // Stops the channel thread (closing any connection) and removes its socket.
    drop(channel);
    // The vhost-user thread is blocked in accept() or serving a VM; exiting
    // ends both and closes the connection. Only the socket file needs care.
    if let Some(v) = &config.vhost_user {
        match std::fs::remove_file(&v.socket) {
            Ok(()) => info!("removed {}", v.socket.display()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => error!("cannot remove {}: {e}", v.socket.display()),
        }
    }
    Ok(())
}

/// The control socket's hub, when --control-socket or --scenario asks for
/// one.
fn control_hub(config: &Config) -> Result<Option<Arc<control::Hub>>, String> {
    if !config.wants_hub() {
        return Ok(None);
    }
    let scenario = match &config.scenario {
        None => Scenario::default(),
        Some(s) => {
            info!(
                "scenario {}: {} fault(s) armed for each VM{}",
                s.path.display(),
                s.scenario.faults.len(),
                s.scenario
                    .seed
                    .map(|n| format!(", seed {n}"))
                    .unwrap_or_default()
            );
            s.scenario.clone()
        }
    };
    control::Hub::new(config.features.clone(), scenario)
        .map(|h| Some(Arc::new(h.with_choices(config.choices))))
        .map_err(|e| format!("cannot create the control hub: {e}"))
}

/// Blocks SIGINT and SIGTERM in this thread (and so in every thread it
/// spawns afterwards) and returns the set, for `sigwait` in [`serve`]. Waiting
/// synchronously keeps all shutdown work out of signal-handler context.
fn block_termination_signals() -> std::io::Result<libc::sigset_t> {
    // SAFETY: sigset_t is plain data; sigemptyset/sigaddset/pthread_sigmask
    // only touch the set we own, and their results are checked.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        let rc = libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        if rc != 0 {
            return Err(std::io::Error::from_raw_os_error(rc));
        }
        Ok(set)
    }
}

fn wait_for_signal(set: &libc::sigset_t) -> i32 {
    let mut sig = 0;
    // SAFETY: `set` is initialised and `sig` is a valid out pointer.
    while unsafe { libc::sigwait(set, &mut sig) } != 0 {}
    sig
}
