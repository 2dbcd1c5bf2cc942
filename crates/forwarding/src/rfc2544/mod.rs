//! `latlab rfc2544`: RFC 2544's throughput (NDR and PDR by binary search), frame loss rate and
//! back-to-back bursts of a forwarder in a `client — dut — server` lab of network namespaces,
//! per frame size, and RFC 8219's latency at 10, 50, 90 and 100% of the NDR from every frame
//! (each frame stamped by the source as it is queued, read against the sink's kernel stamp).
//!
//! The DUT namespace forwards with the kernel, a Linux bridge, `latlab fwd` (AF_PACKET or
//! AF_XDP) or `latlab emu` (no impairment), on the last CPU, its veths' receive work steered
//! there by RPS (`dut`). The source is the blaster (raw UDP frames from the client's
//! AF_PACKET ring, or an AF_XDP socket's TX ring with [`Rfc2544Options::source`]) on the first
//! CPU; the sink counts in the server. Each frame size starts with
//! a trial as fast as the source goes: that rate is the search's maximum (the source must
//! outrun the DUT; when the DUT keeps up with it, the NDR is the source's rate and the results
//! say `dut_kept_up`). The searches themselves are `latlab_bench`'s. `rfc2544.json`,
//! `rfc2544.csv`, `report.md` and the figures (`report`) are written into the results folder
//! whole, also when a search ends early (Ctrl-C, a DUT that stopped answering): the points
//! measured so far stay.

mod dut;
mod dut_report;
mod external;
mod folder;
pub mod gates;
mod mlr;
mod points;
mod report;
mod saturation;
mod search;
mod setup;
mod table;
mod trial;

use std::path::PathBuf;
use std::time::Duration;

use latlab_bench::latency::{LatencyFigures, TrialsSummary};
use latlab_engine::blaster::FrameAddrs;
use latlab_engine::Stop;
use latlab_io::ifstats::DevStats;
use latlab_io::packet::{PacketOptions, PacketSocket};
use latlab_io::port::FramePort;
use latlab_lab::middle::ports::{open_endpoint, EndpointSettings};
use latlab_lab::middle::RunningMiddle;

pub use dut::Dut;
pub use dut_report::{
    CycleFigures, DutReport, FwdDutReport, StepCycles, TestpmdCounts, TestpmdReport,
    XdpRedirectCounts, XdpRedirectDirections, XdpRedirectReport,
};
pub use folder::{is_folder, redraw, Rfc2544File};
pub use latlab_engine::forwarder::FwdPoll;
pub use mlr::{MlrSettings, MlrSizeResult, SearchMethod};
pub use points::Rfc2544Study;
pub use saturation::Saturation;
pub use trial::TrialRecord;

use folder::RESULTS;
use search::measure_sizes;
use setup::{in_namespace, Setup};
use trial::Sink;

use latlab_lab::command::{CommandError, Io, View};
use latlab_lab::units::format_duration;

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
    /// The binary search, MLRsearch, or both.
    pub search: SearchMethod,
    /// MLRsearch's goals besides their loss ratios and trial length.
    pub mlr: MlrSettings,
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
    /// How `latlab fwd` as the DUT waits for frames: busy, block or rate:N (`None`: the DUT's
    /// own default, [`Dut::default_poll`]).
    pub fwd_poll: Option<FwdPoll>,
    /// After the searches, one trial as fast as the source goes with the DUT's CPU sampled
    /// (Table II's cycles per packet by step).
    pub saturation: bool,
    /// An external DUT's interfaces on this host: where the frames leave, where they return.
    pub iface_a: Option<String>,
    /// See `iface_a`.
    pub iface_b: Option<String>,
    /// The frames' destination MAC for an external DUT.
    pub dst_mac: [u8; 6],
    /// The frames' destination address for an external DUT.
    pub dst_ip: std::net::Ipv4Addr,
    /// Gates (`ndr>=500k`) decided on every size; their verdicts go into `rfc2544.json`.
    pub assertions: Vec<latlab_lab::gate::Assertion>,
}

impl Rfc2544Options {
    /// How `latlab fwd` as the DUT waits for frames.
    pub fn poll(&self) -> FwdPoll {
        self.fwd_poll.unwrap_or(self.dut.default_poll())
    }

    /// Options for measuring `dut` at RFC 2544's sizes with 2-second trials.
    pub fn new(dut: Dut) -> Rfc2544Options {
        Rfc2544Options {
            dut,
            sizes: FRAME_SIZES.to_vec(),
            trial: Duration::from_secs(2),
            resolution: 0.01,
            max_trials: 16,
            search: SearchMethod::Binary,
            mlr: MlrSettings::CSIT,
            loss_sweep: true,
            b2b_repeats: 1,
            latency_trials: 1,
            source: Io::Packet,
            out: latlab_lab::command::default_out("rfc2544"),
            resume: false,
            fwd_batch: 32,
            fwd_poll: None,
            saturation: true,
            iface_a: None,
            iface_b: None,
            dst_mac: external::DEFAULT_DST_MAC,
            dst_ip: external::DEFAULT_DST_IP,
            assertions: Vec::new(),
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
            return usage(format!(
                "--trial {}: at least 10ms",
                format_duration(self.trial)
            ));
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
        if self.search.mlr() {
            self.mlr.check(self.trial)?;
        }
        let external = self.dut == Dut::EXTERNAL;
        match (&self.iface_a, &self.iface_b) {
            (Some(a), Some(b)) if external && a == b => {
                return usage(format!(
                    "--iface-a {a} --iface-b {b}: two different interfaces"
                ))
            }
            (Some(_), Some(_)) if external => {}
            _ if external => return usage("--dut external needs --iface-a and --iface-b".into()),
            (Some(_), _) => {
                return usage(
                    "--iface-a: only with --dut external (the lab builds the others)".into(),
                )
            }
            (_, Some(_)) => {
                return usage(
                    "--iface-b: only with --dut external (the lab builds the others)".into(),
                )
            }
            _ => {}
        }
        if self.fwd_poll == Some(FwdPoll::Rate(0)) {
            return usage("--fwd-poll rate:0: at least one poll a second".into());
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
    /// MLRsearch's result (`--search mlr` or `both`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mlr: Option<MlrSizeResult>,
    /// The seconds of trials the binary searches ran (absent in files of runs before MLRsearch
    /// and with `--search mlr`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub binary_trial_time_s: Option<f64>,
}

impl SizeResult {
    /// The binary search's NDR, when it ran.
    pub fn binary_ndr_pps(&self) -> Option<u64> {
        self.binary_ran().then_some(self.ndr_pps).flatten()
    }

    /// The binary search's PDR, when it ran.
    pub fn binary_pdr_pps(&self) -> Option<u64> {
        self.binary_ran().then_some(self.pdr_pps).flatten()
    }

    /// Whether the binary searches ran (in files older than MLRsearch, always).
    fn binary_ran(&self) -> bool {
        self.binary_trial_time_s.is_some() || self.mlr.is_none()
    }
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
    /// Where the DUT's cycles went at saturation, when that trial ran.
    pub saturation: Option<Saturation>,
}

/// Builds the lab and the DUT, measures every size, writes the results folder (its points,
/// then what is drawn from them) and returns the report with, when a search ended early
/// (a stopping signal, a trial that could not run), the error: the report then has the sizes
/// that finished, and the one cut short with its error.
pub fn run(
    options: &Rfc2544Options,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<(Rfc2544Report, Option<CommandError>), CommandError> {
    options.check()?;
    let m = points::measure(options, stop, view)?;
    points::draw(&options.out).map_err(|e| CommandError::Run {
        engine: "rfc2544 report",
        source: std::io::Error::other(e.to_string()),
    })?;
    let failure = m.failure.map(|e| CommandError::Run {
        engine: "rfc2544 search",
        source: std::io::Error::other(format!("{e} (results so far in {})", options.out.display())),
    });
    Ok((m.report, failure))
}

/// What [`measure`] measured, nothing written yet.
#[derive(Debug)]
pub struct Measured {
    /// Per frame size (`kept` ones among them).
    pub report: Rfc2544Report,
    /// What the DUT reported when it stopped (`latlab fwd`'s counters and cycles, …).
    pub dut_report: Option<DutReport>,
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
    view: &mut dyn View,
) -> Result<Measured, CommandError> {
    options.check_measurement()?;
    let todo: Vec<usize> = options
        .sizes
        .iter()
        .copied()
        .filter(|size| !kept.iter().any(|s| s.frame_size == *size))
        .collect();
    let cpus = latlab_io::cpu::allowed_cpus().unwrap_or_default();
    let dut_cpu = cpus.last().copied().unwrap_or(0);
    let source_cpu = cpus.first().copied().filter(|&c| c != dut_cpu);
    let setup = if options.dut == Dut::EXTERNAL {
        external::setup(options)?
    } else {
        setup::lab(options, dut_cpu, source_cpu)?
    };
    let Setup {
        lab: _lab,
        running,
        addrs,
        sink,
        source_at: (source_ns, source_iface),
        placement,
        topology,
    } = setup;
    let (ns, iface) = (source_ns.clone(), source_iface.clone());
    let source_drops = in_namespace(ns.as_deref(), move || DevStats::open(&iface)).ok();
    view.started(&format!(
        "latlab rfc2544: {} in {topology}; {placement}; source ({}) on CPU {}",
        options.dut.name(),
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
    let cpus = (source_cpu, dut_cpu);
    let measured = match options.source {
        Io::Xdp => {
            // Only frames to a port nobody sends to come to the socket: the client's stack
            // keeps ARP and everything else.
            let endpoint = EndpointSettings::port(SOURCE_XDP_PORT);
            let open = move || open_endpoint(&source_iface, &endpoint);
            let mut tx = in_namespace(source_ns.as_deref(), open).map_err(CommandError::setup(
                "--source xdp: the source's AF_XDP socket",
            ))?;
            measure_all(
                options,
                &todo,
                &mut tx,
                (&sink, &addrs, source_drops.as_ref()),
                cpus,
                running,
                stop,
                view,
            )
        }
        _ => {
            let open = move || PacketSocket::open(&source_iface, &PacketOptions::default());
            let mut tx = in_namespace(source_ns.as_deref(), open)
                .map_err(CommandError::setup("the source's AF_PACKET socket"))?;
            measure_all(
                options,
                &todo,
                &mut tx,
                (&sink, &addrs, source_drops.as_ref()),
                cpus,
                running,
                stop,
                view,
            )
        }
    };
    let (measured, failure, saturation, dut_report) = measured?;
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
    Ok(Measured {
        report: Rfc2544Report {
            out: options.out.clone(),
            dut: options.dut,
            rps: placement,
            sizes,
            saturation,
        },
        dut_report,
        topology,
        failure,
    })
}

/// What [`measure_all`] returns: the sizes measured, why one ended early, the saturation
/// trial and the DUT's report.
type AllMeasured = (
    Vec<SizeResult>,
    Option<String>,
    Option<Saturation>,
    Option<DutReport>,
);

/// Measures the sizes `todo`, then (unless stopped, or `options.saturation` is off) the
/// saturation trial with the smallest size; stops the DUT and returns its report too.
#[allow(clippy::too_many_arguments)]
fn measure_all<P: FramePort>(
    options: &Rfc2544Options,
    todo: &[usize],
    tx: &mut P,
    (sink, addrs, source): (&Sink, &FrameAddrs, Option<&DevStats>),
    (source_cpu, dut_cpu): (Option<usize>, usize),
    running: RunningMiddle,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<AllMeasured, CommandError> {
    let (measured, failure) = measure_sizes(
        options,
        todo,
        tx,
        (sink, source),
        addrs,
        source_cpu,
        stop,
        view,
    )?;
    let smallest = todo.iter().min().copied();
    // An external DUT's CPU is not known here: no saturation trial.
    let sampled = options.saturation && options.dut != Dut::EXTERNAL;
    let Some(size) = smallest.filter(|_| sampled && !stop.is_raised()) else {
        let dut_report = running.stop().ok().flatten().map(DutReport::from);
        return Ok((measured, failure, None, dut_report));
    };
    view.started(&format!(
        "saturation: {size}-byte frames as fast as the source goes for {:?}, CPU {dut_cpu} sampled",
        options.trial
    ));
    let frame =
        latlab_engine::blaster::stampable_udp_frame(addrs, size).map_err(CommandError::Options)?;
    let cpus = (source_cpu, dut_cpu);
    match saturation::measure(tx, sink, &frame, options.trial, cpus, running, stop) {
        Ok((s, dut_report)) => Ok((measured, failure, Some(s), dut_report)),
        Err(e) => {
            let failure = failure.or(Some(format!("the saturation trial: {e}")));
            Ok((measured, failure, None, None))
        }
    }
}

/// The UDP port the AF_XDP source's program takes frames for: none come (the source only
/// sends), so the client's stack sees every frame as before.
const SOURCE_XDP_PORT: u16 = 1;
