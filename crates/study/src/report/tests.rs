use std::collections::BTreeMap;

use super::*;
use crate::{emulator, game_server, STUDIES};

/// [`super::redraw`] with this crate's studies.
fn redraw(dir: &Path) -> Result<Redrawn, StudyError> {
    super::redraw(dir, &STUDIES)
}

/// [`super::run`] with this crate's studies.
fn run(options: &ReportOptions) -> Result<Redrawn, StudyError> {
    super::run(options, &STUDIES)
}

/// Every file of `dir` but the points, by name, with its bytes.
fn artefacts(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

/// Writes a study's artefacts as its run does, deletes them, redraws the folder and
/// checks that every file came back as it was.
fn redrawn_as_written(out: &Path, kind: StudyKind) {
    StudyFile::new(kind, "namespaces (test)")
        .write(out)
        .unwrap();
    (entry(&STUDIES, kind).draw)(out, "namespaces (test)").unwrap();
    let written = artefacts(out);
    assert!(written.len() > 3, "{:?}", written.keys());
    for name in written.keys().filter(|n| *n != StudyFile::NAME) {
        fs::remove_file(out.join(name)).unwrap();
    }
    let Redrawn::Study {
        kind: seen, report, ..
    } = redraw(out).unwrap()
    else {
        panic!("{} is a study folder", out.display());
    };
    assert_eq!((seen, report), (kind, out.join("report.md")));
    assert_eq!(artefacts(out), written, "the redrawn files differ");
}

#[test]
fn a_game_server_study_is_redrawn_as_its_run_wrote_it() {
    let tmp = tempfile::tempdir().unwrap();
    game_server::tests::synthetic_study(tmp.path());
    redrawn_as_written(tmp.path(), StudyKind::GameServer);
}

#[test]
fn an_emulator_study_is_redrawn_as_its_run_wrote_it() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    emulator::tests::synthetic_study(&out);
    redrawn_as_written(&out, StudyKind::Emulator);
}

#[test]
fn a_study_folder_from_before_study_json_is_recognised_by_its_points() {
    let tmp = tempfile::tempdir().unwrap();
    let game = tmp.path().join("game");
    game_server::tests::synthetic_study(&game);
    game_server::report::write(&game, "loopback 127.0.0.1 (old)").unwrap();
    let emu = tmp.path().join("emu");
    emulator::tests::synthetic_study(&emu);
    emulator::report::write(&emu, "namespaces a (198.18.0.1) — b").unwrap();
    for (dir, kind, topology) in [
        (&game, StudyKind::GameServer, "loopback 127.0.0.1 (old)"),
        (&emu, StudyKind::Emulator, "namespaces a (198.18.0.1) — b"),
    ] {
        let before = fs::read_to_string(dir.join("report.md")).unwrap();
        match Folder::open(dir, &STUDIES).unwrap() {
            Folder::Study {
                kind: k,
                topology: t,
            } => {
                assert_eq!((k, t.as_str()), (kind, topology))
            }
            Folder::Runs(_) => {
                panic!("{} is a study folder", dir.display())
            }
        }
        redraw(dir).unwrap();
        assert_eq!(fs::read_to_string(dir.join("report.md")).unwrap(), before);
        // Without its report.md the lab is not known, and the report says so.
        fs::remove_file(dir.join("report.md")).unwrap();
        redraw(dir).unwrap();
        let report = fs::read_to_string(dir.join("report.md")).unwrap();
        assert!(report.contains(UNRECORDED_TOPOLOGY), "{report}");
    }
}

#[test]
fn a_gen_folder_gives_its_table_and_plot_again() {
    let tmp = tempfile::tempdir().unwrap();
    let mut summary = emulator::tests::run(40.0, 2000, 0, 1000.0);
    summary.setup.label = "1 kpps".into();
    fs::write(
        tmp.path().join("summary.json"),
        latlab_lab::results::summary_json(&summary),
    )
    .unwrap();
    let mut h = latlab_stats::LatencyHistogram::new();
    h.record(40_000);
    fs::write(
        tmp.path().join("ccdf.csv"),
        latlab_lab::results::ccdf_csv(&h).unwrap(),
    )
    .unwrap();
    let plot = tmp.path().join("again.svg");
    let options = ReportOptions {
        dir: tmp.path().to_path_buf(),
        plot: Some(plot.clone()),
    };
    let Redrawn::Runs { runs, plot: drawn } = run(&options).unwrap() else {
        panic!("a gen folder");
    };
    assert_eq!(runs.runs, [summary.clone()]);
    assert_eq!(runs.table(), latlab_lab::table::render(&[&summary]));
    assert_eq!(drawn.as_ref(), Some(&plot));
    assert!(fs::read_to_string(&plot).unwrap().starts_with("<svg"));
}

#[test]
fn a_plot_of_a_study_is_refused_before_anything_is_written() {
    let tmp = tempfile::tempdir().unwrap();
    game_server::tests::synthetic_study(tmp.path());
    let plot = tmp.path().join("plot.svg");
    let err = run(&ReportOptions {
        dir: tmp.path().to_path_buf(),
        plot: Some(plot.clone()),
    })
    .unwrap_err();
    assert!(matches!(err, StudyError::PlotOfStudy { .. }), "{err}");
    assert!(err.to_string().starts_with("--plot"), "{err}");
    assert!(!plot.exists() && !tmp.path().join("report.md").exists());
}

#[test]
fn a_folder_latlab_did_not_write_is_named_in_the_error() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir(tmp.path().join("points")).unwrap();
    fs::write(tmp.path().join("points").join("mine.json"), "{}").unwrap();
    let err = redraw(tmp.path()).unwrap_err();
    assert!(matches!(err, StudyError::UnknownFolder(_)), "{err}");
    assert!(
        err.to_string().contains(&tmp.path().display().to_string()),
        "{err}"
    );
}
