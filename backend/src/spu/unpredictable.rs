//! Every CONSTRAINED UNPREDICTABLE and IMPLEMENTATION DEFINED choice the
//! model makes, in one place. Each constant names the pseudocode's
//! `Unpredictable_*` or `IMPLEMENTATION_DEFINED` string it answers.

/// `Unpredictable_BADPMSFCR`: a filter enabled with nothing to filter on
/// (PMSFCR.FE = 1 with PMSEVFR zero, FT = 1 with no type bits, FL = 1 with
/// MINLAT zero, or FE and FnE naming the same event). We keep the record:
/// the filter rejects nothing.
pub const BADPMSFCR_REJECTS: bool = false;

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

/// `IMPLEMENTATION DEFINED "SPE non-tbi tag is zero"`: FALSE, the data VA
/// packet carries all 64 bits of the address.
pub const NON_TBI_TAG_IS_ZERO: bool = false;

/// `IMPLEMENTATION DEFINED "SPE Events packet payload size"`: 2 bytes, or 4
/// bytes from FEAT_SPEv1p4 (its events reach bit 25).
pub const fn events_payload_size(v1p4: bool) -> usize {
    if v1p4 {
        4
    } else {
        2
    }
}

/// `IMPLEMENTATION DEFINED "SPE mask"`: no IMPLEMENTATION DEFINED events
/// are filterable; PMSEVFR_EL1 bits outside the architectural mask are
/// RAZ/WI.
pub const IMPDEF_EVENT_MASK: u64 = 0;

/// Software broke RHXSYK (the write pointer is not a record below the
/// limit when a record is written). Of the permitted behaviours we raise a
/// buffer-full management event with PMBSR.DL = 1 and drop the record:
/// nothing is ever written at or beyond the limit.
pub const OVERRUN_IS_BUFFER_FULL_WITH_DL: bool = true;

/// Capture events are allowed in Debug state.
pub const CAPTURE_IN_DEBUG_STATE: bool = false;
