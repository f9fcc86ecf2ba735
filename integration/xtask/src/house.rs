//! The house's shape, held by a test: a README a newcomer reads through,
//! source files short enough to review, no tracker numbers in the code
//! (the tracker is not shipped with it) and a changelog in the form its
//! readers expect.

use std::path::{Path, PathBuf};
use std::process::Command;

/// README.md's longest.
const README_LINES: usize = 200;
/// A source file's longest, before its unit tests.
const SOURCE_LINES: usize = 850;
const SOURCE: &[&str] = &["rs", "c", "h"];
/// Files where a code line may name a tracker number: none of these.
const CODE: &[&str] = &["rs", "c", "h", "sh", "py"];
/// Keep a Changelog 1.1.0's change types.
const CHANGE_TYPES: &[&str] = &[
    "Added",
    "Changed",
    "Deprecated",
    "Removed",
    "Fixed",
    "Security",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The repository's tracked files (what a clone has).
fn tracked() -> Vec<PathBuf> {
    let out = Command::new("git")
        .current_dir(repo())
        .args(["ls-files", "-z"])
        .output()
        .expect("git ls-files");
    assert!(out.status.success(), "git ls-files failed");
    out.stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| PathBuf::from(String::from_utf8_lossy(p).into_owned()))
        .collect()
}

fn with_extension<'a>(files: &'a [PathBuf], exts: &'a [&str]) -> impl Iterator<Item = &'a PathBuf> {
    files.iter().filter(|p| {
        p.extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| exts.contains(&e))
    })
}

/// Lines before a file's unit tests: all of them for a file without any,
/// none for a file that is tests (`tests/`, `tests.rs`).
fn lines_before_tests(path: &Path, text: &str) -> usize {
    let is_tests = path.components().any(|c| c.as_os_str() == "tests")
        || path.file_stem().is_some_and(|s| s == "tests");
    if is_tests {
        return 0;
    }
    text.lines()
        .position(|l| l.starts_with("#[cfg(test)]"))
        .unwrap_or_else(|| text.lines().count())
}

/// A tracker number in a line: "issue", "issue #" or "issues/" and a
/// number.
fn names_a_tracker_number(line: &str) -> bool {
    let l = line.to_ascii_lowercase();
    ["issue ", "issue #", "issues/", "issue#"].iter().any(|p| {
        l.match_indices(p).any(|(i, _)| {
            l[i + p.len()..]
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_digit())
        })
    })
}

/// What is wrong with a changelog's form, if anything.
fn changelog_faults(text: &str) -> Vec<String> {
    let mut faults = Vec::new();
    if text.lines().next() != Some("# Changelog") {
        faults.push("the first line is not \"# Changelog\"".into());
    }
    if !text.contains("keepachangelog.com") {
        faults.push("it does not say it follows Keep a Changelog".into());
    }
    let mut versions = 0;
    for l in text.lines().skip(1) {
        if let Some(v) = l.strip_prefix("## ") {
            versions += 1;
            let released = v
                .strip_prefix('[')
                .and_then(|v| v.split_once("] - "))
                .is_some_and(|(_, date)| is_date(date));
            if v != "[Unreleased]" && !released {
                faults.push(format!(
                    "{l:?}: not \"## [Unreleased]\" or \"## [x.y.z] - YYYY-MM-DD\""
                ));
            }
        } else if let Some(t) = l.strip_prefix("### ") {
            if !CHANGE_TYPES.contains(&t) {
                faults.push(format!("{l:?}: not one of {}", CHANGE_TYPES.join(", ")));
            }
        } else if l.starts_with('#') {
            faults.push(format!("{l:?}: a heading Keep a Changelog has not"));
        }
    }
    if versions == 0 {
        faults.push("no version section".into());
    }
    faults
}

fn is_date(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() == 10
        && b.iter().enumerate().all(|(i, c)| match i {
            4 | 7 => *c == b'-',
            _ => c.is_ascii_digit(),
        })
}

#[test]
fn readme_is_a_short_guide() {
    let text = std::fs::read_to_string(repo().join("README.md")).unwrap();
    let n = text.lines().count();
    assert!(
        n <= README_LINES,
        "README.md has {n} lines, at most {README_LINES}"
    );
}

#[test]
fn no_source_file_is_too_long() {
    let files = tracked();
    let long: Vec<String> = with_extension(&files, SOURCE)
        .filter_map(|p| {
            let text = std::fs::read_to_string(repo().join(p)).ok()?;
            let n = lines_before_tests(p, &text);
            (n > SOURCE_LINES).then(|| format!("{} ({n} lines)", p.display()))
        })
        .collect();
    assert!(
        long.is_empty(),
        "over {SOURCE_LINES} lines before their tests: {}",
        long.join(", ")
    );
}

#[test]
fn no_code_names_a_tracker_number() {
    let files = tracked();
    let mut found = Vec::new();
    for p in with_extension(&files, CODE) {
        let Ok(text) = std::fs::read_to_string(repo().join(p)) else {
            continue;
        };
        for (i, l) in text.lines().enumerate() {
            if names_a_tracker_number(l) {
                found.push(format!("{}:{}: {}", p.display(), i + 1, l.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "tracker numbers in code:\n{}",
        found.join("\n")
    );
}

#[test]
fn changelog_keeps_a_changelog() {
    let text = std::fs::read_to_string(repo().join("CHANGELOG.md")).unwrap();
    let faults = changelog_faults(&text);
    assert!(faults.is_empty(), "CHANGELOG.md: {}", faults.join("; "));
}

#[test]
fn the_checks_catch_what_they_look_for() {
    // Made at run time, or this file would name one.
    assert!(names_a_tracker_number(&format!("// see issue {}", 52)));
    assert!(names_a_tracker_number(&format!("# Issue #{} for why", 7)));
    assert!(!names_a_tracker_number("an issue with 2 vCPUs"));
    assert_eq!(
        lines_before_tests(Path::new("a/b.rs"), "x\ny\n#[cfg(test)]\nmod tests {}\n"),
        2
    );
    assert_eq!(lines_before_tests(Path::new("a/tests/b.rs"), "x\ny\n"), 0);
    assert_eq!(lines_before_tests(Path::new("a/b.c"), "x\ny\n"), 2);
    let good = "# Changelog\nkeepachangelog.com\n## [Unreleased]\n### Added\n- x\n\
                ## [0.1.0] - 2026-12-02\n### Fixed\n- y\n";
    assert!(changelog_faults(good).is_empty());
    let bad = "# Changes\n## Next\n### Notes\n";
    assert_eq!(
        changelog_faults(bad).len(),
        4,
        "{:?}",
        changelog_faults(bad)
    );
}
