//! Serving one vhost-user front end after another on the listening
//! socket, each with a fresh backend.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;

use log::{error, info, warn};
use vm_memory::{GuestMemoryAtomic, GuestMemoryMmap};
use vmm_sys_util::epoll::EventSet;

use super::{Feed, VhostUserSpeBackend, CONTROL_EVENT, FEED_EVENT, SYNTHETIC_EVENT};
use crate::control::Hub;
use crate::spu::Features;

/// How long a vhost-user front end may take to ask for the features (QEMU
/// does at once) before it is dropped.
pub const HANDSHAKE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// Drops the connection behind `h` unless `negotiated` is set within
/// [`HANDSHAKE_TIMEOUT`]; ends early when the returned sender is dropped.
fn handshake_watchdog(
    h: vhost_user_backend::ShutdownHandle,
    negotiated: Arc<std::sync::atomic::AtomicBool>,
) -> io::Result<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)> {
    use std::sync::mpsc::{channel, RecvTimeoutError};
    let (done, wait) = channel::<()>();
    let thread = std::thread::Builder::new()
        .name("vhu-handshake".into())
        .spawn(move || {
            let expired = wait.recv_timeout(HANDSHAKE_TIMEOUT) == Err(RecvTimeoutError::Timeout);
            if expired && !negotiated.load(std::sync::atomic::Ordering::Relaxed) {
                warn!(
                    "vhost-user front end asked for no features within {} s; dropping it",
                    HANDSHAKE_TIMEOUT.as_secs()
                );
                h.shutdown();
            }
        })?;
    Ok((done, thread))
}

/// Registers `fd` with the vhost-user worker as `event` (one worker
/// thread serves both queues, the default queues_per_thread, so its
/// handler is the one). Logs why not and returns false if it cannot.
fn listen(
    daemon: &vhost_user_backend::VhostUserDaemon<Arc<std::sync::RwLock<VhostUserSpeBackend>>>,
    fd: std::os::fd::RawFd,
    event: u16,
    what: &str,
) -> bool {
    match daemon.get_epoll_handlers().first() {
        Some(h) => match h.register_listener(fd, EventSet::IN, u64::from(event)) {
            Ok(()) => true,
            Err(e) => {
                error!("{what} not served: {e}");
                false
            }
        },
        None => {
            error!("{what} not served: no vhost-user worker");
            false
        }
    }
}

/// What every VM's device is made with.
pub struct DeviceOptions {
    pub num_vcpus: u32,
    pub features: Features,
    /// `--synthetic`: operations per second per vCPU.
    pub synthetic: Option<u64>,
    pub choices: crate::spu::unpredictable::Choices,
    /// `--control-socket`'s hub.
    pub control: Option<Arc<Hub>>,
    /// `--plugin-socket`'s feed.
    pub feed: Option<Arc<Feed>>,
    /// `--record DIR`.
    pub record: Option<std::path::PathBuf>,
}

/// Serves one front end after another on `listener`, forever.
///
/// Each connection gets a fresh backend and daemon, so every VM starts with
/// reset SPUs; dropping the daemon after a disconnect stops its worker
/// threads. A connection that fails (garbage on the socket, a bad message)
/// is logged and closed, and the next one is accepted; one that asks for
/// no features within [`HANDSHAKE_TIMEOUT`] is dropped, so a silent client
/// cannot keep later VMs out. Returns only if accepting fails.
pub fn serve(listener: &mut vhost::vhost_user::Listener, opts: DeviceOptions) -> io::Result<()> {
    use std::sync::RwLock;
    let DeviceOptions {
        num_vcpus,
        features,
        synthetic,
        choices,
        control,
        feed,
        record,
    } = opts;
    use vhost::vhost_user::Error as VhostUserError;
    use vhost_user_backend::{Error as DaemonError, VhostUserDaemon};

    loop {
        let mut backend = VhostUserSpeBackend::new(num_vcpus, features.clone())?
            .with_choices(choices)
            .with_record(record.clone());
        if let Some(rate) = synthetic {
            backend = backend.with_synthetic(rate)?;
        }
        if let Some(hub) = &control {
            backend = backend.with_control(hub.clone());
        }
        if let Some(feed) = &feed {
            backend = backend.with_feed(feed.clone());
        }
        let timer = backend.synthetic_timer();
        let backend = Arc::new(RwLock::new(backend));
        let mut daemon = VhostUserDaemon::new(
            "vhost-device-spe".to_string(),
            backend.clone(),
            GuestMemoryAtomic::new(GuestMemoryMmap::new()),
        )
        .map_err(|e| io::Error::other(format!("cannot create daemon: {e}")))?;

        daemon
            .start(listener)
            .map_err(|e| io::Error::other(format!("cannot accept a connection: {e}")))?;
        info!("vhost-user connection accepted");
        let negotiated = backend
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .negotiated
            .clone();
        let watchdog = daemon
            .shutdown_handle()
            .map(|h| handshake_watchdog(h, negotiated))
            .transpose()?;
        // The control socket's commands reach this VM's SPUs while it is
        // connected; in between they run on the hub (faults wait for the
        // next VM). Attached before the hub's faults move onto the SPUs:
        // a command in between would find neither a VM nor the faults
        // (both take the backend's lock, so either order of the two is
        // consistent).
        let control_on = control.as_ref().filter(|hub| {
            listen(
                &daemon,
                hub.wake_fd().as_raw_fd(),
                CONTROL_EVENT,
                "control socket",
            )
        });
        if let Some(hub) = control_on {
            hub.attach();
        }
        backend
            .write()
            .unwrap_or_else(|e| e.into_inner())
            .front_end_connected();
        // Registered only now so an idle daemon does not wake every tick.
        if let (Some(fd), Some(rate)) = (timer, synthetic) {
            if listen(&daemon, fd, SYNTHETIC_EVENT, "synthetic source") {
                info!("synthetic source: {rate} ops/s per vCPU");
            }
        }

        // The plugin's samples reach this VM's SPUs while it is connected.
        if let Some(feed) = &feed {
            listen(
                &daemon,
                feed.wake_fd().as_raw_fd(),
                FEED_EVENT,
                "plugin feed",
            );
        }
        let ended = daemon.wait();
        if let Some(hub) = control_on {
            hub.detach();
        }
        if let Some((done, thread)) = watchdog {
            drop(done);
            let _ = thread.join();
        }
        match ended {
            Ok(())
            | Err(DaemonError::HandleRequest(
                VhostUserError::Disconnected | VhostUserError::PartialMessage,
            )) => info!("vhost-user front end disconnected"),
            Err(e) => error!("vhost-user connection closed on error: {e}"),
        }
        drop(daemon);
        {
            let backend = backend.read().unwrap_or_else(|e| e.into_inner());
            crate::stats::log_stats(&backend.spus);
            backend.close_leaked_exit_fds();
        }
        info!("device state reset; waiting for the next front end");
    }
}
