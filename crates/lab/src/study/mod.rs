//! The study kit: what every study shares, and the studies.
//!
//! A study measures a grid of points in a lab it builds, writes each point to its results
//! folder as soon as it is measured, and then draws its tables, figures and `report.md` from
//! those files only. The kit gives every study:
//!
//! - one error type, [`StudyError`], whose messages name the file or option at fault;
//! - one progress trait, [`StudyProgress`], that the CLI draws as a progress bar;
//! - one points folder, [`points::PointsDir`]: each point a JSON record (plus a `.hlog` of its
//!   latency histogram when it has one), written whole or not at all, read back by `--resume`
//!   and by the report;
//! - one marker, [`StudyFile`] (`study.json`), that says which study wrote a folder, so
//!   `latlab report DIR` ([`crate::report::redraw`]) can draw it again.
//!
//! Each study lives in a folder of its own: `run` (the lab and the measurements; writes the
//! points), `analysis` (reads them back), `tables`, `figures` and `report` (draw from the
//! analysis). The run side and the report side meet only in the study's point types.
//!
//! ```no_run
//! use latlab_engine::Stop;
//! use latlab_lab::study::{game_server, progress::Silent};
//!
//! let options = game_server::StudyOptions::new("latlab-results/game-server".into());
//! let report = game_server::run(&options, &Stop::new(), &mut Silent)?;
//! println!("{}", report.report.display());
//! # Ok::<(), latlab_lab::study::StudyError>(())
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::results::write_atomic;

pub mod emulator;
pub mod error;
pub mod game_server;
pub mod points;
pub mod progress;

pub use error::StudyError;
pub use progress::StudyProgress;

/// What a finished study wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StudyReport {
    /// The results folder.
    pub out: PathBuf,
    /// Its `report.md`.
    pub report: PathBuf,
}

/// Which study wrote a results folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StudyKind {
    /// `latlab study game-server`.
    GameServer,
    /// `latlab study emulator`.
    Emulator,
}

impl StudyKind {
    /// The study's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            StudyKind::GameServer => "game-server",
            StudyKind::Emulator => "emulator",
        }
    }
}

/// `study.json`: which study wrote the folder and in which lab, written when the lab is
/// built (again on `--resume`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StudyFile {
    /// The study.
    pub kind: StudyKind,
    /// The lab it ran in, as `report.md` names it.
    pub topology: String,
    /// The latlab version that wrote it.
    pub latlab_version: String,
}

impl StudyFile {
    /// The file's name in a results folder.
    pub const NAME: &'static str = "study.json";

    /// The marker of a study of `kind` run in `topology`.
    pub fn new(kind: StudyKind, topology: &str) -> StudyFile {
        StudyFile {
            kind,
            topology: topology.to_string(),
            latlab_version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }

    /// Writes `<out>/study.json`, whole or not at all.
    pub fn write(&self, out: &Path) -> Result<(), StudyError> {
        let path = out.join(Self::NAME);
        let json = serde_json::to_string_pretty(self).map_err(|source| StudyError::Json {
            path: path.clone(),
            source,
        })?;
        // write_atomic names the file in its errors.
        Ok(write_atomic(&path, format!("{json}\n").as_bytes())?)
    }

    /// Reads `<out>/study.json`; `None` when the folder has none (folders written before
    /// latlab wrote it).
    pub fn read(out: &Path) -> Result<Option<StudyFile>, StudyError> {
        let path = out.join(Self::NAME);
        let text = match fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StudyError::file(&path)(e)),
        };
        serde_json::from_str(&text)
            .map(Some)
            .map_err(|source| StudyError::Json { path, source })
    }
}
