//! The soak's seeded schedule: what the host does to the backend in each
//! iteration of the guest's loop. One action an iteration, so that a
//! loss of records is the action's or nobody's: blocks of six shuffled
//! iterations (two left alone, two faults, a stall, a choice change),
//! faults cycling through every kind of the catalogue in a shuffled
//! order, and the backend restarted twice, once in each of two windows
//! of the run.

use spe_protocol::control::{FaultKind, Trigger, XlatFault};
use std::time::Duration;

/// QEMU's bound on a backend's reply (the series' SPE channel client): past
/// it, QEMU turns SPE off. A stall stays this far below it.
pub const STALL_BOUND: Duration = Duration::from_secs(10);
const STALL_MARGIN: Duration = Duration::from_secs(2);

/// Where in the run the two restarts fall: one in each window, as a
/// fraction of the run's time.
const RESTART_WINDOWS: [(f64, f64); 2] = [(0.25, 0.45), (0.6, 0.8)];

/// Every fault kind of the catalogue, with fields to be drawn.
pub const KINDS: usize = 14;

#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Nothing: perf must decode exactly what the backend wrote.
    Nothing,
    /// `arm-fault` on the iteration's vCPU, after this many records.
    Fault { kind: FaultKind, trigger: Trigger },
    /// SIGSTOP for this long once perf records, then SIGCONT.
    Stall(Duration),
    /// `set-choice NAME VALUE` before perf records.
    Choice {
        name: &'static str,
        value: &'static str,
    },
    /// SIGKILL once perf records, and the backend started again.
    Restart,
}

impl Action {
    /// Short text for the report.
    pub fn describe(&self) -> String {
        match self {
            Action::Nothing => "nothing".into(),
            Action::Fault { kind, .. } => format!("fault {}", kind_name(kind)),
            Action::Stall(d) => format!("stall {:.1} s", d.as_secs_f64()),
            Action::Choice { name, value } => format!("choice {name}={value}"),
            Action::Restart => "restart".into(),
        }
    }
}

/// A fault kind's name as the control socket spells it.
pub fn kind_name(kind: &FaultKind) -> String {
    serde_json::to_value(kind)
        .ok()
        .and_then(|v| v["kind"].as_str().map(str::to_string))
        .unwrap_or_else(|| format!("{kind:?}"))
}

/// Kinds the backend must refuse on the soak's guest (no EL2, no
/// FEAT_RME): `arm-fault` answers with an error, and that is the result.
pub fn refused_here(kind: &FaultKind) -> bool {
    matches!(
        kind,
        FaultKind::Stage2 { .. } | FaultKind::GranuleProtection
    )
}

/// The choices and their permitted values (the backend's
/// `spu::unpredictable`; `query-choices` lists the same).
const CHOICES: &[(&str, &[&str])] = &[
    ("overrun", &["buffer-full-dl", "buffer-full", "imp-def"]),
    ("badpmsfcr", &["keep", "reject"]),
    ("operations", &["micro-ops", "instructions"]),
];

pub struct Schedule {
    rng: fastrand::Rng,
    run: Duration,
    restart_at: Vec<Duration>,
    block: Vec<Action>,
    kinds: Vec<FaultKind>,
}

impl Schedule {
    pub fn new(seed: u64, run: Duration) -> Schedule {
        let mut rng = fastrand::Rng::with_seed(seed);
        let restart_at = RESTART_WINDOWS
            .iter()
            .map(|(lo, hi)| run.mul_f64(lo + (hi - lo) * rng.f64()))
            .collect();
        Schedule {
            rng,
            run,
            restart_at,
            block: Vec::new(),
            kinds: Vec::new(),
        }
    }

    /// When the restarts fall.
    pub fn restarts(&self) -> &[Duration] {
        &self.restart_at
    }

    /// The action of the iteration that starts `elapsed` into the run.
    pub fn next(&mut self, elapsed: Duration) -> Action {
        if self.restart_at.first().is_some_and(|t| elapsed >= *t) {
            self.restart_at.remove(0);
            return Action::Restart;
        }
        if self.block.is_empty() {
            self.block = vec![
                Action::Nothing,
                Action::Nothing,
                self.fault(),
                self.fault(),
                self.stall(),
                self.choice(),
            ];
            self.rng.shuffle(&mut self.block);
        }
        self.block.pop().unwrap_or(Action::Nothing)
    }

    fn fault(&mut self) -> Action {
        if self.kinds.is_empty() {
            self.kinds = self.all_kinds();
            self.rng.shuffle(&mut self.kinds);
        }
        let kind = self.kinds.pop().expect("refilled above");
        // Well inside the iteration's records (thousands), at any point.
        let trigger = Trigger::AfterRecords {
            count: self.rng.u64(50..=1000),
        };
        Action::Fault { kind, trigger }
    }

    /// The catalogue, each kind's fields drawn from what it permits.
    fn all_kinds(&mut self) -> Vec<FaultKind> {
        let r = &mut self.rng;
        let xlat = [
            XlatFault::Translation,
            XlatFault::AccessFlag,
            XlatFault::Permission,
            XlatFault::AddressSize,
        ];
        let fault = xlat[r.usize(..xlat.len())];
        let lo = if matches!(fault, XlatFault::Translation | XlatFault::AddressSize) {
            -1
        } else {
            0
        };
        let level = r.i8(lo..=3);
        // ECs and BSCs the architecture leaves undefined for PMBSR.
        let ec = loop {
            let ec = r.u8(1..=0x3f);
            if ![0x1e, 0x1f, 0x24, 0x25].contains(&ec) {
                break ec;
            }
        };
        let bsc = loop {
            let bsc = r.u8(0..=0x3f);
            if ![1, 4].contains(&bsc) {
                break bsc;
            }
        };
        vec![
            FaultKind::BufferFull,
            FaultKind::DataLoss { event: r.bool() },
            FaultKind::ExternalAbort,
            FaultKind::Stage1 { fault, level },
            FaultKind::Stage2 { fault, level },
            FaultKind::GranuleProtection,
            FaultKind::ImpDef {
                syndrome: r.u16(..),
            },
            FaultKind::SizeTooLarge,
            FaultKind::UnknownBsc { bsc },
            FaultKind::UnknownEc { ec },
            FaultKind::Collision { event: r.bool() },
            FaultKind::SpuriousIrq,
            FaultKind::LostIrq,
            FaultKind::StuckPointer {
                records: r.u32(1..=4),
            },
        ]
    }

    fn stall(&mut self) -> Action {
        let most = (STALL_BOUND - STALL_MARGIN).as_millis() as u64;
        Action::Stall(Duration::from_millis(self.rng.u64(500..=most)))
    }

    fn choice(&mut self) -> Action {
        let (name, values) = CHOICES[self.rng.usize(..CHOICES.len())];
        let value = values[self.rng.usize(..values.len())];
        Action::Choice { name, value }
    }

    /// A delay before acting once perf records: anywhere in the first
    /// second of the recording.
    pub fn delay(&mut self) -> Duration {
        Duration::from_millis(self.rng.u64(0..1000))
    }

    /// The run's length.
    pub fn run(&self) -> Duration {
        self.run
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// An hour of 15-second iterations.
    fn hour(seed: u64) -> Vec<Action> {
        let run = Duration::from_secs(3600);
        let mut s = Schedule::new(seed, run);
        (0..240)
            .map(|i| s.next(Duration::from_secs(15 * i)))
            .collect()
    }

    #[test]
    fn an_hour_arms_every_kind_restarts_twice_and_stalls_below_the_bound() {
        for seed in [1, 2, 0xdead_beef] {
            let acts = hour(seed);
            let kinds: BTreeSet<String> = acts
                .iter()
                .filter_map(|a| match a {
                    Action::Fault { kind, .. } => Some(kind_name(kind)),
                    _ => None,
                })
                .collect();
            assert_eq!(kinds.len(), KINDS, "{kinds:?}");
            assert_eq!(acts.iter().filter(|a| **a == Action::Restart).count(), 2);
            let stalls: Vec<Duration> = acts
                .iter()
                .filter_map(|a| match a {
                    Action::Stall(d) => Some(*d),
                    _ => None,
                })
                .collect();
            assert!(stalls.len() > 30, "{}", stalls.len());
            assert!(stalls.iter().all(|d| *d < STALL_BOUND), "{stalls:?}");
            assert!(acts.iter().any(|a| matches!(a, Action::Choice { .. })));
            // A third of the iterations are left alone: the exact checks.
            let alone = acts.iter().filter(|a| **a == Action::Nothing).count();
            assert!((70..=90).contains(&alone), "{alone}");
        }
    }

    #[test]
    fn restarts_fall_in_their_windows() {
        let run = Duration::from_secs(600);
        for seed in 0..50 {
            let s = Schedule::new(seed, run);
            for (t, (lo, hi)) in s.restarts().iter().zip(RESTART_WINDOWS) {
                let f = t.as_secs_f64() / run.as_secs_f64();
                assert!((lo..=hi).contains(&f), "seed {seed}: {f}");
            }
        }
    }

    #[test]
    fn a_seed_gives_the_same_schedule_and_another_seed_another() {
        assert_eq!(hour(7), hour(7));
        assert_ne!(hour(7), hour(8));
    }

    #[test]
    fn every_drawn_fault_is_one_the_backend_would_take_or_refuse_as_documented() {
        // The fields drawn are within what `arm-fault` parses.
        let mut s = Schedule::new(3, Duration::from_secs(60));
        for kind in s.all_kinds() {
            let mut v = serde_json::to_value(kind).unwrap();
            v["trigger"] = "next-record".into();
            let parsed: Result<spe_protocol::control::ArmFault, _> = serde_json::from_value(v);
            assert!(parsed.is_ok(), "{kind:?}: {parsed:?}");
        }
        assert!(refused_here(&FaultKind::GranuleProtection));
        assert!(!refused_here(&FaultKind::BufferFull));
    }
}
