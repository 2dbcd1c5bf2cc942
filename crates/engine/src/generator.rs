//! The generator: sends probes on an open-loop schedule and meters their responses.
//!
//! The engine only moves packets: when the run starts, which probe is due, what a response
//! means, the interval log, progress and when to stop all come from [`latlab_probe::Run`].
//! It is written once, generic over its datagram ports ([`latlab_io::port::DatagramPort`]):
//! kernel UDP sockets, one per flow ([`run`]), or one AF_XDP endpoint for every flow
//! ([`run_xdp`]), with any meter ([`latlab_probe::Metering`]): [`Meter`] here, the fan-out
//! meter for the game clients in [`crate::game`]. It runs in one loop, or in a send thread and
//! a receive thread pinned to their cores, each with its half of the run and of every port.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use latlab_io::clock::now_ns;
use latlab_io::cpu;
use latlab_io::port::{
    DatagramPort, DatagramRx, DatagramTx, LinkRoute, PortSizes, SendFailures, SendQueue, UdpMode,
    UdpPort, XdpEndpoint,
};
use latlab_io::udp::{wait_any_readable, UdpSocket};
use latlab_io::xdp::XdpSocket;
use latlab_probe::protocol::SharedProtocol;
use latlab_probe::{
    Meter, Metering, Outcome, ProbeConfig, Receiving, Run, RunConfig, SendStatus, Sending,
};
use latlab_wire::probe;

/// Where a generator over AF_XDP sends: the Ethernet, IPv4 and UDP addresses of its frames.
pub use crate::blaster::FrameAddrs;
use crate::blaster::FCS_LEN;
use crate::stalls::StallWatch;
use crate::wait::SleepSpin;
use crate::{poll_now, PollMode, PollSwitch, Stop};
use latlab_stats::stalls::Stalls;
use latlab_wire::udp_frame::HEADERS_LEN;

pub use latlab_probe::{Interval, Progress};

mod result;
use result::drive_to_result;
pub use result::GeneratorResult;

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
    /// When set, the mode is read from it at every turn instead of `poll`.
    pub switch: Option<PollSwitch>,
    /// How long to wait for responses after the last probe was sent.
    pub grace_ns: u64,
    /// Length of one interval of the interval log.
    pub interval_ns: u64,
    /// Cores.
    pub threads: Threads,
    /// Speak this protocol to a server latlab did not write instead of sending latlab's probes
    /// ([`latlab_probe::protocol`]); `None`: latlab's probes.
    pub protocol: Option<SharedProtocol>,
    /// The flows' local addresses, one per flow (a protocol checks mapped addresses against
    /// them); empty when no protocol asks.
    pub locals: Vec<SocketAddr>,
    /// Give progress reports what a live view draws ([`latlab_probe::RunConfig::live`]).
    pub live: bool,
}

/// The longest a blocked loop sleeps (so progress and the stop flag are looked at).
const MAX_WAIT_NS: u64 = latlab_probe::PROGRESS_NS;
/// [`MAX_WAIT_NS`] as a duration.
const MAX_WAIT: Duration = Duration::from_nanos(MAX_WAIT_NS);
/// Receive slots are at least this long, so foreign datagrams longer than ours are read whole
/// and dropped.
const MIN_RX_SLOT: usize = 2048;
/// Receive slots of a protocol run: the longest UDP payload over IPv4, so that a reply of any
/// length is read whole (and judged) instead of cut.
const MAX_DATAGRAM: usize = 65_536;

/// Runs one generator: one socket per flow (`sockets.len()` must equal the flow count), each
/// a batched kernel UDP port.
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
    // A protocol's server may answer with up to a whole datagram: read it whole.
    let slot = match config.protocol {
        Some(_) => MAX_DATAGRAM,
        None => MIN_RX_SLOT,
    };
    let sizes = PortSizes::new(config.batch, config.probe.payload_len.max(slot));
    let mut ports: Vec<UdpPort<&UdpSocket>> = sockets
        .iter()
        .map(|s| UdpPort::new(s, UdpMode::Batched, sizes))
        .collect();
    let all: Vec<&UdpSocket> = sockets.iter().collect();
    let wait = |timeout: Duration| wait_any_readable(&all, Some(timeout)).map(drop);
    run_ports(&mut ports, Wait::Any(&wait), config, stop, progress)
}

/// Runs one generator over an AF_XDP socket whose program redirects UDP to `addrs.src`'s
/// port: the endpoint builds every frame (IPv4 and UDP checksums made in user space) from
/// `addrs` and reads the responses with the program's arrival stamps. Every flow leaves from
/// that one source port; the probe header tells the flows apart.
pub fn run_xdp(
    socket: XdpSocket,
    addrs: &FrameAddrs,
    config: &GeneratorConfig,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> io::Result<GeneratorResult> {
    let invalid = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
    let (SocketAddr::V4(src), IpAddr::V4(dst_ip)) = (addrs.src, addrs.dst.ip()) else {
        return Err(invalid("--io xdp sends IPv4 only".into()));
    };
    let frame_len = HEADERS_LEN + config.probe.payload_len;
    if frame_len > socket.max_tx_frame() || frame_len + FCS_LEN > 1518 {
        return Err(invalid(format!(
            "a probe of {} bytes does not fit an Ethernet frame (at most {} over --io xdp)",
            config.probe.payload_len,
            1518 - FCS_LEN - HEADERS_LEN
        )));
    }
    let sizes = PortSizes::new(config.batch, config.probe.payload_len);
    let mut endpoint = XdpEndpoint::new(socket, src.port(), sizes)?;
    endpoint.add_route(
        dst_ip,
        LinkRoute {
            peer_mac: addrs.dst_mac,
            local_mac: addrs.src_mac,
            local_ip: *src.ip(),
        },
    );
    run_ports(
        std::slice::from_mut(&mut endpoint),
        Wait::Port,
        config,
        stop,
        progress,
    )
}

/// How a blocked loop waits for responses.
#[derive(Clone, Copy)]
pub enum Wait<'a> {
    /// On the one port's own readable-wait (a run over a single port).
    Port,
    /// With this call, which returns when any of the ports is readable or the time passed.
    Any(&'a (dyn Fn(Duration) -> io::Result<()> + Sync)),
}

impl std::fmt::Debug for Wait<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Wait::Port => "Wait::Port",
            Wait::Any(_) => "Wait::Any",
        })
    }
}

/// Runs one generator over `ports`: probes of flow `f` leave through `ports[f % ports.len()]`
/// for `config.target`, and responses are read from every port.
pub fn run_ports<P: DatagramPort>(
    ports: &mut [P],
    wait: Wait<'_>,
    config: &GeneratorConfig,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> io::Result<GeneratorResult> {
    let Some(first) = ports.first() else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a generator needs at least one port",
        ));
    };
    let timestamp_source = first.timestamp_source();
    let how = Drive {
        wait,
        target: config.target,
        batch: config.batch,
        poll: config.poll,
        switch: config.switch.as_ref(),
        threads: config.threads,
    };
    let invalid = |e: latlab_probe::Error| io::Error::new(io::ErrorKind::InvalidInput, e);
    let start = now_ns();
    match &config.protocol {
        None => {
            let run = Run::new(&config.run_config(), start, Meter::new).map_err(invalid)?;
            drive_to_result(ports, how, run, stop, progress, timestamp_source)
        }
        Some(protocol) => {
            let run = Run::with_protocol(
                &config.run_config(),
                start,
                protocol.clone(),
                &config.locals,
                config.target,
            )
            .map_err(invalid)?;
            drive_to_result(ports, how, run, stop, progress, timestamp_source)
        }
    }
}

impl GeneratorConfig {
    /// What the sans-IO run needs of this configuration.
    fn run_config(&self) -> RunConfig {
        RunConfig {
            probe: self.probe.clone(),
            grace_ns: self.grace_ns,
            interval_ns: self.interval_ns,
            live: self.live,
        }
    }
}

/// Other traffic that rides along in the send loop (the game study's flooding client): it is
/// given a turn after every round of probes.
pub(crate) trait Background: Send {
    /// Sends (and reads) what is due at `now`.
    fn turn(&mut self, now: u64) -> io::Result<()>;
}

/// No other traffic.
pub(crate) struct NoBackground;

impl Background for NoBackground {
    #[inline]
    fn turn(&mut self, _now: u64) -> io::Result<()> {
        Ok(())
    }
}

/// How [`drive_counting`] moves packets.
#[derive(Clone, Copy)]
pub(crate) struct Drive<'a> {
    /// How a blocked loop waits.
    pub wait: Wait<'a>,
    /// Where every probe goes.
    pub target: SocketAddr,
    /// Datagrams per receive call (a port that fills it is read again at once).
    pub batch: usize,
    /// Busy polling or blocking.
    pub poll: PollMode,
    /// When set, the mode is read from it at every turn instead of `poll`.
    pub switch: Option<&'a PollSwitch>,
    /// Cores.
    pub threads: Threads,
}

/// Drives `run` over `ports` until it is done, in one loop or in a send thread and a receive
/// thread; a raised `stop` ends sending, and the run then ends as at its schedule's end (every
/// probe back, or the grace period over), so that probes in flight at the stop are not counted
/// lost. Returns what it measured and whether it was stopped, and adds
/// the probes the ports could not send to `send_failed`, by cause.
pub(crate) fn drive_counting<P: DatagramPort, M: Metering + Send, B: Background>(
    ports: &mut [P],
    how: Drive<'_>,
    run: Run<M>,
    background: B,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
    (send_failed, stalls): (&mut SendFailures, &mut Stalls),
) -> io::Result<(Outcome<M>, bool)> {
    let (sending, receiving) = run.into_parts();
    let (txs, rxs): (Vec<P::TxHalf<'_>>, Vec<P::RxHalf<'_>>) =
        ports.iter_mut().map(|p| p.split()).unzip();
    let mut tx = TxState {
        scratch: vec![0; sending.config().payload_len],
        sending,
        ports: txs,
        target: how.target,
        background,
        send_failed: SendFailures::default(),
        watch: StallWatch::new(now_ns()),
    };
    let mut rx = RxState {
        receiving,
        ports: rxs,
        batch: how.batch.max(1),
        wait: how.wait,
        watch: StallWatch::new(now_ns()),
    };
    let stopped_early = match how.threads {
        Threads::OneLoop { cpu } => {
            if let Some(cpu) = cpu {
                cpu::pin_current_thread(cpu)?;
            }
            let _ = cpu::set_timer_slack_ns(1);
            one_loop(&mut tx, &mut rx, (how.poll, how.switch), stop, progress)?
        }
        Threads::Split { tx_cpu, rx_cpu } => {
            let poll = (how.poll, how.switch);
            split(&mut tx, &mut rx, poll, stop, progress, tx_cpu, rx_cpu)?
        }
    };
    *send_failed = tx.send_failed;
    let end = now_ns();
    *stalls = tx.watch.finish(end);
    if matches!(how.threads, Threads::Split { .. }) {
        stalls.merge(&rx.watch.finish(end));
    }
    Ok((
        Run::from_parts(tx.sending, rx.receiving).finish(now_ns()),
        stopped_early,
    ))
}

/// Writes the actual send time into a probe right before it leaves.
#[inline]
fn stamp_send_time(payload: &mut [u8], now_ns: u64) {
    probe::Packet::new_unchecked(payload).set_actual_send_ns(now_ns);
}

/// The sending side: the run's send half and the ports' send halves.
struct TxState<T, B> {
    sending: Sending,
    ports: Vec<T>,
    target: SocketAddr,
    scratch: Vec<u8>,
    background: B,
    /// Probes a port could not send to the target, by cause.
    send_failed: SendFailures,
    /// The sending loop's (the one loop's) stalls.
    watch: StallWatch,
}

impl<T: DatagramTx, B: Background> TxState<T, B> {
    /// Queues the probes due at `now`, at most one batch per port, and sends them. A sender
    /// that is behind its schedule catches up over several calls, with the receive side served
    /// in between; a port still holding probes it did not take gets no new ones this round.
    fn send_due(&mut self, now: u64) -> io::Result<()> {
        let n = self.ports.len();
        while self.ports.iter_mut().all(|p| !p.queue().is_full()) {
            let Some(t) = self.sending.poll_transmit(now, &mut self.scratch) else {
                break;
            };
            let port = &mut self.ports[t.flow as usize % n];
            if let Some(slot) = port.queue().push(self.target, t.len) {
                // The port's slot holds the whole probe (the ports are made for its length).
                let n = slot.len();
                slot.copy_from_slice(&self.scratch[..n]);
            }
        }
        for port in &mut self.ports {
            if port.queue().is_empty() {
                continue;
            }
            // A probe the target's address cannot take is counted (as lost, and by cause) and
            // the run goes on.
            let failed = &mut self.send_failed;
            let flushed = if self.sending.stamps_payload() {
                port.flush(&mut stamp_send_time, |u| failed.count(u.failure))?
            } else {
                port.flush(&mut |_: &mut [u8], _| {}, |u| failed.count(u.failure))?
            };
            self.sending
                .handle_sent(flushed.sent_ns, flushed.sent as u64);
            self.sending.handle_send_failed(now, flushed.failed as u64);
        }
        self.background.turn(now)
    }
}

/// The receiving side: the run's receive half and the ports' receive halves.
struct RxState<'w, M, R> {
    receiving: Receiving<M>,
    ports: Vec<R>,
    batch: usize,
    wait: Wait<'w>,
    /// The receive thread's stalls (split threads only).
    watch: StallWatch,
}

impl<M: Metering, R: DatagramRx> RxState<'_, M, R> {
    /// Reads what the ports hold at `now`; returns how many datagrams came. A datagram the
    /// port could not read as UDP comes with an empty payload and is counted as not a probe.
    fn receive(&mut self, now: u64) -> io::Result<usize> {
        let mut n = 0;
        for (i, port) in self.ports.iter_mut().enumerate() {
            loop {
                let receiving = &mut self.receiving;
                let got = port.recv(|d| {
                    receiving.handle_datagram_from(now, i, (d.rx_ns, d.from, d.truncated), d.data);
                })?;
                n += got;
                if got < self.batch {
                    break;
                }
            }
        }
        Ok(n)
    }

    /// Blocks until a response is readable or `timeout` passes.
    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        match self.wait {
            Wait::Any(wait) => wait(timeout),
            Wait::Port => match self.ports.first_mut() {
                Some(port) => port.wait_readable(Some(timeout)).map(drop),
                None => Ok(()),
            },
        }
    }

    /// Closes the intervals that ended by `now` and reports progress when it is time.
    fn tick(&mut self, now: u64, progress: &mut (dyn FnMut(Progress) + Send)) {
        self.receiving.handle_timeout(now);
        if let Some(p) = self.receiving.poll_progress(now) {
            progress(p);
        }
    }
}

fn one_loop<T: DatagramTx, B: Background, M: Metering, R: DatagramRx>(
    tx: &mut TxState<T, B>,
    rx: &mut RxState<'_, M, R>,
    (poll, switch): (PollMode, Option<&PollSwitch>),
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> io::Result<bool> {
    let mut waits = SleepSpin::new();
    let mut stopped = false;
    loop {
        let now = now_ns();
        tx.watch.tick(now);
        if !stopped && stop.is_raised() {
            // Sending ends here; the probes in flight are waited for, for the grace period,
            // as at the schedule's end: they are not lost.
            stopped = true;
            tx.sending.stop(now);
        }
        tx.send_due(now)?;
        rx.receiving.handle_sending(tx.sending.status());
        let got = rx.receive(now)?;
        rx.tick(now, progress);
        if rx.receiving.is_done(now) {
            return Ok(stopped);
        }
        if poll_now(poll, switch) == PollMode::Block && got == 0 {
            // The next send is a deadline to keep (sleep, then spin the last stretch); the
            // end of the grace period is not.
            let sleep = match tx.sending.poll_timeout() {
                Some(due) => waits.sleep_for(now, Some(due), MAX_WAIT),
                None if tx.sending.is_finished() => {
                    let end = rx.receiving.poll_timeout().min(now + MAX_WAIT_NS);
                    Duration::from_nanos(end.saturating_sub(now))
                }
                // Probes handed out and not yet taken by a port: no sleeping.
                None => Duration::ZERO,
            };
            if !sleep.is_zero() {
                rx.wait(sleep)?;
                let woke = now_ns();
                waits.woke(woke);
                tx.watch.woke(woke, now + sleep.as_nanos() as u64);
            }
        }
    }
}

fn split<T: DatagramTx, B: Background, M: Metering + Send, R: DatagramRx>(
    tx: &mut TxState<T, B>,
    rx: &mut RxState<'_, M, R>,
    (poll, switch): (PollMode, Option<&PollSwitch>),
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
            let mut waits = SleepSpin::new();
            let result = (|| {
                while !tx.sending.is_finished() {
                    let now = now_ns();
                    tx.watch.tick(now);
                    if stop.is_raised() {
                        // No new probe; those handed out still leave (or fail).
                        tx.sending.stop(now);
                    }
                    tx.send_due(now)?;
                    sent.store(tx.sending.status().sent, Ordering::Relaxed);
                    if let (Some(due), PollMode::Block) =
                        (tx.sending.poll_timeout(), poll_now(poll, switch))
                    {
                        let sleep = waits.sleep_for(now, Some(due), MAX_WAIT);
                        if !sleep.is_zero() {
                            std::thread::sleep(sleep);
                            let woke = now_ns();
                            waits.woke(woke);
                            tx.watch.woke(woke, now + sleep.as_nanos() as u64);
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
                let now = now_ns();
                rx.watch.tick(now);
                let got = rx.receive(now)?;
                let finished = tx_done.load(Ordering::Acquire);
                rx.receiving.handle_sending(SendStatus {
                    sent: sent.load(Ordering::Relaxed),
                    finished_at: finished.then(|| done_at.load(Ordering::Relaxed)),
                });
                rx.tick(now, progress);
                // A stopped send thread's probes in flight are waited for, as in one loop.
                if rx.receiving.is_done(now) {
                    return Ok(stop.is_raised());
                }
                if poll_now(poll, switch) == PollMode::Block && got == 0 {
                    rx.wait(Duration::from_millis(10))?;
                    rx.watch.resumed(now_ns());
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
