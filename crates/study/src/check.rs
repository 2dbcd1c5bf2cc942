//! `latlab check DIR --assert EXPR`: gates decided on a results folder after its run, as
//! `--assert` decides them during it ([`latlab_lab::gate`]). A `gen --out` folder is one run; a
//! `demo` folder's runs are each decided, named by their label; a `stream send --out` folder
//! is one stream (its latency one-way already); an `rfc2544` folder's frame sizes each (`ndr`,
//! `pdr`: `latlab_forwarding::rfc2544::gates`, handed in as a [`FolderCheck`]); a study's
//! folder each point that has a latency summary, named by its key (a point whose record holds
//! a generator run, as the emulator study's and the bufferbloat study's do, is decided as that
//! run; one with only a `.hlog` on its latency, loss and achieved being inconclusive there).
//! The folder is read, never changed: the verdicts go to the terminal and, with `--junit`, to a
//! JUnit XML file.

use std::path::{Path, PathBuf};

use latlab_lab::command::check_writable;
use latlab_lab::gate::Measured;
use latlab_lab::gate::{junit::junit_xml, Assertion, AssertionError, AssertionVerdict, Results};
use latlab_lab::results::{self, RunSummary};
use latlab_stats::Summary;

use crate::report::RunsFolder;
use crate::StudyError;

/// What `latlab check` is given.
#[derive(Clone, Debug)]
pub struct CheckOptions {
    /// The results folder.
    pub dir: PathBuf,
    /// The gates.
    pub assertions: Vec<Assertion>,
    /// Write the verdicts as JUnit XML here.
    pub junit: Option<PathBuf>,
}

/// Why a check could not be made.
#[derive(Debug, thiserror::Error)]
pub enum CheckError {
    /// An assertion the folder cannot answer (a one-way delay of runs without a shared
    /// clock).
    #[error("{dir}: {source}", dir = .dir.display())]
    Assertion {
        /// The folder.
        dir: PathBuf,
        /// The assertion's refusal.
        source: AssertionError,
    },
    /// The folder is not one `check` reads (no `summary.json`), or cannot be read.
    #[error(transparent)]
    Folder(#[from] StudyError),
    /// The JUnit file cannot be written.
    #[error(transparent)]
    Output(#[from] latlab_lab::command::CommandError),
    /// Writing the JUnit file failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl CheckError {
    /// Whether the fault is in what `check` was given: the command line's exit code 2.
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            CheckError::Assertion { .. }
                | CheckError::Folder(StudyError::UnknownFolder(_) | StudyError::NoFolder(_))
        )
    }
}

/// How `check` reads a kind of folder of a crate above this one (`rfc2544`'s): the verdicts of
/// the assertions on the folder `dir`, or `None` when `dir` is not of that kind.
pub type FolderCheck = fn(&Path, &[Assertion]) -> Option<Result<Vec<AssertionVerdict>, CheckError>>;

/// Decides every assertion on every run of the folder, writes the JUnit file when asked, and
/// returns the verdicts (in the order of the runs, then of the assertions). The folder is
/// first offered to each of `others`, in order; the first that knows it decides.
pub fn run(
    options: &CheckOptions,
    others: &[FolderCheck],
) -> Result<Vec<AssertionVerdict>, CheckError> {
    if let Some(path) = &options.junit {
        check_writable(path)?;
    }
    let dir = &options.dir;
    if !dir.exists() {
        return Err(StudyError::NoFolder(dir.clone()).into());
    }
    let refused = |source| CheckError::Assertion {
        dir: dir.clone(),
        source,
    };
    let verdicts = if let Some(verdicts) = others
        .iter()
        .find_map(|check| check(dir, &options.assertions))
    {
        verdicts?
    } else if let Some(stream) = latlab_stream::send::read_folder(dir) {
        let (summary, _) = stream.map_err(|reason| StudyError::Data {
            path: dir.clone(),
            reason,
        })?;
        for a in &options.assertions {
            a.check_for(Results::Stream, true).map_err(refused)?;
        }
        options
            .assertions
            .iter()
            .map(|a| a.evaluate_measured(&summary.measured(), None))
            .collect()
    } else if dir.join("summary.json").is_file() {
        let folder = RunsFolder::load(dir)?;
        decide(&options.assertions, &folder.runs).map_err(refused)?
    } else if let Some(study) = crate::StudyFile::read(dir)? {
        let points = study_points(dir)?;
        if points.is_empty() {
            return Err(StudyError::Data {
                path: dir.clone(),
                reason: format!(
                    "{}'s points have no latency summary to gate (no generator run in a \
                     point, no .hlog beside one); gate a gen --out or demo folder instead",
                    study.kind.command()
                ),
            }
            .into());
        }
        decide_points(&options.assertions, &points).map_err(refused)?
    } else {
        return Err(StudyError::UnknownFolder(dir.clone()).into());
    };
    if let Some(path) = &options.junit {
        let xml = junit_xml(&format!("latlab check {}", dir.display()), &verdicts);
        results::write_atomic(path, xml.as_bytes())?;
    }
    Ok(verdicts)
}

/// Every assertion on every run (each named by its label when there are several), once all of
/// them are known to be answerable.
pub fn decide(
    assertions: &[Assertion],
    runs: &[RunSummary],
) -> Result<Vec<AssertionVerdict>, AssertionError> {
    let shared = runs.iter().all(|r| r.clock.as_deref() == Some("shared"));
    for a in assertions {
        a.check_for(Results::Run, shared)?;
    }
    let several = runs.len() > 1;
    Ok(runs
        .iter()
        .flat_map(|run| {
            let label = several.then_some(run.setup.label.as_str());
            assertions.iter().map(move |a| a.evaluate(run, label))
        })
        .collect())
}

/// What one point of a study measured, as far as a gate can read it.
#[derive(Debug)]
pub enum PointLatency {
    /// The point's record holds a generator run.
    Run(Box<RunSummary>),
    /// Only the latency histogram beside the point (`<key>.hlog`), summarised.
    Histogram(Box<Summary>),
}

/// The points of the study in `dir` that have a latency summary, by key (in file order): a
/// generator run in the point's record (the first object in it that reads as one), or else
/// its `.hlog`. Points with neither are left out.
pub fn study_points(dir: &Path) -> Result<Vec<(String, PointLatency)>, StudyError> {
    let files = crate::points::load(dir)?;
    let mut points = Vec::new();
    for file in &files.files {
        let text = file.text.as_ref().map_err(|reason| StudyError::Data {
            path: file.path.clone(),
            reason: reason.clone(),
        })?;
        let value: serde_json::Value =
            serde_json::from_str(text).map_err(|e| StudyError::Data {
                path: file.path.clone(),
                reason: e.to_string(),
            })?;
        if let Some(run) = run_in(&value) {
            points.push((file.key.clone(), PointLatency::Run(Box::new(run))));
        } else if let Some(h) = file.histogram() {
            let h = h.map_err(|reason| StudyError::Data {
                path: file.path.with_extension("hlog"),
                reason,
            })?;
            let summary = Summary::from_histogram(&h);
            points.push((file.key.clone(), PointLatency::Histogram(Box::new(summary))));
        }
    }
    Ok(points)
}

/// The first object of `value` (itself, then its fields, depth first) that reads as a
/// generator run.
fn run_in(value: &serde_json::Value) -> Option<RunSummary> {
    let serde_json::Value::Object(map) = value else {
        return match value {
            serde_json::Value::Array(items) => items.iter().find_map(run_in),
            _ => None,
        };
    };
    if map.contains_key("latency_ns") && map.contains_key("setup") {
        if let Ok(run) = serde_json::from_value::<RunSummary>(value.clone()) {
            return Some(run);
        }
    }
    map.values().find_map(run_in)
}

/// Every assertion on every point, each verdict named by the point's key.
pub fn decide_points(
    assertions: &[Assertion],
    points: &[(String, PointLatency)],
) -> Result<Vec<AssertionVerdict>, AssertionError> {
    let shared = points.iter().all(|(_, p)| match p {
        PointLatency::Run(run) => run.clock.as_deref() == Some("shared"),
        PointLatency::Histogram(_) => false,
    });
    for a in assertions {
        a.check_for(Results::Run, shared)?;
    }
    Ok(points
        .iter()
        .flat_map(|(key, point)| {
            assertions.iter().map(move |a| match point {
                PointLatency::Run(run) => a.evaluate(run, Some(key)),
                PointLatency::Histogram(latency) => {
                    if a.statistic.delay().is_some() {
                        let measured = Measured {
                            latency,
                            forward: None,
                            back: None,
                            sent: latency.count,
                            lost: 0,
                            achieved_pps: 0.0,
                            sent_name: "samples",
                            host_stalls: None,
                        };
                        a.evaluate_measured(&measured, Some(key))
                    } else {
                        a.verdict_without_data(
                            Some(key),
                            "this point records its latency only (its .hlog), not its loss or rate",
                        )
                    }
                }
            })
        })
        .collect())
}

#[cfg(test)]
mod tests;
