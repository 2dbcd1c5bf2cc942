//! Sleeping until a deadline without a core of one's own: a blocking loop sleeps in `ppoll`
//! (1 ns timer slack) until shortly before its next deadline and spins the last stretch on the
//! clock. How long that stretch must be depends on the machine: a guest's halted vCPU wakes
//! tens of microseconds late, a busy host's core a few. [`SleepSpin`] learns it from the loop's
//! own sleeps: the stretch is the latest wake-up among the last [`WINDOW`] timed sleeps plus a
//! margin, between [`MIN_SPIN_NS`] and [`MAX_SPIN_NS`]. After it handled a frame, a loop also
//! keeps polling for the same stretch ([`SleepSpin::lingers`]): a frame that comes back that
//! soon (the other half of a round trip) is then taken without waiting for a wake-up.

use std::time::Duration;

/// Timed sleeps whose lateness sizes the spin.
pub const WINDOW: usize = 32;
/// The shortest spin before a deadline.
pub const MIN_SPIN_NS: u64 = 5_000;
/// The longest spin before a deadline: a sleep later than this (the thread was preempted)
/// is not worth a core.
pub const MAX_SPIN_NS: u64 = 200_000;
/// Added to the latest wake-up seen.
const MARGIN_NS: u64 = 5_000;
/// The lateness assumed before any sleep was timed.
const FIRST_GUESS_NS: u64 = 50_000;

/// The spin before each deadline of a blocking loop, sized by how late its sleeps woke.
#[derive(Clone, Debug)]
pub struct SleepSpin {
    late: [u64; WINDOW],
    next: usize,
    spin_ns: u64,
    /// The deadline of the sleep under way (`wake_at`), if it was timed.
    asked: Option<u64>,
    linger_until: u64,
}

impl Default for SleepSpin {
    fn default() -> Self {
        SleepSpin::new()
    }
}

impl SleepSpin {
    /// No sleep timed yet: a spin of [`FIRST_GUESS_NS`] plus the margin.
    pub fn new() -> SleepSpin {
        let mut s = SleepSpin {
            late: [FIRST_GUESS_NS; WINDOW],
            next: 0,
            spin_ns: 0,
            asked: None,
            linger_until: 0,
        };
        s.resize();
        s
    }

    /// The current spin before a deadline, ns.
    pub fn spin_ns(&self) -> u64 {
        self.spin_ns
    }

    /// How long to sleep at `now` before a deadline `due` (`None`: nothing due), capped at
    /// `max`: until the spin (at most half the time left) before it. Zero when the loop should
    /// spin instead: the deadline is within [`MIN_SPIN_NS`] twice, or the loop handled a frame
    /// within the last spin. A timed sleep is remembered, and its lateness noted by
    /// [`SleepSpin::woke`].
    pub fn sleep_for(&mut self, now: u64, due: Option<u64>, max: Duration) -> Duration {
        self.asked = None;
        if now < self.linger_until {
            return Duration::ZERO;
        }
        let Some(due) = due else {
            return max;
        };
        // Never spin more than half the time left: a loop whose deadlines come closer than
        // its spin sleeps half the time, and keeps timing its sleeps.
        let left = due.saturating_sub(now);
        let spin = self.spin_ns.min(left / 2);
        if spin < MIN_SPIN_NS {
            return Duration::ZERO;
        }
        let sleep = left - spin;
        if u128::from(sleep) > max.as_nanos() {
            return max;
        }
        self.asked = Some(due - spin);
        Duration::from_nanos(sleep)
    }

    /// The loop is back at `now` from the sleep [`SleepSpin::sleep_for`] gave: a timed sleep
    /// that ended at or after its deadline was ended by its timer (or would have been), and
    /// how late it woke resizes the spin; one a frame cut short teaches nothing.
    pub fn woke(&mut self, now: u64) {
        if let Some(wake_at) = self.asked.take().filter(|&w| now >= w) {
            self.late[self.next] = now.saturating_sub(wake_at);
            self.next = (self.next + 1) % WINDOW;
            self.resize();
        }
    }

    /// The loop handled a frame at `now`: it polls on for one spin before sleeping again.
    pub fn lingers(&mut self, now: u64) {
        self.linger_until = now + self.spin_ns;
    }

    fn resize(&mut self) {
        let latest = self.late.iter().copied().max().unwrap_or(0);
        self.spin_ns = (latest + MARGIN_NS).clamp(MIN_SPIN_NS, MAX_SPIN_NS);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX_SLEEP: Duration = Duration::from_millis(10);

    /// One timed sleep at `now` before a deadline 1 ms away, woken `late` ns after the sleep
    /// asked; returns the time after it.
    fn sleep_woken_late(s: &mut SleepSpin, now: u64, late: u64) -> u64 {
        let sleep = s.sleep_for(now, Some(now + 1_000_000), MAX_SLEEP);
        let now = now + sleep.as_nanos() as u64 + late;
        s.woke(now);
        now
    }

    #[test]
    fn the_spin_follows_the_latest_wake_up_of_the_window() {
        let mut s = SleepSpin::new();
        assert_eq!(s.spin_ns(), FIRST_GUESS_NS + MARGIN_NS);
        let mut now = 1_000_000_000;
        for _ in 0..WINDOW {
            now = sleep_woken_late(&mut s, now, 2_000);
        }
        assert_eq!(s.spin_ns(), 2_000 + MARGIN_NS);
        // One late wake-up widens it at once, for WINDOW sleeps.
        now = sleep_woken_late(&mut s, now, 40_000);
        assert_eq!(s.spin_ns(), 40_000 + MARGIN_NS);
        for _ in 0..WINDOW - 1 {
            now = sleep_woken_late(&mut s, now, 2_000);
            assert_eq!(s.spin_ns(), 40_000 + MARGIN_NS);
        }
        sleep_woken_late(&mut s, now, 2_000);
        assert_eq!(s.spin_ns(), 2_000 + MARGIN_NS);
    }

    #[test]
    fn the_spin_stays_within_its_bounds() {
        let mut s = SleepSpin::new();
        let mut now = 1_000_000_000;
        for _ in 0..WINDOW {
            now = sleep_woken_late(&mut s, now, 0);
        }
        assert_eq!(s.spin_ns(), MIN_SPIN_NS.max(MARGIN_NS));
        sleep_woken_late(&mut s, now, 5_000_000);
        assert_eq!(s.spin_ns(), MAX_SPIN_NS);
    }

    #[test]
    fn a_sleep_cut_short_by_a_frame_or_untimed_teaches_nothing() {
        let mut s = SleepSpin::new();
        let spin = s.spin_ns();
        let now = 1_000_000_000;
        // Woken by a frame before the deadline.
        let sleep = s.sleep_for(now, Some(now + 1_000_000), MAX_SLEEP);
        assert_eq!(sleep.as_nanos() as u64, 1_000_000 - spin);
        s.woke(now + 100_000);
        assert_eq!(s.spin_ns(), spin);
        // Nothing due: the longest sleep, untimed.
        assert_eq!(s.sleep_for(now, None, MAX_SLEEP), MAX_SLEEP);
        s.woke(now + 30_000_000);
        assert_eq!(s.spin_ns(), spin);
        // A deadline past the longest sleep: untimed too.
        assert_eq!(
            s.sleep_for(now, Some(now + 50_000_000), MAX_SLEEP),
            MAX_SLEEP
        );
        s.woke(now + 30_000_000);
        assert_eq!(s.spin_ns(), spin);
    }

    #[test]
    fn it_spins_near_a_deadline_and_while_lingering() {
        let mut s = SleepSpin::new();
        let spin = s.spin_ns();
        let now = 1_000_000_000;
        let sleep =
            |s: &mut SleepSpin, now: u64, left: u64| s.sleep_for(now, Some(now + left), MAX_SLEEP);
        assert_eq!(sleep(&mut s, now, 3 * spin), Duration::from_nanos(2 * spin));
        // At most half the time left, when that is shorter than the spin.
        assert_eq!(
            sleep(&mut s, now, spin),
            Duration::from_nanos(spin - spin / 2)
        );
        assert!(s.asked.is_some());
        assert_eq!(sleep(&mut s, now, 2 * MIN_SPIN_NS - 1), Duration::ZERO);
        assert!(s.asked.is_none());
        s.lingers(now);
        assert_eq!(s.sleep_for(now + spin - 1, None, MAX_SLEEP), Duration::ZERO);
        assert_eq!(s.sleep_for(now + spin, None, MAX_SLEEP), MAX_SLEEP);
    }
}
