//! `latlab gen --ui`: the run's live board.
//!
//! The generator's progress reports ([`Progress`], with [`latlab_probe::Live`] when the run
//! was asked for it) are handed to a [`GenBoard`] on the command's thread; the page's server
//! reads it on its own. Each report brings the intervals closed since the last (one a second),
//! which the board adds to its running histogram: the page's percentiles (p50 … p99.99, each
//! with its 95% interval, or "too few samples" as the count allows) and its CCDF are of every
//! answer so far, and its time series is one point per interval. After the run the board holds
//! the run's own summary and the files it wrote, and the page keeps showing them.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use latlab_probe::Progress;
use latlab_stats::{ccdf, point_rank, Estimate, LatencyHistogram, Quantile, Summary};
use serde_json::{json, Value};

use crate::server::{Reply, UiRequest};

/// Points of the time series kept: the last five minutes at one a second.
pub const SERIES_POINTS: usize = 300;

/// The percentiles the page shows.
const SHOWN: [Quantile; 6] = [
    Quantile::P50,
    Quantile::P90,
    Quantile::P99,
    Quantile::P99_9,
    Quantile::P99_99,
    Quantile::P99_999,
];

/// Most CCDF points sent to the page (thinned evenly in rank order beyond that).
const CCDF_POINTS: usize = 400;

/// What the page of a generator run shows, shared by the run and the page's server.
#[derive(Debug, Default)]
pub struct GenBoard {
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    label: String,
    total_ns: u64,
    progress: Option<Progress>,
    all: LatencyHistogram,
    /// One per closed interval: (end, s since the first probe; answers; p50, p99, p99.9 ns).
    series: VecDeque<[f64; 5]>,
    intervals: u64,
    finished: Option<Finished>,
}

#[derive(Debug)]
struct Finished {
    summary: Value,
    files: Vec<(String, PathBuf)>,
    error: Option<String>,
}

fn series_point(start_ns: u64, length_ns: u64, h: &LatencyHistogram) -> [f64; 5] {
    let at = |q: f64| {
        h.value_at_rank(point_rank(h.len(), q))
            .map_or(f64::NAN, |v| v as f64)
    };
    [
        (start_ns + length_ns) as f64 / 1e9,
        h.len() as f64 / (length_ns as f64 / 1e9),
        at(0.5),
        at(0.99),
        at(0.999),
    ]
}

impl GenBoard {
    /// An empty board.
    pub fn new() -> GenBoard {
        GenBoard::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The run starts: its label and its sending time.
    pub fn started(&self, label: &str, total_ns: u64) {
        let mut s = self.lock();
        s.label = label.to_string();
        s.total_ns = total_ns;
    }

    /// A progress report of the run: its intervals go into the running histogram.
    pub fn progress(&self, p: &Progress) {
        let mut s = self.lock();
        if let Some(live) = &p.live {
            for interval in &live.intervals {
                // Cannot fail: every latency histogram has the same bounds.
                let _ = s.all.merge(&interval.histogram);
                if !interval.histogram.is_empty() {
                    let point = series_point(
                        interval.start_offset_ns,
                        interval.duration_ns,
                        &interval.histogram,
                    );
                    s.series.push_back(point);
                    if s.series.len() > SERIES_POINTS {
                        s.series.pop_front();
                    }
                }
                s.intervals += 1;
            }
        }
        s.progress = Some(p.clone());
    }

    /// The run is over: `summary` is its `summary.json`, `latency` every answer's latency
    /// (the intervals the last progress report had not brought included: the page's
    /// percentiles and CCDF become the run's own), `files` what it wrote (a name the page
    /// links to, and where it is).
    pub fn finished(
        &self,
        summary: Value,
        latency: LatencyHistogram,
        files: Vec<(String, PathBuf)>,
    ) {
        let mut s = self.lock();
        s.all = latency;
        if let Some(p) = s.progress.as_mut() {
            p.elapsed_ns = p.total_ns;
            p.sent = summary["sent"].as_u64().unwrap_or(p.sent);
            p.received = summary["received"].as_u64().unwrap_or(p.received);
            if let Some(live) = p.live.as_mut() {
                live.reordered = summary["reordered"].as_u64().unwrap_or(live.reordered);
                live.duplicated = summary["duplicated"].as_u64().unwrap_or(live.duplicated);
            }
        }
        s.finished = Some(Finished {
            summary,
            files,
            error: None,
        });
    }

    /// The run ended with an error, which the page shows.
    pub fn failed(&self, error: &str) {
        self.lock().finished = Some(Finished {
            summary: Value::Null,
            files: Vec::new(),
            error: Some(error.to_string()),
        });
    }

    /// What the page reads: `GET /api/state`, and `GET /api/file?name=…` for a written file.
    pub fn handle(&self, request: &UiRequest) -> Reply {
        match (request.method.as_str(), request.path.as_str()) {
            ("GET", "/api/state") => Reply::json(200, &self.state_json()),
            ("GET", "/api/file") => self.file(request.query("name").unwrap_or_default()),
            (_, "/api/state" | "/api/file") => {
                Reply::text(405, format!("{} is not allowed here", request.method))
            }
            (_, path) => Reply::not_found(path),
        }
    }

    fn file(&self, name: &str) -> Reply {
        let path = {
            let s = self.lock();
            let files = s.finished.as_ref().map(|f| f.files.as_slice());
            files
                .unwrap_or_default()
                .iter()
                .find(|(n, _)| n == name)
                .map(|(_, p)| p.clone())
        };
        let Some(path) = path else {
            return Reply::text(404, format!("{name:?}: not a file this run wrote"));
        };
        let content_type = match path.extension().and_then(|e| e.to_str()) {
            Some("json") => "application/json",
            Some("svg") => "image/svg+xml",
            Some("csv" | "txt" | "hlog" | "xml") => "text/plain; charset=utf-8",
            _ => "application/octet-stream",
        };
        match std::fs::read(&path) {
            Ok(body) => Reply {
                status: 200,
                content_type,
                body,
            },
            Err(e) => Reply::text(500, format!("{}: {e}", path.display())),
        }
    }

    /// The board as the page reads it.
    pub fn state_json(&self) -> Value {
        let s = self.lock();
        let summary = Summary::with_quantiles(&s.all, &SHOWN);
        let percentiles: Vec<Value> = summary
            .percentiles
            .iter()
            .map(|p| match p.estimate {
                Estimate::Value {
                    value_ns,
                    ci_low_ns,
                    ci_high_ns,
                } => json!({
                    "label": p.quantile.label,
                    "value_ns": value_ns,
                    "low_ns": ci_low_ns,
                    "high_ns": ci_high_ns,
                }),
                Estimate::TooFewSamples { samples, needed } => json!({
                    "label": p.quantile.label,
                    "samples": samples,
                    "needed": needed,
                }),
            })
            .collect();
        let points = ccdf(&s.all);
        let step = points.len().div_ceil(CCDF_POINTS).max(1);
        let mut shown: Vec<Value> = points
            .iter()
            .step_by(step)
            .map(|p| json!([p.latency_ns, p.fraction_above]))
            .collect();
        if let Some(last) = points.last().filter(|_| points.len() % step != 1) {
            shown.push(json!([last.latency_ns, last.fraction_above]));
        }
        let progress = s.progress.as_ref();
        let live = progress.and_then(|p| p.live.as_ref());
        json!({
            "label": s.label,
            "total_s": s.total_ns as f64 / 1e9,
            "elapsed_s": progress.map_or(0.0, |p| p.elapsed_ns as f64 / 1e9),
            "sent": progress.map_or(0, |p| p.sent),
            "received": progress.map_or(0, |p| p.received),
            "reordered": live.map_or(0, |l| l.reordered),
            "duplicated": live.map_or(0, |l| l.duplicated),
            "not_answers": live.map_or(0, |l| l.not_answers),
            "send_lag_p99_ns": live.and_then(|l| l.send_lag_p99_max).map(|(p, _)| p),
            "send_lag_max_ns": live.and_then(|l| l.send_lag_p99_max).map(|(_, m)| m),
            "samples": s.all.len(),
            "min_ns": summary.min_ns,
            "max_ns": summary.max_ns,
            "percentiles": percentiles,
            "ccdf": shown,
            "series": s.series.iter().map(|p| json!(p.map(finite))).collect::<Vec<_>>(),
            "intervals": s.intervals,
            "done": s.finished.is_some(),
            "final": s.finished.as_ref().map(|f| &f.summary),
            "error": s.finished.as_ref().and_then(|f| f.error.as_deref()),
            "files": s.finished.as_ref().map_or(Vec::new(), |f| {
                f.files.iter().map(|(n, _)| n.clone()).collect()
            }),
        })
    }
}

/// A number JSON can carry (NaN, for an empty interval's percentile, as null).
fn finite(x: f64) -> Value {
    if x.is_finite() {
        json!(x)
    } else {
        Value::Null
    }
}

#[cfg(test)]
mod tests;
