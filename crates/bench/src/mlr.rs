//! MLRsearch, the Multiple Loss Ratio search of RFC 9971 (FD.io CSIT's method): every search
//! goal's throughput from one set of trials, each load judged on a sum of trial durations, not
//! on one trial.
//!
//! A [`SearchGoal`] is a loss ratio (0 for the NDR, 0.5% for the PDR), a final trial duration,
//! a duration sum, an exceed ratio and a width. A trial at a load is *high-loss* for a goal when
//! its loss ratio is above the goal's. A load is classified for each goal from the durations of
//! its trials (as CSIT's `TargetStat` does, with every trial full-length here):
//!
//! - with `good` and `bad` the low- and high-loss seconds measured at it, the duration sum that
//!   counts is `whole = max(good + bad, duration_sum)` and the seconds allowed to be high-loss
//!   `limit = whole × exceed_ratio`;
//! - **lower bound** when even the seconds still missing, taken as high-loss, stay within it
//!   (`whole − good ≤ limit`); **upper bound** when even taken as low-loss they do not
//!   (`bad > limit`); **undecided** otherwise, and the load is measured again.
//!
//! So with the CSIT defaults (1 s trials, 21 s duration sum, exceed ratio 0.5) a load needs 11
//! trials that agree, and one trial in three losing a few frames to a stall does not make a
//! lower bound an upper one, as it does in a binary search, where one trial decides. A goal's
//! **relevant upper bound** is its smallest upper bound, its **relevant lower bound** the
//! largest lower bound below it; its search ends when they are within the goal's width of each
//! other (`(upper − lower) / upper ≤ width`), or at the minimum or maximum load. Its
//! **conditional throughput** is the relevant lower bound times one less the duration-weighted
//! mean loss ratio of the low-loss trials there (as CSIT computes it).
//!
//! How the loads are chosen is left to implementations by RFC 9971; here: the maximum load
//! first, then halving the interval between a goal's relevant bounds (the minimum load standing
//! for a missing lower bound), an undecided load measured again before another is tried; goals
//! in the order given, each using every trial measured for the others. Every trial is
//! full-length (the goals' longest final trial duration); CSIT's shorter trials of the early
//! phases are not used.
//!
//! Call order, as [`crate::throughput`]: [`MlrSearch::poll_trial`] names the load and the
//! trial's duration; the caller runs it and hands the counts to [`MlrSearch::handle_trial`];
//! until `poll_trial` is `None`; then [`MlrSearch::outcome`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::trial::{check_counts, out_of_range, ConfigError, SearchError, TrialCounts, TrialPoint};

/// One search goal of RFC 9971.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct SearchGoal {
    /// The loss ratio a trial may have and be low-loss, a fraction in `0..1`.
    pub loss_ratio: f64,
    /// The duration of a full-length trial, seconds.
    pub final_trial_duration_s: f64,
    /// The duration of trials a load is judged on, seconds.
    pub duration_sum_s: f64,
    /// The fraction of that duration allowed to be high-loss, in `0..1`.
    pub exceed_ratio: f64,
    /// How close the relevant bounds must be, relative to the upper one, in `0..1`.
    pub width: f64,
}

impl SearchGoal {
    /// FD.io CSIT's NDR goal: no loss, 1 s trials, 21 s duration sum, exceed ratio 0.5,
    /// width 0.5%.
    pub const NDR: SearchGoal = SearchGoal {
        loss_ratio: 0.0,
        final_trial_duration_s: 1.0,
        duration_sum_s: 21.0,
        exceed_ratio: 0.5,
        width: 0.005,
    };

    /// FD.io CSIT's PDR goal: as [`SearchGoal::NDR`], with a loss ratio of 0.5%.
    pub const PDR: SearchGoal = SearchGoal {
        loss_ratio: 0.005,
        ..SearchGoal::NDR
    };

    /// Checks every field; errors name the field.
    pub fn check(&self) -> Result<(), ConfigError> {
        if !(0.0..1.0).contains(&self.loss_ratio) {
            return Err(out_of_range("loss_ratio", "must be in 0..1"));
        }
        if !(self.final_trial_duration_s > 0.0 && self.final_trial_duration_s.is_finite()) {
            return Err(out_of_range("final_trial_duration", "must be above 0"));
        }
        if !(self.duration_sum_s >= self.final_trial_duration_s && self.duration_sum_s.is_finite())
        {
            return Err(out_of_range(
                "duration_sum",
                "must be at least the final trial duration",
            ));
        }
        if !(0.0..1.0).contains(&self.exceed_ratio) {
            return Err(out_of_range("exceed_ratio", "must be in 0..1"));
        }
        if !(self.width > 0.0 && self.width < 1.0) {
            return Err(out_of_range("width", "must be above 0 and below 1"));
        }
        Ok(())
    }
}

/// How a load stands for one goal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// The goal holds there, whatever trials are still missing.
    LowerBound,
    /// The goal fails there, whatever trials are still missing.
    UpperBound,
    /// Not yet known: more trials are needed.
    Undecided,
}

/// The trial durations at one load for one goal.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct LoadStat {
    /// Seconds of low-loss trials.
    good: f64,
    /// Seconds of high-loss trials.
    bad: f64,
    /// Σ duration × loss ratio over the low-loss trials.
    good_loss: f64,
}

impl LoadStat {
    fn class(&self, goal: &SearchGoal) -> Class {
        let whole = (self.good + self.bad).max(goal.duration_sum_s);
        let limit = whole * goal.exceed_ratio;
        // A hair of tolerance: durations are sums of floats.
        let eps = 1e-9 * whole;
        let optimistic = self.bad <= limit + eps;
        let pessimistic = whole - self.good <= limit + eps;
        match (optimistic, pessimistic) {
            (true, true) => Class::LowerBound,
            (false, false) => Class::UpperBound,
            _ => Class::Undecided,
        }
    }
}

/// The loads and goals of a search.
#[derive(Clone, Debug, PartialEq)]
pub struct MlrConfig {
    /// Lowest load tried, frames per second (≥ 1).
    pub min_load_pps: u64,
    /// Highest load tried (the first trial), frames per second.
    pub max_load_pps: u64,
    /// The goals, searched in this order (each uses every trial).
    pub goals: Vec<SearchGoal>,
    /// Trials at most over the whole search; a search stopped by it reports what it found,
    /// unconverged.
    pub max_trials: usize,
}

impl MlrConfig {
    /// Checks every field; errors name the field.
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.min_load_pps == 0 {
            return Err(out_of_range("min_load", "must be at least 1"));
        }
        if self.max_load_pps < self.min_load_pps {
            return Err(out_of_range("max_load", "is below min_load"));
        }
        if self.goals.is_empty() {
            return Err(out_of_range("goals", "at least one"));
        }
        if self.max_trials == 0 {
            return Err(out_of_range("max_trials", "must be at least 1"));
        }
        self.goals.iter().try_for_each(SearchGoal::check)
    }

    /// The duration every trial runs for: the goals' longest final trial duration.
    pub fn trial_duration_s(&self) -> f64 {
        self.goals
            .iter()
            .map(|g| g.final_trial_duration_s)
            .fold(0.0, f64::max)
    }
}

/// One goal's result.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct GoalResult {
    /// The goal.
    pub goal: SearchGoal,
    /// The largest lower bound below the relevant upper bound, frames per second; `None` when
    /// the minimum load is an upper bound.
    pub relevant_lower_bound: Option<u64>,
    /// The smallest upper bound; `None` when the maximum load is a lower bound.
    pub relevant_upper_bound: Option<u64>,
    /// The relevant lower bound less its low-loss trials' mean loss, frames per second.
    pub conditional_throughput: Option<f64>,
    /// Whether the bounds narrowed to the goal's width (or met the minimum or maximum load);
    /// false when the trial limit stopped the search first.
    pub converged: bool,
}

/// What a search found.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MlrOutcome {
    /// Each goal's result, in the order given.
    pub goals: Vec<GoalResult>,
    /// Every trial, in the order run (`search: "mlr"`; `passed`: low-loss for the first goal).
    pub points: Vec<TrialPoint>,
    /// The seconds of trials the search ran.
    pub trial_time_s: f64,
}

/// The search's state.
#[derive(Clone, Debug)]
pub struct MlrSearch {
    config: MlrConfig,
    /// Per load, per goal.
    loads: BTreeMap<u64, Vec<LoadStat>>,
    /// Loads in the order they were last measured.
    last: Vec<u64>,
    points: Vec<TrialPoint>,
    trial_time_s: f64,
}

/// What one goal needs next.
enum Need {
    Trial(u64),
    Done(GoalResult),
}

impl MlrSearch {
    /// A search with `config`, checked.
    pub fn new(config: MlrConfig) -> Result<MlrSearch, ConfigError> {
        config.check()?;
        Ok(MlrSearch {
            config,
            loads: BTreeMap::new(),
            last: Vec::new(),
            points: Vec::new(),
            trial_time_s: 0.0,
        })
    }

    /// The next trial: its load (frames per second) and duration (seconds); `None` when every
    /// goal is done or the trial limit is reached.
    pub fn poll_trial(&self) -> Option<(u64, f64)> {
        if self.points.len() >= self.config.max_trials {
            return None;
        }
        (0..self.config.goals.len()).find_map(|g| match self.need(g) {
            Need::Trial(load) => Some((load, self.config.trial_duration_s())),
            Need::Done(_) => None,
        })
    }

    /// The counts of the trial at `load_pps` that [`MlrSearch::poll_trial`] asked for.
    pub fn handle_trial(&mut self, load_pps: u64, counts: TrialCounts) -> Result<(), SearchError> {
        let expected = self.poll_trial().map(|(load, _)| load);
        if expected != Some(load_pps) {
            return Err(SearchError::Unexpected {
                search: "mlr",
                value: load_pps,
                expected,
            });
        }
        check_counts("mlr", load_pps, counts, &self.points)?;
        let loss = counts.loss_ratio();
        let duration = self.config.trial_duration_s();
        let goals = self.config.goals.clone();
        let stats = self
            .loads
            .entry(load_pps)
            .or_insert_with(|| vec![LoadStat::default(); goals.len()]);
        for (stat, goal) in stats.iter_mut().zip(&goals) {
            if loss <= goal.loss_ratio {
                stat.good += duration;
                stat.good_loss += duration * loss;
            } else {
                stat.bad += duration;
            }
        }
        self.last.retain(|&l| l != load_pps);
        self.last.push(load_pps);
        self.trial_time_s += duration;
        self.points.push(TrialPoint {
            search: "mlr",
            value: load_pps,
            sent: counts.sent,
            received: counts.received,
            loss_ratio: loss,
            passed: loss <= goals[0].loss_ratio,
        });
        Ok(())
    }

    /// Each goal's result as the trials stand (converged once `poll_trial` is `None` by
    /// the goals, not by the trial limit), and the trial record.
    pub fn outcome(&self) -> MlrOutcome {
        let goals = (0..self.config.goals.len())
            .map(|g| match self.need(g) {
                Need::Done(result) => result,
                Need::Trial(_) => {
                    let (lower, upper) = self.bounds(g);
                    self.result(g, lower, upper, false)
                }
            })
            .collect();
        MlrOutcome {
            goals,
            points: self.points.clone(),
            trial_time_s: self.trial_time_s,
        }
    }

    /// How `load` stands for goal `g`.
    pub fn class(&self, load: u64, g: usize) -> Class {
        match self.loads.get(&load) {
            Some(stats) => stats[g].class(&self.config.goals[g]),
            None => Class::Undecided,
        }
    }

    /// Goal `g`'s relevant lower and upper bounds.
    fn bounds(&self, g: usize) -> (Option<u64>, Option<u64>) {
        let upper = self
            .loads
            .keys()
            .copied()
            .find(|&l| self.class(l, g) == Class::UpperBound);
        let lower = self
            .loads
            .keys()
            .rev()
            .copied()
            .filter(|&l| upper.is_none_or(|u| l < u))
            .find(|&l| self.class(l, g) == Class::LowerBound);
        (lower, upper)
    }

    fn need(&self, g: usize) -> Need {
        let (min, max) = (self.config.min_load_pps, self.config.max_load_pps);
        let goal = self.config.goals[g];
        let (lower, upper) = self.bounds(g);
        // A load still undecided between the bounds is measured again, the latest first.
        let inside = |l: u64| lower.is_none_or(|lo| l > lo) && upper.is_none_or(|up| l < up);
        if let Some(&l) = self
            .last
            .iter()
            .rev()
            .find(|&&l| inside(l) && self.class(l, g) == Class::Undecided)
        {
            return Need::Trial(l);
        }
        let done = |lower, upper| Need::Done(self.result(g, lower, upper, true));
        let Some(up) = upper else {
            return match lower {
                // The maximum load is a lower bound.
                Some(lo) if lo == max => done(lower, None),
                _ => Need::Trial(max),
            };
        };
        if up == min {
            return done(None, upper);
        }
        let lo = lower.unwrap_or(min);
        let narrow = (up - lo) as f64 <= goal.width * up as f64;
        if narrow {
            return match lower {
                Some(_) => done(lower, upper),
                // The minimum load stands for the lower bound: measure it.
                None => Need::Trial(min),
            };
        }
        let mid = lo + (up - lo) / 2;
        if mid == lo || mid == up {
            return match lower {
                Some(_) => done(lower, upper),
                None => Need::Trial(min),
            };
        }
        Need::Trial(mid)
    }

    fn result(
        &self,
        g: usize,
        lower: Option<u64>,
        upper: Option<u64>,
        converged: bool,
    ) -> GoalResult {
        let conditional_throughput = lower.and_then(|l| {
            let stat = self.loads.get(&l)?[g];
            (stat.good > 0.0).then(|| l as f64 * (1.0 - stat.good_loss / stat.good))
        });
        GoalResult {
            goal: self.config.goals[g],
            relevant_lower_bound: lower,
            relevant_upper_bound: upper,
            conditional_throughput,
            converged,
        }
    }
}

#[cfg(test)]
mod tests;
