use std::collections::BTreeMap;

use latlab_engine::emulator::DirectionReport;
use latlab_link::LinkCounters;

use super::*;

/// A direction as a running engine could report it: 100 frames in, 3 copies, 90 out, 5 lost,
/// 2 over the queue limit, 1 refused by the TX ring, 5 still queued.
fn direction() -> DirectionSnapshot {
    let mut release_error = LatencyHistogram::new();
    for ns in [500, 1_500, 3_000, 40_000, 2_000_000, 50_000_000] {
        release_error.record(ns);
    }
    let bytes = latlab_engine::emulator::ByteCounters {
        arrived: 10_000,
        sent: 9_300,
        dropped_loss: 500,
        dropped_queue_frames: 200,
        tx_ring_full: 100,
        ..Default::default()
    };
    DirectionSnapshot {
        report: DirectionReport {
            arrived: 100,
            link: LinkCounters {
                arrived: 100,
                delivered: 93,
                duplicated: 3,
                dropped_loss: 5,
                dropped_queue_frames: 2,
                ..LinkCounters::default()
            },
            sent: 90,
            tx_ring_full: 1,
            tx_too_long: 0,
            tx_too_short: 0,
            queued_at_exit: 0,
            queue_slots_full: 0,
            kernel_drops: 0,
            socket: Default::default(),
            release_error,
            sojourn: None,
            dual_sojourn: None,
            released_early: 0,
            bytes,
            wire: Default::default(),
            events: Vec::new(),
            flows: Vec::new(),
        },
        queued_frames: 5,
        queued_bytes: 500,
    }
}

/// A parsed exposition: samples by name and labels, after checking every line's syntax and
/// that each family's `# TYPE` comes before its samples.
fn parse(text: &str) -> Samples {
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut samples = BTreeMap::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            assert!(
                types.insert(name.into(), kind.into()).is_none(),
                "{name} typed twice"
            );
            continue;
        }
        if line.starts_with("# HELP ") {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let value: f64 = value.parse().unwrap_or_else(|_| panic!("{line}: value"));
        let (name, labels) = match series.split_once('{') {
            Some((name, labels)) => (name, labels.strip_suffix('}').expect(line)),
            None => (series, ""),
        };
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "{line}: name"
        );
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "{line}: no # TYPE before it");
        let mut parsed = BTreeMap::new();
        for pair in labels.split(',').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').expect(line);
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .expect(line);
            assert!(
                k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
                "{line}"
            );
            assert!(!v.contains('"') && !v.contains('\\'), "{line}");
            parsed.insert(k.to_string(), v.to_string());
        }
        assert!(
            samples.insert((name.to_string(), parsed), value).is_none(),
            "{line}: twice"
        );
    }
    samples
}

/// The exposition of a snapshot with `a_to_b` and the plain [`direction`] from B to A.
fn exposed(a_to_b: DirectionSnapshot) -> String {
    let snapshot = Snapshot {
        at_ns: 1,
        start_ns: 0,
        a_to_b,
        b_to_a: direction(),
    };
    exposition(&snapshot, &[])
}

/// What [`parse`] reads: samples by name and labels.
type Samples = BTreeMap<(String, BTreeMap<String, String>), f64>;

/// A reader of `samples` by name and labels, which shows the whole exposition `text` when a
/// sample is missing.
fn getter<'a>(samples: &'a Samples, text: &'a str) -> impl Fn(&str, &[(&str, &str)]) -> f64 + 'a {
    move |name, l| {
        *samples
            .get(&(name.to_string(), labels(l)))
            .unwrap_or_else(|| panic!("{name} {l:?} missing:\n{text}"))
    }
}

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn the_exposition_parses_and_its_counters_add_up() {
    let snapshot = Snapshot {
        at_ns: 3_000_000_000,
        start_ns: 0,
        a_to_b: direction(),
        b_to_a: direction(),
    };
    let text = exposition(&snapshot, &[]);
    let samples = parse(&text);
    let get = getter(&samples, &text);
    for dir in ["a_to_b", "b_to_a"] {
        let d = [("direction", dir)];
        let dropped: f64 = CAUSES
            .iter()
            .map(|(cause, _)| {
                get(
                    "latlab_emu_dropped_frames_total",
                    &[("direction", dir), ("cause", cause)],
                )
            })
            .sum();
        // arrived + copies = forwarded + dropped + still queued.
        assert_eq!(
            get("latlab_emu_arrived_frames_total", &d)
                + get("latlab_emu_duplicated_frames_total", &d),
            get("latlab_emu_forwarded_frames_total", &d)
                + dropped
                + get("latlab_emu_queue_frames", &d)
        );
        let dropped_bytes: f64 = CAUSES
            .iter()
            .filter(|(_, read)| read(&direction()).1.is_some())
            .map(|(cause, _)| {
                get(
                    "latlab_emu_dropped_bytes_total",
                    &[("direction", dir), ("cause", cause)],
                )
            })
            .sum();
        assert_eq!(dropped_bytes, 800.0);
        // The histogram: cumulative buckets, +Inf equal to the count.
        let h = "latlab_emu_release_error_seconds";
        let buckets: Vec<f64> = RELEASE_ERROR_BUCKETS
            .iter()
            .map(|le| {
                get(
                    &format!("{h}_bucket"),
                    &[("direction", dir), ("le", &le.to_string())],
                )
            })
            .collect();
        assert!(buckets.windows(2).all(|w| w[0] <= w[1]), "{buckets:?}");
        assert_eq!(buckets[0], 1.0, "500 ns is within 1 µs");
        assert_eq!(buckets[12], 5.0, "all but 50 ms within 10 ms");
        assert_eq!(
            get(
                &format!("{h}_bucket"),
                &[("direction", dir), ("le", "+Inf")]
            ),
            6.0
        );
        assert_eq!(get(&format!("{h}_count"), &d), 6.0);
        let sum = get(&format!("{h}_sum"), &d);
        assert!((0.051..0.053).contains(&sum), "{sum}");
    }
    assert_eq!(get("latlab_emu_uptime_seconds", &[]), 3.0);
    assert!(
        !text.contains("latlab_emu_sojourn_seconds"),
        "no aqm, no sojourn"
    );
}

#[test]
fn a_queue_disciplines_drops_marks_and_sojourn_times_are_exposed_and_add_up() {
    // Of the 93 delivered and 3 copies, the discipline dropped 4 and made room by 1; 2 of
    // those sent were marked.
    let mut d = direction();
    d.report.link.aqm_drop = 4;
    d.report.link.aqm_overflow = 1;
    d.report.link.aqm_mark = 2;
    d.report.sent -= 5;
    let mut sojourn = LatencyHistogram::new();
    for ns in [50_000, 3_000_000, 30_000_000] {
        sojourn.record(ns);
    }
    d.report.sojourn = Some(sojourn);
    let text = exposed(d);
    let samples = parse(&text);
    let get = getter(&samples, &text);
    let a = [("direction", "a_to_b")];
    let dropped: f64 = CAUSES
        .iter()
        .map(|(cause, _)| get("latlab_emu_dropped_frames_total", &[a[0], ("cause", cause)]))
        .sum();
    assert_eq!(
        get("latlab_emu_arrived_frames_total", &a) + get("latlab_emu_duplicated_frames_total", &a),
        get("latlab_emu_forwarded_frames_total", &a) + dropped + get("latlab_emu_queue_frames", &a)
    );
    assert_eq!(
        get("latlab_emu_dropped_frames_total", &[a[0], ("cause", "aqm")]),
        4.0
    );
    assert_eq!(get("latlab_emu_aqm_marked_frames_total", &a), 2.0);
    let h = "latlab_emu_sojourn_seconds";
    assert_eq!(get(&format!("{h}_bucket"), &[a[0], ("le", "0.0001")]), 1.0);
    assert_eq!(get(&format!("{h}_bucket"), &[a[0], ("le", "0.005")]), 2.0);
    assert_eq!(get(&format!("{h}_count"), &a), 3.0);
    // The other direction has no discipline: an empty histogram.
    assert_eq!(get(&format!("{h}_count"), &[("direction", "b_to_a")]), 0.0);
    assert!(!text.contains("dropped_bytes_total{direction=\"a_to_b\",cause=\"aqm\"}"));
}

#[test]
fn dualpi2s_queues_are_exposed_each_on_its_own_and_add_up_to_the_discipline() {
    assert!(
        !exposed(direction()).contains("dualpi2"),
        "no dualpi2, no queues"
    );
    // Of the discipline's 4 drops 1 was L4S's (overload), 3 classic; its 6 marks 5 L4S's.
    let mut d = direction();
    let l = &mut d.report.link;
    (l.aqm_drop, l.aqm_l4s_drop, l.aqm_classic_drop) = (4, 1, 3);
    (l.aqm_mark, l.aqm_l4s_mark, l.aqm_classic_mark) = (6, 5, 1);
    d.report.sent -= 4;
    let mut dual = latlab_link::DualSojourn::default();
    let mut all = LatencyHistogram::new();
    for (ns, l4s) in [(80_000, true), (700_000, true), (14_000_000, false)] {
        let queue = if l4s {
            &mut dual.l4s
        } else {
            &mut dual.classic
        };
        queue.record(ns);
        all.record(ns);
    }
    (d.report.sojourn, d.report.dual_sojourn) = (Some(all), Some(dual));
    let text = exposed(d);
    let samples = parse(&text);
    let get = getter(&samples, &text);
    let a = ("direction", "a_to_b");
    let per_queue = |name: &str| ["l4s", "classic"].map(|q| get(name, &[a, ("queue", q)]));
    let dropped = per_queue("latlab_emu_dualpi2_dropped_frames_total");
    let marked = per_queue("latlab_emu_dualpi2_marked_frames_total");
    assert_eq!((dropped, marked), ([1.0, 3.0], [5.0, 1.0]));
    let aqm = get("latlab_emu_dropped_frames_total", &[a, ("cause", "aqm")]);
    assert_eq!(dropped.iter().sum::<f64>(), aqm);
    assert_eq!(
        marked.iter().sum::<f64>(),
        get("latlab_emu_aqm_marked_frames_total", &[a])
    );
    let h = "latlab_emu_dualpi2_sojourn_seconds";
    let count = per_queue(&format!("{h}_count"));
    assert_eq!(count, [2.0, 1.0]);
    assert_eq!(
        count.iter().sum::<f64>(),
        get("latlab_emu_sojourn_seconds_count", &[a])
    );
    let l4s = [a, ("queue", "l4s")];
    assert_eq!(
        get(&format!("{h}_bucket"), &[l4s[0], l4s[1], ("le", "0.0001")]),
        1.0
    );
    assert_eq!(
        get(&format!("{h}_bucket"), &[l4s[0], l4s[1], ("le", "0.001")]),
        2.0
    );
    // The other direction runs no dualpi2: zeros and empty histograms.
    let b = [("direction", "b_to_a"), ("queue", "classic")];
    assert_eq!(get(&format!("{h}_count"), &b), 0.0);
    assert_eq!(get("latlab_emu_dualpi2_dropped_frames_total", &b), 0.0);
}

#[test]
fn per_flow_families_come_with_rules_only_and_add_up_per_flow() {
    assert!(!exposed(direction()).contains("latlab_emu_flow_"));

    // The direction's 100 frames: 30 to the game port, all lost or sent; 70 others.
    let flow = |matcher: Option<&str>, link: LinkCounters, sent, dropped, queued| FlowReport {
        matcher: matcher.map(String::from),
        config: latlab_link::LinkConfig::default(),
        link,
        sent,
        dropped_by_emulator: dropped,
        queued,
    };
    let game = LinkCounters {
        arrived: 30,
        delivered: 25,
        dropped_loss: 5,
        ..LinkCounters::default()
    };
    let rest = LinkCounters {
        arrived: 70,
        delivered: 68,
        duplicated: 3,
        dropped_queue_frames: 2,
        ..LinkCounters::default()
    };
    let mut a_to_b = direction();
    a_to_b.report.flows = vec![
        flow(Some("proto=udp dport=27015"), game, 25, 0, 0),
        flow(None, rest, 65, 1, 5),
    ];
    let text = exposed(a_to_b);
    let samples = parse(&text);
    let get = |name: &str, flow: &str| {
        let l = labels(&[("direction", "a_to_b"), ("flow", flow)]);
        *samples
            .get(&(name.to_string(), l))
            .unwrap_or_else(|| panic!("{name} {flow} missing:\n{text}"))
    };
    let mut arrived = 0.0;
    for flow in ["proto=udp dport=27015", "default"] {
        assert_eq!(
            get("latlab_emu_flow_arrived_frames_total", flow)
                + get("latlab_emu_flow_duplicated_frames_total", flow),
            get("latlab_emu_flow_forwarded_frames_total", flow)
                + get("latlab_emu_flow_dropped_frames_total", flow)
                + get("latlab_emu_flow_queue_frames", flow),
            "{flow}"
        );
        arrived += get("latlab_emu_flow_arrived_frames_total", flow);
    }
    assert_eq!(arrived, 100.0, "the flows add up to the direction");
    assert_eq!(
        get(
            "latlab_emu_flow_dropped_frames_total",
            "proto=udp dport=27015"
        ),
        5.0
    );
    assert!(
        !text.contains("direction=\"b_to_a\",flow="),
        "B→A has no rules"
    );
    assert_eq!(label("a\"b\\c"), "a\\\"b\\\\c");
}
