//! vhost-device-spe: an out-of-process model of the Arm Statistical
//! Profiling Extension and PMU snapshots for QEMU aarch64 guests.
//!
//! [`spu`] is the device model (no I/O); the front ends drive it
//! ([`vhu_spe`]: the paravirtual virtio device over vhost-user).

pub mod decode;
pub mod spu;
pub mod vhu_spe;
