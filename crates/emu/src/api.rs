//! `latlab emu --api ADDR`: the running emulator changed and watched over HTTP (tiny_http, one
//! thread, requests served one after another).
//!
//! - `GET /conditions`: both directions' settings, as spec text (the words of `--a-to-b`) and
//!   as structured fields; with per-flow rules (`--flow`), each direction's `flows` lists its
//!   rules in order (`match`, and the same settings), read-only.
//! - `PUT /conditions/a-to-b`, `PUT /conditions/b-to-a`: a body of `key=value` pairs, merged
//!   into the direction's current settings (keys not named keep their values); the answer is
//!   the direction's new settings, once the engine has applied them between two frames. A
//!   bad body is answered 400 with one line naming the key, and nothing changes. With
//!   per-flow rules, this is the default link (the frames no rule takes); the rules keep
//!   theirs.
//! - `GET /metrics`: Prometheus text exposition ([`crate::metrics`]).
//! - `POST /events` (both ways), `POST /events/a-to-b`, `POST /events/b-to-a`: a body of one
//!   event as a schedule line writes it (`spike 200ms for 3s`, `outage 2s`, `outage` until
//!   released, `flap 5s 1s [for 1m]`), begun at once on top of the settings, replacing the
//!   one-shot in force; `DELETE /events` ends the events in force (the cable put back);
//!   `GET /events` lists each direction's events (scheduled and begun) with their times. A
//!   bad event is answered 400 with one line naming the part at fault, and nothing begins.
//!
//! The settings are the emulator's [`SharedConditions`], which the browser's panel
//! (`--ui`) changes too: a change made here shows there, and a one-shot pressed there (the
//! cable pulled) stays on top of what a PUT sets here; `GET /conditions` gives what is in
//! force, with `overlay` naming the one-shot while one is.
//!
//! Guarantees: the engine never waits for this thread (changes and snapshots go through
//! [`EmulatorControl`]: one relaxed load per engine iteration, a snapshot at most every 50 ms
//! however many requests come); a body is read up to [`MAX_BODY`] bytes; keys that read a
//! file (`schedule`, `dist-table`, `trace`, `delay-trace`) are refused over HTTP.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use latlab_engine::emulator::{EmulatorControl, LinkDirection};
use latlab_link::{format_duration_ns, slot, Flows, JitterDist, LinkConfig, LossModel};
use tiny_http::{Header, Method, Response, Server};

use super::conditions::{Applied, SharedConditions};
use super::{config, knob};

/// Longest request body read, bytes.
pub const MAX_BODY: u64 = 64 * 1024;

/// How long a request waits for the engine to apply a change or publish counters.
const ENGINE_WAIT: Duration = super::conditions::ENGINE_WAIT;

/// An API listening, not yet serving.
pub struct Api {
    server: Server,
    addr: SocketAddr,
}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Api").field("addr", &self.addr).finish()
    }
}

impl Api {
    /// Listens on `addr` (the caller checked it is loopback, or that the user asked for
    /// another).
    pub fn bind(addr: SocketAddr) -> std::io::Result<Api> {
        let server = Server::http(addr).map_err(std::io::Error::other)?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| std::io::Error::other("not an IP address"))?;
        Ok(Api { server, addr })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves requests until `done` is raised, on the settings `conditions` (A→B, B→A: a
    /// link each, or its default and per-flow rules), handing changes to `control`. Each
    /// applied change is written on stderr with its time.
    pub fn serve(
        &self,
        conditions: &SharedConditions,
        control: &EmulatorControl,
        done: &AtomicBool,
    ) {
        let mut state = State {
            conditions,
            control,
        };
        while !done.load(Ordering::Relaxed) {
            match self.server.recv_timeout(Duration::from_millis(50)) {
                Ok(Some(request)) => state.answer(request),
                Ok(None) => {}
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}

/// What the API knows: the settings (a PUT changes the default links), and the way to the
/// engine.
struct State<'a> {
    conditions: &'a SharedConditions,
    control: &'a EmulatorControl,
}

/// An answer: status and body, JSON or text.
struct Answer {
    status: u16,
    body: String,
    content_type: &'static str,
}

impl Answer {
    fn json(status: u16, value: &serde_json::Value) -> Answer {
        Answer {
            status,
            body: format!("{value:#}\n"),
            content_type: "application/json",
        }
    }

    fn text(status: u16, line: impl Into<String>) -> Answer {
        Answer {
            status,
            body: format!("{}\n", line.into()),
            content_type: "text/plain; charset=utf-8",
        }
    }
}

impl State<'_> {
    fn answer(&mut self, mut request: tiny_http::Request) {
        let answer = match (request.method(), request.url()) {
            (Method::Get, "/conditions") => {
                let c = self.conditions.lock();
                let mut value = conditions_json(&c.in_force_flows());
                if let Some(o) = c.overlay() {
                    value["overlay"] = o.kind.name().into();
                }
                Answer::json(200, &value)
            }
            (Method::Put, "/conditions/a-to-b") => self.put(LinkDirection::AToB, &mut request),
            (Method::Put, "/conditions/b-to-a") => self.put(LinkDirection::BToA, &mut request),
            (Method::Get, "/metrics") => match self.control.snapshot(ENGINE_WAIT) {
                Some(snapshot) => Answer {
                    status: 200,
                    body: crate::metrics::exposition(&snapshot, &self.control.changes()),
                    content_type: "text/plain; version=0.0.4; charset=utf-8",
                },
                None => Answer::text(503, "the emulator has not published its counters yet"),
            },
            (Method::Post, "/events") => self.event(&mut request, [true, true]),
            (Method::Post, "/events/a-to-b") => self.event(&mut request, [true, false]),
            (Method::Post, "/events/b-to-a") => self.event(&mut request, [false, true]),
            (Method::Delete, "/events") => {
                let mut c = self.conditions.lock();
                match c.event([true, true], None, self.control, "api") {
                    Applied::Yes => {
                        Answer::json(200, &crate::report::control_events_json(self.control))
                    }
                    _ => Answer::text(503, "the emulator has not applied it yet"),
                }
            }
            (Method::Get, "/events") => {
                Answer::json(200, &crate::report::control_events_json(self.control))
            }
            (_, "/events" | "/events/a-to-b" | "/events/b-to-a") => {
                Answer::text(405, format!("{} is not allowed here", request.method()))
            }
            (_, "/conditions" | "/conditions/a-to-b" | "/conditions/b-to-a" | "/metrics") => {
                Answer::text(405, format!("{} is not allowed here", request.method()))
            }
            (_, url) => Answer::text(
                404,
                format!(
                    "{url}: no such resource (GET /conditions, PUT /conditions/a-to-b, \
                     PUT /conditions/b-to-a, GET /metrics, GET|POST|DELETE /events, \
                     POST /events/a-to-b, POST /events/b-to-a)"
                ),
            ),
        };
        let content_type = Header::from_bytes("Content-Type", answer.content_type)
            .expect("a constant header is valid");
        let response = Response::from_string(answer.body)
            .with_status_code(answer.status)
            .with_header(content_type);
        // A client gone before its answer is its own business.
        let _ = request.respond(response);
    }

    /// `POST /events[/DIRECTION]`: begins the event the body writes (`spike 200ms for 3s`,
    /// `outage 2s`, `outage`, `flap 5s 1s`) in the directions marked, on top of the settings.
    fn event(&mut self, request: &mut tiny_http::Request, directions: [bool; 2]) -> Answer {
        let mut body = String::new();
        let read = request
            .as_reader()
            .take(MAX_BODY + 1)
            .read_to_string(&mut body);
        if read.is_err() || body.len() as u64 > MAX_BODY {
            return Answer::text(400, "the body is not an event (UTF-8, at most 64 KiB)");
        }
        let event = match latlab_link::Event::parse(body.trim()) {
            Ok(event) => event,
            Err(e) => return Answer::text(400, e.to_string()),
        };
        let mut c = self.conditions.lock();
        match c.event(directions, Some(event), self.control, "api") {
            Applied::Yes => {
                let _ = writeln!(std::io::stderr().lock(), "latlab emu: event {event} begun");
                Answer::json(200, &crate::report::control_events_json(self.control))
            }
            _ => Answer::text(
                503,
                "the event is submitted but the emulator has not applied it yet",
            ),
        }
    }

    /// `PUT /conditions/DIRECTION`: merges the body's keys into the direction's settings.
    fn put(&mut self, direction: LinkDirection, request: &mut tiny_http::Request) -> Answer {
        let mut body = String::new();
        let read = request
            .as_reader()
            .take(MAX_BODY + 1)
            .read_to_string(&mut body);
        if read.is_err() {
            return Answer::text(400, "the body is not UTF-8 text");
        }
        if body.len() as u64 > MAX_BODY {
            return Answer::text(413, format!("the body is longer than {MAX_BODY} bytes"));
        }
        let d = direction as usize;
        let up = matches!(direction, LinkDirection::AToB);
        let mut conditions = self.conditions.lock();
        let config = match merged(&conditions.base()[d].default, up, &body) {
            Ok(config) => config,
            Err(line) => return Answer::text(400, line),
        };
        let mut configs = [None, None];
        configs[d] = Some(config);
        let applied = conditions.set(configs, self.control, "api");
        let set = direction_json(&conditions.base()[d].default);
        drop(conditions);
        match applied {
            Applied::NotYet => {
                return Answer::text(
                    503,
                    "the change is submitted but the emulator has not applied it yet",
                )
            }
            Applied::Refused(why) => {
                return Answer::text(400, format!("the emulator refused it: {why}"))
            }
            Applied::Yes => {}
        }
        if let Some(change) = self.control.changes().last() {
            let mut err = std::io::stderr().lock();
            let text = spec_text(&change.config);
            let what = if text.is_empty() {
                "cleared (no conditions)".to_string()
            } else {
                format!("set to {text}")
            };
            let _ = writeln!(
                err,
                "latlab emu: at {:.6} s: {} {what}{}",
                change.at_ns as f64 / 1e9,
                direction.name(),
                change
                    .refused
                    .as_ref()
                    .map_or(String::new(), |e| format!(" (refused: {e})"))
            );
        }
        Answer::json(200, &set)
    }
}

/// `current` with the keys of `body` (`key=value` pairs, as `--a-to-b` takes them) changed,
/// checked; or one line naming the key at fault. `up`: the body is for A→B (a `preset=`
/// key's direction).
pub fn merged(current: &LinkConfig, up: bool, body: &str) -> Result<LinkConfig, String> {
    if body.split_whitespace().next().is_none() {
        return Err("empty body: expected key=value pairs, such as delay=5ms loss=1%".into());
    }
    for pair in body.split_whitespace() {
        let key = pair.split_once('=').map_or(pair, |(k, _)| k);
        if matches!(key, "schedule" | "dist-table" | "trace" | "delay-trace") {
            return Err(format!(
                "{key}: not accepted over the API (it names a file to read); give it at start"
            ));
        }
    }
    let mut config = current.clone();
    config::apply_spec(&mut config, up, "body", body)?;
    config
        .validate()
        // The body has keys, not flags: `body: limit: …`, not `--limit`.
        .map_err(|e| format!("body: {}", knob::naming_key(e).replace("--", "")))?;
    Ok(config)
}

/// Both directions' settings: the default link's, and with per-flow rules their `flows`
/// (each rule's `match` with its settings, in order).
pub fn conditions_json(links: &[Flows; 2]) -> serde_json::Value {
    let direction = |flows: &Flows| {
        let mut value = direction_json(&flows.default);
        if !flows.rules.is_empty() {
            let rules = flows.rules.iter().map(|rule| {
                let mut value = direction_json(&rule.config);
                value["match"] = rule.matcher.to_string().into();
                value
            });
            value["flows"] = rules.collect::<Vec<_>>().into();
        }
        value
    };
    serde_json::json!({
        "a_to_b": direction(&links[0]),
        "b_to_a": direction(&links[1]),
    })
}

/// One direction's settings: its spec text and its fields (times in ns, probabilities as
/// fractions, `null` where unset).
pub fn direction_json(c: &LinkConfig) -> serde_json::Value {
    let loss = match c.loss {
        LossModel::None => serde_json::json!({ "model": "none" }),
        LossModel::Bernoulli { p } => serde_json::json!({ "model": "random", "p": p }),
        LossModel::GilbertElliott {
            p,
            r,
            one_minus_h,
            one_minus_k,
        } => serde_json::json!({
            "model": "gemodel", "p": p, "r": r, "1-h": one_minus_h, "1-k": one_minus_k,
        }),
        LossModel::FourState {
            p13,
            p31,
            p32,
            p23,
            p14,
        } => serde_json::json!({
            "model": "state", "p13": p13, "p31": p31, "p32": p32, "p23": p23, "p14": p14,
        }),
    };
    serde_json::json!({
        "spec": spec_text(c),
        "delay_ns": c.delay_ns,
        "jitter_ns": c.jitter_ns,
        "jitter_dist": dist_name(&c.jitter_dist),
        "correlation": c.correlation,
        "loss": loss,
        "duplicate": c.duplicate,
        "corrupt": c.corrupt,
        "reorder": c.reorder.map(|r| serde_json::json!({
            "probability": r.probability, "gap": r.gap,
        })),
        "rate_bps": c.rate_bps,
        "overhead_bytes": c.overhead_bytes,
        "limit_frames": c.limit_frames,
        "limit_bytes": c.limit_bytes,
        "max_frame": c.max_frame,
        "aqm": aqm_json(&c.aqm),
        "schedule": c.schedule.is_some(),
        "trace": c.trace.as_ref().map(|t| serde_json::json!({
            "file": t.source(),
            "mean_rate_bps": t.mean_rate_bps(),
            "period_ns": t.period_ns(),
        })),
        "delay_trace": c.delay_trace.as_ref().map(|t| serde_json::json!({
            "file": t.file.as_ref().and_then(|f| f.source()),
            "points": t.file.as_ref().map(|f| f.points()),
            "step_ns": t.step_ns,
            "mode": t.mode.name(),
            "period_ns": t.period_ns(),
        })),
        "slot": c.slot.as_ref().map(|s| serde_json::json!({
            "gap": s.gap.as_ref().map(slot::gap_text),
            "distribution": matches!(s.gap, Some(latlab_link::SlotGap::Distribution { .. })),
            "packets": s.frames,
            "bytes": s.bytes,
        })),
        "seed": c.seed,
    })
}

/// The queue discipline's settings: its name, the target in force (the discipline's default
/// if none was given) and every parameter, times in ns.
fn aqm_json(a: &latlab_link::Aqm) -> serde_json::Value {
    serde_json::json!({
        "discipline": a.discipline.name(),
        "target_ns": a.target(),
        "interval_ns": a.interval_ns,
        "flows": a.flows,
        "quantum": a.quantum,
        "tupdate_ns": a.tupdate(),
        "alpha": a.alpha(),
        "beta": a.beta(),
        "max_burst_ns": a.max_burst_ns,
        "coupling": a.coupling,
        "step_ns": a.step_ns,
        "ecn": a.ecn,
    })
}

fn dist_name(d: &JitterDist) -> &'static str {
    match d {
        JitterDist::Uniform => "uniform",
        JitterDist::Normal => "normal",
        JitterDist::Pareto => "pareto",
        JitterDist::ParetoNormal => "paretonormal",
        JitterDist::Table(_) => "table",
    }
}

/// The impairments as a spec (`delay=5ms loss=1%`), naming every key whose value differs from
/// [`LinkConfig::default`] except `max-frame` and `seed` (which [`direction_json`] gives as
/// fields). Applied to a configuration with the same frame size and seed, it gives the
/// settings back, probabilities to a millionth of a percent, except for a schedule or a
/// distribution table, which came from files (`schedule=(file)`, `jitter-dist=table`).
/// Empty for a link without impairment.
pub fn spec_text(c: &LinkConfig) -> String {
    let d = LinkConfig::default();
    let mut out: Vec<String> = Vec::new();
    let mut put = |key: &str, value: String| out.push(format!("{key}={value}"));
    if c.delay_ns != d.delay_ns {
        put("delay", format_duration_ns(c.delay_ns));
    }
    if c.jitter_ns != d.jitter_ns {
        put("jitter", format_duration_ns(c.jitter_ns));
    }
    if c.jitter_dist != d.jitter_dist {
        put("jitter-dist", dist_name(&c.jitter_dist).into());
    }
    if c.correlation != d.correlation {
        put("correlation", percent(c.correlation));
    }
    match c.loss {
        LossModel::None => {}
        LossModel::Bernoulli { p } => put("loss", percent(p)),
        LossModel::GilbertElliott {
            p,
            r,
            one_minus_h,
            one_minus_k,
        } => put(
            "loss",
            format!(
                "gemodel:{},{},{},{}",
                percent(p),
                percent(r),
                percent(one_minus_h),
                percent(one_minus_k)
            ),
        ),
        LossModel::FourState {
            p13,
            p31,
            p32,
            p23,
            p14,
        } => put(
            "loss",
            format!(
                "state:{},{},{},{},{}",
                percent(p13),
                percent(p31),
                percent(p32),
                percent(p23),
                percent(p14)
            ),
        ),
    }
    if c.duplicate != d.duplicate {
        put("duplicate", percent(c.duplicate));
    }
    if c.corrupt != d.corrupt {
        put("corrupt", percent(c.corrupt));
    }
    if let Some(r) = c.reorder {
        put(
            "reorder",
            match r.gap {
                Some(gap) => format!("{},gap={gap}", percent(r.probability)),
                None => percent(r.probability),
            },
        );
    }
    if let Some(bps) = c.rate_bps {
        put("rate", rate(bps));
    }
    if c.overhead_bytes != d.overhead_bytes {
        put("overhead", c.overhead_bytes.to_string());
    }
    if c.limit_frames != d.limit_frames {
        put(
            "limit",
            c.limit_frames.map_or("none".into(), |n| n.to_string()),
        );
    }
    if let Some(bytes) = c.limit_bytes {
        put("limit-bytes", bytes.to_string());
    }
    let (a, da) = (&c.aqm, &d.aqm);
    if a.discipline != da.discipline {
        put("aqm", a.discipline.name().into());
    }
    if let Some(target) = a.target_ns {
        put("target", format_duration_ns(target));
    }
    if a.interval_ns != da.interval_ns {
        put("interval", format_duration_ns(a.interval_ns));
    }
    if a.flows != da.flows {
        put("flows", a.flows.to_string());
    }
    if a.quantum != da.quantum {
        put("quantum", a.quantum.to_string());
    }
    if let Some(tupdate) = a.tupdate_ns {
        put("tupdate", format_duration_ns(tupdate));
    }
    if let Some(alpha) = a.alpha {
        put("alpha", alpha.to_string());
    }
    if let Some(beta) = a.beta {
        put("beta", beta.to_string());
    }
    if a.max_burst_ns != da.max_burst_ns {
        put("max-burst", format_duration_ns(a.max_burst_ns));
    }
    if a.coupling != da.coupling {
        put("coupling", a.coupling.to_string());
    }
    if a.step_ns != da.step_ns {
        put("step", format_duration_ns(a.step_ns));
    }
    if a.ecn {
        put("ecn", "on".into());
    }
    if c.schedule.is_some() {
        put("schedule", "(file)".into());
    }
    if let Some(trace) = &c.trace {
        put("trace", trace.source().unwrap_or("(file)").to_string());
    }
    if let Some(t) = &c.delay_trace {
        if let Some(file) = &t.file {
            put("delay-trace", file.source().unwrap_or("(file)").to_string());
        }
        if let Some(step) = t.step_ns {
            put("delay-trace-step", format_duration_ns(step));
        }
        if t.mode != latlab_link::delay_trace::DelayTraceMode::default() {
            put("delay-trace-mode", t.mode.name().into());
        }
    }
    if let Some(s) = &c.slot {
        match &s.gap {
            Some(gap @ latlab_link::SlotGap::Uniform { .. }) => put("slot", slot::gap_text(gap)),
            Some(gap) => put("slot-dist", slot::gap_text(gap)),
            None => {}
        }
        if let Some(n) = s.frames {
            put("slot-packets", n.to_string());
        }
        if let Some(n) = s.bytes {
            put("slot-bytes", n.to_string());
        }
    }
    out.join(" ")
}

/// A rate in the largest unit of 1000 that shows it exactly.
fn rate(bps: u64) -> String {
    for (unit, name) in [
        (1_000_000_000, "gbit"),
        (1_000_000, "mbit"),
        (1_000, "kbit"),
    ] {
        if bps % unit == 0 {
            return format!("{}{name}", bps / unit);
        }
    }
    format!("{bps}bit")
}

/// A probability as a percentage, to a millionth of a percent.
fn percent(p: f64) -> String {
    let text = format!("{:.6}", p * 100.0);
    format!("{}%", text.trim_end_matches('0').trim_end_matches('.'))
}

#[cfg(test)]
mod tests;
