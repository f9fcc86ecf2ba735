//! Test helpers: guest memory, translation tables built in it, and a Spu
//! programmed the way Linux's driver programs it.

use super::translate::Granule;
use super::{Features, Spu};
use spe_protocol::op::{OpClass, SampledOp};
use spe_protocol::packet::events;
use spe_protocol::regs::*;
use vm_memory::{GuestAddress, GuestMemoryMmap};

pub type Mem = GuestMemoryMmap<()>;

/// Guest RAM at [0, size).
pub fn mem(size: usize) -> Mem {
    GuestMemoryMmap::from_ranges(&[(GuestAddress(0), size)]).unwrap()
}

pub use super::tables::{tcr_el1, TableBuilder, PAGE_RW};

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
    let mut tb = TableBuilder::new(mem, Granule::K4, 48, TABLE_POOL).unwrap();
    for i in 0..pages {
        tb.map(mem, BUF_VA + i * 4096, BUF_PA + i * 4096, PAGE_RW)
            .unwrap();
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
            vector: false,
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
