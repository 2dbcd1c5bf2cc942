//! Delivery traces in mahimahi's format: a link whose capacity over time was recorded.
//!
//! A trace file has one line per delivery opportunity: the millisecond, counted from the
//! trace's start, at which [`OPPORTUNITY_BYTES`] bytes may leave; several lines with the same
//! millisecond are several opportunities then. The trace repeats from its start at its end,
//! its period being its last line's millisecond, as mahimahi's `mm-link` reads the cellular
//! traces it ships (`traces/Verizon-LTE-driving.down` and the others), which are read here
//! unchanged.
//!
//! What a trace refuses, naming the line: an empty line, anything but a whole number of
//! milliseconds, a millisecond before the line above it; and a file with no line, or whose
//! last line is 0 (a trace that lasts no time, which would repeat for ever at one instant).
//!
//! [`Opportunities`] walks the repeated schedule in nanoseconds; the link's bottleneck spends
//! each opportunity's bytes on the frames waiting, one frame possibly spanning opportunities,
//! and bytes left when nothing waits are lost with the opportunity (mm-link does the same).

use std::sync::Arc;

/// The bytes one delivery opportunity carries: one packet of a 1,500-byte MTU (on a bridge,
/// a frame's bytes past its 14-byte Ethernet header).
pub const OPPORTUNITY_BYTES: u64 = 1500;

/// A trace that does not read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {what}")]
pub struct TraceError {
    /// The line at fault (1-based; the last line + 1 for a fault of the whole file).
    pub line: usize,
    /// What is wrong with it.
    pub what: String,
}

/// A delivery trace: the milliseconds of its opportunities, non-decreasing, the last above 0.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeliveryTrace {
    ms: Arc<[u64]>,
    /// The file it was read from, if it was.
    source: Option<Arc<str>>,
}

impl DeliveryTrace {
    /// Reads a trace from its text.
    pub fn parse(text: &str) -> Result<DeliveryTrace, TraceError> {
        let mut ms: Vec<u64> = Vec::new();
        // A file's last line ends with a newline or not; `lines` takes both.
        for (i, line) in text.lines().enumerate() {
            let n = i + 1;
            let line = line.strip_suffix('\r').unwrap_or(line);
            if line.trim().is_empty() {
                return Err(TraceError {
                    line: n,
                    what: "an empty line (one millisecond per line)".into(),
                });
            }
            let t: u64 = line.trim().parse().map_err(|_| TraceError {
                line: n,
                what: format!("{:?} is not a whole number of milliseconds", line.trim()),
            })?;
            if t > u64::MAX / 1_000_000 / 4 {
                return Err(TraceError {
                    line: n,
                    what: format!("{t} ms is past any trace's length"),
                });
            }
            if let Some(&last) = ms.last() {
                if t < last {
                    return Err(TraceError {
                        line: n,
                        what: format!("{t} ms comes before the line above it ({last} ms)"),
                    });
                }
            }
            ms.push(t);
        }
        match ms.last() {
            None => Err(TraceError {
                line: 1,
                what: "no delivery opportunity: the trace is empty".into(),
            }),
            Some(0) => Err(TraceError {
                line: ms.len(),
                what: "the trace lasts no time: its last line must be past 0 ms".into(),
            }),
            Some(_) => Ok(DeliveryTrace {
                ms: ms.into(),
                source: None,
            }),
        }
    }

    /// Reads the trace file at `path`; errors name the file and the line.
    pub fn read(path: &std::path::Path) -> Result<DeliveryTrace, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let mut trace =
            DeliveryTrace::parse(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        trace.source = Some(path.display().to_string().into());
        Ok(trace)
    }

    /// The file it was read from, if it was ([`DeliveryTrace::read`]).
    pub fn source(&self) -> Option<&str> {
        self.source.as_deref()
    }

    /// The trace's period, ns: its last millisecond.
    pub fn period_ns(&self) -> u64 {
        self.ms.last().copied().unwrap_or(1) * 1_000_000
    }

    /// How many opportunities one period holds.
    pub fn opportunities(&self) -> usize {
        self.ms.len()
    }

    /// The capacity of one period, bits per second: its opportunities' bytes over its length.
    pub fn mean_rate_bps(&self) -> f64 {
        self.ms.len() as f64 * OPPORTUNITY_BYTES as f64 * 8.0 / (self.period_ns() as f64 / 1e9)
    }
}

/// A walk through a trace's opportunities, repeated, from a start instant.
#[derive(Clone, Debug)]
pub struct Opportunities {
    trace: DeliveryTrace,
    /// The instant the current period began, ns.
    base_ns: u64,
    /// The next opportunity's index in the trace.
    next: usize,
}

impl Opportunities {
    /// The trace's opportunities, its millisecond 0 at `start_ns`.
    pub fn new(trace: DeliveryTrace, start_ns: u64) -> Opportunities {
        Opportunities {
            trace,
            base_ns: start_ns,
            next: 0,
        }
    }

    /// The trace being walked.
    pub fn trace(&self) -> &DeliveryTrace {
        &self.trace
    }

    /// When the next opportunity comes, ns.
    pub fn next_ns(&self) -> u64 {
        self.base_ns
            .saturating_add(self.trace.ms[self.next].saturating_mul(1_000_000))
    }

    /// Uses up the next opportunity; returns its instant.
    pub fn take(&mut self) -> u64 {
        let at = self.next_ns();
        self.next += 1;
        if self.next == self.trace.ms.len() {
            self.next = 0;
            self.base_ns = self.base_ns.saturating_add(self.trace.period_ns());
        }
        at
    }

    /// Skips, without using them, the opportunities before `now_ns` that nothing waited for,
    /// whole periods at a time when it is far behind.
    pub fn skip_before(&mut self, now_ns: u64) {
        let period = self.trace.period_ns();
        if now_ns > self.base_ns.saturating_add(2 * period) {
            let behind = (now_ns - self.base_ns) / period - 1;
            self.base_ns += behind * period;
            self.next = 0;
        }
        while self.next_ns() < now_ns {
            self.take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trace_reads_as_mahimahi_writes_it() {
        let t = DeliveryTrace::parse("0\n1\n1\n3\n").unwrap();
        assert_eq!(t.opportunities(), 4);
        assert_eq!(t.period_ns(), 3_000_000);
        // 4 × 1500 bytes in 3 ms: 16 Mbit/s.
        assert_eq!(t.mean_rate_bps(), 16e6);
        assert!(
            DeliveryTrace::parse("5\r\n10").is_ok(),
            "CRLF, no final newline"
        );
    }

    #[test]
    fn what_does_not_read_is_refused_naming_its_line() {
        for (text, line, what) in [
            ("", 1, "empty"),
            ("0\n\n3\n", 2, "empty line"),
            ("0\n1.5\n", 2, "\"1.5\" is not a whole number"),
            ("0\nx\n", 2, "\"x\""),
            ("-1\n", 1, "\"-1\""),
            ("0\n5\n4\n", 3, "4 ms comes before the line above it (5 ms)"),
            ("0\n0\n", 2, "lasts no time"),
            ("99999999999999999999\n", 1, "not a whole number"),
        ] {
            let e = DeliveryTrace::parse(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.what.contains(what), "{text:?}: {e}");
        }
    }

    #[test]
    fn opportunities_repeat_with_the_trace_period() {
        let t = DeliveryTrace::parse("1\n1\n4\n").unwrap();
        let mut o = Opportunities::new(t, 1_000);
        let taken: Vec<u64> = (0..7).map(|_| o.take()).collect();
        let ms = 1_000_000;
        assert_eq!(
            taken,
            [
                1_000 + ms,
                1_000 + ms,
                1_000 + 4 * ms,
                1_000 + 5 * ms,
                1_000 + 5 * ms,
                1_000 + 8 * ms,
                1_000 + 9 * ms
            ]
        );
    }

    #[test]
    fn skipping_lands_on_the_first_opportunity_not_before_now() {
        let t = DeliveryTrace::parse("0\n2\n5\n").unwrap();
        let ms = 1_000_000;
        let mut o = Opportunities::new(t.clone(), 0);
        o.skip_before(3 * ms);
        assert_eq!(o.next_ns(), 5 * ms);
        // Far behind: whole periods are skipped, and the walk lands where taking one by one
        // would have.
        let mut far = Opportunities::new(t.clone(), 0);
        far.skip_before(1_000 * ms + 1);
        let mut slow = Opportunities::new(t, 0);
        while slow.next_ns() < 1_000 * ms + 1 {
            slow.take();
        }
        assert_eq!(far.next_ns(), slow.next_ns());
        assert_eq!(far.next_ns(), 1_002 * ms);
    }
}
