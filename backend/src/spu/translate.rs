//! The SPU's address translation for the Profiling Buffer: a VMSAv8-64
//! stage 1 walk of the owning translation regime (4K, 16K and 64K
//! granules, 39- to 52-bit VAs, TBI) and, where EL2 owns one, stage 2,
//! over the guest's own tables in guest memory.
//!
//! Writes to the buffer are privileged writes with PSTATE.PAN treated as
//! 0, so only AP[2]/APTable[1] (stage 1) and S2AP[1] (stage 2) can forbid
//! them. Hardware Access-flag and dirty-state updates (TCR.HA/HD) are done
//! with an atomic compare-and-swap on the descriptor, as a PE's walker
//! would.

use std::sync::atomic::{AtomicU64, Ordering};
use vm_memory::{GuestAddress, GuestMemory, Permissions, VolatileMemory};

/// A translation fault, as PMBSR reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Stage 1 fault: PMBSR.EC = 0x24 with this FSC.
    Stage1(u8),
    /// Stage 2 fault (including on a stage 1 table walk): EC 0x25.
    Stage2(u8),
}

/// Fault status codes (PMBSR.FSC, as the DFSC of a data abort).
pub mod fsc {
    /// Address size fault, level n: 0b0000nn (level -1: 0b101001).
    pub const fn address_size(level: i32) -> u8 {
        if level < 0 {
            0b101001
        } else {
            level as u8
        }
    }
    /// Translation fault, level n: 0b0001nn (level -1: 0b101011).
    pub const fn translation(level: i32) -> u8 {
        if level < 0 {
            0b101011
        } else {
            0b000100 | level as u8
        }
    }
    /// Access flag fault, level n: 0b0010nn.
    pub const fn access_flag(level: i32) -> u8 {
        0b001000 | (if level < 0 { 0 } else { level as u8 })
    }
    /// Permission fault, level n: 0b0011nn.
    pub const fn permission(level: i32) -> u8 {
        0b001100 | (if level < 0 { 0 } else { level as u8 })
    }
    /// Synchronous External abort, not on a table walk.
    pub const EXTERNAL_ABORT: u8 = 0b010000;
    /// Synchronous External abort on a table walk, level n: 0b0101nn
    /// (level -1: 0b010011).
    pub const fn external_abort_on_walk(level: i32) -> u8 {
        if level < 0 {
            0b010011
        } else {
            0b010100 | level as u8
        }
    }
}

/// Translation granule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Granule {
    K4,
    K16,
    K64,
}

impl Granule {
    pub const fn bits(self) -> u32 {
        match self {
            Granule::K4 => 12,
            Granule::K16 => 14,
            Granule::K64 => 16,
        }
    }
    /// TCR_ELx.TG0 / VTCR_EL2.TG0 encoding.
    fn from_tg0(tg: u64) -> Granule {
        match tg {
            0b01 => Granule::K64,
            0b10 => Granule::K16,
            _ => Granule::K4,
        }
    }
    /// TCR_ELx.TG1 encoding.
    fn from_tg1(tg: u64) -> Granule {
        match tg {
            0b01 => Granule::K16,
            0b11 => Granule::K64,
            _ => Granule::K4,
        }
    }
}

/// One translation table tree: where it starts and how it is shaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tables {
    /// TTBR/VTTBR value.
    pub ttbr: u64,
    /// Input address size in bits (64 - TxSZ).
    pub ia_bits: u32,
    pub granule: Granule,
    /// First level walked (-1 ..= 3).
    pub start_level: i32,
    /// 52-bit output addresses (TCR.DS, or 64K with LPA).
    pub oa52: bool,
    /// Hardware Access-flag update (HA) and dirty-state management (HD).
    pub ha: bool,
    pub hd: bool,
}

/// A stage 1 regime: one or two VA ranges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stage1 {
    /// Translation enabled (SCTLR_ELx.M); off means VA = IPA.
    pub enabled: bool,
    /// The lower range (TTBR0), or None if walks are disabled (EPD0).
    pub lower: Option<Tables>,
    /// The upper range (TTBR1) of a two-range regime, if enabled.
    pub upper: Option<Tables>,
    /// The regime has an upper range at all (EL1&0, EL2&0).
    pub two_ranges: bool,
    pub tbi_lower: bool,
    pub tbi_upper: bool,
}

/// Start level for a stage 1 walk covering `ia_bits` with this granule.
pub fn start_level(ia_bits: u32, granule: Granule) -> i32 {
    let g = granule.bits();
    let stride = g - 3;
    // At least one level: a TxSZ so large that no index bits are left
    // above the page offset (64K granule, T0SZ 48) still walks level 3
    // rather than a level 4 that does not exist.
    let levels = (ia_bits.saturating_sub(g)).div_ceil(stride).max(1) as i32;
    4 - levels
}

fn oa52(tcr_ds: bool, granule: Granule, ps: u64) -> bool {
    match granule {
        Granule::K64 => ps == 0b110,
        _ => tcr_ds,
    }
}

impl Stage1 {
    /// EL1&0 (or EL2&0: TCR_EL2 in its E2H layout) from SCTLR/TCR/TTBRs.
    pub fn two_range(sctlr: u64, tcr: u64, ttbr0: u64, ttbr1: u64) -> Stage1 {
        let ds = tcr >> 59 & 1 == 1;
        let ips = tcr >> 32 & 7;
        let ha = tcr >> 39 & 1 == 1;
        let hd = ha && tcr >> 40 & 1 == 1;
        let mk = |ttbr: u64, tsz: u64, granule: Granule, epd: bool| {
            if epd {
                return None;
            }
            let ia_bits = 64 - tsz.clamp(12, 48) as u32;
            Some(Tables {
                ttbr,
                ia_bits,
                granule,
                start_level: start_level(ia_bits, granule),
                oa52: oa52(ds, granule, ips),
                ha,
                hd,
            })
        };
        Stage1 {
            enabled: sctlr & 1 == 1,
            lower: mk(
                ttbr0,
                tcr & 0x3F,
                Granule::from_tg0(tcr >> 14 & 3),
                tcr >> 7 & 1 == 1,
            ),
            upper: mk(
                ttbr1,
                tcr >> 16 & 0x3F,
                Granule::from_tg1(tcr >> 30 & 3),
                tcr >> 23 & 1 == 1,
            ),
            two_ranges: true,
            tbi_lower: tcr >> 37 & 1 == 1,
            tbi_upper: tcr >> 38 & 1 == 1,
        }
    }

    /// EL2 without E2H: one range, TCR_EL2 in its EL2 layout.
    pub fn one_range(sctlr: u64, tcr: u64, ttbr0: u64) -> Stage1 {
        let granule = Granule::from_tg0(tcr >> 14 & 3);
        let ia_bits = 64 - (tcr & 0x3F).clamp(12, 48) as u32;
        let ha = tcr >> 21 & 1 == 1;
        Stage1 {
            enabled: sctlr & 1 == 1,
            lower: Some(Tables {
                ttbr: ttbr0,
                ia_bits,
                granule,
                start_level: start_level(ia_bits, granule),
                oa52: oa52(tcr >> 32 & 1 == 1, granule, tcr >> 16 & 7),
                ha,
                hd: ha && tcr >> 22 & 1 == 1,
            }),
            upper: None,
            two_ranges: false,
            tbi_lower: tcr >> 20 & 1 == 1,
            tbi_upper: false,
        }
    }
}

/// Stage 2 tables from VTCR_EL2/VTTBR_EL2.
pub fn stage2(vtcr: u64, vttbr: u64) -> Tables {
    let granule = Granule::from_tg0(vtcr >> 14 & 3);
    let ia_bits = 64 - (vtcr & 0x3F).clamp(12, 48) as u32;
    let sl0 = (vtcr >> 6 & 3) as i32;
    let start_level = match granule {
        Granule::K4 => 2 - sl0,
        Granule::K16 | Granule::K64 => 3 - sl0,
    };
    let ha = vtcr >> 21 & 1 == 1;
    Tables {
        // VTTBR_EL2.VMID lives in 63:48; the base is below.
        ttbr: vttbr & 0x0000_FFFF_FFFF_FFFF,
        ia_bits,
        granule,
        start_level: start_level.max(0),
        oa52: oa52(vtcr >> 32 & 1 == 1, granule, vtcr >> 16 & 7),
        ha,
        hd: ha && vtcr >> 22 & 1 == 1,
    }
}

/// The result of a translation: the output address and how many bytes
/// from it stay within the same leaf mapping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mapping {
    pub pa: u64,
    pub len: u64,
}

const DESC_VALID: u64 = 1;
const DESC_TABLE: u64 = 2;
const DESC_AF: u64 = 1 << 10;
const DESC_AP2: u64 = 1 << 7; // stage 1: read-only
const DESC_S2AP_W: u64 = 1 << 7; // stage 2: S2AP[1], write permitted
const DESC_DBM: u64 = 1 << 51;
const APTABLE_RO: u64 = 1 << 62;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    One,
    Two,
}

/// Output-address bits of a descriptor or TTBR.
fn output_address(desc: u64, t: &Tables, shift: u32) -> u64 {
    let mut oa = desc & (0x0000_FFFF_FFFF_FFFF & !((1u64 << shift) - 1));
    if t.oa52 {
        match t.granule {
            Granule::K64 => oa |= (desc >> 12 & 0xF) << 48,
            _ => {
                oa &= 0x0003_FFFF_FFFF_FFFF;
                oa |= (desc >> 8 & 3) << 50;
            }
        }
    }
    oa
}

fn table_base(t: &Tables) -> u64 {
    let mut base = t.ttbr & 0x0000_FFFF_FFFF_FFFE;
    if t.oa52 {
        base = (base & !0x3C) | (t.ttbr >> 2 & 0xF) << 48;
    }
    base
}

/// Walks `t` for input address `ia`. `walk_pa` translates the address of
/// each table (stage 2 for a stage 1 walk, identity otherwise).
fn walk<M: GuestMemory>(
    mem: &M,
    t: &Tables,
    ia: u64,
    stage: Stage,
    walk_pa: &mut dyn FnMut(u64) -> Result<u64, Fault>,
) -> Result<Mapping, Fault> {
    let g = t.granule.bits();
    let stride = g - 3;
    let fault = |code: u8| match stage {
        Stage::One => Fault::Stage1(code),
        Stage::Two => Fault::Stage2(code),
    };
    let mut table = table_base(t);
    let mut level = t.start_level;
    let mut ro_table = false;
    loop {
        let shift = g + (3 - level) as u32 * stride;
        // The first level takes every bit left above `shift`: this also
        // covers stage 2's concatenated first-level tables.
        let width = if level == t.start_level {
            t.ia_bits.saturating_sub(shift)
        } else {
            stride
        };
        let index = (ia >> shift) & ((1u64 << width) - 1);
        let desc_ipa = table + index * 8;
        let desc_pa = walk_pa(desc_ipa)?;
        let step = with_descriptor(mem, desc_pa, |slot| {
            examine(slot, t, stage, level, shift, ia, ro_table)
        });
        match step {
            None => return Err(fault(fsc::external_abort_on_walk(level))),
            Some(Step::Fault(code)) => return Err(fault(code)),
            Some(Step::Leaf(m)) => return Ok(m),
            Some(Step::Table { next, ro }) => {
                ro_table |= ro;
                table = next;
                level += 1;
            }
        }
    }
}

enum Step {
    Table { next: u64, ro: bool },
    Leaf(Mapping),
    Fault(u8),
}

/// One level of the walk: decode the descriptor in `slot`, applying the
/// hardware AF/dirty updates for a leaf.
fn examine(
    slot: &AtomicU64,
    t: &Tables,
    stage: Stage,
    level: i32,
    shift: u32,
    ia: u64,
    ro_table: bool,
) -> Step {
    let mut desc = slot.load(Ordering::Acquire);
    if desc & DESC_VALID == 0 {
        return Step::Fault(fsc::translation(level));
    }
    if desc & DESC_TABLE != 0 && level < 3 {
        return Step::Table {
            next: output_address(desc, t, t.granule.bits()),
            ro: stage == Stage::One && desc & APTABLE_RO != 0,
        };
    }
    // A block or a page.
    let leaf_ok = match (t.granule, level) {
        (_, 3) => desc & DESC_TABLE != 0,
        (Granule::K4, 1 | 2) | (Granule::K16 | Granule::K64, 2) => true,
        (Granule::K4, 0) | (Granule::K16 | Granule::K64, 1) => t.oa52,
        _ => false,
    };
    if !leaf_ok {
        return Step::Fault(fsc::translation(level));
    }
    loop {
        let mut want = desc;
        if desc & DESC_AF == 0 {
            if !t.ha {
                return Step::Fault(fsc::access_flag(level));
            }
            want |= DESC_AF;
        }
        let writable = match stage {
            Stage::One => desc & DESC_AP2 == 0 && !ro_table,
            Stage::Two => desc & DESC_S2AP_W != 0,
        };
        if !writable {
            // Dirty-state management: a DBM descriptor becomes writable.
            if !(t.hd && desc & DESC_DBM != 0 && !ro_table) {
                return Step::Fault(fsc::permission(level));
            }
            want = match stage {
                Stage::One => want & !DESC_AP2,
                Stage::Two => want | DESC_S2AP_W,
            };
        }
        if want == desc {
            break;
        }
        match slot.compare_exchange(desc, want, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(now) if now & DESC_VALID == 0 => return Step::Fault(fsc::translation(level)),
            Err(now) => desc = now,
        }
    }
    let size = 1u64 << shift;
    let off = ia & (size - 1);
    Step::Leaf(Mapping {
        pa: output_address(desc, t, shift) + off,
        len: size - off,
    })
}

/// Runs `f` on the 8-byte descriptor at `pa`, if `pa` is guest RAM.
fn with_descriptor<M: GuestMemory, R>(
    mem: &M,
    pa: u64,
    f: impl FnOnce(&AtomicU64) -> R,
) -> Option<R> {
    let slice = mem
        .get_slices(GuestAddress(pa), 8, Permissions::ReadWrite)
        .ok()?
        .next()?
        .ok()?;
    // A descriptor is 8-byte aligned, so one slice holds all of it.
    let slot = slice.get_atomic_ref::<AtomicU64>(0).ok()?;
    Some(f(slot))
}

/// Stage 2 translation of an IPA.
pub fn translate_stage2<M: GuestMemory>(mem: &M, s2: &Tables, ipa: u64) -> Result<Mapping, Fault> {
    if ipa >> s2.ia_bits != 0 {
        return Err(Fault::Stage2(fsc::address_size(s2.start_level)));
    }
    walk(mem, s2, ipa, Stage::Two, &mut |a| Ok(a))
}

/// Translates `va` for a privileged write in a regime with stage 1 `s1`
/// and optional stage 2 `s2`.
pub fn translate<M: GuestMemory>(
    mem: &M,
    s1: &Stage1,
    s2: Option<&Tables>,
    va: u64,
) -> Result<Mapping, Fault> {
    let mut s2_pa = |ipa: u64| -> Result<u64, Fault> {
        match s2 {
            Some(t) => translate_stage2(mem, t, ipa).map(|m| m.pa),
            None => Ok(ipa),
        }
    };
    let m1 = if !s1.enabled {
        Mapping {
            pa: va,
            len: u64::MAX - va + 1,
        }
    } else {
        let upper = s1.two_ranges && va >> 55 & 1 == 1;
        let (tables, tbi) = if upper {
            (s1.upper, s1.tbi_upper)
        } else {
            (s1.lower, s1.tbi_lower)
        };
        let Some(t) = tables else {
            // EPDx = 1: walks of this range fault at the start level.
            return Err(Fault::Stage1(fsc::translation(0)));
        };
        // Every bit above the input range (below 56 with TBI) must copy
        // bit 55 in a two-range regime, or be zero in a one-range one.
        let top = if tbi { 56 } else { 64 };
        let above = if top > t.ia_bits {
            (va & (u64::MAX >> (64 - top))) >> t.ia_bits
        } else {
            0
        };
        let ones = (1u64 << (top - t.ia_bits)) - 1;
        let ok = if upper { above == ones } else { above == 0 };
        if !ok {
            return Err(Fault::Stage1(fsc::translation(t.start_level)));
        }
        let ia = va & ((1u64 << t.ia_bits) - 1);
        walk(mem, &t, ia, Stage::One, &mut s2_pa)?
    };
    match s2 {
        None => Ok(m1),
        Some(t) => {
            let m2 = translate_stage2(mem, t, m1.pa)?;
            Ok(Mapping {
                pa: m2.pa,
                len: m1.len.min(m2.len),
            })
        }
    }
}

#[cfg(test)]
mod tests;
