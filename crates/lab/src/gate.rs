//! Latency gates on results: `--assert EXPR` and `latlab check`.
//!
//! An [`Assertion`] is read from text (`p99<=2ms`, `forward.p99.9<5ms`, `loss<=0.1%`,
//! `achieved>=9.9k`, `ndr>=500k`) and refused, naming itself, when it does not parse or names
//! a statistic latlab does not keep; [`Assertion::check_for`] refuses one the command cannot
//! answer (a percentile of `rfc2544`, a one-way delay without a shared clock) before anything
//! runs. [`Assertion::evaluate`] decides one against a run's [`RunSummary`] with
//! [`latlab_stats::gate`]: from the 95 % interval, pass, fail or inconclusive with how many
//! samples (and how long a run at the run's rate) would likely decide it. The verdicts go into
//! `summary.json` (`assertions`), one line each on the terminal ([`AssertionVerdict::line`])
//! and, with `--junit`, into a JUnit XML file ([`junit`]).
//!
//! ```
//! use latlab_lab::gate::Assertion;
//!
//! let a: Assertion = "p99.9 < 5ms".parse().unwrap();
//! assert_eq!(a.to_string(), "p99.9<5ms");
//! assert!("p99<=5".parse::<Assertion>().is_err(), "a latency limit needs its unit");
//! ```

use std::fmt;
use std::str::FromStr;

use latlab_stats::gate::{
    decide_mean, decide_observed, decide_proportion, decide_quantile, Decision, Needed,
};
/// Re-exported: how an assertion compares, and its outcome.
pub use latlab_stats::gate::{Bound, Verdict};
use latlab_stats::{Quantile, Summary, STANDARD_PERCENTILES};
use serde::{Deserialize, Serialize};

use crate::results::{Delay, RunSummary};
use crate::units::{format_rate, parse_duration, parse_rate};

mod format;
pub mod junit;
pub mod regression;
mod stalls;

pub(crate) use format::format_ns;
use format::format_seconds;

/// What an assertion holds against its limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Statistic {
    /// A percentile of a delay (`p99`, `forward.p99.9`).
    Percentile(Delay, Quantile),
    /// The mean of a delay.
    Mean(Delay),
    /// The largest delay observed.
    Max(Delay),
    /// The smallest delay observed.
    Min(Delay),
    /// The share of probes lost.
    Loss,
    /// The rate probes left at, packets per second.
    Achieved,
    /// RFC 2544's no-drop rate, frames per second (`rfc2544`).
    Ndr,
    /// RFC 2544's partial-drop rate, frames per second (`rfc2544`).
    Pdr,
}

impl Statistic {
    /// The delay it is a statistic of, if it is one.
    pub fn delay(self) -> Option<Delay> {
        match self {
            Statistic::Percentile(d, _) | Statistic::Mean(d) | Statistic::Max(d) => Some(d),
            Statistic::Min(d) => Some(d),
            Statistic::Loss | Statistic::Achieved | Statistic::Ndr | Statistic::Pdr => None,
        }
    }
}

/// What an assertion may be held against: the results a command writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Results {
    /// A generator run (`gen`, each rate of `demo`): delays, loss, the achieved rate.
    Run,
    /// An RFC 2544 measurement: NDR and PDR per frame size.
    Rfc2544,
    /// A thin stream (`stream send`): its latency is one-way already (application to
    /// application), its loss and rate are of messages.
    Stream,
}

/// Why an assertion was refused; each message starts with the assertion as given.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("--assert {text:?}: {reason}")]
pub struct AssertionError {
    /// The assertion as given.
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

/// One gate: a statistic, a bound and a limit (ns for delays, a fraction for loss, packets
/// or frames per second for rates).
#[derive(Clone, Debug, PartialEq)]
pub struct Assertion {
    /// What is held against the limit.
    pub statistic: Statistic,
    /// How.
    pub bound: Bound,
    /// The limit, in the statistic's unit.
    pub limit: f64,
    /// The text as written, spaces removed (`p99<=2ms`).
    text: String,
}

/// The names of the statistics, for the error that names an unknown one.
const KNOWN: &str = "p50, p90, p99, p99.9, p99.99, p99.999, p99.9999, mean, max, min (each \
                     also as forward.NAME or return.NAME), loss, achieved, ndr, pdr";

impl FromStr for Assertion {
    type Err = AssertionError;

    fn from_str(text: &str) -> Result<Assertion, AssertionError> {
        let compact: String = text.chars().filter(|c| !c.is_whitespace()).collect();
        let refuse = |reason: String| AssertionError {
            text: text.to_string(),
            reason,
        };
        let at = compact.find(['<', '>', '=']).ok_or_else(|| {
            refuse("no comparison: write STAT<=LIMIT, <, >= or > (p99<=2ms)".into())
        })?;
        let (name, rest) = compact.split_at(at);
        let bound = Bound::ALL
            .into_iter()
            .find(|b| rest.starts_with(b.symbol()))
            .ok_or_else(|| refuse(format!("{rest:?}: compare with <=, <, >= or >")))?;
        let value = &rest[bound.symbol().len()..];
        if value.is_empty() {
            return Err(refuse("no limit after the comparison".into()));
        }
        let statistic = statistic(&name.to_ascii_lowercase())
            .ok_or_else(|| refuse(format!("unknown statistic {name:?}: use {KNOWN}")))?;
        let limit = limit(statistic, value).map_err(refuse)?;
        Ok(Assertion {
            statistic,
            bound,
            limit,
            text: compact,
        })
    }
}

impl fmt::Display for Assertion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// The statistic a (lower-case) name names.
fn statistic(name: &str) -> Option<Statistic> {
    let (delay, base) = match name.split_once('.') {
        Some(("forward", base)) => (Some(Delay::Forward), base),
        Some(("return", base)) => (Some(Delay::Return), base),
        _ => (None, name),
    };
    let of = delay.unwrap_or(Delay::RoundTrip);
    match base {
        "mean" => Some(Statistic::Mean(of)),
        "max" => Some(Statistic::Max(of)),
        "min" => Some(Statistic::Min(of)),
        "loss" if delay.is_none() => Some(Statistic::Loss),
        "achieved" if delay.is_none() => Some(Statistic::Achieved),
        "ndr" if delay.is_none() => Some(Statistic::Ndr),
        "pdr" if delay.is_none() => Some(Statistic::Pdr),
        p if p.starts_with('p') => {
            let key = p.replace('.', "_");
            STANDARD_PERCENTILES
                .into_iter()
                .find(|q| q.key == key)
                .map(|q| Statistic::Percentile(of, q))
        }
        _ => None,
    }
}

/// The limit `value` says, in the statistic's unit.
fn limit(statistic: Statistic, value: &str) -> Result<f64, String> {
    match statistic {
        s if s.delay().is_some() => {
            if value.chars().all(|c| c.is_ascii_digit() || c == '.') {
                return Err(format!(
                    "the limit {value:?} needs a unit (2ms, 500us, 1.5s)"
                ));
            }
            Ok(parse_duration(value)?.as_nanos() as f64)
        }
        Statistic::Loss => {
            let (number, scale) = match value.strip_suffix('%') {
                Some(number) => (number, 0.01),
                None => (value, 1.0),
            };
            let ratio = number
                .parse::<f64>()
                .ok()
                .map(|n| n * scale)
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| format!("{value:?} is not a loss (0.1%, 0.001)"))?;
            Ok(ratio)
        }
        _ => parse_rate(value),
    }
}

impl Assertion {
    /// Refuses an assertion `results` cannot answer, or a one-way delay when `shared_clock` is
    /// false (the generator and the responder do not read one clock).
    pub fn check_for(&self, results: Results, shared_clock: bool) -> Result<(), AssertionError> {
        let refuse = |reason: &str| {
            Err(AssertionError {
                text: self.text.clone(),
                reason: reason.to_string(),
            })
        };
        match (results, self.statistic) {
            (Results::Run, Statistic::Ndr | Statistic::Pdr) => {
                refuse("ndr and pdr are rfc2544's; a generator run has achieved and loss")
            }
            (Results::Rfc2544, Statistic::Ndr | Statistic::Pdr) => Ok(()),
            (Results::Rfc2544, _) => refuse(
                "rfc2544 gates its rates only (ndr, pdr): its latencies are medians over \
                 trials, not percentiles with an interval",
            ),
            (Results::Run, s) if matches!(s.delay(), Some(Delay::Forward | Delay::Return)) => {
                if shared_clock {
                    Ok(())
                } else {
                    refuse(
                        "one-way delays need a shared clock (--clock shared, or a reflector \
                         on this host, in any of its namespaces); this run reports round trips \
                         only",
                    )
                }
            }
            (Results::Run, _) => Ok(()),
            (Results::Stream, Statistic::Ndr | Statistic::Pdr) => {
                refuse("ndr and pdr are rfc2544's; a stream has achieved and loss")
            }
            (Results::Stream, s) if matches!(s.delay(), Some(Delay::Forward | Delay::Return)) => {
                refuse(
                    "a stream's latency is one-way already (application to application): \
                     gate it as p99, mean, max",
                )
            }
            (Results::Stream, _) => Ok(()),
        }
    }

    /// Decides the assertion against one run; `run` names it in the verdict (`None` for the
    /// only run of a folder).
    pub fn evaluate(&self, summary: &RunSummary, run: Option<&str>) -> AssertionVerdict {
        self.evaluate_measured(&Measured::from(summary), run)
    }

    /// Decides the assertion against what any run measured ([`Measured`]: a generator run's,
    /// a stream's).
    pub fn evaluate_measured(&self, m: &Measured<'_>, run: Option<&str>) -> AssertionVerdict {
        let (decision, subject) = match self.statistic.delay() {
            Some(delay) => match m.delay(delay) {
                Some(delays) => (self.decide_delay(delays), self.describe_delay(delay)),
                None => {
                    return self.verdict_without_data(
                        run,
                        "this run has no one-way delays (the responder did not stamp, or the \
                         clock is not shared)",
                    )
                }
            },
            None => match self.statistic {
                Statistic::Loss => (
                    decide_proportion(m.lost, m.sent, self.bound, self.limit),
                    "loss".to_string(),
                ),
                _ => (
                    decide_observed(m.achieved_pps, m.sent, self.bound, self.limit),
                    "achieved".to_string(),
                ),
            },
        };
        // Samples per second of run: probes sent for loss, responses for the delays.
        let per_second = match self.statistic {
            Statistic::Loss | Statistic::Achieved => m.achieved_pps,
            _ if m.sent > 0 => {
                m.achieved_pps * (m.sent - m.lost.min(m.sent)) as f64 / m.sent as f64
            }
            _ => 0.0,
        };
        let verdict = self.verdict(run, &subject, decision, (per_second, m.sent_name));
        match m.host_stalls {
            Some(stalls) => match self.statistic.delay().and_then(|d| m.delay(d)) {
                Some(delays) => self.within_stalls(verdict, stalls, delays.min_ns),
                None => verdict,
            },
            _ => verdict,
        }
    }

    /// Decides an `ndr` or `pdr` gate on one frame size of an RFC 2544 run (`run` names it):
    /// the rate the search found, an observed value, so pass or fail; inconclusive when the
    /// search found none, or when the rate falls short of an at-least limit but the source,
    /// not the DUT, was the limit (`source_limited`: the DUT lost nothing at the source's
    /// maximum, so its own rate is not known).
    pub fn evaluate_rates(
        &self,
        ndr_pps: Option<u64>,
        pdr_pps: Option<u64>,
        source_limited: bool,
        run: &str,
    ) -> AssertionVerdict {
        let (name, rate) = match self.statistic {
            Statistic::Pdr => ("pdr", pdr_pps),
            _ => ("ndr", ndr_pps),
        };
        let Some(rate) = rate else {
            return self.verdict_without_data(Some(run), &format!("the search found no {name}"));
        };
        let mut d = decide_observed(rate as f64, 1, self.bound, self.limit);
        let short_of_source = source_limited
            && d.verdict == Verdict::Fail
            && matches!(self.bound, Bound::AtLeast | Bound::Above);
        if short_of_source {
            d.verdict = Verdict::Inconclusive;
        }
        let mut v = self.verdict(Some(run), name, d, (0.0, "frames"));
        v.samples = 0;
        v.message = format!("{name} {} (found by the search)", format_rate(rate as f64));
        if short_of_source {
            v.message.push_str(
                "; the DUT lost nothing at the source's maximum, so its own rate is above \
                 what this source can offer",
            );
        }
        v
    }

    fn decide_delay(&self, delays: &Summary) -> Decision {
        let n = delays.count;
        match self.statistic {
            Statistic::Percentile(_, q) => match delays.percentile(q.key) {
                Some(p) => decide_quantile(&p.estimate, q.q, n, self.bound, self.limit),
                None => decide_quantile(
                    &latlab_stats::Estimate::TooFewSamples {
                        samples: n,
                        needed: latlab_stats::min_samples(q.q, latlab_stats::Z_95),
                    },
                    q.q,
                    n,
                    self.bound,
                    self.limit,
                ),
            },
            Statistic::Mean(_) => {
                decide_mean(n, delays.mean_ns, delays.stddev_ns, self.bound, self.limit)
            }
            Statistic::Max(_) | Statistic::Min(_) if n == 0 => Decision {
                verdict: Verdict::Inconclusive,
                estimate: None,
                interval: None,
                samples: 0,
                needed: Some(Needed::Samples(1)),
            },
            Statistic::Max(_) => decide_observed(delays.max_ns as f64, n, self.bound, self.limit),
            _ => decide_observed(delays.min_ns as f64, n, self.bound, self.limit),
        }
    }

    fn describe_delay(&self, delay: Delay) -> String {
        let prefix = match delay {
            Delay::RoundTrip => "",
            Delay::Forward => "forward ",
            Delay::Return => "return ",
        };
        let name = match self.statistic {
            Statistic::Percentile(_, q) => q.label,
            Statistic::Mean(_) => "mean",
            Statistic::Max(_) => "max",
            _ => "min",
        };
        format!("{prefix}{name}")
    }

    /// Whether the limit is a delay, a share or a rate.
    fn unit(&self) -> &'static str {
        match self.statistic {
            s if s.delay().is_some() => "ns",
            Statistic::Loss => "ratio",
            _ => "pps",
        }
    }

    fn format(&self, value: f64) -> String {
        match self.unit() {
            "ns" => format_ns(value),
            "ratio" => format!("{:.3}%", 100.0 * value),
            _ => format_rate(value),
        }
    }

    /// The inconclusive verdict of a run that does not have what the assertion asks for,
    /// saying `why`.
    pub fn verdict_without_data(&self, run: Option<&str>, why: &str) -> AssertionVerdict {
        AssertionVerdict {
            assertion: self.text.clone(),
            run: run.map(str::to_string),
            verdict: Verdict::Inconclusive,
            unit: self.unit().into(),
            estimate: None,
            low: None,
            high: None,
            samples: 0,
            needed_samples: None,
            needed_duration_s: None,
            message: why.to_string(),
        }
    }

    /// The verdict of decision `d`; `sent` names what loss and rates count (`probes`).
    fn verdict(
        &self,
        run: Option<&str>,
        subject: &str,
        d: Decision,
        (per_second, sent): (f64, &str),
    ) -> AssertionVerdict {
        let mut message = match (d.estimate, d.interval) {
            (Some(v), Some((low, high))) if low == high => {
                format!("{subject} {} (observed)", self.format(v))
            }
            (Some(v), Some((low, high))) => format!(
                "{subject} {} [{}, {}] (95% {})",
                self.format(v),
                self.format(low),
                self.format(high),
                match self.statistic {
                    Statistic::Loss => "Wilson interval",
                    Statistic::Mean(_) => "normal interval",
                    _ => "interval",
                }
            ),
            _ => format!("{subject}: too few samples"),
        };
        let counted = match self.statistic {
            Statistic::Loss | Statistic::Achieved => sent,
            _ => "samples",
        };
        message.push_str(&format!(", {} {counted}", d.samples));
        let needed_samples = match d.needed {
            Some(Needed::Samples(n)) => Some(n),
            _ => None,
        };
        let needed_duration_s =
            needed_samples.and_then(|n| (per_second > 0.0).then(|| n as f64 / per_second));
        match (d.needed, needed_duration_s) {
            (Some(Needed::Samples(n)), Some(s)) => message.push_str(&format!(
                "; about {n} {counted} in all would likely decide it (a run of {} at {})",
                format_seconds(s),
                format_rate(per_second)
            )),
            (Some(Needed::Samples(n)), None) => message.push_str(&format!(
                "; about {n} {counted} in all would likely decide it"
            )),
            (Some(Needed::AtLimit), _) => message
                .push_str("; the estimate sits on the limit: no run length is likely to decide it"),
            (None, _) => {}
        }
        AssertionVerdict {
            assertion: self.text.clone(),
            run: run.map(str::to_string),
            verdict: d.verdict,
            unit: self.unit().into(),
            estimate: d.estimate,
            low: d.interval.map(|i| i.0),
            high: d.interval.map(|i| i.1),
            samples: d.samples,
            needed_samples,
            needed_duration_s,
            message,
        }
    }
}

/// What a gate is decided on: a run's delays and counts.
#[derive(Clone, Copy, Debug)]
pub struct Measured<'a> {
    /// The delay `p99`, `mean`, `max`, `min` name: a generator's round trip, a stream's
    /// one-way application latency.
    pub latency: &'a Summary,
    /// The one-way delay out (`forward.`), when the run has it.
    pub forward: Option<&'a Summary>,
    /// The one-way delay back (`return.`), when the run has it.
    pub back: Option<&'a Summary>,
    /// Probes (messages) sent.
    pub sent: u64,
    /// Of them, lost.
    pub lost: u64,
    /// The rate they left at, per second.
    pub achieved_pps: f64,
    /// What `sent` counts, as the verdicts name it: `probes`, `messages`.
    pub sent_name: &'static str,
    /// The host's stalls over the run, when it measured them: a delay gate that fails on a
    /// value no longer than the longest is inconclusive ([`Assertion::evaluate_measured`]).
    pub host_stalls: Option<&'a latlab_stats::stalls::HostStalls>,
}

impl<'a> From<&'a RunSummary> for Measured<'a> {
    fn from(run: &'a RunSummary) -> Measured<'a> {
        Measured {
            latency: &run.latency_ns,
            forward: run.forward_ns.as_ref(),
            back: run.return_ns.as_ref(),
            sent: run.sent,
            lost: run.lost,
            achieved_pps: run.achieved_pps,
            sent_name: "probes",
            host_stalls: run.host_stalls.as_ref(),
        }
    }
}

impl<'a> Measured<'a> {
    /// The summary of one of the run's delays, if it has it.
    fn delay(&self, delay: Delay) -> Option<&'a Summary> {
        match delay {
            Delay::RoundTrip => Some(self.latency),
            Delay::Forward => self.forward,
            Delay::Return => self.back,
        }
    }
}

/// One assertion decided, as `summary.json` keeps it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssertionVerdict {
    /// The assertion as written (`p99<=2ms`).
    pub assertion: String,
    /// The run it was decided on, in a folder of several runs (the run's label).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// `pass`, `fail` or `inconclusive`.
    pub verdict: Verdict,
    /// The unit of `estimate`, `low` and `high`: `ns`, `ratio` (loss), `pps`, or `change`
    /// (`latlab compare`: NEW/BASE − 1).
    pub unit: String,
    /// The point estimate (absent with too few samples).
    pub estimate: Option<f64>,
    /// The 95 % interval's low end (equal to the estimate for an observed value).
    pub low: Option<f64>,
    /// The 95 % interval's high end.
    pub high: Option<f64>,
    /// Samples (responses, or probes sent for loss and rates) it was decided from.
    pub samples: u64,
    /// For an inconclusive verdict: samples in all that would likely decide it.
    pub needed_samples: Option<u64>,
    /// The same as seconds of run at this run's rate.
    pub needed_duration_s: Option<f64>,
    /// The line the terminal shows after the verdict.
    pub message: String,
}

impl AssertionVerdict {
    /// The terminal's line: `PASS p99<=2ms: p99 1.234 ms [1.200 ms, 1.270 ms] …`.
    pub fn line(&self) -> String {
        let word = match self.verdict {
            Verdict::Pass => "PASS",
            Verdict::Fail => "FAIL",
            Verdict::Inconclusive => "INCONCLUSIVE",
        };
        match &self.run {
            Some(run) => format!("{word} {} [{run}]: {}", self.assertion, self.message),
            None => format!("{word} {}: {}", self.assertion, self.message),
        }
    }
}

/// The verdict of several: fail if one failed, else inconclusive if one was, else pass (and
/// pass for none).
pub fn overall(verdicts: &[AssertionVerdict]) -> Verdict {
    verdicts
        .iter()
        .map(|v| v.verdict)
        .max()
        .unwrap_or(Verdict::Pass)
}

#[cfg(test)]
mod tests;
