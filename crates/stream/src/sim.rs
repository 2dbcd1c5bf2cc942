//! Streams in virtual time: the transports that are sans-IO — latlab's own, KCP, QUIC through
//! `quinn-proto`, and plain UDP — carry many streams at once over `latlab_link::sim`'s network
//! (the emulator's own link model, one pipe each way), the clock jumping from one event to the
//! next. A two-hour stream takes seconds, so the transport study's grid reaches the paper's
//! sample counts (`study transports --virtual`).
//!
//! The same sans-IO sides run here as over sockets (`stream::side`, driven there by
//! `stream::driver`): only where their datagrams go and what time it is differ. Each stream
//! has its own pair of addresses; its sender starts its schedule one stagger after its
//! handshake ended (as `stream send` does), stamps every message with its intended send time
//! and hands it to the transport; the receiving side measures each delivery against that
//! time. Wire bytes are counted as over a socket: UDP payload plus IPv4 and UDP headers.
//!
//! The kernel's TCP and ENet (whose library keeps its own clock) have no virtual-time form:
//! [`why_not_virtual`] says so, and the study measures them in namespaces only.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use latlab_engine::Stop;
use latlab_link::sim::{self, Datagram, Network, Pair};
use latlab_link::LinkConfig;
use latlab_stats::LatencyHistogram;

use super::message::{self, Message};
use super::quic::Identity;
use super::side::{sides, Side};
use super::wire::WireCounts;
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
                    self.failure = Some(e.to_string());
                }
            }
        }
    }
}

/// What one side of the network saw of one transport's streams.
#[derive(Default)]
struct GroupTally {
    latency: LatencyHistogram,
    malformed: u64,
    sent: WireCounts,
}

/// The streams of one side of the network: every sender, or every receiver.
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
        while let Some(bytes) = stream.side.boxes().inbox.pop_front() {
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
            if let Some((to, payload)) = s.side.boxes().outbox.pop_front() {
                self.groups[s.group].sent.add_datagram(payload.len(), to);
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
            .map(|s| match spec {
                // Plain UDP never retransmits: its none is shown as 0.
                TransportSpec::Udp => (Some(0), Some(0)),
                _ => s.side.retransmissions(),
            })
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
