use super::*;
use crate::flow::frames::udp4;
use crate::{FlowRule, LossModel};

const MS: u64 = 1_000_000;

fn rule(text: &str, config: LinkConfig) -> FlowRule {
    FlowRule {
        matcher: FlowMatch::parse("--flow", text).unwrap(),
        config,
    }
}

fn delay(ns: u64) -> LinkConfig {
    LinkConfig {
        delay_ns: ns,
        ..LinkConfig::default()
    }
}

/// Every departure until `until`, stepping virtual time from departure to departure:
/// `(departure time, flow, first payload byte)`.
fn drain(pipes: &mut FlowPipes, until: u64) -> Vec<(u64, usize, u8)> {
    let mut out = Vec::new();
    while let Some(at) = pipes.poll_timeout().filter(|&at| at <= until) {
        while let Some(d) = pipes.poll_departure(at) {
            out.push((d.departure_ns(), d.flow(), d.frame()[42]));
        }
    }
    out
}

#[test]
fn without_rules_the_set_is_its_default_pipe() {
    let config = LinkConfig {
        delay_ns: 3 * MS,
        jitter_ns: MS,
        loss: LossModel::Bernoulli { p: 0.2 },
        duplicate: 0.1,
        seed: 9,
        ..LinkConfig::default()
    };
    let mut pipe = Pipe::new(config.clone(), 0).unwrap();
    let mut pipes = FlowPipes::new(config.into(), 0).unwrap();
    assert_eq!(pipes.rules(), 0);
    let (mut alone, mut set) = (Vec::new(), Vec::new());
    for i in 0..200u64 {
        let frame = udp4(40000, 27015, i as u8);
        assert_eq!(
            pipe.handle_arrival(i * 100_000, &frame),
            pipes.handle_arrival(i * 100_000, &frame)
        );
    }
    for now in (0..30 * MS).step_by(50_000) {
        while let Some(d) = pipe.poll_departure(now) {
            alone.push((d.departure_ns(), d.frame().to_vec()));
        }
        while let Some(d) = pipes.poll_departure(now) {
            assert_eq!(d.flow(), 0);
            set.push((d.departure_ns(), d.frame().to_vec()));
        }
    }
    assert_eq!(alone, set);
    assert_eq!(*pipe.counters(), pipes.counters());
}

#[test]
fn the_first_matching_rule_takes_a_frame_and_the_rest_go_to_the_default() {
    let flows = Flows {
        default: LinkConfig::default(),
        rules: vec![
            rule("dport=27015", delay(MS)),
            rule("proto=udp", delay(2 * MS)),
            rule("dport=27015 sport=40000", delay(3 * MS)),
        ],
    };
    let pipes = FlowPipes::new(flows, 0).unwrap();
    assert_eq!(pipes.flow_of(&udp4(40000, 27015, 0)), 0, "not the third");
    assert_eq!(pipes.flow_of(&udp4(40000, 7, 0)), 1);
    assert_eq!(pipes.flow_of(&[0; 60]), 3, "not IP: the default");
    assert_eq!(pipes.flow_of(&[]), 3);
    let names: Vec<Option<String>> = pipes
        .flows()
        .map(|(m, _)| m.map(|m| m.to_string()))
        .collect();
    assert_eq!(
        names,
        [
            Some("dport=27015".to_string()),
            Some("proto=udp".to_string()),
            Some("sport=40000 dport=27015".to_string()),
            None
        ]
    );
}

#[test]
fn departures_come_out_in_time_order_across_the_pipes() {
    // The game port gets 5 ms, the rest 1 ms: frames arriving every 0.5 ms interleave.
    let flows = Flows {
        default: delay(MS),
        rules: vec![rule("proto=udp dport=27015", delay(5 * MS))],
    };
    let mut pipes = FlowPipes::new(flows, 0).unwrap();
    let mut out = Vec::new();
    for i in 0..20u8 {
        let dport = if i % 2 == 0 { 27015 } else { 7 };
        let now = u64::from(i) * MS / 2;
        pipes.handle_arrival(now, &udp4(40000, dport, i));
        if i == 10 {
            // Polling between arrivals, as an engine does: frame 1 is due (at 1.5 ms).
            let d = pipes.poll_departure(now).unwrap();
            out.push((d.departure_ns(), d.flow(), d.frame()[42]));
        }
    }
    out.extend(drain(&mut pipes, u64::MAX));
    let times: Vec<u64> = out.iter().map(|d| d.0).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "{out:?}");
    for &(at, flow, seq) in &out {
        let arrival = u64::from(seq) * MS / 2;
        let (want_flow, want_delay) = if seq % 2 == 0 { (0, 5 * MS) } else { (1, MS) };
        assert_eq!((flow, at), (want_flow, arrival + want_delay), "frame {seq}");
    }
    assert_eq!(out.len(), 20);
    assert_eq!(pipes.poll_timeout(), None);
    assert_eq!(pipes.queued_frames(), 0);
}

#[test]
fn frames_due_at_the_same_time_leave_in_arrival_order_whichever_pipe_holds_them() {
    let flows = Flows {
        default: delay(MS),
        rules: vec![rule("dport=1", delay(MS)), rule("dport=2", delay(MS))],
    };
    let mut pipes = FlowPipes::new(flows, 0).unwrap();
    let dports = [2, 1, 3, 3, 1, 2, 2, 1];
    for (i, &dport) in dports.iter().enumerate() {
        pipes.handle_arrival(0, &udp4(40000, dport, i as u8));
    }
    let out = drain(&mut pipes, MS);
    let order: Vec<u8> = out.iter().map(|d| d.2).collect();
    assert_eq!(order, [0, 1, 2, 3, 4, 5, 6, 7]);
    let flows: Vec<usize> = out.iter().map(|d| d.1).collect();
    assert_eq!(flows, [1, 0, 2, 2, 0, 1, 1, 0]);
}

#[test]
fn each_rule_counts_its_own_frames_and_the_sums_are_the_directions() {
    // The game port loses everything; ports 1-100 are duplicated and may hold 3 frames; the
    // rest is delayed.
    let flows = Flows {
        default: delay(10 * MS),
        rules: vec![
            rule(
                "dport=27015",
                LinkConfig {
                    loss: LossModel::Bernoulli { p: 1.0 },
                    ..LinkConfig::default()
                },
            ),
            rule(
                "dport=1-100",
                LinkConfig {
                    delay_ns: MS,
                    duplicate: 1.0,
                    limit_frames: Some(3),
                    ..LinkConfig::default()
                },
            ),
        ],
    };
    let mut pipes = FlowPipes::new(flows, 0).unwrap();
    for i in 0..30u8 {
        let dport = [27015, 50, 9999][usize::from(i % 3)];
        pipes.handle_arrival(u64::from(i), &udp4(40000, dport, i));
    }
    let per: Vec<LinkCounters> = pipes.flows().map(|(_, p)| *p.counters()).collect();
    assert_eq!(
        (per[0].arrived, per[0].dropped_loss, per[0].delivered),
        (10, 10, 0)
    );
    // The first frame and its copy take two places of three; the second frame takes the
    // third (its copy finds none); the other eight find the queue full.
    assert_eq!(per[1].arrived, 10);
    assert_eq!(per[1].dropped_queue_frames, 8);
    assert_eq!((per[1].delivered, per[1].duplicated), (2, 1));
    assert_eq!(
        (per[2].arrived, per[2].delivered, per[2].dropped()),
        (10, 10, 0)
    );
    let mut sum = LinkCounters::default();
    for c in &per {
        sum += *c;
    }
    assert_eq!(pipes.counters(), sum);
    assert_eq!(sum.arrived, 30);
    assert_eq!(pipes.queued_frames(), 3 + 10);
    let queued: Vec<usize> = pipes.flows().map(|(_, p)| p.queued_frames()).collect();
    assert_eq!(queued, [0, 3, 10]);
    let out = drain(&mut pipes, u64::MAX);
    assert_eq!(out.len(), 13);
    assert_eq!(pipes.counters(), sum, "departures change no count");
    assert_eq!(pipes.queued_frames(), 0);
}

#[test]
fn a_change_reaches_the_default_pipe_and_leaves_the_rules_alone() {
    let flows = Flows {
        default: delay(MS),
        rules: vec![rule("dport=27015", delay(5 * MS))],
    };
    let mut pipes = FlowPipes::new(flows, 0).unwrap();
    pipes.handle_arrival(0, &udp4(40000, 7, 0));
    pipes.handle_config(0, delay(2 * MS)).unwrap();
    assert_eq!(pipes.config().delay_ns, 2 * MS);
    pipes.handle_arrival(0, &udp4(40000, 7, 1));
    pipes.handle_arrival(0, &udp4(40000, 27015, 2));
    let out = drain(&mut pipes, u64::MAX);
    assert_eq!(out, [(MS, 1, 0), (2 * MS, 1, 1), (5 * MS, 0, 2)]);
    let refused = LinkConfig {
        limit_frames: Some(0),
        ..LinkConfig::default()
    };
    assert!(pipes.handle_config(0, refused).is_err());
    assert_eq!(pipes.config().delay_ns, 2 * MS);
}

#[test]
fn a_bad_rule_configuration_is_refused() {
    let flows = Flows {
        default: LinkConfig::default(),
        rules: vec![rule(
            "dport=1",
            LinkConfig {
                rate_bps: Some(0),
                ..LinkConfig::default()
            },
        )],
    };
    let error = FlowPipes::new(flows, 0).unwrap_err();
    assert_eq!(error.field(), Some("rate_bps"));
}

#[test]
fn a_rule_with_a_queue_discipline_runs_beside_a_tail_drop_default() {
    // Game traffic under CoDel at 1 Mbit/s; the rest through a 2 ms delay. The rule's wire
    // events (a frame taken from its queue) are times to come back at, and a poll at one of
    // them still hands out the default pipe's frames due then.
    let codel = LinkConfig {
        rate_bps: Some(1_000_000),
        aqm: crate::Aqm {
            discipline: crate::Discipline::Codel,
            ..crate::Aqm::default()
        },
        ..LinkConfig::default()
    };
    let flows = Flows {
        default: delay(2 * MS),
        rules: vec![rule("proto=udp dport=27015", codel)],
    };
    let mut pipes = FlowPipes::new(flows, 0).unwrap();
    for i in 0..20u8 {
        pipes.handle_arrival(u64::from(i) * 100_000, &udp4(40000, 27015, i));
        pipes.handle_arrival(u64::from(i) * 100_000, &udp4(40000, 53, 100 + i));
    }
    let out = drain(&mut pipes, 100 * MS);
    assert_eq!(out.len(), 40);
    assert!(out.windows(2).all(|w| w[0].0 <= w[1].0), "{out:?}");
    let game: Vec<u8> = out.iter().filter(|o| o.1 == 0).map(|o| o.2).collect();
    assert_eq!(game, (0..20).collect::<Vec<u8>>());
    // Each game frame takes (len + 24)·8 µs at 1 Mbit/s, one after the other.
    let len = udp4(40000, 27015, 0).len() as u64;
    let last_game = out.iter().filter(|o| o.1 == 0).map(|o| o.0).max().unwrap();
    assert_eq!(last_game, 20 * (len + 24) * 8 * 1_000);
    assert!(pipes.sojourn().is_some_and(|h| h.len() == 20));
    assert_eq!(pipes.poll_timeout(), None);
}

#[test]
fn the_queue_disciplines_drops_are_summed_as_they_happen() {
    let fq = LinkConfig {
        rate_bps: Some(1_000_000),
        limit_frames: Some(5),
        aqm: crate::Aqm {
            discipline: crate::Discipline::FqCodel,
            ..crate::Aqm::default()
        },
        ..LinkConfig::default()
    };
    let flows = Flows {
        default: LinkConfig::default(),
        rules: vec![rule("proto=udp", fq)],
    };
    let mut pipes = FlowPipes::new(flows, 0).unwrap();
    for i in 0..20u8 {
        pipes.handle_arrival(0, &udp4(40000, 27015, i));
    }
    // The limit counts what the pipe holds: the first frame, on the wire, and 4 waiting; the
    // other 15 made room.
    assert_eq!(pipes.aqm_dropped(), 15);
    assert_eq!(pipes.counters().aqm_overflow, 15);
    let out = drain(&mut pipes, 100 * MS);
    assert_eq!(out.len(), 5);
    assert_eq!(
        pipes.aqm_dropped(),
        pipes.counters().aqm_overflow + pipes.counters().aqm_drop
    );
}
