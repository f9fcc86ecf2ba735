//! The model of one PE's Statistical Profiling Unit, its Profiling Buffer
//! and the PMU snapshot extension, written to read side by side with the
//! Arm ARM pseudocode (J1.1.1 aarch64/debug, J1.3.1 shared/debug).
//!
//! The model does no I/O of its own: guest memory comes in as a
//! [`vm_memory::GuestMemory`], the PE's controlling state as a
//! [`PeContext`], sampled operations as [`SampledOp`]s.

mod access;
mod buffer;
mod enable;
pub mod inject;
mod predict;
pub mod restore;
mod sample;
mod snapshot;
pub mod tables;
pub mod translate;
pub mod unpredictable;

pub use snapshot::{CaptureOutcome, PmuCounters};

use spe_protocol::op::SampledOp;
use spe_protocol::regs::*;
use vm_memory::GuestMemory;

/// What the emulated PE implements. Everything the pseudocode asks with
/// `IsFeatureImplemented()` or `HaveEL()` comes from here.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Features {
    pub pms_ver: PmsVer,
    pub spe_nvm: bool,
    pub spe_exc: bool,
    pub pmu_ss: bool,
    pub pmu_icntr: bool,
    pub have_el2: bool,
    pub have_el3: bool,
    /// FEAT_RME: SCR_EL3.NSE and MDCR_EL3.NSPBE exist.
    pub have_rme: bool,
    /// FEAT_SEL2: EL2 can be enabled in Secure state.
    pub have_sel2: bool,
    /// FEAT_ECV: PMSCR_ELx.PCT is two bits.
    pub have_ecv: bool,
    /// PMSIDR_EL1 as reported. Its FnE, ERnd, EFT, MaxSize, CountSize and
    /// Align bits select behaviour too.
    pub pmsidr: u64,
    /// PMBIDR_EL1 as reported, without P (the model computes P).
    pub pmbidr: u64,
    /// Number of PMU event counters (PMCR_EL0.N).
    pub pmu_counters: u8,
    /// Records of loads carry a Data Source packet (`SPEGetDataSource()`;
    /// encoding in `unpredictable`).
    pub data_source: bool,
    /// The PE has FEAT_SVE: records of SVE operations carry their vector
    /// length and predication, and the predicate events (17, 18) exist.
    pub sve: bool,
}

impl Features {
    /// PMSIDR for a PE that filters everything, with 64-byte records,
    /// 12-bit counters and a 1024-operation recommended interval.
    const PMSIDR_BASE: u64 = 0b111 // FE FT FL
        | 1 << 3 // ArchInst
        | 1 << 4 // LDS
        | 4 << 8 // Interval: 1024
        | 6 << 12 // MaxSize: 64 bytes
        | 2 << 16; // CountSize: 12-bit saturating

    /// A Neoverse N1-like SPU: FEAT_SPEv1p1, no EL2/EL3. Its records of
    /// loads carry a Data Source packet, as the N1's do (perf decodes it
    /// for the N1's MIDR: tools/perf/util/arm-spe.c's
    /// `common_ds_encoding_cpus`, tested on N1SDP).
    pub fn neoverse_n1() -> Self {
        Features {
            pms_ver: PmsVer::V1p1,
            spe_nvm: false,
            spe_exc: false,
            pmu_ss: false,
            pmu_icntr: false,
            have_el2: false,
            have_el3: false,
            have_rme: false,
            have_sel2: false,
            have_ecv: false,
            pmsidr: Self::PMSIDR_BASE,
            pmbidr: 0,
            pmu_counters: 6,
            data_source: true,
            sve: false,
        }
    }

    /// A Neoverse V1-like SPU: FEAT_SPEv1p1 with ERnd, on a PE with SVE.
    pub fn neoverse_v1() -> Self {
        Features {
            pmsidr: Self::PMSIDR_BASE | 1 << 5,
            sve: true,
            ..Self::neoverse_n1()
        }
    }

    /// Everything the model implements: FEAT_SPEv1p4 with FnE, EFT, ERnd,
    /// FDS (data-source filtering, and Data Source packets for loads),
    /// nVM, FEAT_SPE_EXC, FEAT_PMUv3_SS and FEAT_PMUv3_ICNTR, on a PE with
    /// SVE (QEMU's `-cpu max`).
    pub fn max() -> Self {
        Features {
            pms_ver: PmsVer::V1p4,
            sve: true,
            spe_nvm: true,
            spe_exc: true,
            pmu_ss: true,
            pmu_icntr: true,
            have_ecv: true,
            pmsidr: Self::PMSIDR_BASE
                | PMSIDR_EL1::ERND.mask()
                | PMSIDR_EL1::FNE.mask()
                | PMSIDR_EL1::FDS.mask()
                | PMSIDR_EL1::EFT.mask(),
            data_source: true,
            pmu_counters: 6,
            ..Self::neoverse_n1()
        }
    }

    /// The operation counts PMSIDR_EL1.Interval can recommend, by encoding.
    pub const INTERVALS: [(u64, u32); 8] = [
        (0, 256),
        (2, 512),
        (3, 768),
        (4, 1024),
        (5, 1536),
        (6, 2048),
        (7, 3072),
        (8, 4096),
    ];

    /// The same PE recommending a sampling interval of `ops` operations
    /// (PMSIDR_EL1.Interval), which Linux's driver takes as the minimum
    /// period and perf as its default.
    pub fn with_min_interval(self, ops: u32) -> Result<Self, FeatureError> {
        let (enc, _) = Self::INTERVALS
            .iter()
            .find(|(_, n)| *n == ops)
            .ok_or(FeatureError::Interval { ops })?;
        Ok(Features {
            pmsidr: self.pmsidr & !(0xf << 8) | enc << 8,
            ..self
        })
    }

    /// The same PE with PMBIDR_EL1.Align set for `bytes`-aligned writes:
    /// every record is padded to a multiple of it, so a buffer fills to
    /// exactly its limit. A power of two up to the maximum record size
    /// (PMSIDR_EL1.MaxSize), which a record must not span past.
    pub fn with_align(self, bytes: u64) -> Result<Self, FeatureError> {
        let max = self.max_record_size();
        if !bytes.is_power_of_two() || bytes > max {
            return Err(FeatureError::Align { bytes, max });
        }
        Ok(Features {
            pmbidr: PMBIDR_EL1::ALIGN.set(self.pmbidr, u64::from(bytes.trailing_zeros())),
            ..self
        })
    }

    /// The recommended interval PMSIDR_EL1.Interval encodes, if defined.
    pub fn min_interval(&self) -> Option<u32> {
        let enc = self.pmsidr >> 8 & 0xf;
        Self::INTERVALS
            .iter()
            .find(|(e, _)| *e == enc)
            .map(|(_, n)| *n)
    }

    /// The same PE with EL2 and EL3 (and Secure EL2, RME) implemented, as
    /// the Arm ARM tables assume.
    pub fn with_el2_el3(self) -> Self {
        Features {
            have_el2: true,
            have_el3: true,
            have_sel2: true,
            have_rme: true,
            ..self
        }
    }

    pub fn pmsidr(&self) -> u64 {
        self.pmsidr
    }

    pub fn pmbidr(&self) -> u64 {
        self.pmbidr
    }

    /// ID_AA64DFR0_EL1's PMSVer and PMSS fields.
    pub fn id_aa64dfr0_spe_fields(&self) -> u64 {
        let pmss = if self.pmu_ss { 1 } else { 0 };
        ID_AA64DFR0_EL1::PMSVER.set(0, self.pms_ver as u64) | ID_AA64DFR0_EL1::PMSS.set(0, pmss)
    }

    /// FEAT_SPE_FnE.
    pub fn spe_fne(&self) -> bool {
        PMSIDR_EL1::FNE.is_set(self.pmsidr)
    }

    /// FEAT_SPE_ERnd.
    pub fn spe_ernd(&self) -> bool {
        PMSIDR_EL1::ERND.is_set(self.pmsidr)
    }

    /// FEAT_SPE_FDS.
    pub fn spe_fds(&self) -> bool {
        PMSIDR_EL1::FDS.is_set(self.pmsidr)
    }

    /// FEAT_SPE_EFT.
    pub fn spe_eft(&self) -> bool {
        PMSIDR_EL1::EFT.is_set(self.pmsidr)
    }

    /// 2^PMSIDR_EL1.MaxSize: the largest record.
    pub fn max_record_size(&self) -> u64 {
        1 << PMSIDR_EL1::MAXSIZE.get(self.pmsidr)
    }

    /// Saturation value of the latency counters (PMSIDR_EL1.CountSize).
    pub fn counter_max(&self) -> u32 {
        if PMSIDR_EL1::COUNTSIZE.get(self.pmsidr) == 3 {
            0xFFFF
        } else {
            0xFFF
        }
    }
}

/// Why a feature set cannot be built, or the model cannot be that PE.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FeatureError {
    #[error("PMSIDR_EL1.Interval encodes only {}, not {ops}", interval_list())]
    Interval { ops: u32 },
    #[error(
        "the alignment must be a power of two up to the maximum record size, \
         {max} bytes, not {bytes}"
    )]
    Align { bytes: u64, max: u64 },
    #[error("PMSIDR_EL1.MaxSize gives {0}-byte records; the model needs 64 to 2048")]
    RecordSize(u64),
    #[error("PMBIDR_EL1.Align ({align} bytes) exceeds the record size ({max})")]
    AlignAboveRecord { align: u64, max: u64 },
    #[error("at most 31 PMU event counters, not {0}")]
    PmuCounters(u8),
}

/// The intervals of [`Features::INTERVALS`], for messages.
fn interval_list() -> String {
    Features::INTERVALS
        .iter()
        .map(|(_, n)| n.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Features {
    /// The largest record the model builds: two contexts, three counters,
    /// PC and data VA/PA, operation type, 4-byte events and a timestamp.
    pub const LARGEST_RECORD: u64 = 64;

    /// Checks the ID registers describe a PE the model can be: records
    /// must fit 2^MaxSize (at most 2 KiB), and the alignment cannot exceed
    /// the record size.
    pub fn validate(&self) -> Result<(), FeatureError> {
        let max = self.max_record_size();
        if !(Self::LARGEST_RECORD..=2048).contains(&max) {
            return Err(FeatureError::RecordSize(max));
        }
        let align = 1u64 << PMBIDR_EL1::ALIGN.get(self.pmbidr);
        if align > max {
            return Err(FeatureError::AlignAboveRecord { align, max });
        }
        if self.pmu_counters > 31 {
            return Err(FeatureError::PmuCounters(self.pmu_counters));
        }
        Ok(())
    }
}

impl Default for Features {
    fn default() -> Self {
        Self::neoverse_n1()
    }
}

/// The SPU's own registers. Reads and writes go through [`Spu::read_sysreg`]
/// and [`Spu::write_sysreg`], which apply access checks and RES0 masks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpuRegs {
    pub pmscr_el1: u64,
    pub pmscr_el2: u64,
    pub pmsnevfr: u64,
    pub pmsicr: u64,
    pub pmsirr: u64,
    pub pmsfcr: u64,
    pub pmsevfr: u64,
    pub pmslatfr: u64,
    pub pmblimitr: u64,
    pub pmbptr: u64,
    pub pmbsr_el1: u64,
    pub pmbsr_el2: u64,
    pub pmbsr_el3: u64,
    pub pmsdsfr: u64,
    pub pmbmar: u64,
    pub pmsscr: u64,
    pub pmecr: u64,
    pub pmevcntsvr: [u64; 31],
    pub pmccntsvr: u64,
    pub pmicntsvr: u64,
}

/// Counts of what the SPU did ([`Spu::skip_operations`] adds to
/// `counted`): the control socket's type, so `query-spu` shows them as
/// they are.
pub use spe_protocol::control::Stats as SpuStats;

/// What happened to one operation passed to [`Spu::operation`] or
/// [`Spu::sample`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SampleOutcome {
    /// Profiling is disabled for the operation's EL and Security state.
    Disabled,
    /// The interval counter did not select it.
    NotSelected,
    /// Rejected by PMSFCR/PMSEVFR/PMSNEVFR/PMSLATFR.
    Filtered,
    /// Discard mode: built and dropped.
    Discarded,
    /// Written; `full` if the buffer-full event fired after it.
    Written { bytes: usize, full: bool },
    /// A fault while writing raised a management event.
    Fault,
}

/// One PE's SPU. See the module documentation.
#[derive(Clone, Debug)]
pub struct Spu {
    features: Features,
    ctx: PeContext,
    xlat: TranslationRegs,
    regs: SpuRegs,
    /// PMU counters the front end last supplied, captured by PMSSCR_EL1.SS.
    counters: PmuCounters,
    /// The record under construction (`SPERecordData`), reused.
    record: Vec<u8>,
    /// The SPU's one-entry TLB for the Profiling Buffer.
    tlb: buffer::BufferTlb,
    /// xorshift state for `SPEGetRandomInterval`.
    rng: u64,
    /// What MISPRED is derived from (`predict.rs`).
    predictor: predict::BranchPredictor,
    stats: SpuStats,
    /// Faults armed from the control socket, waiting for their triggers.
    faults: Vec<inject::ArmedFault>,
    /// Faults delivered, not yet reported.
    delivered: Vec<inject::Delivered>,
    /// PMBPTR when the buffer was last enabled (`at-byte` triggers).
    buffer_base: u64,
    irq_override: inject::IrqOverride,
    /// Records left whose PMBPTR update is skipped (stuck-pointer).
    stuck_records: u32,
    /// The CONSTRAINED UNPREDICTABLE choices selected at run time.
    choices: unpredictable::Choices,
    /// A copy of each record written, for `--record` ([`Spu::set_tap`]).
    tap: Option<Vec<u8>>,
}

impl Spu {
    pub fn new(features: Features) -> Self {
        Spu {
            features,
            ctx: PeContext::default(),
            xlat: TranslationRegs::default(),
            regs: SpuRegs::default(),
            counters: PmuCounters::default(),
            record: Vec::with_capacity(2048),
            tlb: buffer::BufferTlb::default(),
            rng: 0x9E37_79B9_7F4A_7C15,
            predictor: predict::BranchPredictor::default(),
            stats: SpuStats::default(),
            faults: Vec::new(),
            delivered: Vec::new(),
            buffer_base: 0,
            irq_override: inject::IrqOverride::None,
            stuck_records: 0,
            choices: unpredictable::Choices::default(),
            tap: None,
        }
    }

    /// Keeps a copy of every record written to the buffer until
    /// [`Spu::take_tapped`] (the model does no I/O; the front end stores
    /// them).
    pub fn set_tap(&mut self, on: bool) {
        self.tap = on.then(Vec::new);
    }

    /// The records written since the last call, each as a little-endian
    /// u16 length and the record's bytes (with its padding).
    pub fn take_tapped(&mut self) -> Vec<u8> {
        self.tap.as_mut().map(std::mem::take).unwrap_or_default()
    }

    /// Warm reset: registers to their reset values (UNKNOWN ones to zero).
    /// What the host set up (armed faults, the choices) is not the PE's
    /// state and survives: QEMU resets the vCPUs after a VM connects.
    pub fn reset(&mut self) {
        let faults = std::mem::take(&mut self.faults);
        let delivered = std::mem::take(&mut self.delivered);
        let tap = self.tap.take();
        *self = Spu {
            ctx: self.ctx,
            choices: self.choices,
            faults,
            delivered,
            tap,
            ..Spu::new(self.features.clone())
        };
    }

    pub fn choices(&self) -> unpredictable::Choices {
        self.choices
    }

    pub fn set_choices(&mut self, choices: unpredictable::Choices) {
        self.choices = choices;
    }

    pub fn features(&self) -> &Features {
        &self.features
    }

    pub fn context(&self) -> &PeContext {
        &self.ctx
    }

    /// The PE's controlling state changed (EL, SCR/MDCR/HCR).
    pub fn set_context(&mut self, ctx: PeContext) {
        self.ctx = ctx;
        self.tlb.invalidate();
    }

    /// The translation registers the buffer is written through.
    pub fn translation(&self) -> &TranslationRegs {
        &self.xlat
    }

    /// The translation registers of the owning regime changed.
    pub fn set_translation(&mut self, xlat: TranslationRegs) {
        self.xlat = xlat;
        self.tlb.invalidate();
    }

    /// Invalidate cached Profiling Buffer translations (a TLBI the front
    /// end saw, or a `psb csync`).
    pub fn invalidate_tlb(&mut self) {
        self.tlb.invalidate();
    }

    /// The PMU counter values a capture event copies.
    pub fn set_pmu_counters(&mut self, counters: PmuCounters) {
        self.counters = counters;
    }

    pub fn regs(&self) -> &SpuRegs {
        &self.regs
    }

    pub fn stats(&self) -> SpuStats {
        self.stats
    }

    pub fn reset_stats(&mut self) {
        self.stats = SpuStats::default();
    }

    /// [`Spu::reset`], but the counts go on: a guest resetting its device
    /// (a driver rebinding, a kernel's shutdown) is still the same VM.
    pub fn reset_keeping_stats(&mut self) {
        let stats = self.stats;
        self.reset();
        self.stats = stats;
    }

    /// The PMU counter values a capture would copy now.
    pub fn pmu_counters(&self) -> PmuCounters {
        self.counters
    }

    /// Seeds the random numbers (`SPEGetRandomInterval`) of `vcpu`'s SPU,
    /// so a scenario's runs draw the same ones.
    pub fn seed(&mut self, seed: u64, vcpu: u32) {
        let mut s = seed ^ (u64::from(vcpu) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        // xorshift's state must not be 0.
        if s == 0 {
            s = 0x9E37_79B9_7F4A_7C15;
        }
        self.rng = s;
    }

    /// Level of PMBIRQ: `SPEInterruptEnabled() && PMBSR_EL1.S`, as
    /// `SPECycle()` drives it.
    /// Injected faults can force it either way (see `inject`).
    pub fn pmbirq(&self) -> bool {
        match self.irq_override {
            inject::IrqOverride::Spurious => true,
            inject::IrqOverride::Lost => false,
            inject::IrqOverride::None => {
                self.spe_interrupt_enabled() && PMBSR::S.is_set(self.regs.pmbsr_el1)
            }
        }
    }

    /// The PMBSR of the EL that takes management events by default
    /// (`DefaultSPEEvent()`).
    pub fn pmbsr(&self) -> u64 {
        match self.default_spe_event() {
            El::El3 => self.regs.pmbsr_el3,
            El::El2 => self.regs.pmbsr_el2,
            _ => self.regs.pmbsr_el1,
        }
    }

    /// One operation passes the sampling logic: if profiling is enabled for
    /// it, the interval counter counts it, and if selected it is sampled.
    pub fn operation<M: GuestMemory>(&mut self, op: &SampledOp, mem: &M) -> SampleOutcome {
        if !self.statistical_profiling_enabled_for(op) {
            return SampleOutcome::Disabled;
        }
        if !self.spe_to_collect_sample() {
            return SampleOutcome::NotSelected;
        }
        self.spe_complete_sample(op, mem)
    }

    /// An operation a front end's own interval counter selected (the cheap
    /// count-down runs next to the CPU): filter it, build its record, write
    /// it.
    pub fn sample<M: GuestMemory>(&mut self, op: &SampledOp, mem: &M) -> SampleOutcome {
        if !self.statistical_profiling_enabled_for(op) {
            return SampleOutcome::Disabled;
        }
        self.spe_complete_sample(op, mem)
    }

    /// Next pseudo-random byte (`SPEGetRandomInterval`).
    fn random_byte(&mut self) -> u8 {
        (xorshift64(&mut self.rng) >> 24) as u8
    }
}

/// Marsaglia's xorshift64: advances `state` (never 0) and returns it.
/// Cheap and reproducible, which is all the model's and the synthetic
/// source's randomness needs.
pub(crate) fn xorshift64(state: &mut u64) -> u64 {
    let mut x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *state = x;
    x
}

#[cfg(test)]
pub(crate) mod test_util;

#[cfg(test)]
mod props;

#[cfg(test)]
mod tests {
    use super::{FeatureError, Features};

    #[test]
    fn align_is_a_power_of_two_up_to_the_record_size() {
        let f = Features::neoverse_n1().with_align(64).unwrap();
        assert_eq!(f.pmbidr, 6);
        assert_eq!(Features::neoverse_n1().with_align(1).unwrap().pmbidr, 0);
        for bytes in [128, 48, 0] {
            assert_eq!(
                Features::neoverse_n1().with_align(bytes),
                Err(FeatureError::Align { bytes, max: 64 })
            );
        }
    }

    /// The ID values the README's profile table and `--help` give.
    #[test]
    fn profiles_id_values() {
        use crate::spu::PmsVer;
        for (f, pms_ver, pmsidr) in [
            (Features::neoverse_n1(), PmsVer::V1p1, 0x2641f),
            (Features::neoverse_v1(), PmsVer::V1p1, 0x2643f),
            (Features::max(), PmsVer::V1p4, 0x40264ff),
        ] {
            assert_eq!((f.pms_ver, f.pmsidr, f.pmbidr), (pms_ver, pmsidr, 0));
        }
        assert!(!Features::neoverse_n1().pmu_ss && Features::max().pmu_ss);
    }

    #[test]
    fn min_interval_sets_only_pmsidr_interval() {
        let n1 = Features::neoverse_n1();
        assert_eq!(n1.min_interval(), Some(1024));
        for (enc, ops) in Features::INTERVALS {
            let f = n1.clone().with_min_interval(ops).unwrap();
            assert_eq!(f.pmsidr >> 8 & 0xf, enc);
            assert_eq!(f.min_interval(), Some(ops));
            assert_eq!(f.pmsidr & !(0xf << 8), n1.pmsidr & !(0xf << 8));
        }
        // Encoding 1 is reserved: no interval gives it, none is read back.
        assert_eq!(
            n1.clone().with_min_interval(300),
            Err(FeatureError::Interval { ops: 300 })
        );
        let reserved = Features {
            pmsidr: n1.pmsidr & !(0xf << 8) | 1 << 8,
            ..n1
        };
        assert_eq!(reserved.min_interval(), None);
    }
}
