//! How gates' verdicts write times.

/// Nanoseconds in the unit that reads best: `850 ns`, `12.35 µs`, `1.234 ms`, `2.500 s`.
pub(crate) fn format_ns(ns: f64) -> String {
    if ns < 1e3 {
        format!("{ns:.0} ns")
    } else if ns < 1e6 {
        format!("{:.2} µs", ns / 1e3)
    } else if ns < 1e9 {
        format!("{:.3} ms", ns / 1e6)
    } else {
        format!("{:.3} s", ns / 1e9)
    }
}

/// Seconds as a run length: `12.5 s`, `3.2 min`, `1.5 h`.
pub(super) fn format_seconds(s: f64) -> String {
    if s < 120.0 {
        format!("{s:.1} s")
    } else if s < 7200.0 {
        format!("{:.1} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}
