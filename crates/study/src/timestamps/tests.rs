//! The timestamp study's analysis and report on synthetic points.

use std::fs;

use latlab_stats::Quantile;

use super::analysis::{ratios, stays_within, Analysis, Limit, Method, MethodView, Within};
use super::report::write;
use super::{plan, ForwarderSettings, ProbeStamps, ReflectorSettings, StampPoint};
use crate::points::{Existing, PointsDir};

/// A probe sent at `t` whose stamps lie `kernel_tx`, `kernel_rx` and `user_rx` ns after it.
fn probe(t: u64, kernel_tx: u64, kernel_rx: u64, user_rx: u64) -> ProbeStamps {
    ProbeStamps {
        user_tx: t,
        user_rx: t + user_rx,
        kernel_tx: Some(t + kernel_tx),
        kernel_rx: Some(t + kernel_rx),
        xdp_rx: None,
    }
}

/// A point through a 100 µs delay (release error 2 µs) whose `n` probes take `rtt(i)` ns on
/// the wire, with 1 µs before the kernel's transmit stamp and `wake(i)` ns to wake the
/// reader after the receive stamp.
fn point(setting: &str, n: u64, rtt: impl Fn(u64) -> u64, wake: impl Fn(u64) -> u64) -> StampPoint {
    StampPoint {
        group: if setting.starts_with("prober") {
            "methods"
        } else {
            "reflector"
        }
        .into(),
        setting: setting.into(),
        prober_poll: "block".into(),
        reflector: ReflectorSettings::BASELINE,
        forwarder: ForwarderSettings::REFERENCE,
        cores: "prober cpu0, reflector cpu1, emulator cpu1 (blocking)".into(),
        delay_ns: 100_000,
        release_error_ns: 2_000,
        lost_by_cause: None,
        sent: n,
        probes: (0..n)
            .map(|i| {
                let t = 1_000_000_000 + i * 500_000;
                probe(t, 1_000, 1_000 + rtt(i), 1_000 + rtt(i) + wake(i))
            })
            .collect(),
        emulator: None,
        left_out: None,
    }
}

#[test]
fn each_method_reads_its_round_trip_from_the_same_probe() {
    let p = probe(1_000, 500, 120_500, 150_000);
    assert_eq!(Method::UserSpace.rtt_ns(&p), Some(150_000));
    assert_eq!(Method::KernelRx.rtt_ns(&p), Some(120_500));
    assert_eq!(Method::KernelTxRx.rtt_ns(&p), Some(120_000));
    let no_tx = ProbeStamps {
        kernel_tx: None,
        ..p
    };
    assert_eq!(Method::KernelTxRx.rtt_ns(&no_tx), None, "a missing stamp");
    let backwards = ProbeStamps {
        kernel_tx: Some(p.kernel_rx.unwrap() + 1),
        ..p
    };
    assert_eq!(
        Method::KernelTxRx.rtt_ns(&backwards),
        None,
        "stamps run backwards"
    );
}

#[test]
fn a_methods_error_is_its_excess_over_the_reference() {
    // The path takes exactly the reference (102 µs); the user-space reader wakes 5 µs late.
    let p = point("prober blocks", 1_000, |_| 102_000, |_| 5_000);
    assert_eq!(p.reference_ns(), 102_000);
    let kernel = MethodView::of(&p, Method::KernelTxRx);
    assert_eq!(kernel.excess().max(), 0, "the kernel's stamps see the path");
    let user = MethodView::of(&p, Method::UserSpace);
    let excess = user.excess();
    // 1 µs before the transmit stamp and 5 µs of waking: 6 µs on every probe.
    assert!((5_990..=6_010).contains(&excess.min()), "{}", excess.min());
    assert!((5_990..=6_010).contains(&excess.max()), "{}", excess.max());
    assert_eq!(user.vs_kernel.len(), 1_000);
    assert!((5_990..=6_010).contains(&user.over_kernel().max()));
}

#[test]
fn stays_within_names_the_last_percentile_inside_the_limit() {
    // 10 000 samples: 99.5 % exactly on the reference, 0.5 % 20 µs off.
    let pairs: Vec<(u64, u64)> = (0..10_000u64)
        .map(|i| (if i < 50 { 120_000 } else { 100_000 }, 100_000))
        .collect();
    assert_eq!(
        stays_within(&ratios(&pairs, Limit::Ns(1_000))),
        Within::UpTo(Quantile::P99)
    );
    // Within 10 % (10 µs) the same: the 20 µs outliers are beyond it.
    assert_eq!(
        stays_within(&ratios(&pairs, Limit::Fraction(0.1))),
        Within::UpTo(Quantile::P99)
    );
    // Within 25 % every sample is inside, as far as 10 000 samples can tell.
    let all = stays_within(&ratios(&pairs, Limit::Fraction(0.25)));
    assert!(
        matches!(all, Within::AtLeast(q) if q.q >= Quantile::P99_9.q && q.q < Quantile::P99_999.q),
        "{all:?}"
    );
    assert!(all.to_string().starts_with("≥ p99."), "{all}");
    // Every sample 2 µs off: not even the median.
    let off: Vec<(u64, u64)> = (0..1_000).map(|_| (102_000, 100_000)).collect();
    assert_eq!(
        stays_within(&ratios(&off, Limit::Ns(1_000))),
        Within::BelowMedian
    );
}

#[test]
fn stays_within_says_too_few_samples_rather_than_a_percentile() {
    let few = [0.0, 0.0, 0.0];
    assert!(matches!(
        stays_within(&few),
        Within::TooFewSamples { samples: 3, .. }
    ));
    assert!(stays_within(&few)
        .to_string()
        .starts_with("too few samples"));
}

#[test]
fn the_report_is_drawn_from_the_points_with_conclusions_from_the_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    let points = PointsDir::create(&out, Existing::Refuse).unwrap();
    let keys: Vec<&str> = plan().iter().map(|p| p.key).collect();
    points
        .write(
            keys[0],
            &point("prober blocks", 2_000, |_| 130_000, |_| 8_000),
            None,
        )
        .unwrap();
    // The competitor adds 400 µs to every 50th round trip.
    let slow = |i: u64| 130_000 + if i % 50 == 0 { 400_000 } else { 0 };
    points
        .write(
            "reflector-competitor",
            &point(
                "reflector with a spinning thread on its CPU",
                2_000,
                slow,
                |_| 8_000,
            ),
            None,
        )
        .unwrap();
    fs::write(points.path().join("reflector-busy.json"), "{ not json").unwrap();
    let mut no_sockperf = point("sockperf ping-pong", 0, |_| 0, |_| 0);
    no_sockperf.group = "outside".into();
    no_sockperf.left_out = Some("sockperf is not installed".into());
    points
        .write("outside-sockperf", &no_sockperf, None)
        .unwrap();
    // The forwarder at delay 0: busy polling takes 20 µs off every round trip.
    let forwarder = |setting: &str, rtt: u64| StampPoint {
        group: "forwarder".into(),
        delay_ns: 0,
        ..point(setting, 2_000, move |_| rtt, |_| 8_000)
    };
    points
        .write(
            "forwarder-baseline",
            &forwarder("forwarder blocks, pinned, slack 1 ns", 60_000),
            None,
        )
        .unwrap();
    points
        .write(
            "forwarder-busy",
            &forwarder("forwarder busy-polls", 40_000),
            None,
        )
        .unwrap();
    let report = write(&out, "namespaces (test)").unwrap();
    let md = fs::read_to_string(report).unwrap();
    for f in [
        "methods-block.svg",
        "settings-user-space.svg",
        "settings-kernel-rx.svg",
        "settings-kernel-tx-rx.svg",
        "forwarder-user-space.svg",
        "forwarder-kernel-tx-rx.svg",
    ] {
        let svg = fs::read_to_string(out.join(f)).unwrap();
        assert!(svg.starts_with("<svg"), "{f}");
        assert!(md.contains(&format!("]({f})")), "{f} is not in report.md");
    }
    assert!(
        md.contains("| prober blocks | kernel-tx-rx | 2000 |"),
        "{md}"
    );
    assert!(
        md.contains("- With the prober that blocks: kernel-tx-rx comes closest to the reference at p99 (excess 28.0 µs), user-space (block) strays furthest (37.0 µs)."),
        "{md}"
    );
    assert!(
        md.contains("- reflector with a spinning thread on its CPU raises p99 by 400."),
        "{md}"
    );
    assert!(
        md.contains("reflector-busy.json"),
        "the unreadable point is named"
    );
    let a = Analysis::load(&out).unwrap();
    assert_eq!(a.points.len(), 5);
    assert_eq!(a.points[0].setting, "prober blocks", "in the study's order");
}

#[test]
fn the_xdp_method_reads_the_programs_stamp_and_its_point_draws_its_own_figure() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("study");
    let points = PointsDir::create(&dir, Existing::Refuse).unwrap();
    let mut xdp = point("prober over AF_XDP", 2_000, |_| 110_000, |_| 3_000);
    xdp.prober_poll = "xdp".into();
    for p in &mut xdp.probes {
        // The program stamps 1 µs before the kernel would have; no socket stamps.
        p.xdp_rx = p.kernel_rx.map(|k| k - 1_000);
        p.kernel_tx = None;
        p.kernel_rx = None;
    }
    let s = xdp.probes[0];
    assert_eq!(Method::XdpRx.rtt_ns(&s), Some(110_000));
    assert_eq!(Method::KernelRx.rtt_ns(&s), None);
    assert_eq!(Method::on(&xdp), &[Method::UserSpace, Method::XdpRx]);
    let mut busy = point("prober busy-polls", 2_000, |_| 112_000, |_| 500);
    busy.prober_poll = "busy".into();
    assert_eq!(Method::on(&busy), &Method::ALL);
    points.write("methods-prober-busy", &busy, None).unwrap();
    points.write("methods-prober-xdp", &xdp, None).unwrap();
    let report = write(&dir, "test lab").unwrap();
    let md = fs::read_to_string(report).unwrap();
    assert!(dir.join("methods-xdp.svg").is_file());
    // Excess of xdp-rx: 110 µs − (100 + 2) µs reference = 8 µs at every percentile.
    assert!(
        md.contains("| prober over AF_XDP | xdp-rx | 2000 | 8.0 | 8.0 |"),
        "{md}"
    );
    assert!(
        md.contains("| prober over AF_XDP | user-space (xdp) | 2000 |"),
        "{md}"
    );
    assert!(!md.contains("| prober over AF_XDP | kernel-rx"), "{md}");
    assert!(
        md.contains("reads an answer 4.0 µs after the XDP program stamped it"),
        "{md}"
    );
    assert!(md.contains("exceeds the reference by 8.0 µs"), "{md}");
}
