//! How a spinning emulator notices that something else competes for its CPU: from its own
//! release errors, a window at a time.
//!
//! A spinning emulator alone on its CPU releases its frames within a few microseconds of
//! their due time; one that shares its CPU is preempted for whole scheduler slices, and the
//! tail of its release errors goes to hundreds of microseconds. [`ContentionWatch`] is fed
//! the release errors of each window (the differences of the engine's cumulative histograms
//! between two snapshots, a second apart) and finds contention once: two windows in a row whose
//! p99 is above [`P99_LIMIT_NS`] over at least [`MIN_RELEASES`] releases each (one late second
//! alone is a transient: the first frames of a run, a page fault). Sans-IO: the caller reads
//! the snapshots and the clock.

use std::time::Duration;

use latlab_stats::LatencyHistogram;
use serde::{Deserialize, Serialize};

/// The p99 release error of a window above which a spinning emulator is running late.
pub const P99_LIMIT_NS: u64 = 50_000;

/// Releases a window needs before its p99 says anything.
pub const MIN_RELEASES: u64 = 100;

/// What the emulator found once: when, on which CPU, and how late it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Contention {
    /// The CPU the emulator spun on, when pinned.
    pub cpu: Option<usize>,
    /// Seconds into the run when the window ended.
    pub after_s: f64,
    /// The window's median release error, ns.
    pub p50_ns: u64,
    /// The window's p99 release error, ns.
    pub p99_ns: u64,
    /// Frames released in the window.
    pub releases: u64,
    /// The notice, as shown live.
    pub note: String,
}

/// Finds contention in the release errors of successive windows, and reports it once.
#[derive(Debug)]
pub struct ContentionWatch {
    cpu: Option<usize>,
    /// The cumulative histogram of the last snapshot.
    last: Option<LatencyHistogram>,
    /// Whether the last window ran late.
    late_before: bool,
    found: Vec<Contention>,
}

impl ContentionWatch {
    /// A watch of an emulator spinning on `cpu`.
    pub fn new(cpu: Option<usize>) -> ContentionWatch {
        ContentionWatch {
            cpu,
            last: None,
            late_before: false,
            found: Vec::new(),
        }
    }

    /// Takes the engine's cumulative release errors at `after` into the run; the window is
    /// what they gained since the last call. Returns the notice when this window is the first
    /// that runs late.
    pub fn handle_cumulative(
        &mut self,
        after: Duration,
        cumulative: &LatencyHistogram,
    ) -> Option<&Contention> {
        let window = match &self.last {
            Some(last) => {
                let mut w = cumulative.as_hdr().clone();
                // The counts only grow; a histogram that shrank (a new run) starts a window.
                if w.subtract(last.as_hdr()).is_err() {
                    w = cumulative.as_hdr().clone();
                }
                LatencyHistogram::from_hdr(w)
            }
            None => cumulative.clone(),
        };
        self.last = Some(cumulative.clone());
        self.handle_window(after, &window)
    }

    /// Takes the release errors of one window ending `after` into the run. Returns the notice
    /// when this window is the second in a row that runs late, the first time.
    pub fn handle_window(
        &mut self,
        after: Duration,
        window: &LatencyHistogram,
    ) -> Option<&Contention> {
        let rank = |q: f64| window.value_at_rank(((window.len() as f64) * q).ceil() as u64);
        let p99 = rank(0.99).unwrap_or(0);
        let late = window.len() >= MIN_RELEASES && p99 > P99_LIMIT_NS;
        let noticed = late && self.late_before && self.found.is_empty();
        self.late_before = late;
        if !noticed {
            return None;
        }
        let p50 = rank(0.5).unwrap_or(0);
        let on = self
            .cpu
            .map_or_else(|| "its CPU".to_string(), |c| format!("CPU {c}"));
        let note = format!(
            "{}: the emulator is running late (p99 release error {:.0} µs, median {:.1} µs, \
             over the last second): something else competes for {on}",
            self.cpu
                .map_or_else(|| "emulator".to_string(), |c| format!("CPU {c}")),
            p99 as f64 / 1000.0,
            p50 as f64 / 1000.0,
        );
        self.found.push(Contention {
            cpu: self.cpu,
            after_s: after.as_secs_f64(),
            p50_ns: p50,
            p99_ns: p99,
            releases: window.len(),
            note,
        });
        self.found.last()
    }

    /// What was found (one entry at most; empty when the emulator ran on time).
    pub fn found(&self) -> &[Contention] {
        &self.found
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` release errors: most at `typical` ns, the last `late` of them at `tail` ns.
    fn window(n: u64, typical: u64, late: u64, tail: u64) -> LatencyHistogram {
        let mut h = LatencyHistogram::new();
        h.record_n(typical, n - late);
        h.record_n(tail, late);
        h
    }

    #[test]
    fn an_emulator_on_time_finds_nothing() {
        let mut watch = ContentionWatch::new(Some(1));
        for s in 1..=5 {
            // 40k releases a second at 2 µs, 0.5% at 30 µs: a p99 of 2 µs.
            let w = window(40_000, 2_000, 200, 30_000);
            assert!(watch.handle_window(Duration::from_secs(s), &w).is_none());
        }
        // A tail of 0.5% at 4 ms stays above p99: still on time.
        let w = window(40_000, 2_000, 200, 4_000_000);
        assert!(watch.handle_window(Duration::from_secs(6), &w).is_none());
        assert!(watch.found().is_empty());
    }

    #[test]
    fn a_late_window_is_noticed_once_naming_the_cpu_and_how_late() {
        let mut watch = ContentionWatch::new(Some(1));
        assert!(watch
            .handle_window(Duration::from_secs(1), &window(20_000, 2_000, 100, 20_000))
            .is_none());
        // 3% of the releases 1.5 ms late: another thread has the CPU for whole slices. One
        // such second is a transient; the second in a row is noticed.
        let late = window(20_000, 3_000, 600, 1_500_000);
        assert!(watch.handle_window(Duration::from_secs(2), &late).is_none());
        assert!(watch
            .handle_window(Duration::from_secs(3), &window(20_000, 2_000, 0, 0))
            .is_none());
        assert!(watch.handle_window(Duration::from_secs(4), &late).is_none());
        let found = watch
            .handle_window(Duration::from_secs(5), &late)
            .expect("noticed")
            .clone();
        assert_eq!(found.cpu, Some(1));
        assert_eq!(found.releases, 20_000);
        assert!(found.p99_ns >= 1_400_000, "{found:?}");
        assert!((2_900..=3_100).contains(&found.p50_ns), "{found:?}");
        assert!(
            found
                .note
                .starts_with("CPU 1: the emulator is running late (p99 release error 15"),
            "{}",
            found.note
        );
        assert!(found.note.ends_with("something else competes for CPU 1"));
        // Said once: later late windows add nothing.
        assert!(watch.handle_window(Duration::from_secs(3), &late).is_none());
        assert_eq!(watch.found().len(), 1);
    }

    #[test]
    fn a_window_with_few_releases_says_nothing() {
        let mut watch = ContentionWatch::new(None);
        let few = window(MIN_RELEASES - 1, 500_000, 10, 900_000);
        for s in 1..=3 {
            assert!(watch.handle_window(Duration::from_secs(s), &few).is_none());
        }
    }

    #[test]
    fn windows_are_the_differences_of_cumulative_histograms() {
        let mut watch = ContentionWatch::new(Some(0));
        let mut total = window(100_000, 2_000, 500, 10_000);
        assert!(watch
            .handle_cumulative(Duration::from_secs(1), &total)
            .is_none());
        // The next two seconds are late on their own, though the whole run's p99 is not.
        for s in [2, 3] {
            total.record_n(2_000, 900);
            total.record_n(900_000, 100);
            assert!(total.value_at_rank(total.len() * 99 / 100).unwrap() < P99_LIMIT_NS);
            if s == 2 {
                assert!(watch
                    .handle_cumulative(Duration::from_secs(s), &total)
                    .is_none());
            }
        }
        let found = watch
            .handle_cumulative(Duration::from_secs(3), &total)
            .expect("the windows' own p99");
        assert_eq!(found.releases, 1_000);
        assert!(found.p99_ns >= 890_000, "{found:?}");
    }
}
