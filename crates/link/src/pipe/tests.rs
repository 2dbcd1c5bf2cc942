//! The pipe in virtual time: every test steps a clock from one `poll_timeout` to the next.

use super::*;
use crate::{DropCause, JitterDist, LossModel, Reorder};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// A 64-byte frame carrying `id` in its first 4 bytes.
fn frame(id: u32) -> Vec<u8> {
    let mut bytes = vec![0u8; 64];
    bytes[..4].copy_from_slice(&id.to_le_bytes());
    bytes
}

fn id(frame: &[u8]) -> u32 {
    u32::from_le_bytes([frame[0], frame[1], frame[2], frame[3]])
}

fn pipe(config: LinkConfig) -> Pipe {
    Pipe::new(config, 0).expect("test configurations are valid")
}

/// Takes every held frame out, each exactly at its `poll_timeout`: `(departure, frame)`.
fn drain(pipe: &mut Pipe) -> Vec<(u64, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(at) = pipe.poll_timeout() {
        assert!(
            at == 0 || pipe.poll_departure(at - 1).is_none(),
            "nothing leaves before its time"
        );
        let departure = pipe
            .poll_departure(at)
            .expect("a frame is due at poll_timeout");
        assert_eq!(departure.departure_ns(), at);
        out.push((at, departure.frame().to_vec()));
    }
    out
}

fn ids(departures: &[(u64, Vec<u8>)]) -> Vec<u32> {
    departures.iter().map(|(_, f)| id(f)).collect()
}

fn counted_once(pipe: &Pipe) {
    let c = pipe.counters();
    assert_eq!(c.arrived, c.delivered + c.dropped(), "{c:?}");
}

#[test]
fn a_frame_leaves_after_the_delay_and_poll_timeout_says_exactly_when() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: 5 * MS,
        ..LinkConfig::default()
    });
    assert_eq!(pipe.poll_timeout(), None);
    pipe.handle_arrival(100, &frame(1));
    pipe.handle_arrival(300, &frame(2));
    assert_eq!(pipe.poll_timeout(), Some(5 * MS + 100));
    assert!(pipe.poll_departure(5 * MS + 99).is_none());
    assert_eq!(pipe.queued_frames(), 2);
    let first = pipe.poll_departure(5 * MS + 100).unwrap();
    assert_eq!((id(first.frame()), first.departure_ns()), (1, 5 * MS + 100));
    drop(first);
    assert_eq!(pipe.poll_timeout(), Some(5 * MS + 300));
    assert_eq!(pipe.queued_frames(), 1);
    // A late poll still gets the frame, with its intended time.
    let second = pipe.poll_departure(9 * MS).unwrap();
    assert_eq!(second.departure_ns(), 5 * MS + 300);
    assert_eq!(second.frame(), &frame(2)[..]);
    drop(second);
    assert_eq!(pipe.poll_timeout(), None);
    assert_eq!(pipe.counters().delivered, 2);
}

#[test]
fn jitter_stays_within_the_delay_plus_minus_the_jitter_and_keeps_order() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: 10 * MS,
        jitter_ns: 2 * MS,
        jitter_dist: JitterDist::Uniform,
        seed: 7,
        limit_frames: None,
        ..LinkConfig::default()
    });
    let arrivals: Vec<u64> = (0..1000u64).map(|i| i * 100 * US).collect();
    for (i, &at) in arrivals.iter().enumerate() {
        pipe.handle_arrival(at, &frame(i as u32));
    }
    let out = drain(&mut pipe);
    assert_eq!(ids(&out), (0..1000).collect::<Vec<_>>(), "in arrival order");
    let mut spread = (u64::MAX, 0);
    for (departure, bytes) in &out {
        let delay = departure - arrivals[id(bytes) as usize];
        spread = (spread.0.min(delay), spread.1.max(delay));
    }
    // Order is kept by holding a frame behind the one before, never by sending it early.
    assert!(spread.0 >= 8 * MS && spread.1 <= 12 * MS, "{spread:?}");
    assert!(
        spread.1 - spread.0 > 3 * MS,
        "the jitter spreads the delays: {spread:?}"
    );
}

#[test]
fn rate_spaces_frames_by_their_time_on_the_wire() {
    let mut pipe = pipe(LinkConfig {
        rate_bps: Some(1_000_000_000),
        overhead_bytes: 0,
        ..LinkConfig::default()
    });
    for i in 0..4 {
        pipe.handle_arrival(0, &[i as u8; 1500]);
    }
    let times: Vec<u64> = drain(&mut pipe).iter().map(|(at, _)| *at).collect();
    assert_eq!(times, [12 * US, 24 * US, 36 * US, 48 * US]);
}

#[test]
fn lost_frames_never_leave_and_are_counted() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: MS,
        loss: LossModel::Bernoulli { p: 0.25 },
        seed: 3,
        ..LinkConfig::default()
    });
    for i in 0..400 {
        pipe.handle_arrival(i * US, &frame(i as u32));
    }
    let out = drain(&mut pipe);
    let c = *pipe.counters();
    assert_eq!(out.len() as u64, c.delivered);
    assert_eq!(c.delivered + c.dropped_loss, 400);
    assert!((60..140).contains(&c.dropped_loss), "{c:?}");
    counted_once(&pipe);
}

#[test]
fn a_duplicate_is_a_departure_of_its_own_after_the_original() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: MS,
        rate_bps: Some(1_000_000_000),
        overhead_bytes: 0,
        duplicate: 1.0,
        ..LinkConfig::default()
    });
    pipe.handle_arrival(0, &[9; 1500]);
    let out = drain(&mut pipe);
    assert_eq!(out.len(), 2);
    assert_eq!((out[0].0, out[1].0), (MS + 12 * US, MS + 24 * US));
    assert_eq!(out[0].1, out[1].1);
    assert_eq!(pipe.counters().duplicated, 1);
    assert_eq!(pipe.counters().delivered, 1);
}

#[test]
fn corruption_flips_exactly_one_bit_of_the_original_only() {
    let mut pipe = pipe(LinkConfig {
        corrupt: 1.0,
        duplicate: 1.0,
        seed: 11,
        ..LinkConfig::default()
    });
    let sent = frame(0xabcd);
    pipe.handle_arrival(0, &sent);
    let out = drain(&mut pipe);
    let flipped: u32 = out[0]
        .1
        .iter()
        .zip(&sent)
        .map(|(a, b)| (a ^ b).count_ones())
        .sum();
    assert_eq!(flipped, 1, "one bit of the original");
    assert_eq!(out[1].1, sent, "the copy is intact");
    assert_eq!(pipe.counters().corrupted, 1);
}

#[test]
fn a_reordered_frame_leaves_at_once_ahead_of_the_delayed_ones() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: 10 * MS,
        reorder: Some(Reorder {
            probability: 1.0,
            gap: Some(3),
        }),
        ..LinkConfig::default()
    });
    for i in 1..=6u32 {
        pipe.handle_arrival(u64::from(i) * US, &frame(i));
    }
    let out = drain(&mut pipe);
    // Every third frame is sent at its arrival; the rest after 10 ms, in order.
    assert_eq!(ids(&out), [3, 6, 1, 2, 4, 5]);
    assert_eq!((out[0].0, out[1].0), (3 * US, 6 * US));
    assert_eq!(out[2].0, 10 * MS + US);
    assert_eq!(pipe.counters().reordered, 2);
}

#[test]
fn the_limits_bound_what_the_pipe_holds_and_departures_free_room() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: MS,
        limit_frames: Some(3),
        limit_bytes: Some(150),
        ..LinkConfig::default()
    });
    for i in 0..3 {
        pipe.handle_arrival(0, &frame(i));
    }
    // 3 × 64 = 192 bytes would be over 150: the third is refused by bytes.
    assert_eq!(pipe.queued_frames(), 2);
    assert_eq!(pipe.queued_bytes(), 128);
    assert_eq!(pipe.counters().dropped_queue_bytes, 1);
    assert_eq!(
        pipe.handle_arrival(0, &[0; 20]),
        Fate::Deliver {
            departure_ns: MS,
            duplicate_departure_ns: None,
            corrupt_bit: None,
            reordered: false
        }
    );
    assert_eq!(
        pipe.handle_arrival(0, &[0; 20]),
        Fate::Drop(DropCause::QueueFrames)
    );
    assert_eq!(drain(&mut pipe).len(), 3);
    assert_eq!((pipe.queued_frames(), pipe.queued_bytes()), (0, 0));
    pipe.handle_arrival(2 * MS, &frame(9));
    assert_eq!(pipe.queued_frames(), 1);
    counted_once(&pipe);
}

#[test]
fn without_a_frame_limit_the_pipe_still_holds_a_bounded_number() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: MS,
        limit_frames: None,
        ..LinkConfig::default()
    });
    for i in 0..MAX_HELD_WITHOUT_LIMIT + 5 {
        pipe.handle_arrival(0, &[i as u8; 14]);
    }
    assert_eq!(pipe.queued_frames(), MAX_HELD_WITHOUT_LIMIT);
    assert_eq!(pipe.dropped_no_buffer(), 5);
    assert_eq!(drain(&mut pipe).len(), MAX_HELD_WITHOUT_LIMIT);
    assert_eq!(pipe.queued_bytes(), 0);
}

#[test]
fn reconfiguring_keeps_held_frames_and_their_times_and_new_frames_get_the_new_delay() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: 10 * MS,
        ..LinkConfig::default()
    });
    for i in 0..5u32 {
        pipe.handle_arrival(u64::from(i) * MS, &frame(i));
    }
    let now = 5 * MS;
    pipe.handle_config(
        now,
        LinkConfig {
            delay_ns: 30 * MS,
            limit_frames: Some(7),
            ..LinkConfig::default()
        },
    )
    .unwrap();
    assert_eq!(pipe.queued_frames(), 5, "nothing lost");
    for i in 5..10u32 {
        pipe.handle_arrival(u64::from(i) * MS, &frame(i));
    }
    // The new limit (7) applies from now on: 5 held + 2 new, the other 3 refused.
    assert_eq!(pipe.counters().dropped_queue_frames, 3);
    let out = drain(&mut pipe);
    let times: Vec<(u32, u64)> = out.iter().map(|(at, f)| (id(f), *at)).collect();
    assert_eq!(
        times,
        [
            (0, 10 * MS),
            (1, 11 * MS),
            (2, 12 * MS),
            (3, 13 * MS),
            (4, 14 * MS),
            (5, 35 * MS),
            (6, 36 * MS),
        ]
    );
    counted_once(&pipe);
}

#[test]
fn a_shorter_delay_after_reconfiguring_does_not_overtake_held_frames() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: 50 * MS,
        ..LinkConfig::default()
    });
    pipe.handle_arrival(0, &frame(0));
    pipe.handle_config(
        MS,
        LinkConfig {
            delay_ns: MS,
            ..LinkConfig::default()
        },
    )
    .unwrap();
    pipe.handle_arrival(MS, &frame(1));
    pipe.handle_arrival(60 * MS, &frame(2));
    let out = drain(&mut pipe);
    // Frame 1 would be due at 2 ms; order is kept, so it waits for frame 0.
    assert_eq!(ids(&out), [0, 1, 2]);
    assert_eq!(
        out.iter().map(|(at, _)| *at).collect::<Vec<_>>(),
        [50 * MS, 50 * MS, 61 * MS]
    );
}

#[test]
fn a_bad_configuration_is_refused_and_changes_nothing() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: MS,
        ..LinkConfig::default()
    });
    pipe.handle_arrival(0, &frame(0));
    let error = pipe
        .handle_config(
            0,
            LinkConfig {
                duplicate: 2.0,
                ..LinkConfig::default()
            },
        )
        .unwrap_err();
    assert_eq!(error.field(), Some("duplicate"));
    assert_eq!(pipe.config().delay_ns, MS);
    assert_eq!(drain(&mut pipe).len(), 1);
}

/// Polls an empty (or not yet due) pipe at the ends of the two windows after `from`: the
/// first still remembers what was held before `from`, the second does not.
fn pass_two_windows(pipe: &mut Pipe, from: u64) {
    assert!(pipe.poll_departure(from + MEMORY_WINDOW_NS).is_none());
    assert!(pipe.poll_departure(from + 2 * MEMORY_WINDOW_NS).is_none());
}

#[test]
fn buffers_are_reused_and_a_drained_pipe_gives_back_its_peak_memory() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: MS,
        limit_frames: None,
        ..LinkConfig::default()
    });
    for round in 0..3u64 {
        for i in 0..10 {
            pipe.handle_arrival(round * 10 * MS, &frame(i));
        }
        assert_eq!(drain(&mut pipe).len(), 10);
        // The ten buffers came back and the next round reuses them.
        assert_eq!(pipe.idle_buffers(), 10);
    }
    for i in 0..(RETAINED_BUFFERS as u32 * 4) {
        pipe.handle_arrival(100 * MS, &frame(i));
    }
    drain(&mut pipe);
    assert_eq!(pipe.idle_buffers(), RETAINED_BUFFERS * 4);
    // The window in which the burst was held keeps its buffers; the next, which held none,
    // frees what is above the retained number.
    assert!(pipe.poll_departure(MEMORY_WINDOW_NS + 100 * MS).is_none());
    assert_eq!(pipe.idle_buffers(), RETAINED_BUFFERS * 4);
    assert!(pipe
        .poll_departure(2 * MEMORY_WINDOW_NS + 200 * MS)
        .is_none());
    assert_eq!(pipe.idle_buffers(), RETAINED_BUFFERS);
    assert_eq!(pipe.releases(), 1);
}

/// Issue 25, part 4: the emulator stayed at its peak memory after a burst while frames kept
/// coming (RSS 23 MB idle, 84 MB with ~15k 1.4 KB frames queued, 83 MB once they had left).
/// A steady stream keeps the queue from ever draining; the pipe still frees what the burst
/// left within two windows of its last frame leaving.
#[test]
fn memory_follows_the_queue_down_after_a_burst_while_frames_keep_coming() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: 100 * MS,
        limit_frames: Some(100_000),
        ..LinkConfig::default()
    });
    let big = |i: u32| {
        let mut f = frame(i);
        f.resize(1400, 0);
        f
    };
    let mut steady_bytes = 0;
    let mut peak = 0;
    let mut id = 0;
    for t in 0..6_000u64 {
        let now = t * MS;
        while let Some(departure) = pipe.poll_departure(now) {
            assert!(departure.departure_ns() <= now);
        }
        if t == 999 {
            steady_bytes = pipe.held_bytes();
        }
        // One frame a millisecond, and a burst of 20,000 at 1 s.
        let burst = if t == 1_000 { 20_000 } else { 1 };
        for _ in 0..burst {
            pipe.handle_arrival(now, &big(id));
            id += 1;
        }
        peak = peak.max(pipe.held_bytes());
        if t > 0 {
            assert!(pipe.queued_frames() > 0, "the queue drained at {t} ms");
        }
    }
    // 100 frames held at any time, 20,100 at the peak (2 KiB buffers: over 40 MB).
    assert!(peak > 40_000_000, "{peak} bytes at the peak");
    let after = pipe.held_bytes();
    // The burst left at 1.1 s; by 6 s the pipe keeps what 100 frames need plus the retained
    // idle buffers, and an index no longer than it needs.
    let bound = (100 + 2 + RETAINED_BUFFERS) * (2048 + 2 * 24) + 64 * 1024;
    assert!(
        after <= bound,
        "{after} bytes held after the burst (steady {steady_bytes}, peak {peak}, bound {bound})"
    );
    assert!(pipe.releases() >= 1);
    assert_eq!(pipe.counters().dropped(), 0);
}

#[test]
fn the_same_seed_gives_the_same_departures_bit_for_bit() {
    let config = LinkConfig {
        delay_ns: 5 * MS,
        jitter_ns: MS,
        loss: LossModel::Bernoulli { p: 0.1 },
        duplicate: 0.1,
        corrupt: 0.1,
        reorder: Some(Reorder {
            probability: 0.1,
            gap: None,
        }),
        seed: 5,
        ..LinkConfig::default()
    };
    let run = |config: LinkConfig| {
        let mut pipe = Pipe::new(config, 0).unwrap();
        for i in 0..500u32 {
            pipe.handle_arrival(u64::from(i) * 50 * US, &frame(i));
        }
        drain(&mut pipe)
    };
    assert_eq!(run(config.clone()), run(config));
}

/// The delay queue keeps frames in order with a FIFO and passes reordered ones through a heap:
/// whatever the mix, frames leave by departure time, then arrival, each at the time the link
/// gave it, while frames keep arriving and leaving.
#[test]
fn frames_leave_by_departure_then_arrival_whatever_passes_whom() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: 2 * MS,
        jitter_ns: MS,
        duplicate: 0.05,
        reorder: Some(Reorder {
            probability: 0.2,
            gap: None,
        }),
        limit_frames: Some(100_000),
        seed: 11,
        ..LinkConfig::default()
    });
    // (departure, arrival order, id) of every copy the link delivered, as it said.
    let mut expected = Vec::new();
    let mut out = Vec::new();
    for i in 0..4_000u32 {
        let now = u64::from(i) * 10 * US;
        // What is due by now leaves first, as in the engine's loop.
        while let Some(departure) = pipe.poll_departure(now) {
            out.push((departure.departure_ns(), id(departure.frame())));
        }
        if let Fate::Deliver {
            departure_ns,
            duplicate_departure_ns,
            ..
        } = pipe.handle_arrival(now, &frame(i))
        {
            expected.push((departure_ns, expected.len(), i));
            if let Some(d) = duplicate_departure_ns {
                expected.push((d, expected.len(), i));
            }
        }
    }
    out.extend(drain(&mut pipe).iter().map(|(at, f)| (*at, id(f))));
    expected.sort_unstable();
    let expected: Vec<(u64, u32)> = expected.into_iter().map(|(at, _, i)| (at, i)).collect();
    assert_eq!(out, expected);
    assert!(pipe.counters().reordered > 500 && pipe.counters().duplicated > 100);
}

/// Issue 10, item 8: with `--limit 200000` the emulator held a full-size buffer per queued
/// frame (436 MB of RSS) and kept it after the queue drained.
#[test]
fn memory_follows_the_bytes_queued_not_the_limit_and_is_given_back_after_the_drain() {
    const FRAMES: u32 = 200_000;
    let mut pipe = pipe(LinkConfig {
        delay_ns: MS,
        limit_frames: Some(FRAMES as usize),
        ..LinkConfig::default()
    });
    for i in 0..FRAMES {
        pipe.handle_arrival(0, &frame(i));
    }
    assert_eq!(pipe.queued_frames(), FRAMES as usize);
    assert_eq!(pipe.queued_bytes(), FRAMES as usize * 64);
    // A 64-byte buffer, its 24-byte handle and a 24-byte queue entry per frame, the vectors
    // rounded up to a power of two: under 160 bytes a frame (32 MB), where a 2 KiB buffer a
    // frame took 400 MB.
    let peak = pipe.held_bytes();
    assert!(
        peak < FRAMES as usize * 160,
        "{peak} bytes for 12.8 MB of frames"
    );

    let departures = drain(&mut pipe);
    assert_eq!(ids(&departures), (0..FRAMES).collect::<Vec<_>>());
    pass_two_windows(&mut pipe, 2 * MS);
    assert_eq!(pipe.idle_buffers(), RETAINED_BUFFERS);
    // The retained buffers, their list and a queue of as many entries: about 32 KiB.
    let after = pipe.held_bytes();
    assert!(after < 64 * 1024, "{after} bytes held after the drain");
}

#[test]
fn a_buffer_is_sized_to_its_frame_not_to_the_largest_frame() {
    let mut pipe = pipe(LinkConfig {
        delay_ns: MS,
        ..LinkConfig::default()
    });
    let empty = pipe.held_bytes();
    pipe.handle_arrival(0, &[1; 1500]);
    let one_large = pipe.held_bytes() - empty;
    for i in 0..100 {
        pipe.handle_arrival(0, &frame(i));
    }
    let per_small = (pipe.held_bytes() - empty - one_large) / 100;
    assert!(
        per_small <= 64 + 2 * 48,
        "{per_small} bytes per 64-byte frame"
    );
    let departures = drain(&mut pipe);
    assert_eq!(departures[0].1, vec![1; 1500]);
    assert_eq!(ids(&departures[1..]), (0..100).collect::<Vec<_>>());
}
