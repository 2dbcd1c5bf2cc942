//! `latlab compare BASE NEW`: two `gen`, `demo` or `stream send --out` folders side by side.
//! Each standard percentile of each run: NEW's change against BASE's with its 95 % interval (a seeded
//! bootstrap over the runs' whole-run histograms, [`latlab_stats::compare`]); with
//! `--assert 'p99<=+10%'` regression gates decided from that interval
//! ([`latlab_lab::gate::regression`]); with `--plot` both CCDFs on one plot. Folders of
//! different kinds or latlab versions are refused naming the folder at fault.

use std::path::{Path, PathBuf};

use latlab_lab::command::check_writable;
use latlab_lab::gate::junit::junit_xml;
use latlab_lab::gate::regression::{describe, Regression};
use latlab_lab::gate::AssertionVerdict;
use latlab_lab::results::{write_atomic, RunHistograms, HISTOGRAMS};
use latlab_stats::compare::{compare_quantile, Comparison};
use latlab_stats::{CcdfPoint, LatencyHistogram, Quantile, STANDARD_PERCENTILES};

use crate::report::RunsFolder;
use crate::{StudyError, StudyFile};

/// What `latlab compare` is given.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// The folder compared against.
    pub base: PathBuf,
    /// The folder compared.
    pub new: PathBuf,
    /// Regression gates.
    pub assertions: Vec<Regression>,
    /// Draw both runs' CCDFs into this SVG file.
    pub plot: Option<PathBuf>,
    /// Write the gates' verdicts as JUnit XML here.
    pub junit: Option<PathBuf>,
    /// Bootstrap replicates per percentile.
    pub draws: u32,
    /// The bootstrap's seed.
    pub seed: u64,
}

/// Why two folders cannot be compared; each names the folder at fault.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Not a `gen`, `demo` or `stream` folder (a study's, or none), or one that does not
    /// read.
    #[error("{}: {reason}", dir.display())]
    Folder {
        /// The folder.
        dir: PathBuf,
        /// What it is instead.
        reason: String,
    },
    /// The two folders do not hold the same kind of runs, or come from different versions.
    #[error("{}: {reason}", new.display())]
    Mismatch {
        /// NEW, the folder at fault.
        new: PathBuf,
        /// How it differs from BASE.
        reason: String,
    },
    /// A folder's files cannot be read.
    #[error(transparent)]
    Read(#[from] StudyError),
    /// An output cannot be written.
    #[error(transparent)]
    Output(#[from] latlab_lab::command::CommandError),
    /// Writing an output failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl CompareError {
    /// Whether the fault is in what `compare` was given: the command line's exit code 2.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            CompareError::Folder { .. } | CompareError::Mismatch { .. }
        )
    }
}

/// One percentile of one run compared.
#[derive(Clone, Debug)]
pub struct Row {
    /// The run, in folders of several (NEW's label).
    pub run: Option<String>,
    /// The percentile.
    pub quantile: Quantile,
    /// The change, or too few samples.
    pub comparison: Comparison,
}

impl Row {
    /// The terminal's line.
    pub fn line(&self) -> String {
        let text = describe(self.quantile.label, &self.comparison);
        match &self.run {
            Some(run) => format!("[{run}] {text}"),
            None => text,
        }
    }
}

/// What `compare` found; every file asked for is already written.
#[derive(Debug)]
pub struct Compared {
    /// Every percentile of every run.
    pub rows: Vec<Row>,
    /// The gates' verdicts.
    pub verdicts: Vec<AssertionVerdict>,
}

/// The kinds of folder `compare` reads, each compared only with its own kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// `gen --out`: one run.
    Gen,
    /// `demo`: a run per rate, each in a `rate-…/` folder, paired by rate.
    Demo,
    /// `stream send --out`: one stream's one-way application latency.
    Stream,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Gen => "gen",
            Kind::Demo => "demo",
            Kind::Stream => "stream",
        }
    }
}

/// One run of a folder: its name, the rate it was offered and its whole-run latency.
struct Run {
    label: String,
    offered_pps: f64,
    latency: LatencyHistogram,
}

/// A folder's runs, its kind and the latlab that wrote it.
struct Runs {
    kind: Kind,
    version: String,
    runs: Vec<Run>,
    /// Where each run's CCDF is: a gen or demo folder's `ccdf.csv` files, or a stream's
    /// summary.
    ccdf: Ccdf,
}

/// Where a folder's CCDFs are read from for `--plot`.
enum Ccdf {
    /// Each run's `ccdf.csv`.
    Files(RunsFolder),
    /// The stream's summary holds it.
    Stream(Vec<CcdfPoint>),
}

fn open(dir: &Path) -> Result<Runs, CompareError> {
    let refuse = |reason: String| CompareError::Folder {
        dir: dir.to_path_buf(),
        reason,
    };
    if let Some(study) = StudyFile::read(dir)? {
        return Err(refuse(format!(
            "a study's folder ({}): compare reads gen --out, demo and stream send --out folders",
            study.kind.name()
        )));
    }
    if let Some(stream) = latlab_stream::send::read_folder(dir) {
        let (summary, latency) = stream.map_err(refuse)?;
        return Ok(Runs {
            kind: Kind::Stream,
            version: summary.latlab_version.clone(),
            runs: vec![Run {
                label: summary.transport.clone(),
                offered_pps: summary.measured().achieved_pps,
                latency,
            }],
            ccdf: Ccdf::Stream(summary.ccdf),
        });
    }
    if !dir.join("summary.json").is_file() {
        return Err(refuse(
            "not a gen --out, demo or stream send --out folder (no summary.json or stream.json)"
                .into(),
        ));
    }
    let folder = RunsFolder::load(dir)?;
    let demo = folder.dirs.first().is_some_and(|d| d != dir);
    let runs = folder
        .runs
        .iter()
        .zip(&folder.dirs)
        .map(|(summary, d)| {
            let histograms = RunHistograms::read(&d.join(HISTOGRAMS)).map_err(|e| {
                refuse(format!(
                    "{}: {e} (written by a latlab that did not keep whole-run histograms?)",
                    d.join(HISTOGRAMS).display()
                ))
            })?;
            Ok(Run {
                label: summary.setup.label.clone(),
                offered_pps: summary.offered_pps,
                latency: histograms.latency,
            })
        })
        .collect::<Result<_, CompareError>>()?;
    Ok(Runs {
        kind: if demo { Kind::Demo } else { Kind::Gen },
        version: folder
            .runs
            .first()
            .map(|s| s.latlab_version.clone())
            .unwrap_or_default(),
        runs,
        ccdf: Ccdf::Files(folder),
    })
}

/// Refuses NEW when it is not the same kind of folder as BASE from the same latlab version,
/// or (a demo's) not with runs at the same rates.
fn check_pair(options: &CompareOptions, base: &Runs, new: &Runs) -> Result<(), CompareError> {
    let mismatch = |reason: String| CompareError::Mismatch {
        new: options.new.clone(),
        reason,
    };
    if base.kind != new.kind {
        return Err(mismatch(format!(
            "a {} folder, and BASE {} a {} folder: compare folders of one kind",
            new.kind.name(),
            options.base.display(),
            base.kind.name()
        )));
    }
    if base.version != new.version {
        return Err(mismatch(format!(
            "written by latlab {}, BASE {} by latlab {}: compare folders of one version",
            new.version,
            options.base.display(),
            base.version
        )));
    }
    let rates = |r: &Runs| -> Vec<u64> { r.runs.iter().map(|s| s.offered_pps as u64).collect() };
    // A demo's runs are paired by rate; two gen runs, or two streams, may be at any rates.
    if base.kind == Kind::Demo && rates(base) != rates(new) {
        return Err(mismatch(format!(
            "its runs are at {:?} pps, BASE's at {:?}",
            rates(new),
            rates(base)
        )));
    }
    Ok(())
}

/// Compares the folders, decides the gates and writes the plot and the JUnit file.
pub fn run(options: &CompareOptions) -> Result<Compared, CompareError> {
    for path in [&options.plot, &options.junit].into_iter().flatten() {
        check_writable(path)?;
    }
    let base = open(&options.base)?;
    let new = open(&options.new)?;
    check_pair(options, &base, &new)?;
    let several = new.runs.len() > 1;
    let mut rows = Vec::new();
    let mut verdicts = Vec::new();
    for (new_run, base_run) in new.runs.iter().zip(&base.runs) {
        let run = several.then(|| new_run.label.clone());
        let compare = |q: Quantile| {
            compare_quantile(
                &base_run.latency,
                &new_run.latency,
                q.q,
                options.draws,
                options.seed,
            )
        };
        for quantile in STANDARD_PERCENTILES {
            rows.push(Row {
                run: run.clone(),
                quantile,
                comparison: compare(quantile),
            });
        }
        for gate in &options.assertions {
            verdicts.push(gate.decide(&compare(gate.quantile), run.as_deref()));
        }
    }
    if let Some(path) = &options.plot {
        write_atomic(path, plot(&base, &new)?.as_bytes())?;
    }
    if let Some(path) = &options.junit {
        write_atomic(path, junit_xml("latlab compare", &verdicts).as_bytes())?;
    }
    Ok(Compared { rows, verdicts })
}

/// Both folders' CCDFs on one plot, BASE's and NEW's labelled so.
fn plot(base: &Runs, new: &Runs) -> Result<String, CompareError> {
    let mut series = Vec::new();
    let streams = [base, new]
        .iter()
        .any(|r| matches!(r.ccdf, Ccdf::Stream(_)));
    let axis = if streams {
        "one-way application latency (µs)"
    } else {
        latlab_lab::plot::ROUND_TRIP_AXIS
    };
    for (who, runs) in [("BASE", base), ("NEW", new)] {
        let runs_series = match &runs.ccdf {
            Ccdf::Files(folder) => folder.ccdf_series()?,
            Ccdf::Stream(points) => vec![(runs.runs[0].label.clone(), points.clone())],
        };
        for (label, points) in runs_series {
            series.push((format!("{who}: {label}"), points));
        }
    }
    latlab_lab::plot::ccdf_svg("latency CCDF, BASE and NEW", axis, &series).map_err(|reason| {
        StudyError::Figure {
            file: "the CCDF plot".into(),
            reason,
        }
        .into()
    })
}

#[cfg(test)]
mod tests;
