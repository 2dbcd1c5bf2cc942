//! The binary search RFC 2544 uses for throughput and back-to-back: the highest value (a rate,
//! a burst length) whose trial passes, between a minimum and a maximum, to a resolution.
//!
//! The maximum is tried first (a device that keeps up with it is done in one trial); then the
//! interval between the highest value that passed (or the minimum) and the lowest that failed
//! is halved until it is no wider than the resolution. When even the minimum fails, nothing
//! passes. A pass is assumed to mean every lower value passes too (RFC 2544's premise).

/// What the search wants next.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Next {
    /// Run a trial at this value.
    Try(u64),
    /// Done: the highest value that passed, or `None` when the minimum failed.
    Done(Option<u64>),
}

/// The state of one search. Invariants: `min <= max`, `resolution >= 1`, and every value
/// tried lies in `min..=max`.
#[derive(Clone, Debug)]
pub(crate) struct Bisection {
    min: u64,
    max: u64,
    resolution: u64,
    /// Highest value that passed.
    passed: Option<u64>,
    /// Lowest value that failed.
    failed: Option<u64>,
}

impl Bisection {
    /// A search over `min..=max` to `resolution` (at least 1).
    pub(crate) fn new(min: u64, max: u64, resolution: u64) -> Bisection {
        debug_assert!(min <= max && resolution >= 1);
        Bisection {
            min,
            max,
            resolution: resolution.max(1),
            passed: None,
            failed: None,
        }
    }

    /// Records that the trial at `value` passed or failed.
    pub(crate) fn record(&mut self, value: u64, passed: bool) {
        if passed {
            self.passed = Some(self.passed.map_or(value, |p| p.max(value)));
        } else {
            self.failed = Some(self.failed.map_or(value, |f| f.min(value)));
        }
    }

    /// The value to try next, or the result.
    pub(crate) fn next(&self) -> Next {
        let Some(failed) = self.failed else {
            return match self.passed {
                Some(p) if p >= self.max => Next::Done(Some(p)),
                _ => Next::Try(self.max),
            };
        };
        if failed <= self.min {
            return Next::Done(None);
        }
        let low = self.passed.unwrap_or(self.min);
        if low >= failed {
            // A value passed above one that failed (a noisy device, or the PDR search reading
            // the NDR's trials): RFC 2544's premise does not hold, and the highest value that
            // passed is the answer by its definition.
            return Next::Done(self.passed);
        }
        if failed - low <= self.resolution {
            return match self.passed {
                Some(p) => Next::Done(Some(p)),
                None => Next::Try(self.min),
            };
        }
        Next::Try(low + (failed - low) / 2)
    }

    /// The highest value that passed so far.
    pub(crate) fn passed(&self) -> Option<u64> {
        self.passed
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pass_above_a_failure_ends_the_search_at_the_highest_pass() {
        // The PDR search reads the NDR's trials: 100 lost 0.3% (a PDR pass), 75 lost 2% (a
        // fail), 50 lost nothing.
        let mut b = Bisection::new(1, 100, 1);
        for (value, passed) in [(100, true), (50, true), (75, false)] {
            b.record(value, passed);
        }
        assert_eq!(b.next(), Next::Done(Some(100)));
        let mut b = Bisection::new(1, 100, 1);
        b.record(60, true);
        b.record(40, false);
        assert_eq!(b.next(), Next::Done(Some(60)));
    }

    /// Runs a search against "passes iff value <= limit"; returns the result and the trials.
    fn search(min: u64, max: u64, resolution: u64, limit: u64) -> (Option<u64>, Vec<u64>) {
        let mut b = Bisection::new(min, max, resolution);
        let mut tried = Vec::new();
        loop {
            match b.next() {
                Next::Try(v) => {
                    assert!((min..=max).contains(&v));
                    tried.push(v);
                    b.record(v, v <= limit);
                    assert!(tried.len() < 100, "{tried:?}");
                }
                Next::Done(r) => return (r, tried),
            }
        }
    }

    #[test]
    fn the_result_is_within_one_resolution_below_the_limit() {
        for limit in [1, 7, 333, 999, 1000] {
            let (r, _) = search(1, 1000, 10, limit);
            let r = r.unwrap();
            assert!(r <= limit && limit - r <= 10, "limit {limit}: {r}");
        }
    }

    #[test]
    fn a_device_that_keeps_up_with_the_maximum_takes_one_trial() {
        assert_eq!(search(1, 1000, 10, 5000), (Some(1000), vec![1000]));
    }

    #[test]
    fn when_even_the_minimum_fails_nothing_passes() {
        let (r, tried) = search(100, 1000, 10, 50);
        assert_eq!(r, None);
        assert_eq!(tried.last(), Some(&100));
    }

    #[test]
    fn the_number_of_trials_is_logarithmic() {
        let (_, tried) = search(1, 1_000_000, 1, 123_456);
        assert!(tried.len() <= 22, "{}", tried.len());
    }
}
