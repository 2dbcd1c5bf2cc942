//! Running the bufferbloat study: the lab, the reflector, and per point the emulator with the
//! point's bottleneck, its bulk flows and the game stream.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use latlab_engine::reflector::{self, ReflectorConfig, ReflectorCounters};
use latlab_engine::{PollMode, Stop};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_io::udpmib::UdpMib;
use latlab_io::Io;

use super::bulk::BulkFlows;
use super::{
    emulator_has_aqm, left_out_key, BloatOptions, BloatPoint, BulkFlow, LeftOut, PlannedPoint,
};
use crate::emulator::bridge::{with_bridge, CorePlan};
use crate::points::{Existing, PointsDir};
use crate::shard::Share;
use crate::{StudyError, StudyFile, StudyKind};
use latlab_lab::losses::{FarCounters, FarSide, LabCounters};
use latlab_lab::measure::{self, GenOptions, ThreadChoice};
use latlab_lab::progress::View;
use latlab_lab::topology::ClientEmuServer;
use latlab_lab::units::format_duration;

/// What the game stream of each point leaves out at its start.
const GAME_WARMUP: Duration = Duration::from_millis(200);

/// The reflector's UDP port in the server namespace.
const ECHO_PORT: u16 = 7777;

/// How long the generator waits for the last answers at least.
const MIN_GRACE: Duration = Duration::from_secs(2);

/// How long the generator waits for the last answers through `bottleneck` with `delay` on
/// the way back: longer than its full queue takes to drain (1514-byte frames) and the delay.
fn grace(bottleneck: &latlab_link::LinkConfig, delay: Duration) -> Duration {
    let frames = bottleneck
        .limit_frames
        .map_or(u64::MAX, |f| f as u64 * 1514);
    let bytes = bottleneck.limit_bytes.map_or(u64::MAX, |b| b as u64);
    let queued = frames.min(bytes);
    let drain = match bottleneck.rate_bps {
        Some(bps) if bps > 0 && queued < u64::MAX => {
            Duration::from_secs_f64(queued as f64 * 8.0 / bps as f64)
        }
        _ => Duration::ZERO,
    };
    MIN_GRACE.max(drain * 3 / 2 + delay + Duration::from_millis(500))
}

/// Builds the lab, measures this job's points into `<out>/points` and writes `study.json`;
/// returns the lab's description.
pub(super) fn measure_all(
    options: &BloatOptions,
    stop: &Stop,
    progress: &mut dyn View,
) -> Result<String, StudyError> {
    options
        .check()
        .map_err(|e| StudyError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
    let existing = if options.resume || !options.shard.is_whole() {
        StudyFile::check_resume(&options.out, StudyKind::Bufferbloat, &options.parameters())?;
        Existing::Continue
    } else {
        Existing::RefuseResumable
    };
    let points = PointsDir::create(&options.out, existing)?;
    // The report's figures and tables read each point's p99 of the game stream.
    if let Some(warning) = crate::samples::too_few_for(
        "study bufferbloat",
        latlab_stats::Quantile::P99,
        options.model.rate_pps(),
        options.duration,
        GAME_WARMUP,
        "--duration",
    ) {
        progress.note(&warning);
    }
    let lab = ClientEmuServer::build()?;
    let plan = CorePlan::allowed();
    let topology = format!(
        "{}; the client→server direction of latlab emu is the bottleneck ({}), the \
         server→client direction is not limited (delay {}); cores: {}, the bulk flows with \
         the ends",
        lab.describe(),
        options.rate,
        format_duration(options.delay),
        plan.describe()
    );
    progress.note(&format!("lab: {topology}"));
    StudyFile::new(StudyKind::Bufferbloat, &topology)
        .with_parameters(options.parameters())
        .write(&options.out)?;
    let echo_socket = Arc::new(latlab_io::netns::run_in(lab.server.name(), || {
        UdpSocket::bind(
            SocketAddr::from(([0, 0, 0, 0], ECHO_PORT)),
            &UdpOptions {
                rx_timestamps: true,
                rcvbuf: Some(4 << 20),
                ..UdpOptions::default()
            },
        )
    })??);
    let counters = Arc::new(ReflectorCounters::default());
    let echo_stop = Arc::new(Stop::new());
    let echo = {
        let (s, socket, c) = (echo_stop.clone(), echo_socket.clone(), counters.clone());
        std::thread::spawn(move || {
            if let Some(cpu) = plan.ends {
                latlab_io::cpu::pin_current_thread(cpu)?;
            }
            let config = ReflectorConfig {
                poll: PollMode::Block,
                ..ReflectorConfig::default()
            };
            reflector::run_udp(&socket, &config, &s, &c)
        })
    };
    let counting = LabCounters::open_middle(&lab)?;
    // The emulator's interfaces are the ends' peers: it counts the path's frames.
    let far = FarSide {
        ends: None,
        ..counting.far(&echo_socket, FarCounters::Reflector(&counters))
    };
    let lab = (&lab, counting.client_mib.as_ref(), &far);
    let result = measure_points(options, lab, plan, stop, progress, &points);
    echo_stop.raise();
    let _ = echo.join();
    result?;
    progress.finish();
    Ok(topology)
}

/// The lab, the client's UDP MIB and the far side, which place each point's lost probes.
type Lab<'a> = (&'a ClientEmuServer, Option<&'a UdpMib>, &'a FarSide<'a>);

/// This job's points of the plan, each written as soon as it is measured.
fn measure_points(
    options: &BloatOptions,
    lab: Lab,
    cores: CorePlan,
    stop: &Stop,
    progress: &mut dyn View,
    points: &PointsDir,
) -> Result<(), StudyError> {
    let plan = options.plan();
    let share = Share {
        shard: options.shard,
        first_unit: 0,
    };
    let total = options.shard.share_of(plan.len());
    let mine = plan.iter().enumerate().filter(|&(i, _)| share.owns(i));
    let mut left_out = std::collections::BTreeSet::new();
    for (i, (_, planned)) in mine.enumerate() {
        if stop.is_raised() {
            break;
        }
        if let Some(reason) = planned.queue.left_out(emulator_has_aqm()) {
            let key = left_out_key(&planned.queue);
            // Once per queue (its points share the record).
            if left_out.insert(key.clone()) && points.resumed::<LeftOut>(&key).is_none() {
                progress.note(&format!("{}: left out: {reason}", planned.queue));
                let queue = planned.queue.to_string();
                points.write(&key, &LeftOut { queue, reason }, None)?;
            }
            continue;
        }
        let key = planned.key();
        if points.resumed::<BloatPoint>(&key).is_some() {
            progress.note(&format!("{key}: measured before, kept"));
            continue;
        }
        let describe = match &planned.cc {
            Some(cc) => format!("{}, {} {cc} flow(s)", planned.queue, planned.flows),
            None => format!("{}, unloaded", planned.queue),
        };
        progress.point(&describe, i, total);
        progress.note(&format!("measuring {describe}"));
        let (point, histogram) = measure_point(options, lab, cores, planned, stop)?;
        if stop.is_raised() {
            // Cut short: not a point of the study; --resume measures it again.
            break;
        }
        let comment = format!("{key}: game round trips");
        points.write(&key, &point, Some((&histogram, &comment)))?;
    }
    Ok(())
}

/// One point: the emulator with the point's bottleneck, its bulk flows given `warmup` to
/// fill the queue, then the game stream; the goodput counted over the game stream's run. Its
/// probes lost on the path are the emulator's count, shared with the bulk flows' frames.
fn measure_point(
    options: &BloatOptions,
    (lab, mib, far): Lab,
    cores: CorePlan,
    planned: &PlannedPoint,
    stop: &Stop,
) -> Result<(BloatPoint, latlab_stats::LatencyHistogram), StudyError> {
    let (bottleneck, spec) = options
        .bottleneck(&planned.queue)
        .map_err(|e| StudyError::Io(std::io::Error::new(std::io::ErrorKind::InvalidInput, e)))?;
    let rate_bps = bottleneck.rate_bps.unwrap_or(0);
    let target = SocketAddr::from((lab.server_addr, ECHO_PORT));
    let mut gen = GenOptions::new(target);
    gen.bind = IpAddr::V4(lab.client_addr);
    gen.model = Some(options.model.clone());
    gen.duration = options.duration;
    gen.warmup = GAME_WARMUP;
    gen.grace = grace(&bottleneck, options.delay);
    gen.poll = PollMode::Block;
    gen.threads = ThreadChoice::One;
    gen.rcvbuf = Some(4 << 20);
    let steal_before = latlab_io::cpu::steal_ns();
    let bind = gen.bind;
    let (sockets, check) = latlab_io::netns::run_in(lab.client.name(), move || {
        measure::open_sockets(bind, 1, Some(4 << 20))
    })??;
    if let Some(tos) = planned.queue.game_tos() {
        for socket in &sockets {
            socket.set_tos_v4(tos)?;
        }
    }
    let threads = measure::pick_threads(ThreadChoice::One, cores.emulator);
    let label = format!("{} {}", planned.queue, planned.flows);
    let setup = measure::setup(&gen, label, "client-emu-server", threads);
    let ((mut game, result, bulk), emulator) = with_bridge(
        lab,
        cores.bridge(Io::Packet),
        bottleneck,
        options.return_link(),
        || -> Result<_, StudyError> {
            // Before the flows fill the queue: the reflector answers.
            measure::check_target(&check, target, Duration::from_secs(3))?;
            let cc = planned.cc.as_deref().unwrap_or("cubic");
            let flows = BulkFlows::start(lab, planned.flows, cc, cores.ends)?;
            let warm = Instant::now();
            while warm.elapsed() < options.warmup && !stop.is_raised() {
                std::thread::sleep(Duration::from_millis(20));
            }
            let (t0, before, far_before) = (Instant::now(), flows.received(), far.read());
            let (mut game, result) =
                measure::run_counted(&gen, &sockets, mib, threads, setup, stop, &mut |_| {})?;
            let (elapsed, after) = (t0.elapsed(), flows.received());
            far.place_in(&far_before, &mut game);
            let ends = flows.stop()?;
            let bulk = ends
                .into_iter()
                .zip(before.iter().zip(&after))
                .map(|(end, (b, a))| {
                    let bytes = a - b;
                    BulkFlow {
                        cc: end.cc,
                        bytes,
                        goodput_bps: bytes as f64 * 8.0 / elapsed.as_secs_f64(),
                        retransmits: end.info.total_retrans,
                        srtt_us: end.info.rtt_us,
                    }
                })
                .collect::<Vec<_>>();
            Ok((game, result, bulk))
        },
    )?;
    let (on_path, shared) = (emulator.frames_lost(), planned.flows > 0);
    game.lost_by_cause = game.lost_by_cause.map(|l| l.with_path(on_path, shared));
    let point = BloatPoint {
        queue: planned.queue.to_string(),
        spec,
        rate_bps,
        cc: planned.cc.clone(),
        return_delay_ns: options.delay.as_nanos() as u64,
        bulk,
        game,
        emulator: emulator.to_value(),
        host_steal_ns: steal_before
            .zip(latlab_io::cpu::steal_ns())
            .map(|(a, b)| b.saturating_sub(a)),
    };
    Ok((point, result.report.latency))
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_link::LinkConfig;

    #[test]
    fn the_grace_outlasts_the_full_queue_and_the_delay() {
        let link = |frames: Option<usize>, bytes: Option<usize>, bps: u64| LinkConfig {
            limit_frames: frames,
            limit_bytes: bytes,
            rate_bps: Some(bps),
            ..LinkConfig::default()
        };
        // 1000 frames at 20 Mbit/s drain in 606 ms: the floor holds.
        assert_eq!(
            grace(&link(Some(1000), None, 20_000_000), Duration::ZERO),
            MIN_GRACE
        );
        // At 1 Mbit/s they take 12.1 s.
        let slow = grace(&link(Some(1000), None, 1_000_000), Duration::from_secs(1));
        assert_eq!(slow.as_millis(), 12_112 * 3 / 2 + 1_500);
        // The byte limit, when it is the smaller.
        let bytes = grace(
            &link(Some(1000), Some(1_000_000), 1_000_000),
            Duration::ZERO,
        );
        assert_eq!(bytes.as_millis(), 12_000 + 500);
        let unlimited = LinkConfig::default();
        assert_eq!(
            grace(&unlimited, Duration::from_secs(3)),
            MIN_GRACE.max(Duration::from_millis(3_500))
        );
    }
}
