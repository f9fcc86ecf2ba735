//! spe-plugin: a TCG plugin that makes an unpatched QEMU (10.2, 11.1) a
//! source of sampled operations for vhost-device-spe's paravirtual device.
//!
//! ```sh
//! vhost-device-spe --socket-path vu.sock --plugin-socket plugin.sock --vcpus 2 &
//! qemu-system-aarch64 -plugin libspe_plugin.so,socket=plugin.sock \
//!     -device vhost-user-test-device-pci,chardev=spe0,virtio-id=38,... ...
//! ```
//!
//! It counts each vCPU's instructions inline, selects one at the interval
//! the guest's driver programmed (the backend publishes it), builds the
//! operation's record from its encoding and registers, and hands it to the
//! backend through the ring the patched QEMU uses. The backend's model
//! filters it and writes the SPE record into the guest's buffer.

pub mod api;
pub mod capture;
pub mod count;
pub mod select;
pub mod threads;
pub mod timestamp;
// What calls into QEMU is left out of the unit tests: their executable
// has no QEMU to resolve the plugin API against.
#[cfg(not(test))]
mod feed;
#[cfg(not(test))]
mod qemu;

/// Locks `m`, taking a poisoned lock's data as it is: a panic in one
/// callback must not stop every vCPU's sampling.
#[cfg(not(test))]
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
