//! The receive half of a protocol run: replies matched to their requests through the ledger,
//! latency from each request's intended send time, every other datagram counted by cause.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::Arc;

use latlab_stats::LatencyHistogram;

use super::{Cause, Key, Ledger, Read, Replies, Sent, SharedProtocol};
use crate::meter::{FlowState, MeterReport, RunWindow, TRACE_CAP};
use crate::run::Metering;
use crate::sender::SendCounts;
use crate::ProbeConfig;

/// What one datagram turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolResponse {
    /// A measured answer.
    Recorded {
        /// From the request's intended send time to the reply's arrival.
        latency_ns: u64,
    },
    /// An answer to a warm-up request.
    Warmup,
    /// A datagram of a reply that is not whole yet.
    Partial,
    /// Anything else, counted by cause.
    Other,
}

/// A protocol run's own counts, beside the [`MeterReport`] every run has.
#[derive(Clone, Debug)]
pub struct ProtocolReport {
    /// The protocol's name.
    pub protocol: &'static str,
    /// Measured requests answered.
    pub answered: u64,
    /// Measured requests sent and never answered.
    pub unanswered: u64,
    /// Replies to a request whose slot already held a later one (an answer that came after
    /// `slots` newer requests of its flow: it can no longer be matched).
    pub late: u64,
    /// Second and later answers to one request.
    pub duplicate: u64,
    /// Replies naming no request of this run (an ID never sent, another run's token).
    pub wrong_id: u64,
    /// Replies from another address than the target.
    pub wrong_source: u64,
    /// Datagrams that are no reply of the protocol, by cause (`not dns`, `truncated name`…).
    pub malformed: BTreeMap<&'static str, u64>,
    /// Replies to a request they do not answer (another question, another key), by cause.
    pub mismatch: BTreeMap<&'static str, u64>,
    /// Replies by the protocol's outcome (NOERROR, NXDOMAIN…), measured and warm-up alike, in
    /// [`super::Protocol::outcomes`]' order.
    pub outcomes: Vec<(&'static str, u64)>,
    /// Requests written into a slot whose request was still unanswered.
    pub ids_reused: u64,
    /// Requests due while their flow still waited (one in flight per flow), not sent.
    pub busy: u64,
    /// One request in flight per flow: open-loop across flows only.
    pub one_in_flight: bool,
    /// Slots per flow of the ledger.
    pub slots: u64,
    /// The server's own time per reply, where the protocol says it (NTP's T3 − T2).
    pub server_time: LatencyHistogram,
    /// The path's round trip with the server's time taken out: from the actual send to the
    /// arrival, minus the server's time (RFC 5905's delay).
    pub path: LatencyHistogram,
}

/// The meter of a protocol run.
pub struct ProtocolMeter {
    protocol: SharedProtocol,
    replies: Box<dyn Replies>,
    ledger: Arc<Ledger>,
    target: SocketAddr,
    window: RunWindow,
    flows: Vec<FlowState>,
    report: MeterReport,
    counts: ProtocolReport,
}

impl std::fmt::Debug for ProtocolMeter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProtocolMeter")
            .field("protocol", &self.protocol.name())
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl ProtocolMeter {
    /// The meter of a run of `config` towards `target`, reading replies with `replies` and
    /// the requests in `ledger`.
    pub fn new(
        config: &ProbeConfig,
        protocol: SharedProtocol,
        replies: Box<dyn Replies>,
        ledger: Arc<Ledger>,
        target: SocketAddr,
    ) -> ProtocolMeter {
        let counts = ProtocolReport {
            protocol: protocol.name(),
            answered: 0,
            unanswered: 0,
            late: 0,
            duplicate: 0,
            wrong_id: 0,
            wrong_source: 0,
            malformed: BTreeMap::new(),
            mismatch: BTreeMap::new(),
            outcomes: protocol.outcomes().iter().map(|n| (*n, 0)).collect(),
            ids_reused: 0,
            busy: 0,
            one_in_flight: protocol.one_in_flight(),
            slots: ledger.slots(),
            server_time: LatencyHistogram::new(),
            path: LatencyHistogram::new(),
        };
        ProtocolMeter {
            protocol,
            replies,
            ledger,
            target,
            window: RunWindow::new(config),
            flows: vec![FlowState::default(); config.flows as usize],
            report: MeterReport::empty(),
            counts,
        }
    }

    fn malformed(&mut self, cause: Cause) -> ProtocolResponse {
        *self.counts.malformed.entry(cause).or_default() += 1;
        self.report.not_a_probe += 1;
        ProtocolResponse::Other
    }

    /// Handles one datagram from `from` that arrived on `flow`'s socket at `rx_ns`
    /// (`truncated`: longer than the port's slot).
    pub fn handle_reply(
        &mut self,
        flow: usize,
        rx_ns: u64,
        from: SocketAddr,
        truncated: bool,
        payload: &[u8],
    ) -> ProtocolResponse {
        if from != self.target {
            self.counts.wrong_source += 1;
            self.report.foreign_run += 1;
            return ProtocolResponse::Other;
        }
        if truncated {
            return self.malformed("longer than a receive slot");
        }
        let Ok(flow32) = u32::try_from(flow) else {
            return self.malformed("unknown socket");
        };
        if flow >= self.flows.len() {
            return self.malformed("unknown socket");
        }
        let key = match self.replies.read(flow32, payload) {
            Ok(Read::Partial) => return ProtocolResponse::Partial,
            Ok(Read::Answer(key)) => key,
            Err(cause) => return self.malformed(cause),
        };
        let Some(sent) = self.find(flow32, key) else {
            return ProtocolResponse::Other;
        };
        let verdict = match self.replies.judge(flow32, &sent, payload) {
            Ok(v) => v,
            Err(cause) => {
                *self.counts.mismatch.entry(cause).or_default() += 1;
                self.report.unknown_probe += 1;
                return ProtocolResponse::Other;
            }
        };
        if self.flows[flow].mark(sent.seq) {
            self.counts.duplicate += 1;
            self.report.duplicated += 1;
            return ProtocolResponse::Other;
        }
        self.ledger.answer(flow32, sent.seq);
        if let Some(o) = self.counts.outcomes.get_mut(verdict.outcome) {
            o.1 += 1;
        }
        let intended = sent.intended_ns;
        if intended < self.window.measure_from_ns {
            self.report.warmup_received += 1;
            return ProtocolResponse::Warmup;
        }
        if rx_ns < intended {
            self.report.bad_time += 1;
            return self.malformed("arrived before it was due");
        }
        let latency_ns = rx_ns - intended;
        let r = &mut self.report;
        r.received += 1;
        r.latency.record(latency_ns);
        if r.trace.len() < TRACE_CAP {
            r.trace.push((intended, latency_ns));
        }
        if sent.actual_ns >= intended && sent.actual_ns <= rx_ns {
            r.send_lag.record(sent.actual_ns - intended);
            let from_actual = rx_ns - sent.actual_ns;
            r.latency_from_actual.record(from_actual);
            if let Some(server) = verdict.server_ns {
                r.responder_dwell.record(server);
                self.counts.server_time.record(server);
                self.counts.path.record(from_actual.saturating_sub(server));
            }
        }
        ProtocolResponse::Recorded { latency_ns }
    }

    /// The request `key` names on `flow`, or `None` (counted: late or wrong id).
    fn find(&mut self, flow: u32, key: Key) -> Option<Sent> {
        let slots = self.ledger.slots();
        let found = match key {
            Key::Slot(index) if index < slots => self.ledger.get(flow, index),
            Key::Slot(_) => None,
            Key::Seq(seq) => match self.ledger.get(flow, seq % slots) {
                Some(s) if s.seq == seq => Some(s),
                Some(s) if s.seq > seq => {
                    self.counts.late += 1;
                    self.report.unknown_probe += 1;
                    return None;
                }
                _ => None,
            },
            Key::Oldest => {
                let next = self.ledger.answered_through(flow);
                self.ledger.last(flow).filter(|s| s.seq >= next)
            }
        };
        if found.is_none() {
            self.counts.wrong_id += 1;
            self.report.unknown_probe += 1;
        }
        found
    }

    /// The protocol's counts, given what the sender sent (call it after the grace period).
    pub fn protocol_report(&self, sent: &SendCounts) -> ProtocolReport {
        let mut c = self.counts.clone();
        c.answered = self.report.received;
        c.unanswered = sent.measured.saturating_sub(self.report.received);
        c.ids_reused = self.ledger.reused();
        c.busy = sent.busy;
        c
    }

    /// The result every run has, given what the sender sent.
    pub fn report(&self, sent: &SendCounts) -> MeterReport {
        let mut r = self.report.clone();
        r.sent = sent.measured;
        r.warmup_sent = sent.warmup;
        r.unsent = sent.unsent;
        r.raised = sent.raised;
        r.lost = sent.measured.saturating_sub(r.received);
        r
    }

    /// The protocol.
    pub fn protocol(&self) -> &SharedProtocol {
        &self.protocol
    }
}

impl Metering for ProtocolMeter {
    type Response = ProtocolResponse;

    fn handle_datagram(&mut self, receiver: usize, rx_ns: u64, payload: &[u8]) -> Self::Response {
        let target = self.target;
        self.handle_reply(receiver, rx_ns, target, false, payload)
    }

    fn handle_datagram_from(
        &mut self,
        receiver: usize,
        rx_ns: u64,
        from: SocketAddr,
        truncated: bool,
        payload: &[u8],
    ) -> Self::Response {
        self.handle_reply(receiver, rx_ns, from, truncated, payload)
    }

    fn interval_latency(response: &Self::Response) -> Option<u64> {
        match response {
            ProtocolResponse::Recorded { latency_ns } => Some(*latency_ns),
            _ => None,
        }
    }

    fn responses_per_probe(&self) -> u64 {
        1
    }

    fn distinct_responses(&self) -> u64 {
        self.report.received + self.report.warmup_received
    }

    fn received(&self) -> u64 {
        self.report.received
    }

    fn so_far(&self) -> Option<&crate::meter::MeterReport> {
        Some(&self.report)
    }
}
