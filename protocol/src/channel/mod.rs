//! The QEMU channel: how a patched QEMU (the full-emulation path)
//! reaches the backend without a virtio device. See `protocol/README.md`
//! for the design; this module is the normative layout.
//!
//! Every message is a 16-byte [`Header`] followed by `size` payload bytes,
//! all little-endian. QEMU sends requests; the backend answers each with
//! exactly one reply (type | [`REPLY`]) and never sends anything else on
//! the socket, so a vCPU thread blocked on a reply cannot deadlock against
//! the backend. Asynchronous PMBIRQ changes travel on a separate path: the
//! IRQ area of the shared ring plus an eventfd the backend signals.

mod hello;
mod memory;
pub mod ring;
mod state;
mod sysreg;

// The messages live in files by concern; their paths stay `channel::X`.
pub use hello::{feature, Hello, HelloReply};
pub use memory::{MemRegion, MemTable, RingSetup};
pub use state::{
    context_from_bytes, context_to_bytes, pmu_counters_from_bytes, pmu_counters_to_bytes,
    translation_from_bytes, translation_to_bytes, CONTEXT_SIZE, PMU_COUNTERS_SIZE,
    TRANSLATION_SIZE,
};
pub use sysreg::{Restore, SysregAccess, SysregReply};

use crate::le::{put, u16_at, u32_at};

/// "SPE1", little-endian.
pub const MAGIC: u32 = 0x3145_5053;
/// Bumped on any incompatible change.
pub const VERSION: u32 = 1;
/// Set in a reply's type.
pub const REPLY: u16 = 0x8000;
/// `Header::vcpu` for requests that concern every vCPU.
pub const ALL_VCPUS: u32 = u32::MAX;
/// Largest payload either side accepts.
pub const MAX_PAYLOAD: u32 = 4096;
/// Most memory regions (and so file descriptors) in SET_MEM_TABLE.
pub const MAX_REGIONS: usize = 16;

/// Message types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u16)]
pub enum MsgType {
    /// [`Hello`] → [`HelloReply`]. Must come first.
    Hello = 1,
    /// [`MemTable`] plus one fd per region (SCM_RIGHTS) → [`Status`].
    SetMemTable = 2,
    /// [`RingSetup`] plus three fds: ring memfd, doorbell eventfd (QEMU →
    /// backend), IRQ eventfd (backend → QEMU) → [`Status`].
    SetRing = 3,
    /// [`SysregAccess`] → [`SysregReply`].
    Sysreg = 4,
    /// [`TranslationRegs`](crate::regs::TranslationRegs) → [`Status`].
    SetTranslation = 5,
    /// Empty → [`Status`], after every operation published to the vCPU's
    /// ring (or all rings) is in guest memory (`psb csync`, and before
    /// PMBPTR/PMBSR reads).
    Sync = 6,
    /// Empty → [`Status`]: warm reset of the vCPU's SPU (or all).
    Reset = 7,
    /// [`PmuCounters`] → [`Status`]: the counters a capture copies; sent
    /// before a PMSSCR_EL1 write.
    PmuCounters = 8,
    /// [`PeContext`](crate::regs::PeContext) → [`Status`]: the controlling state changed.
    SetContext = 9,
    /// [`Restore`] → [`Status`]: QEMU reconnected to a backend that
    /// restarted and hands back the registers of one vCPU's SPU (see
    /// [`Restore`]). Only with [`feature::RESTORE`].
    Restore = 10,
}

impl MsgType {
    pub fn from_u16(v: u16) -> Option<MsgType> {
        Some(match v {
            1 => MsgType::Hello,
            2 => MsgType::SetMemTable,
            3 => MsgType::SetRing,
            4 => MsgType::Sysreg,
            5 => MsgType::SetTranslation,
            6 => MsgType::Sync,
            7 => MsgType::Reset,
            8 => MsgType::PmuCounters,
            9 => MsgType::SetContext,
            10 => MsgType::Restore,
            _ => return None,
        })
    }
}

/// Why bytes could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelError {
    BadMagic(u32),
    UnknownType(u16),
    Size {
        what: &'static str,
        got: usize,
        want: usize,
    },
    TooLarge(u32),
    TooManyRegions(u32),
    BadField(&'static str, u64),
}

impl std::fmt::Display for ChannelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChannelError::BadMagic(m) => write!(f, "bad magic {m:#010x}"),
            ChannelError::UnknownType(t) => write!(f, "unknown message type {t:#x}"),
            ChannelError::Size { what, got, want } => {
                write!(f, "{what} is {got} bytes, expected {want}")
            }
            ChannelError::TooLarge(n) => write!(f, "payload of {n} bytes exceeds {MAX_PAYLOAD}"),
            ChannelError::TooManyRegions(n) => write!(f, "{n} memory regions (max {MAX_REGIONS})"),
            ChannelError::BadField(name, v) => write!(f, "invalid {name} {v:#x}"),
        }
    }
}

impl std::error::Error for ChannelError {}

type Result<T> = std::result::Result<T, ChannelError>;

fn expect_len(what: &'static str, b: &[u8], want: usize) -> Result<()> {
    if b.len() == want {
        Ok(())
    } else {
        Err(ChannelError::Size {
            what,
            got: b.len(),
            want,
        })
    }
}

/// The 16-byte message header: magic u32, type u16, flags u16 (0), vcpu
/// u32, size u32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// A [`MsgType`], with [`REPLY`] set on replies.
    pub msg_type: u16,
    pub vcpu: u32,
    pub size: u32,
}

impl Header {
    pub const SIZE: usize = 16;

    pub fn request(t: MsgType, vcpu: u32, size: usize) -> Header {
        Header {
            msg_type: t as u16,
            vcpu,
            size: size as u32,
        }
    }

    pub fn reply_to(&self, size: usize) -> Header {
        Header {
            msg_type: self.msg_type | REPLY,
            vcpu: self.vcpu,
            size: size as u32,
        }
    }

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, &MAGIC.to_le_bytes());
        put(&mut b, 4, &self.msg_type.to_le_bytes());
        put(&mut b, 8, &self.vcpu.to_le_bytes());
        put(&mut b, 12, &self.size.to_le_bytes());
        b
    }

    /// Parses and bounds-checks a header (the payload size, not the type:
    /// [`Header::kind`] does that).
    pub fn from_bytes(b: &[u8]) -> Result<Header> {
        expect_len("header", b, Self::SIZE)?;
        let magic = u32_at(b, 0);
        if magic != MAGIC {
            return Err(ChannelError::BadMagic(magic));
        }
        let size = u32_at(b, 12);
        if size > MAX_PAYLOAD {
            return Err(ChannelError::TooLarge(size));
        }
        Ok(Header {
            msg_type: u16_at(b, 4),
            vcpu: u32_at(b, 8),
            size,
        })
    }

    /// The request type (reply bit cleared).
    pub fn kind(&self) -> Result<MsgType> {
        MsgType::from_u16(self.msg_type & !REPLY).ok_or(ChannelError::UnknownType(self.msg_type))
    }

    pub fn is_reply(&self) -> bool {
        self.msg_type & REPLY != 0
    }
}

/// Generic reply: status u32, pmbirq u32 (level after the request, for
/// the vCPU in the header; 0 for ALL_VCPUS).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    pub status: u32,
    pub pmbirq: bool,
}

impl Status {
    pub const SIZE: usize = 8;
    pub const OK: u32 = 0;
    /// The request is not valid in this state (e.g. before HELLO).
    pub const BAD_STATE: u32 = 1;
    pub const BAD_VCPU: u32 = 2;
    pub const BAD_VERSION: u32 = 3;
    /// The fds or sizes of SET_MEM_TABLE / SET_RING were unusable.
    pub const BAD_RESOURCE: u32 = 4;
    /// HELLO: the guest CPU (its MIDR) is not the core the backend's
    /// profile names.
    pub const BAD_CPU: u32 = 5;
    /// SYSREG outcome for an encoding that is not an SPE register.
    pub const UNKNOWN_REGISTER: u8 = 0x10;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, &self.status.to_le_bytes());
        put(&mut b, 4, &u32::from(self.pmbirq).to_le_bytes());
        b
    }
    pub fn from_bytes(b: &[u8]) -> Result<Status> {
        expect_len("status", b, Self::SIZE)?;
        Ok(Status {
            status: u32_at(b, 0),
            pmbirq: u32_at(b, 4) != 0,
        })
    }
}

#[cfg(test)]
mod tests;
