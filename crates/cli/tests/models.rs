//! `latlab gen --model`: probes with a game's sizes and gaps, as a user runs it.

mod common;

use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;
use latlab_probe::model::TrafficModel;
use latlab_probe::{Schedule, Traffic};

/// The messages a model's schedule gives in `duration` from seed 1 (gen's default seed):
/// (size on the wire, due time from the start).
fn expected(model: &str, duration: Duration) -> Vec<(usize, u64)> {
    let model: TrafficModel = model.parse().unwrap();
    let mut schedule = Schedule::from_traffic(Traffic::Model(model), 0, 1).unwrap();
    let mut out = Vec::new();
    while schedule.next_due() < duration.as_nanos() as u64 {
        let size = schedule.next_size().unwrap();
        let due = schedule.advance();
        out.push((size.max(latlab_wire::probe::HEADER_LEN), due));
    }
    out
}

#[test]
fn gen_sends_the_models_sizes_with_its_gaps() {
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("run.json");
    let recorder = common::Recorder::start();
    let duration = Duration::from_secs(2);
    let out = std::process::Command::new(cargo_bin("latlab"))
        .args(["gen", "--target", &recorder.addr.to_string()])
        .args([
            "--model",
            "halo3-intense",
            "--duration",
            "2s",
            "--warmup",
            "10ms",
        ])
        .args([
            "--poll",
            "block",
            "--grace",
            "200ms",
            "--no-check",
            "--json",
        ])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = recorder.finish();
    let want = expected("halo3-intense", duration);

    // Every message, in order, with the model's size (raised to the probe header).
    let sizes: Vec<usize> = seen.iter().map(|s| s.size).collect();
    let want_sizes: Vec<usize> = want.iter().map(|w| w.0).collect();
    assert_eq!(sizes, want_sizes);

    // Each was meant to leave at its due time from one start: the open-loop schedule sends
    // from the intended times, so gaps do not add up (checked from the stamps the sender
    // decided, to the nanosecond, not from when a loaded machine delivered them).
    let due: Vec<u64> = want.iter().map(|w| w.1).collect();
    common::sent_as_scheduled(&seen, &due, 0);

    // The result says which model ran and how many messages were raised to the header.
    let summary = common::read_json(&json);
    assert_eq!(summary["setup"]["pattern"], "model");
    assert_eq!(summary["setup"]["traffic"], "halo3-intense");
    assert_eq!(summary["setup"]["payload_bytes"], 1264);
    let raised = expected_raised("halo3-intense", duration);
    assert!(raised > 0);
    assert_eq!(summary["raised"], raised);
    let sent = summary["sent"].as_u64().unwrap() + summary["warmup"]["sent"].as_u64().unwrap();
    assert_eq!(sent, want.len() as u64);
}

/// Messages of the model below the probe header in `duration`.
fn expected_raised(model: &str, duration: Duration) -> u64 {
    let model: TrafficModel = model.parse().unwrap();
    let mut schedule = Schedule::from_traffic(Traffic::Model(model), 0, 1).unwrap();
    let mut n = 0;
    while schedule.next_due() < duration.as_nanos() as u64 {
        if schedule.next_size().unwrap() < latlab_wire::probe::HEADER_LEN {
            n += 1;
        }
        schedule.advance();
    }
    n
}

#[test]
fn a_fixed_model_sends_one_size_at_one_interval() {
    let _turn = common::engines();
    let recorder = common::Recorder::start();
    let start = Instant::now();
    let out = std::process::Command::new(cargo_bin("latlab"))
        .args(["gen", "--target", &recorder.addr.to_string()])
        .args([
            "--model",
            "fixed:100@50ms",
            "--duration",
            "1s",
            "--warmup",
            "10ms",
        ])
        .args(["--poll", "block", "--grace", "200ms", "--no-check"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let seen = recorder.finish();
    assert_eq!(seen.len(), 20, "1 s at one message every 50 ms");
    assert!(seen.iter().all(|s| s.size == 100));
    // 19 gaps of exactly 50 ms between the intended send times.
    let due: Vec<u64> = (0..20).map(|i| i * 50_000_000).collect();
    common::sent_as_scheduled(&seen, &due, 0);
    assert!(start.elapsed() < Duration::from_secs(10));
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(table.contains("model fixed:100@50ms"), "{table}");
    assert!(!table.contains("raised"), "{table}");
}

#[test]
fn bad_models_end_with_one_line_naming_the_flag() {
    let t = ["gen", "--target", "127.0.0.1:9"];
    for (model, needle) in [
        ("quake", "unknown model \"quake\""),
        ("fixed:100", "fixed:SIZE@INTERVAL"),
        ("fixed:big@50ms", "model size \"big\""),
        ("fixed:100@0ms", "model interval \"0ms\""),
    ] {
        common::one_line_error(&[&t[..], &["--model", model]].concat(), needle);
        common::one_line_error(&[&t[..], &["--model", model]].concat(), "--model");
    }
    for other in [
        ["--rate", "100"],
        ["--pattern", "poisson"],
        ["--size", "100"],
    ] {
        common::one_line_error(
            &[&t[..], &["--model", "wow"], &other[..]].concat(),
            "cannot be used with",
        );
    }
    let out = std::process::Command::new(cargo_bin("latlab"))
        .args(["gen", "--target", "127.0.0.1:9", "--model", "quake"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn gen_help_lists_the_models() {
    let out = std::process::Command::new(cargo_bin("latlab"))
        .args(["gen", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&out.stdout);
    for name in TrafficModel::NAMES {
        assert!(help.contains(name), "gen --help lacks {name}");
    }
    assert!(help.contains("fixed:SIZE@INTERVAL"));
}
