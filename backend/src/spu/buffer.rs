//! The Profiling Buffer: `SPEWriteToBuffer()`, `SPEBufferIsFull()`, and
//! the buffer management events that faults and a full buffer raise.
//!
//! A record is written whole or not at all: every page it touches is
//! translated, and checked to be guest RAM, before its first byte is
//! stored. A fault therefore leaves PMBPTR at the start of the record that
//! could not be written (the address software restarts from), and nothing
//! is ever written outside [PMBPTR, LIMIT) or outside guest RAM.

use super::translate::{self, Fault, Mapping, Stage1, Tables};
use super::unpredictable as cu;
use super::{SampleOutcome, Spu};
use spe_protocol::regs::*;
use vm_memory::{Bytes, GuestAddress, GuestMemory, GuestMemoryBackend, Permissions};

/// The SPU's one-entry TLB: the last Profiling Buffer page translated.
/// Invalidated by any write to the buffer registers, a new context or new
/// translation registers, and by `psb csync`.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct BufferTlb {
    entry: Option<(u64, Mapping)>,
}

impl BufferTlb {
    pub(crate) fn invalidate(&mut self) {
        self.entry = None;
    }

    fn lookup(&self, va: u64) -> Option<Mapping> {
        let (base, m) = self.entry?;
        let off = va.wrapping_sub(base);
        (off < m.len).then(|| Mapping {
            pa: m.pa + off,
            len: m.len - off,
        })
    }
}

/// Why a record could not be written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum WriteError {
    Translation(Fault),
    /// The translated address is not guest RAM.
    ExternalAbort,
}

impl Spu {
    /// `SPEBufferIsFull()`.
    pub fn spe_buffer_is_full(&self) -> bool {
        let limit = self.regs.pmblimitr & PMBLIMITR_EL1::LIMIT.mask();
        let max = self.features.max_record_size();
        // Compare as the pseudocode's unbounded integers.
        u128::from(self.regs.pmbptr) > u128::from(limit).wrapping_sub(u128::from(max))
            || limit < max
    }

    /// The stage 1 and stage 2 tables of the owning translation regime.
    fn buffer_regime(&self) -> (Option<Stage1>, Option<Tables>) {
        let (_, owning_el) = self.profiling_buffer_owner();
        let x = &self.xlat;
        let nvm = self.effective_pmblimitr_el1_nvm();
        let e2h = HCR_EL2::E2H.is_set(self.ctx.hcr_el2);
        let s1 = match (nvm, owning_el) {
            (true, _) => None,
            (false, El::El2) if e2h => Some(Stage1::two_range(
                x.sctlr_el2,
                x.tcr_el2,
                x.ttbr0_el2,
                x.ttbr1_el2,
            )),
            (false, El::El2) => Some(Stage1::one_range(x.sctlr_el2, x.tcr_el2, x.ttbr0_el2)),
            (false, _) => Some(Stage1::two_range(
                x.sctlr_el1,
                x.tcr_el1,
                x.ttbr0_el1,
                x.ttbr1_el1,
            )),
        };
        let s2 =
            (owning_el == El::El1 && self.el2_enabled() && HCR_EL2::VM.is_set(self.ctx.hcr_el2))
                .then(|| translate::stage2(x.vtcr_el2, x.vttbr_el2));
        (s1, s2)
    }

    /// Whether the owning regime translates the buffer through stage 2.
    pub(super) fn buffer_has_stage2(&self) -> bool {
        self.buffer_regime().1.is_some()
    }

    /// Translates a buffer address through the TLB and the owning regime.
    fn buffer_translate<M: GuestMemory>(&mut self, va: u64, mem: &M) -> Result<Mapping, Fault> {
        if let Some(m) = self.tlb.lookup(va) {
            return Ok(m);
        }
        let (s1, s2) = self.buffer_regime();
        let m = match s1 {
            Some(s1) => translate::translate(mem, &s1, s2.as_ref(), va)?,
            None => match s2 {
                Some(t) => translate::translate_stage2(mem, &t, va)?,
                None => Mapping {
                    pa: va,
                    len: u64::MAX - va + 1,
                },
            },
        };
        // Cache whole leaf mappings only: `m` runs from `va` to the end of
        // its page or block.
        self.tlb.entry = Some((va, m));
        Ok(m)
    }

    /// Translates [va, va + len) into at most a few (pa, len) chunks, all
    /// guest RAM, or reports the first problem.
    fn translate_record<M: GuestMemory>(
        &mut self,
        va: u64,
        len: usize,
        mem: &M,
    ) -> Result<[(u64, usize); 4], WriteError> {
        let mut chunks = [(0u64, 0usize); 4];
        let mut done = 0usize;
        let mut n = 0;
        while done < len {
            let m = self
                .buffer_translate(va.wrapping_add(done as u64), mem)
                .map_err(WriteError::Translation)?;
            let take = (len - done).min(usize::try_from(m.len).unwrap_or(usize::MAX));
            if !in_one_region(mem, m.pa, take)
                && !mem.check_range(GuestAddress(m.pa), take, Permissions::Write)
            {
                return Err(WriteError::ExternalAbort);
            }
            // Records are at most 2 KiB and pages at least 4 KiB, so a
            // record spans at most two pages; four slots leave room.
            if n == chunks.len() {
                return Err(WriteError::ExternalAbort);
            }
            chunks[n] = (m.pa, take);
            n += 1;
            done += take;
        }
        Ok(chunks)
    }

    /// `SPEWriteToBuffer()` for the record in `self.record`, then the
    /// `SPEBufferIsFull()` check of `SPECompleteSample()`.
    pub(crate) fn spe_write_to_buffer<M: GuestMemory>(&mut self, mem: &M) -> SampleOutcome {
        let len = self.record.len();
        let ptr = self.regs.pmbptr;
        if !self.faults.is_empty() && self.check_record_triggers(ptr, len) {
            return SampleOutcome::Fault;
        }
        let limit = self.regs.pmblimitr & PMBLIMITR_EL1::LIMIT.mask();
        if u128::from(ptr) + len as u128 > u128::from(limit) {
            // Software broke RHXSYK: see unpredictable.rs.
            match self.choices.overrun {
                cu::Overrun::BufferFullDataLoss => {
                    self.other_spe_management_event(pmbsr_bsc::BUFFER_FILLED);
                    self.set_data_loss();
                }
                cu::Overrun::BufferFull => {
                    self.other_spe_management_event(pmbsr_bsc::BUFFER_FILLED)
                }
                cu::Overrun::ImpDef => {
                    self.raise(pmbsr_ec::IMP_DEF, 0, PMBSR::DL.mask());
                }
            }
            return SampleOutcome::Fault;
        }
        let chunks = match self.translate_record(ptr, len, mem) {
            Ok(c) => c,
            Err(e) => {
                self.log_write_fault(ptr, len, mem, e);
                self.debug_write_fault(e);
                return SampleOutcome::Fault;
            }
        };
        let mut off = 0;
        for &(pa, n) in chunks.iter().take_while(|c| c.1 != 0) {
            let bytes = &self.record[off..off + n];
            let written = write_in_one_region(mem, pa, bytes)
                || mem.write_slice(bytes, GuestAddress(pa)).is_ok();
            if !written {
                // check_range passed, so only a concurrent unplug gets here.
                self.debug_write_fault(WriteError::ExternalAbort);
                return SampleOutcome::Fault;
            }
            off += n;
        }
        if !self.faults.is_empty() {
            self.count_record_for_triggers();
        }
        if !self.pointer_stuck() {
            self.regs.pmbptr = ptr.wrapping_add(len as u64);
        }
        self.stats.records += 1;
        self.stats.bytes += len as u64;
        if let Some(tap) = &mut self.tap {
            tap.extend_from_slice(&(len as u16).to_le_bytes());
            tap.extend_from_slice(&self.record[..len]);
        }
        let full = self.spe_buffer_is_full();
        if full {
            self.other_spe_management_event(pmbsr_bsc::BUFFER_FILLED);
        }
        SampleOutcome::Written { bytes: len, full }
    }

    pub(super) fn pmbsr_mut(&mut self, el: El) -> &mut u64 {
        match el {
            El::El3 => &mut self.regs.pmbsr_el3,
            El::El2 => &mut self.regs.pmbsr_el2,
            _ => &mut self.regs.pmbsr_el1,
        }
    }

    /// `OtherSPEManagementEvent(bsc)`.
    pub(crate) fn other_spe_management_event(&mut self, bsc: u64) {
        let target = self.default_spe_event();
        let r = self.pmbsr_mut(target);
        if !PMBSR::S.is_set(*r) {
            let mut v = PMBSR::S.set(*r, 1);
            v = PMBSR::EC.set(v, pmbsr_ec::BUFFER);
            v = PMBSR::MSS.set(v, bsc);
            v = PMBSR::MSS2.set(v, 0);
            *r = v;
            self.stats.management_events += 1;
        }
    }

    pub(super) fn set_data_loss(&mut self) {
        let target = self.default_spe_event();
        let r = self.pmbsr_mut(target);
        *r = PMBSR::DL.set(*r, 1);
    }

    /// `DebugWriteFault()` / `DebugWriteExternalAbort()`: a fault writing
    /// the buffer stops profiling with a data-abort syndrome.
    /// What a driver developer needs to tell a fault of the buffer's own
    /// tables from the model's: the record's VA, where stage 1 put it
    /// (the IPA, when there is a stage 2) and the stage 2 walked.
    fn log_write_fault<M: GuestMemory>(&self, va: u64, len: usize, mem: &M, e: WriteError) {
        if !log::log_enabled!(log::Level::Debug) {
            return;
        }
        let (s1, s2) = self.buffer_regime();
        let ipa = s1.map(|s1| translate::translate(mem, &s1, None, va).map(|m| m.pa));
        let x = &self.xlat;
        log::debug!(
            "buffer write of {len} bytes at {va:#x}: {e:?}; stage 1 gives {ipa:x?}; stage 2 {}",
            match s2 {
                Some(_) => format!("VTTBR_EL2 {:#x} VTCR_EL2 {:#x}", x.vttbr_el2, x.vtcr_el2),
                None => "none".into(),
            }
        );
    }

    pub(crate) fn debug_write_fault(&mut self, e: WriteError) {
        let (ec, fsc, ea) = match e {
            WriteError::Translation(Fault::Stage1(f)) => (pmbsr_ec::STAGE1_DATA_ABORT, f, false),
            WriteError::Translation(Fault::Stage2(f)) => (pmbsr_ec::STAGE2_DATA_ABORT, f, false),
            WriteError::ExternalAbort => (
                pmbsr_ec::STAGE1_DATA_ABORT,
                translate::fsc::EXTERNAL_ABORT,
                true,
            ),
        };
        let target = self.report_spe_event(ec, u64::from(fsc));
        let r = self.pmbsr_mut(target);
        let mut v = PMBSR::S.set(*r, 1);
        v = PMBSR::EC.set(v, ec);
        v = PMBSR::FSC.set(v, u64::from(fsc));
        v = PMBSR::MSS.set(v, PMBSR::MSS.get(v) & 0x3F);
        if ea {
            v = PMBSR::EA.set(v, 1);
        }
        *r = v;
        self.stats.management_events += 1;
        self.tlb.invalidate();
    }

    /// Reads `len` bytes of the buffer at `va` back through the SPU's
    /// translation (for tests and the daemon's dumps).
    pub fn read_buffer<M: GuestMemory>(&mut self, va: u64, len: usize, mem: &M) -> Option<Vec<u8>> {
        let mut out = vec![0u8; len];
        let mut off = 0;
        while off < len {
            let m = self
                .buffer_translate(va.wrapping_add(off as u64), mem)
                .ok()?;
            let n = (len - off).min(usize::try_from(m.len).unwrap_or(usize::MAX));
            mem.read_slice(&mut out[off..off + n], GuestAddress(m.pa))
                .ok()?;
            off += n;
        }
        Some(out)
    }
}

#[cfg(test)]
mod tests;

/// Writes `bytes` at `pa` when they land in one guest RAM region, as a
/// record's chunk nearly always does. Going straight to the region costs
/// a fraction of the general range check and write, which iterate over
/// regions (half the time of a record, by the record_path bench).
fn write_in_one_region<M: GuestMemory>(mem: &M, pa: u64, bytes: &[u8]) -> bool {
    match mem
        .physical_memory()
        .map(|pm| pm.get_slice(GuestAddress(pa), bytes.len()))
    {
        Some(Ok(slice)) => {
            slice.copy_from(bytes);
            true
        }
        _ => false,
    }
}

/// Whether [pa, pa + len) lies in one guest RAM region.
fn in_one_region<M: GuestMemory>(mem: &M, pa: u64, len: usize) -> bool {
    mem.physical_memory()
        .is_some_and(|pm| pm.get_slice(GuestAddress(pa), len).is_ok())
}
