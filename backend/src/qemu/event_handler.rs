//! The server as an [`event_manager`] subscriber: the event tokens, what
//! each event runs, and the watches that come and go with a connection.

use std::time::Duration;

use event_manager::{EventOps, EventSet, Events, MutEventSubscriber};
use log::{error, warn};
use std::sync::atomic::Ordering;
use vmm_sys_util::timerfd::TimerFd;

use super::error::ConnError;
use super::server::Server;
use super::vm::Ring;

// Event tokens.
pub(super) const LISTENER: u32 = 0;
pub(super) const CONN: u32 = 1;
pub(super) const DOORBELL: u32 = 2;
pub(super) const TIMER: u32 = 3;
const EXIT: u32 = 4;
pub(super) const DRAIN: u32 = 5;
const CONTROL: u32 = 6;
pub(super) const HELLO_DEADLINE: u32 = 7;

/// How long the thread polls for the next request after serving one,
/// before it sleeps in epoll. A guest's driver accesses the registers in
/// bursts (an interrupt handler reads two and writes three), and waking a
/// sleeping thread costs about as much again.
const REQUEST_SPIN: Duration = Duration::from_micros(50);

/// Requests served in one burst before the other events get their turn.
const MAX_BURST: usize = 32;

/// Stops a connection's HELLO deadline (on HELLO or when it ends).
pub(super) fn stop_hello_deadline(ops: &mut EventOps, timer: &mut TimerFd) {
    let _ = ops.remove(Events::with_data(&*timer, HELLO_DEADLINE, EventSet::IN));
    let _ = timer.clear();
}

/// Watches `ring`'s doorbell and drain timer.
pub(super) fn watch_ring(ops: &mut EventOps, ring: &Ring) -> Result<(), event_manager::Error> {
    ops.add(Events::with_data(&ring.doorbell, DOORBELL, EventSet::IN))?;
    ops.add(Events::with_data(&ring.drain, DRAIN, EventSet::IN))
}

/// Stops watching `ring`'s descriptors (before they close: epoll keys on
/// the fd number).
pub(super) fn unwatch_ring(ops: &mut EventOps, ring: &Ring) {
    let _ = ops.remove(Events::with_data(&ring.doorbell, DOORBELL, EventSet::IN));
    let _ = ops.remove(Events::with_data(&ring.drain, DRAIN, EventSet::IN));
}

impl Server {
    /// The connection is readable (or hung up): serves the request, and
    /// those that follow within [`REQUEST_SPIN`], up to [`MAX_BURST`].
    fn on_conn_ready(&mut self, ops: &mut EventOps, set: EventSet) {
        let mut res = if set.contains(EventSet::IN) {
            self.on_request(ops)
        } else {
            Err(ConnError::Closed)
        };
        for _ in 1..MAX_BURST {
            let follows = self
                .conn
                .as_ref()
                .is_some_and(|c| c.input_within(REQUEST_SPIN));
            if res.is_err() || !follows {
                break;
            }
            res = self.on_request(ops);
        }
        if let Err(e) = res {
            self.disconnect(ops, e);
        }
    }
}

impl MutEventSubscriber for Server {
    fn init(&mut self, ops: &mut EventOps) {
        for ev in [
            Events::with_data(&self.listener, LISTENER, EventSet::IN),
            Events::with_data(&self.exit, EXIT, EventSet::IN),
        ] {
            if let Err(e) = ops.add(ev) {
                error!("QEMU channel: cannot watch fd {}: {e}", ev.fd());
                self.stop.store(true, Ordering::Relaxed);
            }
        }
        if let Some(hub) = &self.cfg.control {
            if let Err(e) = ops.add(Events::with_data(hub.wake_fd(), CONTROL, EventSet::IN)) {
                error!("QEMU channel: cannot watch the control socket's eventfd: {e}");
            }
        }
    }

    fn process(&mut self, events: Events, ops: &mut EventOps) {
        match events.data() {
            LISTENER => self.accept(ops),
            CONN => self.on_conn_ready(ops, events.event_set()),
            DOORBELL => {
                if let Err(e) = self.on_doorbell() {
                    self.disconnect(ops, e);
                }
            }
            TIMER => self.on_timer(),
            CONTROL => self.on_control(),
            HELLO_DEADLINE => self.on_hello_deadline(ops),
            DRAIN => {
                if let Err(e) = self.on_drain() {
                    self.disconnect(ops, e);
                }
            }
            EXIT => self.on_exit(ops),
            d => warn!("QEMU channel: event for unknown token {d}"),
        }
    }
}
