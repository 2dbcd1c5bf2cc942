//! The link's random knobs against their definitions, over many frames with fixed seeds.
//!
//! Each check is a 99.9% confidence bound (z = 3.29) around the value the definition gives,
//! so a correct model fails one check in a thousand seeds; the seeds are fixed, so the
//! outcome is the same on every run. Where frames are correlated (the Markov loss models),
//! the standard error comes from batch means rather than the binomial formula.

use latlab_link::{DropCause, Fate, JitterDist, Link, LinkConfig, LossModel, Reorder};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

/// z of a two-sided 99.9% confidence bound.
const Z: f64 = 3.29;
const MS: u64 = 1_000_000;

/// Sends `n` 100-byte frames 1 µs apart through a link with `loss`; true where one was lost.
fn loss_pattern(loss: LossModel, seed: u64, n: usize) -> Vec<bool> {
    let config = LinkConfig {
        loss,
        seed,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, 0).unwrap();
    let pattern: Vec<bool> = (0..n as u64)
        .map(|i| match link.handle_arrival(i * 1000, 100) {
            Fate::Drop(DropCause::Loss) => true,
            Fate::Drop(cause) => panic!("only the loss model drops here, not {cause:?}"),
            Fate::Deliver { departure_ns, .. } => {
                link.handle_departure(departure_ns, 100);
                false
            }
        })
        .collect();
    let lost = pattern.iter().filter(|&&lost| lost).count() as u64;
    assert_eq!(link.counters().dropped_loss, lost);
    pattern
}

/// Fraction of `true`.
fn rate(pattern: &[bool]) -> f64 {
    pattern.iter().filter(|&&lost| lost).count() as f64 / pattern.len() as f64
}

/// Lengths of the runs of consecutive losses.
fn bursts(pattern: &[bool]) -> Vec<usize> {
    let mut bursts = Vec::new();
    let mut run = 0;
    for &lost in pattern {
        if lost {
            run += 1;
        } else if run > 0 {
            bursts.push(run);
            run = 0;
        }
    }
    if run > 0 {
        bursts.push(run);
    }
    bursts
}

/// Mean and sample standard deviation.
fn mean_std(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    let variance = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, variance.sqrt())
}

/// Standard error of the loss rate of a correlated sequence, from 100 batch means.
fn batch_standard_error(pattern: &[bool]) -> f64 {
    let rates: Vec<f64> = pattern.chunks(pattern.len() / 100).map(rate).collect();
    let (_, std) = mean_std(&rates);
    std / (rates.len() as f64).sqrt()
}

fn assert_within(what: &str, measured: f64, expected: f64, tolerance: f64) {
    assert!(
        (measured - expected).abs() <= tolerance,
        "{what}: measured {measured}, expected {expected} ± {tolerance}"
    );
}

#[test]
fn bernoulli_loss_of_1_percent_has_its_rate_and_geometric_bursts() {
    let p = 0.01;
    let n = 1_000_000;
    let pattern = loss_pattern(LossModel::Bernoulli { p }, 1, n);

    let tolerance = Z * (p * (1.0 - p) / n as f64).sqrt();
    assert_within("loss rate", rate(&pattern), p, tolerance);

    // Independent losses: a burst goes on with probability p, so its length is geometric
    // with mean 1/(1 − p) and variance p/(1 − p)², and a fraction 1 − p of bursts are single.
    let bursts = bursts(&pattern);
    let count = bursts.len() as f64;
    let lengths: Vec<f64> = bursts.iter().map(|&b| b as f64).collect();
    let (mean, _) = mean_std(&lengths);
    let tolerance = Z * (p / (1.0 - p).powi(2) / count).sqrt();
    assert_within("mean burst length", mean, 1.0 / (1.0 - p), tolerance);
    let singles = bursts.iter().filter(|&&b| b == 1).count() as f64 / count;
    let tolerance = Z * (p * (1.0 - p) / count).sqrt();
    assert_within("fraction of single losses", singles, 1.0 - p, tolerance);
}

#[test]
fn gilbert_elliott_loss_rate_matches_the_stationary_formula() {
    let (p, r, one_minus_h, one_minus_k) = (0.01, 0.3, 0.8, 0.001);
    let model = LossModel::GilbertElliott {
        p,
        r,
        one_minus_h,
        one_minus_k,
    };
    let pattern = loss_pattern(model, 2, 1_000_000);

    let bad = p / (p + r);
    let expected = bad * one_minus_h + (1.0 - bad) * one_minus_k;
    let tolerance = Z * batch_standard_error(&pattern);
    assert_within("loss rate", rate(&pattern), expected, tolerance);
}

#[test]
fn gilbert_bursts_last_one_over_r_frames() {
    // 1-k = 0 and 1-h = 1: lost exactly while bad; a bad spell goes on with 1 − r.
    let (p, r) = (0.01, 0.25);
    let model = LossModel::GilbertElliott {
        p,
        r,
        one_minus_h: 1.0,
        one_minus_k: 0.0,
    };
    let pattern = loss_pattern(model, 3, 1_000_000);

    let bursts = bursts(&pattern);
    let lengths: Vec<f64> = bursts.iter().map(|&b| b as f64).collect();
    let (mean, _) = mean_std(&lengths);
    let tolerance = Z * ((1.0 - r) / (r * r) / lengths.len() as f64).sqrt();
    assert_within("mean burst length", mean, 1.0 / r, tolerance);

    let tolerance = Z * batch_standard_error(&pattern);
    assert_within("loss rate", rate(&pattern), p / (p + r), tolerance);
}

#[test]
fn gemodel_with_netem_defaults_is_bernoulli() {
    // `gemodel 2%` alone: r = 98%, 1-h = 100%, 1-k = 0%, so the loss rate is p.
    let model = latlab_link::parse::loss("--loss", "gemodel:2%").unwrap();
    let n = 1_000_000;
    let pattern = loss_pattern(model, 4, n);
    let tolerance = Z * (0.02 * 0.98 / n as f64).sqrt();
    assert_within("loss rate", rate(&pattern), 0.02, tolerance);
}

#[test]
fn four_state_loss_rate_matches_its_stationary_distribution() {
    let (p13, p31, p32, p23, p14) = (0.02, 0.6, 0.2, 0.3, 0.01);
    let model = LossModel::FourState {
        p13,
        p31,
        p32,
        p23,
        p14,
    };
    let pattern = loss_pattern(model, 5, 1_000_000);

    // The chain over states 1 (received in gap), 2 (received in burst), 3 (lost in burst),
    // 4 (isolated loss); row = from, column = to.
    let transitions = [
        [1.0 - p13 - p14, 0.0, p13, p14],
        [0.0, 1.0 - p23, p23, 0.0],
        [p31, p32, 1.0 - p31 - p32, 0.0],
        [1.0, 0.0, 0.0, 0.0],
    ];
    let stationary = stationary_distribution(&transitions);
    let expected = stationary[2] + stationary[3];
    let tolerance = Z * batch_standard_error(&pattern);
    assert_within("loss rate", rate(&pattern), expected, tolerance);

    // Both kinds of loss occur: isolated ones (state 4) and bursts (state 3).
    let bursts = bursts(&pattern);
    assert!(bursts.iter().any(|&b| b > 1) && bursts.contains(&1));
}

/// π with π = πP and Σπ = 1, by Gaussian elimination on (Pᵀ − I) with one row replaced by Σπ = 1.
fn stationary_distribution(transitions: &[[f64; 4]; 4]) -> [f64; 4] {
    let mut a = [[0.0; 5]; 4];
    for (row, a_row) in a.iter_mut().enumerate() {
        for (column, cell) in a_row.iter_mut().take(4).enumerate() {
            *cell = transitions[column][row] - if row == column { 1.0 } else { 0.0 };
        }
    }
    a[3] = [1.0, 1.0, 1.0, 1.0, 1.0];
    for pivot in 0..4 {
        let best = (pivot..4)
            .max_by(|&i, &j| a[i][pivot].abs().total_cmp(&a[j][pivot].abs()))
            .unwrap();
        a.swap(pivot, best);
        let pivot_row = a[pivot];
        for (row, a_row) in a.iter_mut().enumerate() {
            if row != pivot {
                let factor = a_row[pivot] / pivot_row[pivot];
                for (cell, pivot_cell) in a_row.iter_mut().zip(pivot_row) {
                    *cell -= factor * pivot_cell;
                }
            }
        }
    }
    let pi = [0, 1, 2, 3].map(|i| a[i][4] / a[i][i]);
    // π is stationary: one step of the chain leaves it as it is.
    for column in 0..4 {
        let next: f64 = (0..4).map(|row| pi[row] * transitions[row][column]).sum();
        assert!((next - pi[column]).abs() < 1e-12);
    }
    pi
}

/// Sends `n` frames `spacing_ns` apart through a link; their delays (departure − arrival).
fn delays(config: LinkConfig, n: u64, spacing_ns: u64) -> Vec<f64> {
    let mut link = Link::new(config, 0).unwrap();
    (0..n)
        .map(|i| {
            let now = i * spacing_ns;
            match link.handle_arrival(now, 100) {
                Fate::Deliver { departure_ns, .. } => {
                    link.handle_departure(departure_ns, 100);
                    (departure_ns - now) as f64
                }
                Fate::Drop(cause) => panic!("nothing drops here, not {cause:?}"),
            }
        })
        .collect()
}

fn jittered(dist: JitterDist, seed: u64) -> LinkConfig {
    LinkConfig {
        delay_ns: 50 * MS,
        jitter_ns: 5 * MS,
        jitter_dist: dist,
        seed,
        limit_frames: None,
        ..LinkConfig::default()
    }
}

#[test]
fn jitter_keeps_frames_in_order_by_default() {
    let config = LinkConfig {
        delay_ns: 20 * MS,
        jitter_ns: 10 * MS,
        jitter_dist: JitterDist::Normal,
        seed: 6,
        limit_frames: None,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, 0).unwrap();
    // Jitter of 10 ms, frames 10 µs apart: a thousand times the spacing.
    let mut previous = 0;
    let mut held_back = 0;
    for i in 0..100_000u64 {
        let now = i * 10_000;
        let Fate::Deliver {
            departure_ns,
            reordered,
            ..
        } = link.handle_arrival(now, 100)
        else {
            panic!("nothing drops here");
        };
        assert!(!reordered);
        assert!(departure_ns >= previous, "frame {i} overtakes");
        assert!(departure_ns >= now);
        held_back += u64::from(departure_ns == previous);
        previous = departure_ns;
    }
    // Ordering was at work: many frames had to wait for the one before.
    assert!(held_back > 10_000, "only {held_back} frames were held back");
}

#[test]
fn normal_jitter_has_the_configured_mean_and_sigma() {
    // Frames 1 s apart never wait for each other, so each delay is one sample.
    let n = 100_000;
    let samples = delays(jittered(JitterDist::Normal, 7), n, 1_000 * MS);
    let (mean, std) = mean_std(&samples);
    let sigma = 5.0 * MS as f64;
    assert_within(
        "mean",
        mean,
        50.0 * MS as f64,
        Z * sigma / (n as f64).sqrt(),
    );
    // The sample σ has a relative standard error of 1/√(2n); NetEm's table stops at ±4σ,
    // which takes 0.05% off σ.
    let tolerance = sigma * (Z / (2.0 * n as f64).sqrt() + 0.001);
    assert_within("sigma", std, sigma, tolerance);
}

#[test]
fn uniform_jitter_stays_within_plus_minus_the_jitter() {
    let n = 100_000;
    let samples = delays(jittered(JitterDist::Uniform, 8), n, 1_000 * MS);
    let (low, high) = (45.0 * MS as f64, 55.0 * MS as f64);
    assert!(samples.iter().all(|d| (low..=high).contains(d)));
    // Uniform on ±J: mean the delay, σ = J/√3, and both ends reached.
    let (mean, std) = mean_std(&samples);
    let sigma = 5.0 * MS as f64 / 3f64.sqrt();
    assert_within(
        "mean",
        mean,
        50.0 * MS as f64,
        Z * sigma / (n as f64).sqrt(),
    );
    assert_within("sigma", std, sigma, sigma * 0.01);
    assert!(samples.iter().any(|&d| d < 45.1 * MS as f64));
    assert!(samples.iter().any(|&d| d > 54.9 * MS as f64));
}

#[test]
fn pareto_jitter_has_a_long_tail_of_late_frames() {
    let samples = delays(jittered(JitterDist::Pareto, 9), 100_000, 1_000 * MS);
    let (mean, _) = mean_std(&samples);
    // NetEm's pareto is shifted to mean 0 (a little less, for the cap at 4 jitters).
    assert_within("mean", mean, 50.0 * MS as f64, 0.05 * 5.0 * MS as f64);
    // Never earlier than delay − 2/3 jitter, often much later.
    let earliest = samples.iter().copied().fold(f64::INFINITY, f64::min);
    assert!(earliest >= 50.0 * MS as f64 - 5.0 * MS as f64 * 2.0 / 3.0 - 1.0);
    let late = samples.iter().filter(|&&d| d > 60.0 * MS as f64).count();
    assert!(late > 1_000, "only {late} frames over 2 jitters late");
}

#[test]
fn a_table_distribution_draws_its_values_uniformly() {
    let table = vec![-1.0, 0.0, 0.0, 3.0];
    let samples = delays(jittered(JitterDist::Table(table), 10), 100_000, 1_000 * MS);
    let at = |jitters: f64| {
        let target = 50.0 * MS as f64 + jitters * 5.0 * MS as f64;
        samples.iter().filter(|&&d| d == target).count() as f64 / samples.len() as f64
    };
    let tolerance = Z * (0.25 * 0.75 / samples.len() as f64).sqrt();
    assert_within("share of -1", at(-1.0), 0.25, tolerance);
    assert_within("share of 0", at(0.0), 0.5, 2.0 * tolerance);
    assert_within("share of 3", at(3.0), 0.25, tolerance);
}

#[test]
fn correlation_makes_successive_delays_alike() {
    let step = |correlation: f64| {
        let config = LinkConfig {
            correlation,
            ..jittered(JitterDist::Uniform, 11)
        };
        let samples = delays(config, 20_000, 1_000 * MS);
        let steps: Vec<f64> = samples.windows(2).map(|w| (w[1] - w[0]).abs()).collect();
        mean_std(&steps).0
    };
    assert!(step(0.9) < 0.2 * step(0.0));
}

#[test]
fn duplicate_and_corrupt_happen_at_their_rates() {
    let (duplicate, corrupt) = (0.05, 0.02);
    let config = LinkConfig {
        duplicate,
        corrupt,
        seed: 12,
        limit_frames: None,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, 0).unwrap();
    let n = 1_000_000u64;
    for i in 0..n {
        let len = 14 + (i as usize * 7919) % 1500;
        if let Fate::Deliver {
            corrupt_bit: Some(bit),
            ..
        } = link.handle_arrival(i, len)
        {
            assert!(bit < len * 8, "bit {bit} of a {len}-byte frame");
        }
    }
    let counters = link.counters();
    assert_eq!(counters.delivered, n);
    for (what, count, p) in [
        ("duplicated", counters.duplicated, duplicate),
        ("corrupted", counters.corrupted, corrupt),
    ] {
        let tolerance = Z * (p * (1.0 - p) / n as f64).sqrt();
        assert_within(what, count as f64 / n as f64, p, tolerance);
    }
}

#[test]
fn reordering_without_a_gap_sends_frames_ahead_at_its_rate() {
    let p = 0.1;
    let config = LinkConfig {
        delay_ns: 10 * MS,
        reorder: Some(Reorder {
            probability: p,
            gap: None,
        }),
        seed: 13,
        limit_frames: None,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, 0).unwrap();
    let n = 100_000u64;
    for i in 0..n {
        let now = i * 1000;
        let Fate::Deliver {
            departure_ns,
            reordered,
            ..
        } = link.handle_arrival(now, 100)
        else {
            panic!("nothing drops here");
        };
        assert_eq!(departure_ns == now, reordered);
    }
    let share = link.counters().reordered as f64 / n as f64;
    assert_within("reordered", share, p, Z * (p * (1.0 - p) / n as f64).sqrt());
}

#[test]
fn random_arrivals_never_panic_and_the_queue_stays_within_its_limits() {
    let config = LinkConfig {
        delay_ns: MS,
        jitter_ns: MS,
        jitter_dist: JitterDist::ParetoNormal,
        loss: LossModel::GilbertElliott {
            p: 0.02,
            r: 0.4,
            one_minus_h: 0.7,
            one_minus_k: 0.001,
        },
        duplicate: 0.1,
        corrupt: 0.1,
        reorder: Some(Reorder {
            probability: 0.05,
            gap: Some(3),
        }),
        rate_bps: Some(10_000_000),
        limit_frames: Some(50),
        limit_bytes: Some(100_000),
        drop_runts: false,
        seed: 14,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config, 0).unwrap();
    let mut rng = SmallRng::seed_from_u64(99);
    // What the engine holds: (departure, length).
    let mut held: Vec<(u64, usize)> = Vec::new();
    let mut now = 0u64;
    for _ in 0..200_000 {
        now += rng.random_range(0..20_000);
        held.retain(|&(departure_ns, len)| {
            let due = departure_ns <= now;
            if due {
                link.handle_departure(now, len);
            }
            !due
        });
        let len = rng.random_range(0..20_000);
        if let Fate::Deliver {
            departure_ns,
            duplicate_departure_ns,
            corrupt_bit,
            ..
        } = link.handle_arrival(now, len)
        {
            assert!(departure_ns >= now);
            assert!(corrupt_bit.is_none_or(|bit| bit < len * 8));
            held.push((departure_ns, len));
            if let Some(departure_ns) = duplicate_departure_ns {
                assert!(departure_ns >= now);
                held.push((departure_ns, len));
            }
        }
        assert_eq!(link.queued_frames(), held.len());
        assert!(link.queued_frames() <= 50);
        assert!(link.queued_bytes() <= 100_000);
    }
    // Extremes get a fate too.
    assert_eq!(
        link.handle_arrival(now, usize::MAX),
        Fate::Drop(DropCause::Oversized)
    );
    let counters = *link.counters();
    assert_eq!(counters.arrived, counters.delivered + counters.dropped());
    for count in [
        counters.delivered,
        counters.duplicated,
        counters.corrupted,
        counters.reordered,
        counters.dropped_loss,
        counters.dropped_queue_frames,
        counters.dropped_queue_bytes,
        counters.dropped_oversized,
    ] {
        assert!(count > 0, "every fate occurs: {counters:?}");
    }
}
