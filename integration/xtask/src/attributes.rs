//! The filtering attributes: each format attribute of the guest's `arm_spe_pmu`,
//! judged from the records of integration/guest/scenarios/spe-attributes.sh
//! (one perf record of `spe-workload classes` per attribute).

use crate::scenario::{Judge, RunOutput};

/// The record classes the guest counts (spe_attr_classes).
const CLASSES: [&str; 12] = [
    "ldgp",
    "ldsimd",
    "ldvec",
    "stgp",
    "stsimd",
    "stvec",
    "atomic",
    "br",
    "brnt",
    "other",
    "fpother",
    "simdother",
];

/// What `spe-workload classes` runs: general-purpose and scalar SIMD&FP
/// loads and stores (`ldr`/`str q0`: FP for SPE), vector-structure ones
/// (`ld1`/`st1`: SIMD), a taken and a never-taken branch, a scalar FP
/// `fadd` (fpother: "other" with the FP bit, which the `max` profile
/// records), an Advanced SIMD `add` (simdother) and `subs`. Each must be in
/// the run without a filter (the control), and in every run whose filter
/// keeps it.
const WORKLOAD: [&str; 11] = [
    "ldgp",
    "ldsimd",
    "ldvec",
    "stgp",
    "stsimd",
    "stvec",
    "br",
    "brnt",
    "other",
    "fpother",
    "simdother",
];

pub struct Attr {
    /// The attribute proven (the run's name in the guest script).
    pub name: &'static str,
    /// The kernel (major, minor) whose driver has it (or takes its value)
    /// first.
    pub since: (u32, u32),
    /// The classes its run may hold; every other class must be absent.
    pub keeps: &'static [&'static str],
    /// The kept classes that must show (not those the filter keeps by a
    /// random event a small class may never get; `WORKLOAD`'s only).
    pub shows: &'static [&'static str],
    /// An event or data-source count (`evrefill`, `evl1d`, `evmispred`,
    /// `evalign`, `evllc`, `dsl1`) that
    /// must equal the run's records (true) or be zero (false).
    pub event: Option<(&'static str, bool)>,
}

/// The event and data-source counts the guest reports per run
/// (spe_attr_classes), each filtered on by some attribute.
const EVENT_COUNTS: [&str; 6] = ["evrefill", "evl1d", "evmispred", "evalign", "evllc", "dsl1"];

const LDST: &[&str] = &[
    "ldgp", "ldsimd", "ldvec", "stgp", "stsimd", "stvec", "atomic",
];

/// A type filter's run: exactly the classes `keeps`.
const fn by_type(name: &'static str, since: (u32, u32), keeps: &'static [&'static str]) -> Attr {
    Attr {
        name,
        since,
        keeps,
        shows: keeps,
        event: None,
    }
}

/// The guest script's runs, with the classes SPEFilterByType and
/// SPEFilterByEvents keep (atomics are loads and stores at once). Event
/// bits: 2 L1D-ACCESS, 3 L1D-REFILL, 6 NOT-TAKEN, 7 MISPRED, 8 LLC-ACCESS,
/// 11 ALIGNMENT. QEMU's sampler gives every load and store L1D-ACCESS, one
/// in 32 L1D-REFILL and one in 64 LLC-ACCESS; the backend's predictor
/// gives MISPRED.
pub const ATTRS: &[Attr] = &[
    by_type("branch_filter", (4, 0), &["br", "brnt"]),
    by_type(
        "load_filter",
        (4, 0),
        &["ldgp", "ldsimd", "ldvec", "atomic"],
    ),
    by_type(
        "store_filter",
        (4, 0),
        &["stgp", "stsimd", "stvec", "atomic"],
    ),
    // Scalar SIMD&FP loads and stores are FP, vector-structure ones SIMD
    // (SPESampleSIMDFPLoadStore()); QEMU classifies scalar FP data
    // processing as FP, Advanced SIMD as SIMD (unpredictable.rs).
    by_type("simd_filter", (6, 18), &["ldvec", "stvec", "simdother"]),
    by_type("float_filter", (6, 18), &["ldsimd", "stsimd", "fpother"]),
    // branch_filter=1,branch_filter_mask=1: B required.
    by_type("branch_filter_mask", (6, 18), &["br", "brnt"]),
    // load and SIMD both required.
    by_type("load_filter_mask", (6, 18), &["ldvec"]),
    // load_filter=1,store_filter_mask=1: a load that is not a store.
    by_type("store_filter_mask", (6, 18), &["ldgp", "ldsimd", "ldvec"]),
    // load_filter=1,simd_filter_mask=1: a load that is not SIMD.
    by_type("simd_filter_mask", (6, 18), &["ldgp", "ldsimd", "atomic"]),
    // store and FP both required.
    by_type("float_filter_mask", (6, 18), &["stsimd"]),
    // event_filter=0x8: L1D-REFILL required.
    Attr {
        name: "event_filter",
        since: (4, 0),
        keeps: LDST,
        shows: &[],
        event: Some(("evrefill", true)),
    },
    // inv_event_filter=0x8: L1D-REFILL excluded.
    Attr {
        name: "inv_event_filter",
        since: (6, 3),
        keeps: &CLASSES,
        shows: &CLASSES,
        event: Some(("evrefill", false)),
    },
    // event_filter=0x4: L1D-ACCESS required. Drivers before 6.18 take
    // PMSEVFR_EL1's valid bits from the SPE version (bits 2, 4 and 6 are
    // RES0 before FEAT_SPEv1p4 there) and refuse it; 6.18 reads the
    // register back after writing all-ones.
    Attr {
        name: "event_filter_l1d",
        since: (6, 18),
        keeps: LDST,
        shows: LDST,
        event: Some(("evl1d", true)),
    },
    // inv_event_filter=0x4: L1D-ACCESS excluded.
    Attr {
        name: "inv_event_filter_l1d",
        since: (6, 18),
        keeps: &["br", "brnt", "other", "fpother", "simdother"],
        shows: &["br", "brnt", "other", "fpother", "simdother"],
        event: Some(("evl1d", false)),
    },
    // event_filter=0x40: NOT-TAKEN required.
    by_type("event_filter_not_taken", (6, 18), &["brnt"]),
    // branch_filter=1,inv_event_filter=0x40: branches without NOT-TAKEN.
    by_type("inv_event_filter_not_taken", (6, 18), &["br"]),
    // inv_data_src_filter=0x1: PMSFCR_EL1.FDS with PMSDSFR_EL1 = ~1, so
    // loads with data source 0 (L1D, unpredictable.rs) are removed and
    // the rest kept: loads from further away (the GP load that walks the
    // workload's 4 MiB array, from the system cache), stores, branches.
    Attr {
        name: "inv_data_src_filter",
        since: (6, 19),
        keeps: &CLASSES,
        shows: &[
            "ldgp",
            "stgp",
            "stsimd",
            "stvec",
            "br",
            "brnt",
            "other",
            "fpother",
            "simdother",
        ],
        event: Some(("dsl1", false)),
    },
    // event_filter=0x80: MISPRED required (the backend's predictor,
    // unpredictable.rs, misses the workload's data-dependent tbz either
    // way).
    Attr {
        name: "event_filter_mispred",
        since: (4, 0),
        keeps: &["br", "brnt"],
        shows: &["br", "brnt"],
        event: Some(("evmispred", true)),
    },
    // event_filter=0x800: ALIGNMENT required: the workload's load across
    // a cache line (unpredictable.rs), and any other load or store of the
    // process that crosses one (the C library's copies).
    Attr {
        name: "event_filter_alignment",
        since: (4, 0),
        keeps: LDST,
        shows: &["ldgp"],
        event: Some(("evalign", true)),
    },
    // event_filter=0x100: LLC-ACCESS required: loads and stores that
    // missed L2 (one in 64, so no class surely shows). Bit 8 is RES0
    // before FEAT_SPEv1p4 in the older drivers' version-based mask.
    Attr {
        name: "event_filter_llc",
        since: (6, 18),
        keeps: LDST,
        shows: &[],
        event: Some(("evllc", true)),
    },
    // branch_filter=1,inv_event_filter=0x80: branches, none mispredicted.
    Attr {
        name: "inv_event_filter_mispred",
        since: (6, 3),
        keeps: &["br", "brnt"],
        shows: &["br", "brnt"],
        event: Some(("evmispred", false)),
    },
];

/// The kernel (major, minor) whose driver first has `discard`.
const DISCARD_SINCE: (u32, u32) = (6, 14);

/// [`ATTRS`] and the lists the judge needs, as the guest's judge reads
/// them (`scenarios/lib/attributes.tab`, for `attributes-judge.sh`): one
/// line per attribute, `NAME MAJOR.MINOR KEEPS SHOWS EVENT`, lists comma
/// separated, `-` for none, EVENT as `COUNT:all` or `COUNT:none`.
pub fn table() -> String {
    let list = |l: &[&str]| {
        if l.is_empty() {
            "-".to_string()
        } else {
            l.join(",")
        }
    };
    let mut t = format!(
        "classes {}\nworkload {}\nevents {}\ndiscard {}.{}\n",
        list(&CLASSES),
        list(&WORKLOAD),
        list(&EVENT_COUNTS),
        DISCARD_SINCE.0,
        DISCARD_SINCE.1
    );
    for a in ATTRS {
        let event = match a.event {
            Some((ev, true)) => format!("{ev}:all"),
            Some((ev, false)) => format!("{ev}:none"),
            None => "-".into(),
        };
        t.push_str(&format!(
            "{} {}.{} {} {} {event}\n",
            a.name,
            a.since.0,
            a.since.1,
            list(a.keeps),
            list(a.shows)
        ));
    }
    t
}

/// The kernel (major, minor) whose driver first has `name` (an
/// attribute of [`ATTRS`]).
pub fn since(name: &str) -> Option<(u32, u32)> {
    ATTRS.iter().find(|a| a.name == name).map(|a| a.since)
}

/// Every attribute the kernel's driver has kept exactly its classes, the
/// unfiltered control had all of them, and discard=1 wrote nothing.
pub fn check(out: &RunOutput) -> Result<(), String> {
    let kernel = out.kernel_line().ok_or("no kernel= result")?;
    let j = Judge::new(out);
    let count = |run: &str, class: &str| j.num(&format!("attr_{run}_{class}"));
    for c in WORKLOAD {
        j.check(count("none", c) != Some(0), || {
            format!("control: no {c} records without a filter")
        });
    }
    // Each event filter this kernel's driver runs has records to keep and
    // to remove. (LLC-ACCESS's, from 6.18, rests on long reuse distances
    // the model sees only once its watches have ended: no older kernel
    // needs it.)
    let skipped = |a: &Attr| {
        ["absent", "refused"]
            .iter()
            .any(|why| j.text(&format!("attr_{}_{why}", a.name)).is_some())
    };
    let tested = |ev: &str| {
        ATTRS
            .iter()
            .any(|a| a.event.is_some_and(|(e, _)| e == ev) && !skipped(a))
    };
    let records = count("none", "n");
    for ev in EVENT_COUNTS.into_iter().filter(|ev| tested(ev)) {
        if let (Some(n), Some(records)) = (count("none", ev), records) {
            j.check(n != 0 && n != records, || {
                format!("control: {n} of {records} records with {ev}")
            });
        }
    }
    for a in ATTRS {
        let mut skipped = false;
        for why in ["absent", "refused"] {
            if j.text(&format!("attr_{}_{why}", a.name)).is_some() {
                skipped = true;
                j.check(kernel < a.since, || {
                    format!("{}: {why} by the {}.{} driver", a.name, kernel.0, kernel.1)
                });
            }
        }
        if skipped {
            continue;
        }
        j.check(count(a.name, "bad") == Some(0), || {
            format!("{}: decoder errors", a.name)
        });
        let records = count(a.name, "n");
        j.check(records != Some(0), || format!("{}: no records", a.name));
        for c in CLASSES {
            let Some(n) = count(a.name, c) else { continue };
            let kept = a.keeps.contains(&c);
            j.check(kept || n == 0, || format!("{}: {n} {c} records", a.name));
            j.check(
                !(a.shows.contains(&c) && WORKLOAD.contains(&c) && n == 0),
                || format!("{}: no {c} records", a.name),
            );
        }
        if let (Some((ev, all)), Some(records)) = (a.event, records) {
            if let Some(n) = count(a.name, ev) {
                let want = if all { records } else { 0 };
                j.check(n == want, || {
                    format!(
                        "{}: {n} of {records} records with {ev}, want {want}",
                        a.name
                    )
                });
            }
        }
    }
    if j.text("attr_discard_absent").is_some() {
        j.check(kernel < DISCARD_SINCE, || "discard: absent".into());
    } else {
        if let (Some(aux), Some(irqs)) = (count("discard", "aux_records"), count("discard", "irqs"))
        {
            j.check(aux == 0 && irqs == 0, || {
                format!("discard: {aux} AUX records, {irqs} PMBIRQs")
            });
        }
        // Only PMBLIMITR_EL1.FM = 0b10 makes the backend discard.
        if let Some(discarded) = j.stat(|s| s.discarded) {
            j.check(discarded > 0, || {
                "discard: the backend discarded no record (FM = 0b10 never seen)".into()
            });
        }
    }
    j.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Control;
    use spe_protocol::control::Stats;

    /// A run of the 7.3 driver where every filter kept its classes.
    fn good() -> RunOutput {
        let mut results = vec![("kernel".to_string(), "7.3.4+deb13-arm64".to_string())];
        let mut put = |run: &str, keeps: &[&str], event: Option<(&str, bool)>| {
            let mut total = 0;
            for c in CLASSES {
                let n = if keeps.contains(&c) { 10 } else { 0 };
                total += n;
                results.push((format!("attr_{run}_{c}"), n.to_string()));
            }
            results.push((format!("attr_{run}_bad"), "0".into()));
            results.push((format!("attr_{run}_n"), total.to_string()));
            for ev in EVENT_COUNTS {
                let n = match event {
                    Some((e, true)) if e == ev => total,
                    Some((e, false)) if e == ev => 0,
                    _ => 5,
                };
                results.push((format!("attr_{run}_{ev}"), n.to_string()));
            }
        };
        put("none", &CLASSES, None);
        for a in ATTRS {
            put(a.name, a.keeps, a.event);
        }
        results.push(("attr_discard_aux_records".into(), "0".into()));
        results.push(("attr_discard_irqs".into(), "0".into()));
        RunOutput {
            results,
            control: Control::with_stats(&[Stats {
                records: 5,
                discarded: 4,
                ..Stats::default()
            }]),
            ..RunOutput::from_line("")
        }
    }

    fn set(out: &mut RunOutput, key: &str, value: &str) {
        out.results.retain(|(k, _)| k != key);
        out.results.push((key.into(), value.into()));
    }

    /// The guest's judge (`attributes-judge.sh`, for LAVA) on `out`'s
    /// results, with the table [`table`] writes.
    fn guest_judge(out: &RunOutput) -> Result<(), String> {
        let dir = std::env::temp_dir().join(format!(
            "xtask-attr-judge-{}-{:?}",
            std::process::id(),
            std::thread::current().id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("tab"), table()).unwrap();
        let lines: String = out
            .results
            .iter()
            .map(|(k, v)| format!("{k}={v}\n"))
            .collect();
        std::fs::write(dir.join("results"), lines).unwrap();
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../guest/scenarios/lib/attributes-judge.sh"
        );
        let o = std::process::Command::new("sh")
            .arg(script)
            .arg(dir.join("tab"))
            .arg(dir.join("results"))
            .arg(out.result("kernel").unwrap_or(""))
            .output()
            .unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        let text = String::from_utf8_lossy(&o.stdout).into_owned();
        if o.status.success() {
            assert!(text.is_empty(), "passed, yet printed {text:?}");
            Ok(())
        } else {
            Err(text)
        }
    }

    /// Both judges give `out` the same verdict; the host's.
    fn check_both(out: &RunOutput) -> Result<(), String> {
        let host = check(out);
        let guest = guest_judge(out);
        assert_eq!(
            host.is_ok(),
            guest.is_ok(),
            "host {host:?}, guest {guest:?}"
        );
        host
    }

    #[test]
    fn each_filter_must_keep_exactly_its_classes() {
        assert_eq!(check_both(&good()), Ok(()));
        for a in ATTRS {
            // A class the filter removes leaks in...
            if let Some(leak) = CLASSES.iter().find(|c| !a.keeps.contains(c)) {
                let mut out = good();
                set(&mut out, &format!("attr_{}_{leak}", a.name), "1");
                assert!(check_both(&out).is_err(), "{} let {leak} through", a.name);
            }
            // ...or one it keeps is missing...
            for c in a.shows.iter().filter(|c| WORKLOAD.contains(c)) {
                let mut out = good();
                set(&mut out, &format!("attr_{}_{c}", a.name), "0");
                assert!(check_both(&out).is_err(), "{} lost {c}", a.name);
            }
            // ...or a record has (lacks) the event it filters on.
            if let Some((ev, all)) = a.event {
                let mut out = good();
                set(
                    &mut out,
                    &format!("attr_{}_{ev}", a.name),
                    if all { "1" } else { "2" },
                );
                assert!(check_both(&out).is_err(), "{} {ev}", a.name);
            }
        }
    }

    #[test]
    fn the_control_and_discard_can_fail() {
        let mut out = good();
        set(&mut out, "attr_none_ldsimd", "0");
        assert!(check_both(&out).is_err());
        let mut out = good();
        set(&mut out, "attr_none_evrefill", "0");
        assert!(check_both(&out).is_err());
        let mut out = good();
        set(&mut out, "attr_discard_aux_records", "3");
        assert!(check_both(&out).is_err());
        let mut out = good();
        out.control = Control::with_stats(&[Stats {
            records: 5,
            discarded: 0,
            ..Stats::default()
        }]);
        assert!(check(&out).unwrap_err().contains("discarded no record"));
        out.control = Control::default();
        assert!(check(&out).unwrap_err().contains("no query-spu answer"));
    }

    /// An event's control holds where a filter on that event runs: not
    /// for LLC-ACCESS on a driver that refuses its filter.
    #[test]
    fn an_events_control_holds_where_its_filter_runs() {
        let mut out = good();
        set(&mut out, "attr_none_evllc", "0");
        assert!(check_both(&out).is_err(), "7.3 runs event_filter_llc");
        set(&mut out, "kernel", "6.12.117+deb13-arm64");
        out.results
            .push(("attr_event_filter_llc_refused".into(), "1".into()));
        for a in ATTRS.iter().filter(|a| a.since > (6, 12)) {
            out.results
                .push((format!("attr_{}_absent", a.name), a.name.into()));
        }
        out.results
            .push(("attr_discard_absent".into(), "discard".into()));
        assert_eq!(check_both(&out), Ok(()));
        // The others still hold there.
        set(&mut out, "attr_none_evrefill", "0");
        assert!(check_both(&out).is_err());
    }

    #[test]
    fn absent_attributes_only_on_older_drivers() {
        let mut out = good();
        out.results
            .push(("attr_simd_filter_absent".into(), "simd_filter".into()));
        assert!(check_both(&out).is_err(), "7.3 has simd_filter");
        set(&mut out, "kernel", "6.1.0-56-arm64");
        out.results
            .push(("attr_discard_absent".into(), "discard".into()));
        assert_eq!(check_both(&out), Ok(()));
        set(&mut out, "attr_event_filter_l1d_refused", "1");
        assert_eq!(check_both(&out), Ok(()));
        set(&mut out, "attr_load_filter_absent", "load_filter");
        assert!(check_both(&out).is_err(), "6.1 has load_filter");
        let mut out = good();
        set(&mut out, "attr_event_filter_l1d_refused", "1");
        assert!(check_both(&out).is_err(), "7.3 takes NOT-TAKEN");
    }
}
