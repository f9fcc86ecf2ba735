//! SPE register accesses (SYSREG) and their values handed back to a
//! backend that restarted (RESTORE).

use super::{
    context_from_bytes, context_to_bytes, expect_len, ChannelError, Result, CONTEXT_SIZE,
    MAX_PAYLOAD,
};
use crate::le::{put, u32_at, u64_at};
use crate::regs::PeContext;

/// SYSREG: encoding u32, is_write u8, reserved[3], value u64, then the
/// accessing context (CONTEXT_SIZE bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysregAccess {
    pub encoding: u32,
    pub is_write: bool,
    pub value: u64,
    pub ctx: PeContext,
}

impl SysregAccess {
    pub const SIZE: usize = 16 + CONTEXT_SIZE;
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, &self.encoding.to_le_bytes());
        b[4] = u8::from(self.is_write);
        put(&mut b, 8, &self.value.to_le_bytes());
        context_to_bytes(&self.ctx, &mut b[16..]);
        b
    }
    pub fn from_bytes(b: &[u8]) -> Result<SysregAccess> {
        expect_len("SYSREG", b, Self::SIZE)?;
        if b[4] > 1 {
            return Err(ChannelError::BadField("is_write", u64::from(b[4])));
        }
        Ok(SysregAccess {
            encoding: u32_at(b, 0),
            is_write: b[4] == 1,
            value: u64_at(b, 8),
            ctx: context_from_bytes(&b[16..])?,
        })
    }
}

/// SYSREG reply: outcome u8 (`AccessOutcome`, or [`Status::UNKNOWN_REGISTER`](super::Status::UNKNOWN_REGISTER)),
/// pmbirq u8, reserved[2], reg u32, value u64 (the read value; 0 for
/// writes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SysregReply {
    pub outcome: u8,
    pub pmbirq: bool,
    /// The encoding of the register the access reached (PMSCR_EL2 for
    /// PMSCR_EL1 at a host EL2, PMSCR_EL1 for PMSCR_EL12), 0 unless the
    /// access succeeded: what QEMU keeps for [`Restore`].
    pub reg: u32,
    pub value: u64,
}

impl SysregReply {
    pub const SIZE: usize = 16;
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0] = self.outcome;
        b[1] = u8::from(self.pmbirq);
        put(&mut b, 4, &self.reg.to_le_bytes());
        put(&mut b, 8, &self.value.to_le_bytes());
        b
    }
    pub fn from_bytes(b: &[u8]) -> Result<SysregReply> {
        expect_len("SYSREG reply", b, Self::SIZE)?;
        Ok(SysregReply {
            outcome: b[0],
            pmbirq: b[1] != 0,
            reg: u32_at(b, 4),
            value: u64_at(b, 8),
        })
    }
}

/// RESTORE: count u32, reserved u32, then `count` entries of encoding u32,
/// reserved u32, value u64: the last value the guest wrote to (or read
/// from) each register of the vCPU's SPU, by the encoding of the register
/// its access reached ([`SysregReply::reg`]).
///
/// QEMU sends it for each vCPU after HELLO, SET_MEM_TABLE and SET_RING
/// when it reconnects to a backend that restarted. The backend stores the
/// values as they are, without the side effects of a write, then reports
/// what it cannot rebuild (the records the old process had in flight, and
/// any written since the guest last read PMBPTR) as data loss: with the
/// buffer enabled, a buffer management event with PMBSR.DL set (see the
/// backend's `unpredictable.rs`). An encoding that is not a register the
/// backend can restore refuses the whole request with
/// [`Status::BAD_STATE`](super::Status::BAD_STATE); the SPU is then left at reset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Restore {
    pub regs: Vec<(u32, u64)>,
}

impl Restore {
    pub const ENTRY_SIZE: usize = 16;
    /// Most entries one message carries.
    pub const MAX_ENTRIES: usize = (MAX_PAYLOAD as usize - 8) / Self::ENTRY_SIZE;

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; 8 + self.regs.len() * Self::ENTRY_SIZE];
        put(&mut b, 0, &(self.regs.len() as u32).to_le_bytes());
        for (i, (enc, value)) in self.regs.iter().enumerate() {
            let o = 8 + i * Self::ENTRY_SIZE;
            put(&mut b, o, &enc.to_le_bytes());
            put(&mut b, o + 8, &value.to_le_bytes());
        }
        b
    }
    pub fn from_bytes(b: &[u8]) -> Result<Restore> {
        if b.len() < 8 {
            return Err(ChannelError::Size {
                what: "RESTORE",
                got: b.len(),
                want: 8,
            });
        }
        let n = u32_at(b, 0) as usize;
        if n > Self::MAX_ENTRIES {
            return Err(ChannelError::BadField("RESTORE count", n as u64));
        }
        expect_len("RESTORE", b, 8 + n * Self::ENTRY_SIZE)?;
        let regs = (0..n)
            .map(|i| {
                let o = 8 + i * Self::ENTRY_SIZE;
                (u32_at(b, o), u64_at(b, o + 8))
            })
            .collect();
        Ok(Restore { regs })
    }
}
