//! RFC 2544 26.1 throughput: the highest offered rate at which the device under test loses no
//! frame (NDR), and the highest at which it loses at most a tolerance (PDR, 0.5% by default),
//! each by binary search over trials of a fixed duration.
//!
//! The NDR search runs first. Its trials already say something about the PDR: every rate whose
//! loss was within the PDR tolerance passes for the PDR too, and every rate above it failed.
//! The PDR search starts from those bounds (so PDR ≥ NDR by construction) and narrows the rest.
//!
//! Call order: [`Throughput::poll_trial`] names the next rate; the caller runs a trial at it
//! for its duration and hands the counts to [`Throughput::handle_trial`]; repeat until
//! `poll_trial` returns `None`, then read [`Throughput::outcome`]. A trial with nothing back
//! ends the search with [`SearchError::DutSilent`], which keeps the points measured.

use serde::Serialize;

use crate::bisect::{Bisection, Next};
use crate::trial::{check_counts, out_of_range, ConfigError, SearchError, TrialCounts, TrialPoint};

/// RFC 2544's partial drop rate tolerance as the issue asks for it: 0.5% of frames.
pub const PDR_LOSS: f64 = 0.005;

/// How the throughput search runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ThroughputConfig {
    /// Lowest rate tried, frames per second (≥ 1).
    pub min_rate_pps: u64,
    /// Highest rate tried (the first trial), frames per second: the medium's maximum or what
    /// the traffic source reaches.
    pub max_rate_pps: u64,
    /// The search stops when the interval left is at most this wide, frames per second (≥ 1).
    pub resolution_pps: u64,
    /// Loss tolerated for the PDR, a fraction in `0..1`.
    pub pdr_loss: f64,
    /// Trials per search at most (NDR and PDR each); a search stopped by it reports the
    /// highest passing rate found and `converged: false`.
    pub max_trials: usize,
}

impl ThroughputConfig {
    /// Checks every field; errors name the field.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.min_rate_pps == 0 {
            return Err(out_of_range("min_rate_pps", "must be at least 1"));
        }
        if self.max_rate_pps < self.min_rate_pps {
            return Err(out_of_range(
                "max_rate_pps",
                format!(
                    "{} is below min_rate_pps {}",
                    self.max_rate_pps, self.min_rate_pps
                ),
            ));
        }
        if self.resolution_pps == 0 {
            return Err(out_of_range("resolution_pps", "must be at least 1"));
        }
        if !(0.0..1.0).contains(&self.pdr_loss) {
            return Err(out_of_range("pdr_loss", "must be in 0..1"));
        }
        if self.max_trials == 0 {
            return Err(out_of_range("max_trials", "must be at least 1"));
        }
        Ok(())
    }
}

/// One search's result.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SearchResult {
    /// The highest rate that passed, frames per second; `None` when even the minimum failed.
    pub rate_pps: Option<u64>,
    /// Whether the interval narrowed to the resolution (false: stopped by `max_trials`).
    pub converged: bool,
    /// Trials this search ran.
    pub trials: usize,
}

/// The throughput figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThroughputOutcome {
    /// No drop rate (no frame lost).
    pub ndr: SearchResult,
    /// Partial drop rate (at most `pdr_loss` lost).
    pub pdr: SearchResult,
    /// Every trial, in the order run.
    pub points: Vec<TrialPoint>,
}

/// Which search is running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Ndr,
    Pdr,
    Done,
}

/// The NDR and PDR searches, one after the other.
#[derive(Clone, Debug)]
pub struct Throughput {
    config: ThroughputConfig,
    phase: Phase,
    search: Bisection,
    trials_in_phase: usize,
    ndr: Option<SearchResult>,
    pdr: Option<SearchResult>,
    points: Vec<TrialPoint>,
}

impl Throughput {
    /// A search with `config`, checked.
    pub fn new(config: ThroughputConfig) -> Result<Throughput, ConfigError> {
        config.check()?;
        Ok(Throughput {
            config,
            phase: Phase::Ndr,
            search: Self::bisection(&config),
            trials_in_phase: 0,
            ndr: None,
            pdr: None,
            points: Vec::new(),
        })
    }

    fn bisection(c: &ThroughputConfig) -> Bisection {
        Bisection::new(c.min_rate_pps, c.max_rate_pps, c.resolution_pps)
    }

    /// The rate of the next trial, frames per second; `None` when both searches are done.
    pub fn poll_trial(&mut self) -> Option<u64> {
        loop {
            if self.phase == Phase::Done {
                return None;
            }
            let next = if self.trials_in_phase >= self.config.max_trials {
                None
            } else {
                match self.search.next() {
                    Next::Try(rate) => return Some(rate),
                    Next::Done(rate) => Some(rate),
                }
            };
            self.finish_phase(next);
        }
    }

    /// Ends the running search: `done` is its result when it converged, `None` when it ran
    /// out of trials.
    fn finish_phase(&mut self, done: Option<Option<u64>>) {
        let result = SearchResult {
            rate_pps: done.unwrap_or(self.search.passed()),
            converged: done.is_some(),
            trials: self.trials_in_phase,
        };
        self.trials_in_phase = 0;
        match self.phase {
            Phase::Ndr => {
                self.ndr = Some(result);
                self.phase = Phase::Pdr;
                self.search = Self::bisection(&self.config);
                // What the NDR trials say about the PDR.
                for p in &self.points {
                    self.search
                        .record(p.value, p.loss_ratio <= self.config.pdr_loss);
                }
            }
            Phase::Pdr => {
                self.pdr = Some(result);
                self.phase = Phase::Done;
            }
            Phase::Done => {}
        }
    }

    /// The counts of the trial at `rate_pps` (the rate [`Throughput::poll_trial`] gave).
    pub fn handle_trial(&mut self, rate_pps: u64, counts: TrialCounts) -> Result<(), SearchError> {
        let (search, tolerance) = match self.phase {
            Phase::Ndr => ("ndr", 0.0),
            Phase::Pdr => ("pdr", self.config.pdr_loss),
            Phase::Done => {
                return Err(SearchError::Unexpected {
                    search: "throughput",
                    value: rate_pps,
                    expected: None,
                })
            }
        };
        let expected = match self.search.next() {
            _ if self.trials_in_phase >= self.config.max_trials => None,
            Next::Try(rate) => Some(rate),
            Next::Done(_) => None,
        };
        if expected != Some(rate_pps) {
            return Err(SearchError::Unexpected {
                search,
                value: rate_pps,
                expected,
            });
        }
        check_counts(search, rate_pps, counts, &self.points)?;
        let loss_ratio = counts.loss_ratio();
        let passed = loss_ratio <= tolerance;
        self.search.record(rate_pps, passed);
        self.trials_in_phase += 1;
        self.points.push(TrialPoint {
            search,
            value: rate_pps,
            sent: counts.sent,
            received: counts.received,
            loss_ratio,
            passed,
        });
        Ok(())
    }

    /// Every trial so far.
    pub fn points(&self) -> &[TrialPoint] {
        &self.points
    }

    /// The figures, once [`Throughput::poll_trial`] has returned `None`.
    pub fn outcome(&self) -> Option<ThroughputOutcome> {
        Some(ThroughputOutcome {
            ndr: self.ndr?,
            pdr: self.pdr?,
            points: self.points.clone(),
        })
    }
}

#[cfg(test)]
mod tests;
