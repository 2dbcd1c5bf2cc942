//! [`LatencyHistogram`]: an HdrHistogram fixed to nanoseconds and one hour of range.

use std::fmt;

use hdrhistogram::Histogram;

use crate::Error;

/// Smallest latency, in nanoseconds, that is told apart from its neighbours.
pub const LOWEST_DISCERNIBLE_NS: u64 = 1;

/// Largest latency, in nanoseconds, that is recorded as itself (one hour).
///
/// Larger values are clamped to this and counted in [`LatencyHistogram::saturated`].
pub const HIGHEST_TRACKABLE_NS: u64 = 3_600_000_000_000;

/// Significant decimal digits of [`LatencyHistogram::new`]: every recorded value is
/// reproduced within a relative error of 10^-3.
pub const DEFAULT_SIGFIG: u8 = 3;

/// Latency histogram at nanosecond resolution.
///
/// A thin wrapper over [`hdrhistogram::Histogram<u64>`] with fixed bounds
/// ([`LOWEST_DISCERNIBLE_NS`]..=[`HIGHEST_TRACKABLE_NS`]) that never fails to record:
/// values above the range are clamped to [`HIGHEST_TRACKABLE_NS`] and counted in
/// [`saturated`](Self::saturated), so an outlier is never silently dropped.
///
/// Invariants: the inner histogram always has exactly these bounds, 1..=5 significant
/// digits, and no auto-resize; `saturated() <= len()` unless counts saturate at `u64::MAX`.
///
/// Memory: one `u64` counter per bucket, about 270 KiB at 3 significant digits
/// (and roughly ten times more per extra digit).
#[derive(Clone)]
pub struct LatencyHistogram {
    hist: Histogram<u64>,
    saturated: u64,
}

impl LatencyHistogram {
    /// An empty histogram with [`DEFAULT_SIGFIG`] significant digits.
    pub fn new() -> Self {
        // Cannot fail: DEFAULT_SIGFIG is within 1..=5.
        Self::with_sigfig(DEFAULT_SIGFIG).expect("DEFAULT_SIGFIG is valid")
    }

    /// An empty histogram with `sigfig` significant decimal digits (1..=5).
    ///
    /// # Errors
    /// [`Error::InvalidSigfig`] when `sigfig` is outside `1..=5`.
    pub fn with_sigfig(sigfig: u8) -> Result<Self, Error> {
        if !(1..=5).contains(&sigfig) {
            return Err(Error::InvalidSigfig(sigfig));
        }
        // Cannot fail: low >= 1, high >= 2 * low and sigfig <= 5 are hdrhistogram's only
        // preconditions, all checked above or constant.
        let hist = Histogram::new_with_bounds(LOWEST_DISCERNIBLE_NS, HIGHEST_TRACKABLE_NS, sigfig)
            .expect("bounds and sigfig are valid");
        Ok(Self { hist, saturated: 0 })
    }

    /// Records one latency sample of `ns` nanoseconds.
    ///
    /// Never fails: values above [`HIGHEST_TRACKABLE_NS`] are recorded as
    /// [`HIGHEST_TRACKABLE_NS`] and counted in [`saturated`](Self::saturated).
    #[inline]
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// Records `count` samples of `ns` nanoseconds each; clamps like [`record`](Self::record).
    #[inline]
    pub fn record_n(&mut self, ns: u64, count: u64) {
        let ns = if ns > HIGHEST_TRACKABLE_NS {
            self.saturated = self.saturated.saturating_add(count);
            HIGHEST_TRACKABLE_NS
        } else {
            ns
        };
        // Cannot fail: `ns` is within the histogram's bounds (0 is always representable).
        self.hist
            .record_n(ns, count)
            .expect("value was clamped into range");
    }

    /// Adds every sample of `other` to `self`, e.g. to combine per-thread histograms.
    ///
    /// The result is identical to having recorded all samples into `self` directly,
    /// including the saturated count.
    ///
    /// # Errors
    /// [`Error::PrecisionMismatch`] when the two histograms have different significant
    /// digits; `self` is left unchanged.
    pub fn merge(&mut self, other: &LatencyHistogram) -> Result<(), Error> {
        if self.sigfig() != other.sigfig() {
            return Err(Error::PrecisionMismatch {
                ours: self.sigfig(),
                theirs: other.sigfig(),
            });
        }
        self.hist.add(&other.hist)?;
        self.saturated = self.saturated.saturating_add(other.saturated);
        Ok(())
    }

    /// Number of samples recorded.
    pub fn len(&self) -> u64 {
        self.hist.len()
    }

    /// True when no sample has been recorded.
    pub fn is_empty(&self) -> bool {
        self.hist.is_empty()
    }

    /// Number of samples that were above [`HIGHEST_TRACKABLE_NS`] and got clamped.
    pub fn saturated(&self) -> u64 {
        self.saturated
    }

    /// Significant decimal digits of this histogram.
    pub fn sigfig(&self) -> u8 {
        self.hist.sigfig()
    }

    /// Forgets all samples, keeping the configuration.
    pub fn reset(&mut self) {
        self.hist.reset();
        self.saturated = 0;
    }

    /// Smallest recorded value: the *lowest* equivalent value of its bucket; 0 when empty.
    pub fn min(&self) -> u64 {
        self.hist.min()
    }

    /// Largest recorded value: the *highest* equivalent value of its bucket; 0 when empty.
    pub fn max(&self) -> u64 {
        if self.is_empty() {
            0
        } else {
            self.hist.max()
        }
    }

    /// Arithmetic mean of the samples (each at its bucket's midpoint); 0 when empty.
    pub fn mean(&self) -> f64 {
        self.hist.mean()
    }

    /// Population standard deviation of the samples; 0 when empty.
    pub fn stddev(&self) -> f64 {
        self.hist.stdev()
    }

    /// The sample of 1-based `rank` in sorted order (1 = smallest, `len()` = largest),
    /// reported as the highest equivalent value of its bucket.
    ///
    /// `None` when `rank` is 0 or greater than [`len`](Self::len).
    pub fn value_at_rank(&self, rank: u64) -> Option<u64> {
        if rank == 0 || rank > self.len() {
            return None;
        }
        let mut seen: u64 = 0;
        for v in self.hist.iter_recorded() {
            seen = seen.saturating_add(v.count_at_value());
            if seen >= rank {
                return Some(v.value_iterated_to());
            }
        }
        // Counts sum to len() >= rank, so the loop returns; only reachable if the
        // counters themselves saturated.
        debug_assert!(
            false,
            "rank {rank} not reached although len is {}",
            self.len()
        );
        None
    }

    /// The underlying HdrHistogram, e.g. for its iterators or serialization.
    pub fn as_hdr(&self) -> &hdrhistogram::Histogram<u64> {
        &self.hist
    }

    /// Wraps an HdrHistogram.
    ///
    /// A histogram with latlab's bounds (as read back from latlab's own logs) is taken
    /// as is. Any other histogram is re-recorded bucket by bucket (each bucket at its
    /// highest equivalent value) into one with latlab's bounds and the same significant
    /// digits clamped to 1..=5; values above [`HIGHEST_TRACKABLE_NS`] then count as
    /// saturated. Saturation that happened before `h` was built cannot be recovered.
    pub fn from_hdr(h: hdrhistogram::Histogram<u64>) -> Self {
        let sigfig = h.sigfig();
        if h.low() == LOWEST_DISCERNIBLE_NS
            && h.high() == HIGHEST_TRACKABLE_NS
            && (1..=5).contains(&sigfig)
        {
            return Self {
                hist: h,
                saturated: 0,
            };
        }
        // Cannot fail: the clamped sigfig is within 1..=5.
        let mut out = Self::with_sigfig(sigfig.clamp(1, 5)).expect("sigfig clamped to 1..=5");
        for v in h.iter_recorded() {
            out.record_n(v.value_iterated_to(), v.count_at_value());
        }
        out
    }
}

impl Default for LatencyHistogram {
    fn default() -> Self {
        Self::new()
    }
}

/// Equal when both hold the same samples in the same buckets and saturated the same number.
impl PartialEq for LatencyHistogram {
    fn eq(&self, other: &Self) -> bool {
        self.saturated == other.saturated && self.hist == other.hist
    }
}

/// Prints the configuration and a few statistics, not the ~34 000 bucket counters.
impl fmt::Debug for LatencyHistogram {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LatencyHistogram")
            .field("sigfig", &self.sigfig())
            .field("len", &self.len())
            .field("saturated", &self.saturated)
            .field("min", &self.min())
            .field("max", &self.max())
            .finish_non_exhaustive()
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

    #[test]
    fn a_new_histogram_is_empty_and_reports_zeros() {
        let h = LatencyHistogram::new();
        assert!(h.is_empty());
        assert_eq!(h.len(), 0);
        assert_eq!((h.min(), h.max(), h.saturated()), (0, 0, 0));
        assert_eq!((h.mean(), h.stddev()), (0.0, 0.0));
        assert_eq!(h.value_at_rank(1), None);
        assert_eq!(h.sigfig(), DEFAULT_SIGFIG);
    }

    #[test]
    fn sigfig_must_be_between_one_and_five() {
        assert!(matches!(
            LatencyHistogram::with_sigfig(0),
            Err(Error::InvalidSigfig(0))
        ));
        assert!(matches!(
            LatencyHistogram::with_sigfig(6),
            Err(Error::InvalidSigfig(6))
        ));
        for s in 1..=5 {
            assert_eq!(LatencyHistogram::with_sigfig(s).unwrap().sigfig(), s);
        }
    }

    #[test]
    fn small_values_are_recorded_exactly() {
        let h = uniform(10);
        assert_eq!(h.len(), 10);
        assert_eq!((h.min(), h.max()), (1, 10));
        assert_eq!(h.mean(), 5.5);
        assert!((h.stddev() - 8.25_f64.sqrt()).abs() < 1e-12);
    }

    #[test]
    fn value_at_rank_walks_the_sorted_samples() {
        let h = uniform(10);
        assert_eq!(h.value_at_rank(0), None);
        for rank in 1..=10 {
            assert_eq!(h.value_at_rank(rank), Some(rank));
        }
        assert_eq!(h.value_at_rank(11), None);
    }

    #[test]
    fn value_at_rank_reports_the_highest_equivalent_value_of_the_bucket() {
        let mut h = LatencyHistogram::new();
        h.record(1_000_000);
        let v = h.value_at_rank(1).unwrap();
        assert_eq!(v, h.as_hdr().highest_equivalent(1_000_000));
        assert!((1_000_000..1_001_000).contains(&v), "within 0.1%: {v}");
        assert!(h.min() <= 1_000_000 && h.max() == v);
    }

    #[test]
    fn record_n_equals_recording_n_times() {
        let mut a = LatencyHistogram::new();
        let mut b = LatencyHistogram::new();
        a.record_n(12_345, 7);
        for _ in 0..7 {
            b.record(12_345);
        }
        assert_eq!(a.as_hdr(), b.as_hdr());
    }

    #[test]
    fn values_above_one_hour_are_clamped_and_counted_as_saturated() {
        let mut h = LatencyHistogram::new();
        h.record(5);
        h.record(HIGHEST_TRACKABLE_NS);
        h.record(HIGHEST_TRACKABLE_NS + 1);
        h.record(u64::MAX);
        h.record_n(u64::MAX, 3);
        assert_eq!(h.len(), 7);
        assert_eq!(h.saturated(), 5, "one hour itself is in range");
        assert_eq!(h.max(), h.as_hdr().highest_equivalent(HIGHEST_TRACKABLE_NS));
        assert_eq!(h.value_at_rank(7), Some(h.max()));
    }

    #[test]
    fn zero_is_a_recordable_latency() {
        let mut h = LatencyHistogram::new();
        h.record(0);
        assert_eq!((h.len(), h.min(), h.max()), (1, 0, 0));
    }

    #[test]
    fn merge_equals_recording_everything_in_one() {
        let mut all = LatencyHistogram::new();
        let mut parts = [LatencyHistogram::new(), LatencyHistogram::new()];
        for (i, ns) in (0..50_000u64).map(|i| i * i % 9_999_991).enumerate() {
            all.record(ns);
            parts[i % 2].record(ns);
        }
        all.record(u64::MAX);
        parts[1].record(u64::MAX);

        let [mut merged, other] = parts;
        merged.merge(&other).unwrap();
        assert_eq!(merged.as_hdr(), all.as_hdr());
        assert_eq!(merged.saturated(), 1);
        assert_eq!(merged.len(), all.len());
        assert_eq!(merged.min(), all.min());
        assert_eq!(merged.max(), all.max());
        assert_eq!(merged.value_at_rank(25_000), all.value_at_rank(25_000));
    }

    #[test]
    fn merging_into_an_empty_histogram_copies_it() {
        let mut empty = LatencyHistogram::new();
        let full = uniform(100);
        empty.merge(&full).unwrap();
        assert_eq!(empty.as_hdr(), full.as_hdr());
    }

    #[test]
    fn merging_different_precisions_is_refused_and_leaves_self_unchanged() {
        let mut a = uniform(10);
        let b = LatencyHistogram::with_sigfig(2).unwrap();
        let err = a.merge(&b).unwrap_err();
        assert!(matches!(
            err,
            Error::PrecisionMismatch { ours: 3, theirs: 2 }
        ));
        assert_eq!(a.len(), 10);
    }

    #[test]
    fn reset_forgets_samples_and_saturation() {
        let mut h = uniform(10);
        h.record(u64::MAX);
        h.reset();
        assert!(h.is_empty());
        assert_eq!(h.saturated(), 0);
        assert_eq!(h.sigfig(), DEFAULT_SIGFIG);
    }

    #[test]
    fn from_hdr_keeps_a_histogram_with_latlab_bounds_as_is() {
        let h = uniform(1000);
        let back = LatencyHistogram::from_hdr(h.as_hdr().clone());
        assert_eq!(back.as_hdr(), h.as_hdr());
    }

    #[test]
    fn from_hdr_rebuckets_foreign_histograms_into_latlab_bounds() {
        let mut foreign = Histogram::<u64>::new_with_bounds(1, u64::MAX, 2).unwrap();
        foreign.record(7).unwrap();
        foreign.record(HIGHEST_TRACKABLE_NS * 2).unwrap();
        let h = LatencyHistogram::from_hdr(foreign);
        assert_eq!(h.as_hdr().high(), HIGHEST_TRACKABLE_NS);
        assert_eq!(h.sigfig(), 2);
        assert_eq!(h.len(), 2);
        assert_eq!(h.saturated(), 1);
        assert_eq!(h.value_at_rank(1), Some(7));
    }

    #[test]
    fn debug_output_is_short() {
        let s = format!("{:?}", uniform(10_000));
        assert!(s.len() < 200, "{s}");
        assert!(s.contains("len: 10000"), "{s}");
    }
}
