//! The game-server report drawn from synthetic point files.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use latlab_stats::{LatencyHistogram, Summary};

use super::report::write as write_artefacts;
use super::{ClientTraffic, Point, StudyOptions, DEFAULT_RCVBUF, QUANTILES};
use crate::points::hlog_bytes;
use latlab_lab::results::write_atomic;

fn hlog_of(h: &LatencyHistogram, key: &str) -> std::io::Result<Vec<u8>> {
    hlog_bytes(
        h,
        &format!(
            "latlab game-server study point {key}: latency until the last client has its copy, ns"
        ),
    )
}

fn histogram(mean_us: f64, n: u64) -> LatencyHistogram {
    let mut h = LatencyHistogram::new();
    let mean = (mean_us * 1000.0) as u64;
    let spread = mean / 5;
    for i in 0..n {
        h.record(mean - spread + (i * 2 * spread) / n.max(1));
    }
    h
}

#[allow(clippy::too_many_arguments)]
fn write_point(
    dir: &Path,
    phase: &str,
    io_mode: &str,
    clients: u32,
    rcvbuf: usize,
    load: f64,
    loss: f64,
    mean_us: f64,
    n: u64,
    fraction: Option<f64>,
    flood: Option<(f64, Option<f64>, u64)>,
) {
    let h = histogram(mean_us, n);
    let mut server = BTreeMap::new();
    server.insert("received".to_string(), 1000);
    server.insert("rate_limited".to_string(), flood.map_or(0, |f| f.2));
    let p = Point {
        phase: phase.into(),
        io: io_mode.into(),
        clients,
        rcvbuf,
        rcvbuf_granted: rcvbuf * 2,
        load_pps: load,
        load_fraction: fraction,
        flood_pps: flood.map(|f| f.0),
        rate_limit_pps: flood.and_then(|f| f.1),
        sent: 3600,
        unsent: 0,
        complete: n,
        copies_expected: 3600 * u64::from(clients),
        copies_received: ((3600 * u64::from(clients)) as f64 * (1.0 - loss)) as u64,
        loss_ratio: loss,
        achieved_pps: 2000.0,
        latency_last_ns: Summary::with_quantiles(&h, &QUANTILES),
        latency_first_ns: Summary::with_quantiles(&h, &QUANTILES),
        server,
        flood_sent: None,
        send_failed: BTreeMap::new(),
        flood_send_failed: BTreeMap::new(),
        traffic: None,
        raised: 0,
        host_stalls: None,
        lost_by_cause: None,
    };
    // Every copy lost at the server's socket (none at a lossless point).
    let lost = p.copies_expected - p.copies_received;
    let counters = latlab_lab::losses::LossCounters {
        reflector_socket_drops: Some(lost),
        ..Default::default()
    };
    let p = Point {
        lost_by_cause: Some(latlab_lab::losses::LostByCause::place(lost, counters)),
        ..p
    };
    let mut key = format!(
        "{phase}-{io_mode}-c{clients}-b{}k-{}pps",
        rcvbuf / 1024,
        load.round() as u64
    );
    if p.rate_limit_pps.is_some() {
        key.push_str("-limited");
    }
    write_atomic(
        &dir.join(format!("{key}.hlog")),
        &hlog_of(&h, &key).unwrap(),
    )
    .unwrap();
    let json = serde_json::to_string_pretty(&p).unwrap();
    write_atomic(&dir.join(format!("{key}.json")), json.as_bytes()).unwrap();
}

/// Capacity (pps) of the synthetic server.
fn capacity(io_mode: &str, clients: u32) -> f64 {
    match (io_mode, clients) {
        ("socket", 4) => 35_000.0,
        ("socket", _) => 25_000.0,
        ("batched", 4) => 1e9,
        _ => 35_000.0,
    }
}

pub(crate) fn synthetic_study(out: &Path) {
    let dir = out.join("points");
    fs::create_dir_all(&dir).unwrap();
    let k64 = 64 * 1024;
    for io_mode in ["socket", "batched"] {
        for rcvbuf in [k64, DEFAULT_RCVBUF] {
            for clients in [4u32, 8] {
                for load in [10_000.0, 20_000.0, 30_000.0, 40_000.0] {
                    let cap = capacity(io_mode, clients);
                    let (loss, mean) = if load > cap {
                        (1.0 - cap / load, if rcvbuf == k64 { 500.0 } else { 2000.0 })
                    } else {
                        (0.0, 40.0 + load / 1000.0)
                    };
                    write_point(
                        &dir, "sweep", io_mode, clients, rcvbuf, load, loss, mean, 4000, None, None,
                    );
                }
            }
            for fraction in [0.2, 0.9, 1.1] {
                let load = 40_000.0 * fraction;
                let tiny = io_mode == "batched" && rcvbuf == k64 && fraction == 0.2;
                let n = if tiny { 10 } else { 4000 };
                let (loss, mean) = if fraction > 1.0 {
                    (0.1, 300.0)
                } else {
                    (0.0, 45.0 + fraction * 10.0)
                };
                write_point(
                    &dir,
                    "table",
                    io_mode,
                    4,
                    rcvbuf,
                    load,
                    loss,
                    mean,
                    n,
                    Some(fraction),
                    None,
                );
            }
        }
    }
    write_point(
        &dir,
        "flood",
        "socket",
        4,
        DEFAULT_RCVBUF,
        1000.0,
        0.3,
        2000.0,
        4000,
        None,
        Some((120_000.0, None, 0)),
    );
    write_point(
        &dir,
        "flood",
        "socket",
        4,
        k64,
        1000.0,
        0.3,
        500.0,
        4000,
        None,
        Some((120_000.0, None, 0)),
    );
    write_point(
        &dir,
        "flood",
        "socket",
        4,
        DEFAULT_RCVBUF,
        1000.0,
        0.0,
        60.0,
        4000,
        None,
        Some((120_000.0, Some(2000.0), 9999)),
    );
}

#[test]
fn the_artefacts_of_a_synthetic_study() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path();
    synthetic_study(out);
    fs::write(out.join("points").join("broken.json"), "{ not json").unwrap();
    let report_path = write_artefacts(out, "loopback (test)").unwrap();
    assert_eq!(report_path, out.join("report.md"));
    for f in [
        "report.md",
        "table1.md",
        "table1.csv",
        "fig2-latency-vs-load.svg",
        "fig2-latency-vs-load-batched.svg",
        "fig3-histogram.svg",
        "fig4-buffers.svg",
        "flood.md",
    ] {
        assert!(out.join(f).exists(), "{f} missing");
    }
    for f in [
        "fig2-latency-vs-load.svg",
        "fig2-latency-vs-load-batched.svg",
        "fig3-histogram.svg",
        "fig4-buffers.svg",
    ] {
        let svg = fs::read_to_string(out.join(f)).unwrap();
        assert!(svg.starts_with("<svg"), "{f}");
    }
    assert!(fs::read_to_string(out.join("fig2-latency-vs-load.svg"))
        .unwrap()
        .contains("first drop"));
    assert!(fs::read_to_string(out.join("fig3-histogram.svg"))
        .unwrap()
        .contains("30.0 kpps"));

    // A line of copies lost by cause for each point that lost any, and none for the others.
    let report = fs::read_to_string(out.join("report.md")).unwrap();
    let lost: Vec<&str> = report
        .lines()
        .filter(|l| l.contains("(warm-up included)"))
        .collect();
    assert!(report.contains("\n## Lost by cause\n"), "{report}");
    assert!(!lost.is_empty(), "{report}");
    for line in lost {
        let n = |after: &str| {
            line.split(after)
                .nth(1)
                .unwrap()
                .split([' ', ','])
                .next()
                .unwrap()
        };
        assert_eq!(n("copies lost "), n("server's socket "), "{line}");
        assert!(line.contains("clients' sockets 0, path -,"), "{line}");
        assert!(
            line.ends_with("server -, unanswered for no counted reason 0"),
            "{line}"
        );
    }

    let csv = fs::read_to_string(out.join("table1.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    assert_eq!(lines.len(), 1 + 12, "{csv}");
    assert!(lines[0].starts_with("io,clients,rcvbuf_bytes"));
    assert!(
        lines[1].starts_with("socket,4,65536,64,0.2,8000,4000,"),
        "{}",
        lines[1]
    );
    assert!(lines
        .iter()
        .any(|l| l.starts_with(&format!("socket,4,{DEFAULT_RCVBUF},208,1.1,44000,"))));
    // The tiny point: p99 and p99.9 empty, p50 a number.
    let tiny = lines
        .iter()
        .find(|l| l.starts_with("batched,4,65536,64,0.2,"))
        .unwrap();
    let fields: Vec<&str> = tiny.split(',').collect();
    assert_eq!(fields.len(), 14);
    assert!(
        !fields[9].is_empty() && fields[11].is_empty() && fields[12].is_empty(),
        "{tiny}"
    );
    // p95 survives (in the point's JSON) for the big points.
    let first: Vec<&str> = lines[1].split(',').collect();
    assert!(!first[10].is_empty(), "{}", lines[1]);

    let table = fs::read_to_string(out.join("table1.md")).unwrap();
    assert!(table.contains("too few samples"));
    assert!(table.contains("208 (default)"));
    assert!(table.contains("20% (8.0 kpps)"));

    let report = fs::read_to_string(&report_path).unwrap();
    assert!(report.contains("Topology: loopback (test)"));
    assert!(
        report.contains("| socket | 64 | 4 | 40.0 kpps |"),
        "{report}"
    );
    assert!(report.contains("| socket | 64 | 8 | 30.0 kpps |"));
    assert!(report.contains("| socket | 208 (default) | 8 | 30.0 kpps |"));
    assert!(report.contains("| batched | 208 (default) | 4 | none up to 40.0 kpps |"));
    assert!(report.contains("| batched | 64 | 8 | 40.0 kpps |"));
    assert!(
        report.contains("above 64 KiB the max lossless load stops growing"),
        "{report}"
    );
    assert!(
        report.contains("under overload still grows (500.0 µs → 1999.9 µs"),
        "{report}"
    );
    assert!(
        report.contains("falls from 40.0 kpps at 4 clients to 30.0 kpps at 8 clients"),
        "{report}"
    );
    assert!(
        report.contains("batched did not drop up to 40.0 kpps"),
        "{report}"
    );
    assert!(report.contains("the rate limit helped"), "{report}");
    assert!(report.contains("too few samples"));
    assert!(report.contains("skipped: broken.json"));
    assert!(report.contains("](fig4-buffers.svg)"));
    assert!(report.contains("about 1.80 s"));

    let flood = fs::read_to_string(out.join("flood.md")).unwrap();
    assert_eq!(
        flood
            .lines()
            .filter(|l| l.starts_with("| default") || l.starts_with("| 64"))
            .count(),
        3,
        "{flood}"
    );
    assert!(flood.contains("9999"));

    // Rerunning on the folder gives the same report.
    write_artefacts(out, "loopback (test)").unwrap();
    assert_eq!(fs::read_to_string(&report_path).unwrap(), report);
}

#[test]
fn an_empty_folder_still_reports() {
    let tmp = tempfile::tempdir().unwrap();
    fs::create_dir_all(tmp.path().join("points")).unwrap();
    let report = fs::read_to_string(write_artefacts(tmp.path(), "nowhere").unwrap()).unwrap();
    assert!(report.contains("No points were measured"));
    let tmp2 = tempfile::tempdir().unwrap();
    let report = fs::read_to_string(write_artefacts(tmp2.path(), "nowhere").unwrap()).unwrap();
    assert!(report.contains("No points were measured"));
}

#[test]
fn the_flood_table_has_a_row_per_io_mode_grouped_by_mode() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path();
    fs::create_dir_all(out.join("points")).unwrap();
    for io_mode in ["xdp", "socket", "batched"] {
        for limit in [Some(2000.0), None] {
            write_point(
                &out.join("points"),
                "flood",
                io_mode,
                4,
                DEFAULT_RCVBUF,
                1000.0,
                0.0,
                60.0,
                4000,
                None,
                Some((120_000.0, limit, 0)),
            );
        }
    }
    write_artefacts(out, "loopback (test)").unwrap();
    let flood = fs::read_to_string(out.join("flood.md")).unwrap();
    let modes: Vec<&str> = flood
        .lines()
        .filter(|l| l.starts_with("| default"))
        .map(|l| l.split('|').nth(2).unwrap().trim())
        .collect();
    assert_eq!(
        modes,
        ["batched", "batched", "socket", "socket", "xdp", "xdp"],
        "{flood}"
    );
}

#[test]
fn the_flood_table_says_what_the_flooder_sent_what_reached_the_server_and_what_xdp_dropped() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path();
    let dir = out.join("points");
    fs::create_dir_all(&dir).unwrap();
    for (io_mode, loss) in [("socket", 0.3), ("xdp", 0.004)] {
        write_point(
            &dir,
            "flood",
            io_mode,
            4,
            DEFAULT_RCVBUF,
            1000.0,
            loss,
            60.0,
            4000,
            None,
            Some((120_000.0, Some(2000.0), 0)),
        );
    }
    // The counters a measured flood point has and the synthetic ones lack.
    let path = dir.join("flood-xdp-c4-b208k-1000pps-limited.json");
    let mut p: Point = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
    p.flood_sent = Some(360_123);
    p.server.insert("from_flooder".into(), 4_567);
    p.server.insert("xdp_rate_limited".into(), 355_556);
    write_atomic(&path, serde_json::to_string(&p).unwrap().as_bytes()).unwrap();
    write_artefacts(out, "loopback (test)").unwrap();
    let flood = fs::read_to_string(out.join("flood.md")).unwrap();
    let row = |io: &str| -> Vec<String> {
        let line = flood
            .lines()
            .find(|l| l.starts_with("| default") && l.split('|').nth(2).unwrap().trim() == io)
            .unwrap_or_else(|| panic!("no {io} row: {flood}"));
        line.split('|').map(|c| c.trim().to_string()).collect()
    };
    // Columns: scenario, I/O, clients, flood, flood sent, from flooder, dropped in XDP.
    assert_eq!(row("xdp")[5..8], ["360123", "4567", "355556"], "{flood}");
    // An older point without them, and a kernel server (no program to drop in).
    assert_eq!(row("socket")[5..8], ["n/a", "n/a", "–"], "{flood}");
    assert!(
        flood.contains("rate limit on (default buffer): socket 30.00%, xdp 0.40%. Target over xdp: under 1% (met)."),
        "{flood}"
    );
}

#[test]
fn a_models_traffic_is_paced_to_each_points_load_and_named_with_its_pace() {
    let model: latlab_probe::model::TrafficModel = "counter-strike".parse().unwrap();
    let traffic = ClientTraffic::model(model.clone());
    let own = model.rate_pps();
    let paced = traffic.at_load(4.0 * own).unwrap();
    assert!((paced.rate_pps() - 4.0 * own).abs() < 1e-9);
    assert_eq!(paced.max_size(), model.max_size());
    let name = traffic.name_at(4.0 * own);
    assert_eq!(name, "counter-strike*4.0000");
    // The name reads back as the model at that pace.
    assert_eq!(latlab_probe::Traffic::Model(name.parse().unwrap()), paced);

    // The traffic is one of the parameters --resume checks; constant-rate studies keep the
    // parameters they always had.
    let mut options = StudyOptions::new("study".into());
    assert!(!options.parameters().contains_key("traffic"));
    options.traffic = Some(traffic);
    assert_eq!(options.parameters()["traffic"], "counter-strike");
}
