//! The generator: sends probes on an open-loop schedule and meters their responses.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use latlab_io::clock::now_ns;
use latlab_io::cpu;
use latlab_io::udp::{wait_any_readable, RecvBatch, SendBatch, TimestampSource, UdpSocket};
use latlab_probe::{Meter, MeterReport, ProbeConfig, Sender};
use latlab_stats::LatencyHistogram;
use latlab_wire::probe;

use crate::{PollMode, Stop};

/// How the generator uses the machine's cores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Threads {
    /// One loop sends and receives, optionally pinned: for machines with one core to spare.
    OneLoop {
        /// CPU to pin the loop to.
        cpu: Option<usize>,
    },
    /// A send thread and a receive thread, each pinned to its own CPU.
    Split {
        /// CPU of the send thread.
        tx_cpu: usize,
        /// CPU of the receive thread.
        rx_cpu: usize,
    },
}

/// Everything a generator run needs besides its sockets.
#[derive(Clone, Debug)]
pub struct GeneratorConfig {
    /// The probes to send; `start_ns` is set when the run starts.
    pub probe: ProbeConfig,
    /// Where probes go.
    pub target: SocketAddr,
    /// Datagrams per batch call.
    pub batch: usize,
    /// Busy polling or blocking.
    pub poll: PollMode,
    /// How long to wait for responses after the last probe was sent.
    pub grace_ns: u64,
    /// Length of one interval of the interval log.
    pub interval_ns: u64,
    /// Cores.
    pub threads: Threads,
}

/// Where a run is, for progress bars.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Since the first probe was due.
    pub elapsed_ns: u64,
    /// The run's sending time.
    pub total_ns: u64,
    /// Probes sent so far, warm-up included.
    pub sent: u64,
    /// Measured responses so far.
    pub received: u64,
}

/// The latencies of one interval of the run.
#[derive(Clone, Debug)]
pub struct Interval {
    /// Start of the interval, from the first probe's due time.
    pub start_offset_ns: u64,
    /// Its length.
    pub duration_ns: u64,
    /// Latencies of the responses that arrived in it.
    pub histogram: LatencyHistogram,
}

/// What a generator run measured.
#[derive(Clone, Debug)]
pub struct GeneratorResult {
    /// The meter's counts and histograms.
    pub report: MeterReport,
    /// Per-interval latency histograms, in order.
    pub intervals: Vec<Interval>,
    /// When the first probe was due (ns since the Unix epoch).
    pub start_ns: u64,
    /// When the first and the last probe left.
    pub first_send_ns: u64,
    /// See `first_send_ns`.
    pub last_send_ns: u64,
    /// Where the receive stamps came from.
    pub timestamp_source: TimestampSource,
    /// The run was cut short by the stop flag.
    pub stopped_early: bool,
    /// Lengths of the runs of consecutive lost probes, in send order.
    pub loss_bursts: Vec<u64>,
}

impl GeneratorResult {
    /// Probes per second that actually left, over the sending time.
    pub fn achieved_pps(&self) -> f64 {
        let sent = self.report.sent + self.report.warmup_sent;
        let span = self.last_send_ns.saturating_sub(self.first_send_ns);
        if sent < 2 || span == 0 {
            return 0.0;
        }
        (sent - 1) as f64 * 1e9 / span as f64
    }
}

/// Spin this long before a send deadline instead of sleeping through it (block mode).
const SPIN_NS: u64 = 50_000;
/// How often progress is reported.
const PROGRESS_NS: u64 = 100_000_000;
/// The first probe is due this long after `run` is called, so setup does not count as lag.
const START_DELAY_NS: u64 = 5_000_000;

/// Runs one generator: one socket per flow (`sockets.len()` must equal the flow count).
pub fn run(
    sockets: &[UdpSocket],
    config: &GeneratorConfig,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> io::Result<GeneratorResult> {
    if sockets.len() != config.probe.flows as usize || sockets.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "one socket per flow is needed",
        ));
    }
    let mut probe_cfg = config.probe.clone();
    probe_cfg.start_ns = now_ns() + START_DELAY_NS;
    let sender =
        Sender::new(&probe_cfg).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let meter = Meter::new(&probe_cfg);
    let mut tx = TxState::new(sender, sockets, config);
    let mut rx = RxState::new(meter, sockets, config, &probe_cfg);
    let stopped_early = match config.threads {
        Threads::OneLoop { cpu } => {
            if let Some(cpu) = cpu {
                cpu::pin_current_thread(cpu)?;
            }
            let _ = cpu::set_timer_slack_ns(1);
            one_loop(&mut tx, &mut rx, config, stop, progress)?
        }
        Threads::Split { tx_cpu, rx_cpu } => {
            split(&mut tx, &mut rx, config, stop, progress, tx_cpu, rx_cpu)?
        }
    };
    let counts = tx.sender.counts();
    rx.finish_interval(now_ns());
    Ok(GeneratorResult {
        loss_bursts: rx.meter.loss_bursts(&counts),
        report: rx.meter.report(&counts),
        intervals: rx.intervals,
        start_ns: probe_cfg.start_ns,
        first_send_ns: tx.first_send_ns.unwrap_or(probe_cfg.start_ns),
        last_send_ns: tx.last_send_ns,
        timestamp_source: sockets[0].rx_timestamp_source(),
        stopped_early,
    })
}

/// The sending side: the sender core and one batch per flow.
struct TxState<'a> {
    sender: Sender,
    sockets: &'a [UdpSocket],
    batches: Vec<SendBatch>,
    scratch: Vec<u8>,
    target: SocketAddr,
    first_send_ns: Option<u64>,
    last_send_ns: u64,
    total: u64,
}

impl<'a> TxState<'a> {
    fn new(sender: Sender, sockets: &'a [UdpSocket], config: &GeneratorConfig) -> Self {
        let len = config.probe.payload_len;
        TxState {
            sender,
            sockets,
            batches: sockets
                .iter()
                .map(|_| SendBatch::new(config.batch, len))
                .collect(),
            scratch: vec![0; len],
            target: config.target,
            first_send_ns: None,
            last_send_ns: 0,
            total: 0,
        }
    }

    /// Queues the probes due at `now`, at most one batch per flow, and sends them. A sender
    /// that is behind its schedule catches up over several calls, with the receive side served
    /// in between.
    fn send_due(&mut self, now: u64) -> io::Result<()> {
        // A batch still holding probes the socket did not take gets no new ones this round.
        while self.batches.iter().all(|b| !b.is_full()) {
            let Some(t) = self.sender.poll_transmit(now, &mut self.scratch) else {
                break;
            };
            // Every batch had room before this probe was made.
            if let Some(slot) = self.batches[t.flow as usize].push(t.len, Some(self.target)) {
                slot.copy_from_slice(&self.scratch[..t.len]);
            }
        }
        flush(
            self.sockets,
            &mut self.batches,
            &mut self.first_send_ns,
            &mut self.last_send_ns,
            &mut self.total,
        )
    }

    fn is_done(&self) -> bool {
        self.sender.poll_timeout().is_none() && self.batches.iter().all(|b| b.is_empty())
    }
}

/// Stamps the actual send time into every queued probe and sends what the sockets take.
fn flush(
    sockets: &[UdpSocket],
    batches: &mut [SendBatch],
    first: &mut Option<u64>,
    last: &mut u64,
    total: &mut u64,
) -> io::Result<()> {
    for (socket, batch) in sockets.iter().zip(batches.iter_mut()) {
        if batch.is_empty() {
            continue;
        }
        let t = now_ns();
        for i in 0..batch.len() {
            if let Some(slot) = batch.slot_mut(i) {
                probe::Packet::new_unchecked(slot).set_actual_send_ns(t);
            }
        }
        let sent = socket.send_batch(batch)?;
        if sent > 0 {
            first.get_or_insert(t);
            *last = t;
            *total += sent as u64;
        }
    }
    Ok(())
}

/// The receiving side: the meter, the interval log and the progress clock.
struct RxState<'a> {
    meter: Meter,
    sockets: &'a [UdpSocket],
    batch: RecvBatch,
    intervals: Vec<Interval>,
    start_ns: u64,
    total_ns: u64,
    interval_ns: u64,
    next_interval_ns: u64,
    next_progress_ns: u64,
    expected: u64,
}

impl<'a> RxState<'a> {
    fn new(
        meter: Meter,
        sockets: &'a [UdpSocket],
        config: &GeneratorConfig,
        probe_cfg: &ProbeConfig,
    ) -> Self {
        let interval_ns = config.interval_ns.max(1_000_000);
        RxState {
            meter,
            sockets,
            // Room for datagrams longer than ours, so foreign ones are read whole and dropped.
            batch: RecvBatch::new(config.batch, probe_cfg.payload_len.max(2048)),
            intervals: Vec::new(),
            start_ns: probe_cfg.start_ns,
            total_ns: probe_cfg.duration_ns,
            interval_ns,
            next_interval_ns: probe_cfg.start_ns + interval_ns,
            next_progress_ns: 0,
            expected: 0,
        }
    }

    /// Reads what the sockets hold; returns how many datagrams came.
    fn receive(&mut self) -> io::Result<usize> {
        let mut n = 0;
        for socket in self.sockets {
            loop {
                let got = socket.recv_batch(&mut self.batch)?;
                if got == 0 {
                    break;
                }
                n += got;
                for pkt in self.batch.iter() {
                    self.meter.handle_response(pkt.rx_ns, pkt.data);
                }
                if got < self.batch.capacity() {
                    break;
                }
            }
        }
        Ok(n)
    }

    fn tick(&mut self, now: u64, sent: u64, progress: &mut (dyn FnMut(Progress) + Send)) {
        while now >= self.next_interval_ns {
            let start = self.next_interval_ns - self.interval_ns;
            self.intervals.push(Interval {
                start_offset_ns: start - self.start_ns,
                duration_ns: self.interval_ns,
                histogram: self.meter.take_interval(),
            });
            self.next_interval_ns += self.interval_ns;
        }
        if now >= self.next_progress_ns {
            self.next_progress_ns = now + PROGRESS_NS;
            progress(Progress {
                elapsed_ns: now.saturating_sub(self.start_ns).min(self.total_ns),
                total_ns: self.total_ns,
                sent,
                received: self.meter.received(),
            });
        }
    }

    fn finish_interval(&mut self, now: u64) {
        let start = self.next_interval_ns - self.interval_ns;
        let h = self.meter.take_interval();
        if !h.is_empty() || self.intervals.is_empty() {
            self.intervals.push(Interval {
                start_offset_ns: start.saturating_sub(self.start_ns),
                duration_ns: now.saturating_sub(start).clamp(1, self.interval_ns),
                histogram: h,
            });
        }
    }

    fn all_back(&self) -> bool {
        self.meter.distinct_responses() >= self.expected
    }
}

fn one_loop(
    tx: &mut TxState<'_>,
    rx: &mut RxState<'_>,
    config: &GeneratorConfig,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> io::Result<bool> {
    let mut done_at: Option<u64> = None;
    loop {
        if stop.is_raised() {
            return Ok(true);
        }
        let now = now_ns();
        tx.send_due(now)?;
        let got = rx.receive()?;
        rx.tick(now, tx.total, progress);
        if done_at.is_none() && tx.is_done() {
            done_at = Some(now);
            rx.expected = tx.total;
        }
        if let Some(t) = done_at {
            if rx.all_back() || now >= t + config.grace_ns {
                return Ok(false);
            }
        }
        if config.poll == PollMode::Block && got == 0 {
            let wake = match (tx.sender.poll_timeout(), done_at) {
                (Some(due), _) => due.saturating_sub(SPIN_NS),
                (None, Some(t)) => t + config.grace_ns,
                (None, None) => now,
            };
            let wake = wake.min(now + PROGRESS_NS);
            if wake > now {
                let socks: Vec<&UdpSocket> = rx.sockets.iter().collect();
                wait_any_readable(&socks, Some(Duration::from_nanos(wake - now)))?;
            }
        }
    }
}

fn split(
    tx: &mut TxState<'_>,
    rx: &mut RxState<'_>,
    config: &GeneratorConfig,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
    tx_cpu: usize,
    rx_cpu: usize,
) -> io::Result<bool> {
    let sent = AtomicU64::new(0);
    let tx_done = AtomicBool::new(false);
    let done_at = AtomicU64::new(0);
    std::thread::scope(|s| {
        let sender = s.spawn(|| -> io::Result<()> {
            cpu::pin_current_thread(tx_cpu)?;
            let _ = cpu::set_timer_slack_ns(1);
            let result = (|| {
                while !stop.is_raised() && !tx.is_done() {
                    let now = now_ns();
                    tx.send_due(now)?;
                    sent.store(tx.total, Ordering::Relaxed);
                    if let Some(due) = tx.sender.poll_timeout() {
                        if config.poll == PollMode::Block && due > now + SPIN_NS {
                            std::thread::sleep(Duration::from_nanos(due - now - SPIN_NS));
                        }
                    }
                }
                Ok(())
            })();
            sent.store(tx.total, Ordering::Relaxed);
            done_at.store(now_ns(), Ordering::Relaxed);
            tx_done.store(true, Ordering::Release);
            result
        });
        let receiver = s.spawn(|| -> io::Result<bool> {
            cpu::pin_current_thread(rx_cpu)?;
            let _ = cpu::set_timer_slack_ns(1);
            loop {
                if stop.is_raised() {
                    return Ok(true);
                }
                let got = rx.receive()?;
                let now = now_ns();
                rx.tick(now, sent.load(Ordering::Relaxed), progress);
                if tx_done.load(Ordering::Acquire) {
                    rx.expected = sent.load(Ordering::Relaxed);
                    if rx.all_back() || now >= done_at.load(Ordering::Relaxed) + config.grace_ns {
                        return Ok(false);
                    }
                }
                if config.poll == PollMode::Block && got == 0 {
                    let socks: Vec<&UdpSocket> = rx.sockets.iter().collect();
                    wait_any_readable(&socks, Some(Duration::from_millis(10)))?;
                }
            }
        });
        let tx_result = sender
            .join()
            .map_err(|_| io::Error::other("send thread panicked"))?;
        let rx_result = receiver
            .join()
            .map_err(|_| io::Error::other("receive thread panicked"))?;
        tx_result?;
        rx_result
    })
}
