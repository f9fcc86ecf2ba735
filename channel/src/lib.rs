//! What both ends of vhost-device-spe's QEMU channel share, apart from the
//! daemon: the sampled-operation ring (the backend consumes it, QEMU's
//! sampler and the TCG plugin produce into it), the sealed memfds it and
//! guest RAM live in, and a client of the channel (the plugin's, and the
//! tests' and benchmarks' stand-in for the patched QEMU). The plugin links
//! this crate and `spe-protocol`, not the daemon.

pub mod client;
pub mod ring;
pub mod shm;

use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

/// Whether `stream` has input (or its peer hung up) within `within`,
/// polled without sleeping: a reply a few microseconds away is not worth a
/// context switch.
pub fn input_within(stream: &UnixStream, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    let mut pfd = libc::pollfd {
        fd: stream.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: one pollfd that lives across the call, and no timeout.
        let n = unsafe { libc::poll(&mut pfd, 1, 0) };
        if n != 0 {
            return n > 0;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};

    #[test]
    fn input_within_sees_waiting_input_hangup_and_nothing() {
        let (a, mut b) = UnixStream::pair().unwrap();
        // Nothing sent: false once the time is up, not before.
        let t = Instant::now();
        assert!(!input_within(&a, Duration::from_millis(2)));
        assert!(t.elapsed() >= Duration::from_millis(2));
        // A request waiting: true at once, and the poll does not consume it.
        b.write_all(&[7]).unwrap();
        assert!(input_within(&a, Duration::ZERO));
        let mut byte = [0u8];
        (&a).read_exact(&mut byte).unwrap();
        assert_eq!(byte, [7]);
        // The peer gone: true, so that the caller reads and sees it closed.
        drop(b);
        assert!(input_within(&a, Duration::ZERO));
    }
}
