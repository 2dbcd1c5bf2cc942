//! `latlab report DIR`: any results folder drawn again from its data.
//!
//! A folder says what wrote it: a study (and `rfc2544`, the study of one DUT) writes
//! `study.json` ([`StudyFile`]); `gen --out` and `demo` write `summary.json`. Folders of
//! studies written before `study.json` existed are recognised by their point files (`sweep-`,
//! `table-`, `flood-` for the game-server study; `kernel-`, `emu-`, `loss-`, `rate-` for the
//! emulator study) or by what the study says marks its old folders (`rfc2544.json` for
//! `rfc2544`'s, whose `report.md` and figures are drawn again from it), with the lab's
//! description taken from their old `report.md` when it is there.
//!
//! A study's tables, figures and `report.md` are written again by the study's own report
//! module, from the point files only, so they come out as the run wrote them. A `gen` or
//! `demo` folder is read, not written: its table is rendered again, and its CCDF plot drawn
//! again (from each run's `ccdf.csv`) wherever the caller wants it.
//!
//! `latlab report DIR [--plot FILE]` is [`run`]: the files first, then what to print. A
//! folder's study is found in the list of studies the caller gives ([`StudyEntry`]s): the
//! command line gives every study, [`crate::STUDIES`] and `latlab_forwarding::STUDIES`.
//!
//! ```no_run
//! use latlab_study::report::{redraw, Redrawn};
//! match redraw("latlab-results/game-server-1700000000".as_ref(), &latlab_study::STUDIES)? {
//!     Redrawn::Runs { runs, .. } => print!("{}", runs.table()),
//!     Redrawn::Study { report, .. } => {
//!         println!("report: {}", report.display())
//!     }
//! }
//! # Ok::<(), latlab_study::StudyError>(())
//! ```

use std::fs;
use std::io::BufReader;
use std::path::{Path, PathBuf};

use latlab_stats::CcdfPoint;

use crate::registry::{entry, kind_of_old_folder, kind_of_point, StudyEntry};
use crate::{points, StudyError, StudyFile, StudyKind};
use latlab_lab::losses::LostByCause;
use latlab_lab::results::RunSummary;

/// What a results folder holds.
#[derive(Debug)]
pub enum Folder {
    /// The runs of `gen --out` (one) or `demo` (one per rate).
    Runs(RunsFolder),
    /// A study's points.
    Study {
        /// Which study.
        kind: StudyKind,
        /// The lab it ran in, for its `report.md`.
        topology: String,
    },
}

/// What [`redraw`] (or [`run`]) did.
#[derive(Debug)]
pub enum Redrawn {
    /// A `gen` or `demo` folder, read back: render its table, draw its CCDF.
    Runs {
        /// The runs.
        runs: RunsFolder,
        /// The CCDF plot [`run`] wrote, when it was asked for one.
        plot: Option<PathBuf>,
    },
    /// A study whose tables, figures and `report.md` were written again.
    Study {
        /// Which study.
        kind: StudyKind,
        /// Its `report.md`.
        report: PathBuf,
        /// The shards (`--shard I/N`) that have not finished: their points are not in it.
        missing: Vec<crate::Shard>,
    },
}

/// Recognises the results folder `dir` (its study one of `studies`) and draws it again.
pub fn redraw(dir: &Path, studies: &[StudyEntry]) -> Result<Redrawn, StudyError> {
    Folder::open(dir, studies)?.redraw(dir, studies)
}

/// What `latlab report` was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReportOptions {
    /// The results folder.
    pub dir: PathBuf,
    /// `--plot`: where to draw the CCDF of every run of a `gen` or `demo` folder.
    pub plot: Option<PathBuf>,
}

/// `latlab report`: [`redraw`]s the folder and, for a `gen` or `demo` folder, writes the CCDF
/// plot asked for. A `--plot` for a study's folder is refused before anything is written. The
/// folder's study is one of `studies`.
pub fn run(options: &ReportOptions, studies: &[StudyEntry]) -> Result<Redrawn, StudyError> {
    let folder = Folder::open(&options.dir, studies)?;
    let kind = match &folder {
        Folder::Study { kind, .. } => Some(kind.name()),
        Folder::Runs(_) => None,
    };
    if let (Some(_), Some(kind)) = (&options.plot, kind) {
        return Err(StudyError::PlotOfStudy {
            dir: options.dir.clone(),
            kind: kind.into(),
        });
    }
    let mut redrawn = folder.redraw(&options.dir, studies)?;
    if let (
        Some(path),
        Redrawn::Runs {
            runs,
            plot: written,
        },
    ) = (&options.plot, &mut redrawn)
    {
        latlab_lab::results::write_atomic(path, runs.ccdf_svg()?.as_bytes())?;
        *written = Some(path.clone());
    }
    Ok(redrawn)
}

/// The lab's description a folder without `study.json` gets when its `report.md` does not
/// say.
const UNRECORDED_TOPOLOGY: &str = "not recorded in the results folder";

impl Folder {
    /// Reads what `dir` holds (see the module's documentation for how it is recognised); a
    /// study's folder is one of `studies`.
    pub fn open(dir: &Path, studies: &[StudyEntry]) -> Result<Folder, StudyError> {
        if !dir.exists() {
            return Err(StudyError::NoFolder(dir.to_path_buf()));
        }
        if let Some(study) = StudyFile::read(dir)? {
            return Ok(Folder::Study {
                kind: study.kind,
                topology: study.topology,
            });
        }
        if dir.join("summary.json").is_file() {
            return Ok(Folder::Runs(RunsFolder::load(dir)?));
        }
        let kind = match kind_of_old_folder(studies, dir) {
            Some(kind) => kind,
            None => points::load(dir)?
                .files
                .iter()
                .find_map(|f| kind_of_point(studies, &f.key))
                .ok_or_else(|| StudyError::UnknownFolder(dir.to_path_buf()))?,
        };
        let topology =
            old_topology(dir, studies, kind).unwrap_or_else(|| UNRECORDED_TOPOLOGY.into());
        Ok(Folder::Study { kind, topology })
    }

    /// Draws the folder `dir` again: a study's artefacts are written into it (by its line in
    /// `studies`); runs are only read.
    pub fn redraw(self, dir: &Path, studies: &[StudyEntry]) -> Result<Redrawn, StudyError> {
        match self {
            Folder::Runs(runs) => Ok(Redrawn::Runs { runs, plot: None }),
            Folder::Study { kind, topology } => {
                let report = (entry(studies, kind).draw)(dir, &topology)?;
                Ok(Redrawn::Study {
                    kind,
                    report,
                    missing: crate::shard::missing(dir)?,
                })
            }
        }
    }
}

/// The lab's description in the `report.md` of a folder written before `study.json`.
/// A study report's section of lost probes by cause: a line for each point that lost any, its
/// label and its losses as `text` writes them; nothing when none did.
pub(crate) fn lost_section<'a>(
    points: impl IntoIterator<Item = (String, Option<&'a LostByCause>)>,
    text: impl Fn(&LostByCause) -> String,
) -> String {
    let lines: String = points
        .into_iter()
        .filter_map(|(label, lost)| Some((label, lost.filter(|l| l.lost > 0)?)))
        .map(|(label, lost)| format!("- {label}: {}\n", text(lost)))
        .collect();
    match lines.is_empty() {
        true => lines,
        false => format!(
            "\n## Lost by cause\n\nWhere each point's losses went, from the kernel's counters \
             and the emulator's (`-`: not counted; docs/measuring.md, \"Lost probes\").\n\n{lines}"
        ),
    }
}

fn old_topology(dir: &Path, studies: &[StudyEntry], kind: StudyKind) -> Option<String> {
    let text = fs::read_to_string(dir.join("report.md")).ok()?;
    let line = text.lines().find_map(|l| l.strip_prefix("Topology: "))?;
    Some((entry(studies, kind).old_topology)(line).to_string())
}

/// The runs of a `gen --out` or `demo` folder.
#[derive(Debug)]
pub struct RunsFolder {
    /// Each run's summary.
    pub runs: Vec<RunSummary>,
    /// Each run's folder (the folder itself for `gen`, `rate-…/` for `demo`).
    pub dirs: Vec<PathBuf>,
}

impl RunsFolder {
    /// Reads `summary.json`: a demo's holds a list of runs, each in a `rate-…/` folder; a
    /// gen's holds one.
    pub fn load(dir: &Path) -> Result<RunsFolder, StudyError> {
        let path = dir.join("summary.json");
        let text = fs::read_to_string(&path).map_err(StudyError::file(&path))?;
        let json = |source| StudyError::Json {
            path: path.clone(),
            source,
        };
        let value: serde_json::Value = serde_json::from_str(&text).map_err(json)?;
        match value.get("runs") {
            Some(runs) => {
                let runs: Vec<RunSummary> = serde_json::from_value(runs.clone()).map_err(json)?;
                let dirs = runs
                    .iter()
                    .map(|r| match &r.setup.dir {
                        Some(d) => dir.join(d),
                        None => dir.join(format!("rate-{}pps", r.offered_pps as u64)),
                    })
                    .collect();
                Ok(RunsFolder { runs, dirs })
            }
            None => Ok(RunsFolder {
                runs: vec![RunSummary::load(&path)?],
                dirs: vec![dir.to_path_buf()],
            }),
        }
    }

    /// The summary table of the runs, as `gen` and `demo` print it, with each run's lost
    /// probes by cause and its protocol's counts where they were recorded.
    pub fn table(&self) -> String {
        let mut text = latlab_lab::table::render(&self.runs.iter().collect::<Vec<_>>());
        let named = self.runs.len() > 1;
        for run in &self.runs {
            let lines = [
                run.setup.link.as_ref().map(|l| format!("link: {l}")),
                run.lost_by_cause.as_ref().map(|l| l.text()),
                run.protocol.as_ref().map(|p| p.text()),
            ];
            for line in lines.into_iter().flatten() {
                if named {
                    text.push_str(&format!("{}: ", run.setup.label));
                }
                text.push_str(&line);
                text.push('\n');
            }
        }
        text
    }

    /// Every run's CCDF, from its `ccdf.csv`, labelled as the run.
    pub fn ccdf_series(&self) -> Result<Vec<(String, Vec<CcdfPoint>)>, StudyError> {
        self.runs
            .iter()
            .zip(&self.dirs)
            .map(|(run, dir)| {
                let csv = dir.join("ccdf.csv");
                let file = fs::File::open(&csv).map_err(StudyError::file(&csv))?;
                let points = latlab_stats::read_ccdf_csv(BufReader::new(file)).map_err(|e| {
                    StudyError::Data {
                        path: csv.clone(),
                        reason: e.to_string(),
                    }
                })?;
                Ok((run.setup.label.clone(), points))
            })
            .collect()
    }

    /// The CCDF of every run on one plot, as SVG text.
    pub fn ccdf_svg(&self) -> Result<String, StudyError> {
        latlab_lab::plot::ccdf_svg_marked(
            "latency CCDF",
            latlab_lab::plot::ROUND_TRIP_AXIS,
            &self.ccdf_series()?,
            &latlab_lab::results::stall_marks(&self.runs),
        )
        .map_err(|reason| StudyError::Figure {
            file: "the CCDF plot".into(),
            reason,
        })
    }
}

#[cfg(test)]
mod tests;
