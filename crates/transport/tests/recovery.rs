//! Loss recovery policies, in virtual time: one lost packet (or two) on a path of RTT 100 ms
//! (50 ms each way, no jitter), and the exact time the message is delivered under each
//! policy, computed by hand.
//!
//! After 20 round trips of 100 ms the RTT estimate has settled: SRTT = 100 ms, RTTVAR below
//! 1 ms, so RFC 6298's RTO (SRTT + max(1 ms, 4·RTTVAR) ≈ 101 ms) is raised to the policy's
//! minimum RTO. The retransmission timer runs from the send time of the oldest packet in
//! flight.

mod common;

use common::{one_way, Lab, MS};
use latlab_transport::{Config, Recovery};

fn lab(policy: &str) -> Lab {
    let client = Config {
        recovery: policy.parse::<Recovery>().unwrap(),
        ..Config::default()
    };
    Lab::connect(client, Config::server(), one_way(50), one_way(50))
}

/// Messages every 50 ms from t = 1 s on channel 0 (reliable-ordered); the first copy of
/// message 20 (sent at T = 2 s) is lost. Returns the time message 20 was delivered.
fn one_loss_in_a_50ms_stream(policy: &str) -> (Lab, u64) {
    let mut lab = lab(policy);
    lab.lose_copies(0, 20, None, 1);
    for i in 0..40u64 {
        lab.send_at(1000 * MS + i * 50 * MS, 0, &[i as u8; 100]);
    }
    lab.run_until(4000 * MS);
    let server = lab.server();
    let delivered = server.messages(0);
    assert_eq!(delivered.len(), 40, "{policy}: every message arrives");
    assert!(
        delivered.iter().enumerate().all(|(i, m)| m.1 == i as u32),
        "in order"
    );
    for i in 0..20u64 {
        assert_eq!(delivered[i as usize].0, 1000 * MS + i * 50 * MS + 50 * MS);
    }
    let at = server.delivered_at(0, 20).unwrap();
    (lab, at)
}

const T: u64 = 2000 * MS;

#[test]
fn tcp_like_waits_for_the_200ms_minimum_rto_before_the_third_dupack() {
    // Later packets are acked at T+150 (1st dupack), T+200 (2nd): the RTO (oldest in flight
    // sent at T, + 200 ms) fires at T+200 first; the copy arrives 50 ms later.
    let (lab, at) = one_loss_in_a_50ms_stream("tcp-like");
    assert_eq!(at, T + 250 * MS);
    let stats = lab
        .pair
        .a
        .endpoint
        .connection_stats(lab.connection)
        .unwrap();
    assert_eq!((stats.retransmissions, stats.timeouts), (1, 1));
    assert_eq!(stats.srtt_ns, Some(100 * MS));
}

#[test]
fn thin_retransmits_on_the_first_sack_gap() {
    // Message 21 (sent T+50) arrives at T+100 and opens a gap: the server ACKs at once; the
    // ACK reaches the client at T+150, which resends message 20 at once: delivered at T+200.
    let (lab, at) = one_loss_in_a_50ms_stream("thin");
    assert_eq!(at, T + 200 * MS);
    let stats = lab
        .pair
        .a
        .endpoint
        .connection_stats(lab.connection)
        .unwrap();
    assert_eq!((stats.retransmissions, stats.timeouts), (1, 0));
    assert_eq!(stats.spurious_retransmissions, 0);
    // Messages 21..=23 arrived before 20 and waited for it.
    assert_eq!(lab.server().delivered_at(0, 21), Some(T + 200 * MS));
    assert_eq!(lab.server().delivered_at(0, 24), Some(T + 250 * MS));
}

#[test]
fn rack_declares_the_loss_when_a_later_packet_is_acked_past_srtt_plus_a_quarter() {
    // At T+150 message 21's packet is acked; T + SRTT + SRTT/4 = T+125 is past: lost.
    let (lab, at) = one_loss_in_a_50ms_stream("rack");
    assert_eq!(at, T + 200 * MS);
    let stats = lab
        .pair
        .a
        .endpoint
        .connection_stats(lab.connection)
        .unwrap();
    assert_eq!(stats.retransmissions, 1);
}

#[test]
fn redundant_bundling_delivers_with_the_next_message() {
    // Message 21 (sent T+50) carries a copy of the unacknowledged message 20: both arrive
    // at T+100 and nothing is retransmitted.
    let (lab, at) = one_loss_in_a_50ms_stream("thin:rdb=600");
    assert_eq!(at, T + 100 * MS);
    let stats = lab
        .pair
        .a
        .endpoint
        .connection_stats(lab.connection)
        .unwrap();
    assert_eq!(stats.retransmissions, 0);
    assert!(stats.redundant_bytes > 0);
    let rack = one_loss_in_a_50ms_stream("rack:rdb=600").1;
    assert_eq!(rack, T + 100 * MS, "rdb rides on rack too");
}

/// Messages every 500 ms from t = 1 s (no later packet to reveal a loss in time); the first
/// `copies` copies of message 10 (sent at T = 6 s) are lost.
fn sparse_stream(policy: &str, copies: u32) -> u64 {
    let mut lab = lab(policy);
    lab.lose_copies(0, 10, None, copies);
    for i in 0..16u64 {
        lab.send_at(1000 * MS + i * 500 * MS, 0, &[i as u8; 100]);
    }
    lab.run_until(10_000 * MS);
    assert_eq!(lab.server().messages(0).len(), 16);
    lab.server().delivered_at(0, 10).unwrap()
}

const T_SPARSE: u64 = 6000 * MS;

#[test]
fn tcp_like_one_loss_costs_the_minimum_rto() {
    assert_eq!(sparse_stream("tcp-like", 1), T_SPARSE + 200 * MS + 50 * MS);
}

#[test]
fn thin_one_loss_costs_its_own_minimum_rto() {
    assert_eq!(
        sparse_stream("thin:min-rto=120ms", 1),
        T_SPARSE + 120 * MS + 50 * MS
    );
}

#[test]
fn tcp_like_backs_off_exponentially_after_two_losses() {
    // RTO at T+200 (copy lost), doubled: next at T+200+400; arrives 50 ms later.
    assert_eq!(sparse_stream("tcp-like", 2), T_SPARSE + 600 * MS + 50 * MS);
}

#[test]
fn thin_timeouts_stay_linear_after_two_losses() {
    // RTO at T+120 (copy lost), not doubled: next at T+240; arrives 50 ms later.
    assert_eq!(
        sparse_stream("thin:min-rto=120ms", 2),
        T_SPARSE + 240 * MS + 50 * MS
    );
}

#[test]
fn a_lost_ack_makes_a_spurious_retransmission_and_it_is_counted() {
    use std::cell::Cell;
    use std::rc::Rc;

    // Message 10 (sent at T = 6 s) arrives at T+50, but the server's ACK is lost. The RTO
    // (120 ms) resends it at T+120; the copy arrives at T+170 and is a duplicate; the ACK
    // that follows reaches the client at T+220 and names the first copy too: spurious.
    let mut lab = lab("thin:min-rto=120ms");
    let armed = Rc::new(Cell::new(false));
    let trigger = Rc::clone(&armed);
    let server = common::server_addr();
    lab.pair.network.set_drop_filter(move |d| {
        let hit = trigger.get() && d.from == server;
        if hit {
            trigger.set(false);
        }
        hit
    });
    for i in 0..16u64 {
        let at = 1000 * MS + i * 500 * MS;
        lab.send_at(at, 0, &[i as u8; 100]);
        if i == 10 {
            lab.run_until(at + 40 * MS);
            armed.set(true);
        }
    }
    lab.run_until(10_000 * MS);
    assert_eq!(lab.server().delivered_at(0, 10), Some(T_SPARSE + 50 * MS));
    let client = lab
        .pair
        .a
        .endpoint
        .connection_stats(lab.connection)
        .unwrap();
    assert_eq!(
        (client.retransmissions, client.spurious_retransmissions),
        (1, 1)
    );
    let on_server = lab.connection_on_server();
    let server = lab.pair.b.endpoint.connection_stats(on_server).unwrap();
    assert_eq!(server.duplicate_messages, 1);
}
