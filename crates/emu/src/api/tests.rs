use std::io::{Read, Write};
use std::net::TcpStream;

use super::*;

/// One HTTP/1.1 request to `addr`; the status and the body of the answer.
fn request(addr: SocketAddr, method: &str, path: &str, body: &str) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    (status, body.to_string())
}

fn delay_ms(ms: u64) -> LinkConfig {
    LinkConfig {
        delay_ns: ms * 1_000_000,
        ..LinkConfig::default()
    }
}

#[test]
fn a_put_body_changes_only_the_keys_it_names() {
    let current = LinkConfig {
        loss: LossModel::Bernoulli { p: 0.01 },
        ..delay_ms(5)
    };
    let new = merged(&current, true, "delay=20ms\n").unwrap();
    assert_eq!(new.delay_ns, 20_000_000);
    assert_eq!(new.loss, LossModel::Bernoulli { p: 0.01 }, "loss kept");
    assert_eq!(spec_text(&new), "delay=20ms loss=1%");
}

#[test]
fn a_put_body_takes_a_preset_for_its_direction() {
    let current = LinkConfig {
        loss: LossModel::Bernoulli { p: 0.01 },
        ..delay_ms(5)
    };
    let up = merged(&current, true, "preset=chrome-fast-4g").unwrap();
    let down = merged(&current, false, "preset=chrome-fast-4g delay=1ms").unwrap();
    assert_eq!((up.rate_bps, up.delay_ns), (Some(1_350_000), 82_500_000));
    assert_eq!((down.rate_bps, down.delay_ns), (Some(8_100_000), 1_000_000));
    assert_eq!(
        down.loss,
        LossModel::Bernoulli { p: 0.01 },
        "what the preset leaves is kept"
    );
}

#[test]
fn a_bad_body_names_the_key_at_fault() {
    let current = delay_ms(5);
    for (body, key) in [
        ("wobble=1", "wobble"),
        ("delay=soon", "body: delay: "),
        ("delay=5", "body: delay: "),
        ("loss=120%", "body: loss: "),
        ("delay", "\"delay\" is not key=value"),
        ("limit=0", "body: limit: "),
        ("schedule=/etc/passwd", "schedule"),
        ("dist-table=/etc/passwd", "dist-table"),
        ("delay-trace=/etc/passwd", "delay-trace"),
        ("slot=20ms,10ms", "body: slot: MAX 10ms is below MIN 20ms"),
        ("slot=0", "body: slot: must be above 0"),
        (
            "slot=10ms slot-packets=0",
            "body: slot-packets: must be at least 1",
        ),
        (
            "slot=10ms slot-bytes=0",
            "body: slot-bytes: must be at least 1",
        ),
        ("slot-packets=3", "body: slot-packets: needs a slot"),
        ("slot-bytes=3000", "body: slot-bytes: needs a slot"),
        (
            "slot-dist=gauss,10ms,1ms",
            "slot-dist NAME: cannot read \"gauss\"",
        ),
        ("slot-dist=normal,10ms", "expected NAME,DELAY,JITTER"),
        (
            "delay-trace-step=10ms",
            "body: delay-trace-step: needs a delay-trace",
        ),
        ("delay-trace-mode=curvy", "\"curvy\" is not a mode"),
        ("   ", "empty body"),
    ] {
        let error = merged(&current, true, body).unwrap_err();
        assert!(error.contains(key), "{body:?}: {error:?} lacks {key:?}");
        assert_eq!(error.lines().count(), 1, "{error:?}");
        // A body has keys, not flags.
        assert!(!error.contains("--"), "{body:?}: {error:?} names a flag");
    }
}

#[test]
fn the_spec_text_of_a_configuration_gives_it_back() {
    let spec =
        "delay=1500us jitter=100us jitter-dist=pareto correlation=25% loss=gemodel:1%,30%,100%,0% \
                duplicate=0.5% corrupt=0.1% reorder=25%,gap=5 rate=10mbit overhead=0 limit=50 \
                limit-bytes=65536";
    let mut config = LinkConfig::default();
    super::config::apply_spec(&mut config, true, "test", spec).unwrap();
    assert_eq!(
        spec_text(&config),
        spec.split_whitespace().collect::<Vec<_>>().join(" ")
    );
    let mut again = LinkConfig::default();
    super::config::apply_spec(&mut again, true, "test", &spec_text(&config)).unwrap();
    assert_eq!(again, config);
    assert_eq!(spec_text(&LinkConfig::default()), "");
}

#[test]
fn the_spec_text_gives_slots_and_a_delay_trace_back() {
    let dir = std::env::temp_dir().join(format!("latlab-spec-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("delays.txt");
    std::fs::write(&file, "0 10\n100 20.5\n").unwrap();
    let specs = [
        "slot=10ms,20ms slot-packets=4 slot-bytes=3000".to_string(),
        "slot=5ms".to_string(),
        "slot-dist=pareto,10ms,2500us slot-packets=1".to_string(),
        format!(
            "delay-trace={} delay-trace-step=50ms delay-trace-mode=step",
            file.display()
        ),
    ];
    for spec in specs {
        let mut config = LinkConfig::default();
        super::config::apply_spec(&mut config, true, "test", &spec).unwrap();
        config.validate().unwrap();
        assert_eq!(spec_text(&config), spec);
        let mut again = LinkConfig::default();
        super::config::apply_spec(&mut again, true, "test", &spec_text(&config)).unwrap();
        assert_eq!(again, config, "{spec}");
        let json = direction_json(&config);
        if spec.starts_with("slot") {
            assert!(json["slot"]["gap"].is_string(), "{json}");
        } else {
            assert_eq!(json["delay_trace"]["points"], 2);
            assert_eq!(json["delay_trace"]["mode"], "step");
            assert_eq!(json["delay_trace"]["period_ns"], 150_000_000);
        }
    }
    // `slot=none` turns slots off.
    let mut config = LinkConfig::default();
    super::config::apply_spec(&mut config, true, "test", "slot=10ms slot=none").unwrap();
    assert_eq!(config.slot, None);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_refused_slot_or_trace_leaves_the_running_link_as_it_was() {
    let api = Api::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = api.addr();
    let control = EmulatorControl::default();
    let done = AtomicBool::new(false);
    let slotted = merged(&delay_ms(5), true, "slot=10ms slot-packets=2").unwrap();
    let conditions = SharedConditions::new([slotted.into(), delay_ms(7).into()]);
    // What the API answered, checked once it stopped (a failed check inside would leave it
    // serving).
    let (before, refused, (after, untouched), good, changed) = std::thread::scope(|s| {
        s.spawn(|| api.serve(&conditions, &control, &done));
        let get = || {
            let (_, body) = request(addr, "GET", "/conditions", "");
            serde_json::from_str::<serde_json::Value>(&body).unwrap()
        };
        let before = get();
        let refused: Vec<(&str, u16, String)> = [
            "slot=20ms,10ms",
            "slot-packets=0",
            "slot-dist=gauss,1ms,1ms",
            "delay-trace=/etc/hostname",
            "delay-trace-step=1ms",
        ]
        .into_iter()
        .map(|body| {
            let (status, answer) = request(addr, "PUT", "/conditions/a-to-b", body);
            (body, status, answer)
        })
        .collect();
        let after = get();
        let untouched = control.changes().is_empty();
        // A good one is taken (no engine runs here to apply it: 503, the API says so).
        let (good, _) = request(addr, "PUT", "/conditions/a-to-b", "slot-packets=3");
        let changed = get();
        done.store(true, Ordering::Relaxed);
        (before, refused, (after, untouched), good, changed)
    });
    assert_eq!(
        before["a_to_b"]["spec"],
        "delay=5ms slot=10ms slot-packets=2"
    );
    assert_eq!(before["a_to_b"]["slot"]["packets"], 2);
    for (body, status, answer) in refused {
        assert_eq!(
            (status, answer.lines().count()),
            (400, 1),
            "{body}: {answer}"
        );
    }
    assert_eq!(after, before, "nothing changed");
    assert!(untouched, "a refused body reached the engine");
    assert_eq!(good, 503);
    assert_eq!(
        changed["a_to_b"]["spec"], "delay=5ms slot=10ms slot-packets=3",
        "the budget changed, the slot stayed"
    );
}

#[test]
fn the_api_answers_conditions_and_refuses_a_bad_body_without_changing_anything() {
    let api = Api::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = api.addr();
    let control = EmulatorControl::default();
    let done = AtomicBool::new(false);
    let conditions = SharedConditions::new([delay_ms(5).into(), delay_ms(7).into()]);
    std::thread::scope(|s| {
        s.spawn(|| api.serve(&conditions, &control, &done));
        let (status, body) = request(addr, "GET", "/conditions", "");
        assert_eq!(status, 200);
        let before: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(before["a_to_b"]["spec"], "delay=5ms");
        assert_eq!(before["a_to_b"]["delay_ns"], 5_000_000);
        assert_eq!(before["b_to_a"]["spec"], "delay=7ms");
        let (status, body) = request(addr, "PUT", "/conditions/a-to-b", "delay=1ms wobble=2");
        assert_eq!((status, body.lines().count()), (400, 1), "{body}");
        assert!(body.contains("wobble"), "{body}");
        let (_, body) = request(addr, "GET", "/conditions", "");
        let after: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(after, before, "nothing changed");
        assert!(control.changes().is_empty());
        assert_eq!(request(addr, "GET", "/nowhere", "").0, 404);
        assert_eq!(request(addr, "DELETE", "/conditions", "").0, 405);
        // No engine runs here: nothing to count yet.
        done.store(true, Ordering::Relaxed);
    });
}

#[test]
fn the_conditions_list_the_rules_read_only_and_a_put_changes_the_default() {
    let api = Api::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = api.addr();
    let control = EmulatorControl::default();
    let done = AtomicBool::new(false);
    let rule = latlab_link::FlowRule {
        matcher: latlab_link::FlowMatch::parse("--flow", "proto=udp dport=27015").unwrap(),
        config: LinkConfig {
            loss: LossModel::Bernoulli { p: 0.05 },
            ..LinkConfig::default()
        },
    };
    let a_to_b = Flows {
        default: delay_ms(5),
        rules: vec![rule],
    };
    let conditions = SharedConditions::new([a_to_b, delay_ms(7).into()]);
    std::thread::scope(|s| {
        s.spawn(|| api.serve(&conditions, &control, &done));
        let (status, body) = request(addr, "GET", "/conditions", "");
        assert_eq!(status, 200);
        let conditions: serde_json::Value = serde_json::from_str(&body).unwrap();
        let flows = &conditions["a_to_b"]["flows"];
        assert_eq!(flows[0]["match"], "proto=udp dport=27015", "{body}");
        assert_eq!(flows[0]["spec"], "loss=5%");
        assert_eq!(flows[0]["loss"]["p"], 0.05);
        assert_eq!(flows.as_array().unwrap().len(), 1);
        assert!(
            conditions["b_to_a"].get("flows").is_none(),
            "no rules, no key"
        );
        // No engine runs here: the change is submitted, never applied; the API says so.
        let (status, _) = request(addr, "PUT", "/conditions/a-to-b", "delay=1ms");
        assert_eq!(status, 503);
        let (_, body) = request(addr, "GET", "/conditions", "");
        let after: serde_json::Value = serde_json::from_str(&body).unwrap();
        assert_eq!(after["a_to_b"]["spec"], "delay=1ms", "the default changed");
        assert_eq!(after["a_to_b"]["flows"], *flows, "the rules did not");
        done.store(true, Ordering::Relaxed);
    });
}
