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
//! AF_XDP (left out, with the reason noted, where AF_XDP cannot be had). Each point goes to
//! `points/` as soon as it is measured; the tables, plots and `report.md` are drawn from those
//! files only, so [`report::write`] (and `latlab report DIR`) draws them again.
//!
//! The modules: `run` (the lab, the latency, accuracy and loss points) and `rates` (the
//! forwarding-rate points) measure and write the points, with `bridge` running `latlab emu`
//! beside them; `analysis` reads the points back; `tables`, `figures` and [`report::write`]
//! draw from it. The run side and the report side share only [`EmuPoint`] and [`RatePoint`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use latlab_emu::report::EmuJson;
use latlab_engine::Stop;
use latlab_lab::units::{format_duration, format_duration_ns, ProbeRate};
use serde::{Deserialize, Serialize};

use super::{Shard, Study, StudyError, StudyKind};
use latlab_lab::progress::View;
use latlab_lab::results::RunSummary;

mod analysis;
pub mod bridge;
mod figures;
mod rates;
pub mod report;
mod run;
mod tables;

/// `latlab study emulator` as a [`Study`]: [`Study::run`] measures every point in
/// `client — emu — server` namespaces into `options.out`'s `points/` folder, then writes the
/// tables, the plots and `report.md` from them.
#[derive(Clone, Copy, Debug)]
pub struct EmulatorStudy;

impl Study for EmulatorStudy {
    const KIND: StudyKind = StudyKind::Emulator;
    const POINT_PREFIXES: &'static [&'static str] = &["kernel", "emu", "loss", "rate"];
    type Options = EmuStudyOptions;

    fn folder(options: &EmuStudyOptions) -> (&Path, Shard) {
        (&options.out, options.shard)
    }

    fn measure(
        options: &EmuStudyOptions,
        stop: &Stop,
        progress: &mut dyn View,
    ) -> Result<String, StudyError> {
        run::measure_all(options, stop, progress)
    }

    fn draw(dir: &Path, topology: &str) -> Result<PathBuf, StudyError> {
        report::write(dir, topology)
    }

    fn old_topology(line: &str) -> &str {
        // The emulator study wrote its cores' plan after the lab on the same line.
        line.split_once(". Round trips").map_or(line, |(t, _)| t)
    }
}

/// What the study measures.
#[derive(Clone, Debug)]
pub struct EmuStudyOptions {
    /// Results folder (must not exist).
    pub out: PathBuf,
    /// Sending time per point.
    pub duration: Duration,
    /// The low and the high rate.
    pub rates: Vec<ProbeRate>,
    /// Delays D on the client→server direction.
    pub delays_ns: Vec<u64>,
    /// Sending time of each forwarding-rate point.
    pub rate_duration: Duration,
    /// Continue the study in `out` (`--resume`), keeping the points it measured.
    pub resume: bool,
    /// This job's share of the points (`--shard I/N`; the whole study by default).
    pub shard: Shard,
}

impl EmuStudyOptions {
    /// The grid: 1 and 50 kpps; D = 10 µs, 100 µs, 1 ms, 100 ms.
    pub fn new(out: PathBuf) -> EmuStudyOptions {
        EmuStudyOptions {
            out,
            duration: Duration::from_secs(3),
            rates: [1_000.0, 50_000.0]
                .map(|pps| ProbeRate::try_from(pps).expect("1 and 50 kpps are probe rates"))
                .to_vec(),
            delays_ns: vec![10_000, 100_000, 1_000_000, 100_000_000],
            rate_duration: Duration::from_secs(2),
            resume: false,
            shard: Shard::WHOLE,
        }
    }

    /// The options that shape the points, as `study.json` keeps them: shards of one study
    /// must agree on them.
    pub fn parameters(&self) -> BTreeMap<String, String> {
        let list = |v: Vec<String>| v.join(",");
        BTreeMap::from([
            ("--duration".to_string(), format_duration(self.duration)),
            (
                "--rates".to_string(),
                list(self.rates.iter().map(|r| format!("{}", r.pps())).collect()),
            ),
            (
                "--delays".to_string(),
                list(
                    self.delays_ns
                        .iter()
                        .map(|&d| format_duration_ns(d))
                        .collect(),
                ),
            ),
            (
                "--rate-duration".to_string(),
                format_duration(self.rate_duration),
            ),
        ])
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
    pub emulator: Option<EmuJson>,
    /// CPU time the hypervisor took from this machine while the point ran (all CPUs, ns):
    /// a guest's threads stall while their vCPU is stolen, whatever the lab's plan.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_steal_ns: Option<u64>,
    /// Per-packet (send time from the first probe, latency) in ns, kept for the 100 µs points
    /// (the paper's Fig. 6).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<Vec<(u64, u64)>>,
}

/// The delay whose per-packet latencies are kept for the time-series plot.
pub const TRACE_DELAY_NS: u64 = 100_000;

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
    /// The emulator's report (emu points), as `latlab emu --json` writes it.
    pub emulator: Option<EmuJson>,
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

#[cfg(test)]
pub(crate) mod tests;
