//! The per-client rate limit of the game server: a token bucket in its virtual scheduling form
//! (GCRA), exact in integer nanoseconds.

/// The token bucket of [`super::ServerConfig::rate_limit_pps`] in its virtual
/// scheduling form (GCRA): equivalent to a bucket of `burst` tokens refilled
/// at one token per `interval_ns`, in integer nanoseconds so that it is exact.
#[derive(Clone, Copy, Debug)]
pub(super) struct RateLimit {
    interval_ns: u64,
    /// `(burst - 1) * interval_ns`: how far ahead of schedule a client may be.
    tolerance_ns: u64,
    burst: u32,
}

impl RateLimit {
    pub(super) fn new(pps: f64, burst: u32) -> RateLimit {
        // `as` saturates: +inf and huge values give u64::MAX, NaN gives 0.
        let interval_ns = ((1e9 / pps).round() as u64).max(1);
        let interval_ns = if pps > 0.0 { interval_ns } else { u64::MAX };
        RateLimit {
            interval_ns,
            tolerance_ns: interval_ns.saturating_mul(u64::from(burst.saturating_sub(1))),
            burst,
        }
    }

    /// Takes a token for a packet at `now` if there is one.
    pub(super) fn admit(&self, next_conforming_ns: &mut u64, now: u64) -> bool {
        if self.burst == 0 || now.saturating_add(self.tolerance_ns) < *next_conforming_ns {
            return false;
        }
        *next_conforming_ns = (*next_conforming_ns)
            .max(now)
            .saturating_add(self.interval_ns);
        true
    }
}
