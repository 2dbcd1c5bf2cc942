//! Two runs' percentiles side by side: NEW's change against BASE's with a 95 % interval, from
//! a seeded bootstrap over the HdrHistogram counts.
//!
//! Resampling `n` samples with replacement and taking the sample quantile of rank
//! `r = max(1, ceil(n·q))` picks the original sample of rank `ceil(n·U)`, `U` being the `r`-th
//! smallest of `n` uniform draws, which is Beta(r, n − r + 1). So each bootstrap replicate of a
//! quantile is one Beta draw and one lookup in the histogram's cumulative counts, whatever `n`:
//! the bootstrap of the whole sample, without drawing it. The change's interval is the 2.5th
//! and 97.5th percentiles of `new/base − 1` over independent replicates of both runs. A
//! percentile either run has too few samples to bound ([`rank_interval`]) is not compared.
//!
//! ```
//! use latlab_stats::compare::{compare_quantile, Comparison};
//! use latlab_stats::LatencyHistogram;
//!
//! let (mut base, mut new) = (LatencyHistogram::new(), LatencyHistogram::new());
//! for i in 1..=10_000u64 {
//!     base.record(i * 1_000);
//!     new.record(i * 1_100); // every sample 10 % slower
//! }
//! let Comparison::Change(c) = compare_quantile(&base, &new, 0.99, 2_000, 1) else { panic!() };
//! assert!((c.change - 0.10).abs() < 0.005 && c.low < 0.10 && 0.10 < c.high);
//! ```

use rand::rngs::SmallRng;
use rand::SeedableRng;
use rand_distr::{Beta, Distribution};

use crate::quantile::{min_samples, point_rank, rank_interval, Z_95};
use crate::LatencyHistogram;

/// NEW's percentile against BASE's.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Change {
    /// BASE's point estimate, ns.
    pub base_ns: u64,
    /// NEW's point estimate, ns.
    pub new_ns: u64,
    /// `new_ns / base_ns − 1` (0.12: 12 % above).
    pub change: f64,
    /// The 95 % interval's low end of the change.
    pub low: f64,
    /// Its high end.
    pub high: f64,
}

/// The outcome of comparing one percentile.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Comparison {
    /// Both runs bound the percentile.
    Change(Change),
    /// One run (or both) has too few samples for it.
    TooFewSamples {
        /// BASE's samples.
        base: u64,
        /// NEW's samples.
        new: u64,
        /// Samples each needs.
        needed: u64,
    },
}

/// A histogram's values by rank: the cumulative count at each recorded bucket and the bucket's
/// highest equivalent value (as [`LatencyHistogram::value_at_rank`] reports it).
struct Ranked {
    cumulative: Vec<u64>,
    values: Vec<u64>,
}

impl Ranked {
    fn new(h: &LatencyHistogram) -> Ranked {
        let mut cumulative = Vec::new();
        let mut values = Vec::new();
        let mut seen = 0u64;
        for v in h.as_hdr().iter_recorded() {
            seen = seen.saturating_add(v.count_at_value());
            cumulative.push(seen);
            values.push(v.value_iterated_to());
        }
        Ranked { cumulative, values }
    }

    /// The value of 1-based `rank` (clamped to the sample).
    fn at(&self, rank: u64) -> u64 {
        let i = self.cumulative.partition_point(|&c| c < rank);
        self.values[i.min(self.values.len() - 1)]
    }
}

/// Draws bootstrap replicates of the `q`-quantile of one histogram.
struct Replicates {
    ranked: Ranked,
    n: u64,
    beta: Beta<f64>,
}

impl Replicates {
    /// `None` for an empty histogram.
    fn new(h: &LatencyHistogram, q: f64) -> Option<Replicates> {
        let n = h.len();
        let r = point_rank(n, q);
        let beta = Beta::new(r as f64, (n - r + 1) as f64).ok()?;
        Some(Replicates {
            ranked: Ranked::new(h),
            n,
            beta,
        })
    }

    fn draw(&self, rng: &mut SmallRng) -> u64 {
        let u: f64 = self.beta.sample(rng);
        let rank = ((self.n as f64 * u).ceil() as u64).clamp(1, self.n);
        self.ranked.at(rank)
    }
}

/// NEW's `q`-quantile against BASE's: the change and its 95 % bootstrap interval from `draws`
/// replicates (at least 40; 2000 is plenty), seeded by `seed`.
pub fn compare_quantile(
    base: &LatencyHistogram,
    new: &LatencyHistogram,
    q: f64,
    draws: u32,
    seed: u64,
) -> Comparison {
    let (nb, nn) = (base.len(), new.len());
    let too_few = Comparison::TooFewSamples {
        base: nb,
        new: nn,
        needed: min_samples(q, Z_95),
    };
    if rank_interval(nb, q, Z_95).is_none() || rank_interval(nn, q, Z_95).is_none() {
        return too_few;
    }
    let (Some(b), Some(n)) = (Replicates::new(base, q), Replicates::new(new, q)) else {
        return too_few;
    };
    // Cannot fail: both have samples, as their rank intervals exist.
    let at = |h: &LatencyHistogram, size| h.value_at_rank(point_rank(size, q)).expect("a rank");
    let (base_ns, new_ns) = (at(base, nb), at(new, nn));
    let mut rng = SmallRng::seed_from_u64(seed);
    let draws = draws.max(40);
    let mut changes: Vec<f64> = (0..draws)
        .map(|_| {
            let (x, y) = (b.draw(&mut rng), n.draw(&mut rng));
            y as f64 / x.max(1) as f64 - 1.0
        })
        .collect();
    changes.sort_by(f64::total_cmp);
    let pick = |p: f64| changes[((p * f64::from(draws)).floor() as usize).min(changes.len() - 1)];
    let change = new_ns as f64 / base_ns.max(1) as f64 - 1.0;
    Comparison::Change(Change {
        base_ns,
        new_ns,
        change,
        low: pick(0.025).min(change),
        high: pick(0.975).max(change),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scaled(n: u64, factor: f64) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for i in 1..=n {
            h.record((i as f64 * 1_000.0 * factor) as u64);
        }
        h
    }

    #[test]
    fn a_run_against_itself_has_no_change_and_an_interval_around_zero() {
        let h = scaled(20_000, 1.0);
        let Comparison::Change(c) = compare_quantile(&h, &h, 0.99, 2_000, 7) else {
            panic!("enough samples")
        };
        assert_eq!(c.change, 0.0);
        assert!(c.low < 0.0 && c.high > 0.0, "{c:?}");
        // p99 of 20 000: about ±14 ranks of 19 800 each, so about ±0.1 % per run.
        assert!(c.low > -0.01 && c.high < 0.01, "{c:?}");
    }

    #[test]
    fn a_slower_run_is_above_with_an_interval_that_excludes_zero() {
        let (base, new) = (scaled(10_000, 1.0), scaled(10_000, 1.2));
        let Comparison::Change(c) = compare_quantile(&base, &new, 0.5, 2_000, 7) else {
            panic!("enough samples")
        };
        assert!((c.change - 0.2).abs() < 0.002, "{c:?}");
        assert!(c.low > 0.15 && c.high < 0.25 && c.low <= c.change && c.change <= c.high);
    }

    #[test]
    fn the_same_seed_gives_the_same_interval() {
        let (base, new) = (scaled(5_000, 1.0), scaled(6_000, 1.05));
        let a = compare_quantile(&base, &new, 0.9, 500, 3);
        assert_eq!(a, compare_quantile(&base, &new, 0.9, 500, 3));
        assert_ne!(a, compare_quantile(&base, &new, 0.9, 500, 4));
    }

    #[test]
    fn too_few_samples_in_either_run_is_not_compared() {
        let (base, new) = (scaled(10_000, 1.0), scaled(300, 1.0));
        assert_eq!(
            compare_quantile(&base, &new, 0.99, 500, 1),
            Comparison::TooFewSamples {
                base: 10_000,
                new: 300,
                needed: 381
            }
        );
    }

    #[test]
    fn the_ranked_lookup_agrees_with_value_at_rank() {
        let h = scaled(3_000, 1.7);
        let ranked = Ranked::new(&h);
        for rank in [1, 2, 100, 1_500, 2_999, 3_000] {
            assert_eq!(Some(ranked.at(rank)), h.value_at_rank(rank), "rank {rank}");
        }
    }
}
