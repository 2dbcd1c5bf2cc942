//! The points folder of a study: `<out>/points/<key>.json`, and `<key>.hlog` beside it when the
//! point has a latency histogram.
//!
//! One point schema for every study: the JSON is the point's record (the study's own point
//! type); the `.hlog` holds the whole latency histogram, readable by HdrHistogram's tools and by
//! [`latlab_stats::hlog::read_hlog`]. Each file is written to a temporary name and renamed into
//! place, the `.hlog` before the JSON, so a point whose JSON is there is whole: an interrupted
//! study keeps every point it finished and `--resume` reads them back instead of measuring
//! them again. A point measured while the study was being stopped was cut short: the run
//! writes it with [`PointsDir::write_measured`], which leaves it out, so `--resume` measures it
//! again rather than keeping a short point. The run module of a study writes points through [`PointsDir`]; its report module
//! reads them back with [`load`], and nothing else.

pub mod error;
pub mod shard;

pub use error::StudyError;
pub use shard::{Shard, Share};

use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use latlab_engine::Stop;
use latlab_stats::hlog::{merge_intervals, read_hlog, HlogWriter};
use latlab_stats::LatencyHistogram;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::results::write_atomic;

/// The folder's name inside a results folder.
pub const FOLDER: &str = "points";

/// Whether a study may continue a results folder that exists.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Existing {
    /// The study cannot resume: an existing folder is refused.
    Refuse,
    /// The study can resume and `--resume` was not given: an existing folder is refused, and
    /// the error says `--resume`.
    RefuseResumable,
    /// `--resume` was given: an existing folder is continued.
    Continue,
}

/// The points folder of a running study.
#[derive(Debug)]
pub struct PointsDir {
    dir: PathBuf,
    resume: bool,
}

impl PointsDir {
    /// Makes (or, with [`Existing::Continue`], opens) `<out>/points`.
    pub fn create(out: &Path, existing: Existing) -> Result<PointsDir, StudyError> {
        if out.exists() {
            match existing {
                Existing::Refuse => return Err(StudyError::Taken(out.to_path_buf())),
                Existing::RefuseResumable => return Err(StudyError::Exists(out.to_path_buf())),
                Existing::Continue => {}
            }
        }
        let dir = out.join(FOLDER);
        fs::create_dir_all(&dir).map_err(StudyError::file(&dir))?;
        Ok(PointsDir {
            dir,
            resume: existing == Existing::Continue,
        })
    }

    /// Where the points are.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The point `key` when the study resumes and it was measured already (its JSON reads as
    /// a `T`); `None` otherwise, and the point is measured.
    pub fn resumed<T: DeserializeOwned>(&self, key: &str) -> Option<T> {
        if !self.resume {
            return None;
        }
        let text = fs::read_to_string(self.dir.join(format!("{key}.json"))).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Writes the point `key`: its histogram (with `comment` in the `.hlog` header) first, when
    /// it has one, then its JSON, each whole or not at all.
    pub fn write<T: Serialize>(
        &self,
        key: &str,
        point: &T,
        histogram: Option<(&LatencyHistogram, &str)>,
    ) -> Result<(), StudyError> {
        if let Some((h, comment)) = histogram {
            let path = self.dir.join(format!("{key}.hlog"));
            let bytes = hlog_bytes(h, comment).map_err(StudyError::file(&path))?;
            write_atomic(&path, &bytes)?;
        }
        let path = self.dir.join(format!("{key}.json"));
        let json = serde_json::to_string_pretty(point).map_err(|source| StudyError::Json {
            path: path.clone(),
            source,
        })?;
        // write_atomic names the file in its errors.
        Ok(write_atomic(&path, format!("{json}\n").as_bytes())?)
    }
}

impl PointsDir {
    /// Writes the point `key` as [`PointsDir::write`] does when `stop` was not raised; a point
    /// whose measurement `stop` cut short (raised at any time before this call) is not
    /// written, so that `--resume` measures it again. Returns whether it was written.
    pub fn write_measured<T: Serialize>(
        &self,
        key: &str,
        point: &T,
        histogram: Option<(&LatencyHistogram, &str)>,
        stop: &Stop,
    ) -> Result<bool, StudyError> {
        if stop.is_raised() {
            return Ok(false);
        }
        self.write(key, point, histogram)?;
        Ok(true)
    }
}

/// The JSON document of a results folder's file at `path`, `None` when there is no such file;
/// errors name the file.
pub fn read_if_there<T: DeserializeOwned>(path: &Path) -> Result<Option<T>, StudyError> {
    let text = match fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StudyError::file(path)(e)),
    };
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|source| StudyError::Json {
            path: path.to_path_buf(),
            source,
        })
}

/// A one-interval `.hlog` of a point's latency histogram (start time now, one interval
/// covering it).
///
/// The point's sending time is not known here, so the interval has a nominal length of one
/// second; the histogram (untagged) is what matters.
pub fn hlog_bytes(h: &LatencyHistogram, comment: &str) -> io::Result<Vec<u8>> {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let mut w = HlogWriter::new(Vec::new(), now, comment).map_err(io::Error::other)?;
    w.write_interval(0.0, 1.0, h, None)
        .map_err(io::Error::other)?;
    Ok(w.into_inner())
}

/// One point file read back.
#[derive(Debug)]
pub struct PointFile {
    /// The file's stem: the point's key.
    pub key: String,
    /// The file's name (`<key>.json`).
    pub file: String,
    /// Its path.
    pub path: PathBuf,
    /// Its text, or why it could not be read.
    pub text: Result<String, String>,
}

impl PointFile {
    /// The histogram of the `.hlog` beside the JSON: `None` when there is none, an error
    /// when it does not read.
    pub fn histogram(&self) -> Option<Result<LatencyHistogram, String>> {
        let bytes = fs::read(self.path.with_extension("hlog")).ok()?;
        Some(
            read_hlog(&bytes[..])
                .and_then(|i| merge_intervals(&i, None))
                .map_err(|e| e.to_string()),
        )
    }
}

/// Every point file of a results folder, by file name.
#[derive(Debug, Default)]
pub struct PointFiles {
    /// The `.json` files of `points/`, sorted by name.
    pub files: Vec<PointFile>,
    /// There is no `points/` folder at all.
    pub no_folder: bool,
}

/// Reads the JSON files of `<out>/points` (each one's text, or why it could not be read).
pub fn load(out: &Path) -> Result<PointFiles, StudyError> {
    let dir = out.join(FOLDER);
    let entries = match fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Ok(PointFiles {
                files: Vec::new(),
                no_folder: true,
            })
        }
        Err(e) => return Err(StudyError::file(&dir)(e)),
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let files = paths
        .into_iter()
        .map(|path| PointFile {
            key: path
                .file_stem()
                .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
            file: path
                .file_name()
                .map_or_else(String::new, |f| f.to_string_lossy().into_owned()),
            text: fs::read_to_string(&path).map_err(|e| e.to_string()),
            path,
        })
        .collect();
    Ok(PointFiles {
        files,
        no_folder: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, Serialize, serde::Deserialize)]
    struct P {
        load: f64,
    }

    fn histogram() -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for v in 1..=1000u64 {
            h.record(v * 100);
        }
        h
    }

    #[test]
    fn a_point_is_written_whole_and_read_back_on_resume() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("study");
        let points = PointsDir::create(&out, Existing::RefuseResumable).unwrap();
        points
            .write("a", &P { load: 1.0 }, Some((&histogram(), "test")))
            .unwrap();
        // Only the two files: no temporary name is left behind.
        let mut names: Vec<String> = fs::read_dir(points.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["a.hlog", "a.json"]);
        assert_eq!(points.resumed::<P>("a"), None, "not resuming");

        let again = PointsDir::create(&out, Existing::RefuseResumable).unwrap_err();
        assert!(again.to_string().contains("--resume"), "{again}");
        let taken = PointsDir::create(&out, Existing::Refuse).unwrap_err();
        assert!(taken.to_string().contains("pick another --out"), "{taken}");

        let resumed = PointsDir::create(&out, Existing::Continue).unwrap();
        assert_eq!(resumed.resumed::<P>("a"), Some(P { load: 1.0 }));
        assert_eq!(resumed.resumed::<P>("b"), None, "never measured");

        let loaded = load(&out).unwrap();
        assert_eq!(loaded.files.len(), 1);
        assert_eq!(loaded.files[0].key, "a");
        let h = loaded.files[0].histogram().unwrap().unwrap();
        assert_eq!(h.len(), 1000);
        assert_eq!(h.max(), histogram().max());
    }

    #[test]
    fn a_point_cut_short_by_a_stop_is_not_written_and_not_resumed() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("study");
        let points = PointsDir::create(&out, Existing::RefuseResumable).unwrap();
        let stop = Stop::new();
        assert!(points
            .write_measured("whole", &P { load: 1.0 }, Some((&histogram(), "t")), &stop)
            .unwrap());
        stop.raise();
        assert!(!points
            .write_measured("short", &P { load: 0.5 }, Some((&histogram(), "t")), &stop)
            .unwrap());
        let mut names: Vec<String> = fs::read_dir(points.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(
            names,
            ["whole.hlog", "whole.json"],
            "nothing of the short point"
        );

        let resumed = PointsDir::create(&out, Existing::Continue).unwrap();
        assert_eq!(resumed.resumed::<P>("whole"), Some(P { load: 1.0 }));
        assert_eq!(resumed.resumed::<P>("short"), None, "measured again");
    }

    #[test]
    fn a_full_disk_names_the_point_file_it_could_not_write() {
        let tmp = tempfile::tempdir().unwrap();
        let points = PointsDir::create(&tmp.path().join("study"), Existing::Refuse).unwrap();
        // The JSON's temporary name points at /dev/full, where every write fails with ENOSPC.
        let json = points.path().join("a.json");
        let partial = points
            .path()
            .join(format!(".a.json.partial-{}", std::process::id()));
        std::os::unix::fs::symlink("/dev/full", &partial).unwrap();
        let e = points
            .write("a", &P { load: 1.0 }, Some((&histogram(), "test")))
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("{}: No space left on device", json.display())),
            "{e}"
        );
        assert!(
            !json.exists(),
            "a point that could not be written is not there"
        );
    }

    #[test]
    fn an_hlog_reads_back_to_the_histogram() {
        let h = histogram();
        let bytes = hlog_bytes(&h, "k").unwrap();
        let back = merge_intervals(&read_hlog(&bytes[..]).unwrap(), None).unwrap();
        assert_eq!(back.len(), 1000);
        assert_eq!(back.max(), h.max());
    }

    #[test]
    fn a_folder_without_points_loads_as_empty() {
        let tmp = tempfile::tempdir().unwrap();
        let loaded = load(tmp.path()).unwrap();
        assert!(loaded.no_folder && loaded.files.is_empty());
    }
}
