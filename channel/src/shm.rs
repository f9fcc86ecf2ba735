//! Shared memory a peer hands over: guest RAM is mapped only when the peer
//! can no longer shrink it. A size check alone protects nothing: the peer
//! could `ftruncate` the file after it, and the next record written into
//! the mapping would kill the daemon with SIGBUS.

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd};

/// Refuses `file` for a mapping of `[offset, offset + len)` unless it is
/// sealed against shrinking (`F_SEAL_SHRINK`, which QEMU's
/// `memory-backend-memfd` sets by default, `seal=on`) and long enough.
pub fn check_mappable(file: &File, offset: u64, len: u64) -> Result<(), String> {
    // SAFETY: F_GET_SEALS on a descriptor we own; the result is checked.
    let seals = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_GET_SEALS) };
    if seals < 0 || seals & libc::F_SEAL_SHRINK == 0 {
        return Err(
            "the memory is not sealed against shrinking (F_SEAL_SHRINK): give the VM its RAM \
             from -object memory-backend-memfd (seal=on, the default; the patched QEMU seals \
             its ring too), or the daemon could be killed by a peer truncating it"
                .into(),
        );
    }
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    match offset.checked_add(len) {
        Some(end) if len > 0 && end <= size => Ok(()),
        _ => Err(format!(
            "{len:#x} bytes at offset {offset:#x} do not fit the {size}-byte file"
        )),
    }
}

/// A memfd of `size` bytes sealed against shrinking and growing, as QEMU's
/// memory-backend-memfd makes one (for tests and benches).
pub fn sealed_memfd(name: &str, size: u64) -> io::Result<File> {
    let cname = std::ffi::CString::new(name).map_err(io::Error::other)?;
    // SAFETY: a valid C string; the result is checked and then owned.
    let fd =
        unsafe { libc::memfd_create(cname.as_ptr(), libc::MFD_CLOEXEC | libc::MFD_ALLOW_SEALING) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new descriptor nobody else owns.
    let file = unsafe { File::from_raw_fd(fd) };
    file.set_len(size)?;
    // SAFETY: F_ADD_SEALS on our own descriptor; the result is checked.
    let rc = unsafe {
        libc::fcntl(
            file.as_raw_fd(),
            libc::F_ADD_SEALS,
            libc::F_SEAL_SHRINK | libc::F_SEAL_GROW,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ring::memfd;

    #[test]
    fn only_sealed_memory_that_fits_is_mappable() {
        let sealed = sealed_memfd("sealed", 8192).unwrap();
        check_mappable(&sealed, 0, 8192).unwrap();
        check_mappable(&sealed, 4096, 4096).unwrap();
        assert!(check_mappable(&sealed, 4096, 8192).is_err(), "too long");
        assert!(check_mappable(&sealed, u64::MAX, 2).is_err(), "wraps");
        assert!(check_mappable(&sealed, 0, 0).is_err(), "empty");
        // The seal holds: the file cannot be shrunk under a mapping.
        assert!(sealed.set_len(4096).is_err());
        let unsealed = memfd("unsealed", 8192).unwrap();
        let e = check_mappable(&unsealed, 0, 4096).unwrap_err();
        assert!(e.contains("F_SEAL_SHRINK"), "{e}");
    }
}
