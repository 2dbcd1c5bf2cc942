//! What a generator run measured ([`GeneratorResult`]).

use latlab_io::port::{SendFailures, TimestampSource};
use latlab_probe::protocol::ProtocolReport;
use latlab_probe::{Interval, MeterReport, Outcome};

/// What a generator run measured.
#[derive(Clone, Debug)]
pub struct GeneratorResult {
    /// The meter's counts and histograms.
    pub report: MeterReport,
    /// Per-interval latency histograms, in order.
    pub intervals: Vec<Interval>,
    /// When the first probe was due (ns since the Unix epoch).
    pub start_ns: u64,
    /// When the first and the last probe left.
    pub first_send_ns: u64,
    /// See `first_send_ns`.
    pub last_send_ns: u64,
    /// Where the receive stamps came from.
    pub timestamp_source: TimestampSource,
    /// The run was cut short by the stop flag.
    pub stopped_early: bool,
    /// Lengths of the runs of consecutive lost probes, in send order.
    pub loss_bursts: Vec<u64>,
    /// Probes the ports could not send to the target (counted as lost), by cause.
    pub send_failed: SendFailures,
    /// A protocol run's own counts (answered, wrong id, outcome codes…).
    pub protocol: Option<ProtocolReport>,
}

impl GeneratorResult {
    /// Probes per second that actually left, over the sending time.
    pub fn achieved_pps(&self) -> f64 {
        let sent = self.report.sent + self.report.warmup_sent;
        let span = self.last_send_ns.saturating_sub(self.first_send_ns);
        if sent < 2 || span == 0 {
            return 0.0;
        }
        (sent - 1) as f64 * 1e9 / span as f64
    }
}

/// What a run's outcome says besides its meter.
pub(super) struct OutcomeParts {
    pub(super) intervals: Vec<Interval>,
    pub(super) start_ns: u64,
    pub(super) first_send_ns: u64,
    pub(super) last_send_ns: u64,
}

impl OutcomeParts {
    pub(super) fn of<M>(outcome: &Outcome<M>) -> OutcomeParts {
        OutcomeParts {
            intervals: outcome.intervals.clone(),
            start_ns: outcome.start_ns,
            first_send_ns: outcome.first_send_ns,
            last_send_ns: outcome.last_send_ns,
        }
    }
}
