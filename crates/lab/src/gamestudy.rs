//! `latlab study game-server`: the game-server latency study of Emmerich et al., on this
//! machine.
//!
//! For each server I/O mode, receive buffer size and client count, the offered load rises until
//! more than 5% of the copies are lost (the first-drop load), then the table points are measured
//! at 20%, 90% and 110% of it, then the flood scenario. Each point is written to `points/` as
//! soon as it is measured (`<key>.json` and `<key>.hlog`, each whole or absent), so an
//! interrupted study keeps what it finished and `--resume` skips it. The artefacts (Table I,
//! Figures 2–4, the flood table and `report.md`) are drawn from those files only.

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::game::{
    self, Flood, GameClientConfig, GameClientResult, GameServerConfig, ServerIo, ServerLive,
};
use latlab_engine::{PollMode, Stop};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_probe::{Pattern, ProbeConfig};
use latlab_stats::{LatencyHistogram, Summary};
use serde::{Deserialize, Serialize};

use crate::results::write_atomic;
use crate::topology::{ClientServer, TopologyError};

/// The Linux default receive buffer the paper calls "default" (208 KiB).
pub const DEFAULT_RCVBUF: usize = 212_992;
/// Copy loss above which a load counts as the first drop.
pub const DROP_THRESHOLD: f64 = 0.05;
/// Copy loss at or below which a load counts as lossless (Fig. 4).
pub const LOSSLESS_THRESHOLD: f64 = 0.001;

/// Errors of the study.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// The topology could not be built.
    #[error("building the lab: {0}")]
    Topology(#[from] TopologyError),
    /// Sockets, threads or files.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// The results folder exists and `--resume` was not given.
    #[error(
        "results folder {0} exists already: pass --resume to continue it, or pick another --out"
    )]
    Exists(PathBuf),
}

/// What the study measures.
#[derive(Clone, Debug)]
pub struct StudyOptions {
    /// Client counts.
    pub clients: Vec<u32>,
    /// Offered loads, packets per second, ascending.
    pub loads: Vec<f64>,
    /// Receive buffer sizes of the server socket, bytes.
    pub rcvbufs: Vec<usize>,
    /// Server I/O modes.
    pub ios: Vec<ServerIo>,
    /// Sending time per point.
    pub duration: Duration,
    /// Results folder.
    pub out: PathBuf,
    /// Continue a folder, skipping finished points.
    pub resume: bool,
    /// Use namespaces when possible.
    pub namespaces: bool,
    /// Emulated work per packet, TSC cycles.
    pub work_cycles: u64,
    /// UDP payload bytes (the paper: 128).
    pub payload_len: usize,
    /// Run the flood scenario.
    pub flood: bool,
}

impl StudyOptions {
    /// The paper's grid on this machine.
    pub fn new(out: PathBuf) -> StudyOptions {
        StudyOptions {
            clients: vec![4, 8, 16, 32],
            loads: (1..=10).map(|k| k as f64 * 10_000.0).collect(),
            rcvbufs: vec![16 * 1024, 64 * 1024, DEFAULT_RCVBUF],
            ios: vec![ServerIo::Socket, ServerIo::Batched],
            duration: Duration::from_secs(2),
            out,
            resume: false,
            namespaces: true,
            work_cycles: 150,
            payload_len: 128,
            flood: true,
        }
    }
}

/// One measured point, as written to `points/<key>.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Point {
    /// `sweep`, `table` or `flood-…`.
    pub phase: String,
    /// `socket` or `batched`.
    pub io: String,
    /// Clients that receive each copy.
    pub clients: u32,
    /// Server `SO_RCVBUF` asked for, bytes.
    pub rcvbuf: usize,
    /// Server `SO_RCVBUF` the kernel granted, bytes.
    pub rcvbuf_granted: usize,
    /// Offered load of the measuring client, packets per second.
    pub load_pps: f64,
    /// For table points: the load as a fraction of the first-drop load.
    pub load_fraction: Option<f64>,
    /// Flood packets per second offered by the flooding client (flood points).
    pub flood_pps: Option<f64>,
    /// Per-client rate limit on the server (flood points).
    pub rate_limit_pps: Option<f64>,
    /// Probes sent (after warm-up).
    pub sent: u64,
    /// Probes the sender could not send in time.
    pub unsent: u64,
    /// Probes every client received.
    pub complete: u64,
    /// Copies expected and received.
    pub copies_expected: u64,
    /// See `copies_expected`.
    pub copies_received: u64,
    /// 1 − received / expected.
    pub loss_ratio: f64,
    /// Rate the probes left at.
    pub achieved_pps: f64,
    /// Latency until the last client has its copy.
    pub latency_last_ns: Summary,
    /// Latency until the first client has its copy.
    pub latency_first_ns: Summary,
    /// The server's counters.
    pub server: BTreeMap<String, u64>,
}

fn key(phase: &str, io: &str, clients: u32, rcvbuf: usize, load: f64) -> String {
    format!(
        "{phase}-{io}-c{clients}-b{}k-{}pps",
        rcvbuf / 1024,
        load.round() as u64
    )
}

/// Where the lab's two ends are.
struct Lab {
    topology: ClientServer,
    server_ip: IpAddr,
    client_ip: IpAddr,
}

impl Lab {
    fn build(namespaces: bool) -> Result<Lab, StudyError> {
        let topology = ClientServer::build(namespaces)?;
        let (server_ip, client_ip) = match &topology {
            ClientServer::Loopback { .. } => (
                IpAddr::V4(Ipv4Addr::LOCALHOST),
                IpAddr::V4(Ipv4Addr::LOCALHOST),
            ),
            ClientServer::Namespaces {
                server_addr,
                client_addr,
                ..
            } => (IpAddr::V4(*server_addr), IpAddr::V4(*client_addr)),
        };
        Ok(Lab {
            topology,
            server_ip,
            client_ip,
        })
    }

    fn in_server<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<T> {
        match &self.topology {
            ClientServer::Loopback { .. } => Ok(f()),
            ClientServer::Namespaces { server, .. } => latlab_io::netns::run_in(server.name(), f),
        }
    }

    fn in_client<T: Send + 'static>(
        &self,
        f: impl FnOnce() -> T + Send + 'static,
    ) -> io::Result<T> {
        match &self.topology {
            ClientServer::Loopback { .. } => Ok(f()),
            ClientServer::Namespaces { client, .. } => latlab_io::netns::run_in(client.name(), f),
        }
    }
}

/// What one point runs.
#[derive(Clone, Debug)]
struct PointSpec {
    phase: String,
    io: ServerIo,
    clients: u32,
    rcvbuf: usize,
    load: f64,
    load_fraction: Option<f64>,
    flood_pps: Option<f64>,
    rate_limit_pps: Option<f64>,
}

impl PointSpec {
    fn key(&self) -> String {
        let mut k = key(
            &self.phase,
            self.io.name(),
            self.clients,
            self.rcvbuf,
            self.load,
        );
        if self.rate_limit_pps.is_some() {
            k.push_str("-limited");
        }
        k
    }

    fn describe(&self) -> String {
        let mut d = format!(
            "{} {} clients, {} KiB buffer, {:.0} kpps",
            self.io.name(),
            self.clients,
            self.rcvbuf / 1024,
            self.load / 1000.0
        );
        if let Some(f) = self.flood_pps {
            d.push_str(&format!(", flood {:.0} kpps", f / 1000.0));
        }
        if self.rate_limit_pps.is_some() {
            d.push_str(", rate limit on");
        }
        d
    }
}

/// Progress of the whole study.
pub trait StudyProgress {
    /// A point starts: its description, how many points are done and how many there are at
    /// most.
    fn point(&mut self, describe: &str, done: usize, total: usize);
    /// The study ended.
    fn finish(&mut self);
}

/// Runs the study and writes its artefacts; returns the path of `report.md`.
pub fn run(
    options: &StudyOptions,
    stop: &Stop,
    progress: &mut dyn StudyProgress,
    log: &mut dyn FnMut(&str),
) -> Result<PathBuf, StudyError> {
    let points_dir = options.out.join("points");
    if options.out.exists() && !options.resume {
        return Err(StudyError::Exists(options.out.clone()));
    }
    fs::create_dir_all(&points_dir)?;
    let lab = Lab::build(options.namespaces)?;
    log(&format!("lab: {}", lab.topology.describe()));
    let mut options = options.clone();
    if matches!(lab.topology, ClientServer::Loopback { .. }) && options.ios.contains(&ServerIo::Xdp)
    {
        log("AF_XDP needs the namespaces' veth pair: the xdp server is left out on loopback");
        options.ios.retain(|io| *io != ServerIo::Xdp);
    }
    if options.ios.contains(&ServerIo::Xdp) {
        // Opened once and closed again: where AF_XDP cannot be had (privileges, kernel), the
        // xdp rows are left out with the reason, not the study.
        let opened = lab.in_server(|| {
            latlab_io::xdp::XdpSocket::open(
                "veth0",
                &latlab_io::xdp::XdpOptions::new(latlab_io::xdp::Redirect::Endpoint {
                    udp_port: 7000,
                }),
            )
            .map(drop)
        });
        if let Err(why) = opened.and_then(|r| r) {
            log(&format!("the xdp server is left out: {why}"));
            options.ios.retain(|io| *io != ServerIo::Xdp);
        }
    }
    let options = &options;
    let cpus = latlab_io::cpu::allowed_cpus().unwrap_or_default();
    let (server_cpu, client_cpu) = match cpus.as_slice() {
        [a, .., b] => (Some(*a), Some(*b)),
        _ => (None, None),
    };
    let mut runner = Runner {
        options,
        lab: &lab,
        points_dir: &points_dir,
        server_cpu,
        client_cpu,
        stop,
        log,
    };
    let series = options.ios.len() * options.clients.len() * options.rcvbufs.len();
    let total = series * options.loads.len()
        + options.ios.len() * options.rcvbufs.len() * 3
        + if options.flood { 3 } else { 0 };
    let mut done = 0usize;
    // 1. The sweep: loads rise until the first drop, plus two loads past it.
    let mut first_drop: BTreeMap<(String, u32, usize), f64> = BTreeMap::new();
    for &io_mode in &options.ios {
        for &rcvbuf in &options.rcvbufs {
            for &clients in &options.clients {
                let series = (io_mode.name().to_string(), clients, rcvbuf);
                let mut loads = options.loads.clone();
                let mut losses: Vec<Option<f64>> = vec![None; loads.len()];
                let (mut i, mut past, mut halvings) = (0, 0, 0);
                while i < loads.len() && !stop.is_raised() {
                    if past > 2 {
                        done += 1;
                        i += 1;
                        continue;
                    }
                    let load = loads[i];
                    let loss = match losses[i] {
                        Some(loss) => loss,
                        None => {
                            let spec = PointSpec {
                                phase: "sweep".into(),
                                io: io_mode,
                                clients,
                                rcvbuf,
                                load,
                                load_fraction: None,
                                flood_pps: None,
                                rate_limit_pps: None,
                            };
                            progress.point(&spec.describe(), done, total);
                            let p = runner.point(&spec)?;
                            done += 1;
                            losses[i] = Some(p.loss_ratio);
                            p.loss_ratio
                        }
                    };
                    if loss > DROP_THRESHOLD {
                        // Dropping already at the lowest load: halve it (three times at most)
                        // until a load does not, so the first drop is bracketed from below.
                        if i == 0 && halvings < 3 && load >= 2_000.0 {
                            halvings += 1;
                            loads.insert(0, (load / 2.0).round());
                            losses.insert(0, None);
                            continue;
                        }
                        first_drop.entry(series.clone()).or_insert(load);
                        past += 1;
                    }
                    i += 1;
                }
            }
        }
    }
    // 2. Table I points: 4 clients (or the smallest count), 20/90/110% of the first drop.
    let table_clients = options.clients.iter().copied().min().unwrap_or(4);
    let max_load = options.loads.iter().copied().fold(0.0, f64::max);
    for &io_mode in &options.ios {
        for &rcvbuf in &options.rcvbufs {
            let base = first_drop
                .get(&(io_mode.name().into(), table_clients, rcvbuf))
                .copied()
                .unwrap_or(max_load);
            for fraction in [0.2, 0.9, 1.1] {
                if stop.is_raised() {
                    break;
                }
                let spec = PointSpec {
                    phase: "table".into(),
                    io: io_mode,
                    clients: table_clients,
                    rcvbuf,
                    load: (base * fraction).round(),
                    load_fraction: Some(fraction),
                    flood_pps: None,
                    rate_limit_pps: None,
                };
                progress.point(&spec.describe(), done, total);
                runner.point(&spec)?;
                done += 1;
            }
        }
    }
    // 3. The flood: one client floods at three times the default server's first-drop load while
    // the measuring client plays at 1 kpps.
    if options.flood && !stop.is_raised() {
        let io_mode = options.ios.first().copied().unwrap_or_default();
        let capacity = first_drop
            .get(&(io_mode.name().into(), table_clients, DEFAULT_RCVBUF))
            .copied()
            .unwrap_or(max_load);
        let flood = capacity * 3.0;
        for (rcvbuf, limit) in [
            (DEFAULT_RCVBUF, None),
            (64 * 1024, None),
            (DEFAULT_RCVBUF, Some(2_000.0)),
        ] {
            if stop.is_raised() {
                break;
            }
            let spec = PointSpec {
                phase: "flood".into(),
                io: io_mode,
                clients: table_clients,
                rcvbuf,
                load: 1_000.0,
                load_fraction: None,
                flood_pps: Some(flood),
                rate_limit_pps: limit,
            };
            progress.point(&spec.describe(), done, total);
            runner.point(&spec)?;
            done += 1;
        }
    }
    progress.finish();
    let report = crate::gamereport::write_artefacts(&options.out, &lab.topology.describe())?;
    Ok(report)
}

struct Runner<'a> {
    options: &'a StudyOptions,
    lab: &'a Lab,
    points_dir: &'a Path,
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
    stop: &'a Stop,
    log: &'a mut dyn FnMut(&str),
}

impl Runner<'_> {
    /// Measures one point, or reads it back when a resumed study has it already.
    fn point(&mut self, spec: &PointSpec) -> Result<Point, StudyError> {
        let key = spec.key();
        let json_path = self.points_dir.join(format!("{key}.json"));
        if self.options.resume {
            if let Ok(text) = fs::read_to_string(&json_path) {
                if let Ok(p) = serde_json::from_str::<Point>(&text) {
                    (self.log)(&format!("resume: {key} is done, skipped"));
                    return Ok(p);
                }
            }
        }
        let (point, histogram) = self.measure(spec)?;
        if point_is_whole(&point, self.stop) {
            let hlog = crate::gamereport::hlog_of(&histogram, &key)?;
            write_atomic(&self.points_dir.join(format!("{key}.hlog")), &hlog)?;
            let json = serde_json::to_string_pretty(&point).map_err(io::Error::other)?;
            write_atomic(&json_path, format!("{json}\n").as_bytes())?;
        }
        Ok(point)
    }

    fn measure(&mut self, spec: &PointSpec) -> Result<(Point, LatencyHistogram), StudyError> {
        let port = 7000u16;
        let server_addr = SocketAddr::new(self.lab.server_ip, port);
        let rcvbuf = spec.rcvbuf;
        // Buffer sizes are SO_RCVBUF values as the paper set them with setsockopt (the kernel
        // doubles them for its bookkeeping); the Linux default is left as the system sets it.
        let asked = (rcvbuf != DEFAULT_RCVBUF).then_some(rcvbuf);
        let server_socket = self.lab.in_server(move || {
            UdpSocket::bind(
                server_addr,
                &UdpOptions {
                    rcvbuf: asked,
                    ..UdpOptions::default()
                },
            )
        })??;
        // The AF_XDP server takes the port's frames on the server's veth end before the
        // kernel does; the UDP socket stays bound, so nothing else takes the port.
        let xdp_socket = match spec.io {
            ServerIo::Xdp => {
                let port = server_addr.port();
                Some(self.lab.in_server(move || {
                    let options =
                        latlab_io::xdp::XdpOptions::new(latlab_io::xdp::Redirect::Endpoint {
                            udp_port: port,
                        });
                    latlab_io::xdp::XdpSocket::open("veth0", &options)
                })??)
            }
            _ => None,
        };
        let granted = server_socket.recv_buffer_size()?;
        let mut secret = [0u8; 16];
        secret[..8].copy_from_slice(&latlab_io::clock::now_ns().to_le_bytes());
        secret[8..].copy_from_slice(&latlab_io::tsc::read().to_le_bytes());
        let config = GameServerConfig {
            io: spec.io,
            work_cycles: self.options.work_cycles,
            batch: 32,
            poll: PollMode::Block,
            game: latlab_game::ServerConfig {
                max_clients: spec.clients as usize + 8,
                rate_limit_pps: spec.rate_limit_pps,
                secret,
                ..latlab_game::ServerConfig::default()
            },
        };
        let server_stop = Arc::new(Stop::new());
        let live = Arc::new(ServerLive::default());
        let server_cpu = self.server_cpu;
        let thread = {
            let (s, l) = (server_stop.clone(), live.clone());
            std::thread::Builder::new()
                .name("latlab-game-server".into())
                .spawn(move || {
                    if let Some(cpu) = server_cpu {
                        latlab_io::cpu::pin_current_thread(cpu)?;
                    }
                    match xdp_socket {
                        Some(x) => game::serve_xdp(x, server_addr.port(), &config, &s, &l),
                        None => game::serve(&server_socket, &config, &s, &l),
                    }
                })?
        };
        let outcome = self.run_clients(spec, server_addr);
        server_stop.raise();
        let counters = thread
            .join()
            .map_err(|_| io::Error::other("the game server thread panicked"))??;
        let result = outcome?;
        let r = &result.report;
        let mut server = BTreeMap::new();
        for (k, v) in [
            ("received", counters.received),
            ("game_packets", counters.game_packets),
            ("copies", counters.copies),
            ("joins", counters.joins),
            ("malformed", counters.malformed),
            ("oversized", counters.oversized),
            ("unknown_sender", counters.unknown_sender),
            ("bad_cookie", counters.bad_cookie),
            ("expired", counters.expired),
            ("table_full", counters.table_full),
            ("rate_limited", counters.rate_limited),
            ("short_join", counters.short_join),
        ] {
            server.insert(k.to_string(), v);
        }
        let point = Point {
            phase: spec.phase.clone(),
            io: spec.io.name().into(),
            clients: spec.clients,
            rcvbuf: spec.rcvbuf,
            rcvbuf_granted: granted,
            load_pps: spec.load,
            load_fraction: spec.load_fraction,
            flood_pps: spec.flood_pps,
            rate_limit_pps: spec.rate_limit_pps,
            sent: r.sent,
            unsent: r.unsent,
            complete: r.complete,
            copies_expected: r.copies_expected,
            copies_received: r.copies_received,
            loss_ratio: r.copy_loss_ratio(),
            achieved_pps: result.achieved_pps,
            latency_last_ns: Summary::with_quantiles(
                &r.latency_last,
                &crate::gamereport::QUANTILES,
            ),
            latency_first_ns: Summary::with_quantiles(
                &r.latency_first,
                &crate::gamereport::QUANTILES,
            ),
            server,
        };
        Ok((point, result.report.latency_last))
    }

    fn run_clients(
        &mut self,
        spec: &PointSpec,
        server_addr: SocketAddr,
    ) -> Result<GameClientResult, StudyError> {
        let client_ip = self.lab.client_ip;
        let n = spec.clients as usize + usize::from(spec.flood_pps.is_some());
        let mut sockets = self.lab.in_client(move || -> io::Result<Vec<UdpSocket>> {
            let opts = UdpOptions {
                rx_timestamps: true,
                rcvbuf: Some(4 << 20),
                ..UdpOptions::default()
            };
            (0..n)
                .map(|_| UdpSocket::bind(SocketAddr::new(client_ip, 0), &opts))
                .collect()
        })??;
        game::join_all(&sockets, server_addr, 0, Duration::from_secs(3))?;
        let flooder = if spec.flood_pps.is_some() {
            sockets.pop()
        } else {
            None
        };
        let duration_ns = self.options.duration.as_nanos() as u64;
        let probe = ProbeConfig {
            run_id: (latlab_io::clock::now_ns() >> 7) as u32,
            flows: 1,
            payload_len: self.options.payload_len,
            pattern: Pattern::Constant,
            rate_pps: spec.load,
            start_ns: 0,
            duration_ns,
            warmup_ns: (duration_ns / 10).min(200_000_000),
            seed: 1,
        };
        let flood = match (&flooder, spec.flood_pps) {
            (Some(socket), Some(pps)) => Some(Flood {
                socket,
                probe: ProbeConfig {
                    run_id: probe.run_id ^ 0x00ff_ff00,
                    rate_pps: pps,
                    ..probe.clone()
                },
            }),
            _ => None,
        };
        let config = GameClientConfig {
            probe,
            server: server_addr,
            batch: 32,
            grace_ns: 300_000_000,
            cpu: self.client_cpu,
        };
        let result = game::run_clients(&sockets, &config, flood, self.stop, &mut |_| {})?;
        Ok(result)
    }
}

fn point_is_whole(point: &Point, stop: &Stop) -> bool {
    // A point cut short by Ctrl-C is not written: --resume measures it again.
    !stop.is_raised() && point.sent > 0
}
