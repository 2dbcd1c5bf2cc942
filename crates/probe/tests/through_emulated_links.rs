//! A whole measurement in virtual time: `Sender` → pipe → reflector → pipe → `Meter`, over the
//! emulator's own link model (`latlab_link::sim`), with delay, jitter and loss each way. The
//! meter's figures must be exactly what the pipes did to the probes.

use std::collections::HashMap;
use std::net::SocketAddr;

use latlab_link::sim::{Datagram, Network, Side};
use latlab_link::{Fate, LinkConfig, LossModel};
use latlab_probe::{Meter, MeterReport, ProbeConfig, Response, Sender};
use latlab_wire::probe;

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
const SECOND: u64 = 1_000 * MS;

fn client() -> SocketAddr {
    "10.0.0.2:40000".parse().unwrap() // a literal that parses
}

fn reflector() -> SocketAddr {
    "10.0.0.1:7".parse().unwrap() // a literal that parses
}

/// A one-way link: `delay_ms` ± `jitter_us` (uniform), `loss` independent loss.
fn link(delay_ms: u64, jitter_us: u64, loss: f64, seed: u64) -> LinkConfig {
    LinkConfig {
        delay_ns: delay_ms * MS,
        jitter_ns: jitter_us * US,
        loss: LossModel::Bernoulli { p: loss },
        seed,
        ..LinkConfig::default()
    }
}

/// The one-way delay the pipe gave a datagram sent at `now`: `None` if it dropped it.
fn one_way(fate: Option<Fate>, now: u64) -> Option<u64> {
    match fate.expect("no drop filter in this test") {
        Fate::Deliver { departure_ns, .. } => Some(departure_ns - now),
        Fate::Drop(_) => None,
    }
}

/// What one run measured, and what the pipes did.
struct Run {
    network: Network,
    report: MeterReport,
    /// Per sequence number: the pipes' delays there and back (back only if it got there).
    hops: HashMap<u64, (Option<u64>, Option<u64>)>,
    /// Per sequence number: the latency the meter recorded.
    recorded: HashMap<u64, u64>,
}

/// 2 s of 1000 probes/s from the client through a 2 ms ± 500 µs, 3 % loss link to a reflector
/// and back through a 3 ms ± 1 ms, 5 % loss link; 100 ms of grace after the last probe.
fn run(seed: u64) -> Run {
    let config = ProbeConfig {
        rate_pps: 1000.0,
        start_ns: SECOND,
        duration_ns: 2 * SECOND,
        ..ProbeConfig::default()
    };
    let mut sender = Sender::new(&config).unwrap();
    let mut meter = Meter::new(&config);
    let mut network =
        Network::new(0, link(2, 500, 0.03, seed), link(3, 1000, 0.05, seed + 1)).unwrap();
    let mut hops: HashMap<u64, (Option<u64>, Option<u64>)> = HashMap::new();
    let mut recorded = HashMap::new();
    let mut buf = vec![0u8; config.payload_len];
    let until = config.end_ns() + 100 * MS;
    loop {
        let now = network.now();
        // The client sends what is due, stamping the actual send time as an engine does.
        while let Some(sent) = sender.poll_transmit(now, &mut buf) {
            probe::Packet::new_unchecked(&mut buf[..]).set_actual_send_ns(now);
            let datagram = Datagram {
                from: client(),
                to: reflector(),
                payload: buf.clone(),
            };
            let there = one_way(network.send(Side::A, &datagram), now);
            hops.insert(sent.seq, (there, None));
        }
        while let Some(delivery) = network.poll_delivery() {
            let mut payload = delivery.datagram.payload;
            let seq = probe::Packet::new_checked(&payload[..]).unwrap().seq();
            match delivery.side {
                // The reflector stamps its receive and transmit times and answers at once.
                Side::B => {
                    probe::Packet::new_unchecked(&mut payload[..]).set_responder_stamps(now, now);
                    let answer = Datagram {
                        from: reflector(),
                        to: client(),
                        payload,
                    };
                    let back = one_way(network.send(Side::B, &answer), now);
                    hops.get_mut(&seq).expect("a probe the client sent").1 = back;
                }
                Side::A => match meter.handle_response(now, &payload) {
                    Response::Recorded { latency_ns, .. } => {
                        recorded.insert(seq, latency_ns);
                    }
                    other => panic!("probe {seq}: {other:?}"),
                },
            }
        }
        let next = [network.poll_timeout(), sender.poll_timeout()]
            .into_iter()
            .flatten()
            .min();
        match next {
            Some(at) if at <= until => network.advance_to(at),
            _ => break,
        }
    }
    let report = meter.report(&sender.counts());
    Run {
        network,
        report,
        hops,
        recorded,
    }
}

#[test]
fn the_meter_counts_exactly_what_the_pipes_delivered_and_dropped() {
    let Run {
        network, report, ..
    } = run(11);
    let there = network.pipe(Side::A).counters();
    let back = network.pipe(Side::B).counters();
    assert_eq!(report.sent, 2000);
    assert_eq!(there.arrived, report.sent);
    assert_eq!(
        back.arrived, there.delivered,
        "the reflector answered every probe"
    );
    assert_eq!(report.received, back.delivered);
    assert_eq!(report.lost, there.dropped() + back.dropped());
    assert_eq!(there.dropped(), there.dropped_loss);
    assert!(report.lost > 0, "the loss was exercised: {report:?}");
    assert_eq!(report.latency.len(), report.received);
    assert_eq!(
        (report.duplicated, report.reordered, report.malformed()),
        (0, 0, 0)
    );
}

#[test]
fn every_latency_is_the_two_pipes_delays_for_that_probe() {
    let Run {
        hops,
        recorded,
        report,
        ..
    } = run(11);
    let mut both_ways = 0;
    for (seq, (there, back)) in &hops {
        let Some(there) = there else {
            assert!(!recorded.contains_key(seq), "probe {seq} was lost going");
            continue;
        };
        assert!(
            (1500 * US..=2500 * US).contains(there),
            "probe {seq}: {there} ns there, 2 ms ± 500 µs expected"
        );
        let Some(back) = back else {
            assert!(
                !recorded.contains_key(seq),
                "probe {seq} was lost coming back"
            );
            continue;
        };
        assert!(
            (2 * MS..=4 * MS).contains(back),
            "probe {seq}: {back} ns back, 3 ms ± 1 ms expected"
        );
        assert_eq!(recorded.get(seq), Some(&(there + back)), "probe {seq}");
        both_ways += 1;
    }
    assert_eq!(both_ways, report.received);
    // The meter's trace holds the same exact figures, in arrival order.
    let traced: Vec<u64> = report.trace.iter().map(|&(_, latency)| latency).collect();
    let mut expected: Vec<(u64, u64)> = recorded.iter().map(|(&s, &l)| (s, l)).collect();
    expected.sort_unstable();
    assert_eq!(
        traced,
        expected.iter().map(|&(_, l)| l).collect::<Vec<_>>(),
        "in order: the links keep order"
    );
    // The histogram's extremes are the exact ones to its 3 significant digits, within
    // 5 ms ± 1.5 ms.
    let exact_min = recorded.values().min().copied().unwrap();
    let exact_max = recorded.values().max().copied().unwrap();
    assert!(exact_min >= 3_500 * US && exact_max <= 6_500 * US);
    let (min, max) = (report.latency.min(), report.latency.max());
    assert!(
        min.abs_diff(exact_min) <= exact_min / 1000,
        "{min} vs {exact_min}"
    );
    assert!(
        max.abs_diff(exact_max) <= exact_max / 1000,
        "{max} vs {exact_max}"
    );
}

#[test]
fn the_same_seed_measures_the_same_run() {
    let (a, b) = (run(5), run(5));
    assert_eq!(a.recorded, b.recorded);
    assert_eq!(a.report.lost, b.report.lost);
    assert_ne!(run(6).recorded, a.recorded);
}
