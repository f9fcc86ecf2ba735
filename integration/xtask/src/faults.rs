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

use crate::scenario::{Expect, Judge, OnMarker, RunOutput, Scenario, SpeRun};
use spe_protocol::control::ArmedFault;
use spe_protocol::profile::CpuProfile;

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
    /// The fault and when it comes, in words (the scenario table's).
    pub fault: &'static str,
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
        fault: "A buffer full at byte 8192 of the buffer",
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
        fault: "A data loss (DL) with S after 300 records on each vCPU",
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
        fault: "A collision (COLL) with S after 300 records on each vCPU",
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
        fault: "An external abort (EC 0x24, FSC 0x10, EA) after 300 records on each vCPU",
        ctl: None,
        scenario: arm!(r#""kind": "external-abort""#),
        reaction: EXTERNAL_ABORT,
        wrong: false,
    },
    Case {
        name: "fault-stage1-translation",
        fault: "A stage 1 translation fault at level 3 after 300 records on each vCPU",
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
        fault: "A stage 1 permission fault at level 2 after 300 records on each vCPU",
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
        fault: "An IMPLEMENTATION DEFINED fault (EC 0x1F, syndrome 0x1234) after 300 records \
                on each vCPU",
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
        fault: "An unknown EC (0x2A) after 300 records on each vCPU",
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
        fault: "A buffer size too large (BSC 4, which 6.1's driver predates) after 300 records \
                on each vCPU",
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
        fault: "An unknown BSC (0x3F) after 300 records on each vCPU",
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
        fault: "A PMBIRQ with PMBSR.S = 0 (a spurious interrupt) after 300 records on each vCPU",
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
        fault: "A buffer full whose PMBIRQ is never raised, after 300 records on each vCPU",
        ctl: None,
        scenario: arm!(r#""kind": "lost-irq""#),
        reaction: Reaction { lost: true, ..NONE },
        wrong: false,
    },
    Case {
        name: "fault-stuck-pointer",
        fault: "50 records that leave PMBPTR where it was (a stuck pointer), after 300 records on each vCPU",
        ctl: None,
        scenario: arm!(r#""kind": "stuck-pointer", "records": 50"#),
        reaction: NONE,
        wrong: false,
    },
    // The control socket, live: `ctl arm` while perf records.
    Case {
        name: "fault-live-ctl",
        fault: "An external abort after 300 records on each vCPU",
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
        fault: "An unknown BSC (0x3F) after 300 records on each vCPU",
        ctl: None,
        scenario: arm!(r#""kind": "unknown-bsc", "bsc": 63"#),
        reaction: EXTERNAL_ABORT,
        wrong: true,
    },
];

/// The faults the paravirtual driver (`virtio_spe`) is held to, on the
/// vhost-user path, with `arm_spe_pmu`'s reactions: these of [`CASES`]
/// under their paravirtual names, and [`VIRTIO_LIVE`].
pub const VIRTIO_OF_CASES: &[(&str, &str)] = &[
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
        fault: "A buffer full after 300 records on each vCPU",
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
        fault: "A data loss (DL) with S after 300 records on each vCPU",
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

/// Whether `name` is one of [`VIRTIO_OF_CASES`].
pub fn is_virtio_copy(name: &str) -> bool {
    VIRTIO_OF_CASES.iter().any(|(n, _)| *n == name)
}

/// The case of [`CASES`] named `name`.
fn case(name: &str) -> Option<&'static Case> {
    CASES.iter().find(|c| c.name == name)
}

/// The scenarios of [`CASES`], [`VIRTIO_OF_CASES`] and [`VIRTIO_LIVE`]
/// for `cargo xtask test`.
pub fn scenarios() -> Vec<Scenario> {
    let full = CASES
        .iter()
        .map(|c| (c.name, c, "spe-fault", SpeRun::new(CpuProfile::NeoverseN1)));
    let paravirt = SpeRun::paravirt(CpuProfile::NeoverseN1, 0);
    let of_cases = VIRTIO_OF_CASES.iter().map(|&(name, of)| {
        let c = case(of).expect("VIRTIO_OF_CASES names a case of CASES");
        (name, c, "virtio-spe-fault", paravirt.clone())
    });
    let live = VIRTIO_LIVE
        .iter()
        .map(|c| (c.name, c, "virtio-spe-fault", paravirt.clone()));
    full.chain(of_cases)
        .chain(live)
        .map(|(name, c, guest, spe)| {
            let proves = match (spe.paravirt, c.name == name) {
                (false, _) => proves(c),
                (true, true) => format!("On {PARAVIRT} {}", proves(c)),
                (true, false) => format!("`{}` on {PARAVIRT} {}", c.name, proves(c)),
            };
            Scenario::new(name, guest, 240, Expect::pass(move |out| judge(c, out)))
                .spe(SpeRun {
                    synthetic: Some(1_000_000),
                    faults: c.scenario,
                    on_marker: c
                        .ctl
                        .as_ref()
                        .map(|args| OnMarker::ctl(RECORDING, std::slice::from_ref(args))),
                    ..spe
                })
                .proves(proves)
        })
        .collect()
}

/// How the paravirtual copies differ, for the scenario table.
const PARAVIRT: &str = "the paravirtual path (`virtio_spe`, whose error line is \
    `arm_spe_pmu`'s with its own prefix; interrupts are not counted, PMBIRQ being an \
    event-queue message there).";

/// What a run of `case` proves, from its fault and its reaction (the
/// scenario table's text).
pub fn proves(case: &Case) -> String {
    let how = match case.ctl {
        Some(_) => {
            "armed live with `vhost-device-spe ctl arm` once perf records, on the running VM \
             (`\"pending\":false`)"
        }
        None => "armed from the backend's `--scenario` file",
    };
    let r = &case.reaction;
    if case.wrong {
        return format!(
            "The negative control of the fault checks: {}, {how}, judged as the reaction to \
             another fault ({}): the check must fail.",
            lower_first(case.fault),
            reaction(r)
        );
    }
    let pmbsr = match r.pmbsr {
        Some(_) => " with that PMBSR",
        None => "",
    };
    format!(
        "{}, {how}, while perf records the synthetic source: {}; and the backend's \
         `FAULT_DELIVERED` event{pmbsr}, no kernel WARN, no decoder error, and records from a \
         second recording (the driver recovers).",
        case.fault,
        reaction(r)
    )
}

fn lower_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_lowercase().chain(c).collect())
        .unwrap_or_default()
}

/// `r` in words.
fn reaction(r: &Reaction) -> String {
    let mut what = Vec::new();
    match (r.message, r.pmbsr) {
        (Some(m), Some(p)) => what.push(format!(
            "the driver's error \"{}\" with PMBSR {p:#x}",
            m.replace('_', " ")
        )),
        (Some(m), None) => what.push(format!("the driver's error \"{}\"", m.replace('_', " "))),
        (None, _) => what.push("no error line".into()),
    }
    let flags: Vec<&str> = [
        (r.truncated, "TRUNCATED"),
        (r.partial, "PARTIAL"),
        (r.collision, "COLLISION"),
    ]
    .iter()
    .filter(|(on, _)| *on)
    .map(|(_, f)| *f)
    .collect();
    what.push(match flags[..] {
        [] => "no AUX flag".into(),
        _ => format!("AUX data flagged {}", flags.join(" and ")),
    });
    if let Some(at) = r.first_aux_at_most {
        what.push(format!(
            "the first AUX data ends within one record below byte {at}, and more follows"
        ));
    } else if r.continues {
        what.push("more AUX data after it (collection goes on)".into());
    }
    if r.spurious {
        what.push(
            "more SPE interrupts than management events (the handler returns `IRQ_NONE`)".into(),
        );
    }
    if r.lost {
        what.push(
            "fewer SPE interrupts than management events (perf's stop path services the event)"
                .into(),
        );
    }
    what.join(", ")
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

/// Whether `ctl arm`'s log (the runner's `ctl.log`: for each command,
/// its line, the reply and the exit status) shows every fault armed on
/// the running VM, not left pending for the next one.
pub fn armed_on_the_vm(ctl_log: &str) -> bool {
    let commands: Vec<&str> = ctl_log.split("$ ctl ").skip(1).collect();
    !commands.is_empty()
        && commands.iter().all(|c| {
            let reply = c
                .lines()
                .find_map(|l| serde_json::from_str::<ArmedFault>(l).ok());
            matches!(reply, Some(ArmedFault { pending: false, .. })) && c.contains("exit status: 0")
        })
}

/// Whether the guest's reaction (the results of `spe-fault.sh`) and what
/// the backend delivered are `r`'s.
pub fn check(r: &Reaction, out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    // A live `ctl` command must have armed the fault on the running VM.
    if let Ok(ctl) = std::fs::read_to_string(out.dir.join("ctl.log")) {
        j.check(armed_on_the_vm(&ctl), || {
            format!("ctl did not arm the fault on the VM: {ctl:?}")
        });
    }
    let delivered: Vec<u64> = out.control.delivered().map(|f| f.pmbsr.0).collect();
    j.check(!delivered.is_empty(), || {
        "the backend delivered no fault".into()
    });
    if let Some(p) = r.pmbsr {
        j.check(delivered.contains(&p), || {
            format!("the backend delivered no fault with PMBSR={p:#x} ({delivered:x?})")
        });
    }
    j.zero(&["kernel_warnings", "spe_bad_packets"]);
    j.positive(&["spe_records", "after_records"]);
    let msg = j.text("fault_msg").unwrap_or("none");
    match r.message {
        None if msg != "none" => j.fail(format!("the driver reported {msg:?}")),
        Some(m) if msg != m => j.fail(format!("the driver reported {msg:?}, want {m:?}")),
        _ => {}
    }
    if let (Some(m), Some(p)) = (r.message, r.pmbsr) {
        let got = j.num("fault_pmbsr");
        j.check(got == Some(p), || {
            format!("{m} shows PMBSR {got:x?}, want {p:#x}")
        });
    }
    for (key, want) in [
        ("aux_truncated", r.truncated),
        ("aux_partial", r.partial),
        ("aux_collision", r.collision),
    ] {
        j.require(
            key,
            |n| (n > 0) == want,
            |n| format!("{key}={n}, want {}", if want { ">0" } else { "0" }),
        );
    }
    if let Some(at) = r.first_aux_at_most {
        // One record is at most 64 bytes (PMSIDR_EL1.MaxSize).
        j.require(
            "aux_first_size",
            |first| first <= at && first + 64 > at,
            |first| {
                format!("the first AUX data is {first} bytes, want the records up to byte {at}")
            },
        );
    }
    if r.first_aux_at_most.is_some() || r.continues {
        j.require(
            "aux_records",
            |n| n >= 2,
            |_| "collection did not go on after the buffer full".into(),
        );
    }
    // Interrupts taken during the first recording against the events of
    // both: each real event raises exactly one.
    let (after, before) = (j.num("irqs_after"), j.num("irqs_before"));
    let events = j.stat(|s| s.management_events);
    if let (Some(after), Some(before), Some(events)) = (after, before, events) {
        let irqs = after.saturating_sub(before);
        j.check((irqs > events) == r.spurious, || {
            format!(
                "{irqs} SPE interrupt(s) for {events} management event(s){}",
                if r.spurious {
                    ", want a spurious one"
                } else {
                    ""
                }
            )
        });
        j.check(!r.lost || irqs < events, || {
            format!("{irqs} SPE interrupt(s) for {events} management event(s), want one lost")
        });
    }
    if let Some(n) = j.stat(|s| s.records) {
        j.check(n > 0, || "the backend wrote no records".into());
    }
    j.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Control;
    use spe_protocol::control::Stats;
    use spe_protocol::control::{FaultDeliveredData, FaultKind, Hex};

    const CLEAN: &str = "perf_rc=0 spe_records=500 spe_bad_packets=0 aux_records=3 aux_first_size=0x1fe0 aux_truncated=0 aux_partial=0 aux_collision=0 irqs_before=0 irqs_after=2 fault_msgs=0 fault_msg=none fault_pmbsr=none kernel_warnings=0 after_rc=0 after_records=100";
    /// The PMBSR of the external abort the backend delivered.
    const EA: Option<u64> = Some(0x9006_0010);

    /// What the backend reported: 900 records and 2 management events on
    /// two vCPUs, and a fault delivered with `pmbsr`.
    fn backend(pmbsr: Option<u64>) -> Control {
        let mut c = Control::with_stats(&[
            Stats {
                records: 600,
                management_events: 1,
                ..Stats::default()
            },
            Stats {
                records: 300,
                management_events: 1,
                ..Stats::default()
            },
        ]);
        c.faults = pmbsr
            .map(|p| FaultDeliveredData {
                id: 1,
                vcpu: 0,
                fault: FaultKind::ExternalAbort,
                delivered: true,
                why: None,
                pmbsr: Hex(p),
                pmbptr: Hex(0),
            })
            .into_iter()
            .collect();
        c
    }

    /// A clean run with `over`'s results changed, and `backend`.
    fn run(over: &str, backend: Control) -> RunOutput {
        let out = over
            .split_whitespace()
            .filter_map(|kv| kv.split_once('='))
            .fold(RunOutput::from_line(CLEAN), |o, (k, v)| o.with(k, v));
        RunOutput {
            control: backend,
            ..out
        }
    }

    fn case(name: &str) -> &'static Case {
        super::case(name).unwrap()
    }

    #[test]
    fn paravirtual_faults_are_cases_of_the_catalogue() {
        let all = scenarios();
        for (name, of) in VIRTIO_OF_CASES {
            let s = all.iter().find(|s| s.name == *name).expect("scenario");
            assert!(s.is_paravirt(), "{name}");
            assert!(is_virtio_copy(name));
            let c = case(of);
            assert_eq!(s.spe.as_ref().and_then(|spe| spe.faults), c.scenario);
            assert!(
                c.scenario.is_some(),
                "{of}: a case armed from its scenario file"
            );
        }
    }

    #[test]
    fn each_reaction_accepts_its_own_and_rejects_others() {
        let ea = &case("fault-external-abort").reaction;
        let ea_run = run(
            "fault_msgs=1 fault_msg=Unexpected_buffer_fault fault_pmbsr=0x0000000090060010",
            backend(EA),
        );
        check(ea, &ea_run).unwrap();
        // The wrong message, the wrong PMBSR, no message at all.
        for bad in [
            "fault_msg=Unknown_error_code",
            "fault_pmbsr=0x90020007",
            "fault_msg=none fault_pmbsr=none",
        ] {
            let r = run(
                &format!("fault_msg=Unexpected_buffer_fault fault_pmbsr=0x90060010 {bad}"),
                backend(EA),
            );
            assert!(check(ea, &r).is_err(), "{bad}");
        }
        // The guest saw the right syndrome, but the backend delivered another.
        let other = run(
            "fault_msg=Unexpected_buffer_fault fault_pmbsr=0x90060010",
            backend(Some(0x9002_0007)),
        );
        assert!(check(ea, &other).unwrap_err().contains("PMBSR=0x90060010"));
        // A clean run is not an external abort, and an abort is not clean.
        assert!(check(ea, &run("", backend(EA))).is_err());
        assert!(check(&NONE, &ea_run).is_err());
        // Flags: data loss needs T and P, collision C; none may appear
        // where not expected.
        let dl = &case("fault-data-loss").reaction;
        check(dl, &run("aux_truncated=1 aux_partial=1", backend(EA))).unwrap();
        assert!(check(dl, &run("aux_truncated=1", backend(EA))).is_err());
        assert!(check(&NONE, &run("aux_collision=2", backend(EA))).is_err());
        // Spurious: more interrupts than events, and only then; lost:
        // fewer.
        let sp = &case("fault-spurious-irq").reaction;
        check(sp, &run("irqs_after=3", backend(EA))).unwrap();
        assert!(check(sp, &run("", backend(EA))).is_err());
        assert!(check(&NONE, &run("irqs_after=3", backend(EA))).is_err());
        let lost = &case("fault-lost-irq").reaction;
        check(lost, &run("irqs_after=0", backend(EA))).unwrap();
        assert!(check(lost, &run("", backend(EA))).is_err());
        // The exact byte: within one record below it, not past it.
        let bf = &case("fault-buffer-full-at-byte").reaction;
        check(bf, &run("aux_first_size=0x1fd0", backend(EA))).unwrap();
        assert!(check(bf, &run("aux_first_size=0x2040", backend(EA))).is_err());
        assert!(check(bf, &run("aux_first_size=0x1000", backend(EA))).is_err());
        assert!(check(bf, &run("aux_first_size=0x1fd0 aux_records=1", backend(EA))).is_err());
        // Survival: warnings, a dead second recording, no delivery logged.
        for bad in ["kernel_warnings=1", "after_records=0", "spe_bad_packets=3"] {
            assert!(check(&NONE, &run(bad, backend(EA))).is_err(), "{bad}");
        }
        assert!(check(&NONE, &run("", backend(None))).is_err());
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
        // Each of several commands.
        let ok = log(r#"{"id":1,"pending":false}"#, "exit status: 0");
        assert!(armed_on_the_vm(&format!("{ok}{ok}")));
        let pending = log(r#"{"id":2,"pending":true}"#, "exit status: 0");
        assert!(!armed_on_the_vm(&format!("{ok}{pending}")));
        assert!(!armed_on_the_vm(""));
    }

    #[test]
    fn the_negative_control_inverts_the_verdict() {
        let nc = case("fault-check-catches-a-wrong-syndrome");
        assert!(nc.wrong);
        let bsc = run(
            "fault_msg=Unknown_buffer_status_code fault_pmbsr=0x2003f",
            backend(Some(0x2_003f)),
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
