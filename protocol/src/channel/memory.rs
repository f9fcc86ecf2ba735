//! The memory QEMU shares: guest RAM (SET_MEM_TABLE) and the ring
//! (SET_RING).

use super::{expect_len, ChannelError, Result, MAX_REGIONS};
use crate::le::{put, u32_at, u64_at};

/// One guest RAM region of SET_MEM_TABLE: gpa u64, size u64, fd_offset
/// u64 (offset of the region in its fd).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemRegion {
    pub gpa: u64,
    pub size: u64,
    pub fd_offset: u64,
}

/// SET_MEM_TABLE: count u32, reserved u32, then `count` [`MemRegion`]s; the
/// message carries one fd per region, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemTable {
    pub regions: Vec<MemRegion>,
}

impl MemTable {
    pub const REGION_SIZE: usize = 24;
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; 8 + self.regions.len() * Self::REGION_SIZE];
        put(&mut b, 0, &(self.regions.len() as u32).to_le_bytes());
        for (i, r) in self.regions.iter().enumerate() {
            let o = 8 + i * Self::REGION_SIZE;
            put(&mut b, o, &r.gpa.to_le_bytes());
            put(&mut b, o + 8, &r.size.to_le_bytes());
            put(&mut b, o + 16, &r.fd_offset.to_le_bytes());
        }
        b
    }
    pub fn from_bytes(b: &[u8]) -> Result<MemTable> {
        if b.len() < 8 {
            return Err(ChannelError::Size {
                what: "SET_MEM_TABLE",
                got: b.len(),
                want: 8,
            });
        }
        let n = u32_at(b, 0);
        if n as usize > MAX_REGIONS {
            return Err(ChannelError::TooManyRegions(n));
        }
        expect_len("SET_MEM_TABLE", b, 8 + n as usize * Self::REGION_SIZE)?;
        let regions = (0..n as usize)
            .map(|i| {
                let o = 8 + i * Self::REGION_SIZE;
                MemRegion {
                    gpa: u64_at(b, o),
                    size: u64_at(b, o + 8),
                    fd_offset: u64_at(b, o + 16),
                }
            })
            .collect();
        Ok(MemTable { regions })
    }
}

/// SET_RING: size u64 (must equal [`HelloReply::ring_size`](super::HelloReply::ring_size)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingSetup {
    pub size: u64,
}

impl RingSetup {
    pub const SIZE: usize = 8;
    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        self.size.to_le_bytes()
    }
    pub fn from_bytes(b: &[u8]) -> Result<RingSetup> {
        expect_len("SET_RING", b, Self::SIZE)?;
        Ok(RingSetup { size: u64_at(b, 0) })
    }
}
