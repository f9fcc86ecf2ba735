//! TEMPORARY STAND-IN (branch `vhu` only): the minimal subset of the lead's
//! `spe_protocol::regs` that the vhost-user front end compiles against.
//! Delete when main's real `regs.rs` is merged.

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SysReg {
    PmscrEl1,
    PmsicrEl1,
    PmsirrEl1,
    PmsfcrEl1,
    PmsidrEl1,
    PmblimitrEl1,
    PmbptrEl1,
    PmbsrEl1,
    PmbidrEl1,
    PmsscrEl1,
}

pub const fn encode(op0: u32, op1: u32, crn: u32, crm: u32, op2: u32) -> u32 {
    op0 << 14 | op1 << 11 | crn << 7 | crm << 3 | op2
}

impl SysReg {
    const ALL: [SysReg; 10] = [
        SysReg::PmscrEl1,
        SysReg::PmsicrEl1,
        SysReg::PmsirrEl1,
        SysReg::PmsfcrEl1,
        SysReg::PmsidrEl1,
        SysReg::PmblimitrEl1,
        SysReg::PmbptrEl1,
        SysReg::PmbsrEl1,
        SysReg::PmbidrEl1,
        SysReg::PmsscrEl1,
    ];

    pub const fn encoding(self) -> u32 {
        match self {
            SysReg::PmscrEl1 => encode(3, 0, 9, 9, 0),
            SysReg::PmsicrEl1 => encode(3, 0, 9, 9, 2),
            SysReg::PmsirrEl1 => encode(3, 0, 9, 9, 3),
            SysReg::PmsfcrEl1 => encode(3, 0, 9, 9, 4),
            SysReg::PmsidrEl1 => encode(3, 0, 9, 9, 7),
            SysReg::PmblimitrEl1 => encode(3, 0, 9, 10, 0),
            SysReg::PmbptrEl1 => encode(3, 0, 9, 10, 1),
            SysReg::PmbsrEl1 => encode(3, 0, 9, 10, 3),
            SysReg::PmbidrEl1 => encode(3, 0, 9, 10, 7),
            SysReg::PmsscrEl1 => encode(3, 0, 9, 13, 3),
        }
    }

    pub fn from_encoding(enc: u32) -> Option<SysReg> {
        Self::ALL.into_iter().find(|r| r.encoding() == enc)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum AccessOutcome {
    Ok = 0,
    Undefined = 1,
    TrapToEl2 = 2,
    TrapToEl3 = 3,
}
