//! `report.md` of the bufferbloat study, and [`write()`], which writes it and the figures from
//! the points folder.

use std::path::{Path, PathBuf};

use super::analysis::Analysis;
use super::{conclusions, figures, tables};
use crate::StudyError;
use latlab_lab::results::write_atomic;

/// Reads every `points/*.json` under `out`, writes `report.md`, `p99-by-queue.svg` and
/// `goodput-vs-p99.svg` into `out`; returns the path of `report.md`.
///
/// It reads nothing but the point files, so it draws the same artefacts again from any
/// results folder of the study; `topology` is the lab's description for the report.
pub fn write(out: &Path, topology: &str) -> Result<PathBuf, StudyError> {
    let a = Analysis::load(out)?;
    let md = markdown(&a, topology);
    let figure = |file: &str| {
        let file = file.to_string();
        move |reason| StudyError::Figure { file, reason }
    };
    let svg = figures::p99_svg(&a).map_err(figure("p99-by-queue.svg"))?;
    write_atomic(&out.join("p99-by-queue.svg"), svg.as_bytes())?;
    let svg = figures::goodput_svg(&a).map_err(figure("goodput-vs-p99.svg"))?;
    write_atomic(&out.join("goodput-vs-p99.svg"), svg.as_bytes())?;
    let report = out.join("report.md");
    write_atomic(&report, md.as_bytes())?;
    Ok(report)
}

/// The text of `report.md`.
pub(super) fn markdown(a: &Analysis, topology: &str) -> String {
    let mut md = String::from("# Bufferbloat study\n\n");
    md.push_str(&format!("Topology: {topology}.\n\n"));
    if let Some(p) = a.points.first() {
        let model = p
            .game
            .setup
            .traffic
            .as_deref()
            .unwrap_or("constant-rate probes");
        md.push_str(&format!(
            "The game stream ({model}) goes from the client to a reflector in the server: out \
             through the bottleneck with the bulk flows, back over the unloaded direction; its \
             round trip's growth over the unloaded point is the queue's delay. The bulk flows \
             are kernel TCP connections from the client to the server; their goodput is what \
             the receivers read while the game stream ran. A queue's sojourn time is the \
             emulator's own record of the bottleneck queue over the point's whole run, the \
             flows' warm-up included (\"not recorded\" where the emulator kept none: a \
             point measured before tail drop's queue recorded it).\n\n"
        ));
        if a.points
            .iter()
            .any(|p| super::analysis::discipline_of(&p.queue) == "dualpi2")
        {
            md.push_str(
                "Under dualpi2 the game stream is sent ECT(1), L4S's identifier, so it takes \
                 DualPI2's L4S queue while the bulk flows take the classic one; the \
                 conclusions give each queue's sojourn.\n\n",
            );
        }
        if p.return_delay_ns > 0 {
            md.push_str(&format!(
                "The server→client direction adds {} ms to every round trip (`--delay`, the \
                 path's base round trip).\n\n",
                p.return_delay_ns as f64 / 1e6
            ));
        }
    }
    md.push_str("## Points\n\n");
    md.push_str(&tables::points(a));
    md.push_str(&crate::report::lost_section(
        a.points.iter().map(|p| {
            let flows = p.cc.as_ref().map(|cc| format!("{} {cc}", p.bulk.len()));
            let label = format!("{}, {}", p.queue, flows.as_deref().unwrap_or("unloaded"));
            (label, p.game.lost_by_cause.as_ref())
        }),
        |l| l.text(),
    ));
    if !a.left_out.is_empty() {
        md.push_str("\nLeft out:\n");
        for l in &a.left_out {
            md.push_str(&format!("- {}: {}\n", l.queue, l.reason));
        }
    }
    md.push_str("\n## Targets\n\n");
    md.push_str(&tables::targets(&conclusions::targets(a)));
    md.push_str("\n## Conclusions\n\n");
    let findings = conclusions::findings(a);
    if findings.is_empty() {
        md.push_str("No point with bulk flows was measured.\n");
    }
    for line in findings {
        md.push_str(&format!("- {line}\n"));
    }
    md.push_str("\n## Figures\n\n![game p99 by queue](p99-by-queue.svg)\n\n");
    md.push_str("![goodput against game p99](goodput-vs-p99.svg)\n");
    if !a.skipped.is_empty() {
        md.push_str("\nSkipped point files:\n");
        for s in &a.skipped {
            md.push_str(&format!("- {s}\n"));
        }
    }
    md
}
