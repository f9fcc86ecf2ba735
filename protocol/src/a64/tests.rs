//! Encodings from GNU as (`-march=armv8.5-a+memtag`), with what each one
//! is as an SPE operation.

use super::*;
use crate::op::OpClass;
use crate::packet::op;

/// X<n> = 0x1000 * (n + 1), SP = 0x8000_0000.
struct Regs;

impl Registers for Regs {
    fn x(&mut self, n: u8) -> u64 {
        0x1000 * (u64::from(n) + 1)
    }
    fn sp(&mut self) -> u64 {
        0x8000_0000
    }
}

const PC: u64 = 0x40_0000;

fn ldst(store: bool, subclass: u8, vector: bool, size: u8) -> OpInfo {
    OpInfo {
        class: OpClass::LoadStore {
            store,
            subclass,
            vector,
        },
        size,
    }
}

fn x(n: u64) -> u64 {
    0x1000 * (n + 1)
}

const SP: u64 = 0x8000_0000;

#[test]
fn loads_and_stores_their_class_size_and_first_address() {
    let gp = op::LDST_GP;
    let fp = op::LDST_SIMD_FP;
    let excl = op::LDST_EXT | op::LDST_EXCL;
    let at = op::LDST_EXT | op::LDST_AT;
    #[rustfmt::skip]
    let table: &[(u32, &str, OpInfo, u64)] = &[
        (0xf9400841, "ldr x1, [x2, #16]", ldst(false, gp, false, 8), x(2) + 16),
        (0xb85fdc41, "ldr w1, [x2, #-3]!", ldst(false, gp, false, 4), x(2) - 3),
        (0xf8408441, "ldr x1, [x2], #8", ldst(false, gp, false, 8), x(2)),
        // QEMU's spe_classify() gives a Q register 1 << size = 1 byte.
        (0x3d800be0, "str q0, [sp, #32]", ldst(true, fp, false, 1), SP + 32),
        (0xf8627820, "ldr x0, [x1, x2, lsl #3]", ldst(false, gp, false, 8), x(1) + (x(2) << 3)),
        (0x3862c820, "ldrb w0, [x1, w2, sxtw]", ldst(false, gp, false, 1), x(1) + x(2)),
        (0xa8c17bfd, "ldp x29, x30, [sp], #16", ldst(false, gp, false, 16), SP),
        (0xa9be7bfd, "stp x29, x30, [sp, #-32]!", ldst(true, gp, false, 16), SP - 32),
        (0xad420460, "ldp q0, q1, [x3, #64]", ldst(false, fp, false, 32), x(3) + 64),
        (0xc85f7ca0, "ldxr x0, [x5]", ldst(false, excl, false, 8), x(5)),
        (0x889ffcc1, "stlr w1, [x6]", ldst(true, excl, false, 4), x(6)),
        (0xc8e0fc41, "casal x0, x1, [x2]", ldst(false, excl, false, 8), x(2)),
        (0xf82100e2, "ldadd x1, x2, [x7]", ldst(false, at, false, 8), x(7)),
        (0x4cdf7100, "ld1 {v0.16b}, [x8], #16", ldst(false, fp, true, 0), x(8)),
        (0x58000080, "ldr x0, .+16", ldst(false, gp, false, 8), PC + 16),
        (0xd95f8020, "ldapur x0, [x1, #-8]", ldst(false, gp, false, 0), x(1) - 8),
        (0xf87fe420, "ldraa x0, [x1, #-16]", ldst(false, gp, false, 8), x(1) - 16),
        (0xb9800420, "ldrsw x0, [x1, #4]", ldst(false, gp, false, 4), x(1) + 4),
        (0xf9802020, "prfm pldl1keep, [x1, #64]", ldst(false, gp, false, 8), x(1) + 64),
        (0x785ff040, "ldurh w0, [x2, #-1]", ldst(false, gp, false, 2), x(2) - 1),
        (0x69010440, "stgp x0, x1, [x2, #32]", ldst(true, gp, false, 8), x(2) + 32),
        (0xfd400420, "ldr d0, [x1, #8]", ldst(false, fp, false, 8), x(1) + 8),
    ];
    for &(insn, text, info, va) in table {
        assert_eq!(classify(insn), info, "{text}");
        let addr = data_address(insn).unwrap_or_else(|| panic!("{text}: no address"));
        assert_eq!(addr.eval(PC, &mut Regs), va, "{text}: {addr:?}");
        assert_eq!(branch(insn), None, "{text}");
    }
}

#[test]
fn branches_their_target_and_condition() {
    use Condition::*;
    #[rustfmt::skip]
    let table: &[(u32, &str, bool, bool, Target, Condition)] = &[
        (0x14000002, "b .+8", false, false, Target::Relative(8), Always),
        (0x97ffffff, "bl .-4", false, false, Target::Relative(-4), Always),
        (0x34000063, "cbz w3, .+12", true, false, Target::Relative(12), Zero { t: 3, wide: false, nonzero: false }),
        (0xb5ffffc4, "cbnz x4, .-8", true, false, Target::Relative(-8), Zero { t: 4, wide: true, nonzero: true }),
        (0xb6080085, "tbz x5, #33, .+16", true, false, Target::Relative(16), Bit { t: 5, bit: 33, set: false }),
        (0x371fffe6, "tbnz w6, #3, .-4", true, false, Target::Relative(-4), Bit { t: 6, bit: 3, set: true }),
        (0x540000a1, "b.ne .+20", true, false, Target::Relative(20), Code(1)),
        (0xd61f0120, "br x9", false, true, Target::Register(9), Always),
        (0xd63f0140, "blr x10", false, true, Target::Register(10), Always),
        (0xd65f03c0, "ret", false, true, Target::Register(30), Always),
        (0xd65f0060, "ret x3", false, true, Target::Register(3), Always),
        (0xd65f0bff, "retaa", false, true, Target::Register(30), Always),
        (0xd69f03e0, "eret", false, true, Target::Unknown, Always),
    ];
    for &(insn, text, conditional, indirect, target, condition) in table {
        let class = OpClass::Branch {
            conditional,
            indirect,
        };
        assert_eq!(classify(insn), OpInfo { class, size: 0 }, "{text}");
        assert_eq!(branch(insn), Some(Branch { target, condition }), "{text}");
        assert_eq!(data_address(insn), None, "{text}");
    }
}

#[test]
fn other_operations_and_selects() {
    #[rustfmt::skip]
    let table: &[(u32, &str, bool, u8, Option<u8>)] = &[
        (0x9a82b020, "csel x0, x1, x2, lt", true, 0, Some(0b1011)),
        (0x1e620c20, "fcsel d0, d1, d2, eq", true, op::OTHER_FP, Some(0)),
        (0x1e622820, "fadd d0, d1, d2", false, op::OTHER_FP, None),
        (0x4ea28420, "add v0.4s, v1.4s, v2.4s", false, op::OTHER_ASE, None),
        (0x8b020020, "add x0, x1, x2", false, 0, None),
    ];
    for &(insn, text, cond_select, subclass, cond) in table {
        let class = OpClass::Other {
            cond_select,
            subclass,
        };
        assert_eq!(classify(insn), OpInfo { class, size: 0 }, "{text}");
        assert_eq!(select_condition(insn), cond, "{text}");
        assert_eq!((branch(insn), data_address(insn)), (None, None), "{text}");
    }
}

/// `ConditionHolds()` for every code against every NZCV, from its
/// definition in the Arm ARM (cond<3:1>, inverted by cond<0> except AL),
/// spelled as the table has it rather than simplified.
#[test]
#[allow(clippy::nonminimal_bool)]
fn condition_codes() {
    for nzcv in 0u8..16 {
        let (n, z, c, v) = (nzcv & 8 != 0, nzcv & 4 != 0, nzcv & 2 != 0, nzcv & 1 != 0);
        #[rustfmt::skip]
        let want = [
            z, !z, c, !c, n, !n, v, !v,
            c && !z, !(c && !z), n == v, n != v, n == v && !z, !(n == v && !z), true, true,
        ];
        for (cond, &w) in want.iter().enumerate() {
            assert_eq!(
                condition_holds(cond as u8, nzcv),
                w,
                "cond {cond} nzcv {nzcv:04b}"
            );
        }
    }
}

#[test]
fn register_conditions() {
    let mut regs = Regs;
    // X3 = 0x4000: its low word is not zero, bit 14 is set.
    let cbz_w3 = Condition::Zero {
        t: 3,
        wide: false,
        nonzero: false,
    };
    assert!(!cbz_w3.holds(0, &mut regs));
    let cbz_wzr = Condition::Zero {
        t: 31,
        wide: true,
        nonzero: false,
    };
    assert!(cbz_wzr.holds(0, &mut regs));
    let tbnz = |bit| Condition::Bit {
        t: 3,
        bit,
        set: true,
    };
    assert!(tbnz(14).holds(0, &mut regs));
    assert!(!tbnz(13).holds(0, &mut regs));
    assert!(Condition::Code(0).holds(0b0100, &mut regs));
}

#[test]
fn index_extends() {
    struct Neg;
    impl Registers for Neg {
        fn x(&mut self, n: u8) -> u64 {
            if n == 2 {
                0xffff_ffff_ffff_fffe // -2, and W2 = 0xfffffffe
            } else {
                0x10_0000
            }
        }
        fn sp(&mut self) -> u64 {
            0
        }
    }
    let addr = |extend, shift| Address::Indexed {
        n: 1,
        m: 2,
        extend,
        shift,
    };
    assert_eq!(addr(Extend::Sxtw, 0).eval(0, &mut Neg), 0x10_0000 - 2);
    assert_eq!(addr(Extend::Sxtx, 3).eval(0, &mut Neg), 0x10_0000 - 16);
    assert_eq!(
        addr(Extend::Uxtw, 0).eval(0, &mut Neg),
        0x10_0000 + 0xffff_fffe
    );
    assert_eq!(addr(Extend::Lsl, 1).eval(0, &mut Neg), 0x10_0000 - 4);
}

#[test]
fn the_registers_an_instruction_may_write() {
    use regset::{ALL, NZCV, SP as SP_};
    let r = |n: &[u32]| n.iter().map(|&i| 1u64 << i).sum::<u64>();
    #[rustfmt::skip]
    let table: &[(u32, &str, u64)] = &[
        (0x91002041, "add x1, x2, #8", r(&[1])),
        (0xb1002041, "adds x1, x2, #8", r(&[1]) | NZCV),
        (0x910043ff, "add sp, sp, #16", SP_),
        (0xd28000a3, "mov x3, #5", r(&[3])),
        // MOVK's opc has bit 29 set: the flags too, more than it writes.
        (0xf2a000a3, "movk x3, #5, lsl #16", r(&[3]) | NZCV),
        (0x90000004, "adrp x4, .", r(&[4])),
        (0x92401cc5, "and x5, x6, #0xff", r(&[5])),
        (0xd3442d07, "ubfx x7, x8, #4, #8", r(&[7])),
        (0x8b030041, "add x1, x2, x3", r(&[1])),
        (0xeb030041, "subs x1, x2, x3", r(&[1]) | NZCV),
        // XZR counted as SP.
        (0xeb03005f, "cmp x2, x3", SP_ | NZCV),
        (0x9a830041, "csel x1, x2, x3, eq", r(&[1])),
        // Its Rd field is the immediate NZCV: X0, more than it writes.
        (0xfa421020, "ccmp x1, x2, #0, ne", r(&[0]) | NZCV),
        (0x9b031041, "madd x1, x2, x3, x4", r(&[1])),
        (0x8b2243e1, "add x1, sp, w2, uxtw", r(&[1])),
        (0x9e660009, "fmov x9, d0", r(&[9]) | NZCV),
        (0x1e622820, "fadd d0, d1, d2", r(&[0]) | NZCV),
        (0x1e612000, "fcmp d0, d1", r(&[0]) | NZCV),
        (0x0e0c3c0a, "umov w10, v0.s[1]", r(&[10]) | NZCV),
        (0xf9400841, "ldr x1, [x2, #16]", r(&[1])),
        (0xb85fdc41, "ldr w1, [x2, #-3]!", r(&[1, 2])),
        (0xf8408441, "ldr x1, [x2], #8", r(&[1, 2])),
        (0xf9000441, "str x1, [x2, #8]", 0),
        (0xf8008c41, "str x1, [x2, #8]!", r(&[2])),
        (0x3862c820, "ldrb w0, [x1, w2, sxtw]", r(&[0])),
        (0x3dc00820, "ldr q0, [x1, #32]", 0),
        (0x3cc20420, "ldr q0, [x1], #32", r(&[1])),
        (0xa8c17bfd, "ldp x29, x30, [sp], #16", r(&[29, 30]) | SP_),
        (0xa9be7bfd, "stp x29, x30, [sp, #-32]!", SP_),
        (0xa9010861, "stp x1, x2, [x3, #16]", 0),
        (0xa9410861, "ldp x1, x2, [x3, #16]", r(&[1, 2])),
        (0xad420460, "ldp q0, q1, [x3, #64]", 0),
        (0x4c407020, "ld1 {v0.16b}, [x1]", 0),
        (0x4cdf7020, "ld1 {v0.16b}, [x1], #16", r(&[1])),
        (0x58000001, "ldr x1, .", r(&[1])),
        (0xd9408041, "ldapur x1, [x2, #8]", r(&[1])),
        (0xd9008041, "stlur x1, [x2, #8]", 0),
        (0xf8201c41, "ldraa x1, [x2, #8]!", r(&[1, 2])),
        (0xf8201441, "ldraa x1, [x2, #8]", r(&[1])),
        // Rt is the prefetch operation: X0, more than it writes.
        (0xf9802020, "prfm pldl1keep, [x1, #64]", r(&[0])),
        (0xf8408841, "ldtr x1, [x2, #8]", r(&[1])),
        (0xc85f7ca0, "ldxr x0, [x5]", ALL),
        (0xf82100e2, "ldadd x1, x2, [x7]", ALL),
        (0x14000000, "b .", ALL),
        (0x94000000, "bl .", ALL),
        (0xd53bd041, "mrs x1, tpidr_el0", ALL),
        (0xd4000001, "svc #0", ALL),
    ];
    for &(insn, asm, want) in table {
        assert_eq!(writes(insn), want, "{asm} ({insn:#010x})");
    }
}

#[test]
fn the_registers_an_address_reads() {
    use regset::SP as SP_;
    #[rustfmt::skip]
    let table: &[(u32, &str, u64)] = &[
        (0xf9400841, "ldr x1, [x2, #16]", 1 << 2),
        (0xf8627820, "ldr x0, [x1, x2, lsl #3]", 1 << 1 | 1 << 2),
        (0xf87f6820, "ldr x0, [x1, xzr]", 1 << 1),
        (0x3d800be0, "str q0, [sp, #32]", SP_),
        (0x58000001, "ldr x1, .", 0),
    ];
    for &(insn, asm, want) in table {
        let addr = data_address(insn).unwrap_or_else(|| panic!("{asm}: no address"));
        assert_eq!(address_reads(&addr), want, "{asm} ({insn:#010x})");
    }
}
