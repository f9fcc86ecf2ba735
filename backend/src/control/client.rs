//! A client of the control socket, for `vhost-device-spe ctl` and tests.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use spe_protocol::control::{Command, ErrorBody, EventLine, Greeting, Reply, ServerLine};

/// How long a reply may take: the server's own wait for the device model
/// ([`super::CALL_TIMEOUT`]) and then some.
const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a call failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The server's `{"error": …}`.
    #[error("{0}")]
    Server(ErrorBody),
    /// A line that is not the protocol.
    #[error("protocol error: {0}")]
    Protocol(String),
}

/// A connection to the control socket (the QEMU channel's client is
/// another thing: `spe_channel::client`).
pub struct ControlClient {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    greeting: Greeting,
    /// Events read while waiting for a reply.
    events: VecDeque<EventLine>,
}

impl ControlClient {
    /// Connects and reads the greeting.
    pub fn connect(path: &Path) -> Result<ControlClient, CallError> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
        let writer = stream.try_clone()?;
        let mut c = ControlClient {
            reader: BufReader::new(stream),
            writer,
            greeting: Greeting::current(),
            events: VecDeque::new(),
        };
        match c.read_line()? {
            ServerLine::Greeting(g) => c.greeting = g,
            other => {
                return Err(CallError::Protocol(format!(
                    "expected a greeting, got {other:?}"
                )))
            }
        }
        Ok(c)
    }

    pub fn greeting(&self) -> &Greeting {
        &self.greeting
    }

    fn read_line(&mut self) -> Result<ServerLine, CallError> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(CallError::Io(io::ErrorKind::UnexpectedEof.into()));
        }
        serde_json::from_str(&line).map_err(|e| CallError::Protocol(format!("{e}: {line:?}")))
    }

    /// Sends a raw line (for tests of bad input) and returns the next reply.
    pub fn send_raw(&mut self, line: &str) -> Result<ServerLine, CallError> {
        self.writer.write_all(line.as_bytes())?;
        self.writer.write_all(b"\n")?;
        self.reply()
    }

    fn reply(&mut self) -> Result<ServerLine, CallError> {
        // next_event may have left a shorter timeout.
        self.reader
            .get_ref()
            .set_read_timeout(Some(REPLY_TIMEOUT))?;
        loop {
            match self.read_line()? {
                ServerLine::Event(e) => self.events.push_back(e),
                l => return Ok(l),
            }
        }
    }

    /// Runs a command; its reply or the server's error.
    pub fn execute(&mut self, cmd: &Command) -> Result<Reply, CallError> {
        let protocol = |e: serde_json::Error| CallError::Protocol(e.to_string());
        let text =
            serde_json::to_string(&cmd.to_request(None).map_err(protocol)?).map_err(protocol)?;
        match self.send_raw(&text)? {
            ServerLine::Return { ret, .. } => cmd.parse_reply(ret).map_err(protocol),
            ServerLine::Error { error, .. } => Err(CallError::Server(error)),
            other => Err(CallError::Protocol(format!("unexpected {other:?}"))),
        }
    }

    /// The next event line, or `None` after `within`.
    pub fn next_event(&mut self, within: Duration) -> Result<Option<EventLine>, CallError> {
        if let Some(e) = self.events.pop_front() {
            return Ok(Some(e));
        }
        let end = Instant::now() + within;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.reader.get_ref().set_read_timeout(Some(left))?;
            match self.read_line() {
                Ok(ServerLine::Event(e)) => return Ok(Some(e)),
                Ok(_) => continue,
                Err(CallError::Io(e))
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Ok(None)
                }
                Err(e) => return Err(e),
            }
        }
    }
}
