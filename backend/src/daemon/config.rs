//! The serving mode's options ([`ServeArgs`]) and what they configure
//! ([`Config`]): every check of one option against another, or against
//! the CPU, happens here, before any socket is bound.

use std::io;
use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{ArgGroup, Args, ValueEnum};
use spe_protocol::control::Scenario;
use spe_protocol::profile::CpuProfile;
use thiserror::Error;
use vhost_device_spe::control;
use vhost_device_spe::spu::unpredictable::{ChoiceError, Choices};
use vhost_device_spe::spu::{FeatureError, Features};

/// Options of the default (serving) mode.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("sockets").required(true).multiple(true)
    .args(["socket_path", "qemu_socket"])))]
pub struct ServeArgs {
    /// Unix socket to listen on for the vhost-user front end (replaced if it
    /// exists). One front end is served at a time; one that asks for no
    /// features within 5 s is dropped.
    #[arg(long, value_name = "PATH")]
    socket_path: Option<PathBuf>,

    /// Unix socket to listen on for a patched QEMU's SPE channel
    /// (replaced if it exists). The vCPU count comes from QEMU's HELLO. One
    /// VM is served at a time; a connection that sends no HELLO within 5 s,
    /// or stalls for 1 s within a message, is dropped.
    #[arg(long, value_name = "PATH")]
    qemu_socket: Option<PathBuf>,

    /// Unix socket to listen on for the TCG plugin (`libspe_plugin.so`) of
    /// an unpatched QEMU: it feeds the vhost-user device (--socket-path)
    /// the operations it samples from the guest's execution.
    #[arg(long, value_name = "PATH", requires = "socket_path")]
    plugin_socket: Option<PathBuf>,

    /// Feed RATE synthetic sampled operations per second to each vCPU of the
    /// VM(s) on --socket-path and --qemu-socket (an EL1 load/store/branch mix
    /// through the guest's own interval counter and filters), to exercise
    /// buffers and PMBIRQ without a TCG feed or a guest workload.
    #[arg(long, value_name = "RATE",
          value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    synthetic: Option<u64>,

    /// Number of vCPUs, i.e. of SPUs, of the vhost-user device (the QEMU
    /// channel takes the count from QEMU's HELLO).
    #[arg(long, value_name = "N", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..=512))]
    vcpus: u32,

    /// CPU whose ID register values (PMSIDR_EL1, PMBIDR_EL1, ID_AA64DFR0_EL1.PMSVer) the device advertises.
    #[arg(long, value_enum, default_value_t = Cpu::default())]
    cpu: Cpu,

    /// Override the sampling interval the CPU recommends in
    /// PMSIDR_EL1.Interval (Linux's minimum period, and perf's default):
    /// one of 256, 512, 768, 1024, 1536, 2048, 3072, 4096 operations.
    #[arg(long, value_name = "OPS", value_parser = parse_interval)]
    min_interval: Option<u32>,

    /// QEMU channel: write records and raise PMBIRQ only when a vCPU asks
    /// (QEMU then hands over every 16 samples synchronously): with QEMU's
    /// `-icount shift=N,sleep=off -seed S`, and faults triggered by records
    /// or bytes (not by time or a live `ctl`), two runs write the same
    /// bytes. Slower: a round trip per 16 samples.
    #[arg(long)]
    deterministic: bool,

    /// Override PMBIDR_EL1.Align: records are written BYTES-aligned (padded
    /// with PAD packets), so the buffer fills to exactly its limit. A power
    /// of two up to the CPU's maximum record size (64 on these profiles).
    #[arg(long, value_name = "BYTES")]
    align: Option<u64>,

    /// The VM's CPUs implement EL2 (QEMU `-M virt,virtualization=on`): the
    /// model then serves PMSCR_EL2 and the EL2 access checks.
    #[arg(long)]
    el2: bool,

    /// The VM's CPUs implement EL3 (QEMU `-M virt,secure=on`).
    #[arg(long)]
    el3: bool,

    /// Unix socket for the host-side control interface (line-delimited
    /// JSON, QMP-shaped): query the SPUs, arm faults, request PMU
    /// snapshots, watch events. `vhost-device-spe ctl` is its client.
    /// Serves the VM on --qemu-socket if given, else the vhost-user one.
    #[arg(long, value_name = "PATH")]
    control_socket: Option<PathBuf>,

    /// Unix socket for the guest control port: QEMU connects a
    /// virtio-serial port named org.vhost-device-spe.control to it
    /// (`spe-qemu --spe-guest-control` adds both), through which the
    /// guest arms faults and reads events for its own VM
    /// (protocol/README.md, "The guest control port").
    #[arg(long, value_name = "PATH")]
    guest_control_socket: Option<PathBuf>,

    /// Select a CONSTRAINED UNPREDICTABLE behaviour among those the Arm ARM
    /// permits, NAME=VALUE (repeatable): overrun=buffer-full-dl|buffer-full|imp-def
    /// (RPGGHS: a record that does not fit below the limit),
    /// badpmsfcr=keep|reject (a filter with nothing to filter on),
    /// operations=micro-ops|instructions (what the interval counter counts:
    /// micro-ops vary the instructions per sample, instructions are exact).
    #[arg(long, value_name = "NAME=VALUE")]
    choice: Vec<String>,

    /// Keep a copy of every record written into a guest's buffer, per vCPU,
    /// in DIR/vcpu<N>.rec (the QEMU channel's VM, or without one the
    /// vhost-user front end's; each VM truncates the files of the one
    /// before), for `vhost-device-spe report DIR`.
    #[arg(long, value_name = "DIR")]
    record: Option<PathBuf>,

    /// JSON file of faults to arm for every VM that connects, and a seed
    /// for the model's random numbers: {"seed": N, "faults": [arm-fault
    /// arguments, ...]} (see protocol/README.md).
    #[arg(long, value_name = "FILE")]
    scenario: Option<PathBuf>,
}

/// An interval PMSIDR_EL1.Interval can encode. [`Config`] checks it again
/// through the model; here clap reports it with the usage.
fn parse_interval(s: &str) -> Result<u32, String> {
    let ops = s.parse().map_err(|e| format!("{e}"))?;
    Features::default()
        .with_min_interval(ops)
        .map(|_| ops)
        .map_err(|e| e.to_string())
}

/// `--cpu`: clap's view of the profiles spe-protocol names (which
/// `spe-qemu --spe-cpu` takes too).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Cpu(CpuProfile);

impl Cpu {
    const ALL: [Cpu; CpuProfile::ALL.len()] = {
        let mut all = [Cpu(CpuProfile::NeoverseN1); CpuProfile::ALL.len()];
        let mut i = 0;
        while i < all.len() {
            all[i] = Cpu(CpuProfile::ALL[i]);
            i += 1;
        }
        all
    };
}

impl ValueEnum for Cpu {
    fn value_variants<'a>() -> &'a [Self] {
        &Self::ALL
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(self.0.name()).help(self.0.about()))
    }
}

/// The ID registers of `profile`.
pub fn features_of(profile: CpuProfile) -> Features {
    match profile {
        CpuProfile::NeoverseN1 => Features::neoverse_n1(),
        CpuProfile::NeoverseV1 => Features::neoverse_v1(),
        CpuProfile::Max => Features::max(),
    }
}

/// What the serving mode serves: [`ServeArgs`], checked.
#[derive(Debug)]
pub struct Config {
    /// `--cpu`, for the log.
    pub cpu: CpuProfile,
    /// The PE the model is: `--cpu` with `--min-interval`, `--align`,
    /// `--el2` and `--el3` applied.
    pub features: Features,
    pub choices: Choices,
    /// Synthetic operations per second per vCPU, on every front end.
    pub synthetic: Option<u64>,
    pub vhost_user: Option<VhostUserConfig>,
    pub qemu: Option<QemuConfig>,
    pub control_socket: Option<PathBuf>,
    pub guest_control_socket: Option<PathBuf>,
    pub scenario: Option<ScenarioFile>,
}

/// The vhost-user front end (`--socket-path`).
#[derive(Debug, PartialEq, Eq)]
pub struct VhostUserConfig {
    pub socket: PathBuf,
    pub vcpus: u32,
    /// Whether it serves the control socket's hub: only without a QEMU
    /// channel, which serves it otherwise.
    pub control: bool,
    /// `--record`, likewise only without a QEMU channel: the files are
    /// per vCPU of one VM.
    pub record: Option<PathBuf>,
    /// `--plugin-socket`: where the TCG plugin feeds samples.
    pub plugin_socket: Option<PathBuf>,
}

/// The QEMU channel (`--qemu-socket`).
#[derive(Debug, PartialEq, Eq)]
pub struct QemuConfig {
    pub socket: PathBuf,
    pub deterministic: bool,
    pub record: Option<PathBuf>,
}

/// `--scenario`, read and checked against the CPU.
#[derive(Debug, PartialEq)]
pub struct ScenarioFile {
    pub path: PathBuf,
    pub scenario: Scenario,
}

impl Config {
    /// Whether the front ends need the control hub: for a control
    /// socket, or for the scenario's faults.
    pub fn wants_hub(&self) -> bool {
        self.control_socket.is_some()
            || self.guest_control_socket.is_some()
            || self.scenario.is_some()
    }
}

/// Why the options do not make a [`Config`].
#[derive(Debug, Error)]
pub enum ConfigError {
    #[error("nothing to serve: give --socket-path, --qemu-socket or both")]
    NoSocket,
    #[error("--min-interval: {0}")]
    MinInterval(#[source] FeatureError),
    #[error("--align: {0}")]
    Align(#[source] FeatureError),
    #[error("--choice: {0}")]
    Choice(#[from] ChoiceError),
    #[error("cannot read the scenario {}: {source}", path.display())]
    ScenarioRead {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("scenario {}: {source}", path.display())]
    ScenarioParse {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A fault the CPU cannot produce (e.g. a stage 2 fault without EL2).
    #[error("scenario {}: {why}", path.display())]
    ScenarioFault { path: PathBuf, why: String },
}

impl TryFrom<ServeArgs> for Config {
    type Error = ConfigError;

    fn try_from(args: ServeArgs) -> Result<Self, Self::Error> {
        if args.socket_path.is_none() && args.qemu_socket.is_none() {
            return Err(ConfigError::NoSocket);
        }
        let mut features = features_of(args.cpu.0);
        if let Some(ops) = args.min_interval {
            features = features
                .with_min_interval(ops)
                .map_err(ConfigError::MinInterval)?;
        }
        if let Some(bytes) = args.align {
            features = features.with_align(bytes).map_err(ConfigError::Align)?;
        }
        features.have_el2 |= args.el2;
        features.have_el3 |= args.el3;

        let mut choices = Choices::default();
        for c in &args.choice {
            choices.set_from(c)?;
        }
        let scenario = match args.scenario {
            Some(path) => Some(read_scenario(path, &features)?),
            None => None,
        };

        let has_qemu = args.qemu_socket.is_some();
        Ok(Config {
            cpu: args.cpu.0,
            features,
            choices,
            synthetic: args.synthetic,
            vhost_user: args.socket_path.map(|socket| VhostUserConfig {
                socket,
                vcpus: args.vcpus,
                control: !has_qemu,
                record: args.record.clone().filter(|_| !has_qemu),
                plugin_socket: args.plugin_socket,
            }),
            qemu: args.qemu_socket.map(|socket| QemuConfig {
                socket,
                deterministic: args.deterministic,
                record: args.record,
            }),
            control_socket: args.control_socket,
            guest_control_socket: args.guest_control_socket,
            scenario,
        })
    }
}

/// Reads the scenario at `path` and checks the PE of `features` could
/// produce each of its faults.
fn read_scenario(path: PathBuf, features: &Features) -> Result<ScenarioFile, ConfigError> {
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(source) => return Err(ConfigError::ScenarioRead { path, source }),
    };
    let scenario: Scenario = match serde_json::from_str(&text) {
        Ok(s) => s,
        Err(source) => return Err(ConfigError::ScenarioParse { path, source }),
    };
    for a in &scenario.faults {
        if let Err(e) = control::check(features, &a.kind) {
            return Err(ConfigError::ScenarioFault {
                path,
                why: e.to_string(),
            });
        }
    }
    Ok(ScenarioFile { path, scenario })
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        serve: ServeArgs,
    }

    fn parse(line: &str) -> Result<ServeArgs, clap::Error> {
        Cli::try_parse_from(std::iter::once("vhost-device-spe").chain(line.split_whitespace()))
            .map(|c| c.serve)
    }

    fn config(line: &str) -> Result<Config, ConfigError> {
        Config::try_from(parse(line).unwrap())
    }

    /// A scenario file of this test process, removed on drop.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str, text: &str) -> TempFile {
            let p = std::env::temp_dir().join(format!("spe-config-{}-{name}", std::process::id()));
            std::fs::write(&p, text).unwrap();
            TempFile(p)
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    #[test]
    fn options_make_the_pe() {
        let c =
            config("--qemu-socket q --cpu max --min-interval 4096 --align 16 --el2 --el3").unwrap();
        assert_eq!(c.cpu, CpuProfile::Max);
        let want = Features {
            have_el2: true,
            have_el3: true,
            ..Features::max()
                .with_min_interval(4096)
                .unwrap()
                .with_align(16)
                .unwrap()
        };
        assert_eq!(c.features, want);
        assert_eq!(c.features.min_interval(), Some(4096));
        // The defaults: the N1 profile as it is.
        let c = config("--socket-path s").unwrap();
        assert_eq!(c.features, Features::neoverse_n1());
        assert_eq!(c.choices, Choices::default());
        assert!(!c.wants_hub());
    }

    #[test]
    fn the_qemu_channel_takes_record_and_control() {
        let c = config("--socket-path s --qemu-socket q --record r --control-socket c --vcpus 3")
            .unwrap();
        let q = c.qemu.as_ref().unwrap();
        assert_eq!(q.record.as_deref(), Some(std::path::Path::new("r")));
        let v = c.vhost_user.as_ref().unwrap();
        assert_eq!((v.vcpus, v.control, v.record.as_ref()), (3, false, None));
        assert!(c.wants_hub());
        // Without a QEMU channel the vhost-user front end has both.
        let c = config("--socket-path s --record r --control-socket c --deterministic").unwrap();
        assert!(c.qemu.is_none());
        let v = c.vhost_user.unwrap();
        assert!(v.control);
        assert_eq!(v.record.as_deref(), Some(std::path::Path::new("r")));
    }

    #[test]
    fn choices_are_taken_in_order() {
        let c = config("--qemu-socket q --choice overrun=imp-def --choice overrun=buffer-full")
            .unwrap();
        assert_eq!(c.choices.list()[0].value, "buffer-full");
    }

    #[test]
    fn a_front_end_is_required() {
        assert!(parse("--cpu max").is_err(), "clap's group");
        let mut args = parse("--qemu-socket q").unwrap();
        args.qemu_socket = None;
        assert!(matches!(Config::try_from(args), Err(ConfigError::NoSocket)));
    }

    #[test]
    fn an_interval_without_an_encoding_is_refused() {
        assert!(parse("--qemu-socket q --min-interval 300").is_err());
        assert!(parse("--qemu-socket q --min-interval many").is_err());
        // Built by hand, past clap's parser: the model's own check reports it.
        let mut args = parse("--qemu-socket q").unwrap();
        args.min_interval = Some(300);
        let e = Config::try_from(args).unwrap_err();
        assert!(
            matches!(
                e,
                ConfigError::MinInterval(FeatureError::Interval { ops: 300 })
            ),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("--min-interval: "), "{e}");
    }

    #[test]
    fn an_alignment_the_cpu_cannot_have_is_refused() {
        for bytes in [3, 128] {
            let e = config(&format!("--qemu-socket q --align {bytes}")).unwrap_err();
            assert!(
                matches!(e, ConfigError::Align(FeatureError::Align { max: 64, .. })),
                "{e:?}"
            );
        }
    }

    #[test]
    fn a_bad_choice_is_refused() {
        for (arg, want) in [
            ("overrun", "--choice: \"overrun\" is not NAME=VALUE"),
            ("colour=red", "--choice: no choice \"colour\""),
            ("overrun=anywhere", "--choice: overrun is one of "),
        ] {
            let e = config(&format!("--qemu-socket q --choice {arg}")).unwrap_err();
            assert!(matches!(e, ConfigError::Choice(_)), "{e:?}");
            assert!(e.to_string().starts_with(want), "{e}");
        }
    }

    #[test]
    fn a_scenario_is_read_and_checked_against_the_cpu() {
        let stage2 = r#"{"seed": 3, "faults": [{"vcpu": "all", "kind": "stage2",
            "fault": "translation", "level": 1, "trigger": "after-records", "count": 5}]}"#;
        let f = TempFile::new("stage2.json", stage2);
        let line = format!("--qemu-socket q --scenario {}", f.0.display());
        let e = config(&line).unwrap_err();
        assert!(matches!(e, ConfigError::ScenarioFault { .. }), "{e:?}");
        // The same file with EL2.
        let c = config(&format!("{line} --el2")).unwrap();
        let s = c.scenario.as_ref().unwrap();
        assert_eq!((s.scenario.seed, s.scenario.faults.len()), (Some(3), 1));
        assert!(c.wants_hub());
    }

    #[test]
    fn an_unreadable_or_malformed_scenario_is_refused() {
        let missing = std::env::temp_dir().join(format!("spe-config-{}-none", std::process::id()));
        let e = config(&format!("--qemu-socket q --scenario {}", missing.display())).unwrap_err();
        assert!(matches!(e, ConfigError::ScenarioRead { .. }), "{e:?}");
        for (name, text) in [
            ("syntax.json", "{"),
            ("unknown.json", r#"{"faults": [], "colour": 1}"#),
            (
                "kind.json",
                r#"{"faults": [{"vcpu": "all", "kind": "meltdown"}]}"#,
            ),
        ] {
            let f = TempFile::new(name, text);
            let e = config(&format!("--qemu-socket q --scenario {}", f.0.display())).unwrap_err();
            assert!(
                matches!(e, ConfigError::ScenarioParse { .. }),
                "{name}: {e:?}"
            );
        }
    }

    #[test]
    fn every_profile_is_a_cpu_value_with_its_own_registers() {
        for p in CpuProfile::ALL {
            let args = parse(&format!("--qemu-socket q --cpu {}", p.name())).unwrap();
            assert_eq!(args.cpu, Cpu(p));
            // The help text quotes the PMSIDR_EL1 the model advertises.
            let pmsidr = format!("PMSIDR_EL1 {:#x}", features_of(p).pmsidr());
            assert!(p.about().contains(&pmsidr), "{p}: {}", p.about());
        }
        assert!(parse("--qemu-socket q --cpu cortex-a57").is_err());
    }
}
