//! Everything two processes of vhost-device-spe must agree on: SPE and
//! PMU-snapshot system registers, the sampled-operation record a front end
//! feeds in, the SPE record packet codec, and the virtio-spe device's
//! config space and queue messages.

pub mod channel;
pub mod control;
mod le;
pub mod op;
pub mod packet;
pub mod regs;
pub mod virtio;
