//! `latlab study bufferbloat`: a game stream sharing a rate-limited link with TCP bulk flows,
//! through tail-drop queues of several depths and through whatever queue disciplines the
//! emulator has (issue 23).
//!
//! In `client — emu — server` namespaces the client→server direction of `latlab emu` is the
//! bottleneck: `--rate` and one queue of `--queues` (a queue is only a spec handed to the
//! emulator: `tail:limit=1000` is `limit=1000`, `codel:target=5ms` is `aqm=codel target=5ms`,
//! so every discipline the emulator knows is one here). The server→client direction is not
//! limited. Per point, 0 to 4 kernel TCP connections (`cubic`, `bbr`: `TCP_CONGESTION`) send
//! from the client as fast as they can to receivers in the server, which count the goodput,
//! while latlab's generator sends the game stream (`--model`) to a reflector in the server:
//! its probes queue behind the bulk flows on the way out and come back over the unloaded
//! direction, so the round trip's growth over the unloaded point is the queue's delay. The
//! sojourn time of the bottleneck queue is read from the emulator's report when it records
//! one (the queue disciplines do; tail drop does not). Under DualPI2 the game stream is sent
//! ECT(1), L4S's identifier, so it takes the L4S queue and the bulk flows the classic one,
//! each queue's sojourn read on its own ([`Queue::game_tos`]).
//!
//! Each point goes to `points/` as soon as it is measured; the tables, figures and
//! `report.md` are drawn from those files only, so [`report::write`] (and `latlab report
//! DIR`) draws them again. The modules: `run` (the lab, the reflector, the points) with
//! `bulk` (the TCP flows); `analysis` reads the points back; `tables`, `figures` and
//! `conclusions` draw from it; [`report::write`] writes every artefact.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use latlab_emu::config::apply_spec;
use latlab_engine::Stop;
use latlab_lab::progress::View;
use latlab_lab::results::RunSummary;
use latlab_lab::units::format_duration;
use latlab_link::LinkConfig;
use latlab_probe::model::TrafficModel;
use latlab_stats::Summary;
use serde::{Deserialize, Serialize};

use super::{Shard, Study, StudyError, StudyKind};

mod analysis;
mod bulk;
mod conclusions;
mod figures;
pub mod report;
mod run;
mod tables;

/// `latlab study bufferbloat` as a [`Study`]: [`Study::run`] measures every point in
/// `client — emu — server` namespaces into `options.out`'s `points/` folder, then writes the
/// tables, the figures and `report.md` from them.
#[derive(Clone, Copy, Debug)]
pub struct BufferbloatStudy;

impl Study for BufferbloatStudy {
    const KIND: StudyKind = StudyKind::Bufferbloat;
    const POINT_PREFIXES: &'static [&'static str] = &["bloat"];
    type Options = BloatOptions;

    fn folder(options: &BloatOptions) -> (&Path, Shard) {
        (&options.out, options.shard)
    }

    fn measure(
        options: &BloatOptions,
        stop: &Stop,
        progress: &mut dyn View,
    ) -> Result<String, StudyError> {
        run::measure_all(options, stop, progress)
    }

    fn draw(dir: &Path, topology: &str) -> Result<PathBuf, StudyError> {
        report::write(dir, topology)
    }
}

/// Bulk flows per point at most: the grid (0–4) with room to spare.
pub const MAX_FLOWS: u32 = 16;

/// One queue of `--queues`: a discipline and its keys, as the emulator takes them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Queue {
    /// The discipline's name: `tail` (the emulator's own frame and byte limits) or a name the
    /// emulator takes as `aqm=NAME` (`codel`, `fq_codel`, `pie`, `dualpi2`).
    pub discipline: String,
    /// Its `key=value` pairs, in the order given (`limit=1000`, `target=5ms`).
    pub keys: Vec<String>,
}

impl Queue {
    /// `NAME` or `NAME:KEY=VALUE[:KEY=VALUE…]` (pairs also separated by spaces):
    /// `tail:limit=1000`, `codel`, `pie:target=20ms`. Whether the emulator knows the name and
    /// the keys is for [`BloatOptions::bottleneck`] to say.
    pub fn parse(text: &str) -> Result<Queue, String> {
        let mut parts = text
            .split(|c: char| c == ':' || c.is_whitespace())
            .filter(|p| !p.is_empty());
        let discipline = parts
            .next()
            .ok_or_else(|| format!("{text:?} names no queue"))?
            .to_string();
        if discipline.contains('=') {
            return Err(format!(
                "{text:?}: the queue's name comes first (tail, codel, …)"
            ));
        }
        let keys: Vec<String> = parts.map(str::to_string).collect();
        if let Some(bad) = keys.iter().find(|k| !k.contains('=')) {
            return Err(format!("{text:?}: {bad:?} is not key=value"));
        }
        Ok(Queue { discipline, keys })
    }

    /// The emulator's spec for this queue: `limit=1000` for `tail:limit=1000` (tail drop is
    /// the emulator's queue unless told otherwise), `aqm=NAME KEYS…` for the others.
    pub fn spec(&self) -> String {
        let mut words = Vec::new();
        if self.discipline != "tail" {
            words.push(format!("aqm={}", self.discipline));
        }
        words.extend(self.keys.iter().cloned());
        words.join(" ")
    }

    /// Why the study leaves this queue out with an emulator that has (or lacks:
    /// `emulator_has_aqm` false) the `aqm=` key: a discipline other than tail drop needs it.
    pub fn left_out(&self, emulator_has_aqm: bool) -> Option<String> {
        (self.discipline != "tail" && !emulator_has_aqm).then(|| {
            format!(
                "this emulator has no queue disciplines (no aqm= key), so {} cannot be had",
                self.discipline
            )
        })
    }

    /// The TOS byte of the game stream's datagrams through this queue: ECT(1) (`0x01`, RFC
    /// 9331's L4S identifier) under DualPI2, whose L4S queue it then takes; `None` (the
    /// socket's default, not ECN-capable) under the others.
    pub fn game_tos(&self) -> Option<u32> {
        (self.discipline == "dualpi2").then_some(0x01)
    }

    /// A word for point keys and file names: `tail-limit-1000`, `fq_codel`.
    pub fn slug(&self) -> String {
        self.to_string()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '.' {
                    c
                } else {
                    '-'
                }
            })
            .collect()
    }
}

impl fmt::Display for Queue {
    /// The text form [`Queue::parse`] reads: `tail:limit=1000`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.discipline)?;
        for k in &self.keys {
            write!(f, ":{k}")?;
        }
        Ok(())
    }
}

/// What the study measures.
#[derive(Clone, Debug)]
pub struct BloatOptions {
    /// Results folder.
    pub out: PathBuf,
    /// The bottleneck's rate, as the emulator's `rate=` takes it (`20mbit`).
    pub rate: String,
    /// The queues of the bottleneck.
    pub queues: Vec<Queue>,
    /// Numbers of bulk flows (0: the unloaded link, one point per queue).
    pub flows: Vec<u32>,
    /// The bulk flows' congestion controls (`TCP_CONGESTION` names).
    pub ccs: Vec<String>,
    /// The game stream's traffic.
    pub model: TrafficModel,
    /// The game stream's sending time per point.
    pub duration: Duration,
    /// How long the bulk flows run before the game stream starts (their queue builds).
    pub warmup: Duration,
    /// The path's base round trip: a delay on the server→client direction (the bulk flows'
    /// ACKs and the game's answers), so the bottleneck's queue is the rate's and its
    /// discipline's alone.
    pub delay: Duration,
    /// Continue the study in `out` (`--resume`), keeping the points it measured.
    pub resume: bool,
    /// This job's share of the points (`--shard I/N`; the whole study by default).
    pub shard: Shard,
}

impl BloatOptions {
    /// The grid: 20 Mbit/s; tail drop at 1000 and 100 frames, CoDel, FQ-CoDel, PIE,
    /// DualPI2;
    /// 0, 1 and 4 flows of cubic and bbr; a 100 Hz stream of 160-byte messages (a fast
    /// shooter's tick, and enough samples for a p99 in 10 s); 10 s per point after 3 s for
    /// the flows to fill the queue.
    pub fn new(out: PathBuf) -> BloatOptions {
        let queues = [
            "tail:limit=1000",
            "tail:limit=100",
            "codel",
            "fq_codel",
            "pie",
            "dualpi2",
        ]
        .map(|q| Queue::parse(q).expect("the default queues parse"));
        BloatOptions {
            out,
            rate: "20mbit".into(),
            queues: queues.to_vec(),
            flows: vec![0, 1, 4],
            ccs: vec!["cubic".into(), "bbr".into()],
            model: DEFAULT_MODEL.parse().expect("the default model parses"),
            duration: Duration::from_secs(10),
            warmup: Duration::from_secs(3),
            delay: Duration::ZERO,
            resume: false,
            shard: Shard::WHOLE,
        }
    }

    /// The bottleneck's link for `queue`: the spec `rate=RATE` and the queue's
    /// ([`Queue::spec`]), applied as `latlab emu --a-to-b` applies it and checked; the
    /// emulator's own error (naming the key) when it does not take it.
    pub fn bottleneck(&self, queue: &Queue) -> Result<(LinkConfig, String), String> {
        let spec = format!("rate={} {}", self.rate, queue.spec());
        let spec = spec.trim().to_string();
        let mut link = LinkConfig::default();
        apply_spec(&mut link, true, "--queues", &spec).map_err(|e| format!("{queue}: {e}"))?;
        link.validate()
            .map_err(|e| format!("--queues {queue}: {e}"))?;
        Ok((link, spec))
    }

    /// The server→client link: not limited, `delay` long.
    pub fn return_link(&self) -> LinkConfig {
        LinkConfig {
            delay_ns: self.delay.as_nanos() as u64,
            ..LinkConfig::default()
        }
    }

    /// Checks every option before anything runs: every queue's link, the flow counts, the
    /// congestion controls' names.
    pub fn check(&self) -> Result<(), String> {
        if self.queues.is_empty() {
            return Err("--queues: no queue".into());
        }
        for q in self
            .queues
            .iter()
            .filter(|q| q.left_out(emulator_has_aqm()).is_none())
        {
            self.bottleneck(q)?;
        }
        if self.flows.is_empty() || self.flows.iter().any(|&n| n > MAX_FLOWS) {
            return Err(format!("--flows: counts between 0 and {MAX_FLOWS}"));
        }
        if self.flows.iter().any(|&n| n > 0) && self.ccs.is_empty() {
            return Err("--cc: no congestion control for the bulk flows".into());
        }
        if let Some(cc) = self.ccs.iter().find(|c| c.is_empty() || c.len() > 15) {
            return Err(format!("--cc: {cc:?} is not a congestion control's name"));
        }
        if self.duration.is_zero() {
            return Err("--duration: must be above 0".into());
        }
        Ok(())
    }

    /// The points of the grid, in the order they are measured (each one a unit of
    /// `--shard`): per queue, its unloaded point, then per congestion control each number of
    /// flows.
    pub fn plan(&self) -> Vec<PlannedPoint> {
        let mut flows = self.flows.clone();
        flows.sort_unstable();
        flows.dedup();
        let mut plan = Vec::new();
        for queue in &self.queues {
            if flows.contains(&0) {
                plan.push(PlannedPoint {
                    queue: queue.clone(),
                    cc: None,
                    flows: 0,
                });
            }
            for cc in &self.ccs {
                for &n in flows.iter().filter(|&&n| n > 0) {
                    plan.push(PlannedPoint {
                        queue: queue.clone(),
                        cc: Some(cc.clone()),
                        flows: n,
                    });
                }
            }
        }
        plan
    }

    /// The options that shape the points, as `study.json` keeps them.
    pub fn parameters(&self) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("--rate".to_string(), self.rate.clone()),
            ("--model".to_string(), self.model.to_string()),
            ("--duration".to_string(), format_duration(self.duration)),
            ("--warmup".to_string(), format_duration(self.warmup)),
            ("--delay".to_string(), format_duration(self.delay)),
        ])
    }
}

/// Whether this latlab's emulator has queue disciplines: the `aqm=` key. Queues that need
/// them are left out without it (one record each, [`LeftOut`]), so the default grid runs on
/// any emulator.
pub fn emulator_has_aqm() -> bool {
    latlab_emu::knob::knob("aqm").is_some()
}

/// A queue the study could not measure, as written to `points/bloat-<queue>-left-out.json`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftOut {
    /// The queue as `--queues` named it.
    pub queue: String,
    /// Why ([`Queue::left_out`]).
    pub reason: String,
}

/// The key of a queue's [`LeftOut`] record.
pub fn left_out_key(queue: &Queue) -> String {
    format!("bloat-{}-left-out", queue.slug())
}

/// The game stream unless `--model` says otherwise.
pub const DEFAULT_MODEL: &str = "fixed:160@10ms";

/// One point of the grid, before it is measured.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlannedPoint {
    /// The bottleneck's queue.
    pub queue: Queue,
    /// The bulk flows' congestion control (`None` without flows).
    pub cc: Option<String>,
    /// Bulk flows.
    pub flows: u32,
}

impl PlannedPoint {
    /// Its key: `bloat-tail-limit-1000-0`, `bloat-codel-cubic-4`.
    pub fn key(&self) -> String {
        match &self.cc {
            Some(cc) => format!("bloat-{}-{cc}-{}", self.queue.slug(), self.flows),
            None => format!("bloat-{}-0", self.queue.slug()),
        }
    }
}

/// One bulk flow's part of a point.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BulkFlow {
    /// The congestion control the sender's socket ran (read back with `TCP_CONGESTION`).
    pub cc: String,
    /// Bytes the receiver read while the game stream was measured.
    pub bytes: u64,
    /// `bytes` over that time, bits per second.
    pub goodput_bps: f64,
    /// Segments the sender retransmitted over the connection's life (`TCP_INFO`).
    pub retransmits: u64,
    /// The sender's smoothed round-trip time at the end, µs (`TCP_INFO`).
    pub srtt_us: u32,
}

/// One measured point, as written to `points/<key>.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct BloatPoint {
    /// The queue as `--queues` named it (`tail:limit=1000`).
    pub queue: String,
    /// The client→server link's spec as the emulator took it (`rate=20mbit limit=1000`).
    pub spec: String,
    /// The bottleneck's rate, bits per second.
    pub rate_bps: u64,
    /// The bulk flows' congestion control (`None` without flows).
    pub cc: Option<String>,
    /// The delay on the server→client direction, ns (`--delay`: the path's base round trip).
    #[serde(default)]
    pub return_delay_ns: u64,
    /// The bulk flows, each with its goodput.
    pub bulk: Vec<BulkFlow>,
    /// The game stream's round trips (latency, loss, the one-way delays: one clock).
    pub game: RunSummary,
    /// The emulator's report, as `latlab emu --json` writes it (kept whole, so a part a
    /// later emulator adds, such as the queue's sojourn times, is kept).
    pub emulator: serde_json::Value,
    /// CPU time the hypervisor took from this machine while the point ran (all CPUs, ns): a
    /// guest's threads stall while their vCPU is stolen, and a tail with them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_steal_ns: Option<u64>,
}

impl BloatPoint {
    /// Bulk flows.
    pub fn flows(&self) -> usize {
        self.bulk.len()
    }

    /// The bulk flows' goodput together, bits per second.
    pub fn goodput_bps(&self) -> f64 {
        self.bulk.iter().fold(0.0, |sum, f| sum + f.goodput_bps)
    }

    /// The game stream's round-trip summary.
    pub fn latency(&self) -> &Summary {
        &self.game.latency_ns
    }

    /// The sojourn times of the client→server bottleneck queue, when the emulator recorded
    /// them: its `a_to_b.sojourn_ns` (a queue discipline other than tail drop records them;
    /// `None` otherwise, and in the report of an emulator without queue disciplines).
    pub fn sojourn(&self) -> Option<Summary> {
        let value = self.emulator.pointer("/a_to_b/sojourn_ns")?;
        serde_json::from_value::<Summary>(value.clone())
            .ok()
            .filter(|s| s.count > 0)
    }

    /// The sojourn times of one of DualPI2's queues (`l4s`, `classic`) at the bottleneck:
    /// `a_to_b.dualpi2.QUEUE.sojourn_ns`; `None` under another queue.
    pub fn dual_sojourn(&self, queue: &str) -> Option<Summary> {
        let value = self
            .emulator
            .pointer(&format!("/a_to_b/dualpi2/{queue}/sojourn_ns"))?;
        serde_json::from_value::<Summary>(value.clone())
            .ok()
            .filter(|s| s.count > 0)
    }

    /// Frames the bottleneck dropped (client→server): its queue limits and, where the
    /// emulator counts them, its queue discipline's drops.
    pub fn bottleneck_drops(&self) -> u64 {
        let Some(link) = self.emulator.pointer("/a_to_b/link") else {
            return 0;
        };
        [
            "dropped_queue_frames",
            "dropped_queue_bytes",
            "aqm_drop",
            "aqm_overflow",
        ]
        .iter()
        .filter_map(|k| link.get(*k)?.as_u64())
        .sum()
    }
}

#[cfg(test)]
pub(crate) mod tests;
