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
use spe_protocol::control::{ErrorBody, ErrorClass, Request, ServerLine, MAX_LINE};

use super::Hub;

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

/// Binds `path` (replacing a stale socket) and serves clients of `hub`.
pub fn spawn(path: &Path, hub: Arc<Hub>) -> io::Result<Handle> {
    let listener = crate::listen::bind_replacing(path)?;
    let stop = Arc::new(AtomicBool::new(false));
    let s = stop.clone();
    let thread = std::thread::Builder::new()
        .name("control".into())
        .spawn(move || accept_loop(&listener, &hub, &s))?;
    info!("control socket listening on {}", path.display());
    Ok(Handle {
        stop,
        thread: Some(thread),
        path: path.to_path_buf(),
    })
}

fn accept_loop(listener: &UnixListener, hub: &Arc<Hub>, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                let hub = hub.clone();
                let spawned = std::thread::Builder::new()
                    .name("control-client".into())
                    .spawn(move || {
                        if let Err(e) = client(stream, &hub) {
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

fn client(stream: UnixStream, hub: &Arc<Hub>) -> io::Result<()> {
    stream.set_nonblocking(false)?;
    // A client that stops reading must not wedge its writer for ever.
    stream.set_write_timeout(Some(Duration::from_secs(5)))?;
    let (tx, rx) = hub.subscribe();
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
        buf.clear();
        // One byte more than allowed, so an overlong line is seen as such.
        let n = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut buf)?;
        if n == 0 {
            break;
        }
        if buf.last() != Some(&b'\n') {
            if n > MAX_LINE {
                let e = error_line(format!("line longer than {MAX_LINE} bytes; closing"));
                let _ = tx.send(e);
                warn!("control client sent an overlong line; dropped");
            }
            break;
        }
        let text = String::from_utf8_lossy(&buf);
        if text.trim().is_empty() {
            continue;
        }
        let reply = match serde_json::from_str::<Request>(&text) {
            Ok(req) => {
                debug!("control: {}", text.trim());
                hub.call(req)
            }
            Err(e) => ServerLine::Error {
                error: ErrorBody {
                    class: ErrorClass::GenericError,
                    desc: format!("not a request: {e}"),
                },
                id: None,
            },
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
