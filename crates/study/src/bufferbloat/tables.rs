//! The bufferbloat study's tables, as Markdown: every point, and the targets.

use super::analysis::{percentile_ms, Analysis};
use super::conclusions::{Target, Verdict};
use super::BloatPoint;

/// A percentile in ms with one decimal, `-` when there are too few samples for it.
fn ms(s: &latlab_stats::Summary, key: &str) -> String {
    percentile_ms(s, key).map_or("-".into(), |v| format!("{v:.1}"))
}

/// One row per point: the game's percentiles and loss, each flow's goodput, the bottleneck's
/// drops and its sojourn times, and the CPU time the host took while it ran.
pub(super) fn points(a: &Analysis) -> String {
    let mut md = String::from(
        "| Queue | CC | Flows | Game p50 (ms) | p99 | p99.9 | max | Game loss | Goodput per flow \
         (Mbit/s) | Total (Mbit/s) | Bottleneck drops | Sojourn p50 / p99 (ms) | Host steal (ms) |\n\
         |---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|---:|\n",
    );
    for p in &a.points {
        md.push_str(&row(p));
    }
    md
}

fn row(p: &BloatPoint) -> String {
    let l = p.latency();
    let per_flow = if p.bulk.is_empty() {
        "-".to_string()
    } else {
        p.bulk
            .iter()
            .map(|f| format!("{:.2}", f.goodput_bps / 1e6))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let sojourn = match p.sojourn() {
        Some(s) => format!("{} / {}", ms(&s, "p50"), ms(&s, "p99")),
        None => "not recorded".into(),
    };
    let steal = p
        .host_steal_ns
        .map_or("-".into(), |ns| format!("{:.1}", ns as f64 / 1e6));
    format!(
        "| {} | {} | {} | {} | {} | {} | {:.1} | {:.2}% ({} of {}) | {per_flow} | {:.2} | {} | {sojourn} | {steal} |\n",
        p.queue,
        p.cc.as_deref().unwrap_or("-"),
        p.flows(),
        ms(l, "p50"),
        ms(l, "p99"),
        ms(l, "p99_9"),
        l.max_ns as f64 / 1e6,
        100.0 * p.game.loss_ratio,
        p.game.lost,
        p.game.sent,
        p.goodput_bps() / 1e6,
        p.bottleneck_drops(),
    )
}

/// The targets with their measured figures and verdicts.
pub(super) fn targets(targets: &[Target]) -> String {
    let mut md = String::from("| Target | Measured | Verdict |\n|---|---|---|\n");
    for t in targets {
        let verdict = match &t.verdict {
            Verdict::Met => "met".to_string(),
            Verdict::Missed => "missed".to_string(),
            Verdict::NotMeasured(why) => format!("not measured: {why}"),
        };
        let measured = if t.measured.is_empty() {
            "-"
        } else {
            &t.measured
        };
        md.push_str(&format!("| {} | {measured} | {verdict} |\n", t.target));
    }
    md
}
