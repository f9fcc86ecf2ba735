use super::*;
use serde_json::json;

#[test]
fn arm_fault_arguments_are_flat() {
    let a: ArmFault = serde_json::from_value(json!({
        "vcpu": 1, "kind": "stage1", "fault": "translation", "level": 3,
        "trigger": "at-va", "va": "0xffff_8000_0000_1000"
    }))
    .unwrap();
    assert_eq!(a.vcpu, VcpuSel::One(1));
    assert_eq!(
        a.kind,
        FaultKind::Stage1 {
            fault: XlatFault::Translation,
            level: 3
        }
    );
    assert_eq!(
        a.trigger,
        Trigger::AtVa {
            va: 0xffff_8000_0000_1000
        }
    );
    // Defaults: all vCPUs, an event with the data loss.
    let a: ArmFault =
        serde_json::from_value(json!({"kind": "data-loss", "trigger": "next-record"})).unwrap();
    assert_eq!(a.vcpu, VcpuSel::All);
    assert_eq!(a.kind, FaultKind::DataLoss { event: true });
    // And back: the same flat shape.
    let v = serde_json::to_value(a).unwrap();
    assert_eq!(
        v,
        json!({"vcpu": "all", "kind": "data-loss", "event": true, "trigger": "next-record"})
    );
}

#[test]
fn bad_arguments_are_refused() {
    for bad in [
        json!({"kind": "no-such-fault", "trigger": "now"}),
        json!({"kind": "buffer-full"}),
        json!({"kind": "buffer-full", "trigger": "at-byte"}),
        json!({"kind": "buffer-full", "trigger": "at-byte", "offset": -1}),
        json!({"kind": "buffer-full", "trigger": "at-va", "va": "0xzz"}),
        json!({"kind": "stage1", "fault": "translation", "trigger": "now"}),
        json!({"vcpu": "some", "kind": "buffer-full", "trigger": "now"}),
        json!({"vcpu": -1, "kind": "buffer-full", "trigger": "now"}),
        json!({"vcpu": null, "kind": "buffer-full", "trigger": "now"}),
        json!({"kind": "buffer-full", "trigger": "now", "level": 1}),
        json!({"kind": "buffer-full", "trigger": "now", "count": 1}),
        json!([]),
        json!(5),
    ] {
        assert!(ArmFault::try_from(bad.clone()).is_err(), "{bad}");
        // Through serde too: a command's arguments are read that way.
        assert!(
            serde_json::from_value::<ArmFault>(bad.clone()).is_err(),
            "{bad}"
        );
    }
    let e = ArmFault::try_from(json!({"kind": "buffer-full", "trigger": "now", "level": 1}))
        .unwrap_err();
    assert!(e.contains("\"level\""), "{e}");
}

/// One of each command; the match has no wildcard, so a new command
/// cannot be forgotten here.
fn every_command() -> Vec<Command> {
    let all = vec![
        Command::QueryVersion(NoArgs {}),
        Command::QuerySpu(VcpuArgs {
            vcpu: VcpuSel::One(1),
        }),
        Command::ArmFault(ArmFault {
            vcpu: VcpuSel::All,
            kind: FaultKind::Stage2 {
                fault: XlatFault::AccessFlag,
                level: 2,
            },
            trigger: Trigger::AtByte { offset: 8192 },
        }),
        Command::QueryFaults(NoArgs {}),
        Command::CancelFault(CancelArgs { id: 4 }),
        Command::Snapshot(VcpuArgs::default()),
        Command::ResetStats(VcpuArgs {
            vcpu: VcpuSel::One(0),
        }),
        Command::QueryChoices(NoArgs {}),
        Command::SetChoice(SetChoiceArgs {
            name: "overrun".into(),
            value: "imp-def".into(),
        }),
        Command::QueryEvents(NoArgs {}),
    ];
    for c in &all {
        match c {
            Command::QueryVersion(_)
            | Command::QuerySpu(_)
            | Command::ArmFault(_)
            | Command::QueryFaults(_)
            | Command::CancelFault(_)
            | Command::Snapshot(_)
            | Command::ResetStats(_)
            | Command::QueryChoices(_)
            | Command::SetChoice(_)
            | Command::QueryEvents(_) => {}
        }
    }
    all
}

#[test]
fn commands_round_trip() {
    let all = every_command();
    let mut names: Vec<String> = Vec::new();
    for c in all {
        // As a value, and as a request line the server types back.
        let v = serde_json::to_value(&c).unwrap();
        assert_eq!(serde_json::from_value::<Command>(v).unwrap(), c);
        let req = c.to_request(Some(json!("x"))).unwrap();
        let line = serde_json::to_string(&req).unwrap();
        assert!(!line.contains('\n'));
        let back: Request = serde_json::from_str(&line).unwrap();
        assert_eq!(back.id, Some(json!("x")));
        assert_eq!(Command::from_request(&back), Ok(c), "{line}");
        names.push(back.execute);
    }
    // NAMES is exactly the commands' names, each once.
    names.sort();
    let mut want: Vec<String> = Command::NAMES.iter().map(|&n| n.into()).collect();
    want.sort();
    want.dedup();
    assert_eq!(names, want);
    assert_eq!(want.len(), Command::NAMES.len());
}

fn request(execute: &str, arguments: Value) -> Request {
    Request {
        execute: execute.into(),
        arguments,
        id: None,
    }
}

#[test]
fn requests_are_typed_or_refused_by_class() {
    // No arguments, null, or {} are the same for commands that need none.
    for a in [Value::Null, json!({})] {
        assert_eq!(
            Command::from_request(&request("query-faults", a.clone())),
            Ok(Command::QueryFaults(NoArgs {}))
        );
        assert_eq!(
            Command::from_request(&request("query-spu", a)),
            Ok(Command::QuerySpu(VcpuArgs::default()))
        );
    }
    let class =
        |name: &str, a: Value| Command::from_request(&request(name, a)).map_err(|e| e.class);
    assert_eq!(
        class("frobnicate", Value::Null),
        Err(ErrorClass::CommandNotFound)
    );
    // Names are as the protocol spells them, not as Rust does.
    assert_eq!(
        class("QueryVersion", Value::Null),
        Err(ErrorClass::CommandNotFound)
    );
    for (name, a) in [
        ("query-version", json!({"verbose": true})),
        ("query-spu", json!({"vcpu": "some"})),
        ("query-spu", json!({"vcpus": 1})),
        ("query-spu", json!(1)),
        ("snapshot", json!([])),
        ("query-spu", json!([1])),
        ("arm-fault", Value::Null),
        (
            "arm-fault",
            json!({"kind": "buffer-full", "trigger": "now", "cnt": 1}),
        ),
        ("cancel-fault", Value::Null),
        ("cancel-fault", json!({"id": -1})),
        ("set-choice", json!({"name": "overrun"})),
    ] {
        let e = Command::from_request(&request(name, a.clone())).unwrap_err();
        assert_eq!(e.class, ErrorClass::InvalidParameter, "{name} {a}");
        assert!(!e.desc.is_empty());
    }
}

/// A reply for each command.
fn every_reply() -> Vec<(Command, Reply)> {
    let spu = SpuInfo {
        vcpu: 1,
        el: 1,
        profiling: ProfilingByEl {
            el0: Profiling::from_why(None),
            el1: Profiling::from_why(Some("PMBLIMITR_EL1.E is 0".into())),
            el2: Profiling::default(),
        },
        pmbirq: true,
        owning_regime: "EL1&0".into(),
        registers: SpuRegisters {
            pmbptr_el1: Hex(0xffff_8000_0000_0000),
            pmbsr_el1: Hex(0x9006_0010),
            ..SpuRegisters::default()
        },
        stats: Stats {
            samples: 3,
            management_events: 1,
            ..Stats::default()
        },
        armed_faults: vec![2, 5],
    };
    let mut pairs = Vec::new();
    for c in every_command() {
        let r = match &c {
            Command::QueryVersion(_) => Reply::Version(VersionInfo::current()),
            Command::QuerySpu(_) => Reply::Spus(SpuList {
                vcpus: vec![spu.clone()],
            }),
            Command::ArmFault(_) => Reply::Armed(ArmedFault {
                id: 3,
                pending: true,
            }),
            Command::QueryFaults(_) => Reply::Faults(FaultList {
                faults: vec![ArmedFaultInfo {
                    id: 3,
                    vcpu: None,
                    kind: FaultKind::ImpDef { syndrome: 7 },
                    trigger: Trigger::AfterMs { ms: 50 },
                }],
            }),
            Command::Snapshot(_) => Reply::Snapshots(SnapshotList {
                vcpus: vec![SnapshotResult {
                    vcpu: 0,
                    outcome: SnapshotOutcome::Prohibited,
                    pmsscr: Hex(2),
                }],
            }),
            Command::QueryChoices(_) => Reply::Choices(ChoiceList {
                choices: vec![Choice {
                    name: "overrun".into(),
                    value: "imp-def".into(),
                    permitted: vec!["buffer-full".into(), "imp-def".into()],
                    rule: "RPGGHS".into(),
                }],
            }),
            Command::QueryEvents(_) => Reply::Events(EventList {
                events: vec![EventLine::new(
                    &Event::Pmbirq(PmbirqData {
                        vcpu: 1,
                        level: true,
                        pmbsr: Hex(0x20001),
                    }),
                    Timestamp {
                        seconds: 1,
                        microseconds: 2,
                    },
                )
                .unwrap()],
                more: false,
                missed: 3,
            }),
            Command::CancelFault(_) | Command::ResetStats(_) | Command::SetChoice(_) => {
                Reply::Done(Empty {})
            }
        };
        pairs.push((c, r));
    }
    pairs
}

#[test]
fn replies_round_trip() {
    for (c, r) in every_reply() {
        let line = ServerLine::Return {
            ret: serde_json::to_value(&r).unwrap(),
            id: Some(json!(1)),
        };
        let text = serde_json::to_string(&line).unwrap();
        assert!(!text.contains('\n'));
        let ServerLine::Return { ret, id } = serde_json::from_str(&text).unwrap() else {
            panic!("{text}");
        };
        assert_eq!(id, Some(json!(1)));
        assert_eq!(c.parse_reply(ret).unwrap(), r, "{text}");
    }
    // The wire shapes clients already read.
    let v = |r: Reply| serde_json::to_value(r).unwrap();
    assert_eq!(v(Reply::Done(Empty {})), json!({}));
    assert_eq!(
        v(Reply::Armed(ArmedFault {
            id: 1,
            pending: false
        })),
        json!({"id": 1, "pending": false})
    );
    let (_, spus) = &every_reply()[1];
    let spus = v(spus.clone());
    assert_eq!(spus["vcpus"][0]["registers"]["PMBSR_EL1"], "0x90060010");
    assert_eq!(
        spus["vcpus"][0]["profiling"]["el0"],
        json!({"enabled": true})
    );
    assert_eq!(
        spus["vcpus"][0]["profiling"]["el1"],
        json!({"enabled": false, "why": "PMBLIMITR_EL1.E is 0"})
    );
    // A reply of the wrong shape is not taken for the command's.
    let armed = Command::ArmFault(
        ArmFault::try_from(json!({"kind": "buffer-full", "trigger": "now"})).unwrap(),
    );
    assert!(armed.parse_reply(json!({"ids": [1]})).is_err());
    // A newer server's extra fields are ignored.
    assert_eq!(
        armed
            .parse_reply(json!({"id": 1, "pending": false, "vcpus": [0]}))
            .unwrap(),
        Reply::Armed(ArmedFault {
            id: 1,
            pending: false
        })
    );
}

#[test]
fn events_round_trip() {
    let ts = Timestamp {
        seconds: 1,
        microseconds: 2,
    };
    for e in [
        Event::FaultDelivered(FaultDeliveredData {
            id: 1,
            vcpu: 0,
            fault: FaultKind::DataLoss { event: false },
            delivered: false,
            why: Some("no stage 2".into()),
            pmbsr: Hex(0x8_0000),
            pmbptr: Hex(0x1000),
        }),
        Event::Pmbirq(PmbirqData {
            vcpu: 1,
            level: true,
            pmbsr: Hex(0x20001),
        }),
        Event::BufferFull(BufferFullData {
            vcpu: 1,
            pmbsr: Hex(0x20001),
            pmbptr: Hex(u64::MAX),
        }),
    ] {
        let line = ServerLine::Event(EventLine::new(&e, ts).unwrap());
        let text = serde_json::to_string(&line).unwrap();
        let ServerLine::Event(back) = serde_json::from_str(&text).unwrap() else {
            panic!("{text}");
        };
        assert_eq!(back.timestamp, ts);
        assert_eq!(back.parse().unwrap(), e, "{text}");
    }
    let l = EventLine::new(
        &Event::Pmbirq(PmbirqData {
            vcpu: 0,
            level: false,
            pmbsr: Hex(0),
        }),
        ts,
    )
    .unwrap();
    assert_eq!(l.event, "PMBIRQ");
    assert_eq!(l.data, json!({"vcpu": 0, "level": false, "pmbsr": "0x0"}));
    // A newer server's event is still a line, though not an Event here.
    let text = r#"{"event":"NEW_THING","data":{},"timestamp":{"seconds":1,"microseconds":2}}"#;
    let ServerLine::Event(new) = serde_json::from_str(text).unwrap() else {
        panic!("{text}");
    };
    assert!(new.parse().is_err());
}

#[test]
fn server_lines_round_trip() {
    for line in [
        ServerLine::Greeting(Greeting::current()),
        ServerLine::Return {
            ret: json!({}),
            id: Some(json!(7)),
        },
        ServerLine::Error {
            error: ErrorBody::new(ErrorClass::CommandNotFound, "x"),
            id: None,
        },
    ] {
        let text = serde_json::to_string(&line).unwrap();
        assert!(!text.contains('\n'));
        assert_eq!(serde_json::from_str::<ServerLine>(&text).unwrap(), line);
    }
    let g = serde_json::to_value(Greeting::current()).unwrap();
    assert_eq!(g["SPE"]["version"]["major"], VERSION_MAJOR);
}

/// Checks a documented session (`C: ` and `S: ` lines): each request is
/// typed, or refused with the error the next line shows; each reply is
/// the type its command returns, and reads back the same; each event is
/// known. Returns how many lines it checked.
fn check_transcript(doc: &str) -> usize {
    let mut checked = 0;
    let mut last: Option<Result<Command, ErrorBody>> = None;
    for line in doc.lines() {
        let line = line.trim_start().trim_start_matches("//!").trim();
        if let Some(c) = line.strip_prefix("C: ") {
            let req: Request = serde_json::from_str(c).unwrap_or_else(|e| panic!("{c}: {e}"));
            last = Some(Command::from_request(&req));
        } else if let Some(s) = line.strip_prefix("S: ") {
            let l: ServerLine = serde_json::from_str(s).unwrap_or_else(|e| panic!("{s}: {e}"));
            match l {
                ServerLine::Greeting(g) => assert_eq!(g, Greeting::current(), "{s}"),
                ServerLine::Return { ret, .. } => {
                    let Some(Ok(c)) = &last else {
                        panic!("{s}: no command before it");
                    };
                    let r = c
                        .parse_reply(ret.clone())
                        .unwrap_or_else(|e| panic!("{s}: {e}"));
                    assert_eq!(serde_json::to_value(r).unwrap(), ret, "{s}");
                }
                ServerLine::Error { error, .. } => {
                    assert_eq!(
                        last.as_ref().and_then(|r| r.clone().err()),
                        Some(error),
                        "{s}"
                    );
                }
                ServerLine::Event(e) => {
                    e.parse().unwrap_or_else(|err| panic!("{s}: {err}"));
                }
            }
        } else {
            continue;
        }
        checked += 1;
    }
    checked
}

#[test]
fn the_documented_sessions_are_the_protocol() {
    let readme = include_str!("../../README.md");
    let start = readme
        .find("## The control socket")
        .expect("the README's control socket section");
    let section = &readme[start..];
    let section = &section[..section[3..].find("\n## ").map_or(section.len(), |e| e + 3)];
    assert!(check_transcript(section) >= 6);
    assert!(check_transcript(include_str!("../control.rs")) >= 6);
}

#[test]
fn requests_and_scenarios() {
    let r: Request = serde_json::from_str(r#"{"execute":"query-spu"}"#).unwrap();
    assert_eq!(r.execute, "query-spu");
    assert!(r.arguments.is_null());
    assert!(serde_json::from_str::<Request>(r#"{"exec":"x"}"#).is_err());
    let s: Scenario = serde_json::from_str(
        r#"{"seed": 5, "faults": [{"kind": "buffer-full", "trigger": "after-records", "count": 100}]}"#,
    )
    .unwrap();
    assert_eq!(s.seed, Some(5));
    assert_eq!(s.faults[0].trigger, Trigger::AfterRecords { count: 100 });
    assert!(serde_json::from_str::<Scenario>(r#"{"fault": []}"#).is_err());
    let typo = r#"{"faults": [{"kind": "buffer-full", "trigger": "now", "cnt": 1}]}"#;
    let e = serde_json::from_str::<Scenario>(typo)
        .unwrap_err()
        .to_string();
    assert!(e.contains("faults[0]") && e.contains("cnt"), "{e}");
}

#[test]
fn numbers_in_hex_or_decimal() {
    assert_eq!(parse_u64("0x10"), Ok(16));
    assert_eq!(parse_u64("4_096"), Ok(4096));
    assert!(parse_u64("-1").is_err());
    assert_eq!("all".parse::<VcpuSel>(), Ok(VcpuSel::All));
    assert_eq!("3".parse::<VcpuSel>(), Ok(VcpuSel::One(3)));
    assert!("x".parse::<VcpuSel>().is_err());
    assert_eq!(serde_json::to_value(Hex(0x2a)).unwrap(), json!("0x2a"));
    for v in [json!("0x2a"), json!("42"), json!(42)] {
        assert_eq!(serde_json::from_value::<Hex>(v).unwrap(), Hex(42));
    }
    assert!(serde_json::from_value::<Hex>(json!(-1)).is_err());
}
