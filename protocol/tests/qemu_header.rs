//! `qemu-patches/` copies the QEMU channel's constants into C by hand
//! (`target/arm/spe-channel.h` and `spe-channel.c`): this checks every one,
//! in the series of each QEMU release (`qemu-patches/<version>/`), against
//! the Rust definitions, so a protocol change that misses the QEMU side, or
//! one of its series, fails here rather than in a booted guest.
//!
//! The C side is read from the series' added lines, the last definition of
//! each name winning (a later patch that changes a value adds its line
//! again).

use std::collections::BTreeMap;
use std::path::Path;

use spe_protocol::channel::{self, feature, ring, MsgType};
use spe_protocol::regs::AccessOutcome;

/// The files whose constants mirror the protocol.
const FILES: &[&str] = &["target/arm/spe-channel.h", "target/arm/spe-channel.c"];

/// `#define` and enum constants added by `patches`, in order, last wins.
fn c_constants(patches: &[String]) -> BTreeMap<String, u64> {
    let mut defs = BTreeMap::new();
    for text in patches {
        let mut file = "";
        for line in text.lines() {
            if let Some(f) = line.strip_prefix("+++ b/") {
                file = f;
                continue;
            }
            let Some(added) = line.strip_prefix('+') else {
                continue;
            };
            if !FILES.contains(&file) {
                continue;
            }
            let (name, expr) = if let Some(d) = added.strip_prefix("#define ") {
                let d = d.split("/*").next().unwrap_or("").trim();
                match d.split_once(char::is_whitespace) {
                    Some((n, e)) if !n.contains('(') => (n.to_string(), e.trim().to_string()),
                    _ => continue,
                }
            } else if let Some((n, e)) = added.trim().trim_end_matches(',').split_once(" = ") {
                if !n.starts_with("SPE_") || n.contains(' ') {
                    continue;
                }
                (n.to_string(), e.to_string())
            } else {
                continue;
            };
            if let Some(v) = eval(&expr, &defs) {
                defs.insert(name, v);
            }
        }
    }
    defs
}

/// Evaluates a constant expression of the forms the series uses: integers
/// with C suffixes, names defined before, `( )`, `*`, `+` and `<<`.
fn eval(expr: &str, defs: &BTreeMap<String, u64>) -> Option<u64> {
    let mut toks = Vec::new();
    let mut rest = expr.trim();
    while !rest.is_empty() {
        let c = rest.chars().next()?;
        if c.is_whitespace() {
            rest = rest.trim_start();
        } else if rest.starts_with("<<") {
            toks.push("<<".to_string());
            rest = &rest[2..];
        } else if "()+*".contains(c) {
            toks.push(c.to_string());
            rest = &rest[1..];
        } else {
            let n = rest
                .find(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_'))
                .unwrap_or(rest.len());
            if n == 0 {
                return None;
            }
            toks.push(rest[..n].to_string());
            rest = &rest[n..];
        }
    }
    let mut p = Parser { toks, at: 0, defs };
    let v = p.shift()?;
    (p.at == p.toks.len()).then_some(v)
}

struct Parser<'a> {
    toks: Vec<String>,
    at: usize,
    defs: &'a BTreeMap<String, u64>,
}

impl Parser<'_> {
    fn eat(&mut self, t: &str) -> bool {
        let hit = self.toks.get(self.at).is_some_and(|x| x == t);
        self.at += usize::from(hit);
        hit
    }
    fn shift(&mut self) -> Option<u64> {
        let mut v = self.add()?;
        while self.eat("<<") {
            v = v.checked_shl(u32::try_from(self.add()?).ok()?)?;
        }
        Some(v)
    }
    fn add(&mut self) -> Option<u64> {
        let mut v = self.mul()?;
        while self.eat("+") {
            v = v.checked_add(self.mul()?)?;
        }
        Some(v)
    }
    fn mul(&mut self) -> Option<u64> {
        let mut v = self.atom()?;
        while self.eat("*") {
            v = v.checked_mul(self.atom()?)?;
        }
        Some(v)
    }
    fn atom(&mut self) -> Option<u64> {
        if self.eat("(") {
            let v = self.shift()?;
            return self.eat(")").then_some(v);
        }
        let t = self.toks.get(self.at)?.clone();
        self.at += 1;
        if t.starts_with(|c: char| c.is_ascii_digit()) {
            let digits = t.trim_end_matches(['u', 'U', 'l', 'L']);
            return match digits.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16).ok(),
                None => digits.parse().ok(),
            };
        }
        self.defs.get(&t).copied()
    }
}

/// What each C name must be.
fn expected() -> Vec<(String, u64)> {
    let mut e: Vec<(String, u64)> = [
        ("SPE_MAGIC", u64::from(channel::MAGIC)),
        ("SPE_RING_MAGIC", u64::from(ring::MAGIC)),
        ("SPE_VERSION", u64::from(channel::VERSION)),
        ("SPE_REPLY", u64::from(channel::REPLY)),
        ("SPE_ALL_VCPUS", u64::from(channel::ALL_VCPUS)),
        ("SPE_HEADER_SIZE", channel::Header::SIZE as u64),
        ("SPE_MAX_PAYLOAD", u64::from(channel::MAX_PAYLOAD)),
        ("SPE_MAX_REGIONS", channel::MAX_REGIONS as u64),
        ("SPE_CONTEXT_SIZE", channel::CONTEXT_SIZE as u64),
        ("SPE_HELLO_REPLY_SIZE", channel::HelloReply::SIZE as u64),
        ("SPE_STATUS_SIZE", channel::Status::SIZE as u64),
        ("SPE_STATUS_BAD_CPU", u64::from(channel::Status::BAD_CPU)),
        ("SPE_SYSREG_SIZE", channel::SysregAccess::SIZE as u64),
        ("SPE_SYSREG_REPLY_SIZE", channel::SysregReply::SIZE as u64),
        ("SPE_TRANSLATION_REGS", channel::TRANSLATION_SIZE as u64 / 8),
        ("SPE_RING_HEADER_SIZE", ring::HEADER_SIZE as u64),
        ("SPE_RING_IRQ_ENTRY_SIZE", ring::IRQ_ENTRY_SIZE as u64),
        ("SPE_RING_SLOT_SIZE", ring::SLOT_SIZE as u64),
        ("SPE_IRQ_STATE_SEQ", ring::IRQ_STATE_SEQ as u64),
        ("SPE_IRQ_STATE", ring::IRQ_STATE as u64),
        ("SPE_STATE_RND", u64::from(ring::flags::RND)),
        ("SPE_STATE_UOPS", u64::from(ring::flags::UOPS)),
        ("SPE_STATE_SYNC", u64::from(ring::flags::SYNC)),
        ("SPE_RING_PRODUCER", ring::PRODUCER_OFFSET as u64),
        ("SPE_RING_OPS_COUNTED", ring::OPS_COUNTED_OFFSET as u64),
        ("SPE_RING_COUNT_NOW", ring::COUNT_NOW_OFFSET as u64),
        ("SPE_RING_COUNT_NOW_VALID", ring::COUNT_NOW_VALID),
        ("SPE_RING_CONSUMER", ring::CONSUMER_OFFSET as u64),
        ("SPE_RING_CONTROL_SIZE", ring::CONTROL_SIZE as u64),
        ("SPE_OUTCOME_OK", AccessOutcome::Ok as u64),
        ("SPE_OUTCOME_UNDEFINED", AccessOutcome::Undefined as u64),
        ("SPE_OUTCOME_TRAP_EL2", AccessOutcome::TrapToEl2 as u64),
        ("SPE_OUTCOME_TRAP_EL3", AccessOutcome::TrapToEl3 as u64),
        ("SPE_FEATURE_PMU_SS", feature::PMU_SS),
        ("SPE_FEATURE_PMU_ICNTR", feature::PMU_ICNTR),
        ("SPE_FEATURE_SPE_EXC", feature::SPE_EXC),
        ("SPE_FEATURE_SPE_NVM", feature::SPE_NVM),
        ("SPE_FEATURE_SAMPLING_STATE", feature::SAMPLING_STATE),
        ("SPE_FEATURE_RESTORE", feature::RESTORE),
    ]
    .into_iter()
    .map(|(n, v)| (n.to_string(), v))
    .collect();
    for t in (1..=u16::MAX).map_while(MsgType::from_u16) {
        let name = format!("{t:?}")
            .chars()
            .flat_map(|c| {
                let sep = c.is_ascii_uppercase().then_some('_');
                sep.into_iter().chain([c.to_ascii_uppercase()])
            })
            .collect::<String>();
        e.push((format!("SPE_MSG{name}"), t as u64));
    }
    e
}

/// Every mismatch between the C constants and the protocol: a wrong value,
/// a missing name, or a message type or feature bit only one side has.
fn mismatches(c: &BTreeMap<String, u64>) -> Vec<String> {
    let want = expected();
    let mut errs = Vec::new();
    for (name, v) in &want {
        match c.get(name) {
            Some(got) if got == v => {}
            Some(got) => errs.push(format!("{name} is {got:#x} in C, {v:#x} in spe-protocol")),
            None => errs.push(format!("{name} ({v:#x}) is not defined in C")),
        }
    }
    for name in c.keys() {
        let listed = want.iter().any(|(n, _)| n == name);
        if (name.starts_with("SPE_MSG_") || name.starts_with("SPE_FEATURE_")) && !listed {
            errs.push(format!("{name} is defined in C only"));
        }
    }
    errs
}

/// The folders of `qemu-patches/`, one per QEMU release.
fn releases() -> Vec<std::path::PathBuf> {
    let top = Path::new(env!("CARGO_MANIFEST_DIR")).join("../qemu-patches");
    let mut dirs: Vec<_> = std::fs::read_dir(&top)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

fn series(dir: &Path) -> Vec<String> {
    let mut files: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "patch"))
        .collect();
    files.sort();
    files
        .iter()
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect()
}

#[test]
fn each_qemu_series_uses_the_protocol_constants() {
    let dirs = releases();
    assert!(!dirs.is_empty(), "a series folder: {dirs:?}");
    for dir in &dirs {
        let c = c_constants(&series(dir));
        let at = dir.display();
        assert!(c.len() > 40, "{at}: only {} constants read: {c:?}", c.len());
        let errs = mismatches(&c);
        assert!(errs.is_empty(), "{at}:\n{}", errs.join("\n"));
        // The C restore buffer fits a message.
        assert!(c["SPE_RESTORE_MAX"] as usize <= channel::Restore::MAX_ENTRIES);
    }
}

#[test]
fn a_changed_or_missing_constant_is_caught() {
    let mut patches = series(&releases()[0]);
    let last = patches.last_mut().unwrap();
    // A later patch moving a value, as a stale copy would.
    last.push_str("+++ b/target/arm/spe-channel.h\n+    SPE_MSG_RESTORE = 11,\n+#define SPE_STATE_SYNC (1 << 4)\n+#define SPE_FEATURE_NEW (1ULL << 9)\n");
    let errs = mismatches(&c_constants(&patches));
    assert_eq!(errs.len(), 3, "{errs:#?}");
    assert!(errs[0].contains("SPE_STATE_SYNC is 0x10"), "{errs:#?}");
    assert!(errs[1].contains("SPE_MSG_RESTORE is 0xb"), "{errs:#?}");
    assert!(
        errs[2].contains("SPE_FEATURE_NEW is defined in C only"),
        "{errs:#?}"
    );
    let none = c_constants(&[]);
    assert!(mismatches(&none).len() >= expected().len());
}

#[test]
fn expressions_evaluate_as_c_does() {
    let mut d = BTreeMap::new();
    d.insert("SPE_CONTEXT_SIZE".to_string(), 56);
    assert_eq!(eval("(16 + SPE_CONTEXT_SIZE)", &d), Some(72));
    assert_eq!(eval("(1ull << 63)", &d), Some(1 << 63));
    assert_eq!(eval("0x31455053u", &d), Some(0x3145_5053));
    assert_eq!(eval("(50 * SCALE_US)", &d), None);
    assert_eq!(eval("2 + 3 << 1", &d), Some(10));
}
