//! Running the emulator study: the lab, the routed path through the kernel, the reflector,
//! and the latency, accuracy and loss points.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::reflector::{self, ReflectorConfig, ReflectorCounters};
use latlab_engine::{PollMode, Stop};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_io::udpmib::UdpMib;
use latlab_io::Io;
use latlab_link::{LinkConfig, LossModel};

use super::bridge::{with_bridge, CorePlan};
use super::rates::measure_rates;
use super::{EmuPoint, EmuStudyOptions, TRACE_DELAY_NS};
use crate::points::{Existing, PointsDir};
use crate::shard::Share;
use crate::{StudyError, StudyFile, StudyKind};
use latlab_lab::losses::{FarCounters, FarSide, LabCounters};
use latlab_lab::measure::{self, GenOptions, ThreadChoice};
use latlab_lab::progress::View;
use latlab_lab::results::RunSummary;
use latlab_lab::topology::ClientEmuServer;
use latlab_lab::units::{format_duration_ns, format_rate, ProbeRate};

/// What each generator run of the study leaves out at its start.
const GEN_WARMUP: Duration = Duration::from_millis(300);

fn relative_trace(trace: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let t0 = trace.iter().map(|t| t.0).min().unwrap_or(0);
    trace.iter().map(|&(t, l)| (t - t0, l)).collect()
}

/// Builds the lab, measures the latency, accuracy and loss points and then the forwarding
/// rates into `<out>/points` (the folder must not exist) and writes `study.json`; returns the
/// lab's description.
pub(super) fn measure_all(
    options: &EmuStudyOptions,
    stop: &Stop,
    progress: &mut dyn View,
) -> Result<String, StudyError> {
    // The shards of one study fill one folder, and --resume continues one: each continues it,
    // if its options agree.
    let existing = if options.resume || !options.shard.is_whole() {
        StudyFile::check_resume(&options.out, StudyKind::Emulator, &options.parameters())?;
        Existing::Continue
    } else {
        Existing::RefuseResumable
    };
    let points = PointsDir::create(&options.out, existing)?;
    let lab = ClientEmuServer::build()?;
    let plan = CorePlan::allowed();
    let topology = format!("{}; cores: {}", lab.describe(), plan.describe());
    progress.note(&format!("lab: {topology}"));
    StudyFile::new(StudyKind::Emulator, &topology)
        .with_parameters(options.parameters())
        .write(&options.out)?;
    let routed = lab.route_through_middle()?;
    let echo_socket = Arc::new(latlab_io::netns::run_in(lab.server.name(), || {
        UdpSocket::bind(
            SocketAddr::from(([0, 0, 0, 0], 7777)),
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
    let far = counting.far(&echo_socket, FarCounters::Reflector(&counters));
    let ends = (counting.client_mib.as_ref(), &far);
    let result = measure_latencies(options, &lab, routed, plan, ends, stop, progress, &points)
        .and_then(|latency_points| {
            let rates = Share {
                shard: options.shard,
                first_unit: latency_points,
            };
            measure_rates(&lab, options.rate_duration, rates, stop, progress, &points)
        });
    echo_stop.raise();
    let _ = echo.join();
    result?;
    progress.finish();
    Ok(topology)
}

/// The latency points: kernel and emulator at delay 0, the emulator at each delay, both at
/// every rate; then the two loss models. Returns how many points the whole study has here
/// (each one a unit of `--shard`). Each point's lost probes are placed by the client's MIB
/// and `far`: the middle's interfaces through the kernel, the emulator's count through it.
#[allow(clippy::too_many_arguments)]
fn measure_latencies(
    options: &EmuStudyOptions,
    lab: &ClientEmuServer,
    routed: (Ipv4Addr, Ipv4Addr),
    cores: CorePlan,
    (mib, far): (Option<&UdpMib>, &FarSide),
    stop: &Stop,
    progress: &mut dyn View,
    points: &PointsDir,
) -> Result<usize, StudyError> {
    let bridged = (lab.client_addr, SocketAddr::from((lab.server_addr, 7777)));
    let routed = (routed.0, SocketAddr::from((routed.1, 7777)));
    // The accuracy table reads each point's p99.9: the slowest rate has the fewest samples.
    if let Some(slowest) = options.rates.iter().map(|r| r.pps()).reduce(f64::min) {
        if let Some(warning) = crate::samples::too_few_for(
            "study emulator",
            latlab_stats::Quantile::P99_9,
            slowest,
            options.duration,
            GEN_WARMUP,
            "--duration",
        ) {
            progress.note(&warning);
        }
    }
    let mut plan: Vec<(String, u64, ProbeRate, Option<LossModel>)> = Vec::new();
    for &rate in &options.rates {
        plan.push(("kernel".into(), 0, rate, None));
        plan.push(("emu".into(), 0, rate, None));
        for &d in &options.delays_ns {
            plan.push(("emu".into(), d, rate, None));
        }
    }
    let loss_rate = ProbeRate::try_from(10_000.0).expect("10 kpps is a probe rate");
    plan.push((
        "loss-bernoulli".into(),
        0,
        loss_rate,
        Some(LossModel::Bernoulli { p: 0.01 }),
    ));
    plan.push((
        "loss-gemodel".into(),
        0,
        loss_rate,
        Some(LossModel::GilbertElliott {
            p: 0.01,
            r: 0.25,
            one_minus_h: 1.0,
            one_minus_k: 0.0,
        }),
    ));
    let units = plan.len();
    let share = Share {
        shard: options.shard,
        first_unit: 0,
    };
    let total = options.shard.share_of(units);
    let mine = plan.into_iter().enumerate().filter(|&(i, _)| share.owns(i));
    for (i, (_, (path, delay_ns, rate, loss))) in mine.enumerate() {
        if stop.is_raised() {
            break;
        }
        let pps = rate.pps();
        let describe = format!(
            "{path}, delay {}, {}",
            format_duration_ns(delay_ns),
            format_rate(pps)
        );
        let key = format!("{path}-d{delay_ns}ns-{}pps", pps as u64);
        if points.resumed::<EmuPoint>(&key).is_some() {
            progress.note(&format!("{key}: measured before, kept"));
            continue;
        }
        progress.point(&describe, i, total);
        progress.note(&format!("measuring {describe}"));
        let steal_before = latlab_io::cpu::steal_ns();
        let ((run, result), emulator) = if path == "kernel" {
            let counted = (mib, far);
            let measured = measure_once(lab, routed, rate, options.duration, cores, counted, stop)?;
            (measured, None)
        } else {
            // Room in the queue for everything in flight at this rate and delay.
            let in_flight = (pps * delay_ns as f64 / 1e9) as usize;
            let ab = LinkConfig {
                delay_ns,
                loss: loss.unwrap_or(LossModel::None),
                limit_frames: Some((in_flight * 2).max(1000)),
                seed: 7,
                ..LinkConfig::default()
            };
            let ba = LinkConfig {
                limit_frames: Some((in_flight * 2).max(1000)),
                ..LinkConfig::default()
            };
            // The emulator's interfaces are the ends' peers: it counts the path's frames.
            let counted = (mib, &FarSide { ends: None, ..*far });
            let ((mut run, result), emu) =
                with_bridge(lab, cores.bridge(Io::Packet), ab, ba, || {
                    measure_once(lab, bridged, rate, options.duration, cores, counted, stop)
                })?;
            let on_path = emu.frames_lost();
            run.lost_by_cause = run.lost_by_cause.map(|l| l.with_path(on_path, false));
            ((run, result), Some(emu))
        };
        let (configured_loss, expected_mean_burst) = match loss {
            Some(LossModel::Bernoulli { p }) => (Some(p), Some(1.0 / (1.0 - p))),
            Some(LossModel::GilbertElliott { p, r, .. }) => (Some(p / (p + r)), Some(1.0 / r)),
            _ => (None, None),
        };
        let point = EmuPoint {
            trace: (delay_ns == TRACE_DELAY_NS).then(|| relative_trace(&result.report.trace)),
            path,
            delay_ns,
            rate_pps: pps,
            run,
            loss_bursts: result.loss_bursts,
            configured_loss,
            expected_mean_burst,
            emulator,
            host_steal_ns: steal_before
                .zip(latlab_io::cpu::steal_ns())
                .map(|(a, b)| b.saturating_sub(a)),
        };
        points.write_measured(&key, &point, None, stop)?;
    }
    Ok(units)
}

fn measure_once(
    lab: &ClientEmuServer,
    (client, target): (Ipv4Addr, SocketAddr),
    rate: ProbeRate,
    duration: Duration,
    cores: CorePlan,
    (mib, far): (Option<&UdpMib>, &FarSide),
    stop: &Stop,
) -> Result<(RunSummary, latlab_engine::generator::GeneratorResult), StudyError> {
    let mut gen = GenOptions::new(target);
    gen.bind = IpAddr::V4(client);
    gen.rate = rate;
    gen.duration = duration;
    gen.warmup = GEN_WARMUP;
    gen.grace = Duration::from_millis(500);
    gen.poll = PollMode::Block;
    gen.threads = ThreadChoice::One;
    gen.rcvbuf = Some(4 << 20);
    let bind = gen.bind;
    let (sockets, check) = latlab_io::netns::run_in(lab.client.name(), move || {
        measure::open_sockets(bind, 1, Some(4 << 20))
    })??;
    measure::check_target(&check, target, Duration::from_secs(3))?;
    // One loop on the plan's CPU for the ends: every CPU but the emulator's.
    let threads = measure::pick_threads(ThreadChoice::One, cores.emulator);
    let setup = measure::setup(&gen, format!("{rate} pps"), "client-emu-server", threads);
    let before = far.read();
    let (mut run, result) =
        measure::run_counted(&gen, &sockets, mib, threads, setup, stop, &mut |_| {})?;
    far.place_in(&before, &mut run);
    Ok((run, result))
}
