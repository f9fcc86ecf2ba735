//! Every CONSTRAINED UNPREDICTABLE and IMPLEMENTATION DEFINED choice the
//! model makes, in one place. Each constant names the pseudocode's
//! `Unpredictable_*` or `IMPLEMENTATION_DEFINED` string it answers.

//!
//! The three a driver most plausibly meets differently on different cores
//! are selectable at run time ([`Choices`]: `--choice NAME=VALUE`, the
//! control socket's `set-choice`); the rest are fixed constants.

/// The run-time selectable choices, each among the behaviours the Arm ARM
/// permits. The defaults are what testing a driver needs: the first two
/// are what the model did before they were selectable, the operation
/// model is the one that does not alias with a loop.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Choices {
    pub overrun: Overrun,
    pub badpmsfcr: BadPmsfcr,
    pub operations: Operations,
}

/// RPGGHS (D17.7.4): software broke RHXSYK or RHLXGD, so a record does not
/// fit below PMBLIMITR when it is written (e.g. the buffer was enabled
/// with PMBPTR within a record of the limit). The PE may make PMBPTR
/// UNKNOWN, write anywhere the owning regime may write, or raise a buffer
/// management event "with or without indicating data loss": buffer full,
/// access not allowed, an MMU fault, or an IMPLEMENTATION DEFINED one. The
/// model never writes outside [PMBPTR, limit), so it offers the events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Overrun {
    /// Buffer full (EC 0, BSC 1) with DL = 1; the record is dropped.
    #[default]
    BufferFullDataLoss,
    /// Buffer full without DL, as if the record had just fit.
    BufferFull,
    /// An IMPLEMENTATION DEFINED event (EC 0x1F) with DL = 1.
    ImpDef,
}

/// `Unpredictable_BADPMSFCR`: a filter enabled with nothing to filter on
/// (PMSFCR.FE = 1 with PMSEVFR zero, FT = 1 with no type bits, FL = 1 with
/// MINLAT zero, or FE and FnE naming the same event):
/// `ConstrainUnpredictableBool` permits either answer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BadPmsfcr {
    /// The filter rejects nothing: the record is kept.
    #[default]
    Keep,
    /// The filter rejects every record.
    Reject,
}

/// What the sample interval counter counts as an operation, which the
/// architecture leaves to the implementation: an instruction, or the
/// micro-operations it is split into (the pseudocode's
/// `SPEConstructClass()` notes that it "samples instruction instead of
/// micro-operations", as one permitted implementation). A
/// front end that counts operations itself reads it from the sampling
/// state's `UOPS` flag (QEMU reloads its counter with it at each
/// selection; it takes effect at the vCPU's next SPE register access).
/// Real cores count micro-operations, so the number of instructions
/// between two samples varies and a loop never aliases with the
/// interval. Counting instructions exactly makes every sample of a loop
/// whose length divides PMSIRR.INTERVAL + 1 land on the same instruction:
/// a test waiting for a load in such a loop waits forever.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Operations {
    /// Micro-operations: a seeded pseudo-random share of each period's
    /// instructions, from none to an eighth, counts as two operations
    /// (QEMU draws it once per period from each vCPU's own generator, so
    /// a run is repeatable). A period of P operations spans P - d
    /// instructions, d uniform in [0, P / 8].
    #[default]
    MicroOps,
    /// Every instruction is exactly one operation: samples are exactly
    /// PMSIRR.INTERVAL + 1 instructions apart without RND (the interval
    /// proofs use it).
    Instructions,
}

/// One choice as the CLI and the control socket show it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ChoiceInfo {
    pub name: &'static str,
    pub value: &'static str,
    pub permitted: &'static [&'static str],
    pub rule: &'static str,
}

const OVERRUN: [(&str, Overrun); 3] = [
    ("buffer-full-dl", Overrun::BufferFullDataLoss),
    ("buffer-full", Overrun::BufferFull),
    ("imp-def", Overrun::ImpDef),
];
const BADPMSFCR: [(&str, BadPmsfcr); 2] =
    [("keep", BadPmsfcr::Keep), ("reject", BadPmsfcr::Reject)];
const OPERATIONS: [(&str, Operations); 2] = [
    ("micro-ops", Operations::MicroOps),
    ("instructions", Operations::Instructions),
];

/// Why a `--choice` or `set-choice` was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    #[error("{arg:?} is not NAME=VALUE")]
    Syntax { arg: String },
    #[error("no choice {name:?} (overrun, badpmsfcr, operations)")]
    Name { name: String },
    #[error("{name} is one of {}, not {value:?}", permitted.join(", "))]
    Value {
        name: &'static str,
        value: String,
        permitted: Vec<&'static str>,
    },
}

impl Choices {
    /// Sets choice `name` to `value` (the names of [`Choices::list`]).
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), ChoiceError> {
        fn pick<T: Copy>(
            table: &[(&'static str, T)],
            name: &'static str,
            value: &str,
        ) -> Result<T, ChoiceError> {
            table
                .iter()
                .find(|(n, _)| *n == value)
                .map(|(_, v)| *v)
                .ok_or_else(|| ChoiceError::Value {
                    name,
                    value: value.to_string(),
                    permitted: table.iter().map(|(n, _)| *n).collect(),
                })
        }
        match name {
            "overrun" => self.overrun = pick(&OVERRUN, "overrun", value)?,
            "badpmsfcr" => self.badpmsfcr = pick(&BADPMSFCR, "badpmsfcr", value)?,
            "operations" => self.operations = pick(&OPERATIONS, "operations", value)?,
            _ => {
                return Err(ChoiceError::Name {
                    name: name.to_string(),
                })
            }
        }
        Ok(())
    }

    /// Parses `NAME=VALUE` (the CLI's `--choice`).
    pub fn set_from(&mut self, arg: &str) -> Result<(), ChoiceError> {
        let (n, v) = arg.split_once('=').ok_or_else(|| ChoiceError::Syntax {
            arg: arg.to_string(),
        })?;
        self.set(n, v)
    }

    /// Every choice with its value, what is permitted and the rule.
    pub fn list(&self) -> [ChoiceInfo; 3] {
        fn name_of<T: PartialEq>(table: &[(&'static str, T)], v: &T) -> &'static str {
            table.iter().find(|(_, x)| x == v).map_or("?", |(n, _)| n)
        }
        [
            ChoiceInfo {
                name: "overrun",
                value: name_of(&OVERRUN, &self.overrun),
                permitted: &["buffer-full-dl", "buffer-full", "imp-def"],
                rule: "RPGGHS: a record that does not fit below the limit (software broke RHXSYK/RHLXGD)",
            },
            ChoiceInfo {
                name: "badpmsfcr",
                value: name_of(&BADPMSFCR, &self.badpmsfcr),
                permitted: &["keep", "reject"],
                rule: "Unpredictable_BADPMSFCR: a filter enabled with nothing to filter on",
            },
            ChoiceInfo {
                name: "operations",
                value: name_of(&OPERATIONS, &self.operations),
                permitted: &["micro-ops", "instructions"],
                rule: "IMPLEMENTATION DEFINED: the sample interval counter counts instructions or micro-operations (SPEConstructClass)",
            },
        ]
    }
}

/// `Unpredictable_RESERVEDNSxB`: MDCR_EL3.{NSPBE, NSPB} = 0b10x behaves as
/// 0b000 (Secure owns the buffer, EL3 traps lower-EL accesses).
pub const RESERVED_NSXB_VALUE: u8 = 0b000;

/// `Unpredictable_RESERVEDNSxB_Trap`: accesses trap to EL3 while the value
/// is reserved.
pub const RESERVED_NSXB_TRAPS: bool = true;

/// `Unpredictable_PMSCR_PCT`: the reserved PCT value 0b10 behaves as 0b00
/// (virtual timestamp).
pub const RESERVED_PCT_VALUE: u8 = 0b00;

/// `Unpredictable_RESPMSEE` (PMSCR_EL1.EE reserved values without FEAT_NV)
/// and `Unpredictable_RESPMSSE` (PMECR_EL1.SSE = 0b01): Constraint_DISABLED.
pub const RESERVED_EE_SSE_DISABLED: bool = true;

/// Not the architecture's: a backend that restarted under a running VM
/// (QEMU reconnects and hands back the registers, `Spu::restore`) cannot
/// rebuild the records the old process had in flight, nor know where it
/// left PMBPTR. If the buffer is enabled, it reports that as a buffer
/// management event: buffer full (EC 0, BSC 1) with DL = 1, which a
/// driver handles as the end of a buffer whose last record may be partial
/// (Linux: an AUX record flagged TRUNCATED | PARTIAL), as for
/// [`Overrun::BufferFullDataLoss`].
pub const RESTART_LOSS_EVENT: (u64, u64) = (0b00_0000, 0b00_0001);

/// `IMPLEMENTATION DEFINED "SPE non-tbi tag is zero"`: FALSE, the data VA
/// packet carries all 64 bits of the address.
pub const NON_TBI_TAG_IS_ZERO: bool = false;

/// `IMPLEMENTATION DEFINED "SPE Events packet payload size"`: 2 bytes, or 4
/// bytes from FEAT_SPEv1p4 (its events reach bit 25) or on a PE with SVE
/// (the predicate events are bits 17 and 18).
pub const fn events_payload_size(v1p4: bool, sve: bool) -> usize {
    if v1p4 || sve {
        4
    } else {
        2
    }
}

/// MISPRED (event 7) comes from a predictor the model runs over the
/// branches it samples (`predict.rs`; QEMU does not speculate): a two-bit
/// counter per entry for conditional branches, starting weakly taken, and
/// the last target for indirect ones, in a table of this many entries
/// indexed by a hash of the PC. An always-taken loop branch is never
/// mispredicted; a branch whose sampled outcomes vary is, about as often
/// as a real two-bit predictor would be on that sequence.
pub const PREDICTOR_ENTRIES: usize = 4096;
/// See [`PREDICTOR_ENTRIES`]: 2, weakly taken.
pub const PREDICTOR_INITIAL_COUNTER: u8 = 2;

/// The FP and SIMD bits of an "other" operation's Operation Type payload
/// (`SPEConstructClass()`'s `Zeros(5):simd:fp:cond`) are recorded by the
/// profiles with FEAT_SPE_EFT, whose type filters select on them; the
/// others model cores from before those bits (Neoverse N1), whose "other"
/// records carry only the conditional-select bit. QEMU classifies scalar
/// floating-point data processing as FP and every Advanced SIMD operation
/// as SIMD, an Advanced SIMD floating-point one too (not also FP: telling
/// it apart needs the decoder's full tables).
pub const fn other_fp_simd_recorded(eft: bool) -> bool {
    eft
}

/// SVE operations, on a PE with SVE (`SPESampleOpSVEOther()`,
/// `SPESampleOpSVESMELoadStore()`): QEMU classifies them from their
/// encoding groups. Loads and stores are exact: EVL, predicated (all but
/// LDR/STR), gather/scatter. For data processing, "predicated" and the
/// governing predicate are known for the groups that have one in bits
/// 12:10 (integer and FP predicated arithmetic, multiply-add, reductions,
/// unary, SVE2 integer predicated); the other SVE data processing
/// (permutes, predicate operations, unpredicated forms, and the few
/// predicated forms outside those groups) is recorded unpredicated. FP is
/// set for the SVE floating-point groups. EVL is the vector length the
/// instruction ran with. The data address of a predicated SVE load or
/// store is its first active element's; one with no active element
/// accessed nothing: no data address, no L1D, TLB or L2 events.
///
/// The predicate events are computed from the governing predicate when
/// the operation is selected, over the elements of its size: Empty
/// predicate (18) when none is active, Partial predicate (17) when not all
/// are, an empty one included (the PMU's SVE_PRED_NOT_FULL_SPEC counts
/// empty predicates too).
pub const fn sve_recorded(sve: bool) -> bool {
    sve
}

/// `SPEGetDataSourcePayloadSize()`: 2 bytes, as Neoverse cores write it.
pub const DATA_SOURCE_PAYLOAD_BYTES: usize = 2;

/// `SPEGetDataSource()`'s encoding, IMPLEMENTATION DEFINED: the one the
/// Neoverse and recent Cortex cores share (their TRMs' "Data Source
/// packet"; perf decodes it for the MIDRs of N1, N2, V1, V2, and others),
/// from where the memory model ([`crate::uarch`]) served the load: L1D
/// (0), L2 (8), a peer core's cache (9), the system-level cache (11),
/// DRAM (14). The model's events say which: CACHE_DATA_MODIFIED (a
/// peer's modified line), LLC-MISS, L2D-MISS, L1D-REFILL, or none. Stores
/// get no data source (perf reads none for them either), loads of memory
/// outside guest RAM neither. Never emitted: local cluster (10), peer
/// cluster (12), remote (13): one cluster, one socket.
pub const DATA_SOURCE_L1D: u16 = 0x0;
/// See [`DATA_SOURCE_L1D`].
pub const DATA_SOURCE_L2: u16 = 0x8;
/// See [`DATA_SOURCE_L1D`].
pub const DATA_SOURCE_PEER_CORE: u16 = 0x9;
/// See [`DATA_SOURCE_L1D`].
pub const DATA_SOURCE_SYSTEM_CACHE: u16 = 0xb;
/// See [`DATA_SOURCE_L1D`].
pub const DATA_SOURCE_DRAM: u16 = 0xe;

// The events an operation's record can carry: RETIRED; for loads and
// stores L1D-ACCESS and TLB-ACCESS, the cache events of the level the
// memory model ([`crate::uarch`]) served it from (L1D-REFILL, L2D-ACCESS,
// L2D-MISS, LLC-ACCESS, LLC-MISS; from a peer's modified line also
// DATA-SNOOPED and CACHE-DATA-MODIFIED, on a PE whose Events payload has
// them: FEAT_SPEv1p4), TLB-WALK where QEMU's TLB missed, MISALIGNED
// where the access crosses a 64-byte cache line; NOT-TAKEN for a failed
// condition, MISPRED from the predictor, and the SVE predicate events.
// Never: EXCEPTION-GEN, REMOTE-ACCESS (one NUMA node), LFB
// (RECENTLY-FETCHED) and TXN. PMSEVFR_EL1 still filters on all the
// architecture defines for the profile (`SPEFilterByEvents()`'s mask is
// the PE's features, not what happens); a filter on one of these keeps no
// record, as on a core where the event does not occur.

/// `IMPLEMENTATION DEFINED "SPE mask"`: no IMPLEMENTATION DEFINED events
/// are filterable; PMSEVFR_EL1 bits outside the architectural mask are
/// RAZ/WI.
pub const IMPDEF_EVENT_MASK: u64 = 0;

/// Capture events are allowed in Debug state.
pub const CAPTURE_IN_DEBUG_STATE: bool = false;
