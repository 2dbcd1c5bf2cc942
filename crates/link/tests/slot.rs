//! Slotting in virtual time, against NetEm's documented semantics (`tc-netem(8)`'s `slot`,
//! `sch_netem.c`'s dequeue): a frame that is due leaves only once the current slot has
//! opened; a slot lets out at most N frames, and closes once B bytes or more went out (the
//! frame that spends the budget leaves whole); then the next slot opens one gap after the
//! release; a frame due after a slot's instant passed idle opens the next one a gap after it
//! is due. The first slot opens when slotting is configured.

use latlab_link::{slot, FlowMatch, FlowPipes, FlowRule, Flows, JitterDist, LinkConfig, Pipe};
use latlab_link::{Slot, SlotGap};

const MS: u64 = 1_000_000;

fn fixed(gap_ms: u64) -> SlotGap {
    SlotGap::Uniform {
        min_ns: gap_ms * MS,
        max_ns: gap_ms * MS,
    }
}

fn slotted(gap: SlotGap, frames: Option<u64>, bytes: Option<u64>) -> LinkConfig {
    LinkConfig {
        slot: Some(Slot {
            gap: Some(gap),
            frames,
            bytes,
        }),
        limit_frames: None,
        ..LinkConfig::default()
    }
}

/// Feeds `arrivals` (time, length) and polls at every instant the pipe names plus `late_ns`
/// (an engine that wakes late), until nothing is left; returns each departure's intended time
/// (`departure_ns`), the time it was polled, and its length.
fn run(pipe: &mut Pipe, arrivals: &[(u64, usize)], late_ns: u64) -> Vec<(u64, u64, usize)> {
    let mut out = Vec::new();
    let mut next = 0;
    loop {
        let arrival = arrivals.get(next).map(|a| a.0);
        let due = pipe.poll_timeout().map(|t| t + late_ns);
        let now = match (arrival, due) {
            (Some(a), Some(p)) => a.min(p),
            (a, p) => match a.or(p) {
                Some(t) => t,
                None => break,
            },
        };
        while let Some(d) = pipe.poll_departure(now) {
            assert!(d.departure_ns() <= now, "released before its time");
            out.push((d.departure_ns(), now, d.frame().len()));
        }
        while arrivals.get(next).map(|a| a.0) == Some(now) {
            pipe.handle_arrival(now, &vec![0u8; arrivals[next].1]);
            next += 1;
        }
    }
    out
}

fn times(out: &[(u64, u64, usize)]) -> Vec<u64> {
    out.iter().map(|d| d.0).collect()
}

#[test]
fn a_backlog_leaves_n_frames_a_slot_one_gap_apart() {
    let mut pipe = Pipe::new(slotted(fixed(10), Some(2), None), 0).unwrap();
    let burst: Vec<(u64, usize)> = (0..7).map(|_| (0, 100)).collect();
    let out = run(&mut pipe, &burst, 0);
    // The first slot opens with the configuration, at 0.
    assert_eq!(
        times(&out),
        [0, 0, 10 * MS, 10 * MS, 20 * MS, 20 * MS, 30 * MS]
    );
    // The slot at 30 ms let one frame out and passed; a frame due at 31 ms opens the next
    // one a gap after it is due.
    let out = run(&mut pipe, &[(31 * MS, 100)], 0);
    assert_eq!(times(&out), [41 * MS]);
    assert_eq!(pipe.counters().delivered, 8);
}

#[test]
fn poll_timeout_names_the_slot_opening_not_the_due_time() {
    let config = LinkConfig {
        delay_ns: 3 * MS,
        ..slotted(fixed(10), Some(1), None)
    };
    let mut pipe = Pipe::new(config, 0).unwrap();
    pipe.handle_arrival(0, &[0; 100]);
    pipe.handle_arrival(0, &[0; 100]);
    // Due at 3 ms, after the slot at 0 passed idle: its slot opens at 13 ms.
    assert_eq!(pipe.poll_timeout(), Some(13 * MS));
    assert!(pipe.poll_departure(12 * MS).is_none());
    assert_eq!(
        pipe.poll_departure(13 * MS).unwrap().departure_ns(),
        13 * MS
    );
    // One frame a slot: the second waits for the next, one gap later.
    assert_eq!(pipe.poll_timeout(), Some(23 * MS));
    assert!(pipe.poll_departure(22 * MS).is_none());
}

#[test]
fn a_slot_closes_once_its_bytes_are_spent_the_last_frame_leaving_whole() {
    for (len, per_slot) in [(1000, 3), (1500, 2), (1200, 3), (4000, 1)] {
        let mut pipe = Pipe::new(slotted(fixed(5), None, Some(3000)), 0).unwrap();
        let burst: Vec<(u64, usize)> = (0..12).map(|_| (0, len)).collect();
        let out = run(&mut pipe, &burst, 0);
        assert_eq!(out.len(), 12);
        let mut slots = std::collections::BTreeMap::<u64, Vec<usize>>::new();
        for (at, _, len) in &out {
            slots.entry(*at).or_default().push(*len);
        }
        for (i, (at, lens)) in slots.iter().enumerate() {
            assert_eq!(*at, i as u64 * 5 * MS, "{len}-byte frames: slot {i}");
            let before_last: usize = lens[..lens.len() - 1].iter().sum();
            assert!(before_last < 3000, "{len}: a slot went on past its bytes");
            if i + 1 < slots.len() {
                assert_eq!(lens.len(), per_slot, "{len}-byte frames: slot {i}");
                assert!(lens.iter().sum::<usize>() >= 3000, "closed early");
            }
        }
    }
}

#[test]
fn frames_and_bytes_both_bound_a_slot() {
    let mut pipe = Pipe::new(slotted(fixed(5), Some(3), Some(2500)), 0).unwrap();
    // Small frames: the frame budget closes the slot; big ones: the byte budget.
    let burst: Vec<(u64, usize)> = [100, 100, 100, 100, 1500, 1500, 100]
        .into_iter()
        .map(|len| (0, len))
        .collect();
    let out = run(&mut pipe, &burst, 0);
    // 0 ms: three 100-byte frames (the frame budget); 5 ms: 100, 1500 and 1500 bytes (both
    // budgets spent by the third); 10 ms: the last.
    assert_eq!(times(&out), [0, 0, 0, 5 * MS, 5 * MS, 5 * MS, 10 * MS]);
}

#[test]
fn an_idle_link_then_a_burst_waits_for_one_slot_and_drains_by_the_budget() {
    let mut pipe = Pipe::new(slotted(fixed(10), Some(2), None), 0).unwrap();
    let mut arrivals = vec![(0, 100)];
    // 50 ms of nothing, then five frames at 55 ms.
    arrivals.extend((0..5).map(|_| (55 * MS, 100)));
    let out = run(&mut pipe, &arrivals, 0);
    assert_eq!(
        times(&out),
        [0, 65 * MS, 65 * MS, 75 * MS, 75 * MS, 85 * MS]
    );
}

#[test]
fn with_min_equal_to_max_a_backlog_leaves_exactly_periodically_however_late_the_polls() {
    for late_ns in [0, 1, 777_777, 3 * MS] {
        let mut pipe = Pipe::new(slotted(fixed(7), Some(1), None), 0).unwrap();
        let burst: Vec<(u64, usize)> = (0..50).map(|_| (0, 100)).collect();
        let out = run(&mut pipe, &burst, late_ns);
        let expected: Vec<u64> = (0..50).map(|i| i * 7 * MS).collect();
        assert_eq!(times(&out), expected, "polls {late_ns} ns late");
        // Each frame was polled late by at most the lateness: the error does not compound.
        for (intended, polled, _) in &out {
            assert!(
                polled - intended <= late_ns,
                "{late_ns}: {intended} polled at {polled}"
            );
        }
    }
}

#[test]
fn uniform_gaps_fall_in_min_to_max_and_a_seed_repeats_them() {
    let config = |seed| LinkConfig {
        seed,
        ..slotted(
            SlotGap::Uniform {
                min_ns: 5 * MS,
                max_ns: 15 * MS,
            },
            Some(1),
            None,
        )
    };
    let burst: Vec<(u64, usize)> = (0..200).map(|_| (0, 100)).collect();
    let slots = |seed| {
        let mut pipe = Pipe::new(config(seed), 0).unwrap();
        times(&run(&mut pipe, &burst, 0))
    };
    let first = slots(1);
    assert_eq!(first, slots(1), "the same seed, the same slots");
    assert_ne!(first, slots(2), "another seed, other slots");
    let gaps: Vec<u64> = first.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(
        gaps.iter().all(|g| (5 * MS..15 * MS).contains(g)),
        "{gaps:?}"
    );
    // Spread over the range, not stuck at one end.
    assert!(gaps.iter().any(|&g| g < 7 * MS) && gaps.iter().any(|&g| g > 13 * MS));
    // The slots' draws are their own: the link's other random choices do not change.
    let jitter = |slot: Option<Slot>| {
        let mut link = latlab_link::Link::new(
            LinkConfig {
                delay_ns: 10 * MS,
                jitter_ns: MS,
                loss: latlab_link::LossModel::Bernoulli { p: 0.3 },
                slot,
                seed: 9,
                limit_frames: None,
                ..LinkConfig::default()
            },
            0,
        )
        .unwrap();
        (0..100u64)
            .map(|i| link.handle_arrival(i * MS, 100))
            .collect::<Vec<_>>()
    };
    assert_eq!(jitter(None), jitter(config(1).slot));
}

#[test]
fn distribution_gaps_are_delay_plus_jitter_of_the_named_distribution() {
    let gap = slot::parse_distribution("slot-dist", "normal,10ms,2ms").unwrap();
    assert_eq!(
        gap,
        SlotGap::Distribution {
            dist: JitterDist::Normal,
            delay_ns: 10 * MS,
            jitter_ns: 2 * MS
        }
    );
    let mut pipe = Pipe::new(slotted(gap, Some(1), None), 0).unwrap();
    let burst: Vec<(u64, usize)> = (0..2001).map(|_| (0, 100)).collect();
    let out = times(&run(&mut pipe, &burst, 0));
    let gaps: Vec<f64> = out.windows(2).map(|w| (w[1] - w[0]) as f64).collect();
    let mean = gaps.iter().sum::<f64>() / gaps.len() as f64;
    let sd = (gaps.iter().map(|g| (g - mean).powi(2)).sum::<f64>() / gaps.len() as f64).sqrt();
    // 2,000 draws: the mean within 5 standard errors (0.22 ms), the spread within 10%.
    assert!((mean - 10e6).abs() < 0.25e6, "mean {mean}");
    assert!((sd - 2e6).abs() < 0.2e6, "sd {sd}");
    // NetEm's tables hold ±4 jitters.
    assert!(gaps.iter().all(|&g| (2e6..=18e6).contains(&g)));
}

#[test]
fn turning_slots_on_and_off_keeps_the_queued_frames() {
    let config = LinkConfig {
        delay_ns: 5 * MS,
        limit_frames: None,
        ..LinkConfig::default()
    };
    let mut pipe = Pipe::new(config.clone(), 0).unwrap();
    for _ in 0..10 {
        pipe.handle_arrival(0, &[0; 100]);
    }
    // At 1 ms, slots of 10 ms, three frames each: the first opens at 1 ms and passes idle
    // (the frames are due at 5 ms), so the frames held leave at 15, 25, 35 and 45 ms.
    let on = LinkConfig {
        slot: Some(Slot {
            gap: Some(fixed(10)),
            frames: Some(3),
            bytes: None,
        }),
        ..config.clone()
    };
    pipe.handle_config(MS, on).unwrap();
    assert_eq!(pipe.queued_frames(), 10);
    assert_eq!(pipe.poll_timeout(), Some(15 * MS));
    let mut out = Vec::new();
    while let Some(d) = pipe.poll_departure(16 * MS) {
        out.push(d.departure_ns());
    }
    assert_eq!(out, [15 * MS; 3]);
    assert_eq!(pipe.poll_timeout(), Some(25 * MS));
    // Off again: the seven left are due since 5 ms and leave at once, at their due time.
    pipe.handle_config(16 * MS, config).unwrap();
    assert_eq!(pipe.poll_timeout(), Some(5 * MS));
    let mut rest = 0;
    while let Some(d) = pipe.poll_departure(16 * MS) {
        assert_eq!(d.departure_ns(), 5 * MS);
        rest += 1;
    }
    assert_eq!(rest, 7);
    let c = pipe.counters();
    assert_eq!((c.arrived, c.delivered, c.dropped()), (10, 10, 0));
}

#[test]
fn a_config_with_the_same_slots_keeps_the_slot_going() {
    let config = slotted(fixed(10), Some(1), None);
    let mut pipe = Pipe::new(config.clone(), 0).unwrap();
    for _ in 0..3 {
        pipe.handle_arrival(0, &[0; 100]);
    }
    assert!(pipe.poll_departure(0).is_some());
    // A change of another knob: the slot at 10 ms stays where it is.
    let lossy = LinkConfig {
        duplicate: 0.5,
        ..config
    };
    pipe.handle_config(3 * MS, lossy).unwrap();
    assert_eq!(pipe.poll_timeout(), Some(10 * MS));
}

#[test]
fn rules_with_slots_leave_in_slotted_time_order_across_pipes() {
    // UDP to port 9 has slots of 10 ms; the rest goes at once.
    let rule = FlowRule {
        matcher: FlowMatch::parse("--flow", "proto=udp dport=9").unwrap(),
        config: slotted(fixed(10), Some(1), None),
    };
    let flows = Flows {
        default: LinkConfig::default(),
        rules: vec![rule],
    };
    let mut pipes = FlowPipes::new(flows, 0).unwrap();
    let udp_to_9 = udp_frame(9);
    let other = udp_frame(7);
    pipes.handle_arrival(0, &udp_to_9);
    pipes.handle_arrival(0, &udp_to_9);
    pipes.handle_arrival(0, &other);
    let mut out = Vec::new();
    for now in [0, 10 * MS] {
        while let Some(d) = pipes.poll_departure(now) {
            out.push((d.departure_ns(), d.flow()));
        }
    }
    assert_eq!(out, [(0, 0), (0, 1), (10 * MS, 0)]);
    assert_eq!(pipes.poll_timeout(), None);
}

/// An Ethernet + IPv4 + UDP frame to port `dport`.
fn udp_frame(dport: u16) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&46u16.to_be_bytes());
    f[23] = 17;
    f[34..36].copy_from_slice(&5000u16.to_be_bytes());
    f[36..38].copy_from_slice(&dport.to_be_bytes());
    f[38..40].copy_from_slice(&26u16.to_be_bytes());
    f
}
