//! `latlab study bufferbloat` as a user runs it: a short study in namespaces (tail drop, the
//! unloaded link and one cubic flow, the answers delayed 5 ms) writes every artefact, the
//! bulk flow's goodput stays under the bottleneck's rate while the queue fills and frames wait
//! in it, the game's lost probes add up with the path shared, `--resume` keeps the points, and
//! `latlab report` draws it again byte for byte (root; must run under CI=true).

mod common;

use assert_cmd::cargo::cargo_bin;

#[test]
fn bad_bufferbloat_options_name_themselves() {
    common::one_line_error(
        &["study", "bufferbloat", "--queues", "tail:depth=3"],
        "--queues",
    );
    common::one_line_error(
        &["study", "bufferbloat", "--queues", "tail:100"],
        "key=value",
    );
    common::one_line_error(&["study", "bufferbloat", "--flows", "99"], "--flows");
    common::one_line_error(&["study", "bufferbloat", "--rate", "fast"], "rate");
    common::one_line_error(&["study", "bufferbloat", "--model", "quake"], "--model");
}

#[test]
fn a_short_bufferbloat_study_writes_every_artefact_and_report_draws_it_again() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let study = |resume: bool| {
        let mut c = assert_cmd::Command::new(cargo_bin("latlab"));
        c.args(["study", "bufferbloat", "--queues", "tail:limit=100"])
            .args([
                "--flows",
                "0,1",
                "--cc",
                "cubic",
                "--model",
                "fixed:160@5ms",
            ])
            .args([
                "--duration",
                "1s",
                "--warmup",
                "500ms",
                "--delay",
                "5ms",
                "--out",
            ])
            .arg(&out);
        if resume {
            c.arg("--resume");
        }
        let run = c.output().unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
        String::from_utf8_lossy(&run.stderr).into_owned()
    };
    study(false);
    let written = common::artefacts(&out);
    for f in [
        "study.json",
        "report.md",
        "p99-by-queue.svg",
        "goodput-vs-p99.svg",
    ] {
        assert!(written.contains_key(f), "{f} missing: {:?}", written.keys());
    }
    assert_eq!(
        common::read_json(&out.join("study.json"))["kind"],
        "bufferbloat"
    );
    let unloaded = common::read_json(&out.join("points/bloat-tail-limit-100-0.json"));
    let loaded = common::read_json(&out.join("points/bloat-tail-limit-100-cubic-1.json"));
    assert_eq!(unloaded["bulk"].as_array().unwrap().len(), 0);
    assert_eq!(loaded["spec"], "rate=20mbit limit=100");
    let bulk = loaded["bulk"].as_array().unwrap();
    assert_eq!(bulk.len(), 1);
    assert_eq!(bulk[0]["cc"], "cubic");
    // The receiver reads no more than the bottleneck lets through (how much of it a loaded
    // machine's cubic gets in a second is a benchmark's question).
    let goodput = bulk[0]["goodput_bps"].as_f64().unwrap();
    assert!(
        goodput > 0.0 && goodput <= 20.5e6,
        "goodput {goodput} bit/s through 20 Mbit/s"
    );
    // The answers come back 5 ms later: no round trip is shorter, loaded or not.
    let p50 = |p: &serde_json::Value| p["game"]["latency_ns"]["p50"].as_f64().unwrap() / 1e6;
    for (name, point) in [("unloaded", &unloaded), ("loaded", &loaded)] {
        assert!(
            p50(point) >= 5.0,
            "{name} p50 {} ms with a 5 ms delay",
            p50(point)
        );
    }
    assert_eq!(loaded["return_delay_ns"], 5_000_000);
    // The queue overflowed at its limit: tail drop.
    let a_to_b = &loaded["emulator"]["a_to_b"];
    let drops = a_to_b["link"]["dropped_queue_frames"].as_u64().unwrap();
    assert!(drops > 0, "no drop at a 100-frame queue");
    // The game's lost probes add up, the path's count shared with the bulk flow's frames (so
    // placed after the counters that count the game's alone) and taking what they leave.
    let lost = &loaded["game"]["lost_by_cause"];
    let n = |cause: &str| lost[cause].as_u64().unwrap_or(0);
    let others = n("sender") + n("reflector_socket") + n("reflector");
    assert_eq!(others + n("path") + n("unanswered"), n("lost"), "{lost}");
    assert_eq!(lost["counters"]["path_shared"], true, "{lost}");
    let counted = lost["counters"]["interface_drops"].as_u64().unwrap();
    assert_eq!(n("path"), counted.min(n("lost") - others), "{lost}");
    // And the frames behind a full queue waited for it, as the queue itself measured (not
    // the game's round trips of two runs a second apart, which a loaded machine's stalls
    // move more than the queue does): 99 full frames ahead are 59 ms at 20 Mbit/s.
    let sojourn_max = a_to_b["sojourn_ns"]["max"].as_f64().unwrap() / 1e6;
    assert!(
        sojourn_max > 30.0,
        "the longest wait in a queue that overflowed: {sojourn_max} ms"
    );
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("| tail:limit=100 | cubic | 1 |"),
        "{report}"
    );
    assert!(report.contains("not recorded"), "{report}");

    let again = study(true);
    assert!(again.contains("measured before, kept"), "{again}");
    let before = common::artefacts(&out);
    let redraw = assert_cmd::Command::new(cargo_bin("latlab"))
        .arg("report")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        redraw.status.success(),
        "{}",
        String::from_utf8_lossy(&redraw.stderr)
    );
    assert_eq!(common::artefacts(&out), before);
}
