//! What the numbers say: the game stream's tail against the unloaded link per queue, the
//! goodput the bulk flows got, and the targets, each checked against the points.

use super::analysis::{discipline_of, full_queue_ms, percentile_ms, Analysis};
use super::BloatPoint;

/// How a target came out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The measured figure is within the target.
    Met,
    /// It is not.
    Missed,
    /// The points the target needs are not in the folder, or lack the figure (the reason).
    NotMeasured(String),
}

/// One target of the issue and what the points say of it.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Target {
    /// The target, as the issue gives it.
    pub(super) target: String,
    /// The measured figure (empty when there is none).
    pub(super) measured: String,
    /// How it came out.
    pub(super) verdict: Verdict,
}

/// The p99 of a point's game stream, ms.
fn p99(p: &BloatPoint) -> Option<f64> {
    percentile_ms(p.latency(), "p99")
}

/// One line per loaded point: the game's p99 against its queue's unloaded p99, the bulk
/// flows' share of the rate, and the queue's sojourn p50 where recorded.
pub(super) fn findings(a: &Analysis) -> Vec<String> {
    let mut lines = Vec::new();
    for p in a.points.iter().filter(|p| p.flows() > 0) {
        let cc = p.cc.as_deref().unwrap_or("?");
        let flows = match p.flows() {
            1 => format!("one {cc} flow"),
            n => format!("{n} {cc} flows"),
        };
        let base = a.unloaded_or_any(&p.queue).and_then(p99);
        let tail = match (p99(p), base) {
            (Some(x), Some(y)) => format!(
                "game p99 {x:.1} ms vs {y:.1} ms unloaded ({:+.1} ms)",
                x - y
            ),
            (Some(x), None) => format!("game p99 {x:.1} ms (no unloaded point)"),
            (None, _) => "game p99: too few samples".to_string(),
        };
        let share = if p.rate_bps > 0 {
            format!(
                ", goodput {:.1} Mbit/s ({:.0}% of the rate)",
                p.goodput_bps() / 1e6,
                100.0 * p.goodput_bps() / p.rate_bps as f64
            )
        } else {
            String::new()
        };
        let dual = |q| p.dual_sojourn(q).and_then(|s| percentile_ms(&s, "p50"));
        let sojourn = match (dual("l4s"), dual("classic")) {
            (Some(l4s), Some(classic)) => {
                format!(", L4S (game) sojourn p50 {l4s:.2} ms, classic {classic:.1} ms")
            }
            _ => p
                .sojourn()
                .and_then(|s| percentile_ms(&s, "p50"))
                .map_or(String::new(), |ms| {
                    format!(", queue sojourn p50 {ms:.1} ms")
                }),
        };
        let loss = if p.game.lost > 0 {
            format!(
                ", {:.2}% of the game's probes lost",
                100.0 * p.game.loss_ratio
            )
        } else {
            String::new()
        };
        lines.push(format!(
            "{} with {flows}: {tail}{share}{sojourn}{loss}.",
            p.queue
        ));
    }
    lines
}

/// The targets: CoDel's and PIE's sojourn p50 under one cubic flow, FQ-CoDel's game
/// p99 under four flows against the unloaded link, and the bloat of a 1000-frame tail-drop
/// queue under one cubic flow; and DualPI2's two queues under one cubic flow (issue 40).
pub(super) fn targets(a: &Analysis) -> Vec<Target> {
    vec![
        sojourn_target(a, "codel", 5.0, 2.5),
        sojourn_target(a, "pie", 15.0, 7.5),
        fq_codel_target(a),
        bloat_target(a),
        dualpi2_target(a),
    ]
}

/// DualPI2 with one cubic flow: the classic queue's sojourn p50 within 15 ± 7.5 ms (its
/// target) while the L4S queue's, the game stream's, stays under 2 ms (its 1 ms step).
fn dualpi2_target(a: &Analysis) -> Target {
    let target = "dualpi2, one cubic flow: classic sojourn p50 within 15 ± 7.5 ms, the game's \
                  L4S sojourn p50 under 2 ms"
        .to_string();
    let Some(p) = a.loaded("dualpi2", "cubic", 1).next() else {
        return not_measured(target, &no_point(a, "dualpi2"));
    };
    let p50 = |q| p.dual_sojourn(q).and_then(|s| percentile_ms(&s, "p50"));
    let Some((l4s, classic)) = p50("l4s").zip(p50("classic")) else {
        return not_measured(target, "not recorded");
    };
    Target {
        target,
        measured: format!(
            "L4S {l4s:.2} ms, classic {classic:.2} ms ({})",
            rate_text(p)
        ),
        verdict: if l4s < 2.0 && (classic - 15.0).abs() <= 7.5 {
            Verdict::Met
        } else {
            Verdict::Missed
        },
    }
}

/// Why a target of `discipline` has no point: its queue was left out, or not measured.
fn no_point(a: &Analysis, discipline: &str) -> String {
    a.left_out_reason(discipline)
        .map_or("no point".into(), |why| format!("left out: {why}"))
}

fn not_measured(target: String, why: &str) -> Target {
    Target {
        target,
        measured: String::new(),
        verdict: Verdict::NotMeasured(why.to_string()),
    }
}

/// Sojourn p50 under `discipline` with one cubic flow within `centre ± tolerance` ms.
fn sojourn_target(a: &Analysis, discipline: &str, centre: f64, tolerance: f64) -> Target {
    let target =
        format!("{discipline}, one cubic flow: queue sojourn p50 within {centre} ± {tolerance} ms");
    let Some(p) = a.loaded(discipline, "cubic", 1).next() else {
        return not_measured(target, &no_point(a, discipline));
    };
    let Some(ms) = p.sojourn().and_then(|s| percentile_ms(&s, "p50")) else {
        return not_measured(target, "not recorded");
    };
    Target {
        target,
        measured: format!("{ms:.2} ms ({}, {})", p.queue, rate_text(p)),
        verdict: if (ms - centre).abs() <= tolerance {
            Verdict::Met
        } else {
            Verdict::Missed
        },
    }
}

/// FQ-CoDel with four flows: the game's p99 within 5 ms of the unloaded link's (every
/// congestion control measured; all must hold).
fn fq_codel_target(a: &Analysis) -> Target {
    let target = "fq_codel, four bulk flows: game p99 within 5 ms of the unloaded link's".into();
    let loaded: Vec<&BloatPoint> = a
        .points
        .iter()
        .filter(|p| discipline_of(&p.queue) == "fq_codel" && p.flows() == 4)
        .collect();
    if loaded.is_empty() {
        return not_measured(target, &no_point(a, "fq_codel"));
    }
    let mut measured = Vec::new();
    let mut met = true;
    for p in loaded {
        let Some((x, y)) = p99(p).zip(a.unloaded_or_any(&p.queue).and_then(p99)) else {
            return not_measured(target, "too few samples, or no unloaded point");
        };
        met &= x - y <= 5.0;
        let cc = p.cc.as_deref().unwrap_or("?");
        measured.push(format!("{cc}: {x:.1} ms vs {y:.1} ms ({:+.1} ms)", x - y));
    }
    Target {
        target,
        measured: measured.join("; "),
        verdict: if met { Verdict::Met } else { Verdict::Missed },
    }
}

/// Tail drop at 1000 frames with one cubic flow shows the bloat: the game's p99 rises by at
/// least half the time the full queue takes to drain.
fn bloat_target(a: &Analysis) -> Target {
    let target = "tail:limit=1000, one cubic flow: the bloat shows (game p99 up by at least \
                  half the full queue's drain time)"
        .to_string();
    let Some(p) = a
        .loaded("tail", "cubic", 1)
        .find(|p| full_queue_ms(&p.queue, p.rate_bps).is_some_and(|_| is_1000(&p.queue)))
    else {
        return not_measured(target, "no point");
    };
    let full = full_queue_ms(&p.queue, p.rate_bps).expect("found with a full-queue time");
    let Some((x, y)) = p99(p).zip(a.unloaded_or_any(&p.queue).and_then(p99)) else {
        return not_measured(target, "too few samples, or no unloaded point");
    };
    Target {
        target,
        measured: format!(
            "{x:.1} ms vs {y:.1} ms unloaded ({:+.1} ms; the full queue drains in {full:.0} ms \
             at {})",
            x - y,
            rate_text(p)
        ),
        verdict: if x - y >= full / 2.0 {
            Verdict::Met
        } else {
            Verdict::Missed
        },
    }
}

/// Whether the queue holds 1000 frames (`tail:limit=1000`, or `tail`, the emulator's default).
fn is_1000(queue: &str) -> bool {
    super::analysis::key_of(queue, "limit").map_or(queue == "tail", |l| l == "1000")
}

fn rate_text(p: &BloatPoint) -> String {
    format!("{} Mbit/s", p.rate_bps as f64 / 1e6)
}
