//! Regressions: a stopping signal (SIGINT, SIGTERM, SIGHUP) to any command writes what was
//! measured, removes every namespace and partial file, and exits 128 + its number; a second one
//! never cuts the clean-up short; leftovers of a killed run are known by their owner lock, never
//! by a PID. Each test looks only at the namespaces its own run made: other test binaries run at
//! the same time.

mod common;

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use latlab_io::lock::OwnerLock;
use latlab_lab::topology::{lock_path, namespace_exists, ClientEmuServer, Namespace};

/// Every partial result (`.NAME.partial-PID`) under `dir`.
fn partials_under(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if entry.file_name().to_string_lossy().contains(".partial-") {
            found.push(path.clone());
        }
        if path.is_dir() {
            found.extend(partials_under(&path));
        }
    }
    found
}

/// Sends `signal` (`TERM`, `INT`, `KILL`) to the process `pid`, or to the process group
/// `-pgid` when `target` starts with a minus.
fn send(signal: &str, target: &str) {
    let sent = Command::new("kill")
        .args(["-s", signal, "--", target])
        .status()
        .unwrap();
    assert!(sent.success(), "kill -s {signal} {target}");
}

/// Waits until `ready` holds (checked every 50 ms, for at most 60 s: the events take
/// milliseconds, and only a broken run reaches the limit).
fn wait_for(what: &str, mut ready: impl FnMut() -> bool) {
    let start = Instant::now();
    while !ready() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what}: not after 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for `child` to exit, within 60 s (it takes well under one), and returns its exit
/// code.
fn exit_code(child: &mut Child) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status.code();
        }
        if start.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            panic!("latlab did not stop within 60 s of the signal");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Reads `child`'s stderr up to its first line (the "started" line of echo, serve and emu),
/// and keeps reading the rest on a thread so the pipe never fills.
fn first_stderr_line(child: &mut Child) -> String {
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    line
}

#[test]
fn sigterm_to_demo_leaves_no_namespace_and_no_partial_folder_and_exits_143() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    // Once it measures (its namespaces made, its reflector answering): the note it prints.
    let child = common::demo_measuring(&out);
    let pid = child.id();
    assert_eq!(
        common::namespaces_of(pid).len(),
        2,
        "the demo's two namespaces"
    );
    std::thread::sleep(Duration::from_millis(700));
    send("TERM", &pid.to_string());
    let (status, stderr) = child.wait();
    assert_eq!(status.code(), Some(143), "{stderr}");
    assert_eq!(common::namespaces_of(pid), Vec::<String>::new());
    assert_eq!(partials_under(dir.path()), Vec::<PathBuf>::new());
    // What was measured is written, flagged as stopped early.
    let run = common::read_json(&out.join("rate-1000pps/summary.json"));
    assert_eq!(run["stopped_early"], true);
}

#[test]
fn a_second_ctrl_c_during_cleanup_still_removes_the_namespaces() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("demo");
    // Its own process group, signalled as a terminal signals one: every process in it.
    let mut child = common::demo_to_stop(&out).process_group(0).spawn().unwrap();
    let pid = child.id();
    wait_for("the demo's two namespaces", || {
        common::namespaces_of(pid).len() == 2
    });
    std::thread::sleep(Duration::from_millis(500));
    // A first Ctrl-C, then more while latlab stops and removes its namespaces.
    let group = format!("-{pid}");
    send("INT", &group);
    for _ in 0..20 {
        std::thread::sleep(Duration::from_millis(10));
        if child.try_wait().unwrap().is_some() {
            break;
        }
        send("INT", &group);
    }
    assert_eq!(exit_code(&mut child), Some(130));
    assert_eq!(common::namespaces_of(pid), Vec::<String>::new());
    assert_eq!(partials_under(dir.path()), Vec::<PathBuf>::new());
}

/// `latlab study game-server` with short points, `--loopback` or in namespaces.
fn game_study(out: &Path, loopback: bool) -> Command {
    let mut cmd = Command::new(cargo_bin("latlab"));
    cmd.args([
        "study",
        "game-server",
        "--clients",
        "4",
        "--loads",
        "1k,2k,3k,4k,5k,6k",
        "--rcvbuf",
        "default",
        "--io",
        "socket",
        "--duration",
        "400ms",
        "--no-flood",
    ])
    .arg("--out")
    .arg(out)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if loopback {
        cmd.arg("--loopback");
    }
    cmd
}

/// The point files the study in `out` has written.
fn points(out: &Path) -> usize {
    std::fs::read_dir(out.join("points"))
        .map(|d| {
            d.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with(".json"))
                .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn sigterm_to_a_game_study_on_loopback_keeps_its_points_leaves_no_partial_file_and_exits_143() {
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let mut child = game_study(&out, true).spawn().unwrap();
    wait_for("a first point", || points(&out) >= 1);
    send("TERM", &child.id().to_string());
    assert_eq!(exit_code(&mut child), Some(143));
    assert!(points(&out) >= 1, "the finished points stay");
    assert_eq!(partials_under(dir.path()), Vec::<PathBuf>::new());
}

#[test]
fn sigterm_to_a_game_study_in_namespaces_leaves_no_namespace_and_exits_143() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let mut child = game_study(&out, false).spawn().unwrap();
    let pid = child.id();
    wait_for("the study's namespaces", || {
        common::namespaces_of(pid).len() >= 2
    });
    std::thread::sleep(Duration::from_millis(300));
    send("TERM", &pid.to_string());
    assert_eq!(exit_code(&mut child), Some(143));
    assert_eq!(common::namespaces_of(pid), Vec::<String>::new());
    assert_eq!(partials_under(dir.path()), Vec::<PathBuf>::new());
}

#[test]
fn sigint_during_an_emulator_study_point_leaves_that_point_out_for_resume() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let mut child = Command::new(cargo_bin("latlab"))
        .args(["study", "emulator", "--rates", "1k", "--delays", "10us"])
        .args(["--duration", "200ms", "--rate-duration", "60s", "--out"])
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Five latency points (kernel, emu, emu at 10 µs, two loss models), then the first
    // forwarding-rate point, which sends for a minute: interrupted, it must not be kept.
    // Building the lab and five points take longer than wait_for's 10 s on a slow machine.
    let start = Instant::now();
    while points(&out) < 5 {
        assert!(start.elapsed() < Duration::from_secs(300), "no 5 points");
        assert!(child.try_wait().unwrap().is_none(), "the study ended early");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    send("INT", &child.id().to_string());
    assert_eq!(exit_code(&mut child), Some(130));
    let rates: Vec<String> = std::fs::read_dir(out.join("points"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("rate-"))
        .collect();
    assert_eq!(
        rates,
        Vec::<String>::new(),
        "a point cut short is not written"
    );
    assert_eq!(points(&out), 5, "the finished points stay");
    assert_eq!(partials_under(dir.path()), Vec::<PathBuf>::new());
}

#[test]
fn sigterm_to_serve_writes_its_json_and_exits_143() {
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("serve.json");
    let mut child = Command::new(cargo_bin("latlab"))
        .args(["serve", "--listen", "127.0.0.1:0", "--io", "batched"])
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = first_stderr_line(&mut child);
    assert!(started.contains("latlab serve"), "{started}");
    send("TERM", &child.id().to_string());
    assert_eq!(exit_code(&mut child), Some(143));
    let counters = common::read_json(&json);
    assert_eq!(counters["io"], "batched");
    assert_eq!(counters["received"], 0);
}

#[test]
fn sighup_stops_serve_with_129_unless_it_was_started_under_nohup() {
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    for nohup in [false, true] {
        let json = dir.path().join(format!("serve-{nohup}.json"));
        let mut cmd = if nohup {
            let mut c = Command::new("nohup");
            c.arg(cargo_bin("latlab"));
            c
        } else {
            // Not ignored when started, whatever the runner's own SIGHUP is.
            common::latlab_with_default_sighup()
        };
        // `nohup` execs latlab, so the child's id is latlab's own.
        let mut child = cmd
            .args(["serve", "--listen", "127.0.0.1:0", "--duration", "1500ms"])
            .arg("--json")
            .arg(&json)
            // With no terminal anywhere, nohup says nothing of its own.
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let started = first_stderr_line(&mut child);
        assert!(started.contains("latlab serve"), "{started}");
        send("HUP", &child.id().to_string());
        let code = exit_code(&mut child);
        assert_eq!(code, Some(if nohup { 0 } else { 129 }), "nohup: {nohup}");
        assert!(json.is_file(), "nohup: {nohup}");
    }
}

#[test]
fn sigterm_to_emu_writes_its_json_and_exits_143() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("emu.json");
    let mut child = emu_blocking(&lab)
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = first_stderr_line(&mut child);
    assert!(started.contains("latlab emu"), "{started}");
    // `ip netns exec` execs latlab, so the child's id is latlab's own.
    send("TERM", &child.id().to_string());
    assert_eq!(exit_code(&mut child), Some(143));
    let report = common::read_json(&json);
    assert!(report["a_to_b"].is_object(), "{report}");
}

/// A namespace named as latlab names them, with a lock file whose lock nobody holds: what a
/// run killed with `kill -9` leaves. Deleted on drop if still there.
struct LeftBehind(String);

impl LeftBehind {
    fn new(name: String) -> LeftBehind {
        let lock = OwnerLock::create(&lock_path(&name)).unwrap().unwrap();
        let added = Command::new("ip")
            .args(["netns", "add", &name])
            .status()
            .unwrap();
        assert!(added.success());
        // The owner is gone: its lock goes with it, its lock file stays.
        drop(lock);
        LeftBehind(name)
    }
}

impl Drop for LeftBehind {
    fn drop(&mut self) {
        if namespace_exists(&self.0) {
            let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
        }
        let _ = std::fs::remove_file(lock_path(&self.0));
    }
}

/// A PID no process has now.
fn dead_pid() -> u32 {
    (3_000_000..)
        .find(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        .unwrap()
}

#[test]
fn latlab_clean_removes_namespaces_by_their_free_lock_not_by_their_pid() {
    // Not while another test of this file has leftovers of its own on purpose.
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let me = std::process::id();
    // A live run whose PID means nothing here (it runs in another PID namespace): it holds
    // its lock, so it stays.
    let live = Namespace::create(&format!("latlab-{}-t{me}-0-live", dead_pid())).unwrap();
    // A run that was PID 1 of its container and was killed: PID 1 exists here, but the lock is
    // free, so it goes.
    let left = LeftBehind::new(format!("latlab-1-t{me}-0-left"));
    let out = Command::new(cargo_bin("latlab"))
        .arg("clean")
        .current_dir(tempfile::tempdir().unwrap().path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!namespace_exists(&left.0), "{stdout}");
    assert!(!lock_path(&left.0).exists());
    assert!(
        stdout.contains("left by a run that ended") && stdout.contains(&left.0),
        "{stdout}"
    );
    assert!(
        namespace_exists(live.name()),
        "a live run's namespace was removed"
    );
    assert!(!stdout.contains(live.name()), "{stdout}");
}

#[test]
fn a_run_killed_outright_is_cleaned_up_by_the_next_run_and_by_latlab_clean() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    // A live run's namespace (the test's own; the test above shows the PID in it plays no part).
    let live = Namespace::create(&format!("latlab-{}-t-1-live", std::process::id())).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let killed_run = |name: &str| -> Vec<String> {
        let mut child = common::demo_to_stop(&dir.path().join(name))
            .spawn()
            .unwrap();
        let pid = child.id();
        wait_for("the demo's two namespaces", || {
            common::namespaces_of(pid).len() == 2
        });
        // Killed while measuring, not while it starts `ip` children: a child between its fork
        // and its exec holds copies of the locks, and rightly keeps the namespaces alive.
        std::thread::sleep(Duration::from_millis(500));
        send("KILL", &pid.to_string());
        child.wait().unwrap();
        let left = common::namespaces_of(pid);
        assert_eq!(left.len(), 2, "kill -9 leaves the namespaces");
        wait_for("the killed run's locks to be free", || {
            left.iter()
                .all(|n| matches!(OwnerLock::open(&lock_path(n)), Ok(Some(_))))
        });
        left
    };
    // The next run that makes namespaces removes them at its start, in one line.
    let left = killed_run("killed-1");
    let next = Command::new(cargo_bin("latlab"))
        .args([
            "demo",
            "--duration",
            "100ms",
            "--rates",
            "1k",
            "--no-emulated-link",
        ])
        .arg("--out")
        .arg(dir.path().join("next"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&next.stderr);
    assert!(next.status.success(), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.contains("left by a run that ended"))
        .unwrap_or_else(|| panic!("no line about the leftovers in {stderr}"));
    assert!(line.starts_with("removed "), "{line}");
    for name in &left {
        assert!(line.contains(name.as_str()), "{line}");
        assert!(!namespace_exists(name));
    }
    // `latlab clean DIR` removes them too, and the partial folders of both killed runs.
    let left = killed_run("killed-2");
    let partials = partials_under(dir.path());
    assert_eq!(partials.len(), 2, "{partials:?}");
    let clean = Command::new(cargo_bin("latlab"))
        .arg("clean")
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&clean.stdout);
    assert!(clean.status.success(), "{stdout}");
    for name in &left {
        assert!(stdout.contains(name.as_str()), "{stdout}");
        assert!(!namespace_exists(name));
    }
    assert!(
        stdout.contains("removed 2 partial results left by a run that ended"),
        "{stdout}"
    );
    assert_eq!(partials_under(dir.path()), Vec::<PathBuf>::new());
    assert!(
        namespace_exists(live.name()),
        "a live run's namespace was removed"
    );
}

/// A latlab child of the test, killed (by its PID) and reaped on drop if it still runs, so a
/// test that fails half-way leaves no emulator behind.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `latlab emu` in the lab's emulator namespace: 1 ms each way, one blocking loop.
fn emu_blocking(lab: &ClientEmuServer) -> std::process::Command {
    let mut emu = common::in_ns(lab.emu.name());
    emu.args([
        "emu",
        "--iface-a",
        ClientEmuServer::EMU_A,
        "--iface-b",
        ClientEmuServer::EMU_B,
        "--delay",
        "1ms",
        "--poll",
        "block",
        "--mode",
        "run-to-completion",
    ]);
    emu
}

/// `latlab emu --pcap FILE` with the lab's emulator namespace, running until stopped.
fn emu_with_pcap(lab: &ClientEmuServer, pcap: &Path) -> Running {
    let child = emu_blocking(lab)
        .arg("--pcap")
        .arg(pcap)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Running(child)
}

#[test]
fn latlab_clean_removes_the_pcap_partial_of_an_emu_killed_outright_and_keeps_a_live_ones() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    // `ip netns exec` execs latlab, so each child's id is latlab's own.
    let partial_of = |name: &str, pid: u32| dir.path().join(format!(".{name}.partial-{pid}"));

    let mut killed = emu_with_pcap(&lab, &dir.path().join("killed.pcapng"));
    let started = first_stderr_line(&mut killed.0);
    assert!(started.contains("latlab emu"), "{started}");
    let left = partial_of("killed.pcapng", killed.0.id());
    wait_for("the killed emu's partial capture", || left.exists());
    send("KILL", &killed.0.id().to_string());
    killed.0.wait().unwrap();
    assert!(left.exists(), "kill -9 leaves the partial capture");
    wait_for("the killed emu's lock to be free", || {
        matches!(OwnerLock::open(&left), Ok(Some(_)))
    });

    let mut live = emu_with_pcap(&lab, &dir.path().join("live.pcapng"));
    let started = first_stderr_line(&mut live.0);
    assert!(started.contains("latlab emu"), "{started}");
    let writing = partial_of("live.pcapng", live.0.id());
    wait_for("the live emu's partial capture", || writing.exists());

    let clean = Command::new(cargo_bin("latlab"))
        .arg("clean")
        .arg(dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&clean.stdout);
    assert!(
        clean.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&clean.stderr)
    );
    assert!(
        stdout.contains(&format!(
            "removed 1 partial result left by a run that ended: {}",
            left.display()
        )),
        "{stdout}"
    );
    assert!(!left.exists(), "{stdout}");
    assert!(
        writing.exists(),
        "a live emu's capture was removed: {stdout}"
    );
    assert!(!stdout.contains("live.pcapng"), "{stdout}");

    // The live one, stopped as usual, renames its capture into place.
    send("TERM", &live.0.id().to_string());
    assert_eq!(exit_code(&mut live.0), Some(143));
    assert!(dir.path().join("live.pcapng").is_file());
    assert_eq!(partials_under(dir.path()), Vec::<PathBuf>::new());
}

/// A UDP reflector on loopback that returns each datagram `delay` after it came (the delayed
/// path of a lossless link), counting what it returned; it runs until `done` is set.
struct DelayedEcho {
    addr: std::net::SocketAddr,
    returned: std::sync::Arc<std::sync::atomic::AtomicU64>,
    done: std::sync::Arc<std::sync::atomic::AtomicBool>,
    threads: Vec<std::thread::JoinHandle<()>>,
}

impl DelayedEcho {
    fn start(delay: Duration) -> DelayedEcho {
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        use std::sync::{mpsc, Arc};
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let addr = socket.local_addr().unwrap();
        let back = socket.try_clone().unwrap();
        let returned = Arc::new(AtomicU64::new(0));
        let done = Arc::new(AtomicBool::new(false));
        let (queue, held) = mpsc::channel::<(Instant, Vec<u8>, std::net::SocketAddr)>();
        let reader = {
            let done = done.clone();
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 65_536];
                while !done.load(Ordering::Relaxed) {
                    if let Ok((n, from)) = socket.recv_from(&mut buf) {
                        let _ = queue.send((Instant::now() + delay, buf[..n].to_vec(), from));
                    }
                }
            })
        };
        let writer = {
            let returned = returned.clone();
            std::thread::spawn(move || {
                // In arrival order, each when its delay is over; ends when the reader does.
                for (due, bytes, to) in held {
                    std::thread::sleep(due.saturating_duration_since(Instant::now()));
                    back.send_to(&bytes, to).unwrap();
                    returned.fetch_add(1, Ordering::Relaxed);
                }
            })
        };
        DelayedEcho {
            addr,
            returned,
            done,
            threads: vec![reader, writer],
        }
    }

    fn returned(&self) -> u64 {
        self.returned.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for DelayedEcho {
    fn drop(&mut self) {
        self.done.store(true, std::sync::atomic::Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

#[test]
fn ctrl_c_to_gen_waits_for_the_probes_in_flight_and_counts_none_as_lost() {
    let _turn = common::engines();
    // 50 ms each way on a lossless path: at 1k probes a second about 50 are in flight at
    // any moment, the signal's included.
    let echo = DelayedEcho::start(Duration::from_millis(50));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("gen.json");
    let mut child = Command::new(cargo_bin("latlab"))
        .args(["gen", "--target", &echo.addr.to_string()])
        .args(["--rate", "1k", "--duration", "30s", "--poll", "block"])
        // Ample for a loaded machine: the run ends as soon as every probe is back.
        .args(["--grace", "10s"])
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Well into the measured part (past the 100 ms warm-up).
    wait_for("500 probes returned", || echo.returned() >= 500);
    send("INT", &child.id().to_string());
    assert_eq!(exit_code(&mut child), Some(130));
    let mut stdout = String::new();
    std::io::Read::read_to_string(&mut child.stdout.take().unwrap(), &mut stdout).unwrap();
    let summary = common::read_json(&json);
    assert_eq!(summary["stopped_early"], true, "{summary}");
    let sent = summary["sent"].as_u64().unwrap();
    assert!(sent >= 300, "{summary}");
    assert_eq!(summary["received"].as_u64(), Some(sent), "{summary}");
    assert_eq!(summary["lost"], 0, "{summary}");
    assert_eq!(summary["loss_ratio"], 0.0, "{summary}");
    // The table says so too.
    let lost_line = stdout.lines().find(|l| l.contains("lost")).unwrap_or("");
    assert!(!lost_line.is_empty(), "{stdout}");
    assert!(
        !lost_line.chars().any(|c| c.is_ascii_digit() && c != '0'),
        "{stdout}"
    );
}
