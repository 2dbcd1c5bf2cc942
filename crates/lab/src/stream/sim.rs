//! Streams in virtual time: the transports that are sans-IO — latlab's own, KCP, QUIC through
//! `quinn-proto`, and plain UDP — carry many streams at once over `latlab_link::sim`'s network
//! (the emulator's own link model, one pipe each way), the clock jumping from one event to the
//! next. A two-hour stream takes seconds, so the transport study's grid reaches the paper's
//! sample counts (`study transports --virtual`).
//!
//! The same state machines run here as over sockets ([`super::latlab`], [`super::kcp`],
//! [`super::quic`]): only where their datagrams go and what time it is differ. Each stream
//! has its own pair of addresses; its sender starts its schedule one stagger after its
//! handshake ended (as `stream send` does), stamps every message with its intended send time
//! and hands it to the transport; the receiving side measures each delivery against that
//! time. Wire bytes are counted as over a socket: UDP payload plus IPv4 and UDP headers.
//!
//! The kernel's TCP and ENet (whose library keeps its own clock) have no virtual-time form:
//! [`why_not_virtual`] says so, and the study measures them in namespaces only.

use std::cell::RefCell;
use std::collections::{HashMap, VecDeque};
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use latlab_engine::Stop;
use latlab_link::sim::{self, Datagram, Network, Pair};
use latlab_link::LinkConfig;
use latlab_stats::LatencyHistogram;
use latlab_transport::{Config, ConnectionHandle, Endpoint as Transport, Event, Recovery};

use super::message::{self, Message};
use super::quic::{Identity, QuicCore};
use super::wire::{udp_overhead, WireCounts};
use super::TransportSpec;

/// How long a stream's handshake may take in virtual time before the stream is failed.
const HANDSHAKE_LIMIT_NS: u64 = 30_000_000_000;

/// Virtual time the driver runs between two looks at the stop flag.
const STEP_NS: u64 = 1_000_000_000;

/// Why `spec` cannot run in virtual time, or `None` when it can.
pub fn why_not_virtual(spec: &TransportSpec) -> Option<String> {
    match spec {
        TransportSpec::Udp
        | TransportSpec::Latlab { .. }
        | TransportSpec::Kcp { .. }
        | TransportSpec::Quic { .. } => None,
        TransportSpec::Tcp(_) => Some(format!(
            "{spec}: the kernel's TCP has no virtual-time form; measured in namespaces only"
        )),
        TransportSpec::Enet { .. } => Some(format!(
            "{spec}: ENet's library keeps its own clock; measured in namespaces only"
        )),
    }
}

/// What a virtual-time run is: `streams` streams of each transport, all at once over one
/// network (as a cell of the study runs every transport through one emulator).
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// The transports (each one [`why_not_virtual`] accepts).
    pub transports: Vec<TransportSpec>,
    /// Streams of each transport.
    pub streams: u32,
    /// Bytes per message (at least the message header).
    pub size: usize,
    /// Gap between a stream's messages.
    pub interval: Duration,
    /// How long each stream sends.
    pub duration: Duration,
    /// How long after a stream's last message its receiver still waits for messages.
    pub grace: Duration,
    /// The path from the senders to the receivers.
    pub forward: LinkConfig,
    /// The path back.
    pub reverse: LinkConfig,
}

/// What a virtual-time run measured for one transport, its streams together.
#[derive(Debug)]
pub struct SimOutcome {
    /// Messages handed to the transports.
    pub sent: u64,
    /// Distinct messages delivered.
    pub delivered: u64,
    /// Deliveries that were not a message of their stream.
    pub malformed: u64,
    /// Streams that failed (no handshake, a reliable transport that lost messages, a
    /// transport error), and the first reason.
    pub failed_streams: u32,
    /// The first failure's reason.
    pub failure: Option<String>,
    /// Application latency: delivery − intended send time, in virtual ns.
    pub latency: LatencyHistogram,
    /// Senders → receivers.
    pub forward: WireCounts,
    /// Receivers → senders.
    pub reverse: WireCounts,
    /// Virtual time the run took, ns.
    pub virtual_ns: u64,
}

/// Runs `options.streams` streams of every transport over one virtual network; one outcome
/// per transport, in order. `stop` ends it early (the outcomes then hold what was measured).
pub fn run(options: &SimOptions, stop: &Stop) -> Result<Vec<SimOutcome>, String> {
    if let Some(why) = options.transports.iter().find_map(why_not_virtual) {
        return Err(why);
    }
    if options.size < message::HEADER_LEN {
        return Err(format!(
            "size: {} bytes is shorter than the message header ({} bytes)",
            options.size,
            message::HEADER_LEN
        ));
    }
    if options.interval.is_zero() {
        return Err("interval: must be above zero".into());
    }
    let network = Network::new(0, options.forward.clone(), options.reverse.clone())
        .map_err(|e| e.to_string())?;
    let quic = |t: &TransportSpec| matches!(t, TransportSpec::Quic { .. });
    let identity = match options.transports.iter().any(quic) {
        true => Some(Identity::generate().map_err(|e| e.to_string())?),
        false => None,
    };
    let base = Instant::now();
    let n = options.streams.max(1);
    if options.transports.len() * n as usize > usize::from(u16::MAX - 10_000) {
        return Err(format!(
            "streams: {} transports × {n} streams do not fit one host's ports",
            options.transports.len()
        ));
    }
    let mut senders = Vec::new();
    let mut receivers = Vec::new();
    for (group, spec) in options.transports.iter().enumerate() {
        for i in 0..n {
            let index = group as u32 * n + i;
            let (from, to) = addresses(index);
            let run = index + 1;
            let (tx, rx) = sides(spec, run, to, identity.as_ref(), base)
                .map_err(|e| format!("{spec}: {e}"))?;
            // Spread over one interval, as players' streams are, at phases that fall on no
            // timer's tick (KCP flushes every 10 ms of its own clock, as over sockets).
            let phase = f64::from(i) + (f64::from(i + 1) * 0.618_034).fract();
            let stagger = (options.interval.as_nanos() as f64 * phase / f64::from(n)) as u64;
            let schedule = Schedule::new(run, stagger, options);
            senders.push(Stream::new(tx, from, group, Some(schedule)));
            receivers.push(Stream::new(rx, to, group, None));
        }
    }
    let groups = options.transports.len();
    let mut pair = Pair::new(
        Hosts::new(senders, groups),
        Hosts::new(receivers, groups),
        network,
    );
    let grace = options.grace.as_nanos() as u64;
    loop {
        let now = pair.network.now();
        let over = pair.a.streams.iter().all(|s| {
            let schedule = s.schedule.as_ref().expect("senders have schedules");
            let reliable = options.transports[s.group].is_reliable();
            s.failure.is_some()
                || schedule.done_at().is_some_and(|end| {
                    now >= end + grace || (reliable && delivered_all(&pair.b, s, schedule))
                })
        });
        if over || stop.is_raised() {
            break;
        }
        pair.drive_until(now + STEP_NS);
        pair.a.fail_slow_handshakes(pair.network.now());
    }
    Ok(options
        .transports
        .iter()
        .enumerate()
        .map(|(group, spec)| outcome(&pair, group, spec))
        .collect())
}

/// Whether every message the sender of `s` sent has reached its receiver.
fn delivered_all(receivers: &Hosts, s: &Stream, schedule: &Schedule) -> bool {
    receivers
        .by_addr
        .get(&s.peer_of())
        .is_some_and(|&i| receivers.streams[i].delivered == schedule.sent)
}

/// Stream `i`'s sender and receiver addresses: one pair of hosts, a port each.
fn addresses(i: u32) -> (SocketAddr, SocketAddr) {
    let port = 10_000 + i as u16;
    (
        SocketAddr::from((Ipv4Addr::new(10, 0, 0, 1), port)),
        SocketAddr::from((Ipv4Addr::new(10, 0, 0, 2), port)),
    )
}

/// The sender and receiver sides of one stream of `spec`.
fn sides(
    spec: &TransportSpec,
    run: u32,
    to: SocketAddr,
    identity: Option<&Identity>,
    base: Instant,
) -> io::Result<(Box<dyn Side>, Box<dyn Side>)> {
    let pair: (Box<dyn Side>, Box<dyn Side>) = match spec {
        TransportSpec::Udp => (
            Box::new(UdpSide::new(Some(to))),
            Box::new(UdpSide::new(None)),
        ),
        TransportSpec::Latlab { recovery, urgent } => (
            Box::new(LatlabSide::sender(run, *recovery, *urgent, to)),
            Box::new(LatlabSide::receiver(run, *recovery)),
        ),
        TransportSpec::Kcp { fast } => (
            Box::new(KcpSide::new(run, *fast, Some(to))?),
            Box::new(KcpSide::new(run, *fast, None)?),
        ),
        TransportSpec::Quic { datagrams } => {
            let identity = identity.expect("made for quic");
            (
                Box::new(QuicSide::new(
                    QuicCore::sender(base, to, identity.certificate(), *datagrams)?,
                    base,
                    true,
                )),
                Box::new(QuicSide::new(
                    QuicCore::receiver(identity, *datagrams)?,
                    base,
                    false,
                )),
            )
        }
        TransportSpec::Tcp(_) | TransportSpec::Enet { .. } => {
            unreachable!("refused by why_not_virtual")
        }
    };
    Ok(pair)
}

/// One side of one stream, sans-IO: everything it wants sent goes to `outbox`, every message
/// it delivers to `inbox`.
trait Side {
    /// The application hands over `message` at `now`.
    fn send(&mut self, now: u64, message: &[u8]) -> Result<(), String>;
    /// A datagram from `from` arrived at `now`.
    fn handle_datagram(&mut self, now: u64, from: SocketAddr, data: &[u8]);
    /// The time [`Side::poll_timeout`] named came.
    fn handle_timeout(&mut self, now: u64);
    /// When the side next wants [`Side::handle_timeout`].
    fn poll_timeout(&mut self) -> Option<u64>;
    /// Datagrams to send, with their destinations.
    fn outbox(&mut self) -> &mut VecDeque<(SocketAddr, Vec<u8>)>;
    /// Messages delivered to the application.
    fn inbox(&mut self) -> &mut VecDeque<Vec<u8>>;
    /// Whether the handshake has ended (the schedule starts then).
    fn is_connected(&self) -> bool;
    /// Retransmissions and spurious ones, where the transport tells.
    fn retransmissions(&self) -> (Option<u64>, Option<u64>);
    /// Why the transport gave up, when it did.
    fn failure(&self) -> Option<String>;
}

/// Plain UDP: one datagram per message, no recovery.
struct UdpSide {
    peer: Option<SocketAddr>,
    outbox: VecDeque<(SocketAddr, Vec<u8>)>,
    inbox: VecDeque<Vec<u8>>,
}

impl UdpSide {
    fn new(peer: Option<SocketAddr>) -> UdpSide {
        UdpSide {
            peer,
            outbox: VecDeque::new(),
            inbox: VecDeque::new(),
        }
    }
}

impl Side for UdpSide {
    fn send(&mut self, _now: u64, message: &[u8]) -> Result<(), String> {
        let peer = self.peer.ok_or("udp: the receiving side does not send")?;
        self.outbox.push_back((peer, message.to_vec()));
        Ok(())
    }
    fn handle_datagram(&mut self, _now: u64, _from: SocketAddr, data: &[u8]) {
        self.inbox.push_back(data.to_vec());
    }
    fn handle_timeout(&mut self, _now: u64) {}
    fn poll_timeout(&mut self) -> Option<u64> {
        None
    }
    fn outbox(&mut self) -> &mut VecDeque<(SocketAddr, Vec<u8>)> {
        &mut self.outbox
    }
    fn inbox(&mut self) -> &mut VecDeque<Vec<u8>> {
        &mut self.inbox
    }
    fn is_connected(&self) -> bool {
        true
    }
    fn retransmissions(&self) -> (Option<u64>, Option<u64>) {
        (Some(0), Some(0))
    }
    fn failure(&self) -> Option<String> {
        None
    }
}

/// latlab's transport, messages on its reliable-ordered channel (as `stream::latlab`).
struct LatlabSide {
    transport: Transport,
    connection: Option<ConnectionHandle>,
    connected: bool,
    closed: Option<String>,
    /// Messages go as urgent (`latlab:…,urgent`).
    urgent: bool,
    counts: (Option<u64>, Option<u64>),
    buf: Vec<u8>,
    outbox: VecDeque<(SocketAddr, Vec<u8>)>,
    inbox: VecDeque<Vec<u8>>,
}

impl LatlabSide {
    fn sender(run: u32, recovery: Recovery, urgent: bool, to: SocketAddr) -> LatlabSide {
        let config = Config {
            recovery,
            ..Config::default()
        };
        let mut side = LatlabSide::new(Transport::new(config, u64::from(run)));
        side.urgent = urgent;
        side.connection = Some(side.transport.connect(0, to));
        side.flush(0);
        side
    }

    fn receiver(run: u32, recovery: Recovery) -> LatlabSide {
        let config = Config {
            recovery,
            ..Config::server()
        };
        LatlabSide::new(Transport::new(config, u64::from(run).rotate_left(32) | 1))
    }

    fn new(transport: Transport) -> LatlabSide {
        LatlabSide {
            transport,
            connection: None,
            connected: false,
            closed: None,
            urgent: false,
            counts: (None, None),
            buf: vec![0; 65_536],
            outbox: VecDeque::new(),
            inbox: VecDeque::new(),
        }
    }

    /// Takes what the endpoint has to send and to tell after an input at `now`.
    fn flush(&mut self, now: u64) {
        while let Some(t) = self.transport.poll_transmit(now, &mut self.buf) {
            self.outbox.push_back((t.to, self.buf[..t.len].to_vec()));
        }
        if let Some(stats) = self
            .connection
            .and_then(|c| self.transport.connection_stats(c))
        {
            self.counts = (
                Some(stats.retransmissions),
                Some(stats.spurious_retransmissions),
            );
        }
        while let Some(event) = self.transport.poll_event() {
            match event {
                Event::Message { data, .. } => self.inbox.push_back(data.to_vec()),
                Event::Accepted { connection, .. } => self.connection = Some(connection),
                Event::Connected { .. } => self.connected = true,
                Event::Closed { reason, .. } => self.closed = Some(format!("{reason:?}")),
                Event::Expired { .. } => {}
            }
        }
    }
}

impl Side for LatlabSide {
    fn send(&mut self, now: u64, message: &[u8]) -> Result<(), String> {
        let connection = self
            .connection
            .ok_or("latlab: the receiving side does not send")?;
        let sent = if self.urgent {
            self.transport.send_urgent(now, connection, 0, message)
        } else {
            self.transport.send(now, connection, 0, message)
        };
        sent.map_err(|e| format!("latlab: {e}"))?;
        self.flush(now);
        Ok(())
    }
    fn handle_datagram(&mut self, now: u64, from: SocketAddr, data: &[u8]) {
        self.transport.handle_datagram(now, from, data);
        self.flush(now);
    }
    fn handle_timeout(&mut self, now: u64) {
        self.transport.handle_timeout(now);
        self.flush(now);
    }
    fn poll_timeout(&mut self) -> Option<u64> {
        self.transport.poll_timeout()
    }
    fn outbox(&mut self) -> &mut VecDeque<(SocketAddr, Vec<u8>)> {
        &mut self.outbox
    }
    fn inbox(&mut self) -> &mut VecDeque<Vec<u8>> {
        &mut self.inbox
    }
    fn is_connected(&self) -> bool {
        self.connected
    }
    fn retransmissions(&self) -> (Option<u64>, Option<u64>) {
        self.counts
    }
    fn failure(&self) -> Option<String> {
        self.closed
            .as_ref()
            .map(|why| format!("latlab: the connection closed: {why}"))
    }
}

/// KCP's output in virtual time: each write is one datagram, kept until the side takes it.
struct KcpOutput(Rc<RefCell<VecDeque<Vec<u8>>>>);

impl io::Write for KcpOutput {
    fn write(&mut self, datagram: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().push_back(datagram.to_vec());
        Ok(datagram.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// KCP in message mode with `stream::kcp`'s settings; its clock is virtual milliseconds.
struct KcpSide {
    kcp: kcp::Kcp<KcpOutput>,
    written: Rc<RefCell<VecDeque<Vec<u8>>>>,
    run: u32,
    /// The far side; the receiver learns it from the first datagram of its run.
    peer: Option<SocketAddr>,
    /// KCP's clock at the last call, ms.
    now_ms: u32,
    failed: Option<String>,
    buf: Vec<u8>,
    outbox: VecDeque<(SocketAddr, Vec<u8>)>,
    inbox: VecDeque<Vec<u8>>,
}

impl KcpSide {
    fn new(run: u32, fast: bool, peer: Option<SocketAddr>) -> io::Result<KcpSide> {
        let written = Rc::new(RefCell::new(VecDeque::new()));
        let mut kcp = kcp::Kcp::new(run, KcpOutput(written.clone()));
        super::kcp::configure(&mut kcp, fast);
        kcp.update(0)
            .map_err(|e| io::Error::other(format!("kcp: {e}")))?;
        Ok(KcpSide {
            kcp,
            written,
            run,
            peer,
            now_ms: 0,
            failed: None,
            buf: vec![0; 65_536],
            outbox: VecDeque::new(),
            inbox: VecDeque::new(),
        })
    }

    /// Updates KCP at `now` (ns) and takes what it wrote and delivered.
    fn update(&mut self, now: u64) {
        self.now_ms = (now / 1_000_000) as u32;
        if let Err(e) = self.kcp.update(self.now_ms) {
            self.failed.get_or_insert(format!("kcp: {e}"));
        }
        let written: Vec<Vec<u8>> = self.written.borrow_mut().drain(..).collect();
        if let Some(peer) = self.peer {
            self.outbox.extend(written.into_iter().map(|d| (peer, d)));
        }
        while let Ok(n) = self.kcp.recv(&mut self.buf) {
            self.inbox.push_back(self.buf[..n].to_vec());
        }
    }
}

impl Side for KcpSide {
    fn send(&mut self, now: u64, message: &[u8]) -> Result<(), String> {
        // Queued: KCP sends it at its next flush, as over a socket.
        self.kcp.send(message).map_err(|e| format!("kcp: {e}"))?;
        self.update(now);
        Ok(())
    }
    fn handle_datagram(&mut self, now: u64, from: SocketAddr, data: &[u8]) {
        let ours = data.len() >= kcp::KCP_OVERHEAD
            && kcp::get_conv(data) == self.run
            && self.peer.is_none_or(|p| p == from);
        if !ours {
            return;
        }
        self.peer.get_or_insert(from);
        let _ = self.kcp.input(data);
        self.update(now);
    }
    fn handle_timeout(&mut self, now: u64) {
        self.update(now);
    }
    fn poll_timeout(&mut self) -> Option<u64> {
        // KCP counts whole milliseconds: a flush it owes "now" comes at the next one.
        let at = self.kcp.check(self.now_ms);
        let ahead = (at.wrapping_sub(self.now_ms) as i32).max(1) as u64;
        Some((u64::from(self.now_ms) + ahead) * 1_000_000)
    }
    fn outbox(&mut self) -> &mut VecDeque<(SocketAddr, Vec<u8>)> {
        &mut self.outbox
    }
    fn inbox(&mut self) -> &mut VecDeque<Vec<u8>> {
        &mut self.inbox
    }
    fn is_connected(&self) -> bool {
        true
    }
    fn retransmissions(&self) -> (Option<u64>, Option<u64>) {
        // KCP keeps its retransmission count to itself.
        (None, None)
    }
    fn failure(&self) -> Option<String> {
        self.failed.clone()
    }
}

/// QUIC through `quinn-proto` ([`QuicCore`]), its `Instant`s counted from `base`.
struct QuicSide {
    core: QuicCore,
    base: Instant,
    sender: bool,
    opened: bool,
    failed: Option<String>,
    outbox: VecDeque<(SocketAddr, Vec<u8>)>,
    inbox: VecDeque<Vec<u8>>,
}

impl QuicSide {
    /// The side over `core`; a sender's first flight (its Initial) is sent at time 0.
    fn new(core: QuicCore, base: Instant, sender: bool) -> QuicSide {
        let mut side = QuicSide {
            core,
            base,
            sender,
            opened: false,
            failed: None,
            outbox: VecDeque::new(),
            inbox: VecDeque::new(),
        };
        if sender {
            side.drive(0);
        }
        side
    }

    fn at(&self, now: u64) -> Instant {
        self.base + Duration::from_nanos(now)
    }

    /// Runs the connection at `now`; its datagrams and deliveries go to the boxes.
    fn drive(&mut self, now: u64) {
        let at = self.at(now);
        let (outbox, inbox) = (&mut self.outbox, &mut self.inbox);
        let driven = self
            .core
            .drive(at, &mut |m| inbox.push_back(m.to_vec()), &mut |d, to| {
                outbox.push_back((to, d.to_vec()));
                Ok(())
            });
        if let Err(e) = driven {
            self.failed.get_or_insert(e.to_string());
        }
        if self.sender && !self.opened && self.core.is_connected() {
            self.core.open_stream();
            self.opened = true;
        }
    }
}

impl Side for QuicSide {
    fn send(&mut self, now: u64, message: &[u8]) -> Result<(), String> {
        self.core
            .send(self.at(now), message)
            .map_err(|e| e.to_string())?;
        self.drive(now);
        Ok(())
    }
    fn handle_datagram(&mut self, now: u64, from: SocketAddr, data: &[u8]) {
        let at = self.at(now);
        let outbox = &mut self.outbox;
        let handled = self.core.handle(at, from, data, &mut |d, to| {
            outbox.push_back((to, d.to_vec()));
            Ok(())
        });
        if let Err(e) = handled {
            self.failed.get_or_insert(e.to_string());
        }
        self.drive(now);
    }
    fn handle_timeout(&mut self, now: u64) {
        self.drive(now);
    }
    fn poll_timeout(&mut self) -> Option<u64> {
        let at = self.core.next_timeout()?;
        Some(at.saturating_duration_since(self.base).as_nanos() as u64)
    }
    fn outbox(&mut self) -> &mut VecDeque<(SocketAddr, Vec<u8>)> {
        &mut self.outbox
    }
    fn inbox(&mut self) -> &mut VecDeque<Vec<u8>> {
        &mut self.inbox
    }
    fn is_connected(&self) -> bool {
        self.core.is_connected() && (!self.sender || self.opened)
    }
    fn retransmissions(&self) -> (Option<u64>, Option<u64>) {
        (Some(self.core.retransmissions()), None)
    }
    fn failure(&self) -> Option<String> {
        self.failed.clone()
    }
}

/// A sender's schedule: `count` messages, one every interval from one stagger after its
/// handshake ended.
#[derive(Debug)]
struct Schedule {
    run: u32,
    stagger_ns: u64,
    interval_ns: u64,
    count: u64,
    size: usize,
    /// When the first message is due, once the handshake has ended.
    start_ns: Option<u64>,
    sent: u64,
}

impl Schedule {
    fn new(run: u32, stagger_ns: u64, options: &SimOptions) -> Schedule {
        let interval_ns = options.interval.as_nanos() as u64;
        Schedule {
            run,
            stagger_ns,
            interval_ns,
            count: (options.duration.as_nanos() as u64).div_ceil(interval_ns),
            size: options.size,
            start_ns: None,
            sent: 0,
        }
    }

    /// When the next message is due, `None` before the handshake and after the last one.
    fn next_ns(&self) -> Option<u64> {
        let start = self.start_ns?;
        (self.sent < self.count).then(|| start + self.sent * self.interval_ns)
    }

    /// When the last message went, once all have.
    fn done_at(&self) -> Option<u64> {
        let start = self.start_ns?;
        (self.sent == self.count).then(|| start + self.count.saturating_sub(1) * self.interval_ns)
    }
}

/// One stream's side on a host: the transport, its address and, for a sender, its schedule;
/// for a receiver, what it delivered.
struct Stream {
    side: Box<dyn Side>,
    addr: SocketAddr,
    /// Which transport of the run it is.
    group: usize,
    schedule: Option<Schedule>,
    /// When it next wants the clock, cached after every call.
    timeout: Option<u64>,
    failure: Option<String>,
    /// The receiver's distinct deliveries.
    delivered: u64,
    seen: Vec<bool>,
}

impl Stream {
    fn new(
        side: Box<dyn Side>,
        addr: SocketAddr,
        group: usize,
        schedule: Option<Schedule>,
    ) -> Stream {
        let mut s = Stream {
            side,
            addr,
            group,
            schedule,
            timeout: None,
            failure: None,
            delivered: 0,
            seen: Vec::new(),
        };
        s.refresh(0);
        s
    }

    /// The receiver's address (senders and receivers share ports).
    fn peer_of(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::new(10, 0, 0, 2), self.addr.port()))
    }

    /// After a call at `now`: starts the schedule once connected, notes a failure, and caches
    /// when the stream next wants the clock.
    fn refresh(&mut self, now: u64) {
        if let Some(s) = &mut self.schedule {
            if s.start_ns.is_none() && self.side.is_connected() {
                s.start_ns = Some(now + s.stagger_ns);
            }
        }
        if self.failure.is_none() {
            self.failure = self.side.failure();
        }
        let due = self.schedule.as_ref().and_then(Schedule::next_ns);
        self.timeout = [self.side.poll_timeout(), due].into_iter().flatten().min();
    }

    /// Sends every message due by `now`.
    fn send_due(&mut self, now: u64, buf: &mut Vec<u8>) {
        let Some(s) = &mut self.schedule else { return };
        while let Some(at) = s.next_ns().filter(|&at| at <= now) {
            buf.clear();
            buf.resize(s.size, 0);
            let m = Message {
                run: s.run,
                seq: s.sent,
                sent_ns: at,
            };
            message::emit(&m, buf);
            s.sent += 1;
            if self.failure.is_none() {
                if let Err(e) = self.side.send(now, buf) {
                    self.failure = Some(e);
                }
            }
        }
    }
}

/// The streams of one side of the network: every sender, or every receiver.
/// What one side of the network saw of one transport's streams.
#[derive(Default)]
struct GroupTally {
    latency: LatencyHistogram,
    malformed: u64,
    sent: WireCounts,
}

struct Hosts {
    streams: Vec<Stream>,
    by_addr: HashMap<SocketAddr, usize>,
    /// By transport.
    groups: Vec<GroupTally>,
    buf: Vec<u8>,
}

impl Hosts {
    fn new(streams: Vec<Stream>, groups: usize) -> Hosts {
        let by_addr = streams
            .iter()
            .enumerate()
            .map(|(i, s)| (s.addr, i))
            .collect();
        Hosts {
            streams,
            by_addr,
            groups: (0..groups).map(|_| GroupTally::default()).collect(),
            buf: Vec::new(),
        }
    }

    /// Takes stream `i`'s deliveries at `now` into the histogram.
    fn take_deliveries(&mut self, i: usize, now: u64) {
        let stream = &mut self.streams[i];
        let run = i as u32 + 1;
        let tally = &mut self.groups[stream.group];
        while let Some(bytes) = stream.side.inbox().pop_front() {
            match message::parse(&bytes) {
                Ok(m) if m.run == run && m.sent_ns <= now => {
                    let seq = m.seq as usize;
                    if stream.seen.len() <= seq {
                        stream.seen.resize(seq + 1, false);
                    }
                    if !stream.seen[seq] {
                        stream.seen[seq] = true;
                        stream.delivered += 1;
                        tally.latency.record(now - m.sent_ns);
                    }
                }
                _ => tally.malformed += 1,
            }
        }
    }

    /// Fails the senders whose handshake has not ended by now.
    fn fail_slow_handshakes(&mut self, now: u64) {
        if now < HANDSHAKE_LIMIT_NS {
            return;
        }
        for s in &mut self.streams {
            let waiting = s.schedule.as_ref().is_some_and(|s| s.start_ns.is_none());
            if waiting && s.failure.is_none() {
                s.failure = Some(format!(
                    "no connection within {:?} of virtual time",
                    Duration::from_nanos(HANDSHAKE_LIMIT_NS)
                ));
            }
        }
    }
}

impl sim::Endpoint for Hosts {
    fn handle_datagram(&mut self, now: u64, datagram: Datagram) {
        let Some(&i) = self.by_addr.get(&datagram.to) else {
            return;
        };
        let stream = &mut self.streams[i];
        stream
            .side
            .handle_datagram(now, datagram.from, &datagram.payload);
        self.take_deliveries(i, now);
        self.streams[i].refresh(now);
    }

    fn poll_transmit(&mut self, _now: u64) -> Option<Datagram> {
        for s in &mut self.streams {
            if let Some((to, payload)) = s.side.outbox().pop_front() {
                let sent = &mut self.groups[s.group].sent;
                sent.packets += 1;
                sent.bytes += payload.len() as u64 + udp_overhead(to);
                return Some(Datagram {
                    from: s.addr,
                    to,
                    payload,
                });
            }
        }
        None
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.streams.iter().filter_map(|s| s.timeout).min()
    }

    fn handle_timeout(&mut self, now: u64) {
        for i in 0..self.streams.len() {
            if self.streams[i].timeout.is_some_and(|at| at <= now) {
                let mut buf = std::mem::take(&mut self.buf);
                self.streams[i].send_due(now, &mut buf);
                self.buf = buf;
                let side = &mut self.streams[i].side;
                if side.poll_timeout().is_some_and(|at| at <= now) {
                    side.handle_timeout(now);
                }
                self.take_deliveries(i, now);
                self.streams[i].refresh(now);
            }
        }
    }
}

/// What the pair measured for transport `group`, its streams together.
fn outcome(pair: &Pair<Hosts, Hosts>, group: usize, spec: &TransportSpec) -> SimOutcome {
    let mut sent = 0;
    let (mut failed_streams, mut failure) = (0, None);
    let mine = |s: &&Stream| s.group == group;
    let pairs = pair.a.streams.iter().zip(&pair.b.streams);
    for (tx, rx) in pairs.filter(|(tx, _)| tx.group == group) {
        let schedule = tx.schedule.as_ref().expect("senders have schedules");
        sent += schedule.sent;
        let why = tx
            .failure
            .clone()
            .or_else(|| rx.failure.clone())
            .or_else(|| {
                (spec.is_reliable() && rx.delivered < schedule.sent).then(|| {
                    format!(
                        "{}: {} of {} messages never arrived",
                        spec,
                        schedule.sent - rx.delivered,
                        schedule.sent
                    )
                })
            });
        if let Some(why) = why {
            failed_streams += 1;
            failure.get_or_insert(why);
        }
    }
    let counts = |hosts: &Hosts| {
        let mut counts = hosts.groups[group].sent;
        let told: Vec<_> = hosts
            .streams
            .iter()
            .filter(mine)
            .map(|s| s.side.retransmissions())
            .collect();
        counts.retransmissions = told.iter().map(|t| t.0).sum();
        counts.spurious_retransmissions = told.iter().map(|t| t.1).sum();
        counts
    };
    SimOutcome {
        sent,
        delivered: pair
            .b
            .streams
            .iter()
            .filter(mine)
            .map(|s| s.delivered)
            .sum(),
        malformed: pair.b.groups[group].malformed,
        failed_streams,
        failure,
        latency: pair.b.groups[group].latency.clone(),
        forward: counts(&pair.a),
        reverse: counts(&pair.b),
        virtual_ns: pair.network.now(),
    }
}

#[cfg(test)]
mod tests;
