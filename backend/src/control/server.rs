//! The control socket's listener and connections: a thread accepts, and
//! each client gets a reader thread (requests, one line each) and a writer
//! thread (replies and events, in order).

use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use log::{debug, error, info, warn};
use spe_protocol::control::{
    Command, ErrorBody, ErrorClass, EventLine, EventList, Request, ServerLine,
    MAX_EVENTS_PER_QUERY, MAX_GUEST_LINE, MAX_LINE,
};

use super::{Hub, Origin, Subscription};

/// A running control socket. Dropping it stops accepting and removes the
/// socket; connected clients end when they disconnect or the process does.
pub struct Handle {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    path: PathBuf,
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Binds `path` (replacing a stale socket) and serves clients of `hub`:
/// the host's (`origin` Host), or QEMU's chardev of the guest control
/// port (Guest).
pub fn spawn(path: &Path, hub: Arc<Hub>, origin: Origin) -> io::Result<Handle> {
    let listener = crate::listen::bind_replacing(path)?;
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::Builder::new()
        .name("control".into())
        .spawn(move || accept_loop(&listener, &hub, &s, origin))?;
    match origin {
        Origin::Host => info!("control socket listening on {}", path.display()),
        Origin::Guest => info!(
            "guest control port's socket listening on {}",
            path.display()
        ),
    }
    Ok(Handle {
        stop,
        thread: Some(thread),
        path: path.to_path_buf(),
    })
}

fn accept_loop(listener: &UnixListener, hub: &Arc<Hub>, stop: &AtomicBool, origin: Origin) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let hub = hub.clone();
                let spawned = std::thread::Builder::new()
                    .name("control-client".into())
                    .spawn(move || {
                        let served = match origin {
                            Origin::Host => client(stream, &hub),
                            Origin::Guest => guest(stream, &hub),
                        };
                        if let Err(e) = served {
                            debug!("control client ended: {e}");
                        }
                    });
                if let Err(e) = spawned {
                    error!("control socket: cannot start a client thread: {e}");
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(50));
            }
            Err(e) => {
                // Out of fds, for instance: keep serving those connected.
                error!("control socket: accept failed: {e}");
                std::thread::sleep(Duration::from_millis(200));
            }
        }
    }
}

/// One line read by [`read_line`].
enum Line {
    Text(String),
    /// Longer than allowed: the bytes read so far are discarded.
    Overlong,
    Eof,
}

/// Reads one line of at most `max` bytes, newline included.
fn read_line(reader: &mut impl BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    buf.clear();
    // One byte more than allowed, so an overlong line is seen as such.
    let n = reader.take(max as u64 + 1).read_until(b'\n', buf)?;
    Ok(match buf.last() {
        _ if n == 0 => Line::Eof,
        Some(b'\n') => Line::Text(String::from_utf8_lossy(buf).into_owned()),
        _ if n > max => Line::Overlong,
        // The peer closed in the middle of a line.
        _ => Line::Eof,
    })
}

/// Discards input up to and including the next newline.
fn skip_line(reader: &mut impl BufRead) -> io::Result<()> {
    loop {
        let chunk = reader.fill_buf()?;
        if chunk.is_empty() {
            return Ok(());
        }
        match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => {
                reader.consume(i + 1);
                return Ok(());
            }
            None => {
                let n = chunk.len();
                reader.consume(n);
            }
        }
    }
}

/// A request line's reply, `None` for a blank line; `query_events`
/// answers that command, where the connection has one.
fn answer(
    text: &str,
    hub: &Hub,
    origin: Origin,
    query_events: impl FnOnce(&Request) -> ServerLine,
) -> Option<ServerLine> {
    if text.trim().is_empty() {
        return None;
    }
    Some(match serde_json::from_str::<Request>(text) {
        Ok(req) => {
            debug!("control ({origin:?}): {}", text.trim());
            if origin == Origin::Guest && req.execute == "query-events" {
                query_events(&req)
            } else {
                hub.call(req, origin)
            }
        }
        Err(e) => ServerLine::Error {
            error: ErrorBody {
                class: ErrorClass::GenericError,
                desc: format!("not a request: {e}"),
            },
            id: None,
        },
    })
}

fn client(stream: UnixStream, hub: &Arc<Hub>) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    // A client that stops reading must not wedge its writer for ever.
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let Subscription { tx, rx, .. } = hub.subscribe();
    let mut out = stream.try_clone()?;
    let writer = std::thread::Builder::new()
        .name("control-writer".into())
        .spawn(move || {
            for l in rx {
                // The reader's sign to stop (the hub keeps a sender).
                if l.is_empty() {
                    break;
                }
                if out.write_all(l.as_bytes()).is_err() || out.write_all(b"\n").is_err() {
                    break;
                }
            }
            let _ = out.shutdown(std::net::Shutdown::Both);
        })?;
    info!("control client connected");
    let _ = tx.send(Hub::greeting());
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        let text = match read_line(&mut reader, &mut buf, MAX_LINE)? {
            Line::Text(t) => t,
            Line::Overlong => {
                let e = error_line(format!("line longer than {MAX_LINE} bytes; closing"));
                let _ = tx.send(e);
                warn!("control client sent an overlong line; dropped");
                break;
            }
            Line::Eof => break,
        };
        let unused = |_: &Request| unreachable!("host connections push their events");
        let Some(reply) = answer(&text, hub, Origin::Host, unused) else {
            continue;
        };
        let Ok(l) = serde_json::to_string(&reply) else {
            break;
        };
        if tx.send(l).is_err() {
            break;
        }
    }
    let _ = tx.send(String::new());
    drop(tx);
    let _ = writer.join();
    info!("control client disconnected");
    Ok(())
}

/// The guest control port's connection (QEMU's chardev for the
/// virtio-serial port). Nothing is written but the greeting and the
/// replies to the guest's requests: QEMU holds what the guest has not
/// read while its port is closed, and a guest's close is not seen here,
/// so events wait in the connection's queue for `query-events`. A bad
/// or overlong line gets an error reply and the port stays usable.
fn guest(stream: UnixStream, hub: &Arc<Hub>) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let Subscription { tx, rx, missed } = hub.subscribe();
    // Only the hub sends events; the queue ends with this connection.
    drop(tx);
    let mut out = stream.try_clone()?;
    info!("guest control port connected");
    writeln!(out, "{}", Hub::greeting())?;
    let mut held: Option<String> = None;
    let mut query_events = |req: &Request| {
        let events = Command::from_request(req).map(|_| {
            let mut events = Vec::new();
            while events.len() < MAX_EVENTS_PER_QUERY {
                let Some(l) = held.take().or_else(|| rx.try_recv().ok()) else {
                    break;
                };
                match serde_json::from_str::<EventLine>(&l) {
                    Ok(e) => events.push(e),
                    Err(e) => warn!("guest control port: event line not JSON ({e}): {l}"),
                }
            }
            held = rx.try_recv().ok();
            EventList {
                events,
                more: held.is_some(),
                missed: missed.swap(0, Ordering::Relaxed),
            }
        });
        match events.and_then(|r| {
            serde_json::to_value(r)
                .map_err(|e| ErrorBody::new(ErrorClass::GenericError, e.to_string()))
        }) {
            Ok(ret) => ServerLine::Return {
                ret,
                id: req.id.clone(),
            },
            Err(error) => ServerLine::Error {
                error,
                id: req.id.clone(),
            },
        }
    };
    let mut reader = BufReader::new(stream);
    let mut buf = Vec::new();
    loop {
        let reply = match read_line(&mut reader, &mut buf, MAX_GUEST_LINE)? {
            Line::Eof => break,
            Line::Overlong => {
                skip_line(&mut reader)?;
                warn!("guest control port: a line over {MAX_GUEST_LINE} bytes, skipped");
                error_line(format!("line longer than {MAX_GUEST_LINE} bytes; skipped"))
            }
            Line::Text(t) => match answer(&t, hub, Origin::Guest, &mut query_events) {
                Some(r) => serde_json::to_string(&r).unwrap_or_default(),
                None => continue,
            },
        };
        writeln!(out, "{reply}")?;
    }
    info!("guest control port disconnected");
    Ok(())
}

fn error_line(desc: String) -> String {
    serde_json::to_string(&ServerLine::Error {
        error: ErrorBody {
            class: ErrorClass::GenericError,
            desc,
        },
        id: None,
    })
    .unwrap_or_default()
}
