//! A run watched while it goes on: [`Rig::run_watched`] calls a
//! [`Watcher`] on every poll of the wait loop with a [`Live`] handle on
//! the run's processes, for a caller that acts on the backend, QEMU and
//! the control socket for as long as the guest runs (`cargo xtask soak`).

use super::control;
use super::process::ChildGuard;
use super::qmp::Qmp;
use super::Run;
use anyhow::{bail, Context, Result};
use spe_protocol::control::{Command, NoArgs, Reply};
use std::time::Duration;

/// Called while the guest runs; an error ends the run (QEMU killed) and
/// fails it with that error.
pub trait Watcher {
    fn poll(&mut self, live: &mut Live<'_>) -> Result<()>;

    /// Whether to call [`Watcher::poll`] at all (the console is read
    /// for it on every poll).
    fn active(&self) -> bool {
        true
    }
}

/// What scenario runs have: nothing watches.
pub struct Unwatched;

impl Watcher for Unwatched {
    fn poll(&mut self, _: &mut Live<'_>) -> Result<()> {
        Ok(())
    }

    fn active(&self) -> bool {
        false
    }
}

/// The run as a watcher sees it at one poll.
pub struct Live<'a> {
    pub(super) run: &'a Run<'a>,
    /// The console so far.
    pub console: &'a str,
    pub(super) qemu_pid: u32,
    pub(super) backend: Option<&'a mut ChildGuard>,
    pub(super) qmp: Option<&'a mut Qmp>,
}

impl Live<'_> {
    pub fn qemu_pid(&self) -> u32 {
        self.qemu_pid
    }

    /// The backend's PID: a new one after [`Live::restart`].
    pub fn backend_pid(&self) -> Option<u32> {
        self.backend.as_deref().map(ChildGuard::pid)
    }

    /// One control-socket command, on a connection of its own.
    pub fn ctl(&self, cmd: &Command) -> Result<Reply> {
        control::execute(&self.run.ctl_socket(), cmd)
    }

    /// SIGSTOP for `pause`, then SIGCONT.
    pub fn stall(&mut self, pause: Duration) -> Result<()> {
        let b = self.backend.as_deref().context("no backend to stall")?;
        super::marker::stall_backend(b, pause);
        Ok(())
    }

    /// SIGKILL, and the same backend started again on the same socket;
    /// returns once it has made its socket again, with the time taken.
    pub fn restart(&mut self) -> Result<Duration> {
        let b = self
            .backend
            .as_deref_mut()
            .context("no backend to restart")?;
        let took = self.run.restart_backend(b)?;
        // The old process's socket files stay: wait for an answer.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while let Err(e) = self.ctl(&Command::QueryVersion(NoArgs::default())) {
            if std::time::Instant::now() > deadline {
                bail!("the restarted backend's control socket: {e:#}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(took)
    }

    /// Pauses the VM's vCPUs (QMP `stop`).
    pub fn pause(&mut self) -> Result<()> {
        let grace = self.run.spec.qemu_grace();
        self.qmp.as_deref_mut().context("no QMP")?.pause(grace)
    }

    /// Lets them run again (QMP `cont`).
    pub fn resume(&mut self) -> Result<()> {
        let grace = self.run.spec.qemu_grace();
        self.qmp.as_deref_mut().context("no QMP")?.resume(grace)
    }

    /// The folder of the run's logs.
    pub fn dir(&self) -> &std::path::Path {
        &self.run.dir
    }
}
