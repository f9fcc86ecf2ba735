//! The soak's books: each iteration's records as the backend wrote them
//! and as perf decoded them, and whether they add up.
//!
//! An iteration the host left alone (or only stalled, or changed a choice
//! in) must decode exactly what the backend wrote, unless perf itself
//! reported a loss (AUX data flagged truncated, partial or collided, or
//! lost events) or the backend discarded records. One with a fault that
//! fired, or a restart, may decode fewer: what is missing is put down to
//! that fault or restart. Decoding more than was written, decoder errors,
//! records outside an AUX chunk and kernel warnings always fail.

use super::schedule::{kind_name, Action};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// What became of an iteration's armed fault.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultOutcome {
    /// It fired (no longer armed at the iteration's end).
    Fired,
    /// Still armed at the end: cancelled.
    NotFired,
    /// `arm-fault` refused it, with this error.
    Refused(String),
}

/// What perf decoded, from the guest's `SOAK-ITER` line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decoded {
    pub cpu: u32,
    pub perf_status: i64,
    pub warns: u64,
    pub bad_packets: u64,
    pub records: u64,
    pub stray: u64,
    pub aux_flagged: u64,
    pub lost_events: u64,
}

impl Decoded {
    /// `SOAK-ITER I key=value ...` → (I, what it says).
    pub fn parse(line: &str) -> Option<(u32, Decoded)> {
        let mut words = line.trim_end_matches('\r').split_whitespace();
        if words.next()? != "SOAK-ITER" {
            return None;
        }
        let i = words.next()?.parse().ok()?;
        let kv: BTreeMap<&str, &str> = words.filter_map(|w| w.split_once('=')).collect();
        let n = |k: &str| kv.get(k).and_then(|v| v.parse::<u64>().ok());
        Some((
            i,
            Decoded {
                cpu: n("cpu")? as u32,
                perf_status: kv.get("perf_status")?.parse().ok()?,
                warns: n("warns")?,
                bad_packets: n("spe_bad_packets")?,
                records: n("spe_records")?,
                stray: n("stray_lines")?,
                aux_flagged: n("aux_flagged")?,
                lost_events: n("lost_events")?,
            },
        ))
    }
}

/// One iteration of the guest's loop.
#[derive(Clone, Debug)]
pub struct Iteration {
    pub index: u32,
    pub cpu: u32,
    /// Seconds into the run at its start.
    pub start_s: f64,
    pub action: Action,
    pub fault: Option<FaultOutcome>,
    /// What the host's action did, when it did not go as planned.
    pub action_error: Option<String>,
    /// Records and discarded records the backend wrote in the iteration
    /// (all its processes), or `None` when the host read its count too
    /// late to tell.
    pub written: Option<u64>,
    pub discarded: u64,
    pub decoded: Option<Decoded>,
}

/// Why an iteration's numbers do not add up.
pub fn problems(it: &Iteration) -> Vec<String> {
    let mut p = Vec::new();
    if let Some(e) = &it.action_error {
        p.push(format!("{}: {e}", it.action.describe()));
    }
    if let Action::Fault { kind, .. } = &it.action {
        match (&it.fault, super::schedule::refused_here(kind)) {
            // One that did not fire within the iteration's records is
            // counted in the report's faults fired, not a failure.
            (Some(FaultOutcome::Refused(_)), true)
            | (Some(FaultOutcome::Fired | FaultOutcome::NotFired), false) => {}
            (f, refused) => p.push(format!(
                "fault {}: {f:?}, but the backend must {}",
                kind_name(kind),
                if refused { "refuse it here" } else { "take it" }
            )),
        }
    }
    let Some(d) = &it.decoded else {
        p.push("the guest printed no SOAK-ITER line".into());
        return p;
    };
    if d.warns > 0 {
        p.push(format!("{} kernel WARN/BUG/Oops lines", d.warns));
    }
    if d.bad_packets > 0 {
        p.push(format!("{} decoder errors", d.bad_packets));
    }
    if d.stray > 0 {
        p.push(format!("{} record lines outside any AUX chunk", d.stray));
    }
    if d.perf_status != 0 && !lossy_by_host(it) {
        p.push(format!("perf record exited {}", d.perf_status));
    }
    if let Some(w) = it.written {
        if d.records > w {
            p.push(format!(
                "perf decoded {} records, the backend wrote {w}",
                d.records
            ));
        } else if d.records < w && !lossy_by_host(it) && !reported_by_perf(it) {
            p.push(format!(
                "perf decoded {} records, the backend wrote {w}, and nothing reported a loss",
                d.records
            ));
        }
    }
    p
}

/// The host did something that may lose records: a fault that fired, or
/// a restart.
fn lossy_by_host(it: &Iteration) -> bool {
    it.fault == Some(FaultOutcome::Fired) || it.action == Action::Restart
}

/// perf or the backend reported a loss.
fn reported_by_perf(it: &Iteration) -> bool {
    it.discarded > 0
        || it
            .decoded
            .as_ref()
            .is_some_and(|d| d.aux_flagged > 0 || d.lost_events > 0)
}

/// The run's books: totals, and the losses by cause.
pub fn totals(its: &[Iteration]) -> Value {
    let mut written = 0;
    let mut decoded = 0;
    let mut unmeasured = 0;
    let mut lost: BTreeMap<String, u64> = BTreeMap::new();
    let mut fired: BTreeMap<String, u64> = BTreeMap::new();
    for it in its {
        if let (Action::Fault { kind, .. }, Some(FaultOutcome::Fired)) = (&it.action, &it.fault) {
            *fired.entry(kind_name(kind)).or_default() += 1;
        }
        let (Some(w), Some(d)) = (it.written, &it.decoded) else {
            unmeasured += 1;
            continue;
        };
        written += w;
        decoded += d.records;
        if w > d.records {
            let cause = if lossy_by_host(it) {
                it.action.describe()
            } else if reported_by_perf(it) {
                "reported by perf or the backend".into()
            } else {
                "unexplained".into()
            };
            *lost.entry(cause).or_default() += w - d.records;
        }
    }
    json!({
        "iterations": its.len(),
        "unmeasured": unmeasured,
        "written": written,
        "decoded": decoded,
        "lost": lost,
        "faults_fired": fired,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use spe_protocol::control::{FaultKind, Trigger};
    use std::time::Duration;

    const LINE: &str = "SOAK-ITER 7 cpu=1 perf_status=0 warns=0 spe_bad_packets=0 \
        spe_records=4000 stray_lines=0 aux_flagged=0 lost_events=0 cpu0_records=0 cpu1_records=4000\r";

    fn it(action: Action, written: u64, decoded: u64) -> Iteration {
        let (_, mut d) = Decoded::parse(LINE).unwrap();
        d.records = decoded;
        Iteration {
            index: 7,
            cpu: 1,
            start_s: 0.0,
            fault: matches!(action, Action::Fault { .. }).then_some(FaultOutcome::Fired),
            action,
            action_error: None,
            written: Some(written),
            discarded: 0,
            decoded: Some(d),
        }
    }

    fn fault() -> Action {
        Action::Fault {
            kind: FaultKind::BufferFull,
            trigger: Trigger::AfterRecords { count: 10 },
        }
    }

    #[test]
    fn the_guests_line_parses() {
        let (i, d) = Decoded::parse(LINE).unwrap();
        assert_eq!((i, d.cpu, d.records), (7, 1, 4000));
        assert_eq!(Decoded::parse("SOAK-ITER 7 cpu=1"), None);
        assert_eq!(Decoded::parse("SOAK-START 7 cpu=1"), None);
    }

    #[test]
    fn a_quiet_iteration_must_decode_exactly_what_was_written() {
        assert!(problems(&it(Action::Nothing, 4000, 4000)).is_empty());
        let p = problems(&it(Action::Nothing, 4001, 4000));
        assert!(p[0].contains("nothing reported a loss"), "{p:?}");
        let stalled = Action::Stall(Duration::from_secs(3));
        assert_eq!(problems(&it(stalled, 4001, 4000)).len(), 1);
        // A loss perf reported is one.
        let mut flagged = it(Action::Nothing, 4100, 4000);
        flagged.decoded.as_mut().unwrap().aux_flagged = 1;
        assert!(problems(&flagged).is_empty());
    }

    #[test]
    fn a_fault_or_restart_may_lose_but_never_invent_records() {
        assert!(problems(&it(fault(), 4000, 3000)).is_empty());
        assert!(problems(&it(Action::Restart, 4000, 3000)).is_empty());
        let p = problems(&it(fault(), 4000, 4001));
        assert!(p[0].contains("decoded 4001"), "{p:?}");
        // A fault that never fired explains nothing.
        let mut cold = it(fault(), 4000, 3000);
        cold.fault = Some(FaultOutcome::NotFired);
        assert_eq!(problems(&cold).len(), 1);
    }

    #[test]
    fn warnings_decoder_errors_and_refusals_are_problems() {
        let mut w = it(Action::Nothing, 10, 10);
        w.decoded.as_mut().unwrap().warns = 1;
        w.decoded.as_mut().unwrap().stray = 2;
        assert_eq!(problems(&w).len(), 2);
        let mut gpc = it(fault(), 10, 10);
        gpc.action = Action::Fault {
            kind: FaultKind::GranuleProtection,
            trigger: Trigger::Now,
        };
        assert_eq!(problems(&gpc).len(), 1, "fired, but must be refused");
        gpc.fault = Some(FaultOutcome::Refused("needs FEAT_RME".into()));
        assert!(problems(&gpc).is_empty());
        let mut refused = it(fault(), 10, 10);
        refused.fault = Some(FaultOutcome::Refused("no".into()));
        assert_eq!(problems(&refused).len(), 1, "buffer-full must be taken");
    }

    #[test]
    fn the_totals_put_each_loss_down_to_its_cause() {
        let its = [
            it(Action::Nothing, 100, 100),
            it(fault(), 100, 60),
            it(Action::Restart, 100, 90),
        ];
        let t = totals(&its);
        assert_eq!(t["written"], 300);
        assert_eq!(t["decoded"], 250);
        assert_eq!(t["lost"]["fault buffer-full"], 40);
        assert_eq!(t["lost"]["restart"], 10);
        assert_eq!(t["faults_fired"]["buffer-full"], 1);
    }
}
