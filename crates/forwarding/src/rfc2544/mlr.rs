//! `rfc2544 --search mlr|both`: MLRsearch (RFC 9971, [`latlab_bench::mlr`]) beside RFC 2544's
//! binary search, per frame size, over the same source and DUT: its NDR and PDR goals (loss
//! ratios 0 and 0.5%), each trial of `--trial`'s length (its final trial duration), judged on
//! `--mlr-duration-sum` of trials with `--mlr-exceed-ratio`, to `--mlr-width`; FD.io CSIT's
//! defaults (21 s, 0.5, 0.5%; CSIT's trials are 1 s: `--trial 1s`). With `--search mlr` its
//! relevant lower bounds are the size's NDR and PDR (the latency trials run at its NDR); with
//! `both` the binary search's are, and the report shows the two side by side with what each
//! cost in trial time.

use std::time::Duration;

use latlab_bench::mlr::{GoalResult, MlrConfig, MlrSearch, SearchGoal};
use latlab_bench::throughput::PDR_LOSS;
use latlab_engine::Stop;

use super::search::{OneTrial, Recorder};
use super::{trial, SizeResult};
use latlab_lab::command::CommandError;
use latlab_lab::units::format_duration;

/// How the throughput is searched.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum SearchMethod {
    /// RFC 2544's binary searches, one trial deciding each step.
    #[default]
    Binary,
    /// MLRsearch alone.
    Mlr,
    /// Both, one after the other, for the comparison.
    Both,
}

impl SearchMethod {
    /// Every method, as `--search` takes it.
    pub const ALL: [SearchMethod; 3] =
        [SearchMethod::Binary, SearchMethod::Mlr, SearchMethod::Both];

    /// Its name: `binary`, `mlr`, `both`.
    pub fn name(self) -> &'static str {
        match self {
            SearchMethod::Binary => "binary",
            SearchMethod::Mlr => "mlr",
            SearchMethod::Both => "both",
        }
    }

    /// Whether the binary searches run.
    pub fn binary(self) -> bool {
        self != SearchMethod::Mlr
    }

    /// Whether MLRsearch runs.
    pub fn mlr(self) -> bool {
        self != SearchMethod::Binary
    }
}

impl std::str::FromStr for SearchMethod {
    type Err = String;

    fn from_str(s: &str) -> Result<SearchMethod, String> {
        SearchMethod::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| format!("{s:?}: expected binary, mlr or both"))
    }
}

/// MLRsearch's goal settings besides the loss ratios and the final trial duration (`--trial`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MlrSettings {
    /// The duration of trials each load is judged on (`--mlr-duration-sum`).
    pub duration_sum: Duration,
    /// The fraction of it allowed to be high-loss (`--mlr-exceed-ratio`).
    pub exceed_ratio: f64,
    /// How close the relevant bounds must come, relative (`--mlr-width`).
    pub width: f64,
    /// Trials at most per frame size (`--mlr-max-trials`).
    pub max_trials: usize,
}

impl MlrSettings {
    /// FD.io CSIT's: a 21 s duration sum, exceed ratio 0.5, width 0.5%; at most 400 trials.
    pub const CSIT: MlrSettings = MlrSettings {
        duration_sum: Duration::from_secs(21),
        exceed_ratio: 0.5,
        width: 0.005,
        max_trials: 400,
    };

    /// The NDR and PDR goals with trials of `trial`.
    pub fn goals(&self, trial: Duration) -> [SearchGoal; 2] {
        let ndr = SearchGoal {
            loss_ratio: 0.0,
            final_trial_duration_s: trial.as_secs_f64(),
            duration_sum_s: self.duration_sum.as_secs_f64(),
            exceed_ratio: self.exceed_ratio,
            width: self.width,
        };
        [
            ndr,
            SearchGoal {
                loss_ratio: PDR_LOSS,
                ..ndr
            },
        ]
    }

    /// Checks the goals they make with trials of `trial`; errors name the flag.
    pub fn check(&self, trial: Duration) -> Result<(), CommandError> {
        if self.max_trials == 0 {
            return Err(CommandError::Usage("--mlr-max-trials 0: at least 1".into()));
        }
        for goal in self.goals(trial) {
            goal.check().map_err(|e| {
                let text = e.to_string();
                let flag = match text.split(':').next().unwrap_or("") {
                    "duration_sum" => {
                        format!("--mlr-duration-sum {}", format_duration(self.duration_sum))
                    }
                    "exceed_ratio" => format!("--mlr-exceed-ratio {}", self.exceed_ratio),
                    "width" => format!("--mlr-width {}", self.width),
                    "final_trial_duration" => format!("--trial {}", format_duration(trial)),
                    other => other.to_string(),
                };
                let why = text.split_once(": ").map_or(text.as_str(), |(_, w)| w);
                CommandError::Usage(format!("{flag}: {why}"))
            })?;
        }
        Ok(())
    }
}

/// What MLRsearch found at one frame size.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MlrSizeResult {
    /// The NDR goal's result.
    pub ndr: GoalResult,
    /// The PDR goal's result.
    pub pdr: GoalResult,
    /// Trials it ran.
    pub trials: usize,
    /// Their seconds.
    pub trial_time_s: f64,
}

/// Runs MLRsearch between a thousandth of `max` and `max` at one size, each trial through
/// `one` and recorded as `mlr`; its result goes into `r.mlr` (and, when the binary search did
/// not run, its relevant lower bounds into `r.ndr_pps` and `r.pdr_pps`). A search that ends
/// with an error ends the size.
pub(super) fn search(
    options: &super::Rfc2544Options,
    max: u64,
    one: &mut OneTrial<'_>,
    stop: &Stop,
    record: &mut Recorder<'_>,
    r: &mut SizeResult,
) -> std::io::Result<()> {
    let (settings, binary_ran) = (&options.mlr, options.search.binary());
    let config = MlrConfig {
        min_load_pps: (max / 1000).max(1),
        max_load_pps: max,
        goals: settings.goals(options.trial).to_vec(),
        max_trials: settings.max_trials,
    };
    let mut search = MlrSearch::new(config).map_err(std::io::Error::other)?;
    while let Some((rate, _)) = search.poll_trial() {
        if stop.is_raised() {
            r.error = Some("stopped by a signal".into());
            break;
        }
        let load = trial::Load::Rate(Some(rate as f64));
        let t = one(load, None)?;
        record(r, "mlr", load, t);
        if let Err(e) = search.handle_trial(rate, t.counts) {
            r.error = Some(e.to_string());
            break;
        }
    }
    let out = search.outcome();
    let result = MlrSizeResult {
        ndr: out.goals[0],
        pdr: out.goals[1],
        trials: out.points.len(),
        trial_time_s: out.trial_time_s,
    };
    if !binary_ran {
        r.ndr_pps = result.ndr.relevant_lower_bound;
        r.ndr_offered_pps = r
            .trials
            .iter()
            .filter(|t| t.search == "mlr" && t.rate_pps == r.ndr_pps)
            .map(|t| t.achieved_pps)
            .reduce(f64::max);
        r.pdr_pps = result.pdr.relevant_lower_bound;
        r.converged = result.ndr.converged && result.pdr.converged;
    }
    r.mlr = Some(result);
    Ok(())
}

/// The report's section comparing the two searches, when MLRsearch ran at some size.
pub(super) fn markdown(sizes: &[SizeResult], mpps: &dyn Fn(f64) -> String) -> String {
    use std::fmt::Write as _;
    if sizes.iter().all(|s| s.mlr.is_none()) {
        return String::new();
    }
    let mut md = String::from(
        "\n## MLRsearch beside the binary search (RFC 9971)\n\nMLRsearch judges each load on a duration sum of trials with an exceed ratio (FD.io CSIT's defaults: 21 s, 0.5, width 0.5%), so one trial lost to a stall does not decide it; the binary search takes each trial's word. Relevant lower bound [relevant upper bound]; the conditional throughput is the lower bound less its low-loss trials' mean loss.\n\n| frame size | binary NDR [Mpps] | MLR NDR [Mpps] | binary PDR [Mpps] | MLR PDR [Mpps] | MLR PDR conditional throughput [Mpps] | trial time: binary / MLR [s] |\n|---:|---:|---:|---:|---:|---:|---|\n",
    );
    let bound = |g: &GoalResult| {
        let lower = g
            .relevant_lower_bound
            .map_or("-".into(), |v| mpps(v as f64));
        let upper = g
            .relevant_upper_bound
            .map_or("none".into(), |v| mpps(v as f64));
        let mut text = format!("{lower} [{upper}]");
        if !g.converged {
            text.push_str(" (not narrowed)");
        }
        text
    };
    for s in sizes {
        let Some(m) = &s.mlr else {
            continue;
        };
        let binary = |v: Option<u64>| match s.binary_trial_time_s {
            Some(_) => v.map_or("-".into(), |v| mpps(v as f64)),
            None => "not run".into(),
        };
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} / {:.0} |",
            s.frame_size,
            binary(s.binary_ndr_pps()),
            bound(&m.ndr),
            binary(s.binary_pdr_pps()),
            bound(&m.pdr),
            m.pdr.conditional_throughput.map_or("-".into(), mpps),
            s.binary_trial_time_s
                .map_or("-".into(), |t| format!("{t:.0}")),
            m.trial_time_s
        );
    }
    md
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_out_of_range_name_their_flag() {
        let trial = Duration::from_secs(1);
        let bad = |s: MlrSettings| s.check(trial).unwrap_err().to_string();
        assert!(MlrSettings::CSIT.check(trial).is_ok());
        assert!(bad(MlrSettings {
            exceed_ratio: 1.0,
            ..MlrSettings::CSIT
        })
        .starts_with("--mlr-exceed-ratio 1: "));
        assert!(bad(MlrSettings {
            width: 0.0,
            ..MlrSettings::CSIT
        })
        .starts_with("--mlr-width 0: "));
        assert!(bad(MlrSettings {
            duration_sum: Duration::from_millis(500),
            ..MlrSettings::CSIT
        })
        .starts_with("--mlr-duration-sum 500ms: "));
        assert_eq!(
            "both".parse::<SearchMethod>(),
            Ok(SearchMethod::Both),
            "names parse"
        );
        assert!("bisect".parse::<SearchMethod>().is_err());
    }
}
