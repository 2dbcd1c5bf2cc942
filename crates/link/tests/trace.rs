//! Trace-driven links in virtual time, with traces made here: a constant one, a bursty one and
//! an outage, as mahimahi's `mm-link` serves them (one 1,500-byte opportunity per line, the
//! trace repeating with its last line's period, bytes an opportunity has left lost once
//! nothing waits), with the delay after the opportunity and any queue discipline in front.

use latlab_link::trace::DeliveryTrace;
use latlab_link::{Aqm, Discipline, LinkConfig, Pipe};

const MS: u64 = 1_000_000;

fn link(trace: &str) -> LinkConfig {
    LinkConfig {
        trace: Some(DeliveryTrace::parse(trace).unwrap()),
        limit_frames: Some(100_000),
        ..LinkConfig::default()
    }
}

/// Feeds `arrivals` (time, length) and polls at every instant the pipe names, up to `until`;
/// returns each departure's (time, length).
fn run(config: LinkConfig, arrivals: &[(u64, usize)], until: u64) -> Vec<(u64, usize)> {
    let mut pipe = Pipe::new(config, 0).unwrap();
    let mut out = Vec::new();
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
        while let Some(d) = pipe.poll_departure(now) {
            out.push((now, d.frame().len()));
        }
        if arrival == Some(now) {
            pipe.handle_arrival(now, &vec![0u8; arrivals[next].1]);
            next += 1;
        }
    }
    out
}

#[test]
fn a_constant_trace_delivers_one_frame_per_opportunity_and_the_rest_waits() {
    // One opportunity a millisecond (12 Mbit/s); 1,500-byte frames twice as fast for 100 ms.
    let arrivals: Vec<(u64, usize)> = (0..200).map(|i| (i * MS / 2, 1500)).collect();
    let out = run(link("1\n"), &arrivals, 100 * MS);
    let times: Vec<u64> = out.iter().map(|d| d.0).collect();
    assert_eq!(times.len(), 100, "one frame each millisecond up to 100 ms");
    assert_eq!(times[..3], [MS, 2 * MS, 3 * MS]);
    assert_eq!(*times.last().unwrap(), 100 * MS);
    // The capacity over the run is the trace's.
    assert_eq!(
        DeliveryTrace::parse("1\n").unwrap().mean_rate_bps(),
        12_000_000.0
    );
}

#[test]
fn a_bursty_trace_releases_what_waited_at_once_and_frames_share_an_opportunity() {
    // Three opportunities at 5 ms, one at 10 ms; period 10 ms.
    let arrivals = [
        (0, 1500),
        (MS, 1500),
        (2 * MS, 500),
        (2 * MS, 500),
        (3 * MS, 1500),
    ];
    let out = run(link("5\n5\n5\n10\n"), &arrivals, 30 * MS);
    // 1500 + 1500 take two opportunities at 5 ms; the two 500-byte frames share the third;
    // the last waits for 10 ms.
    assert_eq!(
        out,
        [
            (5 * MS, 1500),
            (5 * MS, 1500),
            (5 * MS, 500),
            (5 * MS, 500),
            (10 * MS, 1500)
        ]
    );
}

#[test]
fn an_outage_holds_frames_until_the_next_opportunity_and_leftover_bytes_are_lost() {
    // Opportunities at 1 and 2 ms, then none until 100 ms (the period).
    let arrivals = [(0, 100), (1_500_000, 100), (3 * MS, 100)];
    let out = run(link("1\n2\n100\n"), &arrivals, 300 * MS);
    // The first leaves at 1 ms with 1,400 bytes of its opportunity unused; the second came
    // after it and takes the one at 2 ms; the third waits out the outage.
    assert_eq!(out, [(MS, 100), (2 * MS, 100), (100 * MS, 100)]);
}

#[test]
fn a_frame_longer_than_an_opportunity_spans_several_and_the_delay_comes_after() {
    let config = LinkConfig {
        delay_ns: 20 * MS,
        max_frame: 9000,
        ..link("1\n")
    };
    let out = run(config, &[(0, 4000)], 100 * MS);
    // 4,000 bytes: opportunities at 1, 2 and 3 ms; then 20 ms of delay.
    assert_eq!(out, [(23 * MS, 4000)]);
}

#[test]
fn a_queue_discipline_serves_the_trace_and_drops_on_its_sojourn() {
    // Twice the trace's capacity for 2 s under CoDel: the sojourn counts the wait for an
    // opportunity, so CoDel starts dropping once it stayed above 5 ms for 100 ms, then on its
    // control law (interval / √count), which against a sender that does not slow down makes
    // about (2 s / (2 × 100 ms))² = 100 drops.
    let config = LinkConfig {
        aqm: Aqm {
            discipline: Discipline::Codel,
            ..Aqm::default()
        },
        ..link("1\n")
    };
    let mut pipe = Pipe::new(config, 0).unwrap();
    let mut first_drop = None;
    for i in 0..4000u64 {
        let t = i * MS / 2;
        while pipe.poll_departure(t).is_some() {}
        if first_drop.is_none() && pipe.counters().aqm_drop > 0 {
            first_drop = Some(t);
        }
        pipe.handle_arrival(t, &[0u8; 1500]);
    }
    let drops = pipe.counters().aqm_drop;
    assert!((80..=130).contains(&drops), "{:?}", pipe.counters());
    let first = first_drop.unwrap();
    assert!(
        (100 * MS..120 * MS).contains(&first),
        "first drop at {first}"
    );
    assert!(pipe.sojourn().unwrap().max() > 5 * MS);
}

#[test]
fn a_trace_is_the_capacity_and_refuses_a_rate_beside_it() {
    let both = LinkConfig {
        rate_bps: Some(1_000_000),
        ..link("1\n")
    };
    let e = both.validate().unwrap_err().to_string();
    assert!(e.starts_with("trace: "), "{e}");
}
