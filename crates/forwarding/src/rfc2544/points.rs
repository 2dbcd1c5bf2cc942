//! `latlab rfc2544`'s folder as a points folder, the form every study writes: `study.json`
//! (kind `rfc2544`, the lab, the options that shape every point and the order of the sizes),
//! a point per frame size (`points/size-64.json`: every trial of that size) and the run's point
//! (`points/run.json`: the options, the DUT's own report and the saturation trial, which is
//! `rfc2544.json` without its sizes). `rfc2544.json`, `rfc2544.csv`, `report.md` and the
//! figures are drawn from the points ([`Rfc2544Study::draw`]), by the run and by `latlab
//! report` alike.
//!
//! A folder written before rfc2544 wrote points (an `rfc2544.json` and no `study.json`) is
//! still drawn again from its `rfc2544.json`, byte for byte as before, and `--resume` continues
//! it: its finished sizes become points.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use latlab_engine::Stop;
use latlab_lab::points::{self, Existing, PointsDir, Shard};
use latlab_lab::progress::View;

use super::folder::{self, check_parameters, parameters, Rfc2544File, RESULTS};
use super::{CommandError, Measured, Rfc2544Options, SizeResult};
use latlab_study::{Study, StudyError, StudyFile, StudyKind};

/// The run's point: the options, the DUT's report, the saturation trial.
const RUN: &str = "run";

/// The `study.json` parameter that keeps the order of the sizes, for the tables.
const SIZE_ORDER: &str = "sizes";

/// The key of the point of `size`-byte frames.
fn size_key(size: usize) -> String {
    format!("size-{size}")
}

/// `latlab rfc2544` to `latlab report` and the study registry.
#[derive(Debug)]
pub struct Rfc2544Study;

impl Study for Rfc2544Study {
    const KIND: StudyKind = StudyKind::Rfc2544;
    const POINT_PREFIXES: &'static [&'static str] = &["size", RUN];
    type Options = Rfc2544Options;

    fn folder(options: &Rfc2544Options) -> (&Path, Shard) {
        (&options.out, Shard::WHOLE)
    }

    fn measure(
        options: &Rfc2544Options,
        stop: &Stop,
        progress: &mut dyn View,
    ) -> Result<String, StudyError> {
        let m = measure(options, stop, progress).map_err(study_error)?;
        match m.failure {
            Some(why) => Err(StudyError::Io(std::io::Error::other(why))),
            None => Ok(m.topology),
        }
    }

    fn draw(dir: &Path, _topology: &str) -> Result<PathBuf, StudyError> {
        draw(dir)
    }

    fn old_folder(dir: &Path) -> bool {
        folder::is_folder(dir)
    }
}

/// Measures the sizes `options` asks for (with `--resume`, those the folder does not hold
/// yet) and writes them, with the run's point and `study.json`, into the folder's points;
/// returns what was measured (the report, the lab, why a size ended early if one did).
/// Nothing is written when the measurement fails before it has results.
pub(super) fn measure(
    options: &Rfc2544Options,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<Measured, CommandError> {
    let kept = if options.resume {
        earlier(options)?
    } else {
        Vec::new()
    };
    let m = super::measure(options, kept, stop, view)?;
    write(options, &m)?;
    Ok(m)
}

/// Writes what `m` measured with `options` into the points folder of `options.out` (made, or
/// continued with `--resume`): a point per size, the run's point, then `study.json`.
fn write(options: &Rfc2544Options, m: &Measured) -> Result<(), CommandError> {
    let existing = if options.resume {
        Existing::Continue
    } else {
        Existing::RefuseResumable
    };
    let dir = PointsDir::create(&options.out, existing).map_err(command_error)?;
    for size in &m.report.sizes {
        let key = size_key(size.frame_size);
        dir.write(&key, size, None).map_err(command_error)?;
    }
    let run = Rfc2544File {
        sizes: Vec::new(),
        ..Rfc2544File::new(options, &m.report, m.dut_report.clone(), &m.topology)
    };
    dir.write(RUN, &run, None).map_err(command_error)?;
    let mut parameters: BTreeMap<String, String> = parameters(options)
        .into_iter()
        .map(|(key, _, value)| {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_string);
            (key.to_string(), text)
        })
        .collect();
    let order: Vec<String> = m
        .report
        .sizes
        .iter()
        .map(|s| s.frame_size.to_string())
        .collect();
    parameters.insert(SIZE_ORDER.into(), order.join(","));
    StudyFile::new(StudyKind::Rfc2544, &m.topology)
        .with_parameters(parameters)
        .write(&options.out)
        .map_err(command_error)
}

/// The sizes the run in `options.out` finished (no error), after checking it was measured
/// with the same options (the error names the flag that differs): from its points, or from
/// the `rfc2544.json` of a folder written before rfc2544 wrote points.
fn earlier(options: &Rfc2544Options) -> Result<Vec<SizeResult>, CommandError> {
    let resume_error = |why: String| CommandError::Usage(format!("--resume: {why}"));
    if StudyFile::read(&options.out)
        .map_err(command_error)?
        .is_none()
    {
        return folder::earlier_sizes(options);
    }
    let run = read_run(&options.out).map_err(|e| resume_error(e.to_string()))?;
    check_parameters(options, &run)?;
    Ok(read_sizes(&options.out)
        .map_err(|e| resume_error(e.to_string()))?
        .into_iter()
        .filter(|s| s.error.is_none())
        .collect())
}

/// The run's point of the folder `dir`.
fn read_run(dir: &Path) -> Result<Rfc2544File, StudyError> {
    let path = dir.join(points::FOLDER).join(format!("{RUN}.json"));
    let text = std::fs::read_to_string(&path).map_err(StudyError::file(&path))?;
    serde_json::from_str(&text).map_err(|source| StudyError::Json { path, source })
}

/// Every size point of the folder `dir`, by key.
fn read_sizes(dir: &Path) -> Result<Vec<SizeResult>, StudyError> {
    let mut sizes = Vec::new();
    for file in points::load(dir)?.files {
        if !file.key.starts_with("size-") {
            continue;
        }
        let text = file.text.map_err(|reason| StudyError::Data {
            path: file.path.clone(),
            reason,
        })?;
        let size: SizeResult = serde_json::from_str(&text).map_err(|source| StudyError::Json {
            path: file.path.clone(),
            source,
        })?;
        sizes.push(size);
    }
    Ok(sizes)
}

/// Draws `rfc2544.json`, `rfc2544.csv`, `report.md` and the figures of the folder `dir` from
/// its points (or, in a folder written before rfc2544 wrote points, `report.md` and the
/// figures from its `rfc2544.json`); returns the `report.md`.
pub(super) fn draw(dir: &Path) -> Result<PathBuf, StudyError> {
    if points::load(dir)?.no_folder {
        return folder::redraw(dir).map_err(|reason| StudyError::Data {
            path: dir.join(RESULTS),
            reason,
        });
    }
    let mut file = read_run(dir)?;
    let mut sizes = read_sizes(dir)?;
    let order: Vec<usize> = StudyFile::read(dir)?
        .and_then(|s| s.parameters.get(SIZE_ORDER).cloned())
        .unwrap_or_default()
        .split(',')
        .filter_map(|s| s.parse().ok())
        .collect();
    // In the order the run listed them; any other (none, unless a file was added by hand)
    // after them, by size.
    sizes.sort_by_key(|s| {
        let at = order.iter().position(|&o| o == s.frame_size);
        (at.unwrap_or(usize::MAX), s.frame_size)
    });
    file.sizes = sizes;
    folder::write_files(dir, &file).map_err(|reason| StudyError::Data {
        path: dir.join(RESULTS),
        reason,
    })
}

/// A study's error as the command's: a `--resume` that does not fit is a usage error.
fn command_error(e: StudyError) -> CommandError {
    if e.is_usage() {
        CommandError::Usage(e.to_string())
    } else {
        CommandError::Io(std::io::Error::other(e.to_string()))
    }
}

/// The command's error as a study's.
fn study_error(e: CommandError) -> StudyError {
    match e {
        CommandError::Io(e) => StudyError::Io(e),
        other => StudyError::Io(std::io::Error::other(other.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rfc2544::DutReport;
    use latlab_study::report::{Folder, Redrawn};

    /// `latlab report`'s redraw, with this crate's studies.
    fn redraw(dir: &Path) -> Result<Redrawn, StudyError> {
        latlab_study::report::redraw(dir, &crate::STUDIES)
    }

    fn measured(out: &Path, sizes: &[usize]) -> (Rfc2544Options, Measured) {
        let (mut options, mut report) = super::super::folder::tests::measured();
        options.out = out.to_path_buf();
        options.sizes = sizes.to_vec();
        report.out = out.to_path_buf();
        report.sizes = sizes
            .iter()
            .map(|&frame_size| SizeResult {
                frame_size,
                ndr_pps: Some(1_000_000 / frame_size as u64),
                ..report.sizes[0].clone()
            })
            .collect();
        let m = Measured {
            report,
            dut_report: Some(DutReport::from_value(
                serde_json::json!({"cycles": {"rx": 120}}),
            )),
            topology: "namespaces (test)".into(),
            failure: None,
        };
        (options, m)
    }

    #[test]
    fn a_run_drawn_from_its_points_is_the_file_it_measured_and_redraws_byte_for_byte() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("rfc2544");
        // Asked largest first: the tables keep the order asked, not the keys' order.
        let (options, m) = measured(&out, &[1518, 64, 512]);
        write(&options, &m).unwrap();
        draw(&out).unwrap();
        let file = Rfc2544File::new(&options, &m.report, m.dut_report.clone(), &m.topology);
        assert_eq!(
            std::fs::read_to_string(out.join(RESULTS)).unwrap(),
            file.text()
        );
        let drawn = [
            "rfc2544.json",
            "rfc2544.csv",
            "report.md",
            "fig2-throughput.svg",
        ];
        let before: Vec<Vec<u8>> = drawn
            .iter()
            .map(|f| std::fs::read(out.join(f)).unwrap())
            .collect();
        for f in drawn {
            std::fs::remove_file(out.join(f)).unwrap();
        }
        match Folder::open(&out, &crate::STUDIES).unwrap() {
            Folder::Study { kind, .. } => assert_eq!(kind, StudyKind::Rfc2544),
            Folder::Runs(_) => panic!("an rfc2544 folder"),
        }
        redraw(&out).unwrap();
        let after: Vec<Vec<u8>> = drawn
            .iter()
            .map(|f| std::fs::read(out.join(f)).unwrap())
            .collect();
        assert!(before == after, "the redrawn files differ");
        // Continuing it keeps its finished sizes, and refuses other options naming the flag.
        let mut again = options.clone();
        again.resume = true;
        let mut kept: Vec<usize> = earlier(&again)
            .unwrap()
            .iter()
            .map(|s| s.frame_size)
            .collect();
        kept.sort();
        assert_eq!(kept, [64, 512, 1518]);
        again.fwd_batch = 8;
        let refused = earlier(&again).unwrap_err().to_string();
        assert!(
            refused.contains("--fwd-batch 16 (fwd_batch), not 8"),
            "{refused}"
        );
    }

    #[test]
    fn the_gates_verdicts_go_into_rfc2544_json_and_the_report_as_check_decides_them() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("gated");
        // NDRs of 1e6/size: 15 625 pps at 64 bytes, 1953 at 512.
        let (mut options, m) = measured(&out, &[64, 512]);
        let gates = ["ndr>=10k", "pdr>=1k"];
        options.assertions = gates.iter().map(|g| g.parse().unwrap()).collect();
        write(&options, &m).unwrap();
        draw(&out).unwrap();
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join(RESULTS)).unwrap()).unwrap();
        let verdicts: Vec<(&str, &str, &str)> = json["assertions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                (
                    v["run"].as_str().unwrap(),
                    v["assertion"].as_str().unwrap(),
                    v["verdict"].as_str().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            verdicts,
            [
                ("64 B", "ndr>=10k", "pass"),
                ("64 B", "pdr>=1k", "inconclusive"),
                ("512 B", "ndr>=10k", "fail"),
                ("512 B", "pdr>=1k", "inconclusive"),
            ]
        );
        let report = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(report.contains("## Gates: fail\n"), "{report}");
        assert!(report.contains("\n- PASS ndr>=10k [64 B]: "), "{report}");
        assert!(report.contains("\n- FAIL ndr>=10k [512 B]: "), "{report}");
        // `latlab check` on the folder decides the same, from the same sizes.
        let checked = crate::check(&latlab_study::check::CheckOptions {
            dir: out.clone(),
            assertions: options.assertions.clone(),
            junit: None,
        })
        .unwrap();
        let stored: Vec<latlab_lab::gate::AssertionVerdict> =
            serde_json::from_value(json["assertions"].clone()).unwrap();
        assert_eq!(checked, stored);
        // Redrawn byte for byte; a run without gates writes no `assertions` key.
        let (json_before, md_before) = (
            std::fs::read(out.join(RESULTS)).unwrap(),
            std::fs::read(out.join("report.md")).unwrap(),
        );
        redraw(&out).unwrap();
        assert_eq!(std::fs::read(out.join(RESULTS)).unwrap(), json_before);
        assert_eq!(std::fs::read(out.join("report.md")).unwrap(), md_before);
        let plain = tmp.path().join("plain");
        let (options, m) = measured(&plain, &[64]);
        write(&options, &m).unwrap();
        draw(&plain).unwrap();
        let text = std::fs::read_to_string(plain.join(RESULTS)).unwrap();
        assert!(!text.contains("assertions"), "{text}");
        let report = std::fs::read_to_string(plain.join("report.md")).unwrap();
        assert!(!report.contains("## Gates"), "{report}");
    }

    #[test]
    fn a_folder_written_before_points_is_redrawn_as_it_was_and_resumed_into_points() {
        let tmp = tempfile::tempdir().unwrap();
        let out = tmp.path().join("old");
        std::fs::create_dir_all(&out).unwrap();
        let (options, m) = measured(&out, &[64, 128]);
        let file = Rfc2544File::new(&options, &m.report, m.dut_report.clone(), &m.topology);
        std::fs::write(out.join(RESULTS), file.text()).unwrap();
        folder::redraw(&out).unwrap();
        let before = std::fs::read(out.join("report.md")).unwrap();
        std::fs::remove_file(out.join("report.md")).unwrap();
        match Folder::open(&out, &crate::STUDIES).unwrap() {
            Folder::Study { kind, .. } => assert_eq!(kind, StudyKind::Rfc2544),
            Folder::Runs(_) => panic!("an rfc2544 folder"),
        }
        redraw(&out).unwrap();
        assert_eq!(std::fs::read(out.join("report.md")).unwrap(), before);
        assert!(!out.join("study.json").exists() && !out.join(points::FOLDER).exists());
        // --resume reads its sizes from rfc2544.json; what it writes then is points.
        let mut again = options.clone();
        again.resume = true;
        let kept: Vec<usize> = earlier(&again)
            .unwrap()
            .iter()
            .map(|s| s.frame_size)
            .collect();
        assert_eq!(kept, [64, 128]);
        write(&again, &m).unwrap();
        draw(&out).unwrap();
        assert_eq!(
            std::fs::read_to_string(out.join(RESULTS)).unwrap(),
            file.text()
        );
        assert_eq!(
            StudyFile::read(&out).unwrap().unwrap().kind,
            StudyKind::Rfc2544
        );
    }
}
