//! What `latlab emu` writes at exit: counters by cause and release-error summaries, per
//! direction.

use latlab_engine::emulator::{ByteCounters, ConfigChange, DirectionReport, EmulatorReport};
use latlab_stats::Summary;

use crate::units::format_us;

fn direction_json(d: &DirectionReport) -> serde_json::Value {
    serde_json::json!({
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
            "truncated": d.wire.truncated,
            "cut_super_frames": d.wire.cut_super_frames,
        },
        "released_early": d.released_early,
        "release_error_ns": Summary::from_histogram(&d.release_error),
        "bytes": bytes_json(&d.bytes),
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
                "spec": crate::emuapi::spec_text(&c.config),
                "settings": crate::emuapi::direction_json(&c.config),
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
    }
    out
}
