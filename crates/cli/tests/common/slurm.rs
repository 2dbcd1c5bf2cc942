//! A Slurm cluster of one node, this host, for a test: Debian's munged, slurmctld and slurmd
//! started as this test's children with everything they write (the munge key and socket, a
//! `slurm.conf` written for this host, state, spool, pid and log files) in a temporary folder,
//! their ports picked free, their traffic on loopback. When the value drops (a panic
//! included), every job still queued is cancelled and waited for until none of its processes
//! is left (found by the `SLURM_CONF` they carry), then the daemons are stopped by their
//! process ids, SIGKILL after a bounded wait; nothing stays running and nothing is written
//! outside the folder.
//!
//! Needs root (munged and slurmd run as root, and the jobs run as the user who submits them)
//! and the packages `slurm-wlm` and `munge`; without them [`Cluster::start`] is a skip, and a
//! failure under `CI=true` (`latlab_io::precondition`).

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;

/// How long a wait on Slurm may take before the test fails saying what it waited for: the
/// daemons' start, the node coming up, a job to end, the daemons' stop. Not a bound on speed:
/// only a Slurm that hangs reaches it.
const PATIENCE: Duration = Duration::from_secs(300);

/// The daemons and the client commands a cluster needs, each with the Debian package that
/// has it.
const PROGRAMS: [(&str, &str); 8] = [
    ("munged", "munge"),
    ("slurmctld", "slurm-wlm"),
    ("slurmd", "slurm-wlm"),
    ("sbatch", "slurm-wlm"),
    ("srun", "slurm-wlm"),
    ("sinfo", "slurm-wlm"),
    ("squeue", "slurm-wlm"),
    ("scancel", "slurm-wlm"),
];

/// A running one-node cluster.
pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    conf: PathBuf,
    node: String,
    /// latlab's folder first, then the test's own `PATH`: what the jobs run `latlab` from.
    path: std::ffi::OsString,
    /// munged, slurmctld, slurmd, in the order they started (stopped in the reverse one).
    daemons: Vec<Daemon>,
}

/// What `sbatch --wait` did.
pub(crate) struct Submitted {
    /// sbatch's exit status: the highest exit code of the job's tasks.
    pub(crate) status: ExitStatus,
    /// The job's id.
    pub(crate) job: u32,
    /// What sbatch printed, both streams.
    pub(crate) said: String,
}

impl Cluster {
    /// Starts munged, slurmctld and slurmd and waits until the node is idle; `None` (a skip,
    /// a failure under CI) without root or without the packages.
    pub(crate) fn start() -> Option<Cluster> {
        if !latlab_io::precondition::is_root() {
            latlab_io::precondition::missing("not root: munged and slurmd run as root");
            return None;
        }
        for (program, package) in PROGRAMS {
            if program_path(program).is_none() {
                latlab_io::precondition::missing(format!("no {program} (Debian's {package})"));
                return None;
            }
        }
        let dir = tempfile::Builder::new()
            .prefix("latlab-slurm")
            .tempdir()
            .unwrap();
        // munged wants every folder on its socket's path open to all, and its key's folder
        // open to root alone.
        set_mode(dir.path(), 0o755);
        let munge = dir.path().join("munge");
        let socket_dir = dir.path().join("socket");
        for (folder, mode) in [(&munge, 0o700), (&socket_dir, 0o755)] {
            fs::create_dir(folder).unwrap();
            set_mode(folder, mode);
        }
        let key = munge.join("munge.key");
        let mut bytes = vec![0u8; 1024];
        std::io::Read::read_exact(&mut fs::File::open("/dev/urandom").unwrap(), &mut bytes)
            .unwrap();
        fs::write(&key, &bytes).unwrap();
        set_mode(&key, 0o400);
        let socket = socket_dir.join("munge.socket");
        let node = short_hostname();
        let conf = dir.path().join("slurm.conf");
        fs::write(&conf, slurm_conf(dir.path(), &node, &socket)).unwrap();
        let latlab = cargo_bin("latlab");
        let mut paths = vec![latlab.parent().unwrap().to_path_buf()];
        paths.extend(std::env::split_paths(
            &std::env::var_os("PATH").unwrap_or_default(),
        ));
        let mut cluster = Cluster {
            dir,
            conf,
            node,
            path: std::env::join_paths(paths).unwrap(),
            daemons: Vec::new(),
        };

        let mut munged = cluster.command("munged");
        munged
            .arg("--foreground")
            .arg(format!("--socket={}", socket.display()))
            .arg(format!("--key-file={}", key.display()))
            .arg(format!("--pid-file={}", munge.join("munged.pid").display()))
            .arg(format!(
                "--seed-file={}",
                munge.join("munged.seed").display()
            ))
            .arg(format!("--log-file={}", munge.join("munged.log").display()));
        let log = cluster.dir.path().join("munged.out");
        cluster.spawn("munged", munged, &log);
        cluster.wait_until("munged made its socket", |_| socket.exists());
        for daemon in ["slurmctld", "slurmd"] {
            let mut command = cluster.command(daemon);
            command.arg("-D");
            let log = cluster.dir.path().join(format!("{daemon}.out"));
            cluster.spawn(daemon, command, &log);
        }
        cluster.wait_until("the node is idle", |c| c.node_state() == "idle");
        Some(cluster)
    }

    /// The folder everything of the cluster is in (also the jobs' working folder, where their
    /// `slurm-*.out` logs go).
    pub(crate) fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A command run against this cluster: `SLURM_CONF` names its `slurm.conf` (and no
    /// `SLURM_*` of a job this test may itself run in is passed on), its folder is the working
    /// one, and latlab's binary is first on its `PATH`.
    pub(crate) fn command(&self, program: &str) -> Command {
        let mut command = Command::new(program_path(program).unwrap_or_else(|| program.into()));
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("SLURM_") {
                command.env_remove(name);
            }
        }
        command
            .env("SLURM_CONF", &self.conf)
            .env("PATH", &self.path)
            .current_dir(self.dir.path())
            .stdin(Stdio::null());
        command
    }

    /// Writes `text` as the executable script `name` in the cluster's folder.
    pub(crate) fn script(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        fs::write(&path, text).unwrap();
        set_mode(&path, 0o755);
        path
    }

    /// `sbatch --wait OPTIONS SCRIPT ARGS…`: submits the job and waits for it to end (every
    /// task of an array), failing with the queue and the logs if that takes longer than a
    /// Slurm that works ever would.
    pub(crate) fn sbatch(
        &self,
        options: &[&str],
        script: &Path,
        args: &[&std::ffi::OsStr],
    ) -> Submitted {
        let said_at = self.dir.path().join(format!(
            "sbatch-{}.out",
            script.file_stem().unwrap().to_string_lossy()
        ));
        let said = fs::File::create(&said_at).unwrap();
        let mut sbatch = self.command("sbatch");
        sbatch
            .arg("--wait")
            .args(options)
            .arg(script)
            .args(args)
            .stdout(said.try_clone().unwrap())
            .stderr(said);
        let mut child = sbatch.spawn().unwrap();
        let status = match wait_child(&mut child, PATIENCE) {
            Some(status) => status,
            None => {
                let _ = child.kill();
                let _ = child.wait();
                panic!(
                    "sbatch --wait {} did not return within {PATIENCE:?}; the queue:\n{}\n{}",
                    script.display(),
                    self.queue(),
                    self.logs()
                );
            }
        };
        let said = fs::read_to_string(&said_at).unwrap();
        let job = said
            .lines()
            .find_map(|l| l.strip_prefix("Submitted batch job "))
            .and_then(|id| id.trim().parse().ok())
            .unwrap_or_else(|| panic!("sbatch named no job: {said}\n{}", self.logs()));
        Submitted { status, job, said }
    }

    /// The log of each task of job `job` (`slurm-JOB.out`, or `slurm-JOB_I.out` for an array),
    /// by file name.
    pub(crate) fn job_logs(&self, job: u32) -> std::collections::BTreeMap<String, String> {
        let prefix = format!("slurm-{job}");
        fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|name| {
                name.strip_prefix(&prefix)
                    .is_some_and(|rest| rest.starts_with(['.', '_']) && name.ends_with(".out"))
            })
            .map(|name| {
                let text = fs::read_to_string(self.dir.path().join(&name)).unwrap();
                (name, text)
            })
            .collect()
    }

    /// Every job log and the daemons' own, for a failure's message.
    pub(crate) fn logs(&self) -> String {
        let mut names: Vec<PathBuf> = fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "out" || e == "log"))
            .collect();
        names.sort();
        names
            .iter()
            .map(|p| {
                let text = fs::read_to_string(p).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(40).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                format!("--- {}\n{}", p.display(), tail.join("\n"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// `squeue`'s view of the queue.
    fn queue(&self) -> String {
        self.command("squeue")
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_else(|e| format!("squeue: {e}"))
    }

    /// The node's state as `sinfo` gives it (`idle`, `mixed`, `down*`…), empty while
    /// slurmctld does not answer.
    fn node_state(&self) -> String {
        self.command("sinfo")
            .args(["--noheader", "--nodes", &self.node, "--format", "%T"])
            .stderr(Stdio::null())
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default()
    }

    /// Starts `command` as the daemon `name`, both its streams into `log`.
    fn spawn(&mut self, name: &'static str, mut command: Command, log: &Path) {
        let out = fs::File::create(log).unwrap();
        command.stdout(out.try_clone().unwrap()).stderr(out);
        let child = command
            .spawn()
            .unwrap_or_else(|e| panic!("starting {name}: {e}"));
        self.daemons.push(Daemon { name, child });
    }

    /// Polls `done` until it holds, failing with the daemons' logs if it never does within
    /// [`PATIENCE`] or a daemon exits first.
    fn wait_until(&mut self, what: &str, mut done: impl FnMut(&Cluster) -> bool) {
        let deadline = Instant::now() + PATIENCE;
        while !done(self) {
            let exited = self.daemons.iter_mut().find_map(|d| {
                let status = d.child.try_wait().unwrap()?;
                Some((d.name, status))
            });
            if let Some((name, status)) = exited {
                panic!("{name} exited ({status}) before {what}:\n{}", self.logs());
            }
            if Instant::now() > deadline {
                panic!("{what}: not within {PATIENCE:?}:\n{}", self.logs());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Jobs first, while slurmctld and slurmd can still end them (SIGTERM, then SIGKILL
        // after the KillWait of slurm.conf). A cancelled job leaves the queue before its
        // processes end: they are waited for too, and what is left of them when the wait runs
        // out gets SIGKILL by its process id.
        if !self.queue_is_empty() {
            let _ = self.command("scancel").arg("--user=root").status();
        }
        let deadline = Instant::now() + PATIENCE;
        while !(self.queue_is_empty() && self.job_processes().is_empty())
            && Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(200));
        }
        for pid in self.job_processes() {
            let _ = Command::new("kill")
                .args(["-s", "KILL", &pid.to_string()])
                .status();
        }
        while let Some(mut daemon) = self.daemons.pop() {
            daemon.stop();
        }
    }
}

impl Cluster {
    /// Whether no job is queued or running (also when slurmctld no longer answers).
    fn queue_is_empty(&self) -> bool {
        match self.command("squeue").arg("--noheader").output() {
            Ok(out) if out.status.success() => out.stdout.iter().all(u8::is_ascii_whitespace),
            _ => true,
        }
    }

    /// The processes of this cluster's jobs: those whose environment names its `slurm.conf`
    /// (every command this test runs against it passes it on, and a job's tasks and its
    /// step's slurmstepd inherit it), but for the daemons and their own children and this
    /// test itself.
    fn job_processes(&self) -> Vec<u32> {
        let daemons: Vec<u32> = self.daemons.iter().map(|d| d.child.id()).collect();
        let mark = format!("SLURM_CONF={}", self.conf.display());
        let Ok(entries) = fs::read_dir("/proc") else {
            return Vec::new();
        };
        entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|&pid| pid != std::process::id() && !daemons.contains(&pid))
            .filter(|&pid| parent(pid).is_some_and(|p| !daemons.contains(&p)))
            .filter(|pid| {
                fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == mark.as_bytes()))
            })
            .collect()
    }
}

/// The parent of process `pid`, `None` once it is gone.
fn parent(pid: u32) -> Option<u32> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|p| p.trim().parse().ok())
}

/// A daemon this test started.
struct Daemon {
    name: &'static str,
    child: Child,
}

impl Daemon {
    /// SIGTERM by its process id; SIGKILL if it has not ended within [`PATIENCE`].
    fn stop(&mut self) {
        if let Ok(Some(_)) = self.child.try_wait() {
            return;
        }
        let _ = Command::new("kill")
            .args(["-s", "TERM", &self.child.id().to_string()])
            .status();
        if wait_child(&mut self.child, PATIENCE).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Waits for `child` to exit, up to `patience`; `None` if it is still running then.
fn wait_child(child: &mut Child, patience: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + patience;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `slurm.conf` for one node, `node` (this host, at 127.0.0.1), with every file Slurm writes
/// under `dir` and ports nothing else holds.
fn slurm_conf(dir: &Path, node: &str, munge_socket: &Path) -> String {
    let [controller_port, node_port] = free_ports();
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let at = |name: &str| dir.join(name).display().to_string();
    for folder in ["state", "spool"] {
        fs::create_dir(dir.join(folder)).unwrap();
    }
    format!(
        "# A cluster of one node for latlab's tests (crates/cli/tests/common/slurm.rs).
ClusterName=latlab-test
SlurmctldHost={node}(127.0.0.1)
SlurmctldPort={controller_port}
SlurmdPort={node_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={socket}
StateSaveLocation={state}
SlurmdSpoolDir={spool}
SlurmctldPidFile={ctld_pid}
SlurmdPidFile={d_pid}
SlurmctldLogFile={ctld_log}
SlurmdLogFile={d_log}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SchedulerType=sched/backfill
ReturnToService=2
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
# A cancelled job's tasks get SIGKILL 5 s after SIGTERM.
KillWait=5
# sbatch --wait polls every 2 s while a finished job's record lasts at least 4 s (at the
# default, 300 s, it sleeps up to 32 s between polls).
MinJobAge=4
NodeName={node} NodeAddr=127.0.0.1 CPUs={cpus} RealMemory=100 State=UNKNOWN
PartitionName=latlab Nodes={node} Default=YES MaxTime=INFINITE State=UP
",
        socket = munge_socket.display(),
        state = at("state"),
        spool = at("spool"),
        ctld_pid = at("slurmctld.pid"),
        d_pid = at("slurmd.pid"),
        ctld_log = at("slurmctld.log"),
        d_log = at("slurmd.log"),
    )
}

/// Two TCP ports free on every address right now (slurmctld and slurmd listen on all).
fn free_ports() -> [u16; 2] {
    let a = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    let b = std::net::TcpListener::bind("0.0.0.0:0").unwrap();
    [
        a.local_addr().unwrap().port(),
        b.local_addr().unwrap().port(),
    ]
}

/// `hostname -s`: the name slurmd looks itself up by in `slurm.conf`.
fn short_hostname() -> String {
    let out = Command::new("hostname").arg("-s").output().unwrap();
    assert!(out.status.success(), "hostname -s failed");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// Where `program` is: on the `PATH`, or in `/usr/sbin` or `/sbin` (the daemons, which a
/// `PATH` without the sbin folders misses).
fn program_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin"), PathBuf::from("/sbin")])
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

fn set_mode(path: &Path, mode: u32) {
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
}
