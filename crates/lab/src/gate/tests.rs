use latlab_stats::LatencyHistogram;

use super::*;

/// `n` round trips of 1 µs to `n` µs (so p99 is about `0.99·n` µs), from `sent` probes at
/// 1000 probes per second.
fn run(n: u64, sent: u64) -> RunSummary {
    let mut h = LatencyHistogram::new();
    for i in 1..=n {
        h.record(i * 1_000);
    }
    RunSummary::synthetic("test", &h, sent, 1_000.0)
}

fn parse(text: &str) -> Result<Assertion, String> {
    text.parse::<Assertion>().map_err(|e| e.to_string())
}

#[test]
fn every_statistic_reads_with_its_unit() {
    let a = parse("p99 <= 2ms").unwrap();
    assert_eq!(
        (a.statistic, a.bound, a.limit),
        (
            Statistic::Percentile(Delay::RoundTrip, Quantile::P99),
            Bound::AtMost,
            2e6
        )
    );
    assert_eq!(a.to_string(), "p99<=2ms");
    let a = parse("forward.p99.9<500us").unwrap();
    assert_eq!(
        (a.statistic, a.bound, a.limit),
        (
            Statistic::Percentile(Delay::Forward, Quantile::P99_9),
            Bound::Below,
            5e5
        )
    );
    assert_eq!(
        parse("max<=20ms").unwrap().statistic,
        Statistic::Max(Delay::RoundTrip)
    );
    assert_eq!(
        parse("return.mean<1ms").unwrap().statistic,
        Statistic::Mean(Delay::Return)
    );
    let loss = parse("loss<=0.1%").unwrap();
    assert!((loss.limit - 0.001).abs() < 1e-15);
    assert_eq!(parse("loss<=0.001").unwrap().limit, 0.001);
    let achieved = parse("achieved>=9.9k").unwrap();
    assert_eq!((achieved.bound, achieved.limit), (Bound::AtLeast, 9_900.0));
    assert_eq!(parse("ndr>500k").unwrap().statistic, Statistic::Ndr);
}

#[test]
fn what_does_not_parse_is_refused_naming_itself() {
    for (text, reason) in [
        ("p99", "no comparison"),
        ("p99=2ms", "compare with <="),
        ("p99<=", "no limit"),
        ("p98<=2ms", "unknown statistic \"p98\""),
        ("forward.loss<=1%", "unknown statistic"),
        ("latency<=2ms", "unknown statistic"),
        ("p99<=2", "needs a unit"),
        ("p99<=2parsecs", "unknown time unit"),
        ("loss<=150%", "is not a loss"),
        ("achieved>=fast", "is not a rate"),
    ] {
        let e = parse(text).unwrap_err();
        assert!(
            e.starts_with(&format!("--assert {text:?}: ")) && e.contains(reason),
            "{text}: {e}"
        );
    }
}

#[test]
fn what_a_command_cannot_answer_is_refused_before_it_runs() {
    let check = |text: &str, results, shared| {
        parse(text)
            .unwrap()
            .check_for(results, shared)
            .map_err(|e| e.to_string())
    };
    assert_eq!(check("p99<=2ms", Results::Run, false), Ok(()));
    assert!(check("forward.p99<=2ms", Results::Run, false)
        .unwrap_err()
        .contains("one-way delays need a shared clock"));
    assert_eq!(check("forward.p99<=2ms", Results::Run, true), Ok(()));
    assert!(check("p99<=2ms", Results::Rfc2544, true)
        .unwrap_err()
        .contains("rfc2544 gates its rates only"));
    assert!(check("ndr>=1k", Results::Run, true)
        .unwrap_err()
        .contains("rfc2544's"));
    assert_eq!(check("ndr>=1k", Results::Rfc2544, false), Ok(()));
    assert_eq!(check("p99<=2ms", Results::Stream, true), Ok(()));
    assert!(check("forward.p99<=2ms", Results::Stream, true)
        .unwrap_err()
        .contains("one-way already"));
}

#[test]
fn a_percentile_passes_fails_or_is_inconclusive_by_its_interval() {
    // 10 000 samples of 1..10 000 µs: p99 about 9.9 ms, its interval about ±0.02 ms.
    let summary = run(10_000, 10_000);
    let verdict = |text: &str| parse(text).unwrap().evaluate(&summary, None);
    assert_eq!(verdict("p99<=10ms").verdict, Verdict::Pass);
    assert_eq!(verdict("p99<=9.8ms").verdict, Verdict::Fail);
    let close = verdict("p99<=9.9ms");
    assert_eq!(close.verdict, Verdict::Inconclusive, "{}", close.message);
    assert!(close.low.unwrap() <= 9.9e6 && 9.9e6 <= close.high.unwrap());
    // p99.99 of 10 000 samples cannot be bounded: inconclusive even against a limit of an
    // hour, with the samples it needs and the time they take at this run's rate.
    let few = verdict("p99.99<=1h");
    assert_eq!(few.verdict, Verdict::Inconclusive);
    assert_eq!(few.needed_samples, Some(38_413));
    assert!((few.needed_duration_s.unwrap() - 38.413).abs() < 1e-9);
    assert!(
        few.line().starts_with("INCONCLUSIVE p99.99<=1h: p99.99: too few samples, 10000 samples; about 38413 samples in all would likely decide it (a run of 38.4 s at 1000 pps)"),
        "{}",
        few.line()
    );
}

#[test]
fn loss_uses_the_wilson_interval_of_the_probes_sent() {
    let summary = run(9_988, 10_000); // 12 lost: 0.12 % [0.069 %, 0.21 %]
    let v = parse("loss<=0.1%").unwrap().evaluate(&summary, None);
    assert_eq!(v.verdict, Verdict::Inconclusive);
    assert_eq!(v.unit, "ratio");
    assert!(v.message.contains("Wilson interval"), "{}", v.message);
    let n = v.needed_samples.unwrap();
    assert!((90_000..120_000).contains(&n), "{n}");
    assert_eq!(
        parse("loss<=0.5%")
            .unwrap()
            .evaluate(&summary, None)
            .verdict,
        Verdict::Pass
    );
    assert_eq!(
        parse("loss<0.05%")
            .unwrap()
            .evaluate(&summary, None)
            .verdict,
        Verdict::Fail
    );
}

#[test]
fn observed_values_pass_or_fail_and_one_way_delays_need_data() {
    let summary = run(100, 100);
    let verdict = |text: &str| parse(text).unwrap().evaluate(&summary, Some("1000 pps"));
    assert_eq!(verdict("achieved>=999").verdict, Verdict::Pass);
    assert_eq!(verdict("achieved>=1.1k").verdict, Verdict::Fail);
    assert_eq!(verdict("max<=100ms").verdict, Verdict::Pass);
    assert_eq!(verdict("min>=2us").verdict, Verdict::Fail);
    let one_way = verdict("forward.p50<=1s");
    assert_eq!(one_way.verdict, Verdict::Inconclusive);
    assert!(one_way
        .line()
        .contains("[1000 pps]: this run has no one-way delays"));
}

#[test]
fn verdicts_round_trip_through_summary_json_and_combine_worst_first() {
    let mut summary = run(10_000, 10_000);
    summary.assertions = ["p99<=10ms", "p99<=9.9ms", "p99<=9.8ms"]
        .iter()
        .map(|t| parse(t).unwrap().evaluate(&summary, None))
        .collect();
    let json = crate::results::summary_json(&summary);
    assert!(json.contains("\"verdict\": \"inconclusive\""), "{json}");
    let back: RunSummary = serde_json::from_str(&json).unwrap();
    assert_eq!(back.assertions, summary.assertions);
    assert_eq!(overall(&summary.assertions), Verdict::Fail);
    assert_eq!(overall(&summary.assertions[..2]), Verdict::Inconclusive);
    assert_eq!(overall(&summary.assertions[..1]), Verdict::Pass);
    assert_eq!(overall(&[]), Verdict::Pass);
}

#[test]
fn rfc2544_rates_pass_or_fail_and_a_source_limit_is_inconclusive() {
    let ndr = parse("ndr>=500k").unwrap();
    assert_eq!(
        ndr.evaluate_rates(Some(600_000), None, false, "64 B")
            .verdict,
        Verdict::Pass
    );
    assert_eq!(
        ndr.evaluate_rates(Some(400_000), None, false, "64 B")
            .verdict,
        Verdict::Fail
    );
    let limited = ndr.evaluate_rates(Some(400_000), None, true, "64 B");
    assert_eq!(limited.verdict, Verdict::Inconclusive);
    assert!(
        limited.line().contains("above what this source can offer"),
        "{}",
        limited.line()
    );
    let none = parse("pdr>=1k")
        .unwrap()
        .evaluate_rates(Some(1), None, false, "1518 B");
    assert_eq!(none.verdict, Verdict::Inconclusive);
    assert_eq!(
        none.line(),
        "INCONCLUSIVE pdr>=1k [1518 B]: the search found no pdr"
    );
    assert_eq!(
        ndr.evaluate_rates(Some(600_000), None, false, "64 B")
            .line(),
        "PASS ndr>=500k [64 B]: ndr 600.0 kpps (found by the search)"
    );
}

#[test]
fn a_tail_the_hosts_stalls_reach_is_inconclusive_not_failed() {
    // p99 about 9.9 ms of 10,000 round trips of 1 µs..=10 ms: fails `p99<=2ms`.
    let mut summary = run(10_000, 10_000);
    let failed = parse("p99<=2ms").unwrap().evaluate(&summary, None);
    assert_eq!(failed.verdict, Verdict::Fail);
    // One stall of `longest_ms` in a run watched for `run_s`.
    let stall = |longest_ms: u64, run_s: u64| {
        let mut s = latlab_stats::stalls::Stalls::new(Default::default());
        s.record(longest_ms * 1_000_000);
        s.observed(run_s * 1_000_000_000);
        s.report()
    };
    // The host stalled 50 ms of 1 s: as long as this tail, and more than 1% of the run.
    summary.host_stalls = Some(stall(50, 1));
    let v = parse("p99<=2ms").unwrap().evaluate(&summary, None);
    assert_eq!(v.verdict, Verdict::Inconclusive, "{}", v.line());
    assert!(
        v.message.contains("the host stalled as long as this tail"),
        "{}",
        v.message
    );
    assert_eq!(v.estimate, failed.estimate);
    // Stalls far shorter than the tail decide nothing: the failure stands.
    summary.host_stalls = Some(stall(1, 1));
    let v = parse("p99<=2ms").unwrap().evaluate(&summary, None);
    assert_eq!(v.verdict, Verdict::Fail, "{}", v.line());
    // 50 ms of 100 s cannot hold 1% of the probes: p99's failure stands, max's does not.
    summary.host_stalls = Some(stall(50, 100));
    let p99 = parse("p99<=2ms").unwrap().evaluate(&summary, None);
    assert_eq!(p99.verdict, Verdict::Fail, "{}", p99.line());
    let max = parse("max<=2ms").unwrap().evaluate(&summary, None);
    assert_eq!(max.verdict, Verdict::Inconclusive, "{}", max.line());
    // A limit below the run's fastest is the system's failure, however the host stalled.
    summary.host_stalls = Some(stall(50, 1));
    let v = parse("p99<=500ns").unwrap().evaluate(&summary, None);
    assert_eq!(v.verdict, Verdict::Fail, "{}", v.line());
    // A pass stands whatever the host did, as do loss gates and failed lower bounds.
    assert_eq!(
        parse("p99<=20ms").unwrap().evaluate(&summary, None).verdict,
        Verdict::Pass
    );
    assert_eq!(
        parse("p50>=8ms").unwrap().evaluate(&summary, None).verdict,
        Verdict::Fail
    );
    assert_eq!(
        parse("loss<=0.1%")
            .unwrap()
            .evaluate(&summary, None)
            .verdict,
        Verdict::Pass
    );
}
