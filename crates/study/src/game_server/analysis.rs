//! Reading the game-server study's points back and ordering them: series per I/O mode,
//! buffer and client count, Table I's and the flood's points, first drops and the other
//! figures the tables, figures and conclusions are drawn from.
//!
//! Percentiles (p95 included) come from the point's JSON summary, which keeps every
//! percentile it was written with; the `.hlog` beside it gives Figure 3 its whole histogram.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use latlab_stats::{Estimate, LatencyHistogram, Quantile};
use serde::Deserialize;

use super::{Point, DEFAULT_RCVBUF, DROP_THRESHOLD, LOSSLESS_THRESHOLD};
use crate::{points, StudyError};

// ---------------------------------------------------------------------------------------------
// Loading

/// One point read back from its files.
#[derive(Debug)]
pub(super) struct Loaded {
    /// File stem, the point's key.
    pub(super) key: String,
    pub(super) point: Point,
    /// The histogram from the `.hlog`, when there is one that reads.
    pub(super) hist: Option<LatencyHistogram>,
}

#[derive(Debug, Default)]
pub(super) struct LoadedAll {
    pub(super) points: Vec<Loaded>,
    /// `file: reason` for files that were not used (or only partly).
    pub(super) skipped: Vec<String>,
    /// The points folder is not there at all.
    pub(super) no_folder: bool,
}

/// Reads every `points/*.json` (and the `.hlog` beside each) of the results folder `out`.
pub(super) fn load_points(out: &Path) -> Result<LoadedAll, StudyError> {
    let files = points::load(out)?;
    let mut all = LoadedAll {
        no_folder: files.no_folder,
        ..LoadedAll::default()
    };
    for f in files.files {
        let (file, key) = (f.file.clone(), f.key.clone());
        let parsed = f
            .text
            .clone()
            .and_then(|text| {
                serde_json::from_str::<serde_json::Value>(&text).map_err(|e| e.to_string())
            })
            .and_then(|value| Point::deserialize(&value).map_err(|e| e.to_string()));
        let point = match parsed {
            Ok(p) => p,
            Err(reason) => {
                all.skipped.push(format!("{file}: {reason}"));
                continue;
            }
        };
        if !point.load_pps.is_finite() || !point.loss_ratio.is_finite() {
            all.skipped
                .push(format!("{file}: load or loss is not a finite number"));
            continue;
        }
        let hist = match f.histogram() {
            Some(Ok(h)) => Some(h),
            Some(Err(e)) => {
                all.skipped.push(format!(
                    "{key}.hlog: {e} (the point's JSON is used without it)"
                ));
                None
            }
            None => None,
        };
        all.points.push(Loaded { key, point, hist });
    }
    Ok(all)
}

/// A percentile of a point's `latency_last_ns`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Pct {
    Value(u64),
    TooFew,
    Missing,
}

impl Loaded {
    pub(super) fn pct(&self, q: &Quantile) -> Pct {
        match self.point.latency_last_ns.percentile(q.key) {
            Some(p) => match p.estimate {
                Estimate::Value { value_ns, .. } => Pct::Value(value_ns),
                Estimate::TooFewSamples { .. } => Pct::TooFew,
            },
            None => Pct::Missing,
        }
    }

    pub(super) fn count(&self) -> u64 {
        self.point.latency_last_ns.count
    }

    pub(super) fn mean_us(&self) -> Option<f64> {
        (self.count() > 0).then(|| self.point.latency_last_ns.mean_ns / 1000.0)
    }

    pub(super) fn std_us(&self) -> Option<f64> {
        (self.count() > 0).then(|| self.point.latency_last_ns.stddev_ns / 1000.0)
    }
}

pub(super) fn pct_us(p: Pct) -> String {
    match p {
        Pct::Value(v) => format!("{:.1}", v as f64 / 1000.0),
        Pct::TooFew => "too few samples".into(),
        Pct::Missing => "n/a".into(),
    }
}

pub(super) fn pct_ns(p: Pct) -> String {
    match p {
        Pct::Value(v) => v.to_string(),
        Pct::TooFew | Pct::Missing => String::new(),
    }
}

// ---------------------------------------------------------------------------------------------
// The study's structure

/// Sort rank of an I/O mode: socket first, then batched, then anything else by name.
pub(super) fn io_rank(io_mode: &str) -> u8 {
    match io_mode {
        "socket" => 0,
        "batched" => 1,
        _ => 2,
    }
}

pub(super) type SeriesKey = (u8, String, usize, u32);

#[derive(Debug)]
pub(super) struct Study<'a> {
    /// Sweep points per (io rank, io, rcvbuf, clients), by load.
    pub(super) sweep: BTreeMap<SeriesKey, Vec<&'a Loaded>>,
    /// Table points sorted by io, buffer, fraction.
    pub(super) table: Vec<&'a Loaded>,
    /// Flood points.
    pub(super) flood: Vec<&'a Loaded>,
    /// Points of other phases.
    pub(super) other: Vec<&'a Loaded>,
    pub(super) all: &'a [Loaded],
}

impl<'a> Study<'a> {
    pub(super) fn new(points: &'a [Loaded]) -> Study<'a> {
        let mut sweep: BTreeMap<SeriesKey, Vec<&Loaded>> = BTreeMap::new();
        let (mut table, mut flood, mut other) = (Vec::new(), Vec::new(), Vec::new());
        for l in points {
            let p = &l.point;
            match p.phase.as_str() {
                "sweep" => sweep
                    .entry((io_rank(&p.io), p.io.clone(), p.rcvbuf, p.clients))
                    .or_default()
                    .push(l),
                "table" => table.push(l),
                ph if ph.starts_with("flood") => flood.push(l),
                _ => other.push(l),
            }
        }
        for s in sweep.values_mut() {
            s.sort_by(|a, b| a.point.load_pps.total_cmp(&b.point.load_pps));
        }
        table.sort_by(|a, b| {
            let (a, b) = (&a.point, &b.point);
            (io_rank(&a.io), &a.io, a.rcvbuf, a.clients)
                .cmp(&(io_rank(&b.io), &b.io, b.rcvbuf, b.clients))
                .then(
                    a.load_fraction
                        .unwrap_or(f64::NAN)
                        .total_cmp(&b.load_fraction.unwrap_or(f64::NAN)),
                )
                .then(a.load_pps.total_cmp(&b.load_pps))
        });
        flood.sort_by(|a, b| {
            let (a, b) = (&a.point, &b.point);
            let rank = |p: &Point| {
                (
                    p.io.clone(),
                    p.rate_limit_pps.is_some(),
                    p.rcvbuf != DEFAULT_RCVBUF,
                    p.rcvbuf,
                )
            };
            rank(a).cmp(&rank(b))
        });
        Study {
            sweep,
            table,
            flood,
            other,
            all: points,
        }
    }

    /// I/O modes with sweep points, in report order.
    pub(super) fn ios(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for (_, io_mode, _, _) in self.sweep.keys() {
            if !v.contains(io_mode) {
                v.push(io_mode.clone());
            }
        }
        v
    }

    pub(super) fn buffers(&self, io_mode: &str) -> Vec<usize> {
        let set: BTreeSet<usize> = self
            .sweep
            .keys()
            .filter(|k| k.1 == io_mode)
            .map(|k| k.2)
            .collect();
        set.into_iter().collect()
    }

    pub(super) fn clients(&self, io_mode: &str) -> Vec<u32> {
        let set: BTreeSet<u32> = self
            .sweep
            .keys()
            .filter(|k| k.1 == io_mode)
            .map(|k| k.3)
            .collect();
        set.into_iter().collect()
    }

    pub(super) fn series(&self, io_mode: &str, rcvbuf: usize, clients: u32) -> &[&'a Loaded] {
        self.sweep
            .get(&(io_rank(io_mode), io_mode.to_string(), rcvbuf, clients))
            .map_or(&[], |v| v.as_slice())
    }

    /// The buffer Figure 2 shows: the default when there is one, else the largest.
    pub(super) fn fig_buffer(&self, io_mode: &str) -> Option<usize> {
        let b = self.buffers(io_mode);
        if b.contains(&DEFAULT_RCVBUF) {
            Some(DEFAULT_RCVBUF)
        } else {
            b.last().copied()
        }
    }
}

/// The lowest load with loss above [`DROP_THRESHOLD`].
pub(super) fn first_drop(series: &[&Loaded]) -> Option<f64> {
    series
        .iter()
        .find(|l| l.point.loss_ratio > DROP_THRESHOLD)
        .map(|l| l.point.load_pps)
}

pub(super) fn max_load(series: &[&Loaded]) -> f64 {
    series.iter().map(|l| l.point.load_pps).fold(0.0, f64::max)
}

/// The highest load with loss at or below [`LOSSLESS_THRESHOLD`].
pub(super) fn max_lossless(series: &[&Loaded]) -> Option<f64> {
    series
        .iter()
        .filter(|l| l.point.loss_ratio <= LOSSLESS_THRESHOLD)
        .map(|l| l.point.load_pps)
        .reduce(f64::max)
}

/// The average of the mean latencies (µs) of the points with loss above [`DROP_THRESHOLD`].
pub(super) fn overload_latency_us(series: &[&Loaded]) -> Option<f64> {
    let v: Vec<f64> = series
        .iter()
        .filter(|l| l.point.loss_ratio > DROP_THRESHOLD)
        .filter_map(|l| l.mean_us())
        .collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

pub(super) fn kpps(pps: f64) -> String {
    format!("{:.1} kpps", pps / 1000.0)
}

pub(super) fn us(v: f64) -> String {
    format!("{v:.1} µs")
}

/// Buffer size in KiB as Table I shows it.
pub(super) fn buf_label(rcvbuf: usize) -> String {
    if rcvbuf == DEFAULT_RCVBUF {
        format!("{} (default)", rcvbuf / 1024)
    } else {
        format!("{}", rcvbuf / 1024)
    }
}

/// Buffer size for prose: `64 KiB`, `208 KiB (default)`.
pub(super) fn buf_kib(rcvbuf: usize) -> String {
    if rcvbuf == DEFAULT_RCVBUF {
        format!("{} KiB (default)", rcvbuf / 1024)
    } else {
        format!("{} KiB", rcvbuf / 1024)
    }
}

pub(super) fn first_drop_text(series: &[&Loaded]) -> String {
    match first_drop(series) {
        Some(l) => kpps(l),
        None => format!("none up to {}", kpps(max_load(series))),
    }
}

pub(super) fn pct_text(fraction: f64) -> String {
    format!("{:.0}%", fraction * 100.0)
}

/// Per buffer of socket mode, smallest client count: (KiB, max lossless kpps, overload µs).
pub(super) type BufferRow = (usize, Option<f64>, Option<f64>);

pub(super) fn buffer_rows(study: &Study<'_>, io_mode: &str) -> Option<(u32, Vec<BufferRow>)> {
    let clients = *study.clients(io_mode).first()?;
    let rows = study
        .buffers(io_mode)
        .into_iter()
        .map(|b| {
            let s = study.series(io_mode, b, clients);
            (b, max_lossless(s), overload_latency_us(s))
        })
        .collect();
    Some((clients, rows))
}
