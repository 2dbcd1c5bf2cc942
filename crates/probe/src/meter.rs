//! The receiving half: matches responses to probes and records their latency.

use latlab_stats::LatencyHistogram;
use latlab_wire::probe;

use crate::sender::SendCounts;
use crate::ProbeConfig;

/// Why a datagram was not counted as a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Malformed {
    /// Too short, wrong magic or version: not a latlab probe at all.
    NotAProbe,
    /// A probe of another run (its run id differs).
    ForeignRun,
    /// A flow or sequence number this run never sent.
    UnknownProbe,
    /// An intended send time outside this run, or later than its arrival.
    BadTime,
}

/// What one received datagram turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Response {
    /// A first response to a probe of the measured part of the run.
    Recorded {
        /// Arrival minus intended send time.
        latency_ns: u64,
        /// It arrived after a probe sent later on the same flow.
        reordered: bool,
    },
    /// A first response to a warm-up probe: not part of the result.
    Warmup,
    /// A second (or later) response to the same probe.
    Duplicated,
    /// Dropped and counted by cause.
    Malformed(Malformed),
}

/// Counts and histograms of one run, from [`Meter::report`].
#[derive(Clone, Debug)]
pub struct MeterReport {
    /// Probes sent after the warm-up.
    pub sent: u64,
    /// Probes sent during the warm-up.
    pub warmup_sent: u64,
    /// Probes that fell due but were never sent: the sender could not keep up.
    pub unsent: u64,
    /// Distinct measured probes that came back.
    pub received: u64,
    /// `sent - received`: measured probes that never came back (within the grace period).
    pub lost: u64,
    /// Responses that arrived after one sent later on the same flow.
    pub reordered: u64,
    /// Extra copies of responses already counted (warm-up ones included).
    pub duplicated: u64,
    /// Warm-up responses received (left out of everything else).
    pub warmup_received: u64,
    /// Malformed datagrams, by cause.
    pub not_a_probe: u64,
    /// Probes of another run.
    pub foreign_run: u64,
    /// Flow or sequence numbers this run never sent.
    pub unknown_probe: u64,
    /// Impossible send times.
    pub bad_time: u64,
    /// Latency from the intended send time to arrival, measured probes only.
    pub latency: LatencyHistogram,
    /// How late the sender was: actual send time − intended send time, measured probes only.
    pub send_lag: LatencyHistogram,
    /// Latency from the *actual* send time to arrival: what a closed-loop tool reports. The
    /// difference to `latency` is the sender's own stalls (coordinated omission).
    pub latency_from_actual: LatencyHistogram,
    /// Time inside the responder (its transmit − its receive stamp), when it stamped.
    pub responder_dwell: LatencyHistogram,
    /// The first [`TRACE_CAP`] measured responses as (intended send time, latency), in the
    /// order they arrived: per-packet latency over time.
    pub trace: Vec<(u64, u64)>,
}

/// How many per-packet samples a meter keeps for [`MeterReport::trace`].
pub const TRACE_CAP: usize = 20_000;

impl MeterReport {
    /// All malformed datagrams, whatever the cause.
    pub fn malformed(&self) -> u64 {
        self.not_a_probe + self.foreign_run + self.unknown_probe + self.bad_time
    }
}

#[derive(Debug, Clone, Default)]
struct FlowState {
    /// Bit `seq` is set once a response to `seq` is counted; grows as sequence numbers do.
    seen: Vec<u64>,
    highest: Option<u64>,
}

impl FlowState {
    /// Marks `seq` seen; returns whether it was seen before.
    fn mark(&mut self, seq: u64) -> bool {
        let (word, bit) = ((seq / 64) as usize, seq % 64);
        if word >= self.seen.len() {
            self.seen.resize(word + 1, 0);
        }
        let before = self.seen[word] & (1 << bit) != 0;
        self.seen[word] |= 1 << bit;
        before
    }
}

/// What makes a probe one of this run's: its run id, flow, sequence number and send time.
#[derive(Debug, Clone)]
struct RunWindow {
    run_id: u32,
    flows: u32,
    first_due_ns: u64,
    end_ns: u64,
    measure_from_ns: u64,
    max_per_flow: u64,
}

impl RunWindow {
    fn new(config: &ProbeConfig) -> RunWindow {
        RunWindow {
            run_id: config.run_id,
            flows: config.flows,
            first_due_ns: config.start_ns,
            end_ns: config.end_ns(),
            measure_from_ns: config.measure_from_ns(),
            max_per_flow: config.max_probes_per_flow(),
        }
    }

    /// Parses `payload` and checks it is a probe this run could have sent before `rx_ns`.
    fn check(&self, rx_ns: u64, payload: &[u8]) -> Result<probe::Repr, Malformed> {
        let packet = probe::Packet::new_checked(payload).map_err(|_| Malformed::NotAProbe)?;
        let repr = probe::Repr::parse(&packet).map_err(|_| Malformed::NotAProbe)?;
        if repr.run_id != self.run_id {
            return Err(Malformed::ForeignRun);
        }
        if repr.flow >= self.flows || repr.seq >= self.max_per_flow {
            return Err(Malformed::UnknownProbe);
        }
        let intended = repr.intended_send_ns;
        if intended < self.first_due_ns || intended >= self.end_ns || intended > rx_ns {
            return Err(Malformed::BadTime);
        }
        Ok(repr)
    }
}

/// Matches responses to probes by flow and sequence number and records their latency.
///
/// Memory: one bit per probe sent, kept per flow, plus three histograms of fixed size.
#[derive(Debug)]
pub struct Meter {
    window: RunWindow,
    flows: Vec<FlowState>,
    report: MeterReport,
    interval: LatencyHistogram,
}

impl Meter {
    /// A meter for the run `config` describes.
    pub fn new(config: &ProbeConfig) -> Meter {
        Meter {
            window: RunWindow::new(config),
            flows: vec![FlowState::default(); config.flows as usize],
            report: MeterReport {
                sent: 0,
                warmup_sent: 0,
                unsent: 0,
                received: 0,
                lost: 0,
                reordered: 0,
                duplicated: 0,
                warmup_received: 0,
                not_a_probe: 0,
                foreign_run: 0,
                unknown_probe: 0,
                bad_time: 0,
                latency: LatencyHistogram::new(),
                send_lag: LatencyHistogram::new(),
                latency_from_actual: LatencyHistogram::new(),
                responder_dwell: LatencyHistogram::new(),
                trace: Vec::new(),
            },
            interval: LatencyHistogram::new(),
        }
    }

    /// Handles one received datagram's UDP payload, which arrived at `rx_ns`.
    pub fn handle_response(&mut self, rx_ns: u64, payload: &[u8]) -> Response {
        let response = self.classify(rx_ns, payload);
        let r = &mut self.report;
        match response {
            Response::Recorded { reordered, .. } => {
                r.received += 1;
                r.reordered += u64::from(reordered);
            }
            Response::Warmup => r.warmup_received += 1,
            Response::Duplicated => r.duplicated += 1,
            Response::Malformed(Malformed::NotAProbe) => r.not_a_probe += 1,
            Response::Malformed(Malformed::ForeignRun) => r.foreign_run += 1,
            Response::Malformed(Malformed::UnknownProbe) => r.unknown_probe += 1,
            Response::Malformed(Malformed::BadTime) => r.bad_time += 1,
        }
        response
    }

    fn classify(&mut self, rx_ns: u64, payload: &[u8]) -> Response {
        let repr = match self.window.check(rx_ns, payload) {
            Ok(repr) => repr,
            Err(cause) => return Response::Malformed(cause),
        };
        let Some(flow) = self.flows.get_mut(repr.flow as usize) else {
            return Response::Malformed(Malformed::UnknownProbe);
        };
        let intended = repr.intended_send_ns;
        if flow.mark(repr.seq) {
            return Response::Duplicated;
        }
        let reordered = flow.highest.is_some_and(|h| repr.seq < h);
        flow.highest = Some(flow.highest.map_or(repr.seq, |h| h.max(repr.seq)));
        if intended < self.window.measure_from_ns {
            return Response::Warmup;
        }
        let latency_ns = rx_ns - intended;
        self.report.latency.record(latency_ns);
        self.interval.record(latency_ns);
        if self.report.trace.len() < TRACE_CAP {
            self.report.trace.push((intended, latency_ns));
        }
        if repr.actual_send_ns >= intended && repr.actual_send_ns <= rx_ns {
            self.report.send_lag.record(repr.actual_send_ns - intended);
            self.report
                .latency_from_actual
                .record(rx_ns - repr.actual_send_ns);
        }
        if let Some((rx, tx)) = repr.responder {
            if tx >= rx {
                self.report.responder_dwell.record(tx - rx);
            }
        }
        Response::Recorded {
            latency_ns,
            reordered,
        }
    }

    /// The latencies recorded since the last call (for per-interval logs), and a fresh start.
    pub fn take_interval(&mut self) -> LatencyHistogram {
        let fresh = LatencyHistogram::new();
        std::mem::replace(&mut self.interval, fresh)
    }

    /// Distinct responses so far, warm-up included: when it reaches the number of probes sent,
    /// every probe is back.
    pub fn distinct_responses(&self) -> u64 {
        self.report.received + self.report.warmup_received
    }

    /// Distinct measured responses so far.
    pub fn received(&self) -> u64 {
        self.report.received
    }

    /// The result, given what the sender sent. Call it after the grace period: probes not back
    /// by then count as lost.
    pub fn report(&self, sent: &SendCounts) -> MeterReport {
        let mut r = self.report.clone();
        r.sent = sent.measured;
        r.warmup_sent = sent.warmup;
        r.unsent = sent.unsent;
        r.lost = sent.measured.saturating_sub(r.received);
        r
    }

    /// The lengths of the runs of consecutive lost probes among the measured ones, in send
    /// order (round-robin over flows), for comparing a link's loss bursts with its model.
    pub fn loss_bursts(&self, sent: &SendCounts) -> Vec<u64> {
        let flows = self.flows.len() as u64;
        let total = sent.warmup + sent.measured;
        let mut bursts = Vec::new();
        let mut run = 0u64;
        for k in sent.warmup..total {
            let (flow, seq) = ((k % flows) as usize, k / flows);
            let state = &self.flows[flow];
            let (word, bit) = ((seq / 64) as usize, seq % 64);
            let seen = state.seen.get(word).is_some_and(|w| w & (1 << bit) != 0);
            if seen {
                if run > 0 {
                    bursts.push(run);
                }
                run = 0;
            } else {
                run += 1;
            }
        }
        if run > 0 {
            bursts.push(run);
        }
        bursts
    }
}

/// What one copy received by a fan-out meter turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanoutResponse {
    /// A copy that completed its probe: every client now has one.
    Last {
        /// Arrival of this (last) copy minus the intended send time.
        latency_ns: u64,
    },
    /// A first or intermediate copy.
    Copy,
    /// A copy of a warm-up probe.
    Warmup,
    /// A second copy of the same probe at the same client.
    Duplicated,
    /// Dropped and counted by cause.
    Malformed(Malformed),
}

/// Counts and histograms of a fan-out run, from [`FanoutMeter::report`].
#[derive(Clone, Debug)]
pub struct FanoutReport {
    /// Probes sent after the warm-up.
    pub sent: u64,
    /// Probes sent during the warm-up.
    pub warmup_sent: u64,
    /// Probes the sender owed but never sent.
    pub unsent: u64,
    /// Clients each probe should reach.
    pub clients: u32,
    /// Copies that should have arrived: `sent × clients`.
    pub copies_expected: u64,
    /// Distinct copies that arrived.
    pub copies_received: u64,
    /// Probes every client received.
    pub complete: u64,
    /// Extra copies.
    pub duplicated: u64,
    /// Datagrams dropped as not ours, by any cause.
    pub malformed: u64,
    /// Latency until the last client received its copy (complete probes only): the paper's
    /// definition of a game server's latency.
    pub latency_last: LatencyHistogram,
    /// Latency until the first client received its copy.
    pub latency_first: LatencyHistogram,
}

impl FanoutReport {
    /// Copies that never arrived, as a fraction of those expected.
    pub fn copy_loss_ratio(&self) -> f64 {
        if self.copies_expected == 0 {
            return 0.0;
        }
        1.0 - self.copies_received as f64 / self.copies_expected as f64
    }
}

/// The copies of one probe seen so far.
#[derive(Clone, Copy, Debug, Default)]
struct Copies {
    count: u16,
    earliest_rx_ns: u64,
    latest_rx_ns: u64,
    intended_ns: u64,
}

/// Meters a fan-out: each probe of flow 0 should reach every one of `clients` receivers (the
/// clients of a game server); latency is measured until the first and until the last copy, by
/// the copies' own arrival stamps, whatever order the receivers are read in.
///
/// Memory: per probe 26 bytes, per client one bit per probe.
#[derive(Debug)]
pub struct FanoutMeter {
    window: RunWindow,
    clients: u32,
    copies: Vec<Copies>,
    seen: Vec<FlowState>,
    warmup_copies: u64,
    report: FanoutReport,
}

impl FanoutMeter {
    /// A meter for `clients` receivers of the run `config` describes (its flow 0).
    pub fn new(config: &ProbeConfig, clients: u32) -> FanoutMeter {
        let clients = clients.clamp(1, u32::from(u16::MAX));
        FanoutMeter {
            window: RunWindow::new(config),
            clients,
            copies: Vec::new(),
            seen: vec![FlowState::default(); clients as usize],
            warmup_copies: 0,
            report: FanoutReport {
                sent: 0,
                warmup_sent: 0,
                unsent: 0,
                clients,
                copies_expected: 0,
                copies_received: 0,
                complete: 0,
                duplicated: 0,
                malformed: 0,
                latency_last: LatencyHistogram::new(),
                latency_first: LatencyHistogram::new(),
            },
        }
    }

    /// Handles one datagram received by client `client` at `rx_ns`.
    pub fn handle_response(&mut self, client: usize, rx_ns: u64, payload: &[u8]) -> FanoutResponse {
        let repr = match self.window.check(rx_ns, payload) {
            Ok(repr) => repr,
            Err(cause) => {
                self.report.malformed += 1;
                return FanoutResponse::Malformed(cause);
            }
        };
        let Some(seen) = self.seen.get_mut(client) else {
            self.report.malformed += 1;
            return FanoutResponse::Malformed(Malformed::UnknownProbe);
        };
        if seen.mark(repr.seq) {
            self.report.duplicated += 1;
            return FanoutResponse::Duplicated;
        }
        let intended = repr.intended_send_ns;
        if intended < self.window.measure_from_ns {
            self.warmup_copies += 1;
            return FanoutResponse::Warmup;
        }
        let seq = repr.seq as usize;
        if seq >= self.copies.len() {
            self.copies.resize(seq + 1, Copies::default());
        }
        let c = &mut self.copies[seq];
        if c.count == 0 {
            *c = Copies {
                count: 0,
                earliest_rx_ns: rx_ns,
                latest_rx_ns: rx_ns,
                intended_ns: intended,
            };
        }
        c.count += 1;
        c.earliest_rx_ns = c.earliest_rx_ns.min(rx_ns);
        c.latest_rx_ns = c.latest_rx_ns.max(rx_ns);
        self.report.copies_received += 1;
        if u32::from(c.count) == self.clients {
            let (last, first) = (c.latest_rx_ns - intended, c.earliest_rx_ns - intended);
            self.report.complete += 1;
            self.report.latency_last.record(last);
            self.report.latency_first.record(first);
            return FanoutResponse::Last { latency_ns: last };
        }
        FanoutResponse::Copy
    }

    /// Distinct measured copies so far.
    pub fn copies_received(&self) -> u64 {
        self.report.copies_received
    }

    /// Distinct copies so far, warm-up included: when it reaches probes sent × clients, every
    /// copy is in.
    pub fn distinct_copies(&self) -> u64 {
        self.report.copies_received + self.warmup_copies
    }

    /// The result, given what the sender sent (call it after the grace period).
    pub fn report(&self, sent: &SendCounts) -> FanoutReport {
        let mut r = self.report.clone();
        r.sent = sent.measured;
        r.warmup_sent = sent.warmup;
        r.unsent = sent.unsent;
        r.copies_expected = sent.measured * u64::from(self.clients);
        // Probes some clients never got still had a first copy.
        for c in &self.copies {
            if c.count > 0 && u32::from(c.count) < self.clients {
                r.latency_first.record(c.earliest_rx_ns - c.intended_ns);
            }
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Sender;

    fn config() -> ProbeConfig {
        ProbeConfig {
            flows: 2,
            rate_pps: 1000.0,
            start_ns: 1_000_000,
            duration_ns: 10_000_000,
            warmup_ns: 3_000_000,
            ..ProbeConfig::default()
        }
    }

    /// Sends the whole run at virtual time `now` = due time and returns the probes.
    fn probes(cfg: &ProbeConfig) -> (Sender, Vec<Vec<u8>>) {
        let mut s = Sender::new(cfg).unwrap();
        let mut out = Vec::new();
        while let Some(due) = s.poll_timeout() {
            let mut buf = vec![0u8; cfg.payload_len];
            s.poll_transmit(due, &mut buf).unwrap();
            probe::Packet::new_unchecked(&mut buf[..]).set_actual_send_ns(due + 500);
            out.push(buf);
        }
        (s, out)
    }

    #[test]
    fn latency_is_measured_from_the_intended_send_time() {
        let cfg = config();
        let (s, ps) = probes(&cfg);
        let mut m = Meter::new(&cfg);
        // A sender stalled 5 ms sends probe 4 late: the stall shows in its latency.
        let p = &ps[4];
        let intended = probe::Packet::new_checked(&p[..])
            .unwrap()
            .intended_send_ns();
        let r = m.handle_response(intended + 5_000_000 + 30_000, p);
        assert_eq!(
            r,
            Response::Recorded {
                latency_ns: 5_030_000,
                reordered: false
            }
        );
        let report = m.report(&s.counts());
        assert_eq!(report.received, 1);
        assert_eq!(report.sent, 7);
        assert_eq!(report.lost, 6);
        assert_eq!(report.send_lag.max(), 500);
        // Measured from the actual send, the 5 ms stall disappears: what a closed-loop tool
        // would have reported.
        assert_eq!(report.latency_from_actual.len(), 1);
        assert!((5_029_000..5_030_000).contains(&report.latency_from_actual.max()));
    }

    #[test]
    fn warmup_responses_stay_out_of_the_result() {
        let cfg = config();
        let (s, ps) = probes(&cfg);
        let mut m = Meter::new(&cfg);
        for p in &ps {
            let due = probe::Packet::new_checked(&p[..])
                .unwrap()
                .intended_send_ns();
            m.handle_response(due + 10_000, p);
        }
        let r = m.report(&s.counts());
        assert_eq!((r.warmup_sent, r.warmup_received), (3, 3));
        assert_eq!((r.sent, r.received, r.lost), (7, 7, 0));
        assert_eq!(r.latency.len(), 7);
        assert_eq!(r.trace.len(), 7);
        assert!(r.trace.iter().all(|&(_, l)| l == 10_000));
    }

    #[test]
    fn loss_bursts_are_runs_of_missing_probes_in_send_order() {
        let cfg = ProbeConfig {
            warmup_ns: 0,
            ..config()
        };
        let (s, ps) = probes(&cfg);
        let mut m = Meter::new(&cfg);
        // 10 probes over two flows; 2, 3, 4 and 9 never come back.
        for (i, p) in ps.iter().enumerate() {
            if ![2, 3, 4, 9].contains(&i) {
                m.handle_response(50_000_000, p);
            }
        }
        assert_eq!(m.loss_bursts(&s.counts()), vec![3, 1]);
    }

    #[test]
    fn duplicates_and_reordering_are_counted_not_recorded_twice() {
        let cfg = ProbeConfig {
            warmup_ns: 0,
            ..config()
        };
        let (s, ps) = probes(&cfg);
        let mut m = Meter::new(&cfg);
        let late = 20_000_000;
        // Flow 0 carries probes 0, 2, 4...; deliver its seq 2 before seq 1, and seq 2 twice.
        m.handle_response(late, &ps[0]);
        m.handle_response(late, &ps[4]);
        assert_eq!(
            m.handle_response(late, &ps[2]),
            Response::Recorded {
                latency_ns: late - 3_000_000,
                reordered: true
            }
        );
        assert_eq!(m.handle_response(late, &ps[4]), Response::Duplicated);
        let r = m.report(&s.counts());
        assert_eq!((r.received, r.reordered, r.duplicated), (3, 1, 1));
        assert_eq!(r.latency.len(), 3);
    }

    #[test]
    fn garbage_and_foreign_datagrams_are_counted_by_cause_and_change_nothing_else() {
        let cfg = config();
        let (_, ps) = probes(&cfg);
        let mut m = Meter::new(&cfg);
        let now = 50_000_000;
        assert_eq!(
            m.handle_response(now, b"hello"),
            Response::Malformed(Malformed::NotAProbe)
        );
        assert_eq!(
            m.handle_response(now, &ps[5][..20]),
            Response::Malformed(Malformed::NotAProbe)
        );
        let mut foreign = ps[5].clone();
        probe::Packet::new_unchecked(&mut foreign[..]).set_run_id(cfg.run_id ^ 1);
        assert_eq!(
            m.handle_response(now, &foreign),
            Response::Malformed(Malformed::ForeignRun)
        );
        let mut bad_flow = ps[5].clone();
        probe::Packet::new_unchecked(&mut bad_flow[..]).set_flow(9);
        assert_eq!(
            m.handle_response(now, &bad_flow),
            Response::Malformed(Malformed::UnknownProbe)
        );
        let mut future = ps[5].clone();
        probe::Packet::new_unchecked(&mut future[..]).set_intended_send_ns(now + 1);
        assert_eq!(
            m.handle_response(now, &future),
            Response::Malformed(Malformed::BadTime)
        );
        // A pseudo-random flood never panics and is never recorded.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..50_000usize {
            let len = i % 120;
            let mut buf = vec![0u8; len];
            for b in buf.iter_mut() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                *b = x as u8;
            }
            if len >= 4 && i % 3 == 0 {
                buf[..4].copy_from_slice(&probe::MAGIC);
            }
            assert!(matches!(
                m.handle_response(now, &buf),
                Response::Malformed(_)
            ));
        }
        assert_eq!(m.received(), 0);
        assert!(m.report.latency.is_empty());
    }

    #[test]
    fn responder_stamps_give_its_dwell_time() {
        let cfg = ProbeConfig {
            warmup_ns: 0,
            ..config()
        };
        let (_, mut ps) = probes(&cfg);
        probe::Packet::new_unchecked(&mut ps[0][..]).set_responder_stamps(1_000_100, 1_000_350);
        let mut m = Meter::new(&cfg);
        m.handle_response(2_000_000, &ps[0]);
        assert_eq!(m.report.responder_dwell.max(), 250);
    }

    #[test]
    fn fanout_latency_runs_to_the_last_client_and_partial_probes_are_not_complete() {
        let cfg = ProbeConfig {
            flows: 1,
            warmup_ns: 0,
            ..config()
        };
        let (s, ps) = probes(&cfg);
        let mut m = FanoutMeter::new(&cfg, 3);
        let due = |p: &Vec<u8>| {
            probe::Packet::new_checked(&p[..])
                .unwrap()
                .intended_send_ns()
        };
        // Probe 0 reaches clients 2, 0, 1 after 20, 35 and 10 µs, read in that order.
        let d0 = due(&ps[0]);
        assert_eq!(
            m.handle_response(2, d0 + 20_000, &ps[0]),
            FanoutResponse::Copy
        );
        assert_eq!(
            m.handle_response(0, d0 + 35_000, &ps[0]),
            FanoutResponse::Copy
        );
        assert_eq!(
            m.handle_response(0, d0 + 21_000, &ps[0]),
            FanoutResponse::Duplicated
        );
        assert_eq!(
            m.handle_response(1, d0 + 10_000, &ps[0]),
            FanoutResponse::Last { latency_ns: 35_000 }
        );
        // Probe 1 reaches only two of the three.
        let d1 = due(&ps[1]);
        m.handle_response(0, d1 + 5_000, &ps[1]);
        m.handle_response(1, d1 + 6_000, &ps[1]);
        assert!(matches!(
            m.handle_response(1, d1, b"junk"),
            FanoutResponse::Malformed(_)
        ));
        let r = m.report(&s.counts());
        assert_eq!(
            (r.complete, r.copies_received, r.duplicated, r.malformed),
            (1, 5, 1, 1)
        );
        assert_eq!(r.copies_expected, 30);
        assert_eq!(r.latency_last.len(), 1);
        assert_eq!(r.latency_first.len(), 2);
        // First and last copies by their arrival stamps, not by the order they were read in.
        assert!((35_000..35_100).contains(&r.latency_last.max()));
        // Probe 0 first reached a client after 10 µs, probe 1 after 5 µs.
        assert!((10_000..10_050).contains(&r.latency_first.max()));
        assert!((5_000..5_010).contains(&r.latency_first.min()));
        assert!((r.copy_loss_ratio() - 25.0 / 30.0).abs() < 1e-9);
    }

    #[test]
    fn intervals_hold_only_what_came_since_the_last_take() {
        let cfg = ProbeConfig {
            warmup_ns: 0,
            ..config()
        };
        let (_, ps) = probes(&cfg);
        let mut m = Meter::new(&cfg);
        m.handle_response(20_000_000, &ps[0]);
        m.handle_response(20_000_000, &ps[1]);
        assert_eq!(m.take_interval().len(), 2);
        m.handle_response(20_000_000, &ps[2]);
        assert_eq!(m.take_interval().len(), 1);
        assert_eq!(m.report.latency.len(), 3);
    }
}
