//! What a run gives its check: the guest's `SPE-RESULT` pairs, the
//! verdict, the logs, and what the backend's control socket said.

use serde_json::{json, Value};
use spe_protocol::control::{FaultDeliveredData, SpuInfo, SpuList, Stats};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Pass,
    Fail(String),
}

/// Host CPU time a run took in the guest's timed window (`bench-overhead`;
/// measured by the runner's `cputime`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CpuTimes {
    /// QEMU's vCPU 0 thread (`CPU 0/TCG`): the bench's workload runs on
    /// the guest's CPU 0, perf on the others.
    pub vcpu0: Duration,
    /// QEMU's vCPU threads (`CPU n/TCG`), together.
    pub vcpus: Duration,
    /// QEMU's other threads (main loop, RCU, I/O).
    pub qemu_other: Duration,
    /// Every thread of the backend.
    pub backend: Duration,
}

/// Host instructions QEMU executed in the guest's timed window
/// (`bench-overhead --instructions`; the runner's `callgrind`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Instructions {
    pub total: u64,
    /// By function, largest first; QEMU's generated code is one entry.
    pub by_function: Vec<(String, u64)>,
}

#[derive(Debug)]
pub struct RunOutput {
    pub verdict: Verdict,
    /// `SPE-RESULT key=value` pairs, in order.
    pub results: Vec<(String, String)>,
    pub console: String,
    pub backend_log: String,
    pub elapsed: Duration,
    pub dir: PathBuf,
    pub control: Control,
    /// The host CPU time of the guest's timed window, when asked for
    /// ([`Measure::CpuTime`](crate::runner::Measure)) and both markers
    /// showed.
    pub cpu: Option<CpuTimes>,
    /// QEMU's instructions in that window, when asked for
    /// ([`Measure::Instructions`](crate::runner::Measure)), or why not.
    pub instructions: Option<Result<Instructions, String>>,
}

impl RunOutput {
    pub fn result(&self, key: &str) -> Option<&str> {
        self.results
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The kernel (major, minor) of the run's `kernel=` result.
    pub fn kernel_line(&self) -> Option<(u32, u32)> {
        let k = self.result("kernel")?;
        let mut it = k.split(['.', '-', '+']).map(|p| p.parse::<u32>().ok());
        Some((it.next()??, it.next()??))
    }

    /// A passing run with `line`'s results (`key=value` separated by
    /// white space), for the checks' tests.
    #[cfg(test)]
    pub fn from_line(line: &str) -> RunOutput {
        RunOutput {
            verdict: Verdict::Pass,
            results: line
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            console: String::new(),
            backend_log: String::new(),
            elapsed: Duration::ZERO,
            dir: PathBuf::new(),
            control: Control::default(),
            cpu: None,
            instructions: None,
        }
    }

    /// A passing run with these results.
    #[cfg(test)]
    pub fn from_pairs(results: &[(&str, &str)]) -> RunOutput {
        RunOutput {
            results: results
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..RunOutput::from_line("")
        }
    }

    /// `key` set to `value` (a missing `key` is added; "" drops it).
    #[cfg(test)]
    pub fn with(mut self, key: &str, value: &str) -> RunOutput {
        match self.results.iter().position(|(k, _)| k == key) {
            Some(i) if value.is_empty() => {
                self.results.remove(i);
            }
            Some(i) => self.results[i].1 = value.into(),
            None if value.is_empty() => {}
            None => self.results.push((key.into(), value.into())),
        }
        self
    }
}

/// What the backend's control socket said about a run (kept in the run's
/// `control.json`): the SPUs' state and statistics once the guest had
/// powered off, and the faults delivered while it ran.
#[derive(Clone, Debug, PartialEq)]
pub struct Control {
    /// `query-spu`'s answer, or why there is none.
    pub spu: Result<SpuList, String>,
    /// Each `FAULT_DELIVERED` event's data, in order.
    pub faults: Vec<FaultDeliveredData>,
}

impl Default for Control {
    fn default() -> Self {
        Control {
            spu: Err("the run had no control socket".into()),
            faults: Vec::new(),
        }
    }
}

impl Control {
    /// The run's `control.json`.
    pub const FILE: &'static str = "control.json";

    /// `query-spu`'s answer.
    pub fn spus(&self) -> Result<&[SpuInfo], String> {
        self.spu
            .as_ref()
            .map(|l| l.vcpus.as_slice())
            .map_err(|e| format!("no query-spu answer: {e}"))
    }

    /// A statistic summed over the vCPUs (`|s| s.records`, ...).
    pub fn total(&self, stat: impl Fn(&Stats) -> u64) -> Result<u64, String> {
        Ok(self.spus()?.iter().map(|v| stat(&v.stats)).sum())
    }

    /// The largest value of a statistic on one vCPU.
    pub fn busiest(&self, stat: impl Fn(&Stats) -> u64) -> Option<u64> {
        self.spus().ok()?.iter().map(|v| stat(&v.stats)).max()
    }

    /// The faults the backend delivered (not those it could not).
    pub fn delivered(&self) -> impl Iterator<Item = &FaultDeliveredData> {
        self.faults.iter().filter(|f| f.delivered)
    }

    pub fn to_json(&self) -> Value {
        match &self.spu {
            Ok(spu) => json!({"query_spu": spu, "fault_delivered": self.faults}),
            Err(e) => json!({"query_spu_error": e, "fault_delivered": self.faults}),
        }
    }

    pub fn from_json(v: &Value) -> Result<Control, String> {
        let spu = match (&v["query_spu"], v["query_spu_error"].as_str()) {
            (Value::Null, e) => Err(e.unwrap_or("none recorded").to_string()),
            (spu, _) => Ok(serde_json::from_value(spu.clone()).map_err(|e| e.to_string())?),
        };
        let faults =
            serde_json::from_value(v["fault_delivered"].clone()).map_err(|e| e.to_string())?;
        Ok(Control { spu, faults })
    }

    /// The `control.json` of the run in `dir`.
    pub fn read(dir: &Path) -> Result<Control, String> {
        let path = dir.join(Self::FILE);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        serde_json::from_str(&text)
            .map_err(|e| e.to_string())
            .and_then(|v| Control::from_json(&v))
            .map_err(|e| format!("{}: {e}", path.display()))
    }

    /// A `query-spu` answer with these statistics, one vCPU each, for the
    /// checks' tests.
    #[cfg(test)]
    pub fn with_stats(stats: &[Stats]) -> Control {
        let vcpus = (0..)
            .zip(stats)
            .map(|(vcpu, &stats)| SpuInfo {
                vcpu,
                el: 1,
                profiling: Default::default(),
                pmbirq: false,
                owning_regime: "Disabled".into(),
                registers: Default::default(),
                stats,
                armed_faults: Vec::new(),
            })
            .collect();
        Control {
            spu: Ok(SpuList { vcpus }),
            faults: Vec::new(),
        }
    }

    /// A `query-spu` answer with these records, one vCPU each.
    #[cfg(test)]
    pub fn with_records(records: &[u64]) -> Control {
        let stats: Vec<Stats> = records
            .iter()
            .map(|&records| Stats {
                records,
                ..Stats::default()
            })
            .collect();
        Control::with_stats(&stats)
    }

    /// vCPU `v`'s SPU, to change for a test.
    #[cfg(test)]
    pub fn vcpu(&mut self, v: usize) -> &mut SpuInfo {
        &mut self.spu.as_mut().expect("a query-spu answer").vcpus[v]
    }
}

#[derive(Debug, Default, PartialEq)]
pub struct Parsed {
    pub results: Vec<(String, String)>,
    pub pass: bool,
    pub fail: Option<String>,
    pub panic: Option<String>,
}

/// Extracts result lines, the verdict and any kernel panic from the console.
pub fn parse_console(console: &str, scenario: &str) -> Parsed {
    let mut p = Parsed::default();
    for line in console.lines() {
        let line = line.trim_end_matches('\r');
        // Kernel messages may share a line with ours; find our marker.
        if let Some(i) = line.find("SPE-RESULT ") {
            for kv in line[i + "SPE-RESULT ".len()..].split_whitespace() {
                if let Some((k, v)) = kv.split_once('=') {
                    p.results.push((k.to_string(), v.to_string()));
                }
            }
        } else if let Some(i) = line.find("SPE-SCENARIO-PASS ") {
            if line[i + "SPE-SCENARIO-PASS ".len()..].trim() == scenario {
                p.pass = true;
            }
        } else if let Some(i) = line.find("SPE-SCENARIO-FAIL ") {
            let rest = line[i + "SPE-SCENARIO-FAIL ".len()..].trim();
            let (name, reason) = rest.split_once(' ').unwrap_or((rest, ""));
            if name == scenario {
                p.fail = Some(reason.to_string());
            }
        } else if let Some(i) = line.find("Kernel panic - not syncing") {
            p.panic.get_or_insert_with(|| line[i..].to_string());
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = "[    0.1] booting\r\nSPE-RESULT kernel=6.1 cpus=2\r\n[ 1.0] virtio: SPE-RESULT a=1 b=x=y\nSPE-SCENARIO-PASS boot\n";

    #[test]
    fn parses_results_and_pass() {
        let p = parse_console(OK, "boot");
        assert!(p.pass);
        assert_eq!(p.fail, None);
        assert_eq!(
            p.results,
            vec![
                ("kernel".into(), "6.1".into()),
                ("cpus".into(), "2".into()),
                ("a".into(), "1".into()),
                ("b".into(), "x=y".into())
            ]
        );
        assert!(!parse_console(OK, "other").pass);
    }

    #[test]
    fn control_reads_totals_and_faults_back() {
        let mut c = Control::with_records(&[7, 5]);
        assert_eq!(c.total(|s| s.records), Ok(12));
        assert_eq!(c.busiest(|s| s.records), Some(7));
        assert_eq!(c.spus().map(<[SpuInfo]>::len), Ok(2));
        c.faults = vec![fault(0, false), fault(1, true)];
        assert_eq!(c.delivered().map(|f| f.vcpu).collect::<Vec<_>>(), [1]);
        assert_eq!(Control::from_json(&c.to_json()), Ok(c));
        let none = Control::default();
        assert!(none
            .total(|s| s.records)
            .unwrap_err()
            .contains("no control socket"));
        assert_eq!(Control::from_json(&none.to_json()), Ok(none));
        assert!(Control::from_json(&json!({"query_spu": {"vcpus": 3}})).is_err());
    }

    /// A buffer full on `vcpu`.
    fn fault(vcpu: u32, delivered: bool) -> FaultDeliveredData {
        FaultDeliveredData {
            id: 1,
            vcpu,
            fault: spe_protocol::control::FaultKind::BufferFull,
            delivered,
            why: None,
            pmbsr: spe_protocol::control::Hex(0x20001),
            pmbptr: spe_protocol::control::Hex(0xffff_8000),
        }
    }
}
