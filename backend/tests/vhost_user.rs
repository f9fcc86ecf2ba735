//! Runs the built `vhost-device-spe` on a real Unix socket and drives it with
//! the `vhost` crate's vhost-user front end, as QEMU would.

use std::fs::File;
use std::io::{Read, Write};
use std::os::unix::io::{AsRawFd, FromRawFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use spe_protocol::regs::SysReg;
use spe_protocol::virtio::{
    Config, CtrlOp, CtrlRequest, CtrlResponse, CtrlStatus, Event, EventKind, CONTROL_QUEUE,
    EVENT_QUEUE, NUM_QUEUES, VIRTIO_SPE_CONFIG_SIZE,
};
use vhost::vhost_user::message::{
    VhostUserConfigFlags, VhostUserProtocolFeatures, VhostUserVirtioFeatures,
};
use vhost::vhost_user::{Frontend, VhostUserFrontend};
use vhost::{VhostBackend, VhostUserMemoryRegionInfo, VringConfigData};
use vhost_device_spe::spu::Features;
use virtio_bindings::virtio_config::VIRTIO_F_VERSION_1;
use virtio_bindings::virtio_ring::{VRING_DESC_F_NEXT, VRING_DESC_F_WRITE};
use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};
use virtio_queue::mock::MockSplitQueue;
use vm_memory::{Bytes, FileOffset, GuestAddress, GuestMemoryBackend, GuestMemoryMmap};
use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

const BIN: &str = env!("CARGO_BIN_EXE_vhost-device-spe");
const TIMEOUT: Duration = Duration::from_secs(10);

/// A daemon child process; killed by PID when dropped.
struct Daemon {
    child: Child,
    sock: PathBuf,
    log: PathBuf,
}

impl Daemon {
    fn start(name: &str, args: &[&str]) -> Daemon {
        let base = std::env::temp_dir().join(format!("spe-vhu-{}-{name}", std::process::id()));
        let sock = base.with_extension("sock");
        let log = base.with_extension("log");
        let child = Command::new(BIN)
            .arg("--socket-path")
            .arg(&sock)
            .args(args)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let d = Daemon { child, sock, log };
        d.wait_for(|| d.sock.exists(), "socket to appear");
        d
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn wait_for(&self, mut cond: impl FnMut() -> bool, what: &str) {
        let start = Instant::now();
        while !cond() {
            assert!(
                start.elapsed() < TIMEOUT,
                "timed out waiting for {what}; log:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn wait_log(&self, needle: &str, count: usize) {
        self.wait_for(
            || self.log().matches(needle).count() >= count,
            &format!("{count}x {needle:?} in the log"),
        );
    }

    fn connect(&self) -> Frontend {
        Frontend::connect(&self.sock, NUM_QUEUES as u64).unwrap()
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.sock);
        let _ = std::fs::remove_file(&self.log);
    }
}

/// The start of QEMU's conversation, up to protocol-feature negotiation.
fn handshake(fe: &mut Frontend) -> u64 {
    fe.set_owner().unwrap();
    let features = fe.get_features().unwrap();
    // Without EVENT_IDX so every used buffer signals the call eventfd.
    let acked =
        features & ((1 << VIRTIO_F_VERSION_1) | VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits());
    fe.set_features(acked).unwrap();
    let pf = fe.get_protocol_features().unwrap();
    assert!(pf.contains(VhostUserProtocolFeatures::CONFIG | VhostUserProtocolFeatures::MQ));
    fe.set_protocol_features(VhostUserProtocolFeatures::CONFIG | VhostUserProtocolFeatures::MQ)
        .unwrap();
    features
}

fn read_config(fe: &mut Frontend) -> Config {
    let (_, payload) = fe
        .get_config(
            0,
            VIRTIO_SPE_CONFIG_SIZE as u32,
            VhostUserConfigFlags::empty(),
            &[0; VIRTIO_SPE_CONFIG_SIZE],
        )
        .unwrap();
    Config::from_bytes(&payload).unwrap()
}

#[test]
fn handshake_and_config_space() {
    let d = Daemon::start("config", &["--vcpus", "3", "--cpu", "neoverse-v1"]);
    let mut fe = d.connect();
    let features = handshake(&mut fe);
    assert_ne!(features & (1 << VIRTIO_F_VERSION_1), 0);
    assert_ne!(
        features & VhostUserVirtioFeatures::PROTOCOL_FEATURES.bits(),
        0
    );
    assert_eq!(fe.get_queue_num().unwrap(), NUM_QUEUES as u64);

    let cfg = read_config(&mut fe);
    let want = Features::neoverse_v1();
    assert_eq!(cfg.num_vcpus, 3);
    assert_eq!(cfg.pmsidr, want.pmsidr());
    assert_eq!(cfg.pmbidr, want.pmbidr());
    assert_eq!(cfg.id_aa64dfr0, want.id_aa64dfr0_spe_fields());
    d.wait_log("vhost-user connection accepted", 1);
    d.wait_log("vhost-user GET_CONFIG offset=0 size=64", 1);

    // A partial read, as a driver reading one field does.
    let (_, b) = fe
        .get_config(8, 8, VhostUserConfigFlags::empty(), &[0; 8])
        .unwrap();
    assert_eq!(u64::from_le_bytes(b.try_into().unwrap()), want.pmsidr());
    // (Out-of-range reads get the empty error reply; the unit tests cover
    // that, because the vhost crate's front end blocks on such a reply.)
}

#[test]
fn serves_again_after_disconnect() {
    let d = Daemon::start("reconnect", &["--vcpus", "2"]);
    for n in 1..=3 {
        let mut fe = d.connect();
        handshake(&mut fe);
        assert_eq!(read_config(&mut fe).num_vcpus, 2);
        drop(fe);
        d.wait_log("vhost-user connection accepted", n);
        d.wait_log("vhost-user front end disconnected", n);
    }
}

#[test]
fn garbage_on_the_socket_is_survived() {
    let d = Daemon::start("garbage", &[]);
    let mut s = UnixStream::connect(&d.sock).unwrap();
    // A header with an unknown request code and an absurd size.
    s.write_all(&[0xff; 64]).unwrap();
    s.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut buf = [0u8; 64];
    // The daemon drops the connection: EOF (or a reset), not a hang.
    let _ = s.read(&mut buf);
    drop(s);
    d.wait_log("vhost-user connection closed on error", 1);

    let mut fe = d.connect();
    handshake(&mut fe);
    assert_eq!(read_config(&mut fe).num_vcpus, 1);
    assert!(!d.log().contains("panicked"));
}

#[test]
fn sigterm_removes_the_socket() {
    let mut d = Daemon::start("sigterm", &[]);
    // A live connection must not keep the daemon up.
    let mut fe = d.connect();
    handshake(&mut fe);
    // SAFETY: signalling our own child by its PID.
    assert_eq!(
        unsafe { libc::kill(d.child.id() as libc::pid_t, libc::SIGTERM) },
        0
    );
    let start = Instant::now();
    let status = loop {
        if let Some(s) = d.child.try_wait().unwrap() {
            break s;
        }
        assert!(start.elapsed() < TIMEOUT, "daemon ignored SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status:?}");
    assert!(!d.sock.exists());
    assert!(d.log().contains("shutting down"));
}

const MEM_SIZE: usize = 0x10_0000;
const QSIZE: u16 = 16;
const RINGS: [GuestAddress; 2] = [GuestAddress(0), GuestAddress(0x1000)];
const REQS: u64 = 0x1_0000;
const RESPS: u64 = 0x2_0000;
const EVENTS: u64 = 0x3_0000;

fn wait_eventfd(fd: &EventFd, d: &Daemon) {
    d.wait_for(|| fd.read().is_ok(), "a used-buffer notification");
}

/// SET_MEM_TABLE with a memfd, both vrings set up, then a batch of register
/// accesses on the control queue and a PMBIRQ event on the event queue.
#[test]
fn control_queue_round_trip() {
    let d = Daemon::start("ctrlq", &["--vcpus", "2"]);

    // SAFETY: memfd_create with a valid C string; the fd is checked and owned.
    let file = unsafe {
        let fd = libc::memfd_create(c"spe-guest-ram".as_ptr(), 0);
        assert!(fd >= 0);
        File::from_raw_fd(fd)
    };
    file.set_len(MEM_SIZE as u64).unwrap();
    let gm: GuestMemoryMmap = GuestMemoryMmap::from_ranges_with_files([(
        GuestAddress(0),
        MEM_SIZE,
        Some(FileOffset::new(file.try_clone().unwrap(), 0)),
    )])
    .unwrap();
    let host = gm.get_host_address(GuestAddress(0)).unwrap() as u64;
    let queues = RINGS.map(|base| MockSplitQueue::create(&gm, base, QSIZE));

    let mut fe = d.connect();
    handshake(&mut fe);
    fe.set_mem_table(&[VhostUserMemoryRegionInfo {
        guest_phys_addr: 0,
        memory_size: MEM_SIZE as u64,
        userspace_addr: host,
        mmap_offset: 0,
        mmap_handle: file.as_raw_fd(),
    }])
    .unwrap();
    let calls: Vec<EventFd> = (0..2)
        .map(|_| EventFd::new(EFD_NONBLOCK).unwrap())
        .collect();
    let kicks: Vec<EventFd> = (0..2)
        .map(|_| EventFd::new(EFD_NONBLOCK).unwrap())
        .collect();
    for (i, q) in queues.iter().enumerate() {
        fe.set_vring_num(i, QSIZE).unwrap();
        fe.set_vring_addr(
            i,
            &VringConfigData {
                queue_max_size: QSIZE,
                queue_size: QSIZE,
                flags: 0,
                // The front end speaks its own virtual addresses, as QEMU does.
                desc_table_addr: host + q.desc_table_addr().0,
                used_ring_addr: host + q.used_addr().0,
                avail_ring_addr: host + q.avail_addr().0,
                log_addr: None,
            },
        )
        .unwrap();
        fe.set_vring_base(i, 0).unwrap();
        fe.set_vring_call(i, &calls[i]).unwrap();
        fe.set_vring_kick(i, &kicks[i]).unwrap();
        fe.set_vring_enable(i, true).unwrap();
    }
    d.wait_log("guest memory table updated", 1);

    // Post an event buffer first, as a driver does at probe.
    let evq = &queues[EVENT_QUEUE as usize];
    evq.add_desc_chains(
        &[RawDescriptor::from(SplitDescriptor::new(
            EVENTS,
            Event::SIZE as u32,
            VRING_DESC_F_WRITE as u16,
            0,
        ))],
        0,
    )
    .unwrap();
    kicks[EVENT_QUEUE as usize].write(1).unwrap();

    const PMBSR_S: u64 = 1 << 17;
    let limit = 0xffff_0000_1000_0000;
    let reqs = [
        (CtrlOp::Write, SysReg::PmscrEl1, 0x23),
        (CtrlOp::Write, SysReg::PmblimitrEl1, limit),
        (CtrlOp::Read, SysReg::PmscrEl1, 0),
        (CtrlOp::Read, SysReg::PmblimitrEl1, 0),
        (CtrlOp::Write, SysReg::PmbsrEl1, PMBSR_S),
    ];
    let bytes: Vec<u8> = reqs
        .iter()
        .flat_map(|&(op, reg, value)| {
            CtrlRequest {
                vcpu: 1,
                reg: reg.encoding(),
                op,
                value,
            }
            .to_bytes()
        })
        .collect();
    gm.write_slice(&bytes, GuestAddress(REQS)).unwrap();
    let ctrlq = &queues[CONTROL_QUEUE as usize];
    ctrlq
        .add_desc_chains(
            &[
                RawDescriptor::from(SplitDescriptor::new(
                    REQS,
                    bytes.len() as u32,
                    VRING_DESC_F_NEXT as u16,
                    1,
                )),
                RawDescriptor::from(SplitDescriptor::new(
                    RESPS,
                    (reqs.len() * CtrlResponse::SIZE) as u32,
                    VRING_DESC_F_WRITE as u16,
                    0,
                )),
            ],
            0,
        )
        .unwrap();
    kicks[CONTROL_QUEUE as usize].write(1).unwrap();

    wait_eventfd(&calls[CONTROL_QUEUE as usize], &d);
    assert_eq!(ctrlq.used().idx().load(), 1);
    let used = ctrlq.used().ring().ref_at(0).unwrap().load();
    assert_eq!(used.len(), (reqs.len() * CtrlResponse::SIZE) as u32);
    let mut b = vec![0u8; reqs.len() * CtrlResponse::SIZE];
    gm.read_slice(&mut b, GuestAddress(RESPS)).unwrap();
    let resp: Vec<CtrlResponse> = b
        .chunks(CtrlResponse::SIZE)
        .map(|c| CtrlResponse::from_bytes(c).unwrap())
        .collect();
    assert!(resp.iter().all(|r| r.status == CtrlStatus::Ok), "{resp:?}");
    assert_eq!(resp[2].value, 0x23);
    assert_eq!(resp[3].value, limit);
    assert!(!resp[3].pmbirq);
    assert!(resp[4].pmbirq);

    wait_eventfd(&calls[EVENT_QUEUE as usize], &d);
    assert_eq!(evq.used().idx().load(), 1);
    let mut b = [0u8; Event::SIZE];
    gm.read_slice(&mut b, GuestAddress(EVENTS)).unwrap();
    let ev = Event::from_bytes(&b).unwrap();
    assert_eq!(ev.vcpu, 1);
    assert_eq!(ev.kind, EventKind::PmbirqChanged);
    assert!(ev.pmbirq);
    assert_ne!(ev.pmbsr & PMBSR_S, 0);
}
