//! What a run measured ([`Outcome`]), from [`Run::finish`].

use super::*;

/// What a run measured, from [`Run::finish`].
#[derive(Debug)]
pub struct Outcome<M> {
    /// The meter, for its report.
    pub meter: M,
    /// What the sender sent (for the meter's report).
    pub counts: SendCounts,
    /// Per-interval latency histograms, in order.
    pub intervals: Vec<Interval>,
    /// When the first probe was due.
    pub start_ns: u64,
    /// When the first probe left (the start time when none did).
    pub first_send_ns: u64,
    /// When the last probe left.
    pub last_send_ns: u64,
    /// Probes the engine reported sent, warm-up included.
    pub sent: u64,
}

impl<M> Outcome<M> {
    /// Probes per second that actually left, between the first and the last send.
    pub fn achieved_pps(&self) -> f64 {
        let span = self.last_send_ns.saturating_sub(self.first_send_ns);
        if self.sent < 2 || span == 0 {
            return 0.0;
        }
        (self.sent - 1) as f64 * 1e9 / span as f64
    }
}
