//! The QEMU command line as `spe-qemu` takes and rewrites it: the user's
//! options unchanged, plus exactly what SPE needs (shared memfd RAM of the
//! user's `-m` size as the machine's memory backend, `spe=on` and
//! `spe-socket=` on the `-cpu`), and what the backend must be told (the
//! vCPU count of `-smp`, EL2 for `virtualization=on`). With `--spe-stock`
//! (an unpatched QEMU 10.2 or 11.1): the shared RAM, the generic vhost-user
//! device and the TCG plugin instead of `spe=on`.

use std::path::{Path, PathBuf};

use spe_protocol::profile::CpuProfile;

/// The options that take no argument in QEMU 10.0 and 10.2 (the `DEF()`
/// lines of `qemu-options.hx` without `HAS_ARG`; 10.2 drops `-old-param`,
/// which it then refuses itself); every other option takes one.
const NO_ARG: &[&str] = &[
    "h",
    "help",
    "version",
    "mem-prealloc",
    "snapshot",
    "usb",
    "nographic",
    "full-screen",
    "win2k-hack",
    "no-fd-bootchk",
    "preconfig",
    "S",
    "s",
    "enable-kvm",
    "xen-attach",
    "xen-domid-restrict",
    "no-reboot",
    "no-shutdown",
    "daemonize",
    "only-migratable",
    "nodefaults",
    "semihosting",
    "old-param",
    "no-user-config",
    "enable-sync-profile",
    "perfmap",
    "jitdump",
];

/// The id of the memory backend `spe-qemu` adds.
pub const RAM_ID: &str = "spe-ram";

/// `virt`'s RAM without `-m` (QEMU's `default_ram_size`).
const DEFAULT_RAM: u64 = 128 << 20;

/// `spe-qemu`'s own options, all `--spe-*`, taken out of the command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpeOptions {
    /// `--spe-cpu`: the core, for the backend (`vhost-device-spe --cpu`)
    /// and, when the command line has no `-cpu`, for QEMU.
    pub cpu: Option<CpuProfile>,
    /// `--spe-log FILE`: the backend's log (else a private file, shown
    /// when QEMU fails).
    pub log: Option<PathBuf>,
    /// `--spe-control-socket PATH`: the backend's control socket.
    pub control_socket: Option<PathBuf>,
    /// `--spe-qemu PATH`: the patched QEMU to run.
    pub qemu: Option<PathBuf>,
    /// `--spe-backend PATH`: the `vhost-device-spe` to run.
    pub backend: Option<PathBuf>,
    /// `--spe-record DIR`: the backend keeps every record there
    /// (`vhost-device-spe report DIR`).
    pub record: Option<PathBuf>,
    /// `--spe-stock`: an unpatched QEMU (10.2, 11.1), the paravirtual device
    /// and the TCG plugin as its sample source.
    pub stock: bool,
    /// `--spe-plugin PATH`: the TCG plugin (`libspe_plugin.so`).
    pub plugin: Option<PathBuf>,
    /// `--spe-guest-control`: the guest control port, a virtio-serial port
    /// through which the guest arms faults for its own VM.
    pub guest_control: bool,
    /// `--spe-guest-ghz N`: the guest's clock counts N instructions a
    /// nanosecond (`-icount shift=-log2(N),sleep=off`).
    pub guest_ghz: Option<u32>,
    /// `--spe-help`.
    pub help: bool,
}

/// The rates `--spe-guest-ghz` takes: the series' `-icount` shifts 0 to -3.
pub const GUEST_GHZ: &[u32] = &[1, 2, 4, 8];

/// QEMU's `-icount` value for a guest clock of `ghz` instructions a
/// nanosecond: the shift fixed, so that a guest second is always that
/// many instructions, idle time included (`sleep=off`).
pub fn icount_for_ghz(ghz: u32) -> String {
    format!("shift={},sleep=off", -(ghz.trailing_zeros() as i32))
}

/// The stock path's sockets: the vhost-user device's and the plugin's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stock {
    pub plugin: PathBuf,
    pub plugin_socket: PathBuf,
}

/// QEMU 10.2's user-creatable generic vhost-user device.
pub const STOCK_DEVICE: &str = "vhost-user-test-device-pci";

/// What to run: QEMU's arguments and the backend's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub qemu_args: Vec<String>,
    pub backend_args: Vec<String>,
    /// What the user should know before the guest boots.
    pub notes: Vec<String>,
}

#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    #[error("{0} needs a value")]
    MissingValue(String),
    #[error("unknown option {0} (spe-qemu's own options: spe-qemu --spe-help)")]
    UnknownSpeOption(String),
    #[error("--spe-cpu {0}: not a profile of vhost-device-spe ({list})", list = CpuProfile::names())]
    UnknownProfile(String),
    #[error("no -M/-machine: spe-qemu gives SPE to the virt machine (-M virt)")]
    NoMachine,
    #[error("machine {0:?}: spe-qemu gives SPE to the virt machine only (-M virt)")]
    NotVirt(String),
    #[error(
        "accelerator {0:?}: SPE is modelled under TCG only (the model runs in \
         vhost-device-spe); use -accel tcg or leave the accelerator out"
    )]
    NotTcg(String),
    #[error(
        "no -cpu: virt's default CPU (cortex-a15) has no SPE; name one of \
         the cores vhost-device-spe models ({list}) with -cpu or --spe-cpu",
        list = CpuProfile::names()
    )]
    NoCpu,
    #[error(
        "no -cpu: virt's default CPU (cortex-a15) is 32-bit; name an AArch64 \
         CPU with -cpu (the plugin samples AArch64 guests)"
    )]
    NoCpuStock,
    #[error(
        "-cpu {0}: vhost-device-spe models no such core; SPE is offered on \
         -cpu {list}",
        list = CpuProfile::names()
    )]
    NoProfile(String),
    #[error(
        "--spe-cpu {spe} with -cpu {cpu}: the backend and QEMU must be the same \
         core; give one of them"
    )]
    OtherCpu { spe: CpuProfile, cpu: String },
    #[error("-cpu {0}: spe-qemu sets spe=, pmu-ss= and spe-socket= itself")]
    CpuHasSpe(String),
    #[error(
        "memory backend {0:?}: guest RAM must be a memory-backend-memfd or \
         memory-backend-file with share=on (the backend writes records straight \
         into it), or leave it to spe-qemu"
    )]
    UnsharedMemoryBackend(String),
    #[error("memory backend {0:?} is not an -object of this command line")]
    UnknownMemoryBackend(String),
    #[error("{option} {value:?}: {why}")]
    BadValue {
        option: &'static str,
        value: String,
        why: &'static str,
    },
}

/// Splits `--spe-*` options (`--spe-x V` or `--spe-x=V`) from QEMU's.
pub fn split_spe_options(args: &[String]) -> Result<(SpeOptions, Vec<String>), Error> {
    let mut spe = SpeOptions::default();
    let mut rest = Vec::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let Some(name) = a.strip_prefix("--spe-") else {
            rest.push(a.clone());
            continue;
        };
        if name == "help" {
            spe.help = true;
            continue;
        }
        if name == "stock" {
            spe.stock = true;
            continue;
        }
        if name == "guest-control" {
            spe.guest_control = true;
            continue;
        }
        let (name, inline) = match name.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (name, None),
        };
        let value = match inline {
            Some(v) => v,
            None => it
                .next()
                .cloned()
                .ok_or_else(|| Error::MissingValue(format!("--spe-{name}")))?,
        };
        match name {
            "cpu" => match CpuProfile::from_name(&value) {
                Some(p) => spe.cpu = Some(p),
                None => return Err(Error::UnknownProfile(value)),
            },
            "log" => spe.log = Some(value.into()),
            "control-socket" => spe.control_socket = Some(value.into()),
            "qemu" => spe.qemu = Some(value.into()),
            "backend" => spe.backend = Some(value.into()),
            "record" => spe.record = Some(value.into()),
            "plugin" => spe.plugin = Some(value.into()),
            "guest-ghz" => match value.parse() {
                Ok(n) if GUEST_GHZ.contains(&n) => spe.guest_ghz = Some(n),
                _ => {
                    return Err(Error::BadValue {
                        option: "--spe-guest-ghz",
                        value,
                        why: "instructions a nanosecond: 1, 2, 4 or 8",
                    })
                }
            },
            _ => return Err(Error::UnknownSpeOption(format!("--spe-{name}"))),
        }
    }
    Ok((spe, rest))
}

/// An option's name without its one or two leading dashes.
fn option_name(arg: &str) -> Option<&str> {
    let name = arg.strip_prefix("--").or_else(|| arg.strip_prefix('-'))?;
    (!name.is_empty()).then_some(name)
}

/// True for a command line that only asks QEMU for help or its version:
/// run as it is, with no backend.
/// Whether QEMU's arguments ask for QEMU's help (`-h`, `-help`,
/// `--help`): spe-qemu prints its own first.
pub fn asks_for_help(args: &[String]) -> bool {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match option_name(a) {
            Some("h" | "help") => return true,
            // An option's value (`-append --help`) is not an option.
            Some(name) if !NO_ARG.contains(&name) => {
                it.next();
            }
            _ => {}
        }
    }
    false
}

pub fn asks_only_for_information(args: &[String]) -> bool {
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let Some(name) = option_name(a) else {
            continue;
        };
        if matches!(name, "h" | "help" | "version") {
            return true;
        }
        if NO_ARG.contains(&name) {
            continue;
        }
        // `-M help`, `-cpu help`, `-device virtio-net,help`, ...
        match it.next() {
            Some(v) if name != "append" && (v == "help" || v.ends_with(",help")) => return true,
            _ => {}
        }
    }
    false
}

/// The comma-separated parts of a QEMU option value (`,,` is a literal
/// comma, as QEMU's option parser reads it).
fn parts(value: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut chars = value.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ',' {
            if chars.peek() == Some(&',') {
                chars.next();
                out.last_mut().unwrap().push(',');
            } else {
                out.push(String::new());
            }
        } else {
            out.last_mut().unwrap().push(c);
        }
    }
    out
}

/// The value of `key=` in `value`'s parts; the first part without `=` is
/// `implied` (QEMU's implied option name, e.g. `type` for `-machine`).
fn prop(value: &str, key: &str, implied: &str) -> Option<String> {
    parts(value)
        .into_iter()
        .enumerate()
        .find_map(|(i, p)| match p.split_once('=') {
            Some((k, v)) if k == key => Some(v.to_string()),
            None if i == 0 && key == implied && !p.is_empty() => Some(p),
            _ => None,
        })
}

fn is_on(v: &str) -> bool {
    matches!(v, "on" | "yes" | "true" | "y")
}

/// `-m`'s size in bytes: a number with an optional K, M, G, T suffix
/// (MiB without one, as QEMU reads `-m`).
fn ram_bytes(value: &str) -> Result<u64, Error> {
    let bad = |why| Error::BadValue {
        option: "-m",
        value: value.to_string(),
        why,
    };
    let size = prop(value, "size", "size").ok_or(bad("no size"))?;
    let s = size.trim_end_matches(['B', 'b']);
    let (num, shift) = match s.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(bad("unknown size suffix")),
            };
            (&s[..i], shift)
        }
        _ => (s, 20),
    };
    let n: f64 = num.parse().map_err(|_| bad("not a size"))?;
    let bytes = n * (1u64 << shift) as f64;
    if !(bytes >= 1.0 && bytes < u64::MAX as f64) || bytes.fract() != 0.0 {
        return Err(bad("not a whole number of bytes"));
    }
    Ok(bytes as u64)
}

/// `-smp`'s CPU count: `cpus=` (or the bare number), else the product of
/// the topology, as QEMU computes it.
fn smp_cpus(value: &str) -> Result<u32, Error> {
    let bad = |why| Error::BadValue {
        option: "-smp",
        value: value.to_string(),
        why,
    };
    let num = |v: String| v.parse::<u32>().map_err(|_| bad("not a number"));
    if let Some(n) = prop(value, "cpus", "cpus") {
        return num(n);
    }
    let mut n = 1u32;
    for key in [
        "drawers", "books", "sockets", "dies", "clusters", "modules", "cores", "threads",
    ] {
        if let Some(v) = prop(value, key, "") {
            n = n.checked_mul(num(v)?).ok_or(bad("too many CPUs"))?;
        }
    }
    Ok(n)
}

/// Whether the memory backend `id`, among the `-object` values
/// `objects`, is guest RAM the backend can map: a memfd or a file, shared.
fn shared_ram(objects: &[String], id: &str) -> Result<(), Error> {
    let obj = objects
        .iter()
        .find(|o| prop(o, "id", "").as_deref() == Some(id))
        .ok_or_else(|| Error::UnknownMemoryBackend(id.to_string()))?;
    let kind = prop(obj, "qom-type", "qom-type").unwrap_or_default();
    let shared = prop(obj, "share", "").is_some_and(|v| is_on(&v));
    if matches!(
        kind.as_str(),
        "memory-backend-memfd" | "memory-backend-file"
    ) && shared
    {
        Ok(())
    } else {
        Err(Error::UnsharedMemoryBackend(id.to_string()))
    }
}

/// Rewrites QEMU's command line (`spe-qemu`'s own options already taken
/// out) for a backend listening on `socket`. Guest RAM the user already
/// gives as shared memory backends (`memory-backend=` on the machine, or
/// `-numa node,memdev=` per node, as virtme-ng does for virtiofs) is
/// kept; otherwise `spe-qemu` adds one of the `-m` size.
pub fn plan(
    args: &[String],
    spe: &SpeOptions,
    socket: &Path,
    stock: Option<&Stock>,
) -> Result<Plan, Error> {
    let mut out: Vec<String> = Vec::with_capacity(args.len() + 4);
    // Indices into `out` of the last -machine and -cpu values.
    let (mut machine, mut cpu, mut machine_type) = (None, None, None);
    let (mut ram, mut vcpus, mut el2) = (DEFAULT_RAM, 1u32, false);
    // The user's -object values, and the memory backends that are RAM.
    let (mut objects, mut user_ram) = (Vec::new(), Vec::new());
    let mut it = args.iter();
    while let Some(a) = it.next() {
        out.push(a.clone());
        let Some(name) = option_name(a) else {
            continue; // a disk image, as QEMU takes it
        };
        if NO_ARG.contains(&name) {
            if name == "enable-kvm" {
                return Err(Error::NotTcg("kvm".into()));
            }
            continue;
        }
        let value = it
            .next()
            .ok_or_else(|| Error::MissingValue(a.clone()))?
            .clone();
        match name {
            "M" | "machine" => {
                if let Some(id) = prop(&value, "memory-backend", "type") {
                    user_ram.push(id);
                }
                if let Some(acc) = prop(&value, "accel", "type").filter(|a| a != "tcg") {
                    return Err(Error::NotTcg(acc));
                }
                if let Some(v) = prop(&value, "virtualization", "type") {
                    el2 = is_on(&v);
                }
                if let Some(t) = prop(&value, "type", "type") {
                    if t != "virt" && !t.starts_with("virt-") {
                        return Err(Error::NotVirt(t));
                    }
                    machine_type = Some(t);
                }
                machine = Some(out.len());
            }
            "accel" => {
                let acc = prop(&value, "accel", "accel").unwrap_or_default();
                if acc != "tcg" {
                    return Err(Error::NotTcg(acc));
                }
            }
            "cpu" => {
                if parts(&value).iter().any(|p| {
                    p.starts_with("spe=")
                        || p.starts_with("pmu-ss=")
                        || p.starts_with("spe-socket=")
                }) {
                    return Err(Error::CpuHasSpe(value));
                }
                cpu = Some(out.len());
            }
            "m" => ram = ram_bytes(&value)?,
            "object" => objects.push(value.clone()),
            "numa" => {
                if let Some(id) = prop(&value, "memdev", "type") {
                    user_ram.push(id);
                }
            }
            "smp" => vcpus = smp_cpus(&value)?,
            "icount" if spe.guest_ghz.is_some() => {
                return Err(Error::BadValue {
                    option: "--spe-guest-ghz",
                    value,
                    why: "sets -icount itself: leave out -icount",
                })
            }
            _ => {}
        }
        out.push(value);
    }
    if let Some(ghz) = spe.guest_ghz {
        // An unpatched QEMU has no negative shift (the series' icount
        // patch): it refuses the value itself.
        out.push("-icount".into());
        out.push(icount_for_ghz(ghz));
    }
    let machine = machine
        .filter(|_| machine_type.is_some())
        .ok_or(Error::NoMachine)?;
    let profile = match (cpu, spe.cpu) {
        (None, None) if stock.is_some() => return Err(Error::NoCpuStock),
        (None, None) => return Err(Error::NoCpu),
        (None, Some(p)) => {
            out.push("-cpu".into());
            out.push(p.qemu_cpu().into());
            p
        }
        (Some(i), p) => {
            let model = parts(&out[i]).swap_remove(0);
            match (CpuProfile::from_name(&model), p) {
                (Some(of_cpu), Some(p)) if p != of_cpu => {
                    return Err(Error::OtherCpu { spe: p, cpu: model })
                }
                (Some(of_cpu), _) => of_cpu,
                // The stock path's guest CPU has no SPE: the device's ID
                // values are --spe-cpu's, or a Neoverse N1's.
                (None, p) if stock.is_some() => p.unwrap_or(CpuProfile::NeoverseN1),
                (None, _) => return Err(Error::NoProfile(model)),
            }
        }
    };
    let cpu = cpu.unwrap_or(out.len() - 1);
    if stock.is_none() {
        out[cpu].push_str(&format!(",spe=on,spe-socket={}", socket.display()));
    }
    if user_ram.is_empty() {
        out[machine].push_str(&format!(",memory-backend={RAM_ID}"));
        out.push("-object".into());
        out.push(format!(
            "memory-backend-memfd,id={RAM_ID},size={ram},share=on"
        ));
    }
    for id in &user_ram {
        shared_ram(&objects, id)?;
    }

    let mut backend_args = match stock {
        None => vec!["--qemu-socket".to_string(), socket.display().to_string()],
        Some(st) => {
            out.extend([
                "-chardev".into(),
                format!("socket,id=spe0,path={}", socket.display()),
                "-device".into(),
                format!(
                    "{STOCK_DEVICE},chardev=spe0,virtio-id={},num_vqs={},config_size={}",
                    spe_protocol::virtio::VIRTIO_ID_SPE_STOCK,
                    spe_protocol::virtio::NUM_QUEUES,
                    spe_protocol::virtio::VIRTIO_SPE_CONFIG_SIZE
                ),
                "-plugin".into(),
                format!(
                    "{},socket={}",
                    st.plugin.display(),
                    st.plugin_socket.display()
                ),
            ]);
            vec![
                "--socket-path".to_string(),
                socket.display().to_string(),
                "--plugin-socket".into(),
                st.plugin_socket.display().to_string(),
            ]
        }
    };
    backend_args.extend([
        "--vcpus".into(),
        vcpus.to_string(),
        "--cpu".into(),
        profile.name().into(),
    ]);
    if el2 && stock.is_none() {
        backend_args.push("--el2".into());
    }
    if spe.guest_control {
        let path = socket.with_file_name("guest-control.sock");
        out.extend(spe_protocol::guest_port::qemu_args(&path));
        backend_args.push("--guest-control-socket".into());
        backend_args.push(path.display().to_string());
    }
    for (option, path) in [
        ("--control-socket", &spe.control_socket),
        ("--record", &spe.record),
    ] {
        if let Some(p) = path {
            backend_args.push(option.into());
            backend_args.push(p.display().to_string());
        }
    }
    let mut notes = Vec::new();
    if stock.is_some() {
        notes.push(format!(
            "the guest reaches SPE through the paravirtual device, ID {id} on \
                 an unpatched QEMU: load its driver with that ID (insmod \
                 virtio_spe.ko virtio_id={id}, from guest-driver/virtio_spe) and \
                 profile with perf record -e arm_spe_0//",
            id = spe_protocol::virtio::VIRTIO_ID_SPE_STOCK
        ));
    } else if !profile.has_e0pd() && !append_unmaps_kernel(&out) {
        // Without -kernel the boot loader of the guest's disk holds the
        // kernel's command line.
        let to = if out.iter().any(|a| option_name(a) == Some("kernel")) {
            "to -append"
        } else {
            "to the kernel command line of the guest's boot loader (Debian: \
             GRUB_CMDLINE_LINUX in /etc/default/grub, then update-grub)"
        };
        notes.push(format!(
            "a {profile} has no FEAT_E0PD: with KASLR on, Linux unmaps the \
             kernel at EL0 (KPTI) and its SPE driver refuses (\"profiling buffer \
             inaccessible. Try passing kpti=off\"), as on a real {profile}; add \
             kpti=off (or nokaslr) {to}"
        ));
    }
    Ok(Plan {
        qemu_args: out,
        backend_args,
        notes,
    })
}

/// Whether `-append` turns KPTI off (`kpti=off`, `kpti=0`) or KASLR,
/// which is what makes Linux unmap the kernel at EL0 on a core without
/// E0PD.
fn append_unmaps_kernel(args: &[String]) -> bool {
    args.windows(2)
        .filter(|w| option_name(&w[0]) == Some("append"))
        .flat_map(|w| w[1].split_whitespace())
        .any(|p| matches!(p, "kpti=off" | "kpti=0" | "nokaslr"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn plan_of(s: &str) -> Result<Plan, Error> {
        let (spe, rest) = split_spe_options(&args(s))?;
        let stock = spe.stock.then(|| Stock {
            plugin: "/opt/lib/libspe_plugin.so".into(),
            plugin_socket: "/run/x/plugin.sock".into(),
        });
        plan(&rest, &spe, Path::new("/run/x/spe.sock"), stock.as_ref())
    }

    /// The stock path: the same command line gets the vhost-user device
    /// and the plugin instead of spe=on, and the backend serves both.
    #[test]
    fn the_stock_command_line() {
        let p = plan_of(
            "--spe-stock -M virt -cpu max -m 1G -smp 2 -nographic -kernel Image \
             -append console=ttyAMA0",
        )
        .unwrap();
        assert_eq!(
            p.qemu_args,
            args(
                "-M virt,memory-backend=spe-ram -cpu max -m 1G -smp 2 -nographic \
                 -kernel Image -append console=ttyAMA0 \
                 -object memory-backend-memfd,id=spe-ram,size=1073741824,share=on \
                 -chardev socket,id=spe0,path=/run/x/spe.sock \
                 -device vhost-user-test-device-pci,chardev=spe0,virtio-id=38,num_vqs=2,config_size=64 \
                 -plugin /opt/lib/libspe_plugin.so,socket=/run/x/plugin.sock"
            )
        );
        assert_eq!(
            p.backend_args,
            args(
                "--socket-path /run/x/spe.sock --plugin-socket /run/x/plugin.sock \
                 --vcpus 2 --cpu max"
            )
        );
        assert!(
            p.notes[0].contains("virtio_spe.ko virtio_id=38"),
            "{:?}",
            p.notes
        );
        // Any AArch64 CPU: the device's ID values are a Neoverse N1's
        // unless --spe-cpu says otherwise; no -cpu at all is refused.
        let p = plan_of("--spe-stock -M virt -cpu cortex-a72 -kernel I").unwrap();
        assert!(p.qemu_args.contains(&"cortex-a72".to_string()));
        assert_eq!(p.backend_args.last().unwrap(), "neoverse-n1");
        let p = plan_of("--spe-stock --spe-cpu max -M virt -cpu cortex-a72 -kernel I").unwrap();
        assert_eq!(p.backend_args.last().unwrap(), "max");
        assert_eq!(
            plan_of("--spe-stock -M virt -kernel I"),
            Err(Error::NoCpuStock)
        );
    }

    /// The guest control port: the named virtio-serial port on a socket
    /// beside the backend's, which the backend serves.
    #[test]
    fn the_guest_clock_is_a_fixed_icount() {
        let p = plan_of("--spe-guest-ghz 4 -M virt -cpu max -kernel Image").unwrap();
        let i = p.qemu_args.iter().position(|a| a == "-icount").unwrap();
        assert_eq!(p.qemu_args[i + 1], "shift=-2,sleep=off");
        assert_eq!(icount_for_ghz(1), "shift=0,sleep=off");
        assert_eq!(icount_for_ghz(8), "shift=-3,sleep=off");
        for bad in ["3", "16", "0", "fast"] {
            assert!(matches!(
                plan_of(&format!("--spe-guest-ghz {bad} -M virt -cpu max")),
                Err(Error::BadValue {
                    option: "--spe-guest-ghz",
                    ..
                })
            ));
        }
        assert!(matches!(
            plan_of("--spe-guest-ghz 2 -M virt -cpu max -icount shift=0"),
            Err(Error::BadValue {
                option: "--spe-guest-ghz",
                ..
            })
        ));
    }

    #[test]
    fn the_guest_control_port() {
        for stock in ["", "--spe-stock"] {
            let p = plan_of(&format!(
                "{stock} --spe-guest-control -M virt -cpu max -kernel Image"
            ))
            .unwrap();
            let q = p.qemu_args.join(" ");
            assert!(
                q.ends_with(
                    "-chardev socket,id=spe-guest-control,path=/run/x/guest-control.sock,reconnect-ms=1000 \
                     -device virtio-serial-pci,id=spe-serial \
                     -device virtserialport,bus=spe-serial.0,chardev=spe-guest-control,\
                     name=org.vhost-device-spe.control"
                ),
                "{q}"
            );
            let b = p.backend_args.join(" ");
            assert!(
                b.ends_with("--guest-control-socket /run/x/guest-control.sock"),
                "{b}"
            );
        }
        let p = plan_of("-M virt -cpu max -kernel Image").unwrap();
        assert!(!p.qemu_args.join(" ").contains("virtserialport"));
        assert!(!p.backend_args.join(" ").contains("guest-control"));
    }

    /// QEMU's documented virt command line, rewritten.
    #[test]
    fn the_docs_command_line() {
        let p = plan_of(
            "-M virt -cpu max -m 1G -smp 2 -nographic -kernel Image \
             -initrd rootfs.cpio -append console=ttyAMA0",
        )
        .unwrap();
        assert_eq!(
            p.qemu_args,
            args(
                "-M virt,memory-backend=spe-ram -cpu max,spe=on,spe-socket=/run/x/spe.sock \
                 -m 1G -smp 2 -nographic -kernel Image -initrd rootfs.cpio \
                 -append console=ttyAMA0 \
                 -object memory-backend-memfd,id=spe-ram,size=1073741824,share=on"
            )
        );
        assert_eq!(
            p.backend_args,
            args("--qemu-socket /run/x/spe.sock --vcpus 2 --cpu max")
        );
        assert!(p.notes.is_empty(), "{:?}", p.notes);
    }

    /// A distribution's image booted as libvirt boots it: the firmware's
    /// pflash pair, the disk on virtio-blk, -boot, no -kernel. All of it
    /// reaches QEMU unchanged, and the KPTI note names the boot loader.
    #[test]
    fn a_distributions_uefi_command_line() {
        let user = "-M virt -cpu neoverse-n1 -m 2G -smp 2 -nographic \
             -drive if=pflash,format=raw,unit=0,readonly=on,file=AAVMF_CODE.fd \
             -drive if=pflash,format=raw,unit=1,file=vars.fd \
             -drive if=none,id=hd0,format=qcow2,file=debian-13-genericcloud-arm64.qcow2 \
             -device virtio-blk-pci,drive=hd0 -boot order=c";
        let p = plan_of(user).unwrap();
        let kept: Vec<String> = args(user)
            .into_iter()
            .filter(|a| !a.starts_with("virt") && !a.starts_with("neoverse"))
            .collect();
        for a in &kept {
            assert!(p.qemu_args.contains(a), "{a} lost: {:?}", p.qemu_args);
        }
        assert!(!p.qemu_args.contains(&"-kernel".to_string()));
        assert_eq!(p.notes.len(), 1, "{:?}", p.notes);
        assert!(p.notes[0].contains("GRUB_CMDLINE_LINUX"), "{:?}", p.notes);
        // With -bios and -kernel the note names -append.
        let p = plan_of("-M virt -cpu neoverse-n1 -bios QEMU_EFI.fd -kernel I").unwrap();
        assert!(p
            .qemu_args
            .windows(2)
            .any(|w| w == ["-bios", "QEMU_EFI.fd"]));
        assert!(p.notes[0].ends_with("to -append"), "{:?}", p.notes);
    }

    /// One core for both: the backend's profile is the -cpu's, or
    /// --spe-cpu adds the -cpu; cores it does not model and two different
    /// ones are refused; a core without E0PD gets the KPTI note unless
    /// -append turns KPTI or KASLR off.
    #[test]
    fn the_backend_models_the_cpu_qemu_runs() {
        let backend_cpu = |p: &Plan| p.backend_args.last().cloned().unwrap();
        for (line, qemu_cpu, profile, note) in [
            ("-cpu neoverse-n1", "neoverse-n1", "neoverse-n1", true),
            (
                "-cpu neoverse-v1,sve=off",
                "neoverse-v1,sve=off",
                "neoverse-v1",
                true,
            ),
            (
                "-cpu max,pauth-impdef=on",
                "max,pauth-impdef=on",
                "max",
                false,
            ),
            ("--spe-cpu neoverse-n1", "neoverse-n1", "neoverse-n1", true),
            ("--spe-cpu max -cpu max", "max", "max", false),
            (
                "-cpu neoverse-n1 -append kpti=off",
                "neoverse-n1",
                "neoverse-n1",
                false,
            ),
            (
                "-cpu neoverse-n1 -append nokaslr",
                "neoverse-n1",
                "neoverse-n1",
                false,
            ),
            (
                "-cpu neoverse-n1 -append kpti=on",
                "neoverse-n1",
                "neoverse-n1",
                true,
            ),
        ] {
            let p = plan_of(&format!("-M virt {line}")).unwrap();
            let i = p.qemu_args.iter().position(|a| a == "-cpu").unwrap();
            assert_eq!(
                p.qemu_args[i + 1],
                format!("{qemu_cpu},spe=on,spe-socket=/run/x/spe.sock"),
                "{line}"
            );
            assert_eq!(backend_cpu(&p), profile, "{line}");
            assert_eq!(p.notes.len(), usize::from(note), "{line}: {:?}", p.notes);
            if note {
                assert!(p.notes[0].contains("kpti=off"), "{:?}", p.notes);
            }
        }
        for (line, err) in [
            ("-cpu cortex-a57", Error::NoProfile("cortex-a57".into())),
            ("-cpu host", Error::NoProfile("host".into())),
            (
                "--spe-cpu neoverse-n1 -cpu max",
                Error::OtherCpu {
                    spe: CpuProfile::NeoverseN1,
                    cpu: "max".into(),
                },
            ),
        ] {
            assert_eq!(plan_of(&format!("-M virt {line}")), Err(err), "{line}");
        }
    }

    /// Rows: command line, then the memfd size, the backend's --vcpus and
    /// whether it gets --el2.
    #[test]
    fn sizes_counts_and_el2() {
        let rows: &[(&str, u64, u32, bool)] = &[
            ("-M virt -cpu max", 128 << 20, 1, false),
            ("-M virt -cpu max -m 512", 512 << 20, 1, false),
            (
                "-M virt -cpu max -m size=2G,slots=2,maxmem=4G",
                2 << 30,
                1,
                false,
            ),
            ("-M virt -cpu max -m 1.5G", 3 << 29, 1, false),
            ("-M virt -cpu max -m 262144k", 256 << 20, 1, false),
            ("-M virt -cpu max -smp 4", 128 << 20, 4, false),
            (
                "-M virt -cpu max -smp cpus=3,maxcpus=4",
                128 << 20,
                3,
                false,
            ),
            (
                "-M virt -cpu max -smp sockets=2,cores=2,threads=2",
                128 << 20,
                8,
                false,
            ),
            ("-M virt,virtualization=on -cpu max", 128 << 20, 1, true),
            (
                "-machine type=virt,virtualization=off -cpu max",
                128 << 20,
                1,
                false,
            ),
            (
                "--machine virt-10.0,gic-version=3 --cpu neoverse-n1",
                128 << 20,
                1,
                false,
            ),
            ("-M virt -M virtualization=on -cpu max", 128 << 20, 1, true),
            (
                "-M virt -accel tcg,thread=multi -cpu max",
                128 << 20,
                1,
                false,
            ),
        ];
        for &(line, ram, vcpus, el2) in rows {
            let p = plan_of(line).unwrap_or_else(|e| panic!("{line}: {e}"));
            let object = p.qemu_args.last().unwrap();
            assert!(
                object.contains(&format!(",size={ram},")),
                "{line}: {object}"
            );
            let b = p.backend_args.join(" ");
            assert!(b.contains(&format!("--vcpus {vcpus} ")), "{line}: {b}");
            assert_eq!(b.contains("--el2"), el2, "{line}: {b}");
        }
    }

    #[test]
    fn own_options_are_taken_out() {
        let p = plan_of(
            "--spe-cpu max -M virt --spe-log=/tmp/b.log -cpu max \
             --spe-control-socket /tmp/c.sock --spe-record /tmp/r -nographic",
        )
        .unwrap();
        assert!(!p.qemu_args.iter().any(|a| a.starts_with("--spe")));
        assert_eq!(
            p.backend_args,
            args(
                "--qemu-socket /run/x/spe.sock --vcpus 1 --cpu max \
                 --control-socket /tmp/c.sock --record /tmp/r"
            )
        );
        let (spe, _) = split_spe_options(&args("--spe-log=/tmp/b.log --spe-help")).unwrap();
        assert_eq!(spe.log.as_deref(), Some(Path::new("/tmp/b.log")));
        assert!(spe.help);
    }

    /// A value that looks like an option is still the value: QEMU's
    /// options take their argument whatever it looks like.
    /// Guest RAM the command line already shares (virtme-ng's virtiofs
    /// set-up: a shared memfd as the NUMA node's memory; or the machine's
    /// memory-backend=) stays as it is, and none is added.
    #[test]
    fn shared_ram_of_the_user_is_kept() {
        for line in [
            "-M virt -cpu max -m 2G -object memory-backend-memfd,id=mem,size=2G,share=on \
             -numa node,memdev=mem",
            "-M virt,memory-backend=r -cpu max -object memory-backend-file,id=r,size=1G,\
             mem-path=/dev/shm/r,share=on",
        ] {
            let p = plan_of(line).unwrap();
            let joined = p.qemu_args.join(" ");
            assert!(!joined.contains(RAM_ID), "{joined}");
            let want: Vec<&str> = line
                .split_whitespace()
                .map(|a| match a {
                    "max" => "max,spe=on,spe-socket=/run/x/spe.sock",
                    a => a,
                })
                .collect();
            assert_eq!(joined, want.join(" "));
        }
    }

    #[test]
    fn values_are_not_options() {
        let p = plan_of("-M virt -cpu max -append -M -name -cpu").unwrap();
        assert!(p.qemu_args.contains(&"-name".to_string()));
        assert!(p.qemu_args[1].ends_with("memory-backend=spe-ram"));
        assert!(p.qemu_args[3].ends_with("spe-socket=/run/x/spe.sock"));
    }

    #[test]
    fn what_cannot_have_spe_is_refused() {
        let rows: &[(&str, Error)] = &[
            ("-cpu max", Error::NoMachine),
            ("-M accel=tcg -cpu max", Error::NoMachine),
            ("-M q35 -cpu max", Error::NotVirt("q35".into())),
            ("-M sbsa-ref -cpu max", Error::NotVirt("sbsa-ref".into())),
            ("-M virt", Error::NoCpu),
            ("-M virt -cpu host -enable-kvm", Error::NotTcg("kvm".into())),
            ("-M virt -cpu host -accel kvm", Error::NotTcg("kvm".into())),
            ("-M virt,accel=hvf -cpu max", Error::NotTcg("hvf".into())),
            (
                "-M virt -cpu max,spe=on",
                Error::CpuHasSpe("max,spe=on".into()),
            ),
            (
                "-M virt,memory-backend=r -cpu max",
                Error::UnknownMemoryBackend("r".into()),
            ),
            (
                "-M virt,memory-backend=r -cpu max -object memory-backend-ram,id=r,size=1G",
                Error::UnsharedMemoryBackend("r".into()),
            ),
            (
                "-M virt -cpu max -object memory-backend-memfd,id=m,size=1G \
                 -numa node,memdev=m",
                Error::UnsharedMemoryBackend("m".into()),
            ),
            ("-M virt -cpu max -m", Error::MissingValue("-m".into())),
            ("--spe-cpu", Error::MissingValue("--spe-cpu".into())),
            (
                "--spe-cpu cortex-a57",
                Error::UnknownProfile("cortex-a57".into()),
            ),
            (
                "--spe-frobnicate 1",
                Error::UnknownSpeOption("--spe-frobnicate".into()),
            ),
            (
                "-M virt -cpu max -m lots",
                Error::BadValue {
                    option: "-m",
                    value: "lots".into(),
                    why: "unknown size suffix",
                },
            ),
            (
                "-M virt -cpu max -smp cpus=x",
                Error::BadValue {
                    option: "-smp",
                    value: "cpus=x".into(),
                    why: "not a number",
                },
            ),
        ];
        for (line, want) in rows {
            assert_eq!(plan_of(line).as_ref(), Err(want), "{line}");
        }
    }

    #[test]
    fn help_and_version_go_to_qemu_unchanged() {
        for line in [
            "-h",
            "--help",
            "-version",
            "-M help",
            "-cpu help",
            "-device virtio-net,help",
        ] {
            assert!(asks_only_for_information(&args(line)), "{line}");
        }
        assert!(!asks_only_for_information(&args("-M virt -cpu max")));
    }

    #[test]
    fn qemus_help_options_ask_for_spe_qemus_help_too() {
        for line in ["-h", "-help", "--help", "-M virt --help"] {
            assert!(asks_for_help(&args(line)), "{line}");
        }
        for line in ["-M help", "-version", "-append --help", "-M virt"] {
            assert!(!asks_for_help(&args(line)), "{line}");
        }
    }

    #[test]
    fn commas_are_escaped_as_qemu_escapes_them() {
        assert_eq!(parts("a,,b,c"), ["a,b", "c"]);
        assert_eq!(prop("virt,x=1", "type", "type").as_deref(), Some("virt"));
        assert_eq!(
            prop("x=1,type=virt", "type", "type").as_deref(),
            Some("virt")
        );
    }
}
