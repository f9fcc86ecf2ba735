//! Small process and file helpers shared by the set-up and the runner.

use anyhow::{bail, Context, Result};
use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

/// Runs `cmd` to completion with its output captured; on failure the error
/// names `step` and carries the tail of the command's output, so a failed
/// set-up says what failed without scrolling through a build log.
pub fn run(step: &str, cmd: &mut Command) -> Result<String> {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("{step}: cannot start {:?}", cmd.get_program()))?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        bail!(
            "{step} failed ({}):\n{}{}",
            out.status,
            tail(&stdout, 15),
            tail(&stderr, 25)
        );
    }
    Ok(stdout)
}

/// Runs `cmd` with its output appended to `log`, for long steps (QEMU's
/// build) whose output is only interesting when they fail.
pub fn run_logged(step: &str, cmd: &mut Command, log: &Path) -> Result<()> {
    let file =
        fs::File::create(log).with_context(|| format!("{step}: creating {}", log.display()))?;
    let err = file.try_clone()?;
    let status = cmd
        .stdin(Stdio::null())
        .stdout(file)
        .stderr(err)
        .status()
        .with_context(|| format!("{step}: cannot start {:?}", cmd.get_program()))?;
    if !status.success() {
        let text = fs::read_to_string(log).unwrap_or_default();
        bail!(
            "{step} failed ({status}); last lines of {}:\n{}",
            log.display(),
            tail(&text, 30)
        );
    }
    Ok(())
}

/// The last `n` lines of `text`, each ending in a newline.
pub fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let start = lines.len().saturating_sub(n);
    let mut out = String::new();
    for l in &lines[start..] {
        out.push_str(l);
        out.push('\n');
    }
    out
}

/// Prints a step's name and how long it took.
pub struct Step {
    start: Instant,
}

impl Step {
    pub fn new(name: impl Into<String>) -> Self {
        eprintln!("==> {}", name.into());
        Step {
            start: Instant::now(),
        }
    }

    pub fn done(self, note: &str) {
        eprintln!("    {note} in {:.1} s", self.start.elapsed().as_secs_f64());
    }
}

/// Writes `contents` to `path` through a temporary file so an interrupted run
/// never leaves a half-written marker or image behind.
pub fn write_atomic(path: &Path, contents: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, contents).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))?;
    Ok(())
}

/// `requirement` from PyPI in its own venv at `venv` (Debian's python3),
/// unless `venv/bin/EXE` is there already.
pub fn pip_venv(venv: &Path, requirement: &str, exe: &str) -> Result<()> {
    if venv.join("bin").join(exe).exists() {
        return Ok(());
    }
    let step = Step::new(format!("pip install {requirement}"));
    run(
        "python3 -m venv",
        Command::new("/usr/bin/python3")
            .args(["-m", "venv"])
            .arg(venv),
    )?;
    run(
        &format!("pip install {requirement} (is PyPI reachable?)"),
        Command::new(venv.join("bin/pip")).args(["install", "-q", requirement]),
    )?;
    step.done("installed");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail("a\nb\nc\n", 2), "b\nc\n");
        assert_eq!(tail("a", 5), "a\n");
        assert_eq!(tail("", 3), "");
    }
}
