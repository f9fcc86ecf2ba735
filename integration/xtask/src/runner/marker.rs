//! What the runner does to the backend or the VM once the console shows
//! a scenario's marker ([`MarkerAction`]).

use super::command::ctl_socket;
use super::process::ChildGuard;
use super::qmp::Qmp;
use super::Run;
use crate::scenario::MarkerAction;
use anyhow::{Context, Result};
use std::fs;
use std::process::Command;
use std::thread::sleep;
use std::time::{Duration, Instant};

impl Run<'_> {
    /// An error (only [`MarkerAction::StopCont`]'s, a pause or resume
    /// QEMU did not take) ends the run.
    pub(super) fn act(
        &self,
        action: MarkerAction,
        backend: Option<&mut ChildGuard>,
        qmp: Option<&mut Qmp>,
    ) -> Result<()> {
        match (action, backend) {
            (MarkerAction::Ctl(args), _) => self.run_ctl(args),
            (MarkerAction::Stall(pause), Some(b)) => self.stall(b, pause),
            (MarkerAction::Restart, Some(b)) => self.restart(b),
            // The backend is gone already: the check sees no stall.log
            // or restart.log.
            (MarkerAction::Stall(_) | MarkerAction::Restart, None) => {}
            (MarkerAction::StopCont(times), _) => {
                return self.stop_cont(qmp.context("a stop/cont run without QMP")?, times)
            }
        }
        Ok(())
    }

    /// `times` QMP `stop`/`cont` pairs; how long each `stop` took to be
    /// taken, in `stop-cont.log` (the last line says which failed).
    fn stop_cont(&self, qmp: &mut Qmp, times: u32) -> Result<()> {
        let grace = self.spec.qemu_grace();
        let mut took = Vec::new();
        let result = (1..=times).try_for_each(|i| {
            let t = Instant::now();
            qmp.pause(grace)
                .with_context(|| format!("stop {i} of {times}"))?;
            took.push(t.elapsed());
            qmp.resume(grace)
                .with_context(|| format!("cont {i} of {times}"))
        });
        let _ = fs::write(
            self.dir.join("stop-cont.log"),
            stop_cont_log(times, &mut took, result.as_ref().err()),
        );
        result
    }

    /// `vhost-device-spe ctl --json ARGS…` for each ARGS in turn, their
    /// output in `ctl.log`.
    fn run_ctl(&self, commands: &[&[&str]]) {
        let mut text = String::new();
        for args in commands {
            let out = Command::new(&self.rig.backend)
                .arg("ctl")
                .arg("--socket")
                .arg(ctl_socket(&self.socket))
                .arg("--json")
                .args(*args)
                .output();
            text += &match out {
                Ok(o) => format!(
                    "$ ctl {}\n{}{}{}\n",
                    args.join(" "),
                    String::from_utf8_lossy(&o.stdout),
                    String::from_utf8_lossy(&o.stderr),
                    o.status
                ),
                Err(e) => format!("cannot run ctl: {e}\n"),
            };
        }
        let _ = fs::write(self.dir.join("ctl.log"), text);
    }

    /// SIGSTOP, `pause`, SIGCONT; the time it took in `stall.log`.
    fn stall(&self, b: &ChildGuard, pause: Duration) {
        let t = Instant::now();
        stall_backend(b, pause);
        let _ = fs::write(
            self.dir.join("stall.log"),
            format!("backend stopped for {:.1} s\n", t.elapsed().as_secs_f64()),
        );
    }

    /// SIGKILL, and the same backend started again on the same socket
    /// (its log appended); what happened in `restart.log`.
    fn restart(&self, b: &mut ChildGuard) {
        let text = match self.restart_backend(b) {
            Ok(took) => format!(
                "backend killed and started again in {:.1} s\n",
                took.as_secs_f64()
            ),
            Err(e) => format!("cannot start the backend again: {e:#}\n"),
        };
        let _ = fs::write(self.dir.join("restart.log"), text);
    }

    /// SIGKILL, and the same backend started again on the same socket
    /// (its log appended); how long that took.
    pub(super) fn restart_backend(&self, b: &mut ChildGuard) -> anyhow::Result<Duration> {
        let t = Instant::now();
        b.kill();
        *b = self.spawn_backend(true)?;
        Ok(t.elapsed())
    }
}

/// What `stop-cont.log` says: the stops taken and how long they took,
/// then the error that ended the loop, if one did.
fn stop_cont_log(times: u32, took: &mut [Duration], err: Option<&anyhow::Error>) -> String {
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mut s = format!("stops taken: {} of {times}\n", took.len());
    if let (Some(median), Some(longest)) = (took.get(took.len() / 2), took.last()) {
        s += &format!(
            "stop took: median {:.1} ms, longest {:.1} ms\n",
            ms(*median),
            ms(*longest)
        );
    }
    if let Some(e) = err {
        s += &format!("failed: {e:#}\n");
    }
    s
}

/// SIGSTOP, `pause`, SIGCONT: a stalled backend.
pub(super) fn stall_backend(b: &ChildGuard, pause: Duration) {
    b.signal(libc::SIGSTOP);
    sleep(pause);
    b.signal(libc::SIGCONT);
}
