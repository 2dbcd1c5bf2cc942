//! The searches of one `rfc2544` run: every frame size in turn, each with the source's
//! maximum, the NDR and PDR searches, RFC 8219's latency at four loads, the loss sweep and
//! back-to-back, every trial recorded into the size's result; and the [`Budget`] that says
//! how far the run is.

use super::trial::Sink;
use latlab_bench::latency::{LatencyFigures, TrialsSummary};
use latlab_bench::sweep::{BackToBack, BurstConfig, LossSweep};
use latlab_bench::throughput::{Throughput, ThroughputConfig, PDR_LOSS};
use latlab_engine::blaster::{self, FrameAddrs};
use latlab_engine::Stop;
use latlab_io::ifstats::DevStats;
use latlab_io::port::FramePort;
use latlab_stats::LatencyHistogram;

use super::{trial, LatencyPoint, Rfc2544Options, SizeResult, TrialRecord};
use latlab_lab::command::{CommandError, View};
use latlab_lab::units::format_rate;

/// Measures every size with frames sent through `tx`; returns the sizes measured and, when a
/// size ended with an error, that error (the sizes after it are not measured).
#[allow(clippy::too_many_arguments)]
pub(super) fn measure_sizes<P: FramePort>(
    options: &Rfc2544Options,
    todo: &[usize],
    tx: &mut P,
    (sink, source): (&Sink, Option<&DevStats>),
    addrs: &FrameAddrs,
    source_cpu: Option<usize>,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<(Vec<SizeResult>, Option<String>), CommandError> {
    let mut sizes = Vec::new();
    let mut failure = None;
    let mut budget = Budget::of(options, todo.len());
    for &size in todo {
        if stop.is_raised() {
            break;
        }
        let frame = blaster::stampable_udp_frame(addrs, size).map_err(CommandError::Options)?;
        let mut one = |load: trial::Load, latency: Option<&mut LatencyHistogram>| {
            let (tx, frame) = (&mut *tx, &frame);
            trial::run(
                tx,
                sink,
                frame,
                load,
                options.trial,
                (source_cpu, source),
                stop,
                latency,
            )
        };
        let mut result = SizeResult {
            frame_size: size,
            ..SizeResult::default()
        };
        if let Err(e) = measure_size(
            options,
            size,
            &mut one,
            stop,
            view,
            &mut budget,
            &mut result,
        ) {
            result.error = Some(format!("a trial could not run: {e}"));
        }
        let ended = result.error.clone();
        sizes.push(result);
        if let Some(e) = ended {
            failure = Some(e);
            break;
        }
    }
    Ok((sizes, failure))
}

/// Every search at one frame size into `r`, each trial run by `one`; a search that ends with
/// an error ends the size, with its points and the error kept in `r`. `Err` when a trial could
/// not run at all (the points before it are in `r`).
#[allow(clippy::too_many_arguments)]
fn measure_size(
    options: &Rfc2544Options,
    size: usize,
    one: &mut OneTrial<'_>,
    stop: &Stop,
    view: &mut dyn View,
    budget: &mut Budget,
    r: &mut SizeResult,
) -> std::io::Result<()> {
    let mut record =
        |r: &mut SizeResult, search: &'static str, load: trial::Load, t: trial::TrialRun| {
            let achieved = t.achieved_pps();
            let (rate, burst) = match load {
                trial::Load::Rate(rate) => (rate.map(|r| r as u64), None),
                trial::Load::Burst(frames) => (None, Some(frames)),
                trial::Load::Stamped(rate) => (Some(rate as u64), None),
            };
            r.trials.push(TrialRecord {
                search: search.to_string(),
                rate_pps: rate,
                burst_frames: burst,
                sent: t.counts.sent,
                received: t.counts.received,
                achieved_pps: achieved,
                source_short: rate.is_some_and(|want| achieved < 0.98 * want as f64),
                dropped_entering: t.dropped_entering,
                dropped_at_sink: t.dropped_at_sink,
            });
            let entering = t.dropped_entering.filter(|&d| d > 0);
            let at_sink = t.dropped_at_sink.filter(|&d| d > 0);
            view.counters(&format!(
                "{} | {size} B {search} trial at {}: sent {}, received {}, lost {:.3}%{}",
                budget.tick(),
                match (rate, burst) {
                    (_, Some(frames)) => format!("a burst of {frames} frames"),
                    (Some(r), None) => format_rate(r as f64),
                    (None, None) => "the source's maximum".into(),
                },
                t.counts.sent,
                t.counts.received,
                100.0 * t.counts.loss_ratio(),
                entering.map_or(String::new(), |d| format!(
                    " ({d} dropped entering the DUT: its input ring full)"
                )) + &at_sink.map_or(String::new(), |d| format!(
                    " ({d} dropped at the sink's socket)"
                ))
            ));
        };
    let first = one(trial::Load::Rate(None), None)?;
    record(r, "source_max", trial::Load::Rate(None), first);
    r.source_max_pps = first.achieved_pps();
    if stop.is_raised() {
        r.error = Some("stopped by a signal".into());
        return Ok(());
    }
    let max = r.source_max_pps.floor() as u64;
    if first.counts.received == 0 || max < 10 {
        r.error = Some(format!(
            "the DUT forwarded none of {} frames at the source's maximum",
            first.counts.sent
        ));
        return Ok(());
    }
    r.dut_kept_up = first.counts.received >= first.counts.sent;
    if options.search.binary() {
        binary_search(options, max, one, stop, &mut record, r)?;
    }
    if options.search.mlr() && r.error.is_none() {
        super::mlr::search(options, max, one, stop, &mut record, r)?;
    }
    if let (Some(ndr), true, None) = (r.ndr_pps, options.latency_trials > 0, &r.error) {
        measure_latency(r, ndr, options.latency_trials, one, stop, &mut record)?;
    }
    if options.loss_sweep && r.error.is_none() {
        sweep_loss(r, max, one, stop, &mut record)?;
    }
    if options.b2b_repeats > 0 && r.error.is_none() {
        // The longest burst tried: a trial's worth of frames at the source's maximum.
        let longest = ((max as f64 * options.trial.as_secs_f64()) as u64).max(1);
        let config = BurstConfig {
            min_frames: 1,
            max_frames: longest,
            resolution_frames: ((longest as f64 * options.resolution) as u64).max(1),
            repeats: options.b2b_repeats,
        };
        back_to_back(r, config, one, stop, &mut record)?;
    }
    Ok(())
}

/// RFC 2544's NDR and PDR binary searches between a thousandth of `max` and `max`, into `r`.
fn binary_search(
    options: &Rfc2544Options,
    max: u64,
    one: &mut OneTrial<'_>,
    stop: &Stop,
    record: &mut Recorder<'_>,
    r: &mut SizeResult,
) -> std::io::Result<()> {
    let before = r.trials.len();
    let config = ThroughputConfig {
        min_rate_pps: (max / 1000).max(1),
        max_rate_pps: max,
        resolution_pps: ((max as f64 * options.resolution) as u64).max(1),
        pdr_loss: PDR_LOSS,
        max_trials: options.max_trials,
    };
    let mut search = Throughput::new(config).map_err(std::io::Error::other)?;
    while let Some(rate) = search.poll_trial() {
        if stop.is_raised() {
            r.error = Some("stopped by a signal".into());
            break;
        }
        let load = trial::Load::Rate(Some(rate as f64));
        let t = one(load, None)?;
        // Named `ndr` or `pdr` below, from the search's own record.
        record(r, "throughput", load, t);
        if let Err(e) = search.handle_trial(rate, t.counts) {
            r.error = Some(e.to_string());
            break;
        }
    }
    // The search's own record says which trial belonged to which search.
    for (rec, point) in r.trials.iter_mut().skip(before).zip(search.points()) {
        rec.search = point.search.to_string();
    }
    if let Some(out) = search.outcome() {
        r.ndr_pps = out.ndr.rate_pps;
        r.ndr_offered_pps = r
            .trials
            .iter()
            .filter(|t| t.search == "ndr" && t.rate_pps == out.ndr.rate_pps)
            .map(|t| t.achieved_pps)
            .reduce(f64::max);
        r.pdr_pps = out.pdr.rate_pps;
        r.converged = out.ndr.converged && out.pdr.converged;
    }
    r.binary_trial_time_s = Some((r.trials.len() - before) as f64 * options.trial.as_secs_f64());
    Ok(())
}

/// How far a run is: the trials done against the most it can take (each search's limit), and
/// from the time they took, the most time left.
#[derive(Debug)]
pub(super) struct Budget {
    started: std::time::Instant,
    done: u64,
    most: u64,
}

impl Budget {
    /// The most trials `options` can take: per size the source's maximum, the NDR and PDR
    /// searches, the latency trials at four loads, the loss sweep's ten steps, and each
    /// back-to-back search's halvings down to the resolution.
    fn of(options: &Rfc2544Options, sizes: usize) -> Budget {
        let halvings = (1.0 / options.resolution).log2().ceil() as u64 + 2;
        let searches = if options.search.binary() {
            2 * options.max_trials as u64
        } else {
            0
        } + if options.search.mlr() {
            options.mlr.max_trials as u64
        } else {
            0
        };
        let per_size = 1
            + searches
            + 4 * u64::from(options.latency_trials)
            + if options.loss_sweep { 10 } else { 0 }
            + u64::from(options.b2b_repeats) * halvings;
        Budget {
            started: std::time::Instant::now(),
            done: 0,
            most: per_size * sizes as u64,
        }
    }

    /// One more trial done: where the run is, for the live line.
    fn tick(&mut self) -> String {
        self.done += 1;
        let most = self.most.max(self.done);
        let per_trial = self.started.elapsed() / self.done.max(1) as u32;
        let left = per_trial * (most - self.done) as u32;
        format!(
            "trial {} of at most {most}, at most {}s left",
            self.done,
            left.as_secs()
        )
    }
}

/// Records one trial of a search (named) with its load into a size's result.
pub(super) type Recorder<'a> =
    dyn FnMut(&mut SizeResult, &'static str, trial::Load, trial::TrialRun) + 'a;

/// Runs one trial with a load, recording each frame's latency if given a histogram.
pub(super) type OneTrial<'a> =
    dyn FnMut(trial::Load, Option<&mut LatencyHistogram>) -> std::io::Result<trial::TrialRun> + 'a;

/// RFC 8219 latency at 10, 50, 90 and 100% of the NDR, `trials` trials each, every frame
/// stamped.
fn measure_latency(
    r: &mut SizeResult,
    ndr: u64,
    trials: u32,
    one: &mut OneTrial<'_>,
    stop: &Stop,
    record: &mut Recorder<'_>,
) -> std::io::Result<()> {
    for percent in [10u32, 50, 90, 100] {
        let rate = (ndr * u64::from(percent) / 100).max(1);
        let mut figures = Vec::new();
        for _ in 0..trials {
            if stop.is_raised() {
                r.error = Some("stopped by a signal".into());
                return Ok(());
            }
            let mut h = LatencyHistogram::new();
            let load = trial::Load::Stamped(rate as f64);
            let t = one(load, Some(&mut h))?;
            record(r, "latency", load, t);
            figures.extend(LatencyFigures::of(&h));
        }
        r.latency.push(LatencyPoint {
            percent_of_ndr: percent,
            rate_pps: rate,
            summary: TrialsSummary::of(&figures),
            trials: figures,
        });
    }
    Ok(())
}

/// RFC 2544 26.4 at this size: the longest burst without loss, `config.repeats` times.
fn back_to_back(
    r: &mut SizeResult,
    config: BurstConfig,
    one: &mut OneTrial<'_>,
    stop: &Stop,
    record: &mut Recorder<'_>,
) -> std::io::Result<()> {
    let mut search = BackToBack::new(config).map_err(std::io::Error::other)?;
    while let Some(frames) = search.poll_trial() {
        if stop.is_raised() {
            r.error = Some("stopped by a signal".into());
            break;
        }
        let load = trial::Load::Burst(frames);
        let t = one(load, None)?;
        record(r, "back_to_back", load, t);
        if let Err(e) = search.handle_trial(frames, t.counts) {
            r.error = Some(e.to_string());
            break;
        }
    }
    if let Some(out) = search.outcome() {
        r.back_to_back = out.bursts;
        r.back_to_back_mean = out.mean_frames;
    }
    Ok(())
}

/// RFC 2544 26.3 at this size, from the source's maximum down.
fn sweep_loss(
    r: &mut SizeResult,
    max: u64,
    one: &mut OneTrial<'_>,
    stop: &Stop,
    record: &mut Recorder<'_>,
) -> std::io::Result<()> {
    let mut sweep = LossSweep::new(max).map_err(std::io::Error::other)?;
    while let Some(rate) = sweep.poll_trial() {
        if stop.is_raised() {
            r.error = Some("stopped by a signal".into());
            break;
        }
        let load = trial::Load::Rate(Some(rate as f64));
        let t = one(load, None)?;
        record(r, "loss", load, t);
        if let Err(e) = sweep.handle_trial(rate, t.counts) {
            r.error = Some(e.to_string());
            break;
        }
    }
    r.loss = sweep
        .outcome()
        .iter()
        .map(|p| (p.percent, p.loss_percent))
        .collect();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rfc2544::Dut;

    #[test]
    fn the_budget_bounds_every_trial_a_run_can_take_and_says_how_far_it_is() {
        let mut options = Rfc2544Options::new(Dut::KERNEL);
        options.sizes = vec![64, 1518];
        options.max_trials = 20;
        options.latency_trials = 2;
        options.loss_sweep = true;
        options.b2b_repeats = 3;
        options.resolution = 0.01;
        // Per size: 1 + 2 × 20 + 4 × 2 + 10 + 3 × (7 + 2) = 86.
        let mut budget = Budget::of(&options, options.sizes.len());
        assert_eq!(budget.most, 2 * 86);
        let line = budget.tick();
        assert!(
            line.starts_with("trial 1 of at most 172, at most "),
            "{line}"
        );
        assert!(line.ends_with("s left"), "{line}");
        // A search that took more than its share never makes the count run backwards.
        budget.done = 500;
        assert!(budget
            .tick()
            .starts_with("trial 501 of at most 501, at most 0s left"));
    }
}
