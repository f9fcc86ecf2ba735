//! The event queue, the device's interrupt: PMBIRQ level changes and
//! completed snapshot captures wait in `pending` until the driver posts a
//! buffer to complete.

use std::io::{self, Write};

use log::{debug, error, warn};
use spe_protocol::virtio::{Event, EventKind};
use vhost_user_backend::{VringRwLock, VringT};
use virtio_queue::QueueT;

use super::{Error, VhostUserSpeBackend, MAX_PENDING_EVENTS};

impl VhostUserSpeBackend {
    /// Queues `ev`, dropping the oldest if too many wait.
    pub(super) fn queue_event(&mut self, ev: Event) {
        if self.pending.len() == MAX_PENDING_EVENTS {
            warn!("event queue overflow: dropping oldest undelivered event");
            self.pending.pop_front();
        }
        debug!("event {:?}", ev);
        self.pending.push_back(ev);
    }

    /// Queues a PMBIRQ event if vCPU `vcpu`'s level is not the one last
    /// reported.
    pub(super) fn note_pmbirq(&mut self, vcpu: usize) {
        if let Some(hub) = &self.control {
            hub.report_delivered(vcpu as u32, &mut self.spus[vcpu]);
        }
        let spu = &self.spus[vcpu];
        let (pmbirq, pmbsr) = (spu.pmbirq(), spu.pmbsr());
        if pmbirq != self.irq_level[vcpu] {
            self.irq_level[vcpu] = pmbirq;
            if let Some(hub) = &self.control {
                hub.report_irq(vcpu as u32, pmbirq, spu);
            }
            self.queue_event(Event {
                vcpu: vcpu as u32,
                kind: EventKind::PmbirqChanged,
                pmbirq,
                pmbsr,
                data: 0,
            });
        }
    }

    /// Completes posted event buffers with pending events. Events stay
    /// pending while no buffer is available.
    pub(super) fn flush_events(&mut self, vring: &VringRwLock) -> Result<(), Error> {
        if self.pending.is_empty() || !vring.get_ref().get_queue().ready() {
            return Ok(());
        }
        let Ok(mem) = self.memory() else {
            return Ok(());
        };
        let mut used_any = false;
        while let Some(ev) = self.pending.front().copied() {
            let Some(chain) = vring
                .get_mut()
                .get_queue_mut()
                .pop_descriptor_chain(mem.clone())
            else {
                break;
            };
            let head = chain.head_index();
            let written = match chain.writer(&mem) {
                Ok(mut w) if w.available_bytes() >= Event::SIZE => {
                    w.write_all(&ev.to_bytes()).map(|()| Event::SIZE as u32)
                }
                Ok(w) => Err(io::Error::other(format!(
                    "event buffer has {} writable bytes, needs {}",
                    w.available_bytes(),
                    Event::SIZE
                ))),
                Err(e) => Err(io::Error::other(format!("bad descriptor chain: {e}"))),
            };
            let len = match written {
                Ok(len) => {
                    self.pending.pop_front();
                    len
                }
                // The event stays pending for the next (hopefully good) buffer.
                Err(e) => {
                    error!("event buffer dropped: {e}");
                    0
                }
            };
            vring.add_used(head, len).map_err(Error::Queue)?;
            used_any = true;
        }
        if used_any {
            self.signal(vring)?;
        }
        Ok(())
    }

    /// Signals the used queue, unless EVENT_IDX says the driver needs no
    /// interrupt.
    pub(super) fn signal(&self, vring: &VringRwLock) -> Result<(), Error> {
        let needed = !self.event_idx || vring.needs_notification().map_err(Error::Queue)?;
        if needed {
            vring.signal_used_queue().map_err(Error::Notify)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
