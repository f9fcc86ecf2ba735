//! PMU snapshots (FEAT_PMUv3_SS, D13.9): Capture events on a write of 1 to
//! PMSSCR_EL1.SS or an external snapshot request, Table D13-10.

use super::unpredictable as cu;
use super::Spu;
use spe_protocol::regs::*;

/// PMU counter values a capture copies, supplied by the front end (the
/// PMU itself lives in QEMU).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PmuCounters {
    pub event: [u64; 31],
    pub cycle: u64,
    pub instruction: u64,
}

/// What a capture request did (the three outcomes of Table D13-10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureOutcome {
    /// Capture events are disabled: PMSSCR_EL1.SS ignored the write.
    Disabled,
    /// Prohibited: counters unchanged, {NC, SS} = {1, 0}.
    Prohibited,
    /// Allowed: counters copied, {NC, SS} = {0, 0}; `pmu_snapshot_event`
    /// says whether the PMU_SNAPSHOT event was generated.
    Allowed { pmu_snapshot_event: bool },
}

impl Spu {
    /// PMECR_EL1.SSE with the reserved value 0b01 constrained.
    fn pmecr_sse(&self) -> u64 {
        match PMECR_EL1::SSE.get(self.regs.pmecr) {
            0b01 if cu::RESERVED_EE_SSE_DISABLED => 0b00,
            v => v,
        }
    }

    /// `PMUCaptureEventEnabled()`.
    pub fn pmu_capture_event_enabled(&self) -> bool {
        if !self.features.pmu_ss {
            return false;
        }
        let el3 = MDCR_EL3::PMSSE.get(self.ctx.mdcr_el3);
        let el2 = MDCR_EL2::PMSSE.get(self.ctx.mdcr_el2);
        if self.features.have_el3 && el3 != 0b01 {
            el3 & 0b10 != 0
        } else if self.features.have_el2 && el2 != 0b01 {
            el2 & 0b10 != 0
        } else {
            self.pmecr_sse() & 0b10 != 0
        }
    }

    /// `PMUCaptureEventAllowed()`.
    pub fn pmu_capture_event_allowed(&self) -> bool {
        if !self.pmu_capture_event_enabled() || self.ctx.os_lock {
            return false;
        }
        if self.ctx.halted && !cu::CAPTURE_IN_DEBUG_STATE {
            return false;
        }
        let el3 = MDCR_EL3::PMSSE.get(self.ctx.mdcr_el3);
        let el2 = MDCR_EL2::PMSSE.get(self.ctx.mdcr_el2);
        if self.features.have_el3 && el3 != 0b01 {
            el3 == 0b11
        } else if self.features.have_el2 && el2 != 0b01 {
            el2 == 0b11
        } else {
            self.pmecr_sse() == 0b11
        }
    }

    /// `PMUCaptureEvent()`: a Capture event happens (Capture events are
    /// enabled).
    pub fn pmu_capture_event(&mut self) -> CaptureOutcome {
        if !self.pmu_capture_event_allowed() {
            self.regs.pmsscr = PMSSCR_EL1::NC.mask();
            return CaptureOutcome::Prohibited;
        }
        let c = self.counters;
        let n = usize::from(self.features.pmu_counters).min(31);
        self.regs.pmevcntsvr[..n].copy_from_slice(&c.event[..n]);
        self.regs.pmccntsvr = c.cycle;
        if self.features.pmu_icntr {
            self.regs.pmicntsvr = c.instruction;
        }
        self.regs.pmsscr = 0;
        CaptureOutcome::Allowed {
            pmu_snapshot_event: !self.ctx.halted,
        }
    }

    /// A write of 1 to PMSSCR_EL1.SS.
    pub(crate) fn pmsscr_ss_write(&mut self) -> CaptureOutcome {
        if !self.pmu_capture_event_enabled() {
            return CaptureOutcome::Disabled;
        }
        self.pmu_capture_event()
    }

    /// The IMPLEMENTATION DEFINED external snapshot request: the host asks
    /// for a capture of `counters`.
    pub fn external_snapshot_request(&mut self, counters: PmuCounters) -> CaptureOutcome {
        self.counters = counters;
        self.pmsscr_ss_write()
    }
}

#[cfg(test)]
mod tests;
