//! The L2 forwarder (the paper's L2FWD): every frame from one interface to the other, both
//! directions, no lookup, run to completion in one loop on the calling thread, over any
//! [`FramePort`] (AF_PACKET or AF_XDP), with the paper's two knobs: the batch size (frames per
//! receive call at most) and the poll rate.
//!
//! It instruments itself with the TSC: around each batch's receive call, each frame's
//! processing (the forwarder's one decision: is it a whole Ethernet frame) and queueing on the
//! far side, the far side's flush, and the port's return of the receive buffers. Those
//! differences, with the number of counter reads inside each, go to
//! [`latlab_bench::cycles::CycleAccount`], which subtracts the counter's own cost (calibrated
//! here at start) and reports cycles per packet per step against the whole run's cycles per
//! packet.
//!
//! One frame never stops it: a frame shorter than an Ethernet header (a runt), one longer than
//! the far side can send, and one the far side's TX ring has no room for even after a flush
//! are each counted by cause and dropped. Every frame received is accounted for
//! ([`FwdDirection::unaccounted`] is 0).

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latlab_bench::cycles::{Calibration, CycleAccount, CycleReport, Interval, Step};
use latlab_io::port::{FramePort, FrameQueued};
use latlab_io::tsc;

use latlab_stats::stalls::Stalls;

use crate::stalls::StallWatch;
use crate::Stop;

/// Bytes of an Ethernet header: anything shorter is a runt.
const ETH_HLEN: usize = 14;

/// How the forwarder waits for frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FwdPoll {
    /// Poll both ports without pause: one core at 100%.
    Busy,
    /// Wait in poll(2) when a round found no frame.
    Block,
    /// Poll both ports this many times per second (≥ 1), sleeping between rounds: the
    /// paper's poll-rate knob (throughput is at most rate × batch per direction).
    Rate(u32),
}

impl FwdPoll {
    /// The forms the command line takes, `N` standing for a number of polls per second.
    pub const FORMS: [&'static str; 3] = ["busy", "block", "rate:N"];
}

impl std::str::FromStr for FwdPoll {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let [busy, block, rate] = FwdPoll::FORMS;
        // `rate:N`: the form without its `N`, then the number.
        let rate_prefix = rate.trim_end_matches('N');
        if s == busy {
            Ok(FwdPoll::Busy)
        } else if s == block {
            Ok(FwdPoll::Block)
        } else {
            match s.strip_prefix(rate_prefix).map(str::parse::<u32>) {
                Some(Ok(n)) if n >= 1 => Ok(FwdPoll::Rate(n)),
                _ => Err(format!(
                    "{s:?} is not a poll mode: expected {busy}, {block} or {rate} (N ≥ 1 polls \
                     per second)"
                )),
            }
        }
    }
}

impl std::fmt::Display for FwdPoll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FwdPoll::Busy => f.write_str("busy"),
            FwdPoll::Block => f.write_str("block"),
            FwdPoll::Rate(n) => write!(f, "rate:{n}"),
        }
    }
}

/// How the forwarder runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ForwarderConfig {
    /// Frames per receive call at most (≥ 1).
    pub batch: usize,
    /// How it waits.
    pub poll: FwdPoll,
}

/// Live counters of one direction, readable while the forwarder runs (updated per batch).
#[derive(Debug, Default)]
pub struct FwdLive {
    /// Frames received.
    pub received: AtomicU64,
    /// Frames queued on the far side.
    pub forwarded: AtomicU64,
    /// Frames dropped, whatever the cause.
    pub dropped: AtomicU64,
}

/// Live counters of both directions.
#[derive(Debug, Default)]
pub struct ForwarderLive {
    /// Interface A to interface B.
    pub a_to_b: Arc<FwdLive>,
    /// Interface B to interface A.
    pub b_to_a: Arc<FwdLive>,
    /// Raised to start the report again from now (its counters and cycle accounting: a
    /// window at saturation); the forwarder lowers it when it has.
    pub restart: AtomicBool,
}

/// What one direction did: `received = forwarded + tx_full + too_long + runts`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FwdDirection {
    /// Frames received.
    pub received: u64,
    /// Frames queued on the far side's TX ring.
    pub forwarded: u64,
    /// Frames the far side's TX ring had no room for, even after a flush: dropped.
    pub tx_full: u64,
    /// Frames longer than the far side can send (its MTU, a ring slot): dropped.
    pub too_long: u64,
    /// Frames shorter than an Ethernet header: dropped.
    pub runts: u64,
    /// Frames the kernel dropped before the receive ring (the port's count).
    pub kernel_drops: u64,
}

impl FwdDirection {
    /// Frames received less frames accounted for: 0 unless one was lost uncounted.
    pub fn unaccounted(&self) -> i128 {
        i128::from(self.received)
            - [self.forwarded, self.tx_full, self.too_long, self.runts]
                .iter()
                .map(|&n| i128::from(n))
                .sum::<i128>()
    }
}

/// What a forwarder run did.
#[derive(Clone, Debug, PartialEq)]
pub struct ForwarderReport {
    /// Frames from A to B.
    pub a_to_b: FwdDirection,
    /// Frames from B to A.
    pub b_to_a: FwdDirection,
    /// Where the cycles went, both directions together.
    pub cycles: CycleReport,
    /// The host's stalls of the loop over the run ([`crate::stalls`]), from the counter reads
    /// it makes anyway.
    pub host_stalls: Stalls,
}

/// Measures the counter's frequency and the cost of one read of it (15 loops of 1000
/// back-to-back reads, 100 µs apart so that one slow moment of the host does not cover them
/// all; the fastest loop).
pub fn calibrate() -> (f64, Calibration) {
    let hz = tsc::frequency_hz(Duration::from_millis(10));
    let samples: Vec<f64> = (0..15)
        .map(|_| {
            let start = tsc::read();
            for _ in 0..1000 {
                std::hint::black_box(tsc::read());
            }
            let per_read = tsc::read().wrapping_sub(start) as f64 / 1001.0;
            std::thread::sleep(Duration::from_micros(100));
            per_read
        })
        .collect();
    // 15 finite, non-negative samples: the calibration exists.
    let calibration =
        Calibration::from_loop_samples(&samples).unwrap_or(Calibration { read_cycles: 0.0 });
    (hz, calibration)
}

/// Forwards between `a` and `b` until `stop` is raised; returns the counters and the cycle
/// accounting.
pub fn run<P: FramePort>(
    a: &mut P,
    b: &mut P,
    config: ForwarderConfig,
    stop: &Stop,
    live: &ForwarderLive,
) -> io::Result<ForwarderReport> {
    let _ = latlab_io::cpu::set_timer_slack_ns(1);
    let (hz, calibration) = calibrate();
    run_calibrated(a, b, config, stop, live, hz, calibration)
}

/// [`run`] with the counter's frequency and the cost of one read given (the tests give reads
/// no cost, to read back the raw cycles each part of the loop was given).
fn run_calibrated<P: FramePort>(
    a: &mut P,
    b: &mut P,
    config: ForwarderConfig,
    stop: &Stop,
    live: &ForwarderLive,
    hz: f64,
    calibration: Calibration,
) -> io::Result<ForwarderReport> {
    let batch = config.batch.max(1);
    let mut account = CycleAccount::new();
    let (mut ab, mut ba) = (FwdDirection::default(), FwdDirection::default());
    let period = match config.poll {
        FwdPoll::Rate(n) => Some(Duration::from_secs_f64(1.0 / f64::from(n))),
        _ => None,
    };
    let mut next_round = Instant::now();
    let mut start = tsc::read();
    // The last counter read: every interval starts where the one before ended, so together
    // they cover the run.
    let mut mark = start;
    // The counter in ns since the loop began, for the stall watch.
    let base = start;
    let ns = |tsc: u64| (tsc.wrapping_sub(base) as f64 * 1e9 / hz) as u64;
    let mut watch = StallWatch::new(0);
    while !stop.is_raised() {
        watch.tick(ns(mark));
        if live.restart.load(Ordering::Relaxed) {
            account = CycleAccount::new();
            (ab, ba) = (FwdDirection::default(), FwdDirection::default());
            start = tsc::read();
            mark = start;
            live.restart.store(false, Ordering::Relaxed);
        }
        let got = forward_batch(a, b, batch, &mut ab, &live.a_to_b, &mut account, &mut mark)?
            + forward_batch(b, a, batch, &mut ba, &live.b_to_a, &mut account, &mut mark)?;
        let wait = match (config.poll, period) {
            (FwdPoll::Block, _) if got == 0 => Some(None),
            (FwdPoll::Rate(_), Some(period)) => {
                next_round += period;
                let now = Instant::now();
                if next_round + period < now {
                    // Too far behind to catch up (a long preemption): the next round is now.
                    next_round = now;
                }
                Some(Some(next_round))
            }
            _ => None,
        };
        if let Some(until) = wait {
            let w0 = lap(&mut mark, &mut account);
            match until {
                None => P::wait_either(a, b, Duration::from_millis(10))?,
                Some(deadline) => sleep_until(deadline, stop),
            }
            let w1 = tsc::read();
            account.add_waiting(Interval {
                cycles: w1.wrapping_sub(w0),
                reads: 1,
            });
            mark = w1;
            // A frame may have ended the wait: its length is no stall.
            watch.resumed(ns(mark));
        }
    }
    let end = lap(&mut mark, &mut account);
    let elapsed = end.wrapping_sub(start);
    ab.kernel_drops = a.kernel_drops();
    ba.kernel_drops = b.kernel_drops();
    Ok(ForwarderReport {
        a_to_b: ab,
        b_to_a: ba,
        cycles: account.report(&calibration, elapsed, hz),
        host_stalls: watch.finish(ns(end)),
    })
}

/// Reads the counter, adds the time since `mark` to the loop's overhead, and moves `mark`
/// to the read; returns it.
fn lap(mark: &mut u64, account: &mut CycleAccount) -> u64 {
    let now = tsc::read();
    account.add_overhead(Interval {
        cycles: now.wrapping_sub(*mark),
        reads: 1,
    });
    *mark = now;
    now
}

/// Sleeps until `deadline` (the last 50 µs spun, as sleeps wake late), or until `stop`.
fn sleep_until(deadline: Instant, stop: &Stop) {
    const SPIN: Duration = Duration::from_micros(50);
    loop {
        let now = Instant::now();
        if now >= deadline || stop.is_raised() {
            return;
        }
        let left = deadline - now;
        if left > SPIN {
            std::thread::sleep((left - SPIN).min(Duration::from_millis(10)));
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Receives at most `batch` frames from `rx`, queues each on `tx`, flushes `tx`; counts into
/// `dir` and `live`, and the cycles of each step into `account` (the time since `mark`, the
/// last counter read, as the loop's overhead; `mark` moves to the last read here). Returns the
/// frames received.
fn forward_batch<P: FramePort>(
    rx: &mut P,
    tx: &mut P,
    batch: usize,
    dir: &mut FwdDirection,
    live: &FwdLive,
    account: &mut CycleAccount,
    mark: &mut u64,
) -> io::Result<usize> {
    let mut step = StepSums::default();
    let mut tx_error = None;
    let before = *dir;
    let c0 = lap(mark, account);
    let got = rx.recv_frames_max(batch, &mut |frame, _rx_ns| {
        let e = tsc::read();
        let whole = frame.len() >= ETH_HLEN;
        let p = tsc::read();
        if !whole {
            dir.runts += 1;
        } else if tx_error.is_none() {
            match queue(tx, frame) {
                Ok(FrameQueued::Queued) => dir.forwarded += 1,
                Ok(FrameQueued::Full) => dir.tx_full += 1,
                Ok(FrameQueued::TooLong) => dir.too_long += 1,
                Ok(FrameQueued::TooShort) => dir.runts += 1,
                Err(err) => {
                    // The socket failed: the frame is not sent; the run ends below.
                    dir.tx_full += 1;
                    tx_error = Some(err);
                }
            }
        } else {
            dir.tx_full += 1;
        }
        let x = tsc::read();
        step.processing += p.wrapping_sub(e);
        step.tx += x.wrapping_sub(p);
        step.frames += 1;
    })?;
    let c1 = tsc::read();
    *mark = c1;
    if let Some(err) = tx_error {
        return Err(err);
    }
    dir.received += step.frames;
    // Reads inside the receive call: 3 per frame, 2 by the port around its release (when it
    // times one), and c1.
    let release_reads = if got.release_cycles > 0 { 2 } else { 0 };
    let outer = c1.wrapping_sub(c0);
    if got.frames == 0 {
        account.add_empty_poll(Interval {
            cycles: outer,
            reads: 1 + release_reads,
        });
        return Ok(0);
    }
    let n = step.frames;
    account.count_batch(n);
    account.add(
        Step::Processing,
        Interval {
            cycles: step.processing,
            reads: n,
        },
    );
    let buffer_reads = release_reads / 2;
    account.add(
        Step::Buffers,
        Interval {
            cycles: got.release_cycles,
            reads: buffer_reads,
        },
    );
    let inner = step.processing + step.tx + got.release_cycles;
    account.add(
        Step::Rx,
        Interval {
            cycles: outer.saturating_sub(inner),
            reads: n + 1 + (release_reads - buffer_reads),
        },
    );
    // The flush, from c1 on.
    let forwarded = dir.forwarded - before.forwarded;
    let mut tx_cycles = step.tx;
    let mut tx_reads = n;
    if forwarded > 0 {
        tx.flush()?;
        *mark = tsc::read();
        tx_cycles += mark.wrapping_sub(c1);
        tx_reads += 1;
    }
    account.add(
        Step::Tx,
        Interval {
            cycles: tx_cycles,
            reads: tx_reads,
        },
    );
    account.count_forwarded(forwarded);
    live.received.fetch_add(n, Ordering::Relaxed);
    live.forwarded.fetch_add(forwarded, Ordering::Relaxed);
    let dropped = (dir.tx_full + dir.too_long + dir.runts)
        - (before.tx_full + before.too_long + before.runts);
    if dropped > 0 {
        live.dropped.fetch_add(dropped, Ordering::Relaxed);
    }
    Ok(got.frames)
}

/// Queues `frame` on `tx`; a full ring is flushed once and tried again.
fn queue<P: FramePort>(tx: &mut P, frame: &[u8]) -> io::Result<FrameQueued> {
    let queued = tx.try_queue_frame(frame)?;
    if queued != FrameQueued::Full {
        return Ok(queued);
    }
    tx.flush()?;
    tx.try_queue_frame(frame)
}

/// Cycles summed over one batch's frames.
#[derive(Default)]
struct StepSums {
    processing: u64,
    tx: u64,
    frames: u64,
}

#[cfg(test)]
mod tests;
