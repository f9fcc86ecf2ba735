//! A client of the control socket, for `vhost-device-spe ctl` and tests.

use std::collections::VecDeque;
use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;
use spe_protocol::control::{ErrorBody, Greeting, Request, ServerLine};

/// Why a call failed.
#[derive(Debug)]
pub enum CallError {
    Io(io::Error),
    /// The server's `{"error": …}`.
    Server(ErrorBody),
    /// A line that is not the protocol.
    Protocol(String),
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Io(e) => write!(f, "{e}"),
            CallError::Server(e) => write!(f, "{:?}: {}", e.class, e.desc),
            CallError::Protocol(m) => write!(f, "protocol error: {m}"),
        }
    }
}

impl std::error::Error for CallError {}

impl From<io::Error> for CallError {
    fn from(e: io::Error) -> Self {
        CallError::Io(e)
    }
}

pub struct Client {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    greeting: Greeting,
    /// Events read while waiting for a reply.
    events: VecDeque<ServerLine>,
}

impl Client {
    /// Connects and reads the greeting.
    pub fn connect(path: &Path) -> Result<Client, CallError> {
        let stream = UnixStream::connect(path)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        let writer = stream.try_clone()?;
        let mut c = Client {
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
        loop {
            match self.read_line()? {
                l @ ServerLine::Event { .. } => self.events.push_back(l),
                l => return Ok(l),
            }
        }
    }

    /// Runs a command; its `return` value or the server's error.
    pub fn execute(&mut self, name: &str, arguments: Value) -> Result<Value, CallError> {
        let req = Request {
            execute: name.into(),
            arguments,
            id: None,
        };
        let text = serde_json::to_string(&req).map_err(|e| CallError::Protocol(e.to_string()))?;
        match self.send_raw(&text)? {
            ServerLine::Return { ret, .. } => Ok(ret),
            ServerLine::Error { error, .. } => Err(CallError::Server(error)),
            other => Err(CallError::Protocol(format!("unexpected {other:?}"))),
        }
    }

    /// The next event line (`{"event", "data", "timestamp"}` as JSON), or
    /// `None` after `within`.
    pub fn next_event(&mut self, within: Duration) -> Result<Option<Value>, CallError> {
        let to_json = |l: ServerLine| serde_json::to_value(l).unwrap_or(Value::Null);
        if let Some(l) = self.events.pop_front() {
            return Ok(Some(to_json(l)));
        }
        let end = Instant::now() + within;
        loop {
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(None);
            }
            self.reader.get_ref().set_read_timeout(Some(left))?;
            match self.read_line() {
                Ok(l @ ServerLine::Event { .. }) => return Ok(Some(to_json(l))),
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
