//! QEMU's requests: a dispatcher, and one function per message type.
//!
//! HELLO creates the VM and SYSREG answers with the register's value;
//! every other request is answered with a [`Status`], and a vCPU out of
//! range gets [`Status::BAD_VCPU`] before its payload is looked at.

use std::fs::File;
use std::io;

use event_manager::{EventOps, EventSet, Events};
use log::{debug, error, info, warn};
use spe_protocol::channel::{
    self, feature, ring::Layout, Header, Hello, HelloReply, MemTable, MsgType, Restore, RingSetup,
    Status, SysregAccess, SysregReply, ALL_VCPUS,
};
use spe_protocol::profile::CpuProfile;
use spe_protocol::regs::SysReg;

use super::conn::Conn;
use super::error::{ConnError, ProtocolError};
use super::event_handler::{stop_hello_deadline, unwatch_ring, watch_ring, TIMER};
use super::memory::map_memory;
use super::server::Server;
use super::vm::{Ring, Vm};
use super::{ServerConfig, MAX_VCPUS};
use crate::spu::{PmuCounters, Spu};

impl Server {
    /// Reads one request from the connection and serves it.
    pub(super) fn on_request(&mut self, ops: &mut EventOps) -> Result<(), ConnError> {
        // The buffer leaves `self` while the handlers borrow the payload
        // in it (taking an empty box allocates nothing).
        let mut buf = std::mem::take(&mut self.payload);
        let res = self.dispatch(ops, &mut buf);
        self.payload = buf;
        res
    }

    /// The connection a request came on.
    fn conn(&mut self) -> &mut Conn {
        self.conn.as_mut().expect("CONN events need a connection")
    }

    fn dispatch(&mut self, ops: &mut EventOps, buf: &mut [u8]) -> Result<(), ConnError> {
        let req = self.conn().read_request(buf)?;
        let (h, kind, payload, vcpu) = (req.header, req.kind, req.payload, req.header.vcpu);
        match kind {
            MsgType::Hello => self.on_hello(ops, &h, payload),
            MsgType::Sysreg => self.on_sysreg(&h, payload),
            MsgType::SetMemTable => {
                self.reply_status(&h, kind, |vm| on_set_mem_table(vm, payload, req.fds))
            }
            MsgType::SetRing => {
                let slots = self.cfg.ring_slots;
                self.reply_status(&h, kind, |vm| on_set_ring(vm, ops, slots, payload, req.fds))
            }
            MsgType::SetTranslation => {
                self.reply_status(&h, kind, |vm| on_set_translation(vm, vcpu, payload))
            }
            MsgType::SetContext => {
                self.reply_status(&h, kind, |vm| on_set_context(vm, vcpu, payload))
            }
            MsgType::PmuCounters => {
                self.reply_status(&h, kind, |vm| on_pmu_counters(vm, vcpu, payload))
            }
            MsgType::Sync => self.reply_status(&h, kind, |vm| on_sync(vm, vcpu, payload)),
            MsgType::Reset => self.reply_status(&h, kind, |vm| on_reset(vm, vcpu, payload)),
            MsgType::Restore => self.reply_status(&h, kind, |vm| on_restore(vm, vcpu, payload)),
        }
    }

    /// HELLO: the VM starts, or the connection goes with the refusal.
    fn on_hello(
        &mut self,
        ops: &mut EventOps,
        h: &Header,
        payload: &[u8],
    ) -> Result<(), ConnError> {
        // Not self.conn(): the other fields are borrowed beside it.
        let conn = self.conn.as_mut().expect("CONN events need a connection");
        if conn.vm.is_some() {
            return Err(ProtocolError::SecondHello.into());
        }
        let hello = Hello::from_bytes(payload)?;
        let (reply, vm) = hello_reply(&self.cfg, &hello);
        conn.reply(h, &reply.to_bytes())?;
        let Some(mut vm) = vm else {
            if reply.status == Status::BAD_CPU {
                return Err(ProtocolError::OtherCpu {
                    midr: hello.midr,
                    guest: CpuProfile::of_midr(hello.midr),
                    profile: self.cfg.cpu,
                }
                .into());
            }
            return Err(ProtocolError::HelloRefused {
                status: reply.status,
                version: hello.version,
                vcpus: hello.num_vcpus,
            }
            .into());
        };
        info!(
            "HELLO: {} vCPU(s), ring of {} slots each ({} bytes)",
            hello.num_vcpus, reply.ring_slots, reply.ring_size
        );
        stop_hello_deadline(ops, &mut self.hello_timer);
        if let Some(hub) = &self.cfg.control {
            hub.vm_started(&mut vm.spus);
        }
        if let Some(s) = &vm.synthetic {
            crate::synthetic::arm(&mut self.timer).map_err(ConnError::Io)?;
            ops.add(Events::with_data(&self.timer, TIMER, EventSet::IN))
                .map_err(|e| ConnError::Io(io::Error::other(e)))?;
            info!("synthetic source: {} ops/s per vCPU", s.rate());
        }
        conn.vm = Some(vm);
        Ok(())
    }

    /// SYSREG: one access to one vCPU's SPU, answered with its outcome.
    fn on_sysreg(&mut self, h: &Header, payload: &[u8]) -> Result<(), ConnError> {
        let conn = self.conn();
        let Some(vm) = conn.vm.as_mut() else {
            return Err(ProtocolError::BeforeHello(MsgType::Sysreg).into());
        };
        // SYSREG has no status to carry a bad vCPU: QEMU is broken.
        if h.vcpu >= vm.vcpus() {
            return Err(ProtocolError::SysregVcpu {
                vcpu: h.vcpu,
                vcpus: vm.vcpus(),
            }
            .into());
        }
        let req = SysregAccess::from_bytes(payload)?;
        let reply = sysreg_access(vm, h.vcpu, &req)?;
        vm.publish(h.vcpu, Some(h.vcpu));
        conn.reply(h, &reply.to_bytes())
    }

    /// Serves a request answered with a [`Status`]: `serve` runs for a
    /// vCPU of the VM or for all of them, then what changed is published
    /// and the status sent.
    fn reply_status(
        &mut self,
        h: &Header,
        kind: MsgType,
        serve: impl FnOnce(&mut Vm) -> Result<u32, ConnError>,
    ) -> Result<(), ConnError> {
        let conn = self.conn();
        let Some(vm) = conn.vm.as_mut() else {
            return Err(ProtocolError::BeforeHello(kind).into());
        };
        let nvcpus = vm.vcpus();
        let vcpu_ok = h.vcpu < nvcpus || h.vcpu == ALL_VCPUS;
        let status = if vcpu_ok {
            serve(vm)?
        } else {
            warn!("{kind:?} for vCPU {:#x} of {nvcpus}", h.vcpu);
            Status::BAD_VCPU
        };
        // ALL_VCPUS requests come from QEMU's main loop, not a vCPU that
        // reads its state after the reply: they signal.
        if vcpu_ok {
            vm.publish(h.vcpu, (h.vcpu != ALL_VCPUS).then_some(h.vcpu));
        }
        let pmbirq = status == Status::OK
            && h.vcpu != ALL_VCPUS
            && vm.spus.get(h.vcpu as usize).is_some_and(Spu::pmbirq);
        conn.reply(h, &Status { status, pmbirq }.to_bytes())
    }
}

/// SET_MEM_TABLE: the guest's RAM, one fd per region.
fn on_set_mem_table(vm: &mut Vm, payload: &[u8], fds: Vec<File>) -> Result<u32, ConnError> {
    let table = MemTable::from_bytes(payload)?;
    vm.drain(ALL_VCPUS)?;
    Ok(match map_memory(&table, fds) {
        Ok(mem) => {
            info!("guest memory: {} region(s)", table.regions.len());
            vm.mem = mem;
            vm.spus.iter_mut().for_each(Spu::invalidate_tlb);
            Status::OK
        }
        Err(e) => {
            error!("SET_MEM_TABLE refused: {e}");
            Status::BAD_RESOURCE
        }
    })
}

/// SET_RING: the sampled-operation ring and its doorbell and IRQ eventfds.
fn on_set_ring(
    vm: &mut Vm,
    ops: &mut EventOps,
    slots: u32,
    payload: &[u8],
    fds: Vec<File>,
) -> Result<u32, ConnError> {
    let setup = RingSetup::from_bytes(payload)?;
    vm.drain(ALL_VCPUS)?;
    let layout = Layout {
        vcpus: vm.vcpus(),
        slots,
    };
    match Ring::new(&setup, layout, fds) {
        Ok(ring) => {
            if let Some(old) = vm.ring.take() {
                unwatch_ring(ops, &old);
            }
            watch_ring(ops, &ring).map_err(|e| ConnError::Io(io::Error::other(e)))?;
            info!("sampled-operation ring: {} bytes", setup.size);
            vm.ring = Some(ring);
            Ok(Status::OK)
        }
        Err(e) => {
            error!("SET_RING refused: {e}");
            Ok(Status::BAD_RESOURCE)
        }
    }
}

/// SET_TRANSLATION: the EL1 translation registers.
fn on_set_translation(vm: &mut Vm, vcpu: u32, payload: &[u8]) -> Result<u32, ConnError> {
    let t = channel::translation_from_bytes(payload)?;
    vm.drain(vcpu)?;
    vm.for_each_spu(vcpu, |s| s.set_translation(t));
    Ok(Status::OK)
}

/// SET_CONTEXT: the PE context the SPU samples in.
fn on_set_context(vm: &mut Vm, vcpu: u32, payload: &[u8]) -> Result<u32, ConnError> {
    let c = channel::context_from_bytes(payload)?;
    vm.drain(vcpu)?;
    vm.for_each_spu(vcpu, |s| s.set_context(c));
    Ok(Status::OK)
}

/// PMU_COUNTERS: the counters a PMU snapshot captures.
fn on_pmu_counters(vm: &mut Vm, vcpu: u32, payload: &[u8]) -> Result<u32, ConnError> {
    let (event, cycle, instruction) = channel::pmu_counters_from_bytes(payload)?;
    vm.drain(vcpu)?;
    let c = PmuCounters {
        event,
        cycle,
        instruction,
    };
    vm.for_each_spu(vcpu, |s| s.set_pmu_counters(c));
    Ok(Status::OK)
}

/// SYNC: what QEMU published so far is applied before the reply.
fn on_sync(vm: &mut Vm, vcpu: u32, payload: &[u8]) -> Result<u32, ConnError> {
    expect_empty(MsgType::Sync, payload)?;
    vm.drain(vcpu)?;
    Ok(Status::OK)
}

/// RESET: the SPUs as at power-on.
fn on_reset(vm: &mut Vm, vcpu: u32, payload: &[u8]) -> Result<u32, ConnError> {
    expect_empty(MsgType::Reset, payload)?;
    vm.drain(vcpu)?;
    vm.for_each_spu(vcpu, Spu::reset);
    Ok(Status::OK)
}

/// RESTORE: the registers of one vCPU's SPU back from QEMU after a
/// restart, then the loss of what was in flight reported, then the
/// operations QEMU sampled meanwhile (the restored state decides them).
fn on_restore(vm: &mut Vm, vcpu: u32, payload: &[u8]) -> Result<u32, ConnError> {
    let req = Restore::from_bytes(payload)?;
    if vcpu == ALL_VCPUS {
        warn!("RESTORE for every vCPU: it restores one");
        return Ok(Status::BAD_VCPU);
    }
    let spu = &mut vm.spus[vcpu as usize];
    for &(enc, value) in &req.regs {
        let restored = SysReg::from_encoding(enc)
            .ok_or(enc)
            .and_then(|reg| spu.restore_register(reg, value).map_err(|_| enc));
        if let Err(enc) = restored {
            error!(
                "RESTORE of vCPU {vcpu}: register {enc:#x} cannot be restored; the SPU is reset"
            );
            spu.reset();
            return Ok(Status::BAD_STATE);
        }
    }
    let lost = spu.restore_done();
    info!(
        "vCPU {vcpu}: {} registers restored{}",
        req.regs.len(),
        if lost {
            "; the buffer was enabled, so its records in flight are reported lost (PMBSR.DL)"
        } else {
            ""
        }
    );
    vm.drain(vcpu)?;
    Ok(Status::OK)
}

fn expect_empty(kind: MsgType, payload: &[u8]) -> Result<(), ProtocolError> {
    if payload.is_empty() {
        Ok(())
    } else {
        Err(ProtocolError::UnexpectedPayload {
            kind,
            len: payload.len(),
        })
    }
}

/// One register access of SYSREG, on `vcpu`'s SPU.
fn sysreg_access(vm: &mut Vm, vcpu: u32, req: &SysregAccess) -> Result<SysregReply, ConnError> {
    // Operations sampled before the access happened before it.
    vm.drain(vcpu)?;
    let spu = &mut vm.spus[vcpu as usize];
    let Some(reg) = SysReg::from_encoding(req.encoding) else {
        warn!("SYSREG: unknown encoding {:#x}", req.encoding);
        return Ok(SysregReply {
            outcome: Status::UNKNOWN_REGISTER,
            pmbirq: spu.pmbirq(),
            reg: 0,
            value: 0,
        });
    };
    // set_context drops the buffer TLB, so only when it really changed.
    if *spu.context() != req.ctx {
        spu.set_context(req.ctx);
    }
    let result = if req.is_write {
        spu.write_sysreg(reg, req.value).map(|()| 0)
    } else {
        spu.read_sysreg(reg)
    };
    debug!(
        "vCPU {vcpu} {} {} {:#x} -> {result:?}",
        if req.is_write { "MSR" } else { "MRS" },
        reg.name(),
        req.value
    );
    let (outcome, value) = match result {
        Ok(v) => (0, v),
        Err(o) => (o as u8, 0),
    };
    // The context is unchanged since the access: the same route.
    let reg = match outcome {
        0 => spu.reached(reg).map_or(0, SysReg::encoding),
        _ => 0,
    };
    Ok(SysregReply {
        outcome,
        pmbirq: spu.pmbirq(),
        reg,
        value,
    })
}

/// The reply to `hello`, and the VM it creates if it is accepted.
fn hello_reply(cfg: &ServerConfig, hello: &Hello) -> (HelloReply, Option<Vm>) {
    let f = &cfg.features;
    let layout = Layout {
        vcpus: hello.num_vcpus.clamp(1, MAX_VCPUS),
        slots: cfg.ring_slots,
    };
    let mut features = 0;
    for (on, bit) in [
        (f.pmu_ss, feature::PMU_SS),
        (f.pmu_icntr, feature::PMU_ICNTR),
        (f.spe_exc, feature::SPE_EXC),
        (f.spe_nvm, feature::SPE_NVM),
        (true, feature::SAMPLING_STATE),
        (true, feature::RESTORE),
    ] {
        if on {
            features |= bit;
        }
    }
    let status = if hello.version != channel::VERSION {
        Status::BAD_VERSION
    } else if !(1..=MAX_VCPUS).contains(&hello.num_vcpus) {
        Status::BAD_VCPU
    } else if hello.midr != 0 && !cfg.cpu.matches_midr(hello.midr) {
        Status::BAD_CPU
    } else {
        Status::OK
    };
    let reply = HelloReply {
        version: channel::VERSION,
        status,
        features,
        pmsver: f.pms_ver as u32,
        pmss: u32::from(f.pmu_ss),
        pmsidr: f.pmsidr(),
        pmbidr: f.pmbidr(),
        pmu_counters: u32::from(f.pmu_counters),
        ring_slots: layout.slots,
        ring_size: layout.size() as u64,
    };
    let vm = (status == Status::OK).then(|| Vm::new(cfg, hello.num_vcpus));
    (reply, vm)
}
