//! The sampled operation of a selected instruction, from its encoding and
//! the vCPU's registers just before it runs: what the patched QEMU's
//! sampler records, as far as a plugin can see it. A branch's target and
//! whether it was taken come from the next instruction executed
//! ([`branch_outcome`]), as the sampler's do.

use spe_protocol::a64::{self, Registers, Target};
use spe_protocol::op::{OpClass, SampledOp};
use spe_protocol::packet::events;
use spe_protocol::regs::El;

/// What the sampler reads besides the general registers.
pub trait Vcpu: Registers {
    /// PSTATE's NZCV (bits 3:0).
    fn nzcv(&mut self) -> u8;
    /// The physical address `va` translates to now, if mapped.
    fn translate(&mut self, va: u64) -> Option<u64>;
}

/// The instruction's surroundings that do not depend on its encoding.
#[derive(Clone, Copy, Debug)]
pub struct Context {
    pub pc: u64,
    pub el: El,
    pub contextidr_el1: u32,
    pub physical_count: u64,
    /// A random u32 for the core's latencies.
    pub random: u32,
}

/// The sampled operation for `insn` at `cx.pc`.
pub fn capture(insn: u32, cx: &Context, vcpu: &mut impl Vcpu) -> SampledOp {
    let info = a64::classify(insn);
    let mut op = SampledOp {
        pc: cx.pc,
        el: cx.el,
        ns: true,
        class: info.class,
        size: info.size,
        contextidr_el1: cx.contextidr_el1,
        physical_count: cx.physical_count,
        ..Default::default()
    };
    core_timing(&mut op, cx.random);
    match info.class {
        OpClass::LoadStore { .. } => match a64::data_address(insn) {
            Some(addr) => {
                let va = addr.eval(cx.pc, vcpu);
                op.data_va = va;
                if let Some(pa) = vcpu.translate(va) {
                    op.data_pa = pa;
                    op.data_pa_valid = true;
                }
                if (va & 63) + u64::from(op.size) > 64 {
                    op.events |= events::MISALIGNED;
                }
            }
            // A form whose address the plugin does not work out (memory
            // copy and set, tags, SVE): recorded without one.
            None => op.no_data_address = true,
        },
        // Completed by `branch_outcome` at the next instruction.
        OpClass::Branch { .. } => {}
        OpClass::Other { .. } => {
            if let Some(cond) = a64::select_condition(insn) {
                if !a64::condition_holds(cond, vcpu.nzcv()) {
                    op.events |= events::NOT_TAKEN;
                }
            }
        }
    }
    op
}

/// Where a sampled branch went, from the next instruction executed: its
/// target and whether it was taken. A direct branch's target is its
/// encoding's; an indirect one's (BR, BLR, RET, ERET) is where execution
/// went. `None` when a direct branch went neither to its target nor to
/// the next instruction: an exception came between them, and the record
/// would guess.
pub fn branch_outcome(insn: u32, pc: u64, next_pc: u64) -> Option<(u64, bool)> {
    let b = a64::branch(insn)?;
    match b.target {
        Target::Relative(off) => {
            let target = pc.wrapping_add(off as u64);
            let conditional = b.condition != a64::Condition::Always;
            if next_pc == target {
                Some((target, true))
            } else if conditional && next_pc == pc.wrapping_add(4) {
                Some((target, false))
            } else {
                None
            }
        }
        Target::Register(_) | Target::Unknown => Some((next_pc, true)),
    }
}

/// Completes a sampled branch with [`branch_outcome`].
pub fn complete_branch(op: &mut SampledOp, insn: u32, next_pc: u64) -> bool {
    match branch_outcome(insn, op.pc, next_pc) {
        Some((target, taken)) => {
            op.target = target;
            if !taken {
                op.events |= events::NOT_TAKEN;
            }
            true
        }
        None => false,
    }
}

/// Latencies and events as far as the core goes, as the series' sampler
/// gives them (`spe_model()`): every operation retires; a load or store
/// accesses L1D and the TLB. A plugin cannot see QEMU's TLB, so TLB_WALK
/// and its latency are never set here.
fn core_timing(op: &mut SampledOp, r: u32) {
    op.events = events::RETIRED;
    let (mut total, mut issue) = (1 + (r & 1), 1);
    if matches!(op.class, OpClass::LoadStore { .. }) {
        op.events |= events::L1D_ACCESS | events::TLB_ACCESS;
        op.translation_latency = 1;
        total = 4 + (r & 3);
    }
    issue += (r >> 14) & 3;
    op.total_latency = total + issue;
    op.issue_latency = issue;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// X<n> = 0x1000 * (n + 1), SP = 0x8000_0000, NZCV = Z, VA = PA +
    /// 0x4000_0000 below 0x1_0000_0000 and unmapped above.
    struct Fake;

    impl Registers for Fake {
        fn x(&mut self, n: u8) -> u64 {
            0x1000 * (u64::from(n) + 1)
        }
        fn sp(&mut self) -> u64 {
            0x8000_0000
        }
    }

    impl Vcpu for Fake {
        fn nzcv(&mut self) -> u8 {
            0b0100
        }
        fn translate(&mut self, va: u64) -> Option<u64> {
            (va < 1 << 32).then(|| va + 0x4000_0000)
        }
    }

    fn cx(el: El) -> Context {
        Context {
            pc: 0x40_0000,
            el,
            contextidr_el1: 77,
            physical_count: 123,
            random: 0,
        }
    }

    #[test]
    fn a_load_has_its_va_pa_and_core_events() {
        let op = capture(0xf940_0841, &cx(El::El0), &mut Fake); // ldr x1, [x2, #16]
        assert_eq!(
            (op.data_va, op.data_pa, op.data_pa_valid),
            (0x3010, 0x4000_3010, true)
        );
        assert_eq!(
            (op.pc, op.el, op.size, op.contextidr_el1, op.physical_count),
            (0x40_0000, El::El0, 8, 77, 123)
        );
        assert_eq!(
            op.events,
            events::RETIRED | events::L1D_ACCESS | events::TLB_ACCESS
        );
        assert!(!op.no_data_address);
    }

    #[test]
    fn an_unmapped_address_has_no_pa_and_a_line_crossing_is_misaligned() {
        struct High;
        impl Registers for High {
            fn x(&mut self, _: u8) -> u64 {
                0x2_0000_003c
            }
            fn sp(&mut self) -> u64 {
                0
            }
        }
        impl Vcpu for High {
            fn nzcv(&mut self) -> u8 {
                0
            }
            fn translate(&mut self, _: u64) -> Option<u64> {
                None
            }
        }
        let op = capture(0xf940_0041, &cx(El::El1), &mut High); // ldr x1, [x2]
        assert_eq!((op.data_va, op.data_pa_valid), (0x2_0000_003c, false));
        assert_ne!(op.events & events::MISALIGNED, 0);
    }

    #[test]
    fn branches_go_where_the_next_instruction_is() {
        let pc = 0x40_0000;
        // b.ne .+20: taken to its target, or on to pc + 4.
        assert_eq!(
            branch_outcome(0x5400_00a1, pc, pc + 20),
            Some((pc + 20, true))
        );
        assert_eq!(
            branch_outcome(0x5400_00a1, pc, pc + 4),
            Some((pc + 20, false))
        );
        // Neither: an exception came first; no guess.
        assert_eq!(branch_outcome(0x5400_00a1, pc, 0xffff_8000_0000_0800), None);
        // b .+8 is never not taken.
        assert_eq!(branch_outcome(0x1400_0002, pc, pc + 4), None);
        // ret and eret go where execution went.
        assert_eq!(
            branch_outcome(0xd65f_03c0, pc, 0x1234),
            Some((0x1234, true))
        );
        assert_eq!(
            branch_outcome(0xd69f_03e0, pc, 0xffff_0000_1234),
            Some((0xffff_0000_1234, true))
        );
        // Not a branch.
        assert_eq!(branch_outcome(0xf940_0841, pc, pc + 4), None);
        let mut op = capture(0x5400_00a1, &cx(El::El0), &mut Fake);
        assert!(complete_branch(&mut op, 0x5400_00a1, pc + 4));
        assert_eq!(op.target, pc + 20);
        assert_ne!(op.events & events::NOT_TAKEN, 0);
    }

    #[test]
    fn a_failed_select_is_not_taken() {
        // csel x0, x1, x2, lt with NZCV = Z: N == V, so LT fails.
        let op = capture(0x9a82_b020, &cx(El::El0), &mut Fake);
        assert_ne!(op.events & events::NOT_TAKEN, 0);
        // fcsel d0, d1, d2, eq: holds.
        let op = capture(0x1e62_0c20, &cx(El::El0), &mut Fake);
        assert_eq!(op.events & events::NOT_TAKEN, 0);
    }
}
