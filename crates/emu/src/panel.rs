//! `--ui ADDR` of `latlab emu`, `run` and `shell`: the link's control panel in a browser,
//! served by [`latlab_ui::UiServer`] (its guards: the `Host` header, the run's token on every
//! `/api/` request, no CORS) on a thread of its own, beside the engine, never on its CPU.
//!
//! - `GET /api/state?since=SEQ[&presets=1]`: what is in force and what the controls edit
//!   (each direction's settings as fields and as spec text), the one-shot in force, every
//!   change with who made it (the page, the API, the link's schedule), the charts' points after
//!   `SEQ` ([`sampler`]), the counts so far, and with `presets=1` the presets with their
//!   sources and settings.
//! - `POST /api/apply` `{"a_to_b": SPEC, "b_to_a": SPEC}`: each direction's settings replaced
//!   by SPEC (the words of `--a-to-b`; what the form shows) on top of what the form does not
//!   show (the frame size, the seed, a schedule or trace from a file), both checked first and
//!   handed to the engine as one change: both or neither. A refused SPEC is 400 with, per
//!   direction, the key at fault and one line; nothing changes.
//! - `POST /api/action` `{"action": "cable"}` (pull the cable, or put it back), `{"action":
//!   "spike", "delay": "200ms", "for": "3s"}`, `{"action": "outage", "for": "2s"}`,
//!   `{"action": "release"}`: one-shots on top of the settings ([`crate::conditions`]), both
//!   ways, each in the change log with its time; a timed one ends by itself.
//!
//! Every change goes through [`SharedConditions`] to [`EmulatorControl`], the path `PUT
//! /conditions` takes, so the page, the API and a script never disagree; the page polls
//! `/api/state` twice a second, so an API change shows there within a second.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

use latlab_engine::emulator::EmulatorControl;
use latlab_link::delay_trace::DelayTrace;
use latlab_link::LinkConfig;
use latlab_ui::{Page, Reply, UiRequest, UiServer};
use serde_json::{json, Value};

use crate::api::{direction_json, spec_text};
use crate::conditions::{direction, Applied, OverlayKind, SharedConditions};
use crate::{config, knob, preset};

pub mod sampler;

use sampler::Sampler;

/// Longest lag spike or outage the page takes.
pub const MAX_ONE_SHOT: Duration = Duration::from_secs(3600);

/// The panel, listening, not yet serving.
#[derive(Debug)]
pub struct Panel {
    server: UiServer,
    title: &'static str,
    names: [&'static str; 2],
}

/// What the panel's thread keeps between requests.
struct Live<'a> {
    conditions: &'a SharedConditions,
    control: &'a EmulatorControl,
    sampler: Sampler,
    /// The links' schedule steps passed so far, as log lines: (at, direction, text).
    schedule_log: Vec<(f64, usize, String)>,
    schedule_seen_ns: u64,
}

impl Panel {
    /// Listens on `addr` for a command titled `title` (`latlab emu`), whose directions the
    /// page names `names` (`A→B`, `B→A`; `up`, `down` behind `latlab run`).
    pub fn bind(
        addr: SocketAddr,
        title: &'static str,
        names: [&'static str; 2],
    ) -> std::io::Result<Panel> {
        Ok(Panel {
            server: UiServer::bind(addr)?,
            title,
            names,
        })
    }

    /// The address to open, token included.
    pub fn url(&self) -> String {
        self.server.url()
    }

    /// Serves the page until `done` is raised.
    pub fn serve(
        &self,
        conditions: &SharedConditions,
        control: &EmulatorControl,
        done: &AtomicBool,
    ) {
        latlab_lab::cores::seat::place_helper_thread();
        let live = RefCell::new(Live {
            conditions,
            control,
            sampler: Sampler::new(),
            schedule_log: Vec::new(),
            schedule_seen_ns: 0,
        });
        let mut handler = |r: &UiRequest| self.handle(&mut live.borrow_mut(), r);
        let mut tick = || live.borrow_mut().tick();
        self.server
            .serve(Page::Emulator, &mut handler, &mut tick, done);
    }

    fn handle(&self, live: &mut Live<'_>, r: &UiRequest) -> Reply {
        match (r.method.as_str(), r.path.as_str()) {
            ("GET", "/api/state") => {
                let since = r.query("since").and_then(|s| s.parse().ok()).unwrap_or(0);
                Reply::json(
                    200,
                    &self.state(live, since, r.query("presets") == Some("1")),
                )
            }
            ("POST", "/api/apply") => apply(live, &r.body),
            ("POST", "/api/action") => action(live, &r.body),
            (_, "/api/state" | "/api/apply" | "/api/action") => {
                Reply::text(405, format!("{} is not allowed here", r.method))
            }
            (_, path) => Reply::not_found(path),
        }
    }

    fn state(&self, live: &Live<'_>, since: u64, presets: bool) -> Value {
        let c = live.conditions.lock();
        let dir = |d: usize| {
            json!({
                "name": self.names[d],
                "key": direction(d).name(),
                "in_force": direction_json(&c.in_force(d)),
                "set": direction_json(&c.base()[d].default),
                "rules": c.base()[d].rules.len(),
            })
        };
        let overlay = c.overlay().map(|o| {
            let left = o.until.map(|t| t.saturating_duration_since(Instant::now()));
            json!({
                "kind": o.kind.name(),
                "delay_ns": match o.kind { OverlayKind::Spike { delay_ns } => Some(delay_ns), _ => None },
                "event": o.kind.event(o.until.map(|t| t.saturating_duration_since(o.since))).to_string(),
                "for_s": o.since.elapsed().as_secs_f64(),
                "left_s": left.map(|l| l.as_secs_f64()),
            })
        });
        let directions = [dir(0), dir(1)];
        drop(c);
        let mut changes: Vec<Value> = live
            .control
            .changes()
            .iter()
            .map(|c| {
                json!({
                    "at_s": c.at_ns as f64 / 1e9,
                    "unix_ms": c.unix_ns / 1_000_000,
                    "direction": self.names[c.direction as usize],
                    "by": c.by,
                    "spec": spec_text(&c.config),
                    "refused": c.refused,
                })
            })
            .collect();
        changes.extend(live.schedule_log.iter().map(|(at, d, text)| {
            json!({ "at_s": at, "direction": self.names[*d], "by": "schedule", "spec": text, "refused": null })
        }));
        changes.sort_by(|a, b| {
            a["at_s"]
                .as_f64()
                .partial_cmp(&b["at_s"].as_f64())
                .unwrap_or(std::cmp::Ordering::Equal)
        });
        let snap = live.sampler.latest();
        let mut value = json!({
            "title": self.title,
            "directions": directions,
            "overlay": overlay,
            "changes": changes,
            "series": live.sampler.since(since),
            "running_s": snap.map(|s| s.at_ns as f64 / 1e9),
            "totals": snap.map(|s| json!([sampler::totals(&s.a_to_b), sampler::totals(&s.b_to_a)])),
            "causes": sampler::CAUSES,
        });
        if presets {
            value["presets"] = preset_list();
        }
        value
    }
}

impl Live<'_> {
    fn tick(&mut self) {
        let now = Instant::now();
        // The engine ends a timed one-shot on time; the page stops showing it.
        self.conditions.lock().expire(now);
        self.sampler.tick(now, self.control);
        let Some(at_ns) = self.sampler.latest().map(|s| s.at_ns) else {
            return;
        };
        let c = self.conditions.lock();
        for d in 0..2 {
            let Some(schedule) = &c.base()[d].default.schedule else {
                continue;
            };
            for e in schedule.entries() {
                if e.at_ns > self.schedule_seen_ns && e.at_ns <= at_ns {
                    let mut words = Vec::new();
                    if let Some(v) = e.delay_ns {
                        words.push(format!("delay={}", latlab_link::format_duration_ns(v)));
                    }
                    if let Some(p) = e.loss {
                        words.push(format!("loss={}%", p * 100.0));
                    }
                    if let Some(r) = e.rate_bps {
                        words.push(format!("rate={r}bit"));
                    }
                    self.schedule_log
                        .push((e.at_ns as f64 / 1e9, d, words.join(" ")));
                }
            }
        }
        self.schedule_seen_ns = at_ns;
    }
}

/// Each preset: its name, what it is, where its figures come from, and its settings each way
/// (as fields and as spec text), as the form shows them.
fn preset_list() -> Value {
    preset::PRESETS
        .iter()
        .map(|p| {
            let side = |up: bool| {
                let mut c = LinkConfig::default();
                match config::apply_in(&mut c, up, "preset", p.name) {
                    Ok(()) => direction_json(&c),
                    Err(e) => json!({ "error": e }),
                }
            };
            json!({
                "name": p.name, "about": p.about, "source": p.source,
                "a_to_b": side(true), "b_to_a": side(false),
            })
        })
        .collect()
}

/// The settings a form's SPEC replaces `current` with: the defaults with what the form does not
/// show kept (frame size, seed, schedule, trace, delay trace's file, a jitter table unless SPEC names a
/// distribution), then SPEC's keys; checked. An error names the key at fault when one key
/// alone is refused, else the direction (`null`).
fn replaced(
    current: &LinkConfig,
    up: bool,
    spec: &str,
) -> Result<LinkConfig, (Option<String>, String)> {
    let fresh = || {
        let mut c = LinkConfig {
            max_frame: current.max_frame,
            seed: current.seed,
            schedule: current.schedule.clone(),
            trace: current.trace.clone(),
            // The file; its step and mode are keys the form shows.
            delay_trace: current.delay_trace.as_ref().map(|t| DelayTrace {
                file: t.file.clone(),
                ..DelayTrace::default()
            }),
            ..LinkConfig::default()
        };
        if !spec
            .split_whitespace()
            .any(|p| p.starts_with("jitter-dist="))
        {
            c.jitter_dist = current.jitter_dist.clone();
        }
        c
    };
    for pair in spec.split_whitespace() {
        let key = pair.split_once('=').map_or(pair, |(k, _)| k);
        if matches!(key, "schedule" | "dist-table" | "trace" | "delay-trace") {
            return Err((
                Some(key.into()),
                format!("{key}: names a file to read; give it at start"),
            ));
        }
        let mut alone = fresh();
        let checked = config::apply_spec(&mut alone, up, "form", pair).and_then(|()| {
            alone
                .validate()
                .map_err(|e| knob::naming_key(e).replace("--", ""))
        });
        if let Err(line) = checked {
            let line = line.strip_prefix("form: ").unwrap_or(&line).to_string();
            // A key that needs another (an AQM without a rate) is the direction's fault.
            if !line.contains("requires") && !line.contains("without") {
                return Err((
                    Some(knob::key_value(pair).map_or(key, |(k, _)| k).to_string()),
                    line,
                ));
            }
        }
    }
    let mut c = fresh();
    config::apply_spec(&mut c, up, "form", spec).map_err(|e| (None, e.replace("form: ", "")))?;
    c.validate()
        .map_err(|e| (None, knob::naming_key(e).replace("--", "")))?;
    Ok(c)
}

fn apply(live: &mut Live<'_>, body: &str) -> Reply {
    let Ok(Value::Object(body)) = serde_json::from_str::<Value>(body) else {
        return Reply::text(
            400,
            "the body is not a JSON object such as {\"a_to_b\": \"delay=5ms\"}",
        );
    };
    let mut c = live.conditions.lock();
    let mut configs = [None, None];
    let mut errors = serde_json::Map::new();
    for (d, config) in configs.iter_mut().enumerate() {
        let Some(spec) = body.get(direction(d).name()) else {
            continue;
        };
        let Some(spec) = spec.as_str() else {
            errors.insert(
                direction(d).name().into(),
                json!({ "key": null, "message": "not a string" }),
            );
            continue;
        };
        match replaced(&c.base()[d].default, d == 0, spec) {
            Ok(new) => *config = Some(new),
            Err((key, message)) => {
                errors.insert(
                    direction(d).name().into(),
                    json!({ "key": key, "message": message }),
                );
            }
        }
    }
    if !errors.is_empty() {
        return Reply::json(400, &json!({ "errors": errors }));
    }
    if configs.iter().all(Option::is_none) {
        return Reply::text(400, "the body names neither a_to_b nor b_to_a");
    }
    match c.set(configs, live.control, "ui") {
        Applied::Yes => Reply::json(200, &json!({ "applied": true })),
        Applied::NotYet => Reply::text(503, "the emulator has not applied the change yet"),
        Applied::Refused(why) => Reply::json(
            400,
            &json!({ "errors": { "engine": { "key": null, "message": why } } }),
        ),
    }
}

/// A duration field of an action's body, at most [`MAX_ONE_SHOT`].
fn duration_field(body: &serde_json::Map<String, Value>, key: &str) -> Result<Duration, Reply> {
    let refuse = |message: String| {
        Reply::json(
            400,
            &json!({ "errors": { "action": { "key": key, "message": message } } }),
        )
    };
    let text = body.get(key).and_then(Value::as_str).unwrap_or_default();
    let d = latlab_lab::units::parse_duration(text).map_err(|e| refuse(format!("{key}: {e}")))?;
    if d.is_zero() || d > MAX_ONE_SHOT {
        return Err(refuse(format!("{key}: {text:?} is not between 0 and 1 h")));
    }
    Ok(d)
}

fn action(live: &mut Live<'_>, body: &str) -> Reply {
    let Ok(Value::Object(body)) = serde_json::from_str::<Value>(body) else {
        return Reply::text(
            400,
            "the body is not a JSON object such as {\"action\": \"cable\"}",
        );
    };
    let mut c = live.conditions.lock();
    let name = body
        .get("action")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let applied = match name {
        "cable" if c.overlay().is_some_and(|o| o.kind == OverlayKind::Cable) => c
            .end(live.control, "ui: cable back")
            .unwrap_or(Applied::Yes),
        "cable" => c.begin(OverlayKind::Cable, None, live.control, "ui: cable pulled"),
        "release" => c.end(live.control, "ui: released").unwrap_or(Applied::Yes),
        "spike" => {
            let (delay, length) =
                match (duration_field(&body, "delay"), duration_field(&body, "for")) {
                    (Ok(d), Ok(l)) => (d, l),
                    (Err(r), _) | (_, Err(r)) => return r,
                };
            let by = format!(
                "ui: lag spike +{} for {}",
                latlab_lab::units::format_duration(delay),
                latlab_lab::units::format_duration(length)
            );
            let kind = OverlayKind::Spike {
                delay_ns: delay.as_nanos() as u64,
            };
            c.begin(kind, Some(length), live.control, &by)
        }
        "outage" => {
            let length = match duration_field(&body, "for") {
                Ok(l) => l,
                Err(r) => return r,
            };
            let by = format!(
                "ui: outage for {}",
                latlab_lab::units::format_duration(length)
            );
            c.begin(OverlayKind::Outage, Some(length), live.control, &by)
        }
        other => {
            return Reply::json(
                400,
                &json!({ "errors": { "action": { "key": "action",
                "message": format!("{other:?}: not an action (cable, spike, outage, release)") } } }),
            )
        }
    };
    let overlay = c.overlay().map(|o| o.kind.name());
    match applied {
        Applied::Yes => Reply::json(200, &json!({ "overlay": overlay })),
        Applied::NotYet => Reply::text(503, "the emulator has not applied the change yet"),
        Applied::Refused(why) => Reply::json(
            400,
            &json!({ "errors": { "engine": { "key": null, "message": why } } }),
        ),
    }
}

#[cfg(test)]
mod tests;
