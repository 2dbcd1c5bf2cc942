//! The knobs of a link, NetEm's names and meanings, and their checks.

use crate::{
    format_number, Aqm, ConfigError, Schedule, DEFAULT_LIMIT_FRAMES, DEFAULT_MAX_FRAME,
    DEFAULT_OVERHEAD_BYTES, MIN_FRAME,
};

/// The configuration of one direction of a link. [`LinkConfig::default`] is a link without
/// impairment: no delay, no loss, no rate limit, a queue of 1000 frames (NetEm's default
/// `limit`), frames of 14..=9216 bytes, runts dropped, seed 0.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Base one-way delay in nanoseconds (`--delay`, NetEm `delay TIME`).
    pub delay_ns: u64,
    /// Delay variation in nanoseconds (`--jitter`, NetEm `delay TIME JITTER`): the scale of
    /// [`LinkConfig::jitter_dist`]. 0 means every frame gets exactly the delay.
    pub jitter_ns: u64,
    /// The distribution of the delay variation (`--distribution`).
    pub jitter_dist: JitterDist,
    /// Correlation of successive delay samples, 0..=1 (NetEm `delay TIME JITTER CORRELATION`):
    /// each sample's uniform variate is `(1 − ρ)·fresh + ρ·previous` before it goes through
    /// the distribution, as NetEm's `get_crandom` does. It applies to the delay only; like
    /// NetEm's, it narrows the spread of the delay as it grows.
    pub correlation: f64,
    /// How frames are lost (`--loss`).
    pub loss: LossModel,
    /// Probability 0..=1 that a delivered frame is sent twice (`--duplicate`).
    pub duplicate: f64,
    /// Probability 0..=1 that one random bit of a delivered frame is flipped (`--corrupt`).
    pub corrupt: f64,
    /// Reordering (`--reorder`, NetEm `reorder P gap N`); `None` keeps every frame in order.
    pub reorder: Option<Reorder>,
    /// Rate limit in bits per second (`--rate`); `None` for no limit. Must be above 0.
    pub rate_bps: Option<u64>,
    /// Bytes counted on the wire for each frame besides its length (`--overhead`, NetEm's
    /// `rate RATE PACKETOVERHEAD`). Default 24: preamble and SFD 8, inter-frame gap 12, FCS 4.
    pub overhead_bytes: u32,
    /// Most frames that may be queued (arrived, not yet departed) (`--limit`); `None` for no
    /// limit. At least 1.
    pub limit_frames: Option<usize>,
    /// Most bytes (frame lengths, without overhead) that may be queued (`--limit-bytes`);
    /// `None` for no limit. At least 1.
    pub limit_bytes: Option<usize>,
    /// Largest frame forwarded, in bytes (`--max-frame`); longer frames are dropped as
    /// oversized. At least [`MIN_FRAME`].
    pub max_frame: usize,
    /// Whether frames shorter than [`MIN_FRAME`] are dropped as runts (true) or forwarded.
    pub drop_runts: bool,
    /// The discipline of the bottleneck queue the rate builds, with ECN marking
    /// (`--aqm`, `--ecn` and the discipline's parameters); tail drop by default.
    pub aqm: Aqm,
    /// A delivery trace in mahimahi's format ([`crate::trace`]): the link's capacity over
    /// time, in place of `rate_bps`; frames wait in the queue (any `aqm`) for an opportunity.
    pub trace: Option<crate::trace::DeliveryTrace>,
    /// Conditions that change over time (`--schedule FILE`).
    pub schedule: Option<Schedule>,
    /// The base delay over time from a file ([`crate::delay_trace`], `--delay-trace FILE`), in
    /// place of `delay_ns`: each frame's base delay is the trace's when it enters the delay.
    pub delay_trace: Option<crate::delay_trace::DelayTrace>,
    /// Slotting, NetEm's `slot` ([`crate::slot`], `--slot`): frames due leave in bursts at
    /// slot instants; `None` for none.
    pub slot: Option<crate::Slot>,
    /// Seed of the link's random number generator (`--seed`).
    pub seed: u64,
}

impl Default for LinkConfig {
    fn default() -> Self {
        Self {
            delay_ns: 0,
            jitter_ns: 0,
            jitter_dist: JitterDist::Uniform,
            correlation: 0.0,
            loss: LossModel::None,
            duplicate: 0.0,
            corrupt: 0.0,
            reorder: None,
            rate_bps: None,
            overhead_bytes: DEFAULT_OVERHEAD_BYTES,
            limit_frames: Some(DEFAULT_LIMIT_FRAMES),
            limit_bytes: None,
            max_frame: DEFAULT_MAX_FRAME,
            drop_runts: true,
            aqm: Aqm::default(),
            trace: None,
            schedule: None,
            delay_trace: None,
            slot: None,
            seed: 0,
        }
    }
}

impl LinkConfig {
    /// Whether frames wait at a bottleneck of the pipe's own: a queue discipline other than
    /// tail drop, or a trace (whose opportunities serve the queue).
    pub fn has_bottleneck(&self) -> bool {
        self.aqm.is_active() || self.trace.is_some()
    }

    /// Checks every knob. The error is a [`ConfigError::Field`] naming the field at fault by
    /// its name in this struct (see [`ConfigError::field`]), with the sub-part after it where
    /// there is one, e.g. `loss: 120% is above 100%` or `loss gemodel 1-h: not a number ...`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.check_fields()
            .map_err(|(field, cause)| ConfigError::Field {
                field,
                cause: Box::new(cause),
            })
    }

    /// [`LinkConfig::validate`] without the wrapping: the field and what is wrong with it.
    fn check_fields(&self) -> Result<(), (&'static str, ConfigError)> {
        fn at(field: &'static str) -> impl Fn(ConfigError) -> (&'static str, ConfigError) {
            move |cause| (field, cause)
        }
        if let JitterDist::Table(table) = &self.jitter_dist {
            check_table("jitter_dist", table).map_err(at("jitter_dist"))?;
        }
        check_probability("correlation", self.correlation).map_err(at("correlation"))?;
        self.loss.validate("loss").map_err(at("loss"))?;
        check_probability("duplicate", self.duplicate).map_err(at("duplicate"))?;
        check_probability("corrupt", self.corrupt).map_err(at("corrupt"))?;
        if let Some(reorder) = &self.reorder {
            reorder.validate("reorder").map_err(at("reorder"))?;
            if self.delay_ns == 0 && self.schedule.is_none() && self.delay_trace.is_none() {
                return Err((
                    "reorder",
                    invalid(
                        "reorder",
                        "needs delay_ns above 0: a reordered frame overtakes the delayed ones",
                    ),
                ));
            }
        }
        if self.trace.is_some() {
            if self.rate_bps.is_some() {
                return Err((
                    "trace",
                    invalid(
                        "trace",
                        "a trace is the link's capacity: leave rate_bps out with it",
                    ),
                ));
            }
            let scheduled_rate = self
                .schedule
                .as_ref()
                .is_some_and(|s| s.entries().iter().any(|e| e.rate_bps.is_some()));
            if scheduled_rate {
                return Err((
                    "trace",
                    invalid(
                        "trace",
                        "a trace is the link's capacity: its schedule may not change the rate",
                    ),
                ));
            }
        }
        if self.rate_bps == Some(0) {
            return Err((
                "rate_bps",
                invalid(
                    "rate_bps",
                    "must be above 0 bit/s (leave it out for no limit)",
                ),
            ));
        }
        if self.limit_frames == Some(0) {
            let cause = invalid("limit_frames", "must be at least 1 frame");
            return Err(("limit_frames", cause));
        }
        if self.limit_bytes == Some(0) {
            let cause = invalid("limit_bytes", "must be at least 1 byte");
            return Err(("limit_bytes", cause));
        }
        if self.max_frame < MIN_FRAME {
            let reason = format!(
                "{} bytes is below {MIN_FRAME} (an Ethernet header)",
                self.max_frame
            );
            return Err(("max_frame", invalid("max_frame", &reason)));
        }
        if let Some(schedule) = &self.schedule {
            schedule.validate().map_err(at("schedule"))?;
        }
        self.check_delay_trace()?;
        if let Some(slot) = &self.slot {
            slot.check()?;
        }
        self.aqm.check(self)
    }

    /// A delay trace must make a curve, and is the base delay: no `delay_ns` beside it, no
    /// schedule changing the delay.
    fn check_delay_trace(&self) -> Result<(), (&'static str, ConfigError)> {
        let Some(trace) = &self.delay_trace else {
            return Ok(());
        };
        trace.curve()?;
        let reason = if self.delay_ns != 0 {
            "a delay trace is the base delay: leave delay_ns out with it"
        } else if self
            .schedule
            .as_ref()
            .is_some_and(|s| s.entries().iter().any(|e| e.delay_ns.is_some()))
        {
            "a delay trace is the base delay: its schedule may not change the delay"
        } else {
            return Ok(());
        };
        Err(("delay_trace", invalid("delay_trace", reason)))
    }
}

/// The distribution of the delay variation. Each is a quantile function in units of the
/// jitter, fed a uniform variate (correlated if asked), as NetEm's tables are: NetEm stores
/// them as 16-bit integers scaled by 8192, so every value is kept within −4..4 jitters.
#[derive(Debug, Clone, PartialEq)]
pub enum JitterDist {
    /// Uniform on ±jitter (NetEm's default without a table).
    Uniform,
    /// Normal with σ = jitter, kept within ±4σ (NetEm's `normal` table).
    Normal,
    /// NetEm's `pareto` table: a Pareto of shape 3 shifted to mean 0 and scaled by 4/3,
    /// `((1 − u)^(−1/3) − 1.5)·4/3`, at most 4 jitters: a long tail of late frames.
    Pareto,
    /// NetEm's `paretonormal`: at each quantile, 0.25·normal + 0.75·pareto.
    ParetoNormal,
    /// A user's table of values in units of jitter, one drawn uniformly per frame, like a
    /// NetEm `.dist` file (see [`crate::parse::dist_table`]). Not empty, all finite.
    Table(Vec<f64>),
}

/// How frames are lost. The state of the Markov models is per link and starts in the good
/// (no-loss) state; it restarts when a schedule entry changes the loss model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LossModel {
    /// No loss.
    None,
    /// Each frame is lost independently with probability `p` (NetEm `loss random P`).
    Bernoulli {
        /// Loss probability, 0..=1.
        p: f64,
    },
    /// Gilbert-Elliott, exactly NetEm's `loss gemodel p r 1-h 1-k`: two states, good and bad.
    /// For each frame, the state it meets decides its loss probability (`1-k` in good, `1-h`
    /// in bad), and the chain then moves (good→bad with `p`, bad→good with `r`). In the long
    /// run π_bad = p/(p+r) and the loss rate is π_bad·(1−h) + π_good·(1−k).
    ///
    /// NetEm's defaults when only `p` is given (what [`crate::parse::loss`] fills in):
    /// `r = 1 − p`, `1-h = 1` (every frame in bad is lost), `1-k = 0` (none in good), which
    /// is Bernoulli loss with probability p. With `1-h = 1`, `1-k = 0` (Gilbert's model)
    /// loss bursts are geometric with mean length 1/r.
    GilbertElliott {
        /// Good → bad transition probability.
        p: f64,
        /// Bad → good transition probability.
        r: f64,
        /// Loss probability in the bad state (NetEm's `1-h`).
        one_minus_h: f64,
        /// Loss probability in the good state (NetEm's `1-k`).
        one_minus_k: f64,
    },
    /// NetEm's 4-state Markov model `loss state p13 p31 p32 p23 p14` (Salsano et al.,
    /// "GI model"). States: 1 frame received in a gap, 2 frame received in a burst, 3 frame
    /// lost in a burst, 4 isolated loss. Each frame moves the chain and is lost if the state
    /// it lands in is 3 or 4. From 1: to 3 with p13, to 4 with p14; from 2: to 3 with p23;
    /// from 3: to 1 with p31, to 2 with p32; from 4 always back to 1. Needs
    /// p13 + p14 ≤ 1 and p31 + p32 ≤ 1. NetEm's defaults for missing values (filled in by
    /// [`crate::parse::loss`]): p31 = 1 − p13, p32 = 0, p23 = 1, p14 = 0.
    FourState {
        /// Gap reception → burst loss.
        p13: f64,
        /// Burst loss → gap reception.
        p31: f64,
        /// Burst loss → burst reception.
        p32: f64,
        /// Burst reception → burst loss.
        p23: f64,
        /// Gap reception → isolated loss.
        p14: f64,
    },
}

impl LossModel {
    /// Checks the probabilities; errors name `option` and the parameter.
    pub(crate) fn validate(&self, option: &str) -> Result<(), ConfigError> {
        match *self {
            LossModel::None => Ok(()),
            LossModel::Bernoulli { p } => check_probability(option, p),
            LossModel::GilbertElliott {
                p,
                r,
                one_minus_h,
                one_minus_k,
            } => {
                check_probability(&format!("{option} gemodel p"), p)?;
                check_probability(&format!("{option} gemodel r"), r)?;
                check_probability(&format!("{option} gemodel 1-h"), one_minus_h)?;
                check_probability(&format!("{option} gemodel 1-k"), one_minus_k)
            }
            LossModel::FourState {
                p13,
                p31,
                p32,
                p23,
                p14,
            } => {
                check_probability(&format!("{option} state p13"), p13)?;
                check_probability(&format!("{option} state p31"), p31)?;
                check_probability(&format!("{option} state p32"), p32)?;
                check_probability(&format!("{option} state p23"), p23)?;
                check_probability(&format!("{option} state p14"), p14)?;
                check_sum(&format!("{option} state"), "p13 + p14", p13 + p14)?;
                check_sum(&format!("{option} state"), "p31 + p32", p31 + p32)
            }
        }
    }
}

/// NetEm's `reorder P [gap N]`: frames go through the delay as usual, except that once `gap − 1`
/// frames have been delayed since the last reordered one, each frame is, with probability P,
/// sent at once instead (it overtakes the queue). Without a gap (`gap = 1`), every frame is a
/// candidate; `reorder 100% gap 5` sends every 5th frame at once.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reorder {
    /// Probability 0..=1 that a candidate frame is sent at once.
    pub probability: f64,
    /// Every how many frames a frame is a candidate; `None` means 1. At least 1.
    pub gap: Option<u32>,
}

impl Reorder {
    /// Checks the probability and the gap; errors name `option`.
    pub(crate) fn validate(&self, option: &str) -> Result<(), ConfigError> {
        check_probability(option, self.probability)?;
        if self.gap == Some(0) {
            return Err(invalid(&format!("{option} gap"), "must be at least 1"));
        }
        Ok(())
    }
}

/// A probability must be a number in 0..=1.
pub(crate) fn check_probability(option: &str, value: f64) -> Result<(), ConfigError> {
    if (0.0..=1.0).contains(&value) {
        Ok(())
    } else {
        Err(ConfigError::Probability {
            option: option.to_string(),
            value,
        })
    }
}

/// Transition probabilities out of one state must not add up to more than 1 (with room for
/// the rounding of values given in percent).
fn check_sum(option: &str, what: &str, sum: f64) -> Result<(), ConfigError> {
    if sum <= 1.0 + 1e-12 {
        Ok(())
    } else {
        Err(ConfigError::Invalid {
            option: option.to_string(),
            reason: format!("{what} = {}% is above 100%", format_number(sum * 100.0)),
        })
    }
}

/// A distribution table must have at least one value, all finite.
pub(crate) fn check_table(option: &str, table: &[f64]) -> Result<(), ConfigError> {
    if table.is_empty() {
        return Err(invalid(option, "the distribution table has no values"));
    }
    if let Some(index) = table.iter().position(|value| !value.is_finite()) {
        return Err(ConfigError::Invalid {
            option: option.to_string(),
            reason: format!(
                "value {} of the distribution table is {}, not a finite number",
                index + 1,
                table[index]
            ),
        });
    }
    Ok(())
}

/// A [`ConfigError::Invalid`] from borrowed text.
pub(crate) fn invalid(option: &str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        option: option.to_string(),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_link_is_valid_and_unimpaired() {
        let config = LinkConfig::default();
        assert_eq!(config.validate(), Ok(()));
        assert_eq!(config.limit_frames, Some(1000));
        assert_eq!(config.overhead_bytes, 24);
        assert_eq!(config.loss, LossModel::None);
    }

    #[test]
    fn validation_names_the_field_at_fault() {
        let check = |config: LinkConfig| config.validate().unwrap_err().to_string();
        let base = LinkConfig::default;
        assert_eq!(
            check(LinkConfig {
                loss: LossModel::Bernoulli { p: 1.2 },
                ..base()
            }),
            "loss: 120% is above 100%"
        );
        assert_eq!(
            check(LinkConfig {
                loss: LossModel::GilbertElliott {
                    p: 0.1,
                    r: 0.5,
                    one_minus_h: f64::NAN,
                    one_minus_k: 0.0
                },
                ..base()
            }),
            "loss gemodel 1-h: not a number (a probability is 0%..100%)"
        );
        assert_eq!(
            check(LinkConfig {
                loss: LossModel::FourState {
                    p13: 0.6,
                    p31: 0.5,
                    p32: 0.0,
                    p23: 1.0,
                    p14: 0.6
                },
                ..base()
            }),
            "loss state: p13 + p14 = 120% is above 100%"
        );
        assert!(check(LinkConfig {
            duplicate: -0.1,
            ..base()
        })
        .starts_with("duplicate:"));
        assert!(check(LinkConfig {
            corrupt: 2.0,
            ..base()
        })
        .starts_with("corrupt:"));
        assert!(check(LinkConfig {
            correlation: 1.5,
            ..base()
        })
        .starts_with("correlation:"));
        assert!(check(LinkConfig {
            rate_bps: Some(0),
            ..base()
        })
        .starts_with("rate_bps:"));
        assert!(check(LinkConfig {
            limit_frames: Some(0),
            ..base()
        })
        .starts_with("limit_frames:"));
        assert!(check(LinkConfig {
            limit_bytes: Some(0),
            ..base()
        })
        .starts_with("limit_bytes:"));
        assert!(check(LinkConfig {
            max_frame: 13,
            ..base()
        })
        .starts_with("max_frame:"));
        assert!(check(LinkConfig {
            jitter_ns: 1,
            jitter_dist: JitterDist::Table(vec![]),
            ..base()
        })
        .starts_with("jitter_dist:"));
        assert!(check(LinkConfig {
            delay_ns: 1_000_000,
            reorder: Some(Reorder {
                probability: 0.5,
                gap: Some(0)
            }),
            ..base()
        })
        .starts_with("reorder gap:"));
        assert!(check(LinkConfig {
            reorder: Some(Reorder {
                probability: 0.5,
                gap: None
            }),
            ..base()
        })
        .contains("reorder: needs delay_ns above 0"));
    }
}
