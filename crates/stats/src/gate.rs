//! Verdicts of latency gates: a statistic's 95 % interval held against a limit.
//!
//! A gate (`p99 <= 2 ms`) is decided from the interval, never from the point estimate alone:
//! it [passes](Verdict::Pass) when the whole interval meets the limit, [fails](Verdict::Fail)
//! when the whole interval misses it, and is [inconclusive](Verdict::Inconclusive) when the
//! interval straddles it, or when there is no interval (too few samples for the percentile).
//! An inconclusive decision says how many samples would likely decide it ([`Needed`]): the
//! size at which an interval of the same shape around the same estimate would clear the
//! limit.
//!
//! The intervals are the ones [`Summary`](crate::Summary) reports: order statistics for
//! percentiles ([`rank_interval`](crate::rank_interval)), the Wilson score interval for a
//! proportion such as loss ([`wilson_interval`]), the normal interval for a mean. A value that
//! is observed rather than estimated (a run's max, its achieved rate) is its own interval:
//! such a gate passes or fails, never inconclusive.
//!
//! ```
//! use latlab_stats::gate::{decide_proportion, Bound, Verdict};
//!
//! // 12 of 100 000 probes lost: the Wilson interval is [0.0069 %, 0.021 %].
//! assert_eq!(decide_proportion(12, 100_000, Bound::AtMost, 0.001).verdict, Verdict::Pass);
//! // 12 of 10 000: [0.069 %, 0.21 %] straddles 0.1 %.
//! assert_eq!(decide_proportion(12, 10_000, Bound::AtMost, 0.001).verdict, Verdict::Inconclusive);
//! ```

use crate::quantile::{min_samples, Z_95};
use crate::summary::Estimate;

/// How a gate compares a statistic with its limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bound {
    /// `<=`: at most the limit.
    AtMost,
    /// `<`: below the limit.
    Below,
    /// `>=`: at least the limit.
    AtLeast,
    /// `>`: above the limit.
    Above,
}

impl Bound {
    /// Every bound, longest symbol first (as a parser must try them).
    pub const ALL: [Bound; 4] = [Bound::AtMost, Bound::AtLeast, Bound::Below, Bound::Above];

    /// How an expression writes it: `<=`, `<`, `>=`, `>`.
    pub fn symbol(self) -> &'static str {
        match self {
            Bound::AtMost => "<=",
            Bound::Below => "<",
            Bound::AtLeast => ">=",
            Bound::Above => ">",
        }
    }

    /// Whether `value` meets the bound.
    pub fn holds(self, value: f64, limit: f64) -> bool {
        match self {
            Bound::AtMost => value <= limit,
            Bound::Below => value < limit,
            Bound::AtLeast => value >= limit,
            Bound::Above => value > limit,
        }
    }
}

/// A gate's outcome; in JSON `"pass"`, `"inconclusive"` or `"fail"`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// The whole interval meets the limit.
    Pass,
    /// The interval straddles the limit, or there is none yet.
    Inconclusive,
    /// The whole interval misses the limit.
    Fail,
}

impl Verdict {
    /// `pass`, `inconclusive` or `fail`.
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Pass => "pass",
            Verdict::Inconclusive => "inconclusive",
            Verdict::Fail => "fail",
        }
    }
}

/// What would likely decide an inconclusive gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needed {
    /// About this many samples in all (not more of them: in all).
    Samples(u64),
    /// Nothing: the estimate sits on the limit, so no number of samples is likely to move the
    /// interval off it.
    AtLimit,
}

/// A gate decided: the verdict and what it was decided from.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Decision {
    /// The verdict.
    pub verdict: Verdict,
    /// The point estimate, when there is one.
    pub estimate: Option<f64>,
    /// The 95 % interval `(low, high)`, `low <= estimate <= high`, when there is one.
    pub interval: Option<(f64, f64)>,
    /// Samples the statistic was computed from.
    pub samples: u64,
    /// For an inconclusive verdict: what would likely decide it. `None` otherwise.
    pub needed: Option<Needed>,
}

/// The verdict of the interval `[low, high]` against `bound limit`.
///
/// ```
/// use latlab_stats::gate::{decide_interval, Bound, Verdict};
///
/// assert_eq!(decide_interval(1.0, 1.9, Bound::AtMost, 2.0), Verdict::Pass);
/// assert_eq!(decide_interval(1.0, 2.1, Bound::AtMost, 2.0), Verdict::Inconclusive);
/// assert_eq!(decide_interval(2.0, 3.0, Bound::Below, 2.0), Verdict::Fail);
/// ```
pub fn decide_interval(low: f64, high: f64, bound: Bound, limit: f64) -> Verdict {
    debug_assert!(low <= high, "an interval {low}..{high}");
    match (bound.holds(low, limit), bound.holds(high, limit)) {
        (true, true) => Verdict::Pass,
        (false, false) => Verdict::Fail,
        _ => Verdict::Inconclusive,
    }
}

/// A gate on a percentile whose estimate is `estimate` (from `samples` samples, quantile `q`).
///
/// Too few samples is inconclusive, with [`min_samples`] (or more, when the estimate that
/// exists for it would need more) as what is needed. A straddling interval needs about
/// `n·(w/d)²` samples, `w` being the interval's half on the limit's side and `d` the distance
/// from the estimate to the limit: an order-statistic interval narrows as `1/√n`.
pub fn decide_quantile(
    estimate: &Estimate,
    q: f64,
    samples: u64,
    bound: Bound,
    limit: f64,
) -> Decision {
    let (value, low, high) = match *estimate {
        Estimate::Value {
            value_ns,
            ci_low_ns,
            ci_high_ns,
        } => (value_ns as f64, ci_low_ns as f64, ci_high_ns as f64),
        Estimate::TooFewSamples { samples, needed } => {
            return Decision {
                verdict: Verdict::Inconclusive,
                estimate: None,
                interval: None,
                samples,
                needed: Some(Needed::Samples(needed)),
            }
        }
    };
    let verdict = decide_interval(low, high, bound, limit);
    let needed = (verdict == Verdict::Inconclusive).then(|| {
        let distance = (value - limit).abs();
        let half = if limit >= value {
            high - value
        } else {
            value - low
        };
        scaled(samples, half, distance).map_or(Needed::AtLimit, |n| {
            Needed::Samples(n.max(min_samples(q, Z_95)))
        })
    });
    Decision {
        verdict,
        estimate: Some(value),
        interval: Some((low, high)),
        samples,
        needed,
    }
}

/// `n·(half/distance)²`, at least `n + 1`: the samples at which a half-width of `half` at `n`
/// samples, narrowing as `1/√n`, falls below `distance`. `None` when `distance` is 0.
fn scaled(n: u64, half: f64, distance: f64) -> Option<u64> {
    if distance <= 0.0 || !distance.is_finite() {
        return None;
    }
    let ratio = half / distance;
    let n = (n.max(1) as f64 * ratio * ratio).ceil();
    Some((n.min(u64::MAX as f64) as u64).max(1))
}

/// A gate on a mean of `samples` samples with population standard deviation `stddev`: the
/// normal interval `mean ± 1.96·stddev/√n`. Fewer than [`MEAN_MIN_SAMPLES`] samples is
/// inconclusive (the normal approximation needs them; latency is skewed).
pub fn decide_mean(samples: u64, mean: f64, stddev: f64, bound: Bound, limit: f64) -> Decision {
    if samples < MEAN_MIN_SAMPLES {
        return Decision {
            verdict: Verdict::Inconclusive,
            estimate: (samples > 0).then_some(mean),
            interval: None,
            samples,
            needed: Some(Needed::Samples(MEAN_MIN_SAMPLES)),
        };
    }
    let half = Z_95 * stddev / (samples as f64).sqrt();
    let (low, high) = (mean - half, mean + half);
    let verdict = decide_interval(low, high, bound, limit);
    let needed = (verdict == Verdict::Inconclusive).then(|| {
        scaled(samples, half, (mean - limit).abs()).map_or(Needed::AtLimit, |n| {
            Needed::Samples(n.max(MEAN_MIN_SAMPLES))
        })
    });
    Decision {
        verdict,
        estimate: Some(mean),
        interval: Some((low, high)),
        samples,
        needed,
    }
}

/// Fewest samples [`decide_mean`] gives an interval for.
pub const MEAN_MIN_SAMPLES: u64 = 30;

/// The Wilson score interval of `k` successes in `n` trials at normal quantile `z`; `None`
/// when `n` is 0. Within `[0, 1]` and around `k/n`.
///
/// ```
/// let (low, high) = latlab_stats::gate::wilson_interval(0, 1000, latlab_stats::Z_95).unwrap();
/// assert_eq!(low, 0.0);
/// assert!((high - 0.003_826).abs() < 1e-6); // z²/(n + z²): 0 in 1000 still allows 0.38 %
/// ```
pub fn wilson_interval(k: u64, n: u64, z: f64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    Some(wilson(k.min(n) as f64 / n as f64, n as f64, z))
}

/// The Wilson interval of an observed proportion `p` of `n` trials (`n` may be fractional:
/// [`decide_proportion`] asks what a larger run seeing the same proportion would give).
fn wilson(p: f64, n: f64, z: f64) -> (f64, f64) {
    let z2 = z * z;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = z / denominator * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// A gate on a proportion (loss: `k` of `n` probes lost), from its Wilson score interval
/// ([`wilson_interval`], 95 %). No trials is inconclusive. A straddling interval needs the
/// smallest run that would decide it seeing the same proportion.
pub fn decide_proportion(k: u64, n: u64, bound: Bound, limit: f64) -> Decision {
    let Some((low, high)) = wilson_interval(k, n, Z_95) else {
        return Decision {
            verdict: Verdict::Inconclusive,
            estimate: None,
            interval: None,
            samples: 0,
            needed: Some(Needed::AtLimit),
        };
    };
    let p = k.min(n) as f64 / n as f64;
    let verdict = decide_interval(low, high, bound, limit);
    let needed = (verdict == Verdict::Inconclusive).then(|| {
        if p == limit {
            return Needed::AtLimit;
        }
        let decides = |trials: u64| {
            let (low, high) = wilson(p, trials as f64, Z_95);
            decide_interval(low, high, bound, limit) != Verdict::Inconclusive
        };
        smallest(n, decides).map_or(Needed::AtLimit, Needed::Samples)
    });
    Decision {
        verdict,
        estimate: Some(p),
        interval: Some((low, high)),
        samples: n,
        needed,
    }
}

/// The smallest count above `from` at which `ok` holds, `ok` being monotone; `None` past
/// 2^62.
fn smallest(from: u64, ok: impl Fn(u64) -> bool) -> Option<u64> {
    let mut low = from.max(1);
    let mut high = low.saturating_mul(2);
    while !ok(high) {
        if high >= 1 << 62 {
            return None;
        }
        low = high;
        high *= 2;
    }
    while high - low > 1 {
        let mid = low + (high - low) / 2;
        if ok(mid) {
            high = mid;
        } else {
            low = mid;
        }
    }
    Some(high)
}

/// A gate on a value that was observed, not estimated (a run's max, its achieved rate): its
/// own interval, so the verdict is pass or fail.
pub fn decide_observed(value: f64, samples: u64, bound: Bound, limit: f64) -> Decision {
    let verdict = if bound.holds(value, limit) {
        Verdict::Pass
    } else {
        Verdict::Fail
    };
    Decision {
        verdict,
        estimate: Some(value),
        interval: Some((value, value)),
        samples,
        needed: None,
    }
}

#[cfg(test)]
mod tests;
