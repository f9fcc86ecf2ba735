//! Where a sampled load or store is served from: the core's L1D or L2, the
//! system-level cache, DRAM, or a peer core's cache. `perf mem` and
//! `perf c2c` read the answer from the records (Data Source packet,
//! events, latency) as the truth about the program, so it comes from what
//! the program does, never from a fixed ratio:
//!
//! - **levels** from reuse distances (StatCache, [`statcache`]): QEMU
//!   watches the line of one sampled access in a few for its next access
//!   by the same vCPU and reports the operations in between, with the
//!   access's PC ([`SampledOp::reuse`]); each vCPU's distances, and each
//!   instruction's, give the miss ratio of caches of the core's sizes;
//! - **coherence** from the sampled stores ([`coherence`]): a line another
//!   vCPU wrote since this one last touched it is served from that peer's
//!   cache, modified.
//!
//! A front end that reports no reuse distances (the synthetic source)
//! keeps the events it gave.

pub mod coherence;
pub mod statcache;

use std::collections::HashMap;

use spe_protocol::op::{OpClass, Reuse, SampledOp};
use spe_protocol::packet::events;
use spe_protocol::profile::CpuProfile;

use crate::spu::xorshift64;
use statcache::Histogram;

/// Where an access was served from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    L1d,
    L2,
    /// The system-level cache (the interconnect's, shared by all cores).
    SystemCache,
    Dram,
    /// A peer core's cache, which held the line modified.
    PeerCore,
}

/// The caches of a core and of the system around it, and the cycles an
/// access served from each takes. The core's own are from its TRM and
/// software optimization guide; what the system adds depends on the
/// system (interconnect, memory) and is a choice, said as such.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Caches {
    /// Lines of 64 bytes.
    pub l1d_lines: f64,
    pub l2_lines: f64,
    pub llc_lines: f64,
    /// Load-to-use latency of a hit in each, in cycles.
    pub l1d_cycles: u32,
    pub l2_cycles: u32,
    pub llc_cycles: u32,
    pub dram_cycles: u32,
    pub peer_cycles: u32,
}

impl Caches {
    /// - Neoverse N1: 64 KiB L1D, 4-way, 64-byte lines, 4-cycle
    ///   load-to-use (Neoverse N1 TRM, "L1 data memory system"; Neoverse
    ///   N1 Software Optimization Guide); a private L2 of 256 KiB, 512 KiB
    ///   or 1 MiB (TRM, a build option): 1 MiB, as Graviton2 and Altra
    ///   have, and QEMU's `neoverse-n1` CCSIDR says.
    /// - Neoverse V1: the same L1D; L2 512 KiB or 1 MiB (TRM): 1 MiB, as
    ///   Graviton3 has and QEMU's `neoverse-v1` CCSIDR says.
    /// - `max`: QEMU's own CPU, no real core: the N1's.
    ///
    /// Chosen, not from a TRM (the system decides them): the L2's 11
    /// cycles, a 32 MiB system-level cache (Graviton2, Graviton3 and Altra
    /// have 32 MiB) at 35, DRAM at 150, and a line from a peer core's
    /// cache at 75. They only order the levels and put each on its side of
    /// perf's default `ldlat` of 30 (an L1D or L2 hit below it, the rest
    /// above), which is what `perf mem` and `perf c2c` filter on.
    pub const fn of(profile: CpuProfile) -> Caches {
        match profile {
            CpuProfile::NeoverseN1 | CpuProfile::NeoverseV1 | CpuProfile::Max => Caches {
                l1d_lines: (64 << 10) as f64 / 64.0,
                l2_lines: (1 << 20) as f64 / 64.0,
                llc_lines: (32 << 20) as f64 / 64.0,
                l1d_cycles: 4,
                l2_cycles: 11,
                llc_cycles: 35,
                dram_cycles: 150,
                peer_cycles: 75,
            },
        }
    }

    fn cycles(&self, level: Level) -> u32 {
        match level {
            Level::L1d => self.l1d_cycles,
            Level::L2 => self.l2_cycles,
            Level::SystemCache => self.llc_cycles,
            Level::Dram => self.dram_cycles,
            Level::PeerCore => self.peer_cycles,
        }
    }
}

/// The cache events of each level (those the SPU can report are kept by
/// its version's Events payload; the others are what happened).
fn events_of(level: Level) -> u64 {
    use events::*;
    let refill = L1D_REFILL | L2D_ACCESS;
    match level {
        Level::L1d => 0,
        Level::L2 => refill,
        Level::SystemCache => refill | L2D_MISS | LLC_ACCESS,
        Level::Dram => refill | L2D_MISS | LLC_ACCESS | LLC_MISS,
        Level::PeerCore => refill | L2D_MISS | LLC_ACCESS | DATA_SNOOPED | CACHE_DATA_MODIFIED,
    }
}

/// The events the model decides (QEMU's own guess at them is replaced).
const CACHE_EVENTS: u64 = events::L1D_REFILL
    | events::L2D_ACCESS
    | events::L2D_MISS
    | events::LLC_ACCESS
    | events::LLC_MISS
    | events::DATA_SNOOPED
    | events::CACHE_DATA_MODIFIED;

/// An instruction's own distances take over from its vCPU's once it has
/// this many.
const OWN_HISTOGRAM_AFTER: u64 = 8;
/// Instructions with a histogram of their own, per vCPU, at most.
const INSTRUCTIONS: usize = 4096;
/// A vCPU's miss ratios are solved again after this many new distances
/// (each solve is three bisections over the histogram: tens of µs).
const SOLVE_EVERY: u64 = 256;
/// An instruction's, after this many of its own.
const SOLVE_INSTRUCTION_EVERY: u64 = 32;

/// The miss ratios of one histogram at the three cache sizes.
#[derive(Clone, Copy, Debug, Default)]
struct Ratios {
    l1d: f64,
    l2: f64,
    llc: f64,
}

#[derive(Debug, Default)]
struct Instruction {
    hist: Histogram,
    ratios: Ratios,
    solved_at: u64,
}

/// One vCPU's view: its distances, overall and per instruction.
#[derive(Debug)]
struct Core {
    hist: Histogram,
    /// The miss ratios of `hist`, solved every [`SOLVE_EVERY`] samples.
    ratios: Ratios,
    solved_at: u64,
    instructions: HashMap<u64, Instruction>,
    /// The share of sampled operations that access memory, to turn
    /// distances in operations into accesses.
    memory_share: f64,
    rng: u64,
}

impl Core {
    fn new(seed: u64) -> Core {
        Core {
            hist: Histogram::default(),
            ratios: Ratios::default(),
            solved_at: 0,
            instructions: HashMap::new(),
            memory_share: 0.3,
            rng: seed | 1,
        }
    }
}

/// The memory system of one VM.
#[derive(Debug)]
pub struct MemoryHierarchy {
    caches: Caches,
    cores: Vec<Core>,
    lines: coherence::Lines,
    /// vCPUs whose front end reported a reuse distance: the model decides
    /// their levels.
    stats: Stats,
}

/// What the model decided, for `vhost-device-spe ctl stats` and tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stats {
    /// Watches that ended: the line came back, or not within the watch.
    pub reuse_samples: u64,
    pub not_reused: u64,
    /// Reuse distances in operations, by power of two.
    pub distances: [u64; 33],
    pub l1d: u64,
    pub l2: u64,
    pub system_cache: u64,
    pub dram: u64,
    pub peer: u64,
}

impl MemoryHierarchy {
    pub fn new(profile: CpuProfile, vcpus: u32) -> MemoryHierarchy {
        MemoryHierarchy {
            caches: Caches::of(profile),
            cores: (0..vcpus.max(1))
                .map(|v| Core::new(0x9e37_79b9_7f4a_7c15 ^ u64::from(v)))
                .collect(),
            lines: coherence::Lines::default(),
            stats: Stats::default(),
        }
    }

    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Takes `op`'s reuse-distance report, and for a load or store decides
    /// where it was served from: its cache events and total latency.
    pub fn serve(&mut self, vcpu: u32, op: &mut SampledOp) {
        let active = active(&self.cores);
        let Some(core) = self.cores.get_mut(vcpu as usize) else {
            return;
        };
        let is_mem = matches!(op.class, OpClass::LoadStore { .. });
        core.memory_share = core.memory_share * 0.999 + if is_mem { 0.001 } else { 0.0 };
        match op.reuse {
            Reuse::None => {}
            Reuse::After(ops) => {
                self.stats.reuse_samples += 1;
                self.stats.distances[ops.max(1).ilog2() as usize] += 1;
            }
            Reuse::NotWithin(_) => {
                self.stats.reuse_samples += 1;
                self.stats.not_reused += 1;
            }
        }
        take_reuse(core, op);
        if !is_mem || op.no_data_address || core.hist.samples() == 0 {
            return;
        }
        let store = matches!(op.class, OpClass::LoadStore { store: true, .. });
        let peer = if op.data_pa_valid {
            self.lines
                .access(vcpu, op.data_pa, op.physical_count, store)
        } else {
            None
        };
        let level = match peer {
            Some(_) => Level::PeerCore,
            None => level_of(core, &self.caches, op.pc, active),
        };
        self.stats.count(level);
        // QEMU's latency is its base (issue, translation) plus a guess at
        // the cache's: keep the base and the jitter, put the level's.
        let base = op.issue_latency + op.translation_latency + (op.total_latency & 3);
        op.total_latency = base + self.caches.cycles(level);
        op.events = (op.events & !CACHE_EVENTS) | events::L1D_ACCESS | events_of(level);
    }
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            reuse_samples: 0,
            not_reused: 0,
            distances: [0; 33],
            l1d: 0,
            l2: 0,
            system_cache: 0,
            dram: 0,
            peer: 0,
        }
    }
}

impl std::fmt::Display for Stats {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} reuse distances ({} not reused within the watch); loads and \
             stores served from L1D {}, L2 {}, system cache {}, DRAM {}, a peer \
             core {}",
            self.reuse_samples,
            self.not_reused,
            self.l1d,
            self.l2,
            self.system_cache,
            self.dram,
            self.peer
        )?;
        f.write_str("; distances (operations, log2: count)")?;
        for (k, n) in self.distances.iter().enumerate().filter(|(_, n)| **n > 0) {
            write!(f, " {k}:{n}")?;
        }
        Ok(())
    }
}

impl Stats {
    fn count(&mut self, level: Level) {
        let n = match level {
            Level::L1d => &mut self.l1d,
            Level::L2 => &mut self.l2,
            Level::SystemCache => &mut self.system_cache,
            Level::Dram => &mut self.dram,
            Level::PeerCore => &mut self.peer,
        };
        *n += 1;
    }
}

/// vCPUs that sample (their distances count in the shared cache).
fn active(cores: &[Core]) -> f64 {
    cores.iter().filter(|c| c.hist.samples() > 0).count().max(1) as f64
}

/// Files a finished watch's distance under its vCPU and under the
/// instruction that started it.
fn take_reuse(core: &mut Core, op: &SampledOp) {
    let d = match op.reuse {
        Reuse::None => return,
        Reuse::After(ops) => Some(f64::from(ops) * core.memory_share),
        Reuse::NotWithin(_) => None,
    };
    core.hist.add(d);
    if core.instructions.len() >= INSTRUCTIONS && !core.instructions.contains_key(&op.reuse_pc) {
        // Start afresh rather than track which is coldest.
        core.instructions.clear();
    }
    core.instructions
        .entry(op.reuse_pc)
        .or_default()
        .hist
        .add(d);
}

/// Whether a histogram of `n` samples, last solved at `solved_at`, is
/// solved again: at doubling counts while it is young (its first ratios
/// rest on a handful of samples), then every `every`.
fn solve_due(n: u64, solved_at: u64, every: u64) -> bool {
    n - solved_at >= every.min(solved_at.max(1))
}

/// Draws the level of one access of instruction `pc` from its miss
/// probabilities (its own distances once it has enough, else its vCPU's).
fn level_of(core: &mut Core, caches: &Caches, pc: u64, active: f64) -> Level {
    let n = core.hist.samples();
    if solve_due(n, core.solved_at, SOLVE_EVERY) {
        core.ratios = Ratios {
            l1d: core.hist.miss_ratio(caches.l1d_lines, 1.0),
            l2: core.hist.miss_ratio(caches.l2_lines, 1.0),
            llc: core.hist.miss_ratio(caches.llc_lines, active),
        };
        core.solved_at = n;
    }
    let global = core.ratios;
    let ratios = match core.instructions.get_mut(&pc) {
        Some(i) if i.hist.samples() >= OWN_HISTOGRAM_AFTER => {
            let m = i.hist.samples();
            if solve_due(m, i.solved_at, SOLVE_INSTRUCTION_EVERY) {
                i.ratios = Ratios {
                    l1d: i.hist.miss_probability(caches.l1d_lines, 1.0, global.l1d),
                    l2: i.hist.miss_probability(caches.l2_lines, 1.0, global.l2),
                    llc: i
                        .hist
                        .miss_probability(caches.llc_lines, active, global.llc),
                };
                i.solved_at = m;
            }
            i.ratios
        }
        _ => global,
    };
    let u = (xorshift64(&mut core.rng) >> 11) as f64 / (1u64 << 53) as f64;
    // Inclusive levels: a miss in a bigger cache is a miss in a smaller.
    if u < ratios.llc {
        Level::Dram
    } else if u < ratios.l2.max(ratios.llc) {
        Level::SystemCache
    } else if u < ratios.l1d.max(ratios.l2) {
        Level::L2
    } else {
        Level::L1d
    }
}

#[cfg(test)]
mod tests;
