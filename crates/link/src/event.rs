//! One-shot events on top of a link's conditions: a lag spike, an outage, a flapping link.
//!
//! An [`Event`] is what people test a game or a protocol against besides steady conditions:
//! the delay jumping for a few seconds (`spike 200ms for 3s`), the link gone (`outage 2s`,
//! total loss), or the link going down and up again and again (`flap 5s 1s`: up 5 s, down 1 s,
//! repeating). Events sit on top of the configuration and its schedule: a spike adds to the
//! delay in force, whatever it is then; what changes during an event stays when it ends.
//!
//! They come from a schedule file (`5s spike 200ms for 3s`, [`crate::Schedule`]), from the
//! emulator's control API and its browser panel, and from presets; [`Events`] keeps those of
//! one direction and says, for a time, what is in force.

use std::fmt;

use crate::{format_duration_ns, parse, ConfigError};

/// Every event's name, as it is written first.
pub const EVENT_NAMES: [&str; 3] = ["spike", "outage", "flap"];

/// A one-shot on top of the conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// `delay_ns` more delay for `length_ns` (`spike DELAY for DUR`).
    Spike {
        /// The delay added, ns.
        delay_ns: u64,
        /// How long, ns.
        length_ns: u64,
    },
    /// Every frame lost for `length_ns`, or until released (`outage DUR`, `outage`).
    Outage {
        /// How long, ns; `None` until released (a pulled cable).
        length_ns: Option<u64>,
    },
    /// Up `up_ns`, then down (every frame lost) `down_ns`, repeating for `length_ns` or until
    /// released (`flap UP DOWN [for DUR]`).
    Flap {
        /// How long the link stays up each time, ns.
        up_ns: u64,
        /// How long it stays down each time, ns.
        down_ns: u64,
        /// How long the flapping lasts, ns; `None` until released.
        length_ns: Option<u64>,
    },
}

/// What the events in force do at one time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventEffect {
    /// Delay added by the spikes in force, ns.
    pub extra_delay_ns: u64,
    /// Whether an outage (or a flap's down time) is in force: every frame is lost.
    pub down: bool,
}

impl Event {
    /// Reads an event as written in a schedule file and the API: `spike 200ms for 3s` (also
    /// `spike=200ms for 3s`), `outage 2s`, `outage` (until released), `flap 5s 1s`,
    /// `flap 5s 1s for 1m`. Errors name the part at fault (`spike DELAY: cannot read …`).
    pub fn parse(text: &str) -> Result<Event, ConfigError> {
        let spaced = text.replacen('=', " ", 1);
        let words: Vec<&str> = spaced.split_whitespace().collect();
        let Some((&name, rest)) = words.split_first() else {
            return Err(invalid("event", "empty: expected spike, outage or flap"));
        };
        let (args, length) = match rest.iter().position(|w| *w == "for") {
            Some(at) => {
                let length = match &rest[at + 1..] {
                    [one] => Some(*one),
                    _ => {
                        let why = "`for` takes one duration: spike 200ms for 3s";
                        return Err(invalid(&format!("{name} for"), why));
                    }
                };
                (&rest[..at], length)
            }
            None => (rest, None),
        };
        let length = |label: &str| -> Result<Option<u64>, ConfigError> {
            length
                .map(|l| positive(&format!("{name} {label}"), l))
                .transpose()
        };
        let event = match (name, args) {
            ("spike", [delay]) => Event::Spike {
                delay_ns: positive("spike DELAY", delay)?,
                length_ns: length("for")?
                    .ok_or_else(|| invalid("spike", "needs its length: spike 200ms for 3s"))?,
            },
            ("spike", _) => return Err(invalid("spike", "expected `spike DELAY for DUR`")),
            ("outage", []) => Event::Outage {
                length_ns: length("for")?,
            },
            ("outage", [dur]) if length("for")?.is_none() => Event::Outage {
                length_ns: Some(positive("outage DUR", dur)?),
            },
            ("outage", _) => return Err(invalid("outage", "expected `outage DUR` or `outage`")),
            ("flap", [up, down]) => Event::Flap {
                up_ns: positive("flap UP", up)?,
                down_ns: positive("flap DOWN", down)?,
                length_ns: length("for")?,
            },
            ("flap", _) => {
                return Err(invalid(
                    "flap",
                    "expected `flap UP DOWN` or `flap UP DOWN for DUR`",
                ))
            }
            (other, _) => {
                let why = format!("unknown event {other:?}: expected spike, outage or flap");
                return Err(invalid("event", &why));
            }
        };
        Ok(event)
    }

    /// `spike`, `outage` or `flap`.
    pub fn name(&self) -> &'static str {
        match self {
            Event::Spike { .. } => "spike",
            Event::Outage { .. } => "outage",
            Event::Flap { .. } => "flap",
        }
    }

    /// How long it lasts once begun, ns; `None` until released.
    pub fn length_ns(&self) -> Option<u64> {
        match *self {
            Event::Spike { length_ns, .. } => Some(length_ns),
            Event::Outage { length_ns } | Event::Flap { length_ns, .. } => length_ns,
        }
    }

    /// What it does `elapsed_ns` after it began (inside its length).
    fn effect(&self, elapsed_ns: u64) -> EventEffect {
        match *self {
            Event::Spike { delay_ns, .. } => EventEffect {
                extra_delay_ns: delay_ns,
                down: false,
            },
            Event::Outage { .. } => EventEffect {
                extra_delay_ns: 0,
                down: true,
            },
            Event::Flap { up_ns, down_ns, .. } => EventEffect {
                extra_delay_ns: 0,
                down: elapsed_ns % (up_ns + down_ns) >= up_ns,
            },
        }
    }
}

/// The event as [`Event::parse`] reads it back: `spike 200ms for 3s`.
impl fmt::Display for Event {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = format_duration_ns;
        let length = |l: Option<u64>| l.map_or(String::new(), |l| format!(" for {}", d(l)));
        match *self {
            Event::Spike {
                delay_ns,
                length_ns,
            } => write!(f, "spike {} for {}", d(delay_ns), d(length_ns)),
            Event::Outage { length_ns: None } => write!(f, "outage"),
            Event::Outage { length_ns: Some(l) } => write!(f, "outage {}", d(l)),
            Event::Flap {
                up_ns,
                down_ns,
                length_ns,
            } => write!(f, "flap {} {}{}", d(up_ns), d(down_ns), length(length_ns)),
        }
    }
}

/// One event of a direction: when it began and, once known, when it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EventRecord {
    /// What.
    pub event: Event,
    /// When it began (or begins, if scheduled and not yet due), in the link's `now` clock.
    pub begin_ns: u64,
    /// When it ended or ends: its length after the beginning, or the release; `None` while
    /// it runs until released.
    pub end_ns: Option<u64>,
    /// Whether a schedule placed it (else it was begun while the link ran).
    pub scheduled: bool,
}

impl EventRecord {
    fn in_force(&self, now: u64) -> bool {
        now >= self.begin_ns && self.end_ns.is_none_or(|end| now < end)
    }
}

/// The events of one direction: those scheduled (from the configuration's schedule, placed
/// when it starts) and those begun while it runs, with what is in force at a time.
#[derive(Debug, Clone, Default)]
pub struct Events {
    /// Every event placed, in the order placed; kept, for the record.
    records: Vec<EventRecord>,
    /// Index of the first record that may still be in force or due (the ones before have
    /// all ended), so a long run does not walk its history at every frame.
    first_open: usize,
}

impl Events {
    /// Places the schedule's events, from `start_ns` (the schedule's time 0), replacing the
    /// scheduled events that had not begun by then.
    pub fn schedule(&mut self, start_ns: u64, events: &[(u64, Event)]) {
        self.records
            .retain(|r| !r.scheduled || r.begin_ns < start_ns);
        for &(at_ns, event) in events {
            let begin_ns = start_ns.saturating_add(at_ns);
            self.push(event, begin_ns, true);
        }
        self.first_open = 0;
    }

    /// Begins `event` at `now`.
    pub fn begin(&mut self, now: u64, event: Event) {
        self.push(event, now, false);
    }

    /// Ends every event in force at `now` (the cable put back); scheduled ones not yet due stay.
    /// How many were ended.
    pub fn release(&mut self, now: u64) -> usize {
        let mut ended = 0;
        for record in &mut self.records[self.first_open..] {
            if record.in_force(now) {
                record.end_ns = Some(now);
                ended += 1;
            }
        }
        ended
    }

    /// What is in force at `now`. Times must not go backwards between calls.
    #[inline]
    pub fn effect(&mut self, now: u64) -> EventEffect {
        while self
            .records
            .get(self.first_open)
            .is_some_and(|r| r.end_ns.is_some_and(|end| now >= end))
        {
            self.first_open += 1;
        }
        let mut effect = EventEffect::default();
        for record in &self.records[self.first_open..] {
            if record.in_force(now) {
                let one = record.event.effect(now - record.begin_ns);
                effect.extra_delay_ns = effect.extra_delay_ns.saturating_add(one.extra_delay_ns);
                effect.down |= one.down;
            }
        }
        effect
    }

    /// Every event placed, begun or not, in the order placed.
    pub fn records(&self) -> &[EventRecord] {
        &self.records
    }

    /// Whether any event is in force at `now`.
    pub fn any_in_force(&self, now: u64) -> bool {
        self.records.iter().any(|r| r.in_force(now))
    }

    fn push(&mut self, event: Event, begin_ns: u64, scheduled: bool) {
        let end_ns = event.length_ns().map(|l| begin_ns.saturating_add(l));
        self.records.push(EventRecord {
            event,
            begin_ns,
            end_ns,
            scheduled,
        });
    }
}

/// A duration above 0.
fn positive(option: &str, text: &str) -> Result<u64, ConfigError> {
    let ns = parse::duration_ns(option, text)?;
    if ns == 0 {
        return Err(invalid(option, "must be above 0"));
    }
    Ok(ns)
}

fn invalid(option: &str, reason: &str) -> ConfigError {
    ConfigError::Invalid {
        option: option.to_string(),
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests;
