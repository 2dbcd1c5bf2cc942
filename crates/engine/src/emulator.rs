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
//! two spare cores per direction. It runs over any [`Port`]: an AF_PACKET socket (frames
//! stamped by the kernel as they enter the ring) or an AF_XDP socket whose program redirects
//! every frame of the interface (frames stamped by that program as the driver hands them over).

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

/// One bridged interface as the run-to-completion loop uses it: the frame port of latlab-io.
pub use latlab_io::port::FramePort as Port;

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
    fn release(&mut self, now: u64, tx: &mut impl Port) -> io::Result<usize> {
        let mut n = 0;
        while let Some(&Reverse((departure, _, slot))) = self.heap.peek() {
            if departure > now {
                break;
            }
            self.heap.pop();
            let len = self.lens[slot];
            let mut queued = tx.queue_frame(&self.frames[slot][..len])?;
            if !queued {
                tx.flush()?;
                queued = tx.queue_frame(&self.frames[slot][..len])?;
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
pub fn run<P: Port>(
    a: &mut P,
    b: &mut P,
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
        let got = a.recv_frames(&mut |frame, rx_ns| ab.arrive(rx_ns, frame))?
            + b.recv_frames(&mut |frame, rx_ns| ba.arrive(rx_ns, frame))?;
        let now = now_ns();
        let sent_b = ab.release(now, b)?;
        let sent_a = ba.release(now, a)?;
        if sent_b > 0 {
            b.flush()?;
        }
        if sent_a > 0 {
            a.flush()?;
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
        P::wait_either(a, b, wait.min(Duration::from_millis(10)))?;
    }
    ab.report.link = *ab.link.counters();
    ba.report.link = *ba.link.counters();
    ab.report.kernel_drops = a.kernel_drops();
    ba.report.kernel_drops = b.kernel_drops();
    Ok(EmulatorReport {
        a_to_b: ab.report,
        b_to_a: ba.report,
    })
}

/// Largest frame the pipeline's rings carry.
pub const PIPE_FRAME: usize = 2048;

/// A frame on its way from the RX stage to the TX stage.
struct Slot {
    departure_ns: u64,
    len: usize,
    data: [u8; PIPE_FRAME],
}

/// The sockets of a pipelined bridge: each interface has a socket read by the RX stage and
/// another written by the TX stage, so the two stages never share one.
#[derive(Debug)]
pub struct PipelineSockets {
    /// Read by the RX stage: frames arriving on interface A.
    pub rx_a: PacketSocket,
    /// Read by the RX stage: frames arriving on interface B.
    pub rx_b: PacketSocket,
    /// Written by the TX stage: frames leaving on interface A.
    pub tx_a: PacketSocket,
    /// Written by the TX stage: frames leaving on interface B.
    pub tx_b: PacketSocket,
}

/// Counters the TX stage keeps per direction.
#[derive(Default)]
struct TxSide {
    sent: u64,
    tx_ring_full: u64,
    released_early: u64,
    release_error: LatencyHistogram,
}

/// The TX stage's delay queue of one direction: frames popped from the ring wait here, ordered
/// by departure (a reordered frame may be due before frames that came earlier).
struct TxQueue {
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    bufs: Vec<Vec<u8>>,
    lens: Vec<usize>,
    free: Vec<usize>,
    seq: u64,
}

impl TxQueue {
    fn new() -> TxQueue {
        TxQueue {
            heap: BinaryHeap::new(),
            bufs: Vec::new(),
            lens: Vec::new(),
            free: Vec::new(),
            seq: 0,
        }
    }

    fn push(&mut self, slot: &Slot) {
        let i = self.free.pop().unwrap_or_else(|| {
            self.bufs.push(vec![0u8; PIPE_FRAME]);
            self.lens.push(0);
            self.bufs.len() - 1
        });
        self.bufs[i][..slot.len].copy_from_slice(&slot.data[..slot.len]);
        self.lens[i] = slot.len;
        self.seq += 1;
        self.heap.push(Reverse((slot.departure_ns, self.seq, i)));
    }
}

/// Runs the bridge as a pipeline: an RX stage (both directions' arrivals and the link models)
/// pinned to `rx_cpu` and a TX stage (delay queues and releases) pinned to `tx_cpu`, joined
/// per direction by a lock-free single-producer single-consumer ring of `ring_frames` frames,
/// and a ring back that tells the link model when a frame has left.
#[allow(clippy::too_many_arguments)]
pub fn run_pipeline(
    sockets: PipelineSockets,
    a_to_b: LinkConfig,
    b_to_a: LinkConfig,
    ring_frames: usize,
    (rx_cpu, tx_cpu): (Option<usize>, Option<usize>),
    stop: &Stop,
    live: &EmulatorLive,
) -> io::Result<EmulatorReport> {
    let PipelineSockets {
        mut rx_a,
        mut rx_b,
        mut tx_a,
        mut tx_b,
    } = sockets;
    let invalid =
        |e: latlab_link::ConfigError| io::Error::new(io::ErrorKind::InvalidInput, e.to_string());
    let start = now_ns();
    let mut links = [
        Link::new(a_to_b, start).map_err(invalid)?,
        Link::new(b_to_a, start).map_err(invalid)?,
    ];
    let (mut to_tx_ab, mut from_rx_ab) = rtrb::RingBuffer::<Slot>::new(ring_frames.max(16));
    let (mut to_tx_ba, mut from_rx_ba) = rtrb::RingBuffer::<Slot>::new(ring_frames.max(16));
    let (mut left_ab, mut back_ab) = rtrb::RingBuffer::<usize>::new(ring_frames.max(16) * 2);
    let (mut left_ba, mut back_ba) = rtrb::RingBuffer::<usize>::new(ring_frames.max(16) * 2);
    let lives = [live.a_to_b.clone(), live.b_to_a.clone()];
    let tx_lives = lives.clone();
    std::thread::scope(|s| {
        let tx_stage = s.spawn(move || -> io::Result<[TxSide; 2]> {
            if let Some(cpu) = tx_cpu {
                latlab_io::cpu::pin_current_thread(cpu)?;
            }
            let mut sides = [TxSide::default(), TxSide::default()];
            let mut queues = [TxQueue::new(), TxQueue::new()];
            while !stop.is_raised() {
                while let Ok(slot) = from_rx_ab.pop() {
                    queues[0].push(&slot);
                }
                while let Ok(slot) = from_rx_ba.pop() {
                    queues[1].push(&slot);
                }
                let now = now_ns();
                for d in 0..2 {
                    let (tx, left) = if d == 0 {
                        (&mut tx_b, &mut left_ab)
                    } else {
                        (&mut tx_a, &mut left_ba)
                    };
                    let q = &mut queues[d];
                    let side = &mut sides[d];
                    let mut queued_any = false;
                    while let Some(&Reverse((departure, _, i))) = q.heap.peek() {
                        if departure > now {
                            break;
                        }
                        q.heap.pop();
                        let len = q.lens[i];
                        let mut queued = tx.queue_tx(&q.bufs[i][..len])?;
                        if !queued {
                            tx.flush_tx()?;
                            queued = tx.queue_tx(&q.bufs[i][..len])?;
                        }
                        let t = now_ns();
                        if queued {
                            queued_any = true;
                            side.sent += 1;
                            tx_lives[d].sent.fetch_add(1, Ordering::Relaxed);
                            if t >= departure {
                                side.release_error.record(t - departure);
                            } else {
                                side.released_early += 1;
                            }
                        } else {
                            side.tx_ring_full += 1;
                            tx_lives[d].dropped.fetch_add(1, Ordering::Relaxed);
                        }
                        // The ring back is twice the forward ring: it has room.
                        let _ = left.push(len);
                        q.free.push(i);
                    }
                    if queued_any {
                        tx.flush_tx()?;
                    }
                }
                std::hint::spin_loop();
            }
            Ok(sides)
        });
        type RxOut = (u64, u64, [Link; 2], PacketSocket, PacketSocket);
        let rx_stage = s.spawn(move || -> io::Result<RxOut> {
            if let Some(cpu) = rx_cpu {
                latlab_io::cpu::pin_current_thread(cpu)?;
            }
            let mut full = [0u64; 2];
            let mut slot = Box::new(Slot {
                departure_ns: 0,
                len: 0,
                data: [0; PIPE_FRAME],
            });
            while !stop.is_raised() {
                for d in 0..2 {
                    let (rx, ring) = if d == 0 {
                        (&mut rx_a, &mut to_tx_ab)
                    } else {
                        (&mut rx_b, &mut to_tx_ba)
                    };
                    let link = &mut links[d];
                    let live = &lives[d];
                    rx.recv_batch(|frame, rx_ns, _| {
                        live.arrived.fetch_add(1, Ordering::Relaxed);
                        let len = frame.len().min(PIPE_FRAME);
                        match link.handle_arrival(rx_ns, frame.len()) {
                            Fate::Drop(_) => {
                                live.dropped.fetch_add(1, Ordering::Relaxed);
                            }
                            Fate::Deliver {
                                departure_ns,
                                duplicate_departure_ns,
                                corrupt_bit,
                                ..
                            } => {
                                for (departure, flip) in [
                                    (Some(departure_ns), corrupt_bit),
                                    (duplicate_departure_ns, None),
                                ] {
                                    let Some(departure) = departure else { continue };
                                    slot.departure_ns = departure;
                                    slot.len = len;
                                    slot.data[..len].copy_from_slice(&frame[..len]);
                                    if let Some(bit) = flip.filter(|b| b / 8 < len) {
                                        slot.data[bit / 8] ^= 1 << (bit % 8);
                                    }
                                    let s = std::mem::replace(
                                        &mut *slot,
                                        Slot {
                                            departure_ns: 0,
                                            len: 0,
                                            data: [0; PIPE_FRAME],
                                        },
                                    );
                                    if ring.push(s).is_err() {
                                        full[d] += 1;
                                        live.dropped.fetch_add(1, Ordering::Relaxed);
                                        link.handle_departure(departure, len);
                                    }
                                }
                            }
                        }
                    })?;
                }
                let now = now_ns();
                while let Ok(len) = back_ab.pop() {
                    links[0].handle_departure(now, len);
                }
                while let Ok(len) = back_ba.pop() {
                    links[1].handle_departure(now, len);
                }
            }
            Ok((full[0], full[1], links, rx_a, rx_b))
        });
        let tx = tx_stage
            .join()
            .map_err(|_| io::Error::other("the TX stage panicked"))??;
        let (full_ab, full_ba, links, rx_a, rx_b) = rx_stage
            .join()
            .map_err(|_| io::Error::other("the RX stage panicked"))??;
        let [ab, ba] = tx;
        let report = |side: TxSide, full: u64, link: &Link, rx: &PacketSocket| DirectionReport {
            link: *link.counters(),
            sent: side.sent,
            tx_ring_full: side.tx_ring_full,
            queue_slots_full: full,
            kernel_drops: rx.statistics().map(|s| s.drops).unwrap_or(0),
            release_error: side.release_error,
            released_early: side.released_early,
        };
        Ok(EmulatorReport {
            a_to_b: report(ab, full_ab, &links[0], &rx_a),
            b_to_a: report(ba, full_ba, &links[1], &rx_b),
        })
    })
}
