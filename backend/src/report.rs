//! `vhost-device-spe report DIR`: a `perf report`-like summary of the
//! records `--record DIR` kept, from the host alone: the hottest symbols
//! per exception level (kernel PCs named from a `System.map`), the data
//! addresses and the latencies, and a flame graph (inferno) of EL and
//! symbol.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::json;
use spe_protocol::packet::{decode, AddressIndex, CounterIndex, Packet};

use crate::record::{self, Stored};

#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    #[error("{0}: no records (was the backend started with --record, and did a VM profile?)")]
    Empty(PathBuf),
    #[error("flame graph: {0}")]
    FlameGraph(String),
}

/// What `report` is asked for.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub dir: PathBuf,
    /// The guest kernel's `System.map`, to name EL1/EL2 PCs.
    pub system_map: Option<PathBuf>,
    /// The guest kernel's KASLR offset: its `_text` in `/proc/kallsyms`
    /// minus the one in `System.map` (0 with `nokaslr`).
    pub kaslr_offset: u64,
    /// Symbols listed.
    pub top: usize,
    pub json: bool,
    pub flamegraph: Option<PathBuf>,
}

/// One record's facts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Sample {
    pc: Option<(u64, u8)>,
    va: Option<u64>,
    latency: Option<u16>,
}

/// A record's PC (sign-extended as the kernel's are), its EL, data VA and
/// total latency; None for a record that does not decode.
fn sample_of(record: &[u8]) -> Option<Sample> {
    let mut s = Sample::default();
    for p in decode(record) {
        match p.ok()?.1 {
            Packet::Address {
                index: AddressIndex::Pc,
                payload,
            } => {
                let addr = payload & ((1 << 56) - 1);
                let addr = if addr & (1 << 55) != 0 {
                    addr | 0xff00_0000_0000_0000
                } else {
                    addr
                };
                s.pc = Some((addr, (payload >> 61 & 3) as u8));
            }
            Packet::Address {
                index: AddressIndex::DataVirtual,
                payload,
            } => s.va = Some(payload),
            Packet::Counter {
                index: CounterIndex::TotalLatency,
                value,
            } => s.latency = Some(value),
            _ => {}
        }
    }
    Some(s)
}

/// A `System.map`'s text symbols, by address.
#[derive(Debug, Default)]
pub struct SymbolMap {
    syms: Vec<(u64, String)>,
}

impl SymbolMap {
    /// Text symbols (types t, T, w, W) of a `System.map`'s lines.
    pub fn parse(text: &str) -> SymbolMap {
        let mut syms: Vec<(u64, String)> = text
            .lines()
            .filter_map(|l| {
                let mut it = l.split_whitespace();
                let addr = u64::from_str_radix(it.next()?, 16).ok()?;
                let kind = it.next()?;
                let name = it.next()?;
                matches!(kind, "t" | "T" | "w" | "W").then(|| (addr, name.to_string()))
            })
            .collect();
        syms.sort();
        SymbolMap { syms }
    }

    /// The symbol `addr` is in: the last one at or below it, up to
    /// `_etext` where the map has it.
    pub fn lookup(&self, addr: u64) -> Option<&str> {
        let i = self.syms.partition_point(|(a, _)| *a <= addr);
        let (_, name) = self.syms.get(i.checked_sub(1)?)?;
        (name != "_etext").then_some(name.as_str())
    }
}

/// The name a sample is counted under.
fn symbol(map: Option<&SymbolMap>, kaslr: u64, pc: u64, el: u8) -> String {
    if el == 0 {
        return "[user]".into();
    }
    map.and_then(|m| m.lookup(pc.wrapping_sub(kaslr)))
        .map(str::to_string)
        .unwrap_or_else(|| format!("[el{el} {pc:#x}]"))
}

fn percentile(sorted: &[u16], p: usize) -> u16 {
    sorted[(sorted.len() - 1) * p / 100]
}

/// Prints the report of `opts.dir` to `out` (and draws the flame graph).
pub fn run(opts: &Options, out: &mut impl Write) -> Result<(), ReportError> {
    let io = |what: String| move |source| ReportError::Io { what, source };
    let stored: Vec<Stored> =
        record::read_dir(&opts.dir).map_err(io(format!("reading {}", opts.dir.display())))?;
    if stored.is_empty() {
        return Err(ReportError::Empty(opts.dir.clone()));
    }
    let map = match &opts.system_map {
        Some(p) => Some(SymbolMap::parse(
            &std::fs::read_to_string(p).map_err(io(format!("reading {}", p.display())))?,
        )),
        None => None,
    };
    let vcpus = stored.iter().map(|s| s.vcpu).max().unwrap_or(0) + 1;
    let span_ns = stored.iter().map(|s| s.ns).max().unwrap_or(0)
        - stored.iter().map(|s| s.ns).min().unwrap_or(0);
    let (mut bad, mut by_el) = (0u64, [0u64; 4]);
    let mut by_sym: HashMap<(u8, String), u64> = HashMap::new();
    let mut pages = BTreeMap::new();
    let mut lat = Vec::new();
    for s in &stored {
        let Some(sample) = sample_of(&s.bytes) else {
            bad += 1;
            continue;
        };
        if let Some((pc, el)) = sample.pc {
            by_el[el as usize] += 1;
            *by_sym
                .entry((el, symbol(map.as_ref(), opts.kaslr_offset, pc, el)))
                .or_default() += 1;
        }
        if let Some(va) = sample.va {
            *pages.entry(va >> 12).or_insert(0u64) += 1;
        }
        lat.extend(sample.latency);
    }
    let total = stored.len() as u64 - bad;
    let mut syms: Vec<((u8, String), u64)> = by_sym.into_iter().collect();
    syms.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    lat.sort_unstable();
    let pct = |n: u64| 100.0 * n as f64 / total.max(1) as f64;

    if let Some(svg) = &opts.flamegraph {
        flamegraph(&syms, svg)?;
    }
    let text = if opts.json {
        let top: Vec<_> = syms
            .iter()
            .take(opts.top)
            .map(|((el, name), n)| json!({"symbol": name, "el": el, "samples": n}))
            .collect();
        format!(
            "{}\n",
            json!({
                "records": total,
                "bad_records": bad,
                "vcpus": vcpus,
                "by_el": by_el,
                "symbols": top,
                "data_pages": pages.len(),
                "latency": lat.last().map(|max| json!({
                    "records": lat.len(),
                    "median": percentile(&lat, 50),
                    "p90": percentile(&lat, 90),
                    "max": max,
                })),
            })
        )
    } else {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "# {total} records on {vcpus} vCPU(s) over {:.1} s of host time{}",
            span_ns as f64 / 1e9,
            if bad > 0 {
                format!(", {bad} that do not decode")
            } else {
                String::new()
            }
        );
        let _ = writeln!(
            t,
            "# by exception level: EL0 {:.2}%  EL1 {:.2}%  EL2 {:.2}%  EL3 {:.2}%",
            pct(by_el[0]),
            pct(by_el[1]),
            pct(by_el[2]),
            pct(by_el[3])
        );
        let _ = writeln!(t, "#\n# Overhead  Samples  EL   Symbol");
        for ((el, name), n) in syms.iter().take(opts.top) {
            let _ = writeln!(t, "  {:>7.2}%  {n:>7}  el{el}  {name}", pct(*n));
        }
        let hottest = pages.iter().max_by_key(|(_, n)| **n);
        let _ = writeln!(
            t,
            "#\n# data: {} records with a virtual address on {} pages{}",
            pages.values().sum::<u64>(),
            pages.len(),
            hottest
                .map(|(p, n)| format!("; the busiest, {:#x}, has {n}", p << 12))
                .unwrap_or_default()
        );
        if let Some(max) = lat.last() {
            let _ = writeln!(
                t,
                "# total latency (cycles): median {}, 90th percentile {}, max {max}",
                percentile(&lat, 50),
                percentile(&lat, 90)
            );
        }
        t
    };
    out.write_all(text.as_bytes())
        .map_err(io("writing the report".into()))
}

/// One frame per EL, one per symbol under it.
fn flamegraph(syms: &[((u8, String), u64)], svg: &Path) -> Result<(), ReportError> {
    let lines: Vec<String> = syms
        .iter()
        .map(|((el, name), n)| format!("EL{el};{name} {n}"))
        .collect();
    let file = std::fs::File::create(svg).map_err(|source| ReportError::Io {
        what: format!("creating {}", svg.display()),
        source,
    })?;
    let mut o = inferno::flamegraph::Options::default();
    o.title = "SPE samples by exception level and symbol".into();
    o.count_name = "records".into();
    inferno::flamegraph::from_lines(
        &mut o,
        lines.iter().map(String::as_str),
        io::BufWriter::new(file),
    )
    .map_err(|e| ReportError::FlameGraph(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use spe_protocol::packet::{address_payload, PayloadLen};

    fn record(pc: u64, el: u8, va: Option<u64>, lat: u16) -> Vec<u8> {
        let mut r = Vec::new();
        Packet::Address {
            index: AddressIndex::Pc,
            payload: address_payload(pc, el, true, false),
        }
        .encode(&mut r);
        if let Some(va) = va {
            Packet::Address {
                index: AddressIndex::DataVirtual,
                payload: va,
            }
            .encode(&mut r);
        }
        Packet::Counter {
            index: CounterIndex::TotalLatency,
            value: lat,
        }
        .encode(&mut r);
        Packet::Events {
            len: PayloadLen::B2,
            bits: 2,
        }
        .encode(&mut r);
        Packet::End.encode(&mut r);
        r
    }

    const MAP: &str = "\
ffff800080000000 T _text
ffff800080010000 T clear_page
ffff800080010100 t memset_helper
ffff800080020000 D some_data
ffff800080030000 T _etext
";

    #[test]
    fn kernel_pcs_are_named_from_the_map_with_the_kaslr_offset() {
        let m = SymbolMap::parse(MAP);
        let rows: &[(u64, Option<&str>)] = &[
            (0xffff_8000_8000_0000, Some("_text")),
            (0xffff_8000_8001_0004, Some("clear_page")),
            (0xffff_8000_8001_0100, Some("memset_helper")),
            (0xffff_8000_8002_0004, Some("memset_helper")),
            (0xffff_8000_8003_0000, None),
            (0xffff_8000_7fff_fffc, None),
        ];
        for &(addr, want) in rows {
            assert_eq!(m.lookup(addr), want, "{addr:#x}");
        }
        // The 56-bit PC packet of a kernel address, sign-extended back.
        let s = sample_of(&record(0xffff_8000_8101_0004, 1, None, 9)).unwrap();
        assert_eq!(s.pc, Some((0xffff_8000_8101_0004, 1)));
        assert_eq!(
            symbol(Some(&m), 0x100_0000, 0xffff_8000_8101_0004, 1),
            "clear_page"
        );
        assert_eq!(symbol(Some(&m), 0, 0x40_0000, 0), "[user]");
        assert_eq!(
            symbol(None, 0, 0xffff_8000_8101_0004, 1),
            "[el1 0xffff800081010004]"
        );
    }

    #[test]
    fn report_of_recorded_files() {
        let dir = std::env::temp_dir().join(format!("spe-report-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut f = record::MAGIC.to_vec();
        let mut put = |r: Vec<u8>| {
            f.extend(7u64.to_le_bytes());
            f.extend((r.len() as u16).to_le_bytes());
            f.extend(r);
        };
        for _ in 0..3 {
            put(record(0xffff_8000_8001_0010, 1, Some(0x1234_5000), 10));
        }
        put(record(0xffff_8000_8001_0110, 1, None, 20));
        put(record(0x40_0000, 0, Some(0x1234_5008), 30));
        put(vec![0x49]); // an op-type header without its payload
        std::fs::write(record::path(&dir, 0), f).unwrap();
        let map = dir.join("System.map");
        std::fs::write(&map, MAP).unwrap();
        let mut opts = Options {
            dir: dir.clone(),
            system_map: Some(map),
            top: 2,
            json: true,
            flamegraph: Some(dir.join("fg.svg")),
            ..Options::default()
        };
        let mut out = Vec::new();
        run(&opts, &mut out).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["records"], 5);
        assert_eq!(v["bad_records"], 1);
        assert_eq!(v["by_el"], json!([1, 4, 0, 0]));
        assert_eq!(
            v["symbols"],
            json!([
                {"symbol": "clear_page", "el": 1, "samples": 3},
                {"symbol": "[user]", "el": 0, "samples": 1},
            ])
        );
        assert_eq!(v["data_pages"], 1);
        assert_eq!(v["latency"]["median"], 10);
        let svg = std::fs::read_to_string(dir.join("fg.svg")).unwrap();
        assert!(svg.contains("clear_page") && svg.contains("<svg"));
        opts.json = false;
        let mut out = Vec::new();
        run(&opts, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("60.00%        3  el1  clear_page"), "{text}");
        assert!(text.contains("1 that do not decode"), "{text}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
