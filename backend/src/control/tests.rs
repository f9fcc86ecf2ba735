//! The hub's commands, and the socket with a real client.

use super::client::{CallError, ControlClient};
use super::*;
use crate::spu::test_util::{linux_spu, load, mem, Mem};
use serde_json::json;
use spe_protocol::control::{Event, ServerLine};
use std::sync::Arc;

/// A request as a client could send it, typed or not.
fn raw(name: &str, arguments: Value) -> Request {
    Request {
        execute: name.into(),
        arguments,
        id: Some(json!(9)),
    }
}

fn req(cmd: &Command) -> Request {
    cmd.to_request(Some(json!(9))).unwrap()
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

/// Runs `cmd` on the hub, and reads its reply as a client would.
fn call(hub: &Hub, cmd: &Command) -> Reply {
    match hub.call(req(cmd), Origin::Host) {
        ServerLine::Return { ret, id } => {
            assert_eq!(id, Some(json!(9)));
            cmd.parse_reply(ret).unwrap()
        }
        other => panic!("{cmd:?}: {other:?}"),
    }
}

fn arm(a: Value) -> Command {
    Command::ArmFault(ArmFault::try_from(a).unwrap())
}

fn faults(r: Reply) -> Vec<ArmedFaultInfo> {
    let Reply::Faults(f) = r else { panic!("{r:?}") };
    f.faults
}

fn armed(r: Reply) -> ArmedFault {
    let Reply::Armed(a) = r else { panic!("{r:?}") };
    a
}

const QUERY_FAULTS: Command = Command::QueryFaults(NoArgs {});

#[test]
fn without_a_vm_faults_wait_for_the_next_one() {
    let hub = Hub::new(Features::default(), Scenario::default()).unwrap();
    let a = armed(call(
        &hub,
        &arm(json!({"kind": "buffer-full", "trigger": "after-records", "count": 3})),
    ));
    assert!(a.pending);
    let listed = faults(call(&hub, &QUERY_FAULTS));
    assert_eq!((listed[0].id, listed[0].vcpu), (a.id, None));
    // Needing a VM, refused with NoVm; "now" cannot wait.
    for cmd in [
        Command::QuerySpu(VcpuArgs::default()),
        Command::ResetStats(VcpuArgs::default()),
        Command::Snapshot(VcpuArgs::default()),
        arm(json!({"kind": "buffer-full", "trigger": "now"})),
    ] {
        assert_eq!(
            class(&hub.call(req(&cmd), Origin::Host)),
            Some(ErrorClass::NoVm),
            "{cmd:?}"
        );
    }
    // The VM connects: the fault moves to its SPUs.
    let m = mem(8 << 20);
    let mut spus: Vec<Spu> = (0..2)
        .map(|_| linux_spu(&m, Features::default(), 4).0)
        .collect();
    hub.vm_started(&mut spus);
    assert!(spus.iter().all(|s| s.armed_faults()[0].id == a.id));
    assert_eq!(faults(call(&hub, &QUERY_FAULTS)), []);
}

#[test]
fn bad_commands_get_their_error_class() {
    let hub = Hub::new(Features::neoverse_n1(), Scenario::default()).unwrap();
    let rows = [
        ("no-such-command", Value::Null, ErrorClass::CommandNotFound),
        (
            "arm-fault",
            json!({"kind": "nope", "trigger": "now"}),
            ErrorClass::InvalidParameter,
        ),
        ("arm-fault", Value::Null, ErrorClass::InvalidParameter),
        (
            "arm-fault",
            json!({"kind": "stage2", "fault": "translation", "level": 1, "trigger": "next-record"}),
            ErrorClass::Unsupported,
        ),
        (
            "arm-fault",
            json!({"kind": "granule-protection", "trigger": "next-record"}),
            ErrorClass::Unsupported,
        ),
        (
            "cancel-fault",
            json!({"id": 12345}),
            ErrorClass::InvalidParameter,
        ),
        ("cancel-fault", json!({}), ErrorClass::InvalidParameter),
        (
            "query-faults",
            json!({"all": true}),
            ErrorClass::InvalidParameter,
        ),
    ];
    for (name, a, want) in rows {
        assert_eq!(
            class(&hub.call(raw(name, a.clone()), Origin::Host)),
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
        let l = hub.call(raw("set-choice", bad.clone()), Origin::Host);
        assert_eq!(class(&l), Some(ErrorClass::InvalidParameter), "{bad}");
    }
    let set = Command::SetChoice(SetChoiceArgs {
        name: "overrun".into(),
        value: "imp-def".into(),
    });
    assert_eq!(call(&hub, &set), Reply::Done(Empty {}));
    let Reply::Choices(c) = call(&hub, &Command::QueryChoices(NoArgs {})) else {
        panic!("not the choices")
    };
    assert_eq!(
        (c.choices[0].name.as_str(), c.choices[0].value.as_str()),
        ("overrun", "imp-def")
    );
    let m = mem(8 << 20);
    let mut spus = vec![linux_spu(&m, Features::neoverse_n1(), 1).0];
    hub.vm_started(&mut spus);
    assert_eq!(spus[0].choices().list()[0].value, "imp-def");
    let v = call(&hub, &Command::QueryVersion(NoArgs {}));
    assert_eq!(v, Reply::Version(VersionInfo::current()));
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

fn query_spu(c: &mut ControlClient, vcpu: u32) -> Result<SpuInfo, CallError> {
    let cmd = Command::QuerySpu(VcpuArgs {
        vcpu: VcpuSel::One(vcpu),
    });
    match c.execute(&cmd)? {
        Reply::Spus(mut l) if l.vcpus.len() == 1 => Ok(l.vcpus.remove(0)),
        other => panic!("{other:?}"),
    }
}

/// The next FAULT_DELIVERED event of fault `id`.
fn delivered(c: &mut ControlClient, id: u32) -> FaultDeliveredData {
    while let Some(e) = c.next_event(Duration::from_secs(5)).unwrap() {
        if let Ok(Event::FaultDelivered(d)) = e.parse() {
            if d.id == id {
                return d;
            }
        }
    }
    panic!("fault {id} was not delivered");
}

#[test]
fn a_client_over_the_socket() {
    let dir = std::env::temp_dir().join(format!("spe-ctl-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ctl.sock");
    let hub = Arc::new(Hub::new(Features::max(), Scenario::default()).unwrap());
    let _server = spawn(&path, hub.clone(), Origin::Host).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let fe = front_end(hub.clone(), mem(8 << 20), stop.clone());

    let mut c = ControlClient::connect(&path).unwrap();
    assert_eq!(
        c.greeting().spe.version.major,
        spe_protocol::control::VERSION_MAJOR
    );
    // Malformed input gets an error of its class, and the connection
    // stays usable.
    for (bad, want) in [
        ("{", ErrorClass::GenericError),
        ("[]", ErrorClass::GenericError),
        ("{\"execute\": 5}", ErrorClass::GenericError),
        ("\"x\"", ErrorClass::GenericError),
        (
            "{\"execute\":\"query-spu\",\"extra\":1}",
            ErrorClass::GenericError,
        ),
        ("{\"execute\":\"query-sp\"}", ErrorClass::CommandNotFound),
        (
            "{\"execute\":\"query-spu\",\"arguments\":{\"vcpu\":\"x\"}}",
            ErrorClass::InvalidParameter,
        ),
    ] {
        match c.send_raw(bad).unwrap() {
            ServerLine::Error { error, .. } => assert_eq!(error.class, want, "{bad}"),
            l => panic!("{bad}: {l:?}"),
        }
    }
    let q = query_spu(&mut c, 1).unwrap();
    assert_eq!(q.vcpu, 1);
    assert!(q.profiling.el1.enabled);
    match query_spu(&mut c, 2) {
        Err(CallError::Server(e)) => assert_eq!(e.class, ErrorClass::InvalidParameter),
        other => panic!("{other:?}"),
    }

    // A fault on vCPU 0's next record: an event says where it landed, and
    // the SPU says why profiling stopped.
    let a = c
        .execute(&arm(
            json!({"vcpu": 0, "kind": "external-abort", "trigger": "next-record"}),
        ))
        .map(armed)
        .unwrap();
    assert!(!a.pending);
    let d = delivered(&mut c, a.id);
    assert_eq!(d.vcpu, 0);
    assert_eq!(d.pmbsr, Hex(0x9006_0010), "EC 0x24, EA, S, FSC 0x10");
    let q = query_spu(&mut c, 0).unwrap();
    let why = q.profiling.el1.why.unwrap_or_default();
    assert!(why.contains("PMBSR.S is 1"), "{why}");
    assert!(q.pmbirq);
    assert_eq!(q.registers.pmbsr_el1, Hex(0x9006_0010));
    // While S is 1 a "now" fault is refused, as no PE could raise it.
    assert!(c
        .execute(&arm(
            json!({"vcpu": 0, "kind": "buffer-full", "trigger": "now"})
        ))
        .is_err());

    // A timed fault: listed and cancellable until its time, then delivered
    // as `now` on vCPU 1.
    let t = c
        .execute(&arm(
            json!({"vcpu": 1, "kind": "buffer-full", "trigger": "after-ms", "ms": 60000}),
        ))
        .map(armed)
        .unwrap();
    let listed = c.execute(&QUERY_FAULTS).map(faults).unwrap();
    assert!(listed.iter().any(|f| f.id == t.id));
    c.execute(&Command::CancelFault(CancelArgs { id: t.id }))
        .unwrap();
    let listed = c.execute(&QUERY_FAULTS).map(faults).unwrap();
    assert!(listed.iter().all(|f| f.id != t.id));
    let t = c
        .execute(&arm(
            json!({"vcpu": 1, "kind": "imp-def", "syndrome": 7, "trigger": "after-ms", "ms": 50}),
        ))
        .map(armed)
        .unwrap();
    let d = delivered(&mut c, t.id);
    assert_eq!(d.vcpu, 1);
    assert_eq!(d.pmbsr, Hex(0x7c02_0007), "EC 0x1F, S, syndrome 7");

    // Snapshot from the host, with capture events disabled (PMECR = 0).
    let Reply::Snapshots(s) = c.execute(&Command::Snapshot(VcpuArgs::default())).unwrap() else {
        panic!("not a snapshot")
    };
    assert_eq!(s.vcpus[1].outcome, SnapshotOutcome::Disabled);
    c.execute(&Command::ResetStats(VcpuArgs::default()))
        .unwrap();

    // An overlong line closes that connection only.
    let version = Command::QueryVersion(NoArgs {});
    let mut other = ControlClient::connect(&path).unwrap();
    let long = "x".repeat(spe_protocol::control::MAX_LINE + 10);
    let _ = other.send_raw(&long);
    assert!(other.execute(&version).is_err());
    c.execute(&version).unwrap();

    stop.store(true, Ordering::Relaxed);
    fe.join().unwrap();
    drop(c);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_guest_over_its_port() {
    let dir = std::env::temp_dir().join(format!("spe-guest-ctl-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("guest.sock");
    let hub = Arc::new(Hub::new(Features::max(), Scenario::default()).unwrap());
    let _server = spawn(&path, hub.clone(), Origin::Guest).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let fe = front_end(hub.clone(), mem(8 << 20), stop.clone());

    let mut g = ControlClient::connect(&path).unwrap();
    // Bad input, an overlong line included, gets an error and the port
    // stays usable: the guest cannot reconnect it.
    let long = format!(
        "{{\"execute\":\"query-version\",\"id\":\"{}\"}}",
        "x".repeat(spe_protocol::control::MAX_GUEST_LINE)
    );
    for bad in [
        "{",
        "\u{fffd}\u{1}",
        long.as_str(),
        "{\"execute\":\"query-sp\"}",
    ] {
        assert!(
            matches!(g.send_raw(bad).unwrap(), ServerLine::Error { .. }),
            "{bad:.40}"
        );
    }
    let v = g.execute(&Command::QueryVersion(NoArgs {})).unwrap();
    assert_eq!(v, Reply::Version(VersionInfo::current()));

    // A fault armed from the guest is delivered; its event waits in the
    // port's queue until the guest asks, and nothing is pushed.
    let a = g
        .execute(&arm(
            json!({"vcpu": 1, "kind": "external-abort", "trigger": "next-record"}),
        ))
        .map(armed)
        .unwrap();
    assert!(!a.pending);
    let mut found = None;
    for _ in 0..500 {
        let Reply::Events(l) = g.execute(&Command::QueryEvents(NoArgs {})).unwrap() else {
            panic!("not events")
        };
        assert!(l.events.len() <= spe_protocol::control::MAX_EVENTS_PER_QUERY);
        found = l.events.iter().find_map(|e| match e.parse() {
            Ok(Event::FaultDelivered(d)) if d.id == a.id => Some(d),
            _ => None,
        });
        if found.is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let d = found.expect("the fault's event reached the guest's queue");
    assert_eq!((d.vcpu, d.pmbsr), (1, Hex(0x9006_0010)));
    assert!(g.next_event(Duration::from_millis(200)).unwrap().is_none());

    // Choices from the guest are its VM's: the next VM starts with the
    // host's.
    g.execute(&Command::SetChoice(SetChoiceArgs {
        name: "overrun".into(),
        value: "imp-def".into(),
    }))
    .unwrap();
    let Reply::Choices(c) = g.execute(&Command::QueryChoices(NoArgs {})).unwrap() else {
        panic!("not choices")
    };
    assert_eq!(c.choices[0].value, "imp-def", "the VM's choice");
    assert_eq!(lock(&hub.choices).list()[0].value, "buffer-full-dl");

    stop.store(true, Ordering::Relaxed);
    fe.join().unwrap();
    // Without a VM a guest's fault is refused, not kept for the next VM.
    match g.execute(&arm(
        json!({"vcpu": 0, "kind": "buffer-full", "trigger": "next-record"}),
    )) {
        Err(CallError::Server(e)) => assert_eq!(e.class, ErrorClass::NoVm),
        other => panic!("{other:?}"),
    }
    assert!(lock(&hub.pending).is_empty());
    drop(g);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn query_events_is_the_guest_ports() {
    let hub = Hub::new(Features::max(), Scenario::default()).unwrap();
    let l = hub.call(req(&Command::QueryEvents(NoArgs {})), Origin::Host);
    assert_eq!(class(&l), Some(ErrorClass::Unsupported));
}
