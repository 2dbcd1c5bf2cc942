//! The throughput search against virtual devices of known capacity.

use super::*;

/// Trials last this long, seconds.
const TRIAL_S: u64 = 2;

/// A device that forwards up to `capacity_pps` and loses what is offered beyond it, and
/// below it loses `base_loss` of its frames once the offered rate passes `lossy_from_pps`.
#[derive(Clone, Copy)]
struct VirtualDut {
    capacity_pps: u64,
    lossy_from_pps: u64,
    base_loss: f64,
}

impl VirtualDut {
    fn clean(capacity_pps: u64) -> VirtualDut {
        VirtualDut {
            capacity_pps,
            lossy_from_pps: u64::MAX,
            base_loss: 0.0,
        }
    }

    fn trial(&self, rate_pps: u64) -> TrialCounts {
        let sent = rate_pps * TRIAL_S;
        let mut received = sent.min(self.capacity_pps * TRIAL_S);
        if rate_pps > self.lossy_from_pps {
            received -= (received as f64 * self.base_loss).ceil() as u64;
        }
        TrialCounts { sent, received }
    }
}

fn config() -> ThroughputConfig {
    ThroughputConfig {
        min_rate_pps: 1_000,
        max_rate_pps: 1_000_000,
        resolution_pps: 5_000,
        pdr_loss: PDR_LOSS,
        max_trials: 40,
    }
}

/// Runs the whole search against `dut`.
fn run(config: ThroughputConfig, dut: VirtualDut) -> ThroughputOutcome {
    let mut search = Throughput::new(config).unwrap();
    while let Some(rate) = search.poll_trial() {
        search.handle_trial(rate, dut.trial(rate)).unwrap();
    }
    search.outcome().unwrap()
}

#[test]
fn the_ndr_of_a_device_with_a_known_capacity_is_found_within_one_trial_step() {
    for capacity in [1_000, 123_456, 400_000, 999_999] {
        let out = run(config(), VirtualDut::clean(capacity));
        let ndr = out.ndr.rate_pps.unwrap();
        assert!(
            ndr <= capacity && capacity - ndr <= config().resolution_pps,
            "capacity {capacity}: ndr {ndr}"
        );
        assert!(out.ndr.converged);
        // Every trial above the capacity lost frames, every one at or below it none.
        for p in &out.points {
            assert_eq!(p.passed, p.value <= capacity || p.search == "pdr", "{p:?}");
        }
    }
}

#[test]
fn a_device_faster_than_the_maximum_passes_the_first_trial_at_the_maximum() {
    let out = run(config(), VirtualDut::clean(5_000_000));
    assert_eq!(out.ndr.rate_pps, Some(1_000_000));
    assert_eq!(out.pdr.rate_pps, Some(1_000_000));
    assert_eq!(out.points.len(), 1, "the PDR needs no trial of its own");
}

#[test]
fn the_pdr_is_at_least_the_ndr_and_tolerates_half_a_percent() {
    // Loses 0.2% from 300 kpps on, and everything above 600 kpps: NDR ≈ 300k, PDR ≈ 600k.
    let dut = VirtualDut {
        capacity_pps: 600_000,
        lossy_from_pps: 300_000,
        base_loss: 0.002,
    };
    let out = run(config(), dut);
    let (ndr, pdr) = (out.ndr.rate_pps.unwrap(), out.pdr.rate_pps.unwrap());
    assert!((295_000..=300_000).contains(&ndr), "ndr {ndr}");
    // Just above 600k the loss is the overflow plus 0.2%: over the tolerance within a step.
    assert!((595_000..=600_000).contains(&pdr), "pdr {pdr}");
    assert!(pdr >= ndr);
    assert!(out.points.iter().any(|p| p.search == "pdr"));
}

#[test]
fn a_device_whose_loss_is_never_zero_has_no_ndr_but_a_pdr() {
    let dut = VirtualDut {
        capacity_pps: 200_000,
        lossy_from_pps: 0,
        base_loss: 0.001,
    };
    let out = run(config(), dut);
    assert_eq!(out.ndr.rate_pps, None);
    // Loss reaches 0.5% where 200k × (1 − 0.1%) is 99.5% of the offered rate: 200 804.
    let pdr = out.pdr.rate_pps.unwrap();
    assert!((195_804..=200_804).contains(&pdr), "pdr {pdr}");
}

#[test]
fn a_device_that_stops_answering_ends_the_search_with_the_points_measured_so_far() {
    let dut = VirtualDut::clean(300_000);
    let mut search = Throughput::new(config()).unwrap();
    let mut trials = 0;
    let error = loop {
        let rate = search
            .poll_trial()
            .expect("the search ends with the error first");
        // The device dies after its fourth trial.
        let counts = if trials < 4 {
            dut.trial(rate)
        } else {
            TrialCounts {
                sent: rate * TRIAL_S,
                received: 0,
            }
        };
        trials += 1;
        if let Err(e) = search.handle_trial(rate, counts) {
            break e;
        }
    };
    assert!(matches!(error, SearchError::DutSilent { .. }), "{error:?}");
    assert_eq!(error.points().len(), 4);
    assert_eq!(error.points(), search.points());
    assert!(error.to_string().contains("stopped answering"), "{error}");
    assert!(search.outcome().is_none());
}

#[test]
fn a_trial_the_search_did_not_ask_for_is_refused() {
    let mut search = Throughput::new(config()).unwrap();
    let rate = search.poll_trial().unwrap();
    let e = search
        .handle_trial(rate / 2, VirtualDut::clean(1).trial(rate / 2))
        .unwrap_err();
    assert!(matches!(e, SearchError::Unexpected { expected: Some(r), .. } if r == rate));
    assert!(search.points().is_empty());
}

#[test]
fn the_trial_limit_stops_a_search_with_the_best_rate_found_and_says_so() {
    let out = run(
        ThroughputConfig {
            max_trials: 3,
            resolution_pps: 1,
            ..config()
        },
        VirtualDut::clean(123_456),
    );
    assert!(!out.ndr.converged);
    assert_eq!(out.ndr.trials, 3);
    // 1M fails, 500.5k fails, 250.75k fails: nothing passed yet.
    assert_eq!(out.ndr.rate_pps, None);
}

#[test]
fn a_configuration_out_of_range_names_its_field() {
    let bad = |c: ThroughputConfig| Throughput::new(c).unwrap_err().to_string();
    assert!(bad(ThroughputConfig {
        min_rate_pps: 0,
        ..config()
    })
    .starts_with("min_rate_pps"));
    assert!(bad(ThroughputConfig {
        max_rate_pps: 10,
        ..config()
    })
    .starts_with("max_rate_pps"));
    assert!(bad(ThroughputConfig {
        resolution_pps: 0,
        ..config()
    })
    .starts_with("resolution_pps"));
    assert!(bad(ThroughputConfig {
        pdr_loss: 1.0,
        ..config()
    })
    .starts_with("pdr_loss"));
    assert!(bad(ThroughputConfig {
        max_trials: 0,
        ..config()
    })
    .starts_with("max_trials"));
}
