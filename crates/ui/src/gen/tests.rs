use latlab_probe::{Interval, Live, Progress};

use super::*;

fn progress(intervals: Vec<Interval>, sent: u64) -> Progress {
    Progress {
        elapsed_ns: intervals.len() as u64 * 1_000_000_000,
        total_ns: 10_000_000_000,
        sent,
        received: sent,
        live: Some(Live {
            intervals,
            reordered: 2,
            duplicated: 1,
            not_answers: 3,
            send_lag_p99_max: Some((5_000, 9_000)),
        }),
    }
}

fn interval(start_s: u64, latencies: impl IntoIterator<Item = u64>) -> Interval {
    let mut histogram = LatencyHistogram::new();
    for l in latencies {
        histogram.record(l);
    }
    Interval {
        start_offset_ns: start_s * 1_000_000_000,
        duration_ns: 1_000_000_000,
        histogram,
        forward: LatencyHistogram::new(),
        reverse: LatencyHistogram::new(),
    }
}

#[test]
fn the_board_adds_each_interval_once_and_bounds_only_what_the_count_allows() {
    let board = GenBoard::new();
    board.started("1k pps to x", 10_000_000_000);
    board.progress(&progress(
        vec![interval(0, (1..=1000).map(|i| i * 1000))],
        1000,
    ));
    // A report with no new interval adds nothing.
    board.progress(&progress(Vec::new(), 1500));
    board.progress(&progress(
        vec![interval(1, (1..=1000).map(|i| i * 1000))],
        2000,
    ));
    let s = board.state_json();
    assert_eq!(s["samples"], 2000);
    assert_eq!(s["sent"], 2000);
    assert_eq!(s["intervals"], 2);
    assert_eq!(s["series"].as_array().unwrap().len(), 2);
    assert_eq!(s["series"][1][0], 2.0, "the second interval ends at 2 s");
    assert_eq!(s["series"][1][1], 1000.0, "1000 answers in its second");
    let p = &s["percentiles"];
    assert_eq!(p[0]["label"], "p50");
    let p50 = p[0]["value_ns"].as_u64().unwrap();
    assert!((495_000..=505_000).contains(&p50), "{p50}");
    assert!(p[0]["low_ns"].as_u64().unwrap() <= p50 && p50 <= p[0]["high_ns"].as_u64().unwrap());
    // 2000 samples bound p99 but not p99.9.
    assert!(p[2]["value_ns"].is_u64(), "{p}");
    assert_eq!(p[3]["label"], "p99.9");
    assert!(
        p[3]["value_ns"].is_null() && p[3]["needed"].as_u64().unwrap() > 2000,
        "{p}"
    );
    let ccdf = s["ccdf"].as_array().unwrap();
    assert!(ccdf.len() <= CCDF_POINTS + 1 && ccdf.len() > 10);
    assert_eq!(
        ccdf.last().unwrap()[1],
        0.0,
        "the CCDF ends at its largest answer"
    );
    assert_eq!(
        (s["reordered"].as_u64(), s["send_lag_max_ns"].as_u64()),
        (Some(2), Some(9_000))
    );
    assert_eq!(s["done"], false);
}

#[test]
fn after_the_run_the_board_serves_only_the_files_it_wrote() {
    let dir = std::env::temp_dir().join(format!("latlab-ui-board-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("summary.json");
    std::fs::write(&file, "{\"sent\":3}").unwrap();
    let board = GenBoard::new();
    let mut all = LatencyHistogram::new();
    for l in [1_000, 2_000, 3_000] {
        all.record(l);
    }
    board.finished(
        serde_json::json!({"sent": 3}),
        all,
        vec![("summary.json".into(), file)],
    );
    let get = |path: &str, name: &str| {
        board.handle(&UiRequest {
            method: "GET".into(),
            path: path.into(),
            query: vec![("name".into(), name.into())],
            body: String::new(),
        })
    };
    let r = get("/api/file", "summary.json");
    assert_eq!(
        (r.status, r.content_type, r.body.as_slice()),
        (200, "application/json", &b"{\"sent\":3}"[..])
    );
    assert_eq!(get("/api/file", "/etc/passwd").status, 404);
    assert_eq!(get("/api/nothing", "").status, 404);
    let s: serde_json::Value = serde_json::from_slice(&get("/api/state", "").body).unwrap();
    assert_eq!(
        (s["done"].as_bool(), s["final"]["sent"].as_u64()),
        (Some(true), Some(3))
    );
    assert_eq!(s["samples"], 3, "the run's own histogram, once it is over");
    std::fs::remove_dir_all(&dir).unwrap();
}
