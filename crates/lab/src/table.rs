//! The summary table printed on the terminal, drawn from [`RunSummary`] data.

use latlab_stats::{Estimate, STANDARD_PERCENTILES};

use crate::results::RunSummary;
use crate::units::{format_rate, format_us};

/// Renders runs side by side: one column per run, one row per figure. Each percentile shows
/// its 95% confidence interval, or "too few samples" when the run cannot support it.
pub fn render(runs: &[&RunSummary]) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let mut row = |name: &str, f: &dyn Fn(&RunSummary) -> String| {
        rows.push((name.to_string(), runs.iter().map(|r| f(r)).collect()));
    };
    row("offered", &|r| format_rate(r.offered_pps));
    row("achieved", &|r| format_rate(r.achieved_pps));
    row("sent", &|r| r.sent.to_string());
    if runs.iter().any(|r| r.unsent > 0) {
        row("not sent (sender behind)", &|r| r.unsent.to_string());
    }
    if runs.iter().any(|r| r.raised > 0) {
        row("raised to the probe header", &|r| r.raised.to_string());
    }
    row("received", &|r| r.received.to_string());
    row("lost", &|r| {
        format!("{} ({:.3}%)", r.lost, 100.0 * r.loss_ratio)
    });
    if runs.iter().any(|r| !r.send_failed.is_empty()) {
        row("of which not sendable", &|r| {
            let causes: Vec<String> = r
                .send_failed
                .iter()
                .map(|(cause, n)| format!("{cause} {n}"))
                .collect();
            if causes.is_empty() {
                "0".into()
            } else {
                causes.join(", ")
            }
        });
    }
    row("reordered", &|r| r.reordered.to_string());
    row("duplicated", &|r| r.duplicated.to_string());
    row("malformed", &|r| {
        let m = &r.malformed;
        (m.not_a_probe + m.foreign_run + m.unknown_probe + m.bad_time).to_string()
    });
    row("min", &|r| format_us(r.latency_ns.min_ns as f64));
    row("mean", &|r| format_us(r.latency_ns.mean_ns));
    row("std dev", &|r| format_us(r.latency_ns.stddev_ns));
    for q in STANDARD_PERCENTILES {
        row(
            q.label,
            &|r| match r.latency_ns.percentile(q.key).map(|p| &p.estimate) {
                Some(Estimate::Value {
                    value_ns,
                    ci_low_ns,
                    ci_high_ns,
                }) => format!(
                    "{} [{} – {}]",
                    format_us(*value_ns as f64),
                    trim_unit(&format_us(*ci_low_ns as f64)),
                    trim_unit(&format_us(*ci_high_ns as f64))
                ),
                Some(Estimate::TooFewSamples { needed, .. }) => {
                    format!("too few samples (needs {needed})")
                }
                None => "-".into(),
            },
        );
    }
    row("max", &|r| format_us(r.latency_ns.max_ns as f64));
    row(
        "sender lag p99.9",
        &|r| match r.send_lag_ns.percentile("p99_9").map(|p| &p.estimate) {
            Some(Estimate::Value { value_ns, .. }) => format_us(*value_ns as f64),
            _ => format!("max {}", format_us(r.send_lag_ns.max_ns as f64)),
        },
    );
    if runs.iter().any(|r| r.forward_ns.is_some()) {
        let one_way = |s: &Option<latlab_stats::Summary>| match s {
            Some(s) => {
                let at = |key: &str| match s.percentile(key).map(|p| &p.estimate) {
                    Some(Estimate::Value { value_ns, .. }) => format_us(*value_ns as f64),
                    _ => "-".into(),
                };
                format!(
                    "{} / {} / {}",
                    trim_unit(&at("p50")),
                    trim_unit(&at("p99_9")),
                    format_us(s.max_ns as f64)
                )
            }
            None => "-".into(),
        };
        row("one way out p50/p99.9/max", &|r| one_way(&r.forward_ns));
        row("one way back p50/p99.9/max", &|r| one_way(&r.return_ns));
    }
    if runs.iter().any(|r| r.clock.is_some()) {
        row("clock", &|r| r.clock.clone().unwrap_or_else(|| "-".into()));
    }
    row("timestamps", &|r| r.timestamp_source.clone());

    let headers: Vec<String> = runs.iter().map(|r| r.setup.label.clone()).collect();
    let name_w = rows
        .iter()
        .map(|(n, _)| n.chars().count())
        .max()
        .unwrap_or(0);
    let col_w: Vec<usize> = (0..runs.len())
        .map(|i| {
            rows.iter()
                .map(|(_, v)| v[i].chars().count())
                .chain(std::iter::once(headers[i].chars().count()))
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    let line = |out: &mut String, name: &str, cells: &[String]| {
        out.push_str(&pad(name, name_w));
        for (c, w) in cells.iter().zip(&col_w) {
            out.push_str("  ");
            out.push_str(&pad_left(c, *w));
        }
        out.push('\n');
    };
    line(&mut out, "", &headers);
    for (name, cells) in &rows {
        line(&mut out, name, cells);
    }
    out.push_str(
        "percentiles: value [95% confidence interval], round trip from the intended send time\n",
    );
    out
}

fn trim_unit(s: &str) -> &str {
    s.trim_end_matches(" µs")
}

fn pad(s: &str, w: usize) -> String {
    format!("{s}{}", " ".repeat(w.saturating_sub(s.chars().count())))
}

fn pad_left(s: &str, w: usize) -> String {
    format!("{}{s}", " ".repeat(w.saturating_sub(s.chars().count())))
}
