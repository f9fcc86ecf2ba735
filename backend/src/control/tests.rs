//! The hub's commands, and the socket with a real client.

use super::client::{CallError, Client};
use super::*;
use crate::spu::test_util::{linux_spu, load, mem, Mem};
use serde_json::json;
use std::sync::Arc;

fn req(name: &str, arguments: Value) -> Request {
    Request {
        execute: name.into(),
        arguments,
        id: Some(json!(9)),
    }
}

fn class(l: &ServerLine) -> Option<ErrorClass> {
    match l {
        ServerLine::Error { error, id } => {
            assert_eq!(id, &Some(json!(9)), "the id is echoed");
            Some(error.class)
        }
        _ => None,
    }
}

fn ret(l: ServerLine) -> Value {
    match l {
        ServerLine::Return { ret, id } => {
            assert_eq!(id, Some(json!(9)));
            ret
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn without_a_vm_faults_wait_for_the_next_one() {
    let hub = Hub::new(Features::default(), Scenario::default()).unwrap();
    let armed = ret(hub.call(req(
        command::ARM_FAULT,
        json!({"kind": "buffer-full", "trigger": "after-records", "count": 3}),
    )));
    assert_eq!(armed["pending"], true);
    let id = armed["id"].as_u64().unwrap() as u32;
    let faults = ret(hub.call(req(command::QUERY_FAULTS, Value::Null)));
    assert_eq!(faults["faults"][0]["id"], id);
    assert_eq!(faults["faults"][0]["vcpu"], Value::Null);
    // Needing a VM, refused with NoVm; "now" cannot wait.
    for (name, a) in [
        (command::QUERY_SPU, Value::Null),
        (command::RESET_STATS, Value::Null),
        (command::SNAPSHOT, Value::Null),
        (
            command::ARM_FAULT,
            json!({"kind": "buffer-full", "trigger": "now"}),
        ),
    ] {
        assert_eq!(
            class(&hub.call(req(name, a))),
            Some(ErrorClass::NoVm),
            "{name}"
        );
    }
    // The VM connects: the fault moves to its SPUs.
    let m = mem(8 << 20);
    let mut spus: Vec<Spu> = (0..2)
        .map(|_| linux_spu(&m, Features::default(), 4).0)
        .collect();
    hub.vm_started(&mut spus);
    assert!(spus.iter().all(|s| s.armed_faults()[0].id == id));
    assert_eq!(
        ret(hub.call(req(command::QUERY_FAULTS, Value::Null)))["faults"],
        json!([])
    );
}

#[test]
fn bad_commands_get_their_error_class() {
    let hub = Hub::new(Features::neoverse_n1(), Scenario::default()).unwrap();
    let rows = [
        ("no-such-command", Value::Null, ErrorClass::CommandNotFound),
        (
            command::ARM_FAULT,
            json!({"kind": "nope", "trigger": "now"}),
            ErrorClass::InvalidParameter,
        ),
        (
            command::ARM_FAULT,
            Value::Null,
            ErrorClass::InvalidParameter,
        ),
        (
            command::ARM_FAULT,
            json!({"kind": "stage2", "fault": "translation", "level": 1, "trigger": "next-record"}),
            ErrorClass::Unsupported,
        ),
        (
            command::ARM_FAULT,
            json!({"kind": "granule-protection", "trigger": "next-record"}),
            ErrorClass::Unsupported,
        ),
        (
            command::CANCEL_FAULT,
            json!({"id": 12345}),
            ErrorClass::InvalidParameter,
        ),
        (
            command::CANCEL_FAULT,
            json!({}),
            ErrorClass::InvalidParameter,
        ),
    ];
    for (name, a, want) in rows {
        assert_eq!(
            class(&hub.call(req(name, a.clone()))),
            Some(want),
            "{name} {a}"
        );
    }
    // Choices: a permitted value is taken (for the next VM), others not.
    for bad in [
        json!({"name": "overrun", "value": "write-anywhere"}),
        json!({"name": "nope", "value": "x"}),
        json!({"name": "overrun"}),
    ] {
        let l = hub.call(req(command::SET_CHOICE, bad.clone()));
        assert_eq!(class(&l), Some(ErrorClass::InvalidParameter), "{bad}");
    }
    ret(hub.call(req(
        command::SET_CHOICE,
        json!({"name": "overrun", "value": "imp-def"}),
    )));
    let c = ret(hub.call(req(command::QUERY_CHOICES, Value::Null)));
    assert_eq!(c["choices"][0]["name"], "overrun");
    assert_eq!(c["choices"][0]["value"], "imp-def");
    let m = mem(8 << 20);
    let mut spus = vec![linux_spu(&m, Features::neoverse_n1(), 1).0];
    hub.vm_started(&mut spus);
    assert_eq!(spus[0].choices().list()[0].value, "imp-def");
    let v = ret(hub.call(req(command::QUERY_VERSION, Value::Null)));
    assert_eq!(v["version"]["major"], spe_protocol::control::VERSION_MAJOR);
}

/// A front end as the QEMU channel runs it: serves calls between its own
/// work and reports what its SPUs did. Returns once it is attached, as a
/// VM is connected before a client can reach it (a client's first call
/// raced the thread's start under load and met "no VM is connected").
fn front_end(hub: Arc<Hub>, m: Mem, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let (attached, wait) = std::sync::mpsc::channel();
    let fe = std::thread::spawn(move || {
        let mut spus: Vec<Spu> = (0..2)
            .map(|_| linux_spu(&m, Features::max(), 4).0)
            .collect();
        hub.attach();
        hub.vm_started(&mut spus);
        let _ = attached.send(());
        let mut levels = vec![false; spus.len()];
        while !stop.load(Ordering::Relaxed) {
            hub.serve_calls(Some(&mut spus));
            for (v, spu) in spus.iter_mut().enumerate() {
                spu.sample(&load(0x1000, 0x2000), &m);
                hub.report_delivered(v as u32, spu);
                let level = spu.pmbirq();
                if level != levels[v] {
                    hub.report_irq(v as u32, level, spu);
                    levels[v] = level;
                }
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        hub.detach();
    });
    wait.recv().expect("the front end attached");
    fe
}

#[test]
fn a_client_over_the_socket() {
    let dir = std::env::temp_dir().join(format!("spe-ctl-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ctl.sock");
    let hub = Arc::new(Hub::new(Features::max(), Scenario::default()).unwrap());
    let _server = spawn(&path, hub.clone()).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let fe = front_end(hub.clone(), mem(8 << 20), stop.clone());

    let mut c = Client::connect(&path).unwrap();
    assert_eq!(
        c.greeting().spe.version.major,
        spe_protocol::control::VERSION_MAJOR
    );
    // Malformed input gets an error, and the connection stays usable.
    for bad in [
        "{",
        "[]",
        "{\"execute\": 5}",
        "\"x\"",
        "{\"execute\":\"query-spu\",\"extra\":1}",
    ] {
        let l = c.send_raw(bad).unwrap();
        assert!(matches!(l, ServerLine::Error { .. }), "{bad}: {l:?}");
    }
    let q = c.execute(command::QUERY_SPU, json!({"vcpu": 1})).unwrap();
    assert_eq!(q["vcpus"][0]["vcpu"], 1);
    assert_eq!(q["vcpus"][0]["profiling"]["el1"]["enabled"], true);
    assert!(q["vcpus"][0]["registers"]["PMBPTR_EL1"]
        .as_str()
        .unwrap()
        .starts_with("0x"));
    match c.execute(command::QUERY_SPU, json!({"vcpu": 2})) {
        Err(CallError::Server(e)) => assert_eq!(e.class, ErrorClass::InvalidParameter),
        other => panic!("{other:?}"),
    }

    // A fault on vCPU 0's next record: an event says where it landed, and
    // the SPU says why profiling stopped.
    let a = c
        .execute(
            command::ARM_FAULT,
            json!({"vcpu": 0, "kind": "external-abort", "trigger": "next-record"}),
        )
        .unwrap();
    let id = a["id"].clone();
    let mut got = None;
    while let Some(e) = c.next_event(Duration::from_secs(5)).unwrap() {
        if e["event"] == event::FAULT_DELIVERED {
            got = Some(e);
            break;
        }
    }
    let e = got.expect("no FAULT_DELIVERED event");
    assert_eq!(e["data"]["id"], id);
    assert_eq!(e["data"]["vcpu"], 0);
    assert_eq!(e["data"]["pmbsr"], "0x90060010", "EC 0x24, EA, S, FSC 0x10");
    let q = c.execute(command::QUERY_SPU, json!({"vcpu": 0})).unwrap();
    let why = q["vcpus"][0]["profiling"]["el1"]["why"].as_str().unwrap();
    assert!(why.contains("PMBSR.S is 1"), "{why}");
    assert_eq!(q["vcpus"][0]["pmbirq"], true);
    // While S is 1 a "now" fault is refused, as no PE could raise it.
    assert!(c
        .execute(
            command::ARM_FAULT,
            json!({"vcpu": 0, "kind": "buffer-full", "trigger": "now"})
        )
        .is_err());

    // A timed fault: listed and cancellable until its time, then delivered
    // as `now` on vCPU 1.
    let t = c
        .execute(
            command::ARM_FAULT,
            json!({"vcpu": 1, "kind": "buffer-full", "trigger": "after-ms", "ms": 60000}),
        )
        .unwrap();
    let listed = c.execute(command::QUERY_FAULTS, Value::Null).unwrap();
    assert!(listed["faults"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["id"] == t["id"]));
    c.execute(command::CANCEL_FAULT, json!({"id": t["id"]}))
        .unwrap();
    let t = c
        .execute(
            command::ARM_FAULT,
            json!({"vcpu": 1, "kind": "imp-def", "syndrome": 7, "trigger": "after-ms", "ms": 50}),
        )
        .unwrap();
    let mut timed = None;
    while let Some(e) = c.next_event(Duration::from_secs(5)).unwrap() {
        if e["event"] == event::FAULT_DELIVERED && e["data"]["id"] == t["id"] {
            timed = Some(e);
            break;
        }
    }
    let e = timed.expect("the timed fault was not delivered");
    assert_eq!(e["data"]["vcpu"], 1);
    assert_eq!(e["data"]["pmbsr"], "0x7c020007", "EC 0x1F, S, syndrome 7");

    // Snapshot from the host, with capture events disabled (PMECR = 0).
    let s = c
        .execute(command::SNAPSHOT, json!({"vcpu": "all"}))
        .unwrap();
    assert_eq!(s["vcpus"][1]["outcome"], "disabled");
    c.execute(command::RESET_STATS, Value::Null).unwrap();

    // An overlong line closes that connection only.
    let mut other = Client::connect(&path).unwrap();
    let long = "x".repeat(spe_protocol::control::MAX_LINE + 10);
    let _ = other.send_raw(&long);
    assert!(other.execute(command::QUERY_VERSION, Value::Null).is_err());
    c.execute(command::QUERY_VERSION, Value::Null).unwrap();

    stop.store(true, Ordering::Relaxed);
    fe.join().unwrap();
    drop(c);
    std::fs::remove_dir_all(&dir).unwrap();
}
