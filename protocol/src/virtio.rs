//! The paravirtual virtio-spe device: device ID, queues, config space and
//! queue messages, with fixed little-endian layouts.
//!
//! Every structure here has an explicit byte layout (`SIZE` constant,
//! `to_bytes`/`from_bytes`) rather than a `#[repr(C)]` cast, so the layout is
//! the same on any host and parsing a guest-supplied buffer can only fail with
//! an error, never misbehave. [`c_header`] turns the same constants into the C
//! header the guest driver includes (`guest-driver/virtio_spe/virtio_spe.h`); a unit test
//! checks that the committed header is the generated one.
//!
//! # Device
//!
//! * Device ID [`VIRTIO_ID_SPE`] = 58 (0x3A). The virtio spec has not
//!   allocated 58; the IDs around it that are taken or reserved (50, 56, 60)
//!   are avoided. QEMU attaches with
//!   `-device vhost-user-device-pci,chardev=..,virtio-id=58,num_vqs=2,config_size=64`
//!   (QEMU 10.2: `vhost-user-test-device-pci`, the same properties).
//! * Queue 0, [`CONTROL_QUEUE`]: the driver posts a buffer whose
//!   device-readable part holds one or more [`CtrlRequest`]s back to back and
//!   whose device-writable part has room for as many [`CtrlResponse`]s. The
//!   device executes the requests in order and writes response `i` for
//!   request `i`.
//! * Queue 1, [`EVENT_QUEUE`]: the driver keeps device-writable buffers of at
//!   least [`Event::SIZE`] bytes posted; the device completes one with an
//!   [`Event`] whenever a vCPU's PMBIRQ level changes or a snapshot capture
//!   completes. This is the device's interrupt path (a vhost-user back end
//!   cannot send config-change messages through vhost 0.18).
//! * Config space: [`Config`], exactly [`VIRTIO_SPE_CONFIG_SIZE`] bytes.
//!
//! # Translation registers
//!
//! The buffer the driver programs (PMBPTR_EL1, PMBLIMITR_EL1) holds kernel
//! virtual addresses, and the device writes records through the guest's
//! own stage 1 tables. So besides the SPE registers, the control queue
//! accepts reads and writes of the EL1 translation registers by their
//! ordinary system-register encodings: [`REG_SCTLR_EL1`], [`REG_TCR_EL1`],
//! [`REG_TTBR0_EL1`] and [`REG_TTBR1_EL1`]. The device keeps a copy per
//! vCPU and never sees the real ones, so **the driver writes its
//! translation registers before enabling the buffer, and again if they
//! change**. A write (even of an unchanged value) also drops the device's
//! cached translation of the buffer, which is how a driver that remapped
//! the buffer's pages tells the device. Device reset clears them to 0
//! (translation off: the buffer's addresses are then physical).
//!
//! # Malformed buffers
//!
//! A control buffer whose readable length is zero or not a multiple of
//! [`CtrlRequest::SIZE`], or that holds more than [`MAX_BATCH`] requests, is
//! not executed: the device writes one response with
//! [`CtrlStatus::Malformed`] if the writable part has room for it. A buffer
//! whose writable part is too small for all responses is not executed either
//! and is returned with used length 0.

use std::fmt;

use crate::le::{u32_at, u64_at};
use crate::regs::{encode, SysReg};

/// Virtio device ID of the SPE device (unallocated in the virtio spec).
pub const VIRTIO_ID_SPE: u32 = 58;

/// The ID the device takes on an unpatched QEMU (the stock-QEMU path):
/// QEMU up to 10.2 aborts at start-up on a `virtio-id` it has no name for
/// (58 among them; the series' patch "hw/virtio: do not abort on a virtio
/// ID without a name" fixes that), so the device borrows one it names and
/// Linux has no driver for: 38, the parameter server
/// (`virtio-param-serv`). The guest driver is told (`insmod virtio_spe.ko
/// virtio_id=38`).
pub const VIRTIO_ID_SPE_STOCK: u32 = 38;
/// Number of virtqueues.
pub const NUM_QUEUES: usize = 2;
/// Index of the control queue.
pub const CONTROL_QUEUE: u16 = 0;
/// Index of the event queue.
pub const EVENT_QUEUE: u16 = 1;
/// Size of the config space in bytes.
pub const VIRTIO_SPE_CONFIG_SIZE: usize = 64;
/// Version of the queue message layouts in this module, reported in [`Config::version`].
pub const VIRTIO_SPE_VERSION: u32 = 1;
/// Largest number of requests the device accepts in one control buffer.
pub const MAX_BATCH: u32 = 64;

/// SCTLR_EL1, (op0, op1, CRn, CRm, op2) = (3, 0, 1, 0, 0); see
/// "Translation registers" in the module documentation.
pub const REG_SCTLR_EL1: u32 = encode(3, 0, 1, 0, 0);
/// TTBR0_EL1, (3, 0, 2, 0, 0).
pub const REG_TTBR0_EL1: u32 = encode(3, 0, 2, 0, 0);
/// TTBR1_EL1, (3, 0, 2, 0, 1).
pub const REG_TTBR1_EL1: u32 = encode(3, 0, 2, 0, 1);
/// TCR_EL1, (3, 0, 2, 0, 2).
pub const REG_TCR_EL1: u32 = encode(3, 0, 2, 0, 2);

/// Feature bit in [`Config::features`]: the PMU snapshot extension
/// (FEAT_PMUv3_SS) registers are implemented.
pub const VIRTIO_SPE_F_SNAPSHOT: u32 = 1 << 0;

/// A buffer could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ParseError {
    /// The buffer has `got` bytes where `want` were needed.
    Length { want: usize, got: usize },
    /// The operation byte of a control request is not a [`CtrlOp`].
    BadOp(u8),
    /// The kind byte of an event is not an [`EventKind`].
    BadEventKind(u8),
    /// A status byte is not a [`CtrlStatus`].
    BadStatus(u8),
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParseError::Length { want, got } => {
                write!(f, "buffer is {got} bytes, expected {want}")
            }
            ParseError::BadOp(v) => write!(f, "unknown control operation {v}"),
            ParseError::BadEventKind(v) => write!(f, "unknown event kind {v}"),
            ParseError::BadStatus(v) => write!(f, "unknown status {v}"),
        }
    }
}

impl std::error::Error for ParseError {}

fn exact<const N: usize>(b: &[u8]) -> Result<&[u8; N], ParseError> {
    b.try_into().map_err(|_| ParseError::Length {
        want: N,
        got: b.len(),
    })
}

/// The device's config space (read-only for the driver).
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | `num_vcpus` |
/// | 4 | 4 | `features` (`VIRTIO_SPE_F_*`) |
/// | 8 | 8 | `pmsidr` (PMSIDR_EL1) |
/// | 16 | 8 | `pmbidr` (PMBIDR_EL1) |
/// | 24 | 8 | `id_aa64dfr0` (the SPE/PMU-snapshot fields of ID_AA64DFR0_EL1, others 0) |
/// | 32 | 4 | `version` ([`VIRTIO_SPE_VERSION`]) |
/// | 36 | 4 | `max_batch` ([`MAX_BATCH`]) |
/// | 40 | 24 | reserved, 0 |
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Config {
    pub num_vcpus: u32,
    pub features: u32,
    pub pmsidr: u64,
    pub pmbidr: u64,
    pub id_aa64dfr0: u64,
    pub version: u32,
    pub max_batch: u32,
}

impl Config {
    pub const SIZE: usize = VIRTIO_SPE_CONFIG_SIZE;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..4].copy_from_slice(&self.num_vcpus.to_le_bytes());
        b[4..8].copy_from_slice(&self.features.to_le_bytes());
        b[8..16].copy_from_slice(&self.pmsidr.to_le_bytes());
        b[16..24].copy_from_slice(&self.pmbidr.to_le_bytes());
        b[24..32].copy_from_slice(&self.id_aa64dfr0.to_le_bytes());
        b[32..36].copy_from_slice(&self.version.to_le_bytes());
        b[36..40].copy_from_slice(&self.max_batch.to_le_bytes());
        b
    }

    /// Parses a whole config space. Reserved bytes are ignored.
    pub fn from_bytes(b: &[u8]) -> Result<Self, ParseError> {
        let b = exact::<{ Self::SIZE }>(b)?;
        Ok(Config {
            num_vcpus: u32_at(b, 0),
            features: u32_at(b, 4),
            pmsidr: u64_at(b, 8),
            pmbidr: u64_at(b, 16),
            id_aa64dfr0: u64_at(b, 24),
            version: u32_at(b, 32),
            max_batch: u32_at(b, 36),
        })
    }
}

/// Operation of a control request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CtrlOp {
    Read = 0,
    Write = 1,
}

impl CtrlOp {
    pub fn from_u8(v: u8) -> Result<Self, ParseError> {
        match v {
            0 => Ok(CtrlOp::Read),
            1 => Ok(CtrlOp::Write),
            v => Err(ParseError::BadOp(v)),
        }
    }
}

/// One system-register access, as the driver sends it.
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | `vcpu` |
/// | 4 | 4 | `reg`: QEMU encoding `op0<<14 \| op1<<11 \| CRn<<7 \| CRm<<3 \| op2` of an SPE or PMU-snapshot register or a `REG_*` translation register |
/// | 8 | 1 | `op` ([`CtrlOp`]) |
/// | 9 | 7 | reserved, 0 |
/// | 16 | 8 | `value` (written for a write, ignored for a read) |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtrlRequest {
    pub vcpu: u32,
    pub reg: u32,
    pub op: CtrlOp,
    pub value: u64,
}

impl CtrlRequest {
    pub const SIZE: usize = 24;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..4].copy_from_slice(&self.vcpu.to_le_bytes());
        b[4..8].copy_from_slice(&self.reg.to_le_bytes());
        b[8] = self.op as u8;
        b[16..24].copy_from_slice(&self.value.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> Result<Self, ParseError> {
        let b = exact::<{ Self::SIZE }>(b)?;
        Ok(CtrlRequest {
            vcpu: u32_at(b, 0),
            reg: u32_at(b, 4),
            op: CtrlOp::from_u8(b[8])?,
            value: u64_at(b, 16),
        })
    }
}

/// Status of one control request. Values 0..=3 are the architectural
/// access outcomes (`spe_protocol::regs::AccessOutcome`) the guest driver
/// must act on; values from 0x10 are device-level errors.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum CtrlStatus {
    Ok = 0,
    Undefined = 1,
    TrapToEl2 = 2,
    TrapToEl3 = 3,
    /// `vcpu` is not below `Config::num_vcpus`.
    BadVcpu = 0x10,
    /// `reg` is not an SPE, PMU-snapshot or `REG_*` translation register encoding.
    UnknownRegister = 0x11,
    /// Bad `op` byte, or a malformed buffer (see the module documentation).
    Malformed = 0x12,
}

impl CtrlStatus {
    pub fn from_u8(v: u8) -> Result<Self, ParseError> {
        Ok(match v {
            0 => CtrlStatus::Ok,
            1 => CtrlStatus::Undefined,
            2 => CtrlStatus::TrapToEl2,
            3 => CtrlStatus::TrapToEl3,
            0x10 => CtrlStatus::BadVcpu,
            0x11 => CtrlStatus::UnknownRegister,
            0x12 => CtrlStatus::Malformed,
            v => return Err(ParseError::BadStatus(v)),
        })
    }
}

impl From<crate::regs::AccessOutcome> for CtrlStatus {
    fn from(o: crate::regs::AccessOutcome) -> Self {
        use crate::regs::AccessOutcome;
        match o {
            AccessOutcome::Ok => CtrlStatus::Ok,
            AccessOutcome::Undefined => CtrlStatus::Undefined,
            AccessOutcome::TrapToEl2 => CtrlStatus::TrapToEl2,
            AccessOutcome::TrapToEl3 => CtrlStatus::TrapToEl3,
        }
    }
}

/// The device's answer to one [`CtrlRequest`].
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 1 | `status` ([`CtrlStatus`]) |
/// | 1 | 1 | `pmbirq`: the vCPU's PMBIRQ level after the request (0/1) |
/// | 2 | 6 | reserved, 0 |
/// | 8 | 8 | `value`: the value read (reads with status Ok), else 0 |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CtrlResponse {
    pub status: CtrlStatus,
    pub pmbirq: bool,
    pub value: u64,
}

impl CtrlResponse {
    pub const SIZE: usize = 16;

    /// A response carrying only an error status.
    pub fn error(status: CtrlStatus) -> Self {
        CtrlResponse {
            status,
            pmbirq: false,
            value: 0,
        }
    }

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0] = self.status as u8;
        b[1] = self.pmbirq as u8;
        b[8..16].copy_from_slice(&self.value.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> Result<Self, ParseError> {
        let b = exact::<{ Self::SIZE }>(b)?;
        Ok(CtrlResponse {
            status: CtrlStatus::from_u8(b[0])?,
            pmbirq: b[1] != 0,
            value: u64_at(b, 8),
        })
    }
}

/// Why the device completed an event buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EventKind {
    /// The vCPU's PMBIRQ level changed to `Event::pmbirq`.
    PmbirqChanged = 1,
    /// A PMU snapshot capture on the vCPU completed; `Event::data` holds
    /// PMSSCR_EL1 after the capture.
    SnapshotDone = 2,
}

impl EventKind {
    pub fn from_u8(v: u8) -> Result<Self, ParseError> {
        match v {
            1 => Ok(EventKind::PmbirqChanged),
            2 => Ok(EventKind::SnapshotDone),
            v => Err(ParseError::BadEventKind(v)),
        }
    }
}

/// An event the device writes into a posted event-queue buffer.
///
/// | offset | size | field |
/// |---|---|---|
/// | 0 | 4 | `vcpu` |
/// | 4 | 1 | `kind` ([`EventKind`]) |
/// | 5 | 1 | `pmbirq`: the vCPU's PMBIRQ level now (0/1) |
/// | 6 | 2 | reserved, 0 |
/// | 8 | 8 | `pmbsr`: PMBSR of the EL that drives PMBIRQ |
/// | 16 | 8 | `data`: kind-specific (see [`EventKind`]), else 0 |
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub vcpu: u32,
    pub kind: EventKind,
    pub pmbirq: bool,
    pub pmbsr: u64,
    pub data: u64,
}

impl Event {
    pub const SIZE: usize = 24;

    pub fn to_bytes(&self) -> [u8; Self::SIZE] {
        let mut b = [0u8; Self::SIZE];
        b[0..4].copy_from_slice(&self.vcpu.to_le_bytes());
        b[4] = self.kind as u8;
        b[5] = self.pmbirq as u8;
        b[8..16].copy_from_slice(&self.pmbsr.to_le_bytes());
        b[16..24].copy_from_slice(&self.data.to_le_bytes());
        b
    }

    pub fn from_bytes(b: &[u8]) -> Result<Self, ParseError> {
        let b = exact::<{ Self::SIZE }>(b)?;
        Ok(Event {
            vcpu: u32_at(b, 0),
            kind: EventKind::from_u8(b[4])?,
            pmbirq: b[5] != 0,
            pmbsr: u64_at(b, 8),
            data: u64_at(b, 16),
        })
    }
}

/// Writes a C struct whose fields are `(C type, name, offset, size)`, with
/// explicit padding so the C layout is the table above whatever the compiler.
fn c_struct(out: &mut String, name: &str, size: usize, fields: &[(&str, &str, usize, usize)]) {
    use std::fmt::Write;
    let mut at = 0;
    let mut pad = 0;
    let _ = writeln!(out, "struct {name} {{");
    for &(ty, field, off, sz) in fields {
        if off > at {
            let _ = writeln!(out, "\t__u8 reserved{pad}[{}];", off - at);
            pad += 1;
        }
        let _ = writeln!(out, "\t{ty} {field};");
        at = off + sz;
    }
    if size > at {
        let _ = writeln!(out, "\t__u8 reserved{pad}[{}];", size - at);
    }
    let _ = writeln!(out, "}} __packed;");
    // A uapi-style header has no static assertions: the size is a
    // constant the driver asserts against (the config's is
    // VIRTIO_SPE_CONFIG_SIZE).
    if let Some(short) = name.strip_prefix("virtio_spe_").filter(|n| *n != "config") {
        let _ = writeln!(
            out,
            "#define VIRTIO_SPE_{}_SIZE {size}",
            short.to_uppercase()
        );
    }
    out.push('\n');
}

/// The C header for the guest driver, generated from this module's
/// constants and layouts. `guest-driver/virtio_spe/virtio_spe.h` is this text.
pub fn c_header() -> String {
    use std::fmt::Write;
    let mut h = String::new();
    h.push_str(
        "/* SPDX-License-Identifier: (GPL-2.0 OR Apache-2.0 OR BSD-3-Clause) */\n\
         /*\n\
         \x20* virtio-spe: the paravirtual Arm SPE device of vhost-device-spe.\n\
         \x20*\n\
         \x20* GENERATED by spe_protocol::virtio::c_header(); do not edit.\n\
         \x20* Regenerate with: SPE_BLESS=1 cargo test -p spe-protocol c_header\n\
         \x20* All fields are little-endian.\n\
         \x20*/\n\
         #ifndef VIRTIO_SPE_H\n\
         #define VIRTIO_SPE_H\n\n\
         #include <linux/const.h>\n\
         #include <linux/types.h>\n\n",
    );
    let defines: &[(&str, String)] = &[
        ("VIRTIO_ID_SPE", VIRTIO_ID_SPE.to_string()),
        ("VIRTIO_SPE_NUM_QUEUES", NUM_QUEUES.to_string()),
        ("VIRTIO_SPE_CONTROL_QUEUE", CONTROL_QUEUE.to_string()),
        ("VIRTIO_SPE_EVENT_QUEUE", EVENT_QUEUE.to_string()),
        ("VIRTIO_SPE_CONFIG_SIZE", VIRTIO_SPE_CONFIG_SIZE.to_string()),
        ("VIRTIO_SPE_VERSION", VIRTIO_SPE_VERSION.to_string()),
        ("VIRTIO_SPE_MAX_BATCH", MAX_BATCH.to_string()),
        (
            "VIRTIO_SPE_F_SNAPSHOT",
            format!("_BITUL({})", VIRTIO_SPE_F_SNAPSHOT.trailing_zeros()),
        ),
        ("", String::new()),
        ("VIRTIO_SPE_REG_SCTLR_EL1", format!("0x{REG_SCTLR_EL1:04x}")),
        ("VIRTIO_SPE_REG_TTBR0_EL1", format!("0x{REG_TTBR0_EL1:04x}")),
        ("VIRTIO_SPE_REG_TTBR1_EL1", format!("0x{REG_TTBR1_EL1:04x}")),
        ("VIRTIO_SPE_REG_TCR_EL1", format!("0x{REG_TCR_EL1:04x}")),
        ("", String::new()),
        ("VIRTIO_SPE_OP_READ", (CtrlOp::Read as u8).to_string()),
        ("VIRTIO_SPE_OP_WRITE", (CtrlOp::Write as u8).to_string()),
        ("", String::new()),
        ("VIRTIO_SPE_S_OK", (CtrlStatus::Ok as u8).to_string()),
        (
            "VIRTIO_SPE_S_UNDEFINED",
            (CtrlStatus::Undefined as u8).to_string(),
        ),
        (
            "VIRTIO_SPE_S_TRAP_EL2",
            (CtrlStatus::TrapToEl2 as u8).to_string(),
        ),
        (
            "VIRTIO_SPE_S_TRAP_EL3",
            (CtrlStatus::TrapToEl3 as u8).to_string(),
        ),
        (
            "VIRTIO_SPE_S_BAD_VCPU",
            format!("0x{:02x}", CtrlStatus::BadVcpu as u8),
        ),
        (
            "VIRTIO_SPE_S_UNKNOWN_REG",
            format!("0x{:02x}", CtrlStatus::UnknownRegister as u8),
        ),
        (
            "VIRTIO_SPE_S_MALFORMED",
            format!("0x{:02x}", CtrlStatus::Malformed as u8),
        ),
        ("", String::new()),
        (
            "VIRTIO_SPE_EV_PMBIRQ",
            (EventKind::PmbirqChanged as u8).to_string(),
        ),
        (
            "VIRTIO_SPE_EV_SNAPSHOT_DONE",
            (EventKind::SnapshotDone as u8).to_string(),
        ),
    ];
    for (name, value) in defines {
        if name.is_empty() {
            h.push('\n');
        } else {
            let _ = writeln!(h, "#define {name} {value}");
        }
    }
    // The SPE and PMU-snapshot registers the control queue serves, by the
    // same encoding as the translation registers above.
    h.push('\n');
    for r in SysReg::all() {
        if let SysReg::PmevcntsvrEl1(n) = r {
            if n == 0 {
                let _ = writeln!(
                    h,
                    "#define VIRTIO_SPE_REG_PMEVCNTSVR_EL1(n) (0x{:04x} + (n))",
                    r.encoding()
                );
            }
            continue;
        }
        let _ = writeln!(
            h,
            "#define VIRTIO_SPE_REG_{} 0x{:04x}",
            r.name(),
            r.encoding()
        );
    }
    h.push('\n');
    c_struct(
        &mut h,
        "virtio_spe_config",
        Config::SIZE,
        &[
            ("__le32", "num_vcpus", 0, 4),
            ("__le32", "features", 4, 4),
            ("__le64", "pmsidr", 8, 8),
            ("__le64", "pmbidr", 16, 8),
            ("__le64", "id_aa64dfr0", 24, 8),
            ("__le32", "version", 32, 4),
            ("__le32", "max_batch", 36, 4),
        ],
    );
    c_struct(
        &mut h,
        "virtio_spe_ctrl_req",
        CtrlRequest::SIZE,
        &[
            ("__le32", "vcpu", 0, 4),
            ("__le32", "reg", 4, 4),
            ("__u8", "op", 8, 1),
            ("__le64", "value", 16, 8),
        ],
    );
    c_struct(
        &mut h,
        "virtio_spe_ctrl_resp",
        CtrlResponse::SIZE,
        &[
            ("__u8", "status", 0, 1),
            ("__u8", "pmbirq", 1, 1),
            ("__le64", "value", 8, 8),
        ],
    );
    c_struct(
        &mut h,
        "virtio_spe_event",
        Event::SIZE,
        &[
            ("__le32", "vcpu", 0, 4),
            ("__u8", "kind", 4, 1),
            ("__u8", "pmbirq", 5, 1),
            ("__le64", "pmbsr", 8, 8),
            ("__le64", "data", 16, 8),
        ],
    );
    h.push_str("#endif /* VIRTIO_SPE_H */\n");
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_round_trip_and_layout() {
        let c = Config {
            num_vcpus: 4,
            features: VIRTIO_SPE_F_SNAPSHOT,
            pmsidr: 0x0002_6437,
            pmbidr: 0x20,
            id_aa64dfr0: 1 << 32,
            version: VIRTIO_SPE_VERSION,
            max_batch: MAX_BATCH,
        };
        let b = c.to_bytes();
        assert_eq!(b.len(), 64);
        assert_eq!(&b[0..4], &[4, 0, 0, 0]);
        assert_eq!(&b[8..11], &[0x37, 0x64, 0x02]);
        assert_eq!(b[28], 1);
        assert!(b[40..].iter().all(|&x| x == 0));
        assert_eq!(Config::from_bytes(&b), Ok(c));
        assert_eq!(
            Config::from_bytes(&b[..63]),
            Err(ParseError::Length { want: 64, got: 63 })
        );
    }

    #[test]
    fn ctrl_request_layout() {
        let r = CtrlRequest {
            vcpu: 1,
            reg: 0xc4c8,
            op: CtrlOp::Write,
            value: 0x1122_3344_5566_7788,
        };
        let b = r.to_bytes();
        assert_eq!(&b[..9], &[1, 0, 0, 0, 0xc8, 0xc4, 0, 0, 1]);
        assert_eq!(b[16], 0x88);
        assert_eq!(CtrlRequest::from_bytes(&b), Ok(r));
        let mut bad = b;
        bad[8] = 7;
        assert_eq!(CtrlRequest::from_bytes(&bad), Err(ParseError::BadOp(7)));
        assert!(CtrlRequest::from_bytes(&b[1..]).is_err());
    }

    #[test]
    fn ctrl_response_and_event_layout() {
        let r = CtrlResponse {
            status: CtrlStatus::UnknownRegister,
            pmbirq: true,
            value: 5,
        };
        let b = r.to_bytes();
        assert_eq!(&b[..3], &[0x11, 1, 0]);
        assert_eq!(CtrlResponse::from_bytes(&b), Ok(r));
        assert_eq!(
            CtrlResponse::from_bytes(&[9; 16]),
            Err(ParseError::BadStatus(9))
        );

        let e = Event {
            vcpu: 3,
            kind: EventKind::PmbirqChanged,
            pmbirq: true,
            pmbsr: 1 << 17,
            data: 0,
        };
        let b = e.to_bytes();
        assert_eq!(&b[..6], &[3, 0, 0, 0, 1, 1]);
        assert_eq!(b[10], 2);
        assert_eq!(Event::from_bytes(&b), Ok(e));
        assert!(Event::from_bytes(&[0; 24]).is_err());
    }

    #[test]
    fn translation_register_encodings() {
        assert_eq!(REG_SCTLR_EL1, 0xC080);
        assert_eq!(REG_TTBR0_EL1, 0xC100);
        assert_eq!(REG_TTBR1_EL1, 0xC101);
        assert_eq!(REG_TCR_EL1, 0xC102);
        // None collides with an SPE or PMU-snapshot register.
        for r in [REG_SCTLR_EL1, REG_TTBR0_EL1, REG_TTBR1_EL1, REG_TCR_EL1] {
            assert_eq!(crate::regs::SysReg::from_encoding(r), None);
        }
        let h = c_header();
        assert!(h.contains("#define VIRTIO_SPE_REG_TTBR1_EL1 0xc101\n"));
    }

    #[test]
    fn status_codes_match_access_outcome() {
        use crate::regs::AccessOutcome;
        assert_eq!(CtrlStatus::Ok as u8, AccessOutcome::Ok as u8);
        assert_eq!(CtrlStatus::Undefined as u8, AccessOutcome::Undefined as u8);
        assert_eq!(CtrlStatus::TrapToEl2 as u8, AccessOutcome::TrapToEl2 as u8);
        assert_eq!(CtrlStatus::TrapToEl3 as u8, AccessOutcome::TrapToEl3 as u8);
        assert_eq!(
            CtrlStatus::from(AccessOutcome::TrapToEl2),
            CtrlStatus::TrapToEl2
        );
    }

    /// Fails when `guest-driver/virtio_spe/virtio_spe.h` is not what `c_header()`
    /// generates. `SPE_BLESS=1` rewrites the file instead.
    #[test]
    fn pmevcntsvr_macro_is_the_encoding() {
        // The header's PMEVCNTSVR_EL1(n) macro adds n to counter 0's encoding.
        let base = SysReg::PmevcntsvrEl1(0).encoding();
        for n in 0..=30u8 {
            assert_eq!(SysReg::PmevcntsvrEl1(n).encoding(), base + u32::from(n));
        }
    }

    /// A number as the header or the spec writes it: `58`, `0x10`,
    /// `_BITUL(0)` or `bit 0`.
    fn spec_number(v: &str) -> Option<u64> {
        let v = v.trim();
        if let Some(b) = v.strip_prefix("bit ") {
            return b.parse().ok().map(|b: u32| 1u64 << b);
        }
        if let Some(b) = v.strip_prefix("_BITUL(").and_then(|b| b.strip_suffix(')')) {
            return b.parse().ok().map(|b: u32| 1u64 << b);
        }
        match v.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => v.parse().ok(),
        }
    }

    /// guest-driver/virtio-spe-spec.md, the device's specification, says
    /// what the generated header says: every structure verbatim, and
    /// every constant but the SPE register encodings (which it names as a
    /// set) in a table row `` | `NAME` | value | ``.
    #[test]
    fn spec_matches_header() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../guest-driver/virtio-spe-spec.md"
        );
        let spec = std::fs::read_to_string(path).unwrap();
        let header = c_header();
        let mut rest = header.as_str();
        let mut structs = 0;
        while let Some(start) = rest.find("\nstruct virtio_spe_").map(|i| i + 1) {
            let end = rest[start..].find("} __packed;").unwrap() + start + "} __packed;".len();
            assert!(
                spec.contains(&rest[start..end]),
                "{path} lacks\n{}",
                &rest[start..end]
            );
            structs += 1;
            rest = &rest[end..];
        }
        assert_eq!(structs, 4);
        let rows: Vec<(&str, &str)> = spec
            .lines()
            .filter_map(|l| {
                let mut cells = l.strip_prefix("| `")?.splitn(2, "` | ");
                let name = cells.next()?;
                let value = cells.next()?.split(" |").next()?;
                Some((name, value))
            })
            .collect();
        let mut checked = 0;
        for line in header.lines() {
            let Some(def) = line.strip_prefix("#define ") else {
                continue;
            };
            let Some((name, value)) = def.split_once(' ') else {
                continue;
            };
            if name == "VIRTIO_SPE_H" || name.starts_with("VIRTIO_SPE_REG_PM") {
                continue;
            }
            let row = rows.iter().find(|(n, _)| *n == name);
            let Some((_, said)) = row else {
                panic!("{path} has no table row for {name}");
            };
            match name.strip_prefix("VIRTIO_SPE_REG_") {
                // A translation register: the row names it.
                Some(reg) => assert_eq!(*said, reg, "{name}"),
                None => assert_eq!(
                    spec_number(said),
                    spec_number(value),
                    "{name}: {said} vs {value}"
                ),
            }
            checked += 1;
        }
        assert!(checked >= 20, "only {checked} constants checked");
    }

    #[test]
    fn c_header_matches_committed_file() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../guest-driver/virtio_spe/virtio_spe.h"
        );
        let want = c_header();
        if std::env::var_os("SPE_BLESS").is_some() {
            std::fs::write(path, &want).unwrap();
        }
        let got = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            got == want,
            "{path} is stale; regenerate with SPE_BLESS=1 cargo test -p spe-protocol c_header"
        );
    }
}
