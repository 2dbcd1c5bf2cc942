//! `report.md` of the emulator study, and [`write()`], which writes it and the plots from the
//! points folder.

use std::path::{Path, PathBuf};

use super::analysis::Analysis;
use super::figures::{accuracy_svg, rate_svg, trace_svg};
use super::tables;
use crate::StudyError;
use latlab_lab::results::write_atomic;

/// Reads every `points/*.json` under `out`, writes `report.md`, `accuracy.svg`,
/// `forwarding-rate.svg` (when there are forwarding-rate points) and `per-packet.svg` (when a
/// point kept its trace) into `out`; returns the path of `report.md`.
///
/// It reads nothing but the point files, so it draws the same artefacts again from any
/// results folder of the study; `topology` is the lab's description for the report.
pub fn write(out: &Path, topology: &str) -> Result<PathBuf, StudyError> {
    let a = Analysis::load(out)?;
    let figure = |file: &str| {
        let file = file.to_string();
        move |reason| StudyError::Figure { file, reason }
    };
    let mut md = String::new();
    md.push_str("# Link emulator study\n\n");
    md.push_str(&format!("Topology: {topology}. Round trips of latlab probes, client → server → client; delays are on the client→server direction only.\n\n"));
    md.push_str(&tables::added_latency(&a));
    md.push_str(&tables::accuracy(&a));
    md.push_str(&tables::release_target(&a));
    md.push_str(&tables::loss_models(&a));
    md.push_str(&crate::report::lost_section(
        a.points.iter().map(|p| {
            let rate = latlab_lab::units::format_rate(p.rate_pps);
            let delay = latlab_lab::units::format_duration_ns(p.delay_ns);
            let label = format!("{}, delay {delay}, {rate}", p.path);
            (label, p.run.lost_by_cause.as_ref())
        }),
        |l| l.text(),
    ));
    md.push_str("\n![accuracy](accuracy.svg)\n\n");
    md.push_str(&tables::forwarding_rate(&a));
    if !a.rate_points.is_empty() {
        md.push_str("\n![forwarding rate](forwarding-rate.svg)\n");
        let svg = rate_svg(&a.rate_points).map_err(figure("forwarding-rate.svg"))?;
        write_atomic(&out.join("forwarding-rate.svg"), svg.as_bytes())?;
    }
    if !a.skipped.is_empty() {
        md.push_str("\nSkipped point files:\n");
        for s in &a.skipped {
            md.push_str(&format!("- {s}\n"));
        }
    }
    let traced = a.traced();
    if !traced.is_empty() {
        md.push_str("\n## Per-packet latency with a 100 µs delay (2 ms of the run)\n\n![per-packet latency](per-packet.svg)\n");
        let svg = trace_svg(&traced).map_err(figure("per-packet.svg"))?;
        write_atomic(&out.join("per-packet.svg"), svg.as_bytes())?;
    }
    let svg = accuracy_svg(&a.accuracy_series()).map_err(figure("accuracy.svg"))?;
    write_atomic(&out.join("accuracy.svg"), svg.as_bytes())?;
    let report = out.join("report.md");
    write_atomic(&report, md.as_bytes())?;
    Ok(report)
}
