//! latlab-link: the model of one direction of an emulated link (sans-IO).
//!
//! A [`Link`] decides each arriving frame's [`Fate`]: dropped (and why), or delivered at a
//! departure time, perhaps with a duplicate, a bit to flip, or ahead of the frames before it;
//! it only keeps counts. A [`Pipe`] is a link with its frames: it copies each delivered frame
//! into a buffer of its own and hands it out when due, and its conditions can be changed while
//! it runs ([`Pipe::handle_config`]). [`FlowPipes`] holds one direction's pipes with per-flow
//! rules ([`flow`]: frames matched on EtherType, addresses, protocol and ports, each rule with a
//! link of its own, the rest taking the default), with the verbs of a pipe. The emulator
//! engine runs one `FlowPipes` per direction, and [`sim`] joins two pipes into a virtual-time
//! network for every crate's tests, so the same model runs live and in simulation. The knobs are NetEm's
//! (`tc-netem(8)`): delay with jitter drawn from a distribution and an optional correlation,
//! loss (independent, Gilbert-Elliott `gemodel`, or the 4-state Markov `state` model),
//! duplication, corruption, reordering (`reorder P gap N`), a rate limit that counts per-frame
//! overhead, and a queue limit, plus a [`Schedule`] that changes delay, loss and rate over time
//! and places [`Event`]s (a lag spike, an outage, a flapping link) on top of them.
//! The queue the rate builds is served by a discipline ([`aqm`]): tail drop at the limits by
//! default, or CoDel, FQ-CoDel, PIE or DualPI2 (L4S's two queues), with ECN marking.
//!
//! What it guarantees:
//!
//! - **Sans-IO and seeded.** No clock, socket or thread: every call takes `now` in nanoseconds,
//!   and all randomness comes from [`LinkConfig::seed`]. The same configuration, seed and calls
//!   give the same fates, bit for bit, live or in virtual time.
//! - **Order is kept unless reordering is asked for.** Without [`LinkConfig::reorder`], the
//!   departure times of delivered frames never decrease, whatever the jitter: a frame whose
//!   sampled delay would let it overtake waits for the one before it
//!   (`departure = max(arrival + delay + jitter, previous departure) + transmission time`).
//!   With a queue discipline ([`LinkConfig::aqm`]) the same holds after the bottleneck
//!   (`departure = max(end of transmission + delay + jitter, previous departure)`); FQ-CoDel
//!   serves its flows in turn, so frames keep their order within a flow, not across flows,
//!   and DualPI2 within each of its queues (an L4S frame may pass a classic one).
//! - **Memory is bounded by the limits.** A frame counts against [`LinkConfig::limit_frames`]
//!   and [`LinkConfig::limit_bytes`] from its arrival until the engine calls
//!   [`Link::handle_departure`] for it (a pipe does so when the frame leaves it); a frame that
//!   does not fit is dropped (tail drop), so nobody holds more than the limits.
//! - **Every frame is counted once by its fate** in [`LinkCounters`]: arrived = delivered +
//!   the sum of the drops; duplicates, corrupted and reordered frames are counted on the side.
//! - **Bytes never panic.** Any length, 0 to `usize::MAX`, gets a fate: runts and oversized
//!   frames are counted and dropped (or runts forwarded, if configured).
//!
//! ```
//! use latlab_link::{Fate, Link, LinkConfig};
//!
//! // 10 ms one way, 100 Mbit/s, the default 24 bytes of Ethernet overhead per frame.
//! let config = LinkConfig {
//!     delay_ns: 10_000_000,
//!     rate_bps: Some(100_000_000),
//!     ..LinkConfig::default()
//! };
//! let mut link = Link::new(config, 0).unwrap();
//!
//! // Two 1500-byte frames arrive together at t = 0.
//! let first = link.handle_arrival(0, 1500);
//! let second = link.handle_arrival(0, 1500);
//! // (1500 + 24) bytes · 8 / 100 Mbit/s = 121.92 µs on the wire each, after the delay.
//! assert!(matches!(first, Fate::Deliver { departure_ns: 10_121_920, .. }));
//! assert!(matches!(second, Fate::Deliver { departure_ns: 10_243_840, .. }));
//! assert_eq!(link.queued_frames(), 2);
//!
//! // The engine releases them when due and tells the link.
//! link.handle_departure(10_121_920, 1500);
//! link.handle_departure(10_243_840, 1500);
//! assert_eq!(link.queued_frames(), 0);
//! assert_eq!(link.counters().delivered, 2);
//! ```
#![forbid(unsafe_code)]

pub mod aqm;
mod config;
pub mod delay_trace;
mod dist;
pub mod event;
pub mod fates;
pub mod flow;
mod link;
pub mod parse;
mod pipe;
mod schedule;
pub mod sim;
pub mod slot;
pub mod trace;

pub use aqm::{Aqm, Discipline, DualSojourn};
pub use config::{JitterDist, LinkConfig, LossModel, Reorder};
pub use event::{Event, EventEffect, EventRecord, Events};
pub use flow::{FlowMatch, FlowRule, Flows};
pub use link::{Conditions, DropCause, Fate, Link, LinkCounters};
pub use pipe::{
    Departure, FlowPipes, Pipe, MAX_HELD_WITHOUT_LIMIT, MEMORY_WINDOW_NS, RETAINED_BUFFERS,
};
pub use schedule::{Schedule, ScheduleEntry};
pub use slot::{Slot, SlotGap};

/// The shortest frame that is not a runt: an Ethernet header (6 + 6 + 2 bytes).
pub const MIN_FRAME: usize = 14;

/// Default per-frame overhead in bytes: Ethernet preamble and SFD (8), inter-frame gap (12)
/// and FCS (4), which the frames the engine sees do not carry but the wire does.
pub const DEFAULT_OVERHEAD_BYTES: u32 = 24;

/// Default queue limit in frames, NetEm's default `limit`.
pub const DEFAULT_LIMIT_FRAMES: usize = 1000;

/// Default largest frame forwarded, in bytes: a jumbo frame.
pub const DEFAULT_MAX_FRAME: usize = 9216;

/// Errors in a link configuration, a schedule file or a command-line value. Every message
/// names what is at fault: the [`LinkConfig`] field (from [`LinkConfig::validate`]), or the
/// option or file line whose text was read (from [`parse`] and [`Schedule::parse`]).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    /// A probability is below 0, above 1 (100%) or not a number.
    #[error("{option}: {}", describe_probability(*.value))]
    Probability {
        /// The option or flag, e.g. `--loss` or `--loss gemodel r`.
        option: String,
        /// The value given, as a fraction (1.2 is 120%).
        value: f64,
    },
    /// A value is of the right kind but outside what the option allows (a zero rate, an
    /// empty table, probabilities that add up to more than 100%, ...).
    #[error("{option}: {reason}")]
    Invalid {
        /// The option or flag.
        option: String,
        /// What is wrong, in words.
        reason: String,
    },
    /// Text could not be read as the kind of value the option takes.
    #[error("{option}: cannot read {input:?} as {expected}")]
    Unreadable {
        /// The option, flag or file field.
        option: String,
        /// The text given.
        input: String,
        /// What was expected, with examples.
        expected: &'static str,
    },
    /// A field of a [`LinkConfig`] is wrong ([`LinkConfig::validate`]). The message is the
    /// cause's, which starts with the field's name and any sub-part (`loss gemodel 1-h: ...`);
    /// [`ConfigError::field`] gives the name alone, [`ConfigError::naming_field_as`] puts
    /// another name (a command-line flag) in its place.
    #[error("{cause}")]
    Field {
        /// The field's name in [`LinkConfig`], exactly as spelled there (`loss`, `rate_bps`).
        field: &'static str,
        /// What is wrong with it; its option starts with `field`.
        cause: Box<ConfigError>,
    },
    /// A line of a file (a schedule, a distribution table) is wrong.
    #[error("{file} line {line}: {cause}")]
    Line {
        /// Which file, e.g. `schedule`.
        file: String,
        /// The line number, from 1.
        line: usize,
        /// What is wrong on it; names the field.
        cause: Box<ConfigError>,
    },
}

impl ConfigError {
    /// The [`LinkConfig`] field at fault, for an error from [`LinkConfig::validate`]: one of
    /// `jitter_dist`, `correlation`, `loss`, `duplicate`, `corrupt`, `reorder`, `rate_bps`,
    /// `limit_frames`, `limit_bytes`, `max_frame`, `schedule`, `delay_trace`,
    /// `delay_trace_step`, `delay_trace_mode`, `slot`, `slot_dist`, `slot_packets`,
    /// `slot_bytes`, and the queue discipline's
    /// `aqm`, `aqm_target`, `aqm_interval`, `aqm_flows`, `aqm_quantum`, `aqm_tupdate`,
    /// `aqm_alpha`, `aqm_beta`, `aqm_max_burst`, `ecn`. `None` for errors about text
    /// (those of [`parse`] and of schedule files name the option or column they read).
    pub fn field(&self) -> Option<&'static str> {
        match self {
            ConfigError::Field { field, .. } => Some(field),
            _ => None,
        }
    }

    /// The same error with the field's name replaced by `name` where it leads the message
    /// (e.g. a command-line flag: `loss gemodel 1-h: ...` becomes `--loss gemodel 1-h: ...`).
    /// Errors that name no field are returned as they are.
    pub fn naming_field_as(self, name: &str) -> ConfigError {
        let ConfigError::Field { field, cause } = self else {
            return self;
        };
        let rename = |option: String| match option.strip_prefix(field) {
            Some(rest) => format!("{name}{rest}"),
            None => option,
        };
        match *cause {
            ConfigError::Probability { option, value } => ConfigError::Probability {
                option: rename(option),
                value,
            },
            ConfigError::Invalid { option, reason } => ConfigError::Invalid {
                option: rename(option),
                reason,
            },
            ConfigError::Unreadable {
                option,
                input,
                expected,
            } => ConfigError::Unreadable {
                option: rename(option),
                input,
                expected,
            },
            other => other,
        }
    }
}

/// Why a probability is rejected, for [`ConfigError::Probability`].
fn describe_probability(value: f64) -> String {
    if value.is_nan() {
        "not a number (a probability is 0%..100%)".to_string()
    } else if value > 1.0 {
        format!("{}% is above 100%", format_number(value * 100.0))
    } else if value < 0.0 {
        format!("{}% is below 0%", format_number(value * 100.0))
    } else {
        format!("{}% is a valid probability", format_number(value * 100.0))
    }
}

/// A number without float noise: at most 6 decimals, trailing zeros removed.
pub(crate) fn format_number(value: f64) -> String {
    if !value.is_finite() {
        return value.to_string();
    }
    let text = format!("{value:.6}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    if text == "-0" {
        "0".to_string()
    } else {
        text.to_string()
    }
}

/// A duration in nanoseconds, in the largest unit that shows it exactly (`5s`, `1500us`, `0`),
/// spelled as every duration flag of latlab reads it back (`ns`, `us`, `ms`, `s`; 0 needs no
/// unit), so a printed value can be pasted back as a flag. The one formatter of exact
/// durations: settings, schedules and models print through it.
pub fn format_duration_ns(ns: u64) -> String {
    const UNITS: [(u64, &str); 4] = [
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    if ns == 0 {
        return "0".to_string();
    }
    for (scale, unit) in UNITS {
        if ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    unreachable!("every integer is a whole number of nanoseconds")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probability_errors_name_the_option_and_the_percentage() {
        let error = ConfigError::Probability {
            option: "--loss".into(),
            value: 1.2,
        };
        assert_eq!(error.to_string(), "--loss: 120% is above 100%");
        let error = ConfigError::Probability {
            option: "--duplicate".into(),
            value: -0.005,
        };
        assert_eq!(error.to_string(), "--duplicate: -0.5% is below 0%");
    }

    #[test]
    fn validation_errors_name_the_field_and_can_name_a_flag_instead() {
        let error = LinkConfig {
            loss: LossModel::GilbertElliott {
                p: 0.1,
                r: 0.5,
                one_minus_h: 1.5,
                one_minus_k: 0.0,
            },
            ..LinkConfig::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(error.field(), Some("loss"));
        assert_eq!(error.to_string(), "loss gemodel 1-h: 150% is above 100%");
        assert_eq!(
            error.naming_field_as("--loss").to_string(),
            "--loss gemodel 1-h: 150% is above 100%"
        );
        let error = LinkConfig {
            rate_bps: Some(0),
            ..LinkConfig::default()
        }
        .validate()
        .unwrap_err();
        assert_eq!(error.field(), Some("rate_bps"));
        assert_eq!(
            error.naming_field_as("--rate").to_string(),
            "--rate: must be above 0 bit/s (leave it out for no limit)"
        );
    }

    #[test]
    fn durations_print_in_the_largest_exact_unit() {
        assert_eq!(format_duration_ns(0), "0");
        assert_eq!(format_duration_ns(5_000_000_000), "5s");
        assert_eq!(format_duration_ns(1_500_000), "1500us");
        assert_eq!(format_duration_ns(7), "7ns");
        assert_eq!(format_duration_ns(10_000_000), "10ms");
        assert_eq!(format_duration_ns(100_000), "100us");
    }

    #[test]
    fn printed_durations_read_back_as_the_same_flag_value() {
        for ns in [
            0,
            1,
            7,
            999,
            1_000,
            100_000,
            1_500_000,
            10_000_000,
            1_234_567_891,
            5_000_000_000,
        ] {
            let text = format_duration_ns(ns);
            assert_eq!(parse::duration_ns("--delay", &text), Ok(ns), "{text}");
        }
    }
}
