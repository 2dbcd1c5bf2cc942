//! `latlab study transports`: reliable transports for thin game streams side by side through
//! an emulated path, after Harcsik et al., "Latency Evaluation of Networking Mechanisms for
//! Game Traffic" (NetGames '07): its grid of round-trip time × interarrival time × loss, with
//! independent and with bursty (Gilbert-Elliott) loss.
//!
//! A *cell* of the grid is one path: the emulator in the middle of `client — emu — server`
//! namespaces holds half the round trip each way and drops frames at the cell's rate each way.
//! Thin streams cost almost nothing, so every transport runs `streams` streams at once through
//! that one emulator, each with its own ports (so its own flows and its own loss draws), and
//! their latency histograms are merged exactly. Each transport of a cell is one point
//! (`points/<cell>-<transport>.json` and `.hlog`), written as soon as the cell is measured;
//! `--resume` skips cells whose points are all there, and `--shard I/N` measures a share of
//! the cells. [`report::write`] (and `latlab report DIR`) draws the tables, the figures and
//! `report.md` from the point files only.
//!
//! Latency is the application's: from a message's intended send time at the sender to its
//! delivery at the receiving application (one clock: the namespaces share the host's).
//!
//! With `--virtual` (`virtual_time`), the transports that are sans-IO (latlab's, KCP, QUIC,
//! plain UDP) run every cell in simulated time over `latlab_link::sim`'s network instead, so
//! the paper's two-hour points take seconds; a few cells ([`TransportStudyOptions::checks`])
//! are also measured in namespaces, and the report says whether the two agree within their
//! confidence intervals.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use latlab_engine::Stop;
use latlab_lab::progress::View;
use latlab_lab::units::format_duration;
use latlab_link::{LinkConfig, LossModel};
use latlab_stats::{CcdfPoint, Summary};
use serde::{Deserialize, Serialize};

use super::{Shard, Study, StudyError, StudyKind};
use latlab_stream::{TransportSpec, WireReport};

mod figures;
pub mod report;
mod run;
mod tally;
mod virtual_time;

/// `latlab study transports` as a [`Study`]: [`Study::run`] measures this job's cells into
/// `options.out`'s `points/` folder, then draws the tables, figures and `report.md` from them.
#[derive(Clone, Copy, Debug)]
pub struct TransportsStudy;

impl Study for TransportsStudy {
    const KIND: StudyKind = StudyKind::Transports;
    const POINT_PREFIXES: &'static [&'static str] = &["rtt*"];
    type Options = TransportStudyOptions;

    fn folder(options: &TransportStudyOptions) -> (&Path, Shard) {
        (&options.out, options.shard)
    }

    fn measure(
        options: &TransportStudyOptions,
        stop: &Stop,
        progress: &mut dyn View,
    ) -> Result<String, StudyError> {
        run::measure_all(options, stop, progress)
    }

    fn draw(dir: &Path, topology: &str) -> Result<PathBuf, StudyError> {
        report::write(dir, topology)
    }
}

/// The transports measured when none are named: every one `latlab stream` has, in one or two
/// of its settings, and modified TCP (reno, the thin-stream timeouts and a 10 ms minimum RTO,
/// set on its own sockets with `TCP_RTO_MIN_US`, so beside plain TCP; on a kernel without that
/// option the minimum RTO falls back to the namespace's sysctl, shared by every TCP stream),
/// and latlab's `game` policy, the one that held the transport target.
pub const DEFAULT_TRANSPORTS: [&str; 11] = [
    "udp",
    "tcp:cc=cubic",
    "tcp:cc=reno,thin",
    "tcp:cc=reno,thin,rto_min=10ms",
    "enet",
    "kcp:mode=fast",
    "quic",
    "latlab:tcp-like",
    "latlab:thin",
    "latlab:rack:rdb=600",
    "latlab:game",
];

/// Mean length of a loss burst of the bursty loss model, frames.
pub const BURST_FRAMES: f64 = 3.0;

/// How frames are lost on the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LossKind {
    /// Each frame independently.
    Random,
    /// In bursts: Gilbert-Elliott with the same mean loss, every frame lost in the bad state,
    /// none in the good one, bursts of [`BURST_FRAMES`] frames on average.
    Bursty,
}

impl LossKind {
    /// Every kind, in the order the command line lists them (its `--loss-models` values).
    pub const ALL: [LossKind; 2] = [LossKind::Random, LossKind::Bursty];

    /// The name on the command line and in keys.
    pub fn name(self) -> &'static str {
        match self {
            LossKind::Random => "random",
            LossKind::Bursty => "bursty",
        }
    }

    /// The emulator's loss model for a mean loss of `loss` (0..1).
    pub fn model(self, loss: f64) -> LossModel {
        match self {
            LossKind::Random => LossModel::Bernoulli { p: loss },
            LossKind::Bursty => {
                // Mean loss = p / (p + r) with r = 1 / burst length.
                let r = 1.0 / BURST_FRAMES;
                LossModel::GilbertElliott {
                    p: (loss * r / (1.0 - loss)).min(1.0),
                    r,
                    one_minus_h: 1.0,
                    one_minus_k: 0.0,
                }
            }
        }
    }
}

impl std::str::FromStr for LossKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LossKind::ALL
            .into_iter()
            .find(|k| k.name() == s)
            .ok_or_else(|| {
                let names = LossKind::ALL.map(LossKind::name);
                format!("{s:?}: expected {}", names.join(" or "))
            })
    }
}

/// One path of the grid.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cell {
    /// Round-trip time the emulator adds (half each way).
    pub rtt: Duration,
    /// Gap between a stream's messages.
    pub interval: Duration,
    /// Mean loss each way, 0..1.
    pub loss: f64,
    /// How the loss comes.
    pub loss_kind: LossKind,
}

impl Cell {
    /// The cell's part of its points' keys: `rtt100ms-ia100ms-loss2.5-random`.
    pub fn key(&self) -> String {
        format!(
            "rtt{}ms-ia{}ms-loss{}-{}",
            self.rtt.as_millis(),
            self.interval.as_millis(),
            self.loss * 100.0,
            self.loss_kind.name()
        )
    }

    /// The emulator's settings for one direction (`seed` apart for the two).
    pub fn link(&self, seed: u64) -> LinkConfig {
        LinkConfig {
            delay_ns: self.rtt.as_nanos() as u64 / 2,
            loss: self.loss_kind.model(self.loss),
            seed,
            ..LinkConfig::default()
        }
    }
}

/// A transport's name in a point's file name: `latlab:rack:rdb=600` → `latlab_rack_rdb600`.
pub fn transport_key(spec: &str) -> String {
    spec.chars()
        .filter_map(|c| match c {
            ':' | ',' => Some('_'),
            '=' => None,
            c => Some(c),
        })
        .collect()
}

/// What the study measures.
#[derive(Clone, Debug)]
pub struct TransportStudyOptions {
    /// Results folder (must not exist unless `resume` or a shard).
    pub out: PathBuf,
    /// Round-trip times.
    pub rtts: Vec<Duration>,
    /// Interarrival times.
    pub intervals: Vec<Duration>,
    /// Mean losses each way, 0..1.
    pub losses: Vec<f64>,
    /// Loss models.
    pub loss_kinds: Vec<LossKind>,
    /// The transports, as `latlab stream send --transport` spells them.
    pub transports: Vec<TransportSpec>,
    /// Streams of each transport at once per cell.
    pub streams: u32,
    /// Bytes per message.
    pub size: usize,
    /// How long each stream sends per cell.
    pub duration: Duration,
    /// Continue an interrupted study, keeping the cells it finished.
    pub resume: bool,
    /// This job's share of the cells.
    pub shard: Shard,
    /// Run the cells in virtual time (the transports that can), not in namespaces.
    pub virtual_time: bool,
    /// With `virtual_time`: how many cells are also measured in namespaces, to compare.
    pub checks: usize,
    /// How long each stream sends in those namespace cross-checks.
    pub check_duration: Duration,
}

impl TransportStudyOptions {
    /// The paper's grid (RTT 50/100/200 ms × interarrival 50/100/200 ms × loss 0.1/0.5/1/2.5%
    /// each way, random and bursty), 100-byte messages, every default transport with 10
    /// streams for 10 s per cell.
    pub fn new(out: PathBuf) -> TransportStudyOptions {
        let ms = Duration::from_millis;
        TransportStudyOptions {
            out,
            rtts: vec![ms(50), ms(100), ms(200)],
            intervals: vec![ms(50), ms(100), ms(200)],
            losses: vec![0.001, 0.005, 0.01, 0.025],
            loss_kinds: vec![LossKind::Random, LossKind::Bursty],
            transports: DEFAULT_TRANSPORTS
                .iter()
                .map(|t| t.parse().expect("the default transports parse"))
                .collect(),
            streams: 10,
            size: 100,
            duration: Duration::from_secs(10),
            resume: false,
            shard: Shard::WHOLE,
            virtual_time: false,
            checks: 3,
            check_duration: Duration::from_secs(20),
        }
    }

    /// The cells a virtual study also measures in namespaces: `checks` of them spread evenly
    /// over the grid (the first and the last among them), by their index in [`Self::cells`].
    pub fn check_cells(&self) -> Vec<usize> {
        let n = self.cells().len();
        if !self.virtual_time || n == 0 || self.checks == 0 {
            return Vec::new();
        }
        let k = self.checks.min(n);
        let mut picked: Vec<usize> = (0..k)
            .map(|j| if k == 1 { n - 1 } else { j * (n - 1) / (k - 1) })
            .collect();
        picked.dedup();
        picked
    }

    /// The cells, in the order they are measured.
    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = Vec::new();
        for &loss_kind in &self.loss_kinds {
            for &rtt in &self.rtts {
                for &interval in &self.intervals {
                    for &loss in &self.losses {
                        cells.push(Cell {
                            rtt,
                            interval,
                            loss,
                            loss_kind,
                        });
                    }
                }
            }
        }
        cells
    }

    /// The options that shape every point, as `study.json` keeps them: `--resume` refuses a
    /// folder measured with other values.
    pub fn parameters(&self) -> BTreeMap<String, String> {
        let mut p = BTreeMap::from([
            ("--streams".to_string(), self.streams.to_string()),
            ("--size".to_string(), self.size.to_string()),
            ("--duration".to_string(), format_duration(self.duration)),
        ]);
        if self.virtual_time {
            p.insert("--virtual".into(), "true".into());
            p.insert("--checks".into(), self.checks.to_string());
            p.insert(
                "--check-duration".into(),
                format_duration(self.check_duration),
            );
        }
        p
    }
}

/// How a point was measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// Real sockets through the emulator in `client — emu — server` namespaces.
    #[default]
    Namespaces,
    /// Simulated time over `latlab_link::sim`'s network (`--virtual`).
    Virtual,
}

/// One transport on one cell, as written to `points/<cell>-<transport>.json` (and, for a
/// virtual study's cross-check in namespaces, `points/<cell>-<transport>-check.json`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransportPoint {
    /// The transport and its options.
    pub transport: String,
    /// Real sockets in namespaces, or virtual time.
    #[serde(default)]
    pub clock: Clock,
    /// A virtual study's cross-check: the same cell measured in namespaces, compared in the
    /// report and kept out of its tables.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub check: bool,
    /// Whether it delivers every message.
    pub reliable: bool,
    /// The cell's round-trip time, ns.
    pub rtt_ns: u64,
    /// The cell's interarrival time, ns.
    pub interval_ns: u64,
    /// The cell's mean loss each way, 0..1.
    pub loss: f64,
    /// The cell's loss model.
    pub loss_kind: LossKind,
    /// Bytes per message.
    pub size: usize,
    /// Streams that ran.
    pub streams: u32,
    /// Messages sent, over all streams.
    pub sent: u64,
    /// Messages delivered.
    pub delivered: u64,
    /// `sent − delivered`.
    pub lost: u64,
    /// Streams that failed (a reliable transport that lost messages, or a run that broke
    /// off), and the first reason.
    pub failed_streams: u32,
    /// The first failure's reason.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// Application latency over all streams (merged histograms).
    pub latency_ns: Summary,
    /// Its CCDF.
    pub ccdf: Vec<CcdfPoint>,
    /// What all streams put on the wire together, against plain UDP's bytes for the same
    /// messages.
    pub wire: WireReport,
}

#[cfg(test)]
mod tests;
