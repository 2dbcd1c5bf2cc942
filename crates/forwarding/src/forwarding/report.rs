//! `report.md` of the forwarding study and its figure, drawn from the points folder only:
//! Table I (throughput at 64 bytes, each DUT against the kernel's IP forwarding), Fig. 2
//! (NDR by frame size, one line per DUT) and Table II (cycles per packet by step, for the DUTs
//! that account their own cycles).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::DutPoint;
use crate::rfc2544::{CycleFigures, DutReport, StepCycles};
use latlab_lab::plot::{lines_svg, Line};
use latlab_lab::results::write_atomic;
use latlab_study::{points, StudyError};

/// The points of a forwarding study folder.
struct Loaded {
    /// One per DUT (Table I, Fig. 2, Table II).
    duts: Vec<DutPoint>,
    /// `latlab fwd` over AF_XDP at each batch size, smallest first.
    batches: Vec<DutPoint>,
    /// `latlab fwd` over AF_XDP in each poll mode, as measured.
    polls: Vec<DutPoint>,
    /// Files that did not read.
    skipped: Vec<String>,
    /// DUTs that could not run here, each with the reason.
    left_out: Vec<(String, String)>,
}

/// Every point of `out`.
fn load(out: &Path) -> Result<Loaded, StudyError> {
    let mut l = Loaded {
        duts: Vec::new(),
        batches: Vec::new(),
        polls: Vec::new(),
        skipped: Vec::new(),
        left_out: Vec::new(),
    };
    for f in points::load(out)?.files {
        match f
            .text
            .and_then(|t| serde_json::from_str::<DutPoint>(&t).map_err(|e| e.to_string()))
        {
            Ok(DutPoint {
                dut,
                left_out: Some(why),
                ..
            }) => l.left_out.push((dut, why)),
            Ok(p) if p.fwd_batch.is_some() => l.batches.push(p),
            Ok(p) if p.fwd_poll.is_some() => l.polls.push(p),
            Ok(p) => l.duts.push(p),
            Err(e) => l.skipped.push(format!("{}: {e}", f.path.display())),
        }
    }
    // The paper's order: the kernel first, the rest as measured.
    l.duts.sort_by_key(|p| p.dut != "kernel");
    l.batches.sort_by_key(|p| p.fwd_batch);
    Ok(l)
}

fn ndr_at(p: &DutPoint, size: usize) -> Option<u64> {
    p.sizes
        .iter()
        .find(|s| s.frame_size == size)
        .and_then(|s| s.ndr_pps)
}

fn mpps(pps: f64) -> String {
    format!("{:.3}", pps / 1e6)
}

/// Fig. 2: the NDR by frame size, one line per DUT, in Mpps.
fn figure2(duts: &[DutPoint]) -> Result<String, String> {
    let lines: Vec<Line> = duts
        .iter()
        .map(|p| {
            let pts = p
                .sizes
                .iter()
                .filter_map(|s| Some((s.frame_size as f64, s.ndr_pps? as f64 / 1e6)))
                .collect();
            (p.dut.clone(), pts)
        })
        .collect();
    lines_svg(
        "NDR by frame size (Fig. 2)",
        "frame size (bytes)",
        "NDR (Mpps)",
        &lines,
    )
}

/// Reads every point under `out`, writes `fig2-ndr.svg` and `report.md`; returns its path.
pub fn write(out: &Path, topology: &str) -> Result<PathBuf, StudyError> {
    let l = load(out)?;
    let svg = figure2(&l.duts).map_err(|reason| StudyError::Figure {
        file: "fig2-ndr.svg".into(),
        reason,
    })?;
    write_atomic(&out.join("fig2-ndr.svg"), svg.as_bytes())?;
    let mut md = markdown(&l, topology);
    md.push_str(&batch_section(&l.batches));
    md.push_str(&poll_section(&l.polls));
    let report = out.join("report.md");
    write_atomic(&report, md.as_bytes())?;
    Ok(report)
}

/// The report's text.
fn markdown(l: &Loaded, topology: &str) -> String {
    let (duts, skipped) = (&l.duts, &l.skipped);
    let mut md = format!("# Packet forwarding on this machine\n\nAfter Emmerich et al., \"Assessing Soft- and Hardware Bottlenecks in PC-based Packet Forwarding Systems\". Topology: {topology}. Each DUT measured as `latlab rfc2544` does (NDR and PDR by binary search, RFC 8219 latency at the NDR), its receive work on its own CPU.\n\n");
    for (name, why) in &l.left_out {
        let _ = writeln!(md, "- Left out: {name}: {why}.");
    }
    md.push('\n');
    let kernel = duts
        .iter()
        .find(|p| p.dut == "kernel")
        .and_then(|p| ndr_at(p, 64));
    md.push_str("## Table I: throughput at 64 bytes\n\n| DUT | NDR [Mpps] | vs the kernel | PDR [Mpps] | worst-case latency at the NDR [µs] | receive work | note |\n|---|---:|---:|---:|---:|---|---|\n");
    for p in duts {
        let s = p.sizes.iter().find(|s| s.frame_size == 64);
        let ndr = s.and_then(|s| s.ndr_pps);
        let versus = match (ndr, kernel) {
            (Some(n), Some(k)) if k > 0 => format!("{:.2}×", n as f64 / k as f64),
            _ => "-".into(),
        };
        let worst = s
            .and_then(|s| s.latency.iter().find(|l| l.percent_of_ndr == 100))
            .and_then(|l| l.summary.worst_case_ns)
            .map_or("-".into(), |ns| format!("{:.1}", ns as f64 / 1e3));
        let mut note = Vec::new();
        if s.is_some_and(|s| s.dut_kept_up) {
            note.push("kept up with the source: a lower bound".to_string());
        }
        if let Some(f) = &p.failure {
            note.push(format!("ended early: {f}"));
        }
        let _ = writeln!(
            md,
            "| {} | {} | {versus} | {} | {worst} | {} | {} |",
            p.dut,
            ndr.map_or("-".into(), |n| mpps(n as f64)),
            s.and_then(|s| s.pdr_pps)
                .map_or("-".into(), |n| mpps(n as f64)),
            p.receive_work,
            note.join("; ")
        );
    }
    md.push_str("\n## Fig. 2: NDR by frame size\n\n![NDR by frame size](fig2-ndr.svg)\n\n");
    let sizes: Vec<usize> = {
        let mut v: Vec<usize> = duts
            .iter()
            .flat_map(|p| p.sizes.iter().map(|s| s.frame_size))
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    };
    let _ = writeln!(
        md,
        "| DUT | {} |\n|---|{}",
        sizes
            .iter()
            .map(|s| format!("{s} B [Mpps]"))
            .collect::<Vec<_>>()
            .join(" | "),
        "---:|".repeat(sizes.len())
    );
    for p in duts {
        let cells: Vec<String> = sizes
            .iter()
            .map(|&s| ndr_at(p, s).map_or("-".into(), |n| mpps(n as f64)))
            .collect();
        let _ = writeln!(md, "| {} | {} |", p.dut, cells.join(" | "));
    }
    md.push_str(&super::table2::markdown(duts));
    md.push_str(&conclusions(duts, kernel));
    if !skipped.is_empty() {
        md.push_str("\nSkipped point files:\n");
        for s in skipped {
            let _ = writeln!(md, "- {s}");
        }
    }
    md
}

/// Conclusions from the numbers: the fastest DUT at 64 bytes and latlab fwd over AF_XDP
/// against the target (at least 1.5× the kernel's NDR).
fn conclusions(duts: &[DutPoint], kernel: Option<u64>) -> String {
    let mut md = String::from("\n## Conclusions\n\n");
    let best = duts
        .iter()
        .filter_map(|p| Some((p, ndr_at(p, 64)?)))
        .max_by_key(|(_, n)| *n);
    match best {
        Some((p, n)) => {
            let _ = writeln!(
                md,
                "- The fastest forwarder at 64 bytes is {} at {} Mpps.",
                p.dut,
                mpps(n as f64)
            );
        }
        None => md.push_str("- No DUT has an NDR at 64 bytes.\n"),
    }
    let xdp = duts
        .iter()
        .find(|p| p.dut == "fwd-xdp")
        .and_then(|p| Some((p, ndr_at(p, 64)?)));
    if let (Some((p, n)), Some(k)) = (xdp, kernel) {
        let ratio = n as f64 / k.max(1) as f64;
        let kept_up = p
            .sizes
            .iter()
            .find(|s| s.frame_size == 64)
            .is_some_and(|s| s.dut_kept_up);
        let verdict = match (ratio >= 1.5, kept_up) {
            (true, _) => "held",
            (false, true) => "not decided: it kept up with the source, so its NDR is only a lower bound (a faster source: `--source xdp`)",
            (false, false) => "not held",
        };
        let _ = writeln!(
            md,
            "- `latlab fwd --io xdp` forwards {ratio:.2}× the kernel's 64-byte NDR; the target (at least 1.5×) is {verdict}."
        );
    }
    for p in duts {
        if let Some(c) = p.dut_report.as_ref().and_then(DutReport::cycles) {
            if let Some(a) = c.accounted {
                let _ = writeln!(
                    md,
                    "- {}: at saturation its steps account for {:.0}% of its cycles per packet{}.",
                    p.dut,
                    a * 100.0,
                    if (0.9..=1.1).contains(&a) {
                        " (within 10%)"
                    } else {
                        " (the rest is the loop's own time, empty polls and waiting: not within 10%)"
                    }
                );
            }
        }
    }
    md
}

/// The batch-size series: `latlab fwd` over AF_XDP with 64-byte frames at each batch size,
/// its NDR, the worst-case latency there, and where its cycles went.
fn batch_section(batches: &[DutPoint]) -> String {
    let label = |p: &DutPoint| p.fwd_batch.unwrap_or(0).to_string();
    series_section(
        "## The batch size (`latlab fwd` over AF_XDP, 64 bytes)\n\nThe paper's batch-size effect: frames taken per receive call at most, against the throughput and the latency.\n\n| batch",
        batches,
        &label,
    )
}

/// The poll-mode series: `latlab fwd` over AF_XDP with 64-byte frames spinning, blocking, and
/// polling at fixed rates.
fn poll_section(polls: &[DutPoint]) -> String {
    let label = |p: &DutPoint| p.fwd_poll.clone().unwrap_or_default();
    series_section(
        "## The poll rate (`latlab fwd` over AF_XDP, 64 bytes)\n\nThe paper's poll-rate effect: spinning (`busy`), sleeping in poll(2) until a frame comes (`block`), or polling N times a second (`rate:N`), against the throughput and the latency.\n\n| poll",
        polls,
        &label,
    )
}

/// A series of `latlab fwd` points at 64 bytes: `head` (a title, a text, and the first column's
/// name), then a row per point labelled by `label`.
fn series_section(head: &str, points: &[DutPoint], label: &dyn Fn(&DutPoint) -> String) -> String {
    if points.is_empty() {
        return String::new();
    }
    let mut md = format!("\n{head} | NDR [Mpps] | worst-case latency at the NDR [µs] | mean batch | cycles per packet (steps) | RX | TX |\n|---:|---:|---:|---:|---:|---:|---:|\n");
    let cycles = |p: &DutPoint| p.dut_report.as_ref().and_then(DutReport::cycles).copied();
    let figure = |p: &DutPoint, v: fn(&CycleFigures) -> Option<f64>| cycles(p).and_then(|c| v(&c));
    let step = |p: &DutPoint, v: fn(&StepCycles) -> Option<f64>| {
        cycles(p).and_then(|c| c.per_packet).and_then(|s| v(&s))
    };
    let show = |v: Option<f64>, digits: usize| v.map_or("-".into(), |v| format!("{v:.digits$}"));
    for p in points {
        let s = p.sizes.iter().find(|s| s.frame_size == 64);
        let worst = s
            .and_then(|s| s.latency.iter().find(|l| l.percent_of_ndr == 100))
            .and_then(|l| l.summary.worst_case_ns)
            .map(|ns| ns as f64 / 1e3);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            label(p),
            s.and_then(|s| s.ndr_pps)
                .map_or("-".into(), |n| mpps(n as f64)),
            show(worst, 1),
            show(figure(p, |c| c.mean_batch), 1),
            show(figure(p, |c| c.steps_total), 0),
            show(step(p, |s| s.rx), 0),
            show(step(p, |s| s.tx), 0),
        );
    }
    let ndr = |p: &DutPoint| p.sizes.iter().find(|s| s.frame_size == 64)?.ndr_pps;
    if let (Some(first), Some(last)) = (points.first(), points.last()) {
        if let (Some(a), Some(b), true) = (ndr(first), ndr(last), points.len() > 1) {
            let _ = writeln!(
                md,
                "\n- From {} to {} the NDR goes from {} to {} Mpps ({:.2}×).",
                label(first),
                label(last),
                mpps(a as f64),
                mpps(b as f64),
                b as f64 / a.max(1) as f64
            );
        }
    }
    md
}
