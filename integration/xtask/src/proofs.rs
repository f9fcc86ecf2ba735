//! Host checks of the proofs of where SPE records land: the guest
//! scenarios `spe-profile`, `spe-filter-load`, `spe-min-latency`,
//! `spe-jitter`, `spe-interval-others`, `spe-interval-faults`,
//! `spe-smp2-pinned`, `spe-alias`, the replay pair, and the SVE and MTE
//! records. Each guest script judges its own records and reports the
//! numbers; these checks hold the numbers to the same bounds, so a script
//! that passes without them (or on too few records) still fails.

use crate::attributes;
use crate::scenario::{parse_console, Control, Judge, RunOutput, VCPUS};

/// The sampling period of `spe-jitter` (`perf record -c`, also the
/// `neoverse-n1` profile's minimum interval): samples are `PERIOD + 1`
/// operations apart, `PERIOD + 1 + [0, 255]` with jitter.
pub const PERIOD: f64 = 1024.0;

/// (a) over three quarters of the user-space records in the workload's
/// functions, (b) strided VAs in the array, (c) PAs as the guest's pagemap
/// translates them, (d) targets on taken branches only, the workload's in its own functions and exactly
/// the ones their instructions encode, (e) non-decreasing timestamps per
/// CPU, (f) on perf's clock none after the workload's exit and the
/// workload's spanning at least half its loop's time; the negative
/// controls caught their wrong inputs; perf decoded every record the
/// backend wrote.
pub fn check_spe_profile(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.want("workload_share_pct", "> 75", |v| v > 75.0);
    let records = j.want("spe_records", "> 0", |v| v > 0.0);
    let ldst = j.want("strided_ldst", ">= 100", |v| v >= 100.0);
    j.want("pa_match", "strided_ldst", |v| v == ldst);
    j.want("pagemap_pages", "1024 (4 MiB of 4 KiB pages)", |v| {
        v == 1024.0
    });
    j.positive(&[
        "branches_taken",
        "branches_not_taken",
        "workload_tgt_same_function",
        "workload_tgt_exact",
    ]);
    j.zero(&[
        "spe_bad_packets",
        "no_va",
        "va_outside",
        "no_pa",
        "pa_mismatch",
        "taken_without_tgt",
        "not_taken_with_tgt",
        "workload_tgt_elsewhere",
        "workload_tgt_wrong",
        "ts_missing",
        "ts_decreases",
        "ts_after_exit",
        "control_pa_match",
        "control_tgt_exact",
    ]);
    j.want("control_va_outside", "strided_ldst", |v| v == ldst);
    j.want("ts_exit_seen", "1", |v| v == 1.0);
    j.want("ts_span_pct", ">= 50", |v| v >= 50.0);
    j.positive(&["control_ts_decreases", "control_ts_after_exit"]);
    if let Some(backend) = j.stat(|s| s.records) {
        j.check(backend as f64 == records, || {
            format!("perf decoded {records} records, the backend wrote {backend}")
        });
    }
    j.finish()
}

/// With load_filter=1 only loads; without it stores and branches too.
pub fn check_spe_filter_load(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.positive(&["loadfilter_ld", "nofilter_st", "nofilter_br"]);
    j.zero(&[
        "loadfilter_st",
        "loadfilter_br",
        "loadfilter_other",
        "loadfilter_bad",
        "nofilter_bad",
    ]);
    j.finish()
}

/// With min_latency=N no total latency below N; without it most below.
pub fn check_spe_min_latency(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let n = j.want("min_latency", "> 0", |v| v > 0.0);
    j.positive(&["minlat_records"]);
    j.zero(&[
        "minlat_below",
        "minlat_no_latency",
        "minlat_bad",
        "nominlat_bad",
    ]);
    j.want("minlat_min_latency", "min_latency or more", |v| v >= n);
    j.want("nominlat_min_latency", "below min_latency", |v| v < n);
    let all = j.float("nominlat_records");
    j.want(
        "nominlat_below",
        "more than half of nominlat_records",
        |v| 2.0 * v > all,
    );
    j.finish()
}

/// Without jitter one spacing, PERIOD + 1 operations; with it spacings in
/// PERIOD + 1 + [0, 255], many of them, with a mean in [PERIOD, PERIOD +
/// 256]; the sampled loads' VAs agree with their PCs.
pub fn check_spe_jitter(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let (lo, hi) = (PERIOD + 1.0, PERIOD + 256.0);
    for run in ["j0", "j1"] {
        let spacings = j.want(&format!("{run}_spacings"), ">= 500", |v| v >= 500.0);
        j.want(
            &format!("{run}_gaps"),
            "at most a tenth of the spacings",
            |v| 10.0 * v <= spacings,
        );
        j.zero(&[
            &format!("{run}_spacing_out_of_range"),
            &format!("{run}_pc_va_mismatch"),
            &format!("{run}_va_outside"),
            &format!("{run}_bad"),
        ]);
    }
    let one = format!("{lo}");
    j.want("j0_spacing_min", &one, |v| v == lo);
    j.want("j0_spacing_max", &one, |v| v == lo);
    j.want("j0_spacing_distinct", "1", |v| v == 1.0);
    let range = format!("in [{lo}, {hi}]");
    j.want("j1_spacing_min", &range, |v| (lo..=hi).contains(&v));
    j.want("j1_spacing_max", &range, |v| (lo..=hi).contains(&v));
    j.want("j1_spacing_mean", &format!("in [{PERIOD}, {hi}]"), |v| {
        (PERIOD..=hi).contains(&v)
    });
    j.want("j1_spacing_distinct", ">= 16", |v| v >= 16.0);
    j.finish()
}

/// Samples at "other" operations (an `add` loop) are exactly PERIOD + 1
/// operations apart, without jitter.
pub fn check_spe_interval_others(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.want("spacings", ">= 2000", |v| v >= 2000.0);
    j.want("loop_other_records", ">= 2000", |v| v >= 2000.0);
    j.zero(&["spacing_wrong", "bad"]);
    let one = format!("{}", PERIOD + 1.0);
    j.want("spacing_min", &one, |v| v == PERIOD + 1.0);
    j.want("spacing_max", &one, |v| v == PERIOD + 1.0);
    j.finish()
}

/// As `check_spe_interval_others`, in a loop whose every pass takes a page
/// fault (at least 1000 of them).
pub fn check_spe_interval_faults(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.want("faults", ">= 1000", |v| v >= 1000.0);
    j.include(check_spe_interval_others(out));
    j.finish()
}

/// `spe-alias` under the default operation model (micro-operations): at
/// least 2000 records of the 5-instruction loop, every instruction of it
/// sampled with at least a quarter of its fair share, so the load too.
pub fn check_spe_alias(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let ops = j.want("alias_ops", "5", |v| v == 5.0);
    let records = j.want("alias_records", ">= 2000", |v| v >= 2000.0);
    j.zero(&["bad"]);
    j.want("alias_positions", "every instruction of the loop", |v| {
        v == ops
    });
    let share = records / ops / 4.0;
    for k in 0..5 {
        j.want(&format!("alias_pos{k}"), &format!(">= {share}"), |v| {
            v >= share
        });
    }
    j.want("alias_ld", &format!(">= {share}"), |v| v >= share);
    j.finish()
}

/// `spe-alias` counting instructions exactly: the run `check_spe_alias`
/// must reject, every record of the loop at one instruction.
pub fn check_spe_alias_exact(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.want("alias_records", ">= 2000", |v| v >= 2000.0);
    j.zero(&["bad"]);
    j.want("alias_positions", "1", |v| v == 1.0);
    j.check(check_spe_alias(out).is_err(), || {
        "check_spe_alias accepted a run that counted instructions exactly".into()
    });
    j.finish()
}

/// The faults the backend delivered, as what must repeat: the vCPU,
/// the fault, PMBSR and PMBPTR.
fn delivered(c: &Control) -> Vec<String> {
    c.delivered()
        .map(|f| {
            format!(
                "vCPU {} {:?} PMBSR={:#x} PMBPTR={:#x}",
                f.vcpu, f.fault, f.pmbsr.0, f.pmbptr.0
            )
        })
        .collect()
}

/// What each boot of `spe-replay` must show: a long recording that
/// decodes, and the fault it armed delivered.
fn replay_recorded(j: &Judge) {
    j.want("replay_records", ">= 1000", |v| v >= 1000.0);
    j.zero(&["bad"]);
    j.check(j.out().control.delivered().next().is_some(), || {
        "the backend delivered no fault".into()
    });
}

/// `spe-replay-a`, the first boot of the pair.
pub fn check_spe_replay_first(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    replay_recorded(&j);
    j.finish()
}

/// `spe-replay-b` against `spe-replay-a` (the run before it, in the same
/// runs folder): the same AUX hash over the same number of records, the
/// same faults delivered on the same vCPUs at the same PMBPTR, and the
/// same records in the backend's `--record` files.
pub fn check_spe_replay(out: &RunOutput) -> Result<(), String> {
    let a_dir = out.dir.with_file_name("spe-replay-a");
    let console = std::fs::read_to_string(a_dir.join("console.log"))
        .map_err(|e| format!("spe-replay-a's console.log (run it first): {e}"))?;
    let a = parse_console(&console, "spe-replay").results;
    let a_control =
        Control::read(&a_dir).map_err(|e| format!("spe-replay-a's {e} (run it first)"))?;
    let j = Judge::new(out);
    replay_recorded(&j);
    for key in ["replay_records", "replay_aux_hash"] {
        let first = a.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str());
        let second = j.text(key);
        j.check(first.is_some() && first == second, || {
            format!("{key}: {first:?} in the first run, {second:?} in the second")
        });
    }
    let (fa, fb) = (delivered(&a_control), delivered(&out.control));
    j.check(!fa.is_empty() && fa == fb, || {
        format!("faults delivered: {fa:?} in the first run, {fb:?} in the second")
    });
    // Every record the backend wrote, not only those perf kept: where two
    // boots part, this names the first record that differs.
    let records = match crate::records::difference(&a_dir.join("records"), &out.dir.join("records"))
    {
        Ok(None) => None,
        Ok(Some(d)) => Some(format!("the backend's records differ: {d}")),
        Err(e) => Some(format!("the backend's records: {e}")),
    };
    j.check(records.is_none(), || records.clone().unwrap_or_default());
    j.finish()
}

/// Two vCPUs; each CPU's workload records are from the workload pinned
/// there (at least 500 of them).
pub fn check_spe_smp2_pinned(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    j.is("cpus", &VCPUS.to_string());
    for cpu in 0..VCPUS {
        j.want(&format!("cpu{cpu}_own"), ">= 500", |v| v >= 500.0);
        j.zero(&[&format!("cpu{cpu}_other_workload")]);
    }
    j.finish()
}

/// The kinds of `spe-workload sve`'s loop (spe-sve.sh): each SVE
/// operation with its payload, data address and predicate events.
const SVE_KINDS: [&str; 8] = [
    "ld_full",
    "ld_partial",
    "ld_empty",
    "gather",
    "fp",
    "add_partial",
    "add_unpred",
    "st",
];

/// Whether the guest ran the run that `attr` filters (its
/// `absent_key` result missing). A run reported absent is a failure on a
/// kernel whose driver has the attribute (`attributes::ATTRS`).
fn ran(j: &Judge, absent_key: &str, attr: &str) -> bool {
    if j.text(absent_key).is_none() {
        return true;
    }
    let Some(since) = attributes::since(attr) else {
        j.fail(format!("{absent_key}: {attr} is not in attributes::ATTRS"));
        return false;
    };
    let kernel = j.out().kernel_line();
    j.check(kernel.is_some_and(|k| k < since), || {
        format!(
            "{absent_key}: {attr} absent on kernel {kernel:?}, whose driver has it (since {}.{})",
            since.0, since.1
        )
    });
    false
}

/// SVE: with no filter every SVE operation of the loop is
/// recorded as itself (EVL the workload's vector length, PRED, SG, FP, the
/// data address of its first active element, the predicate events) and
/// none otherwise; `event_filter` on the partial or empty predicate keeps
/// only records with it; `inv_event_filter` on the partial one keeps none
/// with it, and `float_filter` keeps the `fadd` and drops the integer SVE
/// operations, where the driver has them (`ran`: 6.1 lacks both, 6.12
/// float_filter).
pub fn check_spe_sve(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let vl = j.want("sve_vl", ">= 128", |v| v >= 128.0);
    j.check(vl.is_nan() || vl.log2().fract() == 0.0, || {
        format!("vector length {vl} is not a power of two")
    });
    let n = j.want("sve_none_n", ">= 200", |v| v >= 200.0);
    let share = n / 11.0 / 3.0;
    for k in SVE_KINDS {
        j.want(&format!("sve_none_{k}"), &format!(">= {share:.0}"), |v| {
            v >= share
        });
    }
    j.zero(&[
        "sve_none_bad",
        "sve_none_evl_bad",
        "sve_none_wrong",
        "sve_none_ldst",
    ]);
    for (run, key) in [("partial", "partial"), ("empty", "empty")] {
        let n = j.want(&format!("sve_{run}_n"), "> 0", |v| v > 0.0);
        j.want(&format!("sve_{run}_{key}"), &format!("{n}"), |v| v == n);
        j.zero(&[&format!("sve_{run}_bad")]);
    }
    j.positive(&["sve_partial_ld_empty", "sve_partial_add_partial"]);
    if ran(&j, "sve_notpartial_absent", "inv_event_filter") {
        j.positive(&["sve_notpartial_n", "sve_notpartial_ld_full"]);
        j.zero(&["sve_notpartial_partial", "sve_notpartial_bad"]);
    }
    if ran(&j, "sve_float_absent", "float_filter") {
        j.positive(&["sve_float_fp"]);
        j.zero(&[
            "sve_float_add_partial",
            "sve_float_add_unpred",
            "sve_float_ld_full",
            "sve_float_bad",
        ]);
    }
    j.finish()
}

/// MTE: the loop's tag-checked load and store (through a
/// pointer with a non-zero tag) carry their data addresses, tag and all.
pub fn check_spe_mte(out: &RunOutput) -> Result<(), String> {
    let j = Judge::new(out);
    let n = j.want("mte_n", ">= 200", |v| v >= 200.0);
    let share = n / 4.0 / 3.0;
    for k in ["mte_ld_ok", "mte_st_ok"] {
        j.want(k, &format!(">= {share:.0}"), |v| v >= share);
    }
    j.want("tagged", "1 (a tag in the pointer's top byte)", |v| {
        v == 1.0
    });
    j.zero(&["mte_ld_bad", "mte_st_bad", "mte_bad"]);
    j.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::tests::write_folder;
    use spe_protocol::control::{FaultDeliveredData, FaultKind, Hex};

    /// A passing run with `line`'s results (an `SPE-RESULT` line's pairs)
    /// with `key` set to `value` (a missing `key` is added; "" drops it),
    /// and `control` from the backend.
    fn run(line: &str, control: &Control, key: &str, value: &str) -> RunOutput {
        RunOutput {
            control: control.clone(),
            ..RunOutput::from_line(line).with(key, value)
        }
    }

    /// `check` accepts `line` and rejects each (key, value) change, with
    /// the key in its message.
    fn accepts_and_rejects(
        check: fn(&RunOutput) -> Result<(), String>,
        line: &str,
        control: &Control,
        bad: &[(&str, &str)],
    ) {
        assert_eq!(check(&run(line, control, "", "")), Ok(()));
        for (k, v) in bad {
            let e = check(&run(line, control, k, v)).unwrap_err();
            assert!(e.contains(k), "{k}={v}: {e}");
        }
    }

    // Results of real runs (cargo xtask test here).
    const PROFILE: &str = "spe_records=6498 spe_bad_packets=0 perf_samples=6498 \
        kernel_samples=1043 workload_samples=5018 workload_share_pct=90.1 pagemap_pages=1024 strided_ldst=1276 \
        no_va=0 va_outside=0 no_pa=0 pa_match=1276 pa_mismatch=0 branches_taken=2019 \
        taken_without_tgt=0 branches_not_taken=2292 not_taken_with_tgt=0 \
        workload_tgt_same_function=813 workload_tgt_elsewhere=0 workload_tgt_exact=1610 \
        workload_tgt_wrong=0 ts_missing=0 ts_decreases=0 control_pa_match=0 \
        control_va_outside=1276 control_ts_decreases=5880 control_tgt_exact=0 \
        ts_records=6498 ts_exit_seen=1 ts_after_exit=0 ts_span_pct=906 control_ts_after_exit=486";

    #[test]
    fn profile_needs_every_proof_and_control() {
        let backend = Control::with_records(&[6000, 498]);
        accepts_and_rejects(
            check_spe_profile,
            PROFILE,
            &backend,
            &[
                ("workload_share_pct", "74.9"),
                ("va_outside", "1"),
                ("pa_mismatch", "3"),
                ("pa_match", "1275"),
                ("no_pa", "1"),
                ("taken_without_tgt", "1"),
                ("not_taken_with_tgt", "2"),
                ("workload_tgt_elsewhere", "1"),
                ("workload_tgt_same_function", "0"),
                ("ts_decreases", "1"),
                ("workload_tgt_exact", "0"),
                ("workload_tgt_wrong", "1"),
                ("control_pa_match", "1276"),
                ("control_tgt_exact", "1610"),
                ("ts_exit_seen", "0"),
                ("ts_after_exit", "2"),
                ("ts_span_pct", "49"),
                ("control_ts_after_exit", "0"),
                ("control_va_outside", "0"),
                ("control_ts_decreases", "0"),
                ("strided_ldst", ""),
            ],
        );
        let e = check_spe_profile(&run(PROFILE, &Control::default(), "", "")).unwrap_err();
        assert!(e.contains("no query-spu answer"), "{e}");
        let fewer = Control::with_records(&[6000, 497]);
        let e = check_spe_profile(&run(PROFILE, &fewer, "", "")).unwrap_err();
        assert!(e.contains("the backend wrote 6497"), "{e}");
    }

    #[test]
    fn filter_load_needs_loads_only() {
        accepts_and_rejects(
            check_spe_filter_load,
            "nofilter_ld=571 nofilter_st=384 nofilter_br=1556 nofilter_other=5498 \
             nofilter_bad=0 loadfilter_ld=530 loadfilter_st=0 loadfilter_br=0 \
             loadfilter_other=0 loadfilter_bad=0",
            &Control::default(),
            &[
                ("loadfilter_st", "1"),
                ("loadfilter_br", "7"),
                ("loadfilter_other", "2"),
                ("loadfilter_ld", "0"),
                ("nofilter_st", "0"),
            ],
        );
    }

    #[test]
    fn min_latency_needs_nothing_below() {
        accepts_and_rejects(
            check_spe_min_latency,
            "nominlat_records=1233 nominlat_below=1069 nominlat_no_latency=0 \
             nominlat_min_latency=5 nominlat_bad=0 minlat_records=178 minlat_below=0 \
             minlat_no_latency=0 minlat_min_latency=17 minlat_bad=0 min_latency=16",
            &Control::default(),
            &[
                ("minlat_below", "1"),
                ("minlat_min_latency", "15"),
                ("minlat_records", "0"),
                ("nominlat_below", "100"),
                ("nominlat_min_latency", "16"),
            ],
        );
    }

    #[test]
    fn interval_others_needs_every_spacing_exact() {
        accepts_and_rejects(
            check_spe_interval_others,
            "loop_records=3999 loop_other_records=3998 loop_branch_records=1 \
             outside_records=36 spacings=3997 spacing_min=1025 spacing_max=1025 \
             spacing_wrong=0 bad=0",
            &Control::default(),
            &[
                ("spacing_wrong", "1"),
                ("spacing_min", "1024"),
                ("spacing_max", "1026"),
                ("spacings", "12"),
                ("loop_other_records", "0"),
                ("bad", "3"),
            ],
        );
    }

    #[test]
    fn replay_needs_the_first_run_repeated() {
        let runs = std::env::temp_dir().join(format!("xtask-replay-{}", std::process::id()));
        let a = runs.join("spe-replay-a");
        std::fs::create_dir_all(&a).unwrap();
        let line = "replay_records=61020 replay_aux_hash=ce31bd22 bad=0";
        let fault = |pmbptr: u64| Control {
            faults: vec![FaultDeliveredData {
                id: 1,
                vcpu: 1,
                fault: FaultKind::BufferFull,
                delivered: true,
                why: None,
                pmbsr: Hex(0x20001),
                pmbptr: Hex(pmbptr),
            }],
            ..Control::with_stats(&[])
        };
        let first = fault(0xffff_8000);
        let second = |results: &str, control: &Control| RunOutput {
            dir: runs.join("spe-replay-b"),
            ..run(results, control, "", "")
        };
        assert_eq!(check_spe_replay_first(&run(line, &first, "", "")), Ok(()));
        assert!(check_spe_replay_first(&run(line, &Control::default(), "", "")).is_err());
        // No first run yet.
        let e = check_spe_replay(&second(line, &first)).unwrap_err();
        assert!(e.contains("run it first"), "{e}");
        std::fs::write(a.join("console.log"), format!("SPE-RESULT {line}\r\n")).unwrap();
        let e = check_spe_replay(&second(line, &first)).unwrap_err();
        assert!(e.contains("control.json"), "{e}");
        std::fs::write(a.join(Control::FILE), first.to_json().to_string()).unwrap();
        let e = check_spe_replay(&second(line, &first)).unwrap_err();
        assert!(e.contains("no record files"), "{e}");
        let recs: &[&[&[u8]]] = &[&[b"\x49\x00"], &[b"\x01"]];
        write_folder(&a.join("records"), recs, 1);
        write_folder(&runs.join("spe-replay-b/records"), recs, 2);
        assert_eq!(check_spe_replay(&second(line, &first)), Ok(()));
        let other_hash = line.replace("ce31bd22", "6f0c6ada");
        assert!(check_spe_replay(&second(&other_hash, &first)).is_err());
        let other_count = line.replace("61020", "60491");
        assert!(check_spe_replay(&second(&other_count, &first)).is_err());
        let e = check_spe_replay(&second(line, &fault(0xffff_8040))).unwrap_err();
        assert!(e.contains("0xffff8040"), "{e}");
        assert!(check_spe_replay(&second(line, &Control::default())).is_err());
        write_folder(
            &runs.join("spe-replay-b/records"),
            &[&[b"\x49\x01"], &[b"\x01"]],
            2,
        );
        let e = check_spe_replay(&second(line, &first)).unwrap_err();
        assert!(e.contains("vCPU 0: record 0 differs first"), "{e}");
        std::fs::remove_dir_all(&runs).unwrap();
    }

    #[test]
    fn alias_needs_every_instruction_of_the_loop() {
        accepts_and_rejects(
            check_spe_alias,
            "alias_ops=5 alias_records=5200 alias_ld=1040 alias_pos0=1040 \
             alias_pos1=1000 alias_pos2=1100 alias_pos3=1020 alias_pos4=1040 \
             alias_positions=5 bad=0",
            &Control::default(),
            &[
                ("alias_positions", "4"),
                ("alias_pos2", "0"),
                ("alias_ld", "10"),
                ("alias_records", "100"),
                ("bad", "1"),
            ],
        );
    }

    #[test]
    fn alias_exact_needs_one_instruction_and_check_alias_to_fail() {
        let one = "alias_ops=5 alias_records=4870 alias_ld=0 alias_pos0=0 \
                   alias_pos1=0 alias_pos2=4870 alias_pos3=0 alias_pos4=0 \
                   alias_positions=1 bad=0";
        assert!(check_spe_alias(&run(one, &Control::default(), "", "")).is_err());
        accepts_and_rejects(
            check_spe_alias_exact,
            one,
            &Control::default(),
            &[
                ("alias_positions", "5"),
                ("alias_records", "3"),
                ("bad", "2"),
            ],
        );
    }

    #[test]
    fn interval_faults_needs_the_faults_and_every_spacing_exact() {
        accepts_and_rejects(
            check_spe_interval_faults,
            "loop_records=4001 loop_other_records=4000 outside_records=34 \
             spacings=3999 spacing_min=1025 spacing_max=1025 spacing_wrong=0 \
             faults=1001 bad=0",
            &Control::default(),
            &[
                ("faults", "3"),
                ("spacing_wrong", "2"),
                ("spacing_max", "1536"),
                ("loop_other_records", "0"),
            ],
        );
    }

    #[test]
    fn jitter_needs_one_spacing_then_many() {
        accepts_and_rejects(
            check_spe_jitter,
            "j0_ladder_records=2046 j0_other_records=5 j0_va_outside=0 j0_pc_va_mismatch=0 \
             j0_spacings=2018 j0_gaps=27 j0_spacing_mean=1025.0 j0_spacing_min=1025 \
             j0_spacing_max=1025 j0_spacing_distinct=1 j0_spacing_out_of_range=0 j0_bad=0 \
             j1_ladder_records=1818 j1_other_records=3 j1_va_outside=0 j1_pc_va_mismatch=0 j1_spacings=1796 \
             j1_gaps=21 j1_spacing_mean=1155.7 j1_spacing_min=1025 j1_spacing_max=1280 \
             j1_spacing_distinct=254 j1_spacing_out_of_range=0 j1_bad=0",
            &Control::default(),
            &[
                ("j0_spacing_distinct", "2"),
                ("j0_spacing_max", "1026"),
                ("j0_spacing_min", "1024"),
                ("j1_spacing_min", "579"),
                ("j1_spacing_out_of_range", "2"),
                ("j1_spacing_max", "1434"),
                ("j1_spacing_mean", "1300.5"),
                ("j1_spacing_distinct", "1"),
                ("j1_spacings", "100"),
                ("j1_gaps", "500"),
                ("j0_pc_va_mismatch", "1"),
            ],
        );
    }

    const SVE: &str = "sve_vl=256 sve_none_n=660 sve_none_ld_full=60 sve_none_ld_partial=60 \
        sve_none_ld_empty=60 sve_none_gather=60 sve_none_fp=60 sve_none_add_partial=60 \
        sve_none_add_unpred=60 sve_none_st=60 sve_none_bad=0 sve_none_evl_bad=0 \
        sve_none_wrong=0 sve_none_ldst=0 sve_partial_n=50 sve_partial_partial=50 \
        sve_partial_bad=0 sve_partial_ld_empty=5 sve_partial_add_partial=9 sve_empty_n=40 \
        sve_empty_empty=40 sve_empty_bad=0 sve_notpartial_n=100 sve_notpartial_ld_full=20 \
        sve_notpartial_partial=0 sve_notpartial_bad=0 sve_float_fp=30 sve_float_add_partial=0 \
        sve_float_add_unpred=0 sve_float_ld_full=0 sve_float_bad=0";

    #[test]
    fn sve_runs_are_absent_only_on_kernels_without_their_attribute() {
        let none = Control::default();
        let on = |kernel: &str, absent: &[(&str, &str)]| {
            let line = format!("kernel={kernel} {SVE}");
            let out = absent
                .iter()
                .fold(run(&line, &none, "", ""), |o, (k, v)| o.with(k, v));
            check_spe_sve(&out)
        };
        accepts_and_rejects(
            check_spe_sve,
            &format!("kernel=7.3.4+deb13-arm64 {SVE}"),
            &none,
            &[
                ("sve_none_gather", "3"),
                ("sve_float_add_partial", "1"),
                ("sve_notpartial_partial", "2"),
                ("sve_empty_empty", "39"),
            ],
        );
        let float = ("sve_float_absent", "float_filter");
        let notpartial = ("sve_notpartial_absent", "inv_event_filter");
        // float_filter since 6.18, inv_event_filter since 6.3.
        assert!(on("7.3.4+deb13-arm64", &[float]).is_err());
        assert_eq!(on("6.12.117+deb13-arm64", &[float]), Ok(()));
        assert!(on("6.12.117+deb13-arm64", &[notpartial])
            .unwrap_err()
            .contains("since 6.3"));
        assert_eq!(on("6.1.0-56-arm64", &[float, notpartial]), Ok(()));
        // An absent run is skipped: its numbers do not count then.
        let skipped = [float, ("sve_float_fp", "0")];
        assert_eq!(on("6.1.0-56-arm64", &skipped), Ok(()));
        assert!(on("7.3.4+deb13-arm64", &[("sve_float_fp", "0")]).is_err());
        assert!(on("unknown", &[float]).is_err(), "no kernel line");
    }

    #[test]
    fn smp2_needs_each_cpu_its_own_workload() {
        accepts_and_rejects(
            check_spe_smp2_pinned,
            "cpus=2 cpu0_records=7062 cpu0_own=4202 cpu0_other_workload=0 cpu0_own_pct=59 \
             cpu0_top=spe-cpu0 cpu1_records=6991 cpu1_own=5716 cpu1_other_workload=0 \
             cpu1_own_pct=81 cpu1_top=spe-cpu1",
            &Control::default(),
            &[
                ("cpus", "1"),
                ("cpu0_other_workload", "3"),
                ("cpu1_own", "12"),
                ("cpu1_other_workload", ""),
            ],
        );
    }
}
