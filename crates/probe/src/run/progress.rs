//! What a run reports while it goes: where it is ([`Progress`]), and for a live view the
//! intervals it closed ([`Live`], [`Interval`]).

use latlab_stats::LatencyHistogram;

/// Where a run is, for progress bars (and, when [`RunConfig::live`](super::RunConfig::live), for a live view).
#[derive(Clone, Debug)]
pub struct Progress {
    /// Since the first probe was due.
    pub elapsed_ns: u64,
    /// The run's sending time.
    pub total_ns: u64,
    /// Probes sent so far, warm-up included.
    pub sent: u64,
    /// Measured responses so far.
    pub received: u64,
    /// With [`RunConfig::live`](super::RunConfig::live): what a live view draws.
    pub live: Option<Live>,
}

/// What a live view of a run is given with each [`Progress`].
#[derive(Clone, Debug)]
pub struct Live {
    /// The intervals closed since the last progress report, in order (copies: the run keeps
    /// its own for the interval log).
    pub intervals: Vec<Interval>,
    /// Responses that arrived after one sent later on the same flow, so far.
    pub reordered: u64,
    /// Extra copies of responses already counted, so far.
    pub duplicated: u64,
    /// Datagrams that were not an answer to this run (malformed, foreign, unknown), so far.
    pub not_answers: u64,
    /// The sender's lag (actual − intended send time) of the responses so far: its 99th
    /// percentile and its maximum, ns; `None` before the first.
    pub send_lag_p99_max: Option<(u64, u64)>,
}

/// The latencies of one interval of the run.
#[derive(Clone, Debug)]
pub struct Interval {
    /// Start of the interval, from the first probe's due time.
    pub start_offset_ns: u64,
    /// Its length.
    pub duration_ns: u64,
    /// Latencies of the responses handled in it.
    pub histogram: LatencyHistogram,
    /// Their one-way delays out and back (empty where the responder did not stamp).
    pub forward: LatencyHistogram,
    /// See `forward`.
    pub reverse: LatencyHistogram,
}
