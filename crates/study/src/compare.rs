//! `latlab compare BASE NEW`: two `gen` or `demo` folders side by side. Each standard
//! percentile of each run: NEW's change against BASE's with its 95 % interval (a seeded
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
use latlab_stats::{Quantile, STANDARD_PERCENTILES};

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
    /// Not a `gen` or `demo` folder (a study's, or none).
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

/// A folder's runs with their whole-run histograms, and whether it is a demo's.
struct Runs {
    folder: RunsFolder,
    histograms: Vec<RunHistograms>,
    demo: bool,
}

fn open(dir: &Path) -> Result<Runs, CompareError> {
    let refuse = |reason: String| CompareError::Folder {
        dir: dir.to_path_buf(),
        reason,
    };
    if let Some(study) = StudyFile::read(dir)? {
        return Err(refuse(format!(
            "a study's folder ({}): compare reads gen --out and demo folders",
            study.kind.name()
        )));
    }
    if !dir.join("summary.json").is_file() {
        return Err(refuse(
            "not a gen --out or demo folder (no summary.json)".into(),
        ));
    }
    let folder = RunsFolder::load(dir)?;
    let demo = folder.dirs.first().is_some_and(|d| d != dir);
    let histograms = folder
        .dirs
        .iter()
        .map(|d| {
            RunHistograms::read(&d.join(HISTOGRAMS)).map_err(|e| {
                refuse(format!(
                    "{}: {e} (written by a latlab that did not keep whole-run histograms?)",
                    d.join(HISTOGRAMS).display()
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(Runs {
        folder,
        histograms,
        demo,
    })
}

/// Refuses NEW when it is not the same kind of folder as BASE from the same latlab version,
/// or (a demo's) not with runs at the same rates.
fn check_pair(options: &CompareOptions, base: &Runs, new: &Runs) -> Result<(), CompareError> {
    let mismatch = |reason: String| CompareError::Mismatch {
        new: options.new.clone(),
        reason,
    };
    let kind = |r: &Runs| if r.demo { "demo" } else { "gen" };
    if base.demo != new.demo {
        return Err(mismatch(format!(
            "a {} folder, and BASE {} a {} folder: compare folders of one kind",
            kind(new),
            options.base.display(),
            kind(base)
        )));
    }
    let version = |r: &Runs| r.folder.runs.first().map(|s| s.latlab_version.clone());
    if version(base) != version(new) {
        return Err(mismatch(format!(
            "written by latlab {}, BASE {} by latlab {}: compare folders of one version",
            version(new).unwrap_or_default(),
            options.base.display(),
            version(base).unwrap_or_default()
        )));
    }
    let rates =
        |r: &Runs| -> Vec<u64> { r.folder.runs.iter().map(|s| s.offered_pps as u64).collect() };
    // A demo's runs are paired by rate; two gen runs may be at any rates.
    if base.demo && rates(base) != rates(new) {
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
    let several = new.folder.runs.len() > 1;
    let mut rows = Vec::new();
    let mut verdicts = Vec::new();
    for (i, (summary, histograms)) in new.folder.runs.iter().zip(&new.histograms).enumerate() {
        let run = several.then(|| summary.setup.label.clone());
        let base_latency = &base.histograms[i].latency;
        let compare = |q: Quantile| {
            compare_quantile(
                base_latency,
                &histograms.latency,
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
    for (who, runs) in [("BASE", base), ("NEW", new)] {
        for (label, points) in runs.folder.ccdf_series()? {
            series.push((format!("{who}: {label}"), points));
        }
    }
    latlab_lab::plot::ccdf_svg("latency CCDF, BASE and NEW", &series).map_err(|reason| {
        StudyError::Figure {
            file: "the CCDF plot".into(),
            reason,
        }
        .into()
    })
}

#[cfg(test)]
mod tests;
