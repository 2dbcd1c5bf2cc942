//! The one error type of every study and of `latlab report`.

use std::io;
use std::path::PathBuf;

use crate::measure::MeasureError;
use crate::topology::TopologyError;

/// What can stop a study, or the redrawing of a results folder.
#[derive(Debug, thiserror::Error)]
pub enum StudyError {
    /// The lab's namespaces or veth pairs could not be built.
    #[error("building the lab: {0}")]
    Topology(#[from] TopologyError),
    /// A measurement inside the study failed (unreachable target, bad probe settings).
    #[error(transparent)]
    Measure(#[from] MeasureError),
    /// A socket, thread or command of the lab failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A file of the results folder could not be read or written.
    #[error("{}: {source}", path.display())]
    File {
        /// The file at fault.
        path: PathBuf,
        /// The system's error.
        source: io::Error,
    },
    /// A file of the results folder is not the JSON latlab wrote there.
    #[error("{}: {source}", path.display())]
    Json {
        /// The file at fault.
        path: PathBuf,
        /// What did not parse.
        source: serde_json::Error,
    },
    /// A file of the results folder does not hold what latlab writes there (a CCDF that does
    /// not parse).
    #[error("{}: {reason}", path.display())]
    Data {
        /// The file at fault.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// A figure could not be drawn.
    #[error("{file}: {reason}")]
    Figure {
        /// The figure's file name.
        file: String,
        /// What plotters said.
        reason: String,
    },
    /// The results folder exists and `--resume` was not given (a study that can resume).
    #[error(
        "results folder {} exists already: pass --resume to continue it, or pick another --out",
        .0.display()
    )]
    Exists(PathBuf),
    /// `--resume` was given a folder whose points were measured with other parameters, or
    /// by another study: the message names the difference.
    #[error("--resume: {0}")]
    Resume(String),
    /// The results folder exists (a study that cannot resume).
    #[error("results folder {} exists already: pick another --out", .0.display())]
    Taken(PathBuf),
    /// `latlab report` or `latlab check` was given a folder that is not there.
    #[error("{}: does not exist", .0.display())]
    NoFolder(PathBuf),
    /// `latlab report` was given a folder that no latlab command wrote.
    #[error(
        "{}: not a latlab results folder (no study.json, summary.json or points/ of a study)",
        .0.display()
    )]
    UnknownFolder(PathBuf),
    /// `latlab report --plot` was given a study folder, which has no CCDF runs.
    #[error("--plot: {} is a {kind} study; --plot draws the CCDF of a gen or demo folder", dir.display())]
    PlotOfStudy {
        /// The folder.
        dir: PathBuf,
        /// Its kind of study.
        kind: String,
    },
}

impl StudyError {
    /// Whether the fault is in what the study was given (a `--resume` that does not fit its
    /// folder), not in what happened while it ran: the command line's exit code 2.
    pub fn is_usage(&self) -> bool {
        matches!(self, StudyError::Resume(_) | StudyError::NoFolder(_))
    }

    /// A file error naming `path`.
    pub fn file(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> StudyError {
        let path = path.into();
        move |source| StudyError::File { path, source }
    }
}
