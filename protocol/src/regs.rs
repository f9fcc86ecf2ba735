//! SPE and PMU-snapshot system registers: identifiers, encodings and fields.
//!
//! Encodings follow QEMU's and gdb's numbering,
//! `op0<<14 | op1<<11 | CRn<<7 | CRm<<3 | op2`, which is also what crosses
//! every socket of this project.

/// An SPE or FEAT_PMUv3_SS system register, as the PE names it.
///
/// Aliases are distinct identifiers (`PmscrEl12` is not `PmscrEl1`): which
/// storage they reach depends on the accessing EL and HCR_EL2.E2H, which the
/// model resolves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SysReg {
    PmscrEl1,
    PmscrEl2,
    PmscrEl12,
    PmsnevfrEl1,
    PmsicrEl1,
    PmsirrEl1,
    PmsfcrEl1,
    PmsevfrEl1,
    PmslatfrEl1,
    PmsidrEl1,
    PmblimitrEl1,
    PmbptrEl1,
    PmbsrEl1,
    PmbsrEl2,
    PmbsrEl3,
    PmsdsfrEl1,
    PmbmarEl1,
    PmbidrEl1,
    PmsscrEl1,
    PmecrEl1,
    /// PMEVCNTSVR<n>_EL1, n in 0..=30.
    PmevcntsvrEl1(u8),
    PmccntsvrEl1,
    PmicntsvrEl1,
}

/// Builds the 16-bit encoding from (op0, op1, CRn, CRm, op2).
pub const fn encode(op0: u32, op1: u32, crn: u32, crm: u32, op2: u32) -> u32 {
    op0 << 14 | op1 << 11 | crn << 7 | crm << 3 | op2
}

impl SysReg {
    /// Every register except the per-counter snapshot registers, which
    /// [`SysReg::all`] adds.
    const FIXED: [SysReg; 22] = [
        SysReg::PmscrEl1,
        SysReg::PmscrEl2,
        SysReg::PmscrEl12,
        SysReg::PmsnevfrEl1,
        SysReg::PmsicrEl1,
        SysReg::PmsirrEl1,
        SysReg::PmsfcrEl1,
        SysReg::PmsevfrEl1,
        SysReg::PmslatfrEl1,
        SysReg::PmsidrEl1,
        SysReg::PmblimitrEl1,
        SysReg::PmbptrEl1,
        SysReg::PmbsrEl1,
        SysReg::PmbsrEl2,
        SysReg::PmbsrEl3,
        SysReg::PmsdsfrEl1,
        SysReg::PmbmarEl1,
        SysReg::PmbidrEl1,
        SysReg::PmsscrEl1,
        SysReg::PmecrEl1,
        SysReg::PmccntsvrEl1,
        SysReg::PmicntsvrEl1,
    ];

    /// All registers, in a fixed order.
    pub fn all() -> impl Iterator<Item = SysReg> {
        Self::FIXED
            .into_iter()
            .chain((0..=30).map(SysReg::PmevcntsvrEl1))
    }

    /// The (op0, op1, CRn, CRm, op2) encoding, packed as QEMU does.
    pub const fn encoding(self) -> u32 {
        match self {
            SysReg::PmscrEl1 => encode(3, 0, 9, 9, 0),
            SysReg::PmsnevfrEl1 => encode(3, 0, 9, 9, 1),
            SysReg::PmsicrEl1 => encode(3, 0, 9, 9, 2),
            SysReg::PmsirrEl1 => encode(3, 0, 9, 9, 3),
            SysReg::PmsfcrEl1 => encode(3, 0, 9, 9, 4),
            SysReg::PmsevfrEl1 => encode(3, 0, 9, 9, 5),
            SysReg::PmslatfrEl1 => encode(3, 0, 9, 9, 6),
            SysReg::PmsidrEl1 => encode(3, 0, 9, 9, 7),
            SysReg::PmblimitrEl1 => encode(3, 0, 9, 10, 0),
            SysReg::PmbptrEl1 => encode(3, 0, 9, 10, 1),
            SysReg::PmbsrEl1 => encode(3, 0, 9, 10, 3),
            SysReg::PmsdsfrEl1 => encode(3, 0, 9, 10, 4),
            SysReg::PmbmarEl1 => encode(3, 0, 9, 10, 5),
            SysReg::PmbidrEl1 => encode(3, 0, 9, 10, 7),
            SysReg::PmscrEl2 => encode(3, 4, 9, 9, 0),
            SysReg::PmbsrEl2 => encode(3, 4, 9, 10, 3),
            SysReg::PmbsrEl3 => encode(3, 6, 9, 10, 3),
            SysReg::PmscrEl12 => encode(3, 5, 9, 9, 0),
            SysReg::PmsscrEl1 => encode(3, 0, 9, 13, 3),
            SysReg::PmecrEl1 => encode(3, 0, 9, 14, 5),
            SysReg::PmevcntsvrEl1(n) => encode(2, 0, 14, 8 + (n as u32 >> 3), n as u32 & 7),
            SysReg::PmccntsvrEl1 => encode(2, 0, 14, 11, 7),
            SysReg::PmicntsvrEl1 => encode(2, 0, 14, 12, 0),
        }
    }

    /// The register with this encoding, if it is one of ours.
    pub fn from_encoding(enc: u32) -> Option<SysReg> {
        SysReg::all().find(|r| r.encoding() == enc)
    }

    /// The architectural name, e.g. `PMSCR_EL1`.
    pub fn name(self) -> String {
        match self {
            SysReg::PmevcntsvrEl1(n) => format!("PMEVCNTSVR{n}_EL1"),
            r => format!("{r:?}")
                .to_uppercase()
                .replace("EL1", "_EL1")
                .replace("EL2", "_EL2")
                .replace("EL3", "_EL3")
                .replace("EL12", "_EL12")
                .replace("__", "_"),
        }
    }
}

/// The outcome of a system-register access check, as the pseudocode's
/// `SysRegAccess` (and `AArch64.SystemAccessTrap` targets) define it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum AccessOutcome {
    Ok = 0,
    Undefined = 1,
    TrapToEl2 = 2,
    TrapToEl3 = 3,
}

impl AccessOutcome {
    pub fn from_u8(v: u8) -> Option<Self> {
        Some(match v {
            0 => AccessOutcome::Ok,
            1 => AccessOutcome::Undefined,
            2 => AccessOutcome::TrapToEl2,
            3 => AccessOutcome::TrapToEl3,
            _ => return None,
        })
    }
}

/// A contiguous bit field `[hi:lo]` of a 64-bit register.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    pub lo: u32,
    pub width: u32,
}

impl Field {
    pub const fn bits(hi: u32, lo: u32) -> Field {
        Field {
            lo,
            width: hi - lo + 1,
        }
    }
    pub const fn bit(b: u32) -> Field {
        Field { lo: b, width: 1 }
    }
    pub const fn mask(self) -> u64 {
        (u64::MAX >> (64 - self.width)) << self.lo
    }
    pub const fn get(self, reg: u64) -> u64 {
        (reg & self.mask()) >> self.lo
    }
    pub const fn set(self, reg: u64, v: u64) -> u64 {
        (reg & !self.mask()) | ((v << self.lo) & self.mask())
    }
    pub const fn is_set(self, reg: u64) -> bool {
        self.get(reg) != 0
    }
}

macro_rules! fields {
    ($(#[$m:meta])* $reg:ident { $($name:ident = $f:expr),* $(,)? }) => {
        $(#[$m])*
        #[allow(non_snake_case)]
        pub mod $reg {
            use super::Field;
            $(pub const $name: Field = $f;)*
            /// Every field by name, for checks against other sources.
            pub const ALL: &[(&str, Field)] = &[$((stringify!($name), $name)),*];
        }
    };
}

fields!(
    /// PMSCR_EL1 (and PMSCR_EL12).
    PMSCR_EL1 { E0SPE = Field::bit(0), E1SPE = Field::bit(1), CX = Field::bit(3),
        PA = Field::bit(4), TS = Field::bit(5), PCT = Field::bits(7, 6),
        EE = Field::bits(9, 8), KE = Field::bit(10) }
);
fields!(
    /// PMSCR_EL2 (seed 002).
    PMSCR_EL2 { E0HSPE = Field::bit(0), E2SPE = Field::bit(1), CX = Field::bit(3),
        PA = Field::bit(4), TS = Field::bit(5), PCT = Field::bits(7, 6),
        EE = Field::bits(9, 8), KE = Field::bit(10), ENVM = Field::bit(11) }
);
fields!(
    /// PMSICR_EL1.
    PMSICR_EL1 { COUNT = Field::bits(31, 0), ECOUNT = Field::bits(63, 56) }
);
fields!(
    /// PMSIRR_EL1.
    PMSIRR_EL1 { RND = Field::bit(0), INTERVAL = Field::bits(31, 8) }
);
fields!(
    /// PMSFCR_EL1.
    PMSFCR_EL1 { FE = Field::bit(0), FT = Field::bit(1), FL = Field::bit(2),
        FNE = Field::bit(3), FDS = Field::bit(4), TYPE = Field::bits(20, 16),
        B = Field::bit(16), LD = Field::bit(17), ST = Field::bit(18), FP = Field::bit(19),
        SIMD = Field::bit(20), BM = Field::bit(48), LDM = Field::bit(49), STM = Field::bit(50),
        FPM = Field::bit(51), SIMDM = Field::bit(52), TYPEM = Field::bits(52, 48) }
);
fields!(
    /// PMSLATFR_EL1.
    PMSLATFR_EL1 { MINLAT = Field::bits(15, 0) }
);
fields!(
    /// PMSIDR_EL1.
    PMSIDR_EL1 { FE = Field::bit(0), FT = Field::bit(1), FL = Field::bit(2),
        ARCHINST = Field::bit(3), LDS = Field::bit(4), ERND = Field::bit(5), FNE = Field::bit(6),
        FDS = Field::bit(7), INTERVAL = Field::bits(11, 8), MAXSIZE = Field::bits(15, 12),
        COUNTSIZE = Field::bits(19, 16), FORMAT = Field::bits(23, 20), PBT = Field::bit(24),
        EFT = Field::bit(26) }
);
fields!(
    /// PMBLIMITR_EL1. nVM is bit 7 in the current Arm ARM (DDI0487 L.a).
    PMBLIMITR_EL1 { E = Field::bit(0), FM = Field::bits(2, 1), PMFZ = Field::bit(5),
        NVM = Field::bit(7), LIMIT = Field::bits(63, 12) }
);
fields!(
    /// PMBSR_EL1/EL2/EL3.
    PMBSR { MSS = Field::bits(15, 0), BSC = Field::bits(5, 0), FSC = Field::bits(5, 0),
        COLL = Field::bit(16), S = Field::bit(17), EA = Field::bit(18), DL = Field::bit(19),
        MSS2 = Field::bits(55, 32), EC = Field::bits(31, 26) }
);
fields!(
    /// PMBIDR_EL1.
    PMBIDR_EL1 { ALIGN = Field::bits(3, 0), P = Field::bit(4), F = Field::bit(5) }
);
fields!(
    /// PMSSCR_EL1.
    PMSSCR_EL1 { SS = Field::bit(0), NC = Field::bit(32) }
);
fields!(
    /// PMECR_EL1.
    PMECR_EL1 { PMEE = Field::bits(1, 0), KPME = Field::bit(2), SSE = Field::bits(4, 3) }
);
fields!(
    /// SCR_EL3, the fields the model reads.
    SCR_EL3 { NS = Field::bit(0), EEL2 = Field::bit(18), NSE = Field::bit(62) }
);
// MDCR_EL3.{PMSEE, PMSSE} and MDCR_EL2.PMSSE positions are from the Arm ARM
// register descriptions (DDI0487 L.a); the seeds do not give them.
fields!(
    /// MDCR_EL3, the fields the model reads.
    MDCR_EL3 { NSPB = Field::bits(13, 12), PMSEE = Field::bits(43, 42),
        PMSSE = Field::bits(47, 46), NSPBE = Field::bit(11) }
);
fields!(
    /// MDCR_EL2, the fields the model reads.
    MDCR_EL2 { TPMS = Field::bit(14), E2PB = Field::bits(13, 12), HPMFZS = Field::bit(36),
        PMSSE = Field::bits(31, 30) }
);
fields!(
    /// HCR_EL2, the fields the model reads.
    HCR_EL2 { VM = Field::bit(0), TGE = Field::bit(27), E2H = Field::bit(34) }
);
fields!(
    /// ID_AA64DFR0_EL1, the SPE and snapshot fields.
    ID_AA64DFR0_EL1 { PMSVER = Field::bits(35, 32), PMSS = Field::bits(19, 16) }
);

/// PMBSR_EL1.EC values.
pub mod pmbsr_ec {
    pub const BUFFER: u64 = 0x00;
    pub const GPC_FAULT: u64 = 0x1E;
    pub const IMP_DEF: u64 = 0x1F;
    pub const STAGE1_DATA_ABORT: u64 = 0x24;
    pub const STAGE2_DATA_ABORT: u64 = 0x25;
}

/// PMBSR_EL1.BSC values when EC is 0.
pub mod pmbsr_bsc {
    pub const BUFFER_FILLED: u64 = 0x01;
    pub const SIZE_TOO_LARGE: u64 = 0x04;
}

/// ID_AA64DFR0_EL1.PMSVer values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum PmsVer {
    V1 = 1,
    V1p1 = 2,
    V1p2 = 3,
    V1p3 = 4,
    V1p4 = 5,
}

/// Exception level.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u8)]
pub enum El {
    El0 = 0,
    El1 = 1,
    El2 = 2,
    El3 = 3,
}

impl El {
    pub fn from_u8(v: u8) -> Option<El> {
        Some(match v {
            0 => El::El0,
            1 => El::El1,
            2 => El::El2,
            3 => El::El3,
            _ => return None,
        })
    }
}

/// Security state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum SecurityState {
    Secure = 0,
    NonSecure = 1,
    Root = 2,
    Realm = 3,
}

/// The PE state that controls the SPU, as raw register values plus the
/// current exception level. Front ends send it whenever it changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeContext {
    /// Current exception level (the accessing EL for register accesses).
    pub el: El,
    pub scr_el3: u64,
    pub mdcr_el3: u64,
    pub mdcr_el2: u64,
    pub hcr_el2: u64,
    /// The PE is in Debug state (`Halted()`).
    pub halted: bool,
    /// The OS Lock is locked (`OSLockStatus()`).
    pub os_lock: bool,
    pub cntvoff_el2: u64,
    pub cntpoff_el2: u64,
}

impl Default for PeContext {
    /// A Non-secure EL1 kernel: what a Linux guest without EL2/EL3 is.
    fn default() -> Self {
        PeContext {
            el: El::El1,
            scr_el3: SCR_EL3::NS.mask(),
            // NSPB = 0b11: Non-secure owns the buffer; E2PB = 0b11: EL1 owns it.
            mdcr_el3: MDCR_EL3::NSPB.set(0, 0b11)
                | MDCR_EL3::PMSEE.set(0, 0b01)
                | MDCR_EL3::PMSSE.set(0, 0b01),
            mdcr_el2: MDCR_EL2::E2PB.set(0, 0b11) | MDCR_EL2::PMSSE.set(0, 0b01),
            hcr_el2: 0,
            halted: false,
            os_lock: false,
            cntvoff_el2: 0,
            cntpoff_el2: 0,
        }
    }
}

/// The translation registers the SPU needs to write a virtually addressed
/// Profiling Buffer (nVM = 0) in the owning translation regime.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TranslationRegs {
    pub sctlr_el1: u64,
    pub tcr_el1: u64,
    pub ttbr0_el1: u64,
    pub ttbr1_el1: u64,
    pub sctlr_el2: u64,
    pub tcr_el2: u64,
    pub ttbr0_el2: u64,
    pub ttbr1_el2: u64,
    pub vtcr_el2: u64,
    pub vttbr_el2: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodings_match_reference() {
        // reference/registers.md gives these two numbers explicitly.
        assert_eq!(SysReg::PmscrEl1.encoding(), 0xC4C8);
        assert_eq!(SysReg::PmbsrEl1.encoding(), 0xC4D3);
        assert_eq!(SysReg::PmevcntsvrEl1(9).encoding(), encode(2, 0, 14, 9, 1));
    }

    #[test]
    fn encodings_are_unique_and_round_trip() {
        let all: Vec<_> = SysReg::all().collect();
        assert_eq!(all.len(), 22 + 31);
        for r in &all {
            assert_eq!(SysReg::from_encoding(r.encoding()), Some(*r), "{r:?}");
        }
        assert_eq!(SysReg::from_encoding(0), None);
    }

    #[test]
    fn names() {
        assert_eq!(SysReg::PmscrEl12.name(), "PMSCR_EL12");
        assert_eq!(SysReg::PmbsrEl2.name(), "PMBSR_EL2");
        assert_eq!(SysReg::PmevcntsvrEl1(3).name(), "PMEVCNTSVR3_EL1");
        assert_eq!(SysReg::PmblimitrEl1.name(), "PMBLIMITR_EL1");
    }

    #[test]
    fn field_accessors() {
        let v = PMSIRR_EL1::INTERVAL.set(0, 1024 >> 8) | 1;
        assert_eq!(v, 0x401);
        assert_eq!(PMSIRR_EL1::INTERVAL.get(v), 4);
        assert!(PMSIRR_EL1::RND.is_set(v));
        assert_eq!(PMBSR::EC.mask(), 0xFC00_0000);
        assert_eq!(PMSICR_EL1::ECOUNT.mask(), 0xFF00_0000_0000_0000);
    }
}
