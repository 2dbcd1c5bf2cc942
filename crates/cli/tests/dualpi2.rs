//! `latlab emu` with `aqm=dualpi2` between namespaces (issue 40): a cubic TCP flow with ECN
//! takes the classic queue and an ECT(1) UDP stream the L4S queue of a 20 Mbit/s bottleneck;
//! the `--json` report and the exit summary show each queue's frames, marks, drops and
//! sojourn, and they add up (root; must run under CI=true).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::process::Stdio;
use std::time::{Duration, Instant};

use latlab_io::netns::run_in;
use latlab_lab::topology::ClientEmuServer;
use socket2::{Domain, Protocol, Socket, Type};

/// How long the two flows send.
const SENDING: Duration = Duration::from_secs(5);

/// The UDP stream: 200-byte datagrams at 2 Mbit/s, 1250 a second, sent 10 at a time.
const DATAGRAM: usize = 200;
const BURST: usize = 10;
const BURST_GAP: Duration = Duration::from_millis(8);

#[test]
fn dualpi2s_knobs_out_of_range_name_themselves() {
    let base = ["emu", "--iface-a", "a0", "--iface-b", "b0"];
    let dual = ["--rate", "20mbit", "--aqm", "dualpi2"];
    common::one_line_error(
        &[&base[..], &dual[..], &["--coupling", "20"]].concat(),
        "--coupling: 20 is outside 0.5..=16",
    );
    common::one_line_error(
        &[&base[..], &dual[..], &["--step", "0"]].concat(),
        "--step: 0 is outside 1us..=1s",
    );
    common::one_line_error(
        &[&base[..], &["--a-to-b", "aqm=dualpi2 coupling=x"]].concat(),
        "coupling",
    );
}

#[test]
fn a_cubic_flow_with_ecn_and_an_ect1_stream_take_dualpi2s_two_queues() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    // Their TCP connections ask for ECN.
    for ns in [lab.client.name(), lab.server.name()] {
        common::set_in(ns, "/proc/sys/net/ipv4/tcp_ecn", "1");
    }
    let dir = tempfile::tempdir().unwrap();
    let emu_json = dir.path().join("emu.json");
    let mut cmd = common::in_ns(lab.emu.name());
    cmd.args(["emu", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(["--rate", "20mbit", "--aqm", "dualpi2", "--ecn", "--json"])
        .arg(&emu_json)
        .stdout(Stdio::piped());
    let emu = common::started(cmd, "bridging");

    // The receivers in the server, the senders in the client; each socket stays in the
    // namespace it was made in.
    let server = lab.server_addr;
    let (tcp_at, udp_at) = (
        SocketAddr::from((server, 5001)),
        SocketAddr::from((server, 5002)),
    );
    let listener = run_in(lab.server.name(), move || TcpListener::bind(tcp_at))
        .unwrap()
        .unwrap();
    let udp_rx = run_in(lab.server.name(), move || UdpSocket::bind(udp_at))
        .unwrap()
        .unwrap();
    let tcp_tx = run_in(lab.client.name(), move || -> std::io::Result<TcpStream> {
        let s = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP))?;
        s.set_tcp_congestion(b"cubic")?;
        s.connect_timeout(&tcp_at.into(), Duration::from_secs(5))?;
        Ok(s.into())
    })
    .unwrap()
    .unwrap();
    let udp_tx = run_in(lab.client.name(), move || -> std::io::Result<UdpSocket> {
        let s = Socket::new(Domain::IPV4, Type::DGRAM, Some(Protocol::UDP))?;
        // ECN field 01: ECT(1), the L4S identifier.
        s.set_tos_v4(0x01)?;
        s.connect(&udp_at.into())?;
        Ok(s.into())
    })
    .unwrap()
    .unwrap();

    let tcp_received = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        let mut buf = vec![0u8; 1 << 16];
        let mut total = 0u64;
        while let Ok(n @ 1..) = conn.read(&mut buf) {
            total += n as u64;
        }
        total
    });
    let udp_received = std::thread::spawn(move || {
        udp_rx
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        let mut buf = [0u8; 2048];
        let mut n = 0u64;
        while udp_rx.recv(&mut buf).is_ok() {
            n += 1;
        }
        n
    });
    let bulk = std::thread::spawn(move || {
        let mut tcp_tx = tcp_tx;
        let chunk = vec![0x5au8; 1 << 16];
        let start = Instant::now();
        while start.elapsed() < SENDING {
            tcp_tx.write_all(&chunk).unwrap();
        }
        tcp_tx.shutdown(std::net::Shutdown::Write).unwrap();
    });
    let start = Instant::now();
    let mut udp_sent = 0u64;
    let datagram = [0xa5u8; DATAGRAM];
    while start.elapsed() < SENDING {
        for _ in 0..BURST {
            udp_sent += u64::from(udp_tx.send(&datagram).is_ok());
        }
        std::thread::sleep(BURST_GAP);
    }
    bulk.join().unwrap();
    let (tcp_bytes, udp_got) = (tcp_received.join().unwrap(), udp_received.join().unwrap());
    emu.signal("TERM");
    let (status, summary, stderr) = emu.wait_output();
    assert_eq!(status.code(), Some(143), "{stderr}");

    let report = common::read_json(&emu_json);
    let d = &report["a_to_b"];
    let dual = &d["dualpi2"];
    let n = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("{v}: {report}"));
    let (l4s, classic) = (&dual["l4s"], &dual["classic"]);
    let shown = format!("tcp {tcp_bytes} bytes, udp {udp_got} of {udp_sent}: {dual}");
    // The ECT(1) datagrams, and only they, took the L4S queue: every one received left it,
    // and it sent none that was not sent to it.
    assert!(tcp_bytes > 1_000_000 && udp_got > 0, "{shown}");
    assert!((udp_got..=udp_sent).contains(&n(&l4s["sent"])), "{shown}");
    assert!(
        n(&classic["sent"]) > 500,
        "the cubic flow's segments: {shown}"
    );
    // The cubic flow filled the classic queue and was told so, by marks (it asked for ECN).
    assert!(n(&classic["marked"]) > 0, "{shown}");
    // Each queue's sojourn, every frame it sent counted; the two add up to the link's.
    for q in [l4s, classic] {
        assert_eq!(n(&q["sojourn_ns"]["count"]), n(&q["sent"]), "{shown}");
    }
    let sojourn_count = n(&d["sojourn_ns"]["count"]);
    assert_eq!(
        sojourn_count,
        n(&l4s["sent"]) + n(&classic["sent"]),
        "{shown}"
    );
    let link = &d["link"];
    for (total, per_queue) in [("aqm_mark", "marked"), ("aqm_drop", "dropped")] {
        assert_eq!(
            n(&link[total]),
            n(&l4s[per_queue]) + n(&classic[per_queue]),
            "{total}: {shown}"
        );
    }
    // Under load the L4S queue waits less than the classic one (behaviour, not speed: the
    // classic queue is held near its 15 ms target, the L4S one near its 1 ms step).
    let (l4s_p50, classic_p50) = (
        l4s["sojourn_ns"]["p50"].as_u64(),
        classic["sojourn_ns"]["p50"].as_u64(),
    );
    assert!(
        matches!((l4s_p50, classic_p50), (Some(l), Some(c)) if l < c),
        "L4S p50 {l4s_p50:?} ns, classic {classic_p50:?} ns: {shown}"
    );
    // The exit summary has a line per queue and direction.
    for queue in ["L4S", "classic"] {
        let line = format!("  dualpi2 {queue} queue: sent ");
        assert_eq!(
            summary.lines().filter(|l| l.starts_with(&line)).count(),
            2,
            "{summary}"
        );
    }
}
