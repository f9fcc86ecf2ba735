//! What the benchmarks share: a plausible stream of sampled loads and stores.

use spe_protocol::op::{OpClass, SampledOp};
use spe_protocol::packet::events;
use spe_protocol::regs::El;

/// The `i`th operation: an EL1 load or store with the real-hardware golden
/// addresses of reference/record-format.md, varied a little.
pub fn op(i: u64) -> SampledOp {
    SampledOp {
        pc: 0xffff_8000_1029_d3f4 + (i & 0xFF) * 4,
        el: El::El1,
        ns: true,
        class: OpClass::LoadStore {
            store: i & 1 == 1,
            subclass: 0,
            vector: false,
        },
        data_va: 0xffff_0000_0f29_3bc0 + (i & 0xFFF) * 8,
        data_pa: 0x0f29_3bc0 + (i & 0xFFF) * 8,
        data_pa_valid: true,
        size: 8,
        events: events::RETIRED | events::L1D_ACCESS | events::TLB_ACCESS,
        total_latency: 7 + (i & 15) as u32,
        issue_latency: 2,
        translation_latency: 1,
        physical_count: 39_395_093_558 + i * 100,
        ..Default::default()
    }
}
