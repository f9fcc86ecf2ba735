//! Definitions shared by vhost-device-spe, the patched QEMU and the guest driver.

pub mod regs;
pub mod virtio;
