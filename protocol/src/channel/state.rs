//! The vCPU state QEMU forwards for the model to act on: the controlling
//! context (SET_CONTEXT, and in every SYSREG), the translation registers
//! (SET_TRANSLATION) and the PMU counters a capture copies (PMU_COUNTERS).

use super::{expect_len, ChannelError, Result};
use crate::le::{put, u64_at};
use crate::regs::{El, PeContext, TranslationRegs};

/// Wire form of [`PeContext`]: el u8, flags u8 (bit 0 halted, bit 1 OS
/// lock), reserved[6], scr_el3, mdcr_el3, mdcr_el2, hcr_el2, cntvoff_el2,
/// cntpoff_el2 (u64 each).
pub const CONTEXT_SIZE: usize = 56;

pub fn context_to_bytes(c: &PeContext, b: &mut [u8]) {
    b[0] = c.el as u8;
    b[1] = u8::from(c.halted) | u8::from(c.os_lock) << 1;
    for (i, v) in [
        c.scr_el3,
        c.mdcr_el3,
        c.mdcr_el2,
        c.hcr_el2,
        c.cntvoff_el2,
        c.cntpoff_el2,
    ]
    .into_iter()
    .enumerate()
    {
        put(b, 8 + i * 8, &v.to_le_bytes());
    }
}

pub fn context_from_bytes(b: &[u8]) -> Result<PeContext> {
    expect_len("context", b, CONTEXT_SIZE)?;
    Ok(PeContext {
        el: El::from_u8(b[0]).ok_or(ChannelError::BadField("el", u64::from(b[0])))?,
        halted: b[1] & 1 != 0,
        os_lock: b[1] & 2 != 0,
        scr_el3: u64_at(b, 8),
        mdcr_el3: u64_at(b, 16),
        mdcr_el2: u64_at(b, 24),
        hcr_el2: u64_at(b, 32),
        cntvoff_el2: u64_at(b, 40),
        cntpoff_el2: u64_at(b, 48),
    })
}

/// SET_TRANSLATION payload: the ten u64 of [`TranslationRegs`] in field
/// order.
pub const TRANSLATION_SIZE: usize = 80;

pub fn translation_to_bytes(t: &TranslationRegs) -> [u8; TRANSLATION_SIZE] {
    let mut b = [0u8; TRANSLATION_SIZE];
    for (i, v) in [
        t.sctlr_el1,
        t.tcr_el1,
        t.ttbr0_el1,
        t.ttbr1_el1,
        t.sctlr_el2,
        t.tcr_el2,
        t.ttbr0_el2,
        t.ttbr1_el2,
        t.vtcr_el2,
        t.vttbr_el2,
    ]
    .into_iter()
    .enumerate()
    {
        put(&mut b, i * 8, &v.to_le_bytes());
    }
    b
}

pub fn translation_from_bytes(b: &[u8]) -> Result<TranslationRegs> {
    expect_len("SET_TRANSLATION", b, TRANSLATION_SIZE)?;
    let v = |i: usize| u64_at(b, i * 8);
    Ok(TranslationRegs {
        sctlr_el1: v(0),
        tcr_el1: v(1),
        ttbr0_el1: v(2),
        ttbr1_el1: v(3),
        sctlr_el2: v(4),
        tcr_el2: v(5),
        ttbr0_el2: v(6),
        ttbr1_el2: v(7),
        vtcr_el2: v(8),
        vttbr_el2: v(9),
    })
}

/// PMU_COUNTERS payload: event[31] u64, cycle u64, instruction u64.
pub const PMU_COUNTERS_SIZE: usize = 33 * 8;

pub fn pmu_counters_to_bytes(
    event: &[u64; 31],
    cycle: u64,
    instruction: u64,
) -> [u8; PMU_COUNTERS_SIZE] {
    let mut b = [0u8; PMU_COUNTERS_SIZE];
    for (i, v) in event.iter().chain([cycle, instruction].iter()).enumerate() {
        put(&mut b, i * 8, &v.to_le_bytes());
    }
    b
}

/// Parses PMU_COUNTERS into (event counters, cycle, instruction).
pub fn pmu_counters_from_bytes(b: &[u8]) -> Result<([u64; 31], u64, u64)> {
    expect_len("PMU_COUNTERS", b, PMU_COUNTERS_SIZE)?;
    let mut event = [0u64; 31];
    for (i, e) in event.iter_mut().enumerate() {
        *e = u64_at(b, i * 8);
    }
    Ok((event, u64_at(b, 31 * 8), u64_at(b, 32 * 8)))
}
