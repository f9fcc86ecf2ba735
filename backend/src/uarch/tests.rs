use super::*;

fn access(pc: u64, pa: u64, store: bool, ts: u64) -> SampledOp {
    SampledOp {
        pc,
        class: OpClass::LoadStore {
            store,
            subclass: 0,
            vector: false,
        },
        data_va: pa,
        data_pa: pa,
        data_pa_valid: true,
        size: 8,
        // QEMU's own guess: an L1 refill.
        events: events::RETIRED | events::L1D_ACCESS | events::L1D_REFILL,
        total_latency: 19,
        issue_latency: 1,
        physical_count: ts,
        ..SampledOp::default()
    }
}

/// Runs `n` accesses of instruction `pc` on `vcpu`, every fourth watched
/// and each watch ending as `reuse(i)` says on the next one; counts the
/// levels.
fn run(
    h: &mut MemoryHierarchy,
    vcpu: u32,
    pc: u64,
    n: u64,
    reuse: impl Fn(u64) -> Reuse,
) -> HashMap<&'static str, u64> {
    let mut levels = HashMap::new();
    let mut watching = false;
    for i in 0..n {
        let mut op = access(pc, 0x10_0000 + (i % 4096) * 8, false, i);
        if watching {
            op.reuse = reuse(i);
            op.reuse_pc = pc;
            watching = false;
        }
        if i % 4 == 0 {
            watching = true;
        }
        h.serve(vcpu, &mut op);
        if op.total_latency == 19 {
            // Before the first distance: QEMU's guess stands.
            continue;
        }
        let name = match op.total_latency - 1 - (19 & 3) {
            4 => "l1d",
            11 => "l2",
            35 => "llc",
            150 => "dram",
            75 => "peer",
            l => panic!("latency {l}"),
        };
        *levels.entry(name).or_default() += 1;
    }
    levels
}

#[test]
fn without_reuse_distances_the_front_ends_events_stand() {
    let mut h = MemoryHierarchy::new(CpuProfile::NeoverseN1, 1);
    let mut op = access(0x400, 0x1000, false, 1);
    let before = op;
    h.serve(0, &mut op);
    assert_eq!(op, before);
    assert_eq!(h.stats(), Stats::default());
}

#[test]
fn a_loop_that_fits_hits_l1_and_a_stream_goes_to_dram() {
    let mut h = MemoryHierarchy::new(CpuProfile::NeoverseN1, 1);
    // Each line reused after ~700 operations (~210 accesses): in L1.
    let fits = run(&mut h, 0, 0x400, 20_000, |_| Reuse::After(700));
    assert!(fits["l1d"] > 19_000, "{fits:?}");
    // A stream: one watch in eight never sees its line again.
    let mut h = MemoryHierarchy::new(CpuProfile::NeoverseN1, 1);
    let stream = run(&mut h, 0, 0x500, 40_000, |i| {
        if i % 32 == 1 {
            Reuse::NotWithin(1 << 22)
        } else {
            Reuse::After(3)
        }
    });
    let dram = stream["dram"] as f64 / 40_000.0;
    assert!((dram - 0.125).abs() < 0.03, "{stream:?}");
    // (A few while the first distances come in.)
    assert!(stream.get("l2").copied().unwrap_or(0) < 100, "{stream:?}");
}

#[test]
fn a_footprint_between_l1_and_l2_is_served_by_l2() {
    let mut h = MemoryHierarchy::new(CpuProfile::NeoverseN1, 1);
    // Every operation here is an access: reuse after 8 K accesses (a
    // 512 KiB loop) is too far for 1 K lines of L1, near enough for 16 K
    // of L2.
    let l = run(&mut h, 0, 0x600, 20_000, |_| Reuse::After(8192));
    assert!(l.get("l2").copied().unwrap_or(0) > 18_000, "{l:?}");
}

#[test]
fn each_instruction_gets_the_levels_of_its_own_reuse() {
    let mut h = MemoryHierarchy::new(CpuProfile::NeoverseN1, 1);
    let mut small = 0;
    let mut big = 0;
    let mut watching = None;
    for i in 0..40_000u64 {
        // Two instructions interleaved: one reuses its lines at once,
        // the other never.
        let pc = if i % 2 == 0 { 0x700 } else { 0x800 };
        let mut op = access(pc, 0x20_0000 + i * 64, false, i);
        if let Some(p) = watching.take() {
            op.reuse = if p == 0x700 {
                Reuse::After(10)
            } else {
                Reuse::NotWithin(1 << 22)
            };
            op.reuse_pc = p;
        }
        if i % 3 == 0 {
            watching = Some(pc);
        }
        h.serve(0, &mut op);
        if op.total_latency > 100 {
            if pc == 0x700 {
                small += 1;
            } else {
                big += 1;
            }
        }
    }
    assert!(small < 400, "small {small}");
    assert!(big > 19_000, "big {big}");
}

#[test]
fn false_sharing_is_served_from_the_peer_with_hitm() {
    let mut h = MemoryHierarchy::new(CpuProfile::NeoverseN1, 2);
    // Both vCPUs have reuse distances (the model is on for both).
    for v in 0..2 {
        let mut op = access(0x900, 0x9000, false, 0);
        op.reuse = Reuse::After(5);
        h.serve(v, &mut op);
    }
    // They take turns writing and reading their halves of one line.
    let mut peer = 0;
    for t in 1..1000u64 {
        let v = (t % 2) as u32;
        let mut st = access(0xa00 + u64::from(v), 0x8000 + u64::from(v) * 8, true, 2 * t);
        h.serve(v, &mut st);
        let mut ld = access(
            0xb00 + u64::from(v),
            0x8000 + u64::from(v) * 8,
            false,
            2 * t + 1,
        );
        h.serve(v, &mut ld);
        if st.events & events::CACHE_DATA_MODIFIED != 0 {
            assert_eq!(st.total_latency, 1 + (19 & 3) + 75);
            assert!(st.events & events::DATA_SNOOPED != 0);
            peer += 1;
        }
        // Its own store made the line its own again.
        assert_eq!(ld.events & events::CACHE_DATA_MODIFIED, 0);
    }
    assert_eq!(peer, 998, "every store but the first two finds the peer's");
    assert_eq!(h.stats().peer, 998);
}
