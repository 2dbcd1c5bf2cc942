//! One generator run, sans-IO: when it starts, which probe is due, what came back, the
//! per-interval histograms and when it is over.
//!
//! A [`Run`] is a [`Sending`] half (the [`Sender`] and what the engine reported sent) and a
//! [`Receiving`] half (a meter, the interval log, progress and the stop rule). An engine with
//! one loop drives the `Run`; an engine with a send thread and a receive thread takes it apart
//! with [`Run::into_parts`], gives each thread its half and forwards the send half's
//! [`status`](Sending::status) to the receive half with [`Receiving::handle_sending`].

use latlab_stats::LatencyHistogram;

use std::net::SocketAddr;
use std::sync::Arc;

use crate::fanout::{FanoutMeter, FanoutResponse};
use crate::meter::{Meter, OneWay, Response};
use crate::protocol::{Ledger, ProtocolMeter, SharedProtocol};
use crate::sender::{SendCounts, Sender, Transmit};
use crate::{Error, ProbeConfig};

mod outcome;
mod progress;
mod sending;
pub use outcome::Outcome;
pub use progress::{Interval, Live, Progress};
pub use sending::{SendStatus, Sending};

/// The first probe of a run is due this long after the run is made, so that the engine's own
/// setup (threads, pinning, first system calls) does not count as send lag.
pub const START_DELAY_NS: u64 = 5_000_000;

/// How often [`Receiving::poll_progress`] reports.
pub const PROGRESS_NS: u64 = 100_000_000;

/// The shortest interval of the interval log; shorter requests are raised to it.
pub const MIN_INTERVAL_NS: u64 = 1_000_000;

/// A meter a [`Run`] can feed: it classifies received datagrams and says when every probe is
/// back.
pub trait Metering {
    /// What one received datagram turned out to be.
    type Response;
    /// Handles one datagram received by receiver `receiver` (a socket index: the meters that
    /// do not tell receivers apart ignore it) with its arrival stamp `rx_ns`.
    fn handle_datagram(&mut self, receiver: usize, rx_ns: u64, payload: &[u8]) -> Self::Response;
    /// [`handle_datagram`](Metering::handle_datagram) with who sent it and whether the port
    /// cut it (longer than its slot): the meters of latlab's own probes ignore both.
    fn handle_datagram_from(
        &mut self,
        receiver: usize,
        rx_ns: u64,
        _from: std::net::SocketAddr,
        _truncated: bool,
        payload: &[u8],
    ) -> Self::Response {
        self.handle_datagram(receiver, rx_ns, payload)
    }
    /// The latency a response adds to the interval log, if any.
    fn interval_latency(response: &Self::Response) -> Option<u64>;
    /// The one-way delays of the response just handled, for the interval log's one-way
    /// histograms; `None` where the meter does not measure them.
    fn last_one_way(&self) -> Option<OneWay> {
        None
    }
    /// How many distinct responses each probe sent should bring (1, or the clients of a game).
    fn responses_per_probe(&self) -> u64;
    /// Distinct responses so far, warm-up included.
    fn distinct_responses(&self) -> u64;
    /// Measured responses so far, for progress.
    fn received(&self) -> u64;
    /// The meter's counts so far, for a live view ([`Progress::live`]); `None` where the
    /// meter keeps no report while it runs.
    fn so_far(&self) -> Option<&crate::meter::MeterReport> {
        None
    }
}

impl Metering for Meter {
    type Response = Response;

    fn handle_datagram(&mut self, _receiver: usize, rx_ns: u64, payload: &[u8]) -> Response {
        self.handle_response(rx_ns, payload)
    }

    fn interval_latency(response: &Response) -> Option<u64> {
        match response {
            Response::Recorded { latency_ns, .. } => Some(*latency_ns),
            _ => None,
        }
    }

    fn last_one_way(&self) -> Option<OneWay> {
        Meter::last_one_way(self)
    }

    fn responses_per_probe(&self) -> u64 {
        1
    }

    fn distinct_responses(&self) -> u64 {
        Meter::distinct_responses(self)
    }

    fn received(&self) -> u64 {
        Meter::received(self)
    }

    fn so_far(&self) -> Option<&crate::meter::MeterReport> {
        Some(self.so_far())
    }
}

impl Metering for FanoutMeter {
    type Response = FanoutResponse;

    fn handle_datagram(&mut self, receiver: usize, rx_ns: u64, payload: &[u8]) -> FanoutResponse {
        self.handle_response(receiver, rx_ns, payload)
    }

    fn interval_latency(response: &FanoutResponse) -> Option<u64> {
        match response {
            FanoutResponse::Last { latency_ns } => Some(*latency_ns),
            _ => None,
        }
    }

    fn responses_per_probe(&self) -> u64 {
        u64::from(self.clients())
    }

    fn distinct_responses(&self) -> u64 {
        self.distinct_copies()
    }

    fn received(&self) -> u64 {
        self.copies_received()
    }
}

/// Everything a run needs besides its meter.
#[derive(Clone, Debug, PartialEq)]
pub struct RunConfig {
    /// The probes; `start_ns` is replaced by the run's start time (see [`Run::new`]).
    pub probe: ProbeConfig,
    /// How long to wait for responses after the last probe left.
    pub grace_ns: u64,
    /// Length of one interval of the interval log, at least [`MIN_INTERVAL_NS`].
    pub interval_ns: u64,
    /// Hand each closed interval and the meter's counts to [`Progress::live`], for a live view
    /// (one copy of an interval's histograms per interval; nothing when false).
    pub live: bool,
}

/// The receive half of a run: the meter, the interval log, progress and the stop rule.
///
/// Call order: [`handle_datagram`](Receiving::handle_datagram) for every datagram received;
/// [`handle_sending`](Receiving::handle_sending) with the send half's status;
/// [`handle_timeout`](Receiving::handle_timeout) when [`poll_timeout`](Receiving::poll_timeout)
/// has passed (it closes intervals); [`is_done`](Receiving::is_done) says when to stop: every
/// probe sent is back, or the grace period after the last send is over.
#[derive(Debug)]
pub struct Receiving<M> {
    meter: M,
    start_ns: u64,
    total_ns: u64,
    grace_ns: u64,
    interval_ns: u64,
    /// End of the interval being filled; `start_ns + k × interval_ns`.
    next_interval_ns: u64,
    interval: LatencyHistogram,
    interval_forward: LatencyHistogram,
    interval_reverse: LatencyHistogram,
    intervals: Vec<Interval>,
    next_progress_ns: u64,
    sending: SendStatus,
    /// [`RunConfig::live`].
    live: bool,
    /// Intervals already handed to [`Progress::live`].
    shown_intervals: usize,
}

impl<M: Metering> Receiving<M> {
    fn new(meter: M, config: &RunConfig, start_ns: u64) -> Self {
        let interval_ns = config.interval_ns.max(MIN_INTERVAL_NS);
        Receiving {
            meter,
            start_ns,
            total_ns: config.probe.duration_ns,
            grace_ns: config.grace_ns,
            interval_ns,
            next_interval_ns: start_ns + interval_ns,
            interval: LatencyHistogram::new(),
            interval_forward: LatencyHistogram::new(),
            interval_reverse: LatencyHistogram::new(),
            intervals: Vec::new(),
            next_progress_ns: 0,
            sending: SendStatus {
                sent: 0,
                finished_at: None,
            },
            live: config.live,
            shown_intervals: 0,
        }
    }

    /// Handles one datagram received by `receiver` with arrival stamp `rx_ns`, read at `now`.
    /// Its latency goes to the interval `now` falls in.
    pub fn handle_datagram(
        &mut self,
        now: u64,
        receiver: usize,
        rx_ns: u64,
        payload: &[u8],
    ) -> M::Response {
        self.handle_timeout(now);
        let response = self.meter.handle_datagram(receiver, rx_ns, payload);
        if let Some(latency) = M::interval_latency(&response) {
            self.interval.record(latency);
            if let Some(one_way) = self.meter.last_one_way() {
                self.interval_forward.record(one_way.forward_ns);
                self.interval_reverse.record(one_way.reverse_ns);
            }
        }
        response
    }

    /// [`handle_datagram`](Receiving::handle_datagram) with who sent the datagram and
    /// whether the port cut it, for the meters that look at them
    /// ([`crate::protocol::ProtocolMeter`]).
    pub fn handle_datagram_from(
        &mut self,
        now: u64,
        receiver: usize,
        datagram: (u64, std::net::SocketAddr, bool),
        payload: &[u8],
    ) -> M::Response {
        let (rx_ns, from, truncated) = datagram;
        self.handle_timeout(now);
        let response = self
            .meter
            .handle_datagram_from(receiver, rx_ns, from, truncated, payload);
        if let Some(latency) = M::interval_latency(&response) {
            self.interval.record(latency);
            if let Some(one_way) = self.meter.last_one_way() {
                self.interval_forward.record(one_way.forward_ns);
                self.interval_reverse.record(one_way.reverse_ns);
            }
        }
        response
    }

    /// The send half's status (in one loop, [`Run`] forwards it itself).
    pub fn handle_sending(&mut self, status: SendStatus) {
        self.sending = status;
    }

    /// Closes every interval that ended at or before `now`.
    pub fn handle_timeout(&mut self, now: u64) {
        while now >= self.next_interval_ns {
            let start = self.next_interval_ns - self.interval_ns;
            self.intervals.push(Interval {
                start_offset_ns: start - self.start_ns,
                duration_ns: self.interval_ns,
                histogram: std::mem::replace(&mut self.interval, LatencyHistogram::new()),
                forward: std::mem::replace(&mut self.interval_forward, LatencyHistogram::new()),
                reverse: std::mem::replace(&mut self.interval_reverse, LatencyHistogram::new()),
            });
            self.next_interval_ns += self.interval_ns;
        }
    }

    /// The next time `handle_timeout` or the stop rule has something to do: the end of the
    /// current interval, or the end of the grace period once sending is over.
    pub fn poll_timeout(&self) -> u64 {
        match self.grace_end() {
            Some(end) => end.min(self.next_interval_ns),
            None => self.next_interval_ns,
        }
    }

    fn grace_end(&self) -> Option<u64> {
        self.sending
            .finished_at
            .map(|t| t.saturating_add(self.grace_ns))
    }

    /// Whether the run is over at `now`: sending is over and every probe sent is back (each
    /// with all its copies), or the grace period after the last send has passed.
    pub fn is_done(&self, now: u64) -> bool {
        let Some(end) = self.grace_end() else {
            return false;
        };
        let expected = self.sending.sent * self.meter.responses_per_probe();
        self.meter.distinct_responses() >= expected || now >= end
    }

    /// Where the run is, at most once per [`PROGRESS_NS`] (the first call always reports).
    pub fn poll_progress(&mut self, now: u64) -> Option<Progress> {
        if now < self.next_progress_ns {
            return None;
        }
        self.next_progress_ns = now + PROGRESS_NS;
        let live = self.live.then(|| {
            let intervals = self.intervals[self.shown_intervals..].to_vec();
            self.shown_intervals = self.intervals.len();
            let report = self.meter.so_far();
            let lag = report.map(|r| &r.send_lag).filter(|h| !h.is_empty());
            Live {
                intervals,
                reordered: report.map_or(0, |r| r.reordered),
                duplicated: report.map_or(0, |r| r.duplicated),
                not_answers: report.map_or(0, |r| r.malformed()),
                send_lag_p99_max: lag.map(|h| {
                    let p99 = h.value_at_rank(latlab_stats::point_rank(h.len(), 0.99));
                    (p99.unwrap_or(0), h.max())
                }),
            }
        });
        Some(Progress {
            elapsed_ns: now.saturating_sub(self.start_ns).min(self.total_ns),
            total_ns: self.total_ns,
            sent: self.sending.sent,
            received: self.meter.received(),
            live,
        })
    }

    /// The meter.
    pub fn meter(&self) -> &M {
        &self.meter
    }

    /// Closes the interval log at `now`: the interval being filled is kept when it holds
    /// anything (or when it would be the only one), with its length cut at `now`.
    fn finish(&mut self, now: u64) {
        self.handle_timeout(now);
        let start = self.next_interval_ns - self.interval_ns;
        if !self.interval.is_empty() || self.intervals.is_empty() {
            self.intervals.push(Interval {
                start_offset_ns: start.saturating_sub(self.start_ns),
                duration_ns: now.saturating_sub(start).clamp(1, self.interval_ns),
                histogram: std::mem::replace(&mut self.interval, LatencyHistogram::new()),
                forward: std::mem::replace(&mut self.interval_forward, LatencyHistogram::new()),
                reverse: std::mem::replace(&mut self.interval_reverse, LatencyHistogram::new()),
            });
        }
    }
}

/// One generator run: start time, schedule, meter, interval log, progress and stop rule.
///
/// Call order in one loop, each turn at `now`:
/// 1. [`poll_transmit(now, buf)`](Run::poll_transmit) while it returns `Some` and the engine
///    has room; the engine stamps the actual send time and sends, then calls
///    [`handle_sent(tx_ns, count)`](Run::handle_sent) for what left;
/// 2. [`handle_datagram(now, receiver, rx_ns, payload)`](Run::handle_datagram) for every
///    datagram received;
/// 3. [`handle_timeout(now)`](Run::handle_timeout), [`poll_progress(now)`](Run::poll_progress);
/// 4. stop when [`is_done(now)`](Run::is_done); otherwise wait until
///    [`poll_timeout()`](Run::poll_timeout) or a datagram arrives.
///
/// Then [`finish(now)`](Run::finish). A send thread and a receive thread use the two halves
/// from [`into_parts`](Run::into_parts) instead.
///
/// ```
/// use latlab_probe::{Meter, ProbeConfig, Run, RunConfig, START_DELAY_NS};
/// let config = RunConfig {
///     probe: ProbeConfig { rate_pps: 1000.0, duration_ns: 10_000_000, ..ProbeConfig::default() },
///     grace_ns: 100_000_000,
///     interval_ns: 1_000_000_000,
///     live: false,
/// };
/// let mut run = Run::new(&config, 0, Meter::new).unwrap();
/// assert_eq!(run.start_ns(), START_DELAY_NS);
/// let mut buf = [0u8; 64];
/// let mut now = 0;
/// // The network echoes every probe back 20 µs after it left.
/// let mut echoes: Vec<(u64, Vec<u8>)> = Vec::new();
/// loop {
///     while let Some(probe) = run.poll_transmit(now, &mut buf) {
///         run.handle_sent(now, 1);
///         echoes.push((now + 20_000, buf[..probe.len].to_vec()));
///     }
///     echoes.retain(|(at, bytes)| *at > now || {
///         run.handle_datagram(now, 0, *at, bytes);
///         false
///     });
///     run.handle_timeout(now);
///     if run.is_done(now) {
///         break;
///     }
///     now = echoes.iter().map(|e| e.0).fold(run.poll_timeout(), u64::min);
/// }
/// // Every probe came back: the run ends with the last answer, not at the grace period's end.
/// assert_eq!(now, START_DELAY_NS + 9_000_000 + 20_000);
/// let outcome = run.finish(now);
/// assert_eq!(outcome.meter.report(&outcome.counts).received, 10);
/// ```
#[derive(Debug)]
pub struct Run<M> {
    sending: Sending,
    receiving: Receiving<M>,
}

impl Run<ProtocolMeter> {
    /// A run of `protocol`'s requests towards `target`, made at `now` (as [`Run::new`]),
    /// from sockets whose local addresses are `locals` (one per flow). Its ledger holds, per
    /// flow, the protocol's whole ID space, or else the requests of the grace period and a
    /// second more (at least 64, at most [`MAX_LEDGER_SLOTS`] over all flows); a one-in-flight
    /// flow waits at most the grace period for an answer.
    pub fn with_protocol(
        config: &RunConfig,
        now: u64,
        protocol: SharedProtocol,
        locals: &[SocketAddr],
        target: SocketAddr,
    ) -> Result<Run<ProtocolMeter>, Error> {
        let mut probe = config.probe.clone();
        probe.start_ns = now.saturating_add(START_DELAY_NS);
        probe.validate()?;
        let slots = ledger_slots(&probe, protocol.id_space(), config.grace_ns);
        let ledger = Arc::new(Ledger::new(probe.flows, slots));
        let (requests, replies) = protocol.split(probe.run_id, locals);
        let sending = Sending::with_protocol(
            &probe,
            requests,
            ledger.clone(),
            protocol.one_in_flight(),
            config.grace_ns,
        )?;
        let meter = ProtocolMeter::new(&probe, protocol, replies, ledger, target);
        let receiving = Receiving::new(meter, config, probe.start_ns);
        Ok(Run { sending, receiving })
    }
}

/// The most ledger slots a protocol run keeps over all its flows.
pub const MAX_LEDGER_SLOTS: u64 = 1 << 22;

/// Slots per flow for a run of `probe` whose protocol has `id_space` tokens per flow.
fn ledger_slots(probe: &ProbeConfig, id_space: Option<u64>, grace_ns: u64) -> u64 {
    if let Some(ids) = id_space {
        return ids;
    }
    let per_flow_pps = probe.rate_pps / f64::from(probe.flows.max(1));
    let window_s = grace_ns as f64 / 1e9 + 1.0;
    let wanted = (per_flow_pps * window_s).ceil() as u64;
    let most = (MAX_LEDGER_SLOTS / u64::from(probe.flows.max(1))).max(64);
    wanted
        .min(probe.max_probes_per_flow())
        .clamp(64, most)
        .next_power_of_two()
        .min(most.next_power_of_two())
}

impl<M: Metering> Run<M> {
    /// A run made at `now`: its first probe is due at `now +` [`START_DELAY_NS`], whatever
    /// `config.probe.start_ns` said. `meter` makes the meter from the run's probe
    /// configuration (start time included).
    pub fn new(
        config: &RunConfig,
        now: u64,
        meter: impl FnOnce(&ProbeConfig) -> M,
    ) -> Result<Run<M>, Error> {
        let mut probe = config.probe.clone();
        probe.start_ns = now.saturating_add(START_DELAY_NS);
        let sending = Sending::new(&probe)?;
        let receiving = Receiving::new(meter(&probe), config, probe.start_ns);
        Ok(Run { sending, receiving })
    }

    /// When the first probe is due.
    pub fn start_ns(&self) -> u64 {
        self.sending.config().start_ns
    }

    /// The earliest of: the next probe's due time, the end of the current interval, the end
    /// of the grace period.
    pub fn poll_timeout(&self) -> u64 {
        let other = self.receiving.poll_timeout();
        self.sending
            .poll_timeout()
            .map_or(other, |due| due.min(other))
    }

    /// When the next probe is due, `None` when the schedule has nothing more.
    pub fn poll_send_timeout(&self) -> Option<u64> {
        self.sending.poll_timeout()
    }

    /// See [`Sending::poll_transmit`].
    pub fn poll_transmit(&mut self, now: u64, buf: &mut [u8]) -> Option<Transmit> {
        let t = self.sending.poll_transmit(now, buf);
        if t.is_none() {
            self.receiving.handle_sending(self.sending.status());
        }
        t
    }

    /// See [`Sending::handle_sent`].
    pub fn handle_sent(&mut self, tx_ns: u64, count: u64) {
        self.sending.handle_sent(tx_ns, count);
        self.receiving.handle_sending(self.sending.status());
    }

    /// See [`Sending::stop`].
    pub fn stop(&mut self, now: u64) {
        self.sending.stop(now);
        self.receiving.handle_sending(self.sending.status());
    }

    /// See [`Sending::handle_send_failed`].
    pub fn handle_send_failed(&mut self, now: u64, count: u64) {
        self.sending.handle_send_failed(now, count);
        self.receiving.handle_sending(self.sending.status());
    }

    /// See [`Receiving::handle_datagram`].
    pub fn handle_datagram(
        &mut self,
        now: u64,
        receiver: usize,
        rx_ns: u64,
        payload: &[u8],
    ) -> M::Response {
        self.receiving
            .handle_datagram(now, receiver, rx_ns, payload)
    }

    /// See [`Receiving::handle_datagram_from`].
    pub fn handle_datagram_from(
        &mut self,
        now: u64,
        receiver: usize,
        datagram: (u64, SocketAddr, bool),
        payload: &[u8],
    ) -> M::Response {
        self.receiving
            .handle_datagram_from(now, receiver, datagram, payload)
    }

    /// See [`Receiving::handle_timeout`].
    pub fn handle_timeout(&mut self, now: u64) {
        self.receiving.handle_timeout(now);
    }

    /// See [`Receiving::poll_progress`].
    pub fn poll_progress(&mut self, now: u64) -> Option<Progress> {
        self.receiving.poll_progress(now)
    }

    /// See [`Receiving::is_done`].
    pub fn is_done(&self, now: u64) -> bool {
        self.receiving.is_done(now)
    }

    /// The send half.
    pub fn sending(&self) -> &Sending {
        &self.sending
    }

    /// The receive half.
    pub fn receiving(&self) -> &Receiving<M> {
        &self.receiving
    }

    /// The two halves, for a send thread and a receive thread.
    pub fn into_parts(self) -> (Sending, Receiving<M>) {
        (self.sending, self.receiving)
    }

    /// A run put back together from its halves.
    pub fn from_parts(sending: Sending, receiving: Receiving<M>) -> Run<M> {
        Run { sending, receiving }
    }

    /// Ends the run at `now` (closing the interval log) and gives what it measured.
    pub fn finish(mut self, now: u64) -> Outcome<M> {
        self.receiving.finish(now);
        let start_ns = self.start_ns();
        Outcome {
            counts: self.sending.counts(),
            first_send_ns: self.sending.first_send_ns.unwrap_or(start_ns),
            last_send_ns: self.sending.last_send_ns,
            sent: self.sending.sent,
            intervals: self.receiving.intervals,
            meter: self.receiving.meter,
            start_ns,
        }
    }
}

#[cfg(test)]
mod tests;
