//! Slotting, NetEm's `slot`: frames leave in bursts at slot instants, as on a link that
//! grants transmission in slots (Wi-Fi's aggregation, a cellular scheduler, DOCSIS).
//!
//! NetEm's semantics (`tc-netem(8)`, `sch_netem.c`'s dequeue): a frame that is due (after its
//! delay, jitter and rate) leaves only once the current slot has opened; each slot lets out at
//! most [`Slot::frames`] frames and [`Slot::bytes`] bytes (the frame that spends the byte
//! budget goes out whole, so a slot lets out fewer than `bytes` plus one frame); then the next
//! slot is drawn from the release: `release + gap`, the gap uniform in `MIN..MAX` or from a
//! distribution. A frame due after the slot's instant passed idle draws the next slot from
//! its due time (NetEm draws it from the dequeue that finds it so). The first slot opens when
//! slotting is configured. The pipe keeps the slot's state ([`crate::Pipe`]); everything is
//! computed from scheduled times, never from when the engine polled.

use crate::config::invalid;
use crate::{format_duration_ns, parse, ConfigError, JitterDist};

/// A slotting configuration (`slot=MIN[,MAX]` or `slot-dist=NAME,DELAY,JITTER`, with
/// `slot-packets=N` and `slot-bytes=N`).
#[derive(Debug, Clone, PartialEq)]
pub struct Slot {
    /// How far apart slots are; `None` when only a budget was given (refused by
    /// [`crate::LinkConfig::validate`]: the budget needs a slot).
    pub gap: Option<SlotGap>,
    /// Most frames one slot lets out (NetEm's `packets`); `None` for no limit. At least 1.
    pub frames: Option<u64>,
    /// Bytes after which a slot closes (NetEm's `bytes`); `None` for no limit. At least 1.
    pub bytes: Option<u64>,
}

/// How the gap from one slot to the next is drawn.
#[derive(Debug, Clone, PartialEq)]
pub enum SlotGap {
    /// Uniform in `min_ns..max_ns` (`slot MIN MAX`); exactly `min_ns` when they are equal.
    Uniform {
        /// The shortest gap, ns.
        min_ns: u64,
        /// The longest gap, ns; at least `min_ns`, above 0.
        max_ns: u64,
    },
    /// `delay + jitter · quantile(u)` of a named distribution, never below 0 (`slot
    /// distribution NAME DELAY JITTER`, NetEm's `tabledist`).
    Distribution {
        /// The distribution (one of the named ones, not a table).
        dist: JitterDist,
        /// The mean gap, ns.
        delay_ns: u64,
        /// The gap's spread, ns.
        jitter_ns: u64,
    },
}

impl Slot {
    /// A slot of `gap` without a budget.
    pub fn new(gap: SlotGap) -> Slot {
        Slot {
            gap: Some(gap),
            frames: None,
            bytes: None,
        }
    }

    /// Checks the gap and the budget: `(field, cause)`, the field being `slot`,
    /// `slot_dist`, `slot_packets` or `slot_bytes`.
    pub(crate) fn check(&self) -> Result<(), (&'static str, ConfigError)> {
        if self.frames == Some(0) {
            let cause = invalid("slot_packets", "must be at least 1 frame a slot");
            return Err(("slot_packets", cause));
        }
        if self.bytes == Some(0) {
            let cause = invalid("slot_bytes", "must be at least 1 byte a slot");
            return Err(("slot_bytes", cause));
        }
        match &self.gap {
            None => {
                let field = if self.frames.is_some() {
                    "slot_packets"
                } else {
                    "slot_bytes"
                };
                let cause = invalid(field, "needs a slot (slot=MIN[,MAX] or slot-dist)");
                Err((field, cause))
            }
            Some(SlotGap::Uniform { min_ns, max_ns }) if max_ns < min_ns => {
                let reason = format!(
                    "MAX {} is below MIN {}",
                    format_duration_ns(*max_ns),
                    format_duration_ns(*min_ns)
                );
                Err(("slot", invalid("slot", &reason)))
            }
            Some(SlotGap::Uniform { max_ns: 0, .. }) => Err((
                "slot",
                invalid("slot", "must be above 0 (leave it out for no slots)"),
            )),
            Some(SlotGap::Distribution {
                dist: JitterDist::Table(_),
                ..
            }) => Err((
                "slot_dist",
                invalid("slot_dist", "takes a named distribution"),
            )),
            Some(SlotGap::Distribution {
                delay_ns: 0,
                jitter_ns: 0,
                ..
            }) => Err((
                "slot_dist",
                invalid("slot_dist", "DELAY and JITTER are 0: no slot at all"),
            )),
            Some(_) => Ok(()),
        }
    }
}

/// `MIN[,MAX]`: two durations (`10ms,20ms`), or one for a fixed gap.
pub fn parse_uniform(flag: &str, text: &str) -> Result<SlotGap, ConfigError> {
    let (min, max) = text.split_once(',').unwrap_or((text, text));
    Ok(SlotGap::Uniform {
        min_ns: parse::duration_ns(&format!("{flag} MIN"), min)?,
        max_ns: parse::duration_ns(&format!("{flag} MAX"), max)?,
    })
}

/// `NAME,DELAY,JITTER`: a named distribution ([`parse::DISTRIBUTIONS`]) and two durations.
pub fn parse_distribution(flag: &str, text: &str) -> Result<SlotGap, ConfigError> {
    let parts: Vec<&str> = text.split(',').collect();
    let [name, delay, jitter] = parts[..] else {
        return Err(invalid(
            flag,
            &format!("expected NAME,DELAY,JITTER (normal,10ms,2ms), found {text:?}"),
        ));
    };
    Ok(SlotGap::Distribution {
        dist: parse::distribution(&format!("{flag} NAME"), name)?,
        delay_ns: parse::duration_ns(&format!("{flag} DELAY"), delay)?,
        jitter_ns: parse::duration_ns(&format!("{flag} JITTER"), jitter)?,
    })
}

/// A slot budget: a whole number above 0 (`slot-packets`) or a size (`slot-bytes`: `64k`);
/// `none` for no limit.
pub fn parse_budget(flag: &str, text: &str, bytes: bool) -> Result<Option<u64>, ConfigError> {
    if text == "none" {
        return Ok(None);
    }
    let value = if bytes {
        parse::bytes(flag, text)? as u64
    } else {
        text.trim()
            .parse()
            .map_err(|_| invalid(flag, &format!("{text:?} is not a number of frames")))?
    };
    Ok(Some(value))
}

/// The text form of a gap, as the keys read it back: `10ms,20ms` or `normal,10ms,2ms`.
pub fn gap_text(gap: &SlotGap) -> String {
    match gap {
        SlotGap::Uniform { min_ns, max_ns } if min_ns == max_ns => format_duration_ns(*min_ns),
        SlotGap::Uniform { min_ns, max_ns } => format!(
            "{},{}",
            format_duration_ns(*min_ns),
            format_duration_ns(*max_ns)
        ),
        SlotGap::Distribution {
            dist,
            delay_ns,
            jitter_ns,
        } => format!(
            "{},{},{}",
            match dist {
                JitterDist::Uniform => "uniform",
                JitterDist::Normal => "normal",
                JitterDist::Pareto => "pareto",
                JitterDist::ParetoNormal => "paretonormal",
                JitterDist::Table(_) => "table",
            },
            format_duration_ns(*delay_ns),
            format_duration_ns(*jitter_ns)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gaps_read_and_print_back() {
        let gap = parse_uniform("slot", "10ms,20ms").unwrap();
        assert_eq!(
            gap,
            SlotGap::Uniform {
                min_ns: 10_000_000,
                max_ns: 20_000_000
            }
        );
        assert_eq!(gap_text(&gap), "10ms,20ms");
        assert_eq!(gap_text(&parse_uniform("slot", "5ms").unwrap()), "5ms");
        let dist = parse_distribution("slot-dist", "normal,10ms,2ms").unwrap();
        assert_eq!(gap_text(&dist), "normal,10ms,2ms");
        let e = parse_distribution("slot-dist", "gauss,10ms,2ms").unwrap_err();
        assert!(e.to_string().starts_with("slot-dist NAME:"), "{e}");
        let e = parse_distribution("slot-dist", "normal,10ms").unwrap_err();
        assert!(e.to_string().starts_with("slot-dist:"), "{e}");
        let e = parse_uniform("slot", "10ms,x").unwrap_err();
        assert!(e.to_string().starts_with("slot MAX:"), "{e}");
        assert_eq!(parse_budget("slot-bytes", "2k", true).unwrap(), Some(2048));
        assert!(parse_budget("slot-packets", "two", false).is_err());
    }

    #[test]
    fn a_bad_slot_is_refused_naming_its_field() {
        let field = |slot: Slot| slot.check().unwrap_err().0;
        let uniform = |min_ns, max_ns| Slot::new(SlotGap::Uniform { min_ns, max_ns });
        assert_eq!(field(uniform(20, 10)), "slot");
        assert_eq!(field(uniform(0, 0)), "slot");
        let budget = |frames, bytes| Slot {
            frames,
            bytes,
            ..uniform(10, 10)
        };
        assert_eq!(field(budget(Some(0), None)), "slot_packets");
        assert_eq!(field(budget(None, Some(0))), "slot_bytes");
        assert_eq!(
            field(Slot {
                gap: None,
                frames: Some(3),
                bytes: None
            }),
            "slot_packets"
        );
        let still = Slot::new(SlotGap::Distribution {
            dist: JitterDist::Normal,
            delay_ns: 0,
            jitter_ns: 0,
        });
        assert_eq!(field(still), "slot_dist");
        assert_eq!(budget(Some(2), Some(3000)).check(), Ok(()));
    }
}
