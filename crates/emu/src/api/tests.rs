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
