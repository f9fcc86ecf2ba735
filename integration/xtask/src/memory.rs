//! What `perf mem` and `perf c2c` say about where loads are served from:
//! `spe-mem-levels` (levels follow the workload's reuse) and `spe-c2c`
//! (false sharing found), with `spe-c2c-padded`, the negative control.

use crate::scenario::{RunOutput, Scenario};
use crate::scenarios::proof;
use std::collections::HashMap;

/// Data source codes of the common (Neoverse) encoding the N1 profile
/// writes: L1D, L2, system cache, DRAM.
const DS_L1D: &str = "0";
const DS_FAR: [&str; 2] = ["11", "14"];

/// At least this many loads of each function, so shares mean something.
const MIN_LOADS: u64 = 200;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        proof("spe-mem-levels", check_mem_levels).proves(
            "`perf mem record --ldlat 0 -t load -c 8192 -- spe-workload levels 2` on `-cpu \
             neoverse-n1` (slices of a load loop over 16 KiB, `spe_workload_small`, and of one \
             load per line over 64 MiB, `spe_workload_large`), then `perf mem report \
             --sort=sym,mem -n` and perf's decoding of each load's Data Source packet: at least \
             200 loads of each; the small loop's at least 90 % L1D in both, the large one's at \
             least 60 % system cache or DRAM and at most 30 % L1D. Negative control (unit test): \
             fixed-ratio levels, and the two loops swapped, are rejected.",
        ),
        proof("spe-c2c", check_c2c).proves(
            "`perf c2c record -- spe-workload false-sharing 3`: two threads pinned to CPUs 0 and 1 \
             increment the first two words of one line; `perf c2c report --stdio --no-source` must \
             have that line first in its shared-line table, loads of it served by the peer core \
             (\"Load HIT Local Peer\", or \"Load Local HITM\" on older perf), and both \
             `spe_workload_share_a` and `_b` in its distribution. Negative control: \
             `spe-c2c-padded`.",
        ),
        proof("spe-c2c-padded", check_c2c_padded).proves(
            "The negative control of `spe-c2c`, in every run: the two counters a line apart \
             (`false-sharing 3 padded`); the `spe-c2c` check must fail, and for its reason: \
             neither counter's line first, neither function among the shared lines'.",
        ),
    ]
}

/// `SPE-DS SYMBOL DATA-SOURCE COUNT` lines: the loads perf's decoder gave
/// each function, by the Data Source packet's value.
fn data_sources(console: &str) -> HashMap<(String, String), u64> {
    let mut m = HashMap::new();
    for line in console.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if let ["SPE-DS", sym, ds, n] = f[..] {
            if let Ok(n) = n.parse::<u64>() {
                *m.entry((sym.to_string(), ds.to_string())).or_default() += n;
            }
        }
    }
    m
}

/// `SPE-MEM` lines (`perf mem report --sort=sym,mem -n`): samples per
/// function and memory level as perf mem prints them ("L1 hit", "RAM
/// hit", ...).
fn mem_report(console: &str) -> HashMap<(String, String), u64> {
    let mut m = HashMap::new();
    for line in console.lines() {
        let Some(rest) = line.strip_prefix("SPE-MEM ") else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        // pct samples [.] symbol level words...
        if f.len() >= 5 && f[2].starts_with('[') {
            if let Ok(n) = f[1].parse::<u64>() {
                let level = f[4..].join(" ");
                *m.entry((f[3].to_string(), level)).or_default() += n;
            }
        }
    }
    m
}

/// Shares of `sym`'s loads for which `pick` holds, out of all its loads.
fn share(m: &HashMap<(String, String), u64>, sym: &str, pick: impl Fn(&str) -> bool) -> (u64, f64) {
    let (mut all, mut picked) = (0u64, 0u64);
    for ((s, k), n) in m {
        if s == sym {
            all += n;
            if pick(k) {
                picked += n;
            }
        }
    }
    (
        all,
        if all > 0 {
            picked as f64 / all as f64
        } else {
            0.0
        },
    )
}

/// The 16 KiB loop's loads are L1D hits (≥ 90 %), the 64 MiB loop's come
/// from the system cache or DRAM (≥ 60 %, and at most 30 % L1D), in the
/// records' Data Source packets and in what perf mem reports.
pub fn check_mem_levels(out: &RunOutput) -> Result<(), String> {
    let ds = data_sources(&out.console);
    let (small_n, small_l1) = share(&ds, "spe_workload_small", |d| d == DS_L1D);
    let (large_n, large_far) = share(&ds, "spe_workload_large", |d| DS_FAR.contains(&d));
    let (_, large_l1) = share(&ds, "spe_workload_large", |d| d == DS_L1D);
    let mem = mem_report(&out.console);
    let (mem_small, mem_small_l1) = share(&mem, "spe_workload_small", |l| l.starts_with("L1"));
    let (mem_large, mem_large_far) = share(&mem, "spe_workload_large", |l| {
        l.contains("RAM") || l.starts_with("L3")
    });
    let mut errs = Vec::new();
    if small_n < MIN_LOADS || large_n < MIN_LOADS {
        errs.push(format!(
            "too few loads decoded: {small_n} of spe_workload_small, {large_n} of spe_workload_large"
        ));
    }
    if small_l1 < 0.9 {
        errs.push(format!(
            "spe_workload_small (16 KiB): {:.0} % of its loads from L1D, want ≥ 90 %",
            small_l1 * 100.0
        ));
    }
    if large_far < 0.6 || large_l1 > 0.3 {
        errs.push(format!(
            "spe_workload_large (64 MiB): {:.0} % from the system cache or DRAM (want ≥ 60 %), {:.0} % from L1D (want ≤ 30 %)",
            large_far * 100.0,
            large_l1 * 100.0
        ));
    }
    if mem_small == 0 || mem_large == 0 || mem_small_l1 < 0.9 || mem_large_far < 0.6 {
        errs.push(format!(
            "perf mem report: spe_workload_small {:.0} % L1 of {mem_small} samples (want ≥ 90 %), spe_workload_large {:.0} % L3 or RAM of {mem_large} (want ≥ 60 %)",
            mem_small_l1 * 100.0,
            mem_large_far * 100.0
        ));
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

/// What `perf c2c report --stdio` (`SPE-C2C` lines) says.
#[derive(Debug, Default, PartialEq)]
struct C2c {
    /// Loads served from a peer core: "Load HIT Local Peer" (perf that
    /// knows peers), or "Load Local HITM" (older perf, which decodes a
    /// peer core's data source as HITM).
    peer_loads: u64,
    /// The address of the first line of the shared-line table.
    top_line: Option<u64>,
    /// Functions in the shared lines' distribution.
    functions: Vec<String>,
}

fn parse_c2c(console: &str) -> C2c {
    let mut c = C2c::default();
    let mut in_table = false;
    for line in console.lines() {
        let Some(rest) = line.strip_prefix("SPE-C2C") else {
            continue;
        };
        let rest = rest.trim();
        if let Some((k, v)) = rest.split_once(':') {
            let k = k.trim();
            if k == "Load HIT Local Peer" || k == "Load Local HITM" {
                c.peer_loads += v.trim().parse::<u64>().unwrap_or(0);
            }
        }
        if rest.contains("Shared Data Cache Line Table") {
            in_table = true;
            continue;
        }
        if rest.contains("Shared Cache Line Distribution Pareto") {
            in_table = false;
        }
        let f: Vec<&str> = rest.split_whitespace().collect();
        if in_table && c.top_line.is_none() && f.first() == Some(&"0") {
            c.top_line = f
                .get(1)
                .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
        }
        if let Some(i) = f.iter().position(|w| *w == "[.]" || *w == "[k]") {
            if let Some(sym) = f.get(i + 1) {
                if !c.functions.iter().any(|s| s == sym) {
                    c.functions.push(sym.to_string());
                }
            }
        }
    }
    c
}

fn hex_result(out: &RunOutput, key: &str) -> Result<u64, String> {
    let v = out.result(key).ok_or_else(|| format!("no {key}"))?;
    u64::from_str_radix(v.trim_start_matches("0x"), 16).map_err(|e| format!("{key}={v}: {e}"))
}

/// perf c2c puts the counters' line first, has loads of it served by the
/// peer core, and names both functions writing it.
pub fn check_c2c(out: &RunOutput) -> Result<(), String> {
    let line = hex_result(out, "share_a")? & !63;
    let c = parse_c2c(&out.console);
    let mut errs = Vec::new();
    if c.top_line != Some(line) {
        errs.push(format!(
            "the first shared line is {:?}, not the counters' {line:#x}",
            c.top_line.map(|a| format!("{a:#x}"))
        ));
    }
    if c.peer_loads == 0 {
        errs.push("no load served from a peer core (HITM or Peer)".to_string());
    }
    for f in ["spe_workload_share_a", "spe_workload_share_b"] {
        if !c.functions.iter().any(|s| s == f) {
            errs.push(format!(
                "{f} is not among the shared lines' functions {:?}",
                c.functions
            ));
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errs.join("; "))
    }
}

/// The negative control: with the counters a line apart, the c2c check
/// must fail, and for the right reason: neither counter's line is shared
/// and neither function is in the distribution. (The kernel's own shared
/// lines, perf's buffers and locks, may show, served from the peer.)
pub fn check_c2c_padded(out: &RunOutput) -> Result<(), String> {
    if out.result("share_padded") != Some("1") {
        return Err("the workload did not pad its counters".to_string());
    }
    let a = hex_result(out, "share_a")? & !63;
    let b = hex_result(out, "share_b")? & !63;
    let c = parse_c2c(&out.console);
    match check_c2c(out) {
        Ok(()) => Err("the c2c check passed on counters a line apart".to_string()),
        Err(_) if c.top_line == Some(a) || c.top_line == Some(b) => Err(format!(
            "a padded counter's line is shared: {:?}",
            c.top_line
        )),
        Err(_)
            if c.functions
                .iter()
                .any(|f| f.starts_with("spe_workload_share")) =>
        {
            Err(format!(
                "a counter's function is among the shared lines': {:?}",
                c.functions
            ))
        }
        Err(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(results: &str, console: &str) -> RunOutput {
        let mut o = RunOutput::from_line(results);
        o.console = console.to_string();
        o
    }

    const LEVELS: &str = "\
SPE-MEM     81.17%          4942  [.] spe_workload_large                 RAM hit
SPE-MEM     17.55%         18460  [.] spe_workload_small                 L1 hit
SPE-MEM      0.84%           834  [.] spe_workload_large                 L1 hit
SPE-MEM      0.21%           124  [.] spe_workload_small                 L2 hit
SPE-DS spe_workload_large 0 834
SPE-DS spe_workload_large 14 4942
SPE-DS spe_workload_large 8 4
SPE-DS spe_workload_small 0 18460
SPE-DS spe_workload_small 8 124
";

    /// A 7.3 guest's figures pass; the fixed ratios the model had (most
    /// of both loops' loads from the same levels) and levels swapped
    /// between the loops do not.
    #[test]
    fn levels_must_follow_the_footprint() {
        assert_eq!(check_mem_levels(&run("", LEVELS)), Ok(()));
        let fixed = "\
SPE-MEM 50.00% 9037 [.] spe_workload_small RAM hit
SPE-MEM 40.00% 5170 [.] spe_workload_large RAM hit
SPE-MEM 9.45% 14719 [.] spe_workload_small L2 hit
SPE-DS spe_workload_small 8 14719
SPE-DS spe_workload_small 14 9037
SPE-DS spe_workload_large 14 5170
";
        let e = check_mem_levels(&run("", fixed)).unwrap_err();
        assert!(e.contains("spe_workload_small (16 KiB): 0 %"), "{e}");
        let swapped = LEVELS
            .replace("spe_workload_small", "X")
            .replace("spe_workload_large", "spe_workload_small")
            .replace('X', "spe_workload_large");
        assert!(check_mem_levels(&run("", &swapped)).is_err());
        assert!(check_mem_levels(&run("", ""))
            .unwrap_err()
            .contains("too few"));
    }

    const C2C: &str = "\
SPE-C2C   Load HIT Local Peer               :       3596
SPE-C2C   Load Local HITM                   :          0
SPE-C2C            Shared Data Cache Line Table
SPE-C2C # Index             Address  Node  PA cnt    Snoop
SPE-C2C       0            0x4c4040     0    2273   99.69%     3585
SPE-C2C       Shared Cache Line Distribution Pareto
SPE-C2C            0.00%   25.55%    0.00%    0.00%    0.00%                 0x0     0       1            0x400c94         0        80         0      916         1  [.] spe_workload_share_a  spe-workload  spe_workload_share_a+20   0
SPE-C2C            0.00%   74.45%    0.00%    0.00%    0.00%                 0x8     0       1            0x400cc8         0        80         0     2669         1  [.] spe_workload_share_b  spe-workload  spe_workload_share_b+24   0
";

    #[test]
    fn c2c_must_find_the_shared_line_and_both_writers() {
        let ok = run("share_a=0x4c4040 share_padded=0", C2C);
        assert_eq!(check_c2c(&ok), Ok(()));
        // Older perf: HITM rather than Peer.
        let hitm = C2C
            .replace(
                "Load HIT Local Peer               :       3596",
                "Load HIT Local Peer : 0",
            )
            .replace(
                "Load Local HITM                   :          0",
                "Load Local HITM : 12",
            );
        assert_eq!(check_c2c(&run("share_a=0x4c4040", &hitm)), Ok(()));
        // Another line first, no peer loads, a writer missing: each caught.
        assert!(check_c2c(&run("share_a=0x4c4080", C2C))
            .unwrap_err()
            .contains("first shared line"));
        let no_peer = C2C.replace("3596", "0");
        assert!(check_c2c(&run("share_a=0x4c4040", &no_peer))
            .unwrap_err()
            .contains("peer"));
        let one = C2C.replace("[.] spe_workload_share_b", "[.] other");
        assert!(check_c2c(&run("share_a=0x4c4040", &one))
            .unwrap_err()
            .contains("share_b"));
    }

    #[test]
    fn the_padded_control_passes_only_when_the_check_fails_for_its_reason() {
        let padded_ids = "share_a=0x4c4040 share_b=0x4c4080 share_padded=1";
        // A 7.3 run: the kernel's own lines shared, served from the peer.
        let kernel = "\
SPE-C2C   Load HIT Local Peer               :         19
SPE-C2C            Shared Data Cache Line Table
SPE-C2C       0  0xffff800080f1e000     0    3   50.00%     3
SPE-C2C       Shared Cache Line Distribution Pareto
SPE-C2C   0.00%  0x0 0 1 0xffff8000801 0 80 0 3 1  [k] _raw_spin_lock_irqsave  [kernel.kallsyms]  x 0
";
        assert_eq!(check_c2c_padded(&run(padded_ids, kernel)), Ok(()));
        // The counters' line shared, or one of their functions there, or
        // not padded: rejected.
        assert!(check_c2c_padded(&run(padded_ids, C2C)).is_err());
        let b_line = C2C.replace("0x4c4040     0    2273", "0x4c4080     0    2273");
        assert!(check_c2c_padded(&run(padded_ids, &b_line)).is_err());
        let unpadded = "share_a=0x4c4040 share_b=0x4c4048 share_padded=0";
        assert!(check_c2c_padded(&run(unpadded, kernel)).is_err());
    }
}
