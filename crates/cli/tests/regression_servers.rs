//! Regression tests of the servers and the emulator, each named after what it prevents (root;
//! must run under CI=true).
//!
//! The datagrams a careless or hostile client sends are crafted here with a raw IPv4 socket in
//! the client's namespace: a source port of 0, a source address the server has no route back
//! to, and the source address of the subnet's broadcast. Before, one such datagram made
//! `latlab echo` and `latlab serve` exit on the error of their answer; now each answer that
//! cannot go is counted by cause, and the server goes on.

mod common;

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::process::{Command, Stdio};
use std::time::Duration;

use latlab_lab::topology::{ClientEmuServer, ClientServer};
use latlab_wire::{ethernet, game, probe, udp_frame};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};

/// The client—server lab's /30: its broadcast address.
const BROADCAST: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 3);
/// An address the server has no route to (TEST-NET-3).
const UNROUTABLE: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 9);

/// The namespaces of a client—server lab: client, server, client address, server address.
fn lab_parts(lab: &ClientServer) -> (&str, &str, Ipv4Addr, Ipv4Addr) {
    let ClientServer::Namespaces {
        client,
        server,
        client_addr,
        server_addr,
    } = lab
    else {
        unreachable!("namespaces() builds namespaces")
    };
    (client.name(), server.name(), *client_addr, *server_addr)
}

/// Writes `value` to the sysctl file `path` (under /proc/sys) inside namespace `ns`.
fn sysctl_in(ns: &str, path: &'static str, value: &'static str) {
    latlab_io::netns::run_in(ns, move || std::fs::write(path, value))
        .unwrap()
        .unwrap_or_else(|e| panic!("{path}: {e}"));
}

/// Lets the server take datagrams from sources it cannot route back to (reverse-path
/// filtering off), so that its answers are what fails.
fn accept_any_source(server_ns: &str) {
    for path in [
        "/proc/sys/net/ipv4/conf/all/rp_filter",
        "/proc/sys/net/ipv4/conf/veth0/rp_filter",
    ] {
        sysctl_in(server_ns, path, "0");
    }
}

/// Sends `payload` in one IPv4/UDP packet from `src` to `dst`, through a raw socket made in
/// namespace `ns` (the header is ours: any source address and port, 0 included).
fn send_crafted(ns: &str, src: SocketAddrV4, dst: SocketAddrV4, payload: &[u8]) {
    // IPPROTO_RAW (255): the socket sends whole IPv4 packets, header included.
    let socket = latlab_io::netns::run_in(ns, || {
        Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(255)))
    })
    .unwrap()
    .unwrap();
    let repr = udp_frame::Repr {
        src_mac: ethernet::Address([0; 6]),
        dst_mac: ethernet::Address([0; 6]),
        src,
        dst,
        payload_len: payload.len(),
    };
    let mut frame = vec![0u8; repr.buffer_len()];
    repr.emit_into(&mut frame, payload).unwrap();
    // The raw socket takes the IPv4 packet: the frame without its Ethernet header.
    let packet = &frame[ethernet::HEADER_LEN..];
    let to = SockAddr::from(SocketAddr::V4(SocketAddrV4::new(*dst.ip(), 0)));
    let n = socket.send_to(packet, &to).unwrap();
    assert_eq!(n, packet.len());
}

/// The three sources no answer can go back to, with the cause the server counts for each.
fn bad_sources(client_addr: Ipv4Addr) -> [(SocketAddrV4, &'static str); 3] {
    [
        (SocketAddrV4::new(client_addr, 0), "invalid_destination"),
        (SocketAddrV4::new(UNROUTABLE, 40000), "unreachable"),
        (SocketAddrV4::new(BROADCAST, 40000), "not_permitted"),
    ]
}

/// A valid probe of `len` bytes.
fn probe_payload(len: usize) -> Vec<u8> {
    let mut buf = vec![0u8; len];
    let repr = probe::Repr {
        run_id: 7,
        flow: 0,
        seq: 1,
        intended_send_ns: 1,
        actual_send_ns: 1,
        responder: None,
        responder_clock: probe::ResponderClock::NotAsked,
    };
    repr.emit(&mut probe::Packet::new_unchecked(&mut buf[..]));
    assert!(probe::is_probe(&buf));
    buf
}

/// Stops a server [`common::started`] with SIGTERM. It exits 143 only if it was still
/// running (a server that had stopped on a crafted datagram gives the status it exited with):
/// fails otherwise.
fn stop(server: common::Started, what: &str) {
    server.signal("TERM");
    let (status, stderr) = server.wait();
    assert_eq!(status.code(), Some(143), "{what}: {stderr}");
}

/// The probes of the run whose `--json` is at `path` that came back, warm-up's too: each one
/// crossed every hop both ways.
fn came_back(path: &std::path::Path) -> u64 {
    let run = common::read_json(path);
    run["received"].as_u64().unwrap() + run["warmup"]["received"].as_u64().unwrap()
}

#[test]
fn a_probe_from_port_zero_an_unroutable_or_a_broadcast_source_does_not_stop_echo() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientServer::namespaces().unwrap();
    let (client, server, client_addr, server_addr) = lab_parts(&lab);
    accept_any_source(server);
    let dir = tempfile::tempdir().unwrap();
    let echo_json = dir.path().join("echo.json");
    let target = SocketAddrV4::new(server_addr, 7777);
    // It runs until stopped: the test does not race its end.
    let mut echo = common::in_ns(server);
    echo.args(["echo", "--listen", &target.to_string(), "--poll", "block"])
        .arg("--json")
        .arg(&echo_json)
        .stdout(Stdio::null());
    let echo = common::started(echo, "latlab echo:");
    for (src, _) in bad_sources(client_addr) {
        send_crafted(client, src, target, &probe_payload(64));
    }
    // It still answers a normal generator, and is still running after it.
    let gen_json = dir.path().join("gen.json");
    let args = [
        "--rate",
        "1k",
        "--duration",
        "300ms",
        "--poll",
        "block",
        "--json",
    ];
    common::gen_in(
        client,
        &target.to_string(),
        &[&args[..], &[gen_json.to_str().unwrap()]].concat(),
    );
    stop(echo, "latlab echo");
    let counters = common::read_json(&echo_json);
    for (src, cause) in bad_sources(client_addr) {
        assert_eq!(counters["send_failed"][cause], 1, "{src}: {counters}");
    }
    assert_eq!(counters["send_dropped"], 3, "{counters}");
    let came_back = came_back(&gen_json);
    assert!(came_back > 0, "no probe came back");
    assert!(
        counters["reflected"].as_u64().unwrap() >= came_back,
        "{came_back} came back: {counters}"
    );
}

#[test]
fn a_join_request_from_port_zero_an_unroutable_or_a_broadcast_source_does_not_stop_serve() {
    for io in ["batched", "socket"] {
        join_requests_do_not_stop_serve(io);
    }
}

/// A JoinRequest from each bad source, then a whole join from a normal client, to
/// `latlab serve --io io`.
fn join_requests_do_not_stop_serve(io: &str) {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientServer::namespaces().unwrap();
    let (client, server, client_addr, server_addr) = lab_parts(&lab);
    accept_any_source(server);
    let dir = tempfile::tempdir().unwrap();
    let serve_json = dir.path().join("serve.json");
    let listen = SocketAddrV4::new(server_addr, 7777);
    let mut serve = common::in_ns(server);
    serve
        .args(["serve", "--listen", &listen.to_string(), "--io", io])
        .arg("--json")
        .arg(&serve_json)
        .stdout(Stdio::null());
    let serve = common::started(serve, "latlab serve:");
    let mut request = [0u8; game::JOIN_REQUEST_LEN];
    game::Repr::JoinRequest {
        client_nonce: 99,
        game: 0,
    }
    .emit_bytes(&mut request);
    for (src, _) in bad_sources(client_addr) {
        send_crafted(client, src, listen, &request);
    }
    // A normal client still joins.
    let socket = latlab_io::netns::run_in(client, move || {
        std::net::UdpSocket::bind(SocketAddrV4::new(client_addr, 0))
    })
    .unwrap()
    .unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    socket.send_to(&request, listen).unwrap();
    let mut buf = [0u8; 256];
    let n = socket.recv(&mut buf).unwrap();
    let game::Repr::Challenge {
        client_nonce,
        game,
        epoch,
        mac,
    } = game::Repr::parse_bytes(&buf[..n]).unwrap()
    else {
        panic!("no challenge: {:?}", &buf[..n]);
    };
    let mut confirm = [0u8; 64];
    let len = game::Repr::JoinConfirm {
        client_nonce,
        game,
        epoch,
        mac,
    }
    .emit_bytes(&mut confirm);
    socket.send_to(&confirm[..len], listen).unwrap();
    let n = socket.recv(&mut buf).unwrap();
    assert!(
        matches!(
            game::Repr::parse_bytes(&buf[..n]),
            Ok(game::Repr::Welcome { .. })
        ),
        "--io {io}: no welcome: {:?}",
        &buf[..n]
    );
    stop(serve, "latlab serve");
    let counters = common::read_json(&serve_json);
    assert_eq!(counters["joins"], 1, "--io {io}: {counters}");
    for (src, cause) in bad_sources(client_addr) {
        assert_eq!(
            counters["send_failed"][cause], 1,
            "--io {io}, {src}: {counters}"
        );
    }
}

#[test]
fn echo_reports_the_datagrams_the_kernel_dropped_on_its_socket() {
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("echo.json");
    let echo_socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let listen = echo_socket.local_addr().unwrap();
    drop(echo_socket);
    // The smallest receive buffer the kernel grants holds a datagram or two.
    let mut echo = Command::new(assert_cmd::cargo::cargo_bin("latlab"));
    echo.args(["echo", "--listen", &listen.to_string(), "--rcvbuf", "1"])
        .args(["--poll", "block", "--json"])
        .arg(&json)
        .stdout(Stdio::null());
    let echo = common::started(echo, "latlab echo:");
    // Stopped, the echo reads nothing: the burst fills its socket and the kernel drops the
    // rest.
    echo.signal("STOP");
    let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let burst = 200u64;
    let payload = probe_payload(1000);
    for _ in 0..burst {
        client.send_to(&payload, listen).unwrap();
    }
    echo.signal("CONT");
    // It reads what its socket kept, then is stopped: once the socket's queue is empty (an
    // event, up to 60 s), every datagram was read or dropped.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while queued_on_loopback(listen.port()) > 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "echo never read its socket"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    stop(echo, "latlab echo");
    let counters = common::read_json(&json);
    let dropped = counters["kernel_drops"].as_u64().unwrap();
    let received = counters["received"].as_u64().unwrap();
    assert!(dropped >= burst / 2, "{counters}");
    assert_eq!(
        received + dropped,
        burst,
        "every datagram is counted: {counters}"
    );
}

/// The bytes waiting in the receive queue of this namespace's UDP socket on port `port`
/// (`/proc/net/udp`: `sl local rem st tx_queue:rx_queue …`, in hex).
fn queued_on_loopback(port: u16) -> u64 {
    let table = std::fs::read_to_string("/proc/net/udp").unwrap();
    let local = format!(":{port:04X}");
    table
        .lines()
        .skip(1)
        .map(|l| l.split_whitespace().collect::<Vec<_>>())
        .find(|f| f.len() > 4 && f[1].ends_with(&local))
        .map(|f| u64::from_str_radix(f[4].split(':').nth(1).unwrap(), 16).unwrap())
        .expect("the echo's socket is listed")
}

/// Sets the MTU of `dev` in namespace `ns`.
fn set_mtu(ns: &str, dev: &str, mtu: u32) {
    let status = Command::new("ip")
        .args(["-n", ns, "link", "set", "dev", dev, "mtu", &mtu.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "mtu {mtu} on {dev} in {ns}");
}

/// Checks that every frame of each direction of an emulator's `--json` is accounted for:
/// arrived + duplicated = sent + dropped (by the link and by the emulator) + queued at exit.
fn assert_frames_add_up(report: &serde_json::Value) {
    for dir in ["a_to_b", "b_to_a"] {
        let d = &report[dir];
        let n = |v: &serde_json::Value| v.as_u64().unwrap_or_else(|| panic!("{dir}: {d}"));
        let link = &d["link"];
        let copies_in = n(&d["arrived"]) + n(&link["duplicated"]);
        let link_dropped: u64 = [
            "dropped_loss",
            "dropped_queue_frames",
            "dropped_queue_bytes",
            "dropped_runt",
            "dropped_oversized",
        ]
        .iter()
        .map(|k| n(&link[*k]))
        .sum();
        let by_emulator = &d["dropped_by_emulator"];
        let emu_dropped: u64 = [
            "tx_ring_full",
            "tx_too_long",
            "tx_too_short",
            "queue_slots_full",
        ]
        .iter()
        .map(|k| n(&by_emulator[*k]))
        .sum();
        let out = n(&d["sent"]) + link_dropped + emu_dropped + n(&d["queued_at_exit"]);
        assert_eq!(copies_in, out, "{dir}: {d}");
    }
}

/// Starts `latlab emu` between the lab's namespaces with `extra` options and waits until it
/// bridges; it runs until [`stop`]ped.
fn spawn_emu(lab: &ClientEmuServer, extra: &[&str], json: &std::path::Path) -> common::Started {
    let mut emu = common::in_ns(lab.emu.name());
    emu.args(["emu", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(extra)
        .arg("--json")
        .arg(json)
        .stdout(Stdio::null());
    common::started(emu, "bridging")
}

/// Sends `count` UDP datagrams of `len` bytes from the client to the server's port 9.
fn client_sends(lab: &ClientEmuServer, len: usize, count: usize) {
    let (client_addr, server_addr) = (lab.client_addr, lab.server_addr);
    latlab_io::netns::run_in(lab.client.name(), move || {
        let s = std::net::UdpSocket::bind(SocketAddrV4::new(client_addr, 0)).unwrap();
        for _ in 0..count {
            s.send_to(&vec![0u8; len], SocketAddrV4::new(server_addr, 9))
                .unwrap();
        }
    })
    .unwrap();
}

#[test]
fn a_frame_longer_than_the_far_sides_mtu_does_not_stop_emu() {
    for io in ["packet", "xdp"] {
        frames_longer_than_the_mtu_are_counted(io);
    }
}

/// The client side takes 9000-byte frames, the server side 1500, the emulator 3840: frames of
/// 1600 bytes are counted as too long to send, frames of 5000 as longer than the emulator
/// takes (over AF_PACKET by the link model, over AF_XDP by the kernel, which has no room for
/// them in a UMEM frame), and the rest still crosses.
fn frames_longer_than_the_mtu_are_counted(io: &str) {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    set_mtu(lab.emu.name(), "emu-a", 9000);
    set_mtu(lab.client.name(), "veth0", 9000);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("emu.json");
    let emu = spawn_emu(&lab, &["--io", io, "--frame-size", "3840"], &json);
    // 1600-byte frames: over the server side's MTU; 5000-byte frames: over the emulator's.
    client_sends(&lab, 1600 - 42, 3);
    client_sends(&lab, 5000 - 42, 2);
    let target = format!("{}:7777", lab.server_addr);
    let mut echo = common::in_ns(lab.server.name());
    echo.args(["echo", "--listen", &target, "--poll", "block"])
        .stdout(Stdio::null());
    let echo = common::started(echo, "latlab echo:");
    let gen_json = dir.path().join("gen.json");
    let args = [
        "--rate",
        "1k",
        "--duration",
        "300ms",
        "--poll",
        "block",
        "--json",
    ];
    let args = [&args[..], &[gen_json.to_str().unwrap()]].concat();
    common::gen_in(lab.client.name(), &target, &args);
    stop(echo, "latlab echo");
    stop(emu, "latlab emu");
    let came_back = came_back(&gen_json);
    let report = common::read_json(&json);
    let a_to_b = &report["a_to_b"];
    assert_eq!(
        a_to_b["dropped_by_emulator"]["tx_too_long"], 3,
        "--io {io}: {a_to_b}"
    );
    assert!(
        came_back > 0 && a_to_b["sent"].as_u64().unwrap() >= came_back,
        "--io {io}: {came_back} probes came back: {a_to_b}"
    );
    let too_long_to_take = match io {
        "xdp" => &a_to_b["dropped_by_emulator"]["kernel_rx_ring"],
        _ => &a_to_b["link"]["dropped_oversized"],
    };
    assert_eq!(too_long_to_take, 2, "--io {io}: {a_to_b}");
    assert_frames_add_up(&report);
}

#[test]
fn emu_reports_the_frames_still_queued_at_exit_so_its_counters_add_up() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("emu.json");
    // Frames wait a minute on the link; the emulator is stopped once they are sent, with all
    // of them held.
    let emu = spawn_emu(&lab, &["--delay", "60s"], &json);
    client_sends(&lab, 100, 20);
    stop(emu, "latlab emu");
    let report = common::read_json(&json);
    // The 20 datagrams, and whatever else the client's stack sent (IPv6 neighbour discovery).
    let a_to_b = &report["a_to_b"];
    assert!(a_to_b["arrived"].as_u64().unwrap() >= 20, "{report}");
    assert_eq!(a_to_b["queued_at_exit"], a_to_b["arrived"], "{report}");
    assert_eq!(a_to_b["sent"], 0, "{report}");
    assert_frames_add_up(&report);
}

#[test]
fn gen_reports_the_probes_it_could_not_send_by_cause() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientServer::namespaces().unwrap();
    let (client, server, _, server_addr) = lab_parts(&lab);
    let dir = tempfile::tempdir().unwrap();
    let gen_json = dir.path().join("gen.json");
    let target = SocketAddrV4::new(server_addr, 7777);
    let mut echo = common::in_ns(server);
    echo.args(["echo", "--listen", &target.to_string(), "--poll", "block"])
        .stdout(Stdio::null());
    let echo = common::started(echo, "latlab echo:");
    // The generator runs until stopped.
    let mut gen = common::in_ns(client);
    gen.args(["gen", "--target", &target.to_string(), "--rate", "1k"])
        .args(["--duration", "10m", "--poll", "block", "--json"])
        .arg(&gen_json)
        .stdout(Stdio::null());
    let gen = common::started(gen, "latlab gen:");
    // A while into the run the server's address becomes unreachable from the client: every
    // probe after that fails to leave with EHOSTUNREACH. A second either side of it at 1k a
    // second: probes on both sides even on a slow machine.
    std::thread::sleep(Duration::from_millis(1000));
    let route = Command::new("ip")
        .args(["-n", client, "route", "add", "unreachable"])
        .arg(format!("{server_addr}/32"))
        .status()
        .unwrap();
    assert!(route.success(), "ip route add unreachable failed");
    std::thread::sleep(Duration::from_millis(1000));
    stop(gen, "latlab gen");
    stop(echo, "latlab echo");
    let summary = common::read_json(&gen_json);
    let unreachable = summary["send_failed"]["unreachable"].as_u64().unwrap_or(0);
    // Probes before it came back; those after it could not leave, each one counted as lost.
    assert!(summary["received"].as_u64().unwrap() > 0, "{summary}");
    assert!(unreachable > 0, "{summary}");
    assert!(
        summary["lost"].as_u64().unwrap() >= unreachable,
        "{summary}"
    );
}
