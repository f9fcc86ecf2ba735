//! Builds VMSAv8-64 translation tables in guest memory: for tests,
//! benchmarks, and front ends that need a buffer mapped for a guest that
//! has none of its own (the synthetic source).

use super::translate::{start_level, Granule};
use vm_memory::{Bytes, GuestAddress, GuestMemory, GuestMemoryError};

type Result<T> = std::result::Result<T, GuestMemoryError>;

/// Leaf attributes of a normal, writable, accessed kernel page.
pub const PAGE_RW: u64 = 1 << 10 | 0b11 << 8 | 1 << 2; // AF, inner-shareable, AttrIndx 1

/// Builds translation tables in guest memory with a bump allocator.
pub struct TableBuilder {
    pub granule: Granule,
    pub ia_bits: u32,
    pub root: u64,
    next: u64,
}

impl TableBuilder {
    /// Tables allocated from `pool` upwards.
    pub fn new<M: GuestMemory>(
        mem: &M,
        granule: Granule,
        ia_bits: u32,
        pool: u64,
    ) -> Result<TableBuilder> {
        let mut b = TableBuilder {
            granule,
            ia_bits,
            root: 0,
            next: pool,
        };
        b.root = b.alloc(mem)?;
        Ok(b)
    }

    fn alloc<M: GuestMemory>(&mut self, mem: &M) -> Result<u64> {
        let size = 1u64 << self.granule.bits();
        let a = self.next;
        self.next += size;
        mem.write_slice(&vec![0u8; size as usize], GuestAddress(a))?;
        Ok(a)
    }

    /// Maps one page at `va` to `pa` with leaf bits `attrs` (valid and
    /// page-type bits are added).
    pub fn map<M: GuestMemory>(&mut self, mem: &M, va: u64, pa: u64, attrs: u64) -> Result<()> {
        let slot = self.walk(mem, va, true)?;
        mem.write_obj(pa | attrs | 0b11, slot)
    }

    /// The leaf descriptor's address for `va`, whose tables must exist.
    pub fn leaf_slot<M: GuestMemory>(&mut self, mem: &M, va: u64) -> Result<GuestAddress> {
        self.walk(mem, va, false)
    }

    /// Walks to the level 3 slot for `va`, allocating missing tables when
    /// `alloc` (otherwise a missing table reads as table 0).
    fn walk<M: GuestMemory>(&mut self, mem: &M, va: u64, alloc: bool) -> Result<GuestAddress> {
        let g = self.granule.bits();
        let stride = g - 3;
        let start = start_level(self.ia_bits, self.granule);
        let mut table = self.root;
        let mut level = start;
        loop {
            let shift = g + (3 - level) as u32 * stride;
            let width = if level == start {
                self.ia_bits - shift
            } else {
                stride
            };
            let slot = GuestAddress(table + ((va >> shift) & ((1 << width) - 1)) * 8);
            if level == 3 {
                return Ok(slot);
            }
            let desc: u64 = mem.read_obj(slot)?;
            table = if desc & 1 == 1 || !alloc {
                desc & 0x0000_FFFF_FFFF_F000 & !((1 << g) - 1)
            } else {
                let t = self.alloc(mem)?;
                mem.write_obj(t | 0b11, slot)?;
                t
            };
            level += 1;
        }
    }
}

/// TCR_EL1 for a kernel half (TTBR1) of `ia_bits` with `granule`, and a
/// 48-bit user half, TBI1 off.
pub fn tcr_el1(granule: Granule, ia_bits: u32) -> u64 {
    let tg1 = match granule {
        Granule::K16 => 0b01,
        Granule::K4 => 0b10,
        Granule::K64 => 0b11,
    };
    let t1sz = u64::from(64 - ia_bits);
    16 | t1sz << 16 | tg1 << 30 | 0b101 << 32
}
