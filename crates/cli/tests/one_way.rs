//! One-way delays at the defaults (issue 26, part 4): `gen --clock auto` asks the reflector
//! which clock it stamps with and takes the clock as shared when it is this host's, across
//! namespaces (network and time) of one host; a reflector that names none gets round trips
//! only, and a one-way gate against it is refused before the run (exit 2, one line). Root;
//! must run under CI=true.

mod common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;
use latlab_lab::topology::ClientServer;

/// The lab's namespaces and the server's address.
fn lab_parts(lab: &ClientServer) -> (&str, &str, std::net::Ipv4Addr) {
    let ClientServer::Namespaces {
        client,
        server,
        server_addr,
        ..
    } = lab
    else {
        unreachable!("namespaces() builds namespaces")
    };
    (client.name(), server.name(), *server_addr)
}

/// `latlab gen` in `ns` towards `target` for a second at 1000 probes a second, with `args`;
/// its summary goes to `json`.
fn gen(ns: &str, target: &str, json: &std::path::Path, args: &[&str]) -> std::process::Output {
    common::in_ns(ns)
        .args([
            "gen",
            "--target",
            target,
            "--rate",
            "1k",
            "--duration",
            "1s",
        ])
        .args(["--poll", "block"])
        .args(args)
        .arg("--json")
        .arg(json)
        .output()
        .unwrap()
}

/// Checks the run's counts: a second at 1000 a second, the first 100 ms of it warm-up, so 900
/// probes scheduled; a slow machine may leave some unsent at the end, counted apart. Every
/// probe sent is received or lost, and at most a few are lost between two namespaces. Returns
/// how many came back.
fn counts_add_up(run: &serde_json::Value) -> u64 {
    let sent = run["sent"].as_u64().unwrap();
    let received = run["received"].as_u64().unwrap();
    assert_eq!(sent + run["unsent"].as_u64().unwrap(), 900, "{run}");
    assert_eq!(run["lost"].as_u64().unwrap(), sent - received, "{run}");
    assert!(received > 0 && received + 10 >= sent, "{run}");
    received
}

/// Checks that the run's one-way delays were reported, each probe's within a second (a clock
/// a day off would put them a day away, or count them impossible).
fn one_way_delays_reported(run: &serde_json::Value) {
    assert_eq!(run["clock"], "shared", "{run}");
    let received = counts_add_up(run);
    for delay in ["forward_ns", "return_ns"] {
        let s = &run[delay];
        assert!(
            s["count"].as_u64().unwrap() >= received * 99 / 100,
            "{delay}: {s}"
        );
        assert!(s["max"].as_u64().unwrap() < 1_000_000_000, "{delay}: {s}");
    }
    assert!(run.get("one_way_impossible").is_none(), "{run}");
}

#[test]
fn two_namespaces_of_one_host_get_one_way_delays_at_the_default_clock() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientServer::namespaces().unwrap();
    let (client, server, server_addr) = lab_parts(&lab);
    let target = format!("{server_addr}:7777");
    // The reflector runs until the run is over, then stops by SIGTERM (exit 143).
    let mut cmd = common::in_ns(server);
    cmd.args(["echo", "--listen", &target, "--poll", "block"])
        .stdout(Stdio::null());
    let echo = common::started(cmd, "latlab echo:");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    // No --clock: the default, auto. The target is no address of the client's namespace.
    let out = gen(
        client,
        &target,
        &json,
        &["--assert", "forward.p99<=1s", "--assert", "return.p99<=1s"],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the reflector at {target} stamps with this host's clock: one-way delays reported"
        )),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("PASS forward.p99<=1s"), "{stdout}");
    assert!(stdout.contains("PASS return.p99<=1s"), "{stdout}");
    echo.signal("TERM");
    let (status, stderr) = echo.wait();
    assert_eq!(status.code(), Some(143), "{stderr}");
    one_way_delays_reported(&common::read_json(&json));
}

#[test]
fn a_reflector_in_its_own_time_namespace_over_af_xdp_stamps_in_this_hosts_clock() {
    // The XDP program stamps in the host's CLOCK_MONOTONIC; the reflector, in a time namespace
    // whose CLOCK_MONOTONIC runs a day ahead, must still write CLOCK_REALTIME stamps, and names
    // the same clock as the generator outside it.
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientServer::namespaces().unwrap();
    let (client, server, server_addr) = lab_parts(&lab);
    let target = format!("{server_addr}:7777");
    // It runs until the run is over: unshare forks it (ip netns exec execs latlab) and ends
    // with its exit status.
    let mut cmd = Command::new("unshare");
    cmd.args(["--time", "--monotonic", "86400", "--fork", "--"])
        .args(["ip", "netns", "exec", server])
        .arg(cargo_bin("latlab"))
        .args([
            "echo", "--io", "xdp", "--iface", "veth0", "--listen", &target,
        ])
        .stdout(Stdio::null());
    let echo = common::started(cmd, "latlab echo:");
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let out = gen(client, &target, &json, &["--assert", "forward.p99<=1s"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // SIGTERM to latlab, unshare's one child: it writes its counters and exits 143.
    let children = format!("/proc/{0}/task/{0}/children", echo.id());
    let latlab = std::fs::read_to_string(&children).unwrap();
    let latlab: u32 = latlab.trim().parse().expect("unshare has one child");
    common::signal_pid(latlab, "TERM");
    let (status, stderr) = echo.wait();
    assert_eq!(status.code(), Some(143), "{stderr}");
    one_way_delays_reported(&common::read_json(&json));
}

/// A responder that predates the clock's identity: it echoes every datagram as it came (as
/// the probe format lets a responder that does not stamp), from a socket of namespace `ns`,
/// until `stop` is set.
fn old_responder(ns: &str, addr: SocketAddr, stop: Arc<AtomicBool>) -> std::thread::JoinHandle<()> {
    let socket = latlab_io::netns::run_in(ns, move || std::net::UdpSocket::bind(addr))
        .unwrap()
        .unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = socket.recv_from(&mut buf) {
                let _ = socket.send_to(&buf[..n], from);
            }
        }
    })
}

#[test]
fn an_old_reflector_in_another_namespace_gets_round_trips_only() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientServer::namespaces().unwrap();
    let (client, server, server_addr) = lab_parts(&lab);
    let addr = SocketAddr::from((server_addr, 7778));
    let target = addr.to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let responder = old_responder(server, addr, Arc::clone(&stop));
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    // Round trips are measured as ever, one-way delays not given.
    let out = gen(client, &target, &json, &["--assert", "p99<=1s"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = common::read_json(&json);
    assert_eq!(run["clock"], "separate", "{run}");
    counts_add_up(&run);
    assert!(run.get("forward_ns").is_none(), "{run}");
    // A one-way gate: refused after the check's answer, before the run, in one line.
    let refused = gen(client, &target, &json, &["--assert", "forward.p99<=1s"]);
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "--assert \"forward.p99<=1s\": one-way delays need a shared clock (--clock shared, \
             or a reflector on this host, in any of its namespaces); this run reports round \
             trips only; the reflector at {target} named no clock"
        )),
        "{stderr}"
    );
    assert!(refused.stdout.is_empty(), "no run, no table");
    stop.store(true, Ordering::Relaxed);
    responder.join().unwrap();
}

#[test]
fn a_one_way_gate_that_nothing_will_ask_about_is_refused_at_once() {
    // --no-check: nobody asks the reflector, so nothing can make the clock shared; refused
    // before any socket opens (TEST-NET-1 is never sent to).
    let out = assert_cmd::Command::new(cargo_bin("latlab"))
        .args([
            "gen",
            "--target",
            "192.0.2.1:7",
            "--rate",
            "1k",
            "--no-check",
        ])
        .args(["--assert", "forward.p99<=1ms"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("; --no-check skips asking the reflector which clock it stamps with"),
        "{stderr}"
    );
}
