//! Test helpers: guest memory, translation tables built in it, and a Spu
//! programmed the way Linux's driver programs it.

use super::translate::{start_level, Granule};
use super::{Features, Spu};
use spe_protocol::op::{OpClass, SampledOp};
use spe_protocol::packet::events;
use spe_protocol::regs::*;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

pub type Mem = GuestMemoryMmap<()>;

/// Guest RAM at [0, size).
pub fn mem(size: usize) -> Mem {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), size)]).unwrap()
}

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
    pub fn new(mem: &Mem, granule: Granule, ia_bits: u32, pool: u64) -> TableBuilder {
        let mut b = TableBuilder {
            granule,
            ia_bits,
            root: 0,
            next: pool,
        };
        b.root = b.alloc(mem);
        b
    }

    fn alloc(&mut self, mem: &Mem) -> u64 {
        let size = 1u64 << self.granule.bits();
        let a = self.next;
        self.next += size;
        mem.write_slice(&vec![0u8; size as usize], GuestAddress(a))
            .unwrap();
        a
    }

    /// Maps one page at `va` to `pa` with leaf bits `attrs` (valid and
    /// page-type bits are added).
    pub fn map(&mut self, mem: &Mem, va: u64, pa: u64, attrs: u64) {
        let g = self.granule.bits();
        let stride = g - 3;
        let start = start_level(self.ia_bits, self.granule);
        let mut table = self.root;
        for level in start..=3 {
            let shift = g + (3 - level) as u32 * stride;
            let width = if level == start {
                self.ia_bits - shift
            } else {
                stride
            };
            let idx = (va >> shift) & ((1 << width) - 1);
            let slot = GuestAddress(table + idx * 8);
            if level == 3 {
                mem.write_obj(pa | attrs | 0b11, slot).unwrap();
                return;
            }
            let desc: u64 = mem.read_obj(slot).unwrap();
            table = if desc & 1 == 1 {
                desc & 0x0000_FFFF_FFFF_F000 & !((1 << g) - 1)
            } else {
                let t = self.alloc(mem);
                mem.write_obj(t | 0b11, slot).unwrap();
                t
            };
        }
    }

    /// The leaf descriptor's address for `va` (which must be mapped).
    pub fn leaf_slot(&self, mem: &Mem, va: u64) -> GuestAddress {
        let g = self.granule.bits();
        let stride = g - 3;
        let start = start_level(self.ia_bits, self.granule);
        let mut table = self.root;
        for level in start..=3 {
            let shift = g + (3 - level) as u32 * stride;
            let width = if level == start {
                self.ia_bits - shift
            } else {
                stride
            };
            let slot = GuestAddress(table + ((va >> shift) & ((1 << width) - 1)) * 8);
            if level == 3 {
                return slot;
            }
            let desc: u64 = mem.read_obj(slot).unwrap();
            table = desc & 0x0000_FFFF_FFFF_F000 & !((1 << g) - 1);
        }
        unreachable!()
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

/// The kernel VA where the tests' buffer lives (a vmalloc address).
pub const BUF_VA: u64 = 0xFFFF_8000_1000_0000;
/// Where its pages are in guest RAM.
pub const BUF_PA: u64 = 0x20_0000;
/// Where the translation tables live.
pub const TABLE_POOL: u64 = 0x10_0000;

/// A Linux-like guest: EL1 Non-secure, kernel tables with `pages` 4K pages
/// of buffer at BUF_VA → BUF_PA, the buffer programmed as
/// `arm_spe_pmu_start` does with `limit_pages` of it, and sampling every
/// operation.
pub fn linux_spu(mem: &Mem, features: Features, pages: u64) -> (Spu, TableBuilder) {
    let mut tb = TableBuilder::new(mem, Granule::K4, 48, TABLE_POOL);
    for i in 0..pages {
        tb.map(mem, BUF_VA + i * 4096, BUF_PA + i * 4096, PAGE_RW);
    }
    let mut spu = Spu::new(features);
    spu.set_translation(TranslationRegs {
        sctlr_el1: 1,
        tcr_el1: tcr_el1(Granule::K4, 48),
        ttbr1_el1: tb.root,
        ..Default::default()
    });
    program(&mut spu, BUF_VA, BUF_VA + pages * 4096);
    (spu, tb)
}

/// Programs the buffer and sampling as Linux's `arm_spe_pmu_start`:
/// PMBPTR, PMBLIMITR | E, filters off, PMSIRR/PMSICR, then PMSCR.
pub fn program(spu: &mut Spu, ptr: u64, limit: u64) {
    let w = |spu: &mut Spu, r, v| spu.write_sysreg(r, v).unwrap();
    w(spu, SysReg::PmbptrEl1, ptr);
    w(spu, SysReg::PmblimitrEl1, limit | 1);
    w(spu, SysReg::PmsfcrEl1, 0);
    w(spu, SysReg::PmsirrEl1, 1 << 8);
    w(spu, SysReg::PmsicrEl1, 0);
    w(spu, SysReg::PmscrEl1, 0b11_0011); // E0SPE E1SPE PA TS
}

/// A load at EL1 Non-secure.
pub fn load(pc: u64, va: u64) -> SampledOp {
    SampledOp {
        pc,
        el: El::El1,
        ns: true,
        class: OpClass::LoadStore {
            store: false,
            subclass: 0,
        },
        data_va: va,
        data_pa: va & 0xFFFF_FFFF,
        data_pa_valid: true,
        size: 8,
        events: events::RETIRED | events::L1D_ACCESS | events::TLB_ACCESS,
        total_latency: 7,
        issue_latency: 2,
        translation_latency: 1,
        physical_count: 39395093558,
        ..Default::default()
    }
}
