//! The QEMU channel, measured against the real server thread over a
//! real Unix socket:
//!
//! 1. a SYSREG round trip (what a vCPU thread blocks on for every PMS*/PMB*
//!    access), as criterion's estimate and as percentiles over 200k samples;
//! 2. sustained ingestion of sampled operations through the shared ring into
//!    a translated Profiling Buffer in memfd guest RAM, re-armed over the
//!    socket (as the guest's IRQ handler would) whenever PMBIRQ rises.
//!
//! `cargo bench -p vhost-device-spe --bench channel`; the percentile and
//! records/s lines are printed after criterion's output.

use std::fs::File;
use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[path = "common.rs"]
mod common;

use common::op;
use criterion::{criterion_group, Criterion, Throughput};
use spe_channel::client::{ChannelClient, FrontRing};
use spe_protocol::channel::{ring::Layout, MemRegion, Status};
use spe_protocol::op::SampledOp;
use spe_protocol::regs::*;
use vhost_device_spe::qemu::{self, ServerConfig};
use vhost_device_spe::spu::tables::{tcr_el1, TableBuilder, PAGE_RW};
use vhost_device_spe::spu::translate::Granule;
use vhost_device_spe::spu::Features;
use vm_memory::{FileOffset, GuestAddress, GuestMemoryMmap};

const RAM_GPA: u64 = 0x4000_0000;
const RAM_SIZE: u64 = 32 << 20;
const BUF_VA: u64 = 0xFFFF_8000_1000_0000;
const BUF_PAGES: u64 = 256; // a 1 MiB AUX buffer
const BATCH: usize = 256;

struct Rig {
    _server: qemu::ServerHandle,
    client: ChannelClient,
    ring: FrontRing,
    _ram: File,
    rearms: u64,
    bytes: u64,
}

impl Rig {
    fn new(name: &str) -> Rig {
        let path: PathBuf =
            std::env::temp_dir().join(format!("spe-bench-{}-{name}.sock", std::process::id()));
        let server = qemu::spawn(&path, ServerConfig::new(Features::default())).unwrap();
        let ram = spe_channel::shm::sealed_memfd("ram", RAM_SIZE).unwrap();
        let mem = GuestMemoryMmap::<()>::from_ranges_with_files([(
            GuestAddress(RAM_GPA),
            RAM_SIZE as usize,
            Some(FileOffset::new(ram.try_clone().unwrap(), 0)),
        )])
        .unwrap();
        let mut tb = TableBuilder::new(&mem, Granule::K4, 48, RAM_GPA + 0x10_0000).unwrap();
        for i in 0..BUF_PAGES {
            // Scattered pages, as vmalloc gives them.
            let pa = RAM_GPA + 0x40_0000 + ((i * 37) % BUF_PAGES) * 4096;
            tb.map(&mem, BUF_VA + i * 4096, pa, PAGE_RW).unwrap();
        }
        let mut client = ChannelClient::connect(&path).unwrap();
        let hello = client.hello(1).unwrap();
        assert_eq!(hello.status, Status::OK);
        let st = client
            .set_mem_table(&[(
                MemRegion {
                    gpa: RAM_GPA,
                    size: RAM_SIZE,
                    fd_offset: 0,
                },
                &ram,
            )])
            .unwrap();
        assert_eq!(st.status, Status::OK);
        let layout = Layout {
            vcpus: 1,
            slots: hello.ring_slots,
        };
        let ring = FrontRing::create(layout).unwrap();
        assert_eq!(client.attach_ring(&ring).unwrap().status, Status::OK);
        client
            .set_translation(
                0,
                &TranslationRegs {
                    sctlr_el1: 1,
                    tcr_el1: tcr_el1(Granule::K4, 48),
                    ttbr1_el1: tb.root,
                    ..Default::default()
                },
            )
            .unwrap();
        let mut rig = Rig {
            _server: server,
            client,
            ring,
            _ram: ram,
            rearms: 0,
            bytes: 0,
        };
        rig.arm();
        for (r, v) in [
            (SysReg::PmsfcrEl1, 0),
            (SysReg::PmsirrEl1, 1 << 8),
            (SysReg::PmscrEl1, 0b11_0011),
        ] {
            assert_eq!(rig.client.write(0, r, v).unwrap().outcome, 0);
        }
        rig
    }

    /// What the guest's IRQ handler does: note how far the buffer got,
    /// point it back at its start and clear PMBSR.
    fn arm(&mut self) {
        let ptr = self.client.read(0, SysReg::PmbptrEl1).unwrap().value;
        if ptr >= BUF_VA {
            self.bytes += ptr - BUF_VA;
        }
        let c = &mut self.client;
        c.write(0, SysReg::PmbptrEl1, BUF_VA).unwrap();
        c.write(0, SysReg::PmblimitrEl1, (BUF_VA + BUF_PAGES * 4096) | 1)
            .unwrap();
        c.write(0, SysReg::PmbsrEl1, 0).unwrap();
        self.rearms += 1;
    }

    /// Publishes `ops` (waiting for space), rings the doorbell, and re-arms
    /// the buffer when the backend reports it full.
    fn feed(&mut self, ops: &[SampledOp]) {
        let mut sent = 0;
        while sent < ops.len() {
            let n = self.ring.producer.push(0, &ops[sent..]);
            if n > 0 {
                sent += n;
                self.ring.doorbell.write(1).unwrap();
            } else {
                std::thread::yield_now();
            }
            if self.ring.producer.irq(0).level {
                self.arm();
            }
        }
    }

    /// Everything fed so far is in guest memory.
    fn sync(&mut self) {
        assert_eq!(self.client.sync(0).unwrap().status, Status::OK);
        if self.ring.producer.irq(0).level {
            self.arm();
        }
    }
}

fn channel(c: &mut Criterion) {
    let mut g = c.benchmark_group("channel");
    let mut rig = Rig::new("crit");
    g.bench_function("sysreg_read_round_trip", |b| {
        b.iter(|| black_box(rig.client.read(0, SysReg::PmbptrEl1).unwrap()))
    });
    g.bench_function("sysreg_write_round_trip", |b| {
        b.iter(|| black_box(rig.client.write(0, SysReg::PmsicrEl1, 0).unwrap()))
    });
    let ops: Vec<_> = (0..BATCH as u64).map(op).collect();
    g.throughput(Throughput::Elements(BATCH as u64));
    g.bench_function("ring_ingest_batch_256", |b| {
        b.iter_custom(|iters| {
            let t = Instant::now();
            for _ in 0..iters {
                rig.feed(&ops);
            }
            rig.sync();
            t.elapsed()
        })
    });
    g.finish();
}

/// Raw blocking ping-pong of the same byte counts between two threads over
/// a socketpair: the machine's floor for any request/reply over a Unix
/// socket, measured interleaved with the channel so both see the same load.
fn raw_ping_pong() -> impl FnMut() {
    use std::io::{Read, Write};
    let (mut a, mut b) = std::os::unix::net::UnixStream::pair().unwrap();
    std::thread::spawn(move || {
        let mut req = [0u8; 88];
        while b.read_exact(&mut req).is_ok() {
            b.write_all(&req[..32]).unwrap();
        }
    });
    move || {
        let mut rep = [0u8; 32];
        a.write_all(&[1u8; 88]).unwrap();
        a.read_exact(&mut rep).unwrap();
    }
}

fn percentiles() {
    let mut rig = Rig::new("pct");
    let mut raw = raw_ping_pong();
    const N: usize = 200_000;
    for _ in 0..10_000 {
        rig.client.read(0, SysReg::PmbptrEl1).unwrap();
        raw();
    }
    let (mut ns, mut base) = (Vec::with_capacity(N), Vec::with_capacity(N));
    for i in 0..N {
        let t = Instant::now();
        if i % 2 == 0 {
            black_box(rig.client.read(0, SysReg::PmbptrEl1).unwrap());
        } else {
            black_box(rig.client.write(0, SysReg::PmsicrEl1, 0).unwrap());
        }
        ns.push(t.elapsed().as_nanos() as u64);
        let t = Instant::now();
        raw();
        base.push(t.elapsed().as_nanos() as u64);
    }
    for (what, v) in [
        ("SYSREG round trip (reads and writes alternating)", &mut ns),
        ("raw socketpair ping-pong baseline, same sizes", &mut base),
    ] {
        v.sort_unstable();
        let p = |q: f64| v[((N as f64 * q) as usize).min(N - 1)] as f64 / 1000.0;
        println!(
            "{what}, {N} samples: p50 {:.1} µs, p90 {:.1} µs, p99 {:.1} µs, p99.9 {:.1} µs, max {:.1} µs",
            p(0.50),
            p(0.90),
            p(0.99),
            p(0.999),
            p(1.0)
        );
    }
}

fn ingestion() {
    let mut rig = Rig::new("ingest");
    let ops: Vec<_> = (0..BATCH as u64).map(op).collect();
    // Record size: one op into an empty buffer.
    rig.feed(&ops[..1]);
    rig.sync();
    let rec = rig.client.read(0, SysReg::PmbptrEl1).unwrap().value - BUF_VA;
    rig.arm();
    rig.bytes = 0;
    rig.rearms = 0;
    let dur = Duration::from_secs(3);
    let t = Instant::now();
    let mut fed = 0u64;
    while t.elapsed() < dur {
        rig.feed(&ops);
        fed += BATCH as u64;
    }
    rig.sync();
    let el = t.elapsed().as_secs_f64();
    let ptr = rig.client.read(0, SysReg::PmbptrEl1).unwrap().value;
    let bytes = rig.bytes + ptr.saturating_sub(BUF_VA);
    let records = bytes / rec;
    println!(
        "ring ingestion, 1 vCPU, {rec}-byte records into a 1 MiB translated buffer: \
         {:.2} M ops/s fed, {:.2} M records/s written ({:.0} MB/s), {} buffer fills re-armed over the socket in {el:.1} s",
        fed as f64 / el / 1e6,
        records as f64 / el / 1e6,
        bytes as f64 / el / 1e6,
        rig.rearms
    );
}

criterion_group!(benches, channel);

fn main() {
    benches();
    percentiles();
    ingestion();
    Criterion::default().configure_from_args().final_summary();
}
