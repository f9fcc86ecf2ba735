//! The series as a git branch. The set-up's QEMU tree is a repository: a
//! base commit of the release tarball (tag `v<version>`), and the branch
//! [`BRANCH`], the series applied on it with `git am`, whose description
//! is the cover letter. `cargo xtask series-export DIR` writes
//! `qemu-patches/<version>/` back from such a branch with
//! `git format-patch`; [`check_round_trip`] shows that doing so from the
//! set-up's tree gives the committed files byte for byte.

use super::{Paths, QemuRelease};
use crate::util::run;
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The series' branch in a QEMU tree.
pub const BRANCH: &str = "spe";

/// The cover letter's name in `qemu-patches/<version>/`.
pub const COVER: &str = "0000-cover-letter.patch";

/// The tag of the release's base commit.
pub fn base_tag(release: &QemuRelease) -> String {
    format!("v{}", release.version)
}

/// git in `dir` without the user's or the system's configuration, so that
/// every machine writes the same commits and the same patches.
fn git(dir: &Path) -> Command {
    let mut c = Command::new("git");
    c.current_dir(dir)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CEILING_DIRECTORIES", dir.parent().unwrap_or(dir));
    c
}

/// [`git`] committing as the series' sender.
fn git_as(dir: &Path, cover: &Cover) -> Command {
    let mut c = git(dir);
    c.env("GIT_COMMITTER_NAME", &cover.name)
        .env("GIT_COMMITTER_EMAIL", &cover.email);
    c
}

/// What the cover letter holds that the branch does not: who sends the
/// series and when the letter was written (its `From:` and `Date:`),
/// and its subject and blurb (the branch description).
#[derive(Debug, PartialEq, Eq)]
struct Cover {
    name: String,
    email: String,
    date: String,
    subject: String,
    blurb: String,
}

impl Cover {
    fn read(patch_dir: &Path) -> Result<Cover> {
        let p = patch_dir.join(COVER);
        let text = fs::read_to_string(&p).with_context(|| format!("reading {}", p.display()))?;
        Cover::parse(&text)
            .with_context(|| format!("{}: not a format-patch cover letter", p.display()))
    }

    /// `git format-patch --cover-letter`'s layout: mail headers, a blank
    /// line, the blurb, then the shortlog (`Name (N):`) and the diffstat.
    fn parse(text: &str) -> Result<Cover> {
        let (head, body) = text
            .split_once("\n\n")
            .context("no blank line after the headers")?;
        let mut headers: Vec<String> = Vec::new();
        for l in head.lines() {
            match (l.strip_prefix(' '), headers.last_mut()) {
                (Some(cont), Some(last)) => {
                    last.push(' ');
                    last.push_str(cont);
                }
                _ => headers.push(l.to_string()),
            }
        }
        let header = |name: &str| {
            headers
                .iter()
                .find_map(|h| h.strip_prefix(name))
                .map(str::to_string)
                .with_context(|| format!("no {name} header"))
        };
        let from = header("From: ")?;
        let (name, email) = from
            .strip_suffix('>')
            .and_then(|f| f.split_once(" <"))
            .with_context(|| format!("From: {from:?} is not \"Name <email>\""))?;
        let subject = header("Subject: ")?;
        let subject = match subject.strip_prefix('[') {
            Some(rest) => rest.split_once("] ").map_or(subject.as_str(), |(_, s)| s),
            None => &subject,
        }
        .to_string();
        // The shortlog's first line, `Name (N):`; the blurb may hold
        // "Name (" too.
        let shortlog = format!("\n\n{name} (");
        let end = body
            .match_indices(&shortlog)
            .map(|(i, _)| i)
            .filter(|&i| {
                let rest = &body[i + shortlog.len()..];
                let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
                digits > 0 && rest[digits..].starts_with("):\n")
            })
            .last()
            .context("no shortlog after the blurb")?;
        Ok(Cover {
            name: name.to_string(),
            email: email.to_string(),
            date: header("Date: ")?,
            subject,
            blurb: body[..end].to_string(),
        })
    }

    /// The branch description `--cover-from-description=subject` reads.
    fn description(&self) -> String {
        format!("{}\n\n{}\n", self.subject, self.blurb)
    }
}

/// Turns the unpacked release tree `src` into the series' repository:
/// the tarball as the base commit, the series of `patch_dir` on
/// [`BRANCH`] with `git am`, the cover letter as its description.
pub fn create(src: &Path, patch_dir: &Path, release: &QemuRelease) -> Result<()> {
    let cover = Cover::read(patch_dir)?;
    let base = |c: &mut Command| {
        for who in ["AUTHOR", "COMMITTER"] {
            c.env(format!("GIT_{who}_NAME"), "QEMU")
                .env(format!("GIT_{who}_EMAIL"), "qemu-devel@nongnu.org")
                .env(format!("GIT_{who}_DATE"), "1000000000 +0000");
        }
    };
    run("git init", git(src).args(["init", "-q", "-b", "release"]))?;
    run("git add", git(src).args(["add", "-A", "-f"]))?;
    let mut commit = git(src);
    base(&mut commit);
    let msg = format!(
        "QEMU {}\n\nThe release tarball {}.",
        release.version,
        release.source().map_or("(none)", |s| s.tarball)
    );
    run(
        "git commit",
        commit.args(["commit", "-q", "--no-verify", "-m", &msg]),
    )?;
    run("git tag", git(src).args(["tag", &base_tag(release)]))?;
    run(
        "git checkout",
        git(src).args(["checkout", "-q", "-b", BRANCH]),
    )?;
    let patches = super::qemu::series_patches(patch_dir)?;
    run(
        &format!("git am of {}", patch_dir.display()),
        git_as(src, &cover)
            .args([
                "am",
                "-q",
                "--whitespace=nowarn",
                "--committer-date-is-author-date",
            ])
            .args(&patches),
    )?;
    run(
        "git config",
        git(src).args([
            "config",
            &format!("branch.{BRANCH}.description"),
            &cover.description(),
        ]),
    )?;
    Ok(())
}

/// Keeps the files the build adds to `src` out of `git status`.
pub fn exclude(src: &Path, added: &[PathBuf]) -> Result<()> {
    let info = src.join(".git/info");
    if !info.is_dir() {
        return Ok(());
    }
    let mut text = fs::read_to_string(info.join("exclude")).unwrap_or_default();
    for p in added {
        if let Ok(rel) = p.strip_prefix(src) {
            text.push_str(&format!("/{}\n", rel.display()));
        }
    }
    fs::write(info.join("exclude"), text)?;
    Ok(())
}

/// `git format-patch` of `tree`'s [`BRANCH`] into `out` (created, empty):
/// the cover letter from the branch description, dated and signed as the
/// committed one in `patch_dir`; commit ids zeroed and no signature, so
/// that the files depend only on the branch.
fn format_patch(tree: &Path, release: &QemuRelease, patch_dir: &Path, out: &Path) -> Result<()> {
    let cover = Cover::read(patch_dir)?;
    let has_base = git(tree)
        .args(["rev-parse", "-q", "--verify"])
        .arg(format!("refs/tags/{}", base_tag(release)))
        .output()
        .context("running git")?
        .status
        .success();
    if !has_base {
        bail!(
            "{} has no tag {}: not a tree of `cargo xtask series-tree`",
            tree.display(),
            base_tag(release)
        );
    }
    let _ = fs::remove_dir_all(out);
    fs::create_dir_all(out)?;
    run(
        "git format-patch",
        git_as(tree, &cover)
            .env("GIT_COMMITTER_DATE", &cover.date)
            .args([
                "format-patch",
                "-q",
                "--no-signature",
                "--zero-commit",
                "--cover-letter",
                "--cover-from-description=subject",
                "-o",
            ])
            .arg(out)
            .arg(format!("{}..{BRANCH}", base_tag(release))),
    )?;
    Ok(())
}

/// The `*.patch` files of `dir`, by name.
fn patch_files(dir: &Path) -> Result<Vec<(String, Vec<u8>)>> {
    let mut files = Vec::new();
    for e in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "patch") {
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            files.push((name, fs::read(&p)?));
        }
    }
    files.sort();
    Ok(files)
}

/// Where two sets of patch files differ, one line per file.
fn differences(want: &[(String, Vec<u8>)], got: &[(String, Vec<u8>)]) -> Vec<String> {
    let mut out = Vec::new();
    for (name, bytes) in want {
        match got.iter().find(|(n, _)| n == name) {
            None => out.push(format!("{name}: not regenerated")),
            Some((_, b)) if b != bytes => out.push(format!("{name}: regenerated differently")),
            Some(_) => {}
        }
    }
    for (name, _) in got {
        if !want.iter().any(|(n, _)| n == name) {
            out.push(format!("{name}: regenerated, not committed"));
        }
    }
    out
}

/// `tree`'s branch as patch files in a scratch folder of the work area
/// (`series-<what>-<version>`), and where they differ from the committed
/// ones: (the committed folder, the scratch folder, the differences).
fn regenerate(
    paths: &Paths,
    release: &QemuRelease,
    tree: &Path,
    what: &str,
) -> Result<(PathBuf, PathBuf, Vec<String>)> {
    let patch_dir = release.patch_dir(&paths.repo);
    let out = paths
        .work()
        .join(format!("series-{what}-{}", release.version));
    format_patch(tree, release, &patch_dir, &out)?;
    let diff = differences(&patch_files(&patch_dir)?, &patch_files(&out)?);
    Ok((patch_dir, out, diff))
}

/// `cargo xtask series-export DIR`: replaces `qemu-patches/<version>/`'s
/// patches with those of DIR's branch.
pub fn export(paths: &Paths, release: &QemuRelease, tree: &Path) -> Result<()> {
    let (patch_dir, out, changes) = regenerate(paths, release, tree, "export")?;
    for e in fs::read_dir(&patch_dir)? {
        let p = e?.path();
        if p.extension().is_some_and(|x| x == "patch") {
            fs::remove_file(&p)?;
        }
    }
    for (name, bytes) in patch_files(&out)? {
        fs::write(patch_dir.join(&name), bytes)?;
    }
    let _ = fs::remove_dir_all(&out);
    if changes.is_empty() {
        println!("{}: unchanged", patch_dir.display());
    } else {
        println!("{}:\n  {}", patch_dir.display(), changes.join("\n  "));
    }
    Ok(())
}

/// The round trip: `git format-patch` of the set-up's branch (made from
/// the committed files with `git am`) gives the committed files back.
pub fn check_round_trip(paths: &Paths, release: &QemuRelease, tree: &Path) -> Result<()> {
    let (_, out, diff) = regenerate(paths, release, tree, "round-trip")?;
    if !diff.is_empty() {
        bail!(
            "qemu-patches/{v}/ is not what `git format-patch` makes of its branch \
             (kept in {o}):\n  {d}\nregenerate it with `cargo xtask series-export DIR` \
             from a tree of `cargo xtask series-tree DIR`",
            v = release.version,
            o = out.display(),
            d = diff.join("\n  ")
        );
    }
    let _ = fs::remove_dir_all(&out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const LETTER: &str = "From 0000000000000000000000000000000000000000 Mon Sep 17 00:00:00 2001\n\
        From: A Person <a@example.org>\n\
        Date: Wed, 2 Dec 2026 01:03:12 +0000\n\
        Subject: [PATCH 00/15] target/arm: FEAT_SPE served by an\n external model\n\
        \n\
        This series lets a guest profile.\n\
        \n\
        A Person (Arm) wrote it.\n\
        \n\
        A Person (2):\n  one\n  two\n\n a.c | 1 +\n";

    #[test]
    fn the_cover_letter_gives_identity_date_subject_and_blurb() {
        let c = Cover::parse(LETTER).unwrap();
        assert_eq!(c.name, "A Person");
        assert_eq!(c.email, "a@example.org");
        assert_eq!(c.date, "Wed, 2 Dec 2026 01:03:12 +0000");
        assert_eq!(
            c.subject,
            "target/arm: FEAT_SPE served by an external model"
        );
        assert_eq!(
            c.blurb,
            "This series lets a guest profile.\n\nA Person (Arm) wrote it."
        );
        assert_eq!(
            c.description(),
            "target/arm: FEAT_SPE served by an external model\n\n\
             This series lets a guest profile.\n\nA Person (Arm) wrote it.\n"
        );
        assert!(Cover::parse("Subject: x\n\nno shortlog\n").is_err());
        assert!(Cover::parse(&LETTER.replace("A Person (2)", "B (2)")).is_err());
    }

    #[test]
    fn differences_name_each_file() {
        let f = |n: &str, b: &str| (n.to_string(), b.as_bytes().to_vec());
        let want = [f("0001-a.patch", "a"), f("0002-b.patch", "b")];
        assert!(differences(&want, &want).is_empty());
        let got = [f("0001-a.patch", "A"), f("0003-c.patch", "c")];
        assert_eq!(
            differences(&want, &got),
            [
                "0001-a.patch: regenerated differently",
                "0002-b.patch: not regenerated",
                "0003-c.patch: regenerated, not committed"
            ]
        );
    }
}
