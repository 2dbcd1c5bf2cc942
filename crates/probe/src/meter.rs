//! The receiving half: matches responses to probes and records their latency.
//!
//! [`RunWindow`] says which datagrams are probes of this run; [`Meter`] uses it for a
//! reflected run (one response per probe), [`crate::FanoutMeter`] for a game server's fan-out.

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

/// The two one-way delays of one response, from the responder's stamps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OneWay {
    /// The responder's receive stamp − the intended send time.
    pub forward_ns: u64,
    /// Arrival − the responder's transmit stamp.
    pub reverse_ns: u64,
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
    /// Messages of a traffic model or trace smaller than the probe header, sent at its size.
    pub raised: u64,
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
    /// One-way delay out: the responder's receive stamp − the intended send time, when it
    /// stamped. A figure only where the generator and the responder read one clock (the
    /// namespaces of one host); across separate clocks it holds their offset too.
    pub forward: LatencyHistogram,
    /// One-way delay back: arrival − the responder's transmit stamp, when it stamped (same
    /// caveat as `forward`).
    pub reverse: LatencyHistogram,
    /// Stamped responses whose stamps put the responder's receive before the intended send or
    /// its transmit after the arrival: impossible on one clock, so proof that the clocks are
    /// separate (left out of `forward` and `reverse`).
    pub one_way_impossible: u64,
    /// The first [`TRACE_CAP`] measured responses as (intended send time, latency), in the
    /// order they arrived: per-packet latency over time.
    pub trace: Vec<(u64, u64)>,
}

/// How many per-packet samples a meter keeps for [`MeterReport::trace`].
pub const TRACE_CAP: usize = 20_000;

impl MeterReport {
    /// A report of nothing yet: every count zero, every histogram empty.
    pub fn empty() -> MeterReport {
        MeterReport {
            sent: 0,
            warmup_sent: 0,
            unsent: 0,
            raised: 0,
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
            forward: LatencyHistogram::new(),
            reverse: LatencyHistogram::new(),
            one_way_impossible: 0,
            trace: Vec::new(),
        }
    }

    /// All malformed datagrams, whatever the cause.
    pub fn malformed(&self) -> u64 {
        self.not_a_probe + self.foreign_run + self.unknown_probe + self.bad_time
    }
}

#[derive(Debug, Clone, Default)]
pub(crate) struct FlowState {
    /// Bit `seq` is set once a response to `seq` is counted; grows as sequence numbers do.
    seen: Vec<u64>,
    highest: Option<u64>,
}

impl FlowState {
    /// Marks `seq` seen; returns whether it was seen before.
    pub(crate) fn mark(&mut self, seq: u64) -> bool {
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
pub(crate) struct RunWindow {
    run_id: u32,
    flows: u32,
    first_due_ns: u64,
    end_ns: u64,
    pub(crate) measure_from_ns: u64,
    max_per_flow: u64,
}

impl RunWindow {
    pub(crate) fn new(config: &ProbeConfig) -> RunWindow {
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
    pub(crate) fn check(&self, rx_ns: u64, payload: &[u8]) -> Result<probe::Repr, Malformed> {
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
    /// The one-way delays of the last recorded response, for the interval log.
    last_one_way: Option<OneWay>,
}

impl Meter {
    /// A meter for the run `config` describes.
    pub fn new(config: &ProbeConfig) -> Meter {
        Meter {
            last_one_way: None,
            window: RunWindow::new(config),
            flows: vec![FlowState::default(); config.flows as usize],
            report: MeterReport::empty(),
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
        self.last_one_way = None;
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
            if rx >= intended && rx_ns >= tx {
                let one_way = OneWay {
                    forward_ns: rx - intended,
                    reverse_ns: rx_ns - tx,
                };
                self.report.forward.record(one_way.forward_ns);
                self.report.reverse.record(one_way.reverse_ns);
                self.last_one_way = Some(one_way);
            } else {
                self.report.one_way_impossible += 1;
            }
        }
        Response::Recorded {
            latency_ns,
            reordered,
        }
    }

    /// Distinct responses so far, warm-up included: when it reaches the number of probes sent,
    /// every probe is back.
    pub fn distinct_responses(&self) -> u64 {
        self.report.received + self.report.warmup_received
    }

    /// The one-way delays of the response just handled, if it was recorded and stamped by
    /// its responder.
    pub fn last_one_way(&self) -> Option<OneWay> {
        self.last_one_way
    }

    /// Distinct measured responses so far.
    pub fn received(&self) -> u64 {
        self.report.received
    }

    /// The counts and histograms so far (`sent`, `unsent` and `lost` are the sender's to
    /// give: 0 here until [`Meter::report`]).
    pub fn so_far(&self) -> &MeterReport {
        &self.report
    }

    /// The result, given what the sender sent. Call it after the grace period: probes not back
    /// by then count as lost.
    pub fn report(&self, sent: &SendCounts) -> MeterReport {
        let mut r = self.report.clone();
        r.sent = sent.measured;
        r.warmup_sent = sent.warmup;
        r.unsent = sent.unsent;
        r.raised = sent.raised;
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
    fn responder_stamps_split_the_round_trip_into_its_two_one_way_delays() {
        let cfg = ProbeConfig {
            warmup_ns: 0,
            ..config()
        };
        let (_, mut ps) = probes(&cfg);
        // Probe 0 is due at 1 ms: 300 µs out, 250 µs inside the responder, 2 ms back.
        probe::Packet::new_unchecked(&mut ps[0][..]).set_responder_stamps(1_300_000, 1_550_000);
        // Probe 1's stamps put the responder's receive before its send: another clock.
        probe::Packet::new_unchecked(&mut ps[1][..]).set_responder_stamps(900_000, 950_000);
        let mut m = Meter::new(&cfg);
        m.handle_response(3_550_000, &ps[0]);
        assert_eq!(
            m.last_one_way(),
            Some(OneWay {
                forward_ns: 300_000,
                reverse_ns: 2_000_000
            })
        );
        m.handle_response(3_600_000, &ps[1]);
        assert_eq!(m.last_one_way(), None);
        m.handle_response(3_700_000, &ps[0]);
        assert_eq!(m.last_one_way(), None, "a duplicate adds nothing");
        let r = &m.report;
        assert_eq!((r.forward.len(), r.reverse.len()), (1, 1));
        // The histograms keep three significant digits.
        let near = |got: u64, want: u64| got.abs_diff(want) * 1000 <= want;
        assert!(near(r.forward.max(), 300_000), "{}", r.forward.max());
        assert!(near(r.reverse.max(), 2_000_000), "{}", r.reverse.max());
        assert_eq!(r.one_way_impossible, 1);
        // Forward + dwell + back is the round trip.
        let sum = r.forward.max() + r.responder_dwell.max() + r.reverse.max();
        assert!(near(sum, 2_550_000) && near(r.latency.max(), 2_550_000));
    }
}
