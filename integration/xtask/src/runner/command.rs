//! The command lines of a run: QEMU's, `spe-qemu`'s and the backend's.

use super::{callgrind, GuestRun, Rig};
use crate::scenario::{Boot, CONFIG_SIZE, NUM_VQS, VIRTIO_ID, VIRTIO_ID_STOCK};
use crate::uefi;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The backend's control socket, next to its channel socket.
pub fn ctl_socket(channel: &Path) -> PathBuf {
    channel.with_extension("ctl")
}

/// The backend's socket for the TCG plugin, next to its channel socket.
pub fn plugin_socket(channel: &Path) -> PathBuf {
    channel.with_extension("plugin")
}

/// The backend's socket for the guest control port, next to its channel
/// socket.
pub fn guest_control_socket(channel: &Path) -> PathBuf {
    channel.with_extension("guest")
}

/// QEMU's QMP socket, next to the backend's channel socket.
pub fn qmp_socket(channel: &Path) -> PathBuf {
    channel.with_extension("qmp")
}

impl Rig {
    /// The backend `spec` needs, on `socket`, keeping its records and
    /// scenario file in the run's `dir`.
    pub(super) fn backend_command(&self, spec: &GuestRun, dir: &Path, socket: &Path) -> Command {
        let mut cmd = Command::new(&self.backend);
        match &spec.spe {
            None => {
                cmd.arg("--socket-path").arg(socket);
            }
            Some(spe) => {
                cmd.arg(if spe.paravirt {
                    "--socket-path"
                } else {
                    "--qemu-socket"
                })
                .arg(socket)
                .args(["--cpu", spe.cpu.name()]);
                if spe.virtualization {
                    cmd.arg("--el2");
                }
                if let Some(rate) = spe.synthetic {
                    cmd.args(["--synthetic", &rate.to_string()]);
                }
                if spe.plugin {
                    cmd.arg("--plugin-socket").arg(plugin_socket(socket));
                }
                if spec.controlled() {
                    cmd.arg("--control-socket").arg(ctl_socket(socket));
                }
                if spe.guest_control {
                    cmd.arg("--guest-control-socket")
                        .arg(guest_control_socket(socket));
                }
                if spe.faults.is_some() {
                    cmd.arg("--scenario").arg(dir.join("faults.json"));
                }
                if let Some(ops) = spe.min_interval {
                    cmd.args(["--min-interval", &ops.to_string()]);
                }
                if spe.record {
                    cmd.arg("--record").arg(dir.join("records"));
                }
                cmd.args(spe.backend_args);
                if let Some(clock) = spec.measure.callgrind() {
                    cmd.args(clock.backend_args());
                }
            }
        }
        cmd.arg("--vcpus").arg(self.vcpus.to_string()).env(
            "RUST_LOG",
            spec.spe
                .as_ref()
                .and_then(|s| s.log)
                .map(str::to_string)
                .or_else(|| std::env::var("RUST_LOG").ok())
                .unwrap_or_else(|| "info".into()),
        );
        cmd
    }

    /// `spe-qemu` with QEMU's documented `-M virt -kernel -initrd -append`
    /// command line (or a UEFI boot's: [`Rig::boot_args`]), unchanged but
    /// for `-nic none` (this QEMU has no option ROMs) and `-no-reboot` (so
    /// `panic=-1` ends the run).
    pub(super) fn launcher_command(&self, spec: &GuestRun, backend_log: &Path) -> Command {
        let spe = spec.spe.as_ref().expect("a launcher run is an SPE run");
        let mut c = Command::new(&self.launcher);
        if spe.stock {
            // The QEMU the user has: here the unpatched build.
            c.arg("--spe-stock").arg("--spe-qemu").arg(&self.qemu);
        }
        if spe.guest_control {
            c.arg("--spe-guest-control");
        }
        // The backend's profile follows -cpu.
        c.arg("--spe-log")
            .arg(backend_log)
            .arg("-M")
            .arg(if spe.virtualization {
                "virt,virtualization=on"
            } else {
                "virt"
            })
            .args(["-cpu", spe.cpu.qemu_cpu()])
            .args(["-smp", &self.vcpus.to_string(), "-m", "1G"])
            .args(["-nographic", "-nic", "none", "-no-reboot"]);
        self.boot_args(&mut c, spec, backend_log);
        c
    }

    /// The guest kernel's command line for `spec` (`panic=-1` reboots at
    /// once; `-no-reboot` turns that into an exit).
    pub(super) fn cmdline(&self, spec: &GuestRun) -> String {
        let spe = spec.spe.as_ref();
        let append = if spe.is_some_and(|s| s.launcher) {
            format!(
                "spe.scenario={}{}{}{}",
                spec.scenario,
                kpti(spec),
                load(spec),
                params(spec)
            )
        } else {
            format!(
                "spe.scenario={} spe.virtio_id={}{}{}{}{}",
                spec.scenario,
                virtio_id(spec),
                kpti(spec),
                load(spec),
                params(spec),
                spec.measure.callgrind().map_or(String::new(), |c| format!(
                    " spe.mark_pause={}{}",
                    callgrind::PAUSE_S,
                    c.cmdline()
                ))
            )
        };
        let extra = spe.map_or("", |s| s.kernel_args);
        format!("console=ttyAMA0 panic=-1 {append}{extra}")
    }

    /// How the guest boots ([`Boot`]): the kernel, the initramfs and the
    /// command line, through the firmware with `-bios`; or the firmware's
    /// pflash pair and the run's disk (beside `in_run_dir`, a file of the
    /// run's folder), which holds the command line in GRUB's
    /// configuration ([`crate::uefi::build_disk`]).
    fn boot_args(&self, c: &mut Command, spec: &GuestRun, in_run_dir: &Path) {
        let boot = spec.spe.as_ref().map_or(Boot::DeviceTree, |s| s.boot);
        if boot == Boot::Disk {
            let dir = in_run_dir.parent().unwrap_or(Path::new("."));
            c.args(uefi::DiskFiles::in_dir(dir).qemu_args());
            return;
        }
        if boot == Boot::Bios {
            c.args(["-bios", uefi::QEMU_EFI]);
        }
        c.arg("-kernel")
            .arg(&self.kernel)
            .arg("-initrd")
            .arg(&self.initrd)
            .arg("-append")
            .arg(self.cmdline(spec));
    }

    pub(super) fn qemu_command(&self, spec: &GuestRun, console: &Path, socket: &Path) -> Command {
        let clock = spec.measure.callgrind();
        let mut c = if clock.is_some() {
            callgrind::wrap(
                &self.qemu,
                &super::callgrind_out(console.parent().unwrap_or(Path::new("."))),
            )
        } else {
            Command::new(&self.qemu)
        };
        let mem = "1G";
        let (machine, cpu) = match &spec.spe {
            Some(spe) if spec.backend && !spe.paravirt => (
                format!(
                    "virt,gic-version=3,memory-backend=mem{}{}",
                    if spe.virtualization {
                        ",virtualization=on"
                    } else {
                        ""
                    },
                    if spe.mte { ",mte=on" } else { "" }
                ),
                format!(
                    "{},spe=on{},spe-socket={}",
                    spe.cpu.qemu_cpu(),
                    if spe.pmu_ss { ",pmu-ss=on" } else { "" },
                    socket.display()
                ),
            ),
            // The paravirtual path, and runs without SPE: the core
            // without spe=on (no SPE run at all: QEMU's max).
            _ => (
                "virt,gic-version=3,memory-backend=mem".to_string(),
                spec.spe
                    .as_ref()
                    .map_or("max", |s| s.cpu.qemu_cpu())
                    .to_string(),
            ),
        };
        // Named threads ("CPU 0/TCG"), for pin_vcpu0() and for top.
        c.args(["-name", "vhost-device-spe,debug-threads=on"])
            .args(["-M", &machine])
            .args(["-cpu", &cpu, "-smp", &self.vcpus.to_string(), "-m", mem])
            // vhost-user back ends map guest RAM: it must be a shared memfd.
            .args([
                "-object",
                &format!("memory-backend-memfd,id=mem,size={mem},share=on"),
            ])
            // -M virt would add a NIC needing an option ROM we do not build.
            .args(["-nic", "none", "-display", "none", "-monitor", "none"])
            .arg("-serial")
            .arg(format!("file:{}", console.display()))
            .arg("-no-reboot");
        if spec.controlled() {
            // The guest's power-off pauses QEMU instead of ending it, so
            // the backend still has the VM when the runner asks it for
            // its statistics; the runner then quits QEMU through QMP.
            c.arg("-qmp")
                .arg(format!(
                    "unix:{},server=on,wait=off",
                    qmp_socket(socket).display()
                ))
                .args(["-action", "shutdown=pause"]);
        }
        self.boot_args(&mut c, spec, console);
        if spec.backend && spec.spe.as_ref().is_none_or(|s| s.paravirt) {
            // An unpatched QEMU's generic vhost-user device fails to start on
            // a chardev that connects later (reconnect-ms): the series'
            // vhost-user-base fixes are what make reconnecting work.
            let reconnect = if spec.spe.as_ref().is_some_and(|s| s.stock) {
                ""
            } else {
                ",reconnect-ms=1000"
            };
            c.arg("-chardev")
                .arg(format!(
                    "socket,id=spe0,path={}{reconnect}",
                    socket.display()
                ))
                .arg("-device")
                .arg(format!(
                    "{},chardev=spe0,virtio-id={},num_vqs={NUM_VQS},config_size={CONFIG_SIZE}",
                    self.qemu_release.vhost_user_device,
                    virtio_id(spec)
                ));
        }
        if let Some(clock) = clock {
            c.args(clock.qemu_args());
        } else if let Some(icount) = spec.spe.as_ref().and_then(|s| s.icount) {
            c.args(["-icount", icount]);
        }
        if spec.backend && spec.spe.as_ref().is_some_and(|s| s.plugin) {
            let validate = spec.spe.as_ref().is_some_and(|s| s.plugin_validate);
            c.arg("-plugin").arg(format!(
                "{},socket={}{}",
                self.plugin().display(),
                plugin_socket(socket).display(),
                if validate { ",validate=on" } else { "" }
            ));
            // The plugin's lines (its summary at exit) in the run's folder.
            c.args(["-d", "plugin", "-D"])
                .arg(console.with_file_name("plugin.log"));
        }
        if spec.spe.as_ref().is_some_and(|s| s.guest_control) {
            let path = guest_control_socket(socket);
            c.args(spe_protocol::guest_port::qemu_args(&path));
        }
        if let Some(spe) = &spec.spe {
            c.args(spe.qemu_args);
        }
        c
    }

    /// The TCG plugin, built beside the backend.
    pub fn plugin(&self) -> PathBuf {
        self.backend.with_file_name("libspe_plugin.so")
    }
}

/// The paravirtual device's ID: an unpatched QEMU aborts on 58.
fn virtio_id(spec: &GuestRun) -> u32 {
    match &spec.spe {
        Some(s) if s.stock => VIRTIO_ID_STOCK,
        _ => VIRTIO_ID,
    }
}

/// On the stock-QEMU path every run needs the paravirtual driver, bound
/// to the ID that path uses: the guest's init loads it first.
fn load(spec: &GuestRun) -> String {
    match &spec.spe {
        Some(s) if s.stock => {
            format!(" spe.load=virtio_spe spe.load_args=virtio_id={VIRTIO_ID_STOCK}")
        }
        _ => String::new(),
    }
}

/// The run's own ` spe.KEY=VALUE` parameters.
fn params(spec: &GuestRun) -> String {
    spec.params
        .iter()
        .map(|(k, v)| format!(" spe.{k}={v}"))
        .collect()
}

/// ` kpti=off` for a core without E0PD, where Linux with KASLR unmaps
/// the kernel at EL0 and its SPE driver then refuses the profiling buffer
/// (as on the real core); nothing for the others.
fn kpti(spec: &GuestRun) -> &'static str {
    match &spec.spe {
        Some(s) if !s.cpu.has_e0pd() => " kpti=off",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::Measure;
    use crate::scenario::{SpeRun, ICOUNT_FIXED, VCPUS};
    use spe_protocol::profile::CpuProfile;
    use std::time::Duration;

    fn rig() -> Rig {
        Rig {
            spec: &crate::kernels::MATRIX[0],
            has_extra_modules: true,
            qemu: "qemu".into(),
            qemu_release: crate::setup::QemuRelease::main(),
            kernel: "Image".into(),
            initrd: "initrd".into(),
            backend: "backend".into(),
            launcher: "spe-qemu".into(),
            runs_dir: "runs".into(),
            pin_vcpu0: false,
            vcpus: VCPUS,
            grub_efi: "BOOTAA64.EFI".into(),
        }
    }

    fn run(spe: Option<SpeRun>) -> GuestRun {
        GuestRun {
            scenario: "boot".into(),
            params: Vec::new(),
            run_name: "boot".into(),
            backend: spe.is_some(),
            timeout: Duration::from_secs(1),
            kill_backend_when: None,
            spe,
            measure: Measure::Nothing,
        }
    }

    fn args(c: Command) -> Vec<String> {
        c.get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    fn qemu_args(spe: Option<SpeRun>) -> Vec<String> {
        args(rig().qemu_command(&run(spe), Path::new("console"), Path::new("sock")))
    }

    /// The paravirtual device is the generic vhost-user device of the
    /// rig's QEMU, by the name that release gives it; full emulation adds
    /// none.
    #[test]
    fn the_vhost_user_device_is_named_as_the_qemu_names_it() {
        let device_of = |r: &Rig, spe: SpeRun| {
            let a = args(r.qemu_command(&run(Some(spe)), Path::new("c"), Path::new("s")));
            a.windows(2)
                .find(|w| w[0] == "-device" && w[1].contains("virtio-id=58"))
                .map(|w| w[1].split(',').next().unwrap().to_string())
        };
        let p = CpuProfile::NeoverseN1;
        for release in crate::setup::QEMU_RELEASES {
            let name = "vhost-user-test-device-pci";
            let r = Rig {
                qemu_release: release,
                ..rig()
            };
            assert_eq!(device_of(&r, SpeRun::paravirt(p, 1)).as_deref(), Some(name));
            assert_eq!(device_of(&r, SpeRun::new(p)), None);
        }
    }

    /// The profile is QEMU's -cpu and the backend's --cpu; a core
    /// without E0PD boots with kpti=off; a run without SPE gets max.
    #[test]
    fn a_run_is_on_the_core_its_profile_names() {
        let cpu_of = |a: &[String]| {
            a.windows(2)
                .find(|w| w[0] == "-cpu")
                .map(|w| w[1].clone())
                .unwrap()
        };
        let append_of = |a: &[String]| {
            a.windows(2)
                .find(|w| w[0] == "-append")
                .map(|w| w[1].clone())
                .unwrap()
        };
        for (p, kpti_off) in [
            (CpuProfile::NeoverseN1, true),
            (CpuProfile::NeoverseV1, true),
            (CpuProfile::Max, false),
        ] {
            for spe in [SpeRun::new(p), SpeRun::paravirt(p, 1)] {
                let a = qemu_args(Some(spe.clone()));
                assert!(
                    cpu_of(&a) == p.qemu_cpu()
                        || cpu_of(&a).starts_with(&format!("{},spe=on", p.qemu_cpu())),
                    "{p}: {a:?}"
                );
                assert_eq!(append_of(&a).contains("kpti=off"), kpti_off, "{p}: {a:?}");
                let b = args(rig().backend_command(
                    &run(Some(spe)),
                    Path::new("dir"),
                    Path::new("sock"),
                ));
                assert!(b.windows(2).any(|w| w == ["--cpu", p.name()]), "{b:?}");
            }
        }
        let a = qemu_args(None);
        assert_eq!(cpu_of(&a), "max");
        assert!(!append_of(&a).contains("kpti"));
    }

    /// QEMU's -smp and the backend's --vcpus follow the rig (the bench's
    /// --vcpus 1).
    #[test]
    fn the_guest_and_the_backend_have_the_rigs_vcpus() {
        for n in [1, VCPUS] {
            let r = Rig { vcpus: n, ..rig() };
            let spec = run(Some(SpeRun::new(CpuProfile::NeoverseN1)));
            let n = n.to_string();
            let q = args(r.qemu_command(&spec, Path::new("console"), Path::new("sock")));
            assert!(q.windows(2).any(|w| w == ["-smp", &n]), "{q:?}");
            let b = args(r.backend_command(&spec, Path::new("dir"), Path::new("sock")));
            assert!(b.windows(2).any(|w| w == ["--vcpus", &n]), "{b:?}");
        }
    }

    /// `-bios` keeps the kernel, initramfs and command line; the disk has
    /// none of them (GRUB's configuration holds the command line), only
    /// the pflash pair and the run's disk, for QEMU and spe-qemu alike.
    #[test]
    fn a_uefi_run_boots_through_the_firmware() {
        let spe = |boot| SpeRun {
            boot,
            ..SpeRun::new(CpuProfile::NeoverseN1)
        };
        let bios = qemu_args(Some(spe(Boot::Bios)));
        assert!(
            bios.windows(2).any(|w| w == ["-bios", uefi::QEMU_EFI]),
            "{bios:?}"
        );
        assert!(bios.contains(&"-kernel".into()) && bios.contains(&"-append".into()));
        let disk = args(rig().qemu_command(
            &run(Some(spe(Boot::Disk))),
            Path::new("runs/x/console.log"),
            Path::new("sock"),
        ));
        for gone in ["-kernel", "-initrd", "-append", "-bios"] {
            assert!(!disk.contains(&gone.into()), "{gone}: {disk:?}");
        }
        assert!(disk.contains(&"if=pflash,format=raw,unit=1,file=runs/x/AAVMF_VARS.fd".into()));
        assert!(disk.contains(&"if=none,id=disk0,format=raw,file=runs/x/disk.img".into()));
        let launched = args(rig().launcher_command(
            &run(Some(SpeRun {
                launcher: true,
                ..spe(Boot::Disk)
            })),
            Path::new("runs/x/backend.log"),
        ));
        assert!(launched.contains(&"virtio-blk-pci,drive=disk0".into()));
        assert!(!launched.contains(&"-kernel".into()));
        let dt = qemu_args(Some(spe(Boot::DeviceTree)));
        assert!(!dt.contains(&"-bios".into()) && !dt.iter().any(|a| a.contains("pflash")));
    }

    #[test]
    fn icount_runs_add_icount_and_others_do_not() {
        let on = SpeRun {
            icount: Some(ICOUNT_FIXED),
            ..SpeRun::new(CpuProfile::NeoverseN1)
        };
        let args = qemu_args(Some(on));
        assert!(
            args.windows(2).any(|w| w == ["-icount", ICOUNT_FIXED]),
            "{args:?}"
        );
        assert!(!qemu_args(Some(SpeRun::new(CpuProfile::NeoverseN1))).contains(&"-icount".into()));
        assert!(!qemu_args(None).contains(&"-icount".into()));
    }

    #[test]
    fn counting_instructions_runs_qemu_under_callgrind_on_its_clock() {
        use callgrind::Clock;
        let spec = |clock| GuestRun {
            measure: Measure::Instructions(clock),
            ..run(Some(SpeRun::new(CpuProfile::NeoverseN1)))
        };
        let cmd =
            |clock| rig().qemu_command(&spec(clock), Path::new("dir/console"), Path::new("sock"));
        let append = |a: &[String]| a.windows(2).find(|w| w[0] == "-append").unwrap()[1].clone();
        let backend =
            |clock| args(rig().backend_command(&spec(clock), Path::new("dir"), Path::new("sock")));
        assert_eq!(cmd(Clock::Icount).get_program(), "valgrind");
        let a = args(cmd(Clock::Icount));
        assert!(
            a.contains(&"--callgrind-out-file=dir/callgrind.out".into()),
            "{a:?}"
        );
        assert!(a.contains(&"qemu".into()));
        assert!(
            a.windows(2).any(|w| w == ["-icount", callgrind::ICOUNT]),
            "{a:?}"
        );
        assert!(append(&a).contains(&format!("spe.mark_pause={}", callgrind::PAUSE_S)));
        assert!(backend(Clock::Icount).contains(&"--deterministic".into()));
        // The host's clock: one TCG thread, no icount, CPU 0 tickless, the
        // backend as without callgrind.
        let h = args(cmd(Clock::Host));
        assert!(
            h.windows(2).any(|w| w == ["-accel", "tcg,thread=single"]),
            "{h:?}"
        );
        assert!(!h.contains(&"-icount".into()));
        assert!(append(&h).contains("nohz_full=0"));
        assert!(!backend(Clock::Host).contains(&"--deterministic".into()));
        assert!(!qemu_args(None).contains(&"valgrind".into()));
    }

    #[test]
    fn backend_runs_are_controlled_and_pause_at_power_off() {
        let spe = qemu_args(Some(SpeRun::new(CpuProfile::NeoverseN1)));
        assert!(spe.windows(2).any(|w| w == ["-action", "shutdown=pause"]));
        assert!(spe.contains(&"unix:sock.qmp,server=on,wait=off".to_string()));
        let backend = args(rig().backend_command(
            &run(Some(SpeRun::new(CpuProfile::NeoverseN1))),
            Path::new("dir"),
            Path::new("sock"),
        ));
        assert!(backend
            .windows(2)
            .any(|w| w == ["--control-socket", "sock.ctl"]));
        // Without a backend, or through spe-qemu's own, nothing to ask.
        assert!(!qemu_args(None).contains(&"-qmp".into()));
        let launched = run(Some(SpeRun {
            launcher: true,
            ..SpeRun::new(CpuProfile::NeoverseN1)
        }));
        assert!(!launched.controlled());
    }
}
