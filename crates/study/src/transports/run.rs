//! Running the transport study: the lab, the emulator holding each cell's path, and every
//! transport's streams at once through it.

use std::net::SocketAddr;
use std::sync::Arc;

use latlab_engine::emulator::{self, EmulatorLive};
use latlab_engine::{PollMode, Stop};
use latlab_io::packet::{PacketOptions, PacketSocket};
use latlab_lab::progress::Quiet;
use latlab_stats::LatencyHistogram;

use super::tally::{grace, point, Tally};
use super::{transport_key, virtual_time, Cell, TransportPoint, TransportStudyOptions};
use crate::points::{Existing, PointsDir};
use crate::{StudyError, StudyFile, StudyKind};
use latlab_lab::progress::View;
use latlab_lab::topology::ClientEmuServer;
use latlab_stream::recv::Receiver;
use latlab_stream::wire::WireCounts;
use latlab_stream::{send, RecvCommand, SendCommand, TransportSpec};

/// Builds the lab, measures this job's cells into `<out>/points` and writes `study.json`;
/// returns the lab's description.
pub(super) fn measure_all(
    options: &TransportStudyOptions,
    stop: &Stop,
    progress: &mut dyn View,
) -> Result<String, StudyError> {
    let existing = if options.resume || !options.shard.is_whole() {
        StudyFile::check_resume(&options.out, StudyKind::Transports, &options.parameters())?;
        Existing::Continue
    } else {
        Existing::RefuseResumable
    };
    let points = PointsDir::create(&options.out, existing)?;
    // In virtual time the lab is only built for the cross-checks, when the first one is due.
    let mut lab = None;
    let topology = if options.virtual_time {
        virtual_time::topology(options)
    } else {
        let built = ClientEmuServer::build()?;
        let described = built.describe();
        lab = Some(built);
        described
    };
    progress.note(&format!("lab: {topology}"));
    StudyFile::new(StudyKind::Transports, &topology)
        .with_parameters(options.parameters())
        .write(&options.out)?;
    let simulated = if options.virtual_time {
        virtual_time::transports(options, progress)
    } else {
        options.transports.clone()
    };
    let checks = options.check_cells();
    let mut no_checks: Option<String> = None;
    let cells = options.cells();
    let total = options.shard.share_of(cells.len());
    let mine = cells
        .iter()
        .enumerate()
        .filter(|&(i, _)| options.shard.owns(i));
    for (done, (index, cell)) in mine.enumerate() {
        if stop.is_raised() {
            break;
        }
        let checked = checks.contains(&index) && no_checks.is_none();
        let key = |t: &TransportSpec, suffix: &str| {
            format!("{}-{}{suffix}", cell.key(), transport_key(&t.to_string()))
        };
        let mut keys: Vec<String> = simulated.iter().map(|t| key(t, "")).collect();
        let check_keys: Vec<String> = simulated.iter().map(|t| key(t, "-check")).collect();
        if checked {
            keys.extend(check_keys.iter().cloned());
        }
        if keys
            .iter()
            .all(|k| points.resumed::<TransportPoint>(k).is_some())
        {
            progress.note(&format!("{}: measured before, kept", cell.key()));
            continue;
        }
        progress.point(&cell.key(), done, total);
        let mut measured = if options.virtual_time {
            virtual_time::measure_cell(options, &simulated, cell, stop)?
        } else {
            let lab = lab.as_ref().expect("built for a study in namespaces");
            measure_cell(lab, options, cell, stop)?
        };
        if checked && !stop.is_raised() {
            if lab.is_none() {
                match ClientEmuServer::build() {
                    Ok(built) => lab = Some(built),
                    Err(e) => {
                        let why = format!("the cross-checks in namespaces are left out: {e}");
                        progress.note(&why);
                        no_checks = Some(why);
                    }
                }
            }
            if let Some(lab) = &lab {
                let check = TransportStudyOptions {
                    transports: simulated.clone(),
                    duration: options.check_duration,
                    ..options.clone()
                };
                progress.note(&format!("{}: cross-check in namespaces", cell.key()));
                for (mut point, histogram) in measure_cell(lab, &check, cell, stop)? {
                    point.check = true;
                    measured.push((point, histogram));
                }
            }
        }
        if stop.is_raised() {
            // A cell cut short is not written: --resume measures it again.
            break;
        }
        let keys = simulated
            .iter()
            .map(|t| key(t, ""))
            .chain(check_keys.into_iter().filter(|_| checked));
        for ((point, histogram), key) in measured.into_iter().zip(keys) {
            let comment = format!(
                "latlab {} study transports {key}: application latency in ns",
                env!("CARGO_PKG_VERSION")
            );
            points.write(&key, &point, Some((&histogram, &comment)))?;
        }
    }
    progress.finish();
    Ok(topology)
}

/// One stream's outcome: its summary and histogram, or why it failed.
type StreamOutcome = Result<(latlab_stream::StreamSummary, LatencyHistogram), String>;

/// Measures one cell: the emulator with the cell's path, every transport's streams at once;
/// one point per transport, with its merged histogram.
pub(super) fn measure_cell(
    lab: &ClientEmuServer,
    options: &TransportStudyOptions,
    cell: &Cell,
    stop: &Stop,
) -> Result<Vec<(TransportPoint, LatencyHistogram)>, StudyError> {
    let (mut a, mut b) = latlab_io::netns::run_in(lab.emu.name(), || {
        let opts = PacketOptions::default();
        Ok::<_, std::io::Error>((
            PacketSocket::open(ClientEmuServer::EMU_A, &opts)?,
            PacketSocket::open(ClientEmuServer::EMU_B, &opts)?,
        ))
    })??;
    let emu_stop = Arc::new(Stop::new());
    let emu = {
        let (s, cell) = (emu_stop.clone(), *cell);
        std::thread::Builder::new()
            .name("latlab-emu".into())
            .spawn(move || {
                emulator::run(
                    &mut a,
                    &mut b,
                    cell.link(1),
                    cell.link(2),
                    2048,
                    PollMode::Block,
                    &s,
                    &EmulatorLive::default(),
                )
            })?
    };
    let outcome = run_streams(lab, options, cell, stop);
    emu_stop.raise();
    let emulated = emu
        .join()
        .map_err(|_| std::io::Error::other("the emulator panicked"))?;
    emulated?;
    outcome
}

/// Every transport's streams through the running emulator.
fn run_streams(
    lab: &ClientEmuServer,
    options: &TransportStudyOptions,
    cell: &Cell,
    stop: &Stop,
) -> Result<Vec<(TransportPoint, LatencyHistogram)>, StudyError> {
    let streams = options.streams.max(1) as usize;
    // Receivers first, each on a port of its own the system picks.
    let mut receivers = Vec::new();
    for spec in &options.transports {
        for _ in 0..streams {
            let command = RecvCommand {
                listen: SocketAddr::from((lab.server_addr, 0)),
                transport: spec.clone(),
                json: None,
                runs: Some(1),
            };
            let receiver =
                latlab_io::netns::run_in(lab.server.name(), move || Receiver::bind(&command))?
                    .map_err(|e| std::io::Error::other(whole_chain(&e)))?;
            let addr = receiver.local_addr()?;
            receivers.push((spec.clone(), addr, receiver));
        }
    }
    let recv_stop = Arc::new(Stop::new());
    let outcomes: Vec<(TransportSpec, StreamOutcome)> = std::thread::scope(|scope| {
        let serving: Vec<_> = receivers
            .iter()
            .map(|(_, _, receiver)| {
                let s = recv_stop.clone();
                scope.spawn(move || receiver.serve(&s, &mut Quiet))
            })
            .collect();
        let senders: Vec<_> = receivers
            .iter()
            .enumerate()
            .map(|(i, (spec, addr, _))| {
                let mut command = SendCommand::new(*addr, spec.clone());
                command.size = options.size;
                command.interval = cell.interval;
                command.duration = options.duration;
                command.grace = grace(cell);
                // Streams start spread over one interval, as players' do, not all at once.
                let offset = cell.interval * (i % streams) as u32 / streams as u32;
                let client = latlab_io::netns::path(lab.client.name());
                scope.spawn(move || -> StreamOutcome {
                    // This scoped thread is the sender's own: it moves into the client's
                    // namespace for good.
                    let entering = |e: std::io::Error| {
                        format!("entering the client's namespace {}: {e}", client.display())
                    };
                    let ns = std::fs::File::open(&client).map_err(entering)?;
                    latlab_io::netns::enter(&ns).map_err(entering)?;
                    std::thread::sleep(offset);
                    send::run_measured(&command, stop, &mut Quiet).map_err(|e| whole_chain(&e))
                })
            })
            .collect();
        let outcomes: Vec<_> = senders
            .into_iter()
            .zip(&receivers)
            .map(|(h, (spec, _, _))| {
                let outcome = h
                    .join()
                    .unwrap_or_else(|_| Err("the sender panicked".into()));
                (spec.clone(), outcome)
            })
            .collect();
        recv_stop.raise();
        for s in serving {
            // A receiver's own trouble shows in its sender's outcome.
            let _ = s.join();
        }
        outcomes
    });
    Ok(options
        .transports
        .iter()
        .map(|spec| {
            let mine = outcomes.iter().filter(|(s, _)| s == spec).map(|(_, o)| o);
            merge(spec, options, cell, mine)
        })
        .collect())
}

/// An error and every cause under it on one line, each cause once (an error whose message
/// already ends with its source's is not followed by it again): a stream that failed is
/// reported with the system's reason, not only the step that failed.
pub(super) fn whole_chain(error: &dyn std::error::Error) -> String {
    let mut line = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !line.ends_with(&text) {
            line = format!("{line}: {text}");
        }
        source = cause.source();
    }
    line
}

/// One transport's point from its streams' outcomes.
fn merge<'a>(
    spec: &TransportSpec,
    options: &TransportStudyOptions,
    cell: &Cell,
    outcomes: impl Iterator<Item = &'a StreamOutcome>,
) -> (TransportPoint, LatencyHistogram) {
    let mut latency = LatencyHistogram::new();
    let (mut sent, mut delivered, mut streams, mut failed) = (0, 0, 0, 0);
    let mut failure = None;
    // Retransmissions add up while every stream counts them; one that does not makes the
    // sum unknown.
    let counted = WireCounts {
        retransmissions: Some(0),
        spurious_retransmissions: Some(0),
        ..WireCounts::default()
    };
    let (mut forward, mut reverse) = (counted, counted);
    let add = |into: &mut WireCounts, from: &WireCounts| {
        into.packets += from.packets;
        into.bytes += from.bytes;
        into.retransmissions = into
            .retransmissions
            .zip(from.retransmissions)
            .map(|(a, b)| a + b);
        into.spurious_retransmissions = into
            .spurious_retransmissions
            .zip(from.spurious_retransmissions)
            .map(|(a, b)| a + b);
    };
    for outcome in outcomes {
        streams += 1;
        match outcome {
            Ok((summary, histogram)) => {
                // Histograms of one kind merge exactly.
                let _ = latency.merge(histogram);
                sent += summary.sent;
                delivered += summary.delivered;
                add(&mut forward, &summary.wire.forward);
                add(&mut reverse, &summary.wire.reverse);
                if let Some(f) = &summary.failure {
                    failed += 1;
                    failure.get_or_insert_with(|| f.clone());
                }
            }
            Err(e) => {
                failed += 1;
                failure.get_or_insert_with(|| e.clone());
            }
        }
    }
    let tally = Tally {
        streams,
        sent,
        delivered,
        failed,
        failure,
        forward,
        reverse,
    };
    (point(spec, options, cell, tally, &latency), latency)
}
