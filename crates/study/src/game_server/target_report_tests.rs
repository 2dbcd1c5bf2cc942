use std::collections::BTreeMap;

use latlab_probe::protocol::ProtocolSummary;
use latlab_stats::Summary;

use super::*;
use crate::game_server::target::key;
use crate::points::{Existing, PointsDir};

/// A point of a server that answers `capacity` requests a second, each in about `base_us`
/// µs (longer as the load nears capacity), with its histogram.
fn point(phase: &str, load: f64, fraction: Option<f64>) -> (TargetPoint, LatencyHistogram) {
    let capacity = 3_000.0;
    let sent = (load / 2.0) as u64;
    let answered = (sent as f64 * (capacity / load).min(1.0)) as u64;
    let mut h = LatencyHistogram::new();
    for i in 0..answered {
        h.record(50_000 + (load as u64) * 10 + (i % 100) * 1_000);
    }
    let mut outcomes = BTreeMap::new();
    outcomes.insert("NOERROR".to_string(), answered);
    outcomes.insert("SERVFAIL".to_string(), 0);
    let counts = ProtocolSummary {
        name: "dns".into(),
        answered,
        unanswered: sent - answered,
        late: 0,
        duplicate: 1,
        wrong_id: 2,
        wrong_source: 0,
        malformed: BTreeMap::from([("not dns".to_string(), 3)]),
        mismatch: BTreeMap::new(),
        outcomes,
        ids_reused: 0,
        busy: 0,
        schedule: "open-loop".into(),
        server_time_ns: None,
        path_ns: None,
        limit: None,
    };
    let p = TargetPoint {
        phase: phase.into(),
        target: "198.18.0.2:53".into(),
        protocol: "dns".into(),
        link: None,
        load_pps: load,
        load_fraction: fraction,
        sent,
        answered,
        unanswered: sent - answered,
        unsent: 0,
        loss_ratio: (sent - answered) as f64 / sent as f64,
        achieved_pps: load,
        latency_ns: Summary::with_quantiles(&h, &QUANTILES),
        send_failed: BTreeMap::new(),
        protocol_counts: Some(counts),
        lost_by_cause: None,
    };
    (p, h)
}

fn folder() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    let dir = PointsDir::create(&out, Existing::Refuse).unwrap();
    let write = |phase: &str, load: f64, fraction: Option<f64>| {
        let (p, h) = point(phase, load, fraction);
        dir.write(&key(phase, "dns", load), &p, Some((&h, "test")))
            .unwrap();
    };
    for load in [1000.0, 2000.0, 3000.0, 4000.0, 5000.0] {
        write("sweep", load, None);
    }
    for (f, load) in super::super::target::table_loads(4000.0) {
        write("table", load, Some(f));
    }
    (tmp, out)
}

#[test]
fn the_report_names_the_server_protocol_first_drop_and_draws_every_artefact() {
    let (_tmp, out) = folder();
    assert!(holds_target_points(&out));
    let report = write(&out, "target 198.18.0.2:53, protocol dns").unwrap();
    let md = std::fs::read_to_string(&report).unwrap();
    assert!(md.contains("- server: 198.18.0.2:53"), "{md}");
    assert!(md.contains("- protocol: dns"));
    assert!(md.contains("- link: none emulated"));
    // 4000/s loses 25% (the first above 5%); 3000/s answered everything.
    assert!(
        md.contains("First drop: **4000 requests/s** (the load below it, 3000/s"),
        "{md}"
    );
    for file in [
        "table1.md",
        "table1.csv",
        "fig2-latency-vs-load.svg",
        "fig3-ccdf.svg",
    ] {
        assert!(out.join(file).is_file(), "{file}");
        assert!(md.contains(file), "report.md names {file}");
    }
    let table = std::fs::read_to_string(out.join("table1.md")).unwrap();
    // Three rows, in fraction order, at 20/90/110% of the first drop.
    let rows: Vec<&str> = table.lines().skip(2).collect();
    assert_eq!(rows.len(), 3, "{table}");
    assert!(rows[0].starts_with("| 20% | 800 |"), "{table}");
    assert!(rows[1].starts_with("| 90% | 3600 |"));
    assert!(rows[2].starts_with("| 110% | 4400 |"));
    let csv = std::fs::read_to_string(out.join("table1.csv")).unwrap();
    assert_eq!(csv.lines().count(), 4);
    assert!(csv.lines().next().unwrap().ends_with("p99_ns,p99_9_ns"));
    // The protocol's counts per point, every point a row.
    assert!(md.contains("| target-sweep-dns-4000pps | 2000 | 1500 | 500 | 0 | 0 | 1 | 2 | 0 | not dns 3 | 0 | NOERROR 1500 |"), "{md}");
    assert_eq!(md.matches("| target-").count(), 8);
    assert!(!md.contains("limiter"));
    // Drawn from the points alone: drawing again gives the same bytes.
    let first: Vec<Vec<u8>> = [
        "report.md",
        "table1.md",
        "fig2-latency-vs-load.svg",
        "fig3-ccdf.svg",
    ]
    .iter()
    .map(|f| std::fs::read(out.join(f)).unwrap())
    .collect();
    write(&out, "target 198.18.0.2:53, protocol dns").unwrap();
    for (i, f) in [
        "report.md",
        "table1.md",
        "fig2-latency-vs-load.svg",
        "fig3-ccdf.svg",
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(std::fs::read(out.join(f)).unwrap(), first[i], "{f}");
    }
}

#[test]
fn a_server_limit_is_named_as_the_first_drop_and_bad_files_are_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    let dir = PointsDir::create(&out, Existing::Refuse).unwrap();
    for load in [1000.0, 4000.0] {
        let (mut p, h) = point("sweep", load, None);
        p.protocol_counts.as_mut().unwrap().limit =
            Some("the engine answers at most 10 per second per address".into());
        dir.write(&key("sweep", "quake3", load), &p, Some((&h, "test")))
            .unwrap();
    }
    std::fs::write(out.join("points/target-sweep-quake3-9pps.json"), "{").unwrap();
    let md = std::fs::read_to_string(write(&out, "lab").unwrap()).unwrap();
    assert!(md.contains("The first drop is the server's own limiter, not its capacity: the engine answers at most 10"), "{md}");
    assert!(
        md.contains("- skipped: target-sweep-quake3-9pps.json"),
        "{md}"
    );
    assert!(md.contains("No table points were measured."));
    assert!(md.contains("- not drawn: fig3-ccdf.svg"));
}

#[test]
fn a_folder_of_the_model_server_is_not_a_target_folder() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    let dir = PointsDir::create(&out, Existing::Refuse).unwrap();
    assert!(!holds_target_points(&out));
    dir.write("sweep-socket-c4-b16k-1000pps", &1u32, None)
        .unwrap();
    assert!(!holds_target_points(&out));
}
