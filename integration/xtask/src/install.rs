//! `cargo xtask install`: the patched QEMU, under a name that does not
//! shadow a distribution's (`qemu-system-aarch64-spe`), `vhost-device-spe`
//! and the `spe-qemu` launcher, into `PREFIX/bin`, and the TCG plugin
//! for `spe-qemu --spe-stock` into `PREFIX/lib/vhost-device-spe/`. The
//! guest scenarios boot through a copy installed into the build tree the
//! same way.

use anyhow::{Context, Result};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The installed name of the patched QEMU (what `spe-qemu` looks for
/// beside itself).
pub const QEMU_NAME: &str = "qemu-system-aarch64-spe";

/// Where the plugin goes under the prefix (what `spe-qemu` looks for).
pub const PLUGIN_DIR: &str = "lib/vhost-device-spe";
pub const PLUGIN_NAME: &str = "libspe_plugin.so";

/// Copies the programs into `prefix/bin` (the patched `qemu` unless None:
/// the stock path runs the user's own) and the plugin into
/// [`PLUGIN_DIR`]; returns the launcher's path. Each is written beside
/// its final name and renamed over it, so a copy that is running keeps
/// its file.
pub fn install(qemu: Option<&Path>, release: &Path, prefix: &Path) -> Result<PathBuf> {
    let bin = prefix.join("bin");
    let lib = prefix.join(PLUGIN_DIR);
    let mut files = vec![
        (
            release.join("vhost-device-spe"),
            bin.join("vhost-device-spe"),
        ),
        (release.join("spe-qemu"), bin.join("spe-qemu")),
        (release.join(PLUGIN_NAME), lib.join(PLUGIN_NAME)),
    ];
    if let Some(q) = qemu {
        files.insert(0, (q.to_path_buf(), bin.join(QEMU_NAME)));
    }
    for (from, to) in files {
        let dir = to.parent().context("an installed file has a folder")?;
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let name = to.file_name().context("a file name")?.to_string_lossy();
        let tmp = dir.join(format!(".{name}.new"));
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
    fn installs_three_programs_and_the_plugin_and_replaces_old_ones() {
        let dir = std::env::temp_dir().join(format!("xtask-install-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        let release = dir.join("release");
        fs::create_dir_all(&release).unwrap();
        let qemu = dir.join("qemu-system-aarch64");
        for (p, text) in [
            (&qemu, "q"),
            (&release.join("vhost-device-spe"), "b"),
            (&release.join("spe-qemu"), "l"),
            (&release.join(PLUGIN_NAME), "p"),
        ] {
            fs::write(p, text).unwrap();
        }
        let prefix = dir.join("prefix");
        fs::create_dir_all(prefix.join("bin")).unwrap();
        fs::write(prefix.join("bin/spe-qemu"), "old").unwrap();
        let launcher = install(Some(&qemu), &release, &prefix).unwrap();
        assert_eq!(launcher, prefix.join("bin/spe-qemu"));
        let mut names: Vec<_> = fs::read_dir(prefix.join("bin"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, [QEMU_NAME, "spe-qemu", "vhost-device-spe"]);
        assert_eq!(fs::read_to_string(&launcher).unwrap(), "l");
        let plugin = prefix.join(PLUGIN_DIR).join(PLUGIN_NAME);
        assert_eq!(fs::read_to_string(plugin).unwrap(), "p");
        let mode = fs::metadata(&launcher).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        fs::remove_dir_all(&dir).unwrap();
    }
}
