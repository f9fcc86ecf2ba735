//! Fuzz target bodies: every parser of bytes that cross a socket or come
//! from guest or shared memory. `fuzz/` (cargo-fuzz, nightly) calls these
//! from libFuzzer; `tests/fuzz_smoke.rs` feeds them a bounded, seeded
//! corpus on stable so CI runs the same code. Each body panics only on a
//! real bug: a parser panic or a broken round trip.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use spe_protocol::channel::ring::{Layout, HEADER_SIZE};
use spe_protocol::channel::*;
use spe_protocol::op::SampledOp;
use spe_protocol::packet::{self, Packet};
use spe_protocol::regs::{SysReg, TranslationRegs};
use spe_protocol::virtio;
use vm_memory::{Bytes, GuestAddress, GuestMemoryMmap};

use crate::qemu;
use crate::spu::{Features, Spu};
use spe_channel::ring::{memfd, Consumer};

/// Every control-channel parser: the header, then the input as each
/// payload. What parses must re-encode to the same value.
pub fn channel_message(data: &[u8]) {
    if let Ok(h) = Header::from_bytes(data.get(..Header::SIZE).unwrap_or(data)) {
        assert_eq!(Header::from_bytes(&h.to_bytes()), Ok(h));
        let _ = h.kind();
    }
    let p = data;
    if let Ok(v) = Hello::from_bytes(p) {
        assert_eq!(Hello::from_bytes(&v.to_bytes()), Ok(v));
    }
    if let Ok(v) = HelloReply::from_bytes(p) {
        assert_eq!(HelloReply::from_bytes(&v.to_bytes()), Ok(v));
    }
    if let Ok(v) = MemTable::from_bytes(p) {
        assert!(v.regions.len() <= MAX_REGIONS);
        assert_eq!(MemTable::from_bytes(&v.to_bytes()), Ok(v));
    }
    if let Ok(v) = RingSetup::from_bytes(p) {
        assert_eq!(RingSetup::from_bytes(&v.to_bytes()), Ok(v));
    }
    if let Ok(v) = SysregAccess::from_bytes(p) {
        assert_eq!(SysregAccess::from_bytes(&v.to_bytes()), Ok(v));
        let _ = SysReg::from_encoding(v.encoding);
    }
    if let Ok(v) = SysregReply::from_bytes(p) {
        assert_eq!(SysregReply::from_bytes(&v.to_bytes()), Ok(v));
    }
    if let Ok(v) = Status::from_bytes(p) {
        assert_eq!(Status::from_bytes(&v.to_bytes()), Ok(v));
    }
    if let Ok(v) = translation_from_bytes(p) {
        assert_eq!(translation_from_bytes(&translation_to_bytes(&v)), Ok(v));
    }
    if let Ok(v) = context_from_bytes(p) {
        let mut b = [0u8; CONTEXT_SIZE];
        context_to_bytes(&v, &mut b);
        assert_eq!(context_from_bytes(&b), Ok(v));
    }
    if let Ok((e, c, i)) = pmu_counters_from_bytes(p) {
        assert_eq!(
            pmu_counters_from_bytes(&pmu_counters_to_bytes(&e, c, i)),
            Ok((e, c, i))
        );
    }
}

/// `SampledOp::from_bytes`, as the ring's slots reach it.
pub fn sampled_op(data: &[u8]) {
    if let Ok(op) = SampledOp::from_bytes(data) {
        assert_eq!(SampledOp::from_bytes(&op.to_bytes()), Ok(op));
    }
}

/// The virtio-spe queue messages and config space.
pub fn virtio(data: &[u8]) {
    if let Ok(v) = virtio::CtrlRequest::from_bytes(data) {
        assert_eq!(virtio::CtrlRequest::from_bytes(&v.to_bytes()), Ok(v));
    }
    if let Ok(v) = virtio::CtrlResponse::from_bytes(data) {
        assert_eq!(virtio::CtrlResponse::from_bytes(&v.to_bytes()), Ok(v));
    }
    if let Ok(v) = virtio::Event::from_bytes(data) {
        assert_eq!(virtio::Event::from_bytes(&v.to_bytes()), Ok(v));
    }
    if let Ok(v) = virtio::Config::from_bytes(data) {
        assert_eq!(virtio::Config::from_bytes(&v.to_bytes()), Ok(v));
    }
}

/// The SPE packet decoder (guest buffers, `decode` subcommand input): every
/// packet decoded re-encodes to bytes that decode to the same packet.
pub fn packet_decode(data: &[u8]) {
    let mut out = Vec::new();
    for (_, p) in packet::decode(data).map_while(Result::ok) {
        out.clear();
        p.encode(&mut out);
        let (q, n): (Packet, usize) = Packet::decode(&out).expect("re-encoded packet decodes");
        assert_eq!((q, n), (p, out.len()));
        let _ = p.to_string();
    }
}

/// A small ring with the input as everything after its header (IRQ area,
/// indices, slots), drained into real SPUs. The consumer must neither
/// panic nor read outside the ring whatever the indices say.
pub fn ring_consumer(data: &[u8]) {
    let layout = Layout { vcpus: 2, slots: 4 };
    let size = layout.size();
    let Ok(file) = memfd("fuzz-ring", size as u64) else {
        return;
    };
    let mut bytes = vec![0u8; size];
    bytes[..HEADER_SIZE].copy_from_slice(&layout.header());
    let n = data.len().min(size - HEADER_SIZE);
    bytes[HEADER_SIZE..HEADER_SIZE + n].copy_from_slice(&data[..n]);
    let mut f = &file;
    if f.write_all(&bytes).is_err() {
        return;
    }
    let mut consumer = Consumer::new(&file, layout).expect("header is valid");
    let (mut spu, mem) = programmed_spu();
    for v in 0..layout.vcpus {
        let _ = consumer.drain(v, |op| {
            if let Ok(op) = op {
                spu.sample(&op, &mem);
            }
        });
        // Whatever count the other side claims must cost bounded time.
        spu.skip_operations(consumer.take_counted(v));
        consumer.publish_irq(v, spu.pmbirq(), spu.pmbsr());
        consumer.publish_state(v, &spu.sampling_state());
    }
}

/// Guest RAM whose first bytes are the input: translation tables (and
/// translation registers) the guest controls, walked by the Profiling
/// Buffer writes. Faults are architectural; nothing may panic.
pub fn translation_walk(data: &[u8]) {
    let u64_at = |i: usize| {
        let mut b = [0u8; 8];
        for (k, x) in b.iter_mut().enumerate() {
            *x = data.get(i * 8 + k).copied().unwrap_or(0);
        }
        u64::from_le_bytes(b)
    };
    let Ok(mem) = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 1 << 20)]) else {
        return;
    };
    let tables = data.get(48..).unwrap_or(&[]);
    let _ = mem.write_slice(&tables[..tables.len().min(1 << 20)], GuestAddress(0));
    let mut spu = Spu::new(Features::max());
    spu.set_translation(TranslationRegs {
        sctlr_el1: u64_at(0) | 1,
        tcr_el1: u64_at(1),
        ttbr0_el1: u64_at(2) & 0xF_FFFF,
        ttbr1_el1: u64_at(3) & 0xF_FFFF,
        vttbr_el2: u64_at(4),
        ..Default::default()
    });
    let ptr = u64_at(5);
    program(&mut spu, ptr, ptr.wrapping_add(0x4000));
    for i in 0..4 {
        spu.sample(&crate::synthetic::Generator::new(i).next_op(), &mem);
    }
    let _ = spu.pmbirq();
}

/// The in-process channel server a session target talks to, started on
/// first use.
fn server(
    cell: &'static OnceLock<qemu::ServerHandle>,
    name: &str,
    cfg: qemu::ServerConfig,
) -> &'static qemu::ServerHandle {
    cell.get_or_init(|| {
        // libFuzzer's main is not Rust's: writes to a socket the server
        // closed must fail with EPIPE, not kill the process.
        // SAFETY: setting a signal disposition to SIG_IGN.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
        let path: PathBuf =
            std::env::temp_dir().join(format!("spe-fuzz-{name}-{}.sock", std::process::id()));
        qemu::spawn(&path, cfg).expect("server starts")
    })
}

/// The whole server: the input as one connection's byte stream (after a
/// HELLO when its first byte is odd). The daemon must survive and serve
/// the next connection.
pub fn channel_session(data: &[u8]) {
    static SERVER: OnceLock<qemu::ServerHandle> = OnceLock::new();
    let h = server(
        &SERVER,
        "session",
        qemu::ServerConfig::new(Features::default()),
    );
    let Ok(mut c) = spe_channel::client::ChannelClient::connect(h.path()) else {
        panic!("server stopped accepting");
    };
    if data.first().is_some_and(|b| b & 1 == 1) {
        c.hello(2).expect("HELLO on a fresh connection");
    }
    let s: &UnixStream = c.stream();
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let mut w = s;
    // The server may close early (that is the point); ignore EPIPE.
    let _ = w.write_all(data.get(1..).unwrap_or(&[]));
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut sink = Vec::new();
    let mut r = s;
    match r.read_to_end(&mut sink) {
        // Closing with our unread bytes queued resets the connection.
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("server did not close the connection: {e}"),
    }
    drop(c);
    let mut next =
        spe_channel::client::ChannelClient::connect(h.path()).expect("server still accepts");
    assert_eq!(
        next.hello(1).expect("server still serves").status,
        Status::OK
    );
}

/// The reconnect handshake (QEMU coming back to a restarted backend):
/// HELLO and guest RAM, then a ring handed over again that holds whatever
/// the previous process, or a broken peer, left in it (the input, after
/// the header), then RESTORE of the input's registers and a register read
/// on a vCPU the first byte picks (2: every vCPU). Bit 1 of the first
/// byte sends the rest as RESTORE's raw payload instead. The daemon must
/// answer or drop the connection, and serve the next one.
pub fn channel_restore(data: &[u8]) {
    static SERVER: OnceLock<qemu::ServerHandle> = OnceLock::new();
    let mut cfg = qemu::ServerConfig::new(Features::default());
    // A small ring: one is created per input.
    cfg.ring_slots = 16;
    let h = server(&SERVER, "restore", cfg);
    let (&first, rest) = data.split_first().unwrap_or((&0, &[]));
    let mut c = spe_channel::client::ChannelClient::connect(h.path()).expect("server accepts");
    let hello = c.hello(2).expect("HELLO on a fresh connection");
    let layout = Layout {
        vcpus: 2,
        slots: hello.ring_slots,
    };
    let ram = spe_channel::shm::sealed_memfd("guest", 64 << 10).expect("a memfd");
    let region = MemRegion {
        gpa: 0,
        size: 64 << 10,
        fd_offset: 0,
    };
    c.set_mem_table(&[(region, &ram)]).expect("memory table");
    let (ring, _producer) = spe_channel::ring::Producer::create(layout).expect("a ring");
    let room = layout.size().saturating_sub(HEADER_SIZE);
    let left = &rest[..rest.len().min(room)];
    std::os::unix::fs::FileExt::write_all_at(&ring, left, HEADER_SIZE as u64).expect("ring write");
    let eventfd = || vmm_sys_util::eventfd::EventFd::new(libc::EFD_NONBLOCK).expect("an eventfd");
    let (doorbell, irq) = (eventfd(), eventfd());
    let vcpu = [0, 1, ALL_VCPUS][usize::from(first >> 2) % 3];
    let regs: Vec<(u32, u64)> = rest
        .chunks_exact(12)
        .take(Restore::MAX_ENTRIES)
        .map(|c| {
            let enc = u32::from_le_bytes(c[..4].try_into().expect("4 bytes"));
            let value = u64::from_le_bytes(c[4..].try_into().expect("8 bytes"));
            // Mostly SPE registers: the low 6 bits of the op2/CRm choose.
            (0xC4C8 | (enc & 0x3F), value)
        })
        .collect();
    let served = c
        .set_ring(layout.size() as u64, &ring, &doorbell, &irq)
        .and_then(|_| {
            if first & 2 != 0 {
                let raw = &rest[..rest.len().min(MAX_PAYLOAD as usize)];
                let mut m = Header::request(MsgType::Restore, vcpu, raw.len())
                    .to_bytes()
                    .to_vec();
                m.extend_from_slice(raw);
                c.send_raw(&m, &[])?;
                c.recv().map(|_| ())
            } else {
                c.restore(vcpu, &regs).map(|_| ())
            }
        })
        .and_then(|()| c.read(0, SysReg::PmbsrEl1).map(|_| ()));
    // Dropped is a defined outcome; a hang or a dead daemon is not.
    drop((served, c));
    let mut next =
        spe_channel::client::ChannelClient::connect(h.path()).expect("server still accepts");
    assert_eq!(
        next.hello(1).expect("server still serves").status,
        Status::OK
    );
}

fn programmed_spu() -> (Spu, GuestMemoryMmap<()>) {
    let mem = GuestMemoryMmap::<()>::from_ranges(&[(GuestAddress(0), 64 << 10)])
        .expect("anonymous guest memory");
    let mut spu = Spu::new(Features::default());
    // No translation registers set: SCTLR_EL1.M = 0, so VA = PA.
    program(&mut spu, 0x1000, 0x9000);
    (spu, mem)
}

fn program(spu: &mut Spu, ptr: u64, limit: u64) {
    let _ = spu.write_sysreg(SysReg::PmbptrEl1, ptr);
    let _ = spu.write_sysreg(SysReg::PmblimitrEl1, limit | 1);
    let _ = spu.write_sysreg(SysReg::PmsirrEl1, 1 << 8);
    let _ = spu.write_sysreg(SysReg::PmscrEl1, 0b11_0011);
}

/// The control socket's parser and every command: any line gets a reply
/// that serialises, with and without a VM, and nothing panics.
pub fn control_request(data: &[u8]) {
    use crate::control::Hub;
    use spe_protocol::control::{Request, Scenario, ServerLine};
    static HUB: OnceLock<Hub> = OnceLock::new();
    let hub = HUB.get_or_init(|| {
        Hub::new(Features::max(), Scenario::default()).expect("an eventfd for the hub")
    });
    let Ok(req) = serde_json::from_slice::<Request>(data) else {
        return;
    };
    let mut spus = [Spu::new(Features::max()), Spu::new(Features::max())];
    for vm in [None, Some(&mut spus[..])] {
        let reply = hub.run_command(&req, vm, crate::control::Origin::Host);
        let text = serde_json::to_string(&reply).expect("a reply serialises");
        assert!(!text.contains('\n'));
        assert!(matches!(
            reply,
            ServerLine::Return { .. } | ServerLine::Error { .. }
        ));
    }
}
