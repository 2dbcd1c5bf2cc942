//! `latlab demo`: a reflector and a generator on this machine, at a few rates, with a results
//! folder and a table.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::generator::Progress;
use latlab_engine::reflector::{self, ReflectorConfig, ReflectorCounters, ReflectorReport};
use latlab_engine::Stop;
use latlab_io::udp::{UdpOptions, UdpSocket};
use serde::Serialize;

use crate::measure::{self, GenOptions, MeasureError, ThreadChoice};
use crate::results::{self, ResultsDir, RunSummary};
use crate::topology::{ClientServer, TopologyError};
use crate::units::format_rate;

/// Errors of the demo.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The topology could not be built.
    #[error("building the lab: {0}")]
    Topology(#[from] TopologyError),
    /// A measurement failed.
    #[error(transparent)]
    Measure(#[from] MeasureError),
    /// Files or sockets.
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

/// What the demo runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Sending time at each rate.
    pub duration: Duration,
    /// The rates, packets per second.
    pub rates: Vec<f64>,
    /// Where the results folder goes.
    pub out: PathBuf,
    /// Use namespaces when possible (else loopback).
    pub namespaces: bool,
}

/// Receives progress of each run of a sequence.
pub trait ProgressSink: Send {
    /// A run starts.
    fn start(&mut self, label: &str, total: Duration);
    /// Where the run is.
    fn update(&mut self, progress: &Progress);
    /// The run ended.
    fn finish(&mut self);
}

/// What the demo measured.
#[derive(Debug)]
pub struct DemoOutcome {
    /// The topology, described.
    pub topology: String,
    /// One summary per rate.
    pub runs: Vec<RunSummary>,
    /// The results folder.
    pub out: PathBuf,
    /// The reflector's counters.
    pub reflector: ReflectorReport,
}

#[derive(Serialize)]
struct DemoSummary<'a> {
    latlab_version: &'a str,
    topology: &'a str,
    reflector: ReflectorJson,
    runs: &'a [RunSummary],
}

#[derive(Serialize)]
struct ReflectorJson {
    received: u64,
    reflected: u64,
    malformed: u64,
    oversized: u64,
    send_dropped: u64,
}

/// Runs the demo: builds the topology, starts a reflector, runs the generator at each rate,
/// writes the results folder, and tears everything down (also when stopped or on error).
pub fn run(
    options: &DemoOptions,
    stop: &Stop,
    sink: &mut dyn ProgressSink,
    log: &mut dyn FnMut(&str),
) -> Result<DemoOutcome, DemoError> {
    let results = ResultsDir::create(&options.out)?;
    let topology = ClientServer::build(options.namespaces)?;
    log(&format!("lab: {}", topology.describe()));
    let (server_sock, client_ip, ns_client) = match &topology {
        ClientServer::Loopback { .. } => {
            let s = UdpSocket::bind(SocketAddr::from(([127, 0, 0, 1], 0)), &reflector_opts())?;
            (s, IpAddr::V4(Ipv4Addr::LOCALHOST), None)
        }
        ClientServer::Namespaces {
            client,
            server,
            client_addr,
            server_addr,
        } => {
            let addr = SocketAddr::from((*server_addr, 7777));
            let s = latlab_io::netns::run_in(server.name(), move || {
                UdpSocket::bind(addr, &reflector_opts())
            })??;
            (s, IpAddr::V4(*client_addr), Some(client.name().to_string()))
        }
    };
    let target = server_sock.local_addr()?;
    let cpus = latlab_io::cpu::allowed_cpus().unwrap_or_default();
    let echo_cpu = if cpus.len() >= 2 {
        cpus.first().copied()
    } else {
        None
    };
    let echo_stop = Arc::new(Stop::new());
    let counters = Arc::new(ReflectorCounters::default());
    let echo = {
        let (echo_stop, counters) = (echo_stop.clone(), counters.clone());
        std::thread::Builder::new()
            .name("latlab-echo".into())
            .spawn(move || -> std::io::Result<()> {
                if let Some(cpu) = echo_cpu {
                    latlab_io::cpu::pin_current_thread(cpu)?;
                }
                reflector::run(
                    &server_sock,
                    &ReflectorConfig::default(),
                    &echo_stop,
                    &counters,
                )
            })?
    };
    let measured = measure_rates(
        options, target, client_ip, ns_client, echo_cpu, &topology, stop, sink, log, &results,
    );
    echo_stop.raise();
    let echo_result = echo
        .join()
        .map_err(|_| std::io::Error::other("the reflector thread panicked"))?;
    let runs = measured?;
    echo_result?;
    let r = counters.snapshot();
    let topo_text = topology.describe();
    let json = serde_json::to_string_pretty(&DemoSummary {
        latlab_version: env!("CARGO_PKG_VERSION"),
        topology: &topo_text,
        reflector: ReflectorJson {
            received: r.received,
            reflected: r.reflected,
            malformed: r.malformed,
            oversized: r.oversized,
            send_dropped: r.send_dropped,
        },
        runs: &runs.iter().map(|(s, _)| s.clone()).collect::<Vec<_>>(),
    })
    .map_err(std::io::Error::other)?;
    results.write("summary.json", format!("{json}\n").as_bytes())?;
    let series: Vec<_> = runs
        .iter()
        .map(|(s, res)| {
            (
                s.setup.label.clone(),
                latlab_stats::ccdf(&res.report.latency),
            )
        })
        .collect();
    let svg = crate::plot::ccdf_svg(
        &format!("latlab demo: UDP echo round trip, {}", topology.kind()),
        &series,
    )
    .map_err(std::io::Error::other)?;
    results.write("ccdf.svg", svg.as_bytes())?;
    let summaries: Vec<RunSummary> = runs.into_iter().map(|(s, _)| s).collect();
    let table = crate::table::render(&summaries.iter().collect::<Vec<_>>());
    results.write("summary.txt", table.as_bytes())?;
    drop(topology);
    let out = results.commit()?;
    Ok(DemoOutcome {
        topology: topo_text,
        runs: summaries,
        out,
        reflector: r,
    })
}

fn reflector_opts() -> UdpOptions {
    UdpOptions {
        rx_timestamps: true,
        ..UdpOptions::default()
    }
}

#[allow(clippy::too_many_arguments)]
fn measure_rates(
    options: &DemoOptions,
    target: SocketAddr,
    client_ip: IpAddr,
    ns_client: Option<String>,
    echo_cpu: Option<usize>,
    topology: &ClientServer,
    stop: &Stop,
    sink: &mut dyn ProgressSink,
    log: &mut dyn FnMut(&str),
    results: &ResultsDir,
) -> Result<Vec<(RunSummary, latlab_engine::generator::GeneratorResult)>, DemoError> {
    let mut runs = Vec::new();
    for &rate in &options.rates {
        if stop.is_raised() {
            break;
        }
        let mut gen = GenOptions::new(target);
        gen.bind = client_ip;
        gen.rate_pps = rate;
        gen.duration = options.duration;
        gen.warmup = (options.duration / 10).min(Duration::from_millis(500));
        gen.seed = rate as u64;
        gen.threads = ThreadChoice::Auto;
        let (sockets, check) = match &ns_client {
            None => measure::open_sockets(client_ip, gen.flows, None)?,
            Some(ns) => {
                let flows = gen.flows;
                latlab_io::netns::run_in(ns, move || {
                    measure::open_sockets(client_ip, flows, None)
                })??
            }
        };
        measure::check_target(&check, target, Duration::from_secs(2))?;
        let threads = measure::pick_threads(gen.threads, echo_cpu);
        let label = format!("{} {}", format_rate(rate), topology.kind());
        let setup = measure::setup(&gen, label.clone(), topology.kind(), threads);
        log(&format!("measuring {label} for {:?}", options.duration));
        sink.start(&label, options.duration);
        let outcome = measure::run(&gen, &sockets, threads, setup, stop, &mut |p| {
            sink.update(&p)
        });
        sink.finish();
        let (summary, result) = outcome?;
        let dir = format!("rate-{}pps/", rate as u64);
        results::write_run(results, &dir, &summary, &result)?;
        runs.push((summary, result));
    }
    Ok(runs)
}
