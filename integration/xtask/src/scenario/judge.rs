//! [`Judge`]: the one way a check reads a run.

use super::{LinuxCaps, RunOutput};
use spe_protocol::control::Stats;
use std::cell::RefCell;

thread_local! {
    /// The expected outcomes the last checks on this thread reported; the
    /// scenario runner takes them after each check for its summary.
    static EXPECTED: RefCell<Vec<Expected>> = const { RefCell::new(Vec::new()) };
}

/// A part of a run that did not pass, as expected, for a reason the check
/// verified: reported in the summary, not hidden in a note.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expected {
    /// XFAIL: failed; its check turns a pass into an error, so the
    /// expectation goes once it passes.
    Fail(String),
    /// SKIP: the test did not run, for the reason given.
    Skip(String),
}

/// The expected outcomes reported since the last call, on this thread.
pub fn take_expected() -> Vec<Expected> {
    EXPECTED.with(|e| std::mem::take(&mut *e.borrow_mut()))
}

/// Reads a run's `SPE-RESULT` values and the backend's statistics, and
/// collects what is wrong with them. A missing or malformed value is a
/// failure too, and reading goes on, so one run reports everything wrong
/// with it; [`Judge::finish`] gives the verdict.
pub struct Judge<'a> {
    out: &'a RunOutput,
    errs: RefCell<Vec<String>>,
}

impl<'a> Judge<'a> {
    pub fn new(out: &'a RunOutput) -> Self {
        Judge {
            out,
            errs: RefCell::new(Vec::new()),
        }
    }

    /// The run, for what is not a result (its logs, its folder).
    pub fn out(&self) -> &'a RunOutput {
        self.out
    }

    /// A failure.
    pub fn fail(&self, why: impl Into<String>) {
        self.errs.borrow_mut().push(why.into());
    }

    /// A failure unless `ok`.
    pub fn check(&self, ok: bool, why: impl FnOnce() -> String) {
        if !ok {
            self.fail(why());
        }
    }

    /// An expected failure or skip, its reason already verified.
    pub fn expected(&self, e: Expected) {
        EXPECTED.with(|x| x.borrow_mut().push(e));
    }

    /// Another check's failures, as this one's.
    pub fn include(&self, r: Result<(), String>) {
        if let Err(e) = r {
            self.fail(e);
        }
    }

    /// The result `key` as the guest printed it; missing is no failure.
    pub fn text(&self, key: &str) -> Option<&'a str> {
        self.out.result(key)
    }

    /// The result `key` must be `want`.
    pub fn is(&self, key: &str, want: &str) {
        let got = self.text(key);
        self.check(got == Some(want), || format!("{key}={got:?}, want {want}"));
    }

    /// The result `key` as an integer: decimal, or hexadecimal after `0x`.
    pub fn num(&self, key: &str) -> Option<u64> {
        let v = self.text(key);
        let n = v.and_then(|v| match v.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16).ok(),
            None => v.parse().ok(),
        });
        self.check(n.is_some(), || {
            format!("guest result {key}={v:?} is not a number")
        });
        n
    }

    /// The result `key` as hexadecimal, with or without `0x`.
    pub fn hex(&self, key: &str) -> Option<u64> {
        let v = self.text(key);
        let n = v.and_then(|v| u64::from_str_radix(v.trim_start_matches("0x"), 16).ok());
        self.check(n.is_some(), || {
            format!("guest result {key}={v:?} is not hex")
        });
        n
    }

    /// [`Judge::num`], which must satisfy `ok`; `why` says what is wrong
    /// with a value that does not.
    pub fn require(
        &self,
        key: &str,
        ok: impl FnOnce(u64) -> bool,
        why: impl FnOnce(u64) -> String,
    ) -> Option<u64> {
        let n = self.num(key)?;
        if !ok(n) {
            self.fail(why(n));
        }
        Some(n)
    }

    /// The result `key` as a number (NaN, which fails every comparison,
    /// when it is not one).
    pub fn float(&self, key: &str) -> f64 {
        let v = self.text(key);
        match v.and_then(|v| v.parse::<f64>().ok()) {
            Some(n) => n,
            None => {
                self.fail(format!("guest result {key}={v:?} is not a number"));
                f64::NAN
            }
        }
    }

    /// The result `key` must satisfy `ok`, which `want` describes; returns
    /// its value.
    pub fn want(&self, key: &str, want: &str, ok: impl Fn(f64) -> bool) -> f64 {
        let v = self.float(key);
        if !v.is_nan() && !ok(v) {
            self.fail(format!("{key}={v}, want {want}"));
        }
        v
    }

    pub fn zero(&self, keys: &[&str]) {
        for k in keys {
            self.want(k, "0", |v| v == 0.0);
        }
    }

    pub fn positive(&self, keys: &[&str]) {
        for k in keys {
            self.want(k, "> 0", |v| v > 0.0);
        }
    }

    /// A statistic of the backend summed over its vCPUs (`|s| s.records`),
    /// from `query-spu` once the guest had powered off.
    pub fn stat(&self, stat: impl Fn(&Stats) -> u64) -> Option<u64> {
        self.out
            .control
            .total(stat)
            .map_err(|e| self.fail(format!("backend statistics: {e}")))
            .ok()
    }

    /// What the guest's SPE driver must show in `caps/` for the
    /// PMSIDR_EL1 the backend advertised (`query-spu`, vCPU 0).
    pub fn backend_caps(&self) -> Option<LinuxCaps> {
        let spus = self.out.control.spus();
        match spus.as_ref().map(|s| s.first()) {
            Ok(Some(v)) => Some(LinuxCaps::of_pmsidr(v.registers.pmsidr_el1.0)),
            Ok(None) => {
                self.fail("backend: query-spu answered no vCPU");
                None
            }
            Err(e) => {
                self.fail(format!("backend: {e}"));
                None
            }
        }
    }

    pub fn finish(self) -> Result<(), String> {
        let errs = self.errs.into_inner();
        if errs.is_empty() {
            Ok(())
        } else {
            Err(errs.join("; "))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::Control;

    #[test]
    fn every_reader_collects_its_failure_and_goes_on() {
        let out = RunOutput {
            control: Control::with_stats(&[Stats {
                records: 3,
                ..Stats::default()
            }]),
            ..RunOutput::from_line("a=12 h=0x1f x=ab s=yes")
        };
        let j = Judge::new(&out);
        assert_eq!(j.num("a"), Some(12));
        assert_eq!(j.num("h"), Some(0x1f));
        assert_eq!(j.hex("x"), Some(0xab));
        assert_eq!(j.float("a"), 12.0);
        assert_eq!(j.stat(|s| s.records), Some(3));
        j.is("s", "yes");
        j.zero(&[]);
        j.positive(&["a"]);
        assert_eq!(j.require("a", |n| n == 12, |n| format!("{n}")), Some(12));
        assert_eq!(j.finish(), Ok(()));

        let j = Judge::new(&out);
        assert_eq!(j.num("x"), None);
        assert_eq!(j.num("missing"), None);
        assert!(j.float("s").is_nan());
        assert!(j.want("s", "> 0", |v| v > 0.0).is_nan());
        j.zero(&["a"]);
        j.is("s", "no");
        assert_eq!(
            j.require("a", |n| n == 0, |n| format!("a is {n}")),
            Some(12)
        );
        j.check(false, || "checked".into());
        j.include(Err("included".into()));
        let e = j.finish().unwrap_err();
        for part in [
            "x=Some(\"ab\") is not a number",
            "missing=None",
            "s=Some(\"yes\") is not a number",
            "a=12, want 0",
            "s=Some(\"yes\"), want no",
            "a is 12",
            "checked",
            "included",
        ] {
            assert!(e.contains(part), "{part}: {e}");
        }

        let none = RunOutput::from_line("");
        let j = Judge::new(&none);
        assert_eq!(j.stat(|s| s.bytes), None);
        assert_eq!(j.backend_caps(), None);
        let e = j.finish().unwrap_err();
        assert!(e.contains("backend statistics: no query-spu answer"), "{e}");
    }
}
