//! `latlab emu` on interfaces wired as containers are, offloads left at their defaults: the
//! senders leave checksums to the device and hand over 64 KiB TCP segments, and the bridge
//! must forward what would have been on the wire. UDP (latlab gen/echo, and sockperf when it
//! is installed), a TCP transfer, and VLAN-tagged frames cross it over `--io packet` and
//! `--io xdp` (root; must run under CI=true).

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use latlab_io::packet::{PacketOptions, PacketSocket};
use latlab_lab::topology::{ClientEmuServer, Offloads};

/// Starts `latlab emu` in the lab's emulator namespace with `io` and waits until it bridges;
/// it runs until [`stop_emu`]: no part of a test depends on finishing within a set time.
fn start_emu(lab: &ClientEmuServer, io: &str, json: &Path) -> common::Started {
    let mut emu = common::in_ns(lab.emu.name());
    emu.args([
        "emu",
        "--iface-a",
        "emu-a",
        "--iface-b",
        "emu-b",
        "--io",
        io,
    ])
    .args(["--poll", "block"]);
    if io == "xdp" {
        emu.args(["--xdp-frames", "1024"]);
    }
    emu.arg("--json").arg(json).stdout(Stdio::null());
    common::started(emu, "bridging")
}

/// Stops the emulator with SIGTERM, which writes its report: exit 143.
fn stop_emu(emu: common::Started) {
    emu.signal("TERM");
    let (status, stderr) = emu.wait();
    assert_eq!(status.code(), Some(143), "{stderr}");
}

fn udp_and_tcp_cross_the_bridge(io: &str) {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build_with(Offloads::Defaults).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let emu_json = dir.path().join("emu.json");
    let run_json = dir.path().join("run.json");
    let emu = start_emu(&lab, io, &emu_json);

    // UDP: latlab's own probes.
    let target = format!("{}:7777", lab.server_addr);
    let echo = common::echo_in(lab.server.name(), &target, &["--poll", "block"]);
    let json = run_json.to_str().unwrap();
    common::gen_in(
        lab.client.name(),
        &target,
        &[
            "--rate",
            "1k",
            "--duration",
            "1s",
            "--poll",
            "block",
            "--json",
            json,
        ],
    );
    echo.signal("TERM");
    let (status, stderr) = echo.wait();
    assert_eq!(status.code(), Some(143), "{stderr}");
    let run = common::read_json(&run_json);
    // 1000 probes a second for a second, the first 100 as warm-up; a slow machine may leave
    // some unsent at the end, counted apart.
    let (sent, received) = (
        run["sent"].as_u64().unwrap(),
        run["received"].as_u64().unwrap(),
    );
    assert_eq!(sent + run["unsent"].as_u64().unwrap(), 900, "{run}");
    assert!(
        sent > 0 && received == sent,
        "{io}: {received} of {sent} probes came back"
    );

    // UDP: sockperf, when installed.
    sockperf_ping_pong(&lab, io);

    // TCP: 8 MB through the bridge, sent as the kernel likes (64 KiB super-frames).
    let bytes = tcp_transfer(&lab, 8 << 20);
    assert_eq!(bytes, 8 << 20, "{io}: the TCP transfer fell short");

    stop_emu(emu);
    let report = common::read_json(&emu_json);
    let wire = &report["a_to_b"]["wire_frames"];
    assert!(
        wire["checksums_finished"].as_u64().unwrap() > 0,
        "{io}: no checksum was left to finish? {wire}"
    );
    for dir in ["a_to_b", "b_to_a"] {
        let d = &report[dir]["dropped_by_emulator"];
        assert_eq!(d["tx_too_long"], 0, "{io} {dir}: {d}");
    }
    if io == "packet" {
        assert!(wire["super_frames"].as_u64().unwrap() > 0, "{wire}");
        assert!(wire["segments"].as_u64().unwrap() > wire["super_frames"].as_u64().unwrap());
    }
}

/// Sends `len` bytes over TCP from the client to the server; returns how many arrived.
fn tcp_transfer(lab: &ClientEmuServer, len: usize) -> usize {
    let addr = SocketAddr::from((lab.server_addr, 5201));
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let ns = lab.server.name().to_owned();
    let server = std::thread::spawn(move || {
        latlab_io::netns::run_in(&ns, move || {
            let listener = TcpListener::bind(addr).unwrap();
            ready_tx.send(()).unwrap();
            let (mut conn, _) = listener.accept().unwrap();
            conn.set_read_timeout(Some(Duration::from_secs(60)))
                .unwrap();
            let mut total = 0;
            let mut buf = vec![0u8; 1 << 16];
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 {
                    break;
                }
                total += n;
            }
            total
        })
        .unwrap()
    });
    ready_rx.recv_timeout(Duration::from_secs(60)).unwrap();
    latlab_io::netns::run_in(lab.client.name(), move || {
        let mut conn = TcpStream::connect_timeout(&addr, Duration::from_secs(60)).unwrap();
        conn.set_write_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let chunk = vec![0x5a_u8; 1 << 16];
        let mut sent = 0;
        while sent < len {
            let n = (len - sent).min(chunk.len());
            conn.write_all(&chunk[..n]).unwrap();
            sent += n;
        }
        conn.shutdown(std::net::Shutdown::Write).unwrap();
    })
    .unwrap();
    server.join().unwrap()
}

/// A sockperf ping-pong across the bridge. Without sockperf the part is skipped with a line,
/// but fails under CI, where `.ci/run` installs it.
fn sockperf_ping_pong(lab: &ClientEmuServer, io: &str) {
    if !latlab_io::precondition::met(latlab_io::precondition::need_program(
        "sockperf", "sockperf",
    )) {
        return;
    }
    let ip = lab.server_addr.to_string();
    let mut server = std::process::Command::new("ip")
        .args(["netns", "exec", lab.server.name(), "sockperf", "server"])
        .args(["-i", &ip, "-p", "11111"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1000));
    let client = std::process::Command::new("ip")
        .args(["netns", "exec", lab.client.name(), "sockperf", "ping-pong"])
        .args(["-i", &ip, "-p", "11111", "-t", "1", "--mps", "1000"])
        .output()
        .unwrap();
    server.kill().unwrap();
    server.wait().unwrap();
    let out = String::from_utf8_lossy(&client.stdout);
    assert!(client.status.success(), "{io}: sockperf: {out}");
    // "[Valid Duration] RunTime=… ; SentMessages=N; ReceivedMessages=M"
    let count = |key: &str| {
        out.split(key)
            .nth(1)
            .and_then(|s| s.split(|c: char| !c.is_ascii_digit()).next())
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // Every ping answered, however many a loaded machine sent in the second (a ping sent
    // before the server was up is not counted: sockperf's own warm-up comes first).
    let (sent, received) = (count("SentMessages="), count("ReceivedMessages="));
    assert!(
        received > 0 && received + 2 >= sent,
        "{io}: sockperf got {received} answers of {sent}:\n{out}"
    );
}

#[test]
fn udp_and_tcp_cross_the_af_packet_bridge_with_offloads_at_their_defaults() {
    udp_and_tcp_cross_the_bridge("packet");
}

#[test]
fn udp_and_tcp_cross_the_af_xdp_bridge_with_offloads_at_their_defaults() {
    udp_and_tcp_cross_the_bridge("xdp");
}

/// An Ethernet frame with `tags` (TPID, TCI) after the MACs, EtherType 0x88b5 (local
/// experimental) and a payload that names it.
fn tagged_frame(tags: &[(u16, u16)], mark: u8) -> Vec<u8> {
    let mut f = vec![0x02, 0, 0, 0, 0, 0x02, 0x02, 0, 0, 0, 0, 0x01];
    for (tpid, tci) in tags {
        f.extend_from_slice(&tpid.to_be_bytes());
        f.extend_from_slice(&tci.to_be_bytes());
    }
    f.extend_from_slice(&[0x88, 0xb5, b'l', b'a', b't', mark]);
    f.resize(f.len() + 60, mark);
    f
}

fn tagged_frames_arrive_tagged(io: &str) {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build_with(Offloads::Defaults).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let emu_json = dir.path().join("emu.json");
    let emu = start_emu(&lab, io, &emu_json);
    let frames: Vec<Vec<u8>> = vec![
        tagged_frame(&[(0x8100, 1)], 1),
        tagged_frame(&[(0x8100, 100)], 2),
        tagged_frame(&[(0x8100, 4094)], 3),
        tagged_frame(&[(0x88a8, 200), (0x8100, 100)], 4),
        tagged_frame(&[(0x8100, 0x2000 | 7), (0x8100, 300)], 5),
    ];
    // The receiver reads the far interface with the tags put back where its kernel took them
    // out (PACKET_AUXDATA through the ring header), so a frame that left the bridge untagged
    // arrives untagged here.
    let options = PacketOptions {
        wire_frames: true,
        ..PacketOptions::default()
    };
    let mut receiver = latlab_io::netns::run_in(lab.server.name(), move || {
        PacketSocket::open("veth0", &options)
    })
    .unwrap()
    .unwrap();
    let sent = frames.clone();
    latlab_io::netns::run_in(lab.client.name(), move || {
        let mut sender = PacketSocket::open("veth0", &PacketOptions::default()).unwrap();
        for f in &sent {
            assert!(sender.queue_tx(f).unwrap());
        }
        sender.flush_tx().unwrap();
    })
    .unwrap();
    let mut got: Vec<Vec<u8>> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < frames.len() && Instant::now() < deadline {
        receiver
            .wait_readable(Some(Duration::from_millis(50)))
            .unwrap();
        receiver
            .recv_batch(|f, _, _| {
                if f.windows(3).any(|w| w == b"lat") {
                    got.push(f.to_vec());
                }
            })
            .unwrap();
    }
    stop_emu(emu);
    got.sort_by_key(|f| f[f.len() - 1]);
    assert_eq!(
        got, frames,
        "{io}: the frames did not arrive as they were sent"
    );
}

#[test]
fn vlan_and_qinq_frames_leave_the_af_packet_bridge_tagged_as_they_came() {
    tagged_frames_arrive_tagged("packet");
}

#[test]
fn vlan_and_qinq_frames_leave_the_af_xdp_bridge_tagged_as_they_came() {
    tagged_frames_arrive_tagged("xdp");
}
