//! What every study is to the rest of latlab, and the one list of them.
//!
//! A study implements [`Study`]: its kind (the name on the command line and in `study.json`),
//! the first words of its point keys, its options (whose `parameters()`, the options that shape
//! its points, `study.json` keeps), how it measures into a points folder and how it draws from
//! one. [`Study::run`] is the one skeleton every study
//! runs through: measure this job's points, mark its shard done, and draw the report once no
//! shard is missing. [`STUDIES`] lists every study of this crate once (the forwarding study and
//! `rfc2544` are `latlab_forwarding::STUDIES`; the command line puts both lists together);
//! `latlab report` finds a folder's study in that whole list, by the kind `study.json` names
//! or, in folders written before `study.json`, by the first word of a point's key.
//!
//! A new study is a folder of its own that implements [`Study`], a [`StudyKind`] variant (the
//! name its folders are marked with) and its line in [`STUDIES`] (or in its crate's list); its
//! flags are a subcommand in the CLI's `study.rs`.

use std::path::{Path, PathBuf};

use latlab_engine::Stop;
use latlab_lab::progress::View;

use crate::{
    bufferbloat, emulator, game_server, timestamps, transports, Shard, StudyError, StudyKind,
    StudyReport,
};

/// One study: how it measures into a points folder and how it draws from one.
pub trait Study {
    /// Its kind: `latlab study NAME` and the `kind` of the `study.json` it writes.
    const KIND: StudyKind;
    /// The first word (before the first `-`) of the keys of the points it writes, or its stem
    /// followed by `*`; how a folder written before `study.json` existed is recognised. Words
    /// no other study uses.
    const POINT_PREFIXES: &'static [&'static str];
    /// Its options.
    type Options;

    /// The results folder and this job's share of the points.
    fn folder(options: &Self::Options) -> (&Path, Shard);

    /// Builds the lab and measures this job's points into the folder's `points/` (writing
    /// `study.json` first); returns the lab's description for the report.
    fn measure(
        options: &Self::Options,
        stop: &Stop,
        progress: &mut dyn View,
    ) -> Result<String, StudyError>;

    /// Writes the tables, figures and `report.md` into `dir` from its points alone; returns
    /// the `report.md`. `latlab report DIR` calls it too, so it draws byte for byte what the
    /// run drew.
    fn draw(dir: &Path, topology: &str) -> Result<PathBuf, StudyError>;

    /// The lab's description from the `Topology: ` line of a `report.md` written before
    /// `study.json` existed (the line as it is, unless the study wrote more on it).
    fn old_topology(line: &str) -> &str {
        line
    }

    /// Whether `dir`, which has no `study.json`, is a folder this study wrote before it wrote
    /// points (besides those its point keys tell: [`Study::POINT_PREFIXES`]).
    fn old_folder(_dir: &Path) -> bool {
        false
    }

    /// Runs the study: measures this job's points, then, once no shard is missing, draws the
    /// report from them (a stopped run draws what it measured, unless it is a shard).
    fn run(
        options: &Self::Options,
        stop: &Stop,
        progress: &mut dyn View,
    ) -> Result<StudyReport, StudyError> {
        let topology = Self::measure(options, stop, progress)?;
        let (out, shard) = Self::folder(options);
        StudyReport::finish(out, shard, stop.is_raised(), || Self::draw(out, &topology))
    }
}

/// What `latlab report` needs of a study, taken from its [`Study`] implementation.
#[derive(Clone, Copy, Debug)]
pub struct StudyEntry {
    /// [`Study::KIND`].
    pub kind: StudyKind,
    /// [`Study::POINT_PREFIXES`].
    pub point_prefixes: &'static [&'static str],
    /// [`Study::draw`].
    pub draw: fn(&Path, &str) -> Result<PathBuf, StudyError>,
    /// [`Study::old_topology`].
    pub old_topology: fn(&str) -> &str,
    /// [`Study::old_folder`].
    pub old_folder: fn(&Path) -> bool,
}

impl StudyEntry {
    /// The entry of study `S`.
    pub const fn of<S: Study>() -> StudyEntry {
        StudyEntry {
            kind: S::KIND,
            point_prefixes: S::POINT_PREFIXES,
            draw: S::draw,
            old_topology: S::old_topology,
            old_folder: S::old_folder,
        }
    }
}

/// Every study of this crate, one line each (`latlab_forwarding::STUDIES` has the others).
pub static STUDIES: [StudyEntry; 5] = [
    StudyEntry::of::<game_server::GameServerStudy>(),
    StudyEntry::of::<emulator::EmulatorStudy>(),
    StudyEntry::of::<timestamps::TimestampsStudy>(),
    StudyEntry::of::<transports::TransportsStudy>(),
    StudyEntry::of::<bufferbloat::BufferbloatStudy>(),
];

/// The study of `studies` that wrote `dir`, a folder without `study.json`, before it wrote
/// points, if one says so ([`Study::old_folder`]).
pub fn kind_of_old_folder(studies: &[StudyEntry], dir: &Path) -> Option<StudyKind> {
    studies.iter().find(|e| (e.old_folder)(dir)).map(|e| e.kind)
}

/// The entry of the study of `kind` in `studies`, every study's line (the command line's
/// list, checked by its test).
pub fn entry(studies: &[StudyEntry], kind: StudyKind) -> &StudyEntry {
    studies
        .iter()
        .find(|e| e.kind == kind)
        .expect("every StudyKind has its line in STUDIES (checked by a test)")
}

/// The study of `studies` a point key belongs to, by its first word.
pub fn kind_of_point(studies: &[StudyEntry], key: &str) -> Option<StudyKind> {
    let first = key.split('-').next()?;
    studies
        .iter()
        .find(|e| e.point_prefixes.iter().any(|p| names(p, first)))
        .map(|e| e.kind)
}

/// Whether `word`, the first word of a point key, is `prefix` (or, for `stem*`, starts with
/// the stem).
pub fn names(prefix: &str, word: &str) -> bool {
    match prefix.strip_suffix('*') {
        Some(stem) => word.starts_with(stem),
        None => word == prefix,
    }
}
