//! The forwarder over in-memory ports: what it forwards, what it counts, and how it polls.

use std::sync::atomic::AtomicUsize;

use latlab_io::port::{RecvBatch, TimestampSource};

use super::*;

/// A port that hands `incoming` frames (at most `max` per call), takes frames up to the far
/// side's MTU into `sent`, and holds at most `tx_room` unflushed frames (`stuck`: a flush
/// frees nothing). It times its return of the receive buffers unless `times_release` is off.
struct MemoryPort {
    incoming: Vec<Vec<u8>>,
    sent: Vec<Vec<u8>>,
    mtu_limit: usize,
    tx_room: usize,
    unflushed: usize,
    stuck: bool,
    receive_calls: Arc<AtomicUsize>,
    largest_batch: usize,
    times_release: bool,
}

impl MemoryPort {
    fn new(incoming: &[usize]) -> MemoryPort {
        MemoryPort {
            incoming: incoming.iter().map(|&len| vec![0xab; len]).collect(),
            sent: Vec::new(),
            mtu_limit: 1514,
            tx_room: 1024,
            unflushed: 0,
            stuck: false,
            receive_calls: Arc::default(),
            largest_batch: 0,
            times_release: true,
        }
    }
}

impl FramePort for MemoryPort {
    fn recv_frames(&mut self, f: &mut dyn FnMut(&[u8], u64)) -> io::Result<usize> {
        self.recv_frames_max(usize::MAX, f).map(|b| b.frames)
    }

    fn recv_frames_max(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], u64),
    ) -> io::Result<RecvBatch> {
        self.receive_calls.fetch_add(1, Ordering::Relaxed);
        let n = self.incoming.len().min(max);
        for frame in self.incoming.drain(..n) {
            f(&frame, 0);
        }
        self.largest_batch = self.largest_batch.max(n);
        let release_cycles = if self.times_release {
            let start = tsc::read();
            std::hint::black_box(&self.incoming);
            tsc::read().wrapping_sub(start).max(1)
        } else {
            0
        };
        Ok(RecvBatch {
            frames: n,
            release_cycles,
        })
    }

    fn try_queue_frame(&mut self, frame: &[u8]) -> io::Result<FrameQueued> {
        Ok(if frame.len() > self.mtu_limit {
            FrameQueued::TooLong
        } else if frame.len() < 14 {
            FrameQueued::TooShort
        } else if self.unflushed >= self.tx_room {
            FrameQueued::Full
        } else {
            self.unflushed += 1;
            self.sent.push(frame.to_vec());
            FrameQueued::Queued
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.stuck {
            self.unflushed = 0;
        }
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

/// How long to wait for the forwarder to get where a test takes it (normally milliseconds):
/// long, because the wait only runs out when something is broken, and a loaded guest stalls.
const PATIENCE: Duration = Duration::from_secs(30);

/// Forwards between `a` and `b` with `config` until every frame they hold was received and
/// forwarded or dropped.
fn forward(a: &mut MemoryPort, b: &mut MemoryPort, config: ForwarderConfig) -> ForwarderReport {
    let done = all_handled(a, b);
    forward_until(done, |stop, live| run(a, b, config, stop, live))
}

/// Whether the live counters say that the frames `a` and `b` hold now were all received, and
/// each one forwarded or dropped.
fn all_handled(a: &MemoryPort, b: &MemoryPort) -> impl Fn(&ForwarderLive) -> bool + Send + Sync {
    let (from_a, from_b) = (a.incoming.len() as u64, b.incoming.len() as u64);
    move |live| {
        [(&live.a_to_b, from_a), (&live.b_to_a, from_b)]
            .iter()
            .all(|(d, n)| {
                let received = d.received.load(Ordering::Relaxed);
                let handled =
                    d.forwarded.load(Ordering::Relaxed) + d.dropped.load(Ordering::Relaxed);
                received == *n && handled == received
            })
    }
}

/// As [`forward`], with counter reads that cost nothing: no interval is corrected (nor
/// clamped at 0), so the cycle report gives back the raw cycles each part of the loop got.
fn forward_raw(a: &mut MemoryPort, b: &mut MemoryPort, config: ForwarderConfig) -> ForwarderReport {
    let hz = tsc::frequency_hz(Duration::from_millis(10));
    let free = Calibration { read_cycles: 0.0 };
    let done = all_handled(a, b);
    forward_until(done, |stop, live| {
        run_calibrated(a, b, config, stop, live, hz, free)
    })
}

/// Runs `forwarder` with a stop flag raised once `done` holds for its live counters (or after
/// [`PATIENCE`]: the test's checks then say what is missing).
fn forward_until(
    done: impl Fn(&ForwarderLive) -> bool + Send + Sync,
    forwarder: impl FnOnce(&Stop, &ForwarderLive) -> io::Result<ForwarderReport>,
) -> ForwarderReport {
    let stop = Stop::new();
    let live = ForwarderLive::default();
    std::thread::scope(|s| {
        s.spawn(|| {
            let deadline = std::time::Instant::now() + PATIENCE;
            while !done(&live) && std::time::Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            stop.raise();
        });
        forwarder(&stop, &live)
    })
    .unwrap()
}

fn config(batch: usize, poll: FwdPoll) -> ForwarderConfig {
    ForwarderConfig { batch, poll }
}

#[test]
fn frames_cross_both_ways_and_runts_and_oversized_frames_are_counted_not_forwarded() {
    let mut a = MemoryPort::new(&[60, 8, 1600, 1514, 0, 100]);
    let mut b = MemoryPort::new(&[64, 13, 64]);
    let report = forward(&mut a, &mut b, config(32, FwdPoll::Block));
    let lens = |p: &MemoryPort| p.sent.iter().map(Vec::len).collect::<Vec<_>>();
    assert_eq!(lens(&b), [60, 1514, 100]);
    assert_eq!(lens(&a), [64, 64]);
    let ab = report.a_to_b;
    assert_eq!(
        (ab.received, ab.forwarded, ab.runts, ab.too_long, ab.tx_full),
        (6, 3, 2, 1, 0)
    );
    assert_eq!((report.b_to_a.forwarded, report.b_to_a.runts), (2, 1));
    assert_eq!((ab.unaccounted(), report.b_to_a.unaccounted()), (0, 0));
    assert_eq!(report.cycles.forwarded, 5);
    assert_eq!(report.cycles.received, 9);
}

#[test]
fn a_tx_ring_that_stays_full_after_a_flush_drops_and_counts_the_rest() {
    let mut a = MemoryPort::new(&[100; 10]);
    let mut b = MemoryPort::new(&[]);
    b.tx_room = 4;
    b.stuck = true;
    let report = forward(&mut a, &mut b, config(32, FwdPoll::Block));
    assert_eq!(b.sent.len(), 4);
    assert_eq!((report.a_to_b.forwarded, report.a_to_b.tx_full), (4, 6));
    assert_eq!(report.a_to_b.unaccounted(), 0);
}

#[test]
fn no_receive_call_hands_more_than_the_batch() {
    let mut a = MemoryPort::new(&[100; 50]);
    let mut b = MemoryPort::new(&[]);
    let report = forward(&mut a, &mut b, config(8, FwdPoll::Block));
    assert_eq!(b.sent.len(), 50);
    assert_eq!(a.largest_batch, 8);
    // 50 frames in batches of 8: 6 full ones and one of 2.
    assert_eq!(report.cycles.batches, 7);
    assert!((report.cycles.mean_batch - 50.0 / 7.0).abs() < 1e-9);
}

#[test]
fn a_poll_rate_sets_how_often_the_ports_are_read() {
    let mut a = MemoryPort::new(&[100; 1000]);
    let mut b = MemoryPort::new(&[]);
    let calls = a.receive_calls.clone();
    // 100 rounds per second of at most 10 frames, until 20 rounds were made (about 200 ms,
    // after ~15 ms of calibration; longer on a loaded machine). The rate is a ceiling the loop
    // keeps however fast the machine is (a round late by less than a period is caught up, by
    // more is dropped): never more rounds than periods in the time it ran, plus the two a
    // catch-up allows. A loaded guest only takes rounds away, which the wait for 20 allows.
    let started = std::time::Instant::now();
    let made = calls.clone();
    let report = forward_until(
        |_| made.load(Ordering::Relaxed) >= 20,
        |stop, live| run(&mut a, &mut b, config(10, FwdPoll::Rate(100)), stop, live),
    );
    let periods = started.elapsed().as_millis() as usize / 10;
    let rounds = calls.load(Ordering::Relaxed);
    assert!(
        (20..=periods + 2).contains(&rounds),
        "{rounds} rounds in {periods} periods"
    );
    assert_eq!(report.a_to_b.forwarded, 10 * rounds as u64);
    assert!(
        report.cycles.waiting > report.cycles.steps_total,
        "{:?}",
        report.cycles
    );
}

#[test]
fn the_cycle_report_splits_every_forwarded_frame_into_steps() {
    // Busy with ports that time their buffer return; blocking with ports that do not: every
    // step ran in both but the buffers' return, which is timed only in the first, and the
    // loop waited only in the second.
    for (poll, times_release) in [(FwdPoll::Busy, true), (FwdPoll::Block, false)] {
        let mut a = MemoryPort::new(&[100; 2000]);
        let mut b = MemoryPort::new(&[100; 2000]);
        (a.times_release, b.times_release) = (times_release, times_release);
        let report = forward_raw(&mut a, &mut b, config(32, poll));
        let c = &report.cycles;
        assert_eq!((c.forwarded, c.timer), (4000, 0.0), "{poll}: {c:?}");
        let s = c.per_packet;
        assert!(
            s.rx > 0.0 && s.processing > 0.0 && s.tx > 0.0,
            "{poll}: {s:?}"
        );
        // The buffers' return got cycles only where the port timed it, waiting only where
        // the loop waited (no figure is below 0).
        assert_eq!(s.buffers != 0.0, times_release, "{poll}: {s:?}");
        assert_eq!(c.waiting != 0.0, poll == FwdPoll::Block, "{poll}: {c:?}");
        assert_eq!(c.steps_total, s.total());
        // Every cycle between the loop's first and last counter read went to exactly one
        // part: the steps, empty polls, waiting or the loop's own overhead.
        let parts = (c.steps_total + c.empty_polls + c.waiting + c.overhead) * c.forwarded as f64;
        let run = c.elapsed_cycles as f64;
        assert!(
            (parts - run).abs() <= run * 1e-12,
            "{poll}: the parts add up to {parts} cycles, the run took {run}: {c:?}"
        );
    }
    // Calibrated, as `run` does: a read costs cycles, and the intervals less their reads'
    // cost add up to about the run less the timer's cost (an interval corrected below 0
    // counts as 0, so a little more).
    let mut a = MemoryPort::new(&[100; 2000]);
    let mut b = MemoryPort::new(&[100; 2000]);
    let report = forward(&mut a, &mut b, config(32, FwdPoll::Busy));
    let c = &report.cycles;
    assert_eq!(c.forwarded, 4000);
    assert!(c.read_cycles > 0.0 && c.tsc_hz > 1e8, "{c:?}");
    assert!((0.9..=1.1).contains(&c.accounted_with_idle), "{c:?}");
}

#[test]
fn poll_modes_parse_and_a_bad_one_says_what_is_expected() {
    assert_eq!("busy".parse(), Ok(FwdPoll::Busy));
    assert_eq!("block".parse(), Ok(FwdPoll::Block));
    assert_eq!("rate:1000".parse(), Ok(FwdPoll::Rate(1000)));
    assert_eq!(FwdPoll::Rate(1000).to_string(), "rate:1000");
    for bad in ["rate:0", "rate:", "rate:fast", "spin"] {
        let e = bad.parse::<FwdPoll>().unwrap_err();
        assert!(e.contains("busy, block or rate:N"), "{e}");
    }
}
