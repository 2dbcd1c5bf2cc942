//! The latency figures RFC 8219 asks for (its sections 7.2 and 7.3.1), from every frame of a
//! trial rather than from a few tagged ones: typical latency (the median), worst-case latency
//! (the 99.9th percentile) and packet delay variation (the 99.9th percentile minus the
//! minimum), each percentile with latlab's 95% confidence interval; and, over the 20 or more
//! trials the RFC asks for, the median of each figure.

use latlab_stats::{Estimate, LatencyHistogram, Z_95};
use serde::{Deserialize, Serialize};

/// One trial's latency figures, ns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LatencyFigures {
    /// Frames whose latency was recorded.
    pub frames: u64,
    /// The smallest latency.
    pub min_ns: u64,
    /// Typical latency: the median, with its confidence interval.
    pub median: Estimate,
    /// Worst-case latency: the 99.9th percentile, with its confidence interval (or too few
    /// frames to bound it).
    pub p99_9: Estimate,
    /// Packet delay variation: p99.9 − min; `None` when p99.9 cannot be bounded.
    pub pdv_ns: Option<u64>,
    /// The largest latency.
    pub max_ns: u64,
}

impl LatencyFigures {
    /// The figures of the latencies in `h`; `None` when it is empty.
    pub fn of(h: &LatencyHistogram) -> Option<LatencyFigures> {
        if h.is_empty() {
            return None;
        }
        let p99_9 = Estimate::of(h, 0.999, Z_95);
        let min_ns = h.min();
        Some(LatencyFigures {
            frames: h.len(),
            min_ns,
            median: Estimate::of(h, 0.5, Z_95),
            pdv_ns: p99_9.value_ns().map(|p| p.saturating_sub(min_ns)),
            p99_9,
            max_ns: h.max(),
        })
    }
}

/// The median of each figure over a series of trials, as RFC 8219 reports them.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct TrialsSummary {
    /// Trials summarized.
    pub trials: usize,
    /// Median of the trials' typical latencies, ns.
    pub typical_ns: Option<u64>,
    /// Median of the trials' worst-case latencies, ns (trials that could bound it).
    pub worst_case_ns: Option<u64>,
    /// Median of the trials' PDVs, ns (trials that could bound it).
    pub pdv_ns: Option<u64>,
}

impl TrialsSummary {
    /// The medians over `trials`.
    pub fn of(trials: &[LatencyFigures]) -> TrialsSummary {
        TrialsSummary {
            trials: trials.len(),
            typical_ns: median(trials.iter().filter_map(|t| t.median.value_ns())),
            worst_case_ns: median(trials.iter().filter_map(|t| t.p99_9.value_ns())),
            pdv_ns: median(trials.iter().filter_map(|t| t.pdv_ns)),
        }
    }
}

/// The median of `values` (the lower middle one of an even count, so it is one of them).
fn median(values: impl Iterator<Item = u64>) -> Option<u64> {
    let mut v: Vec<u64> = values.collect();
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    Some(v[(v.len() - 1) / 2])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10 000 frames: 1..=10 000 µs.
    fn ramp() -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        for i in 1..=10_000u64 {
            h.record(i * 1_000);
        }
        h
    }

    fn close(value: u64, expected: u64) -> bool {
        value.abs_diff(expected) <= expected / 1000 + 1
    }

    #[test]
    fn every_frame_counts_and_the_figures_are_the_median_p99_9_and_their_difference() {
        let f = LatencyFigures::of(&ramp()).unwrap();
        assert_eq!(f.frames, 10_000);
        assert_eq!(f.min_ns, 1_000);
        assert!(close(f.median.value_ns().unwrap(), 5_000_000), "{f:?}");
        let p = f.p99_9.value_ns().unwrap();
        assert!(close(p, 9_990_000), "{p}");
        assert_eq!(f.pdv_ns, Some(p - 1_000));
        assert!(close(f.max_ns, 10_000_000));
    }

    #[test]
    fn too_few_frames_for_p99_9_give_no_pdv_instead_of_a_made_up_one() {
        let mut h = LatencyHistogram::new();
        for i in 1..=100u64 {
            h.record(i * 1_000);
        }
        let f = LatencyFigures::of(&h).unwrap();
        assert!(f.median.value_ns().is_some());
        assert!(matches!(f.p99_9, Estimate::TooFewSamples { .. }));
        assert_eq!(f.pdv_ns, None);
        assert_eq!(LatencyFigures::of(&LatencyHistogram::new()), None);
    }

    #[test]
    fn a_series_of_trials_is_summarized_by_the_median_of_each_figure() {
        let trial = |offset_us: u64| {
            let mut h = LatencyHistogram::new();
            for i in 1..=10_000u64 {
                h.record((offset_us + i) * 1_000);
            }
            LatencyFigures::of(&h).unwrap()
        };
        let trials = [trial(0), trial(3_000), trial(1_000)];
        let s = TrialsSummary::of(&trials);
        assert_eq!(s.trials, 3);
        assert_eq!(s.typical_ns, trials[2].median.value_ns());
        assert_eq!(s.worst_case_ns, trials[2].p99_9.value_ns());
        assert_eq!(s.pdv_ns, trials[2].pdv_ns);
        assert_eq!(TrialsSummary::of(&[]).typical_ns, None);
    }
}
