//! The fan-out meter: each probe one client sends should come back at every client of its
//! game (the game server copies it to all of them).

use latlab_stats::LatencyHistogram;

use crate::meter::{FlowState, Malformed, RunWindow};
use crate::sender::SendCounts;
use crate::ProbeConfig;

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
    /// Messages of a traffic model or trace smaller than the probe header, sent at its size.
    pub raised: u64,
    /// Clients each probe should reach.
    pub clients: u32,
    /// Copies that should have arrived: `sent × clients`.
    pub copies_expected: u64,
    /// Distinct copies that arrived.
    pub copies_received: u64,
    /// Distinct copies of warm-up probes that arrived (of `warmup_sent × clients`).
    pub warmup_copies: u64,
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

    /// Copies that never arrived, the warm-up's included (the kernel's drop counters cannot
    /// tell them apart).
    pub fn copies_lost_with_warmup(&self) -> u64 {
        let warmup = self.warmup_sent * u64::from(self.clients);
        self.copies_expected.saturating_sub(self.copies_received)
            + warmup.saturating_sub(self.warmup_copies)
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
                raised: 0,
                clients,
                copies_expected: 0,
                copies_received: 0,
                warmup_copies: 0,
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

    /// How many clients each probe should reach.
    pub fn clients(&self) -> u32 {
        self.clients
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
        r.raised = sent.raised;
        r.copies_expected = sent.measured * u64::from(self.clients);
        r.warmup_copies = self.warmup_copies;
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
    use latlab_wire::probe;

    fn config() -> ProbeConfig {
        ProbeConfig {
            flows: 1,
            rate_pps: 1000.0,
            start_ns: 1_000_000,
            duration_ns: 10_000_000,
            warmup_ns: 0,
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
            out.push(buf);
        }
        (s, out)
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
    fn copies_lost_with_the_warmup_count_every_copy_that_never_came() {
        let cfg = ProbeConfig {
            warmup_ns: 3_000_000,
            ..config()
        };
        let (s, ps) = probes(&cfg);
        let mut m = FanoutMeter::new(&cfg, 2);
        // Every probe, the warm-up's too, reaches the first of the two clients only.
        for p in &ps {
            let due = probe::Packet::new_checked(&p[..])
                .unwrap()
                .intended_send_ns();
            m.handle_response(0, due + 1_000, p);
        }
        let r = m.report(&s.counts());
        assert!(r.warmup_sent > 0 && r.sent > 0, "{r:?}");
        assert_eq!(r.warmup_copies, r.warmup_sent);
        assert_eq!(r.copies_expected - r.copies_received, r.sent);
        assert_eq!(r.copies_lost_with_warmup(), r.sent + r.warmup_sent);
    }
}
