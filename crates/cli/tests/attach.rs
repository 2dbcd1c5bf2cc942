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

use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::wired::{can_run, exit_code, latlab_in, started, Wired, BRIDGE_ADDR, CONTAINER_ADDR};
use latlab_lab::topology::{ip, namespace_exists, unique_prefix, Namespace};

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

/// Sends `len` bytes over TCP from the container to the bridge's address; how many arrived.
fn tcp_through(w: &Wired, len: usize) -> usize {
    use std::io::{Read, Write};
    let addr: SocketAddr = format!("{BRIDGE_ADDR}:5201").parse().unwrap();
    let listener =
        latlab_io::netns::run_in(w.host.name(), move || std::net::TcpListener::bind(addr))
            .unwrap()
            .unwrap();
    let server = std::thread::spawn(move || {
        let (mut conn, _) = listener.accept().unwrap();
        conn.set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let (mut total, mut buf) = (0, vec![0u8; 1 << 16]);
        while let Ok(n @ 1..) = conn.read(&mut buf) {
            total += n;
        }
        total
    });
    let mut conn = latlab_io::netns::run_in(w.container.name(), move || {
        std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(60))
    })
    .unwrap()
    .unwrap();
    conn.set_write_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    conn.write_all(&vec![7u8; len]).unwrap();
    drop(conn);
    server.join().unwrap()
}

/// Checks that `rtts` (sorted) are nearly all answered, none under twice the one-way `delay`
/// and the fastest under three times it: the delay applied, once each way (applied twice,
/// the fastest would take four times it). The fastest, not the median: what a loaded machine
/// adds to a round trip moves the median far more than it moves the fastest of many.
fn delayed_by(rtts: &[Duration], n: usize, delay: Duration) {
    assert!(
        rtts.len() >= n * 9 / 10,
        "{} of {n} pings answered",
        rtts.len()
    );
    let min = rtts[0];
    assert!(min >= 2 * delay, "min RTT {min:?} below twice {delay:?}");
    assert!(
        min < 3 * delay,
        "fastest RTT {min:?} over 3 × {delay:?}: {rtts:?}"
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
    // Not delayed: the fastest well under the 10 ms round trip the emulator will make.
    let plain = round_trips(&w, 20);
    assert!(
        plain.len() >= 18 && plain[0] < Duration::from_millis(5),
        "{plain:?}"
    );

    // To its end (--duration), by name: 20 s is far more than the pings and the transfer
    // take, however slow the machine.
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
        emu.args(["--duration", "20s"]);
        emu
    });
    assert!(w.spliced(), "h0 left the host namespace");
    let rtts = round_trips(&w, 50);
    delayed_by(&rtts, 50, Duration::from_millis(5));
    // Offloads as they were: TCP's 64 KiB super-frames and unfinished checksums cross whole.
    assert_eq!(
        tcp_through(&w, 2 << 20),
        2 << 20,
        "the TCP transfer fell short"
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
    delayed_by(&rtts, 20, Duration::from_millis(2));
    child.signal("TERM");
    assert_eq!(exit_code(&mut child), Some(143));
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    w.back_to(&before, "SIGTERM");
    let after = round_trips(&w, 10);
    assert!(
        after.len() >= 9 && after[0] < Duration::from_millis(4),
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
        let files: Vec<String> = std::fs::read_dir("/run/latlab")
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with(&format!("latlab-{pid}-")))
            .collect();
        assert!(
            files.is_empty(),
            "left in /run/latlab after clean: {files:?}"
        );
    }
    assert!(
        caught_spliced > 0,
        "no kill -9 came while the link was spliced"
    );
    let after = round_trips(&w, 10);
    assert!(
        after.len() >= 9 && after[0] < Duration::from_millis(4),
        "{after:?}"
    );
}

#[test]
fn sigterm_at_any_stage_puts_the_wiring_back_by_itself() {
    let _turn = common::engines();
    if !can_run() {
        return;
    }
    let w = Wired::build();
    let before = w.settled();
    for delay_ms in [5, 10, 20, 40, 80, 200] {
        let mut child = common::wired::Running(
            w.emu(&["--attach", w.container.name(), "--poll", "block"])
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        std::thread::sleep(Duration::from_millis(delay_ms));
        child.signal("TERM");
        match exit_code(&mut child) {
            Some(143) => w.back_to(&before, &format!("SIGTERM at {delay_ms} ms")),
            // Before its handler was in place the signal ends latlab as kill -9 would; it had
            // not begun to splice then, but a clean-up is what would follow.
            other => {
                assert_eq!(other, None, "SIGTERM at {delay_ms} ms");
                let clean = latlab_in(w.host.name()).arg("clean").output().unwrap();
                assert!(clean.status.success());
                w.back_to(
                    &before,
                    &format!("SIGTERM at {delay_ms} ms and latlab clean"),
                );
            }
        }
    }
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
    // And veths whose host side is down, or of a 9000-byte MTU. (This kernel's bridge has no
    // VLAN filtering: the refusal of a bridge that filters VLANs is not tried here.)
    let down = Namespace::create(&format!("{prefix}-down")).unwrap();
    let jumbo = Namespace::create(&format!("{prefix}-jumbo")).unwrap();
    for (host_side, ns) in [("d0", &down), ("j0", &jumbo)] {
        let peer = ["name", "eth0", "netns", ns.name()];
        let add = ["-n", h, "link", "add", host_side, "type", "veth", "peer"];
        ip(&[&add[..], &peer[..]].concat()).unwrap();
    }
    for args in [
        vec!["-n", h, "link", "set", "j0", "mtu", "9000", "up"],
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
    refused(
        &w,
        &["--attach", down.name()],
        "d0 (the peer of eth0) is down",
    );
    refused(
        &w,
        &["--attach", jumbo.name()],
        "j0's MTU is 9000: frames of up to 9018 bytes need --frame-size 9018",
    );
    refused(&w, &["--attach", h], "is the namespace latlab runs in");
    refused(
        &w,
        &["--attach", w.container.name(), "--iface-a", "x"],
        "cannot be used with",
    );
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
    drop((lo_only, tun, macvlan, pair, routed, down, jumbo));
    assert!(!namespace_exists(&gone));
}
