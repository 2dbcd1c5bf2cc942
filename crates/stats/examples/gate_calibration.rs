//! The calibration table of latency gates: for each distribution and run length, how often
//! `p99 <= limit` (and `p99.9 <= limit`) passes, is inconclusive and fails when the true value
//! is the limit and when it is 20 % under it; the same for `loss <= 0.1 %`. Every run is
//! decided by the real code (`LatencyHistogram`, `Estimate::of`, `latlab_stats::gate`). The
//! last column is the exact probability of a pass, computed from the binomial distribution
//! (for a percentile at the limit it holds for any continuous distribution).
//!
//! `cargo run --release -p latlab-stats --example gate_calibration -- [RUNS]` (default 4000;
//! runs of 100 000 samples a quarter as many, to keep the table within minutes).

#[path = "../tests/calibration/sim.rs"]
mod sim;

use sim::{exact_pass_at_limit_quantile, exact_pass_loss, loss_gate, quantile_gate, Shape, Tally};

fn row(what: &str, t: Tally, exact: Option<f64>) {
    let share = |k: u32| 100.0 * f64::from(k) / f64::from(t.runs());
    println!(
        "| {what} | {} | {:.1}% | {:.1}% | {:.1}% | {} |",
        t.runs(),
        share(t.pass),
        share(t.inconclusive),
        share(t.fail),
        exact.map_or("".into(), |p| format!("{:.2}%", 100.0 * p))
    );
}

fn main() {
    let runs: u32 = std::env::args()
        .nth(1)
        .map(|a| a.parse().expect("RUNS is a whole number"))
        .unwrap_or(4_000);
    println!(
        "| gate, distribution, true value, samples per run | runs | pass | inconclusive | fail \
         | pass, exact |"
    );
    println!("|---|---|---|---|---|---|");
    let mut seed = 0;
    for shape in Shape::ALL {
        for (q, label) in [(0.99, "p99"), (0.999, "p99.9")] {
            for ratio in [1.0, 0.8] {
                for n in [1_000u64, 10_000, 100_000] {
                    if q == 0.999 && n < 10_000 {
                        continue;
                    }
                    seed += 1;
                    let truth = if ratio == 1.0 {
                        "at the limit"
                    } else {
                        "20% under"
                    };
                    let runs = if n >= 100_000 { runs / 4 } else { runs };
                    row(
                        &format!("{label}<=limit, {}, {truth}, {n}", shape.name()),
                        quantile_gate(shape, q, n, ratio, runs, seed),
                        (ratio == 1.0).then(|| exact_pass_at_limit_quantile(n, q)),
                    );
                }
            }
        }
    }
    for (truth, p) in [("at the limit", 0.001), ("20% under", 0.0008)] {
        for n in [10_000u64, 100_000, 1_000_000] {
            seed += 1;
            row(
                &format!("loss<=0.1%, {truth}, {n} probes"),
                loss_gate(p, 0.001, n, runs, seed),
                Some(exact_pass_loss(p, 0.001, n)),
            );
        }
    }
}
