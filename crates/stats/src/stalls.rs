//! The host's stall floor: how long a loop was kept from running, measured by the loop itself.
//!
//! A spinning loop reads the clock on every turn; a gap between two turns far longer than a
//! turn takes (at least [`STALL_THRESHOLD_NS`]) is time the host took from it: a preempted or
//! descheduled vCPU, an interrupt storm, a page fault. A loop that sleeps is measured by how late
//! its timed wake-ups come, or by a sampler on its CPU doing the same. [`Stalls`] keeps those
//! gaps; [`HostStalls`] is what results show of them: how many over 10 µs, 100 µs and 1 ms, the
//! longest, and a histogram in 1-2-5 steps. A latency tail no longer than the longest stall of
//! the same run may be the host's, not the system's under test ([`HostStalls::covers`]).

use serde::{Deserialize, Serialize};

use crate::LatencyHistogram;

/// The shortest gap counted as a stall, ns: 10 µs, far above a loop's turn (well under 1 µs
/// spinning, a few µs for a batch of frames) and below the tails latlab measures.
pub const STALL_THRESHOLD_NS: u64 = 10_000;

/// How a loop's stalls were measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StallSource {
    /// The loop's own turns: gaps between iterations, and how late its timed sleeps woke.
    #[default]
    Loop,
    /// A sampler thread on the loop's CPU, sleeping 1 ms at a time and timing its wake-ups
    /// (the loop blocks in the kernel, where it cannot time itself), as `cyclictest` does.
    Sampler,
}

impl StallSource {
    /// Its name in results (`loop`, `sampler`).
    pub fn name(self) -> &'static str {
        match self {
            StallSource::Loop => "loop",
            StallSource::Sampler => "sampler",
        }
    }
}

/// A loop's stalls: each gap of at least [`STALL_THRESHOLD_NS`], and how long it was watched.
#[derive(Clone, Debug, PartialEq)]
pub struct Stalls {
    /// The gaps, ns.
    gaps: LatencyHistogram,
    /// How long the loop was watched, ns.
    observed_ns: u64,
    /// How it was watched.
    source: StallSource,
}

impl Stalls {
    /// No stall yet, watched by `source`.
    pub fn new(source: StallSource) -> Stalls {
        Stalls {
            // Two digits are plenty for stalls (a 1% bucket) and keep the histogram small.
            gaps: LatencyHistogram::with_sigfig(2).expect("2 significant digits are valid"),
            observed_ns: 0,
            source,
        }
    }

    /// A gap of `gap_ns` in the loop's progress: kept if it is a stall.
    #[inline]
    pub fn record(&mut self, gap_ns: u64) {
        if gap_ns >= STALL_THRESHOLD_NS {
            self.gaps.record(gap_ns);
        }
    }

    /// The loop was watched for `ns` more.
    pub fn observed(&mut self, ns: u64) {
        self.observed_ns = self.observed_ns.saturating_add(ns);
    }

    /// Adds `other`'s stalls (another thread of the same run, another run of a merge).
    pub fn merge(&mut self, other: &Stalls) {
        // Both have two digits and the same bounds: histograms like that merge.
        let _ = self.gaps.merge(&other.gaps);
        self.observed_ns = self.observed_ns.max(other.observed_ns);
        if other.source == StallSource::Sampler {
            self.source = StallSource::Sampler;
        }
    }

    /// The stalls recorded.
    pub fn gaps(&self) -> &LatencyHistogram {
        &self.gaps
    }

    /// What results show of them.
    pub fn report(&self) -> HostStalls {
        let h = self.gaps.as_hdr();
        let over = |ns: u64| {
            h.iter_recorded()
                .filter(|v| v.value_iterated_to() >= ns)
                .map(|v| v.count_at_value())
                .sum::<u64>()
        };
        let mut histogram = Vec::new();
        let mut from = STALL_THRESHOLD_NS;
        for to in bucket_edges() {
            let count = h
                .iter_recorded()
                .filter(|v| (from..to).contains(&v.value_iterated_to()))
                .map(|v| v.count_at_value())
                .sum::<u64>();
            if count > 0 {
                histogram.push(StallBucket {
                    from_ns: from,
                    to_ns: to,
                    count,
                });
            }
            from = to;
        }
        HostStalls {
            source: self.source,
            threshold_ns: STALL_THRESHOLD_NS,
            observed_s: self.observed_ns as f64 / 1e9,
            over_10us: self.gaps.len(),
            over_100us: over(100_000),
            over_1ms: over(1_000_000),
            longest_ns: self.gaps.max(),
            total_ns: h
                .iter_recorded()
                .map(|v| v.value_iterated_to().saturating_mul(v.count_at_value()))
                .fold(0u64, u64::saturating_add),
            histogram,
        }
    }
}

/// The upper edges of [`HostStalls::histogram`]'s buckets: 20 µs, 50 µs, 100 µs … 1 h, 1-2-5.
fn bucket_edges() -> impl Iterator<Item = u64> {
    let mut decade = STALL_THRESHOLD_NS;
    std::iter::from_fn(move || {
        let edges = [2 * decade, 5 * decade, 10 * decade];
        decade *= 10;
        Some(edges)
    })
    .flatten()
    .take_while(|&edge| edge <= 10 * crate::HIGHEST_TRACKABLE_NS)
}

/// One bucket of stalls: `from_ns <= stall < to_ns`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallBucket {
    /// Its lower edge, ns.
    pub from_ns: u64,
    /// Its upper edge, ns (not in it).
    pub to_ns: u64,
    /// Stalls in it.
    pub count: u64,
}

/// A run's stall floor as results show it (`host_stalls` in `--json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HostStalls {
    /// How it was measured.
    pub source: StallSource,
    /// The shortest gap counted, ns ([`STALL_THRESHOLD_NS`]).
    pub threshold_ns: u64,
    /// How long the loop was watched, seconds.
    pub observed_s: f64,
    /// Stalls of 10 µs or more.
    pub over_10us: u64,
    /// Of those, 100 µs or more.
    pub over_100us: u64,
    /// Of those, 1 ms or more.
    pub over_1ms: u64,
    /// The longest stall, ns (0 without one).
    pub longest_ns: u64,
    /// The time lost to stalls in all, ns.
    pub total_ns: u64,
    /// The stalls in 1-2-5 buckets from 10 µs, empty buckets left out.
    pub histogram: Vec<StallBucket>,
}

impl HostStalls {
    /// Whether the host stalled the loop about as long as `value_ns` (at least half of it): a
    /// latency that long may be the host's own, and a gate on it cannot tell the system from
    /// the host. Half, not all: a stalled loop owes the probes due while it stood, and sends
    /// and reads them after it at once, so the one due first waits the stall and then behind
    /// the others (measured: a loop stopped 100 ms saw its latest probe 101–106 ms late).
    pub fn covers(&self, value_ns: u64) -> bool {
        self.longest_ns > 0 && self.longest_ns.saturating_mul(2) >= value_ns
    }

    /// Adds `other` (the threads of one run, the runs of a merge): counts and time lost add,
    /// the longest is the longer, the buckets add.
    pub fn merge(&mut self, other: &HostStalls) {
        self.observed_s = self.observed_s.max(other.observed_s);
        self.over_10us += other.over_10us;
        self.over_100us += other.over_100us;
        self.over_1ms += other.over_1ms;
        self.longest_ns = self.longest_ns.max(other.longest_ns);
        self.total_ns = self.total_ns.saturating_add(other.total_ns);
        self.threshold_ns = self.threshold_ns.max(other.threshold_ns);
        if other.source == StallSource::Sampler {
            self.source = StallSource::Sampler;
        }
        for b in &other.histogram {
            match self.histogram.iter_mut().find(|m| m.from_ns == b.from_ns) {
                Some(m) => m.count += b.count,
                None => self.histogram.push(*b),
            }
        }
        self.histogram.sort_by_key(|b| b.from_ns);
    }

    /// The one line the text output gives: `host stalls: 14 over 100 µs, longest 3.2 ms (…)`.
    pub fn line(&self) -> String {
        if self.over_10us == 0 {
            return format!(
                "host stalls: none over 10 µs in {:.1} s ({})",
                self.observed_s,
                self.source.name()
            );
        }
        format!(
            "host stalls: {} over 100 µs, longest {} ({} over 10 µs, {} over 1 ms, {} lost in {:.1} s; {})",
            self.over_100us,
            human_ns(self.longest_ns),
            self.over_10us,
            self.over_1ms,
            human_ns(self.total_ns),
            self.observed_s,
            self.source.name()
        )
    }
}

/// `ns` in the unit that reads best: `850 ns`, `12.3 µs`, `3.2 ms`, `1.50 s`.
fn human_ns(ns: u64) -> String {
    let v = ns as f64;
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.1} µs", v / 1e3),
        1_000_000..=999_999_999 => format!("{:.1} ms", v / 1e6),
        _ => format!("{:.2} s", v / 1e9),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_under_the_threshold_are_not_stalls() {
        let mut s = Stalls::new(StallSource::Loop);
        s.record(200);
        s.record(STALL_THRESHOLD_NS - 1);
        s.observed(1_000_000_000);
        let r = s.report();
        assert_eq!(r.over_10us, 0);
        assert_eq!(r.longest_ns, 0);
        assert!(r.histogram.is_empty());
        assert!(!r.covers(1));
        assert_eq!(r.line(), "host stalls: none over 10 µs in 1.0 s (loop)");
    }

    #[test]
    fn stalls_are_counted_by_length_and_bucketed() {
        let mut s = Stalls::new(StallSource::Sampler);
        for gap in [15_000, 15_000, 150_000, 3_200_000, 50_000_000] {
            s.record(gap);
        }
        s.observed(10_000_000_000);
        let r = s.report();
        assert_eq!(r.source, StallSource::Sampler);
        assert_eq!((r.over_10us, r.over_100us, r.over_1ms), (5, 3, 2));
        assert!(
            r.longest_ns.abs_diff(50_000_000) <= 500_000,
            "{}",
            r.longest_ns
        );
        assert!(r.total_ns.abs_diff(53_380_000) <= 600_000, "{}", r.total_ns);
        let buckets: Vec<(u64, u64, u64)> = r
            .histogram
            .iter()
            .map(|b| (b.from_ns, b.to_ns, b.count))
            .collect();
        assert_eq!(
            buckets,
            [
                (10_000, 20_000, 2),
                (100_000, 200_000, 1),
                (2_000_000, 5_000_000, 1),
                (50_000_000, 100_000_000, 1)
            ]
        );
        assert_eq!(
            r.histogram.iter().map(|b| b.count).sum::<u64>(),
            r.over_10us
        );
        assert!(r.covers(40_000_000) && r.covers(2 * r.longest_ns) && !r.covers(101_000_000));
        assert!(
            r.line()
                .starts_with("host stalls: 3 over 100 µs, longest 50."),
            "{}",
            r.line()
        );
    }

    #[test]
    fn merged_stalls_add_up() {
        let mut a = Stalls::new(StallSource::Loop);
        a.record(20_000);
        a.observed(1_000);
        let mut b = Stalls::new(StallSource::Loop);
        b.record(2_000_000);
        b.observed(2_000);
        let mut ra = a.report();
        ra.merge(&b.report());
        a.merge(&b);
        let r = a.report();
        assert_eq!((r.over_10us, r.over_1ms), (2, 1));
        assert_eq!(
            (ra.over_10us, ra.over_1ms, ra.longest_ns),
            (2, 1, r.longest_ns)
        );
        assert_eq!(ra.histogram, r.histogram);
        let json = serde_json::to_string(&r).expect("serializes");
        let back: HostStalls = serde_json::from_str(&json).expect("reads back");
        assert_eq!(back, r);
    }
}
