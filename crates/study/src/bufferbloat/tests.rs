//! The bufferbloat study's options, analysis, conclusions and report, from constructed points.

use std::fs;

use latlab_emu::report::EmuJson;
use latlab_stats::{LatencyHistogram, Summary};

use super::analysis::{full_queue_ms, Analysis};
use super::conclusions::{findings, targets, Verdict};
use super::figures::{goodput_series, goodput_svg, p99_lines, p99_svg};
use super::report::write;
use super::{left_out_key, BloatOptions, BloatPoint, BulkFlow, LeftOut, Queue};
use crate::emulator::tests::run;
use crate::points::{Existing, PointsDir};

/// The emulator's report of a point: `dropped` frames at the queue's limit on the way out,
/// and, when `sojourn_ms` is given, the sojourn times a queue discipline records (1000
/// frames spread ±20% around it) as `a_to_b.sojourn_ns`. Read through `EmuJson` from the
/// least a report has, as the study reads any emulator's.
fn emulator(dropped: u64, sojourn_ms: Option<f64>) -> serde_json::Value {
    let empty = serde_json::to_value(Summary::from_histogram(&LatencyHistogram::new())).unwrap();
    let direction = serde_json::json!({
        "release_error_ns": empty,
        "link": { "dropped_queue_frames": dropped },
    });
    let report = serde_json::json!({ "a_to_b": direction, "b_to_a": direction });
    let mut value = EmuJson::from_value(report).unwrap().to_value();
    if let Some(ms) = sojourn_ms {
        let summary = run(ms * 1000.0, 1000, 0, 1.0).latency_ns;
        value["a_to_b"]["sojourn_ns"] = serde_json::to_value(&summary).unwrap();
    }
    value
}

/// A point of `queue` with `flows` flows of `cc`, each at `mbit`, the game's round trips
/// spread ±20% around `game_ms` (1000 answered, `lost` lost).
fn point(queue: &str, cc: &str, flows: usize, mbit: f64, game_ms: f64, lost: u64) -> BloatPoint {
    let q = Queue::parse(queue).unwrap();
    BloatPoint {
        queue: q.to_string(),
        spec: format!("rate=20mbit {}", q.spec()).trim().to_string(),
        rate_bps: 20_000_000,
        cc: (flows > 0).then(|| cc.to_string()),
        return_delay_ns: 0,
        bulk: (0..flows)
            .map(|_| BulkFlow {
                cc: cc.into(),
                bytes: (mbit * 1e6 / 8.0 * 10.0) as u64,
                goodput_bps: mbit * 1e6,
                retransmits: 3,
                srtt_us: 20_000,
            })
            .collect(),
        game: run(game_ms * 1000.0, 1000, lost, 100.0),
        emulator: emulator(if flows > 0 { 40 } else { 0 }, None),
        host_steal_ns: Some(2_500_000),
    }
}

fn with_sojourn(mut p: BloatPoint, ms: f64) -> BloatPoint {
    p.emulator = emulator(0, Some(ms));
    p
}

/// `p` with DualPI2's queues as the emulator reports them: the sojourn times of the L4S and
/// the classic queue spread ±20% around `l4s_ms` and `classic_ms`.
fn with_dual(p: BloatPoint, l4s_ms: f64, classic_ms: f64) -> BloatPoint {
    let mut p = with_sojourn(p, classic_ms);
    let queue = |ms: f64| {
        let summary = run(ms * 1000.0, 1000, 0, 1.0).latency_ns;
        serde_json::json!({"sent": 1000, "marked": 10, "dropped": 5, "sojourn_ns": summary})
    };
    let queues = serde_json::json!({"l4s": queue(l4s_ms), "classic": queue(classic_ms)});
    p.emulator["a_to_b"]["dualpi2"] = queues;
    // What the study keeps reads back as the emulator's own report.
    EmuJson::from_value(p.emulator.clone()).unwrap();
    p
}

/// The grid, with the figures a run that meets every target would give.
fn grid() -> Vec<BloatPoint> {
    vec![
        point("tail:limit=1000", "", 0, 0.0, 1.0, 0),
        point("tail:limit=1000", "cubic", 1, 19.0, 500.0, 0),
        point("tail:limit=100", "", 0, 0.0, 1.0, 0),
        point("tail:limit=100", "cubic", 1, 18.5, 60.0, 2),
        point("codel", "", 0, 0.0, 1.0, 0),
        with_sojourn(point("codel", "cubic", 1, 18.0, 8.0, 0), 5.5),
        point("fq_codel", "", 0, 0.0, 1.2, 0),
        point("fq_codel", "cubic", 4, 4.6, 2.0, 0),
        point("fq_codel", "bbr", 4, 4.7, 3.0, 0),
        point("pie", "", 0, 0.0, 1.0, 0),
        with_sojourn(point("pie", "cubic", 1, 18.0, 20.0, 0), 14.0),
        point("dualpi2", "", 0, 0.0, 1.0, 0),
        with_dual(point("dualpi2", "cubic", 1, 18.0, 1.5, 0), 0.4, 16.0),
    ]
}

#[test]
fn queues_are_specs_for_the_emulator() {
    let tail = Queue::parse("tail:limit=1000").unwrap();
    assert_eq!(tail.spec(), "limit=1000");
    assert_eq!(tail.slug(), "tail-limit-1000");
    let codel = Queue::parse("codel:target=5ms interval=100ms").unwrap();
    assert_eq!(codel.spec(), "aqm=codel target=5ms interval=100ms");
    assert_eq!(codel.to_string(), "codel:target=5ms:interval=100ms");
    assert_eq!(Queue::parse("fq_codel").unwrap().spec(), "aqm=fq_codel");
    assert!(Queue::parse("tail:1000").unwrap_err().contains("key=value"));
    assert!(Queue::parse("limit=5")
        .unwrap_err()
        .contains("name comes first"));
    assert!(Queue::parse("").is_err());

    let options = BloatOptions::new("/tmp/x".into());
    let (link, spec) = options.bottleneck(&tail).unwrap();
    assert_eq!(spec, "rate=20mbit limit=1000");
    assert_eq!(link.rate_bps, Some(20_000_000));
    assert_eq!(link.limit_frames, Some(1000));
    let bytes = Queue::parse("tail:limit-bytes=150000").unwrap();
    assert_eq!(
        options.bottleneck(&bytes).unwrap().0.limit_bytes,
        Some(150_000)
    );
    // A key the emulator does not take is refused with its own words, naming --queues.
    let err = options
        .bottleneck(&Queue::parse("tail:depth=3").unwrap())
        .unwrap_err();
    assert!(err.contains("--queues") && err.contains("depth"), "{err}");
    // DualPI2: the emulator's own discipline, and the game stream ECT(1) through it alone.
    let dual = Queue::parse("dualpi2").unwrap();
    let (link, _) = options.bottleneck(&dual).unwrap();
    assert_eq!(link.aqm.discipline, latlab_link::Discipline::DualPi2);
    assert_eq!(
        (dual.game_tos(), codel.game_tos(), tail.game_tos()),
        (Some(0x01), None, None)
    );
    assert!(options.queues.contains(&dual) && options.check().is_ok());
    assert_eq!(options.return_link().delay_ns, 0);
    assert_eq!(options.return_link().rate_bps, None);
    let mut bad_rate = options.clone();
    bad_rate.rate = "fast".into();
    assert!(bad_rate.check().unwrap_err().contains("rate"));
}

#[test]
fn the_plan_has_one_unloaded_point_per_queue_then_each_cc_and_count() {
    let mut options = BloatOptions::new("/tmp/x".into());
    options.queues = vec![
        Queue::parse("tail:limit=1000").unwrap(),
        Queue::parse("tail:limit=100").unwrap(),
    ];
    options.flows = vec![4, 0, 1, 1];
    let keys: Vec<String> = options.plan().iter().map(|p| p.key()).collect();
    assert_eq!(
        keys,
        [
            "bloat-tail-limit-1000-0",
            "bloat-tail-limit-1000-cubic-1",
            "bloat-tail-limit-1000-cubic-4",
            "bloat-tail-limit-1000-bbr-1",
            "bloat-tail-limit-1000-bbr-4",
            "bloat-tail-limit-100-0",
            "bloat-tail-limit-100-cubic-1",
            "bloat-tail-limit-100-cubic-4",
            "bloat-tail-limit-100-bbr-1",
            "bloat-tail-limit-100-bbr-4",
        ]
    );
    options.flows = vec![17];
    assert!(options.check().unwrap_err().contains("--flows"));
    options.flows = vec![1];
    options.ccs.clear();
    assert!(options.check().unwrap_err().contains("--cc"));
}

#[test]
fn the_sojourn_is_read_where_the_emulator_recorded_it() {
    let mut p = point("codel", "cubic", 1, 18.0, 8.0, 0);
    assert!(p.sojourn().is_none());
    assert_eq!(p.bottleneck_drops(), 40);
    // A queue discipline's own drops count with the limits' (a frame FQ-CoDel pushes out to
    // make room too).
    p.emulator["a_to_b"]["link"]["aqm_drop"] = 7.into();
    p.emulator["a_to_b"]["link"]["aqm_overflow"] = 2.into();
    assert_eq!(p.bottleneck_drops(), 49);
    let p = with_sojourn(p, 5.0);
    let p50 = p
        .sojourn()
        .unwrap()
        .percentile("p50")
        .unwrap()
        .estimate
        .value_ns();
    let p50 = p50.unwrap() as f64 / 1e6;
    assert!((p50 - 5.0).abs() < 0.1, "{p50}");
}

#[test]
fn points_sort_by_queue_depth_then_discipline() {
    let mut points = grid();
    points.reverse();
    let a = Analysis::of(points);
    assert_eq!(
        a.queues(),
        [
            "tail:limit=100",
            "tail:limit=1000",
            "codel",
            "fq_codel",
            "pie",
            "dualpi2"
        ]
    );
    assert_eq!(a.unloaded("codel").unwrap().flows(), 0);
    // 1000 frames of 1514 bytes at 20 Mbit/s.
    let full = full_queue_ms("tail:limit=1000", 20_000_000).unwrap();
    assert!((full - 605.6).abs() < 0.1, "{full}");
    assert_eq!(full_queue_ms("tail", 20_000_000), Some(full));
    assert_eq!(full_queue_ms("tail:limit-bytes=9000", 20_000_000), None);
}

#[test]
fn every_target_is_met_by_a_run_that_meets_it() {
    let t = targets(&Analysis::of(grid()));
    assert_eq!(t.len(), 5);
    for target in &t {
        assert_eq!(target.verdict, Verdict::Met, "{target:?}");
    }
    assert!(t[0].measured.starts_with("5.5"), "{}", t[0].measured);
    assert!(t[1].measured.starts_with("14.0"), "{}", t[1].measured);
    assert!(t[2].measured.contains("cubic") && t[2].measured.contains("bbr"));
    assert!(
        t[3].measured.contains("drains in 606 ms"),
        "{}",
        t[3].measured
    );
    assert!(
        t[4].measured.starts_with("L4S 0.40 ms, classic 16.0"),
        "{}",
        t[4].measured
    );
}

#[test]
fn targets_are_missed_or_not_measured_as_the_points_say() {
    let mut points = grid();
    // CoDel's queue too long, PIE's sojourn not recorded, FQ-CoDel's bbr point 10 ms up,
    // and a tail queue that did not fill.
    points[5] = with_sojourn(point("codel", "cubic", 1, 18.0, 8.0, 0), 9.0);
    points[10] = point("pie", "cubic", 1, 18.0, 20.0, 0);
    points[8] = point("fq_codel", "bbr", 4, 4.7, 10.0, 0);
    points[1] = point("tail:limit=1000", "cubic", 1, 19.0, 100.0, 0);
    // DualPI2's L4S queue as slow as its classic one (the game stream not ECT(1)).
    points[12] = with_dual(point("dualpi2", "cubic", 1, 18.0, 20.0, 0), 15.0, 15.0);
    let t = targets(&Analysis::of(points.clone()));
    assert_eq!(t[0].verdict, Verdict::Missed);
    assert_eq!(t[1].verdict, Verdict::NotMeasured("not recorded".into()));
    assert_eq!(t[2].verdict, Verdict::Missed);
    assert_eq!(t[3].verdict, Verdict::Missed);
    assert_eq!(t[4].verdict, Verdict::Missed);
    // A dualpi2 point whose report has no queues of its own.
    points[12] = with_sojourn(point("dualpi2", "cubic", 1, 18.0, 20.0, 0), 15.0);
    let t = targets(&Analysis::of(points));
    assert_eq!(t[4].verdict, Verdict::NotMeasured("not recorded".into()));
    let none = targets(&Analysis::of(Vec::new()));
    assert!(none
        .iter()
        .all(|t| t.verdict == Verdict::NotMeasured("no point".into())));
}

#[test]
fn findings_compare_each_loaded_point_with_its_unloaded_one() {
    let lines = findings(&Analysis::of(grid()));
    assert_eq!(lines.len(), 7);
    let tail = lines
        .iter()
        .find(|l| l.starts_with("tail:limit=1000 with one cubic flow"))
        .unwrap();
    // p99 of 1000 samples spread ±20% around the mean: 1.196 × the mean (in the
    // histogram's buckets).
    assert!(
        tail.contains("game p99 598.2 ms vs 1.2 ms unloaded (+597.0 ms)"),
        "{tail}"
    );
    assert!(
        tail.contains("goodput 19.0 Mbit/s (95% of the rate)"),
        "{tail}"
    );
    let short = lines
        .iter()
        .find(|l| l.starts_with("tail:limit=100 "))
        .unwrap();
    assert!(short.contains("0.20% of the game's probes lost"), "{short}");
    let codel = lines.iter().find(|l| l.starts_with("codel")).unwrap();
    assert!(codel.contains("queue sojourn p50 5.5 ms"), "{codel}");
    let dual = lines.iter().find(|l| l.starts_with("dualpi2")).unwrap();
    assert!(
        dual.contains("L4S (game) sojourn p50 0.40 ms, classic 16.0 ms"),
        "{dual}"
    );
    let fq = lines.iter().find(|l| l.contains("4 bbr flows")).unwrap();
    assert!(fq.contains("goodput 18.8 Mbit/s (94% of the rate)"), "{fq}");
}

#[test]
fn figures_draw_a_line_per_queue_and_cc_from_the_unloaded_point() {
    let a = Analysis::of(grid());
    let lines = p99_lines(&a);
    let labels: Vec<&str> = lines.iter().map(|l| l.label.as_str()).collect();
    assert_eq!(
        labels,
        [
            "tail:limit=100 cubic",
            "tail:limit=1000 cubic",
            "codel cubic",
            "fq_codel bbr",
            "fq_codel cubic",
            "pie cubic",
            "dualpi2 cubic"
        ]
    );
    let fq_bbr = &lines[3];
    assert_eq!((fq_bbr.queue, fq_bbr.cc), (3, 0));
    assert_eq!(lines[4].cc, 1);
    assert_eq!(fq_bbr.points.len(), 2);
    assert_eq!(fq_bbr.points[0].0, 0.0);
    assert_eq!(fq_bbr.points[1].0, 4.0);
    let series = goodput_series(&a);
    assert_eq!(series.len(), 6);
    assert_eq!(series[3].1.len(), 3);
}

#[test]
fn the_report_is_drawn_from_the_points_alone_and_again_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let points = PointsDir::create(&out, Existing::Refuse).unwrap();
    for p in grid() {
        let planned = super::PlannedPoint {
            queue: Queue::parse(&p.queue).unwrap(),
            cc: p.cc.clone(),
            flows: p.flows() as u32,
        };
        points.write(&planned.key(), &p, None).unwrap();
    }
    fs::write(out.join("points/bloat-broken.json"), "{").unwrap();
    let report = write(&out, "namespaces (test)").unwrap();
    let md = fs::read_to_string(&report).unwrap();
    assert!(md.starts_with("# Bufferbloat study\n\nTopology: namespaces (test)."));
    assert!(md.contains("| tail:limit=1000 | cubic | 1 | 499.9 | 598.2 | - | 600.3 | 0.00% (0 of 1000) | 19.00 | 19.00 | 40 | not recorded | 2.5 |"), "{md}");
    assert!(
        md.contains(
            "| tail:limit=1000 | - | 0 | 1.0 | 1.2 | - | 1.2 | 0.00% (0 of 1000) | - | 0.00 | 0 |"
        ),
        "{md}"
    );
    assert!(md.contains("| not recorded |"));
    assert!(md.contains("| 5.5 / "), "{md}");
    assert!(md.contains("| met |"));
    assert!(md.contains("bloat-broken.json"));
    assert!(
        md.contains("Under dualpi2 the game stream is sent ECT(1)"),
        "{md}"
    );
    let first = crate::points::load(&out).unwrap().files.len();
    assert_eq!(first, 14);
    let drawn: Vec<Vec<u8>> = ["report.md", "p99-by-queue.svg", "goodput-vs-p99.svg"]
        .iter()
        .map(|f| fs::read(out.join(f)).unwrap())
        .collect();
    write(&out, "namespaces (test)").unwrap();
    for (f, before) in ["report.md", "p99-by-queue.svg", "goodput-vs-p99.svg"]
        .iter()
        .zip(drawn)
    {
        assert_eq!(fs::read(out.join(f)).unwrap(), before, "{f}");
    }
}

#[test]
fn a_queue_discipline_the_emulator_lacks_is_left_out_and_said_so() {
    let codel = Queue::parse("codel").unwrap();
    let tail = Queue::parse("tail:limit=100").unwrap();
    assert_eq!(tail.left_out(false), None);
    assert_eq!(codel.left_out(true), None);
    let why = codel.left_out(false).unwrap();
    assert!(why.contains("aqm=") && why.contains("codel"), "{why}");
    assert_eq!(left_out_key(&codel), "bloat-codel-left-out");

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let points = PointsDir::create(&out, Existing::Refuse).unwrap();
    let mut grid = grid();
    grid.retain(|p| p.queue.starts_with("tail"));
    for (i, p) in grid.iter().enumerate() {
        points.write(&format!("bloat-{i}"), p, None).unwrap();
    }
    for q in ["pie", "codel", "fq_codel"] {
        let queue = Queue::parse(q).unwrap();
        let record = LeftOut {
            queue: q.into(),
            reason: queue.left_out(false).unwrap(),
        };
        points.write(&left_out_key(&queue), &record, None).unwrap();
    }
    let a = Analysis::load(&out).unwrap();
    assert_eq!(a.points.len(), 4);
    assert!(a.skipped.is_empty(), "{:?}", a.skipped);
    let order: Vec<&str> = a.left_out.iter().map(|l| l.queue.as_str()).collect();
    assert_eq!(order, ["codel", "fq_codel", "pie"]);
    let t = targets(&a);
    for target in &t[..3] {
        match &target.verdict {
            Verdict::NotMeasured(why) => assert!(why.starts_with("left out: "), "{why}"),
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(t[3].verdict, Verdict::Met);
    let md = std::fs::read_to_string(write(&out, "t").unwrap()).unwrap();
    assert!(
        md.contains("Left out:\n- codel: this emulator has no queue disciplines"),
        "{md}"
    );
}

#[test]
fn figures_without_a_p99_say_why_they_are_empty() {
    // 280 round trips (3 s at 100 Hz after the warm-up): fewer than the 381 a p99 needs.
    let mut short = point("tail:limit=100", "cubic", 0, 0.0, 10.0, 0);
    short.game = run(10_000.0, 280, 0, 100.0);
    let a = Analysis {
        points: vec![short],
        ..Analysis::default()
    };
    for svg in [p99_svg(&a).unwrap(), goodput_svg(&a).unwrap()] {
        assert!(
            svg.contains("no point has a p99: each has fewer than the 381 samples it needs"),
            "{svg}"
        );
    }
    // With enough samples the figure draws its point and says nothing of the kind.
    let a = Analysis {
        points: vec![point("tail:limit=100", "cubic", 0, 0.0, 10.0, 0)],
        ..Analysis::default()
    };
    assert!(!p99_svg(&a).unwrap().contains("no point has a p99"));
}
