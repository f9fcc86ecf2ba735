//! Waiting for a run to end, and its verdict.

use super::callgrind::InstrWindow;
use super::control::query_spu;
use super::cputime::CpuWindow;
use super::live::{Live, Watcher};
use super::process::{read_lossy, ChildGuard};
use super::qmp::Qmp;
use super::Run;
use crate::scenario::{Parsed, Verdict};
use crate::util::tail;
use anyhow::Result;
use spe_protocol::control::SpuList;
use std::thread::sleep;
use std::time::{Duration, Instant};

/// Why the runner stopped waiting, before looking at the console.
#[derive(Clone, Debug, PartialEq)]
pub enum Ending {
    QemuExited(String),
    Timeout(Duration),
    BackendDied(String),
    /// QEMU's QMP failed the runner: no connection, or no exit on `quit`.
    QmpFailed(String),
    /// The run's [`Watcher`] gave up on it.
    Watcher(String),
}

impl Run<'_> {
    /// Polls QEMU (and the backend) until QEMU exits, the backend dies, or
    /// the timeout passes; QEMU is killed on the last two. On the way it
    /// acts on the scenario's markers, and once the guest has powered off
    /// (`qmp`: QEMU keeps the VM there) it asks the backend for its SPUs
    /// and ends QEMU. `watcher` is called on every poll until then.
    /// Returns the ending and the backend's answer.
    pub(super) fn wait(
        &self,
        qemu: &mut ChildGuard,
        mut backend: Option<&mut ChildGuard>,
        mut qmp: Option<&mut Qmp>,
        watcher: &mut dyn Watcher,
    ) -> Result<(Ending, Result<SpuList, String>)> {
        let mut deadline = Instant::now() + self.spec.timeout;
        let mut kill_backend_when = self.spec.kill_backend_when;
        let mut on_marker = self.spec.spe.as_ref().and_then(|s| s.on_marker);
        let mut spu = Err("the guest did not power off".to_string());
        let mut quitting = false;
        let mut cpu = self.cpu.borrow_mut();
        let mut instr = self.instr.borrow_mut();
        loop {
            let timing = cpu.as_ref().is_some_and(CpuWindow::pending);
            let counting = instr.as_ref().is_some_and(InstrWindow::pending);
            if kill_backend_when.is_some() || on_marker.is_some() || timing || counting {
                let console = read_lossy(&self.console);
                if let Some(w) = cpu.as_mut().filter(|_| timing) {
                    w.poll(
                        &console,
                        qemu.pid(),
                        backend.as_deref().map(ChildGuard::pid),
                    );
                }
                if let Some(w) = instr.as_mut().filter(|_| counting) {
                    w.poll(&console, qemu.pid());
                }
                if let (Some(marker), Some(b)) = (kill_backend_when, backend.as_deref_mut()) {
                    if console.contains(marker) {
                        kill_backend_when = None;
                        b.signal_kill();
                    }
                }
                if let Some(m) = on_marker.filter(|m| console.contains(m.marker)) {
                    on_marker = None;
                    if let Err(e) = self.act(m.action, backend.as_deref_mut(), qmp.as_deref_mut()) {
                        qemu.kill();
                        return Ok((Ending::QmpFailed(format!("{e:#}")), spu));
                    }
                }
            }
            if !quitting && watcher.active() {
                let console = read_lossy(&self.console);
                let mut live = Live {
                    run: self,
                    console: &console,
                    qemu_pid: qemu.pid(),
                    backend: backend.as_deref_mut(),
                    qmp: qmp.as_deref_mut(),
                };
                if let Err(e) = watcher.poll(&mut live) {
                    qemu.kill();
                    return Ok((Ending::Watcher(format!("{e:#}")), spu));
                }
            }
            if let Some(q) = qmp.as_deref_mut().filter(|q| !quitting && q.shut_down()) {
                quitting = true;
                spu = query_spu(&self.ctl_socket()).map_err(|e| format!("{e:#}"));
                if let Err(e) = q.quit() {
                    qemu.kill();
                    return Ok((Ending::QmpFailed(format!("{e:#}")), spu));
                }
                deadline = Instant::now() + self.spec.qemu_grace();
            }
            if let Some(st) = qemu.try_wait()? {
                // QEMU may die of the backend's crash (a vhost-user
                // disconnect can abort it) before we saw it: name the first
                // cause.
                if let Some(b) = backend.as_deref_mut() {
                    if let Some(bst) = b.try_wait()? {
                        if !bst.success() {
                            return Ok((
                                Ending::BackendDied(format!(
                                    "backend crashed ({bst}); QEMU then exited ({st})"
                                )),
                                spu,
                            ));
                        }
                    }
                }
                return Ok((Ending::QemuExited(st.to_string()), spu));
            }
            if let Some(b) = backend.as_deref_mut() {
                if let Some(ending) = backend_crash(qemu, b)? {
                    return Ok((ending, spu));
                }
            }
            if Instant::now() >= deadline {
                qemu.kill();
                let ending = if quitting {
                    Ending::QmpFailed(format!(
                        "QEMU did not quit within {} s of the guest's power-off",
                        self.spec.qemu_grace().as_secs()
                    ))
                } else {
                    Ending::Timeout(self.spec.timeout)
                };
                return Ok((ending, spu));
            }
            // A CPU-time window is only as exact as the polling.
            sleep(Duration::from_millis(if timing { 10 } else { 50 }));
        }
    }
}

/// A backend that died while the guest runs, and whether QEMU survived
/// it (it must: the guest keeps running). A clean exit after QEMU hung up
/// is the backend's business.
fn backend_crash(qemu: &mut ChildGuard, b: &mut ChildGuard) -> Result<Option<Ending>> {
    let Some(st) = b.try_wait()? else {
        return Ok(None);
    };
    if st.success() {
        return Ok(None);
    }
    // Give QEMU a moment to show whether it survives the loss.
    let grace = Instant::now() + Duration::from_secs(1);
    while Instant::now() < grace {
        if let Some(qst) = qemu.try_wait()? {
            return Ok(Some(Ending::BackendDied(format!(
                "backend crashed ({st}); QEMU then exited ({qst})"
            ))));
        }
        sleep(Duration::from_millis(50));
    }
    qemu.kill();
    Ok(Some(Ending::BackendDied(format!(
        "backend crashed ({st}); QEMU survived and was stopped"
    ))))
}

/// The verdict: a failure from any source beats a PASS line.
pub fn decide(ending: &Ending, parsed: &Parsed, qemu_stderr: &str) -> Verdict {
    if let Some(panic) = &parsed.panic {
        return Verdict::Fail(format!("kernel panic: {panic}"));
    }
    match ending {
        Ending::Timeout(t) => return Verdict::Fail(format!("timeout after {} s", t.as_secs())),
        Ending::BackendDied(why) | Ending::QmpFailed(why) | Ending::Watcher(why) => {
            return Verdict::Fail(why.clone())
        }
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
    use crate::scenario::parse_console;

    #[test]
    fn a_pass_line_passes_and_nothing_else_does() {
        let pass = Parsed {
            pass: true,
            ..Parsed::default()
        };
        let exited = Ending::QemuExited("exit status: 0".into());
        assert_eq!(decide(&exited, &pass, ""), Verdict::Pass);
        assert!(matches!(
            decide(&exited, &Parsed::default(), ""),
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
    fn panic_timeout_and_a_stuck_qemu_beat_pass() {
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
        assert_eq!(
            decide(&Ending::QmpFailed("no quit".into()), &p, ""),
            Verdict::Fail("no quit".into())
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
}
