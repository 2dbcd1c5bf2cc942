//! A compact connection whose client's address changes: in virtual time (the `lean` policy on
//! a path of RTT 100 ms, a 100-byte message every 100 ms from t = 1 s, delivery times by hand)
//! and over real sockets on loopback, where the client moves to a new port mid-stream.

mod common;

use std::cell::{Cell, RefCell};
use std::net::{SocketAddr, UdpSocket};
use std::rc::Rc;
use std::time::{Duration, Instant};

use common::{carries, client_addr, config, on_time, one_way, send, sent_at, server_addr, Lab, MS};
use latlab_transport::{Endpoint, Event};
use latlab_wire::transport::compact::{is_short, ShortHeader, SHORT_HAS_ID};
use latlab_wire::transport::{parse_long_packet, Frame};

fn new_client_addr() -> SocketAddr {
    "10.0.0.9:6001".parse().unwrap()
}

/// Every datagram the network carried after the handshake: (from, to, bytes).
type Log = Rc<RefCell<Vec<(SocketAddr, SocketAddr, Vec<u8>)>>>;

/// A `lean` lab whose network logs every datagram and, once `moved` is set, loses what goes to
/// the client's old address (nobody listens there any more). The log starts after the
/// handshake; the short id is read from the server's `Accept`, caught on the way.
fn lab(moved: &Rc<Cell<bool>>) -> (Lab, Log, u32) {
    let mut lab = Lab::connect(
        config("lean", false),
        config("lean", true),
        one_way(50),
        one_way(50),
    );
    let log: Log = Rc::default();
    let (sink, gone) = (Rc::clone(&log), Rc::clone(moved));
    lab.pair.network.set_drop_filter(move |d| {
        sink.borrow_mut().push((d.from, d.to, d.payload.to_vec()));
        gone.get() && d.to == client_addr()
    });
    (lab, log, short_id_of_lab())
}

/// The short id the server gave the lab's connection, from a replay of its handshake: the
/// server's `Accept` packet as a fresh server with the lab server's seed writes it.
fn short_id_of_lab() -> u32 {
    let mut server = Endpoint::new(config("lean", true), 2);
    let mut client = Endpoint::new(config("lean", false), 1);
    client.connect(0, server_addr());
    let mut buf = [0u8; 1500];
    let mut id = None;
    for _ in 0..2 {
        while let Some(t) = client.poll_transmit(0, &mut buf) {
            server.handle_datagram(0, client_addr(), &buf[..t.len]);
        }
        while let Some(t) = server.poll_transmit(0, &mut buf) {
            let _ = parse_long_packet(&buf[..t.len], |f| {
                if let Frame::ShortId { id: got } = f {
                    id = Some(got);
                }
            });
            client.handle_datagram(0, server_addr(), &buf[..t.len]);
        }
    }
    id.expect("the compact Accept carries a short id")
}

fn sends_id(bytes: &[u8]) -> bool {
    is_short(bytes) && bytes[0] & SHORT_HAS_ID != 0
}

#[test]
fn a_client_moved_to_a_new_address_mid_stream_loses_nothing_and_sends_the_id_for_one_rtt() {
    // The client moves 40 ms before message 20 (at T = 3 s) and announces it with a PING that
    // carries the short id and asks for an ACK at once: the server moves the connection at
    // T+10 and its ACK reaches the client at T+60. Message 20 and its copy (T, T+20) carry the
    // id too (4 bytes more); from message 21 on the header is 2 bytes again. Every message
    // arrives 50 ms after it was sent, as if nothing had moved.
    let moved = Rc::new(Cell::new(false));
    let (mut lab, log, id) = lab(&moved);
    for i in 0..40u64 {
        if i == 20 {
            lab.run_until(sent_at(20) - 40 * MS);
            moved.set(true);
            lab.pair.a.addr = new_client_addr();
            assert!(lab.pair.a.endpoint.local_address_changed(lab.connection));
        }
        lab.send_at(sent_at(i), 0, &[i as u8; 100]);
    }
    lab.run_until(sent_at(40) + 3000 * MS);
    on_time(&lab, 0, 40);
    let server = lab.server();
    let on_server = lab.connection_on_server();
    assert_eq!(server.endpoint.remote(on_server), Some(new_client_addr()));
    let stats = server.endpoint.connection_stats(on_server).unwrap();
    assert_eq!((stats.address_moves, stats.moves_refused), (1, 0));
    let log = log.borrow();
    let from_client = |addr: SocketAddr| log.iter().filter(move |d| d.0 == addr);
    assert!(from_client(client_addr()).all(|d| !sends_id(&d.2)));
    let announced: Vec<&Vec<u8>> = from_client(new_client_addr())
        .filter(|d| sends_id(&d.2))
        .map(|d| &d.2)
        .collect();
    // The PING first, the id (4 bytes) after the flags; message 20 and its copy.
    assert_eq!(announced[0][1..5], id.to_be_bytes(), "{announced:?}");
    assert!(announced.len() <= 4, "{announced:?}");
    let data = announced.iter().filter(|b| carries(b, 0, 20, None)).count();
    assert_eq!(data, 2);
    // From message 21 on, no id: 2 bytes of header (107-byte datagrams, more with an ACK).
    for i in 21..40 {
        assert!(from_client(new_client_addr())
            .filter(|d| carries(&d.2, 0, i, None))
            .all(|d| !sends_id(&d.2) && (d.2.len() == 107 || d.2.len() > 110)));
    }
}

#[test]
fn a_client_moved_by_a_nat_it_was_not_told_of_announces_its_id_after_two_silent_timeouts() {
    // The client's address changes under it 40 ms before message 20 (T = 3 s) and nobody
    // tells it: the server counts its packets as foreign and answers none, and what the server
    // sends goes to the old address. At its second timeout in a row (T + 720 ms in this
    // deterministic run; the timeouts wait for the cumulative ACK under NACK feedback) the
    // client announces its short id with the messages it holds: the server moves the
    // connection and delivers 20..=27 together at T + 770 ms; from 28 on, 50 ms after sending.
    let moved = Rc::new(Cell::new(false));
    let (mut lab, log, _) = lab(&moved);
    for i in 0..40u64 {
        if i == 20 {
            lab.run_until(sent_at(20) - 40 * MS);
            moved.set(true);
            lab.pair.a.addr = new_client_addr();
        }
        lab.send_at(sent_at(i), 0, &[i as u8; 100]);
    }
    lab.run_until(sent_at(40) + 10_000 * MS);
    let server = lab.server();
    let got: Vec<u32> = server.messages(0).iter().map(|m| m.1).collect();
    assert_eq!(got, (0..40).collect::<Vec<u32>>());
    for i in 0..20u32 {
        let at = server.delivered_at(0, i);
        assert_eq!(at, Some(sent_at(u64::from(i)) + 50 * MS));
    }
    let on_server = lab.connection_on_server();
    assert_eq!(server.endpoint.remote(on_server), Some(new_client_addr()));
    let stats = server.endpoint.connection_stats(on_server).unwrap();
    assert_eq!(stats.address_moves, 1);
    assert!(server.endpoint.stats().foreign > 0);
    let t = sent_at(20);
    for i in 20..40u32 {
        let expected = if i <= 27 {
            t + 770 * MS
        } else {
            sent_at(u64::from(i)) + 50 * MS
        };
        assert_eq!(server.delivered_at(0, i), Some(expected), "message {i}");
    }
    let log = log.borrow();
    let announced = log
        .iter()
        .filter(|d| d.0 == new_client_addr() && sends_id(&d.2))
        .count();
    assert!(
        (1..=3).contains(&announced),
        "{announced} packets with the id"
    );
}

/// A short packet with `short_id`, packet number `pn` in `pn_len` bytes, and a PING.
fn spoofed(short_id: u32, pn: u64, pn_len: usize) -> Vec<u8> {
    let header = ShortHeader {
        ack_immediately: false,
        short_id: Some(short_id),
        pn_len,
        truncated: (pn & ((1 << (8 * pn_len)) - 1)) as u32,
    };
    common::short_packet(header, &[Frame::Ping])
}

#[test]
fn a_wrong_id_a_far_number_or_an_old_number_from_another_address_moves_nothing() {
    let moved = Rc::new(Cell::new(false));
    let (mut lab, log, id) = lab(&moved);
    send(&mut lab, 0, 20);
    lab.run_until(sent_at(20) - 40 * MS);
    // The client's packet numbers count its short packets from 1, all delivered so far.
    let highest = log
        .borrow()
        .iter()
        .filter(|d| d.0 == client_addr() && is_short(&d.2))
        .count() as u64;
    let attacker: SocketAddr = "10.6.6.6:6666".parse().unwrap();
    let now = lab.now();
    let on_server = lab.connection_on_server();
    let server = &mut lab.pair.b.endpoint;
    let before = server.stats();
    // A guessed id: no connection has it.
    server.handle_datagram(now, attacker, &spoofed(id ^ 1, highest + 1, 1));
    assert_eq!(server.stats().foreign, before.foreign + 1);
    // The right id and a number 20,000 above the highest: refused as far from the window.
    server.handle_datagram(now, attacker, &spoofed(id, highest + 20_000, 2));
    // The right id and a number already passed (a replay): refused, nothing moves.
    server.handle_datagram(now, attacker, &spoofed(id, highest - 2, 1));
    let stats = server.connection_stats(on_server).unwrap();
    assert_eq!(
        (stats.packets_far, stats.moves_refused, stats.address_moves),
        (1, 1, 0)
    );
    assert_eq!(server.remote(on_server), Some(client_addr()));
    send(&mut lab, 20, 40);
    lab.run_until(sent_at(40) + 3000 * MS);
    on_time(&lab, 0, 40);
}

#[test]
fn a_packet_with_the_id_from_another_connections_address_moves_nothing_and_one_from_a_free_one_does(
) {
    // Two clients of one server, driven by hand at t = 0. Whoever knows client A's short id
    // (it travels in the clear) and a number in its window moves A to a free address: nothing
    // is authenticated. Onto client B's address it cannot: that address names B.
    let mut server = Endpoint::new(config("lean", true), 9);
    let (addr_a, addr_b): (SocketAddr, SocketAddr) = (
        "10.0.0.1:5000".parse().unwrap(),
        "10.0.0.3:5000".parse().unwrap(),
    );
    let mut a = Endpoint::new(config("lean", false), 1);
    let mut b = Endpoint::new(config("lean", false), 2);
    a.connect(0, server_addr());
    b.connect(0, server_addr());
    let mut buf = [0u8; 1500];
    let mut id_a = None;
    let mut handles = Vec::new();
    for _ in 0..3 {
        for (client, from) in [(&mut a, addr_a), (&mut b, addr_b)] {
            while let Some(t) = client.poll_transmit(0, &mut buf) {
                server.handle_datagram(0, from, &buf[..t.len]);
            }
        }
        while let Some(t) = server.poll_transmit(0, &mut buf) {
            let bytes = &buf[..t.len];
            let _ = parse_long_packet(bytes, |f| {
                if let (Frame::ShortId { id }, true) = (f, t.to == addr_a) {
                    id_a = Some(id);
                }
            });
            let client = if t.to == addr_a { &mut a } else { &mut b };
            client.handle_datagram(0, server_addr(), bytes);
        }
        while let Some(event) = server.poll_event() {
            if let Event::Accepted { connection, remote } = event {
                handles.push((remote, connection));
            }
        }
    }
    let id_a = id_a.expect("A's Accept carries its short id");
    let (_, on_server) = *handles.iter().find(|h| h.0 == addr_a).unwrap();
    server.handle_datagram(MS, addr_b, &spoofed(id_a, 1, 1));
    let stats = server.connection_stats(on_server).unwrap();
    assert_eq!((stats.moves_refused, stats.address_moves), (1, 0));
    assert_eq!(server.remote(on_server), Some(addr_a));
    let free: SocketAddr = "10.6.6.6:6666".parse().unwrap();
    server.handle_datagram(MS, free, &spoofed(id_a, 1, 1));
    let stats = server.connection_stats(on_server).unwrap();
    assert_eq!(stats.address_moves, 1);
    assert_eq!(server.remote(on_server), Some(free));
}

#[test]
fn a_version_1_connection_has_no_short_id_and_stays_on_its_address() {
    let mut lab = Lab::connect(
        config("rack", false),
        config("rack", true),
        one_way(50),
        one_way(50),
    );
    assert!(!lab.pair.a.endpoint.local_address_changed(lab.connection));
}

/// Sends what `endpoint` has due through `socket`, hands it what arrived, serves its timers.
fn pump(endpoint: &mut Endpoint, socket: &UdpSocket, now: u64) {
    let mut buf = [0u8; 1500];
    loop {
        while let Some(t) = endpoint.poll_transmit(now, &mut buf) {
            socket.send_to(&buf[..t.len], t.to).unwrap();
        }
        let mut got = false;
        loop {
            match socket.recv_from(&mut buf) {
                Ok((n, from)) => {
                    endpoint.handle_datagram(now, from, &buf[..n]);
                    got = true;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                // An ICMP error from the old port: nothing to read.
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => continue,
                Err(e) => panic!("recv: {e}"),
            }
        }
        if endpoint.poll_timeout().is_some_and(|at| at <= now) {
            endpoint.handle_timeout(now);
        } else if !got {
            return;
        }
    }
}

fn loopback() -> UdpSocket {
    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.set_nonblocking(true).unwrap();
    socket
}

#[test]
fn over_loopback_a_client_that_moves_to_a_new_port_mid_stream_loses_no_message() {
    // 100 messages, one every 10 ms; after the 50th the client closes its socket and sends
    // from a new one (a new port), as after a NAT rebinding it was told of.
    let server_socket = loopback();
    let mut client_socket = loopback();
    let old_port = client_socket.local_addr().unwrap();
    let mut server = Endpoint::new(config("lean", true), 2);
    let mut client = Endpoint::new(config("lean", false), 1);
    let start = Instant::now();
    let now = || start.elapsed().as_nanos() as u64;
    let connection = client.connect(now(), server_socket.local_addr().unwrap());
    let mut received = Vec::new();
    let mut on_server = None;
    let mut next = 0u32;
    let mut next_at = now();
    let deadline = Duration::from_secs(20);
    while received.len() < 100 && start.elapsed() < deadline {
        let t = now();
        if next < 100 && t >= next_at {
            if next == 50 {
                client_socket = loopback();
                assert!(client.local_address_changed(connection));
            }
            client.send(t, connection, 0, &next.to_be_bytes()).unwrap();
            next += 1;
            next_at = t + 10 * MS;
        }
        pump(&mut client, &client_socket, now());
        pump(&mut server, &server_socket, now());
        while let Some(event) = server.poll_event() {
            match event {
                Event::Accepted { connection, .. } => on_server = Some(connection),
                Event::Message { data, .. } => received.push(data),
                _ => {}
            }
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let expected: Vec<Vec<u8>> = (0..100u32).map(|i| i.to_be_bytes().to_vec()).collect();
    assert_eq!(received, expected, "every message, in order, once");
    let on_server = on_server.expect("accepted");
    let new_addr = client_socket.local_addr().unwrap();
    assert_ne!(new_addr, old_port);
    assert_eq!(server.remote(on_server), Some(new_addr));
    let stats = server.connection_stats(on_server).unwrap();
    assert_eq!(stats.address_moves, 1);
}
