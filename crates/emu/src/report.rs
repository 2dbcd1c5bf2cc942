//! What `latlab emu` writes at exit: counters by cause and release-error summaries, per
//! direction, and with per-flow rules per flow (`flows`, only then, so a run without rules
//! writes what it always has). The `--json` file is [`EmuJson`] (`json.rs`), written and read
//! back as that type; this module also prints the summary for the terminal.

use latlab_engine::emulator::{CpuUse, EmulatorReport, FlowReport};
use latlab_stats::Summary;

use latlab_lab::units::format_us;

mod events;
mod json;
pub use events::{
    control_events_json, event_changes_json, events_json, EmuEventChangeJson, EmuEventJson,
};
pub use json::{
    DualQueueJson, DualQueuesJson, EmuByteDropsJson, EmuBytesJson, EmuChangeJson, EmuCpuJson,
    EmuDirectionJson, EmuDropsJson, EmuFlowJson, EmuJson, EmuSleepsJson, UnfinishedJson,
    WireFramesJson,
};

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
             runt {}, oversized {}, outage {}, tx ring full {}, too long to send {}; duplicated {}, \
             corrupted {}, reordered {}; queued at exit {}; release error p50 {}, p99 {}, max {}\n",
            l.arrived,
            d.sent,
            l.dropped_loss,
            l.dropped_queue_frames,
            l.dropped_queue_bytes,
            l.dropped_runt,
            l.dropped_oversized,
            l.dropped_outage,
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
        if let Some(sojourn) = &d.sojourn {
            out.push_str(&aqm_line(l, sojourn));
        }
        if let Some(dual) = &d.dual_sojourn {
            let queues = [
                ("L4S", l.aqm_l4s_mark, l.aqm_l4s_drop, &dual.l4s),
                (
                    "classic",
                    l.aqm_classic_mark,
                    l.aqm_classic_drop,
                    &dual.classic,
                ),
            ];
            for (queue, marked, dropped, h) in queues {
                out.push_str(&format!(
                    "  dualpi2 {queue} queue: sent {}, marked {marked}, dropped {dropped}; {}\n",
                    h.len(),
                    sojourn_text(h)
                ));
            }
        }
        for f in &d.flows {
            out.push_str(&flow_line(f));
        }
    }
    out.push_str(&events::event_lines(report));
    out.push_str(&cpu_line(&report.cpu));
    out.push_str(&format!("{}\n", report.host_stalls.report().line()));
    out
}

/// A queue discipline's line under its direction's: `  aqm: dropped 12, overflow 0, marked
/// 3 (ECN); sojourn p50 2.1 ms, p99 6.0 ms, max 9.8 ms`.
fn aqm_line(l: &latlab_link::LinkCounters, sojourn: &latlab_stats::LatencyHistogram) -> String {
    format!(
        "  aqm: dropped {}, overflow {}, marked {} (ECN); {}\n",
        l.aqm_drop,
        l.aqm_overflow,
        l.aqm_mark,
        sojourn_text(sojourn),
    )
}

/// `sojourn p50 2.1 ms, p99 6.0 ms, max 9.8 ms` (`-` for a percentile too few frames bound).
fn sojourn_text(sojourn: &latlab_stats::LatencyHistogram) -> String {
    let s = Summary::from_histogram(sojourn);
    let at = |p: &str| {
        s.percentile(p)
            .and_then(|p| p.estimate.value_ns())
            .map_or("-".to_string(), |v| format_us(v as f64))
    };
    format!(
        "sojourn p50 {}, p99 {}, max {}",
        at("p50"),
        at("p99"),
        format_us(s.max_ns as f64)
    )
}

/// `CPU: 0.23 of a core (1 thread), 4.1% of the run in its sends, sleeping until 12.0 µs
/// before each departure`.
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
    let sends = match cpu.send_ns {
        0 => String::new(),
        _ => format!(", {:.1}% of the run in its sends", 100.0 * cpu.send_share()),
    };
    format!(
        "CPU: {:.2} of a core ({} {threads}){sends}{wait}\n",
        cpu.cores(),
        cpu.threads
    )
}

/// A flow's line under its direction's: `  flow proto=udp dport=27015 (loss=5%): ...`.
fn flow_line(f: &FlowReport) -> String {
    let spec = crate::api::spec_text(&f.config);
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
    use latlab_engine::emulator::{ByteCounters, DirectionReport};
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
            socket: Default::default(),
            wire: Default::default(),
            release_error: LatencyHistogram::new(),
            sojourn: None,
            dual_sojourn: None,
            released_early: 0,
            bytes: ByteCounters::default(),
            events: Vec::new(),
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
            event_changes: Vec::new(),
            start_ns: 0,
            changes: Vec::new(),
            tap_full: 0,
            fates: None,
            cpu: CpuUse::default(),
            host_stalls: latlab_stats::stalls::Stalls::new(Default::default()),
        }
    }

    #[test]
    fn dualpi2_has_a_line_per_queue_only_with_it() {
        let mut report = report(false);
        assert!(!summary_text(&report).contains("dualpi2"));
        let mut dual = latlab_link::DualSojourn::default();
        dual.l4s.record(400_000);
        for ns in [10_000_000, 20_000_000] {
            dual.classic.record(ns);
        }
        let link = &mut report.a_to_b.link;
        (link.aqm_l4s_mark, link.aqm_classic_drop) = (3, 4);
        report.a_to_b.dual_sojourn = Some(dual);
        let text = summary_text(&report);
        let lines: Vec<&str> = text.lines().filter(|l| l.contains("dualpi2")).collect();
        assert_eq!(lines.len(), 2, "{text}");
        assert!(
            lines[0].starts_with("  dualpi2 L4S queue: sent 1, marked 3, dropped 0; sojourn p50 "),
            "{text}"
        );
        assert!(
            lines[1].starts_with("  dualpi2 classic queue: sent 2, marked 0, dropped 4; sojourn "),
            "{text}"
        );
    }

    #[test]
    fn flows_are_reported_with_rules_only() {
        let plain = EmuJson::new(&report(false)).to_value();
        assert!(plain["a_to_b"].get("flows").is_none());
        assert!(!summary_text(&report(false)).contains("flow"));

        let json = EmuJson::new(&report(true)).to_value();
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
