//! The transport study's plan, loss models and report on synthetic points.

use std::time::Duration;

use latlab_link::LossModel;
use latlab_stats::{ccdf, LatencyHistogram, Summary};

use super::report::{pct_ms, write};
use super::{transport_key, Cell, Clock, LossKind, TransportPoint, TransportStudyOptions};
use crate::points::{Existing, PointsDir};
use latlab_stream::wire::WireCounts;
use latlab_stream::WireReport;

#[test]
fn the_default_grid_is_the_papers() {
    let options = TransportStudyOptions::new("x".into());
    let cells = options.cells();
    // 3 RTTs × 3 interarrival times × 4 losses × random and bursty.
    assert_eq!(cells.len(), 72);
    assert_eq!(cells[0].key(), "rtt50ms-ia50ms-loss0.1-random");
    assert_eq!(cells[71].key(), "rtt200ms-ia200ms-loss2.5-bursty");
    assert_eq!(transport_key("latlab:rack:rdb=600"), "latlab_rack_rdb600");
    assert_eq!(transport_key("tcp:cc=reno,thin"), "tcp_ccreno_thin");
}

#[test]
fn bursty_loss_has_the_same_mean_in_bursts_of_three() {
    let LossModel::GilbertElliott {
        p,
        r,
        one_minus_h,
        one_minus_k,
    } = LossKind::Bursty.model(0.025)
    else {
        panic!("bursty loss is Gilbert-Elliott")
    };
    assert!((r - 1.0 / 3.0).abs() < 1e-12);
    assert_eq!((one_minus_h, one_minus_k), (1.0, 0.0));
    // Stationary share of the bad state, where every frame is lost.
    assert!((p / (p + r) - 0.025).abs() < 1e-12);
    assert_eq!(
        LossKind::Random.model(0.01),
        LossModel::Bernoulli { p: 0.01 }
    );
    let cell = Cell {
        rtt: Duration::from_millis(100),
        interval: Duration::from_millis(100),
        loss: 0.025,
        loss_kind: LossKind::Random,
    };
    assert_eq!(cell.link(7).delay_ns, 50_000_000);
    assert_eq!("bursty".parse::<LossKind>(), Ok(LossKind::Bursty));
    assert!("lumpy"
        .parse::<LossKind>()
        .unwrap_err()
        .contains("random or bursty"));
}

/// A point of `transport` at RTT/interval 100 ms and `loss`, whose `n` messages took
/// `latency(i)` ns, with `bytes` on the wire forward.
fn point(
    transport: &str,
    loss: f64,
    n: u64,
    latency: impl Fn(u64) -> u64,
    bytes: u64,
) -> TransportPoint {
    let mut h = LatencyHistogram::new();
    for i in 0..n {
        h.record(latency(i));
    }
    let forward = WireCounts {
        packets: n,
        bytes,
        retransmissions: Some(n / 40),
        spurious_retransmissions: Some(n / 400),
    };
    TransportPoint {
        transport: transport.into(),
        clock: Clock::Namespaces,
        check: false,
        reliable: transport != "udp",
        rtt_ns: 100_000_000,
        interval_ns: 100_000_000,
        loss,
        loss_kind: LossKind::Random,
        size: 100,
        streams: 10,
        sent: n,
        delivered: n,
        lost: 0,
        failed_streams: 0,
        failure: None,
        latency_ns: Summary::from_histogram(&h),
        ccdf: ccdf(&h),
        wire: WireReport::new(
            forward,
            WireCounts {
                retransmissions: Some(0),
                spurious_retransmissions: Some(0),
                ..WireCounts::default()
            },
            n,
            100,
            28,
        ),
    }
}

#[test]
fn the_report_draws_every_figure_and_states_the_target_from_the_numbers() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    let points = PointsDir::create(&out, Existing::Refuse).unwrap();
    let n = 20_000;
    // One message in 40 is lost once: a retransmission adds 300 ms for ENet, 150 ms for
    // latlab's thin policy (which sends 1.2× ENet's bytes).
    let slow =
        |extra: u64| move |i: u64| 50_000_000 + if i % 40 == 0 { extra } else { 0 } + i % 1000;
    for loss in [0.01, 0.025] {
        for (t, extra, bytes) in [
            ("enet", 300_000_000, 3_000_000),
            ("latlab:thin", 140_000_000, 3_600_000),
            ("latlab:tcp-like", 400_000_000, 3_100_000),
        ] {
            let p = point(t, loss, n, slow(extra), bytes);
            let key = format!(
                "rtt100ms-ia100ms-loss{}-random-{}",
                loss * 100.0,
                transport_key(t)
            );
            points.write(&key, &p, None).unwrap();
        }
    }
    let md = std::fs::read_to_string(write(&out, "test lab").unwrap()).unwrap();
    for f in [
        "fig2-random-rtt100ms-ia100ms.svg",
        "fig3-ccdf-random-rtt100ms-ia100ms-loss2.5.svg",
        "fig4-overhead-random.svg",
        "fig5-cost-random-rtt100ms-ia100ms-loss1.svg",
        "fig5-cost-random-rtt100ms-ia100ms-loss2.5.svg",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    assert!(md.contains("| 2.5% | latlab:thin | 20000 | 0 |"), "{md}");
    // 20000 / 40 retransmissions, 20000 / 400 of them spurious.
    assert!(md.contains("| 1.00 | 500 | 50 |\n"), "{md}");
    assert!(
        md.contains("the reliable transport with the lowest maximum latency, cell by cell (2 cells): latlab:thin in 2"),
        "{md}"
    );
    // 190 ms against 350 ms at the maximum (as the histogram holds them): 0.54×, above half: the target is not held.
    let thin = point("latlab:thin", 0.025, n, slow(140_000_000), 3_600_000);
    assert!((pct_ms(&thin, "p99_9").unwrap() - 190.0).abs() < 1.0);
    assert!(md.contains("latlab's best (latlab:thin) has a maximum of 190.1 ms against 350.2 ms, the lowest of any peer (enet), 0.54×"), "{md}");
    assert!(md.contains("wire bytes 1.20× ENet's"), "{md}");
    assert!(
        md.contains("): not held (0 of the cell's 2 latlab policies held)."),
        "{md}"
    );
    // No UDP point: nothing said of the machine.
    assert!(!md.contains("keep up"), "{md}");
    // Plain UDP 20 ms late at p99 on a 50 ms one-way path: the machine did not keep up.
    let udp = point(
        "udp",
        0.025,
        n,
        |i| 50_000_000 + if i % 50 == 0 { 20_000_000 } else { 0 },
        2_560_000,
    );
    points
        .write("rtt100ms-ia100ms-loss2.5-random-udp", &udp, None)
        .unwrap();
    let md = std::fs::read_to_string(write(&out, "test lab").unwrap()).unwrap();
    assert!(
        md.contains("**The machine could not keep up**: plain UDP's p99 was 20.1 ms above"),
        "{md}"
    );
}

#[test]
fn a_virtual_study_measures_the_sans_io_transports_and_leaves_the_others_out_with_a_line() {
    let tmp = tempfile::tempdir().unwrap();
    let mut options = TransportStudyOptions::new(tmp.path().join("study"));
    options.rtts = vec![Duration::from_millis(100)];
    options.intervals = vec![Duration::from_millis(100)];
    options.losses = vec![0.025];
    options.loss_kinds = vec![LossKind::Random, LossKind::Bursty];
    options.transports = [
        "udp",
        "tcp:cc=cubic",
        "enet",
        "kcp:mode=fast",
        "latlab:rack:rdb=600",
    ]
    .iter()
    .map(|t| t.parse().unwrap())
    .collect();
    options.duration = Duration::from_secs(120);
    options.virtual_time = true;
    options.checks = 0;
    let mut notes = Notes::default();
    let report = <super::TransportsStudy as crate::Study>::run(
        &options,
        &latlab_engine::Stop::new(),
        &mut notes,
    )
    .unwrap();
    assert_eq!(
        notes
            .0
            .iter()
            .filter(|n| n.starts_with("left out: "))
            .count(),
        2,
        "{:?}",
        notes.0
    );
    let md = std::fs::read_to_string(report.report).unwrap();
    assert!(md.contains("Measured in **virtual time**"), "{md}");
    assert!(
        !md.contains("| enet |") && !md.contains("tcp:cc=cubic"),
        "{md}"
    );
    assert!(!md.contains("## Virtual time against namespaces"), "{md}");
    let loaded = super::report::Loaded::load(&options.out).unwrap();
    assert_eq!(loaded.points.len(), 2 * 3);
    for p in &loaded.points {
        assert_eq!(p.clock, Clock::Virtual);
        // Ten streams of 1,200 messages; the reliable ones lose none.
        assert_eq!(p.sent, 12_000, "{}", p.transport);
        if p.reliable {
            assert_eq!(
                (p.lost, p.failed_streams),
                (0, 0),
                "{}: {:?}",
                p.transport,
                p.failure
            );
        } else {
            assert!(p.lost > 100, "udp lost {} at 2.5%", p.lost);
        }
    }
    // The same seeds give the same points: --resume keeps them, a new folder measures them again.
    let again_out = tmp.path().join("again");
    let again = TransportStudyOptions {
        out: again_out.clone(),
        ..options.clone()
    };
    <super::TransportsStudy as crate::Study>::run(
        &again,
        &latlab_engine::Stop::new(),
        &mut Notes::default(),
    )
    .unwrap();
    let again = super::report::Loaded::load(&again_out).unwrap();
    let latlab = |l: &super::report::Loaded| {
        l.points
            .iter()
            .filter(|p| p.transport.starts_with("latlab"))
            .map(|p| p.latency_ns.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(latlab(&loaded), latlab(&again));
}

#[test]
fn the_cross_checks_compare_each_virtual_point_with_its_namespace_twin() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    let points = PointsDir::create(&out, Existing::Refuse).unwrap();
    let n = 20_000;
    let write = |t: &str, clock: Clock, extra: u64| {
        let mut p = point(
            t,
            0.025,
            n,
            move |i| 50_000_000 + extra + i % 100_000,
            3_000_000,
        );
        p.clock = clock;
        p.check = clock == Clock::Namespaces;
        let suffix = if p.check { "-check" } else { "" };
        let key = format!(
            "rtt100ms-ia100ms-loss2.5-random-{}{suffix}",
            transport_key(t)
        );
        points.write(&key, &p, None).unwrap();
    };
    // The same distribution both ways; one 300 µs late in namespaces, as plain UDP is there
    // (the machine's own delay); one 5 ms late.
    write("latlab:thin", Clock::Virtual, 0);
    write("latlab:thin", Clock::Namespaces, 0);
    write("quic", Clock::Virtual, 0);
    write("quic", Clock::Namespaces, 300_000);
    write("kcp:mode=fast", Clock::Virtual, 0);
    write("kcp:mode=fast", Clock::Namespaces, 5_000_000);
    write("udp", Clock::Virtual, 0);
    write("udp", Clock::Namespaces, 300_000);
    let md = std::fs::read_to_string(super::report::write(&out, "test lab").unwrap()).unwrap();
    let row = |t: &str| {
        md.lines()
            .find(|l| l.starts_with("| RTT 100 ms") && l.contains(&format!("| {t} |")))
            .unwrap_or_else(|| panic!("no row for {t}: {md}"))
            .to_string()
    };
    assert!(
        row("latlab:thin").ends_with("| yes |"),
        "{}",
        row("latlab:thin")
    );
    assert!(
        row("quic").ends_with("| yes, within the machine's delay |"),
        "{}",
        row("quic")
    );
    assert!(
        row("kcp:mode=fast").ends_with("| no |"),
        "{}",
        row("kcp:mode=fast")
    );
    assert!(md.contains("Of 4 cross-checked points, 1 agree within their confidence intervals at p50 and p99, and 2 more once"), "{md}");
    // The checks stay out of the grid's tables.
    assert_eq!(md.matches("| 2.5% | latlab:thin |").count(), 1, "{md}");
}

/// Progress that keeps the notes.
#[derive(Default)]
struct Notes(Vec<String>);

impl latlab_lab::progress::View for Notes {
    fn note(&mut self, line: &str) {
        self.0.push(line.to_string());
    }
}

#[test]
fn a_stream_that_failed_is_reported_with_every_cause_of_its_error() {
    use latlab_lab::command::CommandError;
    let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
    let error = CommandError::Setup {
        context: "--target 198.18.0.2:41481: no latlab stream recv answers there".into(),
        source: refused,
    };
    assert_eq!(
        super::run::whole_chain(&error),
        "--target 198.18.0.2:41481: no latlab stream recv answers there: connection refused"
    );
    // A message that already ends with its cause's is not followed by it again.
    let io = std::io::Error::other("no such file");
    let wrapped = CommandError::Io(io);
    assert_eq!(super::run::whole_chain(&wrapped), "no such file");
}

#[test]
fn the_target_takes_the_lowest_maximum_and_the_lowest_p99_9_of_any_peer_each_on_its_own() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("study");
    let points = PointsDir::create(&out, Existing::Refuse).unwrap();
    let n = 20_000;
    // `extra` ms more for one message in `every` (and `once` ms for message 7): the p99.9 is
    // the 20th slowest message.
    let late = |every: u64, extra: u64, once: u64| {
        move |i: u64| {
            let ms = if i == 7 {
                once
            } else if i % every == 0 {
                extra
            } else {
                0
            };
            50_000_000 + ms * 1_000_000 + i % 1000
        }
    };
    for (t, f, bytes) in [
        // The lowest maximum (~350 ms), a p99.9 of ~350 ms.
        ("enet", late(40, 300, 300), 3_000_000),
        // The lowest p99.9 (~200 ms), a maximum of ~650 ms.
        ("kcp:mode=fast", late(400, 150, 600), 3_000_000),
        // Half ENet's of both, but a p99.9 of ~160 ms, above half KCP's: not held.
        ("latlab:thin", late(400, 110, 110), 3_300_000),
        // 10 late messages (fewer than the p99.9's 20) at ~170 ms: held.
        ("latlab:lean", late(2000, 120, 120), 3_300_000),
    ] {
        let p = point(t, 0.025, n, f, bytes);
        let key = format!("rtt100ms-ia100ms-loss2.5-random-{}", transport_key(t));
        points.write(&key, &p, None).unwrap();
    }
    let md = std::fs::read_to_string(write(&out, "test lab").unwrap()).unwrap();
    assert!(
        md.contains("latlab's best (latlab:lean) has a maximum of 170.0 ms against 350.2 ms, the lowest of any peer (enet), 0.49×"),
        "{md}"
    );
    assert!(
        md.contains(
            "p99.9 50.0 ms against 200.0 ms, the lowest of any peer (kcp:mode=fast), 0.25×"
        ),
        "{md}"
    );
    assert!(md.contains("wire bytes 1.10× ENet's"), "{md}");
    assert!(
        md.contains("): held (1 of the cell's 2 latlab policies held)."),
        "{md}"
    );
}
