//! PMU snapshots (FEAT_PMUv3_SS) through the guest's `pmu_snapshot`
//! driver (guest-driver/pmu_snapshot): its sysfs interface on a guest
//! with `pmu-ss=on` (`pmu-snapshot`, in scenarios/list.rs) and its refusal on
//! a CPU without the feature (`pmu-snapshot-no-pmss`, here).

use crate::scenario::{Expect, Judge, RunOutput, Scenario, SpeRun};
use spe_protocol::control::{SnapshotList, SnapshotOutcome};
use spe_protocol::profile::CpuProfile;

/// What pmu-snapshot.sh prints once the host may request a capture: the
/// runner then runs `vhost-device-spe ctl --json snapshot`.
pub const HOST_MARKER: &str = "PMU-SNAPSHOT-HOST-NOW";

/// The scenarios that load the `pmu_snapshot` module.
pub const NEEDS_MODULE: &[&str] = &["pmu-snapshot", "pmu-snapshot-no-pmss"];

/// The refusal the driver prints on a CPU without FEAT_PMUv3_SS.
const REFUSAL: &str = "no_CPU_implements_FEAT_PMUv3_SS";

/// How far apart (in cycles; QEMU's PMU counts 1 GHz of virtual time) the
/// two PMCCNTR_EL0 reads around a capture may be.
const CAPTURE_MAX_CYCLES: u64 = 1_000_000_000;

/// PMEVTYPER<n>_EL0.evtCount of CPU_CYCLES, which perf's `r11` counts
/// on an event counter (QEMU counts INST_RETIRED only with -icount).
const CPU_CYCLES: u64 = 0x11;

pub fn scenarios() -> Vec<Scenario> {
    vec![
        // The negative control: `-cpu max,spe=on` without pmu-ss=on.
        Scenario::new(
            "pmu-snapshot-no-pmss",
            "pmu-snapshot-no-pmss",
            120,
            Expect::pass(check_no_pmss),
        )
        .spe(SpeRun::new(CpuProfile::Max))
        .proves(
            "The negative control of `pmu-snapshot`: on `-cpu max,spe=on` without `pmu-ss=on` (no \
             FEAT_PMUv3_SS) `insmod pmu_snapshot` fails with ENODEV and says \"no CPU implements \
             FEAT_PMUv3_SS\".",
        ),
    ]
}

/// The event counters of one capture (prefix `a_`, `b_`, `c_`) as
/// (n, count, PMEVTYPER).
fn counters(j: &Judge, prefix: &str) -> Vec<(u64, u64, u64)> {
    let mut v = Vec::new();
    for (k, _) in &j.out().results {
        let Some(n) = k.strip_prefix(prefix).and_then(|k| k.strip_prefix("evcnt")) else {
            continue;
        };
        let Ok(n) = n.parse::<u64>() else { continue };
        if let (Some(count), Some(ty)) = (j.num(k), j.hex(&format!("{prefix}evtype{n}"))) {
            v.push((n, count, ty));
        }
    }
    v
}

/// The snapshot driver's capture `prefix` (`a_`, `b_`, `c_`): its seq,
/// source and nc files.
fn capture<'a>(j: &Judge<'a>, prefix: &str) -> (Option<u64>, &'a str, Option<u64>) {
    (
        j.num(&format!("{prefix}seq")),
        j.text(&format!("{prefix}source")).unwrap_or(""),
        j.num(&format!("{prefix}nc")),
    )
}

/// The three proofs for the driver, on cpu0 of a guest with
/// FEAT_PMUv3_SS, and its CPU hotplug and unload:
/// (a) a capture from user space has source=guest, nc=0, the next seq,
///     and PMCCNTSVR_EL1 between the PMCCNTR_EL0 reads around it (perf
///     starts its counters near 2^64: the arithmetic wraps); perf's `r11`
///     counted on an event counter, and the capture has it with its type;
/// (c) with Capture events prohibited: the next seq, nc=1, and the
///     snapshot registers unchanged;
/// (b) the host's `ctl snapshot`: the next seq, source=host, nc=0 and a
///     new cycle count.
pub fn check_pmu_snapshot(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let files = j.text("files").unwrap_or("");
    for f in [
        "capture", "seq", "source", "nc", "ccnt", "evcnt0", "evtype0",
    ] {
        j.check(files.split(',').any(|x| x == f), || {
            format!("no file {f} in cpu0/pmu_snapshot ({files})")
        });
    }
    let load_seq = j.num("load_seq");
    j.is("load_source", "none");

    // (a)
    let (before, svr, after) = (j.num("a_before"), j.num("a_svr"), j.num("a_after"));
    // The write to capture worked.
    j.zero(&["a_rc"]);
    let (a_seq, a_source, a_nc) = capture(&j, "a_");
    let want = load_seq.map(|s| s + 1);
    j.check(a_seq == want && a_source == "guest" && a_nc == Some(0), || {
        format!("(a) seq {a_seq:?} source {a_source} nc {a_nc:?}, want seq {want:?} source guest nc 0")
    });
    if let (Some(before), Some(svr), Some(after)) = (before, svr, after) {
        let span = after.wrapping_sub(before);
        j.check(
            span > 0 && svr.wrapping_sub(before) <= span && span < CAPTURE_MAX_CYCLES,
            || format!("(a) PMCCNTSVR_EL1 {svr} is not between PMCCNTR_EL0 {before} and {after}"),
        );
    }
    let a_ccnt = j.num("a_ccnt");
    j.check(a_ccnt.is_some() && a_ccnt == svr, || {
        format!("(a) ccnt {a_ccnt:?} but PMCCNTSVR_EL1 {svr:?}")
    });
    let a = counters(&j, "a_");
    j.check(
        a.iter()
            .any(|&(_, count, ty)| ty & 0xffff == CPU_CYCLES && count > 0),
        || format!("(a) no event counter counted CPU_CYCLES: (n, count, type) {a:x?}"),
    );

    // (c)
    let (c_seq, c_source, c_nc) = capture(&j, "c_");
    let want = a_seq.map(|s| s + 1);
    let c_rc = j.num("c_rc");
    j.check(c_rc == Some(0) && c_seq == want && c_source == "guest", || {
        format!("(c) rc {c_rc:?} seq {c_seq:?} source {c_source}, want rc 0 seq {want:?} source guest")
    });
    j.check(c_nc == Some(1), || {
        "(c) a prohibited capture did not report nc=1".into()
    });
    let c = counters(&j, "c_");
    let c_ccnt = j.num("c_ccnt");
    j.check(
        c_ccnt == svr && c.iter().map(|x| x.1).eq(a.iter().map(|x| x.1)),
        || "(c) a prohibited capture changed the snapshot registers".into(),
    );

    // (b)
    let (b_seq, b_source, b_nc) = capture(&j, "b_");
    let want = c_seq.map(|s| s + 1);
    j.check(b_seq == want && b_source == "host" && b_nc == Some(0), || {
        format!(
            "(b) seq {b_seq:?} source {b_source} nc {b_nc:?} after {} ds, want seq {want:?} source host nc 0",
            j.text("b_waited_ds").unwrap_or("?")
        )
    });
    // New values: perf restarts its counters (at each 32-bit overflow
    // of a counting event), so they need not be larger.
    let b_ccnt = j.num("b_ccnt");
    j.check(b_ccnt != c_ccnt, || {
        format!("(b) the host's capture left PMCCNTSVR_EL1 at {b_ccnt:?}")
    });
    let ctl = std::fs::read_to_string(out.dir.join("ctl.log")).unwrap_or_default();
    let captured = ctl
        .lines()
        .find_map(|l| serde_json::from_str::<SnapshotList>(l).ok())
        .is_some_and(|s| {
            s.vcpus
                .iter()
                .any(|v| v.outcome == SnapshotOutcome::Captured)
        });
    j.check(captured, || {
        format!("(b) ctl snapshot did not capture: {}", ctl.trim())
    });

    // Hotplug and unload.
    let hp = j.text("hotplug").unwrap_or("");
    let hp_ok = hp
        .strip_prefix("off:absent,on:present,seq:")
        .and_then(|r| r.strip_suffix(",guest"))
        .and_then(|r| r.split_once("->"))
        .and_then(|(s0, s1)| Some((s0.parse::<u64>().ok()?, s1.parse::<u64>().ok()?)))
        .is_some_and(|(s0, s1)| s1 == s0 + 1);
    j.check(hp_ok, || {
        format!("cpu1 offline and online: {hp}, want its directory gone and back, capturing")
    });
    let rmmod = j.num("rmmod_rc");
    let dir = j.text("dir_after_rmmod");
    j.check(rmmod == Some(0) && dir == Some("absent"), || {
        format!("rmmod rc {rmmod:?}, cpu0/pmu_snapshot {dir:?} after it")
    });
    j.zero(&["kernel_warnings"]);
    j.finish()
}

/// Without FEAT_PMUv3_SS the module is not loaded and says why.
fn check_no_pmss(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let (rc, loaded) = (j.num("insmod_rc"), j.num("loaded"));
    j.check(rc.is_some_and(|rc| rc != 0) && loaded == Some(0), || {
        "pmu_snapshot loaded on a CPU without FEAT_PMUv3_SS".into()
    });
    j.check(j.text("dir") == Some("absent"), || {
        "cpu0/pmu_snapshot exists".into()
    });
    let refusal = j.text("refusal").unwrap_or("");
    j.check(refusal.contains(REFUSAL), || {
        format!("no clear refusal: {refusal:?}")
    });
    j.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn out(results: &[(&str, &str)], dir: PathBuf) -> RunOutput {
        RunOutput {
            dir,
            ..RunOutput::from_pairs(results)
        }
    }

    const GOOD: &[(&str, &str)] = &[
        (
            "files",
            "capture,ccnt,evcnt0,evcnt1,evtype0,evtype1,nc,seq,source",
        ),
        ("load_seq", "0"),
        ("load_source", "none"),
        ("a_rc", "0"),
        ("a_before", "1000"),
        ("a_svr", "1200"),
        ("a_after", "1500"),
        ("a_seq", "1"),
        ("a_source", "guest"),
        ("a_nc", "0"),
        ("a_ccnt", "1200"),
        ("a_evcnt0", "900"),
        ("a_evtype0", "0x8000011"),
        ("a_evcnt1", "0"),
        ("a_evtype1", "0x0"),
        ("c_rc", "0"),
        ("c_seq", "2"),
        ("c_source", "guest"),
        ("c_nc", "1"),
        ("c_ccnt", "1200"),
        ("c_evcnt0", "900"),
        ("c_evtype0", "0x8000011"),
        ("c_evcnt1", "0"),
        ("c_evtype1", "0x0"),
        ("b_waited_ds", "12"),
        ("b_seq", "3"),
        ("b_source", "host"),
        ("b_nc", "0"),
        ("b_ccnt", "5000"),
        ("hotplug", "off:absent,on:present,seq:0->1,guest"),
        ("rmmod_rc", "0"),
        ("dir_after_rmmod", "absent"),
        ("kernel_warnings", "0"),
    ];

    fn ctl_dir(text: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "xtask-snapshot-{}-{}",
            std::process::id(),
            text.len()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ctl.log"), text).unwrap();
        dir
    }

    #[test]
    fn capture_needs_every_proof() {
        let dir = ctl_dir(r#"{"vcpus":[{"vcpu":0,"outcome":"captured","pmsscr":"0x0"}]}"#);
        let with = |k: &str, v: &str| {
            let r: Vec<(&str, &str)> = GOOD
                .iter()
                .map(|&(gk, gv)| (gk, if gk == k { v } else { gv }))
                .collect();
            check_pmu_snapshot(&out(&r, dir.clone()))
        };
        assert_eq!(with("", ""), Ok(()));
        // (a): the cycle count outside its bracket, a counter not counting.
        assert!(with("a_svr", "1600").unwrap_err().contains("not between"));
        assert!(with("a_after", "1000").is_err());
        // Near 2^64, where perf starts the counter, it may wrap.
        let wrapped = [
            ("a_before", "18446744073709551000"),
            ("a_svr", "100"),
            ("a_ccnt", "100"),
            ("c_ccnt", "100"),
            ("a_after", "700"),
        ];
        let r: Vec<(&str, &str)> = GOOD
            .iter()
            .map(|&(k, v)| wrapped.iter().find(|w| w.0 == k).copied().unwrap_or((k, v)))
            .collect();
        assert_eq!(check_pmu_snapshot(&out(&r, dir.clone())), Ok(()));
        assert!(with("a_source", "host").is_err());
        assert!(with("a_evtype0", "0x8").is_err());
        assert!(with("a_evcnt0", "0").is_err());
        // (c): no NC, or values copied.
        assert!(with("c_nc", "0").is_err());
        assert!(with("c_ccnt", "1300").is_err());
        assert!(with("c_evcnt0", "901").is_err());
        // (b): the host's capture not seen, or seen as the guest's.
        assert!(with("b_seq", "2").is_err());
        assert!(with("b_source", "guest").is_err());
        assert!(with("b_ccnt", "1200").is_err());
        assert!(with("hotplug", "off:present,on:present,seq:0->1,guest").is_err());
        assert!(with("hotplug", "skipped").is_err());
        assert!(with("dir_after_rmmod", "present").is_err());
        assert!(with("kernel_warnings", "1").is_err());
        let bad = ctl_dir(r#"{"vcpus":[{"vcpu":0,"outcome":"disabled","pmsscr":"0x0"}]}    "#);
        assert!(check_pmu_snapshot(&out(GOOD, bad.clone()))
            .unwrap_err()
            .contains("did not capture"));
        assert!(check_pmu_snapshot(&out(&[], dir.clone())).is_err());
        let _ = std::fs::remove_dir_all(dir);
        let _ = std::fs::remove_dir_all(bad);
    }

    #[test]
    fn no_pmss_needs_the_refusal() {
        let refused = [
            ("insmod_rc", "1"),
            ("loaded", "0"),
            ("dir", "absent"),
            (
                "refusal",
                "pmu_snapshot:_no_CPU_implements_FEAT_PMUv3_SS_(ID_AA64DFR0_EL1.PMSS_is_0):_no_PMU_snapshots",
            ),
        ];
        assert_eq!(check_no_pmss(&out(&refused, PathBuf::new())), Ok(()));
        let mut loaded = refused;
        loaded[0].1 = "0";
        loaded[1].1 = "1";
        assert!(check_no_pmss(&out(&loaded, PathBuf::new())).is_err());
        let mut silent = refused;
        silent[3].1 = "";
        assert!(check_no_pmss(&out(&silent, PathBuf::new())).is_err());
    }

    #[test]
    fn needs_the_module_everywhere_it_runs() {
        for s in scenarios() {
            assert!(NEEDS_MODULE.contains(&s.name), "{}", s.name);
        }
    }
}
