//! The record path: filter, build and write one sampled operation's record
//! into a Profiling Buffer reached through a stage 1 translation, with the
//! buffer re-armed (as Linux's IRQ handler does) when it fills.

#[path = "common.rs"]
mod common;

use common::op;
use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spe_protocol::op::SampledOp;
use spe_protocol::regs::*;
use std::hint::black_box;
use vhost_device_spe::spu::tables::{tcr_el1, TableBuilder, PAGE_RW};
use vhost_device_spe::spu::translate::Granule;
use vhost_device_spe::spu::{Features, SampleOutcome, Spu};
use vm_memory::{GuestAddress, GuestMemoryMmap};

const BUF_VA: u64 = 0xFFFF_8000_1000_0000;
const PAGES: u64 = 256; // a 1 MiB AUX buffer

fn setup() -> (Spu, GuestMemoryMmap<()>) {
    let mem = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 16 << 20)]).unwrap();
    let mut tb = TableBuilder::new(&mem, Granule::K4, 48, 0x10_0000).unwrap();
    for i in 0..PAGES {
        // Scatter the pages as vmalloc does.
        let pa = 0x40_0000 + ((i * 37) % PAGES) * 4096;
        tb.map(&mem, BUF_VA + i * 4096, pa, PAGE_RW).unwrap();
    }
    let mut spu = Spu::new(Features::default());
    spu.set_translation(TranslationRegs {
        sctlr_el1: 1,
        tcr_el1: tcr_el1(Granule::K4, 48),
        ttbr1_el1: tb.root,
        ..Default::default()
    });
    arm(&mut spu);
    spu.write_sysreg(SysReg::PmscrEl1, 0b11_0011).unwrap(); // E0SPE E1SPE PA TS
    (spu, mem)
}

fn arm(spu: &mut Spu) {
    spu.write_sysreg(SysReg::PmbptrEl1, BUF_VA).unwrap();
    spu.write_sysreg(SysReg::PmblimitrEl1, (BUF_VA + PAGES * 4096) | 1)
        .unwrap();
    spu.write_sysreg(SysReg::PmbsrEl1, 0).unwrap();
}

/// Benchmarks `step` (sample or operation) on a fresh SPU, re-arming the
/// buffer whenever it fills.
fn bench(
    g: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    configure: impl Fn(&mut Spu),
    step: fn(&mut Spu, &SampledOp, &GuestMemoryMmap<()>) -> SampleOutcome,
) {
    let (mut spu, mem) = setup();
    configure(&mut spu);
    let mut i = 0u64;
    g.bench_function(name, |b| {
        b.iter(|| {
            i += 1;
            let out = step(&mut spu, black_box(&op(i)), &mem);
            if let SampleOutcome::Written { full: true, .. } = out {
                arm(&mut spu);
            }
            out
        })
    });
}

fn record_path(c: &mut Criterion) {
    let mut g = c.benchmark_group("record_path");
    g.throughput(Throughput::Elements(1));
    bench(&mut g, "sample_filter_build_write", |_| {}, Spu::sample);
    // FT + LD: stores (half the operations) are filtered out.
    let filter = |s: &mut Spu| s.write_sysreg(SysReg::PmsfcrEl1, 0x2_0002).unwrap();
    bench(&mut g, "sample_filtered_half", filter, Spu::sample);
    // INTERVAL = 4: the model's own counter selects one operation in 1024.
    let interval = |s: &mut Spu| s.write_sysreg(SysReg::PmsirrEl1, 1024).unwrap();
    bench(&mut g, "operation_interval_1024", interval, Spu::operation);
    g.finish();
}

criterion_group!(benches, record_path);
criterion_main!(benches);
