//! Events on the emulated link: a flapping link from a `--schedule` file, a lag spike and a
//! release over `--api`, each recorded with its time in `--json`, `/metrics` and the pcapng's
//! comments, while `latlab gen` measures through the bridge of a `client — emu — server` lab
//! (root; must run under CI=true). Bad event lines and bodies get one line naming the file,
//! the line and the part at fault.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::json;
use latlab_lab::topology::ClientEmuServer;

const API: &str = "127.0.0.1:9101";

#[test]
fn a_bad_event_line_in_a_schedule_is_refused_naming_the_file_line_and_part() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("events.txt");
    std::fs::write(&path, "0s 10ms 0% -\n5s burst 3s\n").unwrap();
    let file = path.to_str().unwrap();
    let base = [
        "emu",
        "--iface-a",
        "a0",
        "--iface-b",
        "b0",
        "--schedule",
        file,
    ];
    common::one_line_error(&base, "line 2: event: unknown event \"burst\"");
    common::one_line_error(&base, file);
    std::fs::write(&path, "1s spike 200ms\n").unwrap();
    common::one_line_error(&base, "line 1: spike: needs its length");
    std::fs::write(&path, "5s outage 1s\n2s outage 1s\n").unwrap();
    common::one_line_error(&base, "line 2: TIME: 2s is before the previous line's 5s");
}

#[test]
fn scheduled_and_asked_for_events_act_on_the_link_and_are_recorded_with_their_times() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (emu_json, pcap) = (dir.path().join("emu.json"), dir.path().join("emu.pcapng"));
    let schedule = dir.path().join("flap.txt");
    // The link flaps from 1 s on until released: down 300 ms of every 600 ms.
    std::fs::write(&schedule, "# a flapping uplink\n1s flap 300ms 300ms\n").unwrap();
    let mut cmd = common::in_ns(lab.emu.name());
    cmd.args([
        "emu",
        "--iface-a",
        "emu-a",
        "--iface-b",
        "emu-b",
        "--delay",
        "1ms",
    ])
    .args(["--api", API, "--a-to-b"])
    .arg(format!("schedule={}", schedule.display()))
    .arg("--pcap")
    .arg(&pcap)
    .arg("--json")
    .arg(&emu_json)
    .stdout(Stdio::piped());
    let emu = common::started(cmd, "API on");
    let target = format!("{}:7777", lab.server_addr);
    let mut echo = common::in_ns(lab.server.name());
    echo.args(["echo", "--listen", &target, "--poll", "block"])
        .stdout(Stdio::null());
    let echo = common::started(echo, "latlab echo:");
    let ns = lab.emu.name().to_string();

    // A bad body: 400 naming the part, nothing begun.
    let (status, body) = request(&ns, "POST", "/events", "spike 2xx for 3s");
    assert_eq!((status, body.trim().lines().count()), (400, 1), "{body}");
    assert!(body.starts_with("spike DELAY: cannot read"), "{body}");
    let events = json(&request(&ns, "GET", "/events", "").1);
    assert!(events["changes"].as_array().unwrap().is_empty(), "{events}");
    assert_eq!(events["a_to_b"][0]["event"], "flap 300ms 300ms", "{events}");
    assert_eq!(events["a_to_b"][0]["scheduled"], true);
    assert!(events["b_to_a"].as_array().unwrap().is_empty(), "{events}");

    // Wait for the flapping to begin (however slowly this machine started the run).
    let began = (0..1200).any(|_| {
        std::thread::sleep(Duration::from_millis(50));
        json(&request(&ns, "GET", "/events", "").1)["a_to_b"][0]["began"] == true
    });
    assert!(began, "the scheduled flap began");
    let flapping = gen(&lab, dir.path(), "flapping.json", "2s");
    let (sent, lost) = (count(&flapping, "sent"), count(&flapping, "lost"));
    assert!(
        lost > 0 && lost < sent,
        "a flapping link loses some: {flapping}"
    );

    // Released: the flap is over, nothing is lost.
    let (status, body) = request(&ns, "DELETE", "/events", "");
    assert_eq!(status, 200, "{body}");
    let steady = gen(&lab, dir.path(), "steady.json", "500ms");
    assert_eq!(steady["lost"], 0, "{steady}");

    // A lag spike over the API, both ways: the fastest round trip carries it.
    let (status, body) = request(&ns, "POST", "/events", "spike 100ms for 60s");
    assert_eq!(status, 200, "{body}");
    let spiked = gen(&lab, dir.path(), "spiked.json", "500ms");
    let fastest_ms = spiked["latency_ns"]["min"].as_f64().unwrap() / 1e6;
    assert!(fastest_ms >= 200.0, "{fastest_ms} ms with +100 ms each way");
    let (_, metrics) = request(&ns, "GET", "/metrics", "");
    for line in [
        "latlab_emu_events_total{direction=\"a_to_b\",event=\"flap\"} 1",
        "latlab_emu_events_total{direction=\"a_to_b\",event=\"spike\"} 1",
        "latlab_emu_events_total{direction=\"b_to_a\",event=\"spike\"} 1",
        "latlab_emu_events_in_force{direction=\"b_to_a\"} 1",
    ] {
        assert!(
            metrics.lines().any(|l| l == line),
            "{line} missing:\n{metrics}"
        );
    }
    assert!(metrics.contains(
        "latlab_emu_event_begin_seconds{direction=\"a_to_b\",n=\"1\",event=\"flap 300ms 300ms\"} 1"
    ));
    let (status, _) = request(&ns, "DELETE", "/events", "");
    assert_eq!(status, 200);

    emu.signal("TERM");
    let (status, summary, stderr) = emu.wait_output();
    assert_eq!(status.code(), Some(143), "{stderr}");
    echo.signal("TERM");
    let _ = echo.wait_output();
    assert!(
        summary.contains("A→B event: flap 300ms 300ms from 1.000 s to"),
        "{summary}\n{stderr}"
    );
    let report = common::read_json(&emu_json);
    let a = &report["a_to_b"];
    let outage_drops = a["link"]["dropped_outage"].as_u64().unwrap();
    assert!(
        outage_drops >= lost,
        "{outage_drops} outage drops, gen lost {lost}"
    );
    assert!(a["bytes"]["dropped"]["outage"].as_u64().unwrap() > 0, "{a}");
    let kinds: Vec<(&str, bool, bool)> = a["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let ended = e["end_s"].as_f64().is_some();
            (
                e["kind"].as_str().unwrap(),
                e["scheduled"].as_bool().unwrap(),
                ended,
            )
        })
        .collect();
    assert_eq!(kinds, [("flap", true, true), ("spike", false, true)], "{a}");
    assert_eq!(
        a["events"][0]["begin_s"], 1.0,
        "the schedule's time, exactly"
    );
    let by: Vec<(String, String)> = report["event_changes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["direction"].as_str().unwrap().into(),
                c["event"].to_string(),
            )
        })
        .collect();
    assert_eq!(
        by.len(),
        6,
        "release, spike, release, each both ways: {by:?}"
    );
    assert!(report["event_changes"]
        .as_array()
        .unwrap()
        .iter()
        .all(|c| c["by"] == "api"));
    check_notes(&pcap);
}

/// The capture's event comments: the flap's beginning and end on interface B (A→B), and the
/// spike's on both.
fn check_notes(path: &Path) {
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
    use pcap_file::pcapng::{Block, PcapNgReader};
    let mut reader = PcapNgReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut notes: Vec<(u32, String)> = Vec::new();
    while let Some(block) = reader.next_block() {
        if let Block::EnhancedPacket(p) = block.unwrap() {
            for o in &p.options {
                if let EnhancedPacketOption::Comment(c) = o {
                    if c.starts_with("event: ") {
                        notes.push((p.interface_id, c.to_string()));
                    }
                }
            }
        }
    }
    let has = |iface: u32, start: &str| {
        notes
            .iter()
            .any(|(i, n)| *i == iface && n.starts_with(start))
    };
    assert!(
        has(1, "event: flap 300ms 300ms began at 1.000000000 s"),
        "{notes:?}"
    );
    assert!(has(1, "event: flap 300ms 300ms ended at "), "{notes:?}");
    assert!(has(1, "event: spike 100ms for 60s began at "), "{notes:?}");
    assert!(has(0, "event: spike 100ms for 60s began at "), "{notes:?}");
}

/// One HTTP/1.1 request to the API inside namespace `ns`: the status and the body.
fn request(ns: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    common::api_request(ns, API, method, path, body)
}

/// Probes counted by `key` (`sent`, `lost`), the warm-up's included.
fn count(run: &serde_json::Value, key: &str) -> u64 {
    run[key].as_u64().unwrap() + run["warmup"][key].as_u64().unwrap_or(0)
}

/// `latlab gen` from the client for `duration` at 1 kpps; its JSON report.
fn gen(lab: &ClientEmuServer, dir: &Path, name: &str, duration: &str) -> serde_json::Value {
    let path = dir.join(name);
    let out = common::in_ns(lab.client.name())
        .args(["gen", "--target", &format!("{}:7777", lab.server_addr)])
        .args(["--rate", "1k", "--duration", duration, "--poll", "block"])
        .args(["--grace", "500ms", "--no-check"])
        .arg("--json")
        .arg(&path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    common::read_json(&path)
}
