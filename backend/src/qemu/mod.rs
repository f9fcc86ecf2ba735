//! The QEMU channel (the full-emulation path): the backend side of
//! [`spe_protocol::channel`].
//!
//! One thread owns every SPU of the connected VM and runs an
//! [`event_manager`] loop over the listening socket, the connection, the
//! ring's doorbell eventfd, its drain timer, the synthetic source's timer
//! and an exit eventfd. Nothing on the hot path takes a lock, and the
//! thread never waits on QEMU: it answers requests and signals the IRQ
//! eventfd, and a socket that stalls mid-message or stops reading replies
//! hits a timeout and is dropped.
//!
//! This file is the public face: the configuration, [`spawn`] and the
//! [`ServerHandle`] that stops the thread. The rest, by concern:
//! `event_handler` (event tokens and the event-manager subscriber),
//! `server` (connections coming and going, and the events besides
//! requests), `requests` (one function per message type), `conn` (the
//! socket's bytes), `vm` (the connected VM's SPUs and ring), `memory`
//! (mapping what QEMU passes by fd) and `error`.

pub(crate) mod conn;
pub(crate) mod error;
mod event_handler;
mod memory;
mod requests;
mod server;
pub(crate) mod vm;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use event_manager::{EventManager, SubscriberOps};
use log::{error, info};
use spe_protocol::channel;
use spe_protocol::profile::CpuProfile;
use vm_memory::GuestMemoryMmap;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::control::Hub;
use crate::spu::unpredictable::Choices;
use crate::spu::Features;
use server::Server;

/// Guest memory as the channel maps it.
pub type Mem = GuestMemoryMmap<()>;

/// Most vCPUs a VM may announce in HELLO.
pub const MAX_VCPUS: u32 = 512;
/// How long a started message or a reply may take before the peer is
/// considered stuck and dropped.
pub const IO_TIMEOUT: Duration = Duration::from_secs(1);
/// How long a new connection may take to send HELLO. The channel serves
/// one VM at a time, so a client that connects and says nothing would
/// otherwise keep every later VM waiting.
pub const HELLO_TIMEOUT: Duration = Duration::from_secs(5);

/// What the channel server serves.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// The core the model is (`--cpu`): HELLO refuses a guest CPU whose
    /// MIDR is another's.
    pub cpu: CpuProfile,
    pub features: Features,
    /// Synthetic sampled operations per second per vCPU (`--synthetic`).
    pub synthetic_rate: Option<u64>,
    /// Slots per vCPU ring announced in HELLO (a power of two).
    pub ring_slots: u32,
    /// The control socket's hub (`--control-socket`, `--scenario`).
    pub control: Option<Arc<Hub>>,
    /// The CONSTRAINED UNPREDICTABLE choices (`--choice`).
    pub choices: Choices,
    /// Keep a copy of every record written (`--record DIR`).
    pub record: Option<PathBuf>,
    /// Write records and change PMBIRQ only in replies to the vCPU's own
    /// requests (`--deterministic`): QEMU then hands over every batch of
    /// samples with a SYNC, and a run under `-icount` with `-seed`
    /// repeats byte for byte. No drain timer, no doorbell.
    pub deterministic: bool,
}

impl ServerConfig {
    pub fn new(features: Features) -> ServerConfig {
        ServerConfig {
            cpu: CpuProfile::default(),
            features,
            synthetic_rate: None,
            ring_slots: channel::ring::DEFAULT_SLOTS,
            control: None,
            choices: Choices::default(),
            record: None,
            deterministic: false,
        }
    }
}

/// A running channel server. [`ServerHandle::shutdown`], or dropping it,
/// stops the thread, closes any connection and removes the socket.
#[derive(Debug)]
pub struct ServerHandle {
    exit: EventFd,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl ServerHandle {
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Whether the server thread is still running.
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the server and waits for it: once this returns, the
    /// connection is closed, the VM's statistics are logged and the
    /// socket is gone, so a new server may bind the same path.
    pub fn shutdown(mut self) {
        self.stop();
    }

    /// Stops the thread and removes the socket, once.
    fn stop(&mut self) {
        let Some(thread) = self.thread.take() else {
            return;
        };
        // An eventfd write only fails at a counter of 2^64-2: never here.
        let _ = self.exit.write(1);
        let _ = thread.join();
        match std::fs::remove_file(&self.path) {
            Ok(()) => info!("removed {}", self.path.display()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => error!("cannot remove {}: {e}", self.path.display()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Binds `path` (replacing a stale socket) and serves VMs on a new thread,
/// one after another, until the [`ServerHandle`] is shut down or dropped.
pub fn spawn(path: &Path, config: ServerConfig) -> io::Result<ServerHandle> {
    if let Err(e) = config.features.validate() {
        return Err(io::Error::other(e));
    }
    let listener = crate::listen::bind_replacing(path)?;
    let exit = EventFd::new(EFD_NONBLOCK)?;
    let server = Server::new(config, listener, exit.try_clone()?)?;
    let stop = server.stop.clone();
    // This thread serves the control socket's commands while it runs.
    let control = server.cfg.control.clone();
    if let Some(hub) = &control {
        hub.attach();
    }
    let thread = std::thread::Builder::new()
        .name("qemu-channel".into())
        .spawn(move || {
            run(server, &stop);
            if let Some(hub) = control {
                hub.detach();
            }
        })?;
    Ok(ServerHandle {
        exit,
        thread: Some(thread),
        path: path.to_path_buf(),
    })
}

fn run(server: Server, stop: &AtomicBool) {
    let mut em = match EventManager::<Server>::new() {
        Ok(em) => em,
        Err(e) => {
            error!("QEMU channel: cannot create the event loop: {e}");
            return;
        }
    };
    em.add_subscriber(server);
    while !stop.load(Ordering::Relaxed) {
        if let Err(e) = em.run() {
            error!("QEMU channel: event loop failed: {e}");
            break;
        }
    }
    info!("QEMU channel stopped");
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn shutdown_closes_the_connection_and_removes_the_socket() {
        let path =
            std::env::temp_dir().join(format!("spe-qemu-shutdown-{}.sock", std::process::id()));
        let h = spawn(&path, ServerConfig::new(Features::default())).unwrap();
        assert!(h.is_running());
        let mut c = spe_channel::client::ChannelClient::connect(&path).unwrap();
        assert_eq!(c.hello(1).unwrap().status, channel::Status::OK);
        h.shutdown();
        // Gone once shutdown returns, not eventually.
        assert!(!path.exists());
        let mut byte = [0u8];
        assert_eq!(c.stream().read(&mut byte).unwrap(), 0);
    }
}
