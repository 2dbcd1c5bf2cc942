//! `--shard I/N`: one of N jobs that fill one study's results folder together.
//!
//! A study's points fall into units (a point, or a series of points whose later ones depend
//! on the earlier ones, such as a load sweep and the table points taken from its first drop);
//! the units are numbered in the order the whole study would measure them, and shard `I` of
//! `N` measures the units whose number is `I − 1` modulo `N`. So N jobs started with the same
//! options (a Kubernetes Indexed Job, a Slurm job array) write disjoint points into the same
//! `points/` folder, each point whole or not at all, and no job waits for another.
//!
//! Each shard leaves `shards/I-of-N.json` when it has measured its share. A shard that finds
//! every marker there claims the report ([`claim_report`]: `shards/report.json`, written once)
//! and the one whose claim is there draws it, so two shards that finish at the same moment do
//! not both draw it; any other says which shards are still running, or which one drew the
//! report. `latlab report OUT` draws whatever points are there at any time, and names the
//! shards whose points are missing ([`missing`]).

use std::fs;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::StudyError;
use crate::results::{write_atomic, write_new};

/// The folder of the shard markers inside a results folder.
pub const FOLDER: &str = "shards";

/// The claim on the report in [`FOLDER`] ([`Drawer`]).
pub const DRAWER: &str = "report.json";

/// Shard `index` (from 1) of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// Which one, from 1 to `count`.
    pub index: usize,
    /// How many jobs share the study.
    pub count: usize,
}

impl Shard {
    /// The whole study in one job.
    pub const WHOLE: Shard = Shard { index: 1, count: 1 };

    /// Parses `I/N` (1 ≤ I ≤ N); the error says what is wrong, for the flag to name.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = || format!("{text:?} is not a shard: I/N with 1 ≤ I ≤ N, e.g. 2/3");
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let index: usize = i.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if count == 0 || index == 0 || index > count {
            return Err(format!(
                "{text:?}: shard {index} of {count} does not exist (I/N needs 1 ≤ I ≤ N)"
            ));
        }
        Ok(Shard { index, count })
    }

    /// Whether unit number `ordinal` (from 0, in the whole study's order) is this shard's.
    pub fn owns(self, ordinal: usize) -> bool {
        ordinal % self.count == self.index - 1
    }

    /// Whether this is the whole study.
    pub fn is_whole(self) -> bool {
        self.count == 1
    }

    /// How many of `units` units are this shard's.
    pub fn share_of(self, units: usize) -> usize {
        (0..units).filter(|&u| self.owns(u)).count()
    }

    fn marker_name(self) -> String {
        format!("{}-of-{}.json", self.index, self.count)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// `shards/I-of-N.json`: a shard measured its share.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Marker {
    /// Which shard.
    pub index: usize,
    /// Of how many.
    pub count: usize,
    /// Its host, when known.
    pub host: Option<String>,
    /// When it finished, ns since the Unix epoch.
    pub finished_unix_ns: u64,
}

/// Marks `shard`'s share of the study in `out` measured. A whole study leaves no marker.
pub fn mark_done(out: &Path, shard: Shard) -> Result<(), StudyError> {
    if shard.is_whole() {
        return Ok(());
    }
    let dir = out.join(FOLDER);
    fs::create_dir_all(&dir).map_err(StudyError::file(&dir))?;
    let marker = Marker {
        index: shard.index,
        count: shard.count,
        host: crate::results::hostname(),
        finished_unix_ns: latlab_io::clock::now_ns(),
    };
    let path = dir.join(shard.marker_name());
    let json = serde_json::to_string_pretty(&marker).map_err(|source| StudyError::Json {
        path: path.clone(),
        source,
    })?;
    Ok(write_atomic(&path, format!("{json}\n").as_bytes())?)
}

/// `shards/report.json`: the shard that drew the report, the first whose claim was written
/// once every shard was done ([`claim_report`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drawer {
    /// Which shard.
    pub index: usize,
    /// Of how many.
    pub count: usize,
    /// Its host, when known.
    pub host: Option<String>,
    /// When it claimed the report, ns since the Unix epoch.
    pub claimed_unix_ns: u64,
}

impl Drawer {
    /// The shard it names.
    pub fn shard(&self) -> Shard {
        Shard {
            index: self.index,
            count: self.count,
        }
    }
}

/// Once every shard of the study in `out` is done: claims the drawing of its report for
/// `shard`. `None` when this claim is the one in `shards/report.json` (this shard draws the
/// report); the other shard's claim when one was there first (it draws, or drew, the report).
/// Of any number of shards that claim at once, exactly one gets `None`.
pub fn claim_report(out: &Path, shard: Shard) -> Result<Option<Drawer>, StudyError> {
    let path = out.join(FOLDER).join(DRAWER);
    let claim = Drawer {
        index: shard.index,
        count: shard.count,
        host: crate::results::hostname(),
        claimed_unix_ns: latlab_io::clock::now_ns(),
    };
    let json = serde_json::to_string_pretty(&claim).map_err(|source| StudyError::Json {
        path: path.clone(),
        source,
    })?;
    if write_new(&path, format!("{json}\n").as_bytes())? {
        return Ok(None);
    }
    match drawer(out)? {
        Some(other) => Ok(Some(other)),
        // Taken back between the two (its drawing failed): this shard claims it again.
        None => claim_report(out, shard),
    }
}

/// Takes back this shard's claim on the report (its drawing failed), so that the next shard
/// to finish, or this one run again, draws it.
pub fn release_report(out: &Path) -> Result<(), StudyError> {
    let path = out.join(FOLDER).join(DRAWER);
    match fs::remove_file(&path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StudyError::file(&path)(e)),
    }
}

/// Who drew the report of the study in `out`: the claim in `shards/report.json`, `None` for a
/// folder without one (a whole study, shards still running, or a folder written before latlab
/// kept it).
pub fn drawer(out: &Path) -> Result<Option<Drawer>, StudyError> {
    super::read_if_there(&out.join(FOLDER).join(DRAWER))
}

/// The shards of the study in `out` that have not finished their share, as `I/N`: empty for a
/// study run whole, or when every shard is done. The shard count is the largest any marker
/// names (every shard of one study is started with the same N).
pub fn missing(out: &Path) -> Result<Vec<Shard>, StudyError> {
    let dir = out.join(FOLDER);
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StudyError::file(&dir)(e)),
    };
    let mut done = Vec::new();
    for entry in entries {
        let path = entry.map_err(StudyError::file(&dir))?.path();
        if path.extension().is_none_or(|e| e != "json")
            || path.file_name().is_some_and(|n| n == DRAWER)
        {
            continue;
        }
        let text = fs::read_to_string(&path).map_err(StudyError::file(&path))?;
        let marker: Marker =
            serde_json::from_str(&text).map_err(|source| StudyError::Json { path, source })?;
        done.push(marker);
    }
    let count = done.iter().map(|m| m.count).max().unwrap_or(0);
    Ok((1..=count)
        .filter(|&i| !done.iter().any(|m| m.index == i && m.count == count))
        .map(|index| Shard { index, count })
        .collect())
}

/// Which units of the study a part of it may measure: those of `shard`, numbering the part's
/// points from `first_unit`.
#[derive(Clone, Copy, Debug)]
pub struct Share {
    /// The job's shard of the whole study.
    pub shard: Shard,
    /// The number, in the whole study, of the part's first point.
    pub first_unit: usize,
}

impl Share {
    /// Whether the part's point `i` is this job's.
    pub fn owns(self, i: usize) -> bool {
        self.shard.owns(self.first_unit + i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shard_specs_parse_or_say_what_is_wrong() {
        assert_eq!(Shard::parse("2/3"), Ok(Shard { index: 2, count: 3 }));
        assert_eq!(Shard::parse("1/1"), Ok(Shard::WHOLE));
        for bad in ["4/3", "0/3", "1/0", "3", "a/b", "-1/3", ""] {
            let e = Shard::parse(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
    }

    #[test]
    fn the_shards_of_a_study_take_every_unit_exactly_once() {
        for count in 1..6 {
            let shards: Vec<Shard> = (1..=count).map(|index| Shard { index, count }).collect();
            for unit in 0..40 {
                assert_eq!(shards.iter().filter(|s| s.owns(unit)).count(), 1);
            }
            let total: usize = shards.iter().map(|s| s.share_of(40)).sum();
            assert_eq!(total, 40);
        }
    }

    #[test]
    fn the_missing_shards_are_those_without_a_marker() {
        let dir = tempfile::tempdir().unwrap();
        assert!(missing(dir.path()).unwrap().is_empty(), "a whole study");
        mark_done(dir.path(), Shard::WHOLE).unwrap();
        assert!(!dir.path().join(FOLDER).exists());
        mark_done(dir.path(), Shard { index: 2, count: 3 }).unwrap();
        assert_eq!(
            missing(dir.path()).unwrap(),
            [Shard { index: 1, count: 3 }, Shard { index: 3, count: 3 }]
        );
        mark_done(dir.path(), Shard { index: 1, count: 3 }).unwrap();
        mark_done(dir.path(), Shard { index: 3, count: 3 }).unwrap();
        assert!(missing(dir.path()).unwrap().is_empty());
        // The claim on the report beside the markers is not a marker.
        claim_report(dir.path(), Shard { index: 3, count: 3 }).unwrap();
        assert!(missing(dir.path()).unwrap().is_empty());
    }

    #[test]
    fn of_the_shards_that_claim_the_report_the_first_draws_it() {
        let dir = tempfile::tempdir().unwrap();
        let shard = |index| Shard { index, count: 3 };
        for index in 1..=3 {
            mark_done(dir.path(), shard(index)).unwrap();
        }
        assert_eq!(drawer(dir.path()).unwrap(), None);
        assert_eq!(claim_report(dir.path(), shard(2)).unwrap(), None);
        for index in [1, 3, 2] {
            let other = claim_report(dir.path(), shard(index)).unwrap();
            assert_eq!(other.map(|d| d.shard()), Some(shard(2)), "shard {index}");
        }
        assert_eq!(drawer(dir.path()).unwrap().unwrap().shard(), shard(2));
        // Taken back (the drawing failed): the next to claim it draws.
        release_report(dir.path()).unwrap();
        assert_eq!(claim_report(dir.path(), shard(3)).unwrap(), None);
        assert_eq!(drawer(dir.path()).unwrap().unwrap().shard(), shard(3));
    }
}
