//! Delay traces: a direction's base delay over time, from a file.
//!
//! Three forms are read:
//!
//! - two columns, `TIME_MS DELAY_MS` (milliseconds, decimals allowed), times strictly
//!   increasing; the first line's time is the trace's 0;
//! - one column, `DELAY_MS`, one line every [`DelayTrace::step_ns`] (`delay-trace-step`, which
//!   this form needs);
//! - the output of `ping -D` (iputils): each reply line,
//!   `[1701234567.123456] 64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=12.3 ms`, is a point
//!   at its bracketed stamp (from the first reply's) whose delay is **half the round trip**:
//!   the trace is each way's share of what ping measured. Other lines (the header, the
//!   summary, `no answer yet`, unreachable, duplicates marked `(DUP!)`) are skipped.
//!
//! In the column forms, blank lines and `#` comments are skipped. Between points the delay is
//! interpolated linearly (default) or held until the next point ([`DelayTraceMode::Step`]); the
//! trace repeats with the period of its last point's time plus one step (the step given, else
//! the gap between its last two points), the delay going from the last point back to the first
//! over that last step.
//!
//! Refused, naming the line and the field: a non-number, a negative delay or time, a time not
//! after the line above, a line with another number of fields than the first; and a file with
//! no point (empty, or ping output with no reply).

use std::sync::Arc;

use crate::config::invalid;
use crate::trace::TraceError;
use crate::ConfigError;

/// A delay trace with how it is read: the points of a file, its step and its mode.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct DelayTrace {
    /// The file's points; `None` when only the step or the mode was given (refused by
    /// [`crate::LinkConfig::validate`]).
    pub file: Option<DelayFile>,
    /// The time between the lines of a one-column file, and the last step of every trace
    /// (`delay-trace-step`); above 0.
    pub step_ns: Option<u64>,
    /// How the delay goes from one point to the next.
    pub mode: DelayTraceMode,
}

/// How the delay goes from one point of a trace to the next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DelayTraceMode {
    /// A straight line between the points (default).
    #[default]
    Linear,
    /// Each point's delay until the next point.
    Step,
}

impl DelayTraceMode {
    /// The names `delay-trace-mode` takes.
    pub const NAMES: [&'static str; 2] = ["linear", "step"];

    /// The mode of a name.
    pub fn from_name(name: &str) -> Option<DelayTraceMode> {
        match name {
            "linear" => Some(DelayTraceMode::Linear),
            "step" => Some(DelayTraceMode::Step),
            _ => None,
        }
    }

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            DelayTraceMode::Linear => "linear",
            DelayTraceMode::Step => "step",
        }
    }
}

/// The points of a delay trace file.
#[derive(Debug, Clone, PartialEq)]
pub struct DelayFile {
    /// Each point's time from the first, ns, strictly increasing; `None` for a one-column file.
    times: Option<Arc<[u64]>>,
    /// Each point's delay, ns; as many as the times, at least one.
    delays: Arc<[u64]>,
    /// The file it was read from, if it was.
    source: Option<Arc<str>>,
}

impl DelayFile {
    /// Reads a trace from its text, in any of the three forms.
    pub fn parse(text: &str) -> Result<DelayFile, TraceError> {
        let ping = text.lines().any(|line| {
            let line = line.trim_start();
            line.starts_with('[') || line.starts_with("PING ")
        });
        if ping {
            parse_ping(text)
        } else {
            parse_columns(text)
        }
    }

    /// Reads the trace file at `path`; errors name the file and the line.
    pub fn read(path: &std::path::Path) -> Result<DelayFile, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut file = DelayFile::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        file.source = Some(path.display().to_string().into());
        Ok(file)
    }

    /// The file it was read from, if it was ([`DelayFile::read`]).
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// How many points it has.
    pub fn points(&self) -> usize {
        self.delays.len()
    }
}

impl DelayTrace {
    /// The trace of `file`, linear, without a step.
    pub fn new(file: DelayFile) -> DelayTrace {
        DelayTrace {
            file: Some(file),
            ..DelayTrace::default()
        }
    }

    /// The delay over time this trace makes: `(field, cause)` if it cannot make one.
    pub(crate) fn curve(&self) -> Result<DelayCurve, (&'static str, ConfigError)> {
        if self.step_ns == Some(0) {
            let cause = invalid("delay_trace_step", "must be above 0");
            return Err(("delay_trace_step", cause));
        }
        let Some(file) = &self.file else {
            let field = if self.step_ns.is_some() {
                "delay_trace_step"
            } else {
                "delay_trace_mode"
            };
            return Err((field, invalid(field, "needs a delay-trace (a file)")));
        };
        let times: Arc<[u64]> = match (&file.times, self.step_ns) {
            (Some(times), _) => times.clone(),
            (None, Some(step)) => (0..file.delays.len() as u64)
                .map(|i| i.saturating_mul(step))
                .collect(),
            (None, None) => {
                let cause = invalid(
                    "delay_trace",
                    "a one-column trace needs delay-trace-step (the time between its lines)",
                );
                return Err(("delay_trace", cause));
            }
        };
        let last = times[times.len() - 1];
        let step = self.step_ns.unwrap_or(match times.len() {
            1 => 1_000_000,
            n => last - times[n - 2],
        });
        Ok(DelayCurve {
            times,
            delays: file.delays.clone(),
            period_ns: last.saturating_add(step),
            mode: self.mode,
        })
    }

    /// The trace's period, ns (its last point's time plus one step), once it makes a curve.
    pub fn period_ns(&self) -> Option<u64> {
        self.curve().ok().map(|c| c.period_ns)
    }
}

/// A delay trace resolved to points in ns with its period: what the link reads.
#[derive(Debug, Clone)]
pub(crate) struct DelayCurve {
    /// From 0, strictly increasing, all below `period_ns`.
    times: Arc<[u64]>,
    delays: Arc<[u64]>,
    period_ns: u64,
    mode: DelayTraceMode,
}

impl DelayCurve {
    /// The delay at `elapsed_ns` from the trace's start, the trace repeated.
    pub(crate) fn delay_at(&self, elapsed_ns: u64) -> u64 {
        let x = elapsed_ns % self.period_ns;
        // times[0] is 0, so at least one time is ≤ x.
        let i = self.times.partition_point(|&t| t <= x) - 1;
        let (t0, d0) = (self.times[i], self.delays[i]);
        if self.mode == DelayTraceMode::Step {
            return d0;
        }
        let (t1, d1) = match self.times.get(i + 1) {
            Some(&t1) => (t1, self.delays[i + 1]),
            None => (self.period_ns, self.delays[0]),
        };
        let span = i128::from(t1 - t0);
        let rise = i128::from(d1) - i128::from(d0);
        let offset = (rise * i128::from(x - t0) + span / 2).div_euclid(span);
        u64::try_from(i128::from(d0) + offset).unwrap_or(0)
    }
}

/// The largest number of ms a trace's time or delay may be: four times it in ns fits a u64.
const MAX_MS: f64 = 4.0e12;

/// Milliseconds (decimals allowed, at least 0) as ns; `field` names the column.
fn ms_ns(line: usize, field: &str, word: &str) -> Result<u64, TraceError> {
    let value: f64 = word
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite())
        .ok_or_else(|| TraceError {
            line,
            what: format!("{field}: {word:?} is not a number of milliseconds"),
        })?;
    if value < 0.0 {
        return Err(TraceError {
            line,
            what: format!("{field}: {word} is negative"),
        });
    }
    if value > MAX_MS {
        return Err(TraceError {
            line,
            what: format!("{field}: {word} ms is past any trace's length"),
        });
    }
    Ok((value * 1e6).round() as u64)
}

/// `TIME_MS DELAY_MS` or `DELAY_MS` lines.
fn parse_columns(text: &str) -> Result<DelayFile, TraceError> {
    let mut times = Vec::new();
    let mut delays = Vec::new();
    let mut columns = None;
    for (index, line) in text.lines().enumerate() {
        let n = index + 1;
        let content = line.split('#').next().unwrap_or_default();
        let words: Vec<&str> = content.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let expected = *columns.get_or_insert(words.len());
        if expected > 2 {
            return Err(TraceError {
                line: n,
                what: format!(
                    "fields: expected TIME_MS DELAY_MS or DELAY_MS, found {} fields",
                    words.len()
                ),
            });
        }
        if words.len() != expected {
            let form = if expected == 1 {
                "DELAY_MS"
            } else {
                "TIME_MS DELAY_MS"
            };
            return Err(TraceError {
                line: n,
                what: format!(
                    "fields: expected {form} (the first line's form), found {} fields",
                    words.len()
                ),
            });
        }
        let delay = words[words.len() - 1];
        if let [time, _] = words[..] {
            let t = ms_ns(n, "TIME_MS", time)?;
            if let Some(&last) = times.last() {
                if t <= last {
                    return Err(TraceError {
                        line: n,
                        what: format!("TIME_MS: {time} is not after the line above"),
                    });
                }
            }
            times.push(t);
        }
        delays.push(ms_ns(n, "DELAY_MS", delay)?);
    }
    if delays.is_empty() {
        return Err(TraceError {
            line: 1,
            what: "no delay: the trace has no line".into(),
        });
    }
    let times = (columns == Some(2)).then(|| {
        let first = times[0];
        times.iter().map(|t| t - first).collect()
    });
    Ok(DelayFile {
        times,
        delays: delays.into(),
        source: None,
    })
}

/// `ping -D` output: the replies' stamps and half their round trips.
fn parse_ping(text: &str) -> Result<DelayFile, TraceError> {
    let mut times: Vec<u64> = Vec::new();
    let mut delays = Vec::new();
    let mut unstamped = 0;
    for (index, line) in text.lines().enumerate() {
        let n = index + 1;
        let line = line.trim();
        if !line.contains(" bytes from ") || line.contains("(DUP!)") {
            continue;
        }
        let Some(rest) = line.strip_prefix('[') else {
            unstamped += 1;
            continue;
        };
        let (stamp, reply) = rest.split_once(']').ok_or_else(|| TraceError {
            line: n,
            what: "STAMP: no `]` after the `[`".into(),
        })?;
        let at = stamp_ns(stamp).ok_or_else(|| TraceError {
            line: n,
            what: format!("STAMP: {stamp:?} is not seconds.microseconds"),
        })?;
        let rtt = reply
            .split_whitespace()
            .find_map(|w| w.strip_prefix("time="))
            .ok_or_else(|| TraceError {
                line: n,
                what: "time: a reply without `time=`".into(),
            })?;
        let rtt_ns = ms_ns(n, "time", rtt)?;
        if let Some(&last) = times.last() {
            if at <= last {
                return Err(TraceError {
                    line: n,
                    what: format!("STAMP: {stamp} is not after the reply above"),
                });
            }
        }
        times.push(at);
        delays.push(rtt_ns / 2);
    }
    if times.is_empty() {
        let what = if unstamped > 0 {
            "no reply with a [stamp]: record with `ping -D`".to_string()
        } else {
            "no reply (`[STAMP] ... bytes from ... time=X ms`) in the ping output".to_string()
        };
        return Err(TraceError { line: 1, what });
    }
    let first = times[0];
    Ok(DelayFile {
        times: Some(times.iter().map(|t| t - first).collect()),
        delays: delays.into(),
        source: None,
    })
}

/// `1701234567.123456` (seconds, a fraction of up to 9 digits) as ns, exactly.
fn stamp_ns(stamp: &str) -> Option<u64> {
    let (seconds, fraction) = stamp.split_once('.').unwrap_or((stamp, ""));
    let all_digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if seconds.is_empty() || !all_digits(seconds) || !all_digits(fraction) || fraction.len() > 9 {
        return None;
    }
    let whole: u64 = seconds.parse().ok()?;
    let part: u64 = format!("{fraction:0<9}").parse().ok()?;
    whole.checked_mul(1_000_000_000)?.checked_add(part)
}
