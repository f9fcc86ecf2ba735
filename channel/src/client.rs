//! A Rust client of the QEMU channel, speaking it as the patched QEMU does:
//! the TCG plugin's feed, and tests and benchmarks of the backend.

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use spe_protocol::channel::{
    self, ring::Layout, Header, Hello, HelloReply, MemRegion, MemTable, MsgType, Restore,
    RingSetup, Status, SysregAccess, SysregReply, VERSION,
};
use spe_protocol::regs::{PeContext, SysReg, TranslationRegs};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};
use vmm_sys_util::sock_ctrl_msg::ScmSocket;

use crate::ring::Producer;

/// How long a request polls for its reply before it sleeps in `read`: what
/// QEMU's vCPU threads do (`SPE_REPLY_SPIN_NS`).
const REPLY_SPIN: Duration = Duration::from_micros(50);

fn bad(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// The ring a front end (QEMU, the plugin) creates and hands over with
/// SET_RING: its memory, the producer side and the two eventfds.
#[derive(Debug)]
pub struct FrontRing {
    pub file: File,
    pub producer: Producer,
    /// Rung by the producer: "drain the ring".
    pub doorbell: EventFd,
    /// Rung by the backend when a PMBIRQ level changes.
    pub irq: EventFd,
    pub layout: Layout,
}

impl FrontRing {
    pub fn create(layout: Layout) -> io::Result<FrontRing> {
        let (file, producer) = Producer::create(layout)?;
        Ok(FrontRing {
            file,
            producer,
            doorbell: EventFd::new(EFD_NONBLOCK)?,
            irq: EventFd::new(EFD_NONBLOCK)?,
            layout,
        })
    }

    /// Waits until the IRQ eventfd fires; returns whether it did.
    pub fn wait_irq(&self, timeout: Duration) -> bool {
        let mut pfd = libc::pollfd {
            fd: self.irq.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
        // SAFETY: one valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        n == 1 && self.irq.read().is_ok()
    }
}

/// One connection to the backend, speaking as QEMU.
#[derive(Debug)]
pub struct ChannelClient {
    stream: UnixStream,
}

impl ChannelClient {
    pub fn connect(path: &Path) -> io::Result<ChannelClient> {
        Ok(ChannelClient {
            stream: UnixStream::connect(path)?,
        })
    }

    pub fn stream(&self) -> &UnixStream {
        &self.stream
    }

    /// Sends raw bytes (with fds), for malformed-input tests.
    pub fn send_raw(&mut self, bytes: &[u8], fds: &[RawFd]) -> io::Result<()> {
        if fds.is_empty() {
            return self.stream.write_all(bytes);
        }
        let n = self
            .stream
            .send_with_fds(&[bytes], fds)
            .map_err(|e| io::Error::from_raw_os_error(e.errno()))?;
        self.stream.write_all(&bytes[n..])
    }

    /// Reads one reply: header and payload.
    pub fn recv(&mut self) -> io::Result<(Header, Vec<u8>)> {
        let mut hdr = [0u8; Header::SIZE];
        self.stream.read_exact(&mut hdr)?;
        let h = Header::from_bytes(&hdr).map_err(bad)?;
        let mut payload = vec![0u8; h.size as usize];
        self.stream.read_exact(&mut payload)?;
        Ok((h, payload))
    }

    /// Sends a request and returns its reply's payload.
    pub fn request(
        &mut self,
        t: MsgType,
        vcpu: u32,
        payload: &[u8],
        fds: &[RawFd],
    ) -> io::Result<Vec<u8>> {
        let mut msg = Vec::with_capacity(Header::SIZE + payload.len());
        msg.extend_from_slice(&Header::request(t, vcpu, payload.len()).to_bytes());
        msg.extend_from_slice(payload);
        self.send_raw(&msg, fds)?;
        // Poll before the blocking read, as QEMU's vCPUs do.
        crate::input_within(&self.stream, REPLY_SPIN);
        // Replies have a fixed size per type and arrive in one write, so
        // one read usually gets all of it (this is the latency path).
        let want = match t {
            MsgType::Hello => HelloReply::SIZE,
            MsgType::Sysreg => SysregReply::SIZE,
            _ => Status::SIZE,
        };
        let mut buf = [0u8; Header::SIZE + HelloReply::SIZE];
        let buf = &mut buf[..Header::SIZE + want];
        self.stream.read_exact(buf)?;
        let h = Header::from_bytes(&buf[..Header::SIZE]).map_err(bad)?;
        if h.msg_type != t as u16 | channel::REPLY || h.vcpu != vcpu || h.size as usize != want {
            return Err(bad(format!("reply {h:?} to {t:?} for vCPU {vcpu}")));
        }
        Ok(buf[Header::SIZE..].to_vec())
    }

    fn status(
        &mut self,
        t: MsgType,
        vcpu: u32,
        payload: &[u8],
        fds: &[RawFd],
    ) -> io::Result<Status> {
        Status::from_bytes(&self.request(t, vcpu, payload, fds)?).map_err(bad)
    }

    pub fn hello(&mut self, num_vcpus: u32) -> io::Result<HelloReply> {
        let p = Hello {
            version: VERSION,
            num_vcpus,
            midr: 0,
        }
        .to_bytes();
        HelloReply::from_bytes(&self.request(MsgType::Hello, channel::ALL_VCPUS, &p, &[])?)
            .map_err(bad)
    }

    pub fn set_mem_table(&mut self, regions: &[(MemRegion, &File)]) -> io::Result<Status> {
        let table = MemTable {
            regions: regions.iter().map(|(r, _)| *r).collect(),
        };
        let fds: Vec<RawFd> = regions.iter().map(|(_, f)| f.as_raw_fd()).collect();
        self.status(
            MsgType::SetMemTable,
            channel::ALL_VCPUS,
            &table.to_bytes(),
            &fds,
        )
    }

    pub fn set_ring(
        &mut self,
        size: u64,
        mem: &File,
        doorbell: &EventFd,
        irq: &EventFd,
    ) -> io::Result<Status> {
        self.status(
            MsgType::SetRing,
            channel::ALL_VCPUS,
            &RingSetup { size }.to_bytes(),
            &[mem.as_raw_fd(), doorbell.as_raw_fd(), irq.as_raw_fd()],
        )
    }

    /// SET_RING with `ring`'s memory and eventfds, at its layout's size.
    pub fn attach_ring(&mut self, ring: &FrontRing) -> io::Result<Status> {
        self.set_ring(
            ring.layout.size() as u64,
            &ring.file,
            &ring.doorbell,
            &ring.irq,
        )
    }

    pub fn sysreg(
        &mut self,
        vcpu: u32,
        encoding: u32,
        write: Option<u64>,
        ctx: PeContext,
    ) -> io::Result<SysregReply> {
        let p = SysregAccess {
            encoding,
            is_write: write.is_some(),
            value: write.unwrap_or(0),
            ctx,
        }
        .to_bytes();
        SysregReply::from_bytes(&self.request(MsgType::Sysreg, vcpu, &p, &[])?).map_err(bad)
    }

    /// `MSR reg, value` from a Non-secure EL1 kernel.
    pub fn write(&mut self, vcpu: u32, reg: SysReg, value: u64) -> io::Result<SysregReply> {
        self.sysreg(vcpu, reg.encoding(), Some(value), PeContext::default())
    }

    /// `MRS reg` from a Non-secure EL1 kernel.
    pub fn read(&mut self, vcpu: u32, reg: SysReg) -> io::Result<SysregReply> {
        self.sysreg(vcpu, reg.encoding(), None, PeContext::default())
    }

    pub fn set_translation(&mut self, vcpu: u32, t: &TranslationRegs) -> io::Result<Status> {
        self.status(
            MsgType::SetTranslation,
            vcpu,
            &channel::translation_to_bytes(t),
            &[],
        )
    }

    pub fn set_context(&mut self, vcpu: u32, c: &PeContext) -> io::Result<Status> {
        let mut b = [0u8; channel::CONTEXT_SIZE];
        channel::context_to_bytes(c, &mut b);
        self.status(MsgType::SetContext, vcpu, &b, &[])
    }

    pub fn pmu_counters(
        &mut self,
        vcpu: u32,
        event: &[u64; 31],
        cycle: u64,
        instruction: u64,
    ) -> io::Result<Status> {
        let b = channel::pmu_counters_to_bytes(event, cycle, instruction);
        self.status(MsgType::PmuCounters, vcpu, &b, &[])
    }

    pub fn sync(&mut self, vcpu: u32) -> io::Result<Status> {
        self.status(MsgType::Sync, vcpu, &[], &[])
    }

    /// After reconnecting to a restarted backend: `vcpu`'s registers back,
    /// as (encoding, value) pairs.
    pub fn restore(&mut self, vcpu: u32, regs: &[(u32, u64)]) -> io::Result<Status> {
        let b = Restore {
            regs: regs.to_vec(),
        }
        .to_bytes();
        self.status(MsgType::Restore, vcpu, &b, &[])
    }

    pub fn reset(&mut self, vcpu: u32) -> io::Result<Status> {
        self.status(MsgType::Reset, vcpu, &[], &[])
    }
}
