//! A run's data as the files of a results folder: `summary.json`, `.hlog` and `ccdf.csv`.

use super::*;

/// The `summary.json` text of a run.
pub fn summary_json(summary: &RunSummary) -> String {
    // A RunSummary has no maps with non-string keys and no non-finite floats that serde_json
    // refuses, except NaN ratios, which `new` never produces.
    serde_json::to_string_pretty(summary).expect("a run summary serializes to JSON") + "\n"
}

/// The `.hlog` text of a run: one interval per line, readable by HdrHistogram's own tools
/// (`HistogramLogProcessor`); values are nanoseconds, the max column in milliseconds.
pub fn hlog_bytes(result: &GeneratorResult, label: &str) -> io::Result<Vec<u8>> {
    hlog_of(result, label, Delay::RoundTrip)
}

/// Which delay of a run an `.hlog` or CCDF holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delay {
    /// From the intended send time back to the generator.
    RoundTrip,
    /// One way out: from the intended send time to the responder's receive stamp.
    Forward,
    /// One way back: from the responder's transmit stamp to the generator.
    Return,
}

impl Delay {
    /// How the `.hlog` header and plot titles name it.
    pub fn title(self) -> &'static str {
        match self {
            Delay::RoundTrip => "round-trip latency",
            Delay::Forward => "one-way delay out",
            Delay::Return => "one-way delay back",
        }
    }

    /// The run's histogram of this delay.
    pub fn of(self, result: &GeneratorResult) -> &LatencyHistogram {
        match self {
            Delay::RoundTrip => &result.report.latency,
            Delay::Forward => &result.report.forward,
            Delay::Return => &result.report.reverse,
        }
    }

    fn of_interval(self, interval: &latlab_probe::Interval) -> &LatencyHistogram {
        match self {
            Delay::RoundTrip => &interval.histogram,
            Delay::Forward => &interval.forward,
            Delay::Return => &interval.reverse,
        }
    }
}

/// The `.hlog` text of one delay of a run (see [`hlog_bytes`]).
pub fn hlog_of(result: &GeneratorResult, label: &str, delay: Delay) -> io::Result<Vec<u8>> {
    let start_s = result.start_ns as f64 / 1e9;
    let mut w = HlogWriter::new(
        Vec::new(),
        start_s,
        &format!(
            "latlab {} {label}: {} in ns",
            env!("CARGO_PKG_VERSION"),
            delay.title()
        ),
    )
    .map_err(io::Error::other)?;
    for iv in &result.intervals {
        w.write_interval(
            iv.start_offset_ns as f64 / 1e9,
            iv.duration_ns as f64 / 1e9,
            delay.of_interval(iv),
            None,
        )
        .map_err(io::Error::other)?;
    }
    Ok(w.into_inner())
}

/// The `ccdf.csv` text of a histogram.
pub fn ccdf_csv(h: &LatencyHistogram) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    latlab_stats::write_ccdf_csv(&latlab_stats::ccdf(h), &mut out).map_err(io::Error::other)?;
    Ok(out)
}

/// The longest host stall of `runs` as a mark beside their CCDF (none without a stall): the
/// part of a tail right of it is longer than anything the host did to latlab's loops.
pub fn stall_marks(runs: &[super::RunSummary]) -> Vec<(String, u64)> {
    let longest = runs
        .iter()
        .filter_map(|r| r.host_stalls.as_ref())
        .map(|h| h.longest_ns)
        .max()
        .unwrap_or(0);
    match longest {
        0 => Vec::new(),
        ns => vec![(
            format!("longest host stall {}", crate::gate::format_ns(ns as f64)),
            ns,
        )],
    }
}
