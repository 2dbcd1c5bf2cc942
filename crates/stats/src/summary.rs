//! [`Summary`]: the numbers latlab reports for one latency distribution.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::quantile::{
    min_samples, point_rank, rank_interval, Quantile, STANDARD_PERCENTILES, Z_95,
};
use crate::LatencyHistogram;

/// A percentile value with its confidence interval, or the honest admission that the
/// sample is too small to bound it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Estimate {
    /// The point estimate and the confidence interval around it, all in nanoseconds;
    /// `ci_low_ns <= value_ns <= ci_high_ns`.
    Value {
        /// Value at rank `max(1, ceil(n·q))`.
        value_ns: u64,
        /// Value at the interval's low rank.
        ci_low_ns: u64,
        /// Value at the interval's high rank.
        ci_high_ns: u64,
    },
    /// The confidence interval would need ranks outside the sample.
    TooFewSamples {
        /// Samples available.
        samples: u64,
        /// Samples needed at least ([`min_samples`]).
        needed: u64,
    },
}

impl Estimate {
    /// Estimates quantile `q` of `h` with a confidence interval of normal quantile `z`.
    ///
    /// The point estimate is the value at rank `max(1, ceil(n·q))`, the interval the
    /// values at the ranks of [`rank_interval`]; `TooFewSamples` when that is `None`.
    pub fn of(h: &LatencyHistogram, q: f64, z: f64) -> Estimate {
        let n = h.len();
        let Some((lo, hi)) = rank_interval(n, q, z) else {
            return Estimate::TooFewSamples {
                samples: n,
                needed: min_samples(q, z),
            };
        };
        // Cannot fail: rank_interval guarantees 1 <= lo <= point rank <= hi <= n = len().
        let at = |rank| h.value_at_rank(rank).expect("rank within 1..=len");
        let (ci_low_ns, value_ns, ci_high_ns) = (at(lo), at(point_rank(n, q)), at(hi));
        debug_assert!(ci_low_ns <= value_ns && value_ns <= ci_high_ns);
        Estimate::Value {
            value_ns,
            ci_low_ns,
            ci_high_ns,
        }
    }

    /// The point estimate, if there is one.
    pub fn value_ns(&self) -> Option<u64> {
        match self {
            Estimate::Value { value_ns, .. } => Some(*value_ns),
            Estimate::TooFewSamples { .. } => None,
        }
    }
}

/// One quantile's estimate.
#[derive(Clone, Debug, PartialEq)]
pub struct PercentileEstimate {
    /// Which quantile.
    pub quantile: Quantile,
    /// Its estimate.
    pub estimate: Estimate,
}

/// The summary of one latency distribution.
///
/// All values are nanoseconds. Percentiles carry 95 % confidence intervals
/// ([`Z_95`]) and are [`Estimate::TooFewSamples`] whenever the sample cannot bound
/// them: p99.9999 of 10 000 samples is never reported as a number.
///
/// Serializes to a flat JSON object:
/// `{"count","min","mean","stddev","p50",…,"p99_9999","max","ci95":{…},"too_few_samples":{…}}`
/// where a percentile is `null` when it is too few samples, `ci95` maps every key to
/// `{"low","high"}` or `null`, and `too_few_samples` lists only the keys that are
/// too few, as `{"samples","needed"}`. Deserialization reads back every percentile
/// (every key [`Quantile::parse_key`] understands: the standard ones, p95, p75, p99_5, …)
/// with its confidence interval or its too-few-samples counts, in the order written, and
/// ignores other unknown fields; so a summary made by [`with_quantiles`](Self::with_quantiles)
/// comes back equal, whatever its quantiles.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Number of samples.
    pub count: u64,
    /// Smallest sample (lowest equivalent value of its bucket); 0 when empty.
    pub min_ns: u64,
    /// Mean; 0 when empty.
    pub mean_ns: f64,
    /// Population standard deviation; 0 when empty.
    pub stddev_ns: f64,
    /// Largest sample (highest equivalent value of its bucket); 0 when empty.
    pub max_ns: u64,
    /// Estimates of [`STANDARD_PERCENTILES`], in that order.
    pub percentiles: Vec<PercentileEstimate>,
}

impl Summary {
    /// Summarizes `h` at the [`STANDARD_PERCENTILES`] with 95 % confidence intervals.
    pub fn from_histogram(h: &LatencyHistogram) -> Summary {
        Self::with_quantiles(h, &STANDARD_PERCENTILES)
    }

    /// Summarizes `h` at the given quantiles with 95 % confidence intervals.
    ///
    /// Each quantile's key must be the one [`Quantile::parse_key`] reads back as that
    /// quantile (as every `Quantile` constant's is, and `Quantile::new(0.75, "p75", "p75")`),
    /// so that every percentile survives a JSON round trip.
    pub fn with_quantiles(h: &LatencyHistogram, quantiles: &[Quantile]) -> Summary {
        debug_assert!(
            quantiles
                .iter()
                .all(|q| Quantile::parse_key(q.key).is_some_and(|back| back.q == q.q)),
            "every quantile's key reads back as that quantile"
        );
        let summary = Summary {
            count: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            stddev_ns: h.stddev(),
            max_ns: h.max(),
            percentiles: quantiles
                .iter()
                .map(|&quantile| PercentileEstimate {
                    quantile,
                    estimate: Estimate::of(h, quantile.q, Z_95),
                })
                .collect(),
        };
        debug_assert!(summary.mean_ns.is_finite() && summary.stddev_ns.is_finite());
        summary
    }

    /// The estimate for the quantile with key `key` (e.g. `"p99_9"`).
    pub fn percentile(&self, key: &str) -> Option<&PercentileEstimate> {
        self.percentiles.iter().find(|p| p.quantile.key == key)
    }
}

/// `{"low": .., "high": ..}` in `ci95`.
#[derive(Serialize, Deserialize)]
struct CiJson {
    low: u64,
    high: u64,
}

/// `{"samples": .., "needed": ..}` in `too_few_samples`.
#[derive(Serialize, Deserialize)]
struct TooFewJson {
    samples: u64,
    needed: u64,
}

/// Serializes the `ci95` object of a summary.
struct Ci95<'a>(&'a [PercentileEstimate]);

impl Serialize for Ci95<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for p in self.0 {
            let ci = match p.estimate {
                Estimate::Value {
                    ci_low_ns,
                    ci_high_ns,
                    ..
                } => Some(CiJson {
                    low: ci_low_ns,
                    high: ci_high_ns,
                }),
                Estimate::TooFewSamples { .. } => None,
            };
            m.serialize_entry(p.quantile.key, &ci)?;
        }
        m.end()
    }
}

/// Serializes the `too_few_samples` object of a summary.
struct TooFew<'a>(&'a [PercentileEstimate]);

impl Serialize for TooFew<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(None)?;
        for p in self.0 {
            if let Estimate::TooFewSamples { samples, needed } = p.estimate {
                m.serialize_entry(p.quantile.key, &TooFewJson { samples, needed })?;
            }
        }
        m.end()
    }
}

impl Serialize for Summary {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.percentiles.len() + 7))?;
        m.serialize_entry("count", &self.count)?;
        m.serialize_entry("min", &self.min_ns)?;
        m.serialize_entry("mean", &self.mean_ns)?;
        m.serialize_entry("stddev", &self.stddev_ns)?;
        for p in &self.percentiles {
            m.serialize_entry(p.quantile.key, &p.estimate.value_ns())?;
        }
        m.serialize_entry("max", &self.max_ns)?;
        m.serialize_entry("ci95", &Ci95(&self.percentiles))?;
        m.serialize_entry("too_few_samples", &TooFew(&self.percentiles))?;
        m.end()
    }
}

impl<'de> Deserialize<'de> for Summary {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Summary, D::Error> {
        d.deserialize_map(SummaryVisitor)
    }
}

/// Reads the flat JSON object back, keeping percentiles in the order they appear.
struct SummaryVisitor;

impl<'de> Visitor<'de> for SummaryVisitor {
    type Value = Summary;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a latlab latency summary object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Summary, A::Error> {
        let mut count = None;
        let mut min = None;
        let mut mean = None;
        let mut stddev = None;
        let mut max = None;
        let mut ci95: Option<BTreeMap<String, Option<CiJson>>> = None;
        let mut too_few: Option<BTreeMap<String, TooFewJson>> = None;
        let mut values: Vec<(Quantile, Option<u64>)> = Vec::new();

        fn set<T, E: de::Error>(slot: &mut Option<T>, v: T, name: &'static str) -> Result<(), E> {
            if slot.replace(v).is_some() {
                return Err(E::duplicate_field(name));
            }
            Ok(())
        }

        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "count" => set(&mut count, map.next_value()?, "count")?,
                "min" => set(&mut min, map.next_value()?, "min")?,
                "mean" => set(&mut mean, map.next_value()?, "mean")?,
                "stddev" => set(&mut stddev, map.next_value()?, "stddev")?,
                "max" => set(&mut max, map.next_value()?, "max")?,
                "ci95" => set(&mut ci95, map.next_value()?, "ci95")?,
                "too_few_samples" => set(&mut too_few, map.next_value()?, "too_few_samples")?,
                k => match Quantile::parse_key(k) {
                    Some(q) => {
                        if values.iter().any(|(seen, _)| seen.key == q.key) {
                            return Err(de::Error::duplicate_field(q.key));
                        }
                        values.push((q, map.next_value()?));
                    }
                    None => {
                        map.next_value::<IgnoredAny>()?;
                    }
                },
            }
        }

        let ci95 = ci95.unwrap_or_default();
        let too_few = too_few.unwrap_or_default();
        let percentiles = values
            .into_iter()
            .map(|(quantile, value)| {
                let estimate = match value {
                    Some(value_ns) => match ci95.get(quantile.key) {
                        Some(Some(ci)) => Estimate::Value {
                            value_ns,
                            ci_low_ns: ci.low,
                            ci_high_ns: ci.high,
                        },
                        _ => {
                            return Err(de::Error::custom(format_args!(
                                "{} has a value but no ci95 entry",
                                quantile.key
                            )))
                        }
                    },
                    None => match too_few.get(quantile.key) {
                        Some(t) => Estimate::TooFewSamples {
                            samples: t.samples,
                            needed: t.needed,
                        },
                        None => {
                            return Err(de::Error::custom(format_args!(
                                "{} is null but not listed in too_few_samples",
                                quantile.key
                            )))
                        }
                    },
                };
                Ok(PercentileEstimate { quantile, estimate })
            })
            .collect::<Result<Vec<_>, A::Error>>()?;

        Ok(Summary {
            count: count.ok_or_else(|| de::Error::missing_field("count"))?,
            min_ns: min.ok_or_else(|| de::Error::missing_field("min"))?,
            mean_ns: mean.ok_or_else(|| de::Error::missing_field("mean"))?,
            stddev_ns: stddev.ok_or_else(|| de::Error::missing_field("stddev"))?,
            max_ns: max.ok_or_else(|| de::Error::missing_field("max"))?,
            percentiles,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uniform(n: u64) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for ns in 1..=n {
            h.record(ns);
        }
        h
    }

    fn value(s: &Summary, key: &str) -> u64 {
        s.percentile(key).unwrap().estimate.value_ns().unwrap()
    }

    #[test]
    fn percentiles_of_a_uniform_distribution_are_within_a_tenth_of_a_percent() {
        let s = Summary::from_histogram(&uniform(10_000));
        assert_eq!(s.count, 10_000);
        for (key, expected) in [("p50", 5_000.0), ("p90", 9_000.0), ("p99", 9_900.0)] {
            let v = value(&s, key) as f64;
            assert!(
                (v - expected).abs() / expected <= 0.001,
                "{key}: {v} vs {expected}"
            );
        }
        assert!((s.mean_ns - 5_000.5).abs() / 5_000.5 <= 0.001);
        assert_eq!(s.min_ns, 1);
        assert!(s.max_ns >= 10_000 && s.max_ns <= 10_010, "{}", s.max_ns);
    }

    #[test]
    fn percentiles_of_a_scaled_uniform_distribution_are_within_a_tenth_of_a_percent() {
        let mut h = LatencyHistogram::new();
        for i in 1..=100_000u64 {
            h.record(i * 1_000); // 1 µs ..= 100 ms
        }
        let s = Summary::from_histogram(&h);
        for q in STANDARD_PERCENTILES.iter().take(5) {
            let expected = q.q * 100_000_000.0;
            let v = value(&s, q.key) as f64;
            assert!(
                (v - expected).abs() / expected <= 0.001,
                "{}: {v} vs {expected}",
                q.label
            );
        }
    }

    #[test]
    fn the_one_in_a_million_percentile_of_ten_thousand_samples_is_too_few_never_a_number() {
        let s = Summary::from_histogram(&uniform(10_000));
        assert_eq!(
            s.percentile("p99_9999").unwrap().estimate,
            Estimate::TooFewSamples {
                samples: 10_000,
                needed: min_samples(0.999_999, Z_95),
            }
        );
        assert!(matches!(
            s.percentile("p99_999").unwrap().estimate,
            Estimate::TooFewSamples { .. }
        ));
        assert!(matches!(
            s.percentile("p99_99").unwrap().estimate,
            Estimate::TooFewSamples { .. }
        ));
        assert!(s.percentile("p99_9").unwrap().estimate.value_ns().is_some());
    }

    #[test]
    fn a_million_samples_are_still_too_few_for_p99_9999() {
        let mut h = LatencyHistogram::new();
        h.record_n(1_000, 1_000_000);
        let e = Estimate::of(&h, Quantile::P99_9999.q, Z_95);
        assert!(matches!(e, Estimate::TooFewSamples { .. }), "{e:?}");
    }

    #[test]
    fn enough_samples_give_p99_9999_a_value() {
        let mut h = LatencyHistogram::new();
        let n = min_samples(0.999_999, Z_95);
        h.record_n(1_000, n - 1);
        h.record(5_000_000);
        let e = Estimate::of(&h, 0.999_999, Z_95);
        assert!(e.value_ns().is_some(), "{e:?}");
    }

    #[test]
    fn the_confidence_interval_contains_the_point_estimate() {
        let mut h = LatencyHistogram::new();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            h.record(10_000 + x % 1_000_000 + (x % 997) * (x % 991)); // skewed
        }
        for p in Summary::from_histogram(&h).percentiles {
            if let Estimate::Value {
                value_ns,
                ci_low_ns,
                ci_high_ns,
            } = p.estimate
            {
                assert!(ci_low_ns <= value_ns && value_ns <= ci_high_ns, "{p:?}");
            }
        }
    }

    #[test]
    fn estimates_use_the_rank_interval_values() {
        let h = uniform(100);
        assert_eq!(
            Estimate::of(&h, 0.5, Z_95),
            Estimate::Value {
                value_ns: 50,
                ci_low_ns: 40,
                ci_high_ns: 60
            }
        );
    }

    #[test]
    fn an_empty_histogram_summarizes_to_zeros_and_too_few_samples() {
        let s = Summary::from_histogram(&LatencyHistogram::new());
        assert_eq!((s.count, s.min_ns, s.max_ns), (0, 0, 0));
        assert_eq!((s.mean_ns, s.stddev_ns), (0.0, 0.0));
        assert_eq!(s.percentiles.len(), STANDARD_PERCENTILES.len());
        for p in &s.percentiles {
            assert_eq!(
                p.estimate,
                Estimate::TooFewSamples {
                    samples: 0,
                    needed: min_samples(p.quantile.q, Z_95)
                }
            );
        }
    }

    #[test]
    fn percentile_looks_up_by_key() {
        let s = Summary::from_histogram(&uniform(10));
        assert_eq!(s.percentile("p50").unwrap().quantile, Quantile::P50);
        assert!(s.percentile("p99.9").is_none(), "labels are not keys");
    }

    #[test]
    fn summary_json_matches_the_golden_string() {
        let s = Summary::from_histogram(&uniform(10));
        let json = serde_json::to_string(&s).unwrap();
        let golden = concat!(
            r#"{"count":10,"min":1,"mean":5.5,"stddev":2.8722813232690143,"#,
            r#""p50":5,"p90":null,"p99":null,"p99_9":null,"p99_99":null,"p99_999":null,"p99_9999":null,"#,
            r#""max":10,"#,
            r#""ci95":{"p50":{"low":1,"high":9},"p90":null,"p99":null,"p99_9":null,"p99_99":null,"p99_999":null,"p99_9999":null},"#,
            r#""too_few_samples":{"p90":{"samples":10,"needed":35},"p99":{"samples":10,"needed":381},"#,
            r#""p99_9":{"samples":10,"needed":3838},"p99_99":{"samples":10,"needed":38413},"#,
            r#""p99_999":{"samples":10,"needed":384157},"p99_9999":{"samples":10,"needed":3841597}}}"#
        );
        assert_eq!(json, golden);
    }

    #[test]
    fn summary_json_round_trips() {
        for h in [LatencyHistogram::new(), uniform(10), uniform(100_000)] {
            let s = Summary::from_histogram(&h);
            let json = serde_json::to_string(&s).unwrap();
            let back: Summary = serde_json::from_str(&json).unwrap();
            assert_eq!(back, s, "{json}");
        }
    }

    #[test]
    fn summary_json_ignores_unknown_fields_but_rejects_inconsistent_ones() {
        let s = Summary::from_histogram(&uniform(10));
        let mut v = serde_json::to_value(&s).unwrap();
        v["comment"] = "hello".into();
        let back: Summary = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, s);

        v["ci95"]["p50"] = serde_json::Value::Null;
        let err = serde_json::from_value::<Summary>(v).unwrap_err();
        assert!(err.to_string().contains("p50"), "{err}");
    }

    #[test]
    fn summary_json_requires_the_scalar_fields() {
        let err = serde_json::from_str::<Summary>(r#"{"count":1}"#).unwrap_err();
        assert!(err.to_string().contains("missing field"), "{err}");
    }

    /// A summary of `n` samples spread over 1 µs ..= 100 ms, at every standard percentile,
    /// p95 and two that are not predefined, p75 and p99.5.
    fn every_kind_of_percentile(n: u64) -> Summary {
        let mut h = LatencyHistogram::new();
        for i in 1..=n {
            h.record(1_000 + i * (100_000_000 / n));
        }
        let mut quantiles = vec![
            Quantile::new(0.75, "p75", "p75"),
            Quantile::P95,
            Quantile::new(0.995, "p99.5", "p99_5"),
        ];
        quantiles.extend(STANDARD_PERCENTILES);
        Summary::with_quantiles(&h, &quantiles)
    }

    #[test]
    fn summary_json_round_trips_every_percentile_with_its_interval() {
        for n in [0, 10, 1_000, 100_000] {
            let s = every_kind_of_percentile(n);
            let json = serde_json::to_string(&s).unwrap();
            let back: Summary = serde_json::from_str(&json).unwrap();
            assert_eq!(back.percentiles.len(), s.percentiles.len(), "{json}");
            for (sent, read) in s.percentiles.iter().zip(&back.percentiles) {
                assert_eq!(read.quantile, sent.quantile, "{n} samples");
                assert_eq!(
                    read.estimate, sent.estimate,
                    "{n} samples, {}",
                    sent.quantile.key
                );
            }
            assert_eq!(back, s, "{json}");
        }
        // With 100 000 samples p95 has a value and an interval, p99.9999 is too few.
        let s = every_kind_of_percentile(100_000);
        let back: Summary = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert!(matches!(
            back.percentile("p95").unwrap().estimate,
            Estimate::Value { ci_low_ns, value_ns, ci_high_ns }
                if ci_low_ns < value_ns && value_ns < ci_high_ns
        ));
        assert!(matches!(
            back.percentile("p99_9999").unwrap().estimate,
            Estimate::TooFewSamples {
                samples: 100_000,
                ..
            }
        ));
    }

    #[test]
    fn summary_json_written_before_every_percentile_was_kept_still_loads() {
        // What the game study wrote: p50, p95, p99 and p99.9 of 10 samples.
        let json = concat!(
            r#"{"count":10,"min":1,"mean":5.5,"stddev":2.8722813232690143,"#,
            r#""p50":5,"p95":null,"p99":null,"p99_9":null,"max":10,"#,
            r#""ci95":{"p50":{"low":1,"high":9},"p95":null,"p99":null,"p99_9":null},"#,
            r#""too_few_samples":{"p95":{"samples":10,"needed":73},"p99":{"samples":10,"needed":381},"#,
            r#""p99_9":{"samples":10,"needed":3838}}}"#
        );
        let written = Summary::with_quantiles(
            &uniform(10),
            &[Quantile::P50, Quantile::P95, Quantile::P99, Quantile::P99_9],
        );
        assert_eq!(serde_json::to_string(&written).unwrap(), json);
        let s: Summary = serde_json::from_str(json).unwrap();
        let keys: Vec<_> = s.percentiles.iter().map(|p| p.quantile.key).collect();
        assert_eq!(keys, ["p50", "p95", "p99", "p99_9"]);
        assert_eq!(
            s.percentile("p95").unwrap().estimate,
            Estimate::TooFewSamples {
                samples: 10,
                needed: 73
            }
        );
        assert_eq!(
            serde_json::to_string(&s).unwrap(),
            json,
            "written back unchanged"
        );
    }
}
