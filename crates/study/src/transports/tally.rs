//! What one transport's streams on one cell add up to, and the point they make: shared by
//! the cells measured in namespaces ([`super::run`]) and in virtual time
//! ([`super::virtual_time`]).

use std::net::SocketAddr;
use std::time::Duration;

use latlab_stats::{ccdf, LatencyHistogram, Summary};

use super::{Cell, Clock, TransportPoint, TransportStudyOptions};
use latlab_stream::wire::{udp_overhead, WireCounts};
use latlab_stream::{TransportSpec, WireReport};

/// How long a receiver waits for messages still on their way after a stream's last one: long
/// enough for a reliable transport's backed-off retransmissions at the longest round trip.
pub(super) fn grace(cell: &Cell) -> Duration {
    (cell.rtt * 20).max(Duration::from_secs(2))
}

/// What a transport's streams on one cell added up to.
pub(super) struct Tally {
    pub(super) streams: u32,
    pub(super) sent: u64,
    pub(super) delivered: u64,
    pub(super) failed: u32,
    pub(super) failure: Option<String>,
    pub(super) forward: WireCounts,
    pub(super) reverse: WireCounts,
}

/// The point of `spec` on `cell` from its tally and merged histogram (measured in
/// namespaces; the virtual study sets [`TransportPoint::clock`] after).
pub(super) fn point(
    spec: &TransportSpec,
    options: &TransportStudyOptions,
    cell: &Cell,
    tally: Tally,
    latency: &LatencyHistogram,
) -> TransportPoint {
    let overhead = udp_overhead(SocketAddr::from(([0, 0, 0, 0], 0)));
    TransportPoint {
        transport: spec.to_string(),
        clock: Clock::Namespaces,
        check: false,
        reliable: spec.is_reliable(),
        rtt_ns: cell.rtt.as_nanos() as u64,
        interval_ns: cell.interval.as_nanos() as u64,
        loss: cell.loss,
        loss_kind: cell.loss_kind,
        size: options.size,
        streams: tally.streams,
        sent: tally.sent,
        delivered: tally.delivered,
        lost: tally.sent.saturating_sub(tally.delivered),
        failed_streams: tally.failed,
        failure: tally.failure,
        latency_ns: Summary::from_histogram(latency),
        ccdf: ccdf(latency),
        wire: WireReport::new(
            tally.forward,
            tally.reverse,
            tally.sent,
            options.size,
            overhead,
        ),
    }
}
