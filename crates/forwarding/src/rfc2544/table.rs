//! The table `latlab rfc2544` prints at the end: one row per frame size (the source's maximum,
//! NDR, PDR, loss at 100% and the back-to-back burst, as `report.md`'s table has them), a
//! size cut short by its one line, and the folder.

use std::fmt::Write as _;

use latlab_lab::units::{format_rate, format_us};

use super::{Rfc2544Report, SizeResult};

impl Rfc2544Report {
    /// The table printed at the end: the sizes that finished, each with its figures; a size
    /// that ended early (a stopping signal, a trial that could not run) by why, without the
    /// figures of its unfinished searches.
    pub fn text(&self) -> String {
        let mut out = format!(
            "RFC 2544 throughput of {} ({})\n",
            self.dut.name(),
            self.rps
        );
        out.push_str("size   source max   NDR          PDR          loss at 100%  back-to-back\n");
        for s in &self.sizes {
            if let Some(e) = &s.error {
                let _ = writeln!(out, "{:<6} ended early: {e}", s.frame_size);
                continue;
            }
            row(&mut out, s);
        }
        let _ = writeln!(out, "results in {}", self.out.display());
        out
    }
}

/// One finished size: its row and the lines under it.
fn row(out: &mut String, s: &SizeResult) {
    let rate = |r: Option<u64>| r.map_or("-".into(), |r| format_rate(r as f64));
    let loss = s
        .loss
        .first()
        .map_or("-".into(), |l| format!("{:.2}%", l.1));
    let b2b = s
        .back_to_back_mean
        .map_or("-".into(), |m| format!("{m:.0} frames"));
    let _ = writeln!(
        out,
        "{:<6} {:<12} {:<12} {:<12} {:<13} {}{}",
        s.frame_size,
        format_rate(s.source_max_pps),
        rate(s.ndr_pps),
        rate(s.pdr_pps),
        loss,
        b2b,
        if s.dut_kept_up {
            "  (the DUT kept up with the source)"
        } else {
            ""
        }
    );
    if let (Some(ndr), Some(offered)) = (s.ndr_pps, s.ndr_offered_pps) {
        if offered < 0.98 * ndr as f64 {
            let _ = writeln!(
                out,
                "       the source reached only {} in the trial at the NDR",
                format_rate(offered)
            );
        }
    }
    if let Some(l) = s.latency.iter().find(|l| l.percent_of_ndr == 100) {
        let us = |v: Option<u64>| v.map_or("-".into(), |v| format_us(v as f64));
        let _ = writeln!(
            out,
            "       latency at the NDR (RFC 8219, one way, every frame): typical {}, \
             worst case (p99.9) {}, PDV {}",
            us(l.summary.typical_ns),
            us(l.summary.worst_case_ns),
            us(l.summary.pdv_ns)
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rfc2544::Dut;

    fn size(frame_size: usize, b2b: Option<f64>, error: Option<&str>) -> SizeResult {
        SizeResult {
            frame_size,
            source_max_pps: 1e6,
            ndr_pps: Some(500_000),
            pdr_pps: Some(520_000),
            loss: vec![(100, 12.5)],
            back_to_back: vec![b2b.map(|m| m as u64)],
            back_to_back_mean: b2b,
            error: error.map(str::to_string),
            ..SizeResult::default()
        }
    }

    #[test]
    fn the_table_shows_back_to_back_and_a_size_cut_short_by_its_reason_only() {
        let report = Rfc2544Report {
            out: "/tmp/r".into(),
            dut: Dut::KERNEL,
            rps: "rps off".into(),
            sizes: vec![
                size(64, Some(158_324.0), None),
                size(512, None, None),
                size(1518, Some(3.0), Some("stopped by a signal")),
            ],
            saturation: None,
        };
        let text = report.text();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].ends_with("back-to-back"), "{text}");
        let col = lines[1].find("back-to-back").unwrap();
        assert_eq!(&lines[2][col..], "158324 frames", "{text}");
        assert!(
            lines[2].starts_with("64 ") && lines[2].contains("12.50%"),
            "{text}"
        );
        assert_eq!(&lines[3][col..], "-", "no burst without loss: {text}");
        assert_eq!(
            lines[4], "1518   ended early: stopped by a signal",
            "{text}"
        );
        assert_eq!(lines[5], "results in /tmp/r");
        assert_eq!(lines.len(), 6, "{text}");
    }
}
