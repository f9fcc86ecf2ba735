//! Everything two processes of vhost-device-spe must agree on: SPE and
//! PMU-snapshot system registers, the sampled-operation record a front end
//! feeds in, and the SPE record packet codec.

pub mod op;
pub mod packet;
pub mod regs;
