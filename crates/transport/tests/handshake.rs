//! The stateless-cookie handshake and what a hostile network cannot do to an endpoint.

mod common;

use common::{client_addr, one_way, server_addr, Flood, Lab, MS};
use latlab_transport::{CloseReason, Config, Endpoint, Event};
use latlab_wire::transport::{Frame, Repr, HEADER_LEN, HELLO_MIN_LEN};

fn packet(connection_id: u64, frame: Frame<'_>) -> Vec<u8> {
    let mut bytes = vec![0u8; HEADER_LEN + frame.buffer_len()];
    Repr {
        ack_immediately: false,
        connection_id,
        packet_number: 0,
    }
    .emit(&mut latlab_wire::transport::Packet::new_unchecked(
        &mut bytes[..],
    ));
    frame.emit(&mut bytes[HEADER_LEN..]);
    bytes
}

fn hello(connection_id: u64, len: usize) -> Vec<u8> {
    let padding = (len - HEADER_LEN - 3) as u16;
    packet(connection_id, Frame::Hello { padding })
}

/// Everything `endpoint` has to send at `now`, as (destination, bytes).
fn drain(endpoint: &mut Endpoint, now: u64) -> Vec<(std::net::SocketAddr, Vec<u8>)> {
    let mut buf = [0u8; 1500];
    let mut out = Vec::new();
    while let Some(t) = endpoint.poll_transmit(now, &mut buf) {
        out.push((t.to, buf[..t.len].to_vec()));
    }
    out
}

#[test]
fn a_spoofed_hello_creates_no_state_and_draws_an_answer_no_larger_than_itself() {
    let mut server = Endpoint::new(Config::server(), 9);
    let victim = "192.0.2.7:53".parse().unwrap();
    let request = hello(0x1234, HELLO_MIN_LEN);
    server.handle_datagram(0, victim, &request);
    let answers = drain(&mut server, 0);
    assert_eq!(answers.len(), 1);
    assert_eq!(answers[0].0, victim);
    assert!(answers[0].1.len() <= request.len());
    assert_eq!(server.poll_timeout(), None, "no connection, no timer");
    assert_eq!(server.poll_event(), None);
    assert_eq!(server.stats().accepted, 0);
}

#[test]
fn a_hello_shorter_than_the_minimum_is_dropped_without_an_answer() {
    let mut server = Endpoint::new(Config::server(), 9);
    server.handle_datagram(0, client_addr(), &hello(0x1234, HELLO_MIN_LEN - 1));
    assert!(drain(&mut server, 0).is_empty());
    assert_eq!(server.stats().handshake_drops.hello_too_short, 1);
}

/// Runs a client's Hello through `server` and returns the client's HelloCookie packet.
fn cookie_from(server: &mut Endpoint, client: &mut Endpoint) -> Vec<u8> {
    client.connect(0, server_addr());
    for (_, bytes) in drain(client, 0) {
        server.handle_datagram(0, client_addr(), &bytes);
    }
    for (_, bytes) in drain(server, 0) {
        client.handle_datagram(0, server_addr(), &bytes);
    }
    let mut out = drain(client, 0);
    assert_eq!(out.len(), 1);
    out.remove(0).1
}

#[test]
fn a_cookie_replayed_from_another_address_is_refused() {
    let mut server = Endpoint::new(Config::server(), 9);
    let mut client = Endpoint::new(Config::default(), 3);
    let cookie = cookie_from(&mut server, &mut client);
    server.handle_datagram(0, "10.9.9.9:5000".parse().unwrap(), &cookie);
    assert!(drain(&mut server, 0).is_empty());
    assert_eq!(server.stats().handshake_drops.bad_cookie, 1);
    assert_eq!(server.stats().accepted, 0);
}

#[test]
fn an_expired_cookie_is_refused() {
    let config = Config::server();
    let two_epochs = 2 * config.cookie_epoch_ns;
    let mut server = Endpoint::new(config, 9);
    let mut client = Endpoint::new(Config::default(), 3);
    let cookie = cookie_from(&mut server, &mut client);
    server.handle_datagram(two_epochs, client_addr(), &cookie);
    assert!(drain(&mut server, two_epochs).is_empty());
    assert_eq!(server.stats().handshake_drops.expired_cookie, 1);
}

#[test]
fn a_repeated_cookie_from_the_same_client_is_accepted_once_and_answered_again() {
    let mut server = Endpoint::new(Config::server(), 9);
    let mut client = Endpoint::new(Config::default(), 3);
    let cookie = cookie_from(&mut server, &mut client);
    for _ in 0..2 {
        server.handle_datagram(MS, client_addr(), &cookie);
        let answers = drain(&mut server, MS);
        assert_eq!(
            answers.len(),
            1,
            "an Accept each time (the first may be lost)"
        );
        assert!(answers[0].1.len() <= cookie.len());
    }
    assert_eq!(server.stats().accepted, 1);
    assert!(matches!(server.poll_event(), Some(Event::Accepted { .. })));
    assert_eq!(server.poll_event(), None);
}

/// 100 messages every 20 ms from t = 1 s; the delivery time of each.
fn stream(flood: bool) -> (Lab, Vec<u64>) {
    let mut lab = Lab::connect(
        Config::default(),
        Config::server(),
        one_way(50),
        one_way(50),
    );
    if flood {
        lab.pair.a.flood = Some(Flood {
            from: "10.6.6.6:6666".parse().unwrap(),
            every_ns: 100_000,
            until_ns: 3500 * MS,
            next_ns: 900 * MS,
            sent: 0,
        });
    }
    for i in 0..100u64 {
        lab.send_at(1000 * MS + i * 20 * MS, 0, &[i as u8; 64]);
    }
    lab.run_until(4000 * MS);
    let times = lab.server().messages(0).iter().map(|m| m.0).collect();
    (lab, times)
}

#[test]
fn a_flood_of_garbage_and_foreign_ids_does_not_delay_an_established_stream() {
    let (_, quiet) = stream(false);
    let (lab, flooded) = stream(true);
    assert_eq!(quiet.len(), 100);
    assert_eq!(flooded, quiet, "every message at the same instant");
    let stats = lab.server().endpoint.stats();
    let junk = lab.pair.a.flood.as_ref().unwrap().sent;
    assert_eq!(junk, 26_000);
    assert_eq!(stats.garbage + stats.foreign, junk);
    assert_eq!(stats.garbage, junk / 2);
}

#[test]
fn keep_alives_hold_an_idle_connection_and_silence_closes_it() {
    let mut lab = Lab::connect(
        Config::default(),
        Config::server(),
        one_way(50),
        one_way(50),
    );
    lab.run_until(12_000 * MS);
    let closed = |node: &common::Node| {
        node.events.iter().find_map(|(at, e)| {
            matches!(
                e,
                Event::Closed {
                    reason: CloseReason::IdleTimeout,
                    ..
                }
            )
            .then_some(*at)
        })
    };
    assert_eq!(
        closed(lab.client()),
        None,
        "pings keep it open past the 10 s idle timeout"
    );
    assert_eq!(closed(lab.server()), None);
    lab.pair.network.set_drop_filter(|_| true);
    lab.run_until(30_000 * MS);
    // Nothing heard after 12 s (the last packet at most a keep-alive interval earlier):
    // closed 10 s later, between 21 s and 22 s.
    for node in [lab.client(), lab.server()] {
        let at = closed(node).expect("idle timeout");
        assert!((21_000 * MS..=22_000 * MS).contains(&at), "{at}");
    }
}

/// xorshift64*: deterministic noise for the test below.
fn next(state: &mut u64) -> u64 {
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    state.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

#[test]
fn mutated_packets_from_the_peer_address_never_panic_an_endpoint() {
    use std::cell::RefCell;
    use std::rc::Rc;

    let mut lab = Lab::connect(
        Config::default(),
        Config::server(),
        one_way(10),
        one_way(10),
    );
    let seen = Rc::new(RefCell::new(Vec::new()));
    let record = Rc::clone(&seen);
    lab.pair.network.set_drop_filter(move |d| {
        record.borrow_mut().push((d.from, d.payload.clone()));
        false
    });
    for i in 0..50u64 {
        lab.send_at(
            1000 * MS + i * 10 * MS,
            (i % 5) as u8,
            &vec![i as u8; 300 * (i as usize % 7)],
        );
    }
    lab.run_until(3000 * MS);
    let packets = seen.borrow().clone();
    assert!(packets.len() > 50);
    let mut rng = 0x5eed_u64;
    let mut now = 3000 * MS;
    for round in 0..100_000u64 {
        let (from, original) = &packets[(next(&mut rng) % packets.len() as u64) as usize];
        let mut bytes = original.clone();
        for _ in 0..1 + next(&mut rng) % 4 {
            if bytes.is_empty() {
                break;
            }
            let at = (next(&mut rng) % bytes.len() as u64) as usize;
            match next(&mut rng) % 3 {
                0 => bytes[at] = next(&mut rng) as u8,
                1 => bytes.truncate(at),
                _ => bytes[at] ^= 1 << (next(&mut rng) % 8),
            }
        }
        now += 10_000;
        let endpoint = if *from == client_addr() {
            &mut lab.pair.b.endpoint
        } else {
            &mut lab.pair.a.endpoint
        };
        endpoint.handle_datagram(now, *from, &bytes);
        if round % 64 == 0 {
            endpoint.handle_timeout(now);
            drain(endpoint, now);
            while endpoint.poll_event().is_some() {}
        }
    }
    let stats = lab.pair.b.endpoint.stats();
    assert!(stats.garbage > 0);
}

#[test]
fn a_lost_hello_is_sent_again_after_the_initial_rto() {
    // Built by hand so that the first datagram can be lost before the handshake starts.
    use latlab_link::sim::{Network, Pair};
    let client = common::Node::new(Config::default(), 1, client_addr());
    let server = common::Node::new(Config::server(), 2, server_addr());
    let network = Network::new(0, one_way(50), one_way(50)).unwrap();
    let mut pair = Pair::new(client, server, network);
    let mut first = true;
    pair.network
        .set_drop_filter(move |_| std::mem::take(&mut first));
    pair.a.endpoint.connect(0, server_addr());
    pair.drive_until(3000 * MS);
    // Hello again at 1 s (RFC 6298's initial RTO), then four 50 ms trips.
    let connected = pair
        .a
        .events
        .iter()
        .find_map(|(at, e)| matches!(e, Event::Connected { .. }).then_some(*at));
    assert_eq!(connected, Some(1200 * MS));
    assert_eq!(pair.network.filtered(), 1);
}
