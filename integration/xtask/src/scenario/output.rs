//! What a run gives its check: the guest's `SPE-RESULT` pairs, the
//! verdict, the logs, and what the backend's control socket said.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Pass,
    Fail(String),
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
    /// `query-spu`'s answer (`{"vcpus": [...]}`), or why there is none.
    pub spu: Result<Value, String>,
    /// The `data` of each `FAULT_DELIVERED` event, in order.
    pub faults: Vec<Value>,
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

    fn vcpus(&self) -> Result<&[Value], String> {
        let spu = self
            .spu
            .as_ref()
            .map_err(|e| format!("no query-spu answer: {e}"))?;
        spu["vcpus"]
            .as_array()
            .map(Vec::as_slice)
            .ok_or_else(|| format!("query-spu answered without vcpus: {spu}"))
    }

    /// How many vCPUs the backend served.
    pub fn vcpu_count(&self) -> Result<usize, String> {
        self.vcpus().map(<[Value]>::len)
    }

    /// One vCPU's `stats.KEY`.
    fn stat(v: &Value, key: &str) -> Result<u64, String> {
        v["stats"][key]
            .as_u64()
            .ok_or_else(|| format!("query-spu has no stats.{key} for vCPU {}", v["vcpu"]))
    }

    /// `stats.KEY` summed over the vCPUs (records, management_events, ...).
    pub fn total(&self, key: &str) -> Result<u64, String> {
        self.vcpus()?.iter().map(|v| Self::stat(v, key)).sum()
    }

    /// The largest `stats.KEY` of one vCPU.
    pub fn busiest(&self, key: &str) -> Option<u64> {
        let vcpus = self.vcpus().ok()?;
        vcpus.iter().filter_map(|v| Self::stat(v, key).ok()).max()
    }

    /// A register of `vcpu` as `query-spu` gives it (`"0x…"`).
    pub fn register(&self, vcpu: usize, name: &str) -> Result<u64, String> {
        let v = self
            .vcpus()?
            .get(vcpu)
            .ok_or_else(|| format!("query-spu has no vCPU {vcpu}"))?;
        v["registers"][name]
            .as_str()
            .and_then(|h| u64::from_str_radix(h.trim_start_matches("0x"), 16).ok())
            .ok_or_else(|| {
                format!(
                    "query-spu's {name} of vCPU {vcpu}: {}",
                    v["registers"][name]
                )
            })
    }

    /// The faults the backend delivered (not those it could not).
    pub fn delivered(&self) -> impl Iterator<Item = &Value> {
        self.faults.iter().filter(|f| f["delivered"] == true)
    }

    pub fn to_json(&self) -> Value {
        match &self.spu {
            Ok(spu) => json!({"query_spu": spu, "fault_delivered": self.faults}),
            Err(e) => json!({"query_spu_error": e, "fault_delivered": self.faults}),
        }
    }

    pub fn from_json(v: &Value) -> Control {
        let spu = match (&v["query_spu"], v["query_spu_error"].as_str()) {
            (Value::Null, e) => Err(e.unwrap_or("none recorded").to_string()),
            (spu, _) => Ok(spu.clone()),
        };
        Control {
            spu,
            faults: v["fault_delivered"].as_array().cloned().unwrap_or_default(),
        }
    }

    /// The `control.json` of the run in `dir`.
    pub fn read(dir: &Path) -> Result<Control, String> {
        let path = dir.join(Self::FILE);
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let v = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        Ok(Control::from_json(&v))
    }

    /// A `query-spu` answer with these `stats` for each vCPU, for the
    /// checks' tests.
    #[cfg(test)]
    pub fn with_stats(stats: &[&[(&str, u64)]]) -> Control {
        let vcpus: Vec<Value> = stats
            .iter()
            .enumerate()
            .map(|(i, s)| {
                let m: serde_json::Map<String, Value> =
                    s.iter().map(|(k, n)| (k.to_string(), json!(n))).collect();
                json!({"vcpu": i, "stats": m, "registers": {}})
            })
            .collect();
        Control {
            spu: Ok(json!({ "vcpus": vcpus })),
            faults: Vec::new(),
        }
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
    fn control_reads_totals_registers_and_faults_back() {
        let mut c = Control::with_stats(&[&[("records", 7)], &[("records", 5)]]);
        assert_eq!(c.total("records"), Ok(12));
        assert_eq!(c.busiest("records"), Some(7));
        assert_eq!(c.vcpu_count(), Ok(2));
        assert!(c.total("bytes").unwrap_err().contains("stats.bytes"));
        if let Ok(spu) = &mut c.spu {
            spu["vcpus"][1]["registers"]["PMSIDR_EL1"] = json!("0x24403");
        }
        assert_eq!(c.register(1, "PMSIDR_EL1"), Ok(0x24403));
        assert!(c.register(0, "PMSIDR_EL1").is_err());
        assert!(c.register(2, "PMSIDR_EL1").is_err());
        c.faults = vec![
            json!({"vcpu": 0, "delivered": false}),
            json!({"vcpu": 1, "delivered": true, "pmbsr": "0x20001"}),
        ];
        assert_eq!(c.delivered().count(), 1);
        assert_eq!(Control::from_json(&c.to_json()), c);
        let none = Control::default();
        assert!(none
            .total("records")
            .unwrap_err()
            .contains("no control socket"));
        assert_eq!(Control::from_json(&none.to_json()), none);
    }
}
