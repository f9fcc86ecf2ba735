//! Sampling: the interval counter (`SPEToCollectSample()`), the filters
//! (`SPECollectRecord()`), and record construction (`SPEConstructRecord()`)
//! from one [`SampledOp`].

use super::enable::TimeStamp;
use super::unpredictable as cu;
use super::{SampleOutcome, Spu};
use spe_protocol::channel::ring::{flags, SamplingState};
use spe_protocol::op::{OpClass, SampledOp};
use spe_protocol::packet::{self, events, AddressIndex, CounterIndex, OpType, Packet, PayloadLen};
use spe_protocol::regs::*;
use vm_memory::{GuestAddress, GuestMemory, Permissions};

/// `SPEOpType`, derived from an operation's class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SpeOpType {
    Load,
    Store,
    LoadAtomic,
    Branch,
    Other,
}

/// An "other" operation's payload in the SVE form (`SPEConstructClass()`:
/// `'0':evl:'1':pred:fp:'0'`).
fn is_sve_other(subclass: u8) -> bool {
    subclass & packet::op::OTHER_SVE_SME_MASK == packet::op::OTHER_SVE
}

/// The operation-type payload bits that make a load/store an atomic with
/// return (extended form with AT set and the store bit clear).
fn is_load_atomic(store: bool, subclass: u8) -> bool {
    !store
        && subclass & packet::op::LDST_EXT_MASK == packet::op::LDST_EXT
        && subclass & packet::op::LDST_AT != 0
}

impl SpeOpType {
    pub fn of(class: OpClass) -> SpeOpType {
        match class {
            OpClass::Other { .. } => SpeOpType::Other,
            OpClass::Branch { .. } => SpeOpType::Branch,
            OpClass::LoadStore {
                store, subclass, ..
            } if is_load_atomic(store, subclass) => SpeOpType::LoadAtomic,
            OpClass::LoadStore { store: true, .. } => SpeOpType::Store,
            OpClass::LoadStore { store: false, .. } => SpeOpType::Load,
        }
    }
}

impl Spu {
    /// `SPEResetSampleCounter()`.
    pub(crate) fn spe_reset_sample_counter(&mut self) {
        let interval = PMSIRR_EL1::INTERVAL.get(self.regs.pmsirr);
        let low = if PMSIRR_EL1::RND.is_set(self.regs.pmsirr) && !self.features.spe_ernd() {
            u64::from(self.random_byte())
        } else {
            0
        };
        self.regs.pmsicr = PMSICR_EL1::COUNT.set(self.regs.pmsicr, interval << 8 | low);
    }

    /// `SPEToCollectSample()`: counts one operation down; true when it is
    /// to be sampled.
    pub(crate) fn spe_to_collect_sample(&mut self) -> bool {
        let ernd = PMSIRR_EL1::RND.is_set(self.regs.pmsirr) && self.features.spe_ernd();
        let count = PMSICR_EL1::COUNT.get(self.regs.pmsicr);
        if count == 0 {
            self.spe_reset_sample_counter();
        } else {
            let count = count - 1;
            self.regs.pmsicr = PMSICR_EL1::COUNT.set(self.regs.pmsicr, count);
            if count == 0 {
                if ernd {
                    let e = u64::from(self.random_byte());
                    self.regs.pmsicr = PMSICR_EL1::ECOUNT.set(self.regs.pmsicr, e);
                    return e == 0;
                }
                return true;
            }
        }
        let ecount = PMSICR_EL1::ECOUNT.get(self.regs.pmsicr);
        if ernd && ecount != 0 {
            let ecount = ecount - 1;
            self.regs.pmsicr = PMSICR_EL1::ECOUNT.set(self.regs.pmsicr, ecount);
            if ecount == 0 {
                return true;
            }
        }
        false
    }

    /// PMSICR_EL1.COUNT as a front end's own interval counter left it
    /// (the operations until it selects the next one).
    pub fn set_interval_count(&mut self, count: u32) {
        self.regs.pmsicr = PMSICR_EL1::COUNT.set(self.regs.pmsicr, u64::from(count));
    }

    /// Advances the interval counter by `n` operations as `n` calls of
    /// `SPEToCollectSample()` would, discarding their selections: a front
    /// end that counts operations itself hands them back here (the ones it
    /// selected reach [`Spu::sample`]). Returns how many of the `n` the
    /// counter selected. The cost is a few steps per reload, not per
    /// operation. Exact (same PMSICR, same random stream) without RND or
    /// for `n` up to [`Spu::SKIP_EXACT`]; beyond that, with RND, whole
    /// periods are skipped at their mean length without drawing their
    /// random values, which no one can observe, so that a count handed
    /// back by QEMU (any u64) costs bounded time.
    pub fn skip_operations(&mut self, mut n: u64) -> u64 {
        self.stats.counted = self.stats.counted.wrapping_add(n);
        let mut selected = 0;
        let rnd = PMSIRR_EL1::RND.is_set(self.regs.pmsirr);
        let ernd = rnd && self.features.spe_ernd();
        let reload = PMSIRR_EL1::INTERVAL.get(self.regs.pmsirr) << 8;
        while n > 0 {
            let count = PMSICR_EL1::COUNT.get(self.regs.pmsicr);
            let ecount = PMSICR_EL1::ECOUNT.get(self.regs.pmsicr);
            let ecount_pending = ernd && ecount != 0;
            if count > 1 && (!ecount_pending || ecount > 1) {
                // Decrements that do not reach zero, of COUNT and, when a
                // selection is being delayed, of ECOUNT.
                let mut k = n.min(count - 1);
                if ecount_pending {
                    k = k.min(ecount - 1);
                    let e = ecount - k;
                    self.regs.pmsicr = PMSICR_EL1::ECOUNT.set(self.regs.pmsicr, e);
                }
                self.regs.pmsicr = PMSICR_EL1::COUNT.set(self.regs.pmsicr, count - k);
                n -= k;
                continue;
            }
            if count == 0 {
                let random_reload = rnd && !ernd;
                if reload == 0 && !random_reload && !ecount_pending {
                    // COUNT reloads to zero forever: nothing changes.
                    break;
                }
                // From zero, each period is one reload then as many
                // decrements, the last one selecting.
                let period = if !rnd {
                    Some(reload + 1)
                } else if n > Self::SKIP_EXACT {
                    Some(reload + 1 + if random_reload { 128 } else { 0 })
                } else {
                    None
                };
                if let Some(p) = period {
                    let keep = if rnd { Self::SKIP_EXACT } else { 0 };
                    let periods = (n - keep) / p;
                    n -= periods * p;
                    if reload > 0 || random_reload {
                        selected += periods;
                    }
                    if n == 0 {
                        break;
                    }
                }
            }
            // A reload, a decrement to zero, or ECOUNT reaching zero.
            selected += u64::from(self.spe_to_collect_sample());
            n -= 1;
        }
        selected
    }

    /// Operations [`Spu::skip_operations`] counts exactly with RND.
    pub const SKIP_EXACT: u64 = 1 << 20;

    /// What a front end that counts operations itself needs from this
    /// SPU ([`SamplingState`]).
    pub fn sampling_state(&self) -> SamplingState {
        let mut enabled_els = 0;
        for el in [El::El0, El::El1, El::El2] {
            if self.statistical_profiling_enabled(el) {
                enabled_els |= 1 << el as u8;
            }
        }
        let r = &self.regs;
        let mut f = 0;
        if PMSIRR_EL1::RND.is_set(r.pmsirr) {
            f |= flags::RND;
            if self.features.spe_ernd() {
                f |= flags::ERND;
            }
        }
        if self.choices.operations == cu::Operations::MicroOps {
            f |= flags::UOPS;
        }
        SamplingState {
            interval: (PMSIRR_EL1::INTERVAL.get(r.pmsirr) << 8) as u32,
            pmsicr_count: PMSICR_EL1::COUNT.get(r.pmsicr) as u32,
            enabled_els,
            flags: f,
            pmsicr_ecount: PMSICR_EL1::ECOUNT.get(r.pmsicr) as u8,
        }
    }

    /// The Events bits the record carries (`SPECompleteSample()`): the
    /// operation's architectural events, with NOT-TAKEN (bit 6) set for a
    /// conditional operation whose condition failed.
    fn sample_events(&mut self, op: &SampledOp) -> u64 {
        let conditional = match op.class {
            OpClass::Other { cond_select, .. } => cond_select,
            OpClass::Branch { conditional, .. } => conditional,
            OpClass::LoadStore { .. } => false,
        };
        let failed = conditional && op.events & events::NOT_TAKEN != 0;
        let v1p4 = self.features.pms_ver >= PmsVer::V1p4;
        let width = cu::events_payload_size(v1p4, self.features.sve) * 8;
        let arch = !events::IMPDEF_MASK & (u64::MAX >> (64 - width));
        let mut e = op.events & arch & !events::NOT_TAKEN;
        if failed {
            e |= events::NOT_TAKEN;
        }
        if let OpClass::Branch {
            conditional,
            indirect,
        } = op.class
        {
            if self
                .predictor
                .mispredicted(op.pc, conditional, indirect, !failed, op.target)
            {
                e |= events::MISPRED;
            }
        }
        e
    }

    /// `ConstrainUnpredictableBool(Unpredictable_BADPMSFCR)`.
    fn badpmsfcr_rejects(&self) -> bool {
        self.choices.badpmsfcr == cu::BadPmsfcr::Reject
    }

    /// `SPEFilterByEvents()`: (rejected by PMSEVFR, rejected by PMSNEVFR).
    pub(crate) fn spe_filter_by_events(&self, ev: u64) -> (bool, bool) {
        let mask = self.event_filter_mask();
        let e = ev & mask;
        let r = &self.regs;
        let evfr = r.pmsevfr & mask;
        let mut rejected_event = false;
        if PMSFCR_EL1::FE.is_set(r.pmsfcr) {
            rejected_event = if evfr != 0 {
                !e & evfr != 0
            } else {
                self.badpmsfcr_rejects()
            };
        }
        let mut rejected_nevent = false;
        if self.features.spe_fne() {
            let nevfr = r.pmsnevfr & mask;
            if PMSFCR_EL1::FNE.is_set(r.pmsfcr) {
                rejected_nevent = if nevfr != 0 {
                    e & nevfr != 0
                } else {
                    self.badpmsfcr_rejects()
                };
            }
            if PMSFCR_EL1::FE.is_set(r.pmsfcr)
                && PMSFCR_EL1::FNE.is_set(r.pmsfcr)
                && r.pmsevfr & r.pmsnevfr & mask != 0
            {
                rejected_event = self.badpmsfcr_rejects();
                rejected_nevent = self.badpmsfcr_rejects();
            }
        }
        (rejected_event, rejected_nevent)
    }

    /// `SPEFilterByType()`.
    pub(crate) fn spe_filter_by_type(&self, class: OpClass) -> bool {
        const B: u64 = 1;
        const LD: u64 = 2;
        const ST: u64 = 4;
        const FP: u64 = 8;
        const SIMD: u64 = 16;
        let op_type = SpeOpType::of(class);
        let mut flags = 0;
        match op_type {
            SpeOpType::Branch => flags |= B,
            SpeOpType::Load => flags |= LD,
            SpeOpType::Store => flags |= ST,
            SpeOpType::LoadAtomic => flags |= LD | ST,
            SpeOpType::Other => {}
        }
        match class {
            // SPESampleSIMDFPLoadStore(): is_simd = !scalar, and scalar
            // ones are floating point.
            OpClass::LoadStore {
                subclass, vector, ..
            } if subclass & packet::op::LDST_SUBCLASS_MASK == packet::op::LDST_SIMD_FP => {
                flags |= if vector { SIMD } else { FP };
            }
            // SPESampleOpSVEOther(): FP only; its bit 2 is "predicated".
            OpClass::Other { subclass, .. }
                if is_sve_other(subclass) && subclass & packet::op::OTHER_FP != 0 =>
            {
                flags |= FP;
            }
            OpClass::Other { subclass, .. } if is_sve_other(subclass) => {}
            OpClass::Other { subclass, .. } => {
                if subclass & packet::op::OTHER_FP != 0 {
                    flags |= FP;
                }
                if subclass & packet::op::OTHER_ASE != 0 {
                    flags |= SIMD;
                }
            }
            _ => {}
        }
        let fcr = self.regs.pmsfcr;
        let mut ctrl = PMSFCR_EL1::TYPE.get(fcr) & 0b111;
        let mut mask = 0;
        if self.features.spe_eft() {
            ctrl = PMSFCR_EL1::TYPE.get(fcr);
            mask = PMSFCR_EL1::TYPEM.get(fcr);
        }
        let ctrl_or = ctrl & !mask;
        let ctrl_and = ctrl & mask;
        let is_op = (ctrl_or == 0 || flags & ctrl_or != 0) && flags & mask == ctrl_and;
        if PMSFCR_EL1::FT.is_set(fcr) {
            if self.features.spe_eft() || ctrl != 0 {
                return !is_op;
            }
            return self.badpmsfcr_rejects();
        }
        false
    }

    /// `SPEFilterByLatency()`.
    pub(crate) fn spe_filter_by_latency(&self, total_latency: u32) -> bool {
        let minlat = PMSLATFR_EL1::MINLAT.get(self.regs.pmslatfr);
        if PMSFCR_EL1::FL.is_set(self.regs.pmsfcr) {
            if minlat != 0 {
                return u64::from(total_latency) < minlat;
            }
            return self.badpmsfcr_rejects();
        }
        false
    }

    /// `SPEGetDataSource()`: loads (and atomics' loads) of guest RAM with a
    /// valid PA, on a PE whose records carry data sources; the encoding is
    /// `unpredictable::DATA_SOURCE_*`.
    pub(crate) fn spe_get_data_source<M: GuestMemory>(
        &self,
        op: &SampledOp,
        mem: &M,
    ) -> Option<u16> {
        let is_load = matches!(
            SpeOpType::of(op.class),
            SpeOpType::Load | SpeOpType::LoadAtomic
        );
        if !self.features.data_source
            || !is_load
            || !op.data_pa_valid
            || op.no_data_address
            || !mem.check_range(GuestAddress(op.data_pa), 1, Permissions::Read)
        {
            return None;
        }
        Some(if op.events & events::CACHE_DATA_MODIFIED != 0 {
            cu::DATA_SOURCE_PEER_CORE
        } else if op.events & events::LLC_MISS != 0 {
            cu::DATA_SOURCE_DRAM
        } else if op.events & events::L2D_MISS != 0 {
            cu::DATA_SOURCE_SYSTEM_CACHE
        } else if op.events & events::L1D_REFILL != 0 {
            cu::DATA_SOURCE_L2
        } else {
            cu::DATA_SOURCE_L1D
        })
    }

    /// `SPEFilterByDataSource()`.
    pub(crate) fn spe_filter_by_data_source(&self, class: OpClass, ds: Option<u16>) -> bool {
        let is_load = matches!(
            SpeOpType::of(class),
            SpeOpType::Load | SpeOpType::LoadAtomic
        );
        let Some(ds) = ds.filter(|_| self.features.spe_fds() && is_load) else {
            return false;
        };
        let is_ds = self.regs.pmsdsfr >> (ds & 0x3F) & 1 == 1;
        PMSFCR_EL1::FDS.is_set(self.regs.pmsfcr) && !is_ds
    }

    /// `SPECollectRecord()`.
    pub fn spe_collect_record(
        &self,
        ev: u64,
        total_latency: u32,
        class: OpClass,
        ds: Option<u16>,
    ) -> bool {
        let (rejected_event, rejected_nevent) = self.spe_filter_by_events(ev);
        !(rejected_event
            || rejected_nevent
            || self.spe_filter_by_type(class)
            || self.spe_filter_by_data_source(class, ds)
            || self.spe_filter_by_latency(total_latency))
    }

    /// `SPECompleteSample()` for a selected operation.
    pub(crate) fn spe_complete_sample<M: GuestMemory>(
        &mut self,
        op: &SampledOp,
        mem: &M,
    ) -> SampleOutcome {
        self.stats.samples += 1;
        let ev = self.sample_events(op);
        let ds = self.spe_get_data_source(op, mem);
        if !self.spe_collect_record(ev, op.total_latency, op.class, ds) {
            self.stats.filtered += 1;
            return SampleOutcome::Filtered;
        }
        let discard = self.features.pms_ver >= PmsVer::V1p2
            && PMBLIMITR_EL1::FM.get(self.regs.pmblimitr) == 0b10;
        if discard {
            self.stats.discarded += 1;
            return SampleOutcome::Discarded;
        }
        self.spe_construct_record(op, ev, ds);
        self.spe_write_to_buffer(mem)
    }

    fn add(&mut self, p: Packet) {
        p.encode(&mut self.record);
    }

    /// `SPEConstructRecord()`: packets in the pseudocode's order.
    pub(crate) fn spe_construct_record(&mut self, op: &SampledOp, ev: u64, ds: Option<u16>) {
        self.record.clear();
        let el = op.el;
        if self.collect_context_idr1(el) {
            self.add(Packet::Context {
                el2: false,
                id: op.contextidr_el1,
            });
        }
        if self.collect_context_idr2() {
            self.add(Packet::Context {
                el2: true,
                id: op.contextidr_el2,
            });
        }
        let max = self.features.counter_max();
        let sat = |v: u32| v.min(max) as u16;
        self.add(Packet::Counter {
            index: CounterIndex::TotalLatency,
            value: sat(op.total_latency),
        });
        self.add(Packet::Counter {
            index: CounterIndex::IssueLatency,
            value: sat(op.issue_latency),
        });
        let is_ldst = matches!(op.class, OpClass::LoadStore { .. });
        if is_ldst {
            self.add(Packet::Counter {
                index: CounterIndex::TranslationLatency,
                value: sat(op.translation_latency),
            });
        }
        self.add(Packet::Address {
            index: AddressIndex::Pc,
            payload: packet::address_payload(op.pc, el as u8, op.ns, op.nse),
        });
        if let OpClass::Branch { .. } = op.class {
            if ev & events::NOT_TAKEN == 0 {
                self.add(Packet::Address {
                    index: AddressIndex::BranchTarget,
                    payload: packet::address_payload(op.target, el as u8, op.ns, op.nse),
                });
            }
        }
        if is_ldst && !op.no_data_address {
            let va = if cu::NON_TBI_TAG_IS_ZERO {
                op.data_va & 0x00FF_FFFF_FFFF_FFFF
            } else {
                op.data_va
            };
            self.add(Packet::Address {
                index: AddressIndex::DataVirtual,
                payload: va,
            });
            if op.data_pa_valid && self.collect_physical_address() {
                self.add(Packet::Address {
                    index: AddressIndex::DataPhysical,
                    payload: packet::data_pa_payload(op.data_pa, op.ns, op.nse, false, 0),
                });
            }
        }
        if let Some(ds) = ds {
            let len = match cu::DATA_SOURCE_PAYLOAD_BYTES {
                1 => PayloadLen::B1,
                _ => PayloadLen::B2,
            };
            self.add(Packet::DataSource {
                len,
                value: u64::from(ds),
            });
        }
        let op_type = match op.class {
            OpClass::Other {
                cond_select,
                subclass,
            } => OpType::Other(self.other_subclass(subclass) | u8::from(cond_select)),
            OpClass::LoadStore {
                store, subclass, ..
            } => OpType::LoadStore(subclass & !packet::op::LDST_STORE | u8::from(store)),
            OpClass::Branch {
                conditional,
                indirect,
            } => OpType::Branch(u8::from(conditional) | u8::from(indirect) << 1),
        };
        self.add(Packet::OpType(op_type));
        let v1p4 = self.features.pms_ver >= PmsVer::V1p4;
        let len = match cu::events_payload_size(v1p4, self.features.sve) {
            4 => PayloadLen::B4,
            _ => PayloadLen::B2,
        };
        self.add(Packet::Events { len, bits: ev });
        let ts = match self.collect_time_stamp(el) {
            TimeStamp::None => None,
            TimeStamp::Physical => Some(op.physical_count),
            TimeStamp::Virtual => Some(op.physical_count.wrapping_sub(self.ctx.cntvoff_el2)),
            TimeStamp::OffsetPhysical => Some(op.physical_count.wrapping_sub(self.ctx.cntpoff_el2)),
        };
        match ts {
            Some(t) => self.add(Packet::Timestamp(t)),
            None => self.add(Packet::End),
        }
        let align = 1usize << PMBIDR_EL1::ALIGN.get(self.features.pmbidr);
        while !self.record.len().is_multiple_of(align) {
            self.record.push(0);
        }
    }

    /// The FP and SIMD bits of an "other" operation's payload, where the
    /// profile records them (unpredictable.rs).
    fn other_subclass(&self, subclass: u8) -> u8 {
        if is_sve_other(subclass) {
            return if cu::sve_recorded(self.features.sve) {
                subclass & !packet::op::OTHER_COND_SELECT
            } else {
                0
            };
        }
        if cu::other_fp_simd_recorded(self.features.spe_eft()) {
            subclass & (packet::op::OTHER_FP | packet::op::OTHER_ASE)
        } else {
            0
        }
    }

    /// The record last built (for tests and the daemon's trace logging).
    pub fn last_record(&self) -> &[u8] {
        &self.record
    }
}

#[cfg(test)]
mod tests;
