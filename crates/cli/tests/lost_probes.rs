//! Every probe `latlab gen` loses is placed by cause in its `lost_by_cause`, from the kernel's
//! counters, and the causes add up to the loss: losses made to happen at a known place in a
//! namespace the test made (root; must run under CI=true). A stopped game server's full socket
//! is counted the same way in `serve --json`.

mod common;

use std::process::Command;

/// `kill -SIGNAL pid`.
fn signal(name: &str, pid: u32) {
    common::succeeds(Command::new("kill").args([&format!("-{name}"), &pid.to_string()]));
}

/// Starts latlab with `args` in `ns` with the smallest receive buffer (`--rcvbuf 1`) and its
/// `--json` at `json`, waits until its socket holds `port`, and stops it (SIGSTOP).
fn stopped_with_the_smallest_buffer(
    ns: &str,
    args: &[&str],
    json: &std::path::Path,
    port: u16,
) -> common::Reaped {
    let child = common::in_ns(ns)
        .args(args)
        .args(["--rcvbuf", "1", "--json"])
        .arg(json)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let child = common::Reaped::new(child);
    common::wait_for("the socket", || common::rx_queue(ns, port).is_some());
    signal("STOP", child.id());
    child
}

/// `gen` to `target` from `ns` for 300 ms at 1k probes a second, blocking, with no check that
/// anything answers, its `--json` at `json`; what it printed.
fn gen_300_probes(ns: &str, target: &str, json: &std::path::Path) -> String {
    let json = json.display().to_string();
    common::gen_in(
        ns,
        target,
        &[
            "--no-check",
            "--poll",
            "block",
            "--rate",
            "1k",
            "--duration",
            "300ms",
            "--json",
            &json,
        ],
    )
}

/// The probes gen's `summary` says it sent, the warm-up's included.
fn sent_with_warmup(summary: &serde_json::Value) -> u64 {
    summary["sent"].as_u64().unwrap() + summary["warmup"]["sent"].as_u64().unwrap()
}

/// gen's `lost_by_cause`, checked to add up to its loss: warm-up included, every probe sent.
fn lost_by_cause(summary: &serde_json::Value) -> serde_json::Value {
    let lost = &summary["lost_by_cause"];
    let n = |key: &str| lost[key].as_u64().unwrap_or(0);
    let all_lost = summary["lost"].as_u64().unwrap() + summary["warmup"]["sent"].as_u64().unwrap()
        - summary["warmup"]["received"].as_u64().unwrap();
    assert_eq!(n("lost"), all_lost, "{lost}");
    assert_eq!(
        n("sender") + n("path") + n("reflector_socket") + n("reflector") + n("unanswered"),
        n("lost"),
        "{lost}"
    );
    lost.clone()
}

/// The reflector is stopped (SIGSTOP) before any probe is sent, with the smallest receive
/// buffer: the few probes the buffer holds wait there, the kernel drops the rest at its
/// socket. The reflector's socket carries exactly the drops the reflector itself counted; the
/// probes held are unanswered (answered once it goes on, after gen has gone: the namespace
/// counts those answers as sent to a port nobody holds).
#[test]
fn a_stopped_reflectors_full_socket_carries_the_probes_it_dropped() {
    let _turn = common::engines();
    let Some((_lab, ns, addr)) = common::server_namespace() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (echo_json, gen_json) = (dir.path().join("echo.json"), dir.path().join("gen.json"));
    let target = format!("{addr}:7777");
    let mut echo = stopped_with_the_smallest_buffer(
        &ns,
        &["echo", "--listen", &target, "--poll", "block"],
        &echo_json,
        7777,
    );
    let printed = gen_300_probes(&ns, &target, &gen_json);
    signal("CONT", echo.id());
    let summary = common::read_json(&gen_json);
    let lost = lost_by_cause(&summary);
    let sent = sent_with_warmup(&summary);
    assert_eq!(lost["lost"], sent, "nothing came back: {lost}");
    // Wait for the reflector to answer what its buffer held (to gen's ports, gone by now),
    // then stop it; its JSON says what its socket dropped.
    let held = sent - lost["reflector_socket"].as_u64().unwrap();
    let no_ports = || {
        let out = common::succeeds(Command::new("ip").args([
            "netns",
            "exec",
            &ns,
            "cat",
            "/proc/net/snmp",
        ]));
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
        let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
        let at = names
            .split_whitespace()
            .position(|n| n == "NoPorts")
            .unwrap();
        values
            .split_whitespace()
            .nth(at)
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    common::wait_for("the held probes' answers", || no_ports() >= held);
    signal("TERM", echo.id());
    // Stopped by SIGTERM, as a shell reports it; its JSON written whole first.
    assert_eq!(echo.wait().unwrap().code(), Some(143));
    let reflector = common::read_json(&echo_json);
    let dropped = reflector["kernel_drops"].as_u64().unwrap();
    assert!(dropped > 0, "{reflector}");
    assert_eq!(lost["reflector_socket"], dropped, "{lost}\n{reflector}");
    assert_eq!(lost["unanswered"], held, "{lost}");
    assert_eq!(reflector["received"], held, "{reflector}");
    assert_eq!(reflector["udp"]["rcvbuf_errors"], dropped, "{reflector}");
    assert_eq!(reflector["udp"]["no_ports"], held, "{reflector}");
    for cause in ["sender", "reflector", "counted_beyond_loss"] {
        assert_eq!(lost[cause], 0, "{cause}: {lost}");
    }
    assert_eq!(lost["path"], serde_json::Value::Null, "gen knows no path");
    let line = printed
        .lines()
        .find(|l| l.contains("(warm-up included)"))
        .unwrap_or_else(|| panic!("no line of lost probes in:\n{printed}"));
    assert_eq!(
        line,
        format!(
            "lost {sent} (warm-up included): sender's socket/stack 0, path -, reflector's socket \
             {dropped}, reflector 0, unanswered for no counted reason {held}"
        )
    );
}

/// Nothing listens on the target's port: every probe is counted by the namespace as sent to
/// a port nobody holds, and placed at the reflector.
#[test]
fn probes_to_a_port_nobody_holds_are_placed_at_the_reflector() {
    let _turn = common::engines();
    let Some((_lab, ns, addr)) = common::server_namespace() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let gen_json = dir.path().join("gen.json");
    common::gen_in(
        &ns,
        &format!("{addr}:7778"),
        &[
            "--no-check",
            "--poll",
            "block",
            "--rate",
            "1k",
            "--duration",
            "200ms",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain(["--json".into(), gen_json.display().to_string()])
        .collect::<Vec<_>>(),
    );
    let summary = common::read_json(&gen_json);
    let lost = lost_by_cause(&summary);
    let sent = sent_with_warmup(&summary);
    assert!(sent > 0);
    assert_eq!(lost["lost"], sent, "{lost}");
    assert_eq!(lost["reflector"], sent, "{lost}");
    assert_eq!(lost["counters"]["sender_udp"]["no_ports"], sent, "{lost}");
    assert_eq!(lost["counters"]["shared_namespace"], true, "{lost}");
    for cause in [
        "sender",
        "reflector_socket",
        "unanswered",
        "counted_beyond_loss",
    ] {
        assert_eq!(lost[cause], 0, "{cause}: {lost}");
    }
}

/// A game server stopped (SIGSTOP) with the smallest receive buffer: what its socket held it
/// reads once it goes on, the kernel drops the rest there. Its `--json` counts both, and they
/// add up to every datagram sent to it; the namespace's MIB counts the same drops.
#[test]
fn a_stopped_game_servers_full_socket_counts_what_it_dropped() {
    let _turn = common::engines();
    let Some((_lab, ns, addr)) = common::server_namespace() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (serve_json, gen_json) = (dir.path().join("serve.json"), dir.path().join("gen.json"));
    let target = format!("{addr}:7000");
    let mut serve =
        stopped_with_the_smallest_buffer(&ns, &["serve", "--listen", &target], &serve_json, 7000);
    // Probes from a sender that never joined: the server reads and drops them (counted).
    gen_300_probes(&ns, &target, &gen_json);
    signal("CONT", serve.id());
    let summary = common::read_json(&gen_json);
    let sent = sent_with_warmup(&summary);
    // The server's socket is empty once it has read what it held.
    common::wait_for("the server to read what its socket held", || {
        common::rx_queue(&ns, 7000) == Some(0)
    });
    signal("TERM", serve.id());
    assert_eq!(serve.wait().unwrap().code(), Some(143));
    let report = common::read_json(&serve_json);
    let dropped = report["kernel_drops"].as_u64().unwrap();
    assert!(dropped > 0, "{report}");
    assert_eq!(
        report["received"].as_u64().unwrap() + dropped,
        sent,
        "{report}"
    );
    assert_eq!(
        report["dropped"]["unknown_sender"], report["received"],
        "{report}"
    );
    assert_eq!(report["udp"]["rcvbuf_errors"], dropped, "{report}");
}

/// The same over AF_XDP, with the smallest rings (64 frames, 32 entries each): a stopped
/// server's RX ring fills and the kernel drops the rest there (`XDP_STATISTICS`); its
/// `kernel_drops` and what it read once it went on (all of the ring: a stopped server reads
/// what its port holds before it ends) add up to every datagram sent to it.
#[test]
fn a_stopped_game_servers_full_xdp_ring_counts_what_it_dropped() {
    let _turn = common::engines();
    let Some((lab, ns, addr)) = common::server_namespace() else {
        return;
    };
    let latlab_lab::topology::ClientServer::Namespaces { client, .. } = &lab else {
        unreachable!("namespaces were asked for")
    };
    let dir = tempfile::tempdir().unwrap();
    let (serve_json, gen_json) = (dir.path().join("serve.json"), dir.path().join("gen.json"));
    let target = format!("{addr}:7000");
    let mut cmd = common::in_ns(&ns);
    cmd.args([
        "serve", "--listen", &target, "--io", "xdp", "--iface", "veth0",
    ])
    .args(["--xdp-frames", "64", "--poll", "block", "--json"])
    .arg(&serve_json)
    .stdout(std::process::Stdio::null());
    let serve = common::started(cmd, "latlab serve:");
    signal("STOP", serve.id());
    // From the client's namespace: the frames cross veth0, where the program takes them.
    gen_300_probes(client.name(), &target, &gen_json);
    signal("CONT", serve.id());
    let summary = common::read_json(&gen_json);
    let sent = sent_with_warmup(&summary);
    serve.signal("TERM");
    let (status, stderr) = serve.wait();
    assert_eq!(status.code(), Some(143), "{stderr}");
    let report = common::read_json(&serve_json);
    assert_eq!(report["io"], "xdp", "{report}");
    let dropped = report["kernel_drops"].as_u64().unwrap();
    let received = report["received"].as_u64().unwrap();
    assert!(dropped > 0 && received > 0, "{report}");
    assert_eq!(received + dropped, sent, "{report}");
    assert_eq!(report["dropped"]["unknown_sender"], received, "{report}");
}
