//! The memory model on the record path: what each sampled load or store
//! costs the backend before the SPU sees it (`MemoryHierarchy::serve`),
//! with reuse distances coming in as QEMU sends them (one watch in four
//! samples) and two vCPUs sharing some lines.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use spe_protocol::op::{OpClass, Reuse, SampledOp};
use spe_protocol::profile::CpuProfile;
use std::hint::black_box;
use vhost_device_spe::uarch::MemoryHierarchy;

/// `n` sampled accesses of 64 instructions over a 1 MiB footprint, every
/// fourth's reuse distance reported with the next, one in eight a store.
fn ops(n: u64) -> Vec<SampledOp> {
    let pc = |i: u64| 0x40_0000 + (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) * 4;
    (0..n)
        .map(|i| {
            let x = i.wrapping_mul(0x9e37_79b9_7f4a_7c15);
            SampledOp {
                pc: pc(i),
                class: OpClass::LoadStore {
                    store: i % 8 == 0,
                    subclass: 0,
                    vector: false,
                },
                data_va: 0x100_0000 + (x >> 44),
                data_pa: 0x100_0000 + (x >> 44),
                data_pa_valid: true,
                size: 8,
                total_latency: 6,
                issue_latency: 1,
                translation_latency: 1,
                physical_count: i,
                reuse: match i % 4 {
                    1 => Reuse::After((x >> 50) as u32),
                    _ => Reuse::None,
                },
                reuse_pc: pc(i.wrapping_sub(1)),
                ..SampledOp::default()
            }
        })
        .collect()
}

fn serve(c: &mut Criterion) {
    let ops = ops(4096);
    let mut h = MemoryHierarchy::new(CpuProfile::NeoverseN1, 2);
    let mut g = c.benchmark_group("memory_model");
    g.throughput(Throughput::Elements(ops.len() as u64));
    g.bench_function("serve_4096_accesses_two_vcpus", |b| {
        b.iter(|| {
            for (i, op) in ops.iter().enumerate() {
                let mut op = *op;
                h.serve((i % 2) as u32, &mut op);
                black_box(op.events);
            }
        })
    });
    g.finish();
}

criterion_group!(benches, serve);
criterion_main!(benches);
