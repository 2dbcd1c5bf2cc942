//! The generator: sends probes on an open-loop schedule and meters their responses.
//!
//! The engine only moves packets: when the run starts, which probe is due, what a response
//! means, the interval log, progress and when to stop all come from [`latlab_probe::Run`].
//! It runs over any transport ([`ProbeTx`], [`ProbeRx`]) with any meter
//! ([`latlab_probe::Metering`]): kernel UDP sockets or AF_XDP with [`Meter`] here, the game
//! clients with [`latlab_probe::FanoutMeter`] in [`crate::game`].

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use latlab_io::clock::now_ns;
use latlab_io::cpu;
use latlab_io::udp::{wait_any_readable, RecvBatch, SendBatch, TimestampSource, UdpSocket};
use latlab_io::xdp::XdpSocket;
use latlab_probe::{
    Meter, MeterReport, Metering, Outcome, ProbeConfig, Receiving, Run, RunConfig, SendStatus,
    Sending,
};
use latlab_wire::probe;

pub use latlab_probe::{Interval, Progress};

/// Where a generator over AF_XDP sends: the Ethernet, IPv4 and UDP addresses it writes itself.
pub use crate::blaster::FrameAddrs;
use crate::blaster::FCS_LEN;
use crate::frame::{self, HEADERS_LEN};
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
/// The longest a blocked loop sleeps (so progress and the stop flag are looked at).
const MAX_WAIT_NS: u64 = latlab_probe::PROGRESS_NS;

/// The sending side of a generator's transport: queues probes and sends them in batches.
pub trait ProbeTx: Send {
    /// Whether another probe may be queued now (a transport still holding probes it could
    /// not send says no, so a late sender catches up in steps).
    fn has_room(&self) -> bool;
    /// Queues `probe`, a whole UDP payload, on `flow`.
    fn push(&mut self, flow: u32, probe: &[u8]);
    /// Stamps the actual send time into every queued probe and sends what the transport
    /// takes; calls `sent(count, send_ns)` for each group that left.
    fn send_queued(&mut self, sent: &mut dyn FnMut(u64, u64)) -> io::Result<()>;
}

/// The receiving side of a generator's transport.
pub trait ProbeRx: Send {
    /// Hands every response now readable to `f(receiver, rx_ns, udp_payload)`, where
    /// `receiver` is the index of the socket it came in on; returns how many. A frame that is
    /// not a UDP datagram of ours is handed with an empty payload, so it is counted as not a
    /// probe.
    fn receive<F: FnMut(usize, u64, &[u8])>(&mut self, f: F) -> io::Result<usize>;
    /// Blocks until a response is readable or `timeout` passes.
    fn wait(&mut self, timeout: Duration) -> io::Result<()>;
    /// Where receive stamps come from.
    fn timestamp_source(&self) -> TimestampSource;
}

/// Kernel UDP sockets, one per flow, sent to with `sendmmsg`.
pub(crate) struct UdpTx<'a> {
    sockets: &'a [UdpSocket],
    batches: Vec<SendBatch>,
    target: SocketAddr,
}

impl<'a> UdpTx<'a> {
    /// Probes of flow `f` leave from `sockets[f]` for `target`, `batch` at a time.
    pub(crate) fn new(
        sockets: &'a [UdpSocket],
        target: SocketAddr,
        batch: usize,
        len: usize,
    ) -> Self {
        UdpTx {
            sockets,
            batches: sockets.iter().map(|_| SendBatch::new(batch, len)).collect(),
            target,
        }
    }
}

impl ProbeTx for UdpTx<'_> {
    fn has_room(&self) -> bool {
        self.batches.iter().all(|b| !b.is_full())
    }

    fn push(&mut self, flow: u32, probe: &[u8]) {
        if let Some(slot) = self.batches[flow as usize].push(probe.len(), Some(self.target)) {
            slot.copy_from_slice(probe);
        }
    }

    fn send_queued(&mut self, on_sent: &mut dyn FnMut(u64, u64)) -> io::Result<()> {
        for (socket, batch) in self.sockets.iter().zip(self.batches.iter_mut()) {
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
                on_sent(sent as u64, t);
            }
        }
        Ok(())
    }
}

/// Kernel UDP sockets read with `recvmmsg`; the receiver index is the socket's.
pub(crate) struct UdpRx<'a> {
    sockets: &'a [UdpSocket],
    batch: RecvBatch,
}

impl<'a> UdpRx<'a> {
    /// Reads `sockets`, `batch` datagrams of up to `len` bytes (at least 2048, so foreign
    /// datagrams longer than ours are read whole and dropped) at a time.
    pub(crate) fn new(sockets: &'a [UdpSocket], batch: usize, len: usize) -> Self {
        UdpRx {
            sockets,
            batch: RecvBatch::new(batch, len.max(2048)),
        }
    }
}

impl ProbeRx for UdpRx<'_> {
    fn receive<F: FnMut(usize, u64, &[u8])>(&mut self, mut f: F) -> io::Result<usize> {
        let mut n = 0;
        for (i, socket) in self.sockets.iter().enumerate() {
            loop {
                let got = socket.recv_batch(&mut self.batch)?;
                if got == 0 {
                    break;
                }
                n += got;
                for pkt in self.batch.iter() {
                    f(i, pkt.rx_ns, pkt.data);
                }
                if got < self.batch.capacity() {
                    break;
                }
            }
        }
        Ok(n)
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        let socks: Vec<&UdpSocket> = self.sockets.iter().collect();
        wait_any_readable(&socks, Some(timeout)).map(drop)
    }

    fn timestamp_source(&self) -> TimestampSource {
        self.sockets[0].rx_timestamp_source()
    }
}

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
    let tx = UdpTx::new(
        sockets,
        config.target,
        config.batch,
        config.probe.payload_len,
    );
    let rx = UdpRx::new(sockets, config.batch, config.probe.payload_len);
    run_with(tx, rx, config, stop, progress)
}

/// Runs one generator over any transport.
pub fn run_with<T: ProbeTx, R: ProbeRx>(
    transport_tx: T,
    transport_rx: R,
    config: &GeneratorConfig,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> io::Result<GeneratorResult> {
    let timestamp_source = transport_rx.timestamp_source();
    let run = Run::new(&config.run_config(), now_ns(), Meter::new)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    let (outcome, stopped_early) = drive(
        transport_tx,
        transport_rx,
        run,
        config.poll,
        config.threads,
        stop,
        progress,
    )?;
    Ok(GeneratorResult {
        loss_bursts: outcome.meter.loss_bursts(&outcome.counts),
        report: outcome.meter.report(&outcome.counts),
        intervals: outcome.intervals,
        start_ns: outcome.start_ns,
        first_send_ns: outcome.first_send_ns,
        last_send_ns: outcome.last_send_ns,
        timestamp_source,
        stopped_early,
    })
}

impl GeneratorConfig {
    /// What the sans-IO run needs of this configuration.
    fn run_config(&self) -> RunConfig {
        RunConfig {
            probe: self.probe.clone(),
            grace_ns: self.grace_ns,
            interval_ns: self.interval_ns,
        }
    }
}

/// Drives `run` over a transport until it is done or `stop` is raised, in one loop or in a
/// send thread and a receive thread; returns what it measured and whether it was stopped.
pub(crate) fn drive<T: ProbeTx, R: ProbeRx, M: Metering + Send>(
    transport_tx: T,
    transport_rx: R,
    run: Run<M>,
    poll: PollMode,
    threads: Threads,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> io::Result<(Outcome<M>, bool)> {
    let (sending, receiving) = run.into_parts();
    let mut tx = TxState::new(sending, transport_tx);
    let mut rx = RxState {
        receiving,
        transport: transport_rx,
    };
    let stopped_early = match threads {
        Threads::OneLoop { cpu } => {
            if let Some(cpu) = cpu {
                cpu::pin_current_thread(cpu)?;
            }
            let _ = cpu::set_timer_slack_ns(1);
            one_loop(&mut tx, &mut rx, poll, stop, progress)?
        }
        Threads::Split { tx_cpu, rx_cpu } => {
            split(&mut tx, &mut rx, poll, stop, progress, tx_cpu, rx_cpu)?
        }
    };
    Ok((
        Run::from_parts(tx.sending, rx.receiving).finish(now_ns()),
        stopped_early,
    ))
}

/// The sending side: the run's send half and the transport's queue.
struct TxState<T> {
    sending: Sending,
    transport: T,
    scratch: Vec<u8>,
}

impl<T: ProbeTx> TxState<T> {
    fn new(sending: Sending, transport: T) -> Self {
        TxState {
            scratch: vec![0; sending.config().payload_len],
            sending,
            transport,
        }
    }

    /// Queues the probes due at `now`, at most one batch per flow, and sends them. A sender
    /// that is behind its schedule catches up over several calls, with the receive side served
    /// in between.
    fn send_due(&mut self, now: u64) -> io::Result<()> {
        // A transport still holding probes it did not take gets no new ones this round.
        while self.transport.has_room() {
            let Some(t) = self.sending.poll_transmit(now, &mut self.scratch) else {
                break;
            };
            self.transport.push(t.flow, &self.scratch[..t.len]);
        }
        let sending = &mut self.sending;
        self.transport
            .send_queued(&mut |n, t| sending.handle_sent(t, n))
    }
}

/// The receiving side: the run's receive half and the transport.
struct RxState<M, R> {
    receiving: Receiving<M>,
    transport: R,
}

impl<M: Metering, R: ProbeRx> RxState<M, R> {
    /// Reads what the transport holds at `now`; returns how many datagrams came.
    fn receive(&mut self, now: u64) -> io::Result<usize> {
        let receiving = &mut self.receiving;
        self.transport.receive(|receiver, rx_ns, data| {
            receiving.handle_datagram(now, receiver, rx_ns, data);
        })
    }

    /// Closes the intervals that ended by `now` and reports progress when it is time.
    fn tick(&mut self, now: u64, progress: &mut (dyn FnMut(Progress) + Send)) {
        self.receiving.handle_timeout(now);
        if let Some(p) = self.receiving.poll_progress(now) {
            progress(p);
        }
    }
}

fn one_loop<T: ProbeTx, M: Metering, R: ProbeRx>(
    tx: &mut TxState<T>,
    rx: &mut RxState<M, R>,
    poll: PollMode,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> io::Result<bool> {
    loop {
        if stop.is_raised() {
            return Ok(true);
        }
        let now = now_ns();
        tx.send_due(now)?;
        rx.receiving.handle_sending(tx.sending.status());
        let got = rx.receive(now)?;
        rx.tick(now, progress);
        if rx.receiving.is_done(now) {
            return Ok(false);
        }
        if poll == PollMode::Block && got == 0 {
            let wake = match tx.sending.poll_timeout() {
                Some(due) => due.saturating_sub(SPIN_NS),
                None if tx.sending.is_finished() => rx.receiving.poll_timeout(),
                // Probes handed out and not yet taken by the transport: no sleeping.
                None => now,
            };
            let wake = wake.min(now + MAX_WAIT_NS);
            if wake > now {
                rx.transport.wait(Duration::from_nanos(wake - now))?;
            }
        }
    }
}

fn split<T: ProbeTx, M: Metering + Send, R: ProbeRx>(
    tx: &mut TxState<T>,
    rx: &mut RxState<M, R>,
    poll: PollMode,
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
                while !stop.is_raised() && !tx.sending.is_finished() {
                    let now = now_ns();
                    tx.send_due(now)?;
                    sent.store(tx.sending.status().sent, Ordering::Relaxed);
                    if let Some(due) = tx.sending.poll_timeout() {
                        if poll == PollMode::Block && due > now + SPIN_NS {
                            std::thread::sleep(Duration::from_nanos(due - now - SPIN_NS));
                        }
                    }
                }
                Ok(())
            })();
            let status = tx.sending.status();
            sent.store(status.sent, Ordering::Relaxed);
            // A send thread that ended on an error or the stop flag ends sending now.
            done_at.store(status.finished_at.unwrap_or_else(now_ns), Ordering::Relaxed);
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
                let now = now_ns();
                let got = rx.receive(now)?;
                let finished = tx_done.load(Ordering::Acquire);
                rx.receiving.handle_sending(SendStatus {
                    sent: sent.load(Ordering::Relaxed),
                    finished_at: finished.then(|| done_at.load(Ordering::Relaxed)),
                });
                rx.tick(now, progress);
                if rx.receiving.is_done(now) {
                    return Ok(false);
                }
                if poll == PollMode::Block && got == 0 {
                    rx.transport.wait(Duration::from_millis(10))?;
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

/// An AF_XDP socket shared by the send and the receive side (each holds it only for one
/// batch call).
type SharedXdp<'a> = std::sync::Mutex<&'a mut XdpSocket>;

fn lock<'s, 'a>(socket: &'s SharedXdp<'a>) -> std::sync::MutexGuard<'s, &'a mut XdpSocket> {
    // A panic on the other side ends the run anyway; the socket itself stays consistent.
    socket.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whole frames (Ethernet, IPv4, UDP, probe) written into the socket's UMEM.
struct XdpTx<'s, 'a> {
    socket: &'s SharedXdp<'a>,
    /// Headers and a zero payload of the probe's length, checksums made for that length.
    template: Vec<u8>,
    frames: Vec<Vec<u8>>,
    queued: usize,
}

impl ProbeTx for XdpTx<'_, '_> {
    fn has_room(&self) -> bool {
        self.queued < self.frames.len()
    }

    fn push(&mut self, _flow: u32, probe: &[u8]) {
        let Some(frame) = self.frames.get_mut(self.queued) else {
            return;
        };
        frame.copy_from_slice(&self.template);
        let n = probe.len().min(frame.len() - HEADERS_LEN);
        frame[HEADERS_LEN..HEADERS_LEN + n].copy_from_slice(&probe[..n]);
        self.queued += 1;
    }

    fn send_queued(&mut self, on_sent: &mut dyn FnMut(u64, u64)) -> io::Result<()> {
        if self.queued == 0 {
            return Ok(());
        }
        let mut socket = lock(self.socket);
        let t = now_ns();
        let mut sent = 0;
        for frame in &mut self.frames[..self.queued] {
            probe::Packet::new_unchecked(&mut frame[HEADERS_LEN..]).set_actual_send_ns(t);
            frame::refill_udp_checksum(frame);
            if !socket.send(frame)? {
                socket.flush_tx()?;
                if !socket.send(frame)? {
                    break;
                }
            }
            sent += 1;
        }
        socket.flush_tx()?;
        drop(socket);
        // What the TX ring had no room for waits for the next call, in order.
        self.frames[..self.queued].rotate_left(sent);
        self.queued -= sent;
        if sent > 0 {
            on_sent(sent as u64, t);
        }
        Ok(())
    }
}

/// Frames the XDP program redirected: IPv4 UDP to our port; the UDP payload goes to the meter.
struct XdpRx<'s, 'a> {
    socket: &'s SharedXdp<'a>,
    waiter: latlab_io::xdp::XdpWaiter,
    port: u16,
}

impl ProbeRx for XdpRx<'_, '_> {
    fn receive<F: FnMut(usize, u64, &[u8])>(&mut self, mut f: F) -> io::Result<usize> {
        let port = self.port;
        lock(self.socket).recv_batch_stamped(|frame, stamp| {
            // The XDP program's stamp; a frame without one is stamped as read.
            let rx_ns = stamp.unwrap_or_else(now_ns);
            let payload = frame::parse_udp(frame).filter(|d| d.dst.port() == port);
            f(0, rx_ns, payload.map_or(&[], |d| d.payload));
        })
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        self.waiter.wait_readable(Some(timeout)).map(drop)
    }

    fn timestamp_source(&self) -> TimestampSource {
        TimestampSource::XdpProgram
    }
}

/// Runs one generator over an AF_XDP socket whose program redirects UDP to `addrs.src`'s
/// port: probes leave as whole frames built here (IPv4 and UDP checksums made in user space)
/// from `addrs`, responses are read from the RX ring with the program's arrival stamps. Every flow leaves
/// from that one source port; the probe header tells the flows apart.
pub fn run_xdp(
    socket: &mut XdpSocket,
    addrs: &FrameAddrs,
    config: &GeneratorConfig,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> io::Result<GeneratorResult> {
    let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
    if !(addrs.src.is_ipv4() && addrs.dst.is_ipv4()) {
        return Err(invalid("--io xdp sends IPv4 only".into()));
    }
    let frame_len = HEADERS_LEN + config.probe.payload_len;
    if frame_len > socket.max_tx_frame() || frame_len + FCS_LEN > 1518 {
        return Err(invalid(format!(
            "a probe of {} bytes does not fit an Ethernet frame (at most {} over --io xdp)",
            config.probe.payload_len,
            1518 - FCS_LEN - HEADERS_LEN
        )));
    }
    let template = crate::blaster::udp_frame(addrs, frame_len + FCS_LEN).map_err(invalid)?;
    let waiter = socket.waiter()?;
    let shared = std::sync::Mutex::new(socket);
    let tx = XdpTx {
        socket: &shared,
        frames: vec![template.clone(); config.batch.max(1)],
        template,
        queued: 0,
    };
    let rx = XdpRx {
        socket: &shared,
        waiter,
        port: addrs.src.port(),
    };
    run_with(tx, rx, config, stop, progress)
}
