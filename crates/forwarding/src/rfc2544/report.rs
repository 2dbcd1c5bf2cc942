//! `report.md` and the figures of an `rfc2544` results folder, drawn from the measured sizes:
//! the throughput by frame size in the shape of Emmerich et al.'s Table I and Fig. 2, the frame
//! loss rate sweep, RFC 8219's latency by load, and conclusions computed from the numbers.

use std::fmt::Write as _;

use super::{Rfc2544Report, SizeResult};
use latlab_lab::gate::{overall, AssertionVerdict};
use latlab_lab::plot::{lines_svg, Line};

/// Bits one frame of `size` bytes takes on an Ethernet wire: the frame, its preamble and start
/// delimiter (8 bytes) and the inter-frame gap (12 bytes).
fn wire_bits(size: usize) -> f64 {
    ((size + 20) * 8) as f64
}

/// `pps` frames of `size` bytes a second as Gbit/s on the wire.
fn gbps(pps: f64, size: usize) -> f64 {
    pps * wire_bits(size) / 1e9
}

fn mpps(pps: f64) -> String {
    format!("{:.3}", pps / 1e6)
}

/// The figures of `report`, as (file name, SVG text): `fig2-throughput.svg` (source maximum,
/// NDR and PDR by frame size, Mpps), `loss.svg` (the frame loss rate sweep, one line per size)
/// and `latency.svg` (RFC 8219's worst case by load, one line per size). A figure with no data
/// is left out.
pub(super) fn figures(report: &Rfc2544Report) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    let by_size = |f: &dyn Fn(&SizeResult) -> Option<f64>| -> Vec<(f64, f64)> {
        report
            .sizes
            .iter()
            .filter_map(|s| Some((s.frame_size as f64, f(s)? / 1e6)))
            .collect()
    };
    let throughput: Vec<Line> = vec![
        (
            "source maximum".into(),
            by_size(&|s| Some(s.source_max_pps)),
        ),
        ("NDR".into(), by_size(&|s| s.ndr_pps.map(|v| v as f64))),
        (
            "PDR (≤ 0.5% lost)".into(),
            by_size(&|s| s.pdr_pps.map(|v| v as f64)),
        ),
    ];
    if throughput.iter().any(|l| !l.1.is_empty()) {
        let title = format!("Throughput of {} by frame size", report.dut.name());
        out.push((
            "fig2-throughput.svg".into(),
            lines_svg(&title, "frame size (bytes)", "Mpps", &throughput)?,
        ));
    }
    let loss: Vec<Line> = report
        .sizes
        .iter()
        .filter(|s| !s.loss.is_empty())
        .map(|s| {
            let points = s.loss.iter().map(|&(p, l)| (f64::from(p), l)).collect();
            (format!("{} B", s.frame_size), points)
        })
        .collect();
    if !loss.is_empty() {
        out.push((
            "loss.svg".into(),
            lines_svg(
                "Frame loss rate (RFC 2544 26.3)",
                "offered load (% of the source's maximum)",
                "frames lost (%)",
                &loss,
            )?,
        ));
    }
    let latency: Vec<Line> = report
        .sizes
        .iter()
        .filter(|s| !s.latency.is_empty())
        .map(|s| {
            let points = s
                .latency
                .iter()
                .filter_map(|l| {
                    Some((
                        f64::from(l.percent_of_ndr),
                        l.summary.worst_case_ns? as f64 / 1e3,
                    ))
                })
                .collect();
            (format!("{} B", s.frame_size), points)
        })
        .collect();
    if latency.iter().any(|l| !l.1.is_empty()) {
        out.push((
            "latency.svg".into(),
            lines_svg(
                "Worst-case latency (p99.9, RFC 8219) by load",
                "offered load (% of the NDR)",
                "one-way latency (µs)",
                &latency,
            )?,
        ));
    }
    Ok(out)
}

/// `report.md`: what was measured and how, Table I's shape per frame size, the latency by
/// load, and conclusions computed from the numbers. `figures` are the files drawn beside it.
pub(super) fn markdown(
    report: &Rfc2544Report,
    how: &str,
    figures: &[String],
    gates: &[AssertionVerdict],
) -> String {
    let mut md = format!("# RFC 2544 / RFC 8219: {}\n\n{how}\n\n", report.dut.name());
    if !gates.is_empty() {
        let _ = writeln!(
            md,
            "## Gates: {}\n\nEach `--assert` on each frame size, as `rfc2544.json` keeps it \
             (`assertions`).\n",
            overall(gates).name()
        );
        for gate in gates {
            let _ = writeln!(md, "- {}", gate.line());
        }
        md.push('\n');
    }
    md.push_str("## Throughput (Table I's shape)\n\nRates in Mpps and as Gbit/s on the wire (frame + 20 bytes of preamble and gap). The NDR loses nothing; the PDR at most 0.5%.\n\n| frame size | source max [Mpps] | NDR [Mpps] | NDR [Gbit/s] | PDR [Mpps] | loss at 100% | back-to-back [frames] | typical / worst / PDV at NDR [µs] | note |\n|---:|---:|---:|---:|---:|---:|---:|---|---|\n");
    let us = |v: Option<u64>| v.map_or("-".into(), |v| format!("{:.1}", v as f64 / 1e3));
    for s in &report.sizes {
        let at_ndr = s.latency.iter().find(|l| l.percent_of_ndr == 100);
        let mut note = Vec::new();
        if s.dut_kept_up {
            note.push("the DUT kept up with the source: the NDR is a lower bound".to_string());
        }
        if let (Some(ndr), Some(offered)) = (s.ndr_pps, s.ndr_offered_pps) {
            if offered < 0.98 * ndr as f64 {
                note.push(format!(
                    "the source reached only {} Mpps at the NDR",
                    mpps(offered)
                ));
            }
        }
        if !s.converged {
            note.push("the search did not narrow to the resolution".into());
        }
        if let Some(e) = &s.error {
            note.push(format!("ended early: {e}"));
        }
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} | {} / {} / {} | {} |",
            s.frame_size,
            mpps(s.source_max_pps),
            s.ndr_pps.map_or("-".into(), |v| mpps(v as f64)),
            s.ndr_pps.map_or("-".into(), |v| format!(
                "{:.3}",
                gbps(v as f64, s.frame_size)
            )),
            s.pdr_pps.map_or("-".into(), |v| mpps(v as f64)),
            s.loss
                .first()
                .map_or("-".into(), |l| format!("{:.2}%", l.1)),
            s.back_to_back_mean
                .map_or("-".into(), |m| format!("{m:.0}")),
            us(at_ndr.and_then(|l| l.summary.typical_ns)),
            us(at_ndr.and_then(|l| l.summary.worst_case_ns)),
            us(at_ndr.and_then(|l| l.summary.pdv_ns)),
            note.join("; ")
        );
    }
    let latency_rows: Vec<String> = report
        .sizes
        .iter()
        .flat_map(|s| {
            s.latency.iter().map(move |l| {
                format!(
                    "| {} | {}% | {} | {} | {} | {} |",
                    s.frame_size,
                    l.percent_of_ndr,
                    mpps(l.rate_pps as f64),
                    us(l.summary.typical_ns),
                    us(l.summary.worst_case_ns),
                    us(l.summary.pdv_ns)
                )
            })
        })
        .collect();
    if !latency_rows.is_empty() {
        md.push_str("\n## Latency by load (RFC 8219)\n\nOne way, from every frame (the source's stamp as it queues the frame, the sink's kernel receive stamp); medians over the trials.\n\n| frame size | load | rate [Mpps] | typical [µs] | worst case p99.9 [µs] | PDV [µs] |\n|---:|---:|---:|---:|---:|---:|\n");
        for row in latency_rows {
            md.push_str(&row);
            md.push('\n');
        }
    }
    md.push_str(&super::mlr::markdown(&report.sizes, &|v| mpps(v)));
    md.push('\n');
    for f in figures {
        let _ = writeln!(md, "![{f}]({f})\n");
    }
    if let Some(saturation) = &report.saturation {
        md.push_str(&saturation.markdown());
    }
    md.push_str(&conclusions(report));
    md
}

/// Conclusions from the numbers: what limited each size, whether the DUT is bound by packets
/// or by bytes (from the sizes whose NDR is the DUT's own), and what load costs in latency.
fn conclusions(report: &Rfc2544Report) -> String {
    let mut md = String::from("## Conclusions\n\n");
    let measured: Vec<&SizeResult> = report
        .sizes
        .iter()
        .filter(|s| s.ndr_pps.is_some())
        .collect();
    if measured.is_empty() {
        md.push_str("- No frame size has an NDR: nothing to conclude.\n");
        return md;
    }
    md.push_str(&verdicts(&measured));
    for s in &measured {
        let at = |p: u32| {
            s.latency
                .iter()
                .find(|l| l.percent_of_ndr == p)
                .and_then(|l| l.summary.worst_case_ns)
        };
        md.push_str(&where_lost(s));
        if let (Some(low), Some(full)) = (at(10), at(100)) {
            let _ = writeln!(
                md,
                "- {} bytes: the worst-case latency is {:.1} µs at 10% of the NDR and {:.1} µs at the NDR ({:.1}×).",
                s.frame_size,
                low as f64 / 1e3,
                full as f64 / 1e3,
                full as f64 / low.max(1) as f64
            );
        }
    }
    md
}

/// One verdict per size with an NDR (`measured`, in the run's order): the source outran the
/// DUT, and the NDR is the DUT's own, or it could not, and the NDR is a lower bound of the
/// DUT's; then whether the DUT is bound by packets or by bytes, told only from the sizes whose
/// NDR is its own (a lower bound says nothing of what bounds the DUT).
fn verdicts(measured: &[&SizeResult]) -> String {
    let mut md = String::new();
    for s in measured {
        let Some(ndr) = s.ndr_pps else { continue };
        if s.dut_kept_up {
            let _ = writeln!(
                md,
                "- **The source could not outrun the DUT** at {} bytes: the NDR, {} Mpps, is the source's rate, a lower bound of the DUT's (try `--source xdp`).",
                s.frame_size,
                mpps(ndr as f64)
            );
        } else {
            let _ = writeln!(
                md,
                "- The source outran the DUT at {} bytes: the NDR, {} Mpps, is the DUT's own.",
                s.frame_size,
                mpps(ndr as f64)
            );
        }
    }
    let own: Vec<&SizeResult> = measured
        .iter()
        .copied()
        .filter(|s| !s.dut_kept_up)
        .collect();
    let (Some(first), Some(last)) = (own.first(), own.last()) else {
        if measured.len() > 1 {
            md.push_str("- Whether packets or bytes bound the DUT is not told: no size has the DUT's own NDR.\n");
        }
        return md;
    };
    if own.len() < 2 {
        if measured.len() > 1 {
            let _ = writeln!(
                md,
                "- Whether packets or bytes bound the DUT is not told: only {} bytes has the DUT's own NDR.",
                first.frame_size
            );
        }
        return md;
    }
    let (Some(a), Some(b)) = (first.ndr_pps, last.ndr_pps) else {
        return md;
    };
    let pps_ratio = b as f64 / a.max(1) as f64;
    let bits_ratio = gbps(b as f64, last.frame_size) / gbps(a as f64, first.frame_size);
    let bound = if pps_ratio > 0.8 {
        "by packets: its rate in frames barely falls with the frame size, so the cost is per packet, not per byte (as the paper found for software forwarders)"
    } else if bits_ratio < 1.25 {
        "by bytes: its rate in bits stays about the same across sizes"
    } else {
        "by both: larger frames go at fewer frames but more bits a second"
    };
    let _ = writeln!(
        md,
        "- From {} to {} bytes (the sizes where the NDR is the DUT's own) the NDR goes from {} to {} Mpps ({:.2}×) and from {:.3} to {:.3} Gbit/s on the wire ({:.2}×): the DUT is bound {bound}.",
        first.frame_size,
        last.frame_size,
        mpps(a as f64),
        mpps(b as f64),
        pps_ratio,
        gbps(a as f64, first.frame_size),
        gbps(b as f64, last.frame_size),
        bits_ratio
    );
    md
}

/// Of the frames one size's trials lost, those the source's interface dropped (on veth: the
/// DUT's input ring full) and those the sink's socket dropped, when the trials read both and
/// lost any.
fn where_lost(s: &SizeResult) -> String {
    let read: Vec<_> = s
        .trials
        .iter()
        .filter(|t| t.dropped_entering.is_some() && t.dropped_at_sink.is_some())
        .collect();
    let lost: u64 = read.iter().map(|t| t.sent.saturating_sub(t.received)).sum();
    let entering: u64 = read.iter().filter_map(|t| t.dropped_entering).sum();
    let at_sink: u64 = read.iter().filter_map(|t| t.dropped_at_sink).sum();
    if lost == 0 {
        return String::new();
    }
    let share = |n: u64| 100.0 * n as f64 / lost as f64;
    format!(
        "- {} bytes: of the {lost} frames the searches' trials lost, {entering} ({:.1}%) were dropped entering the DUT (the source's interface could not hand them over: the DUT's input ring full), {at_sink} ({:.1}%) at the sink's socket, the rest ({:.1}%) in the DUT or on its way out.\n",
        s.frame_size,
        share(entering),
        share(at_sink),
        share(lost.saturating_sub(entering + at_sink))
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rfc2544::{Dut, LatencyPoint};
    use latlab_bench::latency::TrialsSummary;

    fn size(frame_size: usize, ndr: u64, kept_up: bool) -> SizeResult {
        SizeResult {
            frame_size,
            source_max_pps: ndr as f64 * 1.2,
            dut_kept_up: kept_up,
            ndr_pps: Some(ndr),
            ndr_offered_pps: Some(ndr as f64),
            pdr_pps: Some(ndr + ndr / 50),
            converged: true,
            loss: vec![(100, 12.5), (90, 3.0), (80, 0.0)],
            back_to_back: vec![Some(900)],
            back_to_back_mean: Some(900.0),
            latency: [(10, 20_000), (100, 80_000)]
                .iter()
                .map(|&(p, worst)| LatencyPoint {
                    percent_of_ndr: p,
                    rate_pps: ndr * u64::from(p) / 100,
                    trials: Vec::new(),
                    summary: TrialsSummary {
                        trials: 1,
                        typical_ns: Some(worst / 4),
                        worst_case_ns: Some(worst),
                        pdv_ns: Some(worst / 2),
                    },
                })
                .collect(),
            ..SizeResult::default()
        }
    }

    fn report(sizes: Vec<SizeResult>) -> Rfc2544Report {
        Rfc2544Report {
            out: "/nowhere".into(),
            dut: Dut::KERNEL,
            rps: "RPS on CPU 1".into(),
            sizes,
            saturation: None,
        }
    }

    #[test]
    fn the_report_has_table_one_latency_by_load_and_conclusions_from_the_numbers() {
        let r = report(vec![size(64, 200_000, false), size(1518, 190_000, true)]);
        let figures: Vec<String> = figures(&r).unwrap().into_iter().map(|f| f.0).collect();
        assert_eq!(figures, ["fig2-throughput.svg", "loss.svg", "latency.svg"]);
        let md = markdown(&r, "how", &figures, &[]);
        // 200 kpps of 64-byte frames: 200e3 × 84 × 8 bits = 0.134 Gbit/s on the wire.
        assert!(
            md.contains(
                "| 64 | 0.240 | 0.200 | 0.134 | 0.204 | 12.50% | 900 | 20.0 / 80.0 / 40.0 |"
            ),
            "{md}"
        );
        assert!(
            md.contains("the DUT kept up with the source: the NDR is a lower bound"),
            "{md}"
        );
        assert!(
            md.contains("**The source could not outrun the DUT** at 1518 bytes"),
            "{md}"
        );
        assert!(
            md.contains(
                "- The source outran the DUT at 64 bytes: the NDR, 0.200 Mpps, is the DUT's own."
            ),
            "{md}"
        );
        // 1518 bytes' NDR is a lower bound: no bound is told from one size of the DUT's own.
        assert!(
            md.contains("not told: only 64 bytes has the DUT's own NDR")
                && !md.contains("is bound by"),
            "{md}"
        );
        assert!(md.contains("64 bytes: the worst-case latency is 20.0 µs at 10% of the NDR and 80.0 µs at the NDR (4.0×)."), "{md}");
        assert!(md.contains("| 1518 | 10% | 0.019 |"), "{md}");
        assert!(md.contains("![latency.svg](latency.svg)"), "{md}");
    }

    #[test]
    fn the_frames_dropped_entering_the_dut_are_told_apart_from_the_rest() {
        let trial = |sent: u64, received: u64, entering: Option<u64>| crate::rfc2544::TrialRecord {
            dropped_at_sink: entering.map(|e| e / 6),
            search: "ndr".into(),
            rate_pps: Some(100_000),
            burst_frames: None,
            sent,
            received,
            achieved_pps: 100_000.0,
            source_short: false,
            dropped_entering: entering,
        };
        let mut s = size(64, 200_000, false);
        // 1,000 + 500 lost, 1,200 of them at the DUT's input; a trial that did not read the
        // counter (an older file) is left out of both sums.
        s.trials = vec![
            trial(100_000, 99_000, Some(900)),
            trial(100_000, 99_500, Some(300)),
            trial(100_000, 90_000, None),
            trial(100_000, 100_000, Some(0)),
        ];
        let md = markdown(&report(vec![s.clone()]), "how", &[], &[]);
        assert!(md.contains("- 64 bytes: of the 1500 frames the searches' trials lost, 1200 (80.0%) were dropped entering the DUT"), "{md}");
        assert!(
            md.contains("full), 200 (13.3%) at the sink's socket, the rest (6.7%) in the DUT"),
            "{md}"
        );
        // Nothing lost among the trials that read it: nothing said.
        s.trials.truncate(0);
        s.trials.push(trial(100_000, 100_000, Some(0)));
        assert_eq!(where_lost(&s), "");
    }

    #[test]
    fn a_dut_bound_by_bytes_is_told_from_one_bound_by_packets() {
        // 1518-byte frames at 64/1518 × 84/1538 of the rate: the same bits a second.
        let r = report(vec![size(64, 1_538_000, false), size(1518, 84_000, false)]);
        let md = markdown(&r, "how", &[], &[]);
        assert!(md.contains("the DUT is bound by bytes"), "{md}");
        assert!(md.contains("The source outran the DUT at 64 bytes"), "{md}");
        assert!(
            md.contains("The source outran the DUT at 1518 bytes"),
            "{md}"
        );
    }

    #[test]
    fn each_size_has_one_verdict_and_the_bound_comes_only_from_the_duts_own_ndrs() {
        // The source could not outrun the DUT at 64 and 512 bytes, and did at 1518 and 1024:
        // the bound is told from 1024 and 1518 alone.
        let sizes = vec![
            size(64, 1_000_000, true),
            size(512, 900_000, true),
            size(1024, 200_000, false),
            size(1518, 150_000, false),
        ];
        let md = conclusions(&report(sizes));
        for size in [64, 512, 1024, 1518] {
            let verdicts = md
                .lines()
                .filter(|l| {
                    l.contains(&format!("outrun the DUT** at {size} bytes"))
                        || l.contains(&format!("outran the DUT at {size} bytes"))
                })
                .count();
            assert_eq!(verdicts, 1, "{size}: {md}");
        }
        assert!(
            md.contains("**The source could not outrun the DUT** at 64 bytes"),
            "{md}"
        );
        assert!(
            md.contains("**The source could not outrun the DUT** at 512 bytes"),
            "{md}"
        );
        assert!(
            md.contains("From 1024 to 1518 bytes (the sizes where the NDR is the DUT's own)"),
            "{md}"
        );
        assert_eq!(md.matches("the DUT is bound").count(), 1, "{md}");
        // Where it kept up at every size, nothing is said of the bound.
        let all_kept = conclusions(&report(vec![size(64, 1_000, true), size(1518, 900, true)]));
        assert!(
            all_kept.contains("not told: no size has the DUT's own NDR"),
            "{all_kept}"
        );
        assert!(!all_kept.contains("is bound by"), "{all_kept}");
    }

    #[test]
    fn sizes_without_an_ndr_draw_no_empty_figure_and_conclude_nothing() {
        let mut s = size(64, 1, false);
        s.ndr_pps = None;
        s.pdr_pps = None;
        s.latency.clear();
        s.loss.clear();
        let r = report(vec![s]);
        let names: Vec<String> = figures(&r).unwrap().into_iter().map(|f| f.0).collect();
        assert_eq!(names, ["fig2-throughput.svg"]);
        assert!(markdown(&r, "how", &names, &[]).contains("No frame size has an NDR"));
    }
}
