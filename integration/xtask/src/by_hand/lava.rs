//! `cargo xtask lava [--kernel K]` (by hand): the SPE checks as a LAVA job
//! (`integration/lava/spe-job.yaml`), run by Debian's lava-dispatcher
//! (`lava-run`, no server) on a `qemu` device whose QEMU is `spe-qemu`
//! (`integration/lava/device.yaml`); then the same job on the patched QEMU
//! alone, the negative control, where no SPE check may pass. The guest
//! judges each check (`scenarios/lib/lava-check.sh`, and the SPE
//! kselftest suite's KTAP as `lava-suite.sh` reports it): a lab's results
//! database sees only what the guest reports. The suite arms its faults
//! through the guest control port (`--spe-guest-control`): nothing on the
//! host watches the job.

use crate::host::{missing_packages, privileged};
use crate::runner::Rig;
use crate::util::{run, Step};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::symlink;
use std::path::Path;
use std::process::{Command, Stdio};

/// What `lava-run` needs. bookworm's lava-dispatcher depends on
/// libguestfs and so on bookworm's QEMU 7.2 for x86, which the backports
/// QEMU tools the harness installs break: the x86 system emulator comes
/// from backports too. (Not `qemu-system-arm`: its qemu-system-aarch64
/// would shadow the stock path's on PATH.)
pub const INSTALL: &[&str] = &[
    "lava-dispatcher",
    "qemu-system-x86/bookworm-backports",
    "qemu-system-common/bookworm-backports",
    "qemu-system-data/bookworm-backports",
    "seabios/bookworm-backports",
];

/// The job and the device dictionary, in the repository.
pub const JOB: &str = "integration/lava/spe-job.yaml";
pub const DEVICE: &str = "integration/lava/device.yaml";

/// The guest's QEMU options on both devices (`spe-qemu` adds SPE).
const QEMU_OPTIONS: &[&str] = &[
    "-machine virt",
    "-cpu max",
    "-smp 2",
    "-m 2G",
    "-nographic",
    "-nic none",
    "-no-reboot",
];

/// The suite's own case (its exit status), and the prefix of its KTAP
/// cases (`lava-suite.sh`).
const SUITE: &str = "suite";
const SUITE_CASE: &str = "suite-";
/// Fault cases of the suite that must pass on the SPE device: every kind
/// but the two the model refuses (stage2 without EL2, granule-protection).
const SUITE_FAULTS_PASSING: usize = 15;

/// The cases whose pass explains a failed snapshot part or fork test: the
/// part or test again, waiting for perf to start (perf-test-spe.sh).
const SNAPSHOT_LATER: &str = "perf-test-perf_test_snapshot_later";
const FORK_LATER: &str = "perf-test-perf_test_fork_later";

/// Every test case the SPE device must pass (or skip), with the case
/// whose pass makes its failure an expected one: perf's snapshot part
/// and fork test act a fixed second after starting perf, and perf can
/// take longer than that to start in a guest whose clock is the host's
/// (perf_startup_ms in the log; the harness's run has a fixed icount).
const CASES: &[(&str, Option<&str>)] = &[
    ("spe-probe", None),
    ("spe-profile", None),
    ("spe-attributes", None),
    (SUITE, None),
    ("perf-test", None),
    ("perf-test-perf_test_trace", Some(SNAPSHOT_LATER)),
    ("perf-test-perf_test_fork", Some(FORK_LATER)),
    ("perf-test-perf_test_part_snapshot", Some(SNAPSHOT_LATER)),
    ("perf-test-perf_test_part_system_wide", None),
    (SNAPSHOT_LATER, None),
    (FORK_LATER, None),
];

/// The cases the plain QEMU must fail: every check that needs SPE.
const CONTROL_FAILS: &[&str] = &["spe-probe", "spe-profile", "spe-attributes", SUITE];

/// One test case as lava-run logged it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    pub definition: String,
    pub name: String,
    pub result: String,
}

/// The value of `"key": "value"` in one of lava-run's log lines (YAML
/// flow mappings with JSON-quoted strings).
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let start = line.find(&format!("\"{key}\": \""))? + key.len() + 5;
    let len = line[start..].find('"')?;
    Some(&line[start..start + len])
}

/// The test cases in lava-run's log (its stderr): the `results` lines.
pub fn cases(log: &str) -> Vec<Case> {
    log.lines()
        .filter(|l| field(l, "lvl") == Some("results"))
        .filter_map(|l| {
            Some(Case {
                definition: field(l, "definition")?.to_string(),
                name: field(l, "case")?.to_string(),
                result: field(l, "result")?.to_string(),
            })
        })
        .collect()
}

/// `{{ name }}` replaced by each value.
fn render(template: &str, values: &[(&str, String)]) -> String {
    values.iter().fold(template.to_string(), |t, (k, v)| {
        t.replace(&format!("{{{{ {k} }}}}"), v)
    })
}

/// The job for `kernel` and `ramdisk` (local files).
pub fn job(template: &str, name: &str, kernel: &Path, ramdisk: &Path) -> String {
    render(
        template,
        &[
            ("kernel_name", name.to_string()),
            ("kernel_url", format!("file://{}", kernel.display())),
            ("ramdisk_url", format!("file://{}", ramdisk.display())),
        ],
    )
}

/// The device dictionary of a QEMU `command` with `options` (before the
/// guest's own).
pub fn device(template: &str, command: &Path, options: &[String]) -> String {
    let all: Vec<String> = options
        .iter()
        .cloned()
        .chain(QEMU_OPTIONS.iter().map(|o| o.to_string()))
        .collect();
    render(
        template,
        &[
            ("qemu_command", command.display().to_string()),
            // A JSON list is a YAML flow sequence.
            (
                "qemu_options",
                serde_json::to_string(&all).unwrap_or_default(),
            ),
        ],
    )
}

/// lava-dispatcher, unless lava-run is there.
fn install() -> Result<()> {
    if missing_packages(&["lava-dispatcher"]).is_empty() {
        return Ok(());
    }
    let step = Step::new("apt-get install lava-dispatcher (about 150 packages)");
    run(
        "apt-get install lava-dispatcher",
        privileged("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["-q", "-y", "--no-install-recommends", "install"])
            .args(INSTALL),
    )?;
    step.done("installed");
    Ok(())
}

/// One lava-run of the job on a device: its log and cases.
struct Outcome {
    rc: Option<i32>,
    cases: Vec<Case>,
}

/// Runs lava-run in `dir` (its log into `lava.log`).
fn lava_run(dir: &Path, job: &Path, device: &Path, job_id: u32) -> Result<Outcome> {
    let out = dir.join("output");
    let _ = fs::remove_dir_all(&out);
    fs::create_dir_all(&out)?;
    // LAVA probes `qemu-system-<arch> --version` on PATH (arm64: a name no
    // QEMU has) when Debian's qemu-system-arm is not installed.
    let path = format!(
        "{}:{}",
        dir.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    // timeout(1) signals its process group: lava-run, QEMU and the backend.
    let mut child = Command::new("timeout")
        .args(["5400", "lava-run", "--job-id"])
        .arg(job_id.to_string())
        .arg("--output-dir")
        .arg(&out)
        .arg("--device")
        .arg(device)
        .arg(job)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .context("running lava-run")?;
    let stderr = child.stderr.take().context("lava-run's stderr")?;
    let mut log = fs::File::create(dir.join("lava.log"))?;
    let mut text = String::new();
    for line in BufReader::new(stderr).lines() {
        let line = line?;
        writeln!(log, "{line}")?;
        text.push_str(&line);
        text.push('\n');
    }
    let status = child.wait()?;
    Ok(Outcome {
        rc: status.code(),
        cases: cases(&text),
    })
}

/// The results of the job's own test definition (`0_spe`), by case.
fn results(o: &Outcome) -> BTreeMap<String, String> {
    o.cases
        .iter()
        .filter(|c| c.definition.ends_with("_spe"))
        .map(|c| (c.name.clone(), c.result.clone()))
        .collect()
}

/// The TuxRun release the run was proven with (PyPI; its job templates
/// are tuxlava's, which it pulls in).
const TUXRUN: &str = "tuxrun==1.11.0";

/// The check TuxRun runs (its job is its own: one command, here ours).
const TUXRUN_CHECK: &str = "spe-profile";

/// TuxRun's `qemu-arm64` device with `--runtime null` (the host's
/// lava-run) on `qemu` (a script or binary run as `qemu-system-aarch64`
/// from PATH; the version probe gets the patched QEMU as
/// `qemu-system-arm64`): the result of its one command, our check.
fn tuxrun(dir: &Path, rig: &Rig, patched: &Path, qemu: &str, ramdisk: &Path) -> Result<String> {
    let venv = dir.parent().context("the lava folder")?.join("tuxrun-venv");
    crate::util::pip_venv(&venv, TUXRUN, "tuxrun")?;
    let _ = fs::remove_dir_all(dir);
    let shims = dir.join("bin");
    fs::create_dir_all(&shims)?;
    let aarch64 = shims.join("qemu-system-aarch64");
    fs::write(&aarch64, format!("#!/bin/sh\nexec {qemu} \"$@\"\n"))?;
    fs::set_permissions(
        &aarch64,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )?;
    symlink(patched, shims.join("qemu-system-arm64"))?;
    let results = dir.join("results.json");
    let path = format!(
        "{}:{}:{}",
        shims.display(),
        venv.join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("timeout")
        .args([
            "1800",
            "tuxrun",
            "--runtime",
            "null",
            "--device",
            "qemu-arm64",
        ])
        .arg(format!("--kernel=file://{}", rig.kernel.display()))
        .arg(format!("--rootfs=file://{}", ramdisk.display()))
        .args(["--parameters", "machine=virt", "cpu=max"])
        // Its devices log in as root: the guest asks for a login first.
        .args(["--boot-args", "spe.scenario=lava spe.login=1"])
        .args(["--timeouts", "deploy=5", "boot=5"])
        .arg("--save-outputs")
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .arg("--results")
        .arg(&results)
        .args([
            "--",
            "sh",
            "/scenarios/lib/lava-check.sh",
            TUXRUN_CHECK,
            TUXRUN_CHECK,
        ])
        .env("PATH", path)
        // With --runtime null its lava-run writes `output/` where it runs.
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .context("running tuxrun")?;
    fs::write(
        dir.join("tuxrun.log"),
        [out.stdout.as_slice(), out.stderr.as_slice()].concat(),
    )?;
    let json: serde_json::Value = fs::read_to_string(&results)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default();
    Ok(json["commands"][TUXRUN_CHECK]["result"]
        .as_str()
        .unwrap_or("missing")
        .to_string())
}

pub fn run_lava(rig: &Rig, repo: &Path, work: &Path) -> Result<bool> {
    if !is_root() {
        bail!("lava-run must run as root");
    }
    install()?;
    let kernel = rig.spec.name;
    let dir = work.join("lava").join(kernel);
    fs::create_dir_all(dir.join("bin"))?;
    let qemu = rig
        .launcher
        .parent()
        .context("the launcher's prefix")?
        .join(crate::install::QEMU_NAME);
    for name in ["qemu-system-aarch64", "qemu-system-arm64"] {
        let link = dir.join("bin").join(name);
        let _ = fs::remove_file(&link);
        symlink(&qemu, &link)?;
    }
    let ramdisk = dir.join("rootfs.cpio.gz");
    run(
        "gzip the initramfs",
        Command::new("sh")
            .arg("-c")
            .arg("gzip -1 -c \"$0\" > \"$1\"")
            .arg(&rig.initrd)
            .arg(&ramdisk),
    )?;
    let job_text = job(
        &fs::read_to_string(repo.join(JOB))?,
        kernel,
        &rig.kernel,
        &ramdisk,
    );
    let job_file = dir.join("job.yaml");
    fs::write(&job_file, job_text)?;
    let device_template = fs::read_to_string(repo.join(DEVICE))?;
    let mut spe_options: Vec<String> = [
        ("--spe-qemu", &qemu),
        ("--spe-backend", &rig.backend),
        ("--spe-log", &dir.join("backend.log")),
    ]
    .iter()
    .map(|(o, p)| format!("{o} {}", p.display()))
    .collect();
    // As the lab's device type: the guest control port, and a guest
    // clock that counts instructions (qemu-spe.jinja2).
    spe_options.push("--spe-guest-control".into());
    spe_options.push("--spe-guest-ghz 8".into());
    let mut runs = Vec::new();
    for (i, (name, command, options)) in [
        ("spe-qemu", rig.launcher.clone(), spe_options),
        ("plain", qemu.clone(), Vec::new()),
    ]
    .into_iter()
    .enumerate()
    {
        let d = dir.join(name);
        fs::create_dir_all(&d)?;
        let _ = fs::remove_file(d.join("bin"));
        symlink(dir.join("bin"), d.join("bin"))?;
        let device_file = d.join("device.yaml");
        fs::write(&device_file, device(&device_template, &command, &options))?;
        let step = Step::new(format!("lava-run: the SPE job on {name} ({kernel})"));
        // Job ids name lava-run's folders: ours, not another run's.
        let job_id = std::process::id() * 2 + i as u32;
        let o = lava_run(&d, &job_file, &device_file, job_id)?;
        step.done(&format!(
            "lava-run exit {:?}, {} test cases",
            o.rc,
            o.cases.len()
        ));
        runs.push(o);
    }
    let (spe, plain) = (&runs[0], &runs[1]);
    let (judged, mut table) = judge(&results(spe), &results(plain));
    let mut ok = judged && spe.rc == Some(0) && plain.rc == Some(0);
    // The same check through TuxRun, on both QEMUs.
    let step = Step::new(format!("TuxRun ({TUXRUN}, --runtime null): {TUXRUN_CHECK}"));
    let spe_shim = format!(
        "{} --spe-qemu {} --spe-backend {} --spe-log {}",
        rig.launcher.display(),
        qemu.display(),
        rig.backend.display(),
        dir.join("tuxrun-backend.log").display()
    );
    let tux_spe = tuxrun(
        &dir.join("tuxrun-spe-qemu"),
        rig,
        &qemu,
        &spe_shim,
        &ramdisk,
    )?;
    let tux_plain = tuxrun(
        &dir.join("tuxrun-plain"),
        rig,
        &qemu,
        &qemu.display().to_string(),
        &ramdisk,
    )?;
    step.done(&format!(
        "{tux_spe} on spe-qemu, {tux_plain} on the plain QEMU"
    ));
    let tux_good = tux_spe == "pass" && tux_plain == "fail";
    ok &= tux_good;
    table.push_str(&format!(
        "| `{TUXRUN_CHECK}` through TuxRun | {tux_spe} | {tux_plain}{} |\n",
        if tux_good { "" } else { " **unexpected**" }
    ));
    let md = work.join(format!("lava-{kernel}.md"));
    fs::write(&md, &table)?;
    print!("{table}");
    eprintln!("==> {} (lava-run logs in {})", md.display(), dir.display());
    Ok(ok)
}

/// The SPE device's results (`rs`, by case) against the device without
/// SPE (`rp`): whether every case is as it must be, and a Markdown table
/// of them. Shared by `lava-run`'s runs and the lab's.
pub fn judge(rs: &BTreeMap<String, String>, rp: &BTreeMap<String, String>) -> (bool, String) {
    let mut ok = true;
    let mut table = String::from("| test case | spe-qemu | plain QEMU |\n|---|---|---|\n");
    let names: Vec<&String> = rs
        .keys()
        .chain(rp.keys())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    for (case, explained_by) in CASES {
        let (s, p) = (
            rs.get(*case).map(String::as_str),
            rp.get(*case).map(String::as_str),
        );
        let want_fail = explained_by.is_some_and(|e| rs.get(e).map(String::as_str) == Some("pass"));
        let good = match s {
            Some("pass") | Some("skip") => !want_fail,
            Some("fail") => want_fail,
            _ => false,
        };
        let control_good = !CONTROL_FAILS.contains(case) || p == Some("fail");
        ok &= good && control_good;
        table.push_str(&format!(
            "| `{case}` | {}{} | {}{} |\n",
            s.unwrap_or("missing"),
            if want_fail {
                " (expected: perf starts slower than the test waits; it passes waiting longer)"
            } else if good {
                ""
            } else {
                " **unexpected**"
            },
            p.unwrap_or("missing"),
            if control_good { "" } else { " **unexpected**" },
        ));
    }
    let (passed, faults) = suite_cases(rs);
    let suite_good = passed && faults >= SUITE_FAULTS_PASSING;
    ok &= suite_good;
    table.push_str(&format!(
        "| the suite's KTAP cases (`{SUITE_CASE}*`) | {}, {faults} fault cases pass{} | {} |\n",
        if passed {
            "each passes or skips"
        } else {
            "some fail"
        },
        if suite_good { "" } else { " **unexpected**" },
        rp.keys().filter(|k| k.starts_with(SUITE_CASE)).count()
    ));
    for n in names {
        if !n.starts_with(SUITE_CASE) && !CASES.iter().any(|(c, _)| c == n) {
            ok = false;
            table.push_str(&format!(
                "| `{n}` | {} | {} | not a case of the job: **unexpected** |\n",
                rs.get(n).map_or("-", String::as_str),
                rp.get(n).map_or("-", String::as_str)
            ));
        }
    }
    (ok, table)
}

/// Whether every KTAP case of the suite passed or skipped, and how many
/// of its fault cases passed.
fn suite_cases(results: &BTreeMap<String, String>) -> (bool, usize) {
    let suite: Vec<(&String, &String)> = results
        .iter()
        .filter(|(k, _)| k.starts_with(SUITE_CASE))
        .collect();
    let passed = !suite.is_empty() && suite.iter().all(|(_, r)| *r == "pass" || *r == "skip");
    let faults = suite
        .iter()
        .filter(|(k, r)| k.starts_with("suite-fault_") && *r == "pass")
        .count();
    (passed, faults)
}

pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// LAVA's own schemas (lava-common, which `cargo xtask test`'s set-up
    /// installs) on a job and a device dictionary: `Err` with LAVA's words.
    fn lava_schema(job: &str, device: &str) -> Result<(), String> {
        let dir = std::env::temp_dir().join(format!("xtask-lava-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("job.yaml"), job).unwrap();
        fs::write(dir.join("device.yaml"), device).unwrap();
        // Debian's interpreter: LAVA's modules are Debian packages.
        let out = Command::new("/usr/bin/python3")
            .arg("-c")
            .arg(
                "import sys, yaml\n\
                 from lava_common.schemas import validate\n\
                 from lava_common.schemas.device import validate as device\n\
                 validate(yaml.safe_load(open(sys.argv[1])))\n\
                 device(yaml.safe_load(open(sys.argv[2])))\n",
            )
            .arg(dir.join("job.yaml"))
            .arg(dir.join("device.yaml"))
            .output()
            .expect("/usr/bin/python3 (Debian's python3)");
        fs::remove_dir_all(&dir).unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            !err.contains("No module named 'lava_common'"),
            "lava-common is not installed: `cargo xtask setup` installs it"
        );
        if out.status.success() {
            Ok(())
        } else {
            Err(err)
        }
    }

    #[test]
    fn the_job_and_device_pass_lavas_schema() {
        let job_t = fs::read_to_string(repo().join(JOB)).unwrap();
        let dev_t = fs::read_to_string(repo().join(DEVICE)).unwrap();
        let job = job(
            &job_t,
            "7.3",
            Path::new("/k/vmlinuz"),
            Path::new("/r/rootfs.cpio.gz"),
        );
        assert!(!job.contains("{{"), "{job}");
        let options = ["--spe-control-socket /s/c.sock".to_string()];
        let dev = device(&dev_t, Path::new("/p/bin/spe-qemu"), &options);
        assert!(!dev.contains("{{"), "{dev}");
        assert_eq!(lava_schema(&job, &dev), Ok(()));
        // The schema is read: a job without its visibility is refused...
        let e = lava_schema(&job.replace("visibility: public\n", ""), &dev).unwrap_err();
        assert!(e.contains("visibility"), "{e}");
        // ...and a device without its parameters.
        let e = lava_schema(&job, &dev.replace("parameters: {}\n", "")).unwrap_err();
        assert!(e.contains("parameters"), "{e}");
    }

    fn repo() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn results_are_read_from_lava_runs_log() {
        // Lines as lava-run 2023.01 writes them (tags and all).
        let log = r#"- {"dt": "2026-11-28T10:00:00.1", "lvl": "target", "msg": "SPE-RESULT x=1"}
- {"dt": "2026-11-28T10:00:01.2", "lvl": "results", "msg": {"case": "spe-probe", "definition": "0_spe", "result": "pass", "starttc": ! "465", "endtc": ! "466"}}
- {"dt": "2026-11-28T10:00:02.3", "lvl": "results", "msg": {"case": "job", "definition": "lava", "result": "pass"}}
- {"dt": "2026-11-28T10:00:03.4", "lvl": "info", "msg": "\"case\": \"x\""}"#;
        let c = cases(log);
        assert_eq!(c.len(), 2);
        assert_eq!(
            c[0],
            Case {
                definition: "0_spe".into(),
                name: "spe-probe".into(),
                result: "pass".into()
            }
        );
        assert_eq!(c[1].definition, "lava");
    }

    /// Every check of the job is a case the run judges, and each case
    /// judged is one the job runs.
    #[test]
    fn the_job_runs_every_case_judged() {
        let job = fs::read_to_string(repo().join(JOB)).unwrap();
        let steps: Vec<&str> = job
            .split("lava-check.sh ")
            .skip(1)
            .map(|s| s.split_whitespace().next().unwrap())
            .collect();
        for (case, _) in CASES {
            if *case == SUITE {
                assert!(job.contains("lava-suite.sh"), "the suite's step");
                continue;
            }
            let main = case.split("-perf_test").next().unwrap();
            assert!(steps.contains(&main), "{case} is not a check of the job");
            if let Some(sub) = case.strip_prefix("perf-test-") {
                assert!(job.contains(&format!("+{sub}")), "{sub}");
            }
        }
        for s in &steps {
            assert!(CASES.iter().any(|(c, _)| c == s), "{s} is not judged");
        }
        for c in CONTROL_FAILS {
            assert!(CASES.iter().any(|(n, _)| n == c));
        }
        // A condition with > or < unquoted is a redirection of the check's
        // output (its test case and markers with it).
        for step in job.split("lava-check.sh ").skip(1) {
            let step = step.split("\n          - ").next().unwrap();
            for word in step.split_whitespace() {
                let quoted = word.starts_with('\'') && word.ends_with('\'');
                assert!(quoted || !word.contains(['>', '<']), "unquoted {word}");
            }
        }
    }

    /// The suite's cases pass when each passes or skips, and enough of
    /// its fault cases pass.
    #[test]
    fn the_suites_cases_are_judged() {
        let mut r: BTreeMap<String, String> = (0..SUITE_FAULTS_PASSING)
            .map(|i| (format!("suite-fault_{i}"), "pass".to_string()))
            .collect();
        r.insert("suite-fault_stage2".into(), "skip".into());
        r.insert("spe-probe".into(), "fail".into());
        assert_eq!(suite_cases(&r), (true, SUITE_FAULTS_PASSING));
        r.insert("suite-records_decode".into(), "fail".into());
        assert!(!suite_cases(&r).0);
        assert_eq!(suite_cases(&BTreeMap::new()), (false, 0));
        let job = fs::read_to_string(repo().join(JOB)).unwrap();
        assert!(job.contains("lava-suite.sh"));
        assert!(!job.contains("SPE-FAULT-RECORDING"));
    }
}
