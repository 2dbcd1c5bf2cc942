//! RFC 2544 26.3 frame loss rate and 26.4 back-to-back frames.
//!
//! - [`LossSweep`]: trials at 100% of the maximum rate, then 90%, 80%… down in 10% steps,
//!   until two successive trials lose no frame (the RFC's stop rule) or the 10% trial is done.
//!   Each point's loss rate is `(sent − received) × 100 / sent`.
//! - [`BackToBack`]: bursts at the maximum rate (minimum gap); the longest burst forwarded
//!   without loss, by binary search on the burst length, repeated `repeats` times (the RFC
//!   asks for 50) and averaged.
//!
//! Call order as for [`crate::throughput::Throughput`]: `poll_trial`, run it, `handle_trial`,
//! until `poll_trial` returns `None`; then `outcome`.

use serde::Serialize;

use crate::bisect::{Bisection, Next};
use crate::trial::{check_counts, out_of_range, ConfigError, SearchError, TrialCounts, TrialPoint};

/// One point of the frame loss rate sweep.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct LossPoint {
    /// Percent of the maximum rate.
    pub percent: u32,
    /// The offered rate, frames per second.
    pub rate_pps: u64,
    /// Frames sent.
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// `(sent − received) × 100 / sent`.
    pub loss_percent: f64,
}

/// The frame loss rate sweep.
#[derive(Clone, Debug)]
pub struct LossSweep {
    max_rate_pps: u64,
    next_percent: Option<u32>,
    points: Vec<LossPoint>,
}

impl LossSweep {
    /// A sweep down from `max_rate_pps` (≥ 10, so that 10% of it is a rate).
    pub fn new(max_rate_pps: u64) -> Result<LossSweep, ConfigError> {
        if max_rate_pps < 10 {
            return Err(out_of_range("max_rate_pps", "must be at least 10"));
        }
        Ok(LossSweep {
            max_rate_pps,
            next_percent: Some(100),
            points: Vec::new(),
        })
    }

    fn rate_at(&self, percent: u32) -> u64 {
        self.max_rate_pps * u64::from(percent) / 100
    }

    /// The next trial's rate, frames per second; `None` when the sweep is over.
    pub fn poll_trial(&self) -> Option<u64> {
        self.next_percent.map(|p| self.rate_at(p))
    }

    /// The counts of the trial at `rate_pps`.
    pub fn handle_trial(&mut self, rate_pps: u64, counts: TrialCounts) -> Result<(), SearchError> {
        let Some(percent) = self.next_percent.filter(|&p| self.rate_at(p) == rate_pps) else {
            return Err(SearchError::Unexpected {
                search: "loss",
                value: rate_pps,
                expected: self.poll_trial(),
            });
        };
        check_counts("loss", rate_pps, counts, &self.trial_points())?;
        self.points.push(LossPoint {
            percent,
            rate_pps,
            sent: counts.sent,
            received: counts.received,
            loss_percent: counts.loss_ratio() * 100.0,
        });
        let two_clean = self.points.len() >= 2
            && self.points[self.points.len() - 2..]
                .iter()
                .all(|p| p.received >= p.sent);
        self.next_percent = (!two_clean && percent > 10).then(|| percent - 10);
        Ok(())
    }

    /// The points so far, highest rate first.
    pub fn outcome(&self) -> &[LossPoint] {
        &self.points
    }

    /// The points as the trials of a search (for an error's record).
    fn trial_points(&self) -> Vec<TrialPoint> {
        self.points
            .iter()
            .map(|p| TrialPoint {
                search: "loss",
                value: p.rate_pps,
                sent: p.sent,
                received: p.received,
                loss_ratio: p.loss_percent / 100.0,
                passed: p.received >= p.sent,
            })
            .collect()
    }
}

/// How the back-to-back search runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BurstConfig {
    /// Shortest burst tried, frames (≥ 1).
    pub min_frames: u64,
    /// Longest burst tried (the first trial of each repeat), frames.
    pub max_frames: u64,
    /// Each search stops when the interval left is at most this many frames (≥ 1).
    pub resolution_frames: u64,
    /// Searches run and averaged (≥ 1; RFC 2544 asks for 50).
    pub repeats: u32,
}

/// The back-to-back figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BackToBackOutcome {
    /// Each search's longest burst without loss; `None` when even the shortest lost frames.
    pub bursts: Vec<Option<u64>>,
    /// The mean of the searches that found one.
    pub mean_frames: Option<f64>,
    /// Every trial, in the order run.
    pub points: Vec<TrialPoint>,
}

/// The back-to-back search.
#[derive(Clone, Debug)]
pub struct BackToBack {
    config: BurstConfig,
    search: Bisection,
    bursts: Vec<Option<u64>>,
    points: Vec<TrialPoint>,
}

impl BackToBack {
    /// A search with `config`, checked; errors name the field.
    pub fn new(config: BurstConfig) -> Result<BackToBack, ConfigError> {
        if config.min_frames == 0 {
            return Err(out_of_range("min_frames", "must be at least 1"));
        }
        if config.max_frames < config.min_frames {
            return Err(out_of_range("max_frames", "is below min_frames"));
        }
        if config.resolution_frames == 0 {
            return Err(out_of_range("resolution_frames", "must be at least 1"));
        }
        if config.repeats == 0 {
            return Err(out_of_range("repeats", "must be at least 1"));
        }
        Ok(BackToBack {
            config,
            search: Self::bisection(&config),
            bursts: Vec::new(),
            points: Vec::new(),
        })
    }

    fn bisection(c: &BurstConfig) -> Bisection {
        Bisection::new(c.min_frames, c.max_frames, c.resolution_frames)
    }

    /// The next burst's length, frames; `None` when every repeat is done.
    pub fn poll_trial(&mut self) -> Option<u64> {
        while self.bursts.len() < self.config.repeats as usize {
            match self.search.next() {
                Next::Try(frames) => return Some(frames),
                Next::Done(longest) => {
                    self.bursts.push(longest);
                    self.search = Self::bisection(&self.config);
                }
            }
        }
        None
    }

    /// The counts of the burst of `frames` frames.
    pub fn handle_trial(&mut self, frames: u64, counts: TrialCounts) -> Result<(), SearchError> {
        let expected = match self.search.next() {
            _ if self.bursts.len() >= self.config.repeats as usize => None,
            Next::Try(f) => Some(f),
            Next::Done(_) => None,
        };
        if expected != Some(frames) {
            return Err(SearchError::Unexpected {
                search: "back_to_back",
                value: frames,
                expected,
            });
        }
        check_counts("back_to_back", frames, counts, &self.points)?;
        let passed = counts.received >= counts.sent;
        self.search.record(frames, passed);
        self.points.push(TrialPoint {
            search: "back_to_back",
            value: frames,
            sent: counts.sent,
            received: counts.received,
            loss_ratio: counts.loss_ratio(),
            passed,
        });
        Ok(())
    }

    /// The figures, once [`BackToBack::poll_trial`] has returned `None`.
    pub fn outcome(&self) -> Option<BackToBackOutcome> {
        if self.bursts.len() < self.config.repeats as usize {
            return None;
        }
        let found: Vec<u64> = self.bursts.iter().flatten().copied().collect();
        Some(BackToBackOutcome {
            bursts: self.bursts.clone(),
            mean_frames: (!found.is_empty())
                .then(|| found.iter().sum::<u64>() as f64 / found.len() as f64),
            points: self.points.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loss_sweep_steps_down_by_ten_percent_until_two_trials_lose_nothing() {
        // A device that forwards 550 frames per second of 1000 offered at most.
        let mut sweep = LossSweep::new(1000).unwrap();
        while let Some(rate) = sweep.poll_trial() {
            let counts = TrialCounts {
                sent: rate,
                received: rate.min(550),
            };
            sweep.handle_trial(rate, counts).unwrap();
        }
        let pts = sweep.outcome();
        let percents: Vec<u32> = pts.iter().map(|p| p.percent).collect();
        assert_eq!(percents, [100, 90, 80, 70, 60, 50, 40]);
        assert_eq!(pts[0].loss_percent, 45.0);
        assert!((pts[4].loss_percent - 100.0 * 50.0 / 600.0).abs() < 1e-9);
        assert_eq!((pts[5].loss_percent, pts[6].loss_percent), (0.0, 0.0));
    }

    #[test]
    fn a_loss_sweep_that_always_loses_ends_at_ten_percent() {
        let mut sweep = LossSweep::new(1000).unwrap();
        while let Some(rate) = sweep.poll_trial() {
            let counts = TrialCounts {
                sent: rate,
                received: rate - 1,
            };
            sweep.handle_trial(rate, counts).unwrap();
        }
        assert_eq!(sweep.outcome().len(), 10);
        assert_eq!(sweep.outcome().last().unwrap().rate_pps, 100);
    }

    #[test]
    fn a_silent_device_ends_the_loss_sweep_and_keeps_its_points() {
        let mut sweep = LossSweep::new(1000).unwrap();
        let full = TrialCounts {
            sent: 1000,
            received: 900,
        };
        sweep.handle_trial(1000, full).unwrap();
        let e = sweep
            .handle_trial(
                900,
                TrialCounts {
                    sent: 900,
                    received: 0,
                },
            )
            .unwrap_err();
        assert_eq!(e.points().len(), 1);
        assert_eq!(sweep.poll_trial(), Some(900), "nothing was recorded for it");
    }

    /// A device that holds `buffer` frames: a burst passes if it is no longer.
    fn burst_counts(frames: u64, buffer: u64) -> TrialCounts {
        TrialCounts {
            sent: frames,
            received: frames.min(buffer),
        }
    }

    #[test]
    fn back_to_back_finds_the_buffer_within_the_resolution_on_every_repeat() {
        let config = BurstConfig {
            min_frames: 1,
            max_frames: 100_000,
            resolution_frames: 16,
            repeats: 3,
        };
        let mut b2b = BackToBack::new(config).unwrap();
        while let Some(frames) = b2b.poll_trial() {
            b2b.handle_trial(frames, burst_counts(frames, 4096))
                .unwrap();
        }
        let out = b2b.outcome().unwrap();
        assert_eq!(out.bursts.len(), 3);
        for burst in &out.bursts {
            let b = burst.unwrap();
            assert!(b <= 4096 && 4096 - b <= 16, "{b}");
        }
        assert_eq!(out.mean_frames, Some(out.bursts[0].unwrap() as f64));
    }

    #[test]
    fn a_device_that_absorbs_the_longest_burst_is_done_in_one_trial_per_repeat() {
        let config = BurstConfig {
            min_frames: 1,
            max_frames: 1000,
            resolution_frames: 1,
            repeats: 2,
        };
        let mut b2b = BackToBack::new(config).unwrap();
        while let Some(frames) = b2b.poll_trial() {
            b2b.handle_trial(frames, burst_counts(frames, 5000))
                .unwrap();
        }
        let out = b2b.outcome().unwrap();
        assert_eq!(out.bursts, [Some(1000), Some(1000)]);
        assert_eq!(out.points.len(), 2);
    }

    #[test]
    fn bad_burst_configurations_name_their_field() {
        let ok = BurstConfig {
            min_frames: 1,
            max_frames: 10,
            resolution_frames: 1,
            repeats: 1,
        };
        let bad = |c: BurstConfig| BackToBack::new(c).unwrap_err().to_string();
        assert!(bad(BurstConfig {
            min_frames: 0,
            ..ok
        })
        .starts_with("min_frames"));
        assert!(bad(BurstConfig {
            max_frames: 0,
            ..ok
        })
        .starts_with("max_frames"));
        assert!(bad(BurstConfig { repeats: 0, ..ok }).starts_with("repeats"));
        assert!(LossSweep::new(5)
            .unwrap_err()
            .to_string()
            .starts_with("max_rate_pps"));
    }
}
