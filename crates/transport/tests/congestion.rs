//! Congestion control: a bulk sender over a slow link backs off; a thin stream is never held.

mod common;

use common::{one_way, Lab, MS};
use latlab_link::sim::Side;
use latlab_link::{LinkConfig, LossModel};
use latlab_transport::Config;

#[test]
fn a_bulk_sender_over_a_slow_link_backs_off() {
    // 1 Mbit/s, a queue of 30 frames, 20 ms each way; 1000 messages of 1000 bytes at once.
    let slow = LinkConfig {
        rate_bps: Some(1_000_000),
        limit_frames: Some(30),
        ..one_way(20)
    };
    let mut lab = Lab::connect(Config::default(), Config::server(), slow, one_way(20));
    for i in 0..1000u32 {
        lab.send_at(1000 * MS, 1, &[i as u8; 1000]);
    }
    lab.run_until(60_000 * MS);
    assert_eq!(
        lab.server().messages(1).len(),
        1000,
        "all delivered in the end"
    );
    let stats = lab
        .pair
        .a
        .endpoint
        .connection_stats(lab.connection)
        .unwrap();
    let link = lab.pair.network.pipe(Side::A).counters();
    let dropped = link.dropped();
    // Without a window the 1000 packets would meet a 30-frame queue at once and ~970 would be
    // dropped; the window holds the sender back so that few are.
    assert!(stats.window_limited > 0);
    assert!(stats.packets_lost > 0, "the queue overflowed now and then");
    assert!(dropped < 100, "{dropped} packets dropped at the bottleneck");
    // The window ends no larger than what the path holds: 40 ms at 1 Mbit/s (5 000 bytes)
    // plus the 30-frame queue.
    let path_holds = 5_000 + 30 * 1_100;
    assert!(
        stats.congestion_window <= path_holds,
        "{}",
        stats.congestion_window
    );
}

#[test]
fn a_thin_stream_over_a_lossy_link_is_never_held_by_the_window() {
    let lossy = |seed| LinkConfig {
        loss: LossModel::Bernoulli { p: 0.025 },
        seed,
        ..one_way(50)
    };
    let mut lab = Lab::connect(Config::default(), Config::server(), lossy(3), lossy(4));
    for i in 0..2000u64 {
        lab.send_at(1000 * MS + i * 50 * MS, 0, &[i as u8; 100]);
    }
    lab.run_until(110_000 * MS);
    assert_eq!(lab.server().messages(0).len(), 2000);
    let stats = lab
        .pair
        .a
        .endpoint
        .connection_stats(lab.connection)
        .unwrap();
    assert!(stats.packets_lost > 0);
    assert_eq!(
        stats.window_limited, 0,
        "no message ever waited for the window"
    );
}
