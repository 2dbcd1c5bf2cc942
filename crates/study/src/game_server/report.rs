//! `report.md` of the game-server study, and [`write()`], which writes every artefact from the
//! points folder.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::analysis::{buf_label, first_drop_text, load_points, LoadedAll, Study};
use super::conclusions::conclusions;
use super::figures::{fig2, fig3, fig4};
use super::tables::{flood_md, table1_csv, table1_md};
use super::{DROP_THRESHOLD, LOSSLESS_THRESHOLD};
use crate::StudyError;
use latlab_lab::results::write_atomic;

/// Reads every `points/*.json` (+ `.hlog`) under `out`, writes the artefacts into `out`
/// (Table I, the figures, the flood table, `report.md`), returns the path of `report.md`.
///
/// It reads nothing but the point files, so it draws the same artefacts again from any
/// results folder of the study; `topology` is the lab's description for the report.
pub fn write(out: &Path, topology: &str) -> Result<PathBuf, StudyError> {
    let loaded = load_points(out)?;
    let mut figures: Vec<(String, String)> = Vec::new();
    let mut missing_figures: Vec<String> = Vec::new();

    if loaded.points.is_empty() {
        let report = empty_report(topology, &loaded);
        let path = out.join("report.md");
        write_atomic(&path, report.as_bytes())?;
        return Ok(path);
    }
    let study = Study::new(&loaded.points);

    // Table I.
    let table_md = table1_md(&study);
    write_atomic(&out.join("table1.md"), table_md.as_bytes())?;
    write_atomic(&out.join("table1.csv"), table1_csv(&study).as_bytes())?;

    // Figure 2, per I/O mode.
    for io_mode in study.ios() {
        let name = if io_mode == "socket" {
            "fig2-latency-vs-load.svg".to_string()
        } else {
            format!("fig2-latency-vs-load-{io_mode}.svg")
        };
        match fig2(&study, &io_mode) {
            Some(svg) => {
                let svg = svg.map_err(|reason| StudyError::Figure {
                    file: name.clone(),
                    reason,
                })?;
                write_atomic(&out.join(&name), svg.as_bytes())?;
                figures.push((
                    format!("Figure 2 ({io_mode}): average latency vs offered load"),
                    name,
                ));
            }
            None => {
                missing_figures.push(format!("{name}: no sweep points with I/O mode {io_mode}"))
            }
        }
    }
    if !study.ios().iter().any(|i| i == "socket") {
        missing_figures
            .push("fig2-latency-vs-load.svg: no sweep points with I/O mode socket".into());
    }
    // Figure 3.
    match fig3(&study) {
        Ok(svg) => {
            write_atomic(&out.join("fig3-histogram.svg"), svg.as_bytes())?;
            figures.push((
                "Figure 3: latency histogram, 0.5 µs bins".into(),
                "fig3-histogram.svg".into(),
            ));
        }
        Err(why) => missing_figures.push(format!("fig3-histogram.svg: {why}")),
    }
    // Figure 4.
    match fig4(&study) {
        Ok(svg) => {
            write_atomic(&out.join("fig4-buffers.svg"), svg.as_bytes())?;
            figures.push((
                "Figure 4: buffer size vs lossless load and overload latency".into(),
                "fig4-buffers.svg".into(),
            ));
        }
        Err(why) => missing_figures.push(format!("fig4-buffers.svg: {why}")),
    }
    // The flood.
    let flood = flood_md(&study);
    write_atomic(&out.join("flood.md"), flood.as_bytes())?;

    let report = report_md(
        &study,
        &loaded,
        topology,
        &table_md,
        &flood,
        &figures,
        &missing_figures,
    );
    let path = out.join("report.md");
    write_atomic(&path, report.as_bytes())?;
    Ok(path)
}

// ---------------------------------------------------------------------------------------------
// report.md

fn empty_report(topology: &str, loaded: &LoadedAll) -> String {
    let mut s = String::from("# Game-server latency study\n\n");
    let _ = writeln!(s, "Topology: {topology}\n");
    if loaded.no_folder {
        s.push_str("No points were measured: there is no `points/` folder.\n");
    } else {
        s.push_str("No points were measured: `points/` holds no readable point file.\n");
    }
    skipped_section(&mut s, &loaded.skipped);
    s
}

/// report.md's list of the point files it skipped, when it skipped any (the model server's
/// study and a target study alike).
pub(super) fn skipped_section(s: &mut String, skipped: &[String]) {
    if skipped.is_empty() {
        return;
    }
    s.push_str("\n## Skipped files\n\n");
    for k in skipped {
        let _ = writeln!(s, "- skipped: {k}");
    }
}

/// report.md's Table I and Figures sections (the model server's study and a target study
/// alike): the table, then each figure drawn and each one not drawn, with why.
pub(super) fn table_and_figures(
    s: &mut String,
    table_md: &str,
    figures: &[(String, String)],
    missing: &[String],
) {
    s.push_str("\n## Table I\n\n");
    s.push_str(table_md);
    s.push_str("\n(also `table1.md`, `table1.csv`)\n");
    s.push_str("\n## Figures\n\n");
    for (caption, file) in figures {
        let _ = writeln!(s, "![{caption}]({file})\n");
    }
    for m in missing {
        let _ = writeln!(s, "- not drawn: {m}");
    }
}

fn join_kpps(loads: &BTreeSet<u64>) -> String {
    loads
        .iter()
        .map(|&l| format!("{:.1}", l as f64 / 1000.0))
        .collect::<Vec<_>>()
        .join(", ")
}

fn report_md(
    study: &Study<'_>,
    loaded: &LoadedAll,
    topology: &str,
    table_md: &str,
    flood: &str,
    figures: &[(String, String)],
    missing_figures: &[String],
) -> String {
    let mut s = String::from("# Game-server latency study\n\n");
    let _ = writeln!(s, "After Emmerich et al., sections IV–V: a game server copies each incoming packet to every client; latency is the time until the last client has its copy.\n");
    let _ = writeln!(s, "Topology: {topology}\n");

    // How the study was run.
    s.push_str("## How the study was run\n\n");
    let count = |ph: &str| study.all.iter().filter(|l| l.point.phase == ph).count();
    let _ = writeln!(
        s,
        "- points: {} ({} sweep, {} table, {} flood, {} other)",
        study.all.len(),
        count("sweep"),
        study.table.len(),
        study.flood.len(),
        study.other.len()
    );
    let ios = study.ios();
    let all_sweep = study.sweep.values().flatten();
    let bufs: BTreeSet<usize> = study.sweep.keys().map(|k| k.2).collect();
    let clients: BTreeSet<u32> = study.sweep.keys().map(|k| k.3).collect();
    let loads: BTreeSet<u64> = all_sweep.map(|l| l.point.load_pps.round() as u64).collect();
    if !ios.is_empty() {
        let _ = writeln!(s, "- server I/O modes: {}", ios.join(", "));
        let _ = writeln!(
            s,
            "- receive buffers (KiB): {}",
            bufs.iter()
                .map(|&b| buf_label(b))
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            s,
            "- client counts: {}",
            clients
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(s, "- offered loads of the sweep (kpps): {} (each series stops two loads after its first drop)", join_kpps(&loads));
    }
    let mut spans: Vec<f64> = study
        .all
        .iter()
        .filter(|l| l.point.achieved_pps > 0.0 && l.point.sent > 1)
        .map(|l| l.point.sent as f64 / l.point.achieved_pps)
        .collect();
    spans.sort_by(f64::total_cmp);
    if let Some(&median) = spans.get(spans.len() / 2) {
        let _ = writeln!(s, "- measured time per point: about {median:.2} s after warm-up (inferred: probes sent ÷ achieved rate, median over points)");
    }
    let mut stalls = study
        .all
        .iter()
        .filter_map(|l| l.point.host_stalls.as_ref());
    if let Some(first) = stalls.next() {
        let mut all = first.clone();
        stalls.for_each(|h| all.merge(h));
        let _ = writeln!(
            s,
            "- {} (the server's and the clients' loops, every point)",
            all.line()
        );
    }
    let _ = writeln!(
        s,
        "- first drop: copy loss > {:.0}%; lossless: copy loss ≤ {:.1}%",
        DROP_THRESHOLD * 100.0,
        LOSSLESS_THRESHOLD * 100.0
    );

    // First-drop loads.
    s.push_str("\n## First-drop load\n\nThe lowest offered load of each sweep series with more than 5% of the copies lost.\n\n");
    if study.sweep.is_empty() {
        s.push_str("No sweep points were measured.\n");
    } else {
        s.push_str("| I/O | Buffer [KiB] | Clients | First-drop load |\n|---|---|---:|---:|\n");
        for ((_, io_mode, rcvbuf, clients), series) in &study.sweep {
            let _ = writeln!(
                s,
                "| {io_mode} | {} | {clients} | {} |",
                buf_label(*rcvbuf),
                first_drop_text(series)
            );
        }
    }

    table_and_figures(&mut s, table_md, figures, missing_figures);

    // The flood.
    s.push_str("\n## Flood\n\n");
    s.push_str(flood);

    s.push_str(&crate::report::lost_section(
        study
            .all
            .iter()
            .map(|l| (l.key.clone(), l.point.lost_by_cause.as_ref())),
        |l| {
            l.text_as(
                "copies lost",
                ["clients' sockets", "server's socket", "server"],
            )
        },
    ));

    // Conclusions.
    s.push_str("\n## Conclusions from this run\n\n");
    for (i, c) in conclusions(study).iter().enumerate() {
        let _ = writeln!(s, "{}. {c}", i + 1);
    }
    skipped_section(&mut s, &loaded.skipped);
    s
}
