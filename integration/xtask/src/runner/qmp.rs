//! QEMU's QMP socket, for a run whose QEMU pauses at the guest's power-off
//! (`-action shutdown=pause`): a thread waits for the `SHUTDOWN` event,
//! and the runner ends QEMU with `quit` once it has asked the backend
//! what it needs. A [`super::Watcher`] may also pause and resume the VM
//! (`stop`, `cont`; the thread follows the `STOP` and `RESUME` events).

use super::process::ChildGuard;
use anyhow::{bail, Context, Result};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::Shutdown;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{sleep, JoinHandle};
use std::time::{Duration, Instant};

pub struct Qmp {
    writer: UnixStream,
    shutdown: Arc<AtomicBool>,
    /// Whether the vCPUs run: false from a `STOP` event to a `RESUME`.
    running: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Qmp {
    /// Connects to the socket QEMU creates at its start (within `within`,
    /// while QEMU lives) and leaves capabilities negotiation, so that
    /// events come.
    pub fn connect(path: &Path, qemu: &mut ChildGuard, within: Duration) -> Result<Qmp> {
        let deadline = Instant::now() + within;
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) => {
                    if let Some(st) = qemu.try_wait()? {
                        bail!("QEMU exited ({st}) before its QMP socket answered");
                    }
                    if Instant::now() > deadline {
                        bail!("QEMU's QMP socket {}: {e}", path.display());
                    }
                    sleep(Duration::from_millis(20));
                }
            }
        };
        stream.set_read_timeout(Some(within))?;
        let mut writer = stream.try_clone()?;
        let mut reader = BufReader::new(stream);
        let greeting = read_json(&mut reader)?;
        if greeting.get("QMP").is_none() {
            bail!("not QMP's greeting: {greeting}");
        }
        writer.write_all(b"{\"execute\": \"qmp_capabilities\"}\n")?;
        let reply = read_json(&mut reader)?;
        if reply.get("return").is_none() {
            bail!("qmp_capabilities: {reply}");
        }
        reader.get_ref().set_read_timeout(None)?;
        let shutdown = Arc::new(AtomicBool::new(false));
        let running = Arc::new(AtomicBool::new(true));
        let (flag, run_flag) = (shutdown.clone(), running.clone());
        let thread = std::thread::Builder::new()
            .name("qmp-events".into())
            .spawn(move || {
                // Until QEMU closes the socket (it exits) or Drop shuts it.
                while let Ok(v) = read_json(&mut reader) {
                    match v["event"].as_str() {
                        Some("SHUTDOWN") => flag.store(true, Ordering::SeqCst),
                        Some("STOP") => run_flag.store(false, Ordering::SeqCst),
                        Some("RESUME") => run_flag.store(true, Ordering::SeqCst),
                        _ => {}
                    }
                }
            })?;
        Ok(Qmp {
            writer,
            shutdown,
            running,
            thread: Some(thread),
        })
    }

    /// Whether the guest has powered off (QEMU now pauses it).
    pub fn shut_down(&self) -> bool {
        self.shutdown.load(Ordering::SeqCst)
    }

    /// Pauses the VM (`stop`) and waits for QEMU's `STOP` event.
    pub fn pause(&mut self, within: Duration) -> Result<()> {
        self.execute_until("stop", false, within)
    }

    /// Lets the VM run again (`cont`) and waits for the `RESUME` event.
    pub fn resume(&mut self, within: Duration) -> Result<()> {
        self.execute_until("cont", true, within)
    }

    fn execute_until(&mut self, cmd: &str, running: bool, within: Duration) -> Result<()> {
        self.writer
            .write_all(format!("{{\"execute\": \"{cmd}\"}}\n").as_bytes())
            .with_context(|| format!("QMP {cmd}"))?;
        let deadline = Instant::now() + within;
        while self.running.load(Ordering::SeqCst) != running {
            if Instant::now() > deadline {
                bail!("QMP {cmd}: no event within {} s", within.as_secs());
            }
            sleep(Duration::from_millis(1));
        }
        Ok(())
    }

    /// Asks QEMU to exit.
    pub fn quit(&mut self) -> Result<()> {
        self.writer
            .write_all(b"{\"execute\": \"quit\"}\n")
            .context("QMP quit")
    }
}

impl Drop for Qmp {
    fn drop(&mut self) {
        let _ = self.writer.shutdown(Shutdown::Both);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn read_json(r: &mut BufReader<UnixStream>) -> Result<Value> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        bail!("QMP socket closed");
    }
    serde_json::from_str(&line).with_context(|| format!("not QMP: {line:?}"))
}
