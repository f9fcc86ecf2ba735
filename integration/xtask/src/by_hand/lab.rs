//! `cargo xtask lab [--kernel K]` (by hand, as root): a real LAVA lab on
//! this machine, from Debian's packages. lava-server (gunicorn, the
//! scheduler) on its PostgreSQL, lava-dispatcher as its worker, the
//! `qemu-spe` device type (`integration/lava/qemu-spe.jinja2`) with two
//! devices, so that two jobs run side by side, and a device of LAVA's own
//! `qemu` type, whose QEMU has no SPE: the negative control. The SPE job
//! (`integration/lava/spe-job.yaml`) is submitted with `lavacli` for each
//! kernel, and once more to the plain device; every case's result is read
//! back from the server's API (`lavacli results --json`), never from a
//! log, and judged as `cargo xtask lava` judges lava-run's.
//!
//! The services run only while the command runs; the packages stay, and
//! `cargo xtask lab --remove` purges those the lab installed.

use super::lava::{self, judge};
use crate::host::{missing_packages, privileged};
use crate::runner::Rig;
use crate::util::{run, Step};
use anyhow::{bail, Context, Result};
use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// What the lab adds to `cargo xtask lava`'s packages: the server, its
/// database and the client.
const PACKAGES: &[&str] = &["postgresql", "lava-server", "lavacli"];

/// The server's address: gunicorn alone (no Apache), on loopback.
const PORT: u16 = 8000;

/// The lab's names in the server's database.
const USER: &str = "spe-lab";
const WORKER: &str = "spe-lab-worker";
const SPE_TYPE: &str = "qemu-spe";
const PLAIN_TYPE: &str = "qemu";
const SPE_DEVICES: &[&str] = &["qemu-spe-01", "qemu-spe-02"];
const PLAIN_DEVICE: &str = "qemu-01";

/// Where lava-server reads device types and device dictionaries, and
/// each worker's dispatcher environment.
const CONFIG: &str = "/etc/lava-server/dispatcher-config";
const WORKER_ENV: &str = "/etc/lava-server/dispatcher.d";

/// The device template in the repository.
const TEMPLATE: &str = "integration/lava/qemu-spe.jinja2";

/// How long the lab waits for all its jobs.
const JOBS_TIMEOUT: Duration = Duration::from_secs(3 * 3600);

/// The record of the packages the lab installed (for `--remove`).
fn installed_record(work: &Path) -> PathBuf {
    work.join("lab").join("installed-packages")
}

/// `lava-server manage ARGS`: its stdout.
fn manage(args: &[&str]) -> Result<String> {
    run(
        &format!("lava-server manage {}", args.join(" ")),
        Command::new("lava-server").arg("manage").args(args),
    )
}

/// Adds `kind` `name` (`args` after `add`) unless `details` finds it.
fn ensure(kind: &str, name: &str, add: &[&str]) -> Result<String> {
    if let Ok(details) = manage(&[kind, "details", name]) {
        return Ok(details);
    }
    let mut args = vec![kind, "add"];
    args.extend_from_slice(add);
    args.push(name);
    manage(&args)
}

/// The value after `key` on one of `text`'s lines (`key: value`).
fn value_after<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    text.lines()
        .find_map(|l| l.trim().strip_prefix(key))
        .map(|v| v.trim_start_matches([' ', ':']).trim())
}

/// The lab's services, each in its own process group, ended (with their
/// children: gunicorn's workers, the worker's lava-run, QEMU) on drop.
struct Services {
    children: Vec<(String, Child)>,
    /// `pg_ctlcluster VERSION NAME` if the lab started the cluster.
    cluster: Option<(String, String)>,
}

impl Services {
    fn start(&mut self, name: &str, cmd: &mut Command, log: &Path) -> Result<()> {
        let out = fs::File::create(log)?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0)
            .spawn()
            .with_context(|| format!("starting {name}"))?;
        eprintln!("    {name}: pid {}, log {}", child.id(), log.display());
        self.children.push((name.to_string(), child));
        Ok(())
    }

    /// Whether each service still runs (an exited one is named).
    fn check(&mut self) -> Result<()> {
        for (name, child) in &mut self.children {
            if let Some(status) = child.try_wait()? {
                bail!("{name} exited ({status}); see its log");
            }
        }
        Ok(())
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        for (_, child) in self.children.iter().rev() {
            // SAFETY: kill has no preconditions; the group is our child's.
            unsafe { libc::kill(-(child.id() as i32), libc::SIGTERM) };
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        for (name, child) in &mut self.children {
            while child.try_wait().ok().flatten().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(200));
            }
            if child.try_wait().ok().flatten().is_none() {
                eprintln!("    {name}: still running, killed");
                // SAFETY: as above.
                unsafe { libc::kill(-(child.id() as i32), libc::SIGKILL) };
                let _ = child.wait();
            }
        }
        if let Some((version, name)) = &self.cluster {
            let _ = Command::new("pg_ctlcluster")
                .args([version, name, "stop"])
                .status();
        }
    }
}

/// apt-get install of what is missing, postgresql first and started:
/// lava-server's postinst creates its database.
fn install(work: &Path, services: &mut Services) -> Result<()> {
    let wanted: Vec<&str> = PACKAGES.iter().chain(lava::INSTALL).copied().collect();
    let names: Vec<&str> = wanted
        .iter()
        .map(|p| p.split('/').next().unwrap_or(p))
        .collect();
    let missing = missing_packages(&names);
    if !missing.is_empty() {
        let record = installed_record(work);
        fs::create_dir_all(record.parent().context("the lab folder")?)?;
        let mut all: Vec<String> = fs::read_to_string(&record)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect();
        all.extend(missing.iter().cloned());
        all.sort();
        all.dedup();
        fs::write(&record, all.join("\n") + "\n")?;
    }
    let apt = |what: &[&str]| -> Result<()> {
        run(
            "apt-get install",
            privileged("apt-get")
                .env("DEBIAN_FRONTEND", "noninteractive")
                .args(["-q", "-y", "--no-install-recommends", "install"])
                .args(what),
        )
        .map(|_| ())
    };
    if !missing_packages(&["postgresql"]).is_empty() {
        let step = Step::new("apt-get install postgresql");
        apt(&["postgresql"])?;
        step.done("installed");
    }
    services.cluster = start_cluster()?;
    if !missing.iter().all(|m| m == "postgresql") {
        let step = Step::new(format!(
            "apt-get install {} (lava-server, lava-dispatcher: about 220 packages)",
            missing.join(" ")
        ));
        apt(&wanted)?;
        step.done("installed");
    }
    Ok(())
}

/// Starts the PostgreSQL cluster if it is down: its version and name,
/// for stopping it again.
fn start_cluster() -> Result<Option<(String, String)>> {
    let list = run(
        "pg_lsclusters",
        Command::new("pg_lsclusters").arg("--no-header"),
    )?;
    let Some(line) = list.lines().next() else {
        bail!("PostgreSQL has no cluster (pg_createcluster makes one)");
    };
    let f: Vec<&str> = line.split_whitespace().collect();
    let (version, name, status) = match f.as_slice() {
        [v, n, _, s, ..] => (v.to_string(), n.to_string(), *s),
        _ => bail!("pg_lsclusters: cannot read {line:?}"),
    };
    if status == "online" {
        return Ok(None);
    }
    run(
        "pg_ctlcluster start",
        Command::new("pg_ctlcluster").args([&version, &name, "start"]),
    )?;
    eprintln!("    PostgreSQL {version}/{name}: started");
    Ok(Some((version, name)))
}

/// A fresh random token (hex), for the lab's user.
fn token() -> Result<String> {
    let mut bytes = [0u8; 24];
    use std::io::Read;
    fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// What the lab's jobs run on, set up in the server's database and
/// configuration folder; `bin` goes first on the dispatcher's PATH.
/// Returns the worker's token.
fn configure(repo: &Path, rig: &Rig, user_token: &str, bin: &Path) -> Result<String> {
    ensure("users", USER, &["--superuser", "--staff"])?;
    manage(&["tokens", "add", "--user", USER, "--secret", user_token])?;
    let details = ensure("workers", WORKER, &["--health", "ACTIVE"])?;
    let worker_token = value_after(&details, "Token")
        .or_else(|| value_after(&details, "token"))
        .context("the worker's token")?
        .to_string();
    // The dispatcher's environment is the server's, per worker (lava-run
    // does not inherit lava-worker's): LAVA's default with `bin` first.
    let env = Path::new(WORKER_ENV).join(WORKER);
    fs::create_dir_all(&env)?;
    fs::write(
        env.join("env.yaml"),
        format!(
            "# cargo xtask lab: LAVA's default, with the QEMU version probe first\n\
             purge: true\noverrides:\n  LC_ALL: C.UTF-8\n  LANG: C\n  \
             PATH: {}:/usr/local/bin:/usr/local/sbin:/bin:/usr/bin:/usr/sbin:/sbin\n",
            bin.display()
        ),
    )?;
    let types = Path::new(CONFIG).join("device-types");
    fs::copy(
        repo.join(TEMPLATE),
        types.join(format!("{SPE_TYPE}.jinja2")),
    )
    .context("installing the qemu-spe device type")?;
    for t in [SPE_TYPE, PLAIN_TYPE] {
        ensure("device-types", t, &[])?;
    }
    let devices = Path::new(CONFIG).join("devices");
    let spe_dict = format!(
        "{{% extends '{SPE_TYPE}.jinja2' %}}\n{{% set spe_qemu = '{}' %}}\n",
        rig.launcher.display()
    );
    // LAVA's own qemu type, as a lab without SPE has it: the patched QEMU
    // (qemu-system-aarch64 on the worker's PATH) without `spe=on`. Its
    // NIC would load an option ROM that only a distribution's QEMU ships.
    let plain_dict = format!(
        "{{% extends '{PLAIN_TYPE}.jinja2' %}}\n{{% set cpu = 'max' %}}\n\
         {{% set memory = 2048 %}}\n\
         {{% set extra_options = ['-smp 2', '-no-reboot', \
         '-global virtio-net-pci.romfile='] %}}\n"
    );
    for (name, kind, dict) in SPE_DEVICES
        .iter()
        .map(|d| (*d, SPE_TYPE, &spe_dict))
        .chain([(PLAIN_DEVICE, PLAIN_TYPE, &plain_dict)])
    {
        fs::write(devices.join(format!("{name}.jinja2")), dict)?;
        ensure(
            "devices",
            name,
            &["--device-type", kind, "--worker", WORKER],
        )?;
        manage(&["devices", "update", "--health", "GOOD", name])?;
    }
    Ok(worker_token)
}

/// lavacli against the lab's server, as its user.
fn lavacli(user_token: &str, args: &[&str]) -> Result<String> {
    run(
        &format!("lavacli {}", args.join(" ")),
        Command::new("lavacli")
            .arg("--uri")
            .arg(format!("http://{USER}:{user_token}@127.0.0.1:{PORT}/RPC2"))
            .args(args),
    )
}

/// Waits until the server answers.
fn wait_for_server(services: &mut Services) -> Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        services.check()?;
        if std::net::TcpStream::connect(("127.0.0.1", PORT)).is_ok() {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("lava-server did not listen on port {PORT} within 120 s");
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// One submitted job: what it runs on, and its id.
struct Job {
    label: String,
    id: String,
}

/// The job's results from the server's API: `suite/case` → result, for
/// the job's own test definition (`0_spe`).
fn job_results(user_token: &str, id: &str) -> Result<BTreeMap<String, String>> {
    let text = lavacli(user_token, &["results", "--json", id])?;
    let json: serde_json::Value = serde_json::from_str(&text).context("lavacli results")?;
    Ok(json
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["suite"].as_str().is_some_and(|s| s.ends_with("_spe")))
        .filter_map(|c| Some((c["name"].as_str()?.into(), c["result"].as_str()?.into())))
        .collect())
}

/// Waits for every job to finish; returns what the server says of each
/// (`lavacli jobs show --json`: state, health, device, times).
fn wait_jobs(
    user_token: &str,
    jobs: &[Job],
    services: &mut Services,
) -> Result<Vec<serde_json::Value>> {
    let start = Instant::now();
    let mut last: Vec<String> = vec![String::new(); jobs.len()];
    let mut shown = vec![serde_json::Value::Null; jobs.len()];
    loop {
        services.check()?;
        let mut done = true;
        for ((job, seen), json) in jobs.iter().zip(&mut last).zip(&mut shown) {
            let show = lavacli(user_token, &["jobs", "show", "--json", &job.id])?;
            *json = serde_json::from_str(&show).context("lavacli jobs show")?;
            let state = json["state"].as_str().unwrap_or("?");
            let now = format!("{state}, {}", json["health"].as_str().unwrap_or("?"));
            if *seen != now {
                eprintln!(
                    "    job {} ({}): {now} after {} s",
                    job.id,
                    job.label,
                    start.elapsed().as_secs()
                );
                *seen = now;
            }
            done &= state == "Finished";
        }
        if done {
            return Ok(shown);
        }
        if start.elapsed() > JOBS_TIMEOUT {
            bail!("the lab's jobs did not finish in {JOBS_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_secs(15));
    }
}

pub fn run_lab(rigs: &[Rig], repo: &Path, work: &Path) -> Result<bool> {
    if !super::lava::is_root() {
        bail!("the lab installs and runs a server: run it as root");
    }
    let dir = work.join("lab");
    fs::create_dir_all(&dir)?;
    let mut services = Services {
        children: Vec::new(),
        cluster: None,
    };
    install(work, &mut services)?;
    let step = Step::new("lava-server: the user, the worker, the device types and devices");
    let user_token = token()?;
    let main = rigs.last().context("a kernel")?;
    let bin = dir.join("bin");
    let worker_token = configure(repo, main, &user_token, &bin)?;
    step.done(&format!(
        "{} {SPE_TYPE} devices and {PLAIN_DEVICE} on {WORKER}",
        SPE_DEVICES.len()
    ));
    // The dispatcher's PATH: LAVA's version probe runs qemu-system-arm64,
    // and the plain device's QEMU is qemu-system-aarch64 (the patched one).
    fs::create_dir_all(&bin)?;
    let qemu = main
        .launcher
        .parent()
        .context("the launcher's prefix")?
        .join(crate::install::QEMU_NAME);
    for name in ["qemu-system-aarch64", "qemu-system-arm64"] {
        let link = bin.join(name);
        let _ = fs::remove_file(&link);
        symlink(&qemu, &link)?;
    }
    let url = format!("http://127.0.0.1:{PORT}/");
    let step = Step::new("starting lava-server (gunicorn), lava-scheduler, lava-worker");
    services.start(
        "gunicorn",
        Command::new("gunicorn3")
            .args(["lava_server.wsgi", "--log-level", "INFO"])
            .args(["-u", "lavaserver", "-g", "lavaserver"])
            .args(["--worker-class", "eventlet", "--workers", "2"])
            .args(["--bind", &format!("127.0.0.1:{PORT}")]),
        &dir.join("gunicorn.log"),
    )?;
    wait_for_server(&mut services)?;
    services.start(
        "lava-scheduler",
        Command::new("lava-server").args(["manage", "lava-scheduler", "--level", "INFO"]),
        &dir.join("scheduler.log"),
    )?;
    services.start(
        "lava-worker",
        Command::new("lava-worker")
            .args(["--level", "INFO", "--url", &url, "--name", WORKER])
            .args(["--token", &worker_token])
            .arg("--worker-dir")
            .arg(dir.join("worker")),
        &dir.join("worker.log"),
    )?;
    step.done(&format!("server on {url}"));
    let template = fs::read_to_string(repo.join(lava::JOB))?;
    let mut jobs = Vec::new();
    let step = Step::new("lavacli jobs submit: the SPE job for each kernel, and the control");
    let mut submit = |rig: &Rig, device_type: &str, label: String| -> Result<()> {
        let kdir = dir.join(rig.spec.name);
        fs::create_dir_all(&kdir)?;
        let ramdisk = kdir.join("rootfs.cpio.gz");
        run(
            "gzip the initramfs",
            Command::new("sh")
                .arg("-c")
                .arg("gzip -1 -c \"$0\" > \"$1\"")
                .arg(&rig.initrd)
                .arg(&ramdisk),
        )?;
        let text = lava::job(&template, rig.spec.name, &rig.kernel, &ramdisk).replace(
            "device_type: qemu\n",
            &format!("device_type: {device_type}\n"),
        );
        let file = kdir.join(format!("job-{device_type}.yaml"));
        fs::write(&file, text)?;
        let out = lavacli(
            &user_token,
            &["jobs", "submit", &file.display().to_string()],
        )?;
        let id = out.trim().to_string();
        eprintln!("    job {id}: {label}");
        jobs.push(Job { label, id });
        Ok(())
    };
    for rig in rigs {
        submit(rig, SPE_TYPE, format!("{} on {SPE_TYPE}", rig.spec.name))?;
    }
    submit(
        main,
        PLAIN_TYPE,
        format!("{} on {PLAIN_TYPE}", main.spec.name),
    )?;
    step.done(&format!("{} jobs", jobs.len()));
    let step = Step::new("waiting for the jobs (two SPE devices side by side)");
    let states = wait_jobs(&user_token, &jobs, &mut services)?;
    step.done("all finished");
    let plain_job = jobs.last().context("the control job")?;
    let rp = job_results(&user_token, &plain_job.id)?;
    let mut ok = true;
    let mut report = String::new();
    let field = |j: &serde_json::Value, k: &str| j[k].as_str().unwrap_or("?").to_string();
    let plain_shown = states.last().context("the control job's state")?;
    // The control runs to its end too: its SPE cases fail, the job not.
    ok &= field(plain_shown, "health") == "Complete";
    for job in &jobs {
        fs::write(
            dir.join(format!("job-{}.log", job.id)),
            lavacli(
                &user_token,
                &["jobs", "logs", "--no-follow", "--raw", &job.id],
            )
            .unwrap_or_default(),
        )?;
    }
    for (job, shown) in jobs.iter().zip(&states).take(rigs.len()) {
        let rs = job_results(&user_token, &job.id)?;
        let (good, table) = judge(&rs, &rp);
        let complete = field(shown, "health") == "Complete";
        ok &= good && complete;
        report.push_str(&format!(
            "### {}: job {} on {}, {}, {} to {}; the control: job {} on {}, {}\n\n{table}\n",
            job.label,
            job.id,
            field(shown, "device"),
            field(shown, "health"),
            field(shown, "start_time"),
            field(shown, "end_time"),
            plain_job.id,
            field(plain_shown, "device"),
            field(plain_shown, "health"),
        ));
    }
    let md = work.join("lab.md");
    fs::write(&md, &report)?;
    print!("{report}");
    eprintln!(
        "==> {} (services' logs in {}); the packages stay: `cargo xtask lab --remove` purges those the lab installed",
        md.display(),
        dir.display()
    );
    Ok(ok)
}

/// `cargo xtask lab --remove`: the lab's files in the server's
/// configuration, and the packages it installed.
pub fn remove(work: &Path) -> Result<bool> {
    if !super::lava::is_root() {
        bail!("removing the lab's packages needs root");
    }
    let config = Path::new(CONFIG);
    let _ = fs::remove_file(
        config
            .join("device-types")
            .join(format!("{SPE_TYPE}.jinja2")),
    );
    let _ = fs::remove_dir_all(Path::new(WORKER_ENV).join(WORKER));
    for d in SPE_DEVICES.iter().chain([&PLAIN_DEVICE]) {
        let _ = fs::remove_file(config.join("devices").join(format!("{d}.jinja2")));
    }
    let record = installed_record(work);
    let packages: Vec<String> = fs::read_to_string(&record)
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect();
    if packages.is_empty() {
        eprintln!(
            "==> the lab installed no package ({} is empty or absent)",
            record.display()
        );
        return Ok(true);
    }
    let step = Step::new(format!("apt-get purge {}", packages.join(" ")));
    run(
        "apt-get purge",
        privileged("apt-get")
            .env("DEBIAN_FRONTEND", "noninteractive")
            .args(["-q", "-y", "purge"])
            .args(&packages),
    )?;
    step.done("purged (their dependencies: apt-get autoremove)");
    fs::remove_file(&record)?;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_tokens_that_lava_server_prints() {
        assert_eq!(value_after("Token: abc123\n", "Token"), Some("abc123"));
        let details = "hostname   : w\nstate      : Offline\ntoken      : xyz\n";
        assert_eq!(value_after(details, "token"), Some("xyz"));
        assert_eq!(value_after(details, "Token"), None);
    }
}
