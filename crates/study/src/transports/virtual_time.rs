//! The transport study in virtual time (`--virtual`): each cell's streams of every transport
//! that is sans-IO run over `latlab_link::sim`'s network ([`latlab_stream::sim`]), the same
//! link model the emulator runs, with the cell's delay and loss each way and the same seeds.
//! The transports that are not (the kernel's TCP, ENet) are left out with one line each.

use latlab_engine::Stop;
use latlab_lab::progress::View;
use latlab_stats::LatencyHistogram;

use super::tally::{grace, point, Tally};
use super::{Cell, Clock, TransportPoint, TransportStudyOptions};
use crate::StudyError;
use latlab_stream::sim::{self, SimOptions};
use latlab_stream::TransportSpec;

/// The lab line of a virtual study.
pub(super) fn topology(options: &TransportStudyOptions) -> String {
    let checks = options.check_cells().len();
    format!(
        "virtual time over latlab-link's network (the emulator's link model, one pipe each \
         way, no sockets); {checks} cell{} cross-checked in client — emu — server namespaces",
        if checks == 1 { "" } else { "s" }
    )
}

/// The transports of `options` that run in virtual time; the others are named in one line
/// each.
pub(super) fn transports(
    options: &TransportStudyOptions,
    progress: &mut dyn View,
) -> Vec<TransportSpec> {
    options
        .transports
        .iter()
        .filter(|t| match sim::why_not_virtual(t) {
            None => true,
            Some(why) => {
                progress.note(&format!("left out: {why}"));
                false
            }
        })
        .cloned()
        .collect()
}

/// Every transport of `transports` on `cell` in virtual time, all their streams over one
/// network as they share one emulator in namespaces: one point each, with its histogram.
pub(super) fn measure_cell(
    options: &TransportStudyOptions,
    transports: &[TransportSpec],
    cell: &Cell,
    stop: &Stop,
) -> Result<Vec<(TransportPoint, LatencyHistogram)>, StudyError> {
    let sim_options = SimOptions {
        transports: transports.to_vec(),
        streams: options.streams.max(1),
        size: options.size,
        interval: cell.interval,
        duration: options.duration,
        grace: grace(cell),
        forward: cell.link(1),
        reverse: cell.link(2),
    };
    let outcomes = sim::run(&sim_options, stop)
        .map_err(|e| std::io::Error::other(format!("in virtual time: {e}")))?;
    Ok(transports
        .iter()
        .zip(outcomes)
        .map(|(spec, out)| {
            let tally = Tally {
                streams: sim_options.streams,
                sent: out.sent,
                delivered: out.delivered,
                failed: out.failed_streams,
                failure: out.failure,
                forward: out.forward,
                reverse: out.reverse,
            };
            let mut p = point(spec, options, cell, tally, &out.latency);
            p.clock = Clock::Virtual;
            (p, out.latency)
        })
        .collect())
}
