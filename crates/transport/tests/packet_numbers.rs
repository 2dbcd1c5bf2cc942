//! Forged packet numbers far from the window change nothing, in both wire formats: a packet
//! whose number lies further above the highest received than a genuine peer's can is refused
//! whole (counted as `packets_far`), so its frames never act and the receiver's window does
//! not move; the real stream that follows loses nothing. Virtual time, RTT 100 ms, a 100-byte
//! message every 100 ms from t = 1 s, each delivered 50 ms after it was sent.

mod common;

use std::cell::Cell;
use std::rc::Rc;

use common::{client_addr, config, one_way, send, sent_at, server_addr, Lab, MS};
use latlab_transport::{ChannelKind, Endpoint};
use latlab_wire::transport::compact::{is_short, ShortHeader};
use latlab_wire::transport::{self as wire, Frame, HEADER_LEN};

/// A forged copy of message 25 with other bytes: delivered, it would show.
const FORGED: [u8; 100] = [0xee; 100];

fn forged_data() -> Frame<'static> {
    Frame::Data {
        channel: 0,
        kind: ChannelKind::ReliableOrdered,
        message: 25,
        fragment: 0,
        fragments: 1,
        payload: &FORGED,
    }
}

/// A compact packet numbered `pn` in `pn_len` bytes carrying the forged message.
fn short_packet(pn: u64, pn_len: usize) -> Vec<u8> {
    let header = ShortHeader {
        ack_immediately: true,
        short_id: None,
        pn_len,
        truncated: (pn & ((1 << (8 * pn_len)) - 1)) as u32,
    };
    common::short_packet(header, &[forged_data()])
}

/// A version 1 packet of connection `id` numbered `pn` carrying the forged message.
fn long_packet(id: u64, pn: u64) -> Vec<u8> {
    let frame = forged_data();
    let mut bytes = vec![0u8; HEADER_LEN + frame.buffer_len()];
    wire::Repr {
        ack_immediately: true,
        connection_id: id,
        packet_number: pn,
    }
    .emit(&mut wire::Packet::new_unchecked(&mut bytes[..]));
    frame.emit(&mut bytes[HEADER_LEN..]);
    bytes
}

/// A lab of `policy` that counts the client's packets (all delivered: their numbers run from 1
/// to that count) and sends messages 0..20.
fn first_half(policy: &str) -> (Lab, Rc<Cell<u64>>) {
    let mut lab = Lab::connect(
        config(policy, false),
        config(policy, true),
        one_way(50),
        one_way(50),
    );
    let sent = Rc::new(Cell::new(0u64));
    let count = Rc::clone(&sent);
    lab.pair.network.set_drop_filter(move |d| {
        if d.from == client_addr() {
            count.set(count.get() + 1);
        }
        false
    });
    send(&mut lab, 0, 20);
    lab.run_until(sent_at(20) - 40 * MS);
    (lab, sent)
}

/// Sends messages 20..40 and checks that all 40 arrived on time with their own bytes.
fn second_half_arrives_untouched(lab: &mut Lab) {
    send(lab, 20, 40);
    lab.run_until(sent_at(40) + 3000 * MS);
    let got = lab.server().messages(0);
    assert_eq!(got.len(), 40);
    for (i, (at, number, data)) in got.into_iter().enumerate() {
        assert_eq!(number, i as u32);
        assert_eq!(at, sent_at(i as u64) + 50 * MS, "message {i}");
        assert_eq!(data, vec![i as u8; 100], "message {i}'s own bytes");
    }
}

#[test]
fn compact_packets_numbered_far_ahead_are_refused_whole_and_the_stream_loses_nothing() {
    let (mut lab, sent) = first_half("lean");
    let highest = sent.get();
    let now = lab.now();
    let on_server = lab.connection_on_server();
    let server = &mut lab.pair.b.endpoint;
    let garbage = server.stats().garbage;
    // From the client's own address: 100 above in one byte (a quarter window is 64), 20,000
    // in two (16,384), 70,000 and 2^31 − 1 in four (the bound is 65,536).
    for (pn, len) in [
        (highest + 100, 1),
        (highest + 20_000, 2),
        (highest + 70_000, 4),
        (highest + (1 << 31) - 1, 4),
    ] {
        server.handle_datagram(now, client_addr(), &short_packet(pn, len));
    }
    // Within the window but with a byte of junk after the frame: not a packet at all.
    let mut cut = short_packet(highest + 1, 1);
    cut.push(0xff);
    server.handle_datagram(now, client_addr(), &cut);
    assert_eq!(server.stats().garbage, garbage + 1);
    let stats = server.connection_stats(on_server).unwrap();
    assert_eq!((stats.packets_far, stats.packets_refused), (4, 0));
    second_half_arrives_untouched(&mut lab);
    let stats = lab.server().endpoint.connection_stats(on_server).unwrap();
    assert_eq!(stats.packets_far, 4, "no genuine packet is refused");
}

/// The connection id the lab's client (seed 1) draws, from a replay of its `Hello`.
fn lab_connection_id() -> u64 {
    let mut client = Endpoint::new(config("rack", false), 1);
    client.connect(0, server_addr());
    let mut buf = [0u8; 1500];
    let t = client.poll_transmit(0, &mut buf).unwrap();
    wire::Packet::new_checked(&buf[..t.len])
        .unwrap()
        .connection_id()
}

#[test]
fn version_1_packets_numbered_far_ahead_are_refused_whole_and_the_stream_loses_nothing() {
    let (mut lab, sent) = first_half("rack");
    let highest = sent.get();
    let id = lab_connection_id();
    let now = lab.now();
    let on_server = lab.connection_on_server();
    let server = &mut lab.pair.b.endpoint;
    for pn in [highest + (1 << 16) + 1, highest + 1_000_000, u64::MAX] {
        server.handle_datagram(now, client_addr(), &long_packet(id, pn));
    }
    let stats = server.connection_stats(on_server).unwrap();
    assert_eq!(stats.packets_far, 3);
    second_half_arrives_untouched(&mut lab);
}

#[test]
fn a_forged_number_within_a_quarter_window_leaves_the_next_genuine_numbers_decodable() {
    // The compact stream's own packets travel with one byte of packet number. A forged packet
    // 60 above the highest (within the 64 a genuine one may jump) is taken, and its frames
    // act: nothing authenticates it. The genuine packets that follow still decode to their
    // own numbers, so the stream goes on.
    let (mut lab, sent) = first_half("lean");
    let highest = sent.get();
    let now = lab.now();
    let mut ping = short_packet(highest + 60, 1);
    ping.truncate(2);
    ping.push(7); // PING instead of the forged message
    assert!(is_short(&ping));
    lab.pair
        .b
        .endpoint
        .handle_datagram(now, client_addr(), &ping);
    second_half_arrives_untouched(&mut lab);
    let stats = lab
        .server()
        .endpoint
        .connection_stats(lab.connection_on_server())
        .unwrap();
    assert_eq!(stats.packets_far, 0);
}
