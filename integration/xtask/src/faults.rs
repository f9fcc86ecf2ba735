//! Fault scenarios: the backend delivers a fault from its `--scenario`
//! file while the guest's perf records (`spe-fault.sh`), and the guest
//! kernel must react as Linux's `arm_spe_pmu` says it does for that
//! syndrome (`arm_spe_pmu_buf_get_fault_act()` and the interrupt handler,
//! Debian's 6.1):
//!
//! - PMBSR.S = 0: spurious, `IRQ_NONE` (the kernel counts the interrupt
//!   but keeps no spurious count for a per-CPU one: more interrupts than
//!   the backend raised management events shows it);
//! - DL: the AUX data is flagged TRUNCATED | PARTIAL; COLL: COLLISION;
//! - EC 0x24/0x25: "Unexpected buffer fault on CPU n [PMBSR=…]", fatal;
//! - another EC: "Unknown error code …", fatal;
//! - EC 0 with a BSC other than 1 (buffer full): "Unknown buffer status
//!   code …" (6.1 predates DEN0154's "Buffer size too large"), fatal;
//! - a buffer full: the AUX data ends there and collection goes on.
//!
//! Every case also asks that the kernel did not WARN and that a second
//! recording after the fault works.

use crate::runner::{RunOutput, SpeRun};
use crate::scenarios::{backend_stat, verdict, Expect, Scenario};
use spe_protocol::control::ArmedFault;
use std::time::Duration;

/// How the guest must react.
#[derive(Clone, Copy, Debug)]
pub struct Reaction {
    /// The driver's error line (spaces as `_`), `None` for no error line.
    pub message: Option<&'static str>,
    /// The PMBSR the error line shows, and the backend logs.
    pub pmbsr: Option<u64>,
    /// AUX data flagged TRUNCATED, PARTIAL, COLLISION (some piece has it;
    /// when false, none has).
    pub truncated: bool,
    pub partial: bool,
    pub collision: bool,
    /// The first piece of AUX data is at most this big, and within one
    /// record of it (a buffer full at an exact byte).
    pub first_aux_at_most: Option<u64>,
    /// The SPE interrupt was taken with nothing to service: more
    /// interrupts than management events.
    pub spurious: bool,
    /// Management events whose interrupt never came: fewer interrupts
    /// than events.
    pub lost: bool,
    /// Collection went on after the event: perf got a second piece of
    /// AUX data.
    pub continues: bool,
}

const NONE: Reaction = Reaction {
    message: None,
    pmbsr: None,
    truncated: false,
    partial: false,
    collision: false,
    first_aux_at_most: None,
    spurious: false,
    lost: false,
    continues: false,
};

const FATAL_S1: &str = "Unexpected_buffer_fault";

const EXTERNAL_ABORT: Reaction = Reaction {
    message: Some(FATAL_S1),
    // EC 0x24, EA, S, FSC 0x10 (synchronous External abort).
    pmbsr: Some(0x9006_0010),
    ..NONE
};
const UNKNOWN_EC: &str = "Unknown_error_code";
const UNKNOWN_BSC: &str = "Unknown_buffer_status_code";

/// One fault and the reaction it must get.
#[derive(Clone, Copy, Debug)]
pub struct Case {
    pub name: &'static str,
    /// The `--scenario` file.
    pub scenario: Option<&'static str>,
    /// Or a `vhost-device-spe ctl` command run while perf records.
    pub ctl: Option<&'static [&'static str]>,
    pub reaction: Reaction,
    /// A negative control: the run must *fail* `reaction`, which belongs
    /// to another fault.
    pub wrong: bool,
}

/// After 300 records on each vCPU: well into the first AUX buffer.
macro_rules! arm {
    ($fault:literal) => {
        Some(concat!(
            r#"{"faults": [{"vcpu": "all", "trigger": "after-records", "count": 300, "#,
            $fault,
            "}]}"
        ))
    };
}

/// What `spe-fault.sh` prints once perf records.
const RECORDING: &str = "SPE-FAULT-RECORDING";

pub const CASES: &[Case] = &[
    Case {
        name: "fault-buffer-full-at-byte",
        ctl: None,
        scenario: Some(
            r#"{"faults": [{"vcpu": "all", "kind": "buffer-full", "trigger": "at-byte", "offset": 8192}]}"#,
        ),
        reaction: Reaction {
            first_aux_at_most: Some(8192),
            ..NONE
        },
        wrong: false,
    },
    Case {
        name: "fault-data-loss",
        ctl: None,
        scenario: arm!(r#""kind": "data-loss""#),
        reaction: Reaction {
            truncated: true,
            partial: true,
            ..NONE
        },
        wrong: false,
    },
    Case {
        name: "fault-collision",
        ctl: None,
        scenario: arm!(r#""kind": "collision""#),
        reaction: Reaction {
            collision: true,
            ..NONE
        },
        wrong: false,
    },
    Case {
        name: "fault-external-abort",
        ctl: None,
        scenario: arm!(r#""kind": "external-abort""#),
        reaction: EXTERNAL_ABORT,
        wrong: false,
    },
    Case {
        name: "fault-stage1-translation",
        ctl: None,
        scenario: arm!(r#""kind": "stage1", "fault": "translation", "level": 3"#),
        reaction: Reaction {
            message: Some(FATAL_S1),
            // EC 0x24, S, FSC 0x07 (translation fault, level 3).
            pmbsr: Some(0x9002_0007),
            ..NONE
        },
        wrong: false,
    },
    Case {
        name: "fault-stage1-permission",
        ctl: None,
        scenario: arm!(r#""kind": "stage1", "fault": "permission", "level": 2"#),
        reaction: Reaction {
            message: Some(FATAL_S1),
            pmbsr: Some(0x9002_000E),
            ..NONE
        },
        wrong: false,
    },
    Case {
        name: "fault-imp-def",
        ctl: None,
        scenario: arm!(r#""kind": "imp-def", "syndrome": 4660"#),
        reaction: Reaction {
            message: Some(UNKNOWN_EC),
            // EC 0x1F, S, syndrome 0x1234.
            pmbsr: Some(0x7C02_1234),
            ..NONE
        },
        wrong: false,
    },
    Case {
        name: "fault-unknown-ec",
        ctl: None,
        scenario: arm!(r#""kind": "unknown-ec", "ec": 42"#),
        reaction: Reaction {
            message: Some(UNKNOWN_EC),
            pmbsr: Some(0xA802_0000),
            ..NONE
        },
        wrong: false,
    },
    Case {
        name: "fault-size-too-large",
        ctl: None,
        scenario: arm!(r#""kind": "size-too-large""#),
        reaction: Reaction {
            message: Some(UNKNOWN_BSC),
            pmbsr: Some(0x0002_0004),
            ..NONE
        },
        wrong: false,
    },
    Case {
        name: "fault-unknown-bsc",
        ctl: None,
        scenario: arm!(r#""kind": "unknown-bsc", "bsc": 63"#),
        reaction: Reaction {
            message: Some(UNKNOWN_BSC),
            pmbsr: Some(0x0002_003F),
            ..NONE
        },
        wrong: false,
    },
    Case {
        name: "fault-spurious-irq",
        ctl: None,
        scenario: arm!(r#""kind": "spurious-irq""#),
        reaction: Reaction {
            spurious: true,
            ..NONE
        },
        wrong: false,
    },
    Case {
        name: "fault-lost-irq",
        ctl: None,
        scenario: arm!(r#""kind": "lost-irq""#),
        reaction: Reaction { lost: true, ..NONE },
        wrong: false,
    },
    Case {
        name: "fault-stuck-pointer",
        ctl: None,
        scenario: arm!(r#""kind": "stuck-pointer", "records": 50"#),
        reaction: NONE,
        wrong: false,
    },
    // The control socket, live: `ctl arm` while perf records.
    Case {
        name: "fault-live-ctl",
        scenario: None,
        ctl: Some(&[
            "arm",
            "external-abort",
            "--vcpu",
            "all",
            "--after-records",
            "300",
        ]),
        reaction: EXTERNAL_ABORT,
        wrong: false,
    },
    // The negative control: an unknown BSC judged as an external abort
    // must fail (wrong message and PMBSR).
    Case {
        name: "fault-check-catches-a-wrong-syndrome",
        ctl: None,
        scenario: arm!(r#""kind": "unknown-bsc", "bsc": 63"#),
        reaction: EXTERNAL_ABORT,
        wrong: true,
    },
];

/// The faults the paravirtual driver (`virtio_spe`) is held to, on the
/// vhost-user path, with `arm_spe_pmu`'s reactions: these of [`CASES`]
/// under their paravirtual names, and [`VIRTIO_LIVE`].
const VIRTIO_OF_CASES: &[(&str, &str)] = &[
    ("virtio-fault-collision", "fault-collision"),
    (
        "virtio-fault-stage1-translation",
        "fault-stage1-translation",
    ),
    ("virtio-fault-external-abort", "fault-external-abort"),
    ("virtio-fault-unknown-ec", "fault-unknown-ec"),
    ("virtio-fault-unknown-bsc", "fault-unknown-bsc"),
    (
        "virtio-fault-check-catches-a-wrong-syndrome",
        "fault-check-catches-a-wrong-syndrome",
    ),
];

/// A buffer full and a data loss armed live with `ctl`, as a user would.
pub const VIRTIO_LIVE: &[Case] = &[
    Case {
        name: "virtio-fault-buffer-full",
        scenario: None,
        ctl: Some(&[
            "arm",
            "buffer-full",
            "--vcpu",
            "all",
            "--after-records",
            "300",
        ]),
        reaction: Reaction {
            continues: true,
            ..NONE
        },
        wrong: false,
    },
    Case {
        name: "virtio-fault-data-loss",
        scenario: None,
        ctl: Some(&[
            "arm",
            "data-loss",
            "--vcpu",
            "all",
            "--after-records",
            "300",
        ]),
        reaction: Reaction {
            truncated: true,
            partial: true,
            ..NONE
        },
        wrong: false,
    },
];

/// The scenarios of [`CASES`], [`VIRTIO_OF_CASES`] and [`VIRTIO_LIVE`]
/// for `cargo xtask test`.
pub fn scenarios() -> Vec<Scenario> {
    let full = CASES
        .iter()
        .map(|c| (c.name, c, "spe-fault", SpeRun::new("neoverse-n1")));
    let paravirt = SpeRun::paravirt("neoverse-n1", 0);
    let of_cases = VIRTIO_OF_CASES.iter().map(|&(name, of)| {
        let c = CASES
            .iter()
            .find(|c| c.name == of)
            .expect("VIRTIO_OF_CASES names a case of CASES");
        (name, c, "virtio-spe-fault", paravirt.clone())
    });
    let live = VIRTIO_LIVE
        .iter()
        .map(|c| (c.name, c, "virtio-spe-fault", paravirt.clone()));
    full.chain(of_cases)
        .chain(live)
        .map(|(name, c, guest, spe)| Scenario {
            name,
            guest,
            backend: true,
            timeout: Duration::from_secs(240),
            expect: Expect::Fault(c),
            kill_backend_when: None,
            spe: Some(SpeRun {
                synthetic: Some(1_000_000),
                faults: c.scenario,
                ctl_when: c.ctl.map(|args| (RECORDING, args)),
                ..spe
            }),
        })
        .collect()
}

fn num(out: &RunOutput, key: &str) -> Result<u64, String> {
    let v = out.result(key).unwrap_or("none");
    let parsed = match v.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => v.parse().ok(),
    };
    parsed.ok_or_else(|| format!("guest result {key}={v:?} is not a number"))
}

/// Judges a run of `case` (for a negative control: that the check fails).
pub fn judge(case: &Case, out: &RunOutput) -> Result<(), String> {
    match (check(&case.reaction, out), case.wrong) {
        (Ok(()), false) => Ok(()),
        (Err(e), false) => Err(e),
        (Ok(()), true) => Err("the check accepted a fault that was not the one it checks".into()),
        (Err(e), true) => {
            eprintln!("    (caught, as it must be: {e})");
            Ok(())
        }
    }
}

/// Whether `ctl arm`'s log (the runner's `ctl.log`: the command line, the
/// reply, the exit status) shows the fault armed on the running VM, not
/// left pending for the next one.
fn armed_on_the_vm(ctl_log: &str) -> bool {
    let reply = ctl_log
        .lines()
        .find_map(|l| serde_json::from_str::<ArmedFault>(l).ok());
    matches!(reply, Some(ArmedFault { pending: false, .. })) && ctl_log.contains("exit status: 0")
}

/// Whether the guest's reaction (the results of `spe-fault.sh`) and the
/// backend's log are `r`'s.
pub fn check(r: &Reaction, out: &RunOutput) -> Result<(), String> {
    let mut errs = Vec::new();
    // A live `ctl` command must have armed the fault on the running VM.
    if let Ok(ctl) = std::fs::read_to_string(out.dir.join("ctl.log")) {
        if !armed_on_the_vm(&ctl) {
            errs.push(format!("ctl did not arm the fault on the VM: {ctl:?}"));
        }
    }
    let log = &out.backend_log;
    if !log.contains("delivered on vCPU") {
        errs.push("the backend log has no delivered fault".to_string());
    }
    if let Some(p) = r.pmbsr {
        if !log.contains(&format!("PMBSR={p:#x}")) {
            errs.push(format!("the backend log has no fault with PMBSR={p:#x}"));
        }
    }
    if num(out, "kernel_warnings")? != 0 {
        errs.push("the guest kernel warned".into());
    }
    if num(out, "spe_bad_packets")? != 0 {
        errs.push("perf's decoder reported errors".into());
    }
    if num(out, "spe_records")? == 0 {
        errs.push("perf decoded no records".into());
    }
    if num(out, "after_records")? == 0 {
        errs.push("a new recording after the fault got no records".into());
    }
    let msg = out.result("fault_msg").unwrap_or("none");
    match r.message {
        None if msg != "none" => errs.push(format!("the driver reported {msg:?}")),
        Some(m) if msg != m => errs.push(format!("the driver reported {msg:?}, want {m:?}")),
        _ => {}
    }
    if let (Some(m), Some(p)) = (r.message, r.pmbsr) {
        let got = num(out, "fault_pmbsr").ok();
        if got != Some(p) {
            errs.push(format!("{m} shows PMBSR {got:x?}, want {p:#x}"));
        }
    }
    for (key, want) in [
        ("aux_truncated", r.truncated),
        ("aux_partial", r.partial),
        ("aux_collision", r.collision),
    ] {
        let n = num(out, key)?;
        if (n > 0) != want {
            errs.push(format!("{key}={n}, want {}", if want { ">0" } else { "0" }));
        }
    }
    if let Some(at) = r.first_aux_at_most {
        // One record is at most 64 bytes (PMSIDR_EL1.MaxSize).
        let first = num(out, "aux_first_size")?;
        if first > at || first + 64 <= at {
            errs.push(format!(
                "the first AUX data is {first} bytes, want the records up to byte {at}"
            ));
        }
    }
    if (r.first_aux_at_most.is_some() || r.continues) && num(out, "aux_records")? < 2 {
        errs.push("collection did not go on after the buffer full".into());
    }
    // Interrupts taken during the first recording against the events of
    // both: each real event raises exactly one.
    let irqs = num(out, "irqs_after")?.saturating_sub(num(out, "irqs_before")?);
    let events = backend_stat(log, "management_events").unwrap_or(0);
    if (irqs > events) != r.spurious {
        errs.push(format!(
            "{irqs} SPE interrupt(s) for {events} management event(s){}",
            if r.spurious {
                ", want a spurious one"
            } else {
                ""
            }
        ));
    }
    if r.lost && irqs >= events {
        errs.push(format!(
            "{irqs} SPE interrupt(s) for {events} management event(s), want one lost"
        ));
    }
    if backend_stat(log, "records").unwrap_or(0) == 0 {
        errs.push("the backend wrote no records".into());
    }
    verdict(errs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::Verdict;
    use std::path::PathBuf;

    fn run(results: &str, backend_log: &str) -> RunOutput {
        RunOutput {
            verdict: Verdict::Pass,
            results: results
                .split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            console: String::new(),
            backend_log: backend_log.into(),
            elapsed: Duration::ZERO,
            dir: PathBuf::new(),
        }
    }

    const CLEAN: &str = "perf_rc=0 spe_records=500 spe_bad_packets=0 aux_records=3 aux_first_size=0x1fe0 aux_truncated=0 aux_partial=0 aux_collision=0 irqs_before=0 irqs_after=2 fault_msgs=0 fault_msg=none fault_pmbsr=none kernel_warnings=0 after_rc=0 after_records=100";
    const LOG: &str = "fault 1 delivered on vCPU 0: {} PMBSR=0x90060010 PMBPTR=0x0\nstats total: samples=9 filtered=0 records=900 bytes=1 discarded=0 management_events=2\n";

    fn with(over: &str) -> String {
        let mut m: Vec<(String, String)> = CLEAN
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.into(), v.into()))
            .collect();
        for (k, v) in over.split_whitespace().filter_map(|kv| kv.split_once('=')) {
            match m.iter_mut().find(|(key, _)| key == k) {
                Some(e) => e.1 = v.into(),
                None => m.push((k.into(), v.into())),
            }
        }
        m.iter().map(|(k, v)| format!("{k}={v} ")).collect()
    }

    fn case(name: &str) -> &'static Case {
        CASES.iter().find(|c| c.name == name).unwrap()
    }

    #[test]
    fn paravirtual_faults_are_cases_of_the_catalogue() {
        let all = scenarios();
        for (name, of) in VIRTIO_OF_CASES {
            let s = all.iter().find(|s| s.name == *name).expect("scenario");
            assert!(matches!(s.expect, Expect::Fault(c) if c.name == *of));
            assert!(s.spe.as_ref().is_some_and(|spe| spe.paravirt));
        }
    }

    #[test]
    fn each_reaction_accepts_its_own_and_rejects_others() {
        let ea = &case("fault-external-abort").reaction;
        let ea_run = run(
            &with("fault_msgs=1 fault_msg=Unexpected_buffer_fault fault_pmbsr=0x0000000090060010"),
            LOG,
        );
        check(ea, &ea_run).unwrap();
        // The wrong message, the wrong PMBSR, no message at all.
        for bad in [
            "fault_msg=Unknown_error_code",
            "fault_pmbsr=0x90020007",
            "fault_msg=none fault_pmbsr=none",
        ] {
            let r = run(
                &with(&format!(
                    "fault_msg=Unexpected_buffer_fault fault_pmbsr=0x90060010 {bad}"
                )),
                LOG,
            );
            assert!(check(ea, &r).is_err(), "{bad}");
        }
        // A clean run is not an external abort, and an abort is not clean.
        assert!(check(ea, &run(&with(""), LOG)).is_err());
        assert!(check(&NONE, &ea_run).is_err());
        // Flags: data loss needs T and P, collision C; none may appear
        // where not expected.
        let dl = &case("fault-data-loss").reaction;
        check(dl, &run(&with("aux_truncated=1 aux_partial=1"), LOG)).unwrap();
        assert!(check(dl, &run(&with("aux_truncated=1"), LOG)).is_err());
        assert!(check(&NONE, &run(&with("aux_collision=2"), LOG)).is_err());
        // Spurious: more interrupts than events, and only then; lost:
        // fewer.
        let sp = &case("fault-spurious-irq").reaction;
        check(sp, &run(&with("irqs_after=3"), LOG)).unwrap();
        assert!(check(sp, &run(&with(""), LOG)).is_err());
        assert!(check(&NONE, &run(&with("irqs_after=3"), LOG)).is_err());
        let lost = &case("fault-lost-irq").reaction;
        check(lost, &run(&with("irqs_after=0"), LOG)).unwrap();
        assert!(check(lost, &run(&with(""), LOG)).is_err());
        // The exact byte: within one record below it, not past it.
        let bf = &case("fault-buffer-full-at-byte").reaction;
        check(bf, &run(&with("aux_first_size=0x1fd0"), LOG)).unwrap();
        assert!(check(bf, &run(&with("aux_first_size=0x2040"), LOG)).is_err());
        assert!(check(bf, &run(&with("aux_first_size=0x1000"), LOG)).is_err());
        assert!(check(bf, &run(&with("aux_first_size=0x1fd0 aux_records=1"), LOG)).is_err());
        // Survival: warnings, a dead second recording, no delivery logged.
        for bad in ["kernel_warnings=1", "after_records=0", "spe_bad_packets=3"] {
            assert!(check(&NONE, &run(&with(bad), LOG)).is_err(), "{bad}");
        }
        assert!(check(&NONE, &run(&with(""), "stats total: records=5")).is_err());
    }

    #[test]
    fn a_live_ctl_must_arm_on_the_vm() {
        let log = |reply: &str, status: &str| {
            format!("$ ctl arm external-abort --after-records 300\n{reply}\n{status}\n")
        };
        assert!(armed_on_the_vm(&log(
            r#"{"id":1,"pending":false}"#,
            "exit status: 0"
        )));
        // Pending for the next VM, refused, or not the reply at all.
        assert!(!armed_on_the_vm(&log(
            r#"{"id":1,"pending":true}"#,
            "exit status: 0"
        )));
        assert!(!armed_on_the_vm(&log(
            "error: NoVm: no VM is connected",
            "exit status: 1"
        )));
        assert!(!armed_on_the_vm(&log(
            r#"{"ids":[1],"pending":false}"#,
            "exit status: 0"
        )));
    }

    #[test]
    fn the_negative_control_inverts_the_verdict() {
        let nc = case("fault-check-catches-a-wrong-syndrome");
        assert!(nc.wrong);
        let bsc = run(
            &with("fault_msg=Unknown_buffer_status_code fault_pmbsr=0x2003f"),
            "fault 1 delivered on vCPU 0: PMBSR=0x2003f\nstats total: records=9 management_events=2",
        );
        judge(nc, &bsc).unwrap();
        check(&case("fault-unknown-bsc").reaction, &bsc).unwrap();
    }

    #[test]
    fn every_scenario_file_parses_and_names_a_fault() {
        for c in CASES {
            assert!(c.scenario.is_some() != c.ctl.is_some(), "{}", c.name);
            let Some(text) = c.scenario else { continue };
            let s: spe_protocol::control::Scenario =
                serde_json::from_str(text).unwrap_or_else(|e| panic!("{}: {e}", c.name));
            assert_eq!(s.faults.len(), 1, "{}", c.name);
        }
    }
}
