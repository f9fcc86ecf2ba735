//! The fuzz targets (`vhost_device_spe::fuzzing`, also built by `fuzz/`
//! for cargo-fuzz on nightly) run on stable: each gets a seeded,
//! deterministic corpus of valid encodings, their mutations (bit flips,
//! byte overwrites, truncation, extension, splicing) and random bytes, for
//! a bounded number of inputs and at most about a second of wall time.

use std::time::{Duration, Instant};

use spe_protocol::channel::*;
use spe_protocol::op::SampledOp;
use spe_protocol::regs::{PeContext, SysReg, TranslationRegs};
use spe_protocol::virtio;
use vhost_device_spe::fuzzing as f;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>], max_len: usize) -> Vec<u8> {
    let mut b = if seeds.is_empty() || rng.below(8) == 0 {
        (0..rng.below(max_len + 1))
            .map(|_| rng.next() as u8)
            .collect()
    } else {
        seeds[rng.below(seeds.len())].clone()
    };
    for _ in 0..1 + rng.below(4) {
        match rng.below(6) {
            0 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] ^= 1 << rng.below(8);
            }
            1 if !b.is_empty() => {
                let i = rng.below(b.len());
                b[i] = [0, 0xFF, 0x7F, 0x80, 1][rng.below(5)];
            }
            2 => b.truncate(rng.below(b.len() + 1)),
            3 => b.extend((0..rng.below(16)).map(|_| rng.next() as u8)),
            4 if !seeds.is_empty() => {
                let other = &seeds[rng.below(seeds.len())];
                let at = rng.below(b.len() + 1);
                b.splice(at..at, other.iter().copied());
            }
            _ if b.len() >= 8 => {
                let i = rng.below(b.len() - 7);
                b[i..i + 8].copy_from_slice(&rng.next().to_le_bytes());
            }
            _ => {}
        }
    }
    b.truncate(max_len);
    b
}

fn run(
    name: &str,
    seed: u64,
    max_inputs: usize,
    budget: Duration,
    seeds: Vec<Vec<u8>>,
    max_len: usize,
    target: fn(&[u8]),
) {
    let mut rng = Rng(seed);
    let t = Instant::now();
    for s in &seeds {
        target(s);
    }
    let mut n = 0;
    while n < max_inputs && t.elapsed() < budget {
        target(&mutate(&mut rng, &seeds, max_len));
        n += 1;
    }
    eprintln!(
        "{name}: {} seeds + {n} mutated inputs in {:?}",
        seeds.len(),
        t.elapsed()
    );
}

fn msg(t: MsgType, vcpu: u32, payload: &[u8]) -> Vec<u8> {
    let mut m = Header::request(t, vcpu, payload.len()).to_bytes().to_vec();
    m.extend_from_slice(payload);
    m
}

fn channel_seeds() -> Vec<Vec<u8>> {
    let mut ctx = [0u8; CONTEXT_SIZE];
    context_to_bytes(&PeContext::default(), &mut ctx);
    vec![
        Header::request(MsgType::Sysreg, 1, SysregAccess::SIZE)
            .to_bytes()
            .to_vec(),
        Hello {
            version: VERSION,
            num_vcpus: 4,
            midr: 0,
        }
        .to_bytes()
        .to_vec(),
        SysregAccess {
            encoding: SysReg::PmbptrEl1.encoding(),
            is_write: true,
            value: 0xFFFF_8000_1000_0000,
            ctx: PeContext::default(),
        }
        .to_bytes()
        .to_vec(),
        MemTable {
            regions: vec![MemRegion {
                gpa: 0x4000_0000,
                size: 1 << 30,
                fd_offset: 0,
            }],
        }
        .to_bytes(),
        translation_to_bytes(&TranslationRegs {
            tcr_el1: 0x5_B510_3510,
            ..Default::default()
        })
        .to_vec(),
        ctx.to_vec(),
        pmu_counters_to_bytes(&[3; 31], 4, 5).to_vec(),
        RingSetup { size: 1 << 20 }.to_bytes().to_vec(),
        Status {
            status: 0,
            pmbirq: true,
        }
        .to_bytes()
        .to_vec(),
    ]
}

#[test]
fn channel_message() {
    run(
        "channel_message",
        1,
        100_000,
        Duration::from_secs(1),
        channel_seeds(),
        300,
        f::channel_message,
    );
}

#[test]
fn sampled_op() {
    let mut g = vhost_device_spe::synthetic::Generator::new(3);
    let seeds = (0..16).map(|_| g.next_op().to_bytes().to_vec()).collect();
    run(
        "sampled_op",
        2,
        100_000,
        Duration::from_secs(1),
        seeds,
        SampledOp::WIRE_SIZE + 8,
        f::sampled_op,
    );
}

#[test]
fn virtio() {
    let seeds = vec![virtio::CtrlRequest {
        vcpu: 1,
        op: virtio::CtrlOp::Write,
        reg: SysReg::PmscrEl1.encoding(),
        value: 0x33,
    }
    .to_bytes()
    .to_vec()];
    run(
        "virtio",
        3,
        100_000,
        Duration::from_secs(1),
        seeds,
        128,
        f::virtio,
    );
}

#[test]
fn packet_decode() {
    let mut seeds = Vec::new();
    for p in [
        spe_protocol::packet::Packet::Timestamp(39395093558),
        spe_protocol::packet::Packet::Context { el2: false, id: 7 },
        spe_protocol::packet::Packet::End,
    ] {
        let mut b = Vec::new();
        p.encode(&mut b);
        seeds.push(b);
    }
    seeds.push(seeds.concat());
    run(
        "packet_decode",
        4,
        100_000,
        Duration::from_secs(1),
        seeds,
        256,
        f::packet_decode,
    );
}

#[test]
fn ring_consumer() {
    let mut g = vhost_device_spe::synthetic::Generator::new(5);
    let layout = ring::Layout { vcpus: 2, slots: 4 };
    // A consistent ring: vCPU 0 has 3 ops published.
    let mut seed = vec![0u8; layout.size() - ring::HEADER_SIZE];
    let base = layout.ring(0) - ring::HEADER_SIZE;
    seed[base..base + 8].copy_from_slice(&3u64.to_le_bytes());
    for i in 0..3 {
        let o = layout.slot(0, i) - ring::HEADER_SIZE;
        seed[o..o + SampledOp::WIRE_SIZE].copy_from_slice(&g.next_op().to_bytes());
    }
    let len = seed.len();
    run(
        "ring_consumer",
        6,
        10_000,
        Duration::from_secs(1),
        vec![seed],
        len,
        f::ring_consumer,
    );
}

#[test]
fn translation_walk() {
    run(
        "translation_walk",
        7,
        10_000,
        Duration::from_secs(1),
        walk_seeds(),
        8192,
        f::translation_walk,
    );
}

/// Translation registers for each granule and a spread of TxSZ values
/// (the first 48 bytes of a `translation_walk` input), then tables.
fn walk_seeds() -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    for tg in [0u64, 1, 2] {
        for tsz in [16u64, 25, 39, 47, 48, 63] {
            let tcr = tsz | tg << 14 | tsz << 16 | [2u64, 1, 3][tg as usize] << 30;
            let mut b = Vec::new();
            for v in [1, tcr, 0x1000, 0x1000, 0, 0xFFFF_8000_0000_0000] {
                b.extend_from_slice(&u64::to_le_bytes(v));
            }
            b.extend((0..512u64).flat_map(|i| (0x2003 + i * 0x1000).to_le_bytes()));
            seeds.push(b);
        }
    }
    seeds
}

/// Inputs that once crashed a target (named `<target>-<what>`), kept so
/// the bug stays fixed.
#[test]
fn regressions() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions");
    type Target = (&'static str, fn(&[u8]));
    let targets: [Target; 7] = [
        ("channel_message", f::channel_message),
        ("sampled_op", f::sampled_op),
        ("virtio", f::virtio),
        ("packet_decode", f::packet_decode),
        ("ring_consumer", f::ring_consumer),
        ("translation_walk", f::translation_walk),
        ("channel_session", f::channel_session),
    ];
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let (_, target) = targets
            .iter()
            .find(|(t, _)| name.starts_with(&format!("{t}-")))
            .unwrap_or_else(|| panic!("{name}: no such target"));
        target(&std::fs::read(&path).unwrap());
    }
}

#[test]
fn channel_session() {
    let mut seeds = Vec::new();
    for (i, s) in channel_seeds().into_iter().enumerate() {
        let t = [
            MsgType::Sysreg,
            MsgType::Hello,
            MsgType::Sysreg,
            MsgType::SetMemTable,
            MsgType::SetTranslation,
            MsgType::SetContext,
            MsgType::PmuCounters,
            MsgType::SetRing,
            MsgType::Sync,
        ][i];
        let mut b = vec![1u8];
        b.extend(msg(t, 0, &s));
        seeds.push(b);
    }
    run(
        "channel_session",
        8,
        3_000,
        Duration::from_secs(1),
        seeds,
        512,
        f::channel_session,
    );
}

#[test]
fn channel_restore() {
    let reg = |enc: u32, v: u64| {
        let mut b = enc.to_le_bytes().to_vec();
        b.extend_from_slice(&v.to_le_bytes());
        b
    };
    // Zeroed leftovers with well-formed registers; garbage leftovers; a
    // raw RESTORE payload for every vCPU.
    let mut good = vec![0u8];
    for (enc, v) in [(0xC4D1, 0x1000), (0xC4D0, 0x9001), (0xC4C8, 0b11_0011)] {
        good.extend(reg(enc, v));
    }
    good.resize(512, 0);
    let garbage: Vec<u8> = (0..600u32).map(|i| (i * 37 % 251) as u8).collect();
    let raw = [
        vec![2 | 2 << 2],
        Restore {
            regs: vec![(0xC4D3, 1)],
        }
        .to_bytes(),
    ]
    .concat();
    run(
        "channel_restore",
        9,
        500,
        Duration::from_secs(1),
        vec![good, garbage, raw],
        1024,
        f::channel_restore,
    );
}

#[test]
fn control_request() {
    let seeds = [
        r#"{"execute":"query-spu","arguments":{"vcpu":1},"id":1}"#,
        r#"{"execute":"arm-fault","arguments":{"vcpu":0,"kind":"stage1","fault":"translation","level":3,"trigger":"at-va","va":"0xffff000012345678"}}"#,
        r#"{"execute":"arm-fault","arguments":{"kind":"spurious-irq","trigger":"now"}}"#,
        r#"{"execute":"cancel-fault","arguments":{"id":1}}"#,
        r#"{"execute":"snapshot","arguments":{"vcpu":"all"}}"#,
        r#"{"execute":"query-faults"}"#,
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    run(
        "control_request",
        8,
        20_000,
        Duration::from_secs(1),
        seeds,
        256,
        f::control_request,
    );
}
