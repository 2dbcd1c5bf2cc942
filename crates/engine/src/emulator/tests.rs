//! The run-to-completion loop over frame ports in memory.

use super::*;
use latlab_io::port::TimestampSource;
use latlab_link::LinkConfig;

/// A frame port in memory: frames handed to the emulator once, frames it sends kept, and
/// an MTU (with the Ethernet header) that longer frames cannot pass.
struct MemoryPort {
    incoming: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
    sent: Vec<Vec<u8>>,
    mtu_limit: usize,
}

impl MemoryPort {
    fn new(incoming: &[usize], mtu_limit: usize) -> MemoryPort {
        MemoryPort {
            incoming: std::sync::Arc::new(std::sync::Mutex::new(
                incoming.iter().map(|&len| vec![0xab; len]).collect(),
            )),
            sent: Vec::new(),
            mtu_limit,
        }
    }
}

impl Port for MemoryPort {
    fn recv_frames(&mut self, f: &mut dyn FnMut(&[u8], u64)) -> io::Result<usize> {
        let frames = std::mem::take(&mut *self.incoming.lock().unwrap());
        for frame in &frames {
            f(frame, now_ns());
        }
        Ok(frames.len())
    }

    fn try_queue_frame(&mut self, frame: &[u8]) -> io::Result<FrameQueued> {
        Ok(if frame.len() > self.mtu_limit {
            FrameQueued::TooLong
        } else if frame.len() < 14 {
            FrameQueued::TooShort
        } else {
            self.sent.push(frame.to_vec());
            FrameQueued::Queued
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }

    fn kernel_drops(&self) -> u64 {
        0
    }

    fn wait_either(_: &mut Self, _: &mut Self, timeout: Duration) -> io::Result<()> {
        std::thread::sleep(timeout.min(Duration::from_millis(1)));
        Ok(())
    }

    fn wait_readable(&mut self, _: Option<Duration>) -> io::Result<bool> {
        Ok(false)
    }

    fn timestamp_source(&self) -> TimestampSource {
        TimestampSource::UserSpace
    }
}

/// How long to wait for the engine to get where a test takes it (normally milliseconds): long,
/// because the wait only runs out when something is broken, and a loaded guest can stall.
const PATIENCE: Duration = Duration::from_secs(30);

/// Raises its stop when dropped: a watcher thread whose check panicked still ends the run.
struct RaiseOnDrop<'a>(&'a Stop);

impl Drop for RaiseOnDrop<'_> {
    fn drop(&mut self) {
        self.0.raise();
    }
}

/// Polls the engine's snapshots until `done` holds for its A→B direction (or [`PATIENCE`]
/// passed: the test's checks then say what is missing), then raises `stop`.
fn stop_once(live: &EmulatorLive, stop: &Stop, done: impl Fn(&DirectionSnapshot) -> bool) {
    let _stop = RaiseOnDrop(stop);
    let deadline = std::time::Instant::now() + PATIENCE;
    while std::time::Instant::now() < deadline {
        let snapshot = live.control.snapshot(PATIENCE);
        if snapshot.is_some_and(|s| done(&s.a_to_b)) {
            break;
        }
    }
}

/// Whether all of `n` frames arrived and every one is accounted for (none held any more).
fn settled(n: u64) -> impl Fn(&DirectionSnapshot) -> bool {
    move |d| d.report.arrived == n && d.queued_frames == 0 && d.report.unaccounted() == 0
}

/// Bridges `a` and `b` with `a_to_b` (and no impairment back) until `done` holds for A→B.
fn bridge(
    a: &mut MemoryPort,
    b: &mut MemoryPort,
    a_to_b: impl Into<Flows>,
    done: impl Fn(&DirectionSnapshot) -> bool + Send,
) -> EmulatorReport {
    bridge_live(a, b, a_to_b, done, &EmulatorLive::default())
}

/// [`bridge`], with the live counters and controls of `live` (a tap set on it, say).
fn bridge_live(
    a: &mut MemoryPort,
    b: &mut MemoryPort,
    a_to_b: impl Into<Flows>,
    done: impl Fn(&DirectionSnapshot) -> bool + Send,
    live: &EmulatorLive,
) -> EmulatorReport {
    let stop = Stop::new();
    std::thread::scope(|s| {
        s.spawn(|| stop_once(live, &stop, done));
        let no_impairment = LinkConfig::default();
        run(
            a,
            b,
            a_to_b,
            no_impairment,
            9000,
            PollMode::Block,
            &stop,
            live,
        )
    })
    .unwrap()
}

#[test]
fn a_frame_longer_than_the_far_sides_mtu_is_counted_and_the_emulator_goes_on() {
    let mut a = MemoryPort::new(&[100, 1600, 100, 8], 1514);
    let mut b = MemoryPort::new(&[], 1514);
    // A runt goes through the link (which keeps runts here) to a port that cannot send it.
    let keep_runts = LinkConfig {
        drop_runts: false,
        ..LinkConfig::default()
    };
    let report = bridge(&mut a, &mut b, keep_runts, settled(4));
    let lens: Vec<usize> = b.sent.iter().map(Vec::len).collect();
    assert_eq!(lens, [100, 100]);
    let d = &report.a_to_b;
    assert_eq!(
        (d.arrived, d.sent, d.tx_too_long, d.tx_too_short),
        (4, 2, 1, 1)
    );
    assert_eq!(d.unaccounted(), 0);
}

#[test]
fn a_queue_disciplines_drops_are_accounted_for_and_its_sojourn_times_reported() {
    // 400 frames at once into FQ-CoDel at 10 Mbit/s with room for 50: the fattest (only)
    // queue's head makes room for each arrival past the 50th, and the 50 left take 41 ms.
    let mut a = MemoryPort::new(&[1000; 400], 1514);
    let mut b = MemoryPort::new(&[], 1514);
    let fq = LinkConfig {
        rate_bps: Some(10_000_000),
        limit_frames: Some(50),
        aqm: latlab_link::Aqm {
            discipline: latlab_link::Discipline::FqCodel,
            ..latlab_link::Aqm::default()
        },
        ..LinkConfig::default()
    };
    let report = bridge(&mut a, &mut b, fq, settled(400));
    let d = &report.a_to_b;
    assert_eq!((d.arrived, d.link.aqm_overflow, d.sent), (400, 350, 50));
    assert_eq!(d.link.dropped(), 0, "no arrival dropped");
    assert_eq!(d.unaccounted(), 0);
    assert_eq!(d.sojourn.as_ref().map(|h| h.len()), Some(50));
    assert!(report.b_to_a.sojourn.is_none(), "tail drop: none");
}

#[test]
fn frames_still_held_at_exit_are_reported_so_every_frame_is_accounted_for() {
    let mut a = MemoryPort::new(&[100; 5], 1514);
    let mut b = MemoryPort::new(&[], 1514);
    let held = LinkConfig {
        delay_ns: 10_000_000_000,
        duplicate: 1.0,
        ..LinkConfig::default()
    };
    let report = bridge(&mut a, &mut b, held, |d| {
        d.report.arrived == 5 && d.queued_frames == 10
    });
    let d = &report.a_to_b;
    assert!(b.sent.is_empty());
    assert_eq!((d.arrived, d.link.duplicated, d.sent), (5, 5, 0));
    assert_eq!(d.queued_at_exit, 10, "every frame and its copy still held");
    assert_eq!(d.unaccounted(), 0);
    assert_eq!(report.b_to_a.unaccounted(), 0);
}

/// A frame of 100 bytes carrying `seq` in its first byte.
fn numbered(seq: u8) -> Vec<u8> {
    let mut frame = vec![0xab; 100];
    frame[0] = seq;
    frame
}

/// A 64-byte IPv4/UDP frame to port `dport`, carrying `seq` in its last byte.
fn udp_to(dport: u16, seq: u8) -> Vec<u8> {
    let mut frame = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
    frame.extend([0x45, 0, 0, 50, 0, 0, 0x40, 0, 64, 17, 0, 0]);
    frame.extend([10, 0, 0, 1, 10, 0, 0, 2, 0x9c, 0x40]);
    frame.extend(dport.to_be_bytes());
    frame.extend([0, 30, 0, 0]);
    frame.resize(64, 0);
    frame[63] = seq;
    frame
}

#[test]
fn a_rule_drops_all_udp_to_one_port_while_other_frames_pass() {
    let mut a = MemoryPort::new(&[], 1514);
    let mut b = MemoryPort::new(&[], 1514);
    // Interleaved: to the game port, to port 7, and a frame that is not IP.
    let frames: Vec<Vec<u8>> = (0..30u8)
        .map(|i| match i % 3 {
            0 => udp_to(27015, i),
            1 => udp_to(7, i),
            _ => numbered(i),
        })
        .collect();
    a.incoming.lock().unwrap().extend(frames.iter().cloned());
    let lose_the_game = latlab_link::FlowRule {
        matcher: latlab_link::FlowMatch::parse("--flow", "proto=udp dport=27015").unwrap(),
        config: LinkConfig {
            loss: latlab_link::LossModel::Bernoulli { p: 1.0 },
            ..LinkConfig::default()
        },
    };
    let flows = Flows {
        default: LinkConfig::default(),
        rules: vec![lose_the_game],
    };
    let report = bridge(&mut a, &mut b, flows, settled(30));
    let through: Vec<Vec<u8>> = frames
        .iter()
        .enumerate()
        .filter(|(i, _)| i % 3 != 0)
        .map(|(_, f)| f.clone())
        .collect();
    assert_eq!(b.sent, through, "the others pass, in order");
    let d = &report.a_to_b;
    assert_eq!((d.arrived, d.sent, d.link.dropped_loss), (30, 20, 10));
    let [game, rest] = &d.flows[..] else {
        panic!("one rule and the default: {:?}", d.flows)
    };
    assert_eq!(game.matcher.as_deref(), Some("proto=udp dport=27015"));
    assert_eq!(
        (game.link.arrived, game.link.dropped_loss, game.sent),
        (10, 10, 0)
    );
    assert_eq!(rest.matcher, None);
    assert_eq!(
        (rest.link.arrived, rest.link.dropped(), rest.sent),
        (20, 0, 20)
    );
    let mut link = LinkCounters::default();
    for flow in &d.flows {
        assert_eq!(flow.unaccounted(), 0, "{flow:?}");
        link += flow.link;
    }
    assert_eq!(link, d.link, "the flows add up to the direction");
    assert_eq!(game.sent + rest.sent, d.sent);
    assert_eq!(d.unaccounted(), 0);
    assert!(report.b_to_a.flows.is_empty(), "no rules, no flows");
}

#[test]
fn a_change_while_running_keeps_held_frames_and_their_order_and_applies_to_new_ones() {
    let mut a = MemoryPort::new(&[], 1514);
    let mut b = MemoryPort::new(&[], 1514);
    let feed = a.incoming.clone();
    feed.lock().unwrap().extend((0..10).map(numbered));
    // Held long enough that the change (asked for 50 ms in) comes while they are held, however
    // late a loaded machine runs it.
    let slow = LinkConfig {
        delay_ns: 2_000_000_000,
        ..LinkConfig::default()
    };
    let fast = LinkConfig {
        delay_ns: 1_000_000,
        ..LinkConfig::default()
    };
    let stop = Stop::new();
    let live = EmulatorLive::default();
    let report = std::thread::scope(|s| {
        let (live, stop, fast) = (&live, &stop, fast.clone());
        s.spawn(move || {
            let _stop = RaiseOnDrop(stop);
            std::thread::sleep(Duration::from_millis(50));
            let ticket = live.control.submit(LinkDirection::AToB, fast);
            let applied = live.control.wait_applied(ticket, PATIENCE);
            let snapshot = live.control.snapshot(Duration::from_millis(100));
            feed.lock().unwrap().extend((10..20).map(numbered));
            // The held ten leave at their time, the new ten right behind them.
            stop_once(live, stop, |d| d.report.sent == 20);
            assert!(applied);
            let held = snapshot.map(|s| s.a_to_b.queued_frames);
            assert_eq!(held, Some(10), "held across the change");
        });
        let none = LinkConfig::default();
        run(
            &mut a,
            &mut b,
            slow,
            none,
            9000,
            PollMode::Block,
            stop,
            live,
        )
        .unwrap()
    });
    let order: Vec<u8> = b.sent.iter().map(|f| f[0]).collect();
    assert_eq!(
        order,
        (0..20).collect::<Vec<u8>>(),
        "none lost, none reordered"
    );
    let d = &report.a_to_b;
    assert_eq!((d.arrived, d.sent, d.unaccounted()), (20, 20, 0));
    assert_eq!(d.bytes.arrived, 2000);
    assert_eq!(d.bytes.sent, 2000);
    assert_eq!(report.changes.len(), 1);
    let change = &report.changes[0];
    assert_eq!(change.direction, LinkDirection::AToB);
    assert_eq!(change.config, fast);
    assert!(change.refused.is_none());
    assert!(
        (40_000_000..2_000_000_000).contains(&change.at_ns),
        "{}",
        change.at_ns
    );
}

#[test]
fn snapshots_are_published_on_request_and_at_exit() {
    let mut a = MemoryPort::new(&[100; 5], 1514);
    let mut b = MemoryPort::new(&[], 1514);
    let stop = Stop::new();
    let live = EmulatorLive::default();
    std::thread::scope(|s| {
        let (live, stop) = (&live, &stop);
        s.spawn(move || {
            let _stop = RaiseOnDrop(stop);
            // A snapshot asked for once the engine has taken and sent the five.
            let deadline = std::time::Instant::now() + PATIENCE;
            let first = loop {
                let first = live.control.snapshot(Duration::from_millis(100));
                if first.as_ref().is_some_and(|f| f.a_to_b.report.sent == 5)
                    || std::time::Instant::now() >= deadline
                {
                    break first.unwrap();
                }
            };
            assert_eq!(first.a_to_b.report.arrived, 5);
            assert_eq!(first.a_to_b.report.sent, 5);
            // A second request within 50 ms gets no fresher copy than the engine allows.
            let second = live.control.snapshot(Duration::from_millis(200)).unwrap();
            assert!(second.at_ns >= first.at_ns + PUBLISH_EVERY_NS || second.at_ns == first.at_ns);
        });
        let none = LinkConfig::default();
        run(
            &mut a,
            &mut b,
            none.clone(),
            none,
            9000,
            PollMode::Block,
            stop,
            live,
        )
        .unwrap()
    });
    let last = live.control.snapshot(Duration::ZERO).unwrap();
    assert_eq!(last.a_to_b.report.sent, 5);
    assert_eq!(last.a_to_b.report.bytes.sent, 500);
}

#[test]
fn the_tap_sees_every_frame_sent_with_its_arrival_and_departure_times() {
    let mut a = MemoryPort::new(&[], 1514);
    let mut b = MemoryPort::new(&[], 1514);
    a.incoming.lock().unwrap().extend((0..10).map(numbered));
    let (ring, mut records) = tap_ring(64);
    let live = EmulatorLive::default();
    live.control.set_tap(ring);
    let twice = LinkConfig {
        delay_ns: 2_000_000,
        duplicate: 1.0,
        ..LinkConfig::default()
    };
    let report = bridge_live(&mut a, &mut b, twice, settled(10), &live);
    assert_eq!((report.a_to_b.sent, report.tap_full), (20, 0));
    let mut seen = Vec::new();
    while let Ok(r) = records.pop() {
        assert_eq!(r.direction, LinkDirection::AToB);
        assert_eq!((r.len, r.frame().len()), (100, 100));
        assert!(r.intended_ns >= r.arrival_ns + 2_000_000, "{r:?}");
        assert!(r.departure_ns >= r.intended_ns);
        seen.push((r.data[0], r.arrival_ns));
    }
    assert_eq!(seen.len(), 20);
    // Each frame and its copy carry the same arrival stamp.
    for seq in 0..10u8 {
        let stamps: Vec<u64> = seen.iter().filter(|s| s.0 == seq).map(|s| s.1).collect();
        assert_eq!(stamps.len(), 2);
        assert_eq!(stamps[0], stamps[1]);
    }
}

#[test]
fn a_full_tap_ring_is_counted_and_the_bridge_goes_on() {
    let mut a = MemoryPort::new(&[100; 40], 1514);
    let mut b = MemoryPort::new(&[], 1514);
    let (ring, _records) = tap_ring(16);
    let live = EmulatorLive::default();
    live.control.set_tap(ring);
    let report = bridge_live(&mut a, &mut b, LinkConfig::default(), settled(40), &live);
    assert_eq!((report.a_to_b.sent, report.tap_full), (40, 24));
}

/// Bridges 100 UDP frames to port 7000 (seq in the last byte) under 30% loss with `seed`,
/// recording every fate, and replaying `replay` if given: the report and the records.
fn record_fates(
    seed: u64,
    replay: Option<latlab_link::fates::replay::Replay>,
) -> (EmulatorReport, Vec<latlab_link::fates::FrameRecord>) {
    let mut a = MemoryPort::new(&[], 1514);
    let mut b = MemoryPort::new(&[], 1514);
    a.incoming
        .lock()
        .unwrap()
        .extend((0..100).map(|seq| udp_to(7000, seq)));
    let (ring, mut records) = fate_ring(256);
    let live = EmulatorLive::default();
    live.control.set_fates(FateSettings {
        record: Some(ring),
        replay,
    });
    let lossy = LinkConfig {
        loss: latlab_link::LossModel::Bernoulli { p: 0.3 },
        seed,
        ..LinkConfig::default()
    };
    let report = bridge_live(&mut a, &mut b, lossy, settled(100), &live);
    let mut out = Vec::new();
    while let Ok(r) = records.pop() {
        out.push(r);
    }
    (report, out)
}

#[test]
fn recorded_fates_replayed_with_another_seed_drop_the_same_frames() {
    use latlab_link::fates::{FateFile, Header, Recorded};
    let (first, recorded) = record_fates(1, None);
    let fates = first.fates.expect("recording was asked for");
    assert_eq!((fates.recorded, fates.unqueued), (100, 0));
    let dropped: Vec<u64> = recorded
        .iter()
        .filter(|r| matches!(r.fate, Recorded::Drop(_)))
        .map(|r| r.position)
        .collect();
    assert_eq!(dropped.len() as u64, first.a_to_b.link.dropped_loss);
    assert!(dropped.len() > 10, "{dropped:?}");

    let directions = ["a_to_b", "b_to_a"].map(|name| latlab_link::fates::DirectionHeader {
        name: name.into(),
        rules: vec![],
    });
    let file = FateFile {
        header: Header {
            directions: directions.to_vec(),
        },
        frames: recorded,
        unqueued: 0,
    };
    let replay = latlab_link::fates::replay::Replay::new(&file);
    let (second, applied) = record_fates(2, Some(replay));
    let fates = second.fates.expect("replaying was asked for");
    assert_eq!(
        (fates.replayed, fates.not_in_record, fates.unused),
        ([100, 0], [0, 0], 0)
    );
    let again: Vec<u64> = applied
        .iter()
        .filter(|r| matches!(r.fate, Recorded::Drop(_)))
        .map(|r| r.position)
        .collect();
    assert_eq!(again, dropped);
    assert_eq!(second.a_to_b.link, first.a_to_b.link);
    assert_eq!(second.a_to_b.sent + dropped.len() as u64, 100);
}

#[test]
fn a_full_fate_ring_is_counted_and_the_bridge_goes_on() {
    let mut a = MemoryPort::new(&[100; 40], 1514);
    let mut b = MemoryPort::new(&[], 1514);
    let (ring, _records) = fate_ring(16);
    let live = EmulatorLive::default();
    live.control.set_fates(FateSettings {
        record: Some(ring),
        replay: None,
    });
    let report = bridge_live(&mut a, &mut b, LinkConfig::default(), settled(40), &live);
    let fates = report.fates.expect("recording was asked for");
    assert_eq!(
        (report.a_to_b.sent, fates.recorded, fates.unqueued),
        (40, 16, 24)
    );
}
