use super::*;
use crate::{DropCause, Fate, Link, LinkConfig, Schedule};

const MS: u64 = 1_000_000;
const S: u64 = 1_000_000_000;

#[test]
fn events_read_as_written_and_print_back() {
    let cases = [
        (
            "spike 200ms for 3s",
            Event::Spike {
                delay_ns: 200 * MS,
                length_ns: 3 * S,
            },
        ),
        (
            "spike=50ms for 1500ms",
            Event::Spike {
                delay_ns: 50 * MS,
                length_ns: 1500 * MS,
            },
        ),
        (
            "outage 2s",
            Event::Outage {
                length_ns: Some(2 * S),
            },
        ),
        ("outage", Event::Outage { length_ns: None }),
        (
            "flap 5s 1s",
            Event::Flap {
                up_ns: 5 * S,
                down_ns: S,
                length_ns: None,
            },
        ),
        (
            "flap 5s 1s for 30s",
            Event::Flap {
                up_ns: 5 * S,
                down_ns: S,
                length_ns: Some(30 * S),
            },
        ),
    ];
    for (text, event) in cases {
        assert_eq!(Event::parse(text).unwrap(), event, "{text}");
        let printed = event.to_string();
        assert_eq!(Event::parse(&printed).unwrap(), event, "{printed}");
    }
    assert_eq!(
        Event::parse("spike=200ms for 3s").unwrap().to_string(),
        "spike 200ms for 3s"
    );
}

#[test]
fn bad_events_name_the_part_at_fault() {
    let error = |text: &str| Event::parse(text).unwrap_err().to_string();
    assert_eq!(
        error("burst 3s"),
        "event: unknown event \"burst\": expected spike, outage or flap"
    );
    assert!(error("").starts_with("event: empty"));
    assert!(error("spike 200ms").starts_with("spike: needs its length"));
    assert!(error("spike 2xx for 3s").starts_with("spike DELAY: cannot read \"2xx\""));
    assert!(error("spike 0 for 3s").starts_with("spike DELAY: must be above 0"));
    assert!(error("spike 200ms for 0").starts_with("spike for: must be above 0"));
    assert!(error("spike 200ms for 3s 4s").starts_with("spike for: `for` takes one"));
    assert!(error("outage 2s for 3s").starts_with("outage: expected"));
    assert!(error("outage soon").starts_with("outage DUR: cannot read"));
    assert!(error("flap 1s").starts_with("flap: expected `flap UP DOWN`"));
    assert!(error("flap 1s 0").starts_with("flap DOWN: must be above 0"));
}

#[test]
fn spikes_add_outages_and_flaps_take_the_link_down_for_their_length() {
    let mut events = Events::default();
    events.begin(
        10 * MS,
        Event::Spike {
            delay_ns: 100 * MS,
            length_ns: 50 * MS,
        },
    );
    events.begin(
        20 * MS,
        Event::Spike {
            delay_ns: 5 * MS,
            length_ns: 10 * MS,
        },
    );
    let at = |events: &mut Events, t| events.effect(t);
    assert_eq!(at(&mut events, 0), EventEffect::default());
    assert_eq!(at(&mut events, 10 * MS).extra_delay_ns, 100 * MS);
    assert_eq!(at(&mut events, 25 * MS).extra_delay_ns, 105 * MS);
    assert_eq!(at(&mut events, 30 * MS).extra_delay_ns, 100 * MS);
    assert_eq!(at(&mut events, 60 * MS), EventEffect::default());

    events.begin(
        100 * MS,
        Event::Flap {
            up_ns: 30 * MS,
            down_ns: 10 * MS,
            length_ns: Some(80 * MS),
        },
    );
    let down: Vec<bool> = (100..200)
        .step_by(5)
        .map(|ms| at(&mut events, ms * MS).down)
        .collect();
    // Up 100..130, down 130..140, up 140..170, down 170..180, then over.
    let expected: Vec<bool> = (100..200)
        .step_by(5)
        .map(|ms| (130..140).contains(&ms) || (170..180).contains(&ms))
        .collect();
    assert_eq!(down, expected);
}

#[test]
fn release_ends_what_is_in_force_and_leaves_what_is_due() {
    let mut events = Events::default();
    events.schedule(0, &[(S, Event::Outage { length_ns: Some(S) })]);
    events.begin(0, Event::Outage { length_ns: None });
    assert!(events.effect(MS).down);
    assert_eq!(events.release(2 * MS), 1);
    assert!(!events.effect(3 * MS).down);
    assert!(
        events.effect(S + MS).down,
        "the scheduled outage still comes"
    );
    assert!(!events.effect(2 * S).down);
    let records = events.records();
    assert_eq!(records.len(), 2);
    assert_eq!(records[1].end_ns, Some(2 * MS));
    assert!(records[0].scheduled && !records[1].scheduled);
}

fn deliver_at(fate: Fate) -> Option<u64> {
    match fate {
        Fate::Deliver { departure_ns, .. } => Some(departure_ns),
        Fate::Drop(_) => None,
    }
}

#[test]
fn a_schedule_places_its_events_on_the_link() {
    let schedule = Schedule::parse(
        "1s spike 200ms for 1s\n\
         3s outage 500ms\n\
         4s 20ms - -\n",
    )
    .unwrap();
    let config = LinkConfig {
        delay_ns: 10 * MS,
        schedule: Some(schedule),
        ..LinkConfig::default()
    };
    let start = 7 * S;
    let mut link = Link::new(config, start).unwrap();
    // Before, during and after the spike (frames 100 ms apart, so order never holds one back).
    assert_eq!(
        deliver_at(link.handle_arrival(start, 100)),
        Some(start + 10 * MS)
    );
    let t = start + 1500 * MS;
    assert_eq!(deliver_at(link.handle_arrival(t, 100)), Some(t + 210 * MS));
    let t = start + 2500 * MS;
    assert_eq!(deliver_at(link.handle_arrival(t, 100)), Some(t + 10 * MS));
    // The outage drops every frame, counted under its own cause.
    for ms in [3000, 3200, 3499] {
        let fate = link.handle_arrival(start + ms * MS, 100);
        assert_eq!(fate, Fate::Drop(DropCause::Outage), "{ms} ms");
    }
    let t = start + 3500 * MS;
    assert_eq!(deliver_at(link.handle_arrival(t, 100)), Some(t + 10 * MS));
    let t = start + 5 * S;
    assert_eq!(deliver_at(link.handle_arrival(t, 100)), Some(t + 20 * MS));
    assert_eq!(link.counters().dropped_outage, 3);
    assert_eq!(link.counters().dropped(), 3);
    let begins: Vec<u64> = link.events().iter().map(|r| r.begin_ns - start).collect();
    assert_eq!(begins, [S, 3 * S]);
}

#[test]
fn a_spike_begun_while_running_keeps_frames_in_order_when_it_ends() {
    let mut link = Link::new(
        LinkConfig {
            delay_ns: 10 * MS,
            ..LinkConfig::default()
        },
        0,
    )
    .unwrap();
    link.begin_event(
        0,
        Event::Spike {
            delay_ns: 100 * MS,
            length_ns: 5 * MS,
        },
    );
    let during = deliver_at(link.handle_arrival(MS, 100)).unwrap();
    assert_eq!(during, 111 * MS);
    // After the spike the delay is 10 ms again, but a frame never overtakes the one before.
    let after = deliver_at(link.handle_arrival(6 * MS, 100)).unwrap();
    assert_eq!(after, during);
    let later = deliver_at(link.handle_arrival(200 * MS, 100)).unwrap();
    assert_eq!(later, 210 * MS);
    // A configuration change does not end the events begun, nor a new schedule.
    link.begin_event(300 * MS, Event::Outage { length_ns: None });
    link.handle_config(
        301 * MS,
        LinkConfig {
            delay_ns: 1,
            ..LinkConfig::default()
        },
    )
    .unwrap();
    let fate = link.handle_arrival(302 * MS, 100);
    assert_eq!(fate, Fate::Drop(DropCause::Outage));
    assert_eq!(link.release_events(303 * MS), 1);
    assert!(deliver_at(link.handle_arrival(304 * MS, 100)).is_some());
}
