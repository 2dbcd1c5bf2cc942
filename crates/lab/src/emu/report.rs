//! What `latlab emu` writes at exit: counters by cause and release-error summaries, per
//! direction, and with per-flow rules per flow (`flows`, only then, so a run without rules
//! writes what it always has).

use latlab_engine::emulator::{
    ByteCounters, ConfigChange, CpuUse, DirectionReport, EmulatorReport, FlowReport,
};
use latlab_stats::Summary;

use crate::units::format_us;

fn direction_json(d: &DirectionReport) -> serde_json::Value {
    let mut value = serde_json::json!({
        "arrived": d.arrived,
        "link": d.link,
        "sent": d.sent,
        "dropped_by_emulator": {
            "tx_ring_full": d.tx_ring_full,
            "tx_too_long": d.tx_too_long,
            "tx_too_short": d.tx_too_short,
            "queue_slots_full": d.queue_slots_full,
            "kernel_rx_ring": d.kernel_drops,
        },
        "queued_at_exit": d.queued_at_exit,
        "wire_frames": {
            "tags_restored": d.wire.tags_restored,
            "checksums_finished": d.wire.checksums_finished,
            "super_frames": d.wire.super_frames,
            "segments": d.wire.segments,
            "read_whole": d.wire.read_whole,
            "unfinished": d.wire.unfinished,
            "unfinished_by_cause": {
                "metadata": d.wire.unfinished_by.metadata,
                "cut": d.wire.unfinished_by.cut,
                "headers": d.wire.unfinished_by.headers,
                "protocol": d.wire.unfinished_by.protocol,
            },
            "truncated": d.wire.truncated,
            "cut_super_frames": d.wire.cut_super_frames,
        },
        "released_early": d.released_early,
        "release_error_ns": Summary::from_histogram(&d.release_error),
        "bytes": bytes_json(&d.bytes),
    });
    if !d.flows.is_empty() {
        value["flows"] = d.flows.iter().map(flow_json).collect::<Vec<_>>().into();
    }
    value
}

/// One flow: its rule's `match` (`null` for the default pipe, last), its link, and its frames:
/// `arrived + link.duplicated = forwarded + dropped + queued_at_exit`.
fn flow_json(f: &FlowReport) -> serde_json::Value {
    serde_json::json!({
        "match": f.matcher,
        "spec": crate::emu::api::spec_text(&f.config),
        "settings": crate::emu::api::direction_json(&f.config),
        "arrived": f.link.arrived,
        "forwarded": f.sent,
        "dropped": f.dropped(),
        "queued_at_exit": f.queued,
        "link": f.link,
        "dropped_by_emulator": f.dropped_by_emulator,
    })
}

fn bytes_json(b: &ByteCounters) -> serde_json::Value {
    serde_json::json!({
        "arrived": b.arrived,
        "sent": b.sent,
        "dropped": {
            "loss": b.dropped_loss,
            "queue_frames": b.dropped_queue_frames,
            "queue_bytes": b.dropped_queue_bytes,
            "runt": b.dropped_runt,
            "oversized": b.dropped_oversized,
            "queue_slots_full": b.queue_slots_full,
            "tx_ring_full": b.tx_ring_full,
            "tx_too_long": b.tx_too_long,
            "tx_too_short": b.tx_too_short,
        },
    })
}

/// The configuration changes made while running (`--api`), in order.
fn changes_json(changes: &[ConfigChange]) -> serde_json::Value {
    changes
        .iter()
        .map(|c| {
            serde_json::json!({
                "direction": c.direction.name(),
                "at_s": c.at_ns as f64 / 1e9,
                "unix_ns": c.unix_ns,
                "spec": crate::emu::api::spec_text(&c.config),
                "settings": crate::emu::api::direction_json(&c.config),
                "refused": c.refused,
            })
        })
        .collect()
}

/// The JSON written by `--json`.
pub fn report_json(report: &EmulatorReport) -> serde_json::Value {
    serde_json::json!({
        "latlab_version": env!("CARGO_PKG_VERSION"),
        "a_to_b": direction_json(&report.a_to_b),
        "b_to_a": direction_json(&report.b_to_a),
        "changes": changes_json(&report.changes),
        "pcap_dropped": report.tap_full,
        "cpu": cpu_json(&report.cpu),
    })
}

/// The CPU the emulator used, and how a blocking loop waited.
fn cpu_json(cpu: &CpuUse) -> serde_json::Value {
    serde_json::json!({
        "elapsed_ns": cpu.elapsed_ns,
        "cpu_ns": cpu.cpu_ns,
        "cores": cpu.cores(),
        "threads": cpu.threads,
        "spin_ns": cpu.sleeps.map(|s| s.spin_ns),
        "sleeps": cpu.sleeps.map(|s| serde_json::json!({
            "latest_late_ns": s.latest_late_ns,
            "timed": s.timed_sleeps,
            "asked_ns": s.asked_ns,
            "slept_ns": s.slept_ns,
        })),
    })
}

/// A few lines for the terminal.
pub fn summary_text(report: &EmulatorReport) -> String {
    let mut out = String::new();
    for (name, d) in [("A→B", &report.a_to_b), ("B→A", &report.b_to_a)] {
        let l = &d.link;
        let err = Summary::from_histogram(&d.release_error);
        let p99 = err
            .percentile("p99")
            .and_then(|p| p.estimate.value_ns())
            .map_or("-".to_string(), |v| format_us(v as f64));
        out.push_str(&format!(
            "{name}: arrived {}, sent {}, dropped: loss model {}, queue {} frames / {} bytes, \
             runt {}, oversized {}, tx ring full {}, too long to send {}; duplicated {}, \
             corrupted {}, reordered {}; queued at exit {}; release error p50 {}, p99 {}, max {}\n",
            l.arrived,
            d.sent,
            l.dropped_loss,
            l.dropped_queue_frames,
            l.dropped_queue_bytes,
            l.dropped_runt,
            l.dropped_oversized,
            d.tx_ring_full,
            d.tx_too_long,
            l.duplicated,
            l.corrupted,
            l.reordered,
            d.queued_at_exit,
            err.percentile("p50")
                .and_then(|p| p.estimate.value_ns())
                .map_or("-".to_string(), |v| format_us(v as f64)),
            p99,
            format_us(err.max_ns as f64),
        ));
        for f in &d.flows {
            out.push_str(&flow_line(f));
        }
    }
    out.push_str(&cpu_line(&report.cpu));
    out
}

/// `CPU: 0.23 of a core (1 thread), sleeping until 12.0 µs before each departure`.
fn cpu_line(cpu: &CpuUse) -> String {
    let threads = if cpu.threads == 1 {
        "thread"
    } else {
        "threads"
    };
    let wait = match cpu.sleeps.map(|s| s.spin_ns) {
        Some(ns) => format!(
            ", sleeping until {} before each departure",
            format_us(ns as f64)
        ),
        None => String::new(),
    };
    format!(
        "CPU: {:.2} of a core ({} {threads}){wait}\n",
        cpu.cores(),
        cpu.threads
    )
}

/// A flow's line under its direction's: `  flow proto=udp dport=27015 (loss=5%): ...`.
fn flow_line(f: &FlowReport) -> String {
    let spec = crate::emu::api::spec_text(&f.config);
    format!(
        "  flow {} ({}): arrived {}, sent {}, dropped {} (loss model {}, queue {}), queued at exit {}\n",
        f.matcher.as_deref().unwrap_or("default"),
        if spec.is_empty() { "no impairment" } else { &spec },
        f.link.arrived,
        f.sent,
        f.dropped(),
        f.link.dropped_loss,
        f.link.dropped_queue_frames + f.link.dropped_queue_bytes,
        f.queued,
    )
}

#[cfg(test)]
mod tests {
    use latlab_engine::emulator::ByteCounters;
    use latlab_link::{LinkConfig, LinkCounters, LossModel};
    use latlab_stats::LatencyHistogram;

    use super::*;

    /// A direction of 10 frames: 4 to the game port (lost), 6 others (sent); with or
    /// without its flows.
    fn direction(with_flows: bool) -> DirectionReport {
        let counters = |arrived, delivered, lost| LinkCounters {
            arrived,
            delivered,
            dropped_loss: lost,
            ..LinkCounters::default()
        };
        let flow = |matcher: Option<&str>, config, link, sent| FlowReport {
            matcher: matcher.map(String::from),
            config,
            link,
            sent,
            dropped_by_emulator: 0,
            queued: 0,
        };
        let lossy = LinkConfig {
            loss: LossModel::Bernoulli { p: 0.05 },
            ..LinkConfig::default()
        };
        DirectionReport {
            arrived: 10,
            link: counters(10, 6, 4),
            sent: 6,
            tx_ring_full: 0,
            tx_too_long: 0,
            tx_too_short: 0,
            queued_at_exit: 0,
            queue_slots_full: 0,
            kernel_drops: 0,
            wire: Default::default(),
            release_error: LatencyHistogram::new(),
            released_early: 0,
            bytes: ByteCounters::default(),
            flows: if with_flows {
                vec![
                    flow(Some("proto=udp dport=27015"), lossy, counters(4, 0, 4), 0),
                    flow(None, LinkConfig::default(), counters(6, 6, 0), 6),
                ]
            } else {
                Vec::new()
            },
        }
    }

    fn report(with_flows: bool) -> EmulatorReport {
        EmulatorReport {
            a_to_b: direction(with_flows),
            b_to_a: direction(false),
            changes: Vec::new(),
            tap_full: 0,
            cpu: CpuUse::default(),
        }
    }

    #[test]
    fn flows_are_reported_with_rules_only() {
        let plain = report_json(&report(false));
        assert!(plain["a_to_b"].get("flows").is_none());
        assert!(!summary_text(&report(false)).contains("flow"));

        let json = report_json(&report(true));
        let flows = json["a_to_b"]["flows"].as_array().unwrap();
        assert_eq!(flows[0]["match"], "proto=udp dport=27015");
        assert_eq!(flows[0]["spec"], "loss=5%");
        assert_eq!(
            (&flows[0]["arrived"], &flows[0]["dropped"]),
            (&4.into(), &4.into())
        );
        assert_eq!(
            flows[1]["match"],
            serde_json::Value::Null,
            "the default, last"
        );
        assert_eq!(flows[1]["forwarded"], 6);
        let mut without = json.clone();
        without["a_to_b"].as_object_mut().unwrap().remove("flows");
        assert_eq!(without, plain, "nothing else changes");
        assert!(json["b_to_a"].get("flows").is_none());

        let text = summary_text(&report(true));
        assert!(text.contains("\n  flow proto=udp dport=27015 (loss=5%): arrived 4, sent 0, dropped 4 (loss model 4, queue 0), queued at exit 0\n"), "{text}");
        assert!(
            text.contains("\n  flow default (no impairment): arrived 6, sent 6, dropped 0"),
            "{text}"
        );
    }
}
