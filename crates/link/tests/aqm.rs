//! Queue disciplines in virtual time, against the RFCs' pseudo-code on constructed arrivals:
//! CoDel's drop times (RFC 8289's control law, and its state kept across episodes), ECN marks
//! in place of drops, FQ-CoDel's isolation of a sparse flow and its overflow from the fattest
//! queue (RFC 8290), PIE's probability under a steady overload (RFC 8033), and the changes of
//! discipline of a running pipe.

mod common;

use common::{frame, number_of as arrival_of, sport_of};
use latlab_link::{Aqm, Discipline, LinkConfig, Pipe};
use latlab_wire::{checksum, ecn};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;

/// 10 Mbit/s, 24 bytes of overhead: a 1000-byte frame takes (1000 + 24)·8 / 10⁷ s = 819.2 µs.
const RATE: u64 = 10_000_000;
const TX_1000: u64 = 819_200;

fn link(aqm: Aqm) -> LinkConfig {
    LinkConfig {
        rate_bps: Some(RATE),
        limit_frames: Some(10_000),
        aqm,
        ..LinkConfig::default()
    }
}

fn codel() -> Aqm {
    Aqm {
        discipline: Discipline::Codel,
        ..Aqm::default()
    }
}

/// What a run saw: each departure `(now, frame)` and the times of the discipline's drops.
#[derive(Default)]
struct Seen {
    departures: Vec<(u64, Vec<u8>)>,
    drops: Vec<u64>,
}

/// Feeds `arrivals` (time, frame) to `pipe` and polls it at every time it names, up to
/// `until`; a drop is seen at the time of the call that made it (a service instant: the pipe
/// is polled at each).
fn run(pipe: &mut Pipe, arrivals: &[(u64, Vec<u8>)], until: u64) -> Seen {
    let mut seen = Seen::default();
    let mut next = 0;
    loop {
        let arrival = arrivals.get(next).map(|a| a.0);
        let now = match (arrival, pipe.poll_timeout()) {
            (Some(a), Some(p)) => a.min(p),
            (a, p) => match a.or(p) {
                Some(t) => t,
                None => break,
            },
        };
        if now > until {
            break;
        }
        let dropped = pipe.counters().aqm_drop;
        while let Some(departure) = pipe.poll_departure(now) {
            seen.departures.push((now, departure.frame().to_vec()));
        }
        if arrival == Some(now) {
            pipe.handle_arrival(now, &arrivals[next].1);
            next += 1;
        }
        for _ in dropped..pipe.counters().aqm_drop {
            seen.drops.push(now);
        }
    }
    seen
}

/// 1000-byte frames of port `sport` every `gap` from `from` until `to`.
fn stream(sport: u16, tos: u8, gap: u64, from: u64, to: u64) -> Vec<(u64, Vec<u8>)> {
    (0..)
        .map(|i| from + i * gap)
        .take_while(|&t| t < to)
        .map(|t| (t, frame(1000, sport, tos, t)))
        .collect()
}

/// The first service instant at or after `t` (the wire never idles: one every 819.2 µs).
fn service_at_or_after(t: u64) -> u64 {
    t.div_ceil(TX_1000) * TX_1000
}

#[test]
fn codel_drops_at_the_times_of_rfc_8289s_control_law() {
    // Twice the rate from t = 0: the frame served at instant n·819.2 µs arrived at
    // n·409.6 µs, so the sojourn first reaches the 5 ms target at n = 13.
    let arrivals = stream(1, 0, TX_1000 / 2, 0, 600 * MS);
    let mut pipe = Pipe::new(link(codel()), 0).unwrap();
    // Run until the queue has drained, and look at the drops while the overload lasts.
    let seen = run(&mut pipe, &arrivals, 10_000 * MS);
    assert_eq!(pipe.queued_frames(), 0);
    let above = 13 * TX_1000;
    // First drop: the first service an interval after the sojourn went above the target.
    let mut expected = vec![service_at_or_after(above + 100 * MS)];
    // Then drop_next = control_law(drop_next, count) = drop_next + interval/√count, each
    // drop at the first service instant at or after it.
    let mut drop_next = expected[0] + 100 * MS;
    let mut count = 1u32;
    while service_at_or_after(drop_next) < 600 * MS {
        expected.push(service_at_or_after(drop_next));
        count += 1;
        drop_next += (100.0 * MS as f64 / f64::from(count).sqrt()) as u64;
    }
    assert!(expected.len() >= 6, "{expected:?}");
    let during: Vec<u64> = seen
        .drops
        .iter()
        .copied()
        .filter(|&t| t < 600 * MS)
        .collect();
    assert_eq!(during, expected);
    let counters = pipe.counters();
    assert_eq!(counters.aqm_drop, seen.drops.len() as u64);
    assert_eq!((counters.aqm_mark, counters.aqm_overflow), (0, 0));
    assert_eq!(
        counters.delivered - counters.aqm_drop,
        seen.departures.len() as u64
    );
    // The sojourn histogram has every frame sent.
    let sojourn = pipe.sojourn().expect("codel records sojourn times");
    assert_eq!(sojourn.len(), seen.departures.len() as u64);
    assert_eq!(sojourn.min(), 0);
}

#[test]
fn codel_keeps_its_count_across_episodes() {
    // Episode 1: overload for 600 ms, then nothing until the queue drains; episode 2 starts
    // 1.4 s in, within 16 intervals of the last drop.
    let mut arrivals = stream(1, 0, TX_1000 / 2, 0, 600 * MS);
    arrivals.extend(stream(1, 0, TX_1000 / 2, 1_400 * MS, 2_000 * MS));
    let mut pipe = Pipe::new(link(codel()), 0).unwrap();
    let seen = run(&mut pipe, &arrivals, 2_000 * MS);
    let (first, second): (Vec<u64>, Vec<u64>) = seen.drops.iter().partition(|&&t| t < 1_400 * MS);
    assert!(
        first.len() >= 6 && second.len() >= 2,
        "{first:?} {second:?}"
    );
    // Episode 1 ended with count = its drops, lastcount = 1: episode 2 begins with
    // count = delta = drops − 1, its second drop interval/√delta after its first (instead of
    // a whole interval).
    let delta = first.len() as f64 - 1.0;
    let gap = second[1] - second[0];
    let law = (100.0 * MS as f64 / delta.sqrt()) as u64;
    assert!(gap >= law && gap < law + TX_1000, "gap {gap} law {law}");
    assert!(gap < 100 * MS / 2);
}

#[test]
fn with_ecn_codel_marks_ect_frames_and_still_drops_the_others() {
    let mut config = link(Aqm {
        ecn: true,
        ..codel()
    });
    // ECT(0) frames: marked where CoDel would drop, every one sent, each CE frame's IPv4
    // checksum right.
    let arrivals = stream(1, 0x02, TX_1000 / 2, 0, 600 * MS);
    let mut pipe = Pipe::new(config.clone(), 0).unwrap();
    let seen = run(&mut pipe, &arrivals, 600 * MS);
    let counters = *pipe.counters();
    assert_eq!(counters.aqm_drop, 0);
    assert!(counters.aqm_mark >= 6, "{counters:?}");
    let marked: Vec<&Vec<u8>> = seen
        .departures
        .iter()
        .map(|(_, f)| f)
        .filter(|f| ecn::read(f) == ecn::Ecn::Ce)
        .collect();
    assert_eq!(marked.len() as u64, counters.aqm_mark);
    for f in marked {
        assert_eq!(checksum::internet(&f[14..34]), 0);
    }
    // Not ECN-capable: dropped as without ECN.
    config.seed = 1;
    let arrivals = stream(1, 0x00, TX_1000 / 2, 0, 600 * MS);
    let mut pipe = Pipe::new(config, 0).unwrap();
    run(&mut pipe, &arrivals, 600 * MS);
    assert_eq!(pipe.counters().aqm_mark, 0);
    assert!(pipe.counters().aqm_drop >= 6);
}

/// Four bulk flows at the rate each (four times the link), and a sparse flow of 100-byte
/// frames every 20 ms, for 2 s.
fn four_bulk_and_one_sparse() -> Vec<(u64, Vec<u8>)> {
    let mut arrivals: Vec<(u64, Vec<u8>)> = Vec::new();
    for sport in 1..=4 {
        arrivals.extend(stream(sport, 0, TX_1000 + sport as u64, 0, 2_000 * MS));
    }
    // From 100 ms on, once the bulk flows are old flows (at the start every flow is new).
    for t in (100 * MS..2_000 * MS)
        .step_by(20 * MS as usize)
        .map(|t| t + 7 * US)
    {
        arrivals.push((t, frame(100, 9, 0, t)));
    }
    arrivals.sort_by_key(|a| a.0);
    arrivals
}

/// How long each sparse frame waited before the wire took it: departure − arrival − its own
/// time on the wire ((100 + 24)·8 / 10⁷ s).
fn sparse_waits(seen: &Seen) -> Vec<u64> {
    seen.departures
        .iter()
        .filter(|(_, f)| sport_of(f) == 9)
        .map(|(at, f)| at - arrival_of(f) - 99_200)
        .collect()
}

#[test]
fn fq_codel_keeps_a_sparse_flows_delay_under_one_quantums_time() {
    let arrivals = four_bulk_and_one_sparse();
    let fq = Aqm {
        discipline: Discipline::FqCodel,
        ..Aqm::default()
    };
    let mut pipe = Pipe::new(link(fq), 0).unwrap();
    let seen = run(&mut pipe, &arrivals, 2_000 * MS);
    let waits = sparse_waits(&seen);
    assert_eq!(waits.len(), 95, "every sparse frame sent");
    // One quantum (1514 bytes + 24 overhead) at 10 Mbit/s: 1.2304 ms. A sparse frame waits
    // at most for the frame on the wire.
    let quantum_ns = (1514 + 24) * 8 * 1_000_000_000 / RATE;
    assert!(waits.iter().all(|&w| w < quantum_ns), "{waits:?}");
    // The bulk flows share the wire evenly (each within 5% of a quarter of their frames).
    let bulk: Vec<usize> = (1..=4)
        .map(|sport| {
            seen.departures
                .iter()
                .filter(|(_, f)| sport_of(f) == sport)
                .count()
        })
        .collect();
    let total: usize = bulk.iter().sum();
    for n in &bulk {
        assert!((*n as f64 / total as f64 - 0.25).abs() < 0.0125, "{bulk:?}");
    }
    assert!(pipe.counters().aqm_drop > 0);
    // One FIFO under CoDel: the sparse frames wait behind the bulk, above the target.
    let mut pipe = Pipe::new(link(codel()), 0).unwrap();
    let seen = run(&mut pipe, &arrivals, 2_000 * MS);
    let waits = sparse_waits(&seen);
    let late = waits.iter().filter(|&&w| w > 5 * MS).count();
    assert!(late > waits.len() / 2, "{waits:?}");
}

#[test]
fn fq_codel_overflow_drops_from_the_fattest_queue_not_the_arrival() {
    let arrivals = four_bulk_and_one_sparse();
    let fq = Aqm {
        discipline: Discipline::FqCodel,
        ..Aqm::default()
    };
    let config = LinkConfig {
        limit_frames: Some(40),
        ..link(fq)
    };
    let mut pipe = Pipe::new(config, 0).unwrap();
    let seen = run(&mut pipe, &arrivals, 2_000 * MS);
    let counters = *pipe.counters();
    assert!(counters.aqm_overflow > 0, "{counters:?}");
    assert_eq!(
        counters.dropped_queue_frames, 0,
        "arrivals are never the ones dropped"
    );
    assert_eq!(
        sparse_waits(&seen).len(),
        95,
        "the sparse flow loses nothing"
    );
    assert!(pipe.queued_frames() <= 40);
}

#[test]
fn pie_settles_its_probability_where_the_overload_is_dropped_and_the_delay_near_the_target() {
    // 1.5 times the rate for 4 s: the queue is steady only once a third of the arrivals are
    // dropped. Past the burst allowance the probability climbs (the delay far above 15 ms),
    // overshoots and settles where the drops are a third: with the de-randomised drop of
    // RFC 8033 section 5.1 a frame is dropped no earlier than the arrival at which the summed
    // probability reaches 0.85, so for p in 0.425..0.85 a drop comes every 1 + 1/p arrivals
    // on average, a share of p / (1 + p): a third at p = 0.5.
    let arrivals = stream(1, 0, TX_1000 * 2 / 3, 0, 4_000 * MS);
    let pie = Aqm {
        discipline: Discipline::Pie,
        ..Aqm::default()
    };
    let mut pipe = Pipe::new(link(pie), 0).unwrap();
    let before = arrivals.iter().take_while(|a| a.0 < 3_000 * MS).count();
    let first = run(&mut pipe, &arrivals[..before], 3_000 * MS);
    // The burst allowance: nothing dropped in the first 150 ms.
    assert!(first.drops[0] > 150 * MS, "{:?}", &first.drops[..3]);
    let p = pipe.pie_drop_probability().unwrap();
    assert!((0.45..0.55).contains(&p), "p {p}");
    let drops_before = pipe.counters().aqm_drop;
    let last = run(&mut pipe, &arrivals[before..], 4_000 * MS);
    let share = (pipe.counters().aqm_drop - drops_before) as f64 / (arrivals.len() - before) as f64;
    assert!((share - 1.0 / 3.0).abs() < 0.03, "dropped {share}");
    // The last second's frames wait about the target (15 ms), not the hundreds of ms the
    // queue reached before the probability caught up.
    let waits: Vec<u64> = last
        .departures
        .iter()
        .map(|(at, f)| at - arrival_of(f) - TX_1000)
        .collect();
    let mean = waits.iter().sum::<u64>() / waits.len() as u64;
    assert!((5 * MS..25 * MS).contains(&mean), "mean wait {mean}");
    let peak = first
        .departures
        .iter()
        .map(|(at, f)| at - arrival_of(f))
        .max()
        .unwrap();
    assert!(peak > 100 * MS, "peak {peak}");
}

#[test]
fn changing_the_discipline_keeps_every_waiting_frame_in_order() {
    let arrivals = stream(1, 0, TX_1000 / 2, 0, 100 * MS);
    let mut pipe = Pipe::new(link(codel()), 0).unwrap();
    let mut seen = run(&mut pipe, &arrivals, 50 * MS);
    let waiting = pipe.queued_frames();
    assert!(waiting > 20);
    // To tail drop: the waiting frames go out at the rate, then the new arrivals after them.
    pipe.handle_config(50 * MS, link(Aqm::default())).unwrap();
    assert_eq!(pipe.queued_frames(), waiting);
    let rest: Vec<(u64, Vec<u8>)> = arrivals
        .iter()
        .filter(|a| a.0 >= 50 * MS)
        .cloned()
        .collect();
    let later = run(&mut pipe, &rest, 1_000 * MS);
    seen.departures.extend(later.departures);
    let order: Vec<u64> = seen.departures.iter().map(|(_, f)| arrival_of(f)).collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]));
    assert_eq!(order.len(), arrivals.len());
    // To FQ-CoDel and back to CoDel with new parameters: nothing lost either.
    let fq = Aqm {
        discipline: Discipline::FqCodel,
        ..Aqm::default()
    };
    pipe.handle_config(1_000 * MS, link(fq)).unwrap();
    pipe.handle_config(
        1_000 * MS,
        link(Aqm {
            target_ns: Some(2 * MS),
            ..codel()
        }),
    )
    .unwrap();
    assert_eq!(pipe.counters().aqm_drop + pipe.counters().aqm_overflow, 0);
}

#[test]
fn a_discipline_without_a_rate_and_parameters_out_of_range_are_refused_by_field() {
    let check = |config: LinkConfig| config.validate().unwrap_err().field();
    let no_rate = LinkConfig {
        aqm: codel(),
        ..LinkConfig::default()
    };
    assert_eq!(check(no_rate), Some("aqm"));
    let bad = |aqm: Aqm| check(link(aqm));
    assert_eq!(
        bad(Aqm {
            target_ns: Some(200 * MS),
            ..codel()
        }),
        Some("aqm_target")
    );
    assert_eq!(
        bad(Aqm {
            interval_ns: 0,
            ..codel()
        }),
        Some("aqm_interval")
    );
    assert_eq!(
        bad(Aqm {
            flows: 0,
            ..codel()
        }),
        Some("aqm_flows")
    );
    assert_eq!(
        bad(Aqm {
            quantum: 10,
            ..codel()
        }),
        Some("aqm_quantum")
    );
    assert_eq!(
        bad(Aqm {
            tupdate_ns: Some(10),
            ..codel()
        }),
        Some("aqm_tupdate")
    );
    assert_eq!(
        bad(Aqm {
            alpha: Some(-1.0),
            ..codel()
        }),
        Some("aqm_alpha")
    );
    assert_eq!(
        bad(Aqm {
            beta: Some(f64::NAN),
            ..codel()
        }),
        Some("aqm_beta")
    );
    assert_eq!(
        bad(Aqm {
            max_burst_ns: 11_000 * MS,
            ..codel()
        }),
        Some("aqm_max_burst")
    );
    assert_eq!(
        bad(Aqm {
            ecn: true,
            ..Aqm::default()
        }),
        Some("ecn")
    );
    // PIE's default target (15 ms) is not CoDel's (5 ms); a target above CoDel's interval is
    // fine for PIE, which has none.
    let pie = Aqm {
        discipline: Discipline::Pie,
        target_ns: Some(200 * MS),
        ..Aqm::default()
    };
    assert_eq!(link(pie).validate(), Ok(()));
    assert_eq!(
        Aqm {
            discipline: Discipline::Pie,
            ..Aqm::default()
        }
        .target(),
        15 * MS
    );
    assert_eq!(codel().target(), 5 * MS);
    // DualPI2's own knobs, and the defaults it shares with PIE set for each.
    let dual = || Aqm {
        discipline: Discipline::DualPi2,
        ..Aqm::default()
    };
    assert_eq!(link(dual()).validate(), Ok(()));
    for coupling in [0.1, 17.0, f64::NAN] {
        assert_eq!(bad(Aqm { coupling, ..dual() }), Some("aqm_coupling"));
    }
    for step_ns in [0, 2_000 * MS] {
        assert_eq!(bad(Aqm { step_ns, ..dual() }), Some("aqm_step"));
    }
    let (d, p) = (
        dual(),
        Aqm {
            discipline: Discipline::Pie,
            ..Aqm::default()
        },
    );
    assert_eq!(
        (d.target(), d.tupdate(), d.alpha(), d.beta()),
        (15 * MS, 16 * MS, 0.16, 3.2)
    );
    assert_eq!((p.tupdate(), p.alpha(), p.beta()), (15 * MS, 0.125, 1.25));
    let message = link(Aqm {
        coupling: 20.0,
        ..dual()
    })
    .validate()
    .unwrap_err()
    .to_string();
    assert_eq!(message, "aqm_coupling: 20 is outside 0.5..=16");
    let message = link(Aqm {
        flows: 0,
        ..codel()
    })
    .validate()
    .unwrap_err()
    .to_string();
    assert_eq!(message, "aqm_flows: 0 is outside 1..=65536");
    let message = link(Aqm {
        tupdate_ns: Some(10),
        ..codel()
    })
    .validate()
    .unwrap_err()
    .to_string();
    assert_eq!(message, "aqm_tupdate: 10ns is outside 1ms..=1s");
}

#[test]
fn a_rate_changed_while_frames_wait_applies_from_the_change_on() {
    // Ten 1000-byte frames at once at 1 Mbit/s (8.192 ms each on the wire); at 20 ms the rate
    // becomes 100 Mbit/s (81.92 µs). The third frame took the wire at 16.384 ms, before the
    // change, so it keeps the old rate; the rest get the new one.
    let slow = LinkConfig {
        rate_bps: Some(1_000_000),
        ..link(codel())
    };
    let mut pipe = Pipe::new(slow.clone(), 0).unwrap();
    for i in 0..10 {
        pipe.handle_arrival(0, &frame(1000, 1, 0, i));
    }
    pipe.handle_config(
        20 * MS,
        LinkConfig {
            rate_bps: Some(100_000_000),
            ..slow
        },
    )
    .unwrap();
    let seen = run(&mut pipe, &[], 100 * MS);
    let departures: Vec<u64> = seen.departures.iter().map(|(at, _)| *at).collect();
    let mut expected = vec![8_192_000, 16_384_000, 24_576_000];
    for i in 1..=7 {
        expected.push(24_576_000 + i * 81_920);
    }
    assert_eq!(departures, expected);
}

/// The sojourn times of `n` 1000-byte frames arriving together at 0 into a pipe of `config`,
/// after every one has left.
fn sojourn_of_a_burst(config: LinkConfig, n: u64) -> latlab_stats::LatencyHistogram {
    let mut pipe = Pipe::new(config, 0).unwrap();
    for _ in 0..n {
        pipe.handle_arrival(0, &frame(1000, 1, 0, 0));
    }
    let mut sent = 0;
    while let Some(at) = pipe.poll_timeout() {
        while pipe.poll_departure(at).is_some() {
            sent += 1;
        }
    }
    assert_eq!(sent, n, "every frame left");
    pipe.sojourn().expect("a queue records its sojourn").clone()
}

#[test]
fn tail_drops_queue_reports_its_sojourn_as_a_discipline_does() {
    // Ten frames at once at 10 Mbit/s: the i-th waits i transmissions, 0 to 9 · 819.2 µs,
    // whether tail drop (delay, then rate) or CoDel (no drop: 100 ms do not pass) queues them.
    let tail = sojourn_of_a_burst(
        LinkConfig {
            delay_ns: 3 * MS,
            ..link(Aqm::default())
        },
        10,
    );
    let codel = sojourn_of_a_burst(link(codel()), 10);
    for h in [&tail, &codel] {
        assert_eq!(h.len(), 10);
        assert_eq!(h.min(), 0);
        let hdr = h.as_hdr();
        assert!(hdr.equivalent(h.max(), 9 * TX_1000), "max {}", h.max());
        let median = hdr.value_at_quantile(0.5);
        assert!(hdr.equivalent(median, 4 * TX_1000), "p50 {median}");
    }
    // A link without a rate has no queue, so no sojourn.
    let mut no_rate = Pipe::new(LinkConfig::default(), 0).unwrap();
    no_rate.handle_arrival(0, &frame(1000, 1, 0, 0));
    assert!(no_rate.sojourn().is_none());
}
