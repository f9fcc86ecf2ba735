//! The built-in sampled-operation source (`--synthetic RATE`): a plausible
//! EL1 kernel instruction stream for exercising the buffer and PMBIRQ
//! without a TCG feed. Operations go through [`Spu::operation`], so the
//! guest's interval counter and filters apply exactly as to real ones.
//!
//! Both front ends run it the same way: a [`TimerFd`] armed with [`arm`]
//! in their event loop, and [`Synthetic::tick`] on each expiry, on the
//! thread that owns the SPUs (the QEMU channel's thread, the vhost-user
//! worker), so sampling never races a register access.

use std::io;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use spe_protocol::op::{OpClass, SampledOp};
use spe_protocol::packet::{events, op as opclass};
use spe_protocol::regs::El;
use vm_memory::GuestMemory;
use vmm_sys_util::timerfd::TimerFd;

use crate::spu::Spu;

/// Period of the timer that paces the source.
pub const TICK: Duration = Duration::from_millis(1);

/// Starts `timer` expiring every [`TICK`], and makes it non-blocking so
/// a spurious wake-up cannot stall the event loop in `read`.
pub fn arm(timer: &mut TimerFd) -> io::Result<()> {
    set_nonblocking(timer)?;
    timer
        .reset(TICK, Some(TICK))
        .map_err(|e| io::Error::from_raw_os_error(e.errno()))
}

/// `timer`, made non-blocking (see [`arm`]).
pub fn nonblocking(mut timer: TimerFd) -> io::Result<TimerFd> {
    set_nonblocking(&mut timer)?;
    Ok(timer)
}

fn set_nonblocking(timer: &mut TimerFd) -> io::Result<()> {
    // SAFETY: F_GETFL/F_SETFL on a descriptor we own; results are checked.
    unsafe {
        let fd = timer.as_raw_fd();
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Kernel text the generated PCs fall in (a Linux arm64 `_text`).
pub const TEXT_BASE: u64 = 0xFFFF_8000_0801_0000;
/// The linear map the generated data addresses fall in; PA = VA - base.
pub const LINEAR_BASE: u64 = 0xFFFF_0000_0000_0000;

/// One vCPU's generator: a deterministic xorshift stream.
#[derive(Clone, Debug)]
pub struct Generator {
    state: u64,
    pc: u64,
    count: u64,
    contextidr: u32,
}

impl Generator {
    pub fn new(seed: u64) -> Generator {
        Generator {
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
            pc: TEXT_BASE,
            count: 1 << 32,
            contextidr: (seed as u32 & 0xFFF) + 1,
        }
    }

    fn rand(&mut self) -> u64 {
        crate::spu::xorshift64(&mut self.state)
    }

    /// The next operation: 40% loads, 20% stores, 25% branches, 15% other.
    pub fn next_op(&mut self) -> SampledOp {
        let r = self.rand();
        // Mostly straight-line code with occasional jumps within 1 MiB.
        self.pc = if r & 0xF == 0 {
            TEXT_BASE + ((r >> 8) & 0xF_FFFF & !3)
        } else {
            self.pc + 4
        };
        self.count += 1 + (r >> 60);
        let kind = (r >> 4) % 100;
        let lat = (r >> 16) as u32 & 0x1F;
        let mut op = SampledOp {
            pc: self.pc,
            el: El::El1,
            ns: true,
            events: events::RETIRED,
            total_latency: 2 + lat,
            issue_latency: 1 + (lat & 3),
            contextidr_el1: self.contextidr,
            physical_count: self.count,
            ..Default::default()
        };
        match kind {
            0..=59 => {
                let va = LINEAR_BASE + 0x4000_0000 + ((r >> 24) & 0x0FFF_FFF8);
                op.class = OpClass::LoadStore {
                    store: kind >= 40,
                    subclass: if r & 0x100 != 0 {
                        opclass::LDST_SIMD_FP
                    } else {
                        opclass::LDST_GP
                    },
                    vector: false,
                };
                op.data_va = va;
                op.data_pa = va - LINEAR_BASE;
                op.data_pa_valid = true;
                op.size = 8;
                op.translation_latency = 1 + (lat >> 3);
                op.events |= events::L1D_ACCESS | events::TLB_ACCESS;
                if r & 0x600 == 0 {
                    op.events |= events::L1D_REFILL | events::LLC_ACCESS;
                    op.total_latency += 40;
                }
            }
            60..=84 => {
                let conditional = r & 0x800 != 0;
                let indirect = r & 0x1000 != 0 && !conditional;
                op.class = OpClass::Branch {
                    conditional,
                    indirect,
                };
                op.target = TEXT_BASE + ((r >> 32) & 0xF_FFFC);
                if conditional && r & 0x2000 != 0 {
                    op.events |= events::NOT_TAKEN;
                }
                if r & 0x1_C000 == 0 {
                    op.events |= events::MISPRED;
                }
            }
            _ => {
                op.class = OpClass::Other {
                    cond_select: r & 0x800 != 0,
                    subclass: 0,
                };
            }
        }
        op
    }
}

/// Feeds `rate` operations per second to each vCPU's SPU, paced by the
/// caller's timer ticks.
#[derive(Clone, Debug)]
pub struct Synthetic {
    gens: Vec<Generator>,
    rate: u64,
    start: Option<Instant>,
    /// Operations generated per vCPU since `start`.
    done: u64,
}

impl Synthetic {
    pub fn new(vcpus: u32, rate: u64) -> Synthetic {
        Synthetic {
            gens: (0..vcpus)
                .map(|v| Generator::new(u64::from(v) + 1))
                .collect(),
            rate,
            start: None,
            done: 0,
        }
    }

    pub fn rate(&self) -> u64 {
        self.rate
    }

    /// Operations per vCPU owed at `now`. Debt beyond 10 ms worth (the
    /// loop was busy, or the rate exceeds what the model sustains) is
    /// dropped, so one tick never holds the front end's thread, and with
    /// it a vCPU waiting for a register access, for long.
    pub fn due(&mut self, now: Instant) -> u64 {
        let start = *self.start.get_or_insert(now);
        let total =
            (u128::from(self.rate) * now.duration_since(start).as_nanos() / 1_000_000_000) as u64;
        let cap = self.rate / 100 + 1;
        if total.saturating_sub(self.done) > cap {
            self.done = total - cap;
        }
        total.saturating_sub(self.done)
    }

    /// Runs `n` operations through every vCPU's SPU.
    pub fn run<M: GuestMemory>(&mut self, n: u64, spus: &mut [Spu], mem: &M) {
        for (g, spu) in self.gens.iter_mut().zip(spus.iter_mut()) {
            for _ in 0..n {
                spu.operation(&g.next_op(), mem);
            }
        }
        self.done += n;
    }

    /// Runs what is due at `now`.
    pub fn run_due<M: GuestMemory>(&mut self, now: Instant, spus: &mut [Spu], mem: &M) {
        let n = self.due(now);
        self.run(n, spus, mem);
    }

    /// One expiry of the [`arm`]ed `timer`: consumes it (epoll is
    /// level-triggered) and runs what is due, if there is guest memory to
    /// write to yet.
    pub fn tick<M: GuestMemory>(&mut self, timer: &mut TimerFd, spus: &mut [Spu], mem: Option<&M>) {
        // Nothing to read (EAGAIN) just means a spurious wake-up.
        let _ = timer.wait();
        if let Some(mem) = mem {
            self.run_due(Instant::now(), spus, mem);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn mix_is_plausible_and_parseable() {
        let mut g = Generator::new(1);
        let (mut ld, mut st, mut br, mut other) = (0, 0, 0, 0);
        for _ in 0..10_000 {
            let op = g.next_op();
            assert_eq!(op.el, El::El1);
            assert!(op.pc >= TEXT_BASE && op.pc < TEXT_BASE + (2 << 20));
            assert_eq!(SampledOp::from_bytes(&op.to_bytes()), Ok(op));
            match op.class {
                OpClass::LoadStore { store: false, .. } => ld += 1,
                OpClass::LoadStore { store: true, .. } => {
                    assert_eq!(op.data_pa, op.data_va - LINEAR_BASE);
                    st += 1
                }
                OpClass::Branch { .. } => br += 1,
                OpClass::Other { .. } => other += 1,
            }
        }
        for (n, lo, hi) in [
            (ld, 3500, 4500),
            (st, 1500, 2500),
            (br, 2000, 3000),
            (other, 1000, 2000),
        ] {
            assert!((lo..hi).contains(&n), "{ld} {st} {br} {other}");
        }
    }

    #[test]
    fn pacing() {
        let mut s = Synthetic::new(1, 1000);
        let t0 = Instant::now();
        assert_eq!(s.due(t0), 0);
        assert_eq!(s.due(t0 + Duration::from_millis(10)), 10);
        s.done += 10;
        assert_eq!(s.due(t0 + Duration::from_millis(15)), 5);
        // A 10 s stall is capped at 10 ms worth.
        assert_eq!(s.due(t0 + Duration::from_secs(10)), 11);
    }
}
