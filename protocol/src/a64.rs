//! What an A64 instruction's encoding says about it as an SPE operation:
//! its class ([`classify`]), the address a load or store accesses
//! ([`data_address`]), and where a branch goes and on what condition
//! ([`branch`], [`select_condition`]).
//!
//! [`classify`] is the Rust twin of the patched QEMU's `spe_classify()`
//! (the series' first sampler patch, before its SVE patch): the same
//! masks, in the same order, with the same choices, so that a sample
//! source outside QEMU (the TCG plugin) classifies as the full-emulation
//! path does.
//! `tests/classify_matches_qemu.rs` runs both on the same encodings.
//! SVE and SME encodings are "other" here, as in that function.

use crate::op::OpClass;
use crate::packet::op;

/// An operation's class and, for a load or store, its access size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OpInfo {
    pub class: OpClass,
    /// Bytes accessed (loads and stores; both registers of a pair).
    pub size: u8,
}

fn bits(insn: u32, lo: u32, n: u32) -> u32 {
    (insn >> lo) & ((1 << n) - 1)
}

fn bit(insn: u32, b: u32) -> bool {
    insn >> b & 1 != 0
}

/// Sign-extends the `n`-bit field at `lo`.
fn sbits(insn: u32, lo: u32, n: u32) -> i64 {
    let v = i64::from(bits(insn, lo, n));
    (v << (64 - n)) >> (64 - n)
}

/// The SPE class of `insn`, from its top-level encoding groups.
pub fn classify(insn: u32) -> OpInfo {
    if insn & 0x0a00_0000 == 0x0800_0000 {
        return load_store(insn);
    }
    let other = |cond_select, subclass| OpInfo {
        class: OpClass::Other {
            cond_select,
            subclass,
        },
        size: 0,
    };
    let branch = |conditional, indirect| OpInfo {
        class: OpClass::Branch {
            conditional,
            indirect,
        },
        size: 0,
    };
    if insn & 0x7c00_0000 == 0x1400_0000 {
        return branch(false, false); // B, BL
    }
    if insn & 0x7c00_0000 == 0x3400_0000 || insn & 0xff00_0000 == 0x5400_0000 {
        return branch(true, false); // CBZ, TBZ, B.cond, BC.cond
    }
    if insn & 0xfe00_0000 == 0xd600_0000 {
        return branch(false, true); // BR, BLR, RET, ERET, ...
    }
    if insn & 0x1fe0_0000 == 0x1a80_0000 {
        return other(true, 0); // CSEL, CSINC, CSINV, CSNEG
    }
    if insn & 0x0e00_0000 == 0x0e00_0000 {
        // Scalar FP and Advanced SIMD data processing; FCSEL selects.
        if insn & 0x5e00_0000 == 0x1e00_0000 {
            return other(insn & 0xff20_0c00 == 0x1e20_0c00, op::OTHER_FP);
        }
        return other(false, op::OTHER_ASE);
    }
    other(false, 0)
}

fn load_store(insn: u32) -> OpInfo {
    let simd = bit(insn, 26);
    let mut subclass = if simd { op::LDST_SIMD_FP } else { op::LDST_GP };
    let mut size = 0u32;
    let store;
    if insn & 0x3f00_0000 == 0x0800_0000 {
        // Exclusive and ordered.
        subclass = op::LDST_EXT | op::LDST_EXCL;
        store = !bit(insn, 22);
        size = 1 << bits(insn, 30, 2);
    } else if insn & 0x3b00_0000 == 0x1800_0000 {
        // Load literal.
        store = false;
        size = 4 << bits(insn, 30, 1);
    } else if insn & 0x3800_0000 == 0x2800_0000 {
        // Pairs.
        store = !bit(insn, 22);
        size = 2 * if simd {
            4 << bits(insn, 30, 2)
        } else {
            4 << bits(insn, 31, 1)
        };
    } else if insn & 0x3800_0000 == 0x3800_0000 {
        if !simd && !bit(insn, 24) && bit(insn, 21) && bits(insn, 10, 2) == 0 {
            subclass = op::LDST_EXT | op::LDST_AT;
            store = false;
        } else if simd {
            store = !bit(insn, 22);
        } else {
            store = bits(insn, 22, 2) == 0;
        }
        size = 1 << bits(insn, 30, 2);
    } else {
        store = !bit(insn, 22);
    }
    // LD1-LD4 and ST1-ST4 are SIMD; other SIMD&FP ones are scalar (FP).
    let vector = simd && insn & 0xbe00_0000 == 0x0c00_0000;
    OpInfo {
        class: OpClass::LoadStore {
            store,
            subclass,
            vector,
        },
        size: size.min(255) as u8,
    }
}

/// How a register index extends before it is added ([`Address::Indexed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extend {
    /// UXTW: the low 32 bits, zero-extended.
    Uxtw,
    /// LSL / UXTX: all 64 bits.
    Lsl,
    /// SXTW: the low 32 bits, sign-extended.
    Sxtw,
    /// SXTX: all 64 bits.
    Sxtx,
}

/// Where a load or store's first access is, before it executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Address {
    /// Xn|SP plus an immediate (0 for post-indexed forms).
    Base { n: u8, offset: i64 },
    /// Xn|SP plus Xm|XZR, extended and shifted left.
    Indexed {
        n: u8,
        m: u8,
        extend: Extend,
        shift: u8,
    },
    /// The instruction's own address plus an immediate.
    Literal { offset: i64 },
}

/// The registers an address or condition reads: X0-X30, with 31 as SP
/// or XZR as the encoding has it.
pub trait Registers {
    fn x(&mut self, n: u8) -> u64;
    fn sp(&mut self) -> u64;
}

impl Address {
    /// The virtual address at `pc` with these register values.
    pub fn eval(&self, pc: u64, regs: &mut impl Registers) -> u64 {
        match *self {
            Address::Base { n, offset } => base(n, regs).wrapping_add(offset as u64),
            Address::Indexed {
                n,
                m,
                extend,
                shift,
            } => {
                let i = if m == 31 { 0 } else { regs.x(m) };
                let i = match extend {
                    Extend::Uxtw => i & 0xffff_ffff,
                    Extend::Sxtw => i64::from(i as u32 as i32) as u64,
                    Extend::Lsl | Extend::Sxtx => i,
                };
                base(n, regs).wrapping_add(i << shift)
            }
            Address::Literal { offset } => pc.wrapping_add(offset as u64),
        }
    }
}

/// Xn, or SP for 31: a base register.
fn base(n: u8, regs: &mut impl Registers) -> u64 {
    if n == 31 {
        regs.sp()
    } else {
        regs.x(n)
    }
}

/// The address a load or store accesses first, for the forms whose
/// address is a base register, an immediate and an index register (every
/// GP and SIMD&FP load, store, pair, exclusive, atomic and structure
/// form). `None` for the others (memory copy and set, tags, SVE), and for
/// anything that is not a load or store.
pub fn data_address(insn: u32) -> Option<Address> {
    if insn & 0x0a00_0000 != 0x0800_0000 {
        return None;
    }
    let n = bits(insn, 5, 5) as u8;
    let at = |offset: i64| Some(Address::Base { n, offset });
    let simd = bit(insn, 26);
    if insn & 0x3f00_0000 == 0x0800_0000 {
        return at(0); // exclusive, ordered, compare-and-swap
    }
    if insn & 0xbe00_0000 == 0x0c00_0000 {
        return at(0); // structures; post-index adds after the access
    }
    if insn & 0x3b00_0000 == 0x1800_0000 {
        return Some(Address::Literal {
            offset: sbits(insn, 5, 19) * 4,
        });
    }
    if insn & 0x3f20_0c00 == 0x1900_0000 {
        return at(sbits(insn, 12, 9)); // LDAPUR, STLUR
    }
    if insn & 0x3800_0000 == 0x2800_0000 {
        let opc = bits(insn, 30, 2);
        let scale = if simd {
            2 + opc
        } else if opc == 1 && !bit(insn, 22) {
            4 // STGP
        } else {
            2 + (opc >> 1)
        };
        let offset = sbits(insn, 15, 7) << scale;
        return at(if bits(insn, 23, 2) == 1 { 0 } else { offset });
    }
    if insn & 0x3800_0000 != 0x3800_0000 {
        return None;
    }
    let mut scale = bits(insn, 30, 2);
    if simd && bit(insn, 23) {
        scale = 4; // 128-bit Q
    }
    if bit(insn, 24) {
        return at(i64::from(bits(insn, 10, 12)) << scale);
    }
    let simm9 = sbits(insn, 12, 9);
    if !bit(insn, 21) {
        return at(if bits(insn, 10, 2) == 1 { 0 } else { simm9 });
    }
    match bits(insn, 10, 2) {
        0 => at(0), // atomic memory operations
        2 => {
            let extend = match bits(insn, 13, 3) {
                0b010 => Extend::Uxtw,
                0b011 => Extend::Lsl,
                0b110 => Extend::Sxtw,
                0b111 => Extend::Sxtx,
                _ => return None,
            };
            Some(Address::Indexed {
                n,
                m: bits(insn, 16, 5) as u8,
                extend,
                shift: if bit(insn, 12) { scale as u8 } else { 0 },
            })
        }
        // LDRAA, LDRAB: S:imm9, scaled by 8.
        _ if !simd => {
            let s_imm9 = i64::from(bits(insn, 22, 1) << 9 | bits(insn, 12, 9));
            at((s_imm9 << 54 >> 54) * 8)
        }
        _ => None,
    }
}

/// What decides whether a branch is taken, or a select selects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Condition {
    Always,
    /// A condition code (B.cond, CSEL's) on NZCV.
    Code(u8),
    /// CBZ (`nonzero` false) and CBNZ on Xt (`wide`) or Wt.
    Zero {
        t: u8,
        wide: bool,
        nonzero: bool,
    },
    /// TBZ (`set` false) and TBNZ on bit `bit` of Xt.
    Bit {
        t: u8,
        bit: u8,
        set: bool,
    },
}

/// Where a branch goes when taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The branch's own address plus this.
    Relative(i64),
    /// The value of Xn.
    Register(u8),
    /// An exception return or the like: not in a general register.
    Unknown,
}

/// A branch's target and condition.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Branch {
    pub target: Target,
    pub condition: Condition,
}

/// The target and condition of a branch `classify` calls one.
pub fn branch(insn: u32) -> Option<Branch> {
    let t = bits(insn, 0, 5) as u8;
    let (target, condition) = if insn & 0x7c00_0000 == 0x1400_0000 {
        (Target::Relative(sbits(insn, 0, 26) * 4), Condition::Always)
    } else if insn & 0x7e00_0000 == 0x3400_0000 {
        let c = Condition::Zero {
            t,
            wide: bit(insn, 31),
            nonzero: bit(insn, 24),
        };
        (Target::Relative(sbits(insn, 5, 19) * 4), c)
    } else if insn & 0x7e00_0000 == 0x3600_0000 {
        let c = Condition::Bit {
            t,
            bit: (bits(insn, 31, 1) << 5 | bits(insn, 19, 5)) as u8,
            set: bit(insn, 24),
        };
        (Target::Relative(sbits(insn, 5, 14) * 4), c)
    } else if insn & 0xff00_0000 == 0x5400_0000 {
        let c = Condition::Code(bits(insn, 0, 4) as u8);
        (Target::Relative(sbits(insn, 5, 19) * 4), c)
    } else if insn & 0xfe00_0000 == 0xd600_0000 {
        // BR, BLR, RET and their authenticated forms name Xn; ERET and
        // DRPS return to ELR.
        let n = bits(insn, 5, 5) as u8;
        let target = match bits(insn, 21, 4) {
            // BR, BLR, BRAA, BLRAA and the Z forms.
            0b0000 | 0b0001 | 0b1000 | 0b1001 => Target::Register(n),
            // RET Xn; RETAA and RETAB encode Rn as 11111 and use X30.
            0b0010 => Target::Register(if n == 31 { 30 } else { n }),
            _ => Target::Unknown,
        };
        (target, Condition::Always)
    } else {
        return None;
    };
    Some(Branch { target, condition })
}

/// The condition code of a conditional select `classify` calls one.
pub fn select_condition(insn: u32) -> Option<u8> {
    match classify(insn).class {
        OpClass::Other {
            cond_select: true, ..
        } => Some(bits(insn, 12, 4) as u8),
        _ => None,
    }
}

/// `ConditionHolds()`: whether condition code `cond` holds for NZCV
/// (`nzcv` bits 3:0 = N, Z, C, V).
pub fn condition_holds(cond: u8, nzcv: u8) -> bool {
    let (n, z, c, v) = (nzcv & 8 != 0, nzcv & 4 != 0, nzcv & 2 != 0, nzcv & 1 != 0);
    let result = match cond >> 1 {
        0 => z,
        1 => c,
        2 => n,
        3 => v,
        4 => c && !z,
        5 => n == v,
        6 => n == v && !z,
        _ => true,
    };
    if cond & 1 != 0 && cond != 0xf {
        !result
    } else {
        result
    }
}

impl Condition {
    /// Whether it holds with these registers and NZCV.
    pub fn holds(&self, nzcv: u8, regs: &mut impl Registers) -> bool {
        match *self {
            Condition::Always => true,
            Condition::Code(c) => condition_holds(c, nzcv),
            Condition::Zero { t, wide, nonzero } => {
                let v = if t == 31 { 0 } else { regs.x(t) };
                let v = if wide { v } else { v & 0xffff_ffff };
                (v != 0) == nonzero
            }
            Condition::Bit { t, bit, set } => {
                let v = if t == 31 { 0 } else { regs.x(t) };
                (v >> bit & 1 != 0) == set
            }
        }
    }
}

/// Register sets as bit masks: bit n for Xn (0-30), [`regset::SP`] for
/// SP, [`regset::NZCV`] for the flags.
pub mod regset {
    /// SP; also what a destination field of 31 sets, SP or XZR (a write
    /// to XZR changes nothing, but telling the two apart is not worth
    /// the decode).
    pub const SP: u64 = 1 << 31;
    pub const NZCV: u64 = 1 << 32;
    /// Whatever an instruction not decoded here may write.
    pub const ALL: u64 = u64::MAX;
}

fn reg(n: u32) -> u64 {
    1 << (n & 31)
}

/// The registers `insn` may write ([`regset`]), conservatively: more
/// than it writes is allowed, less is not. What the plugin needs to know
/// whether a later instruction of the same TB still sees the registers
/// of the TB's start. Branches, system instructions, SVE, SME and
/// anything unallocated may write everything.
pub fn writes(insn: u32) -> u64 {
    // The S bit of the flag-setting forms (and part of an immediate or
    // an opc in others: more than they write).
    let flags = if bit(insn, 29) { regset::NZCV } else { 0 };
    match bits(insn, 25, 4) {
        // Data processing, immediate and register: Rd, flags.
        0b1000 | 0b1001 | 0b0101 | 0b1101 => reg(insn) | flags,
        // SIMD&FP: a general-register destination is Rd; compares set
        // the flags.
        0b0111 | 0b1111 => reg(insn) | regset::NZCV,
        0b0100 | 0b0110 | 0b1100 | 0b1110 => load_store_writes(insn),
        _ => regset::ALL,
    }
}

/// [`writes`] for the loads and stores: the forms of [`data_address`]
/// but the exclusive, atomic and tag ones, which may write everything.
fn load_store_writes(insn: u32) -> u64 {
    let simd = bit(insn, 26);
    let rt = if simd { 0 } else { reg(insn) };
    let rn = reg(insn >> 5);
    // A general-register load (or prefetch) writes Rt.
    let load = |opc: u32| if opc != 0 { rt } else { 0 };
    if insn & 0xbe00_0000 == 0x0c00_0000 {
        // Structures: V registers, and the base if post-indexed.
        return if bit(insn, 23) { rn } else { 0 };
    }
    if insn & 0x3b00_0000 == 0x1800_0000 {
        return rt; // literal
    }
    if insn & 0x3f20_0c00 == 0x1900_0000 {
        return load(bits(insn, 22, 2)); // LDAPUR, STLUR
    }
    if insn & 0x3800_0000 == 0x2800_0000 {
        // Pairs: Rt and Rt2 when loading, the base when post- or
        // pre-indexed.
        let wb = if bit(insn, 23) { rn } else { 0 };
        let rt2 = if simd { 0 } else { reg(insn >> 10) };
        return wb | if bit(insn, 22) { rt | rt2 } else { 0 };
    }
    if insn & 0x3b00_0000 == 0x3900_0000 {
        return load(bits(insn, 22, 2)); // unsigned offset
    }
    if insn & 0x3b00_0000 == 0x3800_0000 {
        let opc = bits(insn, 22, 2);
        return match (bit(insn, 21), bits(insn, 10, 2)) {
            // Unscaled, unprivileged, register offset.
            (false, 0b00 | 0b10) | (true, 0b10) => load(opc),
            // Post- and pre-indexed.
            (false, _) => rn | load(opc),
            // LDRAA, LDRAB; W (bit 11) writes the base back.
            (true, 0b01 | 0b11) if !simd => rt | if bit(insn, 11) { rn } else { 0 },
            _ => regset::ALL, // atomics, LD64B and the like
        };
    }
    regset::ALL
}

/// The registers [`Address::eval`] reads for `addr`.
pub fn address_reads(addr: &Address) -> u64 {
    match *addr {
        Address::Base { n, .. } => reg(n.into()),
        Address::Indexed { n, m, .. } => reg(n.into()) | if m == 31 { 0 } else { reg(m.into()) },
        Address::Literal { .. } => 0,
    }
}

#[cfg(test)]
mod tests;
