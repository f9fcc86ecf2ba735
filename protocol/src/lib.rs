//! Everything two processes of vhost-device-spe must agree on: SPE and
//! PMU-snapshot system registers, the sampled-operation record a front end
//! feeds in, the SPE record packet codec, the virtio-spe device's config
//! space and queue messages, and the names of the CPU profiles.

pub mod a64;
pub mod channel;
#[cfg(feature = "control")]
pub mod control;
pub mod guest_port;
mod le;
pub mod op;
pub mod packet;
pub mod profile;
pub mod regs;
pub mod virtio;
