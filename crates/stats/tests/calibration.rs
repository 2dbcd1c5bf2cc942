//! The gates' calibration targets, checked by simulation with the real decision code
//! (`examples/gate_calibration.rs` prints the whole table, per distribution and run length):
//! a run whose true p99 (or loss) is the limit passes in at most 2.5 % of runs; one whose true
//! value is 20 % under the limit, with enough samples, passes in at least 95 %. Seeded: the
//! same runs every time. The shares are pooled over the distributions, so that the test holds
//! the rule to its target rather than one cell to the noise of a few hundred runs.

#[path = "calibration/sim.rs"]
mod sim;

use sim::{loss_gate, quantile_gate, Shape, Tally};

const RUNS: u32 = 300;

fn pooled(tallies: impl IntoIterator<Item = Tally>) -> Tally {
    tallies.into_iter().fold(Tally::default(), |a, t| Tally {
        pass: a.pass + t.pass,
        inconclusive: a.inconclusive + t.inconclusive,
        fail: a.fail + t.fail,
    })
}

#[test]
fn a_p99_at_the_limit_passes_in_at_most_2_5_percent_of_runs() {
    let mut seed = 100;
    let t = pooled(Shape::ALL.into_iter().flat_map(|shape| {
        [1_000, 10_000].map(|n| {
            seed += 1;
            quantile_gate(shape, 0.99, n, 1.0, RUNS, seed)
        })
    }));
    assert_eq!(t.runs(), 6 * RUNS);
    assert!(t.pass_share() <= 0.025, "{t:?}");
}

#[test]
fn a_p99_20_percent_under_the_limit_passes_in_95_percent_of_runs_of_10_000_samples() {
    let t = pooled(Shape::ALL.map(|shape| quantile_gate(shape, 0.99, 10_000, 0.8, RUNS, 200)));
    assert!(t.pass_share() >= 0.95, "{t:?}");
    assert_eq!(t.fail, 0, "{t:?}");
}

#[test]
fn loss_at_the_limit_passes_in_at_most_2_5_percent_and_20_percent_under_it_in_95() {
    let at_limit =
        pooled([10_000, 100_000, 1_000_000].map(|n| loss_gate(0.001, 0.001, n, 1_000, n)));
    assert!(at_limit.pass_share() <= 0.025, "{at_limit:?}");
    let under = loss_gate(0.0008, 0.001, 1_000_000, 1_000, 29);
    assert!(under.pass_share() >= 0.95, "{under:?}");
}

#[test]
fn the_exact_chance_of_a_pass_at_the_limit_is_at_most_2_5_percent() {
    use sim::{exact_pass_at_limit_quantile, exact_pass_loss};
    for n in [1_000, 10_000, 100_000, 1_000_000] {
        for q in [0.99, 0.999] {
            let p = exact_pass_at_limit_quantile(n, q);
            println!("p{} n={n}: {:.3}%", 100.0 * q, 100.0 * p);
            assert!(p <= 0.025, "q={q} n={n}: {p}");
        }
        let p = exact_pass_loss(0.001, 0.001, n);
        println!("loss n={n}: {:.3}%", 100.0 * p);
        assert!(p <= 0.025, "loss n={n}: {p}");
    }
}
