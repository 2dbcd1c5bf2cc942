use latlab_link::{Event, LossModel};

use super::*;

fn delay_ms(ms: u64) -> LinkConfig {
    LinkConfig {
        delay_ns: ms * 1_000_000,
        ..LinkConfig::default()
    }
}

#[test]
fn a_form_replaces_the_settings_but_keeps_what_it_does_not_show() {
    let mut current = delay_ms(50);
    current.seed = 77;
    current.max_frame = 2048;
    current.duplicate = 0.5;
    let new = replaced(&current, true, "jitter=3ms loss=1%").unwrap();
    assert_eq!(
        (new.delay_ns, new.jitter_ns, new.duplicate),
        (0, 3_000_000, 0.0)
    );
    assert_eq!(new.loss, LossModel::Bernoulli { p: 0.01 });
    assert_eq!(
        (new.seed, new.max_frame),
        (77, 2048),
        "kept: the form does not show them"
    );
}

#[test]
fn a_refused_form_names_its_key_or_else_the_direction() {
    let current = LinkConfig::default();
    let (key, line) = replaced(&current, true, "delay=5ms loss=gemodel:200%,1%,1%,1%").unwrap_err();
    assert_eq!(key.as_deref(), Some("loss"), "{line}");
    assert!(line.contains("loss"), "{line}");
    let (key, _) = replaced(&current, true, "delay=banana").unwrap_err();
    assert_eq!(key.as_deref(), Some("delay"));
    let (key, _) = replaced(&current, true, "wobble=1").unwrap_err();
    assert_eq!(key.as_deref(), Some("wobble"));
    let (key, line) = replaced(&current, true, "schedule=/etc/passwd").unwrap_err();
    assert_eq!(key.as_deref(), Some("schedule"), "{line}");
    // CoDel needs a rate: no one key is wrong, the direction is.
    let (key, line) = replaced(&current, true, "aqm=codel").unwrap_err();
    assert_eq!(key, None, "{line}");
    assert!(line.contains("rate"), "{line}");
}

#[test]
fn one_shots_go_to_the_engine_as_events_and_leave_the_settings_as_set() {
    let shared = SharedConditions::new([delay_ms(5).into(), delay_ms(7).into()]);
    let control = EmulatorControl::default();
    let mut c = shared.lock();
    // No engine runs: the event is handed over, never applied; the settings stay as set.
    let applied = c.begin(OverlayKind::Cable, None, &control, "ui: cable pulled");
    assert_eq!(applied, Applied::NotYet);
    assert_eq!(
        c.overlay().map(|o| o.kind.clone()),
        Some(OverlayKind::Cable)
    );
    assert_eq!(c.in_force(0).delay_ns, 5_000_000, "the settings are as set");
    c.begin(
        OverlayKind::Spike {
            delay_ns: 100_000_000,
        },
        Some(Duration::from_millis(1)),
        &control,
        "ui",
    );
    assert_eq!(c.in_force(1).delay_ns, 7_000_000);
    assert_eq!(c.overlay().map(|o| o.kind.name()), Some("spike"));
    assert!(c.expire(Instant::now() + Duration::from_millis(5)));
    assert!(c.overlay().is_none());
    assert!(!c.expire(Instant::now()), "nothing left to end");
    // What the engine was handed, in order: the cable (an outage until released), a release
    // of it, the spike.
    assert_eq!(
        OverlayKind::Cable.event(None),
        Event::Outage { length_ns: None }
    );
    assert_eq!(
        OverlayKind::Spike { delay_ns: 5 }.event(Some(Duration::from_nanos(9))),
        Event::Spike {
            delay_ns: 5,
            length_ns: 9
        }
    );
}
