//! Channel semantics over a 50 ms path (RTT 100 ms), policy `thin`, default channels:
//! 0 reliable-ordered, 1 reliable-unordered, 2 unreliable, 3 sequenced, 4 deadline (100 ms).

mod common;

use common::{one_way, Lab, MS};
use latlab_link::sim::Side;
use latlab_link::{LinkConfig, LossModel, Reorder};
use latlab_transport::{ChannelConfig, Config, Event};

fn lab() -> Lab {
    Lab::connect(
        Config::default(),
        Config::server(),
        one_way(50),
        one_way(50),
    )
}

/// Messages 0..10 every 50 ms from t = 1 s on `channel`; the first copy of message 5 (sent at
/// 1.25 s) is lost.
fn stream_with_loss_of_5(channel: u8) -> Lab {
    let mut lab = lab();
    lab.lose_copies(channel, 5, None, 1);
    for i in 0..10u64 {
        lab.send_at(1000 * MS + i * 50 * MS, channel, &[i as u8]);
    }
    lab.run_until(3000 * MS);
    lab
}

#[test]
fn reliable_ordered_holds_later_messages_until_the_lost_one_arrives() {
    let lab = stream_with_loss_of_5(0);
    let got = lab.server().messages(0);
    let order: Vec<u32> = got.iter().map(|m| m.1).collect();
    assert_eq!(order, (0..10).collect::<Vec<_>>());
    // 5 is resent on 6's SACK gap (ACK back at 1.40 s) and arrives at 1.45 s, with 6 and 7.
    assert_eq!(lab.server().delivered_at(0, 5), Some(1450 * MS));
    assert_eq!(lab.server().delivered_at(0, 6), Some(1450 * MS));
    assert_eq!(lab.server().delivered_at(0, 8), Some(1450 * MS));
}

#[test]
fn reliable_unordered_delivers_each_message_when_it_arrives() {
    let lab = stream_with_loss_of_5(1);
    let got = lab.server().messages(1);
    let order: Vec<u32> = got.iter().map(|m| m.1).collect();
    assert_eq!(order, vec![0, 1, 2, 3, 4, 6, 7, 5, 8, 9]);
    assert_eq!(lab.server().delivered_at(1, 6), Some(1350 * MS));
    assert_eq!(lab.server().delivered_at(1, 5), Some(1450 * MS));
}

#[test]
fn unreliable_messages_are_sent_once_and_may_be_lost() {
    let lab = stream_with_loss_of_5(2);
    let order: Vec<u32> = lab.server().messages(2).iter().map(|m| m.1).collect();
    assert_eq!(order, vec![0, 1, 2, 3, 4, 6, 7, 8, 9]);
    let stats = lab
        .pair
        .a
        .endpoint
        .connection_stats(lab.connection)
        .unwrap();
    assert_eq!(stats.retransmissions, 0);
}

#[test]
fn sequenced_delivers_only_messages_newer_than_the_last_one() {
    // Every 5th datagram from the client overtakes the 50 ms queue (NetEm `reorder 100%
    // gap 5`), so a newer message arrives before older ones still on their way.
    let mut lab = lab();
    let reordering = LinkConfig {
        reorder: Some(Reorder {
            probability: 1.0,
            gap: Some(5),
        }),
        ..one_way(50)
    };
    lab.pair.network.handle_config(Side::A, reordering).unwrap();
    for i in 0..200u64 {
        lab.send_at(1000 * MS + i * 5 * MS, 3, &[i as u8]);
    }
    lab.run_until(3000 * MS);
    let order: Vec<u32> = lab.server().messages(3).iter().map(|m| m.1).collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "strictly newer each time"
    );
    let stats = lab
        .pair
        .b
        .endpoint
        .connection_stats(lab.connection_on_server())
        .unwrap();
    assert!(stats.sequenced_dropped > 0, "older messages arrived late");
    assert_eq!(
        order.len() as u64 + stats.sequenced_dropped,
        200,
        "nothing lost on this link"
    );
}

#[test]
fn deadline_messages_are_dropped_and_reported_on_both_sides() {
    // A 100 ms deadline is closer than 1.5 RTT, so each message also goes out twice, 5 ms
    // apart. Every copy of message 5 (sent at 1.25 s) is lost. At its deadline (1.35 s) the
    // copies are still in flight as far as the sender knows; message 6's ACK shows them lost
    // at 1.40 s: the sender drops it then and tells the receiver, which hears of it at 1.45 s.
    let mut lab = lab();
    lab.lose_copies(4, 5, None, u32::MAX);
    for i in 0..10u64 {
        lab.send_at(1000 * MS + i * 50 * MS, 4, &[i as u8]);
    }
    lab.run_until(3000 * MS);
    assert_eq!(lab.client().expired(), vec![(1400 * MS, 4, 5)]);
    assert_eq!(lab.server().expired(), vec![(1450 * MS, 4, 5)]);
    let order: Vec<u32> = lab.server().messages(4).iter().map(|m| m.1).collect();
    assert_eq!(order, vec![0, 1, 2, 3, 4, 6, 7, 8, 9]);
}

#[test]
fn a_lost_deadline_message_still_arrives_within_its_deadline() {
    // Message 5 (sent at 1.25 s, first copy lost) is resent on 6's SACK gap at 1.40 s and
    // arrives at 1.45 s, at its 200 ms deadline; the sender, whose copy is in flight then,
    // waits for the ACK (1.50 s) instead of declaring it expired.
    let mut config = Config::default();
    config.channels[4] = ChannelConfig::deadline(200 * MS);
    let mut server = Config::server();
    server.channels[4] = ChannelConfig::deadline(200 * MS);
    let mut lab = Lab::connect(config, server, one_way(50), one_way(50));
    lab.lose_copies(4, 5, None, 1);
    for i in 0..10u64 {
        lab.send_at(1000 * MS + i * 50 * MS, 4, &[i as u8]);
    }
    lab.run_until(3000 * MS);
    assert!(lab.client().expired().is_empty());
    assert_eq!(lab.server().delivered_at(4, 5), Some(1450 * MS));
}

#[test]
fn urgent_messages_go_out_twice_and_survive_one_loss_without_waiting() {
    let mut lab = lab();
    lab.lose_copies(0, 0, None, 1);
    lab.run_until(1000 * MS);
    let connection = lab.connection;
    lab.pair
        .a
        .endpoint
        .send_urgent(1000 * MS, connection, 0, b"fire!")
        .unwrap();
    lab.run_until(2000 * MS);
    // The second copy leaves 5 ms after the first (default spacing) and arrives 50 ms later.
    assert_eq!(lab.server().delivered_at(0, 0), Some(1055 * MS));
    let stats = lab.pair.a.endpoint.connection_stats(connection).unwrap();
    assert_eq!(stats.duplicated_messages, 1);
}

#[test]
fn a_message_over_the_mtu_is_fragmented_and_survives_losing_one_fragment() {
    let mut lab = lab();
    lab.lose_copies(0, 0, Some(2), 1);
    let data: Vec<u8> = (0..5000u32).map(|i| (i * 7) as u8).collect();
    lab.send_at(1000 * MS, 0, &data);
    lab.run_until(3000 * MS);
    let got = lab.server().messages(0);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].2, data);
    let stats = lab
        .pair
        .a
        .endpoint
        .connection_stats(lab.connection)
        .unwrap();
    assert_eq!(
        stats.retransmissions, 1,
        "only the lost fragment is sent again"
    );
    assert!(stats.packets_sent > 5);
}

#[test]
fn ten_thousand_messages_over_2_5_percent_loss_all_arrive_on_reliable_channels() {
    let lossy = |seed| LinkConfig {
        loss: LossModel::Bernoulli { p: 0.025 },
        seed,
        ..one_way(50)
    };
    let mut lab = Lab::connect(Config::default(), Config::server(), lossy(11), lossy(12));
    for i in 0..10_000u64 {
        let channel = (i % 2) as u8; // ordered and unordered
        lab.send_at(1000 * MS + i * 10 * MS, channel, &(i as u32).to_be_bytes());
    }
    lab.run_until(1000 * MS + 10_000 * 10 * MS + 10_000 * MS);
    let ordered = lab.server().messages(0);
    assert_eq!(ordered.len(), 5000);
    assert!(ordered.iter().enumerate().all(|(i, m)| m.1 == i as u32));
    let mut unordered: Vec<u32> = lab.server().messages(1).iter().map(|m| m.1).collect();
    unordered.sort_unstable();
    assert_eq!(unordered, (0..5000).collect::<Vec<_>>());
    let stats = lab
        .pair
        .a
        .endpoint
        .connection_stats(lab.connection)
        .unwrap();
    assert!(stats.retransmissions > 0);
}

#[test]
fn closing_tells_the_peer() {
    let mut lab = lab();
    lab.run_until(1000 * MS);
    let connection = lab.connection;
    lab.pair.a.endpoint.close(1000 * MS, connection, 42);
    lab.run_until(2000 * MS);
    let closed: Vec<_> = lab
        .server()
        .events
        .iter()
        .filter(|(_, e)| matches!(e, Event::Closed { .. }))
        .collect();
    assert_eq!(closed.len(), 1);
    assert_eq!(closed[0].0, 1050 * MS);
    assert!(matches!(
        closed[0].1,
        Event::Closed {
            reason: latlab_transport::CloseReason::Remote(42),
            ..
        }
    ));
}

#[test]
fn reassembly_stays_within_its_memory_bound_and_refused_fragments_come_again() {
    // The server holds at most 4 000 bytes of incomplete messages. Message 0 (3 000 bytes, 3
    // fragments) loses its middle fragment once, so it sits incomplete while message 1's
    // fragments arrive: the second of those would pass the bound, so its packet is refused and
    // not acknowledged. Both messages arrive whole in the end.
    let server = Config {
        max_reassembly_bytes: 4_000,
        ..Config::server()
    };
    let mut lab = Lab::connect(Config::default(), server, one_way(50), one_way(50));
    lab.lose_copies(1, 0, Some(1), 1);
    let first: Vec<u8> = (0..3000u32).map(|i| i as u8).collect();
    let second: Vec<u8> = (0..3000u32).map(|i| (i / 3) as u8).collect();
    lab.send_at(1000 * MS, 1, &first);
    lab.send_at(1000 * MS, 1, &second);
    lab.run_until(5000 * MS);
    let mut got = lab.server().messages(1);
    got.sort_by_key(|m| m.1);
    assert_eq!(got.len(), 2);
    assert_eq!((&got[0].2, &got[1].2), (&first, &second));
    let on_server = lab.connection_on_server();
    let stats = lab.pair.b.endpoint.connection_stats(on_server).unwrap();
    assert!(stats.reassembly_refused > 0, "the bound was reached");
}
