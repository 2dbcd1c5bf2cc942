//! The errors of commands and measurements, below everything that returns them: a
//! [`CommandError`] names the flag or file at fault and carries a [`MeasureError`] (whose
//! probe-configuration errors carry the flag of the option, not the field), and
//! [`check_writable`] refuses a result path before a run rather than after it.

use std::io;
use std::net::SocketAddr;
use std::path::Path;

/// Errors of a command, each naming the flag or file at fault.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// A flag's value is out of range, or flags do not go together.
    #[error("{0}")]
    Options(String),
    /// What the command was given cannot be used at all: a configuration or schedule file or
    /// a value in one, or flags that contradict each other (the same interface twice). The
    /// command line exits with 2 for it, as for a flag it cannot parse ([`is_usage`]).
    ///
    /// [`is_usage`]: CommandError::is_usage
    #[error("{0}")]
    Usage(String),
    /// A socket, interface or CPU named by a flag could not be had.
    #[error("{context}")]
    Setup {
        /// The flag and its value.
        context: String,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// The engine failed while running.
    #[error("{engine}")]
    Run {
        /// Which engine.
        engine: &'static str,
        /// The system's error.
        #[source]
        source: io::Error,
    },
    /// A measurement failed.
    #[error(transparent)]
    Measure(#[from] MeasureError),
    /// A results file could not be written.
    #[error(transparent)]
    Io(#[from] io::Error),
}

impl CommandError {
    /// Whether the fault is in what the command was given, not in what happened while it ran:
    /// the command line's exit code 2.
    pub fn is_usage(&self) -> bool {
        matches!(self, CommandError::Usage(_))
    }

    /// A [`CommandError::Setup`] maker for `map_err`: `context` names the flag and its value.
    pub fn setup(context: impl Into<String>) -> impl FnOnce(io::Error) -> CommandError {
        let context = context.into();
        move |source| CommandError::Setup { context, source }
    }
}

/// Errors of a measurement.
#[derive(Debug, thiserror::Error)]
pub enum MeasureError {
    /// Nothing answered at the target.
    #[error("--target {target}: {reason}")]
    Unreachable {
        /// The target.
        target: SocketAddr,
        /// What happened.
        reason: String,
    },
    /// A probe configuration value is out of range: the probe core's requirement, after the
    /// flag of the option that set the value (`--size`, `--flows`; see
    /// [`crate::measure::GenOptions::checked_probe_config`]) where the core names its field.
    #[error("{flag} {}", .source.requirement())]
    Config {
        /// The flag of the option that set the value.
        flag: &'static str,
        /// The probe core's error.
        source: latlab_probe::Error,
    },
    /// A socket or thread call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The system's error.
        source: io::Error,
    },
}

/// Fails when a file cannot be written at `path`, so a run does not end with nowhere to put
/// its result: the folder must exist, and a file must be creatable in it (a temporary one,
/// removed at once; `path` itself is left as it is).
pub fn check_writable(path: &Path) -> Result<(), CommandError> {
    let parent = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if !parent.is_dir() {
        return Err(CommandError::Options(format!(
            "{}: folder {} does not exist",
            path.display(),
            parent.display()
        )));
    }
    if path.is_dir() {
        return Err(CommandError::Options(format!(
            "{}: is a folder, not a file",
            path.display()
        )));
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let probe = parent.join(format!(".{name}.check-{}", std::process::id()));
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        Ok(file) => {
            drop(file);
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(CommandError::Options(format!(
            "{}: cannot write in folder {}: {e}",
            path.display(),
            parent.display()
        ))),
    }
}
