//! The control queue: batches of register accesses from the driver, each
//! answered in place, and the events they cause queued for the event
//! queue.

use std::fmt;
use std::io::{self, Read, Write};

use log::{debug, error};
use spe_protocol::regs::{SysReg, TranslationRegs};
use spe_protocol::virtio::{
    CtrlOp, CtrlRequest, CtrlResponse, CtrlStatus, Event, EventKind, MAX_BATCH, REG_SCTLR_EL1,
    REG_TCR_EL1, REG_TTBR0_EL1, REG_TTBR1_EL1,
};
use vhost_user_backend::{VringRwLock, VringT};
use virtio_queue::{DescriptorChain, QueueOwnedT};

use super::{Error, GuestMemory, MemGuard, VhostUserSpeBackend};

/// PMSSCR_EL1.SS: writing 1 requests a PMU snapshot capture.
pub(super) const PMSSCR_SS: u64 = 1;

/// The field of `x` that holds translation register `enc` (a `REG_*`
/// encoding of [`spe_protocol::virtio`]), or `None` if `enc` is not one.
fn translation_reg(x: &mut TranslationRegs, enc: u32) -> Option<&mut u64> {
    Some(match enc {
        REG_SCTLR_EL1 => &mut x.sctlr_el1,
        REG_TCR_EL1 => &mut x.tcr_el1,
        REG_TTBR0_EL1 => &mut x.ttbr0_el1,
        REG_TTBR1_EL1 => &mut x.ttbr1_el1,
        _ => return None,
    })
}

/// A register the control queue reaches.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CtrlReg {
    Spe(SysReg),
    /// One of the EL1 translation registers, by encoding.
    Translation(u32),
}

impl fmt::Display for CtrlReg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CtrlReg::Spe(r) => f.write_str(&r.name()),
            CtrlReg::Translation(REG_SCTLR_EL1) => f.write_str("SCTLR_EL1"),
            CtrlReg::Translation(REG_TCR_EL1) => f.write_str("TCR_EL1"),
            CtrlReg::Translation(REG_TTBR0_EL1) => f.write_str("TTBR0_EL1"),
            CtrlReg::Translation(REG_TTBR1_EL1) => f.write_str("TTBR1_EL1"),
            CtrlReg::Translation(enc) => write!(f, "register {enc:#x}"),
        }
    }
}

impl VhostUserSpeBackend {
    /// Executes one control request and queues the events it causes.
    fn execute(&mut self, raw: &[u8]) -> CtrlResponse {
        let req = match CtrlRequest::from_bytes(raw) {
            Ok(r) => r,
            Err(e) => {
                error!("malformed control request: {e}");
                return CtrlResponse::error(CtrlStatus::Malformed);
            }
        };
        let vcpu = req.vcpu as usize;
        let Some(spu) = self.spus.get_mut(vcpu) else {
            error!(
                "control request for vCPU {} of {}",
                req.vcpu, self.config.num_vcpus
            );
            return CtrlResponse::error(CtrlStatus::BadVcpu);
        };
        let mut xlat = *spu.translation();
        let reg = if translation_reg(&mut xlat, req.reg).is_some() {
            CtrlReg::Translation(req.reg)
        } else if let Some(r) = SysReg::from_encoding(req.reg) {
            CtrlReg::Spe(r)
        } else {
            error!(
                "control request for unknown register encoding {:#x}",
                req.reg
            );
            return CtrlResponse::error(CtrlStatus::UnknownRegister);
        };
        let result = match (reg, req.op) {
            (CtrlReg::Spe(r), CtrlOp::Read) => spu.read_sysreg(r),
            (CtrlReg::Spe(r), CtrlOp::Write) => spu.write_sysreg(r, req.value).map(|()| 0),
            (CtrlReg::Translation(enc), op) => {
                // Checked above: `enc` is a translation register.
                let slot = translation_reg(&mut xlat, enc).expect("translation register");
                if op == CtrlOp::Write {
                    *slot = req.value;
                    // Also drops the cached buffer translation, as documented.
                    spu.set_translation(xlat);
                    Ok(0)
                } else {
                    Ok(*slot)
                }
            }
        };
        debug!(
            "vCPU {} {:?} {} {:#x} -> {:?}",
            req.vcpu, req.op, reg, req.value, result
        );
        let (status, value) = match result {
            Ok(v) => (CtrlStatus::Ok, v),
            Err(outcome) => (CtrlStatus::from(outcome), 0),
        };
        let pmbirq = spu.pmbirq();
        let pmbsr = spu.pmbsr();
        // The model captures synchronously, so a successful SS write has
        // completed its capture by now; PMSSCR_EL1 tells how it went.
        let snapshot = (status == CtrlStatus::Ok
            && req.op == CtrlOp::Write
            && reg == CtrlReg::Spe(SysReg::PmsscrEl1)
            && req.value & PMSSCR_SS != 0)
            .then(|| spu.read_sysreg(SysReg::PmsscrEl1).unwrap_or(0));

        self.note_pmbirq(vcpu);
        if let Some(pmsscr) = snapshot {
            self.queue_event(Event {
                vcpu: req.vcpu,
                kind: EventKind::SnapshotDone,
                pmbirq,
                pmbsr,
                data: pmsscr,
            });
        }
        CtrlResponse {
            status,
            pmbirq,
            value,
        }
    }

    /// Handles one control buffer and returns the used length.
    fn process_ctrl_chain(
        &mut self,
        mem: &GuestMemory,
        chain: DescriptorChain<MemGuard>,
    ) -> io::Result<u32> {
        let mut reader = chain
            .clone()
            .reader(mem)
            .map_err(|e| io::Error::other(format!("bad descriptor chain: {e}")))?;
        let mut writer = chain
            .writer(mem)
            .map_err(|e| io::Error::other(format!("bad descriptor chain: {e}")))?;
        let in_len = reader.available_bytes();
        let out_len = writer.available_bytes();
        let count = in_len / CtrlRequest::SIZE;

        if in_len == 0 || in_len % CtrlRequest::SIZE != 0 || count > MAX_BATCH as usize {
            error!(
                "malformed control buffer: {in_len} readable bytes (requests are {} bytes, at most {MAX_BATCH})",
                CtrlRequest::SIZE
            );
            if out_len < CtrlResponse::SIZE {
                return Ok(0);
            }
            writer.write_all(&CtrlResponse::error(CtrlStatus::Malformed).to_bytes())?;
            return Ok(CtrlResponse::SIZE as u32);
        }
        if out_len < count * CtrlResponse::SIZE {
            error!(
                "control buffer has {out_len} writable bytes for {count} responses of {} bytes; dropped",
                CtrlResponse::SIZE
            );
            return Ok(0);
        }

        let mut requests = vec![0u8; in_len];
        reader.read_exact(&mut requests)?;
        let mut responses = Vec::with_capacity(count * CtrlResponse::SIZE);
        for raw in requests.chunks_exact(CtrlRequest::SIZE) {
            responses.extend_from_slice(&self.execute(raw).to_bytes());
        }
        writer.write_all(&responses)?;
        Ok(responses.len() as u32)
    }

    /// Drains the control queue. Returns whether anything was used.
    fn process_ctrl_queue(&mut self, vring: &VringRwLock) -> Result<bool, Error> {
        let mem = self.memory()?;
        let chains: Vec<_> = vring
            .get_mut()
            .get_queue_mut()
            .iter(mem.clone())
            .map_err(Error::Queue)?
            .collect();
        let used_any = !chains.is_empty();
        for chain in chains {
            let head = chain.head_index();
            let len = self.process_ctrl_chain(&mem, chain).unwrap_or_else(|e| {
                error!("control request dropped: {e}");
                0
            });
            vring.add_used(head, len).map_err(Error::Queue)?;
        }
        Ok(used_any)
    }

    /// A kick of the control queue.
    pub(super) fn handle_ctrl(&mut self, vring: &VringRwLock) -> Result<(), Error> {
        let mut used_any = false;
        if self.event_idx {
            // With EVENT_IDX the driver is only notified when we re-enable
            // notifications, so loop until no buffer slipped in meanwhile.
            loop {
                vring.disable_notification().map_err(Error::Queue)?;
                used_any |= self.process_ctrl_queue(vring)?;
                if !vring.enable_notification().map_err(Error::Queue)? {
                    break;
                }
            }
        } else {
            used_any = self.process_ctrl_queue(vring)?;
        }
        if used_any {
            self.signal(vring)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
