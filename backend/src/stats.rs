//! The statistics line both front ends log when their VM goes: the
//! integration scenarios compare its total with what perf decoded in the
//! guest.

use log::info;

use crate::spu::{Spu, SpuStats};

/// One line per vCPU and a total: what the VM's SPUs did.
pub fn log_stats(spus: &[Spu]) {
    let mut total = SpuStats::default();
    for (v, spu) in spus.iter().enumerate() {
        let s = spu.stats();
        info!(
            "stats vCPU {v}: samples={} filtered={} records={} bytes={} discarded={} management_events={}",
            s.samples, s.filtered, s.records, s.bytes, s.discarded, s.management_events
        );
        total.samples += s.samples;
        total.filtered += s.filtered;
        total.records += s.records;
        total.bytes += s.bytes;
        total.discarded += s.discarded;
        total.management_events += s.management_events;
    }
    info!(
        "stats total: samples={} filtered={} records={} bytes={} discarded={} management_events={}",
        total.samples,
        total.filtered,
        total.records,
        total.bytes,
        total.discarded,
        total.management_events
    );
}
