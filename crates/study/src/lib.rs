//! latlab-study: the studies (`game_server`, `emulator`, `timestamps`, `transports`,
//! `bufferbloat`), what every study is ([`Study`], [`registry`]) and `latlab
//! report` ([`report`]), on top of the kit in `latlab-lab` and the thin-stream transports in
//! `latlab-stream`, and `latlab check` ([`check`]) and `latlab compare` ([`compare`]), the gates
//! decided on results folders. The RFC 2544 benchmark and the forwarding study are studies of
//! this registry in `latlab-forwarding`, above this crate.
//!
//! A study measures a grid of points in a lab it builds, writes each point to its results
//! folder as soon as it is measured, and then draws its tables, figures and `report.md` from
//! those files only. The kit gives every study:
//!
//! - one error type, [`StudyError`], whose messages name the file or option at fault;
//! - one way to show progress, the kit's [`View`](latlab_lab::progress::View): a point as it starts,
//!   notes, the end; the CLI draws it as a progress bar;
//! - one points folder, [`points::PointsDir`]: each point a JSON record (plus a `.hlog` of its
//!   latency histogram when it has one), written whole or not at all, read back by `--resume`
//!   and by the report;
//! - one marker, [`StudyFile`] (`study.json`), that says which study wrote a folder, so
//!   `latlab report DIR` ([`crate::report::redraw`]) can draw it again, and with which
//!   parameters, so `--resume` never mixes points measured with different ones.
//!
//! Each study lives in a folder of its own: `run` (the lab and the measurements; writes the
//! points), `analysis` (reads them back), `tables`, `figures` and `report` (draw from the
//! analysis). The run side and the report side meet only in the study's point types.
//!
//! ```no_run
//! use latlab_engine::Stop;
//! use latlab_lab::progress::Quiet;
//! use latlab_study::{game_server, Study};
//!
//! let options = game_server::StudyOptions::new("latlab-results/game-server".into());
//! let report = game_server::GameServerStudy::run(&options, &Stop::new(), &mut Quiet)?;
//! println!("{}", report.report.display());
//! # Ok::<(), latlab_study::StudyError>(())
//! ```

#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use latlab_lab::results::write_atomic;

pub mod bufferbloat;
pub mod check;
pub mod compare;
pub mod emulator;
pub mod game_server;
pub mod registry;
pub mod report;
pub mod samples;
pub mod timestamps;
pub mod transports;

pub use error::StudyError;
pub use latlab_lab::points::{self, error, shard};
pub use registry::{Study, STUDIES};
pub use shard::Shard;

/// What a finished study wrote.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StudyReport {
    /// The results folder.
    pub out: PathBuf,
    /// Its `report.md` (not drawn yet while `pending` is not empty).
    pub report: PathBuf,
    /// With `--shard`: the shards that have not finished their share yet. The shard that
    /// finishes last draws the report; until then `latlab report` draws what is there.
    pub pending: Vec<Shard>,
    /// With `--shard`, once no shard is missing: the shard that draws the report when it is
    /// not this one (it finished at the same time, or this one ran again, and its claim in
    /// `shards/report.json` was there first); `None` when this job drew it.
    pub drawn_by: Option<Shard>,
}

impl StudyReport {
    /// After the points of `shard` are measured: marks its share done (unless the run was
    /// `stopped` before it finished) and, once no shard is missing, draws the report with
    /// `draw` unless another shard claimed it first ([`shard::claim_report`]: of shards that
    /// finish at once, one draws it). A whole study always draws what it measured.
    pub fn finish(
        out: &Path,
        shard: Shard,
        stopped: bool,
        draw: impl FnOnce() -> Result<PathBuf, StudyError>,
    ) -> Result<StudyReport, StudyError> {
        if !stopped {
            shard::mark_done(out, shard)?;
        }
        let mut pending = shard::missing(out)?;
        if stopped && !shard.is_whole() && !pending.contains(&shard) {
            pending.push(shard);
        }
        let mut drawn_by = None;
        let report = if !pending.is_empty() {
            out.join("report.md")
        } else if shard.is_whole() {
            draw()?
        } else if let Some(other) = shard::claim_report(out, shard)? {
            drawn_by = Some(other.shard());
            out.join("report.md")
        } else {
            draw().inspect_err(|_| {
                // The drawing's error is the one to report; a claim left behind only keeps
                // the next shard from drawing, and `latlab report` draws it all the same.
                let _ = shard::release_report(out);
            })?
        };
        Ok(StudyReport {
            out: out.to_path_buf(),
            report,
            pending,
            drawn_by,
        })
    }
}

/// Which study wrote a results folder.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum StudyKind {
    /// `latlab study game-server`.
    GameServer,
    /// `latlab study emulator`.
    Emulator,
    /// `latlab study timestamps`.
    Timestamps,
    /// `latlab study transports`.
    Transports,
    /// `latlab study forwarding`.
    Forwarding,
    /// `latlab rfc2544`: one DUT measured as RFC 2544 asks (the forwarding study's form for
    /// one DUT, with its own report).
    Rfc2544,
    /// `latlab study bufferbloat`.
    Bufferbloat,
}

impl StudyKind {
    /// Every kind, each with its line in [`STUDIES`] (`Forwarding` and `Rfc2544` in
    /// `latlab_forwarding::STUDIES`).
    pub const ALL: [StudyKind; 7] = [
        StudyKind::GameServer,
        StudyKind::Emulator,
        StudyKind::Timestamps,
        StudyKind::Transports,
        StudyKind::Forwarding,
        StudyKind::Rfc2544,
        StudyKind::Bufferbloat,
    ];

    /// The study's name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            StudyKind::GameServer => "game-server",
            StudyKind::Emulator => "emulator",
            StudyKind::Timestamps => "timestamps",
            StudyKind::Transports => "transports",
            StudyKind::Forwarding => "forwarding",
            StudyKind::Rfc2544 => "rfc2544",
            StudyKind::Bufferbloat => "bufferbloat",
        }
    }

    /// The command that runs it: `latlab study NAME`, or `latlab rfc2544`.
    pub fn command(self) -> String {
        match self {
            StudyKind::Rfc2544 => "latlab rfc2544".into(),
            other => format!("latlab study {}", other.name()),
        }
    }
}

/// `study.json`: which study wrote the folder, in which lab and with which parameters,
/// written when the lab is built (again on `--resume`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StudyFile {
    /// The study.
    pub kind: StudyKind,
    /// The lab it ran in, as `report.md` names it.
    pub topology: String,
    /// The latlab version that wrote it.
    pub latlab_version: String,
    /// The options that shape every point but are not part of a point's key, by the name
    /// the command line gives them (`--duration` → `2s`): `--resume` refuses a folder
    /// measured with other values ([`StudyFile::check_resume`]). Empty in folders written
    /// before latlab stored them.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parameters: BTreeMap<String, String>,
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
            parameters: BTreeMap::new(),
        }
    }

    /// The marker with the parameters that shape its points (see
    /// [`parameters`](StudyFile::parameters)).
    pub fn with_parameters(mut self, parameters: BTreeMap<String, String>) -> StudyFile {
        self.parameters = parameters;
        self
    }

    /// Before `--resume` continues `out`: refuses it when its `study.json` says it holds
    /// another study, or was measured with another value of one of `parameters` (its points
    /// would not compare with the new ones), naming the first difference. A folder without a
    /// `study.json`, or without parameters in it, is continued.
    pub fn check_resume(
        out: &Path,
        kind: StudyKind,
        parameters: &BTreeMap<String, String>,
    ) -> Result<(), StudyError> {
        let Some(before) = StudyFile::read(out)? else {
            return Ok(());
        };
        if before.kind != kind {
            return Err(StudyError::Resume(format!(
                "the folder holds a study of `{}`, not of `{}`",
                before.kind.command(),
                kind.command().trim_start_matches("latlab ")
            )));
        }
        for (name, was) in &before.parameters {
            match parameters.get(name) {
                Some(now) if !same_parameter(was, now) => {
                    return Err(StudyError::Resume(format!(
                        "the folder was measured with {name} {was}, not {now}"
                    )))
                }
                _ => {}
            }
        }
        Ok(())
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
        points::read_if_there(&out.join(Self::NAME))
    }
}

/// Whether a parameter as `study.json` keeps it (`was`) and as given now are the same: the
/// same text, or the same durations however they are spelled (a folder measured before
/// durations were printed in their largest exact unit keeps `10000ns` where `10us` is given
/// now).
fn same_parameter(was: &str, now: &str) -> bool {
    let durations = |text: &str| -> Option<Vec<std::time::Duration>> {
        text.split(',')
            .map(|d| latlab_lab::units::parse_duration(d.trim()).ok())
            .collect()
    };
    was == now || matches!((durations(was), durations(now)), (Some(a), Some(b)) if a == b)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn parameters(duration: &str) -> BTreeMap<String, String> {
        BTreeMap::from([
            ("--duration".to_string(), duration.to_string()),
            ("--work-cycles".to_string(), "150".to_string()),
        ])
    }

    #[test]
    fn resume_refuses_a_folder_measured_with_other_parameters() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path();
        StudyFile::new(StudyKind::GameServer, "loopback")
            .with_parameters(parameters("2s"))
            .write(out)
            .unwrap();
        let read = StudyFile::read(out).unwrap().unwrap();
        assert_eq!(read.parameters, parameters("2s"));
        assert!(StudyFile::check_resume(out, StudyKind::GameServer, &parameters("2s")).is_ok());
        let err =
            StudyFile::check_resume(out, StudyKind::GameServer, &parameters("1s")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--resume: the folder was measured with --duration 2s, not 1s"
        );
        assert!(err.is_usage());
        let err = StudyFile::check_resume(out, StudyKind::Emulator, &parameters("2s")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "--resume: the folder holds a study of `latlab study game-server`, not of `study emulator`"
        );
    }

    /// A folder whose first shard of two is done, and the two shards.
    fn first_of_two_done() -> (tempfile::TempDir, Shard, Shard) {
        let tmp = tempfile::tempdir().unwrap();
        let (first, second) = (Shard { index: 1, count: 2 }, Shard { index: 2, count: 2 });
        shard::mark_done(tmp.path(), first).unwrap();
        (tmp, first, second)
    }

    #[test]
    fn of_two_shards_that_finish_at_once_one_draws_the_report() {
        let (tmp, first, second) = first_of_two_done();
        let out = tmp.path();
        // Both markers are there before either shard looks: each finds no shard missing.
        shard::mark_done(out, second).unwrap();
        let drawn = std::cell::Cell::new(0);
        let draw = || {
            drawn.set(drawn.get() + 1);
            Ok(out.join("report.md"))
        };
        let a = StudyReport::finish(out, second, false, draw).unwrap();
        let b = StudyReport::finish(out, first, false, draw).unwrap();
        assert_eq!(drawn.get(), 1, "the report drawn once");
        assert!(a.pending.is_empty() && b.pending.is_empty());
        assert_eq!((a.drawn_by, b.drawn_by), (None, Some(second)));
        // A whole study draws every time.
        let whole = tempfile::tempdir().unwrap();
        StudyReport::finish(whole.path(), Shard::WHOLE, false, draw).unwrap();
        StudyReport::finish(whole.path(), Shard::WHOLE, false, draw).unwrap();
        assert_eq!(drawn.get(), 3);
    }

    #[test]
    fn a_shard_whose_drawing_failed_leaves_the_report_to_the_next() {
        let (tmp, _, second) = first_of_two_done();
        let out = tmp.path();
        let failed = StudyReport::finish(out, second, false, || {
            Err(StudyError::Data {
                path: out.join("report.md"),
                reason: "no points".into(),
            })
        });
        assert!(failed.is_err());
        let again = StudyReport::finish(out, second, false, || Ok(out.join("report.md")));
        assert_eq!(
            again.unwrap().drawn_by,
            None,
            "drawn by the shard run again"
        );
    }

    #[test]
    fn resume_continues_a_folder_that_stored_no_parameters() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(
            StudyFile::check_resume(tmp.path(), StudyKind::GameServer, &parameters("1s")).is_ok(),
            "no study.json"
        );
        // A study.json of a latlab that did not store parameters.
        fs::write(
            tmp.path().join(StudyFile::NAME),
            r#"{"kind": "game-server", "topology": "loopback", "latlab_version": "0.1.0"}"#,
        )
        .unwrap();
        assert!(
            StudyFile::check_resume(tmp.path(), StudyKind::GameServer, &parameters("1s")).is_ok()
        );
    }

    #[test]
    fn a_parameter_is_the_same_however_its_durations_are_spelled() {
        assert!(same_parameter("10000ns,100000ns,1ms", "10us,100us,1ms"));
        assert!(same_parameter("3s", "3000ms"));
        assert!(!same_parameter("3s", "1s"));
        assert!(!same_parameter("1000,50000", "1000,5000"));
        assert!(same_parameter("cubic", "cubic"));
    }
}
