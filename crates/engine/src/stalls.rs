//! Measuring the host's stall floor in latlab's own loops ([`latlab_stats::stalls`]).
//!
//! A spinning loop calls [`StallWatch::tick`] once a turn: the clock read it already makes is
//! the measurement, so watching costs a compare and, rarely, a histogram record. Around a
//! sleep it calls [`StallWatch::woke`] with the time the sleep was due to end: the sleep itself
//! is not a stall, waking late is. A loop that blocks in the kernel until a frame comes cannot
//! tell a stall from a quiet line, so a [`StallSampler`] on its CPU does the watching: a thread
//! sleeping 1 ms at a time (1 ns timer slack) and timing its wake-ups, as `cyclictest` does.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use latlab_io::clock::now_ns;
use latlab_io::cpu;
use latlab_stats::stalls::{StallSource, Stalls};

/// A loop's own watch on its turns.
#[derive(Debug)]
pub struct StallWatch {
    stalls: Stalls,
    /// The last turn (or wake-up), ns.
    last_ns: u64,
    /// When watching began, ns.
    start_ns: u64,
}

impl StallWatch {
    /// Watching from `now`.
    pub fn new(now: u64) -> StallWatch {
        StallWatch {
            stalls: Stalls::new(StallSource::Loop),
            last_ns: now,
            start_ns: now,
        }
    }

    /// A turn of the loop at `now`: the gap since the last is kept if it is a stall.
    #[inline]
    pub fn tick(&mut self, now: u64) {
        let gap = now.saturating_sub(self.last_ns);
        if gap >= latlab_stats::stalls::STALL_THRESHOLD_NS {
            self.stalls.record(gap);
        }
        self.last_ns = now;
    }

    /// The loop is back at `now` from a sleep that was due to end at `due_ns` (or earlier, for
    /// a frame): how late it woke is kept if it is a stall, the sleep is not.
    #[inline]
    pub fn woke(&mut self, now: u64, due_ns: u64) {
        self.stalls.record(now.saturating_sub(due_ns));
        self.last_ns = now;
    }

    /// The loop is back at `now` from a wait whose end it cannot know (a frame may have ended
    /// it): the wait is neither kept nor counted as a turn's gap.
    #[inline]
    pub fn resumed(&mut self, now: u64) {
        self.last_ns = now;
    }

    /// The stalls, watched until `now`.
    pub fn finish(mut self, now: u64) -> Stalls {
        self.stalls.observed(now.saturating_sub(self.start_ns));
        self.stalls
    }
}

/// The CPU the calling thread is pinned to, if it is pinned to one: where a loop's
/// [`StallSampler`] samples.
pub(crate) fn pinned_cpu() -> Option<usize> {
    match cpu::allowed_cpus().ok()?.as_slice() {
        [cpu] => Some(*cpu),
        _ => None,
    }
}

/// The sleep between two of a [`StallSampler`]'s wake-ups.
pub const SAMPLER_PERIOD: Duration = Duration::from_millis(1);

/// A thread on a loop's CPU timing its own 1 ms sleeps' wake-ups, for a loop that blocks.
#[derive(Debug)]
pub struct StallSampler {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Stalls>>,
}

impl StallSampler {
    /// Starts sampling on `cpu` (the loop's; `None`: wherever the scheduler puts it): it
    /// watches from this call to [`StallSampler::finish`].
    ///
    /// # Errors
    /// The thread could not be started.
    pub fn start(cpu: Option<usize>) -> io::Result<StallSampler> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        // Watched from here, however late the thread first runs.
        let start = now_ns();
        let thread = std::thread::Builder::new()
            .name("latlab-stalls".into())
            .spawn(move || {
                if let Some(cpu) = cpu {
                    // Unpinned it still samples the host, only less exactly the loop's CPU.
                    let _ = cpu::pin_current_thread(cpu);
                }
                let _ = cpu::set_timer_slack_ns(1);
                let mut stalls = Stalls::new(StallSource::Sampler);
                while !flag.load(Ordering::Relaxed) {
                    let due = now_ns() + SAMPLER_PERIOD.as_nanos() as u64;
                    std::thread::sleep(SAMPLER_PERIOD);
                    stalls.record(now_ns().saturating_sub(due));
                }
                stalls.observed(now_ns().saturating_sub(start));
                stalls
            })?;
        Ok(StallSampler {
            stop,
            thread: Some(thread),
        })
    }

    /// Stops sampling: the stalls it saw.
    pub fn finish(mut self) -> Stalls {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|t| t.join().ok())
            .unwrap_or_else(|| Stalls::new(StallSource::Sampler))
    }
}

impl Drop for StallSampler {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_kept_from_its_turns_records_the_gap_and_not_its_sleeps() {
        let mut w = StallWatch::new(1_000);
        w.tick(1_500);
        w.tick(2_000);
        // 5 ms without a turn: a stall.
        w.tick(5_002_000);
        // A 10 ms sleep that woke 30 µs late: the lateness only.
        w.woke(15_032_000, 15_002_000);
        // A wait a frame ended: nothing.
        w.resumed(40_000_000);
        w.tick(40_000_400);
        let r = w.finish(41_000_000).report();
        assert_eq!((r.over_10us, r.over_1ms), (2, 1));
        assert!(
            r.longest_ns.abs_diff(5_000_000) <= 50_000,
            "{}",
            r.longest_ns
        );
        assert!((r.observed_s - 0.040_999).abs() < 1e-6, "{}", r.observed_s);
    }

    #[test]
    fn the_sampler_watches_until_finished() {
        let sampler = StallSampler::start(None).expect("a thread starts");
        std::thread::sleep(Duration::from_millis(20));
        let stalls = sampler.finish();
        let r = stalls.report();
        assert_eq!(r.source, StallSource::Sampler);
        assert!(r.observed_s >= 0.019, "{}", r.observed_s);
        // Whatever the host did, each stall counted is one wake-up at least 10 µs late.
        assert_eq!(
            r.histogram.iter().map(|b| b.count).sum::<u64>(),
            r.over_10us
        );
    }
}
