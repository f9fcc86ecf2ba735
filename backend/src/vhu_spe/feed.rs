//! `--plugin-socket`: sampled operations for the paravirtual device from
//! a TCG plugin in an unpatched QEMU (`plugin/`).
//!
//! The plugin speaks the QEMU channel's first two messages, HELLO and
//! SET_RING, and then only fills the shared ring, as the patched QEMU's
//! sampler does; the backend publishes each vCPU's sampling state in the
//! ring's IRQ area for it. PMBIRQ and the registers stay on virtio.
//!
//! A thread accepts one plugin at a time, does the handshake, and then
//! wakes the vhost-user worker (an eventfd registered as `FEED_EVENT`)
//! when the plugin rings the doorbell and every [`DRAIN_PERIOD`] while
//! a vCPU samples; the worker drains the ring into its SPUs. When the
//! plugin's connection closes (QEMU exited), the ring goes with it.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use log::{error, info, warn};
use spe_protocol::channel::{
    self, feature, ring::Layout, ring::SamplingState, Hello, HelloReply, MsgType, RingSetup, Status,
};
use spe_protocol::op::SampledOp;
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

use crate::lock;
use crate::qemu::conn::Conn;
use crate::spu::Spu;
use spe_channel::ring::Consumer;

/// How often the ring is drained while a vCPU samples (the plugin rings
/// the doorbell only when a ring is half full).
pub const DRAIN_PERIOD: Duration = Duration::from_millis(1);
/// How long the plugin may take over each handshake message.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// A connected plugin's ring.
struct Attached {
    consumer: Consumer,
    /// The sampling state last published, per vCPU.
    states: Vec<SamplingState>,
    doorbell: EventFd,
    _irq: EventFd,
}

/// The feed, shared by its thread and the vhost-user backend of each VM.
pub struct Feed {
    vcpus: u32,
    ring_slots: u32,
    attached: Mutex<Option<Attached>>,
    /// Written to wake the vhost-user worker.
    wake: EventFd,
    /// Some vCPU samples: drain on the timer.
    sampling: AtomicBool,
    /// Ring slots that did not parse (logged once).
    bad_slots: std::sync::atomic::AtomicU64,
}

/// What one drain did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Drained {
    /// Operations handed to the SPUs.
    pub applied: u64,
    /// Operations dropped for want of guest memory (no driver yet).
    pub dropped: u64,
}

impl Feed {
    /// Listens on `path` for the plugin of a VM of `vcpus` vCPUs.
    pub fn listen(path: &Path, vcpus: u32) -> io::Result<Arc<Feed>> {
        let _ = std::fs::remove_file(path);
        let listener = UnixListener::bind(path)?;
        let feed = Arc::new(Feed {
            vcpus,
            ring_slots: channel::ring::DEFAULT_SLOTS,
            attached: Mutex::new(None),
            wake: EventFd::new(EFD_NONBLOCK)?,
            sampling: AtomicBool::new(false),
            bad_slots: Default::default(),
        });
        let f = feed.clone();
        std::thread::Builder::new()
            .name("plugin-feed".into())
            .spawn(move || f.serve(listener))?;
        info!("plugin feed listening on {}", path.display());
        Ok(feed)
    }

    /// The eventfd the vhost-user worker waits on.
    pub fn wake_fd(&self) -> &EventFd {
        &self.wake
    }

    fn serve(&self, listener: UnixListener) {
        for stream in listener.incoming() {
            let stream = match stream {
                Ok(s) => s,
                Err(e) => {
                    error!("plugin feed: accept failed: {e}");
                    std::thread::sleep(Duration::from_millis(100));
                    continue;
                }
            };
            match self.handshake(&stream) {
                Ok(attached) => {
                    info!("plugin feed: a plugin is sampling {} vCPU(s)", self.vcpus);
                    let doorbell = attached.doorbell.as_raw_fd();
                    *lock(&self.attached) = Some(attached);
                    self.follow(&stream, doorbell);
                    *lock(&self.attached) = None;
                    self.sampling.store(false, Ordering::Relaxed);
                    self.poke();
                    info!("plugin feed: the plugin disconnected");
                }
                Err(e) => error!("plugin feed: connection dropped: {e}"),
            }
        }
    }

    fn poke(&self) {
        // Nonblocking: a counter that is already set wakes the worker.
        let _ = self.wake.write(1);
    }

    /// Wakes the worker on the doorbell and on the drain timer until the
    /// plugin hangs up (or sends anything: it has nothing more to say).
    fn follow(&self, stream: &UnixStream, doorbell: i32) {
        let mut fds = [
            libc::pollfd {
                fd: stream.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: doorbell,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        loop {
            let timeout = if self.sampling.load(Ordering::Relaxed) {
                DRAIN_PERIOD.as_millis() as i32
            } else {
                100
            };
            fds.iter_mut().for_each(|f| f.revents = 0);
            // SAFETY: two pollfds we own, for the call's duration.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
            if n < 0 {
                if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return;
            }
            if fds[0].revents != 0 {
                return;
            }
            if fds[1].revents != 0 {
                let mut v = 0u64;
                // SAFETY: reads the 8-byte eventfd counter into `v`.
                unsafe { libc::read(doorbell, (&mut v as *mut u64).cast(), 8) };
            }
            if n > 0 || self.sampling.load(Ordering::Relaxed) {
                self.poke();
            }
        }
    }

    /// HELLO, then SET_RING.
    fn handshake(&self, stream: &UnixStream) -> io::Result<Attached> {
        stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
        let mut conn = Conn::new(stream.try_clone()?);
        let mut buf = vec![0u8; channel::MAX_PAYLOAD as usize];
        let layout = Layout {
            vcpus: self.vcpus,
            slots: self.ring_slots,
        };
        let req = conn.read_request(&mut buf).map_err(io::Error::other)?;
        if req.kind != MsgType::Hello {
            return Err(io::Error::other(format!("{:?} before HELLO", req.kind)));
        }
        let hello = Hello::from_bytes(req.payload).map_err(io::Error::other)?;
        let status = if hello.version != channel::VERSION {
            Status::BAD_VERSION
        } else if hello.num_vcpus != self.vcpus {
            Status::BAD_VCPU
        } else {
            Status::OK
        };
        let reply = HelloReply {
            version: channel::VERSION,
            status,
            features: feature::SAMPLING_STATE,
            pmsver: 0,
            pmss: 0,
            pmsidr: 0,
            pmbidr: 0,
            pmu_counters: 0,
            ring_slots: layout.slots,
            ring_size: layout.size() as u64,
        };
        let header = req.header;
        conn.reply(&header, &reply.to_bytes())
            .map_err(io::Error::other)?;
        if status == Status::BAD_VCPU {
            return Err(io::Error::other(format!(
                "the plugin's QEMU has {} vCPU(s), the device {} (--vcpus)",
                hello.num_vcpus, self.vcpus
            )));
        }
        if status != Status::OK {
            return Err(io::Error::other(format!(
                "channel version {}, not {}",
                hello.version,
                channel::VERSION
            )));
        }
        let req = conn.read_request(&mut buf).map_err(io::Error::other)?;
        if req.kind != MsgType::SetRing {
            return Err(io::Error::other(format!(
                "{:?} instead of SET_RING",
                req.kind
            )));
        }
        let header = req.header;
        let setup = RingSetup::from_bytes(req.payload).map_err(io::Error::other)?;
        let attached = attach(&setup, layout, req.fds);
        let status = Status {
            status: if attached.is_ok() {
                Status::OK
            } else {
                Status::BAD_RESOURCE
            },
            pmbirq: false,
        };
        conn.reply(&header, &status.to_bytes())
            .map_err(io::Error::other)?;
        stream.set_read_timeout(None)?;
        attached
    }

    /// Applies what the plugin published to `spus` (writing records into
    /// `mem` if the driver gave the device its memory table), then
    /// publishes each SPU's sampling state where it changed.
    pub fn drain<M: vm_memory::GuestMemory>(&self, spus: &mut [Spu], mem: Option<&M>) -> Drained {
        let _ = self.wake.read();
        let mut done = Drained::default();
        let mut guard = lock(&self.attached);
        let Some(a) = guard.as_mut() else {
            return done;
        };
        let mut bad = 0u64;
        for (v, spu) in spus.iter_mut().enumerate().take(a.states.len()) {
            let res = a
                .consumer
                .drain(v as u32, |op: Result<SampledOp, _>| match (op, mem) {
                    (Ok(op), Some(mem)) => {
                        spu.sample(&op, mem);
                        done.applied += 1;
                    }
                    (Ok(_), None) => done.dropped += 1,
                    (Err(_), _) => bad += 1,
                });
            if let Err(e) = res {
                error!("plugin feed: {e}; dropping the plugin's ring");
                *guard = None;
                return done;
            }
            let counted = a.consumer.take_counted(v as u32);
            if counted > 0 {
                spu.skip_operations(counted);
            }
        }
        if bad > 0 && self.bad_slots.fetch_add(bad, Ordering::Relaxed) == 0 {
            warn!("plugin feed: malformed sampled operations skipped (logged once)");
        }
        drop(guard);
        self.publish(spus);
        done
    }

    /// Publishes each SPU's sampling state where it changed.
    pub fn publish(&self, spus: &[Spu]) {
        let mut guard = lock(&self.attached);
        let Some(a) = guard.as_mut() else {
            return;
        };
        for (v, spu) in spus.iter().enumerate().take(a.states.len()) {
            let state = spu.sampling_state();
            if state != a.states[v] {
                a.consumer.publish_state(v as u32, &state);
                a.states[v] = state;
            }
        }
        let sampling = a.states.iter().any(|s| s.enabled_els != 0);
        self.sampling.store(sampling, Ordering::Relaxed);
    }
}

/// Maps SET_RING's ring and takes its eventfds, as the QEMU channel does.
fn attach(setup: &RingSetup, layout: Layout, fds: Vec<File>) -> io::Result<Attached> {
    let (consumer, doorbell, irq) =
        crate::qemu::vm::map_ring(setup, layout, fds).map_err(io::Error::other)?;
    let states = (0..layout.vcpus).map(|v| consumer.published(v).1).collect();
    Ok(Attached {
        consumer,
        states,
        doorbell,
        _irq: irq,
    })
}

#[cfg(test)]
mod tests;
