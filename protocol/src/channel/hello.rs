//! HELLO and its reply: the version and vCPU count QEMU offers, and the
//! features, ID registers and ring size the backend answers with.

use super::{expect_len, Result};
use crate::le::{put, u32_at, u64_at};

/// HELLO: version u32, num_vcpus u32, midr u32, reserved u32.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hello {
    pub version: u32,
    pub num_vcpus: u32,
    /// The guest CPU's MIDR_EL1 (0: not said). The backend refuses a
    /// CPU that is not the core its profile names
    /// ([`Status::BAD_CPU`](super::Status::BAD_CPU)).
    pub midr: u32,
}

impl Hello {
    pub const SIZE: usize = 16;
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, &self.version.to_le_bytes());
        put(&mut b, 4, &self.num_vcpus.to_le_bytes());
        put(&mut b, 8, &self.midr.to_le_bytes());
        b
    }
    pub fn from_bytes(b: &[u8]) -> Result<Hello> {
        expect_len("HELLO", b, Self::SIZE)?;
        Ok(Hello {
            version: u32_at(b, 0),
            num_vcpus: u32_at(b, 4),
            midr: u32_at(b, 8),
        })
    }
}

/// Feature bits of [`HelloReply::features`].
pub mod feature {
    pub const PMU_SS: u64 = 1 << 0;
    pub const PMU_ICNTR: u64 = 1 << 1;
    pub const SPE_EXC: u64 = 1 << 2;
    pub const SPE_NVM: u64 = 1 << 3;
    /// The IRQ entries carry [`ring::SamplingState`](crate::channel::ring::SamplingState) and the
    /// backend applies `ops_counted` (see [`ring`](crate::channel::ring)).
    pub const SAMPLING_STATE: u64 = 1 << 4;
    /// The backend takes [`MsgType::Restore`](crate::channel::MsgType::Restore), and SYSREG replies
    /// name the register an access reached ([`SysregReply::reg`](crate::channel::SysregReply::reg)).
    pub const RESTORE: u64 = 1 << 5;
}

/// HELLO reply: version u32, status u32, features u64, pmsver u32, pmss
/// u32, pmsidr u64, pmbidr u64, pmu_counters u32, ring_slots u32,
/// ring_size u64.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HelloReply {
    pub version: u32,
    /// 0 = accepted; otherwise a [`Status`](super::Status) code (e.g. version mismatch).
    pub status: u32,
    pub features: u64,
    /// ID_AA64DFR0_EL1.PMSVer and .PMSS the CPU must advertise.
    pub pmsver: u32,
    pub pmss: u32,
    pub pmsidr: u64,
    pub pmbidr: u64,
    pub pmu_counters: u32,
    /// Slots in each vCPU's ring (a power of two).
    pub ring_slots: u32,
    /// Bytes of shared memory QEMU must create for SET_RING.
    pub ring_size: u64,
}

impl HelloReply {
    pub const SIZE: usize = 56;
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        put(&mut b, 0, &self.version.to_le_bytes());
        put(&mut b, 4, &self.status.to_le_bytes());
        put(&mut b, 8, &self.features.to_le_bytes());
        put(&mut b, 16, &self.pmsver.to_le_bytes());
        put(&mut b, 20, &self.pmss.to_le_bytes());
        put(&mut b, 24, &self.pmsidr.to_le_bytes());
        put(&mut b, 32, &self.pmbidr.to_le_bytes());
        put(&mut b, 40, &self.pmu_counters.to_le_bytes());
        put(&mut b, 44, &self.ring_slots.to_le_bytes());
        put(&mut b, 48, &self.ring_size.to_le_bytes());
        b
    }
    pub fn from_bytes(b: &[u8]) -> Result<HelloReply> {
        expect_len("HELLO reply", b, Self::SIZE)?;
        Ok(HelloReply {
            version: u32_at(b, 0),
            status: u32_at(b, 4),
            features: u64_at(b, 8),
            pmsver: u32_at(b, 16),
            pmss: u32_at(b, 20),
            pmsidr: u64_at(b, 24),
            pmbidr: u64_at(b, 32),
            pmu_counters: u32_at(b, 40),
            ring_slots: u32_at(b, 44),
            ring_size: u64_at(b, 48),
        })
    }
}
