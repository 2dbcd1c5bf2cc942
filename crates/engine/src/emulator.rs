//! The link emulator: a transparent layer-2 bridge between two interfaces that delays, drops,
//! duplicates, corrupts and rate-limits frames as a [`latlab_link::Link`] per direction says.
//!
//! Per direction: an RX stage reads a batch from the AF_PACKET ring, each frame with the kernel's
//! own receive stamp (per frame, not per batch); the link model decides its fate and departure
//! time; the frame waits in a bounded delay queue; the TX stage releases it when its departure
//! time comes, spinning on the clock for the last stretch instead of sleeping (sleeps are tens of
//! microseconds late), and writes it to the other interface's TX ring. The release error of
//! every frame (actual − intended departure) goes into a histogram.
//!
//! This is the run-to-completion shape: one loop serves both directions, for machines without
//! two spare cores per direction.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use latlab_io::clock::now_ns;
use latlab_io::packet::PacketSocket;
use latlab_link::{Fate, Link, LinkConfig, LinkCounters};
use latlab_stats::LatencyHistogram;

use crate::{PollMode, Stop};

/// Spin instead of sleeping when the next departure is this close.
const SPIN_NS: u64 = 100_000;
/// Delay queue slots per direction when the link sets no frame limit.
const DEFAULT_SLOTS: usize = 65_536;

/// Live counters of one direction, readable while the emulator runs.
#[derive(Debug, Default)]
pub struct DirectionLive {
    /// Frames received.
    pub arrived: AtomicU64,
    /// Frames sent on.
    pub sent: AtomicU64,
    /// Frames dropped, whatever the cause.
    pub dropped: AtomicU64,
}

/// What one direction did.
#[derive(Clone, Debug)]
pub struct DirectionReport {
    /// The link model's counters by cause.
    pub link: LinkCounters,
    /// Frames written to the TX ring.
    pub sent: u64,
    /// Frames the TX ring had no room for (dropped by the emulator itself).
    pub tx_ring_full: u64,
    /// Frames dropped because the delay queue had no free slot.
    pub queue_slots_full: u64,
    /// Frames the kernel dropped before the RX ring (PACKET_STATISTICS).
    pub kernel_drops: u64,
    /// Actual − intended departure of every released frame, ns.
    pub release_error: LatencyHistogram,
    /// Released before the intended departure (never expected; counted to show it).
    pub released_early: u64,
}

/// One direction: the link model and its delay queue.
struct Direction {
    link: Link,
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    frames: Vec<Vec<u8>>,
    lens: Vec<usize>,
    free: Vec<usize>,
    /// At most this many buffers.
    slots: usize,
    max_frame: usize,
    seq: u64,
    report: DirectionReport,
    live: std::sync::Arc<DirectionLive>,
}

impl Direction {
    fn new(
        config: LinkConfig,
        start_ns: u64,
        max_frame: usize,
        live: std::sync::Arc<DirectionLive>,
    ) -> io::Result<Direction> {
        let slots = config
            .limit_frames
            .map_or(DEFAULT_SLOTS, |l| l.saturating_mul(2).max(1));
        let link = Link::new(config, start_ns)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e.to_string()))?;
        Ok(Direction {
            link,
            heap: BinaryHeap::new(),
            // Buffers are made as the queue first grows, so a large limit costs memory only
            // when that many frames are really in flight.
            frames: Vec::new(),
            lens: Vec::new(),
            free: Vec::new(),
            slots,
            max_frame,
            seq: 0,
            report: DirectionReport {
                link: LinkCounters::default(),
                sent: 0,
                tx_ring_full: 0,
                queue_slots_full: 0,
                kernel_drops: 0,
                release_error: LatencyHistogram::new(),
                released_early: 0,
            },
            live,
        })
    }

    /// A frame arrived at `rx_ns`: ask the link, and queue what it delivers.
    fn arrive(&mut self, rx_ns: u64, frame: &[u8]) {
        self.live.arrived.fetch_add(1, Ordering::Relaxed);
        match self.link.handle_arrival(rx_ns, frame.len()) {
            Fate::Drop(_) => {
                self.live.dropped.fetch_add(1, Ordering::Relaxed);
            }
            Fate::Deliver {
                departure_ns,
                duplicate_departure_ns,
                corrupt_bit,
                ..
            } => {
                self.enqueue(departure_ns, frame, corrupt_bit);
                if let Some(dup) = duplicate_departure_ns {
                    self.enqueue(dup, frame, None);
                }
            }
        }
    }

    fn enqueue(&mut self, departure_ns: u64, frame: &[u8], corrupt_bit: Option<usize>) {
        if self.free.is_empty() && self.frames.len() < self.slots {
            self.frames.push(vec![0u8; self.max_frame]);
            self.lens.push(0);
            self.free.push(self.frames.len() - 1);
        }
        let Some(slot) = self.free.pop() else {
            // The link accounted for the frame as queued; it leaves without being sent.
            self.report.queue_slots_full += 1;
            self.live.dropped.fetch_add(1, Ordering::Relaxed);
            self.link.handle_departure(departure_ns, frame.len());
            return;
        };
        let len = frame.len().min(self.frames[slot].len());
        self.frames[slot][..len].copy_from_slice(&frame[..len]);
        if let Some(bit) = corrupt_bit {
            if bit / 8 < len {
                self.frames[slot][bit / 8] ^= 1 << (bit % 8);
            }
        }
        self.lens[slot] = len;
        self.seq += 1;
        self.heap.push(Reverse((departure_ns, self.seq, slot)));
    }

    fn next_departure(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((d, _, _))| *d)
    }

    /// Releases every frame due at `now` into `tx`.
    fn release(&mut self, now: u64, tx: &mut PacketSocket) -> io::Result<usize> {
        let mut n = 0;
        while let Some(&Reverse((departure, _, slot))) = self.heap.peek() {
            if departure > now {
                break;
            }
            self.heap.pop();
            let len = self.lens[slot];
            let mut queued = tx.queue_tx(&self.frames[slot][..len])?;
            if !queued {
                tx.flush_tx()?;
                queued = tx.queue_tx(&self.frames[slot][..len])?;
            }
            let t = now_ns();
            if queued {
                self.report.sent += 1;
                self.live.sent.fetch_add(1, Ordering::Relaxed);
                if t >= departure {
                    self.report.release_error.record(t - departure);
                } else {
                    self.report.released_early += 1;
                }
                n += 1;
            } else {
                self.report.tx_ring_full += 1;
                self.live.dropped.fetch_add(1, Ordering::Relaxed);
            }
            self.link.handle_departure(t, len);
            self.free.push(slot);
        }
        Ok(n)
    }
}

/// Live counters of both directions.
#[derive(Debug, Default)]
pub struct EmulatorLive {
    /// Interface A to interface B.
    pub a_to_b: std::sync::Arc<DirectionLive>,
    /// Interface B to interface A.
    pub b_to_a: std::sync::Arc<DirectionLive>,
}

/// What a run of the emulator did, per direction.
#[derive(Clone, Debug)]
pub struct EmulatorReport {
    /// Frames from A to B.
    pub a_to_b: DirectionReport,
    /// Frames from B to A.
    pub b_to_a: DirectionReport,
}

/// Bridges `a` and `b` until `stop` is raised, impairing A→B frames by `a_to_b` and B→A frames
/// by `b_to_a`.
///
/// With [`PollMode::Busy`] the loop never sleeps (a core at 100%, frames picked up within
/// microseconds); with [`PollMode::Block`] it sleeps in `ppoll` when nothing is due, and a
/// frame arriving then waits for the thread to wake.
#[allow(clippy::too_many_arguments)]
pub fn run(
    a: &mut PacketSocket,
    b: &mut PacketSocket,
    a_to_b: LinkConfig,
    b_to_a: LinkConfig,
    max_frame: usize,
    poll: PollMode,
    stop: &Stop,
    live: &EmulatorLive,
) -> io::Result<EmulatorReport> {
    let _ = latlab_io::cpu::set_timer_slack_ns(1);
    let start = now_ns();
    let mut ab = Direction::new(a_to_b, start, max_frame, live.a_to_b.clone())?;
    let mut ba = Direction::new(b_to_a, start, max_frame, live.b_to_a.clone())?;
    while !stop.is_raised() {
        let got = a.recv_batch(|frame, rx_ns, _truncated| ab.arrive(rx_ns, frame))?
            + b.recv_batch(|frame, rx_ns, _truncated| ba.arrive(rx_ns, frame))?;
        let now = now_ns();
        let sent_b = ab.release(now, b)?;
        let sent_a = ba.release(now, a)?;
        if sent_b > 0 {
            b.flush_tx()?;
        }
        if sent_a > 0 {
            a.flush_tx()?;
        }
        if got > 0 || sent_a + sent_b > 0 || poll == PollMode::Busy {
            continue;
        }
        // Idle: sleep until a frame arrives or shortly before the next departure; spin the
        // last stretch.
        let next = [ab.next_departure(), ba.next_departure()]
            .into_iter()
            .flatten()
            .min();
        let wait = match next {
            Some(d) if d <= now + SPIN_NS => continue,
            Some(d) => Duration::from_nanos(d - now - SPIN_NS),
            None => Duration::from_millis(10),
        };
        latlab_io::packet::wait_any_readable(
            &[&*a, &*b],
            Some(wait.min(Duration::from_millis(10))),
        )?;
    }
    ab.report.link = *ab.link.counters();
    ba.report.link = *ba.link.counters();
    ab.report.kernel_drops = a.statistics().map(|s| s.drops).unwrap_or(0);
    ba.report.kernel_drops = b.statistics().map(|s| s.drops).unwrap_or(0);
    Ok(EmulatorReport {
        a_to_b: ab.report,
        b_to_a: ba.report,
    })
}
