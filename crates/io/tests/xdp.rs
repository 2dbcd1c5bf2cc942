//! AF_XDP sockets and their XDP program on a veth pair `veth-a`–`veth-b` (root only; when
//! namespaces cannot be made the tests print "skipped", except under CI=true, where they
//! fail).
//!
//! Each test makes two namespaces of its own: `latlab-xdptest-<pid>-<n>` holds `veth-b`
//! (198.18.9.2/24), where the XDP socket lives, and `latlab-xdptest-<pid>-<n>-peer` holds
//! `veth-a` (198.18.9.1/24), where ordinary UDP sockets talk to it. Two namespaces, because
//! with both addresses in one namespace the kernel would deliver between them through `lo`,
//! and no frame would cross the veth pair.

use std::net::{SocketAddr, UdpSocket};
use std::process::Command;
use std::time::{Duration, Instant};

use latlab_io::netns;
use latlab_io::xdp::{AttachMode, BindMode, Redirect, XdpOptions, XdpSocket};

const XDP_ADDR: &str = "198.18.9.2";
const PEER_ADDR: &str = "198.18.9.1";
const PORT: u16 = 7777;

/// The two namespaces of one test, deleted on drop, panics included.
struct Pair {
    /// Holds `veth-b`, the XDP side.
    ns: String,
    /// Holds `veth-a`, the ordinary side.
    peer: String,
}

impl Drop for Pair {
    fn drop(&mut self) {
        for name in [&self.ns, &self.peer] {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

fn ip(args: &[&str]) -> bool {
    Command::new("ip")
        .args(args)
        .status()
        .is_ok_and(|s| s.success())
}

fn ip_output(args: &[&str]) -> String {
    let out = Command::new("ip").args(args).output().unwrap();
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Makes the namespaces of test `n` with the veth pair up and addressed, or returns `None`
/// (after saying so) when this process may not make namespaces.
fn pair(n: u32) -> Option<Pair> {
    let ns = format!("latlab-xdptest-{}-{n}", std::process::id());
    if !ip(&["netns", "add", &ns]) {
        latlab_io::precondition::missing("cannot make a network namespace (not root?)");
        return None;
    }
    let pair = Pair {
        peer: format!("{ns}-peer"),
        ns,
    };
    assert!(ip(&["netns", "add", &pair.peer]));
    // `name`/`dev` spelled out: a bare `a` would be read as `address`.
    assert!(ip(&[
        "-n", &pair.ns, "link", "add", "name", "veth-a", "type", "veth", "peer", "name", "veth-b"
    ]));
    assert!(ip(&[
        "-n", &pair.ns, "link", "set", "dev", "veth-a", "netns", &pair.peer
    ]));
    for (ns, dev, addr) in [
        (&pair.ns, "veth-b", XDP_ADDR),
        (&pair.peer, "veth-a", PEER_ADDR),
    ] {
        assert!(ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{addr}/24"),
            "dev",
            dev
        ]));
        assert!(ip(&["-n", ns, "link", "set", "dev", dev, "up"]));
    }
    Some(pair)
}

/// Opens an XDP socket on `veth-b` with `program`, inside the XDP namespace.
fn open(pair: &Pair, program: Redirect) -> std::io::Result<XdpSocket> {
    netns::run_in(&pair.ns, move || {
        XdpSocket::open("veth-b", &XdpOptions::new(program))
    })
    .unwrap()
}

/// A UDP socket bound to `addr` inside namespace `ns`, with a short read timeout.
fn udp_in(ns: &str, addr: &str) -> UdpSocket {
    let addr: SocketAddr = addr.parse().unwrap();
    let sock = netns::run_in(ns, move || UdpSocket::bind(addr))
        .unwrap()
        .unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(5)))
        .unwrap();
    sock
}

/// Whether `ip link show dev veth-b` says a program is attached (`xdp`, `xdpgeneric`, …
/// after the MTU, `prog/xdp id N` below; the namespace names contain "xdp" too).
fn xdp_attached(pair: &Pair) -> bool {
    ip_output(&["-n", &pair.ns, "link", "show", "dev", "veth-b"])
        .split_whitespace()
        .any(|word| word.starts_with("xdp") || word.starts_with("prog/xdp"))
}

/// The payload of an IPv4 UDP frame without options to `port`, `None` for any other frame.
fn udp_payload(frame: &[u8], port: u16) -> Option<&[u8]> {
    let is_udp = frame.len() >= 42
        && frame[12..14] == [0x08, 0x00]
        && frame[14] == 0x45
        && frame[23] == 17
        && frame[36..38] == port.to_be_bytes();
    is_udp.then(|| &frame[42..])
}

/// The answer to an IPv4 UDP frame: MAC addresses, IP addresses and ports swapped, UDP
/// checksum 0 (none). The IP header checksum does not change: swapping two words keeps their
/// sum.
fn swapped(frame: &[u8]) -> Vec<u8> {
    let mut f = frame.to_vec();
    let swap = |f: &mut Vec<u8>, a: usize, b: usize, len: usize| {
        for i in 0..len {
            f.swap(a + i, b + i);
        }
    };
    swap(&mut f, 0, 6, 6);
    swap(&mut f, 26, 30, 4);
    swap(&mut f, 34, 36, 2);
    f[40] = 0;
    f[41] = 0;
    f
}

/// Echoes what arrives on `xdp` for `PORT` until `client` gets `payload` back, or fails after
/// [`PATIENCE`]. Returns the frames `xdp` received that were not ours.
fn echo_once(xdp: &mut XdpSocket, client: &UdpSocket, payload: &[u8]) -> usize {
    let to: SocketAddr = format!("{XDP_ADDR}:{PORT}").parse().unwrap();
    client.send_to(payload, to).unwrap();
    let deadline = Instant::now() + PATIENCE;
    let mut others = 0;
    let mut buf = [0u8; 2048];
    loop {
        assert!(
            Instant::now() < deadline,
            "no echo of {payload:?}; {:?}",
            xdp.statistics()
        );
        xdp.wait_readable(Some(Duration::from_millis(5))).unwrap();
        let mut answers = Vec::new();
        xdp.recv_batch(|frame| match udp_payload(frame, PORT) {
            Some(_) => answers.push(swapped(frame)),
            None => others += 1,
        })
        .unwrap();
        for answer in &answers {
            assert!(xdp.send(answer).unwrap(), "no free TX frame");
        }
        xdp.flush_tx().unwrap();
        if let Ok((n, from)) = client.recv_from(&mut buf) {
            assert_eq!(from, to);
            if &buf[..n] == payload {
                return others;
            }
        }
    }
}

/// How long to wait for a frame or a change that normally takes microseconds: long, because
/// the wait only runs out when something is broken, and a loaded guest can stall for a while.
const PATIENCE: Duration = Duration::from_secs(30);

#[test]
fn the_program_attaches_and_is_gone_once_the_socket_is_dropped() {
    let Some(pair) = pair(1) else { return };
    assert!(!xdp_attached(&pair));
    let sock = open(&pair, Redirect::Endpoint { udp_port: PORT }).unwrap();
    let (bind, attach) = sock.mode();
    eprintln!("bound {bind:?}, attached {attach:?}");
    // veth has no zero-copy; either attach mode is fine.
    assert_eq!(bind, BindMode::Copy);
    assert!(matches!(attach, AttachMode::Native | AttachMode::Generic));
    let shown = ip_output(&["-n", &pair.ns, "link", "show", "dev", "veth-b"]);
    eprintln!("{shown}");
    assert!(xdp_attached(&pair), "{shown}");
    drop(sock);
    let deadline = Instant::now() + PATIENCE;
    while xdp_attached(&pair) {
        assert!(Instant::now() < deadline, "the program stayed attached");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_driver_without_native_xdp_gets_the_generic_hook() {
    let Some(pair) = pair(6) else { return };
    // Loopback has no XDP of its own; the namespace's own `lo` is free to use.
    assert!(ip(&["-n", &pair.ns, "link", "set", "dev", "lo", "up"]));
    let sock = netns::run_in(&pair.ns, || {
        XdpSocket::open(
            "lo",
            &XdpOptions::new(Redirect::Endpoint { udp_port: PORT }),
        )
    })
    .unwrap()
    .unwrap();
    assert_eq!(sock.mode(), (BindMode::Copy, AttachMode::Generic));
    let shown = ip_output(&["-n", &pair.ns, "link", "show", "dev", "lo"]);
    assert!(shown.contains("xdpgeneric"), "{shown}");
}

#[test]
fn datagrams_to_the_port_are_echoed_over_xdp() {
    let Some(pair) = pair(2) else { return };
    let mut xdp = open(&pair, Redirect::Endpoint { udp_port: PORT }).unwrap();
    let client = udp_in(&pair.peer, &format!("{PEER_ADDR}:0"));
    for i in 0..100u32 {
        let payload = format!("ping {i} {}", "x".repeat(i as usize * 13));
        echo_once(&mut xdp, &client, payload.as_bytes());
    }
    let stats = xdp.statistics().unwrap();
    assert_eq!(stats.corrupt_descs, 0, "{stats:?}");
    assert_eq!(stats.tx_invalid_descs, 0, "{stats:?}");
    assert_eq!(stats.rx_dropped, 0, "{stats:?}");
}

#[test]
fn arp_and_other_ports_go_through_the_kernel_stack_while_the_program_is_attached() {
    let Some(pair) = pair(3) else { return };
    let mut xdp = open(&pair, Redirect::Endpoint { udp_port: PORT }).unwrap();
    // An ordinary echo server on another port of the XDP side.
    let server = udp_in(&pair.ns, &format!("{XDP_ADDR}:7778"));
    let client = udp_in(&pair.peer, &format!("{PEER_ADDR}:0"));
    let to: SocketAddr = format!("{XDP_ADDR}:7778").parse().unwrap();
    let mut buf = [0u8; 2048];
    for i in 0..5u32 {
        let payload = format!("through the stack {i}");
        client.send_to(payload.as_bytes(), to).unwrap();
        let deadline = Instant::now() + PATIENCE;
        let (n, from) = loop {
            assert!(
                Instant::now() < deadline,
                "the stack never got datagram {i}"
            );
            if let Ok(got) = server.recv_from(&mut buf) {
                break got;
            }
        };
        assert_eq!(&buf[..n], payload.as_bytes());
        server.send_to(&buf[..n], from).unwrap();
        client.set_read_timeout(Some(PATIENCE)).unwrap();
        let (n, _) = client.recv_from(&mut buf).expect("the echo came back");
        client
            .set_read_timeout(Some(Duration::from_millis(5)))
            .unwrap();
        assert_eq!(&buf[..n], payload.as_bytes());
    }
    // The peer learnt veth-b's address by ARP: no entry was made by hand.
    let neigh = ip_output(&["-n", &pair.peer, "neigh", "show", "dev", "veth-a"]);
    assert!(
        neigh.contains(XDP_ADDR) && neigh.contains("lladdr") && !neigh.contains("PERMANENT"),
        "{neigh}"
    );
    // None of it came to the XDP socket.
    assert_eq!(xdp.recv_batch(|_| {}).unwrap(), 0);
    // And the XDP port still works next to it.
    echo_once(&mut xdp, &client, b"over xdp");
}

#[test]
fn a_second_socket_on_the_interface_is_refused_and_the_first_keeps_working() {
    let Some(pair) = pair(4) else { return };
    let mut first = open(&pair, Redirect::Endpoint { udp_port: PORT }).unwrap();
    let client = udp_in(&pair.peer, &format!("{PEER_ADDR}:0"));
    echo_once(&mut first, &client, b"before");
    for program in [Redirect::Endpoint { udp_port: PORT }, Redirect::Everything] {
        let err = open(&pair, program).unwrap_err();
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(
            err.to_string(),
            "veth-b: an XDP program is already attached (another latlab?)"
        );
    }
    assert!(xdp_attached(&pair));
    echo_once(&mut first, &client, b"after");
}

#[test]
fn the_bridge_program_takes_every_frame_arp_included() {
    let Some(pair) = pair(5) else { return };
    let mut xdp = open(&pair, Redirect::Everything).unwrap();
    let client = udp_in(&pair.peer, &format!("{PEER_ADDR}:0"));
    // The peer must resolve veth-b's address first: its ARP request comes to the socket.
    client
        .send_to(
            b"lost",
            format!("{XDP_ADDR}:9").parse::<SocketAddr>().unwrap(),
        )
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    let mut arp = false;
    while !arp {
        assert!(Instant::now() < deadline, "no ARP request came");
        xdp.wait_readable(Some(Duration::from_millis(10))).unwrap();
        xdp.recv_batch(|frame| arp |= frame.len() >= 14 && frame[12..14] == [0x08, 0x06])
            .unwrap();
    }
}

#[test]
fn opening_a_missing_interface_names_it() {
    // Fails at the name lookup, before any system call that needs root.
    let err = XdpSocket::open(
        "latlab-nosuch0",
        &XdpOptions::new(Redirect::Endpoint { udp_port: PORT }),
    )
    .unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::NotFound);
    assert_eq!(err.to_string(), "latlab-nosuch0: no such interface");
}

#[test]
fn every_frame_carries_the_programs_arrival_stamp() {
    let Some(pair) = pair(8) else { return };
    let client = udp_in(&pair.peer, &format!("{PEER_ADDR}:0"));
    for program in [Redirect::Endpoint { udp_port: PORT }, Redirect::Everything] {
        let mut xdp = open(&pair, program).unwrap();
        let to: SocketAddr = format!("{XDP_ADDR}:{PORT}").parse().unwrap();
        let mut stamps = Vec::new();
        for i in 0..20u8 {
            let sent = latlab_io::clock::now_ns();
            client.send_to(&[i; 32], to).unwrap();
            let deadline = Instant::now() + PATIENCE;
            let mut got = None;
            while got.is_none() {
                assert!(Instant::now() < deadline, "frame {i} never came");
                xdp.wait_readable(Some(Duration::from_millis(5))).unwrap();
                xdp.recv_batch_stamped(|frame, stamp| {
                    if udp_payload(frame, PORT) == Some(&[i; 32][..]) {
                        got = Some(stamp);
                    }
                })
                .unwrap();
            }
            let read = latlab_io::clock::now_ns();
            let stamp = got.flatten().expect("the program stamped the frame");
            // Taken between the send and the read (with the clocks' conversion a few µs off
            // at most).
            assert!(
                stamp + 50_000 >= sent && stamp <= read + 50_000,
                "{program:?}: sent {sent}, stamped {stamp}, read {read}"
            );
            stamps.push(stamp);
        }
        assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "{stamps:?}");
        drop(xdp);
        // The link goes away asynchronously; the next program attaches once it has.
        let deadline = Instant::now() + PATIENCE;
        while xdp_attached(&pair) {
            assert!(Instant::now() < deadline, "the program stayed attached");
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

#[test]
fn the_endpoint_port_answers_each_peer_by_its_learnt_route_and_reports_a_peer_it_cannot_reach() {
    use latlab_io::port::{
        DatagramPort, DatagramRx, DatagramTx, PortSizes, SendFailure, SendQueue, TimestampSource,
        Unsent, XdpEndpoint,
    };
    let Some(pair) = pair(9) else { return };
    let xdp = open(&pair, Redirect::Endpoint { udp_port: PORT }).unwrap();
    let mut port = XdpEndpoint::new(xdp, PORT, PortSizes::new(32, 2048)).unwrap();
    assert_eq!(port.timestamp_source(), TimestampSource::XdpProgram);
    let client = udp_in(&pair.peer, &format!("{PEER_ADDR}:0"));
    let me = client.local_addr().unwrap();
    let to: SocketAddr = format!("{XDP_ADDR}:{PORT}").parse().unwrap();
    let nowhere: SocketAddr = "198.18.9.77:9".parse().unwrap();
    let before = latlab_io::clock::now_ns();
    for i in 0..5u8 {
        client.send_to(&[i; 24], to).unwrap();
    }
    // Each datagram is answered from inside the receive call; after the second, one goes to a
    // peer never heard from.
    let (mut received, mut unsent) = (Vec::new(), Vec::new());
    let deadline = Instant::now() + PATIENCE;
    while received.len() < 5 {
        assert!(Instant::now() < deadline, "only {received:?} came");
        port.wait_readable(Some(Duration::from_millis(5))).unwrap();
        port.recv_with_queue(|d, queue| {
            assert!(!d.unparsed && !d.truncated);
            received.push((d.from, d.rx_ns));
            queue
                .push(d.from, d.data.len())
                .unwrap()
                .copy_from_slice(d.data);
            if received.len() == 2 {
                queue.push(nowhere, 24).unwrap().fill(0xee);
            }
        })
        .unwrap();
        let mut stamp =
            |payload: &mut [u8], t: u64| payload[8..16].copy_from_slice(&t.to_le_bytes());
        port.flush(&mut stamp, |u| unsent.push(u)).unwrap();
    }
    assert!(received.iter().all(|(from, _)| *from == me));
    assert_eq!(
        unsent,
        vec![Unsent {
            to: nowhere,
            failure: SendFailure::NoLinkAddress
        }]
    );
    let mut buf = [0u8; 64];
    client.set_read_timeout(Some(PATIENCE)).unwrap();
    for (i, (_, rx_ns)) in received.iter().enumerate() {
        let (n, from) = client.recv_from(&mut buf).expect("the answer came back");
        assert_eq!((n, from, buf[0]), (24, to, i as u8));
        let tx_ns = u64::from_le_bytes(buf[8..16].try_into().unwrap());
        assert!(
            before <= rx_ns + 50_000 && *rx_ns <= tx_ns,
            "sent after {before}, stamped {rx_ns} by the program, answered at {tx_ns}"
        );
    }
    assert_eq!(port.kernel_drops(), Some(0));
    assert_eq!(port.socket().statistics().unwrap().tx_invalid_descs, 0);
}

#[test]
fn the_endpoint_splits_into_a_send_half_and_a_receive_half_on_two_threads() {
    use latlab_io::port::{
        DatagramPort, DatagramRx, DatagramTx, LinkRoute, NoStamp, PortSizes, SendQueue, XdpEndpoint,
    };
    let Some(pair) = pair(10) else { return };
    let xdp = open(&pair, Redirect::Endpoint { udp_port: PORT }).unwrap();
    let peer_mac = netns::run_in(&pair.peer, || latlab_io::neigh::interface_mac("veth-a"))
        .unwrap()
        .unwrap();
    let our_mac = netns::run_in(&pair.ns, || latlab_io::neigh::interface_mac("veth-b"))
        .unwrap()
        .unwrap();
    let mut port = XdpEndpoint::new(xdp, PORT, PortSizes::new(16, 2048)).unwrap();
    // The peer is never heard before it is sent to: the default route reaches it.
    port.set_default_route(LinkRoute {
        peer_mac,
        local_mac: our_mac,
        local_ip: XDP_ADDR.parse().unwrap(),
    });
    // The peer echoes what it gets back to us.
    let echo = udp_in(&pair.peer, &format!("{PEER_ADDR}:0"));
    echo.set_read_timeout(Some(PATIENCE)).unwrap();
    let to = echo.local_addr().unwrap();
    let (mut tx, mut rx) = port.split();
    let got = std::thread::scope(|s| {
        s.spawn(|| {
            for i in 0..10u8 {
                tx.queue().push(to, 20).unwrap().fill(i);
                let f = tx.flush(&mut NoStamp, |u| panic!("{u:?}")).unwrap();
                assert_eq!(f.sent, 1);
            }
        });
        s.spawn(|| {
            let mut buf = [0u8; 64];
            for _ in 0..10 {
                let (n, from) = echo.recv_from(&mut buf).expect("the datagram came");
                assert_eq!(from.to_string(), format!("{XDP_ADDR}:{PORT}"));
                echo.send_to(&buf[..n], from).unwrap();
            }
        });
        let mut got = Vec::new();
        let deadline = Instant::now() + PATIENCE;
        while got.len() < 10 {
            assert!(Instant::now() < deadline, "only {got:?} came back");
            rx.wait_readable(Some(Duration::from_millis(10))).unwrap();
            rx.recv(|d| {
                assert_eq!(d.from, to);
                got.push(d.data[0]);
            })
            .unwrap();
        }
        got
    });
    assert_eq!(got, (0..10).collect::<Vec<u8>>());
}

/// Issue 10, item 5: over AF_XDP a client flooding the game server above the receive rate
/// took the ring and user space from everyone else. With a per-source limit the program drops
/// the flooder's excess itself: what reaches the socket from it is about rate × time, the
/// program counts the rest, and a quiet source (same address, another port) loses nothing.
#[test]
fn one_flooding_source_cannot_crowd_out_the_others_over_xdp() {
    use latlab_io::xdp::{SourceLimit, SOURCE_BURST};
    let Some(pair) = pair(11) else { return };
    const RATE: f64 = 2000.0;
    let options = XdpOptions {
        source_limit: SourceLimit::new(RATE),
        ..XdpOptions::new(Redirect::Endpoint { udp_port: PORT })
    };
    let mut xdp = netns::run_in(&pair.ns, move || XdpSocket::open("veth-b", &options))
        .unwrap()
        .unwrap();
    let drops = xdp
        .source_drops()
        .unwrap()
        .expect("the program has a limit");
    assert_eq!(drops.read().unwrap(), 0);
    let flooder = udp_in(&pair.peer, &format!("{PEER_ADDR}:0"));
    let quiet = udp_in(&pair.peer, &format!("{PEER_ADDR}:0"));
    let to: SocketAddr = format!("{XDP_ADDR}:{PORT}").parse().unwrap();
    // Bursts of 100 (50 times what the bucket refills in a 1 ms tick) paced by 1 ms sleeps
    // (longer on a busy machine) for half a second; the quiet source sends every tenth tick
    // (at most 100 pps, a twentieth of the limit). Each burst's start is kept: the bucket
    // refills between bursts by the time that actually passed.
    let (mut flood_sent, mut quiet_sent) = (0u64, 0u64);
    let start = Instant::now();
    let mut bursts = Vec::new();
    while start.elapsed() < Duration::from_millis(500) {
        bursts.push(start.elapsed().as_secs_f64());
        for _ in 0..100 {
            if flooder.send_to(b"flood", to).is_ok() {
                flood_sent += 1;
            }
        }
        if bursts.len() % 10 == 1 {
            quiet.send_to(b"quiet", to).unwrap();
            quiet_sent += 1;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // What passed waits in the RX ring (2048 entries, more than passes): read until every
    // quiet datagram is in and the ring stays empty for a while.
    let flood_port = flooder.local_addr().unwrap().port();
    let quiet_port = quiet.local_addr().unwrap().port();
    let (mut from_flooder, mut from_quiet) = (0u64, 0u64);
    let deadline = Instant::now() + PATIENCE;
    let mut last_frame = Instant::now();
    while from_quiet < quiet_sent || last_frame.elapsed() < Duration::from_millis(200) {
        assert!(
            Instant::now() < deadline,
            "only {from_quiet} of {quiet_sent} quiet datagrams came"
        );
        xdp.wait_readable(Some(Duration::from_millis(10))).unwrap();
        let got = xdp
            .recv_batch(|frame| {
                if udp_payload(frame, PORT).is_some() {
                    let source = u16::from_be_bytes([frame[34], frame[35]]);
                    from_flooder += u64::from(source == flood_port);
                    from_quiet += u64::from(source == quiet_port);
                }
            })
            .unwrap();
        if got > 0 {
            last_frame = Instant::now();
        }
    }
    // Every frame passed between the first burst and the last frame read.
    let elapsed = (last_frame - start).as_secs_f64();
    let dropped = drops.read().unwrap();
    let allowed = RATE * elapsed;
    eprintln!(
        "{elapsed:.3} s: flooder sent {flood_sent}, {from_flooder} came, {dropped} dropped by \
         the program; quiet sent {quiet_sent}, {from_quiet} came; {:?}",
        xdp.statistics().unwrap()
    );
    assert_eq!(from_quiet, quiet_sent, "the quiet source lost datagrams");
    assert!(
        from_flooder as f64 <= allowed + f64::from(SOURCE_BURST) + 2.0,
        "{from_flooder} of the flooder's datagrams passed a limit of {allowed:.0}"
    );
    // The bucket passed its burst, then at least what it refilled between bursts (a burst of
    // 100 empties it); tokens are not kept past the burst, so a sender that stalled gets fewer
    // than the rate times the time. Half of that, for the frames of a burst that the kernel
    // handed over later than the burst began.
    let refilled: f64 = bursts
        .windows(2)
        .map(|w| ((w[1] - w[0]) * RATE).floor().min(f64::from(SOURCE_BURST)))
        .sum();
    let owed = f64::from(SOURCE_BURST) + refilled;
    assert!(
        from_flooder as f64 >= 0.5 * owed,
        "only {from_flooder} of the flooder's datagrams passed; its bucket refilled {owed:.0}"
    );
    assert!(
        dropped > 0,
        "the flood was no flood: nothing was over the limit"
    );
    assert!(dropped + from_flooder <= flood_sent);
    assert!(dropped as f64 >= 0.9 * (flood_sent - from_flooder) as f64);
    let stats = xdp.statistics().unwrap();
    assert_eq!((stats.rx_dropped, stats.rx_ring_full), (0, 0), "{stats:?}");
}
