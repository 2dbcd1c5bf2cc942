//! `latlab emu --attach NETNS` / `--attach-pid PID` (issue 22): the emulated link spliced into
//! a running namespace wired to a Linux bridge as Docker and Podman wire a container, measured,
//! and the wiring put back exactly as it was: on exit, on SIGTERM, and by `latlab clean` after
//! `kill -9` at any stage; what cannot be spliced is refused with one line and left as it was.
//!
//! Each test makes its own "host" namespace (the bridge, where latlab runs) and "container"
//! namespaces, and compares `ip -d -j link`, `ip -j addr`, `ip -j route` and `bridge -j link`
//! in the host (and the container's link and addresses) before and after. The tests take turns
//! (a stale splice of one would be put back by another's start-up clean-up). Root; must run
//! under CI=true.

mod common;

use std::io::{BufRead, BufReader};
use std::net::{SocketAddr, UdpSocket};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use latlab_lab::topology::{ip, namespace_exists, unique_prefix, Namespace};
use serde_json::Value;

/// The bridge's address in the host namespace, and the container's.
const BRIDGE_ADDR: &str = "198.18.5.1";
const CONTAINER_ADDR: &str = "198.18.5.2";

/// A host namespace with bridge `br0` (198.18.5.1/24) and a container namespace whose `eth0`
/// (198.18.5.2/24) is a veth whose peer `h0` is a port of `br0` (with hairpin on, a setting a
/// new port does not have); and, on the same bridge, another port `n0` the splice must not
/// touch.
struct Wired {
    host: Namespace,
    container: Namespace,
}

impl Wired {
    fn build() -> Wired {
        let prefix = unique_prefix();
        let host = Namespace::create(&format!("{prefix}-host")).unwrap();
        let container = Namespace::create(&format!("{prefix}-cont")).unwrap();
        let (h, c) = (host.name(), container.name());
        for args in [
            vec!["-n", h, "link", "add", "br0", "type", "bridge"],
            vec!["-n", h, "addr", "add", "198.18.5.1/24", "dev", "br0"],
            vec!["-n", h, "link", "set", "br0", "up"],
            vec![
                "-n", h, "link", "add", "h0", "type", "veth", "peer", "name", "eth0", "netns", c,
            ],
            vec!["-n", h, "link", "set", "h0", "master", "br0"],
            vec![
                "-n",
                h,
                "link",
                "set",
                "dev",
                "h0",
                "type",
                "bridge_slave",
                "hairpin",
                "on",
            ],
            vec!["-n", h, "link", "set", "h0", "up"],
            vec![
                "-n", h, "link", "add", "n0", "type", "veth", "peer", "name", "n1",
            ],
            vec!["-n", h, "link", "set", "n0", "master", "br0"],
            vec!["-n", h, "link", "set", "n0", "up"],
            vec!["-n", c, "addr", "add", "198.18.5.2/24", "dev", "eth0"],
            vec!["-n", c, "link", "set", "eth0", "up"],
        ] {
            ip(&args).unwrap();
        }
        Wired { host, container }
    }

    /// Everything the splice may change, as `ip` and `bridge` show it; timers left out (they
    /// run on their own).
    fn snapshot(&self) -> Value {
        let (h, c) = (self.host.name(), self.container.name());
        let mut all = serde_json::Map::new();
        for (key, program, args) in [
            ("host link", "ip", vec!["-n", h, "-d", "-j", "link"]),
            ("host addr", "ip", vec!["-n", h, "-j", "addr"]),
            (
                "host route",
                "ip",
                vec!["-n", h, "-j", "route", "show", "table", "all"],
            ),
            (
                "host route6",
                "ip",
                vec!["-n", h, "-6", "-j", "route", "show", "table", "all"],
            ),
            ("host bridge", "bridge", vec!["-n", h, "-d", "-j", "link"]),
            ("container link", "ip", vec!["-n", c, "-d", "-j", "link"]),
            ("container addr", "ip", vec!["-n", c, "-j", "addr"]),
        ] {
            let out = Command::new(program).args(&args).output().unwrap();
            assert!(out.status.success(), "{program} {args:?}");
            let mut v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            drop_timers(&mut v);
            all.insert(key.to_string(), v);
        }
        Value::Object(all)
    }

    /// The snapshot once every IPv6 address is past duplicate address detection (at most
    /// 5 s): the wiring as it stays.
    fn settled(&self) -> Value {
        let start = Instant::now();
        loop {
            let now = self.snapshot();
            if !now.to_string().contains("tentative") || start.elapsed() > Duration::from_secs(5) {
                return now;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (at most 5 s: IPv6 addresses come back tentative) until the wiring is `before`.
    fn back_to(&self, before: &Value, after: &str) {
        let start = Instant::now();
        loop {
            let differs = difference(before, &self.snapshot());
            if differs.is_empty() {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "the wiring after {after} differs from before (before → after):\n{differs}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `latlab emu ARGS` in the host namespace, with stderr piped.
    fn emu(&self, args: &[&str]) -> Command {
        let mut cmd = latlab_in(self.host.name());
        cmd.arg("emu")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    /// Whether the host side is spliced out: `h0` is no longer in the host namespace.
    fn spliced(&self) -> bool {
        ip(&["-n", self.host.name(), "link", "show", "dev", "h0"]).is_err()
    }
}

/// `nsenter --net=/run/netns/NS latlab`: latlab in the network namespace `ns` alone (`ip netns
/// exec` would give it a mount namespace of its own too, which `--attach` refuses); nsenter
/// execs latlab, so the child's id is latlab's own.
fn latlab_in(ns: &str) -> Command {
    let mut c = Command::new("nsenter");
    c.arg(format!("--net=/run/netns/{ns}"))
        .arg(assert_cmd::cargo::cargo_bin("latlab"));
    c
}

/// Every leaf of `v` by its path, for a difference that reads.
fn leaves(v: &Value, path: String, out: &mut std::collections::BTreeMap<String, String>) {
    match v {
        Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| leaves(v, format!("{path}.{k}"), out)),
        // Interfaces, addresses and routes by what names them, not by where they are listed
        // (a route table is a set; routes put back are listed in another order).
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| {
            let name: Vec<&str> = ["ifname", "dst", "dev", "table", "local"]
                .iter()
                .filter_map(|k| v.get(*k).and_then(Value::as_str))
                .collect();
            let name = match name.is_empty() {
                true => i.to_string(),
                false => name.join(" "),
            };
            leaves(v, format!("{path}[{name}]"), out)
        }),
        other => {
            out.insert(path, other.to_string());
        }
    }
}

/// The leaves of `a` and `b` that differ, one a line; empty when the two are the same wiring.
fn difference(a: &Value, b: &Value) -> String {
    let (mut x, mut y) = (Default::default(), Default::default());
    leaves(a, String::new(), &mut x);
    leaves(b, String::new(), &mut y);
    let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
    keys.into_iter()
        .filter(|k| x.get(*k) != y.get(*k))
        .map(|k| format!("{k}: {:?} → {:?}", x.get(k), y.get(k)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn drop_timers(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| !k.ends_with("_timer"));
            map.values_mut().for_each(drop_timers);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_timers),
        _ => {}
    }
}

/// Whether the tests can run: namespaces, iproute2's `bridge` and util-linux's `nsenter`.
fn can_run() -> bool {
    use latlab_io::precondition::{met, need_program};
    common::namespaces_or_skip()
        && met(need_program("bridge", "iproute2"))
        && met(need_program("nsenter", "util-linux"))
}

/// A running `latlab emu --attach`, stopped with SIGTERM (which puts the wiring back) if a
/// test ends before it has.
struct Running(Child);

impl Running {
    /// Sends it `signal` (`TERM`, `INT`).
    fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args(["-s", signal, &self.0.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -s {signal}");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.signal("TERM");
            let _ = self.0.wait();
        }
    }
}

/// Starts `cmd` and waits (at most 10 s) for the line that says the bridge runs; the rest of
/// stderr is read on a thread.
fn started(mut cmd: Command) -> Running {
    let mut child = Running(cmd.spawn().unwrap());
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let start = Instant::now();
    let mut seen = Vec::new();
    while start.elapsed() < Duration::from_secs(10) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) if line.contains("bridging") => return child,
            Ok(line) => seen.push(line),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    drop(child);
    panic!("latlab emu --attach did not start: {seen:?}");
}

/// Waits (at most 15 s) for `child` to exit; its exit code.
fn exit_code(child: &mut Running) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            return status.code();
        }
        assert!(
            start.elapsed() < Duration::from_secs(15),
            "latlab did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// UDP round trips from the container to the bridge's address: a reflector in the host, `n`
/// pings 10 ms apart from the container. Returns each round trip, sorted.
fn round_trips(w: &Wired, n: usize) -> Vec<Duration> {
    let server: SocketAddr = format!("{BRIDGE_ADDR}:7788").parse().unwrap();
    let reflector = latlab_io::netns::run_in(w.host.name(), move || UdpSocket::bind(server))
        .unwrap()
        .unwrap();
    reflector
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = done.clone();
    let echo = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            if let Ok((len, from)) = reflector.recv_from(&mut buf) {
                let _ = reflector.send_to(&buf[..len], from);
            }
        }
    });
    let client = latlab_io::netns::run_in(w.container.name(), || {
        UdpSocket::bind(format!("{CONTAINER_ADDR}:0"))
    })
    .unwrap()
    .unwrap();
    client
        .set_read_timeout(Some(Duration::from_secs(1)))
        .unwrap();
    let mut rtts = Vec::new();
    let mut buf = [0u8; 64];
    for seq in 0..n as u32 {
        let sent = Instant::now();
        client.send_to(&seq.to_be_bytes(), server).unwrap();
        // Answers to earlier pings that came late are skipped.
        while let Ok((len, _)) = client.recv_from(&mut buf) {
            if buf[..len] == seq.to_be_bytes() {
                rtts.push(sent.elapsed());
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    echo.join().unwrap();
    rtts.sort();
    rtts
}

/// Checks that `rtts` (sorted) are all answered and above twice the one-way `delay`, with a
/// median within `slack` of it.
fn delayed_by(rtts: &[Duration], n: usize, delay: Duration, slack: Duration) {
    assert!(
        rtts.len() >= n * 9 / 10,
        "{} of {n} pings answered",
        rtts.len()
    );
    let (min, median) = (rtts[0], rtts[rtts.len() / 2]);
    assert!(min >= 2 * delay, "min RTT {min:?} below twice {delay:?}");
    assert!(
        median <= 2 * delay + slack,
        "median RTT {median:?} over 2 × {delay:?} + {slack:?}"
    );
}

#[test]
fn attach_delays_a_bridged_namespace_and_puts_the_wiring_back_on_exit_and_on_sigterm() {
    let _turn = common::engines();
    if !can_run() {
        return;
    }
    let w = Wired::build();
    let before = w.settled();
    let plain = round_trips(&w, 20);
    assert!(
        plain.len() >= 18 && plain[plain.len() / 2] < Duration::from_millis(5),
        "{plain:?}"
    );

    // To its end (--duration), by name.
    let emu = w.emu(&[
        "--attach",
        w.container.name(),
        "--delay",
        "5ms",
        "--poll",
        "block",
    ]);
    let mut child = started({
        let mut emu = emu;
        emu.args(["--duration", "4s"]);
        emu
    });
    assert!(w.spliced(), "h0 left the host namespace");
    let rtts = round_trips(&w, 50);
    delayed_by(
        &rtts,
        50,
        Duration::from_millis(5),
        Duration::from_millis(15),
    );
    assert_eq!(exit_code(&mut child), Some(0));
    w.back_to(&before, "--duration");

    // Stopped by SIGTERM, by the pid of a process in the container.
    let mut sleeper = Command::new("ip")
        .args(["netns", "exec", w.container.name(), "sleep", "60"])
        .spawn()
        .unwrap();
    let pid = sleeper.id().to_string();
    let mut child = started(w.emu(&["--attach-pid", &pid, "--delay", "2ms", "--poll", "block"]));
    let rtts = round_trips(&w, 20);
    delayed_by(
        &rtts,
        20,
        Duration::from_millis(2),
        Duration::from_millis(15),
    );
    child.signal("TERM");
    assert_eq!(exit_code(&mut child), Some(143));
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    w.back_to(&before, "SIGTERM");
    let after = round_trips(&w, 10);
    assert!(
        after.len() >= 9 && after[after.len() / 2] < Duration::from_millis(5),
        "{after:?}"
    );
}

#[test]
fn kill_9_at_any_stage_then_latlab_clean_puts_the_wiring_back() {
    let _turn = common::engines();
    if !can_run() {
        return;
    }
    let w = Wired::build();
    let before = w.settled();
    let mut caught_spliced = 0;
    // From before the splice starts to well after it is in place.
    for delay_ms in [0, 3, 6, 10, 15, 20, 30, 45, 70, 100, 200, 400] {
        let mut child = w
            .emu(&[
                "--attach",
                w.container.name(),
                "--delay",
                "1ms",
                "--poll",
                "block",
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.kill().unwrap();
        child.wait().unwrap();
        caught_spliced += usize::from(w.spliced());
        let clean = latlab_in(w.host.name()).arg("clean").output().unwrap();
        assert!(
            clean.status.success(),
            "latlab clean after kill -9 at {delay_ms} ms: {}",
            String::from_utf8_lossy(&clean.stderr)
        );
        w.back_to(
            &before,
            &format!("kill -9 at {delay_ms} ms and latlab clean"),
        );
        let left: Vec<String> = std::fs::read_dir("/run/netns")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("latlab-{pid}-")))
            .collect();
        assert!(left.is_empty(), "left after clean: {left:?}");
    }
    assert!(
        caught_spliced > 0,
        "no kill -9 came while the link was spliced"
    );
    let after = round_trips(&w, 10);
    assert!(
        after.len() >= 9 && after[after.len() / 2] < Duration::from_millis(5),
        "{after:?}"
    );
}

/// Runs `latlab emu ARGS` in `w`'s host and checks it fails with one line containing
/// `needle` (lines of the start-up clean-up of other runs' leftovers aside).
fn refused(w: &Wired, args: &[&str], needle: &str) {
    let out = w.emu(args).output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| !l.starts_with("removed ") && !l.starts_with("put back "))
        .collect();
    assert_eq!(lines.len(), 1, "{args:?} printed:\n{stderr}");
    assert!(
        lines[0].contains(needle),
        "{args:?}: {stderr:?} lacks {needle:?}"
    );
}

#[test]
fn what_cannot_be_attached_is_refused_in_one_line_and_left_as_it_was() {
    let _turn = common::engines();
    if !can_run() {
        return;
    }
    let w = Wired::build();
    let h = w.host.name();
    let prefix = unique_prefix();
    // A namespace with lo only, one with a TUN device, one with a macvlan (on a veth of the
    // host's), one with both ends of a veth pair, and one whose veth's host side carries an
    // address.
    let lo_only = Namespace::create(&format!("{prefix}-lo")).unwrap();
    let tun = Namespace::create(&format!("{prefix}-tun")).unwrap();
    let macvlan = Namespace::create(&format!("{prefix}-macvlan")).unwrap();
    let pair = Namespace::create(&format!("{prefix}-pair")).unwrap();
    let routed = Namespace::create(&format!("{prefix}-routed")).unwrap();
    for args in [
        vec![
            "-n",
            tun.name(),
            "tuntap",
            "add",
            "dev",
            "tun0",
            "mode",
            "tun",
        ],
        vec![
            "-n",
            pair.name(),
            "link",
            "add",
            "p0",
            "type",
            "veth",
            "peer",
            "name",
            "p1",
        ],
        vec![
            "-n", h, "link", "add", "m0", "type", "veth", "peer", "name", "m1",
        ],
        vec![
            "-n", h, "link", "add", "link", "m0", "name", "mv0", "type", "macvlan",
        ],
        vec!["-n", h, "link", "set", "mv0", "netns", macvlan.name()],
        vec![
            "-n",
            h,
            "link",
            "add",
            "r0",
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            routed.name(),
        ],
        vec!["-n", h, "addr", "add", "198.18.7.1/24", "dev", "r0"],
        vec!["-n", h, "link", "set", "r0", "up"],
    ] {
        ip(&args).unwrap();
    }
    let before = w.settled();
    let gone = format!("{prefix}-gone");
    refused(
        &w,
        &["--attach", &gone],
        &format!("--attach {gone}: no such network namespace"),
    );
    refused(
        &w,
        &["--attach-pid", "999999999"],
        "--attach-pid 999999999: no such network namespace",
    );
    refused(&w, &["--attach", lo_only.name()], "has no interface but lo");
    refused(&w, &["--attach", tun.name()], "has no veth: tun0 is a tun");
    refused(
        &w,
        &["--attach", pair.name()],
        "has no veth whose peer is in this namespace",
    );
    refused(
        &w,
        &["--attach", macvlan.name()],
        "has no veth: mv0 is a macvlan",
    );
    refused(
        &w,
        &["--attach", routed.name()],
        "r0 carries addresses (198.18.7.1/24)",
    );
    refused(&w, &["--attach", h], "is the namespace latlab runs in");
    // Under `ip netns exec`, the namespace spliced through would die with latlab.
    let out = common::in_ns(h)
        .args(["emu", "--attach", w.container.name()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("runs in a mount namespace of its own"),
        "{stderr}"
    );
    w.back_to(&before, "the refusals");

    // Two attaches on one namespace: the second is refused while the first runs.
    let mut first = started(w.emu(&["--attach", w.container.name(), "--poll", "block"]));
    refused(
        &w,
        &["--attach", w.container.name()],
        "already attached by another running latlab emu",
    );
    first.signal("INT");
    assert_eq!(exit_code(&mut first), Some(130));
    w.back_to(&before, "the first attach's Ctrl-C");
    let emu_namespaces = std::fs::read_dir("/run/netns")
        .unwrap()
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(&format!("latlab-{}-", first.0.id()))
        })
        .count();
    assert_eq!(emu_namespaces, 0);
    drop((lo_only, tun, macvlan, pair, routed));
    assert!(!namespace_exists(&gone));
}
