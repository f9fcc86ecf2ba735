//! `cargo xtask install`: the patched QEMU, under a name that does not
//! shadow a distribution's (`qemu-system-aarch64-spe`), `vhost-device-spe`
//! and the `spe-qemu` launcher, into `PREFIX/bin`. The guest scenarios
//! boot through a copy installed into the build tree the same way.

use anyhow::{Context, Result};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The installed name of the patched QEMU (what `spe-qemu` looks for
/// beside itself).
pub const QEMU_NAME: &str = "qemu-system-aarch64-spe";

/// Copies the three programs into `prefix/bin`; returns the launcher's
/// path. Each is written beside its final name and renamed over it, so a
/// copy that is running keeps its file.
pub fn install(qemu: &Path, release: &Path, prefix: &Path) -> Result<PathBuf> {
    let bin = prefix.join("bin");
    fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    for (from, name) in [
        (qemu.to_path_buf(), QEMU_NAME),
        (release.join("vhost-device-spe"), "vhost-device-spe"),
        (release.join("spe-qemu"), "spe-qemu"),
    ] {
        let to = bin.join(name);
        let tmp = bin.join(format!(".{name}.new"));
        fs::copy(&from, &tmp)
            .with_context(|| format!("copying {} to {}", from.display(), tmp.display()))?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o755))?;
        fs::rename(&tmp, &to).with_context(|| format!("installing {}", to.display()))?;
    }
    Ok(bin.join("spe-qemu"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn installs_three_programs_and_replaces_old_ones() {
        let dir = std::env::temp_dir().join(format!("xtask-install-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let release = dir.join("release");
        fs::create_dir_all(&release).unwrap();
        let qemu = dir.join("qemu-system-aarch64");
        for (p, text) in [
            (&qemu, "q"),
            (&release.join("vhost-device-spe"), "b"),
            (&release.join("spe-qemu"), "l"),
        ] {
            fs::write(p, text).unwrap();
        }
        let prefix = dir.join("prefix");
        fs::create_dir_all(prefix.join("bin")).unwrap();
        fs::write(prefix.join("bin/spe-qemu"), "old").unwrap();
        let launcher = install(&qemu, &release, &prefix).unwrap();
        assert_eq!(launcher, prefix.join("bin/spe-qemu"));
        let mut names: Vec<_> = fs::read_dir(prefix.join("bin"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, [QEMU_NAME, "spe-qemu", "vhost-device-spe"]);
        assert_eq!(fs::read_to_string(&launcher).unwrap(), "l");
        let mode = fs::metadata(&launcher).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        fs::remove_dir_all(&dir).unwrap();
    }
}
