//! What a scenario is and what a run of one gives its check: the bottom of
//! the harness's module tree. The runner boots a [`Scenario`]'s guest and
//! fills a [`RunOutput`]; the catalogues (`faults`, `paravirt`, `snapshot`,
//! `scenarios::list`) and the checks (`proofs`, `attributes`,
//! `driver_bugs`, `scenarios::checks`) read it through a [`Judge`].
//! Nothing here imports any of them.

mod judge;
mod machine;
mod output;

pub use judge::{take_expected, Expected, Judge};
pub use machine::{
    cpu_list, Boot, LinuxCaps, MarkerAction, OnMarker, SpeRun, CONFIG_SIZE, ICOUNT_AUTO,
    ICOUNT_CORE, ICOUNT_FIXED, NUM_VQS, VCPUS, VIRTIO_ID, VIRTIO_ID_STOCK,
};
pub use output::{parse_console, Control, CpuTimes, Instructions, Parsed, RunOutput, Verdict};

use std::borrow::Cow;
use std::time::Duration;

/// A host check of a run the guest passed: `Ok`, or what is wrong.
pub type Check = Box<dyn Fn(&RunOutput) -> Result<(), String>>;

pub enum Expect {
    /// The guest must pass and the check must accept the run.
    Pass(Check),
    /// The runner must report a failure whose reason contains `reason`,
    /// with a console tail containing `console` (proves failures surface).
    RunnerFailure {
        reason: &'static str,
        console: &'static str,
    },
}

impl Expect {
    pub fn pass(check: impl Fn(&RunOutput) -> Result<(), String> + 'static) -> Expect {
        Expect::Pass(Box::new(check))
    }
}

pub struct Scenario {
    pub name: &'static str,
    /// integration/guest/scenarios/<guest>.sh
    pub guest: &'static str,
    pub backend: bool,
    pub timeout: Duration,
    pub expect: Expect,
    /// SIGKILL the backend once the console shows this text, as a backend
    /// crash would look (tests the runner itself).
    pub kill_backend_when: Option<&'static str>,
    /// Full emulation, or the paravirtual path (see [`SpeRun`]).
    pub spe: Option<SpeRun>,
    /// The guest's vCPUs if not the rig's ([`VCPUS`]).
    pub vcpus: Option<u32>,
    /// What a pass proves: what is checked, and the negative control
    /// that shows the check can fail (integration/README.md's scenario
    /// table, `cargo xtask scenarios --markdown`). Derived families (the
    /// fault kinds, the paravirtual and UEFI copies) build theirs from
    /// their base's.
    pub proves: Cow<'static, str>,
}

impl Scenario {
    /// A guest without the backend.
    pub fn new(name: &'static str, guest: &'static str, secs: u64, expect: Expect) -> Scenario {
        Scenario {
            name,
            guest,
            backend: false,
            timeout: Duration::from_secs(secs),
            expect,
            kill_backend_when: None,
            spe: None,
            vcpus: None,
            proves: Cow::Borrowed(""),
        }
    }

    /// With the backend attached as `spe` says.
    pub fn spe(self, spe: SpeRun) -> Scenario {
        Scenario {
            backend: true,
            spe: Some(spe),
            ..self
        }
    }

    /// With the backend attached as a plain vhost-user device.
    pub fn backend(self) -> Scenario {
        Scenario {
            backend: true,
            ..self
        }
    }

    /// The same run under another name (a second scenario of one guest
    /// script).
    pub fn named(self, name: &'static str) -> Scenario {
        Scenario { name, ..self }
    }

    /// With `n` vCPUs (QEMU's `-smp` and the backend's `--vcpus`).
    pub fn vcpus(self, n: u32) -> Scenario {
        Scenario {
            vcpus: Some(n),
            ..self
        }
    }

    /// See [`Scenario::proves`].
    pub fn proves(self, what: impl Into<Cow<'static, str>>) -> Scenario {
        Scenario {
            proves: what.into(),
            ..self
        }
    }

    /// See [`Scenario::kill_backend_when`].
    pub fn kill_backend_when(self, marker: &'static str) -> Scenario {
        Scenario {
            kill_backend_when: Some(marker),
            ..self
        }
    }

    /// Whether the scenario runs the paravirtual path.
    pub fn is_paravirt(&self) -> bool {
        self.spe.as_ref().is_some_and(|spe| spe.paravirt)
    }
}
