//! `latlab merge DIR… --out DIR`: the runs of several generator hosts made one, exactly.
//!
//! Each folder is one `gen --out` run (a `summary.json` and the whole-run histograms of
//! [`HISTOGRAMS`]). HdrHistogram merges are exact, so the merged percentiles and their
//! confidence intervals are those of every sample of every run, as if one generator had sent
//! them all; counts add up, and rates add up (the hosts sent at the same time). The merged
//! `summary.json` lists the runs it was made of (folder, host, run id, start) under
//! `merged_from`, and says `clock: shared` only when every run did.
//!
//! Folders that cannot be merged are refused before anything is written, naming the folder:
//! not a `gen` run, written by another latlab version, or written before runs kept their
//! histograms.
//!
//! The merged folder has the files of a `gen --out` run (`summary.json`, `summary.txt`,
//! `latency.hlog` with every interval of every run on one time axis, `ccdf.csv`, `ccdf.svg`,
//! [`HISTOGRAMS`], and the one-way files when the clock is shared), so `latlab report` and a
//! further `latlab merge` read it as any other run.

use std::fs;
use std::path::{Path, PathBuf};

use latlab_stats::hlog::{read_hlog, HlogWriter};
use latlab_stats::{LatencyHistogram, Summary};

use crate::results::{
    ccdf_csv, histograms_bytes, MergedRun, ResultsDir, RunHistograms, RunSummary, HISTOGRAMS,
};

/// What `latlab merge` was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MergeOptions {
    /// The run folders, at least two.
    pub dirs: Vec<PathBuf>,
    /// The merged folder, which must not exist yet.
    pub out: PathBuf,
}

/// Why runs could not be merged; each names the folder at fault.
#[derive(Debug, thiserror::Error)]
pub enum MergeError {
    /// Fewer than two folders.
    #[error("latlab merge needs at least two run folders, got {0}")]
    TooFew(usize),
    /// A folder is not a `gen --out` run.
    #[error("{0}: not a run folder of `latlab gen --out` (no summary.json of one run)")]
    NotARun(PathBuf),
    /// A folder's files do not read.
    #[error("{dir}: {reason}")]
    Unreadable {
        /// The folder.
        dir: PathBuf,
        /// What is wrong, naming the file.
        reason: String,
    },
    /// A folder was written by another latlab version than the first one.
    #[error(
        "{dir}: written by latlab {found}, but {first} was written by latlab {expected}: merge runs of one version"
    )]
    Version {
        /// The folder at fault.
        dir: PathBuf,
        /// Its version.
        found: String,
        /// The first folder.
        first: PathBuf,
        /// The first folder's version.
        expected: String,
    },
    /// A folder has no whole-run histograms.
    #[error(
        "{0}: has no {HISTOGRAMS} (written by a latlab that did not keep whole-run histograms): it cannot be merged exactly"
    )]
    NoHistograms(PathBuf),
    /// The same run given twice.
    #[error("{dir}: the same run (run id {run_id}) as {first}")]
    SameRun {
        /// The second folder.
        dir: PathBuf,
        /// The folder given first.
        first: PathBuf,
        /// The run id both carry.
        run_id: u32,
    },
    /// Writing the merged folder failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl MergeError {
    /// Whether the fault is in the folders given (the command line's exit code 2), not in
    /// writing the result.
    pub fn is_usage(&self) -> bool {
        !matches!(self, MergeError::Io(_))
    }
}

/// One run folder read back.
#[derive(Debug)]
struct Run {
    dir: PathBuf,
    summary: RunSummary,
    histograms: RunHistograms,
    /// Its per-second intervals: (start, Unix seconds; duration, seconds; histogram).
    intervals: Vec<(f64, f64, LatencyHistogram)>,
}

/// What a merge wrote.
#[derive(Debug)]
pub struct Merged {
    /// The merged summary.
    pub summary: RunSummary,
    /// The folder written.
    pub out: PathBuf,
}

/// Merges the runs of `options.dirs` into `options.out`.
pub fn run(options: &MergeOptions) -> Result<Merged, MergeError> {
    if options.dirs.len() < 2 {
        return Err(MergeError::TooFew(options.dirs.len()));
    }
    let runs = options
        .dirs
        .iter()
        .map(|d| load(d))
        .collect::<Result<Vec<_>, _>>()?;
    check(&runs)?;
    let (summary, histograms) = merge(&runs)?;
    let dir = ResultsDir::create(&options.out)?;
    write(&dir, &summary, &histograms, &runs)?;
    let out = dir.commit()?;
    Ok(Merged { summary, out })
}

fn load(dir: &Path) -> Result<Run, MergeError> {
    let unreadable = |reason: String| MergeError::Unreadable {
        dir: dir.to_path_buf(),
        reason,
    };
    let summary_path = dir.join("summary.json");
    if !summary_path.is_file() {
        return Err(MergeError::NotARun(dir.to_path_buf()));
    }
    let text =
        fs::read_to_string(&summary_path).map_err(|e| unreadable(format!("summary.json: {e}")))?;
    let value: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| unreadable(format!("summary.json: {e}")))?;
    if value.get("runs").is_some() || value.get("setup").is_none() {
        return Err(MergeError::NotARun(dir.to_path_buf()));
    }
    let summary: RunSummary =
        serde_json::from_value(value).map_err(|e| unreadable(format!("summary.json: {e}")))?;
    let hist_path = dir.join(HISTOGRAMS);
    if !hist_path.is_file() {
        return Err(MergeError::NoHistograms(dir.to_path_buf()));
    }
    let histograms =
        RunHistograms::read(&hist_path).map_err(|e| unreadable(format!("{HISTOGRAMS}: {e}")))?;
    let log = dir.join("latency.hlog");
    let file = fs::File::open(&log).map_err(|e| unreadable(format!("latency.hlog: {e}")))?;
    let start_s = summary.start_time_unix_ns as f64 / 1e9;
    let intervals = read_hlog(std::io::BufReader::new(file))
        .map_err(|e| unreadable(format!("latency.hlog: {e}")))?
        .into_iter()
        .map(|i| (start_s + i.start_offset_s, i.duration_s, i.histogram))
        .collect();
    Ok(Run {
        dir: dir.to_path_buf(),
        summary,
        histograms,
        intervals,
    })
}

/// Refuses runs that cannot be merged: other versions, the same run twice.
fn check(runs: &[Run]) -> Result<(), MergeError> {
    let first = &runs[0];
    for (i, run) in runs.iter().enumerate() {
        if run.summary.latlab_version != first.summary.latlab_version {
            return Err(MergeError::Version {
                dir: run.dir.clone(),
                found: run.summary.latlab_version.clone(),
                first: first.dir.clone(),
                expected: first.summary.latlab_version.clone(),
            });
        }
        if let Some(id) = run.summary.run_id {
            if let Some(earlier) = runs[..i]
                .iter()
                .find(|r| r.summary.run_id == Some(id) && r.summary.host == run.summary.host)
            {
                return Err(MergeError::SameRun {
                    dir: run.dir.clone(),
                    first: earlier.dir.clone(),
                    run_id: id,
                });
            }
        }
    }
    Ok(())
}

/// The merged summary and histograms.
fn merge(runs: &[Run]) -> Result<(RunSummary, RunHistograms), MergeError> {
    let mut h = RunHistograms::default();
    for run in runs {
        for (tag, histogram) in run.histograms.iter() {
            let slot = h
                .get_mut(tag)
                .expect("RunHistograms::iter gives its own tags");
            slot.merge(histogram).map_err(|e| MergeError::Unreadable {
                dir: run.dir.clone(),
                reason: format!("{HISTOGRAMS} ({tag}): {e}"),
            })?;
        }
    }
    let first = &runs[0].summary;
    let sum = |f: &dyn Fn(&RunSummary) -> u64| runs.iter().map(|r| f(&r.summary)).sum::<u64>();
    let mut s = first.clone();
    s.setup.label = format!("{} runs merged", runs.len());
    s.setup.dir = None;
    s.sent = sum(&|r| r.sent);
    s.received = sum(&|r| r.received);
    s.lost = sum(&|r| r.lost);
    s.unsent = sum(&|r| r.unsent);
    s.loss_ratio = if s.sent == 0 {
        0.0
    } else {
        s.lost as f64 / s.sent as f64
    };
    s.reordered = sum(&|r| r.reordered);
    s.duplicated = sum(&|r| r.duplicated);
    s.malformed.not_a_probe = sum(&|r| r.malformed.not_a_probe);
    s.malformed.foreign_run = sum(&|r| r.malformed.foreign_run);
    s.malformed.unknown_probe = sum(&|r| r.malformed.unknown_probe);
    s.malformed.bad_time = sum(&|r| r.malformed.bad_time);
    s.warmup.sent = sum(&|r| r.warmup.sent);
    s.warmup.received = sum(&|r| r.warmup.received);
    s.send_failed.clear();
    for run in runs {
        for (cause, n) in &run.summary.send_failed {
            *s.send_failed.entry(cause.clone()).or_default() += n;
        }
    }
    s.offered_pps = runs.iter().map(|r| r.summary.offered_pps).sum();
    s.achieved_pps = runs.iter().map(|r| r.summary.achieved_pps).sum();
    if runs
        .iter()
        .any(|r| r.summary.timestamp_source != first.timestamp_source)
    {
        s.timestamp_source = "mixed".into();
    }
    s.start_time_unix_ns = runs
        .iter()
        .map(|r| r.summary.start_time_unix_ns)
        .min()
        .unwrap_or(0);
    s.stopped_early = runs.iter().any(|r| r.summary.stopped_early);
    s.latency_ns = Summary::from_histogram(&h.latency);
    s.send_lag_ns = Summary::from_histogram(&h.send_lag);
    s.latency_from_actual_send_ns = Summary::from_histogram(&h.latency_from_actual);
    s.responder_dwell_ns = Summary::from_histogram(&h.responder_dwell);
    let shared = runs
        .iter()
        .all(|r| r.summary.clock.as_deref() == Some("shared"));
    s.clock = if runs.iter().all(|r| r.summary.clock.is_none()) {
        None
    } else {
        Some(if shared { "shared" } else { "separate" }.into())
    };
    let one_way = shared && !h.forward.is_empty();
    s.forward_ns = one_way.then(|| Summary::from_histogram(&h.forward));
    s.return_ns = one_way.then(|| Summary::from_histogram(&h.reverse));
    s.one_way_impossible = sum(&|r| r.one_way_impossible);
    s.lost_by_cause =
        crate::losses::LostByCause::merged(runs.iter().map(|r| r.summary.lost_by_cause.as_ref()));
    // Each run's host stalled on its own: the merged floor has them all.
    s.host_stalls = runs
        .iter()
        .filter_map(|r| r.summary.host_stalls.as_ref())
        .fold(None, |acc: Option<latlab_stats::stalls::HostStalls>, h| {
            let mut acc = acc.unwrap_or_default();
            acc.merge(h);
            Some(acc)
        });
    s.protocol = latlab_probe::protocol::ProtocolSummary::merged(
        runs.iter().map(|r| r.summary.protocol.as_ref()),
    );
    s.host = None;
    s.run_id = None;
    s.merged_from = runs
        .iter()
        .flat_map(|r| {
            if r.summary.merged_from.is_empty() {
                vec![MergedRun {
                    dir: r.dir.display().to_string(),
                    host: r.summary.host.clone(),
                    run_id: r.summary.run_id,
                    start_time_unix_ns: r.summary.start_time_unix_ns,
                    sent: r.summary.sent,
                }]
            } else {
                r.summary.merged_from.clone()
            }
        })
        .collect();
    if !one_way {
        h.forward = LatencyHistogram::new();
        h.reverse = LatencyHistogram::new();
    }
    Ok((s, h))
}

fn write(
    dir: &ResultsDir,
    summary: &RunSummary,
    h: &RunHistograms,
    runs: &[Run],
) -> Result<(), MergeError> {
    let label = &summary.setup.label;
    dir.write(
        "summary.json",
        crate::results::summary_json(summary).as_bytes(),
    )?;
    dir.write("summary.txt", crate::table::render(&[summary]).as_bytes())?;
    dir.write(
        HISTOGRAMS,
        &histograms_bytes(h, summary.start_time_unix_ns, label)?,
    )?;
    // Every run's intervals on one time axis, from the earliest start, in time order.
    let start_s = summary.start_time_unix_ns as f64 / 1e9;
    let mut intervals: Vec<&(f64, f64, LatencyHistogram)> =
        runs.iter().flat_map(|r| &r.intervals).collect();
    intervals.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut log = HlogWriter::new(
        Vec::new(),
        start_s,
        &format!(
            "latlab {} {label}: round-trip latency in ns, the intervals of {} runs",
            env!("CARGO_PKG_VERSION"),
            runs.len()
        ),
    )
    .map_err(std::io::Error::other)?;
    for (at, duration, histogram) in intervals {
        log.write_interval((at - start_s).max(0.0), *duration, histogram, None)
            .map_err(std::io::Error::other)?;
    }
    dir.write("latency.hlog", &log.into_inner())?;
    dir.write("ccdf.csv", &ccdf_csv(&h.latency)?)?;
    let mut curves = vec![(label.clone(), latlab_stats::ccdf(&h.latency))];
    if summary.forward_ns.is_some() {
        for (name, title, histogram) in [
            ("forward", "one-way delay out", &h.forward),
            ("return", "one-way delay back", &h.reverse),
        ] {
            dir.write(&format!("{name}_ccdf.csv"), &ccdf_csv(histogram)?)?;
            curves.push((title.to_string(), latlab_stats::ccdf(histogram)));
        }
    }
    // Each line says what it is when one-way delays are drawn beside the round trips (the
    // title names the run).
    let axis = if curves.len() > 1 {
        curves[0].0 = "round trip".to_string();
        crate::plot::ONE_WAY_TOO_AXIS
    } else {
        crate::plot::ROUND_TRIP_AXIS
    };
    let svg = crate::plot::ccdf_svg(&format!("Latency CCDF, {label}"), axis, &curves)
        .map_err(std::io::Error::other)?;
    dir.write("ccdf.svg", svg.as_bytes())?;
    Ok(())
}
