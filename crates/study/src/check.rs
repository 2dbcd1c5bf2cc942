//! `latlab check DIR --assert EXPR`: gates decided on a results folder after its run, as
//! `--assert` decides them during it ([`latlab_lab::gate`]). A `gen --out` folder is one run; a
//! `demo` folder's runs are each decided, named by their label; a `stream send --out` folder
//! is one stream (its latency one-way already); an `rfc2544` folder's frame sizes each (`ndr`,
//! `pdr`: `latlab_forwarding::rfc2544::gates`, handed in as a [`FolderCheck`]). The folder is
//! read, never changed: the verdicts go to the terminal and, with `--junit`, to a JUnit XML
//! file.

use std::path::{Path, PathBuf};

use latlab_lab::command::check_writable;
use latlab_lab::gate::{junit::junit_xml, Assertion, AssertionError, AssertionVerdict, Results};
use latlab_lab::results::{self, RunSummary};

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
            CheckError::Assertion { .. } | CheckError::Folder(StudyError::UnknownFolder(_))
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

#[cfg(test)]
mod tests {
    use latlab_stats::gate::Verdict;
    use latlab_stats::LatencyHistogram;

    use super::*;

    fn runs(labels: &[&str]) -> Vec<RunSummary> {
        let mut h = LatencyHistogram::new();
        for i in 1..=1_000u64 {
            h.record(i * 1_000);
        }
        labels
            .iter()
            .map(|l| RunSummary::synthetic(l, &h, 1_000, 1_000.0))
            .collect()
    }

    #[test]
    fn each_run_of_a_folder_is_decided_and_named_when_there_are_several() {
        let gates: Vec<Assertion> = vec!["p50<=1s".parse().unwrap(), "p99<=900us".parse().unwrap()];
        let one = decide(&gates, &runs(&["a"])).unwrap();
        assert_eq!(one.len(), 2);
        assert_eq!(one[0].run, None);
        assert_eq!(
            (one[0].verdict, one[1].verdict),
            (Verdict::Pass, Verdict::Fail)
        );
        let two = decide(&gates, &runs(&["1k", "10k"])).unwrap();
        let names: Vec<_> = two.iter().map(|v| v.run.as_deref().unwrap()).collect();
        assert_eq!(names, ["1k", "1k", "10k", "10k"]);
    }

    #[test]
    fn one_way_gates_need_every_run_to_have_shared_a_clock() {
        let gates: Vec<Assertion> = vec!["forward.p50<=1s".parse().unwrap()];
        let mut both = runs(&["a", "b"]);
        both[0].clock = Some("shared".into());
        assert!(decide(&gates, &both).is_err());
        both[1].clock = Some("shared".into());
        assert!(decide(&gates, &both).is_ok());
    }
}
