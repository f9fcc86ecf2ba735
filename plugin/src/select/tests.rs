use super::*;

const ADD_X2: u32 = 0x9100_0442; // add x2, x2, #1
const ADD_X3: u32 = 0x9100_0463; // add x3, x3, #1
const LDR_X1_X2: u32 = 0xf940_0841; // ldr x1, [x2, #16]
const CMP_X0: u32 = 0xf100_001f; // cmp x0, #0
const CSEL: u32 = 0x9a82_0020; // csel x0, x1, x2, eq
const B_16: u32 = 0x1400_0004; // b .+16
const ERET: u32 = 0xd69f_03e0;

/// The backend: a published state, the operations handed to it, and
/// whether its ring is full.
#[derive(Default)]
struct Ring {
    state: SamplingState,
    pushed: Vec<(SampledOp, u64)>,
    full: bool,
}

impl Backend for Ring {
    fn state(&self) -> SamplingState {
        self.state
    }
    fn push(&mut self, op: &SampledOp, counted: u64) -> bool {
        if self.full {
            return false;
        }
        self.pushed.push((*op, counted));
        true
    }
}

/// X<n> = `base` + 0x100 * n, at `el`, all mapped one to one.
struct Fake {
    base: u64,
    el: u8,
}

impl Registers for Fake {
    fn x(&mut self, n: u8) -> u64 {
        self.base + 0x100 * u64::from(n)
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
        Some(va)
    }
}

impl Cpu for Fake {
    fn cpsr(&mut self) -> u64 {
        u64::from(self.el) << 2
    }
    fn cntfrq(&mut self) -> Option<u64> {
        Some(62_500_000)
    }
    fn contextidr_el1(&mut self) -> Option<u32> {
        Some(7)
    }
    fn physical_count(&self, _freq: u64) -> u64 {
        1000
    }
}

fn at_el(el: u8) -> Fake {
    Fake { base: 0x1_0000, el }
}

/// Profiling at EL0 (and EL1 with `el1`), an interval of 1024.
fn ring(els: u8) -> Ring {
    Ring {
        state: SamplingState {
            interval: 1024,
            enabled_els: els,
            ..SamplingState::default()
        },
        ..Ring::default()
    }
}

/// A TB of `code` at 0x40_0000.
fn tb(code: &[u32]) -> Box<[Insn]> {
    Insn::tb(code.iter().zip(0..).map(|(&e, i)| (0x40_0000 + 4 * i, e)))
}

#[test]
fn an_instruction_has_its_own_callback_when_the_tb_wrote_what_it_reads() {
    let own = |code: &[u32]| -> Vec<bool> { tb(code).iter().map(|i| i.own).collect() };
    let rows: &[(&[u32], &[bool])] = &[
        // The load's base is the TB's start's: the TB's callback takes it.
        (&[LDR_X1_X2, ADD_X2], &[false, false]),
        // Written before it: it needs the registers at the load.
        (&[ADD_X2, LDR_X1_X2], &[false, true]),
        // Another register written: still the TB's start's.
        (&[ADD_X3, LDR_X1_X2], &[false, false]),
        // A select after flags were set reads them at itself.
        (&[CSEL, CMP_X0, CSEL], &[false, false, true]),
    ];
    for &(code, want) in rows {
        assert_eq!(own(code), want, "{code:x?}");
    }
    assert!(reads_registers(LDR_X1_X2) && reads_registers(CSEL));
    assert!(!reads_registers(ADD_X2) && !reads_registers(B_16));
}

#[test]
fn a_selection_in_the_tb_is_taken_and_the_period_reloaded() {
    let code = tb(&[ADD_X3, ADD_X3, LDR_X1_X2, ADD_X3]);
    let (mut s, mut r) = (Selector::new(0, false), ring(1));
    let entry = count::select_imm(2, code.len());
    let next = s.on_tb(entry, &code, &mut r, Some(&mut at_el(0)));
    // INTERVAL, plus one: COUNT reloads and counts down through zero.
    assert_eq!(next, entry + 1025);
    let [(op, counted)] = r.pushed.as_slice() else {
        panic!("{:?}", r.pushed)
    };
    assert_eq!((op.pc, op.data_va, op.el), (0x40_0008, 0x1_0210, El::El0));
    assert_eq!((op.contextidr_el1, *counted), (7, 1025));
    assert_eq!((s.counts().selected, s.counts().sampled), (1, 1));
}

#[test]
fn an_instruction_with_its_own_callback_is_left_to_it() {
    let code = tb(&[ADD_X2, LDR_X1_X2]);
    assert!(code[1].own);
    let (mut s, mut r) = (Selector::new(0, false), ring(1));
    let entry = count::select_imm(1, 2);
    assert_eq!(s.on_tb(entry, &code, &mut r, Some(&mut at_el(0))), entry);
    assert!(r.pushed.is_empty());
    // At the load, X2 is what the add left.
    let mut cpu = Fake {
        base: 0x2_0000,
        el: 0,
    };
    let next = s.on_insn(entry, &code[1], &mut r, Some(&mut cpu));
    assert_eq!(next, entry + 1025);
    assert_eq!(r.pushed[0].0.data_va, 0x2_0210);
}

#[test]
fn what_a_selection_does_depends_on_the_state_and_the_el() {
    struct Row {
        els: u8,
        el: u8,
        full: bool,
        /// sampled, lost, other_el, idle
        counts: [u64; 4],
    }
    let rows = [
        Row {
            els: 1,
            el: 0,
            full: false,
            counts: [1, 0, 0, 0],
        },
        Row {
            els: 1,
            el: 0,
            full: true,
            counts: [0, 1, 0, 0],
        },
        // Every EL counts; only the profiled ones record.
        Row {
            els: 1,
            el: 1,
            full: false,
            counts: [0, 0, 1, 0],
        },
        Row {
            els: 0b11,
            el: 1,
            full: false,
            counts: [1, 0, 0, 0],
        },
        // Nothing profiled: a look at the state, RECHECK operations on.
        Row {
            els: 0,
            el: 0,
            full: false,
            counts: [0, 0, 0, 1],
        },
    ];
    let code = tb(&[LDR_X1_X2]);
    for row in rows {
        let mut r = ring(row.els);
        r.full = row.full;
        let mut s = Selector::new(0, false);
        let entry = count::select_imm(0, 1);
        let next = s.on_tb(entry, &code, &mut r, Some(&mut at_el(row.el)));
        let c = s.counts();
        assert_eq!(
            [c.sampled, c.lost, c.other_el, c.idle],
            row.counts,
            "els {:#b} at EL{}, full {}",
            row.els,
            row.el,
            row.full
        );
        let period = if row.els == 0 { count::RECHECK } else { 1025 };
        assert_eq!(next, entry + period);
    }
}

#[test]
fn a_missed_selection_reloads_from_the_tbs_start() {
    let code = tb(&[ADD_X3, ADD_X3, ADD_X3]);
    let (mut s, mut r) = (Selector::new(0, false), ring(1));
    // A vCPU's first TB: the counter ran out before it.
    let entry = count::BIAS.wrapping_add(count::tb_add(3));
    let next = s.on_tb(entry, &code, &mut r, Some(&mut at_el(0)));
    assert_eq!(next, count::resynced(1025, 3));
    assert_eq!((s.counts().resyncs, s.counts().selected), (1, 0));
    assert!(r.pushed.is_empty());
}

#[test]
fn a_branch_at_the_tbs_end_is_completed_by_the_next_tb() {
    struct Row {
        branch: u32,
        /// The next TB's first instruction's address.
        next_pc: u64,
        /// Its EL.
        el: u8,
        /// The recorded target, if recorded.
        target: Option<u64>,
    }
    let rows = [
        Row {
            branch: B_16,
            next_pc: 0x40_0014,
            el: 0,
            target: Some(0x40_0014),
        },
        // An exception came between: the vector is not the target.
        Row {
            branch: B_16,
            next_pc: 0xffff_8000_0000_0400,
            el: 1,
            target: None,
        },
        // ERET changes EL by itself: where it went is its target.
        Row {
            branch: ERET,
            next_pc: 0x40_2000,
            el: 1,
            target: Some(0x40_2000),
        },
    ];
    for row in rows {
        let code = tb(&[ADD_X3, row.branch]);
        let (mut s, mut r) = (Selector::new(0, false), ring(0b11));
        let entry = count::select_imm(1, 2);
        let waiting = s.on_tb(entry, &code, &mut r, Some(&mut at_el(0)));
        assert_eq!(waiting, count::WAITING);
        assert!(r.pushed.is_empty());
        let next_tb = Insn::tb([(row.next_pc, ADD_X3), (row.next_pc + 4, ADD_X3)]);
        let at_next = count::WAITING.wrapping_add(count::tb_add(2));
        let next = s.on_tb(at_next, &next_tb, &mut r, Some(&mut at_el(row.el)));
        // The entry the selection left, less the next TB's instructions.
        assert_eq!(next, (entry + 1025).wrapping_add(count::tb_add(2)));
        assert_eq!(r.pushed.first().map(|(op, _)| op.target), row.target);
        assert_eq!(s.counts().branch_lost, u64::from(row.target.is_none()));
    }
}

#[test]
fn a_branch_before_the_tbs_end_is_lost() {
    let code = tb(&[B_16, ADD_X3]);
    let (mut s, mut r) = (Selector::new(0, false), ring(1));
    let entry = count::select_imm(0, 2);
    assert_eq!(
        s.on_tb(entry, &code, &mut r, Some(&mut at_el(0))),
        entry + 1025
    );
    assert!(r.pushed.is_empty());
    assert_eq!(s.counts().branch_lost, 1);
}

#[test]
fn validation_compares_the_address_at_the_instruction() {
    let code = tb(&[LDR_X1_X2, ADD_X3]);
    for (base, differs) in [(0x1_0000, false), (0x3_0000, true)] {
        let (mut s, mut r) = (Selector::new(0, true), ring(1));
        let entry = count::select_imm(0, 2);
        let next = s.on_tb(entry, &code, &mut r, Some(&mut at_el(0)));
        // Another run of the TB (a lower counter) is not the one taken.
        assert_eq!(s.check(&code[0], next - 1, Some(&mut at_el(0))), None);
        let mut cpu = Fake { base, el: 0 };
        let d = s.check(&code[0], next, Some(&mut cpu));
        assert_eq!(
            d.map(|d| (d.va, d.now)),
            differs.then_some((0x1_0210, 0x3_0210))
        );
        assert_eq!(
            (s.counts().checked, s.counts().differed),
            (1, u64::from(differs))
        );
        // Checked once.
        assert_eq!(s.check(&code[0], next, Some(&mut cpu)), None);
        assert_eq!(s.counts().checked, 1);
    }
}

#[test]
fn only_the_first_differences_are_reported() {
    let code = tb(&[LDR_X1_X2]);
    let (mut s, mut r) = (Selector::new(0, true), ring(1));
    let mut entry = count::select_imm(0, 1);
    let mut reported = 0;
    for _ in 0..REPORTED + 5 {
        let next = s.on_tb(entry, &code, &mut r, Some(&mut at_el(0)));
        let mut cpu = Fake {
            base: 0x5_0000,
            el: 0,
        };
        reported += u64::from(s.check(&code[0], next, Some(&mut cpu)).is_some());
        entry = count::select_imm(0, 1);
    }
    assert_eq!((reported, s.counts().differed), (REPORTED, REPORTED + 5));
}

#[test]
fn each_vcpu_draws_its_own_random_values() {
    let (mut a, mut b) = (Selector::new(0, false), Selector::new(1, false));
    assert_ne!(a.random(), b.random());
    assert_ne!(Selector::new(0, false).rng, 0);
}
