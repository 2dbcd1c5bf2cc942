//! `latlab study game-server`: the game-server latency study of Emmerich et al., on this
//! machine.
//!
//! For each server I/O mode, receive buffer size and client count, the offered load rises until
//! more than 5% of the copies are lost (the first-drop load), then the table points are measured
//! at 20%, 90% and 110% of it, then the flood scenario. Each point is written to `points/` as
//! soon as it is measured (`<key>.json` and `<key>.hlog`, each whole or absent), so an
//! interrupted study keeps what it finished and `--resume` skips it. The artefacts (Table I,
//! Figures 2–4, the flood table and `report.md`) are drawn from those files only, so
//! [`report::write`] (and `latlab report DIR`) draws them again from any results folder.
//!
//! The modules: `run` measures and writes the points; `analysis` reads them back and
//! orders them into series; `tables`, `figures` and `conclusions` draw from that analysis;
//! [`report::write`] writes every artefact. [`GameServerStudy`]'s `run` is the two in sequence; the run side and
//! the report side share only the point schema ([`Point`]) and the constants below.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use latlab_engine::game::ServerIo;
use latlab_engine::Stop;
use latlab_lab::progress::View;
use latlab_lab::units::format_duration;
use latlab_stats::{Quantile, Summary};
use serde::{Deserialize, Serialize};

use super::{Shard, Study, StudyError, StudyKind};

mod analysis;
mod conclusions;
mod figures;
pub mod report;
mod run;
mod tables;
pub mod target;
pub mod target_report;

/// `latlab study game-server` as a [`Study`]: [`Study::run`] measures every point into
/// `options.out`'s `points/` folder, then writes Table I, the figures, the flood table and
/// `report.md` from them.
#[derive(Clone, Copy, Debug)]
pub struct GameServerStudy;

impl Study for GameServerStudy {
    const KIND: StudyKind = StudyKind::GameServer;
    const POINT_PREFIXES: &'static [&'static str] = &["sweep", "table", "flood", target::PREFIX];
    type Options = StudyOptions;

    fn folder(options: &StudyOptions) -> (&Path, Shard) {
        (&options.out, options.shard)
    }

    fn measure(
        options: &StudyOptions,
        stop: &Stop,
        progress: &mut dyn View,
    ) -> Result<String, StudyError> {
        match &options.target {
            Some(target) => target::measure_all(options, target, stop, progress),
            None => run::measure_all(options, stop, progress),
        }
    }

    fn draw(dir: &Path, topology: &str) -> Result<PathBuf, StudyError> {
        if target_report::holds_target_points(dir) {
            return target_report::write(dir, topology);
        }
        report::write(dir, topology)
    }
}

/// The percentiles of Table I (and of every point's latency summaries).
pub const QUANTILES: [Quantile; 4] = [Quantile::P50, Quantile::P95, Quantile::P99, Quantile::P99_9];

/// The Linux default receive buffer the paper calls "default" (208 KiB).
pub const DEFAULT_RCVBUF: usize = 212_992;
/// Copy loss above which a load counts as the first drop.
pub const DROP_THRESHOLD: f64 = 0.05;
/// Copy loss at or below which a load counts as lossless (Fig. 4).
pub const LOSSLESS_THRESHOLD: f64 = 0.001;

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
    /// This job's share of the points (`--shard I/N`; the whole study by default).
    pub shard: Shard,
    /// Use namespaces when possible.
    pub namespaces: bool,
    /// Emulated work per packet, TSC cycles.
    pub work_cycles: u64,
    /// UDP payload bytes (the paper: 128).
    pub payload_len: usize,
    /// Run the flood scenario.
    pub flood: bool,
    /// The measuring client plays this traffic (a game's model or a capture's stream) instead
    /// of constant-rate probes of `payload_len` bytes: its sizes, and its gaps paced to each
    /// point's load.
    pub traffic: Option<ClientTraffic>,
    /// Measure this server instead of latlab's own (`--target`, `--protocol`): only the
    /// offered load varies ([`target`]).
    pub target: Option<target::TargetOptions>,
}

/// A game's traffic for the measuring client (`--model`, `--trace`).
#[derive(Clone, Debug, PartialEq)]
pub struct ClientTraffic {
    /// What it is called in the results: the model's text form, or the capture's stream.
    pub name: String,
    /// Its sizes and gaps at their own pace.
    pub traffic: latlab_probe::Traffic,
}

impl ClientTraffic {
    /// A game's traffic model, named by its text form.
    pub fn model(model: latlab_probe::model::TrafficModel) -> ClientTraffic {
        ClientTraffic {
            name: model.to_string(),
            traffic: latlab_probe::Traffic::Model(model),
        }
    }

    /// A capture's stream, as `trace::replay` read it.
    pub fn trace(replay: latlab_lab::trace::TraceReplay) -> ClientTraffic {
        ClientTraffic {
            name: replay.name,
            traffic: latlab_probe::Traffic::Trace(replay.messages),
        }
    }

    /// The traffic paced to `load` messages per second on average (its gaps scaled by its
    /// own rate ÷ `load`; its sizes as they are).
    pub fn at_load(
        &self,
        load: f64,
    ) -> Result<latlab_probe::Traffic, latlab_probe::model::ModelError> {
        self.traffic.paced(self.speed_at(load))
    }

    /// How many times its own pace the traffic runs at `load`.
    pub fn speed_at(&self, load: f64) -> f64 {
        load / self.traffic.rate_pps()
    }

    /// What a point at `load` played: the name and the pace, `NAME*SPEED` (for a model, the
    /// text form `--model` reads back).
    pub fn name_at(&self, load: f64) -> String {
        format!("{}*{:.4}", self.name, self.speed_at(load))
    }
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
            shard: Shard::WHOLE,
            namespaces: true,
            work_cycles: 150,
            payload_len: 128,
            flood: true,
            traffic: None,
            target: None,
        }
    }

    /// The options that shape every point and are not part of a point's key, as
    /// `study.json` stores them: `--resume` refuses a folder measured with other values.
    pub fn parameters(&self) -> BTreeMap<String, String> {
        let mut parameters = BTreeMap::from([
            ("--duration".to_string(), format_duration(self.duration)),
            ("--work-cycles".to_string(), self.work_cycles.to_string()),
            ("payload bytes".to_string(), self.payload_len.to_string()),
        ]);
        if let Some(target) = &self.target {
            parameters.insert("--target".to_string(), target.addr.to_string());
            parameters.insert("--protocol".to_string(), target.protocol_name.clone());
            parameters.remove("--work-cycles");
            if !target.flags.is_empty() {
                parameters.insert("protocol flags".to_string(), target.flags.clone());
            }
            if let Some(link) = &target.link {
                parameters.insert("--link".to_string(), link.clone());
            }
        }
        if let Some(traffic) = &self.traffic {
            parameters.insert("traffic".to_string(), traffic.name.clone());
        }
        parameters
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
    /// The server's counters. Flood points add `from_flooder` (datagrams the server's loop
    /// received from the flooding client) and, over xdp with the rate limit on,
    /// `xdp_rate_limited` (the flooder's datagrams the XDP program dropped).
    pub server: BTreeMap<String, u64>,
    /// Flood packets the flooding client sent (flood points; absent in older points).
    #[serde(default)]
    pub flood_sent: Option<u64>,
    /// Probes the measuring client could not send to the server, by cause (the names of
    /// `send_failed` in `--json`; empty in older points).
    #[serde(default)]
    pub send_failed: BTreeMap<String, u64>,
    /// Flood packets the flooding client could not send to the server, by cause (flood
    /// points).
    #[serde(default)]
    pub flood_send_failed: BTreeMap<String, u64>,
    /// The measuring client's traffic at this point's pace (`--model`, `--trace`:
    /// `NAME*SPEED`); absent for constant-rate probes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic: Option<String>,
    /// Messages of that traffic smaller than the probe header, sent at the header's size.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub raised: u64,
    /// The host's stalls over the point: the server's loop (its turns that handled no packet,
    /// and a sampler on its CPU while it blocks) and the clients' loop together; absent in
    /// older points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_stalls: Option<latlab_stats::stalls::HostStalls>,
    /// The copies lost, the warm-up's included, by cause ([`latlab_lab::losses`]): the
    /// clients' sockets, the path, the server's socket, the server, unanswered; absent in
    /// older points.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lost_by_cause: Option<latlab_lab::losses::LostByCause>,
}

/// The server core's counters as a point stores them, by name.
fn server_counts(c: &latlab_game::ServerCounters) -> BTreeMap<String, u64> {
    [
        ("received", c.received),
        ("game_packets", c.game_packets),
        ("copies", c.copies),
        ("joins", c.joins),
        ("malformed", c.malformed),
        ("oversized", c.oversized),
        ("unknown_sender", c.unknown_sender),
        ("bad_cookie", c.bad_cookie),
        ("expired", c.expired),
        ("table_full", c.table_full),
        ("rate_limited", c.rate_limited),
        ("short_join", c.short_join),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Datagrams not sent, by cause, as a point stores them: every cause by its `--json` name,
/// zeros included.
fn failures_map(failed: &latlab_io::port::SendFailures) -> BTreeMap<String, u64> {
    failed
        .iter()
        .map(|(failure, n)| (failure.name().to_string(), n))
        .collect()
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

fn key(phase: &str, io: &str, clients: u32, rcvbuf: usize, load: f64) -> String {
    format!(
        "{phase}-{io}-c{clients}-b{}k-{}pps",
        rcvbuf / 1024,
        load.round() as u64
    )
}

#[cfg(test)]
pub(crate) mod tests;
