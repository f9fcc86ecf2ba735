//! The connection's socket: one request in (header, fds, payload), one
//! reply out, and the poll that tells whether another request follows.

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use log::debug;
use spe_protocol::channel::{Header, HelloReply, MsgType, MAX_REGIONS};
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use super::error::{ConnError, ProtocolError};
use super::vm::Vm;

/// The connected QEMU: its socket, and its VM once HELLO created it.
pub(crate) struct Conn {
    pub(super) stream: UnixStream,
    pub(super) vm: Option<Vm>,
}

/// One request as read off the socket.
pub(crate) struct Request<'a> {
    pub(crate) header: Header,
    pub(crate) kind: MsgType,
    pub(crate) payload: &'a [u8],
    /// Only SET_MEM_TABLE and SET_RING carry any.
    pub(crate) fds: Vec<File>,
}

impl Conn {
    pub(crate) fn new(stream: UnixStream) -> Conn {
        Conn { stream, vm: None }
    }

    /// Reads one request into `buf`: a request type, and fds only where
    /// its type takes them.
    pub(crate) fn read_request<'a>(&mut self, buf: &'a mut [u8]) -> Result<Request<'a>, ConnError> {
        let (header, size, fds) = read_message(&mut self.stream, buf)?;
        if header.is_reply() {
            return Err(ProtocolError::ReplyAsRequest(header.msg_type).into());
        }
        let kind = header.kind()?;
        debug!(
            "request {kind:?} vCPU {:#x} size {size} fds {}",
            header.vcpu,
            fds.len()
        );
        let wants_fds = matches!(kind, MsgType::SetMemTable | MsgType::SetRing);
        if !wants_fds && !fds.is_empty() {
            return Err(ProtocolError::UnexpectedFds {
                kind,
                count: fds.len(),
            }
            .into());
        }
        Ok(Request {
            header,
            kind,
            payload: &buf[..size],
            fds,
        })
    }

    /// Sends the reply to `req` with `payload`.
    pub(crate) fn reply(&self, req: &Header, payload: &[u8]) -> Result<(), ConnError> {
        let mut buf = [0u8; Header::SIZE + HelloReply::SIZE];
        let n = Header::SIZE + payload.len();
        buf[..Header::SIZE].copy_from_slice(&req.reply_to(payload.len()).to_bytes());
        buf[Header::SIZE..n].copy_from_slice(payload);
        // One write: header and payload leave together. MSG_NOSIGNAL: a peer
        // that vanished is an error here, not a SIGPIPE for a host process
        // whose main is not Rust's (which would not ignore it).
        let mut sent = 0;
        while sent < n {
            // SAFETY: sends initialised bytes of `buf` on a socket we own.
            let r = unsafe {
                libc::send(
                    self.stream.as_raw_fd(),
                    buf[sent..n].as_ptr().cast(),
                    n - sent,
                    libc::MSG_NOSIGNAL,
                )
            };
            if r < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(ConnError::Io(e));
            }
            sent += r as usize;
        }
        Ok(())
    }

    /// Whether another request (or a hang-up) arrives within `within`.
    pub(super) fn input_within(&self, within: Duration) -> bool {
        spe_channel::input_within(&self.stream, within)
    }
}

/// Reads one message: the header (with any fds), then its payload.
fn read_message(
    stream: &mut UnixStream,
    payload: &mut [u8],
) -> Result<(Header, usize, Vec<File>), ConnError> {
    let mut hdr = [0u8; Header::SIZE];
    let mut raw_fds: [RawFd; MAX_REGIONS] = [-1; MAX_REGIONS];
    let mut iov = [libc::iovec {
        iov_base: hdr.as_mut_ptr().cast(),
        iov_len: hdr.len(),
    }];
    let (n, nfds) = loop {
        // SAFETY: the iovec points at `hdr`, which lives across the call.
        match unsafe { stream.recv_with_fds(&mut iov, &mut raw_fds) } {
            Ok(r) => break r,
            Err(e) if e.errno() == libc::EINTR => continue,
            Err(e) => return Err(ConnError::Io(io::Error::from_raw_os_error(e.errno()))),
        }
    };
    // SAFETY: recvmsg gave us these descriptors; we own them now.
    let fds: Vec<File> = raw_fds[..nfds]
        .iter()
        .map(|&fd| unsafe { File::from_raw_fd(fd) })
        .collect();
    if n == 0 {
        return Err(ConnError::Closed);
    }
    stream.read_exact(&mut hdr[n..])?;
    let h = Header::from_bytes(&hdr)?;
    let size = h.size as usize;
    stream.read_exact(&mut payload[..size])?;
    Ok((h, size, fds))
}
