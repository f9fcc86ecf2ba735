//! Why a connection ends, and why a resource QEMU hands over is refused.

use std::io;
use std::time::Duration;

use spe_protocol::channel::{ChannelError, MsgType};
use spe_protocol::profile::CpuProfile;

use spe_channel::ring::RingError;

/// Why a connection ends.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnError {
    /// The peer closed it.
    #[error("the peer closed the connection")]
    Closed,
    #[error(transparent)]
    Io(io::Error),
    /// Malformed or out-of-order input: the connection is dropped.
    #[error(transparent)]
    Protocol(#[from] ProtocolError),
}

impl From<io::Error> for ConnError {
    fn from(e: io::Error) -> Self {
        match e.kind() {
            io::ErrorKind::UnexpectedEof => ConnError::Closed,
            _ => ConnError::Io(e),
        }
    }
}

impl From<ChannelError> for ConnError {
    fn from(e: ChannelError) -> Self {
        ConnError::Protocol(e.into())
    }
}

/// Input the channel's protocol does not allow. QEMU sent it, so QEMU is
/// broken, and the connection goes.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ProtocolError {
    /// A header or payload that does not decode.
    #[error(transparent)]
    Message(#[from] ChannelError),
    #[error("reply type {0:#x} sent as a request")]
    ReplyAsRequest(u16),
    #[error("{kind:?} carried {count} fds")]
    UnexpectedFds { kind: MsgType, count: usize },
    #[error("{kind:?} with a {len}-byte payload")]
    UnexpectedPayload { kind: MsgType, len: usize },
    #[error("no HELLO within {} s of connecting", .0.as_secs())]
    NoHello(Duration),
    #[error("second HELLO")]
    SecondHello,
    #[error(
        "HELLO refused: the guest CPU (MIDR_EL1 {midr:#010x}{}) is not the {profile} \
         this backend models; run QEMU with -cpu {} or the backend with --cpu {}",
        guest.map(|g| format!(", QEMU's -cpu {g}")).unwrap_or_default(),
        profile.qemu_cpu(),
        guest.map_or_else(|| "of that core".to_string(), |g| g.name().to_string())
    )]
    OtherCpu {
        midr: u32,
        guest: Option<CpuProfile>,
        profile: CpuProfile,
    },
    #[error("HELLO refused (status {status}): version {version}, {vcpus} vCPUs")]
    HelloRefused {
        status: u32,
        version: u32,
        vcpus: u32,
    },
    #[error("{0:?} before HELLO")]
    BeforeHello(MsgType),
    /// SYSREG has no status to carry a bad vCPU.
    #[error("SYSREG for vCPU {vcpu:#x} of {vcpus}")]
    SysregVcpu { vcpu: u32, vcpus: u32 },
    /// The shared ring's indices are out of bounds.
    #[error(transparent)]
    Ring(#[from] RingError),
}

/// Why SET_MEM_TABLE or SET_RING is refused (with a status: the
/// connection stays).
#[derive(Debug, thiserror::Error)]
pub(crate) enum ResourceError {
    #[error("{regions} regions but {fds} fds")]
    RegionFds { regions: usize, fds: usize },
    /// A region that QEMU could shrink under the mapping, or past its file.
    #[error("region gpa {gpa:#x}: {why}")]
    RegionNotMappable { gpa: u64, why: String },
    #[error("region gpa {0:#x} is too large to map")]
    RegionTooLarge(u64),
    #[error("cannot map region gpa {gpa:#x}: {source}")]
    RegionMap {
        gpa: u64,
        source: vm_memory::mmap::MmapRegionError,
    },
    #[error("region gpa {gpa:#x} size {size:#x} wraps")]
    RegionWraps { gpa: u64, size: u64 },
    #[error(transparent)]
    Regions(vm_memory::GuestRegionCollectionError),
    #[error("{0} fds, expected 3")]
    RingFds(usize),
    #[error("ring of {size} bytes, the layout is {layout}")]
    RingSize { size: u64, layout: usize },
    #[error("the ring: {0}")]
    RingNotMappable(String),
    #[error(transparent)]
    Ring(RingError),
    #[error("cannot create the drain timer: {0}")]
    DrainTimer(io::Error),
}
