//! Sleeping until a deadline without a core of one's own: a blocking loop sleeps in `ppoll`
//! (1 ns timer slack) until shortly before its next deadline and spins the last stretch on the
//! clock. How long that stretch must be depends on the machine: a guest's halted vCPU wakes
//! tens of microseconds late, a busy host's core a few. [`SleepSpin`] learns it from the loop's
//! own sleeps: the stretch is the latest wake-up among the last [`WINDOW`] timed sleeps plus a
//! margin, between [`MIN_SPIN_NS`] and [`MAX_SPIN_NS`]. After it handled a frame, a loop also
//! keeps polling for the same stretch ([`SleepSpin::lingers`]): a frame that comes back that
//! soon (the other half of a round trip) is then taken without waiting for a wake-up.
//!
//! A loop in the realtime class must also leave its CPU some of the time: the kernel lets
//! realtime threads run only `sched_rt_runtime_us` of every `sched_rt_period_us` (950 ms of
//! each second by default) and then takes the CPU from them for the rest of the period, a
//! stall of ~50 ms once a second for a loop that spins between frames at 20 kpps. With a
//! [`SleepSpin::with_duty_limit`] the loop counts the time it was awake in each
//! [`DUTY_WINDOW_NS`]; past the limit it rests for the rest of that window: it neither spins
//! before deadlines nor lingers after frames, it sleeps until the deadline itself or a frame,
//! and is woken for each (a few microseconds later than a spinning loop would have taken it).

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
/// The window over which a loop with a duty limit counts the time it was awake.
pub const DUTY_WINDOW_NS: u64 = 10_000_000;
/// The share of the kernel's realtime allowance a realtime loop spins or lingers in: the
/// rest is headroom for the frames it still handles while resting.
pub const REALTIME_DUTY: f64 = 0.96;

/// What a blocking loop's sleeps were, for its report: the spin it ended with and what it was
/// learned from.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
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
    /// The share of each [`DUTY_WINDOW_NS`] the loop could be awake before resting
    /// ([`SleepSpin::with_duty_limit`]); `None` without a limit.
    pub duty_limit: Option<f64>,
    /// Windows in which the loop reached its duty limit and rested for the rest of it.
    pub rested_windows: u64,
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
    duty: Option<Duty>,
}

/// The time a loop with a duty limit was awake in its current window.
#[derive(Clone, Debug)]
struct Duty {
    limit: f64,
    /// Awake time allowed per window, ns.
    awake_ns: u64,
    window_start: u64,
    /// Time slept since `window_start`, ns.
    slept_ns: u64,
    resting: bool,
    rested_windows: u64,
}

impl Duty {
    /// Whether the loop rests at `now`: it was awake longer than allowed in this window.
    fn rests(&mut self, now: u64) -> bool {
        if now >= self.window_start + DUTY_WINDOW_NS {
            self.window_start = now;
            self.slept_ns = 0;
            self.resting = false;
        }
        let awake = (now - self.window_start).saturating_sub(self.slept_ns);
        if !self.resting && awake >= self.awake_ns {
            self.resting = true;
            self.rested_windows += 1;
        }
        self.resting
    }

    /// The loop slept from `since` to `now`: the part inside this window counts.
    fn slept(&mut self, since: u64, now: u64) {
        self.slept_ns += now.saturating_sub(since.max(self.window_start));
    }
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
            duty: None,
        };
        s.resize();
        s
    }

    /// A loop that may be awake at most `limit` (0 to 1) of each [`DUTY_WINDOW_NS`], and
    /// rests for the rest of a window once it was: no spin, no linger.
    pub fn with_duty_limit(limit: f64) -> SleepSpin {
        let limit = limit.clamp(0.0, 1.0);
        SleepSpin {
            duty: Some(Duty {
                limit,
                awake_ns: (limit * DUTY_WINDOW_NS as f64) as u64,
                window_start: 0,
                slept_ns: 0,
                resting: false,
                rested_windows: 0,
            }),
            ..SleepSpin::new()
        }
    }

    /// For the calling thread: with a duty limit if it runs in the realtime class and the
    /// kernel limits realtime threads ([`latlab_io::cpu::realtime_share`]), at
    /// [`REALTIME_DUTY`] of what the kernel allows; without one otherwise.
    pub fn for_this_thread() -> SleepSpin {
        let realtime = latlab_io::cpu::thread_is_realtime(0).unwrap_or(false);
        match latlab_io::cpu::realtime_share().filter(|_| realtime) {
            Some(share) => SleepSpin::with_duty_limit(share * REALTIME_DUTY),
            None => SleepSpin::new(),
        }
    }

    /// Whether the loop rests for the rest of its current window (its duty limit reached,
    /// as of its last [`SleepSpin::sleep_for`]).
    pub fn resting(&self) -> bool {
        self.duty.as_ref().is_some_and(|d| d.resting)
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
            duty_limit: self.duty.as_ref().map(|d| d.limit),
            rested_windows: self.duty.as_ref().map_or(0, |d| d.rested_windows),
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
        let rests = self.duty.as_mut().is_some_and(|d| d.rests(now));
        if now < self.linger_until && !rests {
            return Duration::ZERO;
        }
        let Some(due) = due else {
            self.asked_ns += max.as_nanos() as u64;
            return max;
        };
        // Never spin more than half the time left: a loop whose deadlines come closer than
        // its spin sleeps half the time, and keeps timing its sleeps. A resting loop spins only
        // when the deadline is too close to sleep for.
        let left = due.saturating_sub(now);
        let spin = if rests { 0 } else { self.spin_ns.min(left / 2) };
        if rests && left < 2 * MIN_SPIN_NS {
            return Duration::ZERO;
        }
        if spin < MIN_SPIN_NS && !rests {
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
            if let Some(d) = &mut self.duty {
                d.slept(since, now);
            }
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

    /// A loop that handles a frame every `every` ns from `start` to `end`, lingering after
    /// each; returns how long it spent awake and when its rests began.
    fn frames_every(s: &mut SleepSpin, start: u64, end: u64, every: u64) -> (u64, Vec<u64>) {
        let (mut now, mut awake, mut rests) = (start, 0, Vec::new());
        let mut next_frame = start;
        let mut rested = s.report().rested_windows;
        while now < end {
            if now >= next_frame {
                s.lingers(now);
                next_frame += every;
            }
            let sleep = s.sleep_for(now, None, MAX_SLEEP).as_nanos() as u64;
            if s.report().rested_windows != rested {
                rested = s.report().rested_windows;
                rests.push(now);
            }
            if sleep == 0 {
                // Spinning (lingering): awake until the next look, 1 µs later.
                now += 1_000;
                awake += 1_000;
            } else {
                // Asleep until the next frame wakes it.
                now = next_frame;
                s.woke(now);
            }
        }
        (awake, rests)
    }

    #[test]
    fn a_loop_with_a_duty_limit_rests_once_it_was_awake_its_share_of_a_window() {
        // Frames every 25 µs with a linger of 55 µs: without a limit, awake all the time.
        let start = 1_000_000_000;
        let mut free = SleepSpin::new();
        let (awake, rests) = frames_every(&mut free, start, start + 100_000_000, 25_000);
        assert_eq!(awake, 100_000_000);
        assert!(rests.is_empty());
        assert_eq!(free.report().duty_limit, None);

        let mut limited = SleepSpin::with_duty_limit(0.76);
        let (awake, rests) = frames_every(&mut limited, start, start + 100_000_000, 25_000);
        let r = limited.report();
        assert_eq!(r.duty_limit, Some(0.76));
        // Ten windows of 10 ms, each rested in after 7.6 ms awake (to the µs it looks at).
        assert_eq!(r.rested_windows, 10);
        assert_eq!(rests.len(), 10);
        for (w, at) in rests.iter().enumerate() {
            let into = at - (start + w as u64 * DUTY_WINDOW_NS);
            assert!(
                (7_600_000..=7_601_000).contains(&into),
                "window {w}: {into}"
            );
        }
        assert!(
            (75_000_000..=77_000_000).contains(&awake),
            "awake {awake} ns of 100 ms"
        );
        // Asleep the rest of each window: woken by each frame, not spinning after it.
        assert!(r.slept_ns >= 23_000_000, "{r:?}");
    }

    #[test]
    fn a_resting_loop_sleeps_to_the_deadline_itself_and_spins_only_when_too_close() {
        let mut s = SleepSpin::with_duty_limit(0.0);
        let now = 1_000_000_000;
        // Rests at once: a deadline 1 ms away is slept to, with no spin before it.
        assert_eq!(
            s.sleep_for(now, Some(now + 1_000_000), MAX_SLEEP),
            Duration::from_millis(1)
        );
        s.woke(now + 1_000_020);
        // That sleep was timed: how late it woke still teaches the spin.
        assert_eq!(s.report().timed_sleeps, 1);
        // A frame's linger is ignored while resting.
        s.lingers(now + 1_000_020);
        assert_eq!(s.sleep_for(now + 1_000_030, None, MAX_SLEEP), MAX_SLEEP);
        // A deadline closer than two of the shortest spins is spun to.
        let at = now + 2_000_000;
        assert_eq!(
            s.sleep_for(at, Some(at + 2 * MIN_SPIN_NS - 1), MAX_SLEEP),
            Duration::ZERO
        );
        // A limit of 1 never rests.
        let mut full = SleepSpin::with_duty_limit(1.0);
        full.lingers(now);
        assert_eq!(full.sleep_for(now + 1, None, MAX_SLEEP), Duration::ZERO);
        assert_eq!(full.report().rested_windows, 0);
    }

    #[test]
    fn a_realtime_thread_gets_a_duty_limit_under_the_kernel_s_allowance() {
        assert_eq!(SleepSpin::for_this_thread().report().duty_limit, None);
        if !latlab_io::cpu::may_run_realtime() {
            // Without CAP_SYS_NICE (not root): nothing more to check, and CI runs as root.
            assert!(
                std::env::var_os("CI").is_none(),
                "CI runs the tests as root"
            );
            return;
        }
        let limit = std::thread::spawn(|| {
            latlab_io::cpu::set_thread_realtime(0, 1).unwrap();
            SleepSpin::for_this_thread().report().duty_limit
        })
        .join()
        .unwrap();
        let expected = latlab_io::cpu::realtime_share().map(|s| s * REALTIME_DUTY);
        assert_eq!(limit, expected);
        if let Some(limit) = limit {
            assert!(limit < latlab_io::cpu::realtime_share().unwrap(), "{limit}");
        }
    }
}
