//! The runner's client of the backend's control socket
//! (`spe_protocol::control`, line-delimited JSON): the SPUs' state and
//! statistics once the guest has powered off, and the faults the backend
//! delivered while the guest ran.

use anyhow::{bail, Context, Result};
use spe_protocol::control::{
    Command, Event, FaultDeliveredData, Reply, ServerLine, SpuList, VcpuArgs,
};
use std::io::{BufRead, BufReader, ErrorKind, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::{sleep, JoinHandle};
use std::time::Duration;

/// One connection, its greeting read.
struct Connection {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    /// The start of a line [`Connection::next_line`] has not finished.
    pending: Vec<u8>,
}

impl Connection {
    fn open(socket: &Path) -> Result<Connection> {
        let stream = UnixStream::connect(socket)
            .with_context(|| format!("connecting to {}", socket.display()))?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let mut c = Connection {
            writer: stream.try_clone()?,
            reader: BufReader::new(stream),
            pending: Vec::new(),
        };
        match c.line()? {
            ServerLine::Greeting(_) => Ok(c),
            other => bail!("expected the control socket's greeting, got {other:?}"),
        }
    }

    /// The next whole line, or `None` when none came within `wait` (a
    /// part of one is kept for the next call).
    fn next_line(&mut self, wait: Duration) -> std::io::Result<Option<Vec<u8>>> {
        self.reader.get_ref().set_read_timeout(Some(wait))?;
        match self.reader.read_until(b'\n', &mut self.pending) {
            Ok(_) if self.pending.ends_with(b"\n") => Ok(Some(std::mem::take(&mut self.pending))),
            Ok(_) => Err(ErrorKind::UnexpectedEof.into()),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn line(&mut self) -> Result<ServerLine> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            bail!("the control socket closed");
        }
        serde_json::from_str(&line).with_context(|| format!("not a control line: {line:?}"))
    }

    /// Runs `cmd` and returns its reply.
    fn execute(&mut self, cmd: &Command) -> Result<Reply> {
        let mut text = serde_json::to_string(&cmd.to_request(None)?)?;
        text.push('\n');
        self.writer.write_all(text.as_bytes())?;
        loop {
            match self.line()? {
                ServerLine::Return { ret, .. } => return Ok(cmd.parse_reply(ret)?),
                ServerLine::Error { error, .. } => bail!("{cmd:?}: {error}"),
                // Events of other clients' commands may come first.
                ServerLine::Event(_) => {}
                other => bail!("{cmd:?}: unexpected {other:?}"),
            }
        }
    }
}

/// One command on a connection of its own: what a user's `ctl` does.
pub fn execute(socket: &Path, cmd: &Command) -> Result<Reply> {
    Connection::open(socket)?.execute(cmd)
}

/// `query-spu` of every vCPU: the one place the harness asks the backend
/// for its SPUs. It answers only while a VM is connected, so the runner
/// asks before QEMU ends.
pub fn query_spu(socket: &Path) -> Result<SpuList> {
    match execute(socket, &Command::QuerySpu(VcpuArgs::default()))? {
        Reply::Spus(list) => Ok(list),
        other => bail!("query-spu answered {other:?}"),
    }
}

/// Collects the backend's `FAULT_DELIVERED` events (which no query lists:
/// `query-faults` names the faults still armed) while the guest runs: a
/// thread on a connection of its own, opened again after the backend is
/// restarted, until [`FaultWatch::finish`].
pub struct FaultWatch {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Vec<FaultDeliveredData>>,
}

impl FaultWatch {
    /// Connects (the backend made its control socket before its channel
    /// socket, which the runner waited for) and starts watching.
    pub fn start(socket: &Path) -> Result<FaultWatch> {
        let first = Connection::open(socket)?;
        let stop = Arc::new(AtomicBool::new(false));
        let (s, socket) = (stop.clone(), socket.to_path_buf());
        let thread = std::thread::Builder::new()
            .name("fault-watch".into())
            .spawn(move || watch(first, &socket, &s))?;
        Ok(FaultWatch { stop, thread })
    }

    /// The events' data, in the order they came.
    pub fn finish(self) -> Vec<FaultDeliveredData> {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap_or_default()
    }
}

fn watch(first: Connection, socket: &Path, stop: &AtomicBool) -> Vec<FaultDeliveredData> {
    let mut faults = Vec::new();
    let mut conn = Some(first);
    loop {
        let Some(c) = conn.as_mut() else {
            if stop.load(Ordering::SeqCst) {
                return faults;
            }
            // The backend went (killed, or restarted): connect again.
            sleep(Duration::from_millis(50));
            conn = Connection::open(socket).ok();
            continue;
        };
        match c.next_line(Duration::from_millis(100)) {
            Ok(Some(line)) => {
                let event = serde_json::from_slice(&line).map(|l| match l {
                    ServerLine::Event(e) => e.parse().ok(),
                    _ => None,
                });
                if let Ok(Some(Event::FaultDelivered(data))) = event {
                    faults.push(data);
                }
            }
            // Nothing for a while: everything sent so far has been read.
            Ok(None) if stop.load(Ordering::SeqCst) => return faults,
            Ok(None) => {}
            Err(_) => conn = None,
        }
    }
}
