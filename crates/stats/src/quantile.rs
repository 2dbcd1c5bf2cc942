//! Quantiles and distribution-free confidence intervals from order statistics.
//!
//! For `n` independent samples, the number of samples below the true `q`-quantile is
//! Binomial(n, q). With the normal approximation, the true quantile lies between the
//! order statistics of ranks `floor(nq - z·sqrt(nq(1-q)))` and `ceil(nq + z·sqrt(nq(1-q)))`
//! with the confidence that `z` stands for ([`Z_95`] for 95 %). When either rank falls
//! outside `1..=n` the data cannot bound the quantile, and latlab reports
//! "too few samples" instead of a number.

/// Two-sided 95 % normal quantile.
pub const Z_95: f64 = 1.96;

/// A quantile together with its display label and machine key.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Quantile {
    /// The quantile in (0, 1), e.g. `0.999`.
    pub q: f64,
    /// Human label, e.g. `"p99.9"`.
    pub label: &'static str,
    /// Identifier-safe key used in JSON and CSV, e.g. `"p99_9"`.
    pub key: &'static str,
}

impl Quantile {
    /// The median.
    pub const P50: Quantile = Quantile::new(0.5, "p50", "p50");
    /// The 90th percentile.
    pub const P90: Quantile = Quantile::new(0.9, "p90", "p90");
    /// The 95th percentile (not among the standard ones, but read back from JSON: Table I of
    /// the game-server study uses it).
    pub const P95: Quantile = Quantile::new(0.95, "p95", "p95");
    /// The 99th percentile.
    pub const P99: Quantile = Quantile::new(0.99, "p99", "p99");
    /// The 99.9th percentile.
    pub const P99_9: Quantile = Quantile::new(0.999, "p99.9", "p99_9");
    /// The 99.99th percentile.
    pub const P99_99: Quantile = Quantile::new(0.9999, "p99.99", "p99_99");
    /// The 99.999th percentile.
    pub const P99_999: Quantile = Quantile::new(0.99999, "p99.999", "p99_999");
    /// The 99.9999th percentile.
    pub const P99_9999: Quantile = Quantile::new(0.999999, "p99.9999", "p99_9999");

    /// A quantile with the given label and key; `q` must lie in (0, 1).
    pub const fn new(q: f64, label: &'static str, key: &'static str) -> Self {
        Self { q, label, key }
    }

    /// The standard quantile whose [`key`](Self::key) is `key`, if any.
    pub fn from_key(key: &str) -> Option<Quantile> {
        STANDARD_PERCENTILES
            .iter()
            .chain(std::iter::once(&Quantile::P95))
            .copied()
            .find(|q| q.key == key)
    }

    /// The quantile any percentile key names: a standard one (and p95) as
    /// [`from_key`](Self::from_key) gives it, or else any key of the form `p<whole>` or
    /// `p<whole>_<fraction>`: the percentage with `_` for its decimal point, `<whole>` 0 to
    /// 99 without a leading zero, `<fraction>` 1 to [`MAX_KEY_FRACTION_DIGITS`] digits.
    /// `p75` is 0.75 labelled `"p75"`, `p99_5` is 0.995 labelled `"p99.5"`. `None` for
    /// anything else and for a quantile of 0.
    ///
    /// `q` is the decimal the key spells, rounded once (as the literal `0.995` is), so a
    /// quantile made with [`new`](Self::new) from the same decimal compares equal.
    /// `Quantile` holds `'static` strings: the key and label of a quantile that is not
    /// standard are allocated once per distinct key and kept for the life of the process.
    ///
    /// ```
    /// use latlab_stats::Quantile;
    ///
    /// assert_eq!(Quantile::parse_key("p99_9"), Some(Quantile::P99_9));
    /// assert_eq!(Quantile::parse_key("p99_5"), Some(Quantile::new(0.995, "p99.5", "p99_5")));
    /// assert_eq!(Quantile::parse_key("p100"), None);
    /// ```
    pub fn parse_key(key: &str) -> Option<Quantile> {
        if let Some(known) = Self::from_key(key) {
            return Some(known);
        }
        let spelled = key.strip_prefix('p')?;
        let (whole, fraction) = match spelled.split_once('_') {
            Some((whole, fraction)) => (whole, Some(fraction)),
            None => (spelled, None),
        };
        let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
        if !digits(whole) || whole.len() > 2 || (whole.len() == 2 && whole.starts_with('0')) {
            return None;
        }
        if let Some(f) = fraction {
            if !digits(f) || f.len() > MAX_KEY_FRACTION_DIGITS {
                return None;
            }
        }
        // The percentage divided by 100, as a decimal: "0." + two whole digits + fraction.
        let decimal = format!("0.{whole:0>2}{}", fraction.unwrap_or(""));
        // Cannot fail: `decimal` is "0." followed by ASCII digits.
        let q: f64 = decimal.parse().expect("a decimal number");
        if q <= 0.0 {
            return None;
        }
        let label = match fraction {
            Some(f) => format!("p{whole}.{f}"),
            None => format!("p{whole}"),
        };
        Some(Quantile::new(q, intern(label), intern(key.to_owned())))
    }
}

/// Most digits after the decimal point [`Quantile::parse_key`] reads (p99.9999 has 4).
pub const MAX_KEY_FRACTION_DIGITS: usize = 9;

/// `s` as a `'static` string: allocated the first time it is seen, the same one afterwards.
fn intern(s: String) -> &'static str {
    use std::collections::BTreeSet;
    use std::sync::{Mutex, OnceLock, PoisonError};
    static STRINGS: OnceLock<Mutex<BTreeSet<&'static str>>> = OnceLock::new();
    let mut strings = STRINGS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(&interned) = strings.get(s.as_str()) {
        return interned;
    }
    let interned: &'static str = Box::leak(s.into_boxed_str());
    strings.insert(interned);
    interned
}

/// The standard percentiles latlab reports, in increasing order.
pub const STANDARD_PERCENTILES: [Quantile; 7] = [
    Quantile::P50,
    Quantile::P90,
    Quantile::P99,
    Quantile::P99_9,
    Quantile::P99_99,
    Quantile::P99_999,
    Quantile::P99_9999,
];

/// Snaps `x` to the nearest integer when it is within floating-point noise of it, so that
/// e.g. `100.0 * 0.9 = 90.00000000000001` counts as 90, not as "just above 90".
fn snap(x: f64) -> f64 {
    let r = x.round();
    if (x - r).abs() <= x.abs() * 4.0 * f64::EPSILON {
        r
    } else {
        x
    }
}

/// True when `q` and `z` describe a usable quantile interval.
fn valid(q: f64, z: f64) -> bool {
    q > 0.0 && q < 1.0 && z.is_finite() && z >= 0.0
}

/// The 1-based rank of the point estimate of quantile `q` among `n` samples:
/// `max(1, ceil(n·q))`, ignoring floating-point noise in `n·q`. 0 when `n` is 0.
///
/// ```
/// assert_eq!(latlab_stats::point_rank(100, 0.9), 90);
/// assert_eq!(latlab_stats::point_rank(10, 0.01), 1);
/// ```
pub fn point_rank(n: u64, q: f64) -> u64 {
    if n == 0 {
        return 0;
    }
    let r = snap(n as f64 * q).ceil();
    // `as` saturates: negative or NaN become 0, huge values n.
    (r as u64).clamp(1, n)
}

/// Rank bounds of a distribution-free confidence interval from order statistics:
/// `lo = floor(nq - z·sqrt(nq(1-q)))`, `hi = ceil(nq + z·sqrt(nq(1-q)))`.
///
/// `None` when `lo < 1` or `hi > n` (too few samples), and also when `q` is not in (0, 1)
/// or `z` is negative or not finite. When `Some`, `1 <= lo <= point_rank(n, q) <= hi <= n`.
pub fn rank_interval(n: u64, q: f64, z: f64) -> Option<(u64, u64)> {
    if n == 0 || !valid(q, z) {
        return None;
    }
    let nf = n as f64;
    let nq = nf * q;
    let half_width = z * (nq * (1.0 - q)).sqrt();
    let lo = snap(nq - half_width).floor();
    let hi = snap(nq + half_width).ceil();
    if lo < 1.0 || hi > nf {
        return None;
    }
    let (lo, hi) = (lo as u64, hi as u64);
    debug_assert!(1 <= lo && lo <= hi && hi <= n);
    debug_assert!(lo <= point_rank(n, q) && point_rank(n, q) <= hi);
    Some((lo, hi))
}

/// Smallest `n` for which [`rank_interval(n, q, z)`](rank_interval) is `Some`.
///
/// Every larger `n` also yields `Some` (both rank conditions have the form
/// `a·n - b·sqrt(n) >= c`, which stays true once reached). Returns `u64::MAX` when no
/// `n` suffices, i.e. for `q` outside (0, 1) or an invalid `z`.
///
/// ```
/// // A 95 % interval around the median needs 8 samples.
/// assert_eq!(latlab_stats::min_samples(0.5, latlab_stats::Z_95), 8);
/// ```
pub fn min_samples(q: f64, z: f64) -> u64 {
    if !valid(q, z) {
        return u64::MAX;
    }
    let ok = |n: u64| rank_interval(n, q, z).is_some();
    // Exponential search for an upper bound, then bisection on the monotone predicate.
    let mut hi: u64 = 1;
    while !ok(hi) {
        if hi >= 1 << 62 {
            return u64::MAX;
        }
        hi *= 2;
    }
    let mut lo = hi / 2; // not ok (or 0)
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    debug_assert!(ok(hi) && (hi == 1 || !ok(hi - 1)));
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_percentiles_are_increasing_and_labelled() {
        let keys: Vec<_> = STANDARD_PERCENTILES.iter().map(|q| q.key).collect();
        assert_eq!(
            keys,
            ["p50", "p90", "p99", "p99_9", "p99_99", "p99_999", "p99_9999"]
        );
        assert_eq!(Quantile::P99_9.label, "p99.9");
        assert!(STANDARD_PERCENTILES.windows(2).all(|w| w[0].q < w[1].q));
        assert_eq!(Quantile::from_key("p99_99"), Some(Quantile::P99_99));
        assert_eq!(Quantile::from_key("p42"), None);
    }

    #[test]
    fn any_percentile_key_names_its_quantile() {
        for q in STANDARD_PERCENTILES.iter().chain([&Quantile::P95]) {
            assert_eq!(Quantile::parse_key(q.key), Some(*q), "{}", q.key);
        }
        assert_eq!(
            Quantile::parse_key("p75"),
            Some(Quantile::new(0.75, "p75", "p75"))
        );
        assert_eq!(
            Quantile::parse_key("p5"),
            Some(Quantile::new(0.05, "p5", "p5"))
        );
        assert_eq!(
            Quantile::parse_key("p99_5"),
            Some(Quantile::new(0.995, "p99.5", "p99_5"))
        );
        assert_eq!(
            Quantile::parse_key("p0_1"),
            Some(Quantile::new(0.001, "p0.1", "p0_1"))
        );
        assert_eq!(
            Quantile::parse_key("p99_999999999"),
            Some(Quantile::new(
                0.99999999999,
                "p99.999999999",
                "p99_999999999"
            ))
        );
        // The same key gives the same strings, allocated once.
        let (a, b) = (
            Quantile::parse_key("p42").unwrap(),
            Quantile::parse_key("p42").unwrap(),
        );
        assert!(std::ptr::eq(a.key, b.key) && std::ptr::eq(a.label, b.label));
    }

    #[test]
    fn other_keys_name_no_quantile() {
        for key in [
            "",
            "p",
            "p_",
            "p_5",
            "p5_",
            "p100",
            "p05",
            "p0",
            "p0_000",
            "p-1",
            "p+1",
            "p1.5",
            "p1_5_5",
            "p99_9999999999",
            "q50",
            "P50",
            "p٣",
            "count",
            "ci95",
        ] {
            assert_eq!(Quantile::parse_key(key), None, "{key:?}");
        }
    }

    #[test]
    fn point_rank_is_ceil_of_n_q_without_floating_point_noise() {
        assert_eq!(point_rank(100, 0.9), 90); // 100 * 0.9 == 90.00000000000001 in f64
        assert_eq!(point_rank(1000, 0.999), 999);
        assert_eq!(point_rank(1_000_000, 0.999999), 999_999);
        assert_eq!(point_rank(10, 0.55), 6);
        assert_eq!(point_rank(10, 0.01), 1);
        assert_eq!(point_rank(0, 0.5), 0);
    }

    #[test]
    fn rank_interval_matches_hand_computed_values() {
        // n=100, q=0.5: nq=50, 1.96*sqrt(25)=9.8 -> [floor(40.2), ceil(59.8)]
        assert_eq!(rank_interval(100, 0.5, Z_95), Some((40, 60)));
        // n=1000, q=0.99: nq=990, 1.96*sqrt(9.9)=6.1669 -> [floor(983.83), ceil(996.17)]
        assert_eq!(rank_interval(1000, 0.99, Z_95), Some((983, 997)));
        // n=10000, q=0.999: nq=9990, 1.96*sqrt(9.99)=6.1950 -> [9983, 9997]
        assert_eq!(rank_interval(10_000, 0.999, Z_95), Some((9983, 9997)));
        // n=8, q=0.5: nq=4, 1.96*sqrt(2)=2.7719 -> [floor(1.23), ceil(6.77)]
        assert_eq!(rank_interval(8, 0.5, Z_95), Some((1, 7)));
        // z=0 collapses to the point estimate's neighbourhood
        assert_eq!(rank_interval(100, 0.9, 0.0), Some((90, 90)));
    }

    #[test]
    fn rank_interval_is_none_when_a_bound_leaves_the_sample() {
        // n=7, q=0.5: 3.5 - 2.593 = 0.907 -> lo = 0
        assert_eq!(rank_interval(7, 0.5, Z_95), None);
        // n=1000, q=0.999: 999 + 1.96*sqrt(0.999) = 1000.96 -> hi = 1001 > n
        assert_eq!(rank_interval(1000, 0.999, Z_95), None);
        // one million samples cannot bound the one-in-a-million quantile
        assert_eq!(rank_interval(1_000_000, 0.999_999, Z_95), None);
        // ten thousand samples certainly cannot
        assert_eq!(rank_interval(10_000, 0.999_999, Z_95), None);
    }

    #[test]
    fn rank_interval_rejects_nonsense_parameters() {
        assert_eq!(rank_interval(0, 0.5, Z_95), None);
        assert_eq!(rank_interval(100, 0.0, Z_95), None);
        assert_eq!(rank_interval(100, 1.0, Z_95), None);
        assert_eq!(rank_interval(100, f64::NAN, Z_95), None);
        assert_eq!(rank_interval(100, 0.5, -1.0), None);
        assert_eq!(rank_interval(100, 0.5, f64::INFINITY), None);
    }

    #[test]
    fn rank_interval_contains_the_point_rank() {
        for n in [8, 50, 99, 100, 1_000, 12_345, 1_000_000, 10_000_000] {
            for q in STANDARD_PERCENTILES {
                if let Some((lo, hi)) = rank_interval(n, q.q, Z_95) {
                    let p = point_rank(n, q.q);
                    assert!(lo <= p && p <= hi, "n={n} {}: {lo}..{hi} vs {p}", q.label);
                }
            }
        }
    }

    #[test]
    fn min_samples_is_the_exact_threshold() {
        for q in STANDARD_PERCENTILES.iter().take(5) {
            let m = min_samples(q.q, Z_95);
            assert!(rank_interval(m, q.q, Z_95).is_some(), "{}", q.label);
            assert!(rank_interval(m - 1, q.q, Z_95).is_none(), "{}", q.label);
            for n in m..m + 1000 {
                assert!(rank_interval(n, q.q, Z_95).is_some(), "{} n={n}", q.label);
            }
        }
    }

    #[test]
    fn min_samples_of_the_standard_percentiles() {
        // Above the median the binding condition is hi <= n, i.e. n >= z^2 q / (1 - q);
        // the median is bound by lo >= 1 (n/2 - 0.98 sqrt(n) >= 1  <=>  n >= 7.3).
        let got: Vec<u64> = STANDARD_PERCENTILES
            .iter()
            .map(|q| min_samples(q.q, Z_95))
            .collect();
        assert_eq!(
            got,
            [8, 35, 381, 3_838, 38_413, 384_157, 3_841_597],
            "z^2 q/(1-q) = 3.84, 34.57, 380.3, 3837.8, 38412.2, 384156.2, 3841596.2"
        );
    }

    #[test]
    fn the_one_in_a_million_quantile_needs_3_841_597_samples() {
        assert_eq!(min_samples(0.999_999, 1.96), 3_841_597);
        assert_eq!(
            rank_interval(3_841_597, 0.999_999, 1.96),
            Some((3_841_589, 3_841_597))
        );
        assert_eq!(rank_interval(3_841_596, 0.999_999, 1.96), None);
    }

    #[test]
    fn min_samples_grows_with_the_quantile_and_the_confidence() {
        let qs = [0.5, 0.75, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 0.99999];
        let ms: Vec<u64> = qs.iter().map(|&q| min_samples(q, Z_95)).collect();
        assert!(ms.windows(2).all(|w| w[0] < w[1]), "{ms:?}");
        assert!(min_samples(0.99, 2.576) > min_samples(0.99, Z_95));
        assert!(min_samples(0.99, 1.0) < min_samples(0.99, Z_95));
    }

    #[test]
    fn min_samples_is_max_for_unreachable_quantiles() {
        assert_eq!(min_samples(1.0, Z_95), u64::MAX);
        assert_eq!(min_samples(0.0, Z_95), u64::MAX);
        assert_eq!(min_samples(0.5, f64::NAN), u64::MAX);
    }
}
