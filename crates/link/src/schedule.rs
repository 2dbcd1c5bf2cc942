//! Conditions that change over time: a schedule of delay, loss and rate, and of events.

use crate::config::check_probability;
use crate::event::EVENT_NAMES;
use crate::{format_duration_ns, parse, ConfigError, Event};

/// Link conditions that change over time, read from a file with one change per line:
///
/// ```text
/// # TIME  DELAY  LOSS   RATE
/// 0s      10ms   0.1%   100mbit
/// 5s      50ms   1%     10mbit
/// 10s     -      0%     -
/// ```
///
/// TIME is since the link's start (`ns`, `us`, `ms`, `s`), strictly increasing; DELAY is a
/// duration; LOSS a probability (`1%` or `0.01`) of independent loss that replaces the loss
/// model; RATE a rate (`bit`, `kbit`, `mbit`, `gbit`, or bits per second). `-` keeps the value
/// in force before the line (the configuration's, for the first line). `#` starts a comment;
/// blank lines are skipped. Before the first line's time the configuration's values apply.
///
/// A line may instead hold an [`Event`] at its time, on top of the conditions then in force:
///
/// ```text
/// 20s     spike 200ms for 3s    # the delay 200 ms higher for 3 s
/// 30s     outage 2s             # every frame lost for 2 s
/// 40s     flap 5s 1s for 30s    # up 5 s, down 1 s, over and over for 30 s
/// ```
///
/// Lines are in time order: a line's time is never before the line above's, and the times of
/// condition lines increase strictly.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Schedule {
    /// Sorted by `at_ns`, strictly increasing.
    entries: Vec<ScheduleEntry>,
    /// The events, with their times since the link's start; in time order.
    events: Vec<(u64, Event)>,
}

/// One change of conditions. `None` keeps the value in force before it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ScheduleEntry {
    /// When the change takes effect, in nanoseconds since the link's start.
    pub at_ns: u64,
    /// The new base delay.
    pub delay_ns: Option<u64>,
    /// The new loss probability, 0..=1, independent loss (0 for none).
    pub loss: Option<f64>,
    /// The new rate limit in bits per second, above 0.
    pub rate_bps: Option<u64>,
}

impl Schedule {
    /// Reads a schedule file; an error names the line number and the field at fault, e.g.
    /// `schedule line 3: RATE: cannot read "10mbt" as a rate ...`. A file without a line
    /// (empty, or only comments and blank lines) is refused: a schedule is at least one change.
    pub fn parse(text: &str) -> Result<Schedule, ConfigError> {
        let mut entries = Vec::new();
        let mut events = Vec::new();
        let mut last_ns = 0;
        for (index, line) in text.lines().enumerate() {
            let line_number = index + 1;
            let content = line.split('#').next().unwrap_or_default().trim();
            if content.is_empty() {
                continue;
            }
            let at = |cause| at_line(line_number, cause);
            let at_ns = match parse_event_line(content).map_err(at)? {
                Some((at_ns, event)) => {
                    events.push((at_ns, event));
                    at_ns
                }
                None => {
                    let entry = parse_line(content).map_err(at)?;
                    if let Some(previous) = entries.last() {
                        check_order(previous, &entry).map_err(at)?;
                    }
                    entries.push(entry);
                    entry.at_ns
                }
            };
            if at_ns < last_ns {
                return Err(at(not_after(at_ns, last_ns)));
            }
            last_ns = at_ns;
        }
        if entries.is_empty() && events.is_empty() {
            return Err(no_lines());
        }
        Ok(Schedule { entries, events })
    }

    /// A schedule of events only (a preset's), with their times since the link's start.
    pub fn from_events(mut events: Vec<(u64, Event)>) -> Result<Schedule, ConfigError> {
        if events.is_empty() {
            return Err(no_lines());
        }
        events.sort_by_key(|(at, _)| *at);
        Ok(Schedule {
            entries: Vec::new(),
            events,
        })
    }

    /// A schedule from entries built in code; checked like a file, the "line" being the
    /// entry's position from 1.
    pub fn from_entries(entries: Vec<ScheduleEntry>) -> Result<Schedule, ConfigError> {
        if entries.is_empty() {
            return Err(no_lines());
        }
        let schedule = Schedule {
            entries,
            events: Vec::new(),
        };
        schedule.validate()?;
        Ok(schedule)
    }

    /// The changes, in time order.
    pub fn entries(&self) -> &[ScheduleEntry] {
        &self.entries
    }

    /// The events, with their times since the link's start, in time order.
    pub fn events(&self) -> &[(u64, Event)] {
        &self.events
    }

    /// Whether any line changes the delay (a delay-changing line, or a spike).
    pub fn changes_delay(&self) -> bool {
        self.entries.iter().any(|e| e.delay_ns.is_some())
            || self
                .events
                .iter()
                .any(|(_, e)| matches!(e, Event::Spike { .. }))
    }

    /// Checks values and order.
    pub(crate) fn validate(&self) -> Result<(), ConfigError> {
        for (index, entry) in self.entries.iter().enumerate() {
            let line = index + 1;
            check_values(entry).map_err(|cause| at_line(line, cause))?;
            if let Some(previous) = index.checked_sub(1).map(|i| &self.entries[i]) {
                check_order(previous, entry).map_err(|cause| at_line(line, cause))?;
            }
        }
        Ok(())
    }
}

/// A line holding an event (`TIME spike 200ms for 3s`): its time and event; `None` for a line
/// of conditions. A second word that is a name but no event's is refused here.
fn parse_event_line(content: &str) -> Result<Option<(u64, Event)>, ConfigError> {
    let mut words = content.splitn(2, char::is_whitespace);
    let (Some(time), Some(rest)) = (words.next(), words.next()) else {
        return Ok(None);
    };
    let rest = rest.trim_start();
    let name: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphabetic())
        .collect();
    if name.is_empty() {
        return Ok(None);
    }
    if !EVENT_NAMES.contains(&name.as_str()) {
        return Err(ConfigError::Invalid {
            option: "event".into(),
            reason: format!(
                "unknown event {name:?}: expected {} (or `TIME DELAY LOSS RATE`)",
                EVENT_NAMES.join(", ")
            ),
        });
    }
    let at_ns = parse::duration_ns("TIME", time)?;
    Ok(Some((at_ns, Event::parse(rest)?)))
}

/// One non-empty line without its comment: `TIME DELAY LOSS RATE`.
fn parse_line(content: &str) -> Result<ScheduleEntry, ConfigError> {
    let fields: Vec<&str> = content.split_whitespace().collect();
    let [time, delay, loss, rate] = fields[..] else {
        return Err(ConfigError::Invalid {
            option: "fields".into(),
            reason: format!(
                "expected 4 (TIME DELAY LOSS RATE), found {}: {content:?}",
                fields.len()
            ),
        });
    };
    if time == "-" {
        return Err(ConfigError::Invalid {
            option: "TIME".into(),
            reason: "every line needs a time; `-` is for DELAY, LOSS and RATE".into(),
        });
    }
    let keep = |field: &str| field == "-";
    Ok(ScheduleEntry {
        at_ns: parse::duration_ns("TIME", time)?,
        delay_ns: if keep(delay) {
            None
        } else {
            Some(parse::duration_ns("DELAY", delay)?)
        },
        loss: if keep(loss) {
            None
        } else {
            Some(parse::probability("LOSS", loss)?)
        },
        rate_bps: if keep(rate) {
            None
        } else {
            Some(parse::rate_bps("RATE", rate)?)
        },
    })
}

/// Values a file could not hold but code could.
fn check_values(entry: &ScheduleEntry) -> Result<(), ConfigError> {
    if let Some(loss) = entry.loss {
        check_probability("LOSS", loss)?;
    }
    if entry.rate_bps == Some(0) {
        return Err(ConfigError::Invalid {
            option: "RATE".into(),
            reason: "must be above 0 bit/s".into(),
        });
    }
    Ok(())
}

/// Times must increase strictly, so that one entry is in force at any time.
fn check_order(previous: &ScheduleEntry, entry: &ScheduleEntry) -> Result<(), ConfigError> {
    if entry.at_ns > previous.at_ns {
        return Ok(());
    }
    Err(ConfigError::Invalid {
        option: "TIME".into(),
        reason: format!(
            "{} is not after the previous line's {}",
            format_duration_ns(entry.at_ns),
            format_duration_ns(previous.at_ns)
        ),
    })
}

/// A line whose time is before the line above's.
fn not_after(at_ns: u64, previous_ns: u64) -> ConfigError {
    ConfigError::Invalid {
        option: "TIME".into(),
        reason: format!(
            "{} is before the previous line's {}",
            format_duration_ns(at_ns),
            format_duration_ns(previous_ns)
        ),
    }
}

/// The error of a schedule without a single line.
fn no_lines() -> ConfigError {
    ConfigError::Invalid {
        option: "schedule".into(),
        reason: "no lines: a schedule needs at least one `TIME DELAY LOSS RATE` line or event"
            .into(),
    }
}

/// Wraps an error about one field into one about the line it is on.
fn at_line(line: usize, cause: ConfigError) -> ConfigError {
    ConfigError::Line {
        file: "schedule".into(),
        line,
        cause: Box::new(cause),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_schedule_file_reads_times_values_and_dashes() {
        let text = "# TIME DELAY LOSS RATE\n\
                    0s 10ms 0.1% 100mbit\n\
                    \n\
                    5s 50ms 1% 10mbit   # congestion\n\
                    10500ms - 0.02 -\n";
        let schedule = Schedule::parse(text).unwrap();
        assert_eq!(
            schedule.entries(),
            &[
                ScheduleEntry {
                    at_ns: 0,
                    delay_ns: Some(10_000_000),
                    loss: Some(0.001),
                    rate_bps: Some(100_000_000)
                },
                ScheduleEntry {
                    at_ns: 5_000_000_000,
                    delay_ns: Some(50_000_000),
                    loss: Some(0.01),
                    rate_bps: Some(10_000_000)
                },
                ScheduleEntry {
                    at_ns: 10_500_000_000,
                    delay_ns: None,
                    loss: Some(0.02),
                    rate_bps: None
                },
            ]
        );
    }

    #[test]
    fn bad_lines_name_the_line_and_the_field() {
        let error = |text: &str| Schedule::parse(text).unwrap_err().to_string();
        let good = "0s 10ms 0.1% 100mbit\n";
        assert_eq!(
            error(&format!("{good}5s 5xs 1% 10mbit\n")),
            "schedule line 2: DELAY: cannot read \"5xs\" as a duration \
             (a number and ns, us, ms or s: 100us, 1.5ms)"
        );
        assert!(error(&format!("{good}# c\n5s 5ms 1% 10mbt\n"))
            .starts_with("schedule line 3: RATE: cannot read \"10mbt\""));
        assert_eq!(
            error(&format!("{good}5s 5ms 120% 10mbit\n")),
            "schedule line 2: LOSS: 120% is above 100%"
        );
        assert!(error("soon 5ms 1% 1mbit").starts_with("schedule line 1: TIME:"));
        assert!(error("- 5ms 1% 1mbit").starts_with("schedule line 1: TIME:"));
        assert!(error("1s 5ms 1%").starts_with("schedule line 1: fields: expected 4"));
        assert!(error("1s 5ms 1% 1mbit extra").starts_with("schedule line 1: fields:"));
        assert!(error("1s 5ms 1% 0").starts_with("schedule line 1: RATE:"));
        assert_eq!(
            error("5s 5ms 1% 1mbit\n2s 5ms 1% 1mbit"),
            "schedule line 2: TIME: 2s is not after the previous line's 5s"
        );
    }

    #[test]
    fn event_lines_sit_among_condition_lines_in_time_order() {
        let text = "0s 10ms 0% -\n\
                    5s spike 200ms for 3s  # lag\n\
                    5s outage 1s\n\
                    8s 20ms - -\n\
                    9s flap 2s 500ms for 10s\n";
        let schedule = Schedule::parse(text).unwrap();
        assert_eq!(schedule.entries().len(), 2);
        let events: Vec<String> = schedule
            .events()
            .iter()
            .map(|(at, e)| format!("{} {e}", format_duration_ns(*at)))
            .collect();
        assert_eq!(
            events,
            [
                "5s spike 200ms for 3s",
                "5s outage 1s",
                "9s flap 2s 500ms for 10s"
            ]
        );
        assert!(schedule.changes_delay());
        let only_events = Schedule::parse("1s outage 2s\n").unwrap();
        assert!(only_events.entries().is_empty() && !only_events.changes_delay());
    }

    #[test]
    fn bad_event_lines_name_the_line_and_the_part() {
        let error = |text: &str| Schedule::parse(text).unwrap_err().to_string();
        assert_eq!(
            error("0s 10ms 0% -\n5s burst 3s\n"),
            "schedule line 2: event: unknown event \"burst\": expected spike, outage, flap \
             (or `TIME DELAY LOSS RATE`)"
        );
        assert!(error("1s spike 200ms\n").starts_with("schedule line 1: spike: needs its length"));
        assert!(error("soon outage 1s\n").starts_with("schedule line 1: TIME:"));
        assert_eq!(
            error("5s outage 1s\n2s outage 1s\n"),
            "schedule line 2: TIME: 2s is before the previous line's 5s"
        );
        assert!(
            error("5s 10ms - -\n4s outage 1s\n").starts_with("schedule line 2: TIME: 4s is before")
        );
    }

    #[test]
    fn an_empty_schedule_is_refused() {
        for text in ["", "\n\n", "# TIME DELAY LOSS RATE\n   # nothing yet\n"] {
            assert_eq!(
                Schedule::parse(text).unwrap_err().to_string(),
                "schedule: no lines: a schedule needs at least one `TIME DELAY LOSS RATE` line \
                 or event",
                "{text:?}"
            );
        }
        assert!(Schedule::from_entries(Vec::new()).is_err());
    }

    #[test]
    fn entries_from_code_are_checked_like_a_file() {
        let entry = |at_ns, loss| ScheduleEntry {
            at_ns,
            delay_ns: None,
            loss: Some(loss),
            rate_bps: None,
        };
        assert!(Schedule::from_entries(vec![entry(0, 0.1), entry(1, 0.2)]).is_ok());
        assert_eq!(
            Schedule::from_entries(vec![entry(0, 0.1), entry(1, 1.5)])
                .unwrap_err()
                .to_string(),
            "schedule line 2: LOSS: 150% is above 100%"
        );
        assert!(Schedule::from_entries(vec![entry(1, 0.1), entry(1, 0.2)]).is_err());
    }
}
