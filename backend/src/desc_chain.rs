//! Test support shared by the unit tests and `tests/vhost_user.rs` (which
//! includes this file by path): a descriptor chain for virtio-queue's
//! mock split queue.

use virtio_bindings::virtio_ring::{VRING_DESC_F_NEXT, VRING_DESC_F_WRITE};
use virtio_queue::desc::{split::Descriptor as SplitDescriptor, RawDescriptor};

/// (addr, len, device-writable) descriptors chained from table index
/// `first` on, in table order.
pub fn desc_chain(first: u16, descs: &[(u64, u32, bool)]) -> Vec<RawDescriptor> {
    descs
        .iter()
        .enumerate()
        .map(|(i, &(addr, len, w))| {
            let last = i + 1 == descs.len();
            let mut flags = if w { VRING_DESC_F_WRITE as u16 } else { 0 };
            if !last {
                flags |= VRING_DESC_F_NEXT as u16;
            }
            let next = if last { 0 } else { first + i as u16 + 1 };
            RawDescriptor::from(SplitDescriptor::new(addr, len, flags, next))
        })
        .collect()
}
