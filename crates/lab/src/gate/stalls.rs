//! Delay gates and the host's stall floor: a failure the host's own stalls could have made is
//! inconclusive ([`Assertion::within_stalls`]).

use latlab_stats::stalls::HostStalls;

use super::{format_ns, Assertion, AssertionVerdict, Bound, Statistic, Verdict};

impl Assertion {
    /// A delay gate that failed on a value the host's own stalls could make is inconclusive,
    /// not failed: the run cannot tell the system's tail from the host's. That is when the
    /// system meets the limit unstalled (the run's fastest, `min_ns`, is within it), the host
    /// stalled latlab's loops about as long as the tail stands above that
    /// ([`HostStalls::covers`](latlab_stats::stalls::HostStalls::covers)), and for a
    /// percentile the stalls took at least the share of the run that lies beyond it (1 % for
    /// p99: a probe due while the loop stood waits for it). A pass stands (the host only
    /// adds), as does a failed lower bound, a mean, or a limit below the fastest.
    pub(super) fn within_stalls(
        &self,
        mut v: AssertionVerdict,
        stalls: &HostStalls,
        min_ns: u64,
    ) -> AssertionVerdict {
        let beyond = match self.statistic {
            Statistic::Percentile(_, q) => 1.0 - q.q,
            Statistic::Max(_) => 0.0,
            _ => return v,
        };
        let upper = matches!(self.bound, Bound::AtMost | Bound::Below);
        let failed = upper && v.verdict == Verdict::Fail && self.limit >= min_ns as f64;
        let Some(estimate) = v.estimate.filter(|_| failed) else {
            return v;
        };
        let share = stalls.total_ns as f64 / (stalls.observed_s * 1e9).max(1.0);
        let excess = (estimate.max(0.0) as u64).saturating_sub(min_ns);
        if !stalls.covers(excess) || share < beyond {
            return v;
        }
        v.verdict = Verdict::Inconclusive;
        v.message = format!(
            "{}; the host stalled as long as this tail (its longest stall {}, {:.2}% of the run \
             stalled): the system's tail cannot be told from the host's",
            v.message,
            format_ns(stalls.longest_ns as f64),
            share * 100.0
        );
        v
    }
}
