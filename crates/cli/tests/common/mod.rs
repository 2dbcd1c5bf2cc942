//! What the command-line tests share: running latlab, checking one-line errors, and the
//! namespace rule (skipped with the reason when namespaces do not work here, but never under
//! `CI=true`).
#![allow(dead_code)] // each test binary uses its own part of this module

pub(crate) mod browser;
pub(crate) mod servers;
pub(crate) mod slurm;
pub(crate) mod wired;

use std::process::Command;

use assert_cmd::cargo::cargo_bin;

/// Tests that run engines take turns: each one spins on the machine's cores, and two at once
/// would measure each other.
static ENGINES: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Waits for this test's turn to run engines; the turn ends when the guard drops.
pub(crate) fn engines() -> std::sync::MutexGuard<'static, ()> {
    ENGINES.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs latlab with `args` and checks it fails with one line on stderr that contains `needle`.
pub(crate) fn one_line_error(args: &[&str], needle: &str) {
    let out = assert_cmd::Command::new(cargo_bin("latlab"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?} printed:\n{stderr}"
    );
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} lacks {needle:?}"
    );
}

/// Whether network namespaces work here; when they do not, says why and returns false, but
/// under `CI=true` fails instead: there the namespace tests must run.
pub(crate) fn namespaces_or_skip() -> bool {
    latlab_io::precondition::met(latlab_lab::topology::why_no_namespaces())
}

/// Runs `cmd` to its end, checks that it succeeds (else fails with its standard error), and
/// returns its output.
pub(crate) fn succeeds(cmd: &mut Command) -> std::process::Output {
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Writes `value` to the kernel setting at `path` (`/proc/sys/...`) as namespace `ns` has it.
pub(crate) fn set_in(ns: &str, path: &str, value: &str) {
    succeeds(Command::new("ip").args([
        "netns",
        "exec",
        ns,
        "sh",
        "-c",
        &format!("echo {value} > {path}"),
    ]));
}

/// The JSON document in the file at `path`.
pub(crate) fn read_json(path: &std::path::Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `ip netns exec NS latlab`: the command execs latlab, so the child's id is latlab's own.
/// `latlab` started with SIGHUP at its default disposition (through `env --default-signal`,
/// which execs it: the child's id is latlab's). Under `nohup` a test inherits SIGHUP ignored,
/// and latlab keeps an ignored SIGHUP ignored (as documented): a test of latlab's own SIGHUP
/// handling must not depend on how its runner was started.
#[allow(dead_code)]
pub(crate) fn latlab_with_default_sighup() -> Command {
    let mut c = Command::new("env");
    c.arg("--default-signal=HUP").arg(cargo_bin("latlab"));
    c
}

/// `latlab` run in namespace `ns`, with SIGHUP at its default disposition
/// ([`latlab_with_default_sighup`]).
#[allow(dead_code)]
pub(crate) fn in_ns_with_default_sighup(ns: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, "env", "--default-signal=HUP"])
        .arg(cargo_bin("latlab"));
    c
}

/// Whether interface `dev` of namespace `ns` has an XDP program on it (`ip -d link show`).
#[allow(dead_code)]
pub(crate) fn xdp_program_on(ns: &str, dev: &str) -> bool {
    let shown = succeeds(Command::new("ip").args(["-n", ns, "-d", "link", "show", dev]));
    String::from_utf8_lossy(&shown.stdout).contains("prog/xdp")
}

pub(crate) fn in_ns(ns: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns]).arg(cargo_bin("latlab"));
    c
}

/// Every file of `dir` (not its folders), by name, with its bytes.
pub(crate) fn artefacts(dir: &std::path::Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// Deletes every file of the study folder `out` but its `study.json`, runs `latlab report` on
/// it, and checks that it succeeds and that the same files come back, byte for byte; returns
/// what the report printed.
pub(crate) fn report_redraws_as_written(out: &std::path::Path) -> String {
    let written = artefacts(out);
    for name in written.keys().filter(|n| *n != "study.json") {
        std::fs::remove_file(out.join(name)).unwrap();
    }
    let report = assert_cmd::Command::new(cargo_bin("latlab"))
        .arg("report")
        .arg(out)
        .output()
        .unwrap();
    assert!(
        report.status.success(),
        "{}",
        String::from_utf8_lossy(&report.stderr)
    );
    assert_eq!(artefacts(out), written, "the redrawn files differ");
    String::from_utf8_lossy(&report.stdout).into_owned()
}

/// What a [`Recorder`] saw of one datagram.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Seen {
    /// Its size, bytes.
    pub(crate) size: usize,
    /// When it arrived (`CLOCK_REALTIME` ns, the clock the probes' stamps use).
    pub(crate) at_ns: u64,
    /// The intended send time the probe carries (`None` for a datagram that is not a probe).
    pub(crate) intended_ns: Option<u64>,
}

/// A reflector that writes down the size, arrival time and intended send time of every
/// datagram it returns.
pub(crate) struct Recorder {
    pub(crate) addr: std::net::SocketAddr,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<Vec<Seen>>>,
}

impl Recorder {
    pub(crate) fn start() -> Recorder {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(std::time::Duration::from_millis(20)))
            .unwrap();
        let addr = socket.local_addr().unwrap();
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut buf = vec![0u8; 65_536];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if let Ok((n, from)) = socket.recv_from(&mut buf) {
                    let at_ns = latlab_io::clock::now_ns();
                    let intended_ns = latlab_wire::probe::Packet::new_checked(&buf[..n])
                        .ok()
                        .map(|p| p.intended_send_ns());
                    seen.push(Seen {
                        size: n,
                        at_ns,
                        intended_ns,
                    });
                    let _ = socket.send_to(&buf[..n], from);
                }
            }
            seen
        });
        Recorder {
            addr,
            done,
            thread: Some(thread),
        }
    }

    pub(crate) fn finish(mut self) -> Vec<Seen> {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

/// Checks the intended send times `seen` carry against the schedule `due` (ns from the first
/// message's): the first message's intended time plus its due time, to `tolerance_ns` (0: to
/// the nanosecond). This is what the open-loop sender decided, which no load can move; and
/// every message arrived after it was due (same clock, same host).
pub(crate) fn sent_as_scheduled(seen: &[Seen], due: &[u64], tolerance_ns: u64) {
    assert_eq!(seen.len(), due.len());
    let intended: Vec<u64> = seen
        .iter()
        .map(|s| s.intended_ns.expect("every datagram is a probe"))
        .collect();
    let (start, first_due) = (intended[0], due[0]);
    for (i, (&at, &due)) in intended.iter().zip(due).enumerate() {
        let want = start + (due - first_due);
        assert!(
            at.abs_diff(want) <= tolerance_ns,
            "message {i}: intended {} ns after the first, due {} ns after it",
            at - start,
            due - first_due
        );
        assert!(seen[i].at_ns >= at, "message {i} arrived before it was due");
    }
}

/// `latlab echo --listen TARGET ARGS…` in namespace `ns`, once it has said it listens; stopped
/// with SIGTERM if the test ends first (a failed test leaves no reflector running).
pub(crate) fn echo_in(ns: &str, target: &str, args: &[&str]) -> Started {
    let mut cmd = in_ns(ns);
    cmd.args(["echo", "--listen", target])
        .args(args)
        .stdout(std::process::Stdio::null());
    started(cmd, "latlab echo:")
}

/// Runs `latlab gen --target TARGET ARGS…` in namespace `ns`, checks that it succeeds, and
/// returns what it printed.
pub(crate) fn gen_in<S: AsRef<std::ffi::OsStr>>(ns: &str, target: &str, args: &[S]) -> String {
    let out = in_ns(ns)
        .args(["gen", "--target", target])
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gen {:?}: {}",
        args.iter().map(|a| a.as_ref()).collect::<Vec<_>>(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A latlab child started by [`started`]: its standard error is read on a thread as it comes
/// (kept for the test's messages), and it is stopped with SIGTERM if the test ends first.
pub(crate) struct Started {
    child: Reaped,
    stderr: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

/// Starts `cmd` (its standard error piped here) and waits until a line of its standard error
/// contains `needle` (the line that says it runs: `bridging` for `emu`). The wait is for an
/// event, not a speed: up to 60 s, which only a broken start reaches.
pub(crate) fn started(mut cmd: Command, needle: &str) -> Started {
    use std::io::BufRead;
    cmd.stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    let pipe = child.stderr.take().unwrap();
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (tx, rx) = std::sync::mpsc::channel();
    let lines = std::sync::Arc::clone(&stderr);
    let needle_owned = needle.to_string();
    let reader = std::thread::spawn(move || {
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            // Kept before it is signalled: a caller woken by the line finds it in `stderr()`.
            let found = line.contains(&needle_owned);
            lines.lock().unwrap().push(line);
            if found {
                let _ = tx.send(());
            }
        }
    });
    let mut started = Started {
        child: Reaped::new(child),
        stderr,
        reader: Some(reader),
    };
    match rx.recv_timeout(std::time::Duration::from_secs(60)) {
        Ok(()) => started,
        Err(_) => {
            let status = started.child.try_wait().unwrap();
            panic!(
                "no line with {needle:?} within 60 s (exit {status:?}):\n{}",
                started.stderr()
            )
        }
    }
}

impl Started {
    /// The child's process id.
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Its standard error so far.
    pub(crate) fn stderr(&self) -> String {
        self.stderr.lock().unwrap().join("\n")
    }

    /// The word that follows `words` in its standard error so far (the address after
    /// `listening on `), failing the test if it never said them.
    pub(crate) fn word_after(&self, words: &str) -> String {
        let stderr = self.stderr();
        stderr
            .split(words)
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("no word after {words:?} in:\n{stderr}"))
            .to_string()
    }

    /// Sends it `signal` (`TERM`, `INT`, `STOP`, `CONT`).
    pub(crate) fn signal(&self, signal: &str) {
        signal_pid(self.id(), signal);
    }

    /// Waits for it to end: its exit status, its whole standard output (when the command
    /// piped it) and its whole standard error.
    pub(crate) fn wait_output(mut self) -> (std::process::ExitStatus, String, String) {
        let out = self.child.take().wait_with_output().unwrap();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        (out.status, stdout, self.stderr())
    }

    /// Waits for it to end: its exit status and its whole standard error.
    pub(crate) fn wait(mut self) -> (std::process::ExitStatus, String) {
        let status = self.child.take().wait().unwrap();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        (status, self.stderr())
    }
}

/// Sends `signal` to process `pid` (one this test started).
pub(crate) fn signal_pid(pid: u32, signal: &str) {
    let sent = Command::new("kill")
        .args(["-s", signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -s {signal} {pid}");
}

/// A child that runs until the test stops it: stopped with SIGTERM and waited for if the test
/// ends first (a failed assertion leaves no latlab running in a namespace it deleted).
pub(crate) struct Reaped(Option<std::process::Child>);

impl Reaped {
    pub(crate) fn new(child: std::process::Child) -> Reaped {
        Reaped(Some(child))
    }

    /// The child itself, no longer stopped on drop (for `wait_with_output`).
    pub(crate) fn into_inner(mut self) -> std::process::Child {
        self.take()
    }

    fn take(&mut self) -> std::process::Child {
        self.0.take().unwrap()
    }
}

impl std::ops::Deref for Reaped {
    type Target = std::process::Child;
    fn deref(&self) -> &std::process::Child {
        self.0.as_ref().unwrap()
    }
}

impl std::ops::DerefMut for Reaped {
    fn deref_mut(&mut self) -> &mut std::process::Child {
        self.0.as_mut().unwrap()
    }
}

impl Drop for Reaped {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            if let Ok(None) = child.try_wait() {
                let _ = Command::new("kill")
                    .args(["-s", "TERM", &child.id().to_string()])
                    .status();
                let _ = child.wait();
            }
        }
    }
}

/// A fresh client/server pair of namespaces, its server's namespace and address (a test runs
/// gen and the reflector both in it, so that the namespace's counters count its datagrams
/// only); `None` where namespaces cannot be made (the test then skips).
#[allow(dead_code)]
pub(crate) fn server_namespace() -> Option<(latlab_lab::topology::ClientServer, String, String)> {
    use latlab_lab::topology::ClientServer;
    if !namespaces_or_skip() {
        return None;
    }
    let lab = ClientServer::namespaces().unwrap();
    let ClientServer::Namespaces {
        server,
        server_addr,
        ..
    } = &lab
    else {
        unreachable!("namespaces were asked for")
    };
    let (ns, addr) = (server.name().to_string(), server_addr.to_string());
    Some((lab, ns, addr))
}

/// Waits until `done`, failing (instead of hanging) if it never comes within a minute; not a
/// bound on speed.
#[allow(dead_code)]
pub(crate) fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..3000 {
        if done() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    panic!("{what} never happened");
}

/// One HTTP/1.1 request to an API listening on `api` inside namespace `ns`: the status and the
/// body.
#[allow(dead_code)]
pub(crate) fn api_request(
    ns: &str,
    api: &str,
    method: &str,
    path: &str,
    body: &str,
) -> (u16, String) {
    use std::io::{Read, Write};
    let (api, method, path, body) = (
        api.to_string(),
        method.to_string(),
        path.to_string(),
        body.to_string(),
    );
    latlab_io::netns::run_in(ns, move || {
        let mut s = std::net::TcpStream::connect(api.as_str()).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        write!(
            s,
            "{method} {path} HTTP/1.1\r\nHost: emu\r\nConnection: close\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        let (head, body) = answer.split_once("\r\n\r\n").unwrap();
        let status = head.split(' ').nth(1).unwrap().parse().unwrap();
        (status, body.to_string())
    })
    .unwrap()
}

/// `body` read as JSON, or a panic showing it.
#[allow(dead_code)]
pub(crate) fn json(body: &str) -> serde_json::Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// The receive queue of the namespace's UDP socket bound to `port`, bytes (`/proc/net/udp`'s
/// `rx_queue`), or `None` while no socket holds it.
pub(crate) fn rx_queue(ns: &str, port: u16) -> Option<u64> {
    let out = succeeds(Command::new("ip").args(["netns", "exec", ns, "cat", "/proc/net/udp"]));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains(&format!(":{port:04X} ")))?;
    let queues = line.split_whitespace().nth(4)?;
    u64::from_str_radix(queues.split(':').nth(1)?, 16).ok()
}

/// The namespaces that the latlab process `pid` made (they are named `latlab-<pid>-…`), by
/// name.
pub(crate) fn namespaces_of(pid: u32) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/run/netns") else {
        return Vec::new();
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(&format!("latlab-{pid}-")))
        .collect();
    names.sort();
    names
}

/// `latlab demo` at 1k for 30 s without the emulated link, writing to `out`: a run for a
/// test to stop (its output not read).
pub(crate) fn demo_to_stop(out: &std::path::Path) -> Command {
    let mut cmd = Command::new(assert_cmd::cargo::cargo_bin("latlab"));
    cmd.args([
        "demo",
        "--duration",
        "30s",
        "--rates",
        "1k",
        "--no-emulated-link",
    ])
    .arg("--out")
    .arg(out)
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::null());
    cmd
}

/// [`demo_to_stop`] started, once it measures (its namespaces made, its reflector answering):
/// the note it prints.
pub(crate) fn demo_measuring(out: &std::path::Path) -> Started {
    started(demo_to_stop(out), "measuring ")
}
