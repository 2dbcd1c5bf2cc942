//! Running the game-server study: the lab, the grid of points, and each point's measurement,
//! written to the points folder as soon as it is done.

use latlab_lab::middle::ports::{open_endpoint, EndpointSettings};
use std::collections::BTreeMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::game::{
    self, Flood, GameClientConfig, GameClientResult, GameServerConfig, ServerIo, ServerLive,
};
use latlab_engine::{PollMode, Stop};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_probe::{Pattern, ProbeConfig};
use latlab_stats::{LatencyHistogram, Summary};

use super::{key, Point, StudyOptions, DEFAULT_RCVBUF, DROP_THRESHOLD, QUANTILES};
use crate::points::{Existing, PointsDir};
use crate::{StudyError, StudyFile, StudyKind};
use latlab_lab::losses::{FarCounters, LabCounters, LostByCause, SenderWatch};
use latlab_lab::progress::View;
use latlab_lab::topology::ClientServer;

/// Where the lab's two ends are, and the kernel's counters of it.
struct Lab {
    topology: ClientServer,
    server_ip: IpAddr,
    client_ip: IpAddr,
    counting: LabCounters,
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
            counting: LabCounters::open(&topology)?,
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

/// Measures every point of the study into `<out>/points` (the ones a resumed study has are
/// read back) and writes `study.json`; returns the lab's description.
pub(super) fn measure_all(
    options: &StudyOptions,
    stop: &Stop,
    progress: &mut dyn View,
) -> Result<String, StudyError> {
    // The shards of one study fill one folder: each continues it, if its options agree.
    let existing = if options.resume || !options.shard.is_whole() {
        StudyFile::check_resume(&options.out, StudyKind::GameServer, &options.parameters())?;
        Existing::Continue
    } else {
        Existing::RefuseResumable
    };
    let points = PointsDir::create(&options.out, existing)?;
    let lab = Lab::build(options.namespaces)?;
    let topology = lab.topology.describe();
    progress.note(&format!("lab: {topology}"));
    StudyFile::new(StudyKind::GameServer, &topology)
        .with_parameters(options.parameters())
        .write(&options.out)?;
    // The units of --shard: each (I/O mode, receive buffer) pair as the user listed them, with
    // its sweep series (every client count), its Table I points (taken from its first drop)
    // and, for the pair whose first drop sets the flood, that mode's flood points. Numbered
    // before any mode is left out here, so every shard numbers them alike.
    let unit_of = {
        let (ios, rcvbufs) = (options.ios.clone(), options.rcvbufs.clone());
        move |io: ServerIo, rcvbuf: usize| {
            let i = ios.iter().position(|m| *m == io).unwrap_or(0);
            let r = rcvbufs.iter().position(|b| *b == rcvbuf).unwrap_or(0);
            i * rcvbufs.len() + r
        }
    };
    let flood_rcvbuf = if options.rcvbufs.contains(&DEFAULT_RCVBUF) {
        DEFAULT_RCVBUF
    } else {
        options.rcvbufs.first().copied().unwrap_or(DEFAULT_RCVBUF)
    };
    let shard = options.shard;
    let mine = |io: ServerIo, rcvbuf: usize| shard.owns(unit_of(io, rcvbuf));
    let mut options = options.clone();
    if matches!(lab.topology, ClientServer::Loopback { .. }) && options.ios.contains(&ServerIo::Xdp)
    {
        progress
            .note("AF_XDP needs the namespaces' veth pair: the xdp server is left out on loopback");
        options.ios.retain(|io| *io != ServerIo::Xdp);
    }
    if options.ios.contains(&ServerIo::Xdp) {
        // Opened once and closed again: where AF_XDP cannot be had (privileges, kernel), the
        // xdp rows are left out with the reason, not the study.
        let opened =
            lab.in_server(|| open_endpoint("veth0", &EndpointSettings::port(7000)).map(drop));
        if let Err(why) = opened.and_then(|r| r) {
            progress.note(&format!("the xdp server is left out: {why}"));
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
        points: &points,
        server_cpu,
        client_cpu,
        stop,
        progress,
    };
    let pairs = options
        .ios
        .iter()
        .flat_map(|&io| options.rcvbufs.iter().map(move |&b| (io, b)))
        .filter(|&(io, b)| mine(io, b))
        .count();
    let floods = options
        .ios
        .iter()
        .filter(|&&io| options.flood && mine(io, flood_rcvbuf))
        .count();
    let total = pairs * options.clients.len() * options.loads.len() + pairs * 3 + floods * 3;
    let mut done = 0usize;
    // 1. The sweep: loads rise until the first drop, plus two loads past it.
    let mut first_drop: BTreeMap<(String, u32, usize), f64> = BTreeMap::new();
    for &io_mode in &options.ios {
        for &rcvbuf in options.rcvbufs.iter().filter(|&&b| mine(io_mode, b)) {
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
                            runner.progress.point(&spec.describe(), done, total);
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
        for &rcvbuf in options.rcvbufs.iter().filter(|&&b| mine(io_mode, b)) {
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
                runner.progress.point(&spec.describe(), done, total);
                runner.point(&spec)?;
                done += 1;
            }
        }
    }
    // 3. The flood, in every I/O mode: one client floods at three times that server's
    // first-drop load (default buffer) while the measuring client plays at 1 kpps.
    let flood_ios = if options.flood { &options.ios[..] } else { &[] };
    for &io_mode in flood_ios.iter().filter(|&&io| mine(io, flood_rcvbuf)) {
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
            runner.progress.point(&spec.describe(), done, total);
            runner.point(&spec)?;
            done += 1;
        }
    }
    runner.progress.finish();
    Ok(topology)
}

struct Runner<'a> {
    options: &'a StudyOptions,
    lab: &'a Lab,
    points: &'a PointsDir,
    server_cpu: Option<usize>,
    client_cpu: Option<usize>,
    stop: &'a Stop,
    progress: &'a mut dyn View,
}

impl Runner<'_> {
    /// Measures one point, or reads it back when a resumed study has it already.
    fn point(&mut self, spec: &PointSpec) -> Result<Point, StudyError> {
        let key = spec.key();
        if let Some(p) = self.points.resumed::<Point>(&key) {
            self.progress
                .note(&format!("resume: {key} is done, skipped"));
            return Ok(p);
        }
        let (point, histogram) = self.measure(spec)?;
        if point_is_whole(&point, self.stop) {
            let comment = format!(
                "latlab game-server study point {key}: latency until the last client has its copy, ns"
            );
            self.points
                .write(&key, &point, Some((&histogram, &comment)))?;
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
        // With the per-client rate limit on, its program keeps the limit per source too.
        let xdp_socket = match spec.io {
            ServerIo::Xdp => {
                let port = server_addr.port();
                // As deep as the game core's buckets: the program drops nothing the core
                // would pass.
                let burst = latlab_game::ServerConfig::default().rate_burst;
                let source_limit = spec
                    .rate_limit_pps
                    .and_then(|pps| latlab_io::xdp::SourceLimit::with_burst(pps, burst));
                Some(self.lab.in_server(move || {
                    let endpoint = EndpointSettings {
                        source_limit,
                        ..EndpointSettings::port(port)
                    };
                    open_endpoint("veth0", &endpoint)
                })??)
            }
            _ => None,
        };
        let xdp_drops = match &xdp_socket {
            Some(x) => x.source_drops()?,
            None => None,
        };
        // The clients' sockets exist before the server starts, so that it can count what it
        // receives from the flooder.
        let sockets = self.client_sockets(spec)?;
        let flooder_addr = match spec.flood_pps {
            Some(_) => sockets.last().map(|s| s.local_addr()).transpose()?,
            None => None,
        };
        let granted = server_socket.recv_buffer_size()?;
        let server_socket = Arc::new(server_socket);
        let mut secret = [0u8; 16];
        secret[..8].copy_from_slice(&latlab_io::clock::now_ns().to_le_bytes());
        secret[8..].copy_from_slice(&latlab_io::tsc::read().to_le_bytes());
        let config = GameServerConfig {
            io: spec.io,
            work_cycles: self.options.work_cycles,
            batch: 32,
            poll: PollMode::Block,
            switch: None,
            game: latlab_game::ServerConfig {
                max_clients: spec.clients as usize + 8,
                rate_limit_pps: spec.rate_limit_pps,
                secret,
                ..latlab_game::ServerConfig::default()
            },
            count_from: flooder_addr,
        };
        let server_stop = Arc::new(Stop::new());
        let live = Arc::new(ServerLive::default());
        let server_cpu = self.server_cpu;
        // Copies lost: the clients' side (the flooder's socket is not theirs), then the
        // server's and the path's, each datagram before the server's copies counting once
        // per client.
        let counting = &self.lab.counting;
        let players = &sockets[..spec.clients as usize];
        let watch = SenderWatch::start(players, counting.client_mib.as_ref(), false);
        let fan_out = FarCounters::GameServer(&live, u64::from(spec.clients));
        let far = counting.far(&server_socket, fan_out);
        let far_before = far.read();
        let thread = {
            let (s, l, server_socket) = (server_stop.clone(), live.clone(), server_socket.clone());
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
        let outcome = self.run_clients(spec, server_addr, &sockets);
        server_stop.raise();
        let counters = thread
            .join()
            .map_err(|_| io::Error::other("the game server thread panicked"))??;
        let result = outcome?;
        let r = &result.report;
        let counted = watch.counted(players, result.send_failed.total());
        let lost = LostByCause::place(r.copies_lost_with_warmup(), counted);
        let mut host_stalls = result.host_stalls.report();
        if let Some(server_stalls) = live.host_stalls() {
            host_stalls.merge(&server_stalls);
        }
        let mut server = super::server_counts(&counters);
        if flooder_addr.is_some() {
            server.insert(
                "from_flooder".to_string(),
                live.from_counted.load(std::sync::atomic::Ordering::Relaxed),
            );
        }
        if let Some(drops) = &xdp_drops {
            server.insert("xdp_rate_limited".to_string(), drops.read()?);
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
            latency_last_ns: Summary::with_quantiles(&r.latency_last, &QUANTILES),
            latency_first_ns: Summary::with_quantiles(&r.latency_first, &QUANTILES),
            server,
            flood_sent: spec.flood_pps.map(|_| result.flood_sent),
            send_failed: super::failures_map(&result.send_failed),
            flood_send_failed: match spec.flood_pps {
                Some(_) => super::failures_map(&result.flood_send_failed),
                None => BTreeMap::new(),
            },
            traffic: self.options.traffic.as_ref().map(|t| t.name_at(spec.load)),
            raised: r.raised,
            host_stalls: Some(host_stalls),
            lost_by_cause: Some(far.place(&far_before, &lost)),
        };
        Ok((point, result.report.latency_last))
    }

    /// The clients' sockets in the client's namespace: one per client, then the flooder's.
    fn client_sockets(&self, spec: &PointSpec) -> Result<Vec<UdpSocket>, StudyError> {
        let client_ip = self.lab.client_ip;
        let n = spec.clients as usize + usize::from(spec.flood_pps.is_some());
        let sockets = self.lab.in_client(move || -> io::Result<Vec<UdpSocket>> {
            let opts = UdpOptions {
                rx_timestamps: true,
                rcvbuf: Some(4 << 20),
                ..UdpOptions::default()
            };
            (0..n)
                .map(|_| UdpSocket::bind(SocketAddr::new(client_ip, 0), &opts))
                .collect()
        })??;
        Ok(sockets)
    }

    fn run_clients(
        &mut self,
        spec: &PointSpec,
        server_addr: SocketAddr,
        sockets: &[UdpSocket],
    ) -> Result<GameClientResult, StudyError> {
        game::join_all(sockets, server_addr, 0, Duration::from_secs(3))?;
        let (sockets, flooder) = match (spec.flood_pps, sockets.split_last()) {
            (Some(_), Some((flooder, players))) => (players, Some(flooder)),
            _ => (sockets, None),
        };
        let duration_ns = self.options.duration.as_nanos() as u64;
        let traffic = match &self.options.traffic {
            Some(t) => Some(
                t.at_load(spec.load)
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?,
            ),
            None => None,
        };
        let probe = ProbeConfig {
            run_id: (latlab_io::clock::now_ns() >> 7) as u32,
            flows: 1,
            payload_len: traffic.as_ref().map_or(self.options.payload_len, |t| {
                t.max_size().max(latlab_wire::probe::HEADER_LEN)
            }),
            pattern: Pattern::Constant,
            rate_pps: spec.load,
            start_ns: 0,
            duration_ns,
            warmup_ns: (duration_ns / 10).min(200_000_000),
            seed: 1,
            traffic,
        };
        let flood = match (&flooder, spec.flood_pps) {
            // The flooder sends constant-rate probes of the study's size, whatever the
            // measuring client plays.
            (Some(socket), Some(pps)) => Some(Flood {
                socket,
                probe: ProbeConfig {
                    run_id: probe.run_id ^ 0x00ff_ff00,
                    rate_pps: pps,
                    payload_len: self.options.payload_len,
                    traffic: None,
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
        let result = game::run_clients(sockets, &config, flood, self.stop, &mut |_| {})?;
        Ok(result)
    }
}

fn point_is_whole(point: &Point, stop: &Stop) -> bool {
    // A point cut short by Ctrl-C is not written: --resume measures it again.
    !stop.is_raised() && point.sent > 0
}
