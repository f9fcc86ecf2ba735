//! The guest machine every run boots, and how a full-emulation or
//! paravirtual run sets the backend up ([`SpeRun`]).

use spe_protocol::profile::CpuProfile;
use std::time::Duration;

/// The paravirtual device's identity, as the guest must see it.
pub const VIRTIO_ID: u32 = spe_protocol::virtio::VIRTIO_ID_SPE;
/// The ID it takes on the unpatched QEMU.
pub const VIRTIO_ID_STOCK: u32 = spe_protocol::virtio::VIRTIO_ID_SPE_STOCK;
pub const NUM_VQS: usize = spe_protocol::virtio::NUM_QUEUES;
pub const CONFIG_SIZE: usize = spe_protocol::virtio::VIRTIO_SPE_CONFIG_SIZE;
/// The guest's vCPUs (`-smp`, and the backend's `--vcpus`).
pub const VCPUS: u32 = 2;

/// The guest's CPUs as the kernel lists them (`cpumask`, "probed for
/// CPUs …"): every vCPU.
pub fn cpu_list() -> String {
    match VCPUS {
        1 => "0".into(),
        n => format!("0-{}", n - 1),
    }
}

/// `-icount`: virtual time paced to the host's speed.
pub const ICOUNT_AUTO: &str = "shift=auto";

/// `-icount`: one instruction per virtual nanosecond and idle time skipped,
/// so guest time is what the guest executed, not how slowly the host
/// emulated it. Tests that wait a fixed time for a program (perf's
/// `sleep 1` before its snapshot signal) see the program as far as it
/// would get on a 1 GHz in-order CPU.
pub const ICOUNT_FIXED: &str = "shift=0,sleep=off";

/// `-icount`: as [`ICOUNT_FIXED`], at eight instructions a nanosecond (the
/// series' negative shift; `spe-qemu --spe-guest-ghz 8`). The vCPUs take
/// turns on one thread and share that clock: with both of two vCPUs busy,
/// each gets four a nanosecond, a server core's second (3 GHz retiring
/// 1.3 a cycle), for tests whose fixed waits assume one. At four for the
/// machine 7.3's perf took 1.16 s to start and the snapshot part, which
/// waits one, failed in one run of two.
pub const ICOUNT_CORE: &str = "shift=-3,sleep=off";

/// What the runner does to the backend once the console shows a text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MarkerAction {
    /// Run `vhost-device-spe ctl --json ARGS…` against the backend's
    /// `--control-socket`, once for each ARGS in turn (output in the
    /// run's `ctl.log`): the control socket used live, as a user would.
    Ctl(&'static [&'static [&'static str]]),
    /// Stop the backend (SIGSTOP) for the time given, then let it go on
    /// (SIGCONT): a stalled backend (`stall.log`).
    Stall(Duration),
    /// Kill the backend (SIGKILL) and start it again, with the same
    /// options, on the same socket: a backend that crashed and was
    /// restarted (its log goes on in `backend.log`, the time taken in
    /// `restart.log`).
    Restart,
    /// Pause the VM and let it run again (QMP `stop`, then `cont`, each
    /// waited for by its event) this many times in a row: exit requests
    /// from another thread while the vCPUs count (`stop-cont.log`). A
    /// `stop` not taken within QEMU's grace fails the run.
    StopCont(u32),
}

/// Once the console shows `marker`, the runner does `action`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OnMarker {
    pub marker: &'static str,
    pub action: MarkerAction,
}

impl OnMarker {
    pub const fn ctl(marker: &'static str, args: &'static [&'static [&'static str]]) -> OnMarker {
        OnMarker {
            marker,
            action: MarkerAction::Ctl(args),
        }
    }

    pub const fn stall(marker: &'static str, pause: Duration) -> OnMarker {
        OnMarker {
            marker,
            action: MarkerAction::Stall(pause),
        }
    }

    pub const fn restart(marker: &'static str) -> OnMarker {
        OnMarker {
            marker,
            action: MarkerAction::Restart,
        }
    }

    pub const fn stop_cont(marker: &'static str, times: u32) -> OnMarker {
        OnMarker {
            marker,
            action: MarkerAction::StopCont(times),
        }
    }
}

/// How the guest boots.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Boot {
    /// `-kernel` and `-initrd`, with QEMU's device tree.
    #[default]
    DeviceTree,
    /// UEFI firmware with `-bios`, loading `-kernel` and `-initrd`: Linux
    /// gets ACPI tables ([`crate::uefi`]).
    Bios,
    /// UEFI firmware in the pflash pair, GRUB from a GPT disk, ACPI: as a
    /// distribution's image boots ([`crate::uefi::build_disk`]).
    Disk,
}

/// How a full-emulation (`-cpu CORE,spe=on`) or paravirtual run is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpeRun {
    /// The core: QEMU's `-cpu` and the backend's `--cpu`, one profile
    /// for both (a core without E0PD boots with `kpti=off`, as a real one
    /// must for SPE).
    pub cpu: CpuProfile,
    /// The backend's `--synthetic RATE`.
    pub synthetic: Option<u64>,
    /// `-M virt,virtualization=on`: the guest kernel runs at EL2 (VHE).
    pub virtualization: bool,
    /// `-M virt,mte=on`: the guest has FEAT_MTE (tag-checked accesses).
    pub mte: bool,
    /// Also `pmu-ss=on` (FEAT_PMUv3_SS).
    pub pmu_ss: bool,
    /// The backend's `--min-interval OPS` (PMSIDR_EL1.Interval).
    pub min_interval: Option<u32>,
    /// QEMU's `-icount OPTIONS` (see [`ICOUNT_AUTO`], [`ICOUNT_FIXED`]):
    /// TBs cannot count SPE operations in their exit check, and the
    /// virtual clock may only be read where a TB allows I/O.
    pub icount: Option<&'static str>,
    /// The backend's `--scenario` file (faults to arm), as JSON text.
    pub faults: Option<&'static str>,
    /// Something done to the backend while the guest runs.
    pub on_marker: Option<OnMarker>,
    /// Boot through the installed `spe-qemu` (`Rig::launcher`) from a
    /// plain QEMU command line, which starts and stops its own backend.
    pub launcher: bool,
    /// The backend keeps its records (`--record <run>/records`); after the
    /// run, `vhost-device-spe report --json` of them goes to the run's
    /// `report.json`, kernel PCs named from the `SPE-KSYM` lines the guest
    /// printed (its /proc/kallsyms: Debian's System.map is a placeholder,
    /// the real one is in the 800 MB -dbg package).
    pub record: bool,
    /// The backend's `RUST_LOG` instead of the harness's (`info` unless
    /// set): e.g. `debug` logs every SPE register access.
    pub log: Option<&'static str>,
    /// More QEMU options (e.g. `-seed`).
    pub qemu_args: &'static [&'static str],
    /// More guest kernel options, each with its leading space (e.g.
    /// ` nohz_full=1`).
    pub kernel_args: &'static str,
    /// More backend options (e.g. `--choice NAME=VALUE`: CONSTRAINED
    /// UNPREDICTABLE and IMPLEMENTATION DEFINED behaviours other than the
    /// defaults; `--align BYTES`).
    pub backend_args: &'static [&'static str],
    /// The paravirtual path instead: a guest CPU without SPE (the core's
    /// `-cpu` without `spe=on`)
    /// and the backend as QEMU's vhost-user device (virtio ID 58), which
    /// the guest's `virtio_spe` module drives. The other options apply
    /// to the backend as on the QEMU channel.
    pub paravirt: bool,
    /// The stock-QEMU path: the paravirtual device on an unpatched QEMU,
    /// its driver loaded by the guest's init (`spe.load=virtio_spe`).
    pub stock: bool,
    /// On the paravirtual path, the samples come from the TCG plugin
    /// (`-plugin libspe_plugin.so` and the backend's `--plugin-socket`).
    pub plugin: bool,
    /// The plugin checks each address it took at a TB's start again at
    /// its instruction (`validate=on`; its summary in `plugin.log`).
    pub plugin_validate: bool,
    /// How the guest boots (the device tree unless a UEFI scenario's).
    pub boot: Boot,
    /// The guest control port (`spe-qemu --spe-guest-control`): the guest
    /// arms its own faults through a virtio-serial port.
    pub guest_control: bool,
}

impl SpeRun {
    pub const fn new(cpu: CpuProfile) -> SpeRun {
        SpeRun {
            cpu,
            synthetic: None,
            virtualization: false,
            mte: false,
            pmu_ss: false,
            min_interval: None,
            icount: None,
            faults: None,
            on_marker: None,
            launcher: false,
            record: false,
            log: None,
            qemu_args: &[],
            kernel_args: "",
            backend_args: &[],
            paravirt: false,
            stock: false,
            plugin: false,
            plugin_validate: false,
            boot: Boot::DeviceTree,
            guest_control: false,
        }
    }

    /// The paravirtual path (see [`SpeRun::paravirt`]) with the backend's
    /// `--cpu` and synthetic source.
    pub const fn paravirt(cpu: CpuProfile, synthetic: u64) -> SpeRun {
        SpeRun {
            paravirt: true,
            synthetic: Some(synthetic),
            ..SpeRun::new(cpu)
        }
    }

    /// The stock-QEMU path: the paravirtual device with the TCG plugin
    /// as its sample source (see [`SpeRun::plugin`]).
    pub const fn stock(cpu: CpuProfile) -> SpeRun {
        SpeRun {
            paravirt: true,
            stock: true,
            plugin: true,
            ..SpeRun::new(cpu)
        }
    }

    /// Operations are instructions, exactly (`--choice
    /// operations=instructions`): the interval proofs count them.
    pub const fn exact(self) -> SpeRun {
        SpeRun {
            backend_args: &["--choice", "operations=instructions"],
            ..self
        }
    }
}

/// What Linux's `arm_spe_pmu` shows in its `caps/` files for a
/// PMSIDR_EL1 (`__arm_spe_pmu_dev_probe()`'s decode).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinuxCaps {
    pub min_interval: u64,
    pub count_size: u64,
    pub arch_inst: u64,
}

impl LinuxCaps {
    pub fn of_pmsidr(pmsidr: u64) -> LinuxCaps {
        use spe_protocol::regs::PMSIDR_EL1 as F;
        LinuxCaps {
            // A spaced-out encoding; Linux warns on the reserved values
            // and takes the largest interval.
            min_interval: match F::INTERVAL.get(pmsidr) {
                0 => 256,
                2 => 512,
                3 => 768,
                4 => 1024,
                5 => 1536,
                6 => 2048,
                7 => 3072,
                _ => 4096,
            },
            // 2 is 12-bit saturating; Linux warns on others and takes 12.
            count_size: match F::COUNTSIZE.get(pmsidr) {
                3 => 16,
                _ => 12,
            },
            arch_inst: F::ARCHINST.get(pmsidr),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_decodes_pmsidr_as_its_driver_does() {
        // Interval 4 (1024), CountSize 2, ArchInst 0: neoverse-n1's shape.
        let n1 = LinuxCaps::of_pmsidr(0x2_0467);
        assert_eq!(
            (n1.min_interval, n1.count_size, n1.arch_inst),
            (1024, 12, 0)
        );
        let other = LinuxCaps::of_pmsidr(0x3_0008);
        assert_eq!(
            (other.min_interval, other.count_size, other.arch_inst),
            (256, 16, 1)
        );
        assert_eq!(LinuxCaps::of_pmsidr(0x100).min_interval, 4096, "reserved 1");
    }
}
