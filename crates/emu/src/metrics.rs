//! The running emulator's counters in the Prometheus text exposition format (version 0.0.4),
//! for `GET /metrics` of `latlab emu --api`.
//!
//! Every metric is named `latlab_emu_*` and labelled with its `direction` (`a_to_b`,
//! `b_to_a`); drops also with their `cause`, in the words of the `--json` report. Per
//! direction the counters add up as the report's do: `arrived + duplicated = forwarded +
//! dropped (all causes) + queue` (frames still on their way to the link model are in the
//! queue gauge). Frames the kernel dropped before the emulator read them are known only at
//! exit, from the JSON report.
//!
//! With a queue discipline (`aqm`), its drops are the causes `aqm` and `aqm_overflow` (in
//! frames only), its ECN marks `latlab_emu_aqm_marked_frames_total`, and the time frames
//! spent in its queue `latlab_emu_sojourn_seconds`. Under DualPI2 (`aqm=dualpi2`) the same
//! again for each of its queues, labelled also with its `queue` (`l4s`, `classic`):
//! `latlab_emu_dualpi2_{marked,dropped}_frames_total` and `latlab_emu_dualpi2_sojourn_seconds`
//! (they add up to the totals above).
//!
//! With per-flow rules, `latlab_emu_flow_*` give each flow's frames, labelled also with its
//! `flow`: the rule's match (`proto=udp dport=27015`), or `default`; per flow, `arrived +
//! duplicated = forwarded + dropped + queue`. Without rules they are not written.

use std::fmt::Write;

use latlab_engine::emulator::{
    ConfigChange, DirectionSnapshot, FlowReport, LinkDirection, Snapshot,
};
use latlab_stats::LatencyHistogram;

/// Upper bounds of the release-error histogram's buckets, seconds.
pub const RELEASE_ERROR_BUCKETS: [f64; 13] = [
    1e-6, 2e-6, 5e-6, 1e-5, 2e-5, 5e-5, 1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2,
];

/// Upper bounds of the sojourn-time histogram's buckets (time in a queue discipline's queue),
/// seconds.
pub const SOJOURN_BUCKETS: [f64; 13] = [
    1e-4, 2e-4, 5e-4, 1e-3, 2e-3, 5e-3, 1e-2, 2e-2, 5e-2, 0.1, 0.2, 0.5, 1.0,
];

/// Drop causes, as labels, and how to read (frames, bytes) of each from a direction; `None`
/// bytes for a cause counted in frames only (a queue discipline's drops), whose bytes series
/// is not written.
type Cause = (&'static str, fn(&DirectionSnapshot) -> (u64, Option<u64>));

const CAUSES: [Cause; 12] = [
    ("loss", |d| {
        (
            d.report.link.dropped_loss,
            Some(d.report.bytes.dropped_loss),
        )
    }),
    ("queue_frames", |d| {
        let (l, b) = (&d.report.link, &d.report.bytes);
        (l.dropped_queue_frames, Some(b.dropped_queue_frames))
    }),
    ("queue_bytes", |d| {
        let (l, b) = (&d.report.link, &d.report.bytes);
        (l.dropped_queue_bytes, Some(b.dropped_queue_bytes))
    }),
    ("runt", |d| {
        (
            d.report.link.dropped_runt,
            Some(d.report.bytes.dropped_runt),
        )
    }),
    ("oversized", |d| {
        let (l, b) = (&d.report.link, &d.report.bytes);
        (l.dropped_oversized, Some(b.dropped_oversized))
    }),
    ("outage", |d| {
        let (l, b) = (&d.report.link, &d.report.bytes);
        (l.dropped_outage, Some(b.dropped_outage))
    }),
    ("queue_slots_full", |d| {
        (
            d.report.queue_slots_full,
            Some(d.report.bytes.queue_slots_full),
        )
    }),
    ("tx_ring_full", |d| {
        (d.report.tx_ring_full, Some(d.report.bytes.tx_ring_full))
    }),
    ("tx_too_long", |d| {
        (d.report.tx_too_long, Some(d.report.bytes.tx_too_long))
    }),
    ("tx_too_short", |d| {
        (d.report.tx_too_short, Some(d.report.bytes.tx_too_short))
    }),
    ("aqm", |d| (d.report.link.aqm_drop, None)),
    ("aqm_overflow", |d| (d.report.link.aqm_overflow, None)),
];

/// The exposition of `snapshot`, with the number of `changes` per direction.
pub fn exposition(snapshot: &Snapshot, changes: &[ConfigChange]) -> String {
    let dirs = [
        (LinkDirection::AToB, &snapshot.a_to_b),
        (LinkDirection::BToA, &snapshot.b_to_a),
    ];
    let mut out = String::new();
    let mut family =
        |name: &str, kind: &str, help: &str, value: &dyn Fn(&DirectionSnapshot) -> u64| {
            head(&mut out, name, kind, help);
            for (dir, d) in dirs {
                let _ = writeln!(out, "{name}{{direction=\"{}\"}} {}", dir.name(), value(d));
            }
        };
    family(
        "latlab_emu_arrived_frames_total",
        "counter",
        "Frames read from the receiving interface.",
        &|d| d.report.arrived,
    );
    family(
        "latlab_emu_arrived_bytes_total",
        "counter",
        "Bytes of the frames read from the receiving interface.",
        &|d| d.report.bytes.arrived,
    );
    family(
        "latlab_emu_forwarded_frames_total",
        "counter",
        "Frames sent on to the other interface (duplicates included).",
        &|d| d.report.sent,
    );
    family(
        "latlab_emu_forwarded_bytes_total",
        "counter",
        "Bytes of the frames sent on.",
        &|d| d.report.bytes.sent,
    );
    family(
        "latlab_emu_duplicated_frames_total",
        "counter",
        "Extra copies the link model made.",
        &|d| d.report.link.duplicated,
    );
    family(
        "latlab_emu_corrupted_frames_total",
        "counter",
        "Delivered frames with a bit flipped.",
        &|d| d.report.link.corrupted,
    );
    family(
        "latlab_emu_reordered_frames_total",
        "counter",
        "Delivered frames sent ahead of the queue.",
        &|d| d.report.link.reordered,
    );
    family(
        "latlab_emu_aqm_marked_frames_total",
        "counter",
        "Frames the queue discipline marked CE (ECN) instead of dropping them.",
        &|d| d.report.link.aqm_mark,
    );
    family(
        "latlab_emu_released_early_frames_total",
        "counter",
        "Frames sent before their intended departure.",
        &|d| d.report.released_early,
    );
    family(
        "latlab_emu_queue_frames",
        "gauge",
        "Frames held by the link model, waiting for their departure.",
        &|d| d.queued_frames,
    );
    family(
        "latlab_emu_queue_bytes",
        "gauge",
        "Bytes of the frames held by the link model.",
        &|d| d.queued_bytes,
    );
    for (i, (name, help)) in [
        (
            "latlab_emu_dropped_frames_total",
            "Frames dropped, by cause.",
        ),
        (
            "latlab_emu_dropped_bytes_total",
            "Bytes of the frames dropped, by cause.",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        head(&mut out, name, "counter", help);
        for (dir, d) in dirs {
            for (cause, read) in CAUSES {
                let (frames, bytes) = read(d);
                let Some(value) = (if i == 0 { Some(frames) } else { bytes }) else {
                    continue;
                };
                let _ = writeln!(
                    out,
                    "{name}{{direction=\"{}\",cause=\"{cause}\"}} {value}",
                    dir.name()
                );
            }
        }
    }
    let name = "latlab_emu_config_changes_total";
    head(
        &mut out,
        name,
        "counter",
        "Configuration changes applied while running.",
    );
    for (dir, _) in dirs {
        let n = changes.iter().filter(|c| c.direction == dir).count();
        let _ = writeln!(out, "{name}{{direction=\"{}\"}} {n}", dir.name());
    }
    events(&mut out, snapshot, &dirs);
    let name = "latlab_emu_release_error_seconds";
    head(
        &mut out,
        name,
        "histogram",
        "Actual minus intended departure of every frame sent.",
    );
    for (dir, d) in dirs {
        let h = &d.report.release_error;
        let labels = format!("direction=\"{}\"", dir.name());
        histogram(&mut out, name, &labels, h, &RELEASE_ERROR_BUCKETS);
    }
    if dirs.iter().any(|(_, d)| d.report.sojourn.is_some()) {
        let name = "latlab_emu_sojourn_seconds";
        head(
            &mut out,
            name,
            "histogram",
            "Time every frame sent spent in the queue discipline's queue (aqm).",
        );
        let empty = LatencyHistogram::new();
        for (dir, d) in dirs {
            let h = d.report.sojourn.as_ref().unwrap_or(&empty);
            let labels = format!("direction=\"{}\"", dir.name());
            histogram(&mut out, name, &labels, h, &SOJOURN_BUCKETS);
        }
    }
    dual_queues(&mut out, &dirs);
    flows(&mut out, &dirs);
    let name = "latlab_emu_uptime_seconds";
    head(
        &mut out,
        name,
        "gauge",
        "Time since the emulator started, at this snapshot.",
    );
    let _ = writeln!(out, "{name} {}", snapshot.at_ns as f64 / 1e9);
    out
}

/// The events families: how many of each kind began, how many are in force, and when each
/// began (seconds since the start, labelled with the event as written and its number).
fn events(out: &mut String, snapshot: &Snapshot, dirs: &[(LinkDirection, &DirectionSnapshot); 2]) {
    let now_ns = snapshot.start_ns + snapshot.at_ns;
    let began = |r: &&latlab_link::EventRecord| r.begin_ns <= now_ns;
    let name = "latlab_emu_events_total";
    let help = "Events (lag spikes, outages, flaps) begun, scheduled or asked for.";
    head(out, name, "counter", help);
    for (dir, d) in dirs {
        for kind in latlab_link::event::EVENT_NAMES {
            let n = d.report.events.iter().filter(began);
            let n = n.filter(|r| r.event.name() == kind).count();
            let _ = writeln!(
                out,
                "{name}{{direction=\"{}\",event=\"{kind}\"}} {n}",
                dir.name()
            );
        }
    }
    let name = "latlab_emu_events_in_force";
    head(out, name, "gauge", "Events in force at this snapshot.");
    for (dir, d) in dirs {
        let n = d.report.events.iter().filter(began);
        let n = n
            .filter(|r| r.end_ns.is_none_or(|end| now_ns < end))
            .count();
        let _ = writeln!(out, "{name}{{direction=\"{}\"}} {n}", dir.name());
    }
    if dirs
        .iter()
        .all(|(_, d)| !d.report.events.iter().any(|r| began(&r)))
    {
        return;
    }
    let name = "latlab_emu_event_begin_seconds";
    head(
        out,
        name,
        "gauge",
        "When each event began, seconds since the emulator started.",
    );
    for (dir, d) in dirs {
        for (n, r) in d.report.events.iter().filter(began).enumerate() {
            let at = r.begin_ns.saturating_sub(snapshot.start_ns) as f64 / 1e9;
            let _ = writeln!(
                out,
                "{name}{{direction=\"{}\",n=\"{}\",event=\"{}\"}} {at}",
                dir.name(),
                n + 1,
                r.event
            );
        }
    }
}

/// DualPI2's families, queue by queue, if any direction runs it.
fn dual_queues(out: &mut String, dirs: &[(LinkDirection, &DirectionSnapshot); 2]) {
    if dirs.iter().all(|(_, d)| d.report.dual_sojourn.is_none()) {
        return;
    }
    type Count = fn(&latlab_link::LinkCounters) -> [u64; 2];
    let counts: [(&str, &str, Count); 2] = [
        (
            "latlab_emu_dualpi2_marked_frames_total",
            "Frames DualPI2 marked CE, by queue.",
            |l| [l.aqm_l4s_mark, l.aqm_classic_mark],
        ),
        (
            "latlab_emu_dualpi2_dropped_frames_total",
            "Frames DualPI2's AQM dropped, by queue.",
            |l| [l.aqm_l4s_drop, l.aqm_classic_drop],
        ),
    ];
    const QUEUES: [&str; 2] = ["l4s", "classic"];
    for (name, help, count) in counts {
        head(out, name, "counter", help);
        for (dir, d) in dirs {
            for (queue, n) in QUEUES.into_iter().zip(count(&d.report.link)) {
                let _ = writeln!(
                    out,
                    "{name}{{direction=\"{}\",queue=\"{queue}\"}} {n}",
                    dir.name()
                );
            }
        }
    }
    let name = "latlab_emu_dualpi2_sojourn_seconds";
    head(
        out,
        name,
        "histogram",
        "Time every frame DualPI2 sent spent in its queue, by queue.",
    );
    let empty = latlab_link::DualSojourn::default();
    for (dir, d) in dirs {
        let dual = d.report.dual_sojourn.as_ref().unwrap_or(&empty);
        for (queue, h) in QUEUES.into_iter().zip([&dual.l4s, &dual.classic]) {
            let labels = format!("direction=\"{}\",queue=\"{queue}\"", dir.name());
            histogram(out, name, &labels, h, &SOJOURN_BUCKETS);
        }
    }
}

/// What a flow's counter reads.
type FlowValue = fn(&FlowReport) -> u64;

/// The per-flow families, if any direction has rules.
fn flows(out: &mut String, dirs: &[(LinkDirection, &DirectionSnapshot); 2]) {
    if dirs.iter().all(|(_, d)| d.report.flows.is_empty()) {
        return;
    }
    let families: [(&str, &str, &str, FlowValue); 5] = [
        (
            "latlab_emu_flow_arrived_frames_total",
            "counter",
            "Frames of the flow that reached its link model.",
            |f| f.link.arrived,
        ),
        (
            "latlab_emu_flow_duplicated_frames_total",
            "counter",
            "Extra copies the flow's link model made.",
            |f| f.link.duplicated,
        ),
        (
            "latlab_emu_flow_forwarded_frames_total",
            "counter",
            "Frames of the flow sent on (duplicates included).",
            |f| f.sent,
        ),
        (
            "latlab_emu_flow_dropped_frames_total",
            "counter",
            "Frames of the flow dropped, whatever the cause.",
            FlowReport::dropped,
        ),
        (
            "latlab_emu_flow_queue_frames",
            "gauge",
            "Frames of the flow held by its link model.",
            |f| f.queued,
        ),
    ];
    for (name, kind, help, value) in families {
        head(out, name, kind, help);
        for (dir, d) in dirs {
            for f in &d.report.flows {
                let flow = label(f.matcher.as_deref().unwrap_or("default"));
                let _ = writeln!(
                    out,
                    "{name}{{direction=\"{}\",flow=\"{flow}\"}} {}",
                    dir.name(),
                    value(f)
                );
            }
        }
    }
}

/// `text` as a label value: backslash, double quote and newline escaped.
fn label(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn head(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The buckets (cumulative, upper bounds `buckets` in seconds), sum and count of one
/// histogram of ns, its series labelled with `labels` (`direction="a_to_b"`).
fn histogram(out: &mut String, name: &str, labels: &str, h: &LatencyHistogram, buckets: &[f64]) {
    let recorded: Vec<(u64, u64)> = h
        .as_hdr()
        .iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect();
    for &le in buckets {
        let le_ns = (le * 1e9).round() as u64;
        let count: u64 = recorded
            .iter()
            .filter(|&&(v, _)| v <= le_ns)
            .map(|&(_, n)| n)
            .sum();
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {count}");
    }
    let total = h.len();
    let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {total}");
    let sum = if total == 0 {
        0.0
    } else {
        h.mean() * total as f64 / 1e9
    };
    let _ = writeln!(out, "{name}_sum{{{labels}}} {sum}");
    let _ = writeln!(out, "{name}_count{{{labels}}} {total}");
}

#[cfg(test)]
mod tests;
