//! vhost-device-spe: an out-of-process model of the Arm Statistical
//! Profiling Extension and PMU snapshots for QEMU aarch64 guests.
//!
//! [`spu`] is the device model (no I/O); the front ends drive it
//! ([`vhu_spe`]: the paravirtual virtio device over vhost-user; [`qemu`]:
//! the QEMU channel of the full-emulation path, with its shared
//! [`ring`] and the [`synthetic`] operation source); [`control`] is the
//! host-side control socket (queries, faults on demand, snapshots).

pub mod control;
pub mod decode;
#[cfg(test)]
mod desc_chain;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod listen;
pub mod qemu;
pub mod record;
pub mod report;
pub mod spu;
pub mod stats;
pub mod synthetic;
pub mod uarch;
pub mod vhu_spe;

/// Locks `m`, taking a poisoned lock's data as it is: a panic on one
/// thread must not take the daemon's other connections down with it.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
