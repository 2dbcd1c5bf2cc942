//! `latlab study emulator`: how close latlab's emulated link comes to the one asked for, and
//! what it costs against the kernel's own forwarding, measured side by side in one run.
//!
//! In `client — emu — server` namespaces: (a) round trips through the kernel's IP forwarding
//! in the emulator namespace, and through `latlab emu` with no impairment, at a low and a high
//! rate: the latency the emulator adds; (b) with a delay D on the client→server direction, the
//! accuracy `(latency with D) − (latency with no delay) − D` at both rates, with the release
//! error of every frame; (c) the loss rate and loss-burst lengths that the Bernoulli and
//! Gilbert-Elliott models produced against the configured ones; (d) the one-way forwarding rate
//! at the RFC 2544 frame sizes through the kernel, the bridge over AF_PACKET and the bridge over
//! AF_XDP (left out, with the reason logged, where AF_XDP cannot be had). Each point goes to `points/` as
//! soon as it is measured; the tables, plots and `report.md` are drawn from those files.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::emulator::{self, EmulatorLive};
use latlab_engine::reflector::{self, ReflectorConfig, ReflectorCounters};
use latlab_engine::{PollMode, Stop};
use latlab_io::packet::{PacketOptions, PacketSocket};
use latlab_io::port::{UdpMode, UdpPort};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_io::Io;
use latlab_link::{LinkConfig, LossModel};
use latlab_stats::Summary;
use serde::{Deserialize, Serialize};

use crate::gamestudy::{StudyError, StudyProgress};
use crate::measure::{self, GenOptions, ThreadChoice};
use crate::results::{write_atomic, RunSummary};
use crate::topology::ClientEmuServer;
use crate::units::format_us;

/// What the study measures.
#[derive(Clone, Debug)]
pub struct EmuStudyOptions {
    /// Results folder (must not exist).
    pub out: PathBuf,
    /// Sending time per point.
    pub duration: Duration,
    /// The low and the high rate, packets per second.
    pub rates: Vec<f64>,
    /// Delays D on the client→server direction.
    pub delays_ns: Vec<u64>,
    /// Sending time of each forwarding-rate point.
    pub rate_duration: Duration,
}

impl EmuStudyOptions {
    /// The grid: 1 and 50 kpps; D = 10 µs, 100 µs, 1 ms, 100 ms.
    pub fn new(out: PathBuf) -> EmuStudyOptions {
        EmuStudyOptions {
            out,
            duration: Duration::from_secs(3),
            rates: vec![1_000.0, 50_000.0],
            delays_ns: vec![10_000, 100_000, 1_000_000, 100_000_000],
            rate_duration: Duration::from_secs(2),
        }
    }
}

/// One measured point, as written to `points/<key>.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct EmuPoint {
    /// `kernel`, `emu`, `loss-bernoulli` or `loss-gemodel`.
    pub path: String,
    /// Delay on the client→server direction, ns.
    pub delay_ns: u64,
    /// Offered rate.
    pub rate_pps: f64,
    /// The round trips.
    pub run: RunSummary,
    /// Lengths of runs of lost probes.
    pub loss_bursts: Vec<u64>,
    /// Configured loss and expected mean burst length (loss points).
    pub configured_loss: Option<f64>,
    /// See `configured_loss`.
    pub expected_mean_burst: Option<f64>,
    /// The emulator's report (emu points), as `latlab emu --json` writes it.
    pub emulator: Option<serde_json::Value>,
    /// Per-packet (send time from the first probe, latency) in ns, kept for the 100 µs points
    /// (the paper's Fig. 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Vec<(u64, u64)>>,
}

/// The delay whose per-packet latencies are kept for the time-series plot.
pub const TRACE_DELAY_NS: u64 = 100_000;

fn relative_trace(trace: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let t0 = trace.iter().map(|t| t.0).min().unwrap_or(0);
    trace.iter().map(|&(t, l)| (t - t0, l)).collect()
}

/// One forwarding-rate point, as written to `points/rate-<path>-<size>.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RatePoint {
    /// `kernel`, `emu` (the bridge over AF_PACKET) or `emu-xdp` (the bridge over AF_XDP).
    pub path: String,
    /// Frame size on the wire (FCS included), bytes.
    pub frame_size: usize,
    /// Frames the blaster handed to the kernel.
    pub sent: u64,
    /// Frames that reached the server's socket.
    pub received: u64,
    /// Sending time, ns.
    pub elapsed_ns: u64,
    /// The emulator's report (emu points).
    pub emulator: Option<serde_json::Value>,
}

impl RatePoint {
    /// Offered frames per second.
    pub fn offered_pps(&self) -> f64 {
        self.sent as f64 * 1e9 / self.elapsed_ns.max(1) as f64
    }

    /// Forwarded frames per second.
    pub fn forwarded_pps(&self) -> f64 {
        self.received as f64 * 1e9 / self.elapsed_ns.max(1) as f64
    }
}

/// The RFC 2544 frame sizes.
pub const FRAME_SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

fn parse_mac(text: &str) -> Result<[u8; 6], StudyError> {
    let mut mac = [0u8; 6];
    let parts: Vec<&str> = text.split(':').collect();
    if parts.len() != 6 {
        return Err(StudyError::Io(io::Error::other(format!(
            "{text:?} is not a MAC address"
        ))));
    }
    for (b, p) in mac.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16)
            .map_err(|_| io::Error::other(format!("{text:?} is not a MAC address")))?;
    }
    Ok(mac)
}

/// Forwarding rate at every RFC 2544 frame size, one way (client → server), through the kernel
/// and through the emulator at delay 0.
fn measure_rates(
    lab: &ClientEmuServer,
    duration: Duration,
    stop: &Stop,
    progress: &mut dyn StudyProgress,
    log: &mut dyn FnMut(&str),
    points_dir: &Path,
) -> Result<(), StudyError> {
    use latlab_engine::blaster::{self, FrameAddrs};
    let client_mac = parse_mac(&crate::topology::mac_of(lab.client.name(), "veth0")?)?;
    let server_mac = parse_mac(&crate::topology::mac_of(lab.server.name(), "veth0")?)?;
    let emu_a_mac = parse_mac(&crate::topology::mac_of(
        lab.emu.name(),
        ClientEmuServer::EMU_A,
    )?)?;
    let sink_socket = Arc::new(latlab_io::netns::run_in(lab.server.name(), || {
        UdpSocket::bind(
            SocketAddr::from(([0, 0, 0, 0], 9)),
            &UdpOptions {
                rcvbuf: Some(4 << 20),
                ..UdpOptions::default()
            },
        )
    })??);
    let paths = ["kernel", "emu", "emu-xdp"];
    let total = FRAME_SIZES.len() * paths.len();
    let mut xdp_refused = false;
    for (i, (path, size)) in paths
        .iter()
        .flat_map(|p| FRAME_SIZES.iter().map(move |s| (*p, *s)))
        .enumerate()
    {
        if stop.is_raised() {
            break;
        }
        if path == "emu-xdp" && size == FRAME_SIZES[0] {
            if let Err(why) = xdp_bridge_opens(lab) {
                // No AF_XDP here (privileges, kernel): the row is left out, not the study.
                log(&format!("the AF_XDP forwarding row is skipped: {why}"));
                xdp_refused = true;
            }
        }
        if path == "emu-xdp" && xdp_refused {
            continue;
        }
        let describe = format!("forwarding rate, {path}, {size}-byte frames");
        progress.point(&describe, i, total);
        log(&format!("measuring {describe}"));
        let addrs = if path == "kernel" {
            FrameAddrs {
                src_mac: client_mac,
                dst_mac: emu_a_mac,
                src: "198.18.2.1:4000".parse().map_err(io::Error::other)?,
                dst: "198.18.1.2:9".parse().map_err(io::Error::other)?,
            }
        } else {
            FrameAddrs {
                src_mac: client_mac,
                dst_mac: server_mac,
                src: SocketAddr::from((lab.client_addr, 4000)),
                dst: SocketAddr::from((lab.server_addr, 9)),
            }
        };
        let frame = blaster::udp_frame(&addrs, size).map_err(io::Error::other)?;
        let mut tx = latlab_io::netns::run_in(lab.client.name(), || {
            PacketSocket::open("veth0", &PacketOptions::default())
        })??;
        let sink_stop = Arc::new(Stop::new());
        let counter = {
            let (sock, s) = (sink_socket.clone(), sink_stop.clone());
            std::thread::spawn(move || {
                let mut port = UdpPort::new(&sock, UdpMode::Batched, blaster::SINK_SIZES);
                blaster::sink(&mut port, &s)
            })
        };
        let blast = |tx: &mut PacketSocket| -> Result<blaster::BlastResult, StudyError> {
            let r = blaster::blast(tx, &frame, None, duration, stop)?;
            std::thread::sleep(Duration::from_millis(300));
            Ok(r)
        };
        let (result, emulator) = if path == "kernel" {
            (blast(&mut tx), None)
        } else {
            let no_delay = LinkConfig {
                limit_frames: Some(100_000),
                ..LinkConfig::default()
            };
            let io = if path == "emu" { Io::Packet } else { Io::Xdp };
            match with_emulator(lab, io, no_delay.clone(), no_delay, || blast(&mut tx)) {
                Ok((r, e)) => (Ok(r), Some(e)),
                Err(e) => (Err(e), None),
            }
        };
        sink_stop.raise();
        let received = counter
            .join()
            .map_err(|_| io::Error::other("the sink thread panicked"))??;
        let r = result?;
        let point = RatePoint {
            path: path.to_string(),
            frame_size: size,
            sent: r.sent,
            received,
            elapsed_ns: r.elapsed_ns,
            emulator,
        };
        let json = serde_json::to_string_pretty(&point).map_err(io::Error::other)?;
        write_atomic(
            &points_dir.join(format!("rate-{path}-{size}.json")),
            format!("{json}\n").as_bytes(),
        )?;
    }
    Ok(())
}

/// Enables IPv4 forwarding in the emulator's namespace between two subnets of their own
/// (198.18.2.0/24 on the client's side, 198.18.1.0/24 on the server's), so the kernel can
/// forward between client and server as the baseline while the bridged addresses stay as they
/// are. Returns (client address, server address) of the routed path.
fn route_through_kernel(lab: &ClientEmuServer) -> Result<(Ipv4Addr, Ipv4Addr), StudyError> {
    let run = |args: &[&str]| -> Result<(), StudyError> {
        let out = std::process::Command::new("ip").args(args).output()?;
        if !out.status.success() {
            return Err(StudyError::Io(io::Error::other(format!(
                "`ip {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ))));
        }
        Ok(())
    };
    let (c, e, s) = (lab.client.name(), lab.emu.name(), lab.server.name());
    run(&[
        "-n",
        e,
        "addr",
        "add",
        "198.18.2.254/24",
        "dev",
        ClientEmuServer::EMU_A,
    ])?;
    run(&[
        "-n",
        e,
        "addr",
        "add",
        "198.18.1.254/24",
        "dev",
        ClientEmuServer::EMU_B,
    ])?;
    run(&["-n", c, "addr", "add", "198.18.2.1/24", "dev", "veth0"])?;
    run(&["-n", s, "addr", "add", "198.18.1.2/24", "dev", "veth0"])?;
    run(&[
        "-n",
        c,
        "route",
        "add",
        "198.18.1.0/24",
        "via",
        "198.18.2.254",
        "src",
        "198.18.2.1",
    ])?;
    run(&[
        "-n",
        s,
        "route",
        "add",
        "198.18.2.0/24",
        "via",
        "198.18.1.254",
        "src",
        "198.18.1.2",
    ])?;
    latlab_io::netns::run_in(e, || fs::write("/proc/sys/net/ipv4/ip_forward", "1"))??;
    Ok((Ipv4Addr::new(198, 18, 2, 1), Ipv4Addr::new(198, 18, 1, 2)))
}

/// Runs the study; returns the path of `report.md`.
pub fn run(
    options: &EmuStudyOptions,
    stop: &Stop,
    progress: &mut dyn StudyProgress,
    log: &mut dyn FnMut(&str),
) -> Result<PathBuf, StudyError> {
    if options.out.exists() {
        return Err(StudyError::Io(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!(
                "results folder {} exists already: pick another --out",
                options.out.display()
            ),
        )));
    }
    let points_dir = options.out.join("points");
    fs::create_dir_all(&points_dir)?;
    let lab = ClientEmuServer::build()?;
    log(&format!("lab: {}", lab.describe()));
    let routed = route_through_kernel(&lab)?;
    let echo_socket = latlab_io::netns::run_in(lab.server.name(), || {
        UdpSocket::bind(
            SocketAddr::from(([0, 0, 0, 0], 7777)),
            &UdpOptions {
                rx_timestamps: true,
                rcvbuf: Some(4 << 20),
                ..UdpOptions::default()
            },
        )
    })??;
    let echo_stop = Arc::new(Stop::new());
    let echo = {
        let s = echo_stop.clone();
        std::thread::spawn(move || {
            let config = ReflectorConfig {
                poll: PollMode::Block,
                ..ReflectorConfig::default()
            };
            reflector::run_udp(&echo_socket, &config, &s, &ReflectorCounters::default())
        })
    };
    let result =
        measure_all(options, &lab, routed, stop, progress, log, &points_dir).and_then(|()| {
            measure_rates(
                &lab,
                options.rate_duration,
                stop,
                progress,
                log,
                &points_dir,
            )
        });
    echo_stop.raise();
    let _ = echo.join();
    result?;
    progress.finish();
    write_artefacts(&options.out, &lab.describe())
}

#[allow(clippy::too_many_arguments)]
fn measure_all(
    options: &EmuStudyOptions,
    lab: &ClientEmuServer,
    routed: (Ipv4Addr, Ipv4Addr),
    stop: &Stop,
    progress: &mut dyn StudyProgress,
    log: &mut dyn FnMut(&str),
    points_dir: &Path,
) -> Result<(), StudyError> {
    let bridged = (lab.client_addr, SocketAddr::from((lab.server_addr, 7777)));
    let routed = (routed.0, SocketAddr::from((routed.1, 7777)));
    let mut plan: Vec<(String, u64, f64, Option<LossModel>)> = Vec::new();
    for &rate in &options.rates {
        plan.push(("kernel".into(), 0, rate, None));
        plan.push(("emu".into(), 0, rate, None));
        for &d in &options.delays_ns {
            plan.push(("emu".into(), d, rate, None));
        }
    }
    let loss_rate = 10_000.0;
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
    let total = plan.len();
    for (i, (path, delay_ns, rate, loss)) in plan.into_iter().enumerate() {
        if stop.is_raised() {
            break;
        }
        let describe = format!(
            "{path}, delay {}, {:.0} pps",
            format_us(delay_ns as f64),
            rate
        );
        progress.point(&describe, i, total);
        log(&format!("measuring {describe}"));
        let key = format!("{path}-d{delay_ns}ns-{}pps", rate as u64);
        let point = if path == "kernel" {
            let (run, result) = measure_once(lab, routed, rate, options.duration, stop)?;
            EmuPoint {
                path,
                delay_ns,
                rate_pps: rate,
                run,
                loss_bursts: result.loss_bursts,
                configured_loss: None,
                expected_mean_burst: None,
                emulator: None,
                trace: None,
            }
        } else {
            // Room in the queue for everything in flight at this rate and delay.
            let in_flight = (rate * delay_ns as f64 / 1e9) as usize;
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
            let ((run, result), emu) = with_emulator(lab, Io::Packet, ab, ba, || {
                measure_once(lab, bridged, rate, options.duration, stop)
            })?;
            let (configured_loss, expected_mean_burst) = match loss {
                Some(LossModel::Bernoulli { p }) => (Some(p), Some(1.0 / (1.0 - p))),
                Some(LossModel::GilbertElliott { p, r, .. }) => (Some(p / (p + r)), Some(1.0 / r)),
                _ => (None, None),
            };
            let trace = (delay_ns == TRACE_DELAY_NS).then(|| relative_trace(&result.report.trace));
            EmuPoint {
                path,
                delay_ns,
                rate_pps: rate,
                run,
                loss_bursts: result.loss_bursts,
                configured_loss,
                expected_mean_burst,
                emulator: Some(emu),
                trace,
            }
        };
        let json = serde_json::to_string_pretty(&point).map_err(io::Error::other)?;
        write_atomic(
            &points_dir.join(format!("{key}.json")),
            format!("{json}\n").as_bytes(),
        )?;
    }
    Ok(())
}

fn measure_once(
    lab: &ClientEmuServer,
    (client, target): (Ipv4Addr, SocketAddr),
    rate: f64,
    duration: Duration,
    stop: &Stop,
) -> Result<(RunSummary, latlab_engine::generator::GeneratorResult), StudyError> {
    let mut gen = GenOptions::new(target);
    gen.bind = IpAddr::V4(client);
    gen.rate_pps = rate;
    gen.duration = duration;
    gen.warmup = Duration::from_millis(300);
    gen.grace = Duration::from_millis(500);
    gen.poll = PollMode::Block;
    gen.threads = ThreadChoice::One;
    gen.rcvbuf = Some(4 << 20);
    let bind = gen.bind;
    let (sockets, check) = latlab_io::netns::run_in(lab.client.name(), move || {
        measure::open_sockets(bind, 1, Some(4 << 20))
    })??;
    measure::check_target(&check, target, Duration::from_secs(3))
        .map_err(|e| StudyError::Io(io::Error::other(e.to_string())))?;
    let threads = measure::pick_threads(ThreadChoice::One, None);
    let setup = measure::setup(&gen, format!("{rate} pps"), "client-emu-server", threads);
    measure::run(&gen, &sockets, threads, setup, stop, &mut |_| {})
        .map_err(|e| StudyError::Io(io::Error::other(e.to_string())))
}

/// Runs `f` while `latlab emu` bridges the lab's emulator namespace (run to completion, busy
/// polling) over `io` (packet: AF_PACKET rings; xdp: AF_XDP sockets fed every frame), then
/// stops the bridge; returns `f`'s result and the bridge's report as
/// JSON. An emulator that cannot open its sockets fails before `f` runs.
pub(crate) fn with_emulator<T, E: From<io::Error>>(
    lab: &ClientEmuServer,
    io: Io,
    a_to_b: LinkConfig,
    b_to_a: LinkConfig,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<(T, serde_json::Value), E> {
    let emu_stop = Arc::new(Stop::new());
    let links = (a_to_b, b_to_a);
    let emu = match io {
        Io::Packet => spawn_bridge(
            lab,
            |name| PacketSocket::open(name, &PacketOptions::default()),
            2048,
            links,
            emu_stop.clone(),
        )?,
        Io::Xdp => spawn_bridge(
            lab,
            |name| {
                use latlab_io::xdp::{Redirect, XdpOptions, XdpSocket};
                XdpSocket::open(name, &XdpOptions::new(Redirect::Everything))
            },
            // A received frame gets a 2048-byte UMEM frame less the kernel's 256 of headroom.
            1792,
            links,
            emu_stop.clone(),
        )?,
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the emulator bridges frames over --io packet or xdp, not {other}"),
            )
            .into())
        }
    };
    let out = f();
    emu_stop.raise();
    let report = emu
        .join()
        .map_err(|_| io::Error::other("the emulator thread panicked"))
        .and_then(|r| r)?;
    Ok((out?, crate::emureport::report_json(&report)))
}

/// Whether the bridge's AF_XDP sockets can be opened in the lab (they are closed again).
fn xdp_bridge_opens(lab: &ClientEmuServer) -> io::Result<()> {
    use latlab_io::xdp::{Redirect, XdpOptions, XdpSocket};
    latlab_io::netns::run_in(lab.emu.name(), || -> io::Result<()> {
        let opts = XdpOptions::new(Redirect::Everything);
        XdpSocket::open(ClientEmuServer::EMU_A, &opts)?;
        XdpSocket::open(ClientEmuServer::EMU_B, &opts)?;
        Ok(())
    })?
}

/// Opens both bridged interfaces of the lab's emulator namespace with `open` and runs the
/// bridge (run to completion, busy polling) on a thread of its own until `stop` is raised.
fn spawn_bridge<P: emulator::Port + 'static>(
    lab: &ClientEmuServer,
    open: fn(&str) -> io::Result<P>,
    max_frame: usize,
    (a_to_b, b_to_a): (LinkConfig, LinkConfig),
    stop: Arc<Stop>,
) -> io::Result<std::thread::JoinHandle<io::Result<emulator::EmulatorReport>>> {
    let (mut a, mut b) = latlab_io::netns::run_in(lab.emu.name(), move || -> io::Result<_> {
        Ok((open(ClientEmuServer::EMU_A)?, open(ClientEmuServer::EMU_B)?))
    })??;
    std::thread::Builder::new()
        .name("latlab-emu".into())
        .spawn(move || {
            emulator::run(
                &mut a,
                &mut b,
                a_to_b,
                b_to_a,
                max_frame,
                PollMode::Busy,
                &stop,
                &EmulatorLive::default(),
            )
        })
}

fn p(summary: &Summary, key: &str) -> Option<f64> {
    summary
        .percentile(key)
        .and_then(|p| p.estimate.value_ns())
        .map(|v| v as f64)
}

fn us(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.1}", v / 1000.0))
}

/// Draws the tables, the accuracy plot and `report.md` from `out/points`.
pub fn write_artefacts(out: &Path, topology: &str) -> Result<PathBuf, StudyError> {
    let mut points: Vec<EmuPoint> = Vec::new();
    let mut skipped = Vec::new();
    let mut names: Vec<_> = fs::read_dir(out.join("points"))?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .collect();
    names.sort();
    let mut rate_points: Vec<RatePoint> = Vec::new();
    for path in names {
        let text = fs::read_to_string(&path).map_err(|e| e.to_string());
        let is_rate = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("rate-"));
        let parsed = if is_rate {
            text.and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
                .map(|p| rate_points.push(p))
        } else {
            text.and_then(|t| serde_json::from_str(&t).map_err(|e| e.to_string()))
                .map(|p| points.push(p))
        };
        if let Err(e) = parsed {
            skipped.push(format!("{}: {e}", path.display()));
        }
    }
    rate_points.sort_by_key(|p| (p.path.clone(), p.frame_size));
    let find = |path: &str, delay: u64, rate: f64| {
        points
            .iter()
            .find(|p| p.path == path && p.delay_ns == delay && p.rate_pps == rate)
    };
    let mut rates: Vec<f64> = points.iter().map(|p| p.rate_pps).collect();
    rates.sort_by(f64::total_cmp);
    rates.dedup();
    let mut md = String::new();
    md.push_str("# Link emulator study\n\n");
    md.push_str(&format!("Topology: {topology}. Round trips of latlab probes, client → server → client; delays are on the client→server direction only.\n\n"));
    md.push_str("## Added latency at delay 0: latlab emu vs the kernel's IP forwarding\n\n");
    md.push_str("| rate | kernel p50 [µs] | kernel mean [µs] | emu p50 [µs] | emu mean [µs] | added p50 [µs] | added mean [µs] | emu release error p50 / p99 [µs] |\n|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let mut added_lines = Vec::new();
    for &rate in &rates {
        if let (Some(k), Some(e)) = (find("kernel", 0, rate), find("emu", 0, rate)) {
            let (kp, ep) = (p(&k.run.latency_ns, "p50"), p(&e.run.latency_ns, "p50"));
            let rel = release(e);
            md.push_str(&format!(
                "| {rate:.0} | {} | {:.1} | {} | {:.1} | {} | {:.1} | {} / {} |\n",
                us(kp),
                k.run.latency_ns.mean_ns / 1000.0,
                us(ep),
                e.run.latency_ns.mean_ns / 1000.0,
                us(ep.zip(kp).map(|(a, b)| a - b)),
                (e.run.latency_ns.mean_ns - k.run.latency_ns.mean_ns) / 1000.0,
                us(rel.0),
                us(rel.1),
            ));
            added_lines.push((rate, ep.zip(kp).map(|(a, b)| a - b)));
        }
    }
    md.push_str("\n## Accuracy: (latency with D) − (latency with no delay) − D\n\n");
    md.push_str("| D | rate | mean error [µs] | std dev with D [µs] | p50 error [µs] | p99 error [µs] | p99.9 error [µs] | release error p50 / p99 / max [µs] | lost |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    let mut series: BTreeMap<u64, Vec<(f64, f64, f64)>> = BTreeMap::new();
    for &rate in &rates {
        let Some(base) = find("emu", 0, rate) else {
            continue;
        };
        let mut delays: Vec<u64> = points
            .iter()
            .filter(|p| p.path == "emu" && p.rate_pps == rate && p.delay_ns > 0)
            .map(|p| p.delay_ns)
            .collect();
        delays.sort();
        for d in delays {
            let Some(pt) = find("emu", d, rate) else {
                continue;
            };
            let err = |key: &str| {
                p(&pt.run.latency_ns, key)
                    .zip(p(&base.run.latency_ns, key))
                    .map(|(a, b)| a - b - d as f64)
            };
            let mean_err = pt.run.latency_ns.mean_ns - base.run.latency_ns.mean_ns - d as f64;
            let rel = release(pt);
            md.push_str(&format!(
                "| {} | {rate:.0} | {:.1} | {:.1} | {} | {} | {} | {} / {} / {} | {} |\n",
                format_us(d as f64),
                mean_err / 1000.0,
                pt.run.latency_ns.stddev_ns / 1000.0,
                us(err("p50")),
                us(err("p99")),
                us(err("p99_9")),
                us(rel.0),
                us(rel.1),
                us(rel.2),
                pt.run.lost,
            ));
            series.entry(rate as u64).or_default().push((
                d as f64 / 1000.0,
                mean_err / 1000.0,
                pt.run.latency_ns.stddev_ns / 1000.0,
            ));
        }
    }
    for &rate in &rates {
        if let Some((Some(p50), _, _)) = find("emu", 0, rate).map(release) {
            if p50 > 100_000.0 {
                md.push_str(&format!(
                    "\nAt {rate:.0} pps the emulator could not keep up even with no delay (release error p50 {:.1} µs): the accuracy rows at that rate measure its overload, not the delay.\n",
                    p50 / 1000.0
                ));
            }
        }
    }
    md.push_str("\n## Loss models: produced vs configured\n\n| model | configured loss | measured loss | configured mean burst | measured mean burst | max burst | bursts |\n|---|---:|---:|---:|---:|---:|---:|\n");
    for pt in points.iter().filter(|p| p.path.starts_with("loss-")) {
        let n = pt.loss_bursts.len();
        let mean = if n == 0 {
            0.0
        } else {
            pt.loss_bursts.iter().sum::<u64>() as f64 / n as f64
        };
        md.push_str(&format!(
            "| {} | {:.3}% | {:.3}% | {:.2} | {:.2} | {} | {n} |\n",
            pt.path.trim_start_matches("loss-"),
            100.0 * pt.configured_loss.unwrap_or(0.0),
            100.0 * pt.run.loss_ratio,
            pt.expected_mean_burst.unwrap_or(0.0),
            mean,
            pt.loss_bursts.iter().max().copied().unwrap_or(0),
        ));
    }
    md.push_str("\n![accuracy](accuracy.svg)\n\n");
    md.push_str("## Forwarding rate, one way, at the RFC 2544 frame sizes\n\nThe blaster sends as fast as its AF_PACKET ring takes frames; a UDP socket in the server counts what arrives. emu is the bridge over AF_PACKET rings, emu-xdp the same bridge over AF_XDP sockets; drops are the frames the kernel dropped before the bridge could read them (RX ring full).\n\n| frame [B] | kernel offered [kpps] | kernel forwarded [kpps] | emu offered [kpps] | emu forwarded [kpps] | emu / kernel | emu drops | emu-xdp offered [kpps] | emu-xdp forwarded [kpps] | emu-xdp / emu | emu-xdp drops |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for size in FRAME_SIZES {
        let find = |path: &str| {
            rate_points
                .iter()
                .find(|p| p.path == path && p.frame_size == size)
        };
        let (k, e, x) = (find("kernel"), find("emu"), find("emu-xdp"));
        if k.is_none() && e.is_none() && x.is_none() {
            continue;
        }
        let kpps = |p: Option<&RatePoint>, f: fn(&RatePoint) -> f64| {
            p.map_or("-".into(), |p| format!("{:.1}", f(p) / 1000.0))
        };
        let ratio = |a: Option<&RatePoint>, b: Option<&RatePoint>| {
            a.zip(b).map_or("-".into(), |(a, b)| {
                format!("{:.2}", a.forwarded_pps() / b.forwarded_pps().max(1.0))
            })
        };
        let drops = |p: Option<&RatePoint>| {
            p.and_then(|e| e.emulator.as_ref())
                .and_then(|j| j["a_to_b"]["dropped_by_emulator"]["kernel_rx_ring"].as_u64())
                .map_or("-".into(), |d| d.to_string())
        };
        md.push_str(&format!(
            "| {size} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
            kpps(k, RatePoint::offered_pps),
            kpps(k, RatePoint::forwarded_pps),
            kpps(e, RatePoint::offered_pps),
            kpps(e, RatePoint::forwarded_pps),
            ratio(e, k),
            drops(e),
            kpps(x, RatePoint::offered_pps),
            kpps(x, RatePoint::forwarded_pps),
            ratio(x, e),
            drops(x),
        ));
    }
    if !rate_points.is_empty() {
        md.push_str("\n![forwarding rate](forwarding-rate.svg)\n");
        let svg = rate_svg(&rate_points).map_err(io::Error::other)?;
        write_atomic(&out.join("forwarding-rate.svg"), svg.as_bytes())?;
    }
    if !skipped.is_empty() {
        md.push_str("\nSkipped point files:\n");
        for s in &skipped {
            md.push_str(&format!("- {s}\n"));
        }
    }
    let traced: Vec<&EmuPoint> = points
        .iter()
        .filter(|p| p.trace.as_ref().is_some_and(|t| !t.is_empty()))
        .collect();
    if !traced.is_empty() {
        md.push_str("\n## Per-packet latency with a 100 µs delay (2 ms of the run)\n\n![per-packet latency](per-packet.svg)\n");
        let svg = trace_svg(&traced).map_err(io::Error::other)?;
        write_atomic(&out.join("per-packet.svg"), svg.as_bytes())?;
    }
    let svg = accuracy_svg(&series).map_err(io::Error::other)?;
    write_atomic(&out.join("accuracy.svg"), svg.as_bytes())?;
    let report = out.join("report.md");
    write_atomic(&report, md.as_bytes())?;
    Ok(report)
}

/// (p50, p99, max) of an emu point's A→B release error, ns.
fn release(pt: &EmuPoint) -> (Option<f64>, Option<f64>, Option<f64>) {
    let Some(e) = pt
        .emulator
        .as_ref()
        .map(|e| &e["a_to_b"]["release_error_ns"])
    else {
        return (None, None, None);
    };
    (e["p50"].as_f64(), e["p99"].as_f64(), e["max"].as_f64())
}

fn trace_svg(points: &[&EmuPoint]) -> Result<String, String> {
    use plotters::prelude::*;
    // A 2 ms window from the middle of each trace.
    let windows: Vec<(String, Vec<(f64, f64)>)> = points
        .iter()
        .filter_map(|p| {
            let t = p.trace.as_ref()?;
            let mid = t.iter().map(|x| x.0).max()? / 2;
            let pts: Vec<(f64, f64)> = t
                .iter()
                .filter(|x| x.0 >= mid && x.0 < mid + 2_000_000)
                .map(|x| ((x.0 - mid) as f64 / 1e6, x.1 as f64 / 1000.0))
                .collect();
            Some((format!("{:.0} pps", p.rate_pps), pts))
        })
        .collect();
    let y_hi = windows
        .iter()
        .flat_map(|w| w.1.iter().map(|p| p.1))
        .fold(1.0, f64::max)
        * 1.1;
    let title = "Per-packet round trip through a 100 µs emulated delay";
    crate::plot::svg_page(title, (900, 600), |root| {
        let mut chart =
            crate::plot::chart(root, title, 20).build_cartesian_2d(0.0..2.0, 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc("send time in the window (ms)")
            .y_desc("round trip (µs)")
            .draw()?;
        for (i, (label, pts)) in windows.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart
                .draw_series(pts.iter().map(|&p| Circle::new(p, 2, color.filled())))?
                .label(label.as_str())
                .legend(move |(x, y)| Circle::new((x + 10, y), 3, color.filled()));
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
        Ok(())
    })
}

fn accuracy_svg(series: &BTreeMap<u64, Vec<(f64, f64, f64)>>) -> Result<String, String> {
    use plotters::prelude::*;
    let all: Vec<(f64, f64, f64)> = series.values().flatten().copied().collect();
    let x_lo = all.iter().map(|p| p.0).fold(f64::MAX, f64::min).min(10.0) / 2.0;
    let x_hi = all.iter().map(|p| p.0).fold(1.0, f64::max) * 2.0;
    let y_abs = all.iter().map(|p| p.1.abs() + p.2).fold(1.0, f64::max) * 1.2;
    let title = "Emulated delay accuracy: mean error vs configured delay";
    crate::plot::svg_page(title, (900, 600), |root| {
        let mut chart = crate::plot::chart(root, title, 20)
            .build_cartesian_2d((x_lo..x_hi).log_scale(), -y_abs..y_abs)?;
        chart
            .configure_mesh()
            .x_desc("configured delay D (µs)")
            .y_desc("mean error (µs), bars: ± std dev")
            .draw()?;
        for (i, (rate, pts)) in series.iter().enumerate() {
            let color = Palette99::pick(i).to_rgba();
            chart.draw_series(pts.iter().map(|&(x, y, sd)| {
                PathElement::new(vec![(x, y - sd), (x, y + sd)], color.stroke_width(1))
            }))?;
            chart
                .draw_series(
                    LineSeries::new(pts.iter().map(|&(x, y, _)| (x, y)), color.stroke_width(2))
                        .point_size(4),
                )?
                .label(format!("{rate} pps"))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
        Ok(())
    })
}

fn rate_svg(points: &[RatePoint]) -> Result<String, String> {
    use plotters::prelude::*;
    let y_hi = points
        .iter()
        .map(|p| p.forwarded_pps().max(p.offered_pps()))
        .fold(1.0, f64::max)
        / 1000.0
        * 1.15;
    let title = "Forwarding rate vs frame size (one way, no delay)";
    crate::plot::svg_page(title, (900, 600), |root| {
        let mut chart =
            crate::plot::chart(root, title, 20).build_cartesian_2d(0.0..1600.0, 0.0..y_hi)?;
        chart
            .configure_mesh()
            .x_desc("frame size (bytes)")
            .y_desc("forwarded (kpps)")
            .draw()?;
        for (i, path) in ["kernel", "emu", "emu-xdp"].iter().enumerate() {
            // Red, green and blue: each path readable on white.
            let color = [
                RGBColor(200, 30, 60),
                RGBColor(40, 150, 60),
                RGBColor(30, 80, 200),
            ][i]
                .to_rgba();
            let series: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| p.path == *path)
                .map(|p| (p.frame_size as f64, p.forwarded_pps() / 1000.0))
                .collect();
            if series.is_empty() {
                continue;
            }
            let label = match *path {
                "kernel" => "kernel IP forwarding",
                "emu" => "latlab emu (AF_PACKET)",
                _ => "latlab emu (AF_XDP)",
            };
            chart
                .draw_series(LineSeries::new(series, color.stroke_width(2)).point_size(4))?
                .label(label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .border_style(BLACK)
            .background_style(WHITE.mix(0.8))
            .draw()?;
        Ok(())
    })
}
