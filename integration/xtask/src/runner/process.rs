//! The processes and files a run owns. Every process started here is
//! owned by a [`ChildGuard`], which kills it by PID when dropped, so no
//! exit path (error, timeout, panic) leaves QEMU or the backend running.

use anyhow::{Context, Result};
use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};

/// Kills and reaps its child on drop unless it has already exited.
pub struct ChildGuard {
    what: String,
    child: Child,
}

impl ChildGuard {
    pub fn spawn(what: &str, cmd: &mut Command) -> Result<Self> {
        // If xtask itself is killed (SIGKILL, CI timeout), Drop never runs:
        // have the kernel kill the child when its parent dies.
        // SAFETY: prctl is async-signal-safe and touches no parent state.
        unsafe {
            cmd.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting {what} ({:?})", cmd.get_program()))?;
        Ok(ChildGuard {
            what: what.to_string(),
            child,
        })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        self.child
            .try_wait()
            .with_context(|| format!("waiting for {}", self.what))
    }

    /// Sends SIGKILL without reaping, so a later `try_wait` sees the death.
    pub fn signal_kill(&mut self) {
        let _ = self.child.kill();
    }

    /// Sends `signal` (SIGSTOP, SIGCONT) to the process, which is ours and
    /// not reaped yet.
    pub fn signal(&self, signal: libc::c_int) {
        // SAFETY: kill(2) on our own child, reaped only later.
        unsafe { libc::kill(self.child.id() as libc::pid_t, signal) };
    }

    /// Kills the process (by its PID, SIGKILL) and reaps it.
    pub fn kill(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Deletes a file (a socket) when dropped.
pub struct RemoveOnDrop(pub PathBuf);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Where the sockets go: `tmp` (`$TMPDIR`) when it is a directory with
/// room for a socket name under the 108-byte limit, else `/tmp`, so a long
/// or missing `$TMPDIR` does not fail a run.
pub fn socket_dir(tmp: &Path) -> PathBuf {
    const ROOM: usize = 108 - "/vhost-device-spe-4294967295-4294967295.sock".len() - 1;
    if tmp.is_dir() && tmp.as_os_str().len() <= ROOM {
        tmp.to_path_buf()
    } else {
        PathBuf::from("/tmp")
    }
}

/// A file's text, empty when it cannot be read.
pub fn read_lossy(p: &Path) -> String {
    fs::read(p)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockets_go_where_their_path_fits() {
        let here = std::env::temp_dir();
        assert_eq!(socket_dir(Path::new("/tmp")), Path::new("/tmp"));
        let long = here.join("x".repeat(90));
        fs::create_dir_all(&long).unwrap();
        assert_eq!(socket_dir(&long), Path::new("/tmp"), "too long");
        fs::remove_dir_all(&long).unwrap();
        assert_eq!(socket_dir(Path::new("/no/such/dir")), Path::new("/tmp"));
    }

    #[test]
    fn guard_kills_its_child() {
        let mut g = ChildGuard::spawn("sleep", Command::new("sleep").arg("30")).unwrap();
        let pid = g.pid();
        assert!(g.try_wait().unwrap().is_none());
        drop(g);
        // Reaped, so the PID no longer names our child.
        assert!(
            !Path::new(&format!("/proc/{pid}/cmdline")).exists()
                || fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .map_or(true, |c| !c.starts_with("sleep"))
        );
    }
}
