//! Listening sockets: one helper for every socket the daemon serves.

use std::io;
use std::os::unix::net::UnixListener;
use std::path::Path;

/// Binds a non-blocking listener at `path`, replacing a stale socket left
/// by a daemon that did not exit cleanly.
pub fn bind_replacing(path: &Path) -> io::Result<UnixListener> {
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let listener = UnixListener::bind(path)?;
    listener.set_nonblocking(true)?;
    Ok(listener)
}
