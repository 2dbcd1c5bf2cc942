//! `latlab fwd` as a user runs it: between the namespaces of a `client — fwd — server` lab
//! (the emulator's topology), carrying UDP both ways and a kernel TCP connection, counting the
//! frames too long for the far side, and SIGTERM to `fwd` and `rfc2544` (root; must run under
//! CI=true). `rfc2544.rs` has the rest of `rfc2544` and the forwarding study.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::{Command, Stdio};
use std::time::Duration;

use latlab_io::netns::run_in;
use latlab_lab::topology::ClientEmuServer;

#[test]
fn bad_forwarder_flags_name_themselves() {
    let base = ["fwd", "--iface-a", "lo", "--iface-b", "latlab-none0"];
    common::one_line_error(&[&base[..], &["--batch", "0"]].concat(), "--batch");
    common::one_line_error(&[&base[..], &["--batch", "5000"]].concat(), "--batch");
    common::one_line_error(&[&base[..], &["--poll", "fast"]].concat(), "--poll");
    common::one_line_error(&[&base[..], &["--poll", "rate:0"]].concat(), "--poll");
    common::one_line_error(&[&base[..], &["--io", "socket"]].concat(), "--io");
    common::one_line_error(&[&base[..], &["--cpu", "9999"]].concat(), "--cpu 9999");
    common::one_line_error(&[&base[..], &["--duration", "soon"]].concat(), "--duration");
    common::one_line_error(&["fwd", "--iface-a", "lo", "--iface-b", "lo"], "--iface-a");
    common::one_line_error(
        &["fwd", "--iface-a", "latlab-none0", "--iface-b", "lo"],
        "--iface-a latlab-none0",
    );
    let out = Command::new(assert_cmd::cargo::cargo_bin("latlab"))
        .args(["fwd", "--iface-a", "lo", "--iface-b", "lo"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn fwd_over_af_packet_carries_udp_both_ways_and_a_tcp_connection() {
    fwd_between_namespaces(&["--io", "packet"]);
}

#[test]
fn fwd_over_af_xdp_carries_udp_both_ways_and_a_tcp_connection() {
    fwd_between_namespaces(&["--io", "xdp"]);
}

/// Runs `latlab fwd` with `extra` flags between client and server, whose far side (the
/// server's link) has an MTU of 1000: small UDP datagrams cross both ways, a 1 MB TCP transfer
/// crosses intact, and 1400-byte datagrams from the client are counted as too long for the
/// far side.
fn fwd_between_namespaces(extra: &[&str]) {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    for (ns, dev) in [(lab.server.name(), "veth0"), (lab.emu.name(), "emu-b")] {
        let ok = Command::new("ip")
            .args(["-n", ns, "link", "set", dev, "mtu", "1000"])
            .status()
            .unwrap();
        assert!(ok.success());
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("fwd.json");
    // It forwards until the test stops it, once every transfer is done.
    let mut fwd = common::in_ns(lab.emu.name());
    fwd.args(["fwd", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(["--batch", "16"])
        .args(extra)
        .arg("--json")
        .arg(&json)
        .stdout(Stdio::null());
    let fwd = common::started(fwd, "latlab fwd:");

    let client_addr = SocketAddr::from((lab.client_addr, 7001));
    let server_addr = SocketAddr::from((lab.server_addr, 7002));
    let bind =
        |ns: &str, addr: SocketAddr| run_in(ns, move || UdpSocket::bind(addr)).unwrap().unwrap();
    let client = bind(lab.client.name(), client_addr);
    let server = bind(lab.server.name(), server_addr);
    // Generous: a datagram that crosses takes microseconds, however loaded the machine.
    for s in [&client, &server] {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    }
    // 100 datagrams each way, one at a time.
    let mut buf = [0u8; 2048];
    for i in 0..100u32 {
        client.send_to(&i.to_be_bytes(), server_addr).unwrap();
        let (n, from) = server.recv_from(&mut buf).expect("client → server");
        assert_eq!((&buf[..n], from), (&i.to_be_bytes()[..], client_addr));
        server.send_to(&buf[..n], client_addr).unwrap();
        let (n, from) = client.recv_from(&mut buf).expect("server → client");
        assert_eq!((&buf[..n], from), (&i.to_be_bytes()[..], server_addr));
    }
    // Too long for the server's link: the forwarder drops and counts them.
    for _ in 0..5 {
        client.send_to(&[7u8; 1400], server_addr).unwrap();
    }
    server
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    assert!(
        server.recv_from(&mut buf).is_err(),
        "an oversized frame crossed"
    );

    // A kernel TCP connection through the forwarder: 1 MB, echoed byte for byte.
    let tcp_addr = SocketAddr::from((lab.server_addr, 7003));
    let listener = run_in(lab.server.name(), move || TcpListener::bind(tcp_addr))
        .unwrap()
        .unwrap();
    let server_side = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut got = Vec::new();
        conn.read_to_end(&mut got).unwrap();
        got
    });
    let mut conn = run_in(lab.client.name(), move || {
        TcpStream::connect_timeout(&tcp_addr, Duration::from_secs(30))
    })
    .unwrap()
    .unwrap();
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
    conn.write_all(&data).unwrap();
    drop(conn);
    assert!(server_side.join().unwrap() == data, "the transfer differs");

    fwd.signal("TERM");
    let (status, stderr) = fwd.wait();
    assert_eq!(status.code(), Some(143), "{stderr}");
    let report = common::read_json(&json);
    let (ab, ba) = (&report["a_to_b"], &report["b_to_a"]);
    assert!(
        ab["forwarded"].as_u64().unwrap() >= 100 + 1_000_000 / 1500,
        "{ab}"
    );
    assert!(ba["forwarded"].as_u64().unwrap() >= 100, "{ba}");
    assert_eq!(ab["dropped"]["too_long"], 5, "{ab}");
    assert_eq!(ab["dropped"]["runts"], 0);
    let cycles = &report["cycles"];
    assert!(cycles["forwarded"].as_u64().unwrap() >= 800, "{cycles}");
    assert!(
        cycles["per_packet"]["rx"].as_f64().unwrap() > 0.0,
        "{cycles}"
    );
    assert!(
        cycles["per_packet"]["tx"].as_f64().unwrap() > 0.0,
        "{cycles}"
    );
    assert_eq!(report["batch"], 16);
}

fn first_stderr_line(child: &mut std::process::Child) -> String {
    use std::io::BufRead;
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    line
}

/// Waits for `child` to exit, within 60 s (it takes milliseconds), and returns its exit code.
fn exit_code(child: &mut std::process::Child) -> Option<i32> {
    let start = std::time::Instant::now();
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

fn sigterm(pid: u32) {
    let sent = Command::new("kill")
        .args(["-s", "TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

#[test]
fn sigterm_to_fwd_writes_its_json_and_exits_143() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("fwd.json");
    let mut child = common::Reaped::new(
        common::in_ns(lab.emu.name())
            .args([
                "fwd",
                "--iface-a",
                "emu-a",
                "--iface-b",
                "emu-b",
                "--poll",
                "block",
            ])
            .arg("--json")
            .arg(&json)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let started = first_stderr_line(&mut child);
    assert!(started.contains("latlab fwd"), "{started}");
    // `ip netns exec` execs latlab, so the child's id is latlab's own.
    sigterm(child.id());
    assert_eq!(exit_code(&mut child), Some(143));
    let report = common::read_json(&json);
    assert!(report["a_to_b"]["received"].is_u64(), "{report}");
    assert!(
        report["cycles"]["tsc_hz"].as_f64().unwrap() > 1e8,
        "{report}"
    );
}

#[test]
fn sigterm_to_rfc2544_keeps_the_trials_measured_removes_its_namespaces_and_exits_143() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("rfc2544");
    let mut child = Command::new(assert_cmd::cargo::cargo_bin("latlab"))
        .args([
            "rfc2544", "--dut", "bridge", "--sizes", "64", "--trial", "300ms",
        ])
        .arg("--out")
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = first_stderr_line(&mut child);
    assert!(started.contains("latlab rfc2544: bridge"), "{started}");
    // Some trials in (each 300 ms and a quiet 150 ms; a loaded machine gets through fewer):
    // what was measured is kept.
    std::thread::sleep(Duration::from_millis(3000));
    sigterm(child.id());
    assert_eq!(exit_code(&mut child), Some(143));
    let results = common::read_json(&out.join("rfc2544.json"));
    let size = &results["sizes"][0];
    assert!(!size["trials"].as_array().unwrap().is_empty(), "{size}");
    assert_eq!(size["error"], "stopped by a signal", "{size}");
    let prefix = format!("latlab-{}-", child.id());
    let left: Vec<_> = std::fs::read_dir("/run/netns")
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(&prefix))
                .collect()
        })
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn fwd_by_xdp_redirect_carries_udp_both_ways_and_counts_it_in_the_kernel() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    // What a redirect into a veth needs: NAPI on the target's peer (GRO on); the lab's
    // offloads off finish the senders' checksums.
    for ns in [lab.client.name(), lab.server.name()] {
        run_in(ns, || latlab_io::ethtool::set_gro("veth0", true))
            .unwrap()
            .unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("fwd.json");
    let stdout_path = dir.path().join("fwd.txt");
    let mut fwd = common::in_ns(lab.emu.name());
    fwd.args(["fwd", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(["--io", "xdp-redirect"])
        .arg("--json")
        .arg(&json)
        .stdout(std::fs::File::create(&stdout_path).unwrap());
    let fwd = common::started(fwd, "latlab fwd:");
    let client_addr = SocketAddr::from((lab.client_addr, 7101));
    let server_addr = SocketAddr::from((lab.server_addr, 7102));
    let bind =
        |ns: &str, addr: SocketAddr| run_in(ns, move || UdpSocket::bind(addr)).unwrap().unwrap();
    let client = bind(lab.client.name(), client_addr);
    let server = bind(lab.server.name(), server_addr);
    for s in [&client, &server] {
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    }
    let mut buf = [0u8; 2048];
    for i in 0..100u32 {
        client.send_to(&i.to_be_bytes(), server_addr).unwrap();
        let (n, from) = server.recv_from(&mut buf).expect("client → server");
        assert_eq!((&buf[..n], from), (&i.to_be_bytes()[..], client_addr));
        server.send_to(&buf[..n], client_addr).unwrap();
        let (n, _) = client.recv_from(&mut buf).expect("server → client");
        assert_eq!(&buf[..n], &i.to_be_bytes()[..]);
    }
    fwd.signal("TERM");
    let (status, stderr) = fwd.wait();
    let stdout = std::fs::read_to_string(&stdout_path).unwrap();
    assert_eq!(status.code(), Some(143), "{stdout}{stderr}");
    assert!(stdout.contains("forwarded"), "{stdout}");
    let report = common::read_json(&json);
    assert_eq!(report["io"], "xdp-redirect");
    for dir in ["a_to_b", "b_to_a"] {
        let forwarded = report[dir]["forwarded"].as_u64().unwrap();
        assert!((100..120).contains(&forwarded), "{dir}: {report}");
        assert_eq!(report[dir]["dropped"]["no_target"], 0, "{report}");
    }
    // The programs went with latlab.
    let shown = Command::new("ip")
        .args(["-n", lab.emu.name(), "-d", "link", "show", "emu-a"])
        .output()
        .unwrap();
    assert!(!String::from_utf8_lossy(&shown.stdout).contains("prog/xdp"));
}
