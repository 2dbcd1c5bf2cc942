use super::*;
use crate::LatencyHistogram;

fn value(value_ns: u64, ci_low_ns: u64, ci_high_ns: u64) -> Estimate {
    Estimate::Value {
        value_ns,
        ci_low_ns,
        ci_high_ns,
    }
}

#[test]
fn a_whole_interval_on_one_side_decides_and_a_straddling_one_does_not() {
    for (low, high, bound, limit, verdict) in [
        (1.0, 2.0, Bound::AtMost, 2.0, Verdict::Pass),
        (1.0, 2.0, Bound::Below, 2.0, Verdict::Inconclusive),
        (1.0, 1.99, Bound::Below, 2.0, Verdict::Pass),
        (2.0, 3.0, Bound::AtMost, 2.0, Verdict::Inconclusive),
        (2.01, 3.0, Bound::AtMost, 2.0, Verdict::Fail),
        (2.0, 3.0, Bound::Below, 2.0, Verdict::Fail),
        (2.0, 3.0, Bound::AtLeast, 2.0, Verdict::Pass),
        (2.0, 3.0, Bound::Above, 2.0, Verdict::Inconclusive),
        (0.5, 1.5, Bound::AtLeast, 2.0, Verdict::Fail),
        (1.5, 2.5, Bound::Above, 2.0, Verdict::Inconclusive),
    ] {
        assert_eq!(
            decide_interval(low, high, bound, limit),
            verdict,
            "[{low}, {high}] {} {limit}",
            bound.symbol()
        );
    }
}

#[test]
fn too_few_samples_for_a_percentile_is_inconclusive_never_a_pass() {
    let mut h = LatencyHistogram::new();
    h.record_n(1_000, 100); // every sample 1 µs, far under any limit
    let estimate = Estimate::of(&h, 0.99, Z_95);
    let d = decide_quantile(&estimate, 0.99, 100, Bound::AtMost, 1e9);
    assert_eq!(d.verdict, Verdict::Inconclusive);
    assert_eq!(d.interval, None);
    assert_eq!(d.needed, Some(Needed::Samples(381)));
}

#[test]
fn a_percentile_gate_is_decided_by_its_interval_not_its_estimate() {
    // Estimate under the limit, interval across it.
    let d = decide_quantile(
        &value(1_900, 1_800, 2_100),
        0.99,
        1_000,
        Bound::AtMost,
        2_000.0,
    );
    assert_eq!(d.verdict, Verdict::Inconclusive);
    assert_eq!(d.estimate, Some(1_900.0));
    // The half on the limit's side is 200, the distance 100: four times the samples.
    assert_eq!(d.needed, Some(Needed::Samples(4_000)));
    // Estimate over the limit, interval across it: the lower half counts.
    let d = decide_quantile(
        &value(2_100, 1_950, 2_200),
        0.99,
        1_000,
        Bound::AtMost,
        2_000.0,
    );
    assert_eq!(d.needed, Some(Needed::Samples(2_250)));
    // An estimate on the limit: no run is likely to decide it.
    let d = decide_quantile(
        &value(2_000, 1_950, 2_200),
        0.99,
        1_000,
        Bound::AtMost,
        2_000.0,
    );
    assert_eq!(d.needed, Some(Needed::AtLimit));
    // Never fewer than the percentile needs at all.
    let d = decide_quantile(
        &value(1_000, 900, 1_011),
        0.999,
        1_000,
        Bound::AtMost,
        1_010.0,
    );
    assert_eq!(d.needed, Some(Needed::Samples(3_838)), "not 1 210");
    let pass = decide_quantile(
        &value(1_900, 1_800, 1_999),
        0.99,
        1_000,
        Bound::AtMost,
        2_000.0,
    );
    assert_eq!((pass.verdict, pass.needed), (Verdict::Pass, None));
    let fail = decide_quantile(
        &value(2_100, 2_001, 2_200),
        0.99,
        1_000,
        Bound::AtMost,
        2_000.0,
    );
    assert_eq!((fail.verdict, fail.needed), (Verdict::Fail, None));
}

#[test]
fn the_wilson_interval_matches_hand_computed_values() {
    // k = 5, n = 100, z = 1.96: centre (0.05 + 0.019208)/1.038416 = 0.066649,
    // half 1.96/1.038416 * sqrt(0.000475 + 0.00009604) = 0.045111.
    let (low, high) = wilson_interval(5, 100, Z_95).unwrap();
    assert!((low - 0.021_537).abs() < 1e-5, "{low}");
    assert!((high - 0.111_760).abs() < 1e-5, "{high}");
    let (low, high) = wilson_interval(100, 100, Z_95).unwrap();
    assert!(
        (high - 1.0).abs() < 1e-12 && (low - 0.963_00).abs() < 1e-4,
        "{low}"
    );
    assert_eq!(wilson_interval(0, 0, Z_95), None);
}

#[test]
fn a_loss_gate_says_how_long_a_run_would_decide_it() {
    let d = decide_proportion(12, 10_000, Bound::AtMost, 0.001);
    assert_eq!(d.verdict, Verdict::Inconclusive);
    let Some(Needed::Samples(n)) = d.needed else {
        panic!("{d:?}")
    };
    // A run of n seeing 0.12 % decides it, one of n - 1 does not.
    let decided = |trials: u64| {
        let (low, high) = wilson(0.0012, trials as f64, Z_95);
        decide_interval(low, high, Bound::AtMost, 0.001) != Verdict::Inconclusive
    };
    assert!(decided(n) && !decided(n - 1), "{n}");
    assert!(
        (90_000..120_000).contains(&n),
        "0.12 % against 0.1 % takes a long run: {n}"
    );
    assert_eq!(
        decide_proportion(0, 0, Bound::AtMost, 0.001).verdict,
        Verdict::Inconclusive
    );
    assert_eq!(
        decide_proportion(500, 100_000, Bound::AtMost, 0.001).verdict,
        Verdict::Fail
    );
    assert_eq!(
        decide_proportion(10, 10_000, Bound::AtMost, 0.001).needed,
        Some(Needed::AtLimit)
    );
}

#[test]
fn a_mean_gate_uses_the_normal_interval() {
    // mean 100, sd 50, n 100: half 1.96 * 5 = 9.8.
    let d = decide_mean(100, 100.0, 50.0, Bound::AtMost, 105.0);
    assert_eq!(d.verdict, Verdict::Inconclusive);
    let (low, high) = d.interval.unwrap();
    assert!((low - 90.2).abs() < 1e-9 && (high - 109.8).abs() < 1e-9);
    // (9.8 / 5)^2 * 100 = 384.16
    assert_eq!(d.needed, Some(Needed::Samples(385)));
    assert_eq!(
        decide_mean(100, 100.0, 50.0, Bound::AtMost, 110.0).verdict,
        Verdict::Pass
    );
    assert_eq!(
        decide_mean(100, 100.0, 50.0, Bound::AtMost, 90.0).verdict,
        Verdict::Fail
    );
    let few = decide_mean(29, 100.0, 0.0, Bound::AtMost, 1e9);
    assert_eq!(
        (few.verdict, few.needed),
        (Verdict::Inconclusive, Some(Needed::Samples(30)))
    );
}

#[test]
fn an_observed_value_passes_or_fails() {
    assert_eq!(
        decide_observed(9_950.0, 1, Bound::AtLeast, 9_900.0).verdict,
        Verdict::Pass
    );
    assert_eq!(
        decide_observed(9_850.0, 1, Bound::AtLeast, 9_900.0).verdict,
        Verdict::Fail
    );
    assert_eq!(
        decide_observed(20.0, 1, Bound::AtMost, 20.0).verdict,
        Verdict::Pass
    );
    assert_eq!(
        decide_observed(20.0, 1, Bound::Below, 20.0).verdict,
        Verdict::Fail
    );
}

#[test]
fn verdicts_order_from_pass_to_fail() {
    assert!(Verdict::Pass < Verdict::Inconclusive && Verdict::Inconclusive < Verdict::Fail);
    let names: Vec<_> = [Verdict::Pass, Verdict::Inconclusive, Verdict::Fail]
        .map(Verdict::name)
        .into();
    assert_eq!(names, ["pass", "inconclusive", "fail"]);
}
