//! Guest memory from SET_MEM_TABLE: one region per fd, mapped shared, as
//! vhost-user back ends map theirs.

use std::fs::File;

use spe_protocol::channel::MemTable;
use vm_memory::{FileOffset, GuestAddress, GuestMemoryRegion, GuestRegionMmap, MmapRegion};

use super::error::ResourceError;
use super::Mem;

/// Maps SET_MEM_TABLE's regions, one fd each.
pub(super) fn map_memory(table: &MemTable, fds: Vec<File>) -> Result<Mem, ResourceError> {
    if fds.len() != table.regions.len() {
        return Err(ResourceError::RegionFds {
            regions: table.regions.len(),
            fds: fds.len(),
        });
    }
    if table.regions.is_empty() {
        return Ok(Mem::new());
    }
    let mut regions = Vec::with_capacity(fds.len());
    for (r, file) in table.regions.iter().zip(fds) {
        // A shared mapping past the end of its file faults with SIGBUS, and
        // so does one the peer shrinks later.
        spe_channel::shm::check_mappable(&file, r.fd_offset, r.size)
            .map_err(|why| ResourceError::RegionNotMappable { gpa: r.gpa, why })?;
        let Ok(size) = usize::try_from(r.size) else {
            return Err(ResourceError::RegionTooLarge(r.gpa));
        };
        let mapping = MmapRegion::<()>::from_file(FileOffset::new(file, r.fd_offset), size)
            .map_err(|source| ResourceError::RegionMap { gpa: r.gpa, source })?;
        let region = GuestRegionMmap::new(mapping, GuestAddress(r.gpa)).ok_or(
            ResourceError::RegionWraps {
                gpa: r.gpa,
                size: r.size,
            },
        )?;
        regions.push(region);
    }
    regions.sort_by_key(|r| r.start_addr());
    Mem::from_regions(regions).map_err(ResourceError::Regions)
}
