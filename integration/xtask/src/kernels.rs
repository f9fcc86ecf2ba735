//! The guest kernel matrix, and the apt that reaches each kernel's suite.
//!
//! bookworm's 6.1 comes through the host's own apt. trixie's 6.12 and
//! trixie-backports' 7.3 come through a private apt configuration under the
//! cache: its own sources, lists, package cache and (empty) dpkg status, so
//! the host keeps installing from bookworm. It is only ever used to read
//! the lists and to `apt-get download` arm64 packages that are unpacked
//! with `dpkg-deb -x`; nothing here runs `apt-get install` with it. A
//! second private configuration reads Debian unstable's source index, for
//! QEMU releases newer than bookworm-backports carries.

use crate::host;
use crate::util::{run, write_atomic, Step};
use anyhow::{bail, Context, Result};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// One kernel of the matrix.
#[derive(Debug, PartialEq, Eq)]
pub struct KernelSpec {
    /// What `--kernel` takes, and the version line the guest must report.
    pub name: &'static str,
    /// The suite whose `linux-image-arm64` and `linux-perf` are used.
    pub release: &'static str,
    /// Whether the suite is read through the private apt configuration.
    pub private_apt: bool,
}

/// Oldest first; the last one is the newest (the demo's).
pub const MATRIX: &[KernelSpec] = &[
    KernelSpec {
        name: "6.1",
        release: host::SUITE,
        private_apt: false,
    },
    KernelSpec {
        name: "6.12",
        release: "trixie",
        private_apt: true,
    },
    KernelSpec {
        name: "7.3",
        release: "trixie-backports",
        private_apt: true,
    },
];

/// The suites of the private configuration.
const PRIVATE_SUITES: &str = "trixie trixie-backports";

impl KernelSpec {
    pub fn by_name(name: &str) -> Result<&'static KernelSpec> {
        MATRIX.iter().find(|k| k.name == name).with_context(|| {
            let names: Vec<&str> = MATRIX.iter().map(|k| k.name).collect();
            format!("--kernel {name:?}: the matrix has {}", names.join(", "))
        })
    }

    pub fn newest() -> &'static KernelSpec {
        MATRIX.last().expect("the matrix is not empty")
    }

    /// Whether a kernel release (`uname -r`, or a package's) belongs to
    /// this line: "7.3.4+deb13-arm64" is 7.3's, "6.12.117" is not 6.1's.
    pub fn matches(&self, release: &str) -> bool {
        release
            .strip_prefix(self.name)
            .is_some_and(|rest| rest.starts_with(['.', '-', '+']) || rest.is_empty())
    }
}

/// What the guest suites' apt reads, for messages, and the part of a
/// list file's name that shows its lists were fetched.
const GUEST_SUITES: &str = "the guest suites (trixie trixie-backports)";
const ARM64_LISTS: &str = "binary-arm64_Packages";

/// How to run apt for one kernel's suite.
pub struct Apt {
    /// `APT_CONFIG` for the private configuration; `None`: the host's.
    config: Option<PathBuf>,
    /// `-t RELEASE` for the private configuration, whose candidates would
    /// otherwise be trixie's for every package.
    release: Option<&'static str>,
    /// What the configuration reads, for messages.
    what: &'static str,
    /// Part of a list file's name that shows the lists were fetched.
    list_marker: &'static str,
}

impl Apt {
    /// The apt for `spec`, writing the private configuration under `cache`
    /// if it needs one.
    pub fn for_kernel(spec: &KernelSpec, cache: &Path) -> Result<Apt> {
        if !spec.private_apt {
            return Ok(Apt {
                config: None,
                release: None,
                what: GUEST_SUITES,
                list_marker: ARM64_LISTS,
            });
        }
        Self::private(spec.release, cache)
    }

    /// The private configuration's apt (written under `cache`) with
    /// `release`, one of its suites, as the target release.
    pub fn private(release: &'static str, cache: &Path) -> Result<Apt> {
        let dir = cache.join("apt-trixie");
        let sources = private_stanza(&host::host_sources()?)?;
        let config = write_private_config(&dir, &sources, "")?;
        Ok(Apt {
            config: Some(config),
            release: Some(release),
            what: GUEST_SUITES,
            list_marker: ARM64_LISTS,
        })
    }

    /// The apt that reads Debian unstable's source index (for `apt-get
    /// source`), its configuration written under `cache`.
    pub fn for_unstable_sources(cache: &Path) -> Result<Apt> {
        let dir = cache.join("apt-unstable-src");
        let sources = unstable_source_stanza(&host::host_sources()?)?;
        // Unstable's Release is valid for a week, and a mirror may serve
        // an older one (a new machine's refused it as expired by 21
        // days). Its signature is still checked, and the version is
        // pinned, so the tarball's hash comes from a signed index.
        let extra = "Acquire::Check-Valid-Until \"false\";\n";
        Ok(Apt {
            config: Some(write_private_config(&dir, &sources, extra)?),
            release: None,
            what: "Debian unstable's source index",
            list_marker: "_Sources",
        })
    }

    /// `apt-get`/`apt-cache` with this configuration and target release.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        if let Some(cfg) = &self.config {
            c.env("APT_CONFIG", cfg);
        }
        if let Some(r) = self.release {
            c.args(["-t", r]);
        }
        c
    }

    /// `apt-get download PACKAGE` into `dir`; the `.deb` it left.
    pub fn download(&self, package: &str, dir: &Path) -> Result<PathBuf> {
        run(
            &format!("apt-get download {package}"),
            self.command("apt-get")
                .current_dir(dir)
                .args(["download", package]),
        )?;
        fs::read_dir(dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .find(|p| p.extension().is_some_and(|x| x == "deb"))
            .with_context(|| format!("apt-get download {package} left no .deb"))
    }

    pub fn is_private(&self) -> bool {
        self.config.is_some()
    }

    /// Whether the private lists exist (apt may store them compressed; the
    /// host's are handled by setup).
    pub fn lists_present(&self) -> bool {
        let Some(cfg) = &self.config else {
            return true;
        };
        let lists = cfg.with_file_name("lists");
        fs::read_dir(lists).is_ok_and(|d| {
            d.filter_map(|e| e.ok())
                .any(|e| e.file_name().to_string_lossy().contains(self.list_marker))
        })
    }

    /// `apt-get update` of the private lists. Needs no root: every
    /// directory it writes is in the cache.
    pub fn update(&self) -> Result<()> {
        let step = Step::new(format!("apt-get update of {}", self.what));
        // A mirror that answers part of an update with an error (seen once
        // on a new machine: two index files "could not be opened") is
        // usually fine a few seconds later: try a few times.
        const ATTEMPTS: u32 = 3;
        for attempt in 1..=ATTEMPTS {
            let mut c = Command::new("apt-get");
            if let Some(cfg) = &self.config {
                c.env("APT_CONFIG", cfg);
            }
            match run(
                &format!("apt-get update of {}", self.what),
                c.args(["-q", "update"]),
            ) {
                Ok(_) => break,
                Err(e) if attempt < ATTEMPTS => {
                    eprintln!("==> {e:#}\n    trying again in 10 s ({attempt} of {ATTEMPTS})");
                    std::thread::sleep(std::time::Duration::from_secs(10));
                }
                Err(e) => return Err(e),
            }
        }
        step.done("done");
        Ok(())
    }
}

/// Writes `dir/apt.conf` (with `extra` settings), its `sources`, and the
/// empty state it needs; returns the conf's path.
fn write_private_config(dir: &Path, sources: &str, extra: &str) -> Result<PathBuf> {
    for sub in [
        "lists/partial",
        "cache/archives/partial",
        "state",
        "sources.list.d",
        "preferences.d",
    ] {
        fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("creating {}", dir.join(sub).display()))?;
    }
    write_if_changed(&dir.join("sources.list.d/debian.sources"), sources)?;
    for empty in ["state/status", "sources.list", "preferences"] {
        if !dir.join(empty).exists() {
            fs::write(dir.join(empty), "")?;
        }
    }
    let conf = private_conf(dir) + extra;
    let path = dir.join("apt.conf");
    write_if_changed(&path, &conf)?;
    Ok(path)
}

fn write_if_changed(path: &Path, text: &str) -> Result<()> {
    if fs::read_to_string(path).ok().as_deref() != Some(text) {
        write_atomic(path, text.as_bytes())?;
    }
    Ok(())
}

/// The configuration: every directory apt writes or reads its sources
/// from is under `dir`. The host's apt.conf.d (proxies) still applies.
pub fn private_conf(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "Dir::State \"{d}/state\";\n\
         Dir::State::Lists \"{d}/lists\";\n\
         Dir::State::status \"{d}/state/status\";\n\
         Dir::Cache \"{d}/cache\";\n\
         Dir::Etc::SourceList \"{d}/sources.list\";\n\
         Dir::Etc::SourceParts \"{d}/sources.list.d\";\n\
         Dir::Etc::Preferences \"{d}/preferences\";\n\
         Dir::Etc::PreferencesParts \"{d}/preferences.d\";\n\
         APT::Architectures {{ \"amd64\"; \"arm64\"; }};\n\
         // The cache is the invoking user's; apt's download user may not\n\
         // be able to enter it.\n\
         APT::Sandbox::User \"root\";\n"
    )
}

/// The host's bookworm stanza with the trixie suites: same mirror, same
/// keyring.
pub fn private_stanza(sources: &str) -> Result<String> {
    stanza_on_host_mirror(sources, "deb", PRIVATE_SUITES)
}

/// The host's bookworm stanza turned into unstable's source index.
pub fn unstable_source_stanza(sources: &str) -> Result<String> {
    stanza_on_host_mirror(sources, "deb-src", "sid")
}

fn stanza_on_host_mirror(sources: &str, types: &str, suites: &str) -> Result<String> {
    let (uris, key) = host_mirror(sources)?;
    let mut out = format!("Types: {types}\nURIs: {uris}\nSuites: {suites}\nComponents: main\n");
    if let Some(key) = key {
        out.push_str(&format!("Signed-By: {key}\n"));
    }
    Ok(out)
}

/// The URIs and Signed-By of the stanza of `sources` that carries the plain
/// bookworm suite.
pub fn host_mirror(sources: &str) -> Result<(String, Option<String>)> {
    for stanza in sources.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|r| r.strip_prefix(':'))
                    .map(|v| v.trim().to_string())
            })
        };
        let Some(suites) = field("Suites") else {
            continue;
        };
        if !suites.split_whitespace().any(|s| s == host::SUITE) {
            continue;
        }
        let uris = field("URIs").context("apt sources: bookworm stanza has no URIs")?;
        return Ok((uris, field("Signed-By")));
    }
    bail!(
        "apt sources: no stanza with `Suites: {}` in the host's apt sources",
        host::SUITE
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_names_and_lines() {
        assert_eq!(KernelSpec::newest().name, "7.3");
        let k61 = KernelSpec::by_name("6.1").unwrap();
        assert!(k61.matches("6.1.0-56-arm64"));
        assert!(!k61.matches("6.12.117+deb13-arm64"));
        let k73 = KernelSpec::by_name("7.3").unwrap();
        assert!(k73.matches("7.3.4+deb13-arm64"));
        assert!(!k73.matches("7.30.1"));
        let err = KernelSpec::by_name("5.10").unwrap_err().to_string();
        assert!(err.contains("6.1, 6.12, 7.3"), "{err}");
        // Only the host's own suite goes through the host's apt.
        assert!(MATRIX
            .iter()
            .all(|k| k.private_apt == (k.release != host::SUITE)));
    }

    #[test]
    fn private_sources_reuse_the_host_mirror() {
        let host = "Types: deb\nURIs: http://mirror.example/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /k.gpg\n\nTypes: deb\nURIs: http://mirror.example/security\nSuites: bookworm-security\n";
        assert_eq!(
            private_stanza(host).unwrap(),
            "Types: deb\nURIs: http://mirror.example/debian\nSuites: trixie trixie-backports\nComponents: main\nSigned-By: /k.gpg\n"
        );
        assert!(private_stanza("Suites: bookworm-security\nURIs: x\n").is_err());
        assert_eq!(
            unstable_source_stanza(host).unwrap(),
            "Types: deb-src\nURIs: http://mirror.example/debian\nSuites: sid\nComponents: main\nSigned-By: /k.gpg\n"
        );
    }

    #[test]
    fn private_conf_keeps_apt_state_in_its_directory() {
        let conf = private_conf(Path::new("/c/apt"));
        for key in [
            "Dir::State ",
            "Dir::State::Lists",
            "Dir::State::status",
            "Dir::Cache",
            "Dir::Etc::SourceList",
            "Dir::Etc::SourceParts",
            "Dir::Etc::Preferences ",
            "Dir::Etc::PreferencesParts",
        ] {
            let line = conf
                .lines()
                .find(|l| l.starts_with(key))
                .unwrap_or_else(|| panic!("{key} not set"));
            assert!(line.contains("\"/c/apt/"), "{line}");
        }
    }
}
