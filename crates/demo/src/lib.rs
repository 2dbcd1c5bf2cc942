//! `latlab demo`: a reflector and a generator on this machine, at a few rates, with a results
//! folder and a table.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::reflector::{self, ReflectorConfig, ReflectorCounters, ReflectorReport};
use latlab_engine::Stop;
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_io::udpmib::UdpMib;
use latlab_lab::losses::{FarCounters, FarSide, LabCounters};
use latlab_stats::Summary;
use serde::Serialize;

use latlab_lab::progress::View;
use latlab_lab::units::format_duration;

use latlab_lab::command::{check_writable, CommandError};
use latlab_lab::gate::{Assertion, Results};
use latlab_lab::measure::{self, GenOptions, MeasureError, ThreadChoice};
use latlab_lab::results::{self, ResultsDir, RunSummary};
use latlab_lab::topology::{ClientEmuServer, ClientServer, TopologyError};
use latlab_lab::units::{format_rate, ProbeRate};

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
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A gate or an output refused before the run.
    #[error(transparent)]
    Options(#[from] CommandError),
}

/// What the demo runs.
#[derive(Clone, Debug)]
pub struct DemoOptions {
    /// Sending time at each rate.
    pub duration: Duration,
    /// The rates.
    pub rates: Vec<ProbeRate>,
    /// Where the results folder goes.
    pub out: PathBuf,
    /// Use namespaces when possible (else loopback).
    pub namespaces: bool,
    /// Also measure through an emulated link (namespaces only).
    pub emulated_link: bool,
    /// Gates decided on every run ([`latlab_lab::gate`]), each run's into its summary.
    pub assertions: Vec<Assertion>,
    /// Write the gates' verdicts as JUnit XML here.
    pub junit: Option<PathBuf>,
}

impl DemoOptions {
    /// Refuses, before anything runs, a gate a demo run cannot answer (every run of the demo
    /// reads one clock: one-way gates are answerable) and a JUnit file that cannot be written.
    pub fn check(&self) -> Result<(), CommandError> {
        for a in &self.assertions {
            a.check_for(Results::Run, true)
                .map_err(|e| CommandError::Usage(e.to_string()))?;
        }
        match &self.junit {
            Some(path) => check_writable(path),
            None => Ok(()),
        }
    }

    /// `summary` with the gates decided on it, named by its label.
    fn gated(&self, mut summary: RunSummary) -> RunSummary {
        let label = summary.setup.label.clone();
        summary.assertions = self
            .assertions
            .iter()
            .map(|a| a.evaluate(&summary, Some(&label)))
            .collect();
        summary
    }
}

/// The emulated link of the demo: 1 ms each way, 0.1% loss each way.
pub const EMULATED_DELAY_NS: u64 = 1_000_000;
/// See [`EMULATED_DELAY_NS`].
pub const EMULATED_LOSS: f64 = 0.001;

/// What the run through the emulated link showed, beside the baseline.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct EmulatedOutcome {
    /// Delay configured in each direction.
    pub delay_each_way_ns: u64,
    /// Loss configured in each direction.
    pub loss_each_way: f64,
    /// Round-trip p50 without the emulator (the plain veth run at the lowest rate).
    pub baseline_p50_ns: Option<u64>,
    /// Round-trip p50 through the emulator.
    pub measured_p50_ns: Option<u64>,
    /// The fastest round trip without the emulator.
    pub baseline_min_ns: Option<u64>,
    /// The fastest round trip through the emulator.
    pub measured_min_ns: Option<u64>,
    /// Probes lost through the emulator.
    pub loss_ratio: f64,
}

impl EmulatedOutcome {
    /// The line the demo prints: baseline, configured and measured side by side.
    pub fn describe(&self) -> String {
        let us =
            |v: Option<u64>| v.map_or("-".to_string(), |v| latlab_lab::units::format_us(v as f64));
        // What the link added, from the fastest round trips: they carry the path's fixed cost
        // and the least queueing, where two medians taken at different times differ by the
        // machine's load as well (and can come out below the configured delay).
        let added = self
            .measured_min_ns
            .zip(self.baseline_min_ns)
            .map(|(m, b)| m as i64 - b as i64);
        format!(
            "emulated link: configured +{} per round trip ({} each way) and {:.1}% loss each way; \
             baseline p50 {}, through the emulator {}; fastest {} and {} (added {}, {} from the \
             configured); round-trip loss {:.2}% (expected {:.2}%)",
            latlab_lab::units::format_us(2.0 * self.delay_each_way_ns as f64),
            latlab_lab::units::format_us(self.delay_each_way_ns as f64),
            100.0 * self.loss_each_way,
            us(self.baseline_p50_ns),
            us(self.measured_p50_ns),
            us(self.baseline_min_ns),
            us(self.measured_min_ns),
            added.map_or("-".into(), |a| latlab_lab::units::format_us(a as f64)),
            added.map_or("-".into(), |a| {
                let err = a - 2 * self.delay_each_way_ns as i64;
                format!(
                    "{}{}",
                    if err >= 0 { "+" } else { "-" },
                    latlab_lab::units::format_us(err.unsigned_abs() as f64)
                )
            }),
            100.0 * self.loss_ratio,
            100.0 * (1.0 - (1.0 - self.loss_each_way).powi(2)),
        )
    }
}

/// A run's median round trip.
fn p50(latency: &Summary) -> Option<u64> {
    latency
        .percentile("p50")
        .and_then(|p| p.estimate.value_ns())
}

/// A run's fastest round trip, when it had one.
fn fastest(latency: &Summary) -> Option<u64> {
    (latency.count > 0).then_some(latency.min_ns)
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
    /// The run through the emulated link, when the lab could build it.
    pub emulated: Option<EmulatedOutcome>,
}

#[derive(Serialize)]
struct DemoSummary<'a> {
    latlab_version: &'a str,
    topology: &'a str,
    reflector: ReflectorJson,
    runs: &'a [RunSummary],
    #[serde(skip_serializing_if = "Option::is_none")]
    emulated_link: Option<EmulatedOutcome>,
}

#[derive(Serialize)]
struct ReflectorJson {
    received: u64,
    reflected: u64,
    malformed: u64,
    oversized: u64,
    send_dropped: u64,
    /// Dropped by the kernel at the reflector's full receive buffer.
    kernel_drops: Option<u64>,
}

/// Runs the demo: builds the topology, starts a reflector, runs the generator at each rate,
/// writes the results folder, and tears everything down (also when stopped or on error).
pub fn run(
    options: &DemoOptions,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<DemoOutcome, DemoError> {
    options.check()?;
    let results = ResultsDir::create(&options.out)?;
    let topology = ClientServer::build(options.namespaces)?;
    view.note(&format!("lab: {}", topology.describe()));
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
    let server_sock = Arc::new(server_sock);
    let counting = LabCounters::open(&topology)?;
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
        let server_sock = server_sock.clone();
        std::thread::Builder::new()
            .name("latlab-echo".into())
            .spawn(move || -> std::io::Result<()> {
                if let Some(cpu) = echo_cpu {
                    latlab_io::cpu::pin_current_thread(cpu)?;
                }
                reflector::run_udp(
                    &server_sock,
                    &ReflectorConfig::default(),
                    &echo_stop,
                    &counters,
                )
            })?
    };
    let far = counting.far(&server_sock, FarCounters::Reflector(&counters));
    let measured = measure_rates(
        options,
        target,
        client_ip,
        (ns_client, counting.client_mib.as_ref(), &far),
        echo_cpu,
        &topology,
        stop,
        view,
        &results,
    );
    echo_stop.raise();
    let echo_result = echo
        .join()
        .map_err(|_| std::io::Error::other("the reflector thread panicked"))?;
    let mut runs = measured?;
    echo_result?;
    let mut emulated = None;
    if matches!(topology, ClientServer::Namespaces { .. })
        && !stop.is_raised()
        && options.emulated_link
    {
        let baseline = runs
            .iter()
            .find(|(s, _)| s.offered_pps <= 1000.0)
            .or(runs.first())
            .map(|(s, _)| &s.latency_ns);
        let (baseline_p50, baseline_min) = (baseline.and_then(p50), baseline.and_then(fastest));
        let (mut summary, result, link) = emulated_run(options, stop, view)?;
        // The frames the emulator lost on their way through (its interfaces', its link's, its
        // own, those held at exit) are the path's share of the probes lost.
        let on_path = link.report.frames_lost();
        summary.lost_by_cause = summary.lost_by_cause.map(|l| l.with_path(on_path, false));
        let summary = options.gated(summary);
        let dir = summary.setup.dir.clone().unwrap_or_default();
        results::write_run(&results, &format!("{dir}/"), &summary, &result)?;
        results.write(
            &format!("{dir}/emulator.json"),
            link.report.text().as_bytes(),
        )?;
        emulated = Some(EmulatedOutcome {
            delay_each_way_ns: EMULATED_DELAY_NS,
            loss_each_way: EMULATED_LOSS,
            baseline_p50_ns: baseline_p50,
            measured_p50_ns: p50(&summary.latency_ns),
            baseline_min_ns: baseline_min,
            measured_min_ns: fastest(&summary.latency_ns),
            loss_ratio: summary.loss_ratio,
        });
        runs.push((summary, result));
    }
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
            kernel_drops: r.kernel_drops,
        },
        runs: &runs.iter().map(|(s, _)| s.clone()).collect::<Vec<_>>(),
        emulated_link: emulated,
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
    let marked: Vec<RunSummary> = runs.iter().map(|(s, _)| s.clone()).collect();
    let svg = latlab_lab::plot::ccdf_svg_marked(
        &format!("latlab demo: UDP echo round trip, {}", topology.kind()),
        latlab_lab::plot::ROUND_TRIP_AXIS,
        &series,
        &latlab_lab::results::stall_marks(&marked),
    )
    .map_err(std::io::Error::other)?;
    results.write("ccdf.svg", svg.as_bytes())?;
    let summaries: Vec<RunSummary> = runs.into_iter().map(|(s, _)| s).collect();
    let mut table = latlab_lab::table::render(&summaries.iter().collect::<Vec<_>>());
    for s in &summaries {
        if let Some(lost) = &s.lost_by_cause {
            table.push_str(&format!("{}: {}\n", s.setup.label, lost.text()));
        }
    }
    results.write("summary.txt", table.as_bytes())?;
    drop(topology);
    let out = results.commit()?;
    if let Some(path) = &options.junit {
        let verdicts: Vec<_> = summaries
            .iter()
            .flat_map(|s| s.assertions.clone())
            .collect();
        let xml = latlab_lab::gate::junit::junit_xml("latlab demo", &verdicts);
        results::write_atomic(path, xml.as_bytes())?;
    }
    Ok(DemoOutcome {
        topology: topo_text,
        runs: summaries,
        out,
        reflector: r,
        emulated,
    })
}

/// The link the demo emulates in both directions.
fn emulated_link(seed: u64) -> latlab_link::LinkConfig {
    latlab_link::LinkConfig {
        delay_ns: EMULATED_DELAY_NS,
        loss: latlab_link::LossModel::Bernoulli { p: EMULATED_LOSS },
        seed,
        ..latlab_link::LinkConfig::default()
    }
}

struct EmulatorRun {
    report: latlab_emu::report::EmuJson,
}

/// One run at 1 kpps through `client — emu — server` with the demo's emulated link.
fn emulated_run(
    options: &DemoOptions,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<
    (
        RunSummary,
        latlab_engine::generator::GeneratorResult,
        EmulatorRun,
    ),
    DemoError,
> {
    let lab = ClientEmuServer::build()?;
    view.note(&format!("lab: {}", lab.describe()));
    let ((summary, result), report) = latlab_study::emulator::bridge::with_emulator(
        &lab,
        latlab_io::Io::Packet,
        emulated_link(1),
        emulated_link(2),
        || measure_through(&lab, options, stop, view),
    )?;
    Ok((summary, result, EmulatorRun { report }))
}

/// 1 kpps from the client to a reflector in the server, across whatever joins them.
fn measure_through(
    lab: &ClientEmuServer,
    options: &DemoOptions,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<(RunSummary, latlab_engine::generator::GeneratorResult), DemoError> {
    let target = SocketAddr::from((lab.server_addr, 7777));
    let (echo_socket, server_mib) = latlab_io::netns::run_in(lab.server.name(), move || {
        UdpSocket::bind(target, &reflector_opts()).map(|s| (s, UdpMib::open().ok()))
    })??;
    let client_mib = latlab_io::netns::run_in(lab.client.name(), || UdpMib::open().ok())?;
    let echo_socket = Arc::new(echo_socket);
    let counters = Arc::new(ReflectorCounters::default());
    let echo_stop = Arc::new(Stop::new());
    let echo = {
        let (s, socket, counters) = (echo_stop.clone(), echo_socket.clone(), counters.clone());
        std::thread::Builder::new()
            .name("latlab-echo".into())
            .spawn(move || {
                let config = ReflectorConfig {
                    poll: latlab_engine::PollMode::Block,
                    ..ReflectorConfig::default()
                };
                reflector::run_udp(&socket, &config, &s, &counters)
            })?
    };
    let far = FarSide {
        socket: Some(&echo_socket),
        counters: FarCounters::Reflector(&counters),
        mib: server_mib.as_ref(),
        ends: None,
    };
    let measured = (|| -> Result<_, DemoError> {
        let mut gen = GenOptions::new(target);
        gen.bind = IpAddr::V4(lab.client_addr);
        gen.rate = ProbeRate::try_from(1000.0).expect("1000 pps is a probe rate");
        gen.duration = options.duration;
        gen.warmup = (options.duration / 10).min(Duration::from_millis(500));
        gen.poll = latlab_engine::PollMode::Block;
        gen.threads = ThreadChoice::One;
        let bind = gen.bind;
        let (sockets, check) = latlab_io::netns::run_in(lab.client.name(), move || {
            measure::open_sockets(bind, 1, None)
        })??;
        measure::check_target(&check, target, Duration::from_secs(3))?;
        let threads = measure::pick_threads(gen.threads, None);
        let label = format!(
            "1000 pps via emu {} ms, {:.1}% loss",
            EMULATED_DELAY_NS as f64 / 1e6,
            100.0 * EMULATED_LOSS
        );
        let mut setup = measure::setup(&gen, label.clone(), "client-emu-server", threads);
        setup.dir = Some("emulated-link".into());
        view.note(&format!(
            "measuring {label} for {}",
            format_duration(options.duration)
        ));
        view.run_started(&label, options.duration);
        let before = far.read();
        let outcome = measure::run_counted(
            &gen,
            &sockets,
            client_mib.as_ref(),
            threads,
            setup,
            stop,
            &mut |p| view.run_progress(&p),
        );
        view.run_finished();
        let (mut summary, result) = outcome?;
        far.place_in(&before, &mut summary);
        Ok((summary, result))
    })();
    echo_stop.raise();
    let echo_result = echo
        .join()
        .map_err(|_| std::io::Error::other("the reflector thread panicked"))?;
    let measured = measured?;
    echo_result?;
    Ok(measured)
}

fn reflector_opts() -> UdpOptions {
    UdpOptions {
        rx_timestamps: true,
        ..UdpOptions::default()
    }
}

/// The client's namespace (`None`: loopback) and UDP MIB, and the far side, of the demo's
/// lab.
type Ends<'a> = (Option<String>, Option<&'a UdpMib>, &'a FarSide<'a>);

#[allow(clippy::too_many_arguments)]
fn measure_rates(
    options: &DemoOptions,
    target: SocketAddr,
    client_ip: IpAddr,
    (ns_client, client_mib, far): Ends,
    echo_cpu: Option<usize>,
    topology: &ClientServer,
    stop: &Stop,
    view: &mut dyn View,
    results: &ResultsDir,
) -> Result<Vec<(RunSummary, latlab_engine::generator::GeneratorResult)>, DemoError> {
    let mut runs = Vec::new();
    for &rate in &options.rates {
        if stop.is_raised() {
            break;
        }
        let mut gen = GenOptions::new(target);
        gen.bind = client_ip;
        gen.rate = rate;
        gen.duration = options.duration;
        gen.warmup = (options.duration / 10).min(Duration::from_millis(500));
        gen.seed = rate.pps() as u64;
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
        let label = format!("{} {}", format_rate(rate.pps()), topology.kind());
        let setup = measure::setup(&gen, label.clone(), topology.kind(), threads);
        view.note(&format!(
            "measuring {label} for {}",
            format_duration(options.duration)
        ));
        view.run_started(&label, options.duration);
        let before = far.read();
        let outcome =
            measure::run_counted(&gen, &sockets, client_mib, threads, setup, stop, &mut |p| {
                view.run_progress(&p)
            });
        view.run_finished();
        let (mut summary, result) = outcome?;
        far.place_in(&before, &mut summary);
        let dir = format!("rate-{}pps", rate.pps() as u64);
        summary.setup.dir = Some(dir.clone());
        let summary = options.gated(summary);
        results::write_run(results, &format!("{dir}/"), &summary, &result)?;
        runs.push((summary, result));
    }
    Ok(runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gated_options(gates: &[&str]) -> DemoOptions {
        DemoOptions {
            duration: Duration::from_secs(1),
            rates: Vec::new(),
            out: "unused".into(),
            namespaces: false,
            emulated_link: false,
            assertions: gates.iter().map(|g| g.parse().unwrap()).collect(),
            junit: None,
        }
    }

    #[test]
    fn each_run_is_gated_under_its_label_and_rfc2544_gates_are_refused() {
        let mut h = latlab_stats::LatencyHistogram::new();
        for i in 1..=1_000u64 {
            h.record(i * 1_000);
        }
        let options = gated_options(&["p50<=1s", "forward.p50<=1s"]);
        assert!(
            options.check().is_ok(),
            "every run of the demo reads one clock"
        );
        let run = options.gated(RunSummary::synthetic("1000 pps loopback", &h, 1_000, 1e3));
        let names: Vec<_> = run.assertions.iter().map(|v| v.run.as_deref()).collect();
        assert_eq!(names, [Some("1000 pps loopback"); 2]);
        let refused = gated_options(&["ndr>=1k"]).check().unwrap_err().to_string();
        assert!(refused.contains("ndr and pdr are rfc2544's"), "{refused}");
    }

    #[test]
    fn what_the_link_added_is_told_from_the_fastest_round_trips() {
        let outcome = EmulatedOutcome {
            delay_each_way_ns: 1_000_000,
            loss_each_way: 0.001,
            // Medians a loaded machine moved: their difference is below the 2 ms configured.
            baseline_p50_ns: Some(900_000),
            measured_p50_ns: Some(2_500_000),
            baseline_min_ns: Some(40_000),
            measured_min_ns: Some(2_070_000),
            loss_ratio: 0.002,
        };
        let line = outcome.describe();
        assert!(
            line.contains("baseline p50 900.00 µs, through the emulator 2500.00 µs"),
            "{line}"
        );
        assert!(
            line.contains(
                "fastest 40.00 µs and 2070.00 µs (added 2030.00 µs, +30.00 µs from the configured)"
            ),
            "{line}"
        );
        let unknown = EmulatedOutcome {
            baseline_min_ns: None,
            ..outcome
        };
        assert!(unknown
            .describe()
            .contains("(added -, - from the configured)"));
    }
}
