//! The RTT estimate (RFC 6298) and the congestion window.

/// Retransmission timeout before the first RTT sample (RFC 6298: 1 s).
pub(crate) const INITIAL_RTO_NS: u64 = 1_000_000_000;
/// Clock granularity G of RFC 6298 (1 ms).
const GRANULARITY_NS: u64 = 1_000_000;
/// Largest RTO (60 s, RFC 6298 2.5).
const MAX_RTO_NS: u64 = 60_000_000_000;

/// SRTT, RTTVAR and RTO of RFC 6298, in integer nanoseconds.
///
/// Karn's rule holds by construction: packet numbers are never reused and a retransmitted
/// message travels in a new packet, so an ACK names exactly the transmission it answers and
/// every sample is unambiguous.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RttEstimator {
    srtt: Option<u64>,
    rttvar: u64,
}

impl RttEstimator {
    pub(crate) const fn new() -> RttEstimator {
        RttEstimator {
            srtt: None,
            rttvar: 0,
        }
    }

    /// Takes one sample (ns).
    pub(crate) fn update(&mut self, sample: u64) {
        match self.srtt {
            None => {
                self.srtt = Some(sample);
                self.rttvar = sample / 2;
            }
            Some(srtt) => {
                self.rttvar = (3 * self.rttvar + srtt.abs_diff(sample)) / 4;
                self.srtt = Some((7 * srtt + sample) / 8);
            }
        }
    }

    pub(crate) fn srtt(&self) -> Option<u64> {
        self.srtt
    }

    pub(crate) fn rttvar(&self) -> u64 {
        self.rttvar
    }

    /// `max(min_rto, SRTT + max(G, 4·RTTVAR))`, at most 60 s; 1 s before the first sample.
    pub(crate) fn rto(&self, min_rto: u64) -> u64 {
        match self.srtt {
            None => INITIAL_RTO_NS.max(min_rto),
            Some(srtt) => (srtt + GRANULARITY_NS.max(4 * self.rttvar))
                .max(min_rto)
                .min(MAX_RTO_NS),
        }
    }
}

/// A NewReno window in bytes that holds back only a window-limited sender: a thin stream
/// (fewer than `thin_packets` packets in flight) may always send.
///
/// Halved at most once per round trip (a loss of a packet sent before the current recovery
/// began does not halve it again); collapsed to its minimum on persistent congestion (two
/// retransmission timeouts in a row without an ACK in between).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Congestion {
    pub(crate) window: usize,
    ssthresh: usize,
    min_window: usize,
    recovery_start: Option<u64>,
}

impl Congestion {
    pub(crate) fn new(mtu: usize) -> Congestion {
        Congestion {
            window: 10 * mtu,
            ssthresh: usize::MAX,
            min_window: 2 * mtu,
            recovery_start: None,
        }
    }

    /// Whether a packet of `len` bytes may go out now.
    pub(crate) fn can_send(
        &self,
        bytes_in_flight: usize,
        packets_in_flight: usize,
        len: usize,
        thin_packets: usize,
    ) -> bool {
        packets_in_flight < thin_packets || bytes_in_flight + len <= self.window
    }

    /// `bytes` of a packet sent at `sent` were acknowledged; `limited`: the sender was using
    /// at least half its window (an app-limited sender does not grow it).
    pub(crate) fn on_ack(&mut self, sent: u64, bytes: usize, mtu: usize, limited: bool) {
        if !limited || self.recovery_start.is_some_and(|start| sent <= start) {
            return;
        }
        if self.window < self.ssthresh {
            self.window += bytes;
        } else {
            self.window += (mtu * bytes / self.window).max(1);
        }
    }

    /// A packet sent at `sent` was declared lost at `now`.
    pub(crate) fn on_loss(&mut self, sent: u64, now: u64) {
        if self.recovery_start.is_some_and(|start| sent <= start) {
            return;
        }
        self.recovery_start = Some(now);
        self.ssthresh = (self.window / 2).max(self.min_window);
        self.window = self.ssthresh;
    }

    /// Persistent congestion: back to the minimum window.
    pub(crate) fn collapse(&mut self, now: u64) {
        self.recovery_start = Some(now);
        self.ssthresh = (self.window / 2).max(self.min_window);
        self.window = self.min_window;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn rfc_6298_by_hand() {
        let mut rtt = RttEstimator::new();
        assert_eq!(rtt.rto(200 * MS), INITIAL_RTO_NS);
        rtt.update(100 * MS);
        // SRTT = R, RTTVAR = R/2, RTO = SRTT + 4·RTTVAR.
        assert_eq!((rtt.srtt(), rtt.rttvar()), (Some(100 * MS), 50 * MS));
        assert_eq!(rtt.rto(200 * MS), 300 * MS);
        rtt.update(180 * MS);
        // RTTVAR = 3/4·50 + 1/4·|100 − 180| = 57.5; SRTT = 7/8·100 + 1/8·180 = 110.
        assert_eq!((rtt.srtt(), rtt.rttvar()), (Some(110 * MS), 57_500_000));
        assert_eq!(rtt.rto(200 * MS), 340 * MS);
        // The minimum RTO wins once the variation has settled.
        for _ in 0..40 {
            rtt.update(110 * MS);
        }
        assert_eq!(rtt.rto(200 * MS), 200 * MS);
        assert_eq!(
            rtt.rto(50 * MS),
            111 * MS,
            "SRTT + G (1 ms) when 4·RTTVAR < G"
        );
    }

    #[test]
    fn the_window_halves_once_per_round_trip_and_never_holds_a_thin_stream() {
        let mut cc = Congestion::new(1200);
        assert_eq!(cc.window, 12_000);
        cc.on_loss(10, 100);
        assert_eq!(cc.window, 6_000);
        cc.on_loss(50, 120); // sent before the recovery began: same congestion event
        assert_eq!(cc.window, 6_000);
        cc.on_loss(150, 300);
        assert_eq!(cc.window, 3_000);
        cc.collapse(400);
        assert_eq!(cc.window, 2_400);
        assert!(
            !cc.can_send(2_400, 10, 1_200, 4),
            "window-limited bulk sender waits"
        );
        assert!(
            cc.can_send(1_000_000, 3, 1_200, 4),
            "a thin stream never waits"
        );
    }
}
