//! A vCPU's selections, without QEMU: which instruction of a TB the
//! interval counter selects, what is taken for it and when, a sampled
//! branch completed by the next TB's address, and the counter reloaded
//! after a missed selection. `crate::qemu` reads the counter, calls in
//! and stores the entry returned; the backend and the registers are the
//! traits [`Backend`] and [`Cpu`].

use spe_protocol::a64::{self, Registers};
use spe_protocol::channel::ring::SamplingState;
use spe_protocol::op::{OpClass, SampledOp};
use spe_protocol::regs::El;

use crate::capture::{self, Context, Vcpu};
use crate::count;
use crate::timestamp::Timestamps;

/// CNTFRQ_EL0 when the guest's is unreadable or 0: QEMU's default.
const DEFAULT_FREQ: u64 = 1_000_000_000;

/// `validate=on`: the differences reported, so that a systematic one
/// does not flood QEMU's log.
const REPORTED: u64 = 10;

/// The backend's side of a vCPU.
pub trait Backend {
    /// The sampling state it last published.
    fn state(&self) -> SamplingState;
    /// Hands it `op` and the `counted` operations its period spanned;
    /// false if the ring was full (the operation is lost).
    fn push(&mut self, op: &SampledOp, counted: u64) -> bool;
}

/// What a selection reads of its vCPU besides what [`capture`] does.
pub trait Cpu: Vcpu {
    /// CPSR (PSTATE as QEMU gives it).
    fn cpsr(&mut self) -> u64;
    /// CNTFRQ_EL0, if QEMU has the register.
    fn cntfrq(&mut self) -> Option<u64>;
    /// CONTEXTIDR_EL1, if QEMU has the register.
    fn contextidr_el1(&mut self) -> Option<u32>;
    /// The physical count now at `freq` counts a second.
    fn physical_count(&self, freq: u64) -> u64;
}

fn el_of(cpsr: u64) -> Option<El> {
    El::from_u8((cpsr >> 2) as u8 & 3)
}

/// One instruction of a translated TB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    pub pc: u64,
    pub encoding: u32,
    /// It has its own callback: its record needs registers as they are
    /// just before it runs, which an earlier instruction of its TB may
    /// have written (a load or store's address, a select's flags).
    pub own: bool,
}

impl Insn {
    /// A TB's instructions from their addresses and encodings, in order,
    /// each told whether it needs its own callback given what the ones
    /// before it may write ([`a64::writes`]).
    pub fn tb(code: impl IntoIterator<Item = (u64, u32)>) -> Box<[Insn]> {
        let mut written = 0;
        code.into_iter()
            .map(|(pc, encoding)| {
                let own = needs_own_callback(encoding, written);
                written |= a64::writes(encoding);
                Insn { pc, encoding, own }
            })
            .collect()
    }

    /// Where it is kept: the same `Insn` for its TB's callback and its
    /// own, for as long as the TB lives.
    fn id(&self) -> usize {
        std::ptr::from_ref(self) as usize
    }
}

/// A load, store or conditional select: its record reads registers.
pub fn reads_registers(encoding: u32) -> bool {
    matches!(
        a64::classify(encoding).class,
        OpClass::LoadStore { .. }
            | OpClass::Other {
                cond_select: true,
                ..
            }
    )
}

/// Without its own callback, the TB's takes the record from the
/// registers at the TB's start, which are then the same: no conditional
/// branch (which ends TCG's basic block and makes it store every guest
/// register it holds) at that instruction.
fn needs_own_callback(encoding: u32, written: u64) -> bool {
    match a64::classify(encoding).class {
        OpClass::LoadStore { .. } => {
            a64::data_address(encoding).is_some_and(|a| a64::address_reads(&a) & written != 0)
        }
        OpClass::Other {
            cond_select: true, ..
        } => written & a64::regset::NZCV != 0,
        _ => false,
    }
}

/// What the selections did, for the summary at exit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Selections (the instruction callback fired).
    pub selected: u64,
    /// Selections while no EL sampled on the vCPU (a look at the state).
    pub idle: u64,
    /// Selections at an EL where profiling was off.
    pub other_el: u64,
    /// Counters reloaded after a missed selection.
    pub resyncs: u64,
    /// Sampled branches an exception came after, before their outcome.
    pub branch_lost: u64,
    /// Operations handed to the backend.
    pub sampled: u64,
    /// Operations lost to a full ring.
    pub lost: u64,
    /// `validate=on`: addresses taken at a TB's start checked at their
    /// instruction, and those that differed.
    pub checked: u64,
    pub differed: u64,
}

impl std::ops::AddAssign for Counts {
    fn add_assign(&mut self, o: Counts) {
        self.selected += o.selected;
        self.idle += o.idle;
        self.other_el += o.other_el;
        self.resyncs += o.resyncs;
        self.branch_lost += o.branch_lost;
        self.sampled += o.sampled;
        self.lost += o.lost;
        self.checked += o.checked;
        self.differed += o.differed;
    }
}

/// What a selection does with its operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Take {
    /// Build its record now, from the registers now.
    Now,
    /// A branch at the end of its TB: build it now, complete it with the
    /// next TB's address.
    AtNextTb,
    /// A branch before its TB's end (QEMU ends A64 TBs at branches, so
    /// none is expected): nothing tells where it went; reload only.
    Lost,
}

/// A sampled branch waiting for the next TB's address (the counter is
/// `count::WAITING` until then).
#[derive(Clone, Copy, Debug)]
struct WaitingBranch {
    op: SampledOp,
    encoding: u32,
    /// The operations its period spanned.
    period: u64,
    /// The counter's entry its selection left.
    entry: u64,
}

/// `validate=on`: a load or store selected at its TB's start, to check
/// at the instruction ([`Selector::check`]).
#[derive(Clone, Copy, Debug)]
struct Expect {
    /// Its [`Insn::id`].
    at: usize,
    /// The VA its record has.
    va: u64,
    /// The counter after the selection: the same at the instruction in
    /// the same run of the TB, lower in any later one.
    entry: u64,
}

/// An address taken at a TB's start that differed at its instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Differed {
    /// The instruction's [`Insn`] address.
    pub at: usize,
    /// The VA its record has.
    pub va: u64,
    /// The VA from the registers at the instruction.
    pub now: u64,
}

/// One vCPU's selection state.
#[derive(Debug)]
pub struct Selector {
    validate: bool,
    rng: u32,
    /// CNTFRQ_EL0, read at the vCPU's first sample.
    freq: Option<u64>,
    branch: Option<WaitingBranch>,
    /// The operations counted so far, as the selections tell (each adds
    /// the period loaded before it), for the timestamps between clock
    /// readings.
    ops: u64,
    loaded: u64,
    timestamps: Timestamps,
    /// The last selection's EL: a change means an exception came between,
    /// and time the counter did not see.
    last_el: Option<El>,
    counts: Counts,
    expect: Option<Expect>,
}

impl Selector {
    /// vCPU `vcpu`'s, with `validate=on` or not.
    pub fn new(vcpu: u32, validate: bool) -> Selector {
        Selector {
            validate,
            // A different, nonzero xorshift seed per vCPU.
            rng: 0x9e37_79b9 ^ vcpu.wrapping_mul(0x85eb_ca6b) | 1,
            freq: None,
            branch: None,
            ops: 0,
            loaded: 0,
            timestamps: Timestamps::new(),
            last_el: None,
            counts: Counts::default(),
            expect: None,
        }
    }

    pub fn counts(&self) -> Counts {
        self.counts
    }

    /// The vCPU idled: time went on without counting.
    pub fn idled(&mut self) {
        self.timestamps.stale();
    }

    /// The TB's callback, when its start left the counter at `entry`, at
    /// most `count::BIAS`: a selection in the TB (taken here unless its
    /// instruction has its own callback), the TB after a sampled branch,
    /// or a missed selection. Returns the counter's new entry.
    pub fn on_tb(
        &mut self,
        mut entry: u64,
        tb: &[Insn],
        feed: &mut impl Backend,
        mut cpu: Option<&mut impl Cpu>,
    ) -> u64 {
        let n = tb.len();
        if entry < count::resync_below(n) {
            match self.complete_branch(tb[0].pc, feed, cpu.as_deref_mut()) {
                Some(left) => entry = left.wrapping_add(count::tb_add(n)),
                None => return self.resync(n, feed),
            }
        }
        // Several selections in one TB only with a period shorter than it.
        while let Some(k) = count::selected_index(entry, n) {
            let insn = &tb[k];
            if insn.own {
                break; // its callback takes it, and reloads
            }
            let take = match a64::classify(insn.encoding).class {
                OpClass::Branch { .. } if k + 1 == n => Take::AtNextTb,
                OpClass::Branch { .. } => Take::Lost,
                _ => Take::Now,
            };
            entry = self.select(entry, insn, take, feed, cpu.as_deref_mut());
        }
        entry
    }

    /// The callback of `insn`, which has its own, when it is selected
    /// with the counter at `entry`. Returns the counter's new entry.
    pub fn on_insn(
        &mut self,
        entry: u64,
        insn: &Insn,
        feed: &mut impl Backend,
        cpu: Option<&mut impl Cpu>,
    ) -> u64 {
        self.select(entry, insn, Take::Now, feed, cpu)
    }

    /// `validate=on`: `insn`, a load or store without its own callback,
    /// about to run with the counter at `entry`. If it is the one
    /// selected at its TB's start, its address from the registers now
    /// must be the one its record has: what `a64::writes` promised.
    /// Returns a difference to report (the first few).
    pub fn check(
        &mut self,
        insn: &Insn,
        entry: u64,
        regs: Option<&mut impl Registers>,
    ) -> Option<Differed> {
        let expect = self
            .expect
            .filter(|e| e.at == insn.id() && e.entry == entry)?;
        self.expect = None;
        let (Some(addr), Some(regs)) = (a64::data_address(insn.encoding), regs) else {
            return None;
        };
        let now = addr.eval(insn.pc, regs);
        self.counts.checked += 1;
        if now == expect.va {
            return None;
        }
        self.counts.differed += 1;
        (self.counts.differed <= REPORTED).then_some(Differed {
            at: expect.at,
            va: expect.va,
            now,
        })
    }

    /// xorshift32: the latencies' and RND's random values.
    fn random(&mut self) -> u32 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.rng = x;
        x
    }

    /// The period to load: the next look at the state if nothing samples.
    fn period(&mut self, state: &SamplingState) -> u64 {
        if state.enabled_els == 0 {
            count::RECHECK
        } else {
            count::period(state, || self.random())
        }
    }

    /// The selection of `insn` with the counter at `entry`: reloads the
    /// counter and builds the operation's record if the guest profiles
    /// at the EL it runs at. Returns the counter's new entry.
    fn select(
        &mut self,
        entry: u64,
        insn: &Insn,
        take: Take,
        feed: &mut impl Backend,
        cpu: Option<&mut impl Cpu>,
    ) -> u64 {
        self.counts.selected += 1;
        if take == Take::Lost {
            self.counts.branch_lost += 1;
        }
        self.ops = self.ops.wrapping_add(self.loaded);
        let state = feed.state();
        let period = self.period(&state);
        self.loaded = period;
        let next = entry.wrapping_add(period);
        if state.enabled_els == 0 {
            self.counts.idle += 1;
            return next;
        }
        let random = self.random();
        let Some(cpu) = cpu else {
            return next;
        };
        let el = el_of(cpu.cpsr()).unwrap_or(El::El0);
        if self.last_el.replace(el) != Some(el) {
            self.timestamps.stale();
        }
        // Every EL counts; a selection where profiling is off is dropped.
        if !state.enabled_at(el as u8) {
            self.counts.other_el += 1;
            return next;
        }
        // As the guest's firmware set it, read once per vCPU.
        let freq = *self
            .freq
            .get_or_insert_with(|| cpu.cntfrq().filter(|&f| f != 0).unwrap_or(DEFAULT_FREQ));
        let contextidr_el1 = cpu.contextidr_el1().unwrap_or(0);
        let cx = Context {
            pc: insn.pc,
            el,
            contextidr_el1,
            physical_count: self.timestamps.next(self.ops, || cpu.physical_count(freq)),
            random,
        };
        let op = capture::capture(insn.encoding, &cx, cpu);
        if self.validate && !insn.own && matches!(op.class, OpClass::LoadStore { .. }) {
            self.expect = (!op.no_data_address).then_some(Expect {
                at: insn.id(),
                va: op.data_va,
                entry: next,
            });
        }
        match take {
            Take::Now => self.push(feed, &op, period),
            Take::AtNextTb => {
                self.branch = Some(WaitingBranch {
                    op,
                    encoding: insn.encoding,
                    period,
                    entry: next,
                });
                return count::WAITING;
            }
            Take::Lost => {}
        }
        next
    }

    fn push(&mut self, feed: &mut impl Backend, op: &SampledOp, period: u64) {
        if feed.push(op, period) {
            self.counts.sampled += 1;
        } else {
            self.counts.lost += 1;
        }
    }

    /// A missed selection (the TB before stopped early): the counter's
    /// entry reloaded from the start of this TB of `n` instructions.
    fn resync(&mut self, n: usize, feed: &impl Backend) -> u64 {
        self.counts.resyncs += 1;
        // The TB before stopped early: an exception, whose time the
        // counter did not see.
        self.timestamps.stale();
        self.ops = self.ops.wrapping_add(self.loaded);
        self.loaded = self.period(&feed.state());
        count::resynced(self.loaded, n)
    }

    /// The TB after a sampled branch starts at `pc`: where the branch
    /// went. Returns the counter's entry the branch's selection left, or
    /// `None` if no branch waited. An exception taken before this TB (a
    /// fault in the branch's TB, or an interrupt at its end) shows as a
    /// direct branch going neither way, or as a change of EL but by ERET:
    /// the record is dropped rather than given the vector.
    fn complete_branch(
        &mut self,
        pc: u64,
        feed: &mut impl Backend,
        cpu: Option<&mut impl Cpu>,
    ) -> Option<u64> {
        let WaitingBranch {
            mut op,
            encoding,
            period,
            entry,
        } = self.branch.take()?;
        let el = cpu.and_then(|c| el_of(c.cpsr()));
        let is_eret = a64::branch(encoding).is_some_and(|b| b.target == a64::Target::Unknown);
        if (el == Some(op.el) || is_eret) && capture::complete_branch(&mut op, encoding, pc) {
            self.push(feed, &op, period);
        } else {
            self.counts.branch_lost += 1;
        }
        Some(entry)
    }
}

#[cfg(test)]
mod tests;
