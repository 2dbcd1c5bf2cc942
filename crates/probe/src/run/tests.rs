//! A run driven in virtual time over a simulated network whose per-probe fate is given.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use latlab_wire::probe;

use super::*;
use crate::{FanoutMeter, Meter, Pattern};

const MADE_AT: u64 = 1_000_000_000;

fn config(pattern: Pattern) -> RunConfig {
    RunConfig {
        probe: ProbeConfig {
            pattern,
            rate_pps: 10_000.0,
            duration_ns: 20_000_000,
            warmup_ns: 0,
            ..ProbeConfig::default()
        },
        grace_ns: 50_000_000,
        interval_ns: 10_000_000,
        live: false,
    }
}

/// The simulated path: for probe number `k` (in send order), the receivers that get a copy
/// and after how long; the sender itself may stall until `stall_until`.
struct Net {
    fate: Box<dyn Fn(u64) -> Vec<(usize, u64)>>,
    stall_until: u64,
}

impl Net {
    fn delay(ns: u64) -> Net {
        Net {
            fate: Box::new(move |_| vec![(0, ns)]),
            stall_until: 0,
        }
    }
}

/// What the driver saw besides the run's own outcome.
struct Drive<M> {
    outcome: Outcome<M>,
    /// Virtual time the run said it was done.
    ended_at: u64,
    /// Every probe as (intended send time, actual send time).
    sends: Vec<(u64, u64)>,
    /// Arrival time of the last response.
    last_arrival: u64,
}

/// Drives `run` as a one-loop engine would, in virtual time.
fn drive<M: Metering>(run: Run<M>, net: &Net) -> Drive<M> {
    drive_stopped(run, net, None)
}

/// [`drive`], with the run stopped at `stop_at` (a stopping signal) if it is still sending.
fn drive_stopped<M: Metering>(mut run: Run<M>, net: &Net, stop_at: Option<u64>) -> Drive<M> {
    let mut now = MADE_AT;
    let mut buf = vec![0u8; 64];
    let mut flight: BinaryHeap<Reverse<(u64, usize, Vec<u8>)>> = BinaryHeap::new();
    let (mut sends, mut k, mut last_arrival) = (Vec::new(), 0u64, 0u64);
    loop {
        if stop_at.is_some_and(|at| now >= at) && !run.sending().is_finished() {
            run.stop(now);
        }
        if now >= net.stall_until {
            while let Some(t) = run.poll_transmit(now, &mut buf) {
                probe::Packet::new_unchecked(&mut buf[..]).set_actual_send_ns(now);
                sends.push((t.intended_ns, now));
                for (receiver, delay) in (net.fate)(k) {
                    flight.push(Reverse((now + delay, receiver, buf[..t.len].to_vec())));
                }
                k += 1;
                run.handle_sent(now, 1);
            }
        }
        while flight.peek().is_some_and(|Reverse((at, ..))| *at <= now) {
            let Reverse((at, receiver, bytes)) = flight.pop().expect("peeked");
            run.handle_datagram(now, receiver, at, &bytes);
            last_arrival = at;
        }
        run.handle_timeout(now);
        if run.is_done(now) {
            break;
        }
        let mut next = if now < net.stall_until {
            run.receiving().poll_timeout().min(net.stall_until)
        } else {
            run.poll_timeout()
        };
        if let Some(Reverse((at, ..))) = flight.peek() {
            next = next.min(*at);
        }
        if let Some(at) = stop_at.filter(|at| *at > now) {
            next = next.min(at);
        }
        assert!(next > now, "the run asked to be woken in the past at {now}");
        now = next;
    }
    Drive {
        outcome: run.finish(now),
        ended_at: now,
        sends,
        last_arrival,
    }
}

fn meter_run(config: &RunConfig) -> Run<Meter> {
    Run::new(config, MADE_AT, Meter::new).unwrap()
}

#[test]
fn the_first_probe_is_due_the_start_delay_after_the_run_is_made() {
    let run = meter_run(&config(Pattern::Constant));
    assert_eq!(run.start_ns(), MADE_AT + START_DELAY_NS);
    assert_eq!(run.poll_send_timeout(), Some(MADE_AT + START_DELAY_NS));
    let d = drive(run, &Net::delay(30_000));
    assert_eq!(d.outcome.start_ns, MADE_AT + START_DELAY_NS);
    assert_eq!(d.sends[0].0, MADE_AT + START_DELAY_NS);
}

#[test]
fn a_constant_run_whose_probes_all_come_back_stops_at_the_last_answer() {
    let d = drive(meter_run(&config(Pattern::Constant)), &Net::delay(30_000));
    let report = d.outcome.meter.report(&d.outcome.counts);
    assert_eq!((report.sent, report.received, report.lost), (200, 200, 0));
    assert_eq!(d.outcome.sent, 200);
    assert_eq!(d.ended_at, d.last_arrival);
    let last_due = MADE_AT + START_DELAY_NS + 199 * 100_000;
    assert_eq!(d.ended_at, last_due + 30_000);
    assert!((30_000..30_030).contains(&report.latency.max()));
}

#[test]
fn a_poisson_run_whose_probes_all_come_back_stops_at_the_last_answer() {
    let d = drive(meter_run(&config(Pattern::Poisson)), &Net::delay(45_000));
    let report = d.outcome.meter.report(&d.outcome.counts);
    assert!(report.sent > 100, "sent {}", report.sent);
    assert_eq!((report.received, report.lost), (report.sent, 0));
    let last_intended = d.sends.last().unwrap().0;
    assert_eq!(d.ended_at, last_intended + 45_000);
    assert_eq!(d.ended_at, d.last_arrival);
}

#[test]
fn lost_probes_end_the_run_at_the_end_of_the_grace_period_and_count_as_lost() {
    let net = Net {
        fate: Box::new(|k| {
            if k % 10 == 3 {
                vec![]
            } else {
                vec![(0, 30_000)]
            }
        }),
        stall_until: 0,
    };
    let d = drive(meter_run(&config(Pattern::Constant)), &net);
    let report = d.outcome.meter.report(&d.outcome.counts);
    assert_eq!((report.sent, report.received, report.lost), (200, 180, 20));
    let last_send = d.sends.last().unwrap().1;
    assert_eq!(d.outcome.last_send_ns, last_send);
    assert_eq!(d.ended_at, last_send + 50_000_000);
}

#[test]
fn a_stopped_run_sends_no_more_and_waits_for_its_probes_in_flight() {
    // 10 probes a millisecond, each back 1 ms after it left; stopped 5.05 ms into sending:
    // probes 0..=50 left, the last ten still in flight at the stop.
    let stop_at = MADE_AT + START_DELAY_NS + 5_050_000;
    let d = drive_stopped(
        meter_run(&config(Pattern::Constant)),
        &Net::delay(1_000_000),
        Some(stop_at),
    );
    let report = d.outcome.meter.report(&d.outcome.counts);
    assert_eq!(d.outcome.sent, 51);
    assert_eq!((report.sent, report.received, report.lost), (51, 51, 0));
    // It ends with the last answer, not at the end of the grace period.
    assert_eq!(d.ended_at, d.last_arrival);
    assert_eq!(
        d.ended_at,
        MADE_AT + START_DELAY_NS + 50 * 100_000 + 1_000_000
    );
}

#[test]
fn a_stopped_run_counts_as_lost_only_what_the_grace_period_did_not_bring_back() {
    // Every fourth probe never comes back: those are lost, and none of the others.
    let net = Net {
        fate: Box::new(|k| {
            if k % 4 == 3 {
                vec![]
            } else {
                vec![(0, 1_000_000)]
            }
        }),
        stall_until: 0,
    };
    let stop_at = MADE_AT + START_DELAY_NS + 5_050_000;
    let d = drive_stopped(meter_run(&config(Pattern::Constant)), &net, Some(stop_at));
    let report = d.outcome.meter.report(&d.outcome.counts);
    assert_eq!((report.sent, report.received, report.lost), (51, 39, 12));
    // The grace period runs from the stop, as it runs from the schedule's end.
    assert_eq!(d.ended_at, stop_at + 50_000_000);
}

#[test]
fn interval_histograms_split_at_the_interval_boundary() {
    // 200 probes over 20 ms, answered 30 µs later, 10 ms intervals: probe 99's answer is
    // handled at 9.93 ms, probe 100's at 10.03 ms, the last one at 19.93 ms, when the run ends
    // and cuts the second interval short.
    let d = drive(meter_run(&config(Pattern::Constant)), &Net::delay(30_000));
    let iv = &d.outcome.intervals;
    let lens: Vec<u64> = iv.iter().map(|i| i.histogram.len()).collect();
    assert_eq!(lens, vec![100, 100]);
    assert_eq!((iv[0].start_offset_ns, iv[0].duration_ns), (0, 10_000_000));
    assert_eq!(
        (iv[1].start_offset_ns, iv[1].duration_ns),
        (10_000_000, 9_930_000)
    );
}

#[test]
fn a_late_sender_has_its_probes_measured_from_their_due_time() {
    // The sender stalls until 3 ms after the start: the 30 probes it owes go out at once, and
    // their latency includes the stall.
    let start = MADE_AT + START_DELAY_NS;
    let net = Net {
        fate: Box::new(|_| vec![(0, 20_000)]),
        stall_until: start + 3_000_000,
    };
    let d = drive(meter_run(&config(Pattern::Constant)), &net);
    let late: Vec<_> = d
        .sends
        .iter()
        .take_while(|s| s.0 < start + 3_000_000)
        .collect();
    assert_eq!(late.len(), 30);
    assert!(late.iter().all(|s| s.1 == start + 3_000_000));
    let report = d.outcome.meter.report(&d.outcome.counts);
    assert_eq!(report.received, 200);
    // The first probe waited 3 ms for its sender, then 20 µs on the wire.
    assert!((3_020_000..3_024_000).contains(&report.latency.max()));
    assert!((2_999_000..3_001_000).contains(&report.send_lag.max()));
    assert!((20_000..20_020).contains(&report.latency_from_actual.max()));
}

#[test]
fn progress_is_reported_at_once_then_every_progress_period() {
    let mut run = meter_run(&config(Pattern::Constant));
    let p = run.poll_progress(MADE_AT).unwrap();
    assert_eq!((p.elapsed_ns, p.total_ns, p.sent), (0, 20_000_000, 0));
    assert!(run.poll_progress(MADE_AT + PROGRESS_NS - 1).is_none());
    assert!(run.poll_progress(MADE_AT + PROGRESS_NS).is_some());
}

#[test]
fn a_run_whose_halves_run_apart_stops_by_the_same_rule() {
    let run = meter_run(&config(Pattern::Constant));
    let (mut tx, mut rx) = run.into_parts();
    let mut buf = vec![0u8; 64];
    let mut now = MADE_AT;
    let mut in_flight = Vec::new();
    while let Some(due) = tx.poll_timeout() {
        now = due;
        let t = tx.poll_transmit(now, &mut buf).unwrap();
        in_flight.push((now + 10_000, buf[..t.len].to_vec()));
        tx.handle_sent(now, 1);
    }
    assert!(tx.is_finished());
    assert!(
        !rx.is_done(now),
        "the receive half has not heard sending is over"
    );
    rx.handle_sending(tx.status());
    for (at, bytes) in &in_flight[..199] {
        rx.handle_datagram(*at, 0, *at, bytes);
    }
    assert!(!rx.is_done(now + 10_000));
    let (at, bytes) = &in_flight[199];
    rx.handle_datagram(*at, 0, *at, bytes);
    assert!(rx.is_done(*at));
    let outcome = Run::from_parts(tx, rx).finish(now + 10_000);
    assert_eq!(outcome.meter.report(&outcome.counts).received, 200);
}

#[test]
fn a_fanout_run_stops_when_the_last_client_has_the_last_copy() {
    // Three clients get every probe after 20, 35 and 10 µs.
    let net = Net {
        fate: Box::new(|_| vec![(0, 20_000), (1, 35_000), (2, 10_000)]),
        stall_until: 0,
    };
    let cfg = config(Pattern::Constant);
    let run = Run::new(&cfg, MADE_AT, |p| FanoutMeter::new(p, 3)).unwrap();
    let d = drive(run, &net);
    let r = d.outcome.meter.report(&d.outcome.counts);
    assert_eq!((r.sent, r.complete, r.copies_received), (200, 200, 600));
    assert_eq!(d.ended_at, d.sends.last().unwrap().1 + 35_000);
    assert!((35_000..35_050).contains(&r.latency_last.max()));
    assert!((10_000..10_010).contains(&r.latency_first.max()));
    let in_intervals: u64 = d.outcome.intervals.iter().map(|i| i.histogram.len()).sum();
    assert_eq!(in_intervals, 200);
}

#[test]
fn a_fanout_run_missing_one_clients_copies_waits_out_the_grace_period() {
    let net = Net {
        fate: Box::new(|k| {
            if k == 7 {
                vec![(0, 20_000), (2, 10_000)]
            } else {
                vec![(0, 20_000), (1, 35_000), (2, 10_000)]
            }
        }),
        stall_until: 0,
    };
    let run = Run::new(&config(Pattern::Constant), MADE_AT, |p| {
        FanoutMeter::new(p, 3)
    })
    .unwrap();
    let d = drive(run, &net);
    let r = d.outcome.meter.report(&d.outcome.counts);
    assert_eq!((r.complete, r.copies_received), (199, 599));
    assert_eq!(d.ended_at, d.sends.last().unwrap().1 + 50_000_000);
    // The incomplete probe still had a first copy.
    assert_eq!(r.latency_first.len(), 200);
}

#[test]
fn a_sender_that_never_catches_up_ends_sending_at_its_duration() {
    // Stalled past the whole sending time: nothing is sent, everything is unsent, and the
    // run ends at once (nothing can come back).
    let start = MADE_AT + START_DELAY_NS;
    let net = Net {
        fate: Box::new(|_| vec![(0, 20_000)]),
        stall_until: start + 25_000_000,
    };
    let d = drive(meter_run(&config(Pattern::Constant)), &net);
    let report = d.outcome.meter.report(&d.outcome.counts);
    assert_eq!((report.sent, report.unsent), (0, 200));
    assert_eq!(d.ended_at, start + 25_000_000);
    assert_eq!(d.outcome.first_send_ns, start);
}

#[test]
fn probes_the_port_could_not_send_are_not_waited_for_and_count_as_lost() {
    let mut run = meter_run(&config(Pattern::Constant));
    let mut buf = vec![0u8; 64];
    let mut in_flight = Vec::new();
    while let Some(now) = run.poll_send_timeout() {
        let t = run.poll_transmit(now, &mut buf).unwrap();
        if t.seq == 5 {
            run.handle_send_failed(now, 1);
        } else {
            probe::Packet::new_unchecked(&mut buf[..]).set_actual_send_ns(now);
            in_flight.push((now + 10_000, buf[..t.len].to_vec()));
            run.handle_sent(now, 1);
        }
    }
    assert_eq!(run.sending().failed(), 1);
    for (at, bytes) in &in_flight {
        run.handle_datagram(*at, 0, *at, bytes);
    }
    let end = in_flight.last().unwrap().0;
    assert!(
        run.is_done(end),
        "199 sent, 199 back: done without the grace period"
    );
    let outcome = run.finish(end);
    assert_eq!(outcome.sent, 199);
    let r = outcome.meter.report(&outcome.counts);
    assert_eq!((r.sent, r.received, r.lost), (200, 199, 1));
}

#[test]
fn a_run_owing_a_trillion_unsent_probes_ends_at_once() {
    // At the highest rate a schedule keeps, a sender stalled past the end of a 1000 s run owes
    // 10^12 probes: they are counted in one step, not one by one, and the run ends at once.
    let start = MADE_AT + START_DELAY_NS;
    let duration_ns = 1_000_000_000_000;
    let mut config = config(Pattern::Constant);
    config.probe.rate_pps = crate::MAX_RATE_PPS;
    config.probe.duration_ns = duration_ns;
    config.interval_ns = duration_ns;
    let net = Net {
        fate: Box::new(|_| vec![(0, 20_000)]),
        stall_until: start + duration_ns,
    };
    let began = std::time::Instant::now();
    let d = drive(meter_run(&config), &net);
    let report = d.outcome.meter.report(&d.outcome.counts);
    assert_eq!((report.sent, report.unsent), (0, 1_000_000_000_000));
    assert_eq!(d.ended_at, start + duration_ns);
    // Counted one by one, 10^12 would take far more than a minute on any machine.
    let took = began.elapsed();
    assert!(took < std::time::Duration::from_secs(60), "{took:?}");
}

#[test]
fn a_rate_no_schedule_can_keep_is_refused_by_the_run() {
    for rate in [1.000_001e9, 1e12, 1e30] {
        let mut config = config(Pattern::Constant);
        config.probe.rate_pps = rate;
        let err = Run::new(&config, MADE_AT, Meter::new).unwrap_err();
        assert_eq!(err, crate::Error::RateTooHigh(rate));
        assert_eq!(err.field(), "rate_pps");
        assert!(
            err.to_string().contains("one probe per nanosecond"),
            "{err}"
        );
    }
}

#[test]
fn a_live_run_hands_each_closed_interval_to_progress_once() {
    let mut live_config = RunConfig {
        live: true,
        ..config(Pattern::Constant)
    };
    live_config.probe.rate_pps = 1000.0;
    live_config.probe.duration_ns = 300_000_000;
    let mut run = Run::new(&live_config, MADE_AT, Meter::new).unwrap();
    let mut buf = [0u8; 64];
    let mut now = MADE_AT;
    let mut echoes: Vec<(u64, Vec<u8>)> = Vec::new();
    let mut seen = Vec::new();
    let mut reports = 0;
    loop {
        while let Some(probe) = run.poll_transmit(now, &mut buf) {
            run.handle_sent(now, 1);
            echoes.push((now + 20_000, buf[..probe.len].to_vec()));
        }
        echoes.retain(|(at, bytes)| {
            *at > now || {
                run.handle_datagram(now, 0, *at, bytes);
                false
            }
        });
        run.handle_timeout(now);
        if let Some(p) = run.poll_progress(now) {
            reports += 1;
            let live = p.live.expect("a live run's progress is live");
            seen.extend(live.intervals.iter().map(|i| i.histogram.len()));
            assert_eq!(live.reordered, 0);
        }
        if run.is_done(now) {
            break;
        }
        now = echoes
            .iter()
            .map(|e| e.0)
            .fold(run.poll_timeout(), u64::min);
    }
    let outcome = run.finish(now);
    // Progress every 100 ms of a 300 ms run of 10 ms intervals: each report after the first
    // brings the intervals closed since the one before.
    assert!(reports >= 3, "{reports}");
    let logged: Vec<u64> = outcome
        .intervals
        .iter()
        .map(|i| i.histogram.len())
        .collect();
    assert!(seen.len() >= 20 && seen.len() <= logged.len(), "{seen:?}");
    assert_eq!(
        seen[..],
        logged[..seen.len()],
        "each closed interval once, in order"
    );
    let plain = Run::new(&config(Pattern::Constant), MADE_AT, Meter::new)
        .unwrap()
        .poll_progress(MADE_AT)
        .unwrap();
    assert!(plain.live.is_none(), "no copies unless asked");
}
