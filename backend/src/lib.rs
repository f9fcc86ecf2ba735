//! vhost-device-spe: an out-of-process model of the Arm Statistical
//! Profiling Extension and PMU snapshots for QEMU guests.

pub mod spu;
pub mod vhu_spe;
