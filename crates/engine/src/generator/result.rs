//! What a generator run measured ([`GeneratorResult`]), and the run driven to it.

use std::io;

use latlab_io::port::{DatagramPort, SendFailures, TimestampSource};
use latlab_probe::protocol::{ProtocolMeter, ProtocolReport};
use latlab_probe::{Interval, Meter, MeterReport, Metering, Progress, Run, SendCounts};

use latlab_stats::stalls::{StallSource, Stalls};

use super::{drive_counting, Drive, NoBackground};
use crate::Stop;

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
    /// The host's stalls of the generator's loops over the run ([`crate::stalls`]).
    pub host_stalls: Stalls,
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

/// Drives `run` over `ports` (whose receive stamps come from `timestamp_source`) until it is
/// done, and makes its result.
pub(super) fn drive_to_result<P: DatagramPort, M: Metering + Send + Reported>(
    ports: &mut [P],
    how: Drive<'_>,
    run: Run<M>,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
    timestamp_source: TimestampSource,
) -> io::Result<GeneratorResult> {
    let mut send_failed = SendFailures::default();
    let mut host_stalls = Stalls::new(StallSource::Loop);
    let (outcome, stopped_early) = drive_counting(
        ports,
        how,
        run,
        NoBackground,
        stop,
        progress,
        (&mut send_failed, &mut host_stalls),
    )?;
    let (report, loss_bursts, protocol) = outcome.meter.reported(&outcome.counts);
    Ok(GeneratorResult {
        loss_bursts,
        report,
        intervals: outcome.intervals,
        start_ns: outcome.start_ns,
        first_send_ns: outcome.first_send_ns,
        last_send_ns: outcome.last_send_ns,
        timestamp_source,
        stopped_early,
        send_failed,
        protocol,
        host_stalls,
    })
}

/// What a generator's meter reports at the end of a run, given what was sent: the report
/// every run has, the lengths of its loss bursts (latlab's probes), a protocol's own counts.
pub(super) trait Reported {
    fn reported(&self, sent: &SendCounts) -> (MeterReport, Vec<u64>, Option<ProtocolReport>);
}

impl Reported for Meter {
    fn reported(&self, sent: &SendCounts) -> (MeterReport, Vec<u64>, Option<ProtocolReport>) {
        (self.report(sent), self.loss_bursts(sent), None)
    }
}

impl Reported for ProtocolMeter {
    fn reported(&self, sent: &SendCounts) -> (MeterReport, Vec<u64>, Option<ProtocolReport>) {
        (
            self.report(sent),
            Vec::new(),
            Some(self.protocol_report(sent)),
        )
    }
}
