//! The server thread's state, and what happens besides requests: a QEMU
//! connecting and going, the HELLO deadline, the ring's doorbell and
//! drain timer, the synthetic source's ticks and the control socket's
//! commands.

use std::io;
use std::os::unix::net::UnixListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use event_manager::{EventOps, EventSet, Events};
use log::{error, info, warn};
use spe_protocol::channel::{ALL_VCPUS, MAX_PAYLOAD};
use vmm_sys_util::eventfd::EventFd;
use vmm_sys_util::timerfd::TimerFd;

use super::conn::Conn;
use super::error::{ConnError, ProtocolError};
use super::event_handler::{
    stop_hello_deadline, unwatch_ring, CONN, HELLO_DEADLINE, LISTENER, TIMER,
};
use super::vm::Vm;
use super::{ServerConfig, HELLO_TIMEOUT, IO_TIMEOUT};

/// Everything the server thread owns.
pub(super) struct Server {
    pub(super) cfg: ServerConfig,
    pub(super) listener: UnixListener,
    pub(super) exit: EventFd,
    pub(super) stop: Arc<AtomicBool>,
    /// Paces the synthetic source.
    pub(super) timer: TimerFd,
    /// Runs from accept to HELLO (HELLO_TIMEOUT).
    pub(super) hello_timer: TimerFd,
    pub(super) conn: Option<Conn>,
    /// Reused payload buffer: no allocation per request.
    pub(super) payload: Box<[u8]>,
}

impl Server {
    pub(super) fn new(
        cfg: ServerConfig,
        listener: UnixListener,
        exit: EventFd,
    ) -> io::Result<Server> {
        Ok(Server {
            cfg,
            listener,
            exit,
            stop: Arc::new(AtomicBool::new(false)),
            timer: TimerFd::new()?,
            hello_timer: TimerFd::new()?,
            conn: None,
            payload: vec![0; MAX_PAYLOAD as usize].into_boxed_slice(),
        })
    }

    /// The connected VM, once HELLO created it.
    fn vm(&mut self) -> Option<&mut Vm> {
        self.conn.as_mut().and_then(|c| c.vm.as_mut())
    }

    pub(super) fn accept(&mut self, ops: &mut EventOps) {
        let stream = match self.listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) => {
                error!("QEMU channel: accept failed: {e}");
                return;
            }
        };
        // Blocking with timeouts: a request is read whole once it starts,
        // and a peer that stalls is dropped instead of hanging the loop.
        let setup = stream
            .set_nonblocking(false)
            .and_then(|()| stream.set_read_timeout(Some(IO_TIMEOUT)))
            .and_then(|()| stream.set_write_timeout(Some(IO_TIMEOUT)));
        if let Err(e) = setup {
            error!("QEMU channel: cannot configure the connection: {e}");
            return;
        }
        if let Err(e) = ops.add(Events::with_data(&stream, CONN, EventSet::IN)) {
            error!("QEMU channel: cannot watch the connection: {e}");
            return;
        }
        // One VM at a time: the next one waits in the backlog, so this
        // one must say HELLO in time.
        let _ = ops.remove(Events::with_data(&self.listener, LISTENER, EventSet::IN));
        let armed = self
            .hello_timer
            .reset(HELLO_TIMEOUT, None)
            .map_err(|e| e.to_string())
            .and_then(|()| {
                ops.add(Events::with_data(
                    &self.hello_timer,
                    HELLO_DEADLINE,
                    EventSet::IN,
                ))
                .map_err(|e| format!("{e:?}"))
            });
        if let Err(e) = armed {
            error!("QEMU channel: cannot arm the HELLO deadline: {e}");
        }
        info!("QEMU connected");
        self.conn = Some(Conn::new(stream));
    }

    pub(super) fn disconnect(&mut self, ops: &mut EventOps, why: ConnError) {
        match why {
            ConnError::Closed => info!("QEMU disconnected"),
            ConnError::Io(e) => error!("QEMU connection failed: {e}; dropping it"),
            ConnError::Protocol(e) => {
                error!("QEMU channel protocol error: {e}; dropping the connection")
            }
        }
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if let Some(vm) = &mut conn.vm {
            // Before the stats line, which tells a waiting harness the VM
            // is done with.
            vm.finish_recording();
            crate::stats::log_stats(&vm.spus);
        }
        // Unregister before the fds close: epoll keys on the fd number.
        let _ = ops.remove(Events::with_data(&conn.stream, CONN, EventSet::IN));
        stop_hello_deadline(ops, &mut self.hello_timer);
        if let Some(ring) = conn.vm.as_ref().and_then(|vm| vm.ring.as_ref()) {
            unwatch_ring(ops, ring);
        }
        if conn.vm.as_ref().is_some_and(|vm| vm.synthetic.is_some()) {
            let _ = ops.remove(Events::with_data(&self.timer, TIMER, EventSet::IN));
            let _ = self.timer.clear();
        }
        drop(conn);
        if let Err(e) = ops.add(Events::with_data(&self.listener, LISTENER, EventSet::IN)) {
            error!("QEMU channel: cannot watch the listener again: {e}");
        }
        info!("state reset; waiting for the next VM");
    }

    /// The HELLO deadline expired: a connection still without a VM goes.
    pub(super) fn on_hello_deadline(&mut self, ops: &mut EventOps) {
        let _ = self.hello_timer.wait();
        if self.conn.as_ref().is_some_and(|c| c.vm.is_none()) {
            self.disconnect(ops, ProtocolError::NoHello(HELLO_TIMEOUT).into());
        }
    }

    /// The handle asked the thread to stop.
    pub(super) fn on_exit(&mut self, ops: &mut EventOps) {
        let _ = self.exit.read();
        if self.conn.is_some() {
            self.disconnect(ops, ConnError::Closed);
        }
        self.stop.store(true, Ordering::Relaxed);
    }

    /// QEMU rang the doorbell: a ring is half full.
    pub(super) fn on_doorbell(&mut self) -> Result<(), ConnError> {
        let Some(vm) = self.vm() else {
            return Ok(());
        };
        if let Some(ring) = &vm.ring {
            // Readable, so this does not block; the count is irrelevant.
            let _ = ring.doorbell.read();
        }
        if vm.deterministic {
            // Only QEMU's own requests drain (QEMU does not ring then).
            return Ok(());
        }
        vm.drain(ALL_VCPUS)?;
        vm.publish(ALL_VCPUS, None);
        Ok(())
    }

    /// The drain timer: the rings, while any vCPU samples.
    pub(super) fn on_drain(&mut self) -> Result<(), ConnError> {
        let Some(vm) = self.vm() else {
            return Ok(());
        };
        if let Some(ring) = &mut vm.ring {
            // Non-blocking: a spurious wake-up reads nothing.
            let _ = ring.drain.wait();
        }
        vm.drain(ALL_VCPUS)?;
        vm.publish(ALL_VCPUS, None);
        Ok(())
    }

    /// Commands from the control socket, run between QEMU's requests.
    pub(super) fn on_control(&mut self) {
        let Some(hub) = self.cfg.control.clone() else {
            return;
        };
        match self.vm() {
            Some(vm) => {
                // The rings first, so a query sees what QEMU sampled;
                // deterministic, only what QEMU handed over.
                if !vm.deterministic {
                    if let Err(e) = vm.drain(ALL_VCPUS) {
                        warn!("draining before a control command: {e}");
                    }
                }
                hub.serve_calls(Some(&mut vm.spus));
                vm.publish(ALL_VCPUS, None);
            }
            None => hub.serve_calls(None),
        }
    }

    /// A tick of the synthetic source.
    pub(super) fn on_timer(&mut self) {
        let Some(vm) = self.conn.as_mut().and_then(|c| c.vm.as_mut()) else {
            let _ = self.timer.wait();
            return;
        };
        if let Some(s) = vm.synthetic.as_mut() {
            s.tick(&mut self.timer, &mut vm.spus, Some(&vm.mem));
        } else {
            let _ = self.timer.wait();
        }
        vm.publish(ALL_VCPUS, None);
    }
}
