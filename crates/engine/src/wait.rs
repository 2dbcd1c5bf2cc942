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

/// What a blocking loop's sleeps were, for its report: the spin it ended with and what it was
/// learned from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SleepReport {
    /// The spin before each deadline at the end ([`SleepSpin::spin_ns`]).
    pub spin_ns: u64,
    /// The latest wake-up among the last [`WINDOW`] timed sleeps, which sized it (the first
    /// guess until that many were timed).
    pub latest_late_ns: u64,
    /// Timed sleeps that ended at or after their deadline (those that teach the spin).
    pub timed_sleeps: u64,
    /// The time the loop asked to sleep, in all (a frame may have cut a sleep short).
    pub asked_ns: u64,
    /// The time the loop was away sleeping, in all: from each [`SleepSpin::sleep_for`] that
    /// gave a sleep to the [`SleepSpin::woke`] after it.
    pub slept_ns: u64,
}

impl SleepReport {
    /// The spin [`SleepSpin`] derives from a latest wake-up of `latest_late_ns`.
    pub fn spin_for(latest_late_ns: u64) -> u64 {
        (latest_late_ns + MARGIN_NS).clamp(MIN_SPIN_NS, MAX_SPIN_NS)
    }
}

/// The spin before each deadline of a blocking loop, sized by how late its sleeps woke.
#[derive(Clone, Debug)]
pub struct SleepSpin {
    late: [u64; WINDOW],
    next: usize,
    spin_ns: u64,
    timed: u64,
    asked_ns: u64,
    slept_ns: u64,
    /// When the sleep under way began, if one is.
    sleeping_since: Option<u64>,
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
    /// No sleep timed yet: a spin of `FIRST_GUESS_NS` plus the margin.
    pub fn new() -> SleepSpin {
        let mut s = SleepSpin {
            late: [FIRST_GUESS_NS; WINDOW],
            next: 0,
            spin_ns: 0,
            timed: 0,
            asked_ns: 0,
            slept_ns: 0,
            sleeping_since: None,
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

    /// The spin and what it was learned from.
    pub fn report(&self) -> SleepReport {
        SleepReport {
            spin_ns: self.spin_ns,
            latest_late_ns: self.late.iter().copied().max().unwrap_or(0),
            timed_sleeps: self.timed,
            asked_ns: self.asked_ns,
            slept_ns: self.slept_ns,
        }
    }

    /// How long to sleep at `now` before a deadline `due` (`None`: nothing due), capped at
    /// `max`: until the spin (at most half the time left) before it. Zero when the loop should
    /// spin instead: the deadline is within [`MIN_SPIN_NS`] twice, or the loop handled a frame
    /// within the last spin. A timed sleep is remembered, and its lateness noted by
    /// [`SleepSpin::woke`].
    pub fn sleep_for(&mut self, now: u64, due: Option<u64>, max: Duration) -> Duration {
        let sleep = self.next_sleep(now, due, max);
        self.sleeping_since = (!sleep.is_zero()).then_some(now);
        sleep
    }

    fn next_sleep(&mut self, now: u64, due: Option<u64>, max: Duration) -> Duration {
        self.asked = None;
        if now < self.linger_until {
            return Duration::ZERO;
        }
        let Some(due) = due else {
            self.asked_ns += max.as_nanos() as u64;
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
            self.asked_ns += max.as_nanos() as u64;
            return max;
        }
        self.asked = Some(due - spin);
        self.asked_ns += sleep;
        Duration::from_nanos(sleep)
    }

    /// The loop is back at `now` from the sleep [`SleepSpin::sleep_for`] gave: a timed sleep
    /// that ended at or after its deadline was ended by its timer (or would have been), and
    /// how late it woke resizes the spin; one a frame cut short teaches nothing.
    pub fn woke(&mut self, now: u64) {
        if let Some(since) = self.sleeping_since.take() {
            self.slept_ns += now.saturating_sub(since);
        }
        if let Some(wake_at) = self.asked.take().filter(|&w| now >= w) {
            self.late[self.next] = now.saturating_sub(wake_at);
            self.next = (self.next + 1) % WINDOW;
            self.timed += 1;
            self.resize();
        }
    }

    /// The loop handled a frame at `now`: it polls on for one spin before sleeping again.
    pub fn lingers(&mut self, now: u64) {
        self.linger_until = now + self.spin_ns;
    }

    fn resize(&mut self) {
        let latest = self.late.iter().copied().max().unwrap_or(0);
        self.spin_ns = SleepReport::spin_for(latest);
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
    fn the_report_counts_timed_sleeps_and_the_sleep_asked_and_names_the_spin_s_source() {
        let mut s = SleepSpin::new();
        let first = s.report();
        assert_eq!(first.timed_sleeps, 0);
        assert_eq!(first.latest_late_ns, FIRST_GUESS_NS);
        assert_eq!(first.spin_ns, SleepReport::spin_for(FIRST_GUESS_NS));
        let mut now = 1_000_000_000;
        let mut asked = 0;
        for late in [3_000, 7_000, 1_000] {
            let sleep = s
                .sleep_for(now, Some(now + 1_000_000), MAX_SLEEP)
                .as_nanos() as u64;
            asked += sleep;
            now += sleep + late;
            s.woke(now);
        }
        // Cut short by a frame: asked, not timed.
        asked += s
            .sleep_for(now, Some(now + 1_000_000), MAX_SLEEP)
            .as_nanos() as u64;
        s.woke(now + 10);
        // Nothing due: the longest sleep is asked.
        asked += s.sleep_for(now, None, MAX_SLEEP).as_nanos() as u64;
        let r = s.report();
        assert_eq!(r.timed_sleeps, 3);
        assert_eq!(r.asked_ns, asked);
        // Away from each sleep_for to its woke: three sleeps woken late, one cut short (the
        // last sleep has not woken yet).
        assert_eq!(r.slept_ns, 3 * 945_000 + 3_000 + 7_000 + 1_000 + 10);
        // Every sleep before a deadline left the first guess's spin: 1 ms less 55 µs.
        assert_eq!(asked, 4 * (1_000_000 - 55_000) + 10_000_000);
        // Until WINDOW sleeps are timed the first guess is still in the window.
        assert_eq!(r.latest_late_ns, FIRST_GUESS_NS);
        for _ in 0..WINDOW {
            now = sleep_woken_late(&mut s, now, 9_000);
        }
        let r = s.report();
        assert_eq!((r.latest_late_ns, r.spin_ns), (9_000, 9_000 + MARGIN_NS));
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
