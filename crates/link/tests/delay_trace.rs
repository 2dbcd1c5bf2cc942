//! Delay traces: the forms they are read in (two columns, one column at a step, `ping -D`
//! output), what is refused, and the base delay they give frames in virtual time
//! (interpolated or stepwise, repeated, in FIFO order when the delay falls).

use latlab_link::delay_trace::{DelayFile, DelayTrace, DelayTraceMode};
use latlab_link::{Fate, Link, LinkConfig, Schedule};

const MS: u64 = 1_000_000;

/// A ping -D session as iputils prints it: the header, replies, a missed one, the summary.
const PING: &str = "\
PING 10.0.0.1 (10.0.0.1) 56(84) bytes of data.
[1701234567.123456] 64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=20.0 ms
[1701234567.623456] 64 bytes from 10.0.0.1: icmp_seq=2 ttl=64 time=40.4 ms
[1701234568.123456] 64 bytes from 10.0.0.1: icmp_seq=2 ttl=64 time=40.9 ms (DUP!)
[1701234568.623500] no answer yet for icmp_seq=3
[1701234569.123456] 64 bytes from 10.0.0.1: icmp_seq=4 ttl=64 time=10.2 ms

--- 10.0.0.1 ping statistics ---
4 packets transmitted, 3 received, +1 duplicates, 25% packet loss, time 3004ms
rtt min/avg/max/mdev = 10.200/23.533/40.400/12.540 ms
";

fn trace(text: &str) -> DelayTrace {
    DelayTrace::new(DelayFile::parse(text).unwrap())
}

fn link(trace: DelayTrace) -> Link {
    let config = LinkConfig {
        delay_trace: Some(trace),
        limit_frames: None,
        ..LinkConfig::default()
    };
    Link::new(config, 0).unwrap()
}

/// The delay a frame arriving at `at` gets, on an otherwise idle link.
fn delay_at(trace: DelayTrace, at: u64) -> u64 {
    match link(trace).handle_arrival(at, 100) {
        Fate::Deliver { departure_ns, .. } => departure_ns - at,
        Fate::Drop(cause) => panic!("dropped: {cause:?}"),
    }
}

#[test]
fn two_columns_interpolate_linearly_and_loop_back_to_the_first_point() {
    // 10 ms at 0, 30 ms at 100 ms; the period is 200 ms (the last gap repeated), over whose
    // last 100 ms the delay goes back down to 10 ms.
    let t = || trace("# TIME_MS DELAY_MS\n0 10\n100 30\n");
    assert_eq!(t().period_ns(), Some(200 * MS));
    for (at_ms, delay_ms) in [
        (0, 10),
        (50, 20),
        (100, 30),
        (150, 20),
        (200, 10),
        (250, 20),
    ] {
        assert_eq!(delay_at(t(), at_ms * MS), delay_ms * MS, "at {at_ms} ms");
    }
    // Decimals, between points: 10 + 20 · 25.5/100 ms.
    assert_eq!(delay_at(t(), 25_500_000), 15_100_000);
}

#[test]
fn the_step_mode_holds_each_point_until_the_next() {
    let t = || DelayTrace {
        mode: DelayTraceMode::Step,
        ..trace("0 10\n100 30\n")
    };
    for (at_ms, delay_ms) in [(0, 10), (99, 10), (100, 30), (199, 30), (200, 10)] {
        assert_eq!(delay_at(t(), at_ms * MS), delay_ms * MS, "at {at_ms} ms");
    }
}

#[test]
fn the_first_time_is_the_traces_zero_and_a_step_sets_the_period() {
    // Times from 1000 ms: shifted to 0; a step of 50 ms: a period of 150 ms.
    let t = || DelayTrace {
        step_ns: Some(50 * MS),
        ..trace("1000 10\n1100 30.5\n")
    };
    assert_eq!(t().period_ns(), Some(150 * MS));
    assert_eq!(delay_at(t(), 100 * MS), 30_500_000);
    assert_eq!(delay_at(t(), 125 * MS), 20_250_000);
    assert_eq!(delay_at(t(), 150 * MS), 10 * MS);
}

#[test]
fn one_column_needs_a_step_and_takes_one_line_per_step() {
    let file = DelayFile::parse("5\n15\n\n# a comment\n25\n").unwrap();
    assert_eq!(file.points(), 3);
    let without = LinkConfig {
        delay_trace: Some(DelayTrace::new(file.clone())),
        ..LinkConfig::default()
    };
    let e = without.validate().unwrap_err();
    assert_eq!(e.field(), Some("delay_trace"));
    assert!(e.to_string().contains("needs delay-trace-step"), "{e}");
    let t = || DelayTrace {
        step_ns: Some(10 * MS),
        mode: DelayTraceMode::Step,
        ..DelayTrace::new(file.clone())
    };
    assert_eq!(t().period_ns(), Some(30 * MS));
    let delays: Vec<u64> = [0, 10, 20, 30, 45]
        .map(|ms| delay_at(t(), ms * MS) / MS)
        .into();
    assert_eq!(delays, [5, 15, 25, 5, 15]);
}

#[test]
fn ping_output_is_read_as_half_the_round_trip_at_each_replys_stamp() {
    let file = DelayFile::parse(PING).unwrap();
    // Three replies (the duplicate, the missed one and the rest skipped).
    assert_eq!(file.points(), 3);
    let t = || DelayTrace {
        mode: DelayTraceMode::Step,
        ..DelayTrace::new(file.clone())
    };
    // Stamps from the first reply: 0, 0.5 s, 2 s; the period adds the last gap, 1.5 s.
    assert_eq!(t().period_ns(), Some(3_500 * MS));
    assert_eq!(delay_at(t(), 0), 10 * MS);
    assert_eq!(delay_at(t(), 600 * MS), 20_200_000);
    assert_eq!(delay_at(t(), 2_000 * MS), 5_100_000);
    // Linear between the first two replies: 10 ms → 20.2 ms over 500 ms.
    assert_eq!(delay_at(DelayTrace::new(file), 250 * MS), 15_100_000);
}

#[test]
fn what_does_not_read_is_refused_naming_the_line_and_the_field() {
    for (text, line, what) in [
        ("", 1, "no line"),
        ("# only a comment\n\n", 1, "no line"),
        ("0 10\n5 x\n", 2, "DELAY_MS: \"x\" is not a number"),
        ("0 10\nx 5\n", 2, "TIME_MS: \"x\""),
        ("0 10\n5 -1\n", 2, "DELAY_MS: -1 is negative"),
        ("-5 10\n", 1, "TIME_MS: -5 is negative"),
        (
            "0 10\n5 10\n3 10\n",
            3,
            "TIME_MS: 3 is not after the line above",
        ),
        ("0 10\n0 10\n", 2, "not after"),
        (
            "0 10\n5\n",
            2,
            "expected TIME_MS DELAY_MS (the first line's form), found 1",
        ),
        ("1 2 3\n", 1, "found 3 fields"),
        ("10\nNaN\n", 2, "DELAY_MS"),
        (
            "PING 10.0.0.1 (10.0.0.1) 56(84) bytes of data.\n",
            1,
            "no reply",
        ),
        (
            "64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=1.0 ms\n[1.5] x\n",
            1,
            "record with `ping -D`",
        ),
        (
            "[12.5] 64 bytes from 10.0.0.1: icmp_seq=1 ttl=64 time=1.0 ms\n\
             [11.5] 64 bytes from 10.0.0.1: icmp_seq=2 ttl=64 time=1.0 ms\n",
            2,
            "STAMP: 11.5 is not after",
        ),
        (
            "[x.5] 64 bytes from 10.0.0.1: icmp_seq=1 time=1.0 ms\n",
            1,
            "STAMP:",
        ),
        (
            "[1.5] 64 bytes from 10.0.0.1: icmp_seq=1 time=fast ms\n",
            1,
            "time:",
        ),
    ] {
        let e = DelayFile::parse(text).unwrap_err();
        assert_eq!(e.line, line, "{text:?}: {e}");
        assert!(e.what.contains(what), "{text:?}: {e}");
    }
}

#[test]
fn a_falling_delay_never_lets_a_frame_overtake_the_one_before() {
    // 100 ms falling to 0 over 50 ms, then 0: a frame every ms would overtake without the
    // FIFO.
    let mut link = link(trace("0 100\n50 0\n1000 0\n"));
    let mut last = 0;
    for i in 0..100u64 {
        let at = i * MS;
        let Fate::Deliver { departure_ns, .. } = link.handle_arrival(at, 100) else {
            panic!("frame {i} dropped");
        };
        let base = if i <= 50 { (100 - 2 * i) * MS } else { 0 };
        assert!(departure_ns >= at + base, "frame {i} left before its delay");
        assert!(departure_ns >= last, "frame {i} overtook the one before");
        last = departure_ns;
    }
    // The first frame's departure, 100 ms, holds back everything after it that would leave
    // earlier: departure = max(arrival + delay, the last departure).
    assert_eq!(last, 100 * MS);
    assert_eq!(
        link.conditions().delay_ns,
        0,
        "the delay in force at the last frame"
    );
}

#[test]
fn a_trace_refuses_a_delay_or_a_schedule_that_changes_the_delay_beside_it() {
    let t = trace("0 10\n100 30\n");
    let with = |c: LinkConfig| {
        LinkConfig {
            delay_trace: Some(t.clone()),
            ..c
        }
        .validate()
    };
    let e = with(LinkConfig {
        delay_ns: MS,
        ..LinkConfig::default()
    })
    .unwrap_err();
    assert_eq!(e.field(), Some("delay_trace"));
    assert!(e.to_string().contains("leave delay_ns out"), "{e}");
    let delay_change = Schedule::parse("1s 10ms - -\n").unwrap();
    let e = with(LinkConfig {
        schedule: Some(delay_change),
        ..LinkConfig::default()
    })
    .unwrap_err();
    assert_eq!(e.field(), Some("delay_trace"));
    let loss_only = Schedule::parse("1s - 1% -\n").unwrap();
    assert_eq!(
        with(LinkConfig {
            schedule: Some(loss_only),
            ..LinkConfig::default()
        }),
        Ok(())
    );
    // A step or a mode without a file.
    let lone = LinkConfig {
        delay_trace: Some(DelayTrace {
            step_ns: Some(MS),
            ..DelayTrace::default()
        }),
        ..LinkConfig::default()
    };
    assert_eq!(
        lone.validate().unwrap_err().field(),
        Some("delay_trace_step")
    );
}

#[test]
fn a_new_trace_starts_at_the_change_and_the_same_one_goes_on() {
    let t = DelayTrace {
        mode: DelayTraceMode::Step,
        ..trace("0 10\n100 30\n")
    };
    let config = LinkConfig {
        delay_trace: Some(t.clone()),
        limit_frames: None,
        ..LinkConfig::default()
    };
    let mut link = Link::new(config.clone(), 0).unwrap();
    let departure = |link: &mut Link, at: u64| match link.handle_arrival(at, 100) {
        Fate::Deliver { departure_ns, .. } => departure_ns,
        Fate::Drop(cause) => panic!("{cause:?}"),
    };
    // The same trace with another knob changed at 150 ms: still 30 ms at 160 ms.
    link.handle_config(
        150 * MS,
        LinkConfig {
            duplicate: 0.0,
            seed: 0,
            ..config.clone()
        },
    )
    .unwrap();
    assert_eq!(departure(&mut link, 160 * MS), 190 * MS);
    // Another trace at 300 ms: its time 0 is then.
    let other = DelayTrace {
        mode: DelayTraceMode::Step,
        ..trace("0 1\n100 2\n")
    };
    link.handle_config(
        300 * MS,
        LinkConfig {
            delay_trace: Some(other),
            ..config
        },
    )
    .unwrap();
    assert_eq!(departure(&mut link, 350 * MS), 351 * MS);
    assert_eq!(departure(&mut link, 400 * MS), 402 * MS);
}
