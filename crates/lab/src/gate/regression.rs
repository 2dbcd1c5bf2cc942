//! Regression gates of `latlab compare BASE NEW --assert 'p99<=+10%'`: NEW's percentile held
//! against BASE's, decided from the 95 % interval of the change
//! ([`latlab_stats::compare`]) as every gate is: pass when the whole interval meets the limit,
//! fail when it misses it, inconclusive otherwise or with too few samples.

use std::fmt;
use std::str::FromStr;

use latlab_stats::compare::{Change, Comparison};
use latlab_stats::gate::decide_interval;
use latlab_stats::{Quantile, STANDARD_PERCENTILES};

use super::{format_ns, AssertionError, AssertionVerdict, Bound, Verdict};

/// A percentile's change from BASE to NEW held against a limit (`p99<=+10%`: NEW's p99 at
/// most 10 % above BASE's).
#[derive(Clone, Debug, PartialEq)]
pub struct Regression {
    /// The percentile.
    pub quantile: Quantile,
    /// How the change compares with the limit.
    pub bound: Bound,
    /// The limit on `new/base − 1` (0.10 for `+10%`, −0.05 for `-5%`).
    pub limit: f64,
    text: String,
}

impl FromStr for Regression {
    type Err = AssertionError;

    fn from_str(text: &str) -> Result<Regression, AssertionError> {
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let refuse = |reason: String| AssertionError {
            text: text.to_string(),
            reason,
        };
        let at = compact.find(['<', '>', '=']).ok_or_else(|| {
            refuse("no comparison: write p99<=+10% (NEW's p99 at most 10% above BASE's)".into())
        })?;
        let (name, rest) = compact.split_at(at);
        let bound = Bound::ALL
            .into_iter()
            .find(|b| rest.starts_with(b.symbol()))
            .ok_or_else(|| refuse(format!("{rest:?}: compare with <=, <, >= or >")))?;
        let key = name.to_ascii_lowercase().replace('.', "_");
        let quantile = STANDARD_PERCENTILES
            .into_iter()
            .find(|q| q.key == key)
            .ok_or_else(|| {
                refuse(format!(
                    "unknown statistic {name:?}: compare gates a percentile (p50, p90, p99, \
                     p99.9, p99.99, p99.999, p99.9999)"
                ))
            })?;
        let value = &rest[bound.symbol().len()..];
        let limit = value
            .strip_suffix('%')
            .and_then(|n| n.parse::<f64>().ok())
            .filter(|n| n.is_finite() && *n > -100.0)
            .map(|n| n / 100.0)
            .ok_or_else(|| {
                refuse(format!(
                    "{value:?} is not a change: a percentage above -100% (+10%, -5%)"
                ))
            })?;
        Ok(Regression {
            quantile,
            bound,
            limit,
            text: compact,
        })
    }
}

impl fmt::Display for Regression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// "NEW's p99 is 12.1% [6.0%, 18.3%] above BASE's (1.234 ms → 1.383 ms)".
pub fn describe(label: &str, c: &Comparison) -> String {
    match c {
        Comparison::Change(Change {
            base_ns,
            new_ns,
            change,
            low,
            high,
        }) => {
            let (word, v, lo, hi) = if *change >= 0.0 {
                ("above", *change, *low, *high)
            } else {
                ("below", -change, -high, -low)
            };
            format!(
                "NEW's {label} is {:.1}% [{:.1}%, {:.1}%] {word} BASE's ({} → {})",
                100.0 * v,
                100.0 * lo,
                100.0 * hi,
                format_ns(*base_ns as f64),
                format_ns(*new_ns as f64)
            )
        }
        Comparison::TooFewSamples { base, new, needed } => format!(
            "{label}: too few samples to compare (BASE {base}, NEW {new}; each needs {needed})"
        ),
    }
}

impl Regression {
    /// Decides the gate on the comparison of its percentile; `run` names the run in a folder
    /// of several.
    pub fn decide(&self, c: &Comparison, run: Option<&str>) -> AssertionVerdict {
        let (verdict, estimate, interval, samples) = match c {
            Comparison::Change(ch) => (
                decide_interval(ch.low, ch.high, self.bound, self.limit),
                Some(ch.change),
                Some((ch.low, ch.high)),
                0,
            ),
            Comparison::TooFewSamples { base, new, .. } => {
                (Verdict::Inconclusive, None, None, (*base).min(*new))
            }
        };
        let needed_samples = match c {
            Comparison::TooFewSamples { needed, .. } => Some(*needed),
            Comparison::Change(_) => None,
        };
        AssertionVerdict {
            assertion: self.text.clone(),
            run: run.map(str::to_string),
            verdict,
            unit: "change".into(),
            estimate,
            low: interval.map(|i| i.0),
            high: interval.map(|i| i.1),
            samples,
            needed_samples,
            needed_duration_s: None,
            message: describe(self.quantile.label, c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn change(change: f64, low: f64, high: f64) -> Comparison {
        Comparison::Change(Change {
            base_ns: 1_000_000,
            new_ns: (1e6 * (1.0 + change)) as u64,
            change,
            low,
            high,
        })
    }

    #[test]
    fn a_regression_gate_reads_a_signed_percentage() {
        let r: Regression = "p99 <= +10%".parse().unwrap();
        assert_eq!(
            (r.quantile, r.bound, r.limit),
            (Quantile::P99, Bound::AtMost, 0.1)
        );
        assert_eq!(r.to_string(), "p99<=+10%");
        let r: Regression = "p99.9<-5%".parse().unwrap();
        assert_eq!((r.quantile, r.limit), (Quantile::P99_9, -0.05));
        for (text, reason) in [
            ("p99<=10ms", "is not a change"),
            ("p99<=-100%", "is not a change"),
            ("loss<=+1%", "unknown statistic"),
            ("p99", "no comparison"),
        ] {
            let e = text.parse::<Regression>().unwrap_err().to_string();
            assert!(e.contains(reason), "{text}: {e}");
        }
    }

    #[test]
    fn a_regression_is_decided_by_the_interval_of_the_change() {
        let gate: Regression = "p99<=+10%".parse().unwrap();
        let v = gate.decide(&change(0.02, -0.01, 0.05), None);
        assert_eq!(v.verdict, Verdict::Pass);
        assert_eq!(
            v.message,
            "NEW's p99 is 2.0% [-1.0%, 5.0%] above BASE's (1.000 ms → 1.020 ms)"
        );
        assert_eq!(
            gate.decide(&change(0.12, 0.06, 0.18), None).verdict,
            Verdict::Inconclusive
        );
        assert_eq!(
            gate.decide(&change(0.2, 0.15, 0.25), None).verdict,
            Verdict::Fail
        );
        let too_few = Comparison::TooFewSamples {
            base: 100,
            new: 10_000,
            needed: 381,
        };
        let v = gate.decide(&too_few, Some("1000 pps"));
        assert_eq!(
            (v.verdict, v.needed_samples),
            (Verdict::Inconclusive, Some(381))
        );
    }

    #[test]
    fn a_faster_new_run_reads_below() {
        assert_eq!(
            describe("p50", &change(-0.1, -0.15, -0.05)),
            "NEW's p50 is 10.0% [5.0%, 15.0%] below BASE's (1.000 ms → 900.00 µs)"
        );
    }
}
