//! The QEMU channel end to end: the real server (in-process, or the
//! built binary as a child) on a real Unix socket, memfd-backed guest RAM
//! passed by SCM_RIGHTS, the shared-memory ring and the IRQ eventfd, driven
//! by the Rust client as the patched QEMU would drive it.

use std::fs::File;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use spe_channel::client::{ChannelClient, FrontRing};
use spe_channel::ring::memfd;
use spe_channel::shm::sealed_memfd;
use spe_protocol::channel::{
    feature,
    ring::{self, Layout},
    Header, Hello, MemRegion, MsgType, Status, SysregAccess, ALL_VCPUS, VERSION,
};
use spe_protocol::op::{OpClass, SampledOp};
use spe_protocol::packet::{self, events, AddressIndex, Packet};
use spe_protocol::regs::*;
use vhost_device_spe::qemu::{self, ServerConfig};
use vhost_device_spe::spu::tables::{tcr_el1, TableBuilder, PAGE_RW};
use vhost_device_spe::spu::translate::Granule;
use vhost_device_spe::spu::Features;
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemoryMmap};
use vmm_sys_util::eventfd::EventFd;

const RAM_GPA: u64 = 0x4000_0000;
const RAM_SIZE: u64 = 8 << 20;
/// RAM sits 1 MiB into its memfd, to exercise fd_offset.
const RAM_FD_OFFSET: u64 = 1 << 20;
const LOW_SIZE: u64 = 1 << 20;
const TABLES: u64 = RAM_GPA + 0x10_0000;
const BUF_VA: u64 = 0xFFFF_8000_1000_0000;
const BUF_PA: u64 = RAM_GPA + 0x40_0000;
const BUF_PAGES: u64 = 4;
/// Mapped to an address that is not RAM.
const NON_RAM_VA: u64 = BUF_VA + 0x20_0000;
/// Not mapped at all.
const UNMAPPED_VA: u64 = BUF_VA + 0x100_0000;

fn sock_path(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("spe-chan-{}-{name}.sock", std::process::id()))
}

/// Guest RAM in two memfds, with the test's own mapping of it, and stage 1
/// tables mapping the buffer pages in reverse order so a record's PA shows
/// it was translated.
struct Guest {
    ram: File,
    low: File,
    mem: GuestMemoryMmap<()>,
    root: u64,
}

impl Guest {
    fn new() -> Guest {
        let ram = sealed_memfd("ram", RAM_FD_OFFSET + RAM_SIZE).unwrap();
        let low = sealed_memfd("low", LOW_SIZE).unwrap();
        let mem = GuestMemoryMmap::<()>::from_ranges_with_files([
            (
                GuestAddress(0),
                LOW_SIZE as usize,
                Some(FileOffset::new(low.try_clone().unwrap(), 0)),
            ),
            (
                GuestAddress(RAM_GPA),
                RAM_SIZE as usize,
                Some(FileOffset::new(ram.try_clone().unwrap(), RAM_FD_OFFSET)),
            ),
        ])
        .unwrap();
        let mut tb = TableBuilder::new(&mem, Granule::K4, 48, TABLES).unwrap();
        for i in 0..BUF_PAGES {
            tb.map(&mem, BUF_VA + i * 4096, Self::page_pa(i), PAGE_RW)
                .unwrap();
        }
        tb.map(&mem, NON_RAM_VA, 0x2000_0000, PAGE_RW).unwrap();
        Guest {
            ram,
            low,
            mem,
            root: tb.root,
        }
    }

    fn page_pa(i: u64) -> u64 {
        BUF_PA + (BUF_PAGES - 1 - i) * 4096
    }

    fn regions(&self) -> Vec<(MemRegion, &File)> {
        vec![
            (
                MemRegion {
                    gpa: RAM_GPA,
                    size: RAM_SIZE,
                    fd_offset: RAM_FD_OFFSET,
                },
                &self.ram,
            ),
            (
                MemRegion {
                    gpa: 0,
                    size: LOW_SIZE,
                    fd_offset: 0,
                },
                &self.low,
            ),
        ]
    }

    fn xlat(&self) -> TranslationRegs {
        TranslationRegs {
            sctlr_el1: 1,
            tcr_el1: tcr_el1(Granule::K4, 48),
            ttbr1_el1: self.root,
            ..Default::default()
        }
    }
}

fn server(name: &str, features: Features) -> qemu::ServerHandle {
    qemu::spawn(&sock_path(name), ServerConfig::new(features)).unwrap()
}

/// HELLO, SET_MEM_TABLE and SET_RING, as QEMU does at machine start.
fn connect(path: &Path, vcpus: u32, guest: &Guest) -> (ChannelClient, FrontRing) {
    let mut c = ChannelClient::connect(path).unwrap();
    let hello = c.hello(vcpus).unwrap();
    assert_eq!(hello.status, Status::OK);
    let layout = Layout {
        vcpus,
        slots: hello.ring_slots,
    };
    assert_eq!(hello.ring_size, layout.size() as u64);
    assert_eq!(
        c.set_mem_table(&guest.regions()).unwrap().status,
        Status::OK
    );
    let ring = FrontRing::create(layout).unwrap();
    let st = c.attach_ring(&ring).unwrap();
    assert_eq!(st.status, Status::OK);
    (c, ring)
}

/// Programs vCPU `v`'s buffer as Linux's arm_spe_pmu_start does.
fn program(c: &mut ChannelClient, v: u32, guest: &Guest, ptr: u64, limit: u64) {
    assert_eq!(
        c.set_translation(v, &guest.xlat()).unwrap().status,
        Status::OK
    );
    for (reg, val) in [
        (SysReg::PmbptrEl1, ptr),
        (SysReg::PmblimitrEl1, limit | 1),
        (SysReg::PmsfcrEl1, 0),
        (SysReg::PmsirrEl1, 1 << 8),
        (SysReg::PmsicrEl1, 0),
        (SysReg::PmbsrEl1, 0),
        (SysReg::PmscrEl1, 0b11_0011),
    ] {
        let r = c.write(v, reg, val).unwrap();
        assert_eq!(r.outcome, 0, "{reg:?}");
    }
}

fn load(i: u64) -> SampledOp {
    SampledOp {
        pc: 0xFFFF_8000_0810_0000 + i * 4,
        el: El::El1,
        ns: true,
        class: OpClass::LoadStore {
            store: false,
            subclass: 0,
            vector: false,
        },
        data_va: 0xFFFF_0000_0100_0000 + i * 8,
        data_pa: 0x0100_0000 + i * 8,
        data_pa_valid: true,
        size: 8,
        events: events::RETIRED | events::L1D_ACCESS,
        total_latency: 9,
        issue_latency: 2,
        translation_latency: 1,
        physical_count: 1000 + i,
        ..Default::default()
    }
}

/// PCs of the records in `bytes`, in order.
fn pcs(bytes: &[u8]) -> Vec<u64> {
    packet::decode(bytes)
        .map_while(Result::ok)
        .filter_map(|(_, p)| match p {
            Packet::Address {
                index: AddressIndex::Pc,
                payload,
            } => Some(payload & 0x00FF_FFFF_FFFF_FFFF | 0xFF00_0000_0000_0000),
            _ => None,
        })
        .collect()
}

fn buffer_bytes(guest: &Guest, page: u64) -> Vec<u8> {
    let mut b = vec![0u8; 4096];
    guest
        .mem
        .read_slice(&mut b, GuestAddress(Guest::page_pa(page)))
        .unwrap();
    b
}

fn pmbsr_filled(v: u64) -> bool {
    PMBSR::S.is_set(v)
        && PMBSR::EC.get(v) == pmbsr_ec::BUFFER
        && PMBSR::BSC.get(v) == pmbsr_bsc::BUFFER_FILLED
}

#[test]
fn records_land_in_guest_memory_and_pmbirq_is_reported_both_ways() {
    let h = server("e2e", Features::default());
    let guest = Guest::new();
    let (mut c, mut ring) = connect(h.path(), 2, &guest);
    let limit = BUF_VA + BUF_PAGES * 4096;
    program(&mut c, 1, &guest, BUF_VA, limit);

    // 1. Through the ring and the doorbell only: the backend drains on its
    // own, the buffer fills, and PMBIRQ arrives on the IRQ path.
    let ops: Vec<_> = (0..1000).map(load).collect();
    assert_eq!(ring.producer.push(1, &ops), 1000);
    ring.doorbell.write(1).unwrap();
    assert!(ring.wait_irq(Duration::from_secs(5)), "no IRQ eventfd");
    let e = ring.producer.irq(1);
    assert!(e.level && e.seq == 1 && pmbsr_filled(e.pmbsr), "{e:?}");
    assert!(!ring.producer.irq(0).level);

    // Records are whole, in order, at the translated (reversed) pages.
    let first = pcs(&buffer_bytes(&guest, 0));
    assert!(first.len() > 10, "{first:?}");
    assert_eq!(&first[..3], &[load(0).pc, load(1).pc, load(2).pc]);
    let second = pcs(&buffer_bytes(&guest, 1));
    assert!(second[0] > *first.last().unwrap());

    // The SYSREG reply carries the level; PMBPTR stopped near the limit.
    let r = c.read(1, SysReg::PmbsrEl1).unwrap();
    assert!(r.pmbirq && pmbsr_filled(r.value));
    let ptr = c.read(1, SysReg::PmbptrEl1).unwrap().value;
    assert!(ptr > BUF_VA + 3 * 4096 && ptr <= limit, "{ptr:#x}");

    // Clearing PMBSR.S drops the line: in the reply and in the IRQ area.
    let r = c.write(1, SysReg::PmbsrEl1, 0).unwrap();
    assert!(!r.pmbirq);
    assert!(ring.wait_irq(Duration::from_secs(5)));
    let e = ring.producer.irq(1);
    assert!(!e.level && e.seq == 2, "{e:?}");

    // 2. Re-armed; operations published without a doorbell are in memory
    // once SYNC returns, and its Status carries the new level.
    program(&mut c, 1, &guest, BUF_VA, limit);
    let ops: Vec<_> = (5000..6000).map(load).collect();
    assert_eq!(ring.producer.push(1, &ops), 1000);
    let st = c.sync(1).unwrap();
    assert_eq!(st.status, Status::OK);
    assert!(st.pmbirq);
    assert_eq!(pcs(&buffer_bytes(&guest, 0))[0], load(5000).pc);
    let r = c.read(1, SysReg::PmbsrEl1).unwrap();
    assert!(r.pmbirq && pmbsr_filled(r.value));
    // ALL_VCPUS SYNC reports no single level.
    assert!(!c.sync(ALL_VCPUS).unwrap().pmbirq);
}

#[test]
fn rings_are_drained_on_a_timer_only_while_a_vcpu_samples() {
    let h = server("drain", Features::default());
    let guest = Guest::new();
    let (mut c, mut ring) = connect(h.path(), 2, &guest);
    let slots = u64::from(ring.layout.slots);
    let quiet = Duration::from_millis(50);

    // Nothing samples: without a doorbell, published slots wait.
    assert_eq!(ring.producer.push(0, &[load(0)]), 1);
    thread::sleep(quiet);
    assert_eq!(ring.producer.space(0), slots - 1);

    // vCPU 1 samples: the backend drains every ring on its own, so its
    // buffer fills and PMBIRQ arrives with no doorbell at all.
    program(&mut c, 1, &guest, BUF_VA, BUF_VA + BUF_PAGES * 4096);
    let ops: Vec<_> = (0..1000).map(load).collect();
    assert_eq!(ring.producer.push(1, &ops), 1000);
    assert!(ring.wait_irq(Duration::from_secs(5)), "no IRQ eventfd");
    assert!(pmbsr_filled(ring.producer.irq(1).pmbsr));
    assert_eq!(ring.producer.space(0), slots);
    assert_eq!(ring.producer.space(1), slots);

    // The full buffer stopped profiling: the timer stops with it.
    assert_eq!(state(&ring, 1).enabled_els, 0);
    assert_eq!(ring.producer.push(1, &ops[..10]), 10);
    thread::sleep(quiet);
    assert_eq!(ring.producer.space(1), slots - 10);
}

/// A vCPU thread's view of its sampling state after a reply.
fn state(ring: &FrontRing, v: u32) -> ring::SamplingState {
    ring.producer.sampling_state(v).1
}

#[test]
fn sampling_state_is_published_and_counted_operations_move_pmsicr() {
    let h = server("state", Features::default());
    let guest = Guest::new();
    let mut c = ChannelClient::connect(h.path()).unwrap();
    assert_ne!(c.hello(2).unwrap().features & feature::SAMPLING_STATE, 0);
    drop(c);
    let (mut c, mut ring) = connect(h.path(), 2, &guest);
    // Nothing programmed; the default operation model is published.
    let reset = ring::SamplingState {
        flags: ring::flags::UOPS,
        ..Default::default()
    };
    assert_eq!(state(&ring, 1), reset);

    // Programming vCPU 1 publishes its state by the time each reply
    // arrives, and the vCPU's own requests do not signal the IRQ eventfd.
    let limit = BUF_VA + BUF_PAGES * 4096;
    program(&mut c, 1, &guest, BUF_VA, limit);
    let s = state(&ring, 1);
    assert_eq!((s.enabled_els, s.interval, s.pmsicr_count), (0b011, 256, 0));
    assert_eq!(state(&ring, 0).enabled_els, 0);
    assert!(!ring.wait_irq(Duration::from_millis(200)));

    // QEMU counts 2000 operations from COUNT 0 at INTERVAL 256; its counter
    // selected operations 256, 513, ... (as the pseudocode's would) and
    // published those. A PMSICR read right after sees where counting left
    // it, and the records are the selected operations.
    let selected: Vec<_> = [256, 513, 770, 1027, 1284, 1541, 1798]
        .into_iter()
        .map(load)
        .collect();
    assert_eq!(ring.producer.push(1, &selected), 7);
    ring.producer.count(1, 2000);
    let r = c.read(1, SysReg::PmsicrEl1).unwrap();
    assert_eq!(PMSICR_EL1::COUNT.get(r.value), 56);
    assert_eq!(state(&ring, 1).pmsicr_count, 56);
    let want: Vec<u64> = selected.iter().map(|o| o.pc).collect();
    assert_eq!(pcs(&buffer_bytes(&guest, 0)), want);

    // A guest write of PMSICR is what QEMU reloads from after the reply;
    // counts handed back before a SYNC are applied by it.
    c.write(1, SysReg::PmsicrEl1, 1000).unwrap();
    assert_eq!(state(&ring, 1).pmsicr_count, 1000);
    ring.producer.count(1, 10);
    assert_eq!(c.sync(1).unwrap().status, Status::OK);
    assert_eq!(state(&ring, 1).pmsicr_count, 990);
    assert_eq!(state(&ring, 0).pmsicr_count, 0);

    // A buffer that fills in a doorbell drain stops profiling: QEMU hears
    // of it on the IRQ path and stops counting.
    let ops: Vec<_> = (0..1000).map(load).collect();
    ring.producer.push(1, &ops);
    ring.doorbell.write(1).unwrap();
    assert!(ring.wait_irq(Duration::from_secs(5)));
    assert_eq!(state(&ring, 1).enabled_els, 0);
    c.write(1, SysReg::PmbsrEl1, 0).unwrap();
    assert_eq!(state(&ring, 1).enabled_els, 0b011);
    // The PMBIRQ drop signals, as before.
    assert!(ring.wait_irq(Duration::from_secs(5)));

    // An ALL_VCPUS request (from QEMU's main loop) that changes the ELs
    // signals even without a PMBIRQ change.
    let seq = ring.producer.sampling_state(1).0;
    let irq_seq = ring.producer.irq(1).seq;
    assert_eq!(c.reset(ALL_VCPUS).unwrap().status, Status::OK);
    assert!(ring.wait_irq(Duration::from_secs(5)));
    let (new_seq, s) = ring.producer.sampling_state(1);
    assert!(new_seq > seq && new_seq % 2 == 0);
    assert_eq!(s, reset);
    assert_eq!(ring.producer.irq(1).seq, irq_seq, "no PMBIRQ change");
}

#[test]
fn with_rnd_pmsicr_reads_the_count_qemu_stopped_at() {
    let h = server("count-now", Features::default());
    let guest = Guest::new();
    let (mut c, mut ring) = connect(h.path(), 2, &guest);
    program(&mut c, 0, &guest, BUF_VA, BUF_VA + BUF_PAGES * 4096);
    // PMSIRR.RND: each reload draws random low bits, on QEMU's side and,
    // when it replays counted operations, on the model's.
    c.write(0, SysReg::PmsirrEl1, 1 << 8 | 1).unwrap();
    ring.producer.count(0, 5000);
    ring.producer.set_count_now(0, 77);
    let r = c.read(0, SysReg::PmsicrEl1).unwrap();
    assert_eq!(PMSICR_EL1::COUNT.get(r.value), 77);
    // After the reply QEMU reloads from the count it gave.
    assert_eq!(state(&ring, 0).pmsicr_count, 77);
    // The other vCPU's counter is its own.
    ring.producer.count(1, 10);
    assert_eq!(
        PMSICR_EL1::COUNT.get(c.read(1, SysReg::PmsicrEl1).unwrap().value),
        0
    );
}

#[test]
fn buffer_at_unmapped_or_non_ram_addresses_faults_architecturally() {
    let h = server("fault", Features::default());
    let guest = Guest::new();
    let (mut c, mut ring) = connect(h.path(), 1, &guest);

    program(&mut c, 0, &guest, UNMAPPED_VA, UNMAPPED_VA + 4 * 4096);
    ring.producer.push(0, &[load(1)]);
    let st = c.sync(0).unwrap();
    assert!(st.pmbirq);
    let v = c.read(0, SysReg::PmbsrEl1).unwrap().value;
    assert!(PMBSR::S.is_set(v) && PMBSR::EC.get(v) == pmbsr_ec::STAGE1_DATA_ABORT);
    assert!(!PMBSR::EA.is_set(v));

    program(&mut c, 0, &guest, NON_RAM_VA, NON_RAM_VA + 4096);
    ring.producer.push(0, &[load(2)]);
    assert!(c.sync(0).unwrap().pmbirq);
    let v = c.read(0, SysReg::PmbsrEl1).unwrap().value;
    assert!(PMBSR::S.is_set(v) && PMBSR::EA.is_set(v), "{v:#x}");
    // The daemon is still serving.
    assert_eq!(c.read(0, SysReg::PmbidrEl1).unwrap().outcome, 0);
}

#[test]
fn disconnect_resets_and_the_next_vm_is_served() {
    let h = server("reconnect", Features::max());
    let guest = Guest::new();
    {
        let (mut c, _ring) = connect(h.path(), 2, &guest);
        assert_eq!(c.write(1, SysReg::PmsicrEl1, 0x1234).unwrap().outcome, 0);
        assert_eq!(c.read(1, SysReg::PmsicrEl1).unwrap().value, 0x1234);
    }
    for _ in 0..3 {
        let (mut c, _ring) = connect(h.path(), 4, &guest);
        assert_eq!(c.read(1, SysReg::PmsicrEl1).unwrap().value, 0);
        assert_eq!(c.write(3, SysReg::PmsicrEl1, 7).unwrap().outcome, 0);
    }
    // A second VM waits in the backlog while one is connected, and is
    // served as soon as the first leaves.
    let mut a = ChannelClient::connect(h.path()).unwrap();
    a.hello(1).unwrap();
    let b = std::thread::spawn({
        let path = h.path().to_path_buf();
        move || {
            ChannelClient::connect(&path)
                .unwrap()
                .hello(1)
                .unwrap()
                .status
        }
    });
    std::thread::sleep(Duration::from_millis(50));
    assert!(!b.is_finished());
    drop(a);
    assert_eq!(b.join().unwrap(), Status::OK);
}

/// QEMU's side of a backend restart: the old process is gone, a new one
/// binds the same socket, and QEMU hands it the same ring and the
/// registers it kept (by the encoding each access reached).
#[test]
fn a_restarted_backend_gets_the_registers_back_and_reports_the_loss() {
    let guest = Guest::new();
    let limit = BUF_VA + BUF_PAGES * 4096;
    let old = server("restart", Features::default());
    let path = old.path().to_path_buf();
    let (mut c, mut ring) = connect(&path, 2, &guest);
    program(&mut c, 0, &guest, BUF_VA, limit);
    let r = c.write(0, SysReg::PmsicrEl1, 0).unwrap();
    assert_eq!(r.reg, SysReg::PmsicrEl1.encoding());
    assert_eq!(
        ring.producer
            .push(0, &(0..20).map(load).collect::<Vec<_>>()),
        20
    );
    c.sync(0).unwrap();
    let ptr = c.read(0, SysReg::PmbptrEl1).unwrap().value;
    assert!(ptr > BUF_VA, "{ptr:#x}");
    // Sampled but never drained: in flight when the process goes.
    assert_eq!(
        ring.producer
            .push(0, &(20..40).map(load).collect::<Vec<_>>()),
        20
    );
    drop(c);
    old.shutdown();

    let new = server("restart", Features::default());
    let mut c = ChannelClient::connect(new.path()).unwrap();
    let hello = c.hello(2).unwrap();
    assert_ne!(hello.features & feature::RESTORE, 0);
    assert_eq!(
        c.set_mem_table(&guest.regions()).unwrap().status,
        Status::OK
    );
    let st = c.attach_ring(&ring).unwrap();
    assert_eq!(st.status, Status::OK);
    c.set_translation(0, &guest.xlat()).unwrap();
    let kept = [
        (SysReg::PmbptrEl1.encoding(), ptr),
        (SysReg::PmblimitrEl1.encoding(), limit | 1),
        (SysReg::PmsirrEl1.encoding(), 1 << 8),
        (SysReg::PmscrEl1.encoding(), 0b11_0011),
        // Read-only: ignored, not refused.
        (SysReg::PmbidrEl1.encoding(), 0),
    ];
    let st = c.restore(0, &kept).unwrap();
    assert_eq!(st.status, Status::OK);
    // The buffer was enabled: what was in flight is reported lost.
    assert!(st.pmbirq);
    let pmbsr = c.read(0, SysReg::PmbsrEl1).unwrap().value;
    assert!(pmbsr_filled(pmbsr) && PMBSR::DL.is_set(pmbsr), "{pmbsr:#x}");
    assert_eq!(c.read(0, SysReg::PmbptrEl1).unwrap().value, ptr);
    assert_eq!(c.read(0, SysReg::PmsirrEl1).unwrap().value, 1 << 8);
    assert!(ring.producer.irq(0).level);
    // The samples in flight were consumed, not left for later.
    assert_eq!(ring.producer.space(0), u64::from(hello.ring_slots));
    // A vCPU whose buffer was off comes back quietly.
    let st = c.restore(1, &[(SysReg::PmsicrEl1.encoding(), 5)]).unwrap();
    assert_eq!((st.status, st.pmbirq), (Status::OK, false));
    assert_eq!(c.read(1, SysReg::PmsicrEl1).unwrap().value, 5);
    // Once the driver clears PMBSR, records are written again.
    c.write(0, SysReg::PmbsrEl1, 0).unwrap();
    assert_eq!(
        ring.producer
            .push(0, &(40..45).map(load).collect::<Vec<_>>()),
        5
    );
    c.sync(0).unwrap();
    assert!(c.read(0, SysReg::PmbptrEl1).unwrap().value > ptr);
    // What cannot be restored refuses the request, and the connection
    // stays up.
    let absent = [(SysReg::PmbsrEl2.encoding(), 0)];
    assert_eq!(c.restore(1, &absent).unwrap().status, Status::BAD_STATE);
    assert_eq!(
        c.restore(1, &[(0x1234, 0)]).unwrap().status,
        Status::BAD_STATE
    );
    assert_eq!(c.restore(ALL_VCPUS, &[]).unwrap().status, Status::BAD_VCPU);
    assert_eq!(c.read(0, SysReg::PmbidrEl1).unwrap().outcome, 0);
}

#[test]
fn requests_other_than_sysreg_use_status_codes() {
    let h = server("status", Features::max());
    let guest = Guest::new();
    let (mut c, ring) = connect(h.path(), 2, &guest);
    assert_eq!(c.sync(2).unwrap().status, Status::BAD_VCPU);
    assert_eq!(c.reset(7).unwrap().status, Status::BAD_VCPU);
    // Unknown register: an outcome, not a dropped connection.
    assert_eq!(
        c.sysreg(0, 0xDEAD, None, PeContext::default())
            .unwrap()
            .outcome,
        Status::UNKNOWN_REGISTER
    );
    // Mismatched fds or sizes: BAD_RESOURCE, connection kept.
    let mut regions = guest.regions();
    regions[0].0.size = RAM_SIZE + 4096; // past the end of its file
    assert_eq!(
        c.set_mem_table(&regions).unwrap().status,
        Status::BAD_RESOURCE
    );
    regions[0].0.size = RAM_SIZE;
    regions[1].0.gpa = RAM_GPA + 4096; // overlaps
    assert_eq!(
        c.set_mem_table(&regions).unwrap().status,
        Status::BAD_RESOURCE
    );
    // RAM the peer could still shrink (no F_SEAL_SHRINK) is never mapped:
    // a later ftruncate would turn the next record into a SIGBUS.
    let unsealed = memfd("unsealed", RAM_FD_OFFSET + RAM_SIZE).unwrap();
    let mut regions = guest.regions();
    regions[0].1 = &unsealed;
    assert_eq!(
        c.set_mem_table(&regions).unwrap().status,
        Status::BAD_RESOURCE
    );
    assert_eq!(
        c.set_mem_table(&guest.regions()).unwrap().status,
        Status::OK
    );
    let size = ring.layout.size() as u64;
    assert_eq!(
        c.set_ring(size - 8, &ring.file, &ring.doorbell, &ring.irq)
            .unwrap()
            .status,
        Status::BAD_RESOURCE
    );
    let blank = sealed_memfd("blank", size).unwrap(); // no header
    assert_eq!(
        c.set_ring(size, &blank, &ring.doorbell, &ring.irq)
            .unwrap()
            .status,
        Status::BAD_RESOURCE
    );
    // A good ring QEMU could still shrink is refused too: a truncation
    // would fault the backend's next drain with SIGBUS.
    let unsealed = memfd("unsealed-ring", size).unwrap();
    std::io::copy(&mut &ring.file, &mut &unsealed).unwrap();
    assert_eq!(
        c.set_ring(size, &unsealed, &ring.doorbell, &ring.irq)
            .unwrap()
            .status,
        Status::BAD_RESOURCE
    );
    // PMU counters reach a capture.
    let mut ev = [0u64; 31];
    ev[0] = 11;
    assert_eq!(c.pmu_counters(0, &ev, 22, 33).unwrap().status, Status::OK);
    let ctx = PeContext {
        el: El::El0,
        ..Default::default()
    };
    assert_eq!(c.set_context(ALL_VCPUS, &ctx).unwrap().status, Status::OK);
    assert_eq!(c.reset(ALL_VCPUS).unwrap().status, Status::OK);
    // Still alive and well.
    assert_eq!(c.read(1, SysReg::PmbidrEl1).unwrap().outcome, 0);
}

/// Sends `bytes` on a fresh connection (after HELLO if `hello`) and checks
/// the backend drops the connection, then that it still serves.
fn expect_dropped(path: &Path, hello: bool, bytes: &[u8], fds: &[i32], what: &str) {
    let mut c = ChannelClient::connect(path).unwrap();
    if hello {
        c.hello(1).unwrap();
    }
    c.send_raw(bytes, fds).unwrap();
    c.stream()
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    // Anything the backend replies before closing is fine; it must close.
    let mut sink = Vec::new();
    let res = c.stream().try_clone().unwrap().read_to_end(&mut sink);
    assert!(res.is_ok(), "{what}: connection not closed: {res:?}");
    let mut ok = ChannelClient::connect(path).unwrap();
    assert_eq!(ok.hello(1).unwrap().status, Status::OK, "{what}");
}

fn msg(t: u16, vcpu: u32, payload: &[u8]) -> Vec<u8> {
    let mut h = Header::request(MsgType::Sync, vcpu, payload.len());
    h.msg_type = t;
    let mut m = h.to_bytes().to_vec();
    m.extend_from_slice(payload);
    m
}

#[test]
fn malformed_or_out_of_order_messages_drop_the_connection_only() {
    let h = server("malformed", Features::default());
    let p = h.path();
    let sysreg = SysregAccess {
        encoding: SysReg::PmbsrEl1.encoding(),
        is_write: false,
        value: 0,
        ctx: PeContext::default(),
    }
    .to_bytes();
    let hello = Hello {
        version: VERSION,
        num_vcpus: 1,
        midr: 0,
    }
    .to_bytes();
    let mut bad_magic = msg(MsgType::Sync as u16, 0, &[]);
    bad_magic[0] = b'X';
    let mut huge = msg(MsgType::Sync as u16, 0, &[]);
    huge[12..16].copy_from_slice(&100_000u32.to_le_bytes());
    let mut bad_ctx = sysreg;
    bad_ctx[16] = 9; // EL 9
    let mut bad_write = sysreg;
    bad_write[4] = 2;
    let eventfd = EventFd::new(0).unwrap();

    let cases: Vec<(bool, Vec<u8>, Vec<i32>, &str)> = vec![
        (false, bad_magic, vec![], "bad magic"),
        (false, huge, vec![], "payload over 4 KiB"),
        (
            false,
            msg(MsgType::Sysreg as u16, 0, &sysreg),
            vec![],
            "SYSREG before HELLO",
        ),
        (
            false,
            msg(MsgType::Sync as u16, 0, &[]),
            vec![],
            "SYNC before HELLO",
        ),
        (
            false,
            b"SPE1\x01\x00".to_vec(),
            vec![],
            "truncated header then EOF",
        ),
        (
            true,
            msg(MsgType::Hello as u16, ALL_VCPUS, &hello),
            vec![],
            "second HELLO",
        ),
        (true, msg(0x77, 0, &[]), vec![], "unknown type"),
        (
            true,
            msg(MsgType::Sync as u16 | 0x8000, 0, &[]),
            vec![],
            "reply bit",
        ),
        (
            true,
            msg(MsgType::Sysreg as u16, 0, &sysreg[..20]),
            vec![],
            "short SYSREG",
        ),
        (
            true,
            msg(MsgType::Sysreg as u16, 5, &sysreg),
            vec![],
            "SYSREG bad vCPU",
        ),
        (
            true,
            msg(MsgType::Sysreg as u16, 0, &bad_ctx),
            vec![],
            "bad EL",
        ),
        (
            true,
            msg(MsgType::Sysreg as u16, 0, &bad_write),
            vec![],
            "bad is_write",
        ),
        (
            true,
            msg(MsgType::Sync as u16, 0, &[1, 2]),
            vec![],
            "SYNC with payload",
        ),
        (
            true,
            msg(MsgType::Restore as u16, 0, &[3, 0, 0, 0, 0, 0, 0, 0]),
            vec![],
            "RESTORE shorter than its count",
        ),
        (
            true,
            msg(MsgType::Restore as u16, 0, &[0xff, 0xff, 0, 0, 0, 0, 0, 0]),
            vec![],
            "RESTORE count over a payload's",
        ),
        (
            false,
            msg(MsgType::Restore as u16, 0, &[0; 8]),
            vec![],
            "RESTORE before HELLO",
        ),
        (
            true,
            msg(MsgType::Sync as u16, 0, &[]),
            vec![eventfd.as_raw_fd()],
            "fds on SYNC",
        ),
        (
            true,
            msg(
                MsgType::SetMemTable as u16,
                ALL_VCPUS,
                &[99, 0, 0, 0, 0, 0, 0, 0],
            ),
            vec![],
            "17+ regions",
        ),
        (
            true,
            msg(MsgType::SetTranslation as u16, 0, &[0; 79]),
            vec![],
            "short SET_TRANSLATION",
        ),
    ];
    for (hello, bytes, fds, what) in cases {
        expect_dropped(p, hello, &bytes, &fds, what);
    }

    // Wrong version: refused in the HELLO reply, then dropped.
    let mut c = ChannelClient::connect(p).unwrap();
    let bad = Hello {
        version: 99,
        num_vcpus: 1,
        midr: 0,
    };
    let reply = c
        .request(MsgType::Hello, ALL_VCPUS, &bad.to_bytes(), &[])
        .unwrap();
    let reply = spe_protocol::channel::HelloReply::from_bytes(&reply).unwrap();
    assert_eq!(reply.status, Status::BAD_VERSION);
    assert_eq!(c.stream().read(&mut [0u8; 1]).unwrap(), 0);

    // A guest CPU that is not the profile's core (QEMU's max for the N1
    // profile): refused with BAD_CPU, then dropped. The N1's own MIDR, of
    // any revision, is served.
    for (midr, status) in [
        (0x000f_0510, Status::BAD_CPU),
        (0x414f_d0c1, Status::OK),
        (0x410f_d0c0, Status::OK),
    ] {
        let mut c = ChannelClient::connect(p).unwrap();
        let hello = Hello {
            version: VERSION,
            num_vcpus: 1,
            midr,
        };
        let reply = c
            .request(MsgType::Hello, ALL_VCPUS, &hello.to_bytes(), &[])
            .unwrap();
        let reply = spe_protocol::channel::HelloReply::from_bytes(&reply).unwrap();
        assert_eq!(reply.status, status, "{midr:#x}");
        if status != Status::OK {
            assert_eq!(c.stream().read(&mut [0u8; 1]).unwrap(), 0);
        }
    }

    // A corrupt ring index (more than a ring ahead) drops the connection.
    let guest = Guest::new();
    let (mut c, mut ring) = connect(p, 1, &guest);
    ring.producer.set_head(0, 1 << 40);
    assert!(c.sync(0).is_err());

    // A peer that stalls mid-message is dropped after the I/O timeout.
    let mut c = ChannelClient::connect(p).unwrap();
    c.hello(1).unwrap();
    c.send_raw(&msg(MsgType::Sync as u16, 0, &[])[..8], &[])
        .unwrap();
    let t = Instant::now();
    let mut ok = ChannelClient::connect(p).unwrap();
    assert_eq!(ok.hello(1).unwrap().status, Status::OK);
    assert!(t.elapsed() >= qemu::IO_TIMEOUT / 2);
    assert!(h.is_running());
}

/// The built binary as a child process; killed by PID when dropped.
struct Daemon {
    child: Child,
    sock: PathBuf,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        // SAFETY: signalling our own child by its PID.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGKILL) };
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.sock);
    }
}

fn wait_for(path: &Path) {
    let t = Instant::now();
    while !path.exists() {
        assert!(t.elapsed() < Duration::from_secs(10), "no socket");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn daemon_synthetic_source_fills_the_buffer_and_shuts_down_cleanly() {
    let sock = sock_path("daemon");
    let mut d = Daemon {
        child: Command::new(env!("CARGO_BIN_EXE_vhost-device-spe"))
            .args([
                "--qemu-socket",
                sock.to_str().unwrap(),
                "--synthetic",
                "200000",
            ])
            .env("RUST_LOG", "warn")
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
        sock: sock.clone(),
    };
    wait_for(&sock);
    let guest = Guest::new();
    let (mut c, ring) = connect(&sock, 1, &guest);
    let limit = BUF_VA + BUF_PAGES * 4096;
    program(&mut c, 0, &guest, BUF_VA, limit);
    // No ring traffic at all: the synthetic source fills the buffer.
    assert!(ring.wait_irq(Duration::from_secs(10)), "no PMBIRQ");
    assert!(ring.producer.irq(0).level);
    let r = c.read(0, SysReg::PmbsrEl1).unwrap();
    assert!(r.pmbirq && pmbsr_filled(r.value));
    let pcs = pcs(&buffer_bytes(&guest, 0));
    assert!(pcs.len() > 10);
    assert!(pcs
        .iter()
        .all(|&pc| pc >= vhost_device_spe::synthetic::TEXT_BASE));
    drop(c);

    // SIGTERM: exit 0 and the socket is gone.
    // SAFETY: signalling our own child by its PID.
    unsafe { libc::kill(d.child.id() as i32, libc::SIGTERM) };
    let t = Instant::now();
    let status = loop {
        if let Some(s) = d.child.try_wait().unwrap() {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "daemon did not exit");
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "{status:?}");
    assert!(!sock.exists());
}

#[test]
fn cli_requires_a_socket_even_with_synthetic() {
    let bin = env!("CARGO_BIN_EXE_vhost-device-spe");
    let out = Command::new(bin).output().unwrap();
    assert!(!out.status.success());
    // --synthetic feeds either front end, but needs one.
    let out = Command::new(bin)
        .args(["--synthetic", "10"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--socket-path") && err.contains("--qemu-socket"),
        "{err}"
    );
}

#[test]
fn memfd_mappings_share_guest_ram() {
    // The ring writes go straight to the memfd: the test's own mapping sees
    // what another mapping wrote (the property the whole channel relies on).
    let guest = Guest::new();
    let other = GuestMemoryMmap::<()>::from_ranges_with_files([(
        GuestAddress(RAM_GPA),
        RAM_SIZE as usize,
        Some(FileOffset::new(
            guest.ram.try_clone().unwrap(),
            RAM_FD_OFFSET,
        )),
    )])
    .unwrap();
    other.write_obj(0xABCDu64, GuestAddress(BUF_PA)).unwrap();
    assert_eq!(
        guest.mem.read_obj::<u64>(GuestAddress(BUF_PA)).unwrap(),
        0xABCD
    );
}

/// A client that connects and never says HELLO is dropped after
/// `HELLO_TIMEOUT`, and the VM that connected after it is served: one
/// silent peer cannot keep every later VM out.
#[test]
fn a_silent_client_does_not_block_the_next_vm() {
    let path = sock_path("silent");
    let _server = server("silent", Features::default());
    let mut silent = std::os::unix::net::UnixStream::connect(&path).unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let p = path.clone();
    thread::spawn(move || {
        let mut c = ChannelClient::connect(&p).unwrap();
        let _ = tx.send(c.hello(2).map(|r| r.status));
    });
    let bound = qemu::HELLO_TIMEOUT + Duration::from_secs(10);
    let status = rx
        .recv_timeout(bound)
        .expect("the VM behind a silent client was never served")
        .unwrap();
    assert_eq!(status, Status::OK);
    // The silent one was hung up on.
    silent
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut b = [0u8; 1];
    assert_eq!(silent.read(&mut b).unwrap(), 0);
}

#[test]
fn deterministic_backend_writes_and_raises_pmbirq_only_when_asked() {
    let mut cfg = ServerConfig::new(Features::default());
    cfg.deterministic = true;
    let h = qemu::spawn(&sock_path("determ"), cfg).unwrap();
    let guest = Guest::new();
    let (mut c, mut ring) = connect(h.path(), 2, &guest);
    let limit = BUF_VA + BUF_PAGES * 4096;
    program(&mut c, 1, &guest, BUF_VA, limit);
    // QEMU is told to hand every batch over with a SYNC.
    assert_ne!(state(&ring, 1).flags & ring::flags::SYNC, 0);

    // Enough samples to fill the buffer, and the doorbell: nothing is
    // written and nothing signalled until the vCPU asks.
    let ops: Vec<_> = (0..1000).map(load).collect();
    ring.producer.push(1, &ops);
    ring.doorbell.write(1).unwrap();
    assert!(!ring.wait_irq(Duration::from_millis(300)));
    assert!(buffer_bytes(&guest, 0).iter().all(|&b| b == 0));

    // The vCPU's SYNC writes them and fills the buffer; the level is in
    // the reply and the IRQ entry, with no eventfd wake-up to land at a
    // host-timed point.
    assert_eq!(c.sync(1).unwrap().status, Status::OK);
    assert!(buffer_bytes(&guest, 0).iter().any(|&b| b != 0));
    assert!(ring.producer.irq(1).level);
    assert!(!ring.wait_irq(Duration::from_millis(300)));
}
