//! The events of a run in its results: each lag spike, outage and flap with its times, in
//! `--json` (each direction's `events`, the run's `event_changes`) and in the summary.

use latlab_engine::emulator::{EmulatorReport, EventChange};
use latlab_link::EventRecord;
use serde::{Deserialize, Serialize};

/// One event of a direction, scheduled or begun while it ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmuEventJson {
    /// The event as a schedule line or the API writes it: `spike 200ms for 3s`.
    pub event: String,
    /// `spike`, `outage` or `flap`.
    pub kind: String,
    /// When it began (or, scheduled after the end, would have), seconds since the start.
    pub begin_s: f64,
    /// When it ended (its length, or its release), seconds since the start; `None` while it
    /// ran until released and was not.
    pub end_s: Option<f64>,
    /// Whether a schedule placed it (else the API or the panel began it).
    pub scheduled: bool,
    /// Whether it had begun when the run ended.
    pub began: bool,
}

/// An event begun, or the events in force released, while the emulator ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmuEventChangeJson {
    /// `a_to_b` or `b_to_a`.
    pub direction: String,
    /// When the engine applied it, seconds since the start.
    pub at_s: f64,
    /// When, Unix time in ns.
    pub unix_ns: u64,
    /// The event begun; `None` (`null`) for a release.
    pub event: Option<String>,
    /// Events a release ended.
    pub ended: usize,
    /// Who asked: `api`, `ui`.
    pub by: String,
}

fn seconds(ns: u64, start_ns: u64) -> f64 {
    ns.saturating_sub(start_ns) as f64 / 1e9
}

/// The events of a direction, with times since `start_ns`, as of `now_ns`.
pub fn events_json(records: &[EventRecord], start_ns: u64, now_ns: u64) -> Vec<EmuEventJson> {
    records
        .iter()
        .map(|r| EmuEventJson {
            event: r.event.to_string(),
            kind: r.event.name().to_string(),
            begin_s: seconds(r.begin_ns, start_ns),
            end_s: r.end_ns.map(|e| seconds(e, start_ns)),
            scheduled: r.scheduled,
            began: r.begin_ns <= now_ns,
        })
        .collect()
}

/// The events begun and released while running.
pub fn event_changes_json(changes: &[EventChange]) -> Vec<EmuEventChangeJson> {
    changes
        .iter()
        .map(|c| EmuEventChangeJson {
            direction: c.direction.name().to_string(),
            at_s: c.at_ns as f64 / 1e9,
            unix_ns: c.unix_ns,
            event: c.event.map(|e| e.to_string()),
            ended: c.ended,
            by: c.by.clone(),
        })
        .collect()
}

/// One line per event that began, for the summary: `A→B event: outage 2s at 3.000 s–5.000 s
/// (schedule)`.
pub(super) fn event_lines(report: &EmulatorReport) -> String {
    let end_ns = report.start_ns + report.cpu.elapsed_ns;
    let mut out = String::new();
    for (name, d) in [("A→B", &report.a_to_b), ("B→A", &report.b_to_a)] {
        for e in events_json(&d.events, report.start_ns, end_ns) {
            if !e.began {
                continue;
            }
            let until = e
                .end_s
                .map_or("until the end".to_string(), |s| format!("{s:.3} s"));
            let by = if e.scheduled {
                "schedule"
            } else {
                "while running"
            };
            out.push_str(&format!(
                "{name} event: {} from {:.3} s to {until} ({by})\n",
                e.event, e.begin_s
            ));
        }
    }
    out
}

/// Both directions' events (scheduled and begun) with their times since the start, and the
/// ones begun or released through the API and the panel, as `GET /events` shows them.
pub fn control_events_json(
    control: &latlab_engine::emulator::EmulatorControl,
) -> serde_json::Value {
    let (start_ns, events) = control.events();
    let now_ns = latlab_io::clock::now_ns();
    let direction = |d: usize| events_json(&events[d], start_ns, now_ns);
    serde_json::json!({
        "a_to_b": direction(0),
        "b_to_a": direction(1),
        "changes": event_changes_json(&control.event_changes()),
    })
}
