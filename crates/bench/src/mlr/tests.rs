use super::*;
use crate::throughput::{Throughput, ThroughputConfig, PDR_LOSS};

/// A device under test in virtual time: it forwards at most `capacity` frames per second, and
/// in a fraction `stall` of trials (drawn from `seed`) loses `stall_frames` more, whatever the
/// load: a guest that is descheduled now and then.
struct VirtualDut {
    capacity: u64,
    stall: f64,
    stall_frames: u64,
    state: u64,
}

impl VirtualDut {
    fn new(capacity: u64, stall: f64, stall_frames: u64, seed: u64) -> VirtualDut {
        VirtualDut {
            capacity,
            stall,
            stall_frames,
            state: seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1,
        }
    }

    fn uniform(&mut self) -> f64 {
        // xorshift64*
        self.state ^= self.state >> 12;
        self.state ^= self.state << 25;
        self.state ^= self.state >> 27;
        (self.state.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 11) as f64 / (1u64 << 53) as f64
    }

    /// One trial of `seconds` at `load` frames per second.
    fn trial(&mut self, load: u64, seconds: f64) -> TrialCounts {
        let sent = (load as f64 * seconds) as u64;
        let mut received = sent.min((self.capacity as f64 * seconds) as u64);
        if self.uniform() < self.stall {
            received = received.saturating_sub(self.stall_frames);
        }
        TrialCounts { sent, received }
    }
}

fn config(goals: Vec<SearchGoal>) -> MlrConfig {
    MlrConfig {
        min_load_pps: 10_000,
        max_load_pps: 1_000_000,
        goals,
        max_trials: 2_000,
    }
}

fn mlr(dut: &mut VirtualDut, config: MlrConfig) -> MlrOutcome {
    let mut search = MlrSearch::new(config).unwrap();
    while let Some((load, seconds)) = search.poll_trial() {
        search.handle_trial(load, dut.trial(load, seconds)).unwrap();
    }
    search.outcome()
}

fn binary(dut: &mut VirtualDut) -> (Option<u64>, usize) {
    let mut search = Throughput::new(ThroughputConfig {
        min_rate_pps: 10_000,
        max_rate_pps: 1_000_000,
        resolution_pps: 5_000,
        pdr_loss: PDR_LOSS,
        max_trials: 30,
    })
    .unwrap();
    while let Some(rate) = search.poll_trial() {
        search.handle_trial(rate, dut.trial(rate, 1.0)).unwrap();
    }
    let outcome = search.outcome().unwrap();
    (outcome.ndr.rate_pps, outcome.points.len())
}

#[test]
fn a_load_is_classified_from_the_durations_of_its_trials() {
    let goal = SearchGoal::NDR;
    let stat = |good: f64, bad: f64| LoadStat {
        good,
        bad,
        good_loss: 0.0,
    };
    assert_eq!(stat(11.0, 0.0).class(&goal), Class::LowerBound);
    assert_eq!(stat(10.0, 0.0).class(&goal), Class::Undecided);
    assert_eq!(stat(0.0, 11.0).class(&goal), Class::UpperBound);
    assert_eq!(stat(10.0, 10.0).class(&goal), Class::Undecided);
    // Past the duration sum the whole measured time counts: 10.5 of 21 may be high-loss.
    assert_eq!(stat(11.0, 10.0).class(&goal), Class::LowerBound);
    assert_eq!(stat(10.0, 11.0).class(&goal), Class::UpperBound);
    // Exceed ratio 0: one high-loss second is an upper bound, and 21 low-loss ones are needed.
    let strict = SearchGoal {
        exceed_ratio: 0.0,
        ..goal
    };
    assert_eq!(stat(20.0, 1.0).class(&strict), Class::UpperBound);
    assert_eq!(stat(20.0, 0.0).class(&strict), Class::Undecided);
    assert_eq!(stat(21.0, 0.0).class(&strict), Class::LowerBound);
}

#[test]
fn on_a_clean_device_the_bounds_close_around_its_capacity_for_each_goal() {
    let capacity = 412_345;
    let mut dut = VirtualDut::new(capacity, 0.0, 0, 1);
    let out = mlr(&mut dut, config(vec![SearchGoal::NDR, SearchGoal::PDR]));
    let ndr = out.goals[0];
    let (lo, up) = (
        ndr.relevant_lower_bound.unwrap(),
        ndr.relevant_upper_bound.unwrap(),
    );
    assert!(ndr.converged);
    assert!(lo <= capacity && up > capacity, "{lo} {up}");
    assert!((up - lo) as f64 <= 0.005 * up as f64, "{lo} {up}");
    assert_eq!(
        ndr.conditional_throughput,
        Some(lo as f64),
        "no loss at the NDR"
    );
    // The PDR tolerates 0.5%: its bound is up to capacity / 0.995.
    let pdr = out.goals[1];
    let pdr_lo = pdr.relevant_lower_bound.unwrap();
    assert!(
        pdr_lo >= lo && pdr_lo as f64 <= capacity as f64 / 0.995,
        "{pdr_lo}"
    );
    assert!(pdr.conditional_throughput.unwrap() <= pdr_lo as f64);
    // Every load was judged on 11 agreeing 1-s trials: the search's cost.
    assert_eq!(out.trial_time_s, out.points.len() as f64);
    assert_eq!(out.points.len() % 11, 0, "{} trials", out.points.len());
}

#[test]
fn sporadic_stalls_mislead_a_binary_search_and_not_mlrsearch() {
    // A stall loses 20 frames (0.005% at 400k: under the PDR's 0.5%, over the NDR's 0) in a
    // quarter of the trials, at any load. A binary search takes the first stalled trial as a
    // failure and searches below it from then on; MLRsearch, allowed half the
    // duration sum high-loss, does not.
    let capacity = 400_000;
    let (mut misled, mut trials_binary, mut trials_mlr) = (0, 0, 0);
    for seed in 1..=20 {
        let mut dut = VirtualDut::new(capacity, 0.25, 20, seed);
        let out = mlr(&mut dut, config(vec![SearchGoal::NDR]));
        let lo = out.goals[0].relevant_lower_bound.unwrap();
        assert!(
            lo as f64 >= 0.99 * capacity as f64 && lo <= capacity,
            "seed {seed}: MLRsearch's NDR {lo}"
        );
        trials_mlr += out.points.len();
        let mut dut = VirtualDut::new(capacity, 0.25, 20, seed);
        let (ndr, trials) = binary(&mut dut);
        trials_binary += trials;
        if ndr.unwrap_or(0) < (0.98 * capacity as f64) as u64 {
            misled += 1;
        }
    }
    // Below 98% of the capacity in 8 of these 20 seeds; MLRsearch in none.
    assert!(misled >= 5, "binary search misled in {misled} of 20");
    // What it costs: about ten times the trials.
    assert!(
        trials_mlr > 5 * trials_binary,
        "{trials_mlr} vs {trials_binary}"
    );
}

#[test]
fn a_device_that_fails_at_the_minimum_has_no_lower_bound() {
    let mut dut = VirtualDut::new(5_000, 0.0, 0, 1);
    let out = mlr(&mut dut, config(vec![SearchGoal::NDR]));
    let g = out.goals[0];
    assert_eq!(g.relevant_upper_bound, Some(10_000));
    assert_eq!(
        (g.relevant_lower_bound, g.conditional_throughput),
        (None, None)
    );
    assert!(g.converged);
    // And one that keeps up with the maximum has no upper bound.
    let mut dut = VirtualDut::new(2_000_000, 0.0, 0, 1);
    let out = mlr(&mut dut, config(vec![SearchGoal::NDR]));
    assert_eq!(out.goals[0].relevant_lower_bound, Some(1_000_000));
    assert_eq!(out.goals[0].relevant_upper_bound, None);
    assert_eq!(out.points.len(), 11);
}

#[test]
fn the_trial_limit_stops_the_search_unconverged_and_a_trial_not_asked_for_is_refused() {
    let mut dut = VirtualDut::new(300_000, 0.0, 0, 1);
    let mut search = MlrSearch::new(MlrConfig {
        max_trials: 15,
        ..config(vec![SearchGoal::NDR])
    })
    .unwrap();
    assert!(matches!(
        search.handle_trial(
            5,
            TrialCounts {
                sent: 5,
                received: 5
            }
        ),
        Err(SearchError::Unexpected {
            value: 5,
            expected: Some(1_000_000),
            ..
        })
    ));
    while let Some((load, seconds)) = search.poll_trial() {
        search.handle_trial(load, dut.trial(load, seconds)).unwrap();
    }
    let out = search.outcome();
    assert_eq!(out.points.len(), 15);
    assert!(!out.goals[0].converged);
}

#[test]
fn goals_that_cannot_be_searched_name_their_field() {
    let bad = |goal: SearchGoal| MlrSearch::new(config(vec![goal])).unwrap_err().to_string();
    for (goal, field) in [
        (
            SearchGoal {
                loss_ratio: 1.0,
                ..SearchGoal::NDR
            },
            "loss_ratio",
        ),
        (
            SearchGoal {
                exceed_ratio: 1.0,
                ..SearchGoal::NDR
            },
            "exceed_ratio",
        ),
        (
            SearchGoal {
                width: 0.0,
                ..SearchGoal::NDR
            },
            "width",
        ),
        (
            SearchGoal {
                duration_sum_s: 0.5,
                ..SearchGoal::NDR
            },
            "duration_sum",
        ),
        (
            SearchGoal {
                final_trial_duration_s: 0.0,
                ..SearchGoal::NDR
            },
            "final_trial_duration",
        ),
    ] {
        assert!(bad(goal).starts_with(field), "{}", bad(goal));
    }
}
