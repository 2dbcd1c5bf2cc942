//! The emulator study's report drawn from synthetic point files.

use std::fs;
use std::path::Path;

use latlab_emu::report::{EmuCpuJson, EmuDirectionJson, EmuDropsJson, EmuJson};
use latlab_stats::{Estimate, LatencyHistogram, PercentileEstimate, Quantile, Summary};

use super::report::write;
use super::{EmuPoint, RatePoint, TRACE_DELAY_NS};
use crate::points::{Existing, PointsDir};
use latlab_lab::results::{MalformedCounts, RunSetup, RunSummary, WarmupCounts};

/// `n` round trips spread ±20% around `mean_us`, `lost` of `n + lost` probes lost.
pub(crate) fn run(mean_us: f64, n: u64, lost: u64, rate: f64) -> RunSummary {
    let mut h = LatencyHistogram::new();
    let mean = (mean_us * 1000.0) as u64;
    let spread = mean / 5;
    for i in 0..n {
        h.record(mean - spread + (i * 2 * spread) / n);
    }
    let empty = Summary::from_histogram(&LatencyHistogram::new());
    RunSummary {
        latlab_version: "test".into(),
        setup: RunSetup {
            label: format!("{rate} pps"),
            target: "198.18.1.2:7777".into(),
            topology: "client-emu-server".into(),
            pattern: "constant".into(),
            payload_bytes: 64,
            flows: 1,
            duration_s: 1.0,
            warmup_s: 0.3,
            poll: "block".into(),
            threads: "one-loop".into(),
            dir: None,
            traffic: None,
            link: None,
        },
        sent: n + lost,
        received: n,
        lost,
        unsent: 0,
        send_failed: Default::default(),
        clock: None,
        forward_ns: None,
        return_ns: None,
        one_way_impossible: 0,
        host: None,
        run_id: None,
        merged_from: Vec::new(),
        placement: None,
        assertions: Vec::new(),
        host_stalls: None,
        lost_by_cause: None,
        protocol: None,
        raised: 0,
        loss_ratio: lost as f64 / (n + lost) as f64,
        reordered: 0,
        duplicated: 0,
        malformed: MalformedCounts::default(),
        warmup: WarmupCounts::default(),
        offered_pps: rate,
        achieved_pps: rate,
        timestamp_source: "kernel-software".into(),
        start_time_unix_ns: 0,
        stopped_early: false,
        latency_ns: Summary::from_histogram(&h),
        send_lag_ns: empty.clone(),
        latency_from_actual_send_ns: empty.clone(),
        responder_dwell_ns: empty,
    }
}

/// A release-error summary with this p50, p99 and max (ns) over 1000 frames; `None`, one of a
/// direction that released no frame.
fn release_summary(release: Option<(f64, f64, f64)>) -> Summary {
    let Some((p50, p99, max)) = release else {
        return Summary::from_histogram(&LatencyHistogram::new());
    };
    let at = |quantile, ns: f64| PercentileEstimate {
        quantile,
        estimate: Estimate::Value {
            value_ns: ns as u64,
            ci_low_ns: ns as u64,
            ci_high_ns: ns as u64,
        },
    };
    Summary {
        count: 1000,
        min_ns: 0,
        mean_ns: p50,
        stddev_ns: 0.0,
        max_ns: max as u64,
        percentiles: vec![at(Quantile::P50, p50), at(Quantile::P99, p99)],
    }
}

/// An emulator report with these release errors (p50, p99, max, ns) on A→B and B→A, the
/// kernel's drops before A's ring, and the emulator's CPU.
fn emulator_report(
    a_to_b: Option<(f64, f64, f64)>,
    b_to_a: Option<(f64, f64, f64)>,
    kernel_rx_ring: u64,
    cores: Option<f64>,
) -> EmuJson {
    let direction = |release, kernel_rx_ring| EmuDirectionJson {
        arrived: 0,
        link: Default::default(),
        sent: 0,
        dropped_by_emulator: EmuDropsJson {
            kernel_rx_ring,
            ..EmuDropsJson::default()
        },
        queued_at_exit: 0,
        wire_frames: Default::default(),
        released_early: 0,
        release_error_ns: release_summary(release),
        sojourn_ns: None,
        dualpi2: None,
        bytes: Default::default(),
        flows: Vec::new(),
        events: Vec::new(),
        lost_by_cause: None,
        socket: None,
    };
    EmuJson {
        latlab_version: "test".into(),
        a_to_b: direction(a_to_b, kernel_rx_ring),
        b_to_a: direction(b_to_a, 0),
        changes: Vec::new(),
        event_changes: Vec::new(),
        pcap_dropped: 0,
        cpu: cores.map(|cores| EmuCpuJson {
            cores,
            ..EmuCpuJson::default()
        }),
        interfaces: None,
        host_stalls: None,
        fates: None,
    }
}

fn emulator_json(release_p50_ns: f64) -> EmuJson {
    let release = (release_p50_ns, release_p50_ns * 3.0, release_p50_ns * 10.0);
    emulator_report(Some(release), None, 7, None)
}

/// Kernel and emulator at delay 0 and the emulator at 100 µs and 1 ms, at 1 kpps; the two loss
/// models; the forwarding rate of two paths at two sizes.
pub(crate) fn synthetic_study(out: &Path) {
    let points = PointsDir::create(out, Existing::Refuse).unwrap();
    let rate = 1000.0;
    let latency = |path: &str, delay_ns: u64, mean_us: f64| EmuPoint {
        path: path.into(),
        delay_ns,
        rate_pps: rate,
        run: run(mean_us, 2000, 0, rate),
        loss_bursts: Vec::new(),
        configured_loss: None,
        expected_mean_burst: None,
        emulator: (path == "emu").then(|| emulator_json(2_000.0)),
        host_steal_ns: None,
        trace: (delay_ns == TRACE_DELAY_NS)
            .then(|| (0..4000u64).map(|i| (i * 1_000, 140_000 + i % 7)).collect()),
    };
    for (path, delay_ns, mean_us) in [
        ("kernel", 0, 30.0),
        ("emu", 0, 40.0),
        ("emu", TRACE_DELAY_NS, 141.0),
        ("emu", 1_000_000, 1_042.0),
    ] {
        let key = format!("{path}-d{delay_ns}ns-{}pps", rate as u64);
        points
            .write(&key, &latency(path, delay_ns, mean_us), None)
            .unwrap();
    }
    for (model, loss, burst, bursts) in [
        ("loss-bernoulli", 0.01, 1.01, vec![1, 1, 2, 1]),
        ("loss-gemodel", 0.0385, 4.0, vec![3, 5, 4, 4]),
    ] {
        let p = EmuPoint {
            path: model.into(),
            delay_ns: 0,
            rate_pps: 10_000.0,
            run: run(40.0, 1000, 10, 10_000.0),
            loss_bursts: bursts,
            configured_loss: Some(loss),
            expected_mean_burst: Some(burst),
            emulator: Some(emulator_json(2_000.0)),
            host_steal_ns: None,
            trace: None,
        };
        points
            .write(&format!("{model}-d0ns-10000pps"), &p, None)
            .unwrap();
    }
    for (path, size, received) in [
        ("kernel", 64, 200_000),
        ("kernel", 1518, 80_000),
        ("emu", 64, 150_000),
        ("emu", 1518, 70_000),
    ] {
        let p = RatePoint {
            path: path.into(),
            frame_size: size,
            sent: 300_000,
            received,
            elapsed_ns: 1_000_000_000,
            emulator: (path == "emu").then(|| emulator_json(1_000.0)),
        };
        points
            .write(&format!("rate-{path}-{size}"), &p, None)
            .unwrap();
    }
}

#[test]
fn the_report_of_a_synthetic_study() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    synthetic_study(&out);
    fs::write(out.join("points").join("broken.json"), "{ not json").unwrap();
    let report_path = write(&out, "namespaces (test)").unwrap();
    assert_eq!(report_path, out.join("report.md"));
    let report = fs::read_to_string(&report_path).unwrap();
    for line in [
        "Topology: namespaces (test). Round trips",
        // 10 µs added at p50 and in the mean.
        "| 1000 | 30.0 | 30.0 | 40.0 | 40.0 | 10.0 | 10.0 | 2.0 / 6.0 |",
        // 141 − 40 − 100 µs = 1 µs mean error; 1042 − 40 − 1000 µs = 2 µs, less the
        // histogram buckets' rounding.
        "| 100.00 µs | 1000 | 1.0 |",
        "| 1000.00 µs | 1000 | 1.9 |",
        // 10 of 1010 probes lost: 0.990%, its 95% Wilson interval 0.539% to 1.813%.
        "| bernoulli | 1.000% | 0.990% [0.539 – 1.813] | 1010 | 1.01 | 1.25 | 2 | 4 |",
        "| gemodel | 3.850% | 0.990% [0.539 – 1.813] | 1010 | 4.00 | 4.00 | 5 | 4 |",
        "Measured loss: lost probes of those sent, with its 95% confidence interval",
        "| 64 | 300.0 | 200.0 | 300.0 | 150.0 | 0.75 | 7 | - | - | - | - |",
        "![forwarding rate](forwarding-rate.svg)",
        "![per-packet latency](per-packet.svg)",
        "broken.json",
    ] {
        assert!(report.contains(line), "{line:?} missing:\n{report}");
    }
    for f in ["accuracy.svg", "forwarding-rate.svg", "per-packet.svg"] {
        let svg = fs::read_to_string(out.join(f)).unwrap();
        assert!(svg.starts_with("<svg"), "{f}");
    }
    // Drawing again from the same points gives the same report.
    write(&out, "namespaces (test)").unwrap();
    assert_eq!(fs::read_to_string(&report_path).unwrap(), report);
}

/// An emu point's report with the given release-error p50 and p99 (ns) on A→B and B→A, and
/// the emulator's CPU.
fn emulator_with_release(a_to_b: (f64, f64), b_to_a: (f64, f64), cores: f64) -> EmuJson {
    let dir = |(p50, p99): (f64, f64)| Some((p50, p99, p99 * 2.0));
    emulator_report(dir(a_to_b), dir(b_to_a), 0, Some(cores))
}

#[test]
fn the_release_target_is_checked_per_rate_over_every_point_and_both_directions() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    let points = PointsDir::create(&out, Existing::Refuse).unwrap();
    let us = |v: f64| v * 1000.0;
    // Per rate: (delay, A→B p50/p99, B→A p50/p99, cores) of its emu points. At 1 kpps the
    // delay-0 point's A→B p50 misses; at 20 kpps every point holds; at 40 kpps only B→A's
    // p99 of the 1 ms point misses.
    let plan = [
        (1_000.0, 0, (us(31.0), us(40.0)), (us(2.0), us(9.0)), 0.12),
        (
            1_000.0,
            1_000_000,
            (us(0.5), us(20.0)),
            (us(2.0), us(9.0)),
            0.2,
        ),
        (20_000.0, 0, (us(2.0), us(30.0)), (us(2.1), us(36.0)), 0.97),
        (
            20_000.0,
            1_000_000,
            (us(0.3), us(14.0)),
            (us(2.2), us(20.0)),
            0.99,
        ),
        (40_000.0, 0, (us(2.0), us(30.0)), (us(2.1), us(36.0)), 0.98),
        (
            40_000.0,
            1_000_000,
            (us(0.3), us(14.0)),
            (us(2.2), us(61.0)),
            0.99,
        ),
    ];
    for (rate, delay_ns, ab, ba, cores) in plan {
        let p = EmuPoint {
            path: "emu".into(),
            delay_ns,
            rate_pps: rate,
            run: run(40.0 + delay_ns as f64 / 1000.0, 1000, 0, rate),
            loss_bursts: Vec::new(),
            configured_loss: None,
            expected_mean_burst: None,
            emulator: Some(emulator_with_release(ab, ba, cores)),
            host_steal_ns: Some(if rate == 40_000.0 { 120_000_000 } else { 0 }),
            trace: None,
        };
        let key = format!("emu-d{delay_ns}ns-{}pps", rate as u64);
        points.write(&key, &p, None).unwrap();
    }
    write(&out, "namespaces (test)").unwrap();
    let report = fs::read_to_string(out.join("report.md")).unwrap();
    for line in [
        "| 1000 | 31.0 | 40.0 | 0.12–0.20 | 0 | no |",
        "| 20000 | 2.2 | 36.0 | 0.97–0.99 | 0 | yes |",
        "| 40000 | 2.2 | 61.0 | 0.98–0.99 | 240 | no |",
        "The target holds at 20000 pps; not at 1000, 40000 pps. It no longer holds above 20000 pps (it fails at 40000 pps).",
    ] {
        assert!(report.contains(line), "{line:?} missing:\n{report}");
    }
}
