//! Every study point's losses placed by cause (`lost_by_cause`), the causes adding up to the
//! loss and the cause made to lose carrying it: the emulator study's loss models and
//! bufferbloat's bottleneck on the path, the game server's full socket, a foreign server's
//! full socket as its namespace counts it (root; must run under CI=true).

mod common;

use std::path::{Path, PathBuf};

use assert_cmd::cargo::cargo_bin;
use serde_json::Value;

/// A point's `lost_by_cause`, checked to add up to its loss.
fn lost_by_cause(point: &Value, key: &str) -> Value {
    let lost = &point[key];
    let n = |cause: &str| lost[cause].as_u64().unwrap_or(0);
    assert!(lost.is_object(), "no {key}: {point}");
    assert_eq!(
        n("sender") + n("path") + n("reflector_socket") + n("reflector") + n("unanswered"),
        n("lost"),
        "{lost}"
    );
    lost.clone()
}

/// The point files under `dir/points` whose names start with `prefix`, by name.
fn points(dir: &Path, prefix: &str) -> Vec<(String, Value)> {
    let mut found: Vec<(String, Value)> = std::fs::read_dir(dir.join("points"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with(prefix) && n.ends_with(".json"))
        .map(|n| (n.clone(), common::read_json(&dir.join("points").join(&n))))
        .collect();
    found.sort_by(|a, b| a.0.cmp(&b.0));
    assert!(!found.is_empty(), "no {prefix} points in {}", dir.display());
    found
}

/// Runs `latlab study ARGS --out DIR` (ARGS split at spaces) to its end in a folder of its
/// own, which it returns with DIR; `None` where namespaces do not work here (said why).
fn study(args: &str) -> Option<(tempfile::TempDir, PathBuf)> {
    if !common::namespaces_or_skip() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let run = assert_cmd::Command::new(cargo_bin("latlab"))
        .arg("study")
        .args(args.split_whitespace())
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    Some((dir, out))
}

/// The emulator study's two loss models drop probes on the client→server direction: the path
/// carries every probe lost, none is unanswered, and the report lists them.
#[test]
fn the_emulator_studys_loss_models_lose_their_probes_on_the_path() {
    let _turn = common::engines();
    let Some((_dir, out)) =
        study("emulator --rates 1k --delays 10us --duration 200ms --rate-duration 50ms")
    else {
        return;
    };
    for (name, point) in points(&out, "") {
        if name.starts_with("rate-") {
            continue;
        }
        let lost = lost_by_cause(&point["run"], "lost_by_cause");
        assert!(lost["path"].is_u64(), "{name}: the path is counted: {lost}");
        if name.starts_with("loss-") {
            assert!(lost["lost"].as_u64().unwrap() > 0, "{name}: {lost}");
            assert_eq!(lost["path"], lost["lost"], "{name}: {lost}");
            assert_eq!(lost["unanswered"], 0, "{name}: {lost}");
        }
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("\n## Lost by cause\n"), "{report}");
    assert!(
        report.contains("- loss-bernoulli, delay 0, 10.0 kpps: lost "),
        "{report}"
    );
}

/// A bottleneck slower than the game stream itself, with no bulk flow: its tail-drop queue and
/// CoDel drop the stream's own probes, and the path carries every one of them. (The queues
/// are short: the generator waits out one's drain at 200 kbit/s for the answers.)
#[test]
fn bufferbloats_bottleneck_drops_are_the_paths() {
    let _turn = common::engines();
    let Some((_dir, out)) = study(concat!(
        "bufferbloat --queues tail:limit=10,codel:limit=30 --flows 0 --rate 200kbit",
        " --model fixed:160@5ms --duration 1s --warmup 0ms"
    )) else {
        return;
    };
    let measured = points(&out, "bloat-");
    assert_eq!(measured.len(), 2, "{measured:?}");
    for (name, point) in measured {
        let lost = lost_by_cause(&point["game"], "lost_by_cause");
        // 200 probes a second of 202 bytes on the wire are 323 kbit/s through 200 kbit/s.
        assert!(lost["lost"].as_u64().unwrap() > 0, "{name}: {lost}");
        assert_eq!(lost["path"], lost["lost"], "{name}: {lost}");
        assert_eq!(lost["counters"]["path_shared"], Value::Null, "{name}");
        for cause in ["sender", "reflector_socket", "reflector", "unanswered"] {
            assert_eq!(lost[cause], 0, "{name}: {cause}: {lost}");
        }
    }
}

/// latlab's game server spinning a millisecond per packet behind a 16 KiB receive buffer
/// cannot keep up with 4k probes a second: its socket drops them, and every copy of each
/// (one per client) is placed there; none is unanswered.
#[test]
fn the_game_servers_full_socket_carries_every_copy_of_the_probes_it_dropped() {
    let _turn = common::engines();
    let Some((_dir, out)) = study(concat!(
        "game-server --clients 4 --loads 4k --rcvbuf 16k --io socket --no-flood",
        " --work-cycles 3000000 --duration 400ms"
    )) else {
        return;
    };
    let mut dropped = 0;
    for (name, point) in points(&out, "") {
        let lost = lost_by_cause(&point, "lost_by_cause");
        let missing =
            point["copies_expected"].as_u64().unwrap() - point["copies_received"].as_u64().unwrap();
        assert!(lost["lost"].as_u64().unwrap() >= missing, "{name}: {lost}");
        assert_eq!(lost["counters"]["fan_out"], 4, "{name}: {lost}");
        assert_eq!(lost["unanswered"], 0, "{name}: {lost}");
        let socket = lost["reflector_socket"].as_u64().unwrap();
        // Each datagram the socket dropped was a probe's four copies.
        assert_eq!(socket % 4, 0, "{name}: {lost}");
        dropped += socket;
    }
    assert!(dropped > 0, "the server's socket dropped nothing");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("(warm-up included): clients' sockets "),
        "{report}"
    );
}

/// A server nobody here wrote, in a namespace of this test's own with the study: it answers
/// the study's check, then reads nothing more, its buffer the smallest. The namespace's UDP
/// MIB places at its socket every request it dropped: after the first point, whose requests
/// the buffer holds are unanswered, every one.
#[test]
fn a_foreign_servers_full_socket_is_placed_from_its_namespaces_counters() {
    let _turn = common::engines();
    let Some((_lab, ns, _)) = common::server_namespace() else {
        return;
    };
    let options = latlab_io::udp::UdpOptions {
        rcvbuf: Some(1),
        ..Default::default()
    };
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], 7779));
    let socket =
        latlab_io::netns::run_in(&ns, move || latlab_io::udp::UdpSocket::bind(addr, &options))
            .unwrap()
            .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let study = std::thread::scope(|s| {
        let study = s.spawn(|| {
            common::in_ns(&ns)
                .args(["study", "game-server", "--target", "127.0.0.1:7779"])
                .args([
                    "--protocol",
                    "echo",
                    "--loads",
                    "200",
                    "--duration",
                    "300ms",
                ])
                .arg("--out")
                .arg(&out)
                .output()
                .unwrap()
        });
        // The check's first request answered, then nothing read.
        let mut buf = [0u8; 2048];
        assert!(socket
            .wait_readable(Some(std::time::Duration::from_secs(20)))
            .unwrap());
        let (n, from) = socket.recv_from_one(&mut buf).unwrap();
        socket.send_one(&buf[..n], Some(from)).unwrap();
        study.join().unwrap()
    });
    assert!(
        study.status.success(),
        "{}",
        String::from_utf8_lossy(&study.stderr)
    );
    let measured = points(&out, "target-");
    assert!(measured.len() > 1, "{measured:?}");
    for (name, point) in &measured {
        let lost = lost_by_cause(point, "lost_by_cause");
        assert_eq!(point["answered"], 0, "{name}");
        assert!(
            lost["lost"].as_u64() >= point["unanswered"].as_u64(),
            "{name}: {lost}"
        );
        assert_eq!(lost["counters"]["shared_namespace"], true, "{name}: {lost}");
        assert_eq!(lost["path"], 0, "{name}: lo dropped nothing: {lost}");
        for cause in ["sender", "reflector", "counted_beyond_loss"] {
            assert_eq!(lost[cause], 0, "{name}: {cause}: {lost}");
        }
        // The first point measured (the sweep's first load) filled the buffer: every request
        // after it was dropped at the socket.
        if name != "target-sweep-echo-200pps.json" {
            assert_eq!(lost["reflector_socket"], lost["lost"], "{name}: {lost}");
        }
    }
    let placed: u64 = measured
        .iter()
        .map(|(_, p)| p["lost_by_cause"]["reflector_socket"].as_u64().unwrap())
        .sum();
    assert_eq!(
        placed,
        socket.kernel_drops().unwrap(),
        "every drop of the server's socket placed there"
    );
}
