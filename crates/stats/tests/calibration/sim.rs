//! The calibration of latency gates by simulation: runs drawn from distributions whose true
//! percentiles and loss are known, each decided by the real code (`LatencyHistogram`,
//! `Estimate::of`, `latlab_stats::gate`). Shared by `tests/calibration.rs` and
//! `examples/gate_calibration.rs`.

// The test leaves some of it unused (the names of the table), and neither user is a
// crate of its own: nothing here is reachable from outside.
#![allow(dead_code, unreachable_pub)]

use latlab_stats::gate::{decide_proportion, decide_quantile, Bound, Verdict};
use latlab_stats::{Estimate, LatencyHistogram, Z_95};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Binomial, Distribution, Exp, LogNormal, Pareto};

/// A latency distribution with a known quantile function.
#[derive(Clone, Copy, Debug)]
pub enum Shape {
    /// Exponential, mean 1 ms.
    Exponential,
    /// Log-normal, median 1 ms, σ = 1 (a heavy right tail).
    LogNormal,
    /// Pareto, scale 100 µs, shape 2 (heavier still: infinite variance).
    Pareto,
}

impl Shape {
    /// Every shape, in the table's order.
    pub const ALL: [Shape; 3] = [Shape::Exponential, Shape::LogNormal, Shape::Pareto];

    /// The table's name.
    pub fn name(self) -> &'static str {
        match self {
            Shape::Exponential => "exponential (mean 1 ms)",
            Shape::LogNormal => "log-normal (median 1 ms, σ 1)",
            Shape::Pareto => "Pareto (100 µs, α 2)",
        }
    }

    /// The true `q`-quantile, in ns.
    pub fn quantile(self, q: f64) -> f64 {
        match self {
            Shape::Exponential => -1e6 * (1.0 - q).ln(),
            Shape::LogNormal => 1e6 * (probit(q)).exp(),
            Shape::Pareto => 1e5 * (1.0 - q).powf(-0.5),
        }
    }

    /// One run of `n` samples.
    fn draw(self, n: u64, rng: &mut SmallRng) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        let mut record = |x: f64| h.record(x.round().max(1.0) as u64);
        match self {
            Shape::Exponential => {
                let d = Exp::new(1e-6).expect("a rate above 0");
                (0..n).for_each(|_| record(d.sample(rng)));
            }
            Shape::LogNormal => {
                let d = LogNormal::new(1e6f64.ln(), 1.0).expect("σ above 0");
                (0..n).for_each(|_| record(d.sample(rng)));
            }
            Shape::Pareto => {
                let d = Pareto::new(1e5, 2.0).expect("scale and shape above 0");
                (0..n).for_each(|_| record(d.sample(rng)));
            }
        }
        h
    }
}

/// The standard normal quantile (Acklam's rational approximation, relative error < 1.2e-9).
fn probit(p: f64) -> f64 {
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5])
            / ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1.0)
    };
    if p < 0.024_25 {
        tail((-2.0 * p.ln()).sqrt())
    } else if p > 1.0 - 0.024_25 {
        -tail((-2.0 * (1.0 - p).ln()).sqrt())
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    }
}

/// How often each verdict came out of a number of runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct Tally {
    /// Runs that passed.
    pub pass: u32,
    /// Runs that were inconclusive.
    pub inconclusive: u32,
    /// Runs that failed.
    pub fail: u32,
}

impl Tally {
    fn add(&mut self, v: Verdict) {
        match v {
            Verdict::Pass => self.pass += 1,
            Verdict::Inconclusive => self.inconclusive += 1,
            Verdict::Fail => self.fail += 1,
        }
    }

    /// Runs in all.
    pub fn runs(&self) -> u32 {
        self.pass + self.inconclusive + self.fail
    }

    /// The share of runs that passed.
    pub fn pass_share(&self) -> f64 {
        f64::from(self.pass) / f64::from(self.runs())
    }
}

/// `runs` runs of `n` samples of `shape`, each deciding `p(q) <= limit` where the limit is the
/// true quantile divided by `true_over_limit` (1.0: the true value is the limit; 0.8: it is
/// 20 % under it).
pub fn quantile_gate(
    shape: Shape,
    q: f64,
    n: u64,
    true_over_limit: f64,
    runs: u32,
    seed: u64,
) -> Tally {
    let limit = shape.quantile(q) / true_over_limit;
    let mut rng = SmallRng::seed_from_u64(seed);
    let mut tally = Tally::default();
    for _ in 0..runs {
        let h = shape.draw(n, &mut rng);
        let estimate = Estimate::of(&h, q, Z_95);
        tally.add(decide_quantile(&estimate, q, h.len(), Bound::AtMost, limit).verdict);
    }
    tally
}

/// `runs` runs of `n` probes each lost with probability `true_loss`, each deciding
/// `loss <= limit`.
pub fn loss_gate(true_loss: f64, limit: f64, n: u64, runs: u32, seed: u64) -> Tally {
    let mut rng = SmallRng::seed_from_u64(seed);
    let lost = Binomial::new(n, true_loss).expect("a probability in [0, 1]");
    let mut tally = Tally::default();
    for _ in 0..runs {
        tally.add(decide_proportion(lost.sample(&mut rng), n, Bound::AtMost, limit).verdict);
    }
    tally
}

/// `P(Bin(n, p) <= k)`, the terms summed in log space (no term underflows before it matters).
fn binomial_cdf(k: u64, n: u64, p: f64) -> f64 {
    let (ln_p, ln_q) = (p.ln(), (1.0 - p).ln());
    let mut ln_term = n as f64 * ln_q; // P(X = 0)
    let mut sum = ln_term.exp();
    for i in 0..k.min(n) {
        ln_term += ((n - i) as f64 / (i + 1) as f64).ln() + ln_p - ln_q;
        sum += ln_term.exp();
    }
    sum.min(1.0)
}

/// The exact probability that `p(q) <= limit` passes when the true quantile is the limit, for
/// any continuous distribution: the interval's high rank `hi` must have its sample at or below
/// the true quantile, that is at most `n − hi` of the `n` samples above it (HdrHistogram's
/// rounding up, which makes a pass rarer still, left out).
pub fn exact_pass_at_limit_quantile(n: u64, q: f64) -> f64 {
    match latlab_stats::rank_interval(n, q, Z_95) {
        Some((_, hi)) => binomial_cdf(n - hi, n, 1.0 - q),
        None => 0.0,
    }
}

/// The exact probability that `loss <= limit` passes for `n` probes each lost with probability
/// `true_loss`: the chance of a loss count whose Wilson interval lies at or under the limit.
pub fn exact_pass_loss(true_loss: f64, limit: f64, n: u64) -> f64 {
    let passes = |k: u64| decide_proportion(k, n, Bound::AtMost, limit).verdict == Verdict::Pass;
    if !passes(0) {
        return 0.0;
    }
    // The largest passing count (passing is monotone in the count).
    let (mut low, mut high) = (0u64, n);
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if passes(mid) {
            low = mid;
        } else {
            high = mid;
        }
    }
    binomial_cdf(low, n, true_loss)
}
