//! `latlab rfc2544`: RFC 2544's throughput (NDR and PDR by binary search), frame loss rate and
//! back-to-back bursts of a forwarder in a `client — dut — server` lab of network namespaces,
//! per frame size, and RFC 8219's latency at 10, 50, 90 and 100% of the NDR from every frame
//! (each frame stamped by the source as it is queued, read against the sink's kernel stamp).
//!
//! The DUT namespace forwards with the kernel, a Linux bridge, `latlab fwd` (AF_PACKET or
//! AF_XDP) or `latlab emu` (no impairment), on the last CPU, its veths' receive work steered
//! there by RPS ([`dut`]). The source is the blaster (raw UDP frames from the client's
//! AF_PACKET ring, or an AF_XDP socket's TX ring with [`Rfc2544Options::source`]) on the first
//! CPU; the sink counts in the server. Each frame size starts with
//! a trial as fast as the source goes: that rate is the search's maximum (the source must
//! outrun the DUT; when the DUT keeps up with it, the NDR is the source's rate and the results
//! say `dut_kept_up`). The searches themselves are `latlab_bench`'s. `rfc2544.json`,
//! `rfc2544.csv`, `report.md` and the figures ([`report`]) are written into the results folder
//! whole, also when a search ends early (Ctrl-C, a DUT that stopped answering): the points
//! measured so far stay.

mod dut;
mod report;
mod trial;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use latlab_bench::latency::{LatencyFigures, TrialsSummary};
use latlab_bench::sweep::{BackToBack, BurstConfig, LossSweep};
use latlab_bench::throughput::{Throughput, ThroughputConfig, PDR_LOSS};
use latlab_engine::blaster::{self, FrameAddrs};
use latlab_engine::Stop;
use latlab_io::packet::{PacketOptions, PacketSocket};
use latlab_io::port::FramePort;
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_io::xdp::{Redirect, XdpOptions, XdpSocket};
use latlab_stats::LatencyHistogram;

pub use dut::Dut;

use crate::command::{CommandError, Io, LiveView};
use crate::topology::ClientEmuServer;
use crate::units::{format_rate, format_us};

/// RFC 2544's frame sizes for Ethernet.
pub const FRAME_SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 1280, 1518];

/// Everything `latlab rfc2544` takes, checked.
#[derive(Clone, Debug)]
pub struct Rfc2544Options {
    /// The forwarder measured.
    pub dut: Dut,
    /// Frame sizes, bytes on the wire (FCS included), each in 64..=1518.
    pub sizes: Vec<usize>,
    /// Length of one trial.
    pub trial: Duration,
    /// The search's resolution as a fraction of the source's maximum rate, in (0, 0.5].
    pub resolution: f64,
    /// Trials per search at most.
    pub max_trials: usize,
    /// Run the frame loss rate sweep after the throughput search.
    pub loss_sweep: bool,
    /// Back-to-back searches per size, averaged (0: none; RFC 2544 asks for 50).
    pub b2b_repeats: u32,
    /// Latency trials at each of 10, 50, 90 and 100% of the NDR (0: none; RFC 8219 asks for
    /// 20).
    pub latency_trials: u32,
    /// The source's frame port in the client: [`Io::Packet`] (an AF_PACKET TX ring) or
    /// [`Io::Xdp`] (an AF_XDP socket's TX ring, copy mode on veth).
    pub source: Io,
    /// The results folder (must not exist, unless `resume`).
    pub out: PathBuf,
    /// Continue the run whose folder `out` is: its finished sizes are kept, the others
    /// measured, and the folder replaced whole once they are.
    pub resume: bool,
    /// Frames per receive call of `latlab fwd` as the DUT (`fwd`, `fwd-xdp`).
    pub fwd_batch: usize,
}

impl Rfc2544Options {
    /// Options for measuring `dut` at RFC 2544's sizes with 2-second trials.
    pub fn new(dut: Dut) -> Rfc2544Options {
        Rfc2544Options {
            dut,
            sizes: FRAME_SIZES.to_vec(),
            trial: Duration::from_secs(2),
            resolution: 0.01,
            max_trials: 16,
            loss_sweep: true,
            b2b_repeats: 1,
            latency_trials: 1,
            source: Io::Packet,
            out: crate::command::default_out("rfc2544"),
            resume: false,
            fwd_batch: 32,
        }
    }

    /// Checks every value before anything runs, the results folder too; errors name the
    /// flag.
    pub fn check(&self) -> Result<(), CommandError> {
        self.check_measurement()?;
        let usage = |m: String| Err(CommandError::Usage(m));
        if self.resume {
            if !self.out.join(RESULTS).is_file() {
                return usage(format!(
                    "--resume: {} holds no {RESULTS} of an rfc2544 run",
                    self.out.display()
                ));
            }
        } else if self.out.exists() {
            return usage(format!(
                "--out {}: exists already; pick another folder, or continue it with --resume",
                self.out.display()
            ));
        }
        Ok(())
    }

    /// Checks the values that shape the measurement (not the results folder).
    pub fn check_measurement(&self) -> Result<(), CommandError> {
        let usage = |m: String| Err(CommandError::Usage(m));
        if self.sizes.is_empty() {
            return usage("--sizes: at least one frame size".into());
        }
        if let Some(s) = self.sizes.iter().find(|s| !(64..=1518).contains(*s)) {
            return usage(format!("--sizes {s}: frame sizes are 64 to 1518 bytes"));
        }
        if self.trial < Duration::from_millis(10) {
            return usage(format!("--trial {:?}: at least 10ms", self.trial));
        }
        if !(self.resolution > 0.0 && self.resolution <= 0.5) {
            return usage(format!(
                "--resolution {}: must be in (0, 0.5]",
                self.resolution
            ));
        }
        if self.max_trials == 0 {
            return usage("--max-trials 0: at least 1".into());
        }
        if !(1..=1024).contains(&self.fwd_batch) {
            return usage(format!("--fwd-batch {}: 1 to 1024 frames", self.fwd_batch));
        }
        if !matches!(self.source, Io::Packet | Io::Xdp) {
            return usage(format!(
                "--source {}: the source sends over packet or xdp",
                self.source.name()
            ));
        }
        Ok(())
    }
}

/// The results file of a run folder.
const RESULTS: &str = "rfc2544.json";

/// One trial as run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct TrialRecord {
    /// `source_max`, `ndr`, `pdr` or `loss` (`throughput`: the trial a search ended on).
    pub search: String,
    /// The rate asked for, frames per second (`None`: as fast as the source goes, or a burst).
    pub rate_pps: Option<u64>,
    /// The burst's length, frames (back-to-back trials only).
    pub burst_frames: Option<u64>,
    /// Frames sent.
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// The rate the source reached.
    pub achieved_pps: f64,
    /// The source fell more than 2% short of the rate asked for.
    pub source_short: bool,
}

/// The results of one frame size.
#[derive(Clone, Debug, Default, serde::Serialize, serde::Deserialize)]
pub struct SizeResult {
    /// Bytes on the wire.
    pub frame_size: usize,
    /// The source's own maximum (the first trial), frames per second.
    pub source_max_pps: f64,
    /// The DUT lost nothing at the source's maximum: the throughput is at least that, and the
    /// source, not the DUT, was the limit.
    pub dut_kept_up: bool,
    /// No drop rate, frames per second.
    pub ndr_pps: Option<u64>,
    /// The rate the source really reached in the trial at the NDR (below the NDR when the
    /// source fell short: then that, not the NDR, is what the DUT was shown to forward).
    pub ndr_offered_pps: Option<f64>,
    /// Partial drop rate (≤ 0.5% lost), frames per second.
    pub pdr_pps: Option<u64>,
    /// Whether both searches narrowed to the resolution.
    pub converged: bool,
    /// The frame loss rate sweep: (percent of the maximum, loss percent).
    pub loss: Vec<(u32, f64)>,
    /// Each back-to-back search's longest burst without loss, frames (`None`: even one frame
    /// was lost).
    pub back_to_back: Vec<Option<u64>>,
    /// Their mean.
    pub back_to_back_mean: Option<f64>,
    /// RFC 8219 latency at 10, 50, 90 and 100% of the NDR, from every frame.
    pub latency: Vec<LatencyPoint>,
    /// Every trial.
    pub trials: Vec<TrialRecord>,
    /// Why this size ended early, if it did.
    pub error: Option<String>,
}

/// RFC 8219's latency figures at one load.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct LatencyPoint {
    /// Percent of the NDR.
    pub percent_of_ndr: u32,
    /// The offered rate, frames per second.
    pub rate_pps: u64,
    /// Each trial's figures (one-way, every frame: send stamp to the sink's kernel stamp).
    pub trials: Vec<LatencyFigures>,
    /// The medians over the trials.
    pub summary: TrialsSummary,
}

/// What a run measured; its files are written.
#[derive(Clone, Debug)]
pub struct Rfc2544Report {
    /// The results folder.
    pub out: PathBuf,
    /// The DUT.
    pub dut: Dut,
    /// How the DUT's receive work was placed.
    pub rps: String,
    /// Per frame size.
    pub sizes: Vec<SizeResult>,
}

impl Rfc2544Report {
    /// The table printed at the end.
    pub fn text(&self) -> String {
        let mut out = format!(
            "RFC 2544 throughput of {} ({})\n",
            self.dut.name(),
            self.rps
        );
        out.push_str("size   source max   NDR          PDR          loss at 100%  back-to-back\n");
        for s in &self.sizes {
            let rate = |r: Option<u64>| r.map_or("-".into(), |r| format_rate(r as f64));
            let _ = writeln!(
                out,
                "{:<6} {:<12} {:<12} {:<12} {}{}",
                s.frame_size,
                format_rate(s.source_max_pps),
                rate(s.ndr_pps),
                rate(s.pdr_pps),
                s.loss
                    .first()
                    .map_or("-".into(), |l| format!("{:.2}%", l.1)),
                if s.dut_kept_up {
                    "  (the DUT kept up with the source)"
                } else {
                    ""
                }
            );
            if let (Some(ndr), Some(offered)) = (s.ndr_pps, s.ndr_offered_pps) {
                if offered < 0.98 * ndr as f64 {
                    let _ = writeln!(
                        out,
                        "       the source reached only {} in the trial at the NDR",
                        format_rate(offered)
                    );
                }
            }
            if let Some(l) = s.latency.iter().find(|l| l.percent_of_ndr == 100) {
                let us = |v: Option<u64>| v.map_or("-".into(), |v| format_us(v as f64));
                let _ = writeln!(
                    out,
                    "       latency at the NDR (RFC 8219, one way, every frame): typical {}, \
                     worst case (p99.9) {}, PDV {}",
                    us(l.summary.typical_ns),
                    us(l.summary.worst_case_ns),
                    us(l.summary.pdv_ns)
                );
            }
            if let Some(e) = &s.error {
                let _ = writeln!(out, "       ended early: {e}");
            }
        }
        let _ = writeln!(out, "results in {}", self.out.display());
        out
    }
}

/// Builds the lab and the DUT, measures every size, writes the results folder and returns
/// the report (also when a search ended early: then after the files, with the error).
pub fn run(
    options: &Rfc2544Options,
    stop: &Stop,
    view: &mut dyn LiveView,
) -> Result<Rfc2544Report, CommandError> {
    options.check()?;
    let kept = if options.resume {
        earlier_sizes(options)?
    } else {
        Vec::new()
    };
    let m = measure(options, kept, stop, view)?;
    write_results(options, &m.report, m.dut_report, &m.topology)?;
    match m.failure {
        Some(e) => Err(CommandError::Run {
            engine: "rfc2544 search",
            source: std::io::Error::other(format!(
                "{e} (results so far in {})",
                options.out.display()
            )),
        }),
        None => Ok(m.report),
    }
}

/// What [`measure`] measured, nothing written yet.
#[derive(Debug)]
pub struct Measured {
    /// Per frame size (`kept` ones among them).
    pub report: Rfc2544Report,
    /// What the DUT reported when it stopped (`latlab fwd`'s counters and cycles, …).
    pub dut_report: Option<serde_json::Value>,
    /// The lab it ran in.
    pub topology: String,
    /// Why a size ended early, if one did (the sizes after it were not measured).
    pub failure: Option<String>,
}

/// Builds the lab and the DUT and measures every size of `options` but those in `kept`
/// (results of an earlier run, merged in the order of `options.sizes`); writes nothing.
pub fn measure(
    options: &Rfc2544Options,
    kept: Vec<SizeResult>,
    stop: &Stop,
    view: &mut dyn LiveView,
) -> Result<Measured, CommandError> {
    options.check_measurement()?;
    let todo: Vec<usize> = options
        .sizes
        .iter()
        .copied()
        .filter(|size| !kept.iter().any(|s| s.frame_size == *size))
        .collect();
    let setup = |what: &str| {
        let what = what.to_string();
        move |e: String| CommandError::Setup {
            context: what,
            source: std::io::Error::other(e),
        }
    };
    if let Some(why) = crate::topology::why_no_namespaces() {
        return Err(setup("the client — dut — server namespaces")(why));
    }
    let _ = crate::clean::remove_stale_namespaces();
    let lab = ClientEmuServer::build().map_err(|e| setup("building the lab")(e.to_string()))?;
    let cpus = latlab_io::cpu::allowed_cpus().unwrap_or_default();
    let dut_cpu = cpus.last().copied().unwrap_or(0);
    let source_cpu = cpus.first().copied().filter(|&c| c != dut_cpu);
    let (running, path, rps) = dut::start(&lab, options.dut, dut_cpu, options.fwd_batch)
        .map_err(|e| setup(&format!("--dut {}", options.dut.name()))(e.to_string()))?;
    view.started(&format!(
        "latlab rfc2544: {} in {}; {rps}; source ({}) on CPU {}",
        options.dut.name(),
        lab.describe(),
        options.source.name(),
        source_cpu.map_or("any".into(), |c| c.to_string())
    ));
    if !kept.is_empty() {
        let sizes: Vec<String> = kept.iter().map(|s| s.frame_size.to_string()).collect();
        view.started(&format!(
            "--resume: kept the sizes measured before: {} bytes",
            sizes.join(", ")
        ));
    }
    let sink = latlab_io::netns::run_in(lab.server.name(), move || {
        let options = UdpOptions {
            rcvbuf: Some(4 << 20),
            rx_timestamps: true,
            ..UdpOptions::default()
        };
        UdpSocket::bind(
            std::net::SocketAddr::from(([0, 0, 0, 0], dut::SINK_PORT)),
            &options,
        )
    })
    .and_then(|r| r)
    .map_err(CommandError::setup("the sink in the server"))?;
    let addrs = FrameAddrs {
        src_mac: path.client_mac,
        dst_mac: path.next_hop,
        src: path.src,
        dst: path.dst,
    };
    let measured = match options.source {
        Io::Xdp => {
            // Only frames to a port nobody sends to come to the socket: the client's stack
            // keeps ARP and everything else.
            let xdp = XdpOptions::new(Redirect::Endpoint {
                udp_port: SOURCE_XDP_PORT,
            });
            let mut tx =
                latlab_io::netns::run_in(lab.client.name(), move || XdpSocket::open("veth0", &xdp))
                    .and_then(|r| r)
                    .map_err(CommandError::setup(
                        "--source xdp: the source's AF_XDP socket in the client",
                    ))?;
            measure_sizes(
                options, &todo, &mut tx, &sink, &addrs, source_cpu, stop, view,
            )
        }
        _ => {
            let mut tx = latlab_io::netns::run_in(lab.client.name(), || {
                PacketSocket::open("veth0", &PacketOptions::default())
            })
            .and_then(|r| r)
            .map_err(CommandError::setup(
                "the source's AF_PACKET socket in the client",
            ))?;
            measure_sizes(
                options, &todo, &mut tx, &sink, &addrs, source_cpu, stop, view,
            )
        }
    };
    let (measured, failure) = measured?;
    // Every size of the run in the order asked, those kept from before among them, then any
    // other size the earlier run finished.
    let mut sizes: Vec<SizeResult> = Vec::new();
    let mut earlier = kept;
    for &size in &options.sizes {
        if let Some(i) = earlier.iter().position(|s| s.frame_size == size) {
            sizes.push(earlier.remove(i));
        } else if let Some(m) = measured.iter().find(|s| s.frame_size == size) {
            sizes.push(m.clone());
        }
    }
    sizes.extend(earlier);
    let dut_report = running.stop().ok().flatten();
    Ok(Measured {
        report: Rfc2544Report {
            out: options.out.clone(),
            dut: options.dut,
            rps,
            sizes,
        },
        dut_report,
        topology: lab.describe(),
        failure,
    })
}

/// The UDP port the AF_XDP source's program takes frames for: none come (the source only
/// sends), so the client's stack sees every frame as before.
const SOURCE_XDP_PORT: u16 = 1;

/// Measures every size with frames sent through `tx`; returns the sizes measured and, when a
/// size ended with an error, that error (the sizes after it are not measured).
#[allow(clippy::too_many_arguments)]
fn measure_sizes<P: FramePort>(
    options: &Rfc2544Options,
    todo: &[usize],
    tx: &mut P,
    sink: &UdpSocket,
    addrs: &FrameAddrs,
    source_cpu: Option<usize>,
    stop: &Stop,
    view: &mut dyn LiveView,
) -> Result<(Vec<SizeResult>, Option<String>), CommandError> {
    let mut sizes = Vec::new();
    let mut failure = None;
    let mut budget = Budget::of(options, todo.len());
    for &size in todo {
        if stop.is_raised() {
            break;
        }
        let frame = blaster::stampable_udp_frame(addrs, size).map_err(CommandError::Options)?;
        let mut one = |load: trial::Load, latency: Option<&mut LatencyHistogram>| {
            let (tx, frame) = (&mut *tx, &frame);
            trial::run(
                tx,
                sink,
                frame,
                load,
                options.trial,
                source_cpu,
                stop,
                latency,
            )
        };
        let mut result = SizeResult {
            frame_size: size,
            ..SizeResult::default()
        };
        if let Err(e) = measure_size(
            options,
            size,
            &mut one,
            stop,
            view,
            &mut budget,
            &mut result,
        ) {
            result.error = Some(format!("a trial could not run: {e}"));
        }
        let ended = result.error.clone();
        sizes.push(result);
        if let Some(e) = ended {
            failure = Some(e);
            break;
        }
    }
    Ok((sizes, failure))
}

/// Every search at one frame size into `r`, each trial run by `one`; a search that ends with
/// an error ends the size, with its points and the error kept in `r`. `Err` when a trial could
/// not run at all (the points before it are in `r`).
#[allow(clippy::too_many_arguments)]
fn measure_size(
    options: &Rfc2544Options,
    size: usize,
    one: &mut OneTrial<'_>,
    stop: &Stop,
    view: &mut dyn LiveView,
    budget: &mut Budget,
    r: &mut SizeResult,
) -> std::io::Result<()> {
    let mut record =
        |r: &mut SizeResult, search: &'static str, load: trial::Load, t: trial::TrialRun| {
            let achieved = t.achieved_pps();
            let (rate, burst) = match load {
                trial::Load::Rate(rate) => (rate.map(|r| r as u64), None),
                trial::Load::Burst(frames) => (None, Some(frames)),
                trial::Load::Stamped(rate) => (Some(rate as u64), None),
            };
            r.trials.push(TrialRecord {
                search: search.to_string(),
                rate_pps: rate,
                burst_frames: burst,
                sent: t.counts.sent,
                received: t.counts.received,
                achieved_pps: achieved,
                source_short: rate.is_some_and(|want| achieved < 0.98 * want as f64),
            });
            view.counters(&format!(
                "{} | {size} B {search} trial at {}: sent {}, received {}, lost {:.3}%",
                budget.tick(),
                match (rate, burst) {
                    (_, Some(frames)) => format!("a burst of {frames} frames"),
                    (Some(r), None) => format_rate(r as f64),
                    (None, None) => "the source's maximum".into(),
                },
                t.counts.sent,
                t.counts.received,
                100.0 * t.counts.loss_ratio()
            ));
        };
    let first = one(trial::Load::Rate(None), None)?;
    record(r, "source_max", trial::Load::Rate(None), first);
    r.source_max_pps = first.achieved_pps();
    if stop.is_raised() {
        r.error = Some("stopped by a signal".into());
        return Ok(());
    }
    let max = r.source_max_pps.floor() as u64;
    if first.counts.received == 0 || max < 10 {
        r.error = Some(format!(
            "the DUT forwarded none of {} frames at the source's maximum",
            first.counts.sent
        ));
        return Ok(());
    }
    r.dut_kept_up = first.counts.received >= first.counts.sent;
    let config = ThroughputConfig {
        min_rate_pps: (max / 1000).max(1),
        max_rate_pps: max,
        resolution_pps: ((max as f64 * options.resolution) as u64).max(1),
        pdr_loss: PDR_LOSS,
        max_trials: options.max_trials,
    };
    let mut search = Throughput::new(config).map_err(std::io::Error::other)?;
    while let Some(rate) = search.poll_trial() {
        if stop.is_raised() {
            r.error = Some("stopped by a signal".into());
            break;
        }
        let load = trial::Load::Rate(Some(rate as f64));
        let t = one(load, None)?;
        // Named `ndr` or `pdr` below, from the search's own record.
        record(r, "throughput", load, t);
        if let Err(e) = search.handle_trial(rate, t.counts) {
            r.error = Some(e.to_string());
            break;
        }
    }
    // The search's own record says which trial belonged to which search.
    for (rec, point) in r.trials.iter_mut().skip(1).zip(search.points()) {
        rec.search = point.search.to_string();
    }
    if let Some(out) = search.outcome() {
        r.ndr_pps = out.ndr.rate_pps;
        r.ndr_offered_pps = r
            .trials
            .iter()
            .filter(|t| t.search == "ndr" && t.rate_pps == out.ndr.rate_pps)
            .map(|t| t.achieved_pps)
            .reduce(f64::max);
        r.pdr_pps = out.pdr.rate_pps;
        r.converged = out.ndr.converged && out.pdr.converged;
    }
    if let (Some(ndr), true, None) = (r.ndr_pps, options.latency_trials > 0, &r.error) {
        measure_latency(r, ndr, options.latency_trials, one, stop, &mut record)?;
    }
    if options.loss_sweep && r.error.is_none() {
        sweep_loss(r, max, one, stop, &mut record)?;
    }
    if options.b2b_repeats > 0 && r.error.is_none() {
        // The longest burst tried: a trial's worth of frames at the source's maximum.
        let longest = ((max as f64 * options.trial.as_secs_f64()) as u64).max(1);
        let config = BurstConfig {
            min_frames: 1,
            max_frames: longest,
            resolution_frames: ((longest as f64 * options.resolution) as u64).max(1),
            repeats: options.b2b_repeats,
        };
        back_to_back(r, config, one, stop, &mut record)?;
    }
    Ok(())
}

/// How far a run is: the trials done against the most it can take (each search's limit), and
/// from the time they took, the most time left.
#[derive(Debug)]
struct Budget {
    started: std::time::Instant,
    done: u64,
    most: u64,
}

impl Budget {
    /// The most trials `options` can take: per size the source's maximum, the NDR and PDR
    /// searches, the latency trials at four loads, the loss sweep's ten steps, and each
    /// back-to-back search's halvings down to the resolution.
    fn of(options: &Rfc2544Options, sizes: usize) -> Budget {
        let halvings = (1.0 / options.resolution).log2().ceil() as u64 + 2;
        let per_size = 1
            + 2 * options.max_trials as u64
            + 4 * u64::from(options.latency_trials)
            + if options.loss_sweep { 10 } else { 0 }
            + u64::from(options.b2b_repeats) * halvings;
        Budget {
            started: std::time::Instant::now(),
            done: 0,
            most: per_size * sizes as u64,
        }
    }

    /// One more trial done: where the run is, for the live line.
    fn tick(&mut self) -> String {
        self.done += 1;
        let most = self.most.max(self.done);
        let per_trial = self.started.elapsed() / self.done.max(1) as u32;
        let left = per_trial * (most - self.done) as u32;
        format!(
            "trial {} of at most {most}, at most {}s left",
            self.done,
            left.as_secs()
        )
    }
}

/// Records one trial of a search (named) with its load into a size's result.
type Recorder<'a> = dyn FnMut(&mut SizeResult, &'static str, trial::Load, trial::TrialRun) + 'a;

/// Runs one trial with a load, recording each frame's latency if given a histogram.
type OneTrial<'a> =
    dyn FnMut(trial::Load, Option<&mut LatencyHistogram>) -> std::io::Result<trial::TrialRun> + 'a;

/// RFC 8219 latency at 10, 50, 90 and 100% of the NDR, `trials` trials each, every frame
/// stamped.
fn measure_latency(
    r: &mut SizeResult,
    ndr: u64,
    trials: u32,
    one: &mut OneTrial<'_>,
    stop: &Stop,
    record: &mut Recorder<'_>,
) -> std::io::Result<()> {
    for percent in [10u32, 50, 90, 100] {
        let rate = (ndr * u64::from(percent) / 100).max(1);
        let mut figures = Vec::new();
        for _ in 0..trials {
            if stop.is_raised() {
                r.error = Some("stopped by a signal".into());
                return Ok(());
            }
            let mut h = LatencyHistogram::new();
            let load = trial::Load::Stamped(rate as f64);
            let t = one(load, Some(&mut h))?;
            record(r, "latency", load, t);
            figures.extend(LatencyFigures::of(&h));
        }
        r.latency.push(LatencyPoint {
            percent_of_ndr: percent,
            rate_pps: rate,
            summary: TrialsSummary::of(&figures),
            trials: figures,
        });
    }
    Ok(())
}

/// RFC 2544 26.4 at this size: the longest burst without loss, `config.repeats` times.
fn back_to_back(
    r: &mut SizeResult,
    config: BurstConfig,
    one: &mut OneTrial<'_>,
    stop: &Stop,
    record: &mut Recorder<'_>,
) -> std::io::Result<()> {
    let mut search = BackToBack::new(config).map_err(std::io::Error::other)?;
    while let Some(frames) = search.poll_trial() {
        if stop.is_raised() {
            r.error = Some("stopped by a signal".into());
            break;
        }
        let load = trial::Load::Burst(frames);
        let t = one(load, None)?;
        record(r, "back_to_back", load, t);
        if let Err(e) = search.handle_trial(frames, t.counts) {
            r.error = Some(e.to_string());
            break;
        }
    }
    if let Some(out) = search.outcome() {
        r.back_to_back = out.bursts;
        r.back_to_back_mean = out.mean_frames;
    }
    Ok(())
}

/// RFC 2544 26.3 at this size, from the source's maximum down.
fn sweep_loss(
    r: &mut SizeResult,
    max: u64,
    one: &mut OneTrial<'_>,
    stop: &Stop,
    record: &mut Recorder<'_>,
) -> std::io::Result<()> {
    let mut sweep = LossSweep::new(max).map_err(std::io::Error::other)?;
    while let Some(rate) = sweep.poll_trial() {
        if stop.is_raised() {
            r.error = Some("stopped by a signal".into());
            break;
        }
        let load = trial::Load::Rate(Some(rate as f64));
        let t = one(load, None)?;
        record(r, "loss", load, t);
        if let Err(e) = sweep.handle_trial(rate, t.counts) {
            r.error = Some(e.to_string());
            break;
        }
    }
    r.loss = sweep
        .outcome()
        .iter()
        .map(|p| (p.percent, p.loss_percent))
        .collect();
    Ok(())
}

/// How a run was measured, for its `report.md`, from what its `rfc2544.json` records.
fn how_measured(json: &serde_json::Value) -> String {
    format!(
        "DUT `{}` in {}; its receive work: {}; source over {}; trials of {} s, search resolution {}% of the source's maximum, at most {} trials a search; {} back-to-back searches and {} latency trials per load. Every trial is in `rfc2544.json`.",
        json["dut"].as_str().unwrap_or("?"),
        json["topology"].as_str().unwrap_or("?"),
        json["receive_work"].as_str().unwrap_or("?"),
        json["source_io"].as_str().unwrap_or("?"),
        json["trial_s"],
        json["resolution"].as_f64().map_or("?".into(), |r| format!("{:.1}", r * 100.0)),
        json["max_trials"],
        json["back_to_back_repeats"],
        json["latency_trials"],
    )
}

/// Draws `report.md` and the figures of the rfc2544 folder `dir` again from its
/// `rfc2544.json`; returns the report's path.
pub fn redraw(dir: &std::path::Path) -> Result<PathBuf, String> {
    let path = dir.join(RESULTS);
    let named = |e: String| format!("{}: {e}", path.display());
    let text = std::fs::read_to_string(&path).map_err(|e| named(e.to_string()))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| named(e.to_string()))?;
    let report = Rfc2544Report {
        out: dir.to_path_buf(),
        dut: json["dut"].as_str().unwrap_or("").parse().map_err(named)?,
        rps: json["receive_work"].as_str().unwrap_or("").to_string(),
        sizes: serde_json::from_value(json["sizes"].clone()).map_err(|e| named(e.to_string()))?,
    };
    let figures = report::figures(&report).map_err(named)?;
    for (name, svg) in &figures {
        crate::results::write_atomic(&dir.join(name), svg.as_bytes()).map_err(|e| e.to_string())?;
    }
    let names: Vec<String> = figures.into_iter().map(|f| f.0).collect();
    let md = report::markdown(&report, &how_measured(&json), &names);
    let out = dir.join("report.md");
    crate::results::write_atomic(&out, md.as_bytes()).map_err(|e| e.to_string())?;
    Ok(out)
}

/// Whether `dir` is the results folder of an rfc2544 run.
pub fn is_folder(dir: &std::path::Path) -> bool {
    dir.join(RESULTS).is_file()
}

/// The options that shape every point, as `rfc2544.json` keeps them, with the flag each
/// comes from: `--resume` refuses a folder measured with other values.
fn parameters(options: &Rfc2544Options) -> Vec<(&'static str, &'static str, serde_json::Value)> {
    use serde_json::json;
    vec![
        ("dut", "--dut", json!(options.dut.name())),
        ("source_io", "--source", json!(options.source.name())),
        ("trial_s", "--trial", json!(options.trial.as_secs_f64())),
        ("resolution", "--resolution", json!(options.resolution)),
        ("max_trials", "--max-trials", json!(options.max_trials)),
        ("loss_sweep", "--no-loss-sweep", json!(options.loss_sweep)),
        (
            "back_to_back_repeats",
            "--b2b-repeats",
            json!(options.b2b_repeats),
        ),
        (
            "latency_trials",
            "--latency-trials",
            json!(options.latency_trials),
        ),
        ("fwd_batch", "--fwd-batch", json!(options.fwd_batch)),
    ]
}

/// The sizes the run in `options.out` finished (no error), after checking it was measured
/// with the same options; the error names the flag that differs.
fn earlier_sizes(options: &Rfc2544Options) -> Result<Vec<SizeResult>, CommandError> {
    let path = options.out.join(RESULTS);
    let bad = |why: String| CommandError::Usage(format!("--resume: {}: {why}", path.display()));
    let text = std::fs::read_to_string(&path).map_err(|e| bad(e.to_string()))?;
    let json: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(e.to_string()))?;
    for (key, flag, value) in parameters(options) {
        if json[key] != value {
            return Err(CommandError::Usage(format!(
                "--resume: {} was measured with {flag} {} ({key}), not {value}",
                options.out.display(),
                json[key]
            )));
        }
    }
    let sizes: Vec<SizeResult> =
        serde_json::from_value(json["sizes"].clone()).map_err(|e| bad(e.to_string()))?;
    Ok(sizes.into_iter().filter(|s| s.error.is_none()).collect())
}

/// `rfc2544.json` and `rfc2544.csv`, into the results folder, whole.
fn write_results(
    options: &Rfc2544Options,
    report: &Rfc2544Report,
    dut_report: Option<serde_json::Value>,
    topology: &str,
) -> Result<(), CommandError> {
    let dir = if options.resume {
        crate::results::ResultsDir::replacing(&options.out)?
    } else {
        crate::results::ResultsDir::create(&options.out)?
    };
    let mut json = serde_json::json!({
        "latlab_version": env!("CARGO_PKG_VERSION"),
        "topology": topology,
        "receive_work": report.rps,
        "pdr_loss": PDR_LOSS,
        "sizes": report.sizes,
        "dut_report": dut_report,
    });
    for (key, _, value) in parameters(options) {
        json[key] = value;
    }
    dir.write("rfc2544.json", format!("{json:#}\n").as_bytes())?;
    let mut csv = String::from(
        "frame_size,source_max_pps,dut_kept_up,ndr_pps,pdr_pps,converged,loss_at_100_percent,\
         back_to_back_frames,typical_latency_ns_at_ndr,worst_case_latency_ns_at_ndr,\
         pdv_ns_at_ndr,trials,error\n",
    );
    for s in &report.sizes {
        let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
        let at_ndr = s.latency.iter().find(|l| l.percent_of_ndr == 100);
        let _ = writeln!(
            csv,
            "{},{:.0},{},{},{},{},{},{},{},{},{},{},{}",
            s.frame_size,
            s.source_max_pps,
            s.dut_kept_up,
            opt(s.ndr_pps),
            opt(s.pdr_pps),
            s.converged,
            s.loss
                .first()
                .map_or(String::new(), |l| format!("{:.4}", l.1)),
            s.back_to_back_mean
                .map_or(String::new(), |m| format!("{m:.1}")),
            opt(at_ndr.and_then(|l| l.summary.typical_ns)),
            opt(at_ndr.and_then(|l| l.summary.worst_case_ns)),
            opt(at_ndr.and_then(|l| l.summary.pdv_ns)),
            s.trials.len(),
            s.error.as_deref().unwrap_or("").replace(',', ";"),
        );
    }
    dir.write("rfc2544.csv", csv.as_bytes())?;
    let figures = report::figures(report).map_err(|e| CommandError::Run {
        engine: "rfc2544 figures",
        source: std::io::Error::other(e),
    })?;
    for (name, svg) in &figures {
        dir.write(name, svg.as_bytes())?;
    }
    let how = how_measured(&json);
    let names: Vec<String> = figures.into_iter().map(|f| f.0).collect();
    dir.write(
        "report.md",
        report::markdown(report, &how, &names).as_bytes(),
    )?;
    dir.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_bounds_every_trial_a_run_can_take_and_says_how_far_it_is() {
        let mut options = Rfc2544Options::new(Dut::Kernel);
        options.sizes = vec![64, 1518];
        options.max_trials = 20;
        options.latency_trials = 2;
        options.loss_sweep = true;
        options.b2b_repeats = 3;
        options.resolution = 0.01;
        // Per size: 1 + 2 × 20 + 4 × 2 + 10 + 3 × (7 + 2) = 86.
        let mut budget = Budget::of(&options, options.sizes.len());
        assert_eq!(budget.most, 2 * 86);
        let line = budget.tick();
        assert!(
            line.starts_with("trial 1 of at most 172, at most "),
            "{line}"
        );
        assert!(line.ends_with("s left"), "{line}");
        // A search that took more than its share never makes the count run backwards.
        budget.done = 500;
        assert!(budget
            .tick()
            .starts_with("trial 501 of at most 501, at most 0s left"));
    }
}
