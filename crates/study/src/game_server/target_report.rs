//! The artefacts of a target study ([`super::target`]), drawn from its points alone: Table I
//! (`table1.md`, `table1.csv`), Figure 2 (latency against offered load), Figure 3 (the
//! latency CCDFs at Table I's loads), the protocol's counts per point and `report.md`.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use latlab_lab::plot::{ccdf_svg, lines_svg, Line, ROUND_TRIP_AXIS};
use latlab_lab::results::write_atomic;
use latlab_stats::{ccdf, Estimate, LatencyHistogram, Quantile};

use super::target::{load_text, TargetPoint, PREFIX};
use super::{DROP_THRESHOLD, QUANTILES};
use crate::{points, StudyError};

/// One target point read back.
#[derive(Debug)]
pub(super) struct Loaded {
    pub(super) key: String,
    pub(super) point: TargetPoint,
    pub(super) hist: Option<LatencyHistogram>,
}

/// Every target point of a folder: the sweep by load, the table by fraction, and the files
/// that did not read.
#[derive(Debug, Default)]
pub(super) struct Points {
    pub(super) sweep: Vec<Loaded>,
    pub(super) table: Vec<Loaded>,
    pub(super) skipped: Vec<String>,
}

/// Whether `dir`'s points folder holds a target study's points.
pub fn holds_target_points(dir: &Path) -> bool {
    let prefix = format!("{PREFIX}-");
    std::fs::read_dir(dir.join(points::FOLDER)).is_ok_and(|entries| {
        entries.filter_map(Result::ok).any(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(&prefix) && n.ends_with(".json"))
        })
    })
}

pub(super) fn load(out: &Path) -> Result<Points, StudyError> {
    let files = points::load(out)?;
    let mut all = Points::default();
    for f in files.files {
        if !f.key.starts_with(&format!("{PREFIX}-")) {
            all.skipped
                .push(format!("{}: not a point of a target study", f.file));
            continue;
        }
        let parsed = f
            .text
            .clone()
            .and_then(|t| serde_json::from_str::<TargetPoint>(&t).map_err(|e| e.to_string()));
        let point = match parsed {
            Ok(p) if p.load_pps.is_finite() && p.loss_ratio.is_finite() => p,
            Ok(_) => {
                all.skipped
                    .push(format!("{}: load or loss is not a finite number", f.file));
                continue;
            }
            Err(reason) => {
                all.skipped.push(format!("{}: {reason}", f.file));
                continue;
            }
        };
        let hist = match f.histogram() {
            Some(Ok(h)) => Some(h),
            Some(Err(e)) => {
                all.skipped.push(format!(
                    "{}.hlog: {e} (the point's JSON is used without it)",
                    f.key
                ));
                None
            }
            None => None,
        };
        let loaded = Loaded {
            key: f.key.clone(),
            point,
            hist,
        };
        match loaded.point.phase.as_str() {
            "sweep" => all.sweep.push(loaded),
            "table" => all.table.push(loaded),
            other => all
                .skipped
                .push(format!("{}: phase {other:?} is not sweep or table", f.file)),
        }
    }
    all.sweep
        .sort_by(|a, b| a.point.load_pps.total_cmp(&b.point.load_pps));
    all.table.sort_by(|a, b| {
        let f = |l: &Loaded| l.point.load_fraction.unwrap_or(f64::NAN);
        f(a).total_cmp(&f(b))
            .then(a.point.load_pps.total_cmp(&b.point.load_pps))
    });
    Ok(all)
}

/// The lowest sweep load with more than [`DROP_THRESHOLD`] unanswered.
pub(super) fn first_drop(sweep: &[Loaded]) -> Option<f64> {
    sweep
        .iter()
        .find(|l| l.point.loss_ratio > DROP_THRESHOLD)
        .map(|l| l.point.load_pps)
}

fn mean_us(p: &TargetPoint) -> Option<f64> {
    (p.latency_ns.count > 0).then(|| p.latency_ns.mean_ns / 1000.0)
}

fn pct_us(p: &TargetPoint, q: &Quantile) -> String {
    match p.latency_ns.percentile(q.key).map(|e| &e.estimate) {
        Some(Estimate::Value { value_ns, .. }) => format!("{:.1}", *value_ns as f64 / 1000.0),
        Some(Estimate::TooFewSamples { .. }) => "too few samples".into(),
        None => "n/a".into(),
    }
}

fn pct_ns(p: &TargetPoint, q: &Quantile) -> String {
    match p.latency_ns.percentile(q.key).map(|e| &e.estimate) {
        Some(Estimate::Value { value_ns, .. }) => value_ns.to_string(),
        _ => String::new(),
    }
}

fn fraction_text(p: &TargetPoint) -> String {
    p.load_fraction
        .map_or("?".into(), |f| format!("{:.0}%", f * 100.0))
}

/// Table I in Markdown: avg, std dev, p50/95/99/99.9 at each table load.
pub(super) fn table1_md(table: &[Loaded]) -> String {
    if table.is_empty() {
        return "No table points were measured.\n".into();
    }
    let mut s = String::from("| Load | Offered [req/s] | Unanswered | Avg [µs] | Std dev [µs] |");
    for q in &QUANTILES {
        let _ = write!(s, " {} [µs] |", q.label);
    }
    s.push_str("\n|---|---:|---:|---:|---:|");
    s.push_str(&"---:|".repeat(QUANTILES.len()));
    s.push('\n');
    for l in table {
        let p = &l.point;
        let _ = write!(
            s,
            "| {} | {} | {:.2}% | {} | {} |",
            fraction_text(p),
            load_text(p.load_pps),
            p.loss_ratio * 100.0,
            mean_us(p).map_or("n/a".into(), |m| format!("{m:.1}")),
            if p.latency_ns.count > 0 {
                format!("{:.1}", p.latency_ns.stddev_ns / 1000.0)
            } else {
                "n/a".into()
            },
        );
        for q in &QUANTILES {
            let _ = write!(s, " {} |", pct_us(p, q));
        }
        s.push('\n');
    }
    s
}

/// Table I as CSV, ns.
pub(super) fn table1_csv(table: &[Loaded]) -> String {
    let mut s = String::from(
        "target,protocol,load_fraction,load_pps,sent,unanswered,loss_ratio,mean_ns,stddev_ns",
    );
    for q in &QUANTILES {
        let _ = write!(s, ",{}_ns", q.key);
    }
    s.push('\n');
    for l in table {
        let p = &l.point;
        let _ = write!(
            s,
            "{},{},{},{},{},{},{},{:.0},{:.0}",
            p.target,
            p.protocol,
            p.load_fraction.map_or(String::new(), |f| f.to_string()),
            p.load_pps,
            p.sent,
            p.unanswered,
            p.loss_ratio,
            p.latency_ns.mean_ns,
            p.latency_ns.stddev_ns
        );
        for q in &QUANTILES {
            let _ = write!(s, ",{}", pct_ns(p, q));
        }
        s.push('\n');
    }
    s
}

/// Figure 2: average and p99 latency against offered load, over the sweep.
pub(super) fn fig2(sweep: &[Loaded]) -> Result<String, String> {
    let mean: Vec<(f64, f64)> = sweep
        .iter()
        .filter_map(|l| Some((l.point.load_pps, mean_us(&l.point)?)))
        .collect();
    let p99: Vec<(f64, f64)> = sweep
        .iter()
        .filter_map(|l| match l.point.latency_ns.percentile("p99")?.estimate {
            Estimate::Value { value_ns, .. } => Some((l.point.load_pps, value_ns as f64 / 1000.0)),
            Estimate::TooFewSamples { .. } => None,
        })
        .collect();
    // The first drop, a point of its own on the average's line.
    let drop: Vec<(f64, f64)> = first_drop(sweep)
        .and_then(|d| mean.iter().find(|m| m.0 == d).copied())
        .into_iter()
        .collect();
    let lines: Vec<Line> = vec![
        ("average".into(), mean),
        ("p99".into(), p99),
        ("first drop (more than 5% unanswered)".into(), drop),
    ];
    lines_svg(
        "Latency vs offered load",
        "offered load (requests/s)",
        "round-trip latency (µs)",
        &lines,
    )
}

/// Figure 3: the latency CCDFs of Table I's points.
pub(super) fn fig3(table: &[Loaded]) -> Result<String, String> {
    let series: Vec<_> = table
        .iter()
        .filter_map(|l| {
            let h = l.hist.as_ref()?;
            (!h.is_empty()).then(|| {
                (
                    format!(
                        "{} ({} req/s)",
                        fraction_text(&l.point),
                        load_text(l.point.load_pps)
                    ),
                    ccdf(h),
                )
            })
        })
        .collect();
    if series.is_empty() {
        return Err("no table point has a latency histogram with a sample".into());
    }
    ccdf_svg("Latency CCDF at Table I's loads", ROUND_TRIP_AXIS, &series)
}

/// Per point: requests, answers and the protocol's own counts.
pub(super) fn counters_md(all: &[&Loaded]) -> String {
    let mut s = String::from(
        "| Point | Sent | Answered | Unanswered | Unsent | Late | Duplicate | Wrong id | Wrong source | Malformed | Mismatch | Outcomes |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|\n",
    );
    let causes = |m: &std::collections::BTreeMap<String, u64>| {
        let v: Vec<String> = m
            .iter()
            .filter(|(_, n)| **n > 0)
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        if v.is_empty() {
            "0".to_string()
        } else {
            v.join(", ")
        }
    };
    for l in all {
        let p = &l.point;
        let _ = write!(
            s,
            "| {} | {} | {} | {} | {} |",
            l.key, p.sent, p.answered, p.unanswered, p.unsent
        );
        match &p.protocol_counts {
            Some(c) => {
                let _ = writeln!(
                    s,
                    " {} | {} | {} | {} | {} | {} | {} |",
                    c.late,
                    c.duplicate,
                    c.wrong_id,
                    c.wrong_source,
                    causes(&c.malformed),
                    causes(&c.mismatch),
                    causes(&c.outcomes)
                );
            }
            None => s.push_str(" – | – | – | – | – | – | latlab probes |\n"),
        }
    }
    s
}

/// Writes every artefact of a target study into `out` from its points; returns `report.md`.
pub fn write(out: &Path, topology: &str) -> Result<PathBuf, StudyError> {
    let pts = load(out)?;
    let mut figures: Vec<(String, String)> = Vec::new();
    let mut missing: Vec<String> = Vec::new();
    let table_md = table1_md(&pts.table);
    write_atomic(&out.join("table1.md"), table_md.as_bytes())?;
    write_atomic(&out.join("table1.csv"), table1_csv(&pts.table).as_bytes())?;
    if pts.sweep.is_empty() {
        missing.push("fig2-latency-vs-load.svg: no sweep points".into());
    } else {
        let name = "fig2-latency-vs-load.svg";
        let svg = fig2(&pts.sweep).map_err(|reason| StudyError::Figure {
            file: name.into(),
            reason,
        })?;
        write_atomic(&out.join(name), svg.as_bytes())?;
        figures.push(("Figure 2: latency vs offered load".into(), name.into()));
    }
    match fig3(&pts.table) {
        Ok(svg) => {
            write_atomic(&out.join("fig3-ccdf.svg"), svg.as_bytes())?;
            figures.push((
                "Figure 3: latency CCDFs at Table I's loads".into(),
                "fig3-ccdf.svg".into(),
            ));
        }
        Err(why) => missing.push(format!("fig3-ccdf.svg: {why}")),
    }
    let report = report_md(&pts, topology, &table_md, &figures, &missing);
    let path = out.join("report.md");
    write_atomic(&path, report.as_bytes())?;
    Ok(path)
}

fn report_md(
    pts: &Points,
    topology: &str,
    table_md: &str,
    figures: &[(String, String)],
    missing: &[String],
) -> String {
    let mut s = String::from("# Game-server latency study: a server latlab did not start\n\n");
    let first = pts.sweep.first().or(pts.table.first()).map(|l| &l.point);
    match first {
        Some(p) => {
            let _ = writeln!(s, "- server: {}", p.target);
            let _ = writeln!(s, "- protocol: {}", p.protocol);
        }
        None => s.push_str("- server: unknown (no point was measured)\n"),
    }
    let _ = writeln!(s, "- lab: {topology}");
    match first.and_then(|p| p.link.as_deref()) {
        Some(link) => {
            let _ = writeln!(s, "- link: {link} (emulated by the `latlab run` the study ran under)\n");
        }
        None => s.push_str(
            "- link: none emulated; the requests took the path from here to the server as it is\n\n",
        ),
    }
    s.push_str("After Emmerich et al., sections IV–V, against a server of its own: only the offered load varies. The server's client count, I/O mode and receive buffer are its own and not latlab's to set. Latency is the round trip from each request's intended send time to its answer; a request never answered is the loss.\n");

    s.push_str("\n## First-drop load\n\n");
    let loads: Vec<String> = pts
        .sweep
        .iter()
        .map(|l| load_text(l.point.load_pps))
        .collect();
    if pts.sweep.is_empty() {
        s.push_str("No sweep points were measured.\n");
    } else {
        let _ = writeln!(
            s,
            "Sweep loads (requests/s): {}; it ends one load past the first with more than {:.0}% unanswered.\n",
            loads.join(", "),
            DROP_THRESHOLD * 100.0
        );
        match first_drop(&pts.sweep) {
            Some(d) => {
                let below = pts
                    .sweep
                    .iter()
                    .filter(|l| l.point.load_pps < d)
                    .map(|l| l.point.load_pps)
                    .reduce(f64::max);
                let _ = write!(s, "First drop: **{} requests/s**", load_text(d));
                match below {
                    Some(b) => {
                        let _ = writeln!(
                            s,
                            " (the load below it, {}/s, answered within the threshold).",
                            load_text(b)
                        );
                    }
                    None => s.push_str(
                        " (already the lowest load measured: not bracketed from below).\n",
                    ),
                }
            }
            None => {
                let _ = writeln!(
                    s,
                    "No first drop up to {}/s: Table I's loads are fractions of that highest load.",
                    loads.last().map_or("?", String::as_str)
                );
            }
        }
    }
    // The protocol's note on the server's own limit at the first-drop load, if it has one.
    let limit = first_drop(&pts.sweep).and_then(|d| {
        let at = pts.sweep.iter().find(|l| l.point.load_pps == d)?;
        at.point.protocol_counts.as_ref()?.limit.as_deref()
    });
    if let Some(limit) = limit {
        let _ = writeln!(
            s,
            "\nThe first drop is the server's own limiter, not its capacity: {limit}"
        );
    }

    super::report::table_and_figures(&mut s, table_md, figures, missing);

    s.push_str("\n## Counts per point\n\n");
    let all: Vec<&Loaded> = pts.sweep.iter().chain(&pts.table).collect();
    if all.is_empty() {
        s.push_str("No points.\n");
    } else {
        s.push_str(&counters_md(&all));
    }
    s.push_str(&crate::report::lost_section(
        all.iter()
            .map(|l| (l.key.clone(), l.point.lost_by_cause.as_ref())),
        |l| {
            l.text_as(
                "lost",
                ["sender's socket/stack", "server's socket", "server"],
            )
        },
    ));
    super::report::skipped_section(&mut s, &pts.skipped);
    s
}

#[cfg(test)]
#[path = "target_report_tests.rs"]
mod tests;
