//! The sending half: writes probe headers as they fall due.

use latlab_wire::probe;

use crate::schedule::Schedule;
use crate::{Error, ProbeConfig};

/// One probe written by [`Sender::poll_transmit`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Transmit {
    /// Which flow (socket) it goes out on.
    pub flow: u32,
    /// Its sequence number within the flow.
    pub seq: u64,
    /// When the schedule said it was due.
    pub intended_ns: u64,
    /// Bytes to send: the configured payload length, or the message's size under a
    /// [`Traffic`](crate::Traffic) (at least the probe header).
    pub len: usize,
}

/// What a sender sent, split at the end of the warm-up.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SendCounts {
    /// Probes due during the warm-up.
    pub warmup: u64,
    /// Probes due after the warm-up: the ones the result accounts for.
    pub measured: u64,
    /// Per flow, how many probes (warm-up included) were sent: sequence numbers 0..n.
    pub per_flow: Vec<u64>,
    /// Probes that fell due but were never sent, because the sending time was over before the
    /// sender caught up with its schedule (it could not keep up with the rate). Not counted as
    /// sent nor as lost.
    pub unsent: u64,
    /// Messages of a [`Traffic`](crate::Traffic) smaller than the probe header, sent with the
    /// header's size instead (a probe must carry its header to be measured).
    pub raised: u64,
    /// Probes due while their flow still waited for the answer to its last one (a protocol
    /// with one request in flight per flow): not sent, and not among `measured`.
    pub busy: u64,
}

/// Writes probe headers according to an open-loop schedule.
///
/// Call [`poll_timeout`](Sender::poll_timeout) for when the next probe is due, then
/// [`poll_transmit`](Sender::poll_transmit) while it returns `Some`. A caller that comes late
/// gets every probe it owes, each carrying its own intended send time.
#[derive(Debug)]
pub struct Sender {
    config: ProbeConfig,
    schedule: Schedule,
    next_seq: Vec<u64>,
    next_flow: u32,
    max_per_flow: u64,
    counts: SendCounts,
    closed: bool,
}

impl Sender {
    /// A sender for one run.
    pub fn new(config: &ProbeConfig) -> Result<Self, Error> {
        config.validate()?;
        Ok(Sender {
            schedule: match &config.traffic {
                Some(traffic) => {
                    Schedule::from_traffic(traffic.clone(), config.start_ns, config.seed)?
                }
                None => Schedule::new(
                    config.pattern,
                    config.rate_pps,
                    config.start_ns,
                    config.seed,
                )?,
            },
            next_seq: vec![0; config.flows as usize],
            next_flow: 0,
            max_per_flow: config.max_probes_per_flow(),
            counts: SendCounts {
                per_flow: vec![0; config.flows as usize],
                ..SendCounts::default()
            },
            closed: false,
            config: config.clone(),
        })
    }

    /// When the next probe is due, or `None` when the run has sent everything.
    pub fn poll_timeout(&self) -> Option<u64> {
        if self.closed {
            return None;
        }
        let due = self.schedule.next_due();
        let flow = self.next_flow as usize;
        if due >= self.config.end_ns() || self.next_seq[flow] >= self.max_per_flow {
            None
        } else {
            Some(due)
        }
    }

    /// If a probe is due at `now`, writes its header into the start of `buf` (which must hold
    /// the configured payload length; bytes past the header are left as they are) and returns
    /// it. The actual send time is left 0 for the engine to stamp just before sending.
    ///
    /// Sending ends with the sending time: once `now` reaches it, probes still owed are counted
    /// as [`unsent`](SendCounts::unsent) and nothing more is sent.
    pub fn poll_transmit(&mut self, now: u64, buf: &mut [u8]) -> Option<Transmit> {
        let due = self.poll_timeout()?;
        if now >= self.config.end_ns() {
            self.close();
            return None;
        }
        if due > now || buf.len() < self.config.payload_len {
            return None;
        }
        let len = match self.schedule.next_size() {
            Some(size) if size < probe::HEADER_LEN => {
                self.counts.raised += 1;
                probe::HEADER_LEN
            }
            // `validate` checked that no message is longer than the payload length.
            Some(size) => size.min(self.config.payload_len),
            None => self.config.payload_len,
        };
        self.schedule.advance();
        let flow = self.next_flow;
        let seq = self.next_seq[flow as usize];
        self.next_seq[flow as usize] += 1;
        self.next_flow = (flow + 1) % self.config.flows;
        self.counts.per_flow[flow as usize] += 1;
        if due < self.config.measure_from_ns() {
            self.counts.warmup += 1;
        } else {
            self.counts.measured += 1;
        }
        let repr = probe::Repr {
            run_id: self.config.run_id,
            flow,
            seq,
            intended_send_ns: due,
            actual_send_ns: 0,
            responder: None,
            responder_clock: probe::ResponderClock::NotAsked,
        };
        repr.emit(&mut probe::Packet::new_unchecked(&mut buf[..]));
        Some(Transmit {
            flow,
            seq,
            intended_ns: due,
            len,
        })
    }

    /// Ends sending: every probe still due before the end of the sending time is counted as
    /// unsent, arithmetically (constant time however many are owed).
    fn close(&mut self) {
        if self.closed {
            return;
        }
        if self.poll_timeout().is_some() {
            self.counts.unsent += self.schedule.skip_until(self.config.end_ns());
        }
        self.closed = true;
    }

    /// What was sent so far.
    pub fn counts(&self) -> SendCounts {
        self.counts.clone()
    }

    /// The configuration of this run.
    pub fn config(&self) -> &ProbeConfig {
        &self.config
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Pattern;

    fn config() -> ProbeConfig {
        ProbeConfig {
            flows: 2,
            rate_pps: 1000.0,
            start_ns: 5_000,
            duration_ns: 10_000_000,
            warmup_ns: 2_000_000,
            ..ProbeConfig::default()
        }
    }

    #[test]
    fn nothing_is_sent_before_it_is_due() {
        let mut s = Sender::new(&config()).unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(s.poll_timeout(), Some(5_000));
        assert!(s.poll_transmit(4_999, &mut buf).is_none());
        assert!(s.poll_transmit(5_000, &mut buf).is_some());
        assert!(s.poll_transmit(5_000, &mut buf).is_none());
        assert_eq!(s.poll_timeout(), Some(1_005_000));
    }

    #[test]
    fn a_late_caller_gets_every_probe_it_owes_with_its_own_intended_time() {
        let mut s = Sender::new(&config()).unwrap();
        let mut buf = [0u8; 64];
        let mut sent = Vec::new();
        while let Some(t) = s.poll_transmit(3_005_000, &mut buf) {
            let p = probe::Packet::new_checked(&buf[..]).unwrap();
            assert_eq!(p.intended_send_ns(), t.intended_ns);
            assert_eq!(p.seq(), t.seq);
            assert_eq!(p.flow(), t.flow);
            sent.push((t.flow, t.seq, t.intended_ns));
        }
        assert_eq!(
            sent,
            vec![
                (0, 0, 5_000),
                (1, 0, 1_005_000),
                (0, 1, 2_005_000),
                (1, 1, 3_005_000)
            ]
        );
    }

    #[test]
    fn the_run_ends_at_its_duration_and_counts_warmup_apart() {
        let mut s = Sender::new(&config()).unwrap();
        let mut buf = [0u8; 64];
        let mut n = 0;
        while let Some(due) = s.poll_timeout() {
            s.poll_transmit(due, &mut buf).unwrap();
            n += 1;
        }
        assert_eq!(n, 10);
        assert_eq!(s.poll_timeout(), None);
        let c = s.counts();
        assert_eq!((c.warmup, c.measured), (2, 8));
        assert_eq!(c.per_flow, vec![5, 5]);
    }

    #[test]
    fn a_sender_that_cannot_keep_up_stops_at_the_end_and_counts_what_it_owed() {
        let mut s = Sender::new(&config()).unwrap();
        let mut buf = [0u8; 64];
        // Three probes go out on time, then the sender is stalled past the end of the run.
        for _ in 0..3 {
            let due = s.poll_timeout().unwrap();
            s.poll_transmit(due, &mut buf).unwrap();
        }
        assert!(s.poll_transmit(5_000 + 10_000_000, &mut buf).is_none());
        assert_eq!(s.poll_timeout(), None);
        let c = s.counts();
        assert_eq!((c.warmup + c.measured, c.unsent), (3, 7));
    }

    #[test]
    fn a_stalled_sender_counts_what_it_owed_without_drawing_each_probe() {
        // 10^12 probes owed at the highest rate: counted exactly, in one step.
        let cfg = ProbeConfig {
            rate_pps: crate::MAX_RATE_PPS,
            duration_ns: 1_000_000_000_000,
            ..config()
        };
        let mut s = Sender::new(&cfg).unwrap();
        let mut buf = [0u8; 64];
        s.poll_transmit(cfg.start_ns, &mut buf).unwrap();
        assert!(s.poll_transmit(cfg.end_ns(), &mut buf).is_none());
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(s.counts().unsent, 1_000_000_000_000 - 1);
        // A Poisson schedule owes a random number of them, near rate × time left.
        let poisson = ProbeConfig {
            pattern: Pattern::Poisson,
            ..cfg
        };
        let mut s = Sender::new(&poisson).unwrap();
        assert!(s.poll_transmit(poisson.end_ns(), &mut buf).is_none());
        let unsent = s.counts().unsent as f64;
        assert!((unsent - 1e12).abs() < 10.0 * 1e6, "{unsent}");
    }

    #[test]
    fn padding_is_left_untouched() {
        let mut s = Sender::new(&config()).unwrap();
        let mut buf = [0xAAu8; 64];
        s.poll_transmit(5_000, &mut buf).unwrap();
        assert!(buf[probe::HEADER_LEN..].iter().all(|&b| b == 0xAA));
    }

    #[test]
    fn bad_configurations_name_the_field() {
        let bad = ProbeConfig {
            payload_len: 10,
            ..config()
        };
        assert!(Sender::new(&bad)
            .unwrap_err()
            .to_string()
            .starts_with("payload_len must be at least"));
        let bad = ProbeConfig {
            rate_pps: -1.0,
            ..config()
        };
        assert!(Sender::new(&bad)
            .unwrap_err()
            .to_string()
            .starts_with("rate_pps must be"));
        let bad = ProbeConfig {
            rate_pps: 1e30,
            ..config()
        };
        assert!(Sender::new(&bad)
            .unwrap_err()
            .to_string()
            .starts_with("rate_pps must be at most 1e9"));
        let bad = ProbeConfig {
            pattern: Pattern::Poisson,
            flows: 0,
            ..config()
        };
        assert!(Sender::new(&bad)
            .unwrap_err()
            .to_string()
            .starts_with("flows must be"));
    }

    #[test]
    fn traffic_sets_each_probes_size_and_raises_those_below_the_header() {
        use crate::model::Message;
        let messages = [(10, 0), (100, 1_000_000), (60, 1_000_000), (56, 0)]
            .map(|(size, gap_ns)| Message { size, gap_ns });
        let config = ProbeConfig {
            flows: 1,
            payload_len: 100,
            traffic: Some(crate::Traffic::Trace(messages.into())),
            ..config()
        };
        let mut s = Sender::new(&config).unwrap();
        let mut buf = [0u8; 100];
        let mut sent = Vec::new();
        while let Some(t) = s.poll_transmit(9_000_000, &mut buf) {
            sent.push((t.intended_ns, t.len));
        }
        assert_eq!(
            sent,
            vec![
                (5_000, probe::HEADER_LEN),
                (1_005_000, 100),
                (2_005_000, 60),
                (2_005_000, 56)
            ]
        );
        assert_eq!(s.counts().raised, 1);
        assert_eq!(s.poll_timeout(), None, "the trace is over");
        let too_long = ProbeConfig {
            payload_len: 64,
            ..config
        };
        assert_eq!(
            Sender::new(&too_long).unwrap_err(),
            Error::TrafficTooLarge {
                largest: 100,
                payload_len: 64
            }
        );
    }
}
