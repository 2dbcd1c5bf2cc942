//! `latlab trace-stats` and `latlab gen --trace`, on captures the tests write.

mod common;

use std::path::Path;
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};

const MS: u64 = 1_000_000;
const T0: u64 = 1_700_000_000_000_000_000;

/// A raw-IP capture of one UDP stream 10.0.0.1:4000 → 10.0.0.2:7000: `(gap before, payload)`.
fn write_capture(path: &Path, packets: &[(u64, usize)]) -> Vec<u8> {
    let header = PcapHeader {
        datalink: DataLink::RAW,
        ts_resolution: TsResolution::NanoSecond,
        ..PcapHeader::default()
    };
    let mut w = PcapWriter::with_header(Vec::new(), header).unwrap();
    let mut ts = T0;
    for &(gap, payload) in packets {
        ts += gap;
        let total = 28 + payload;
        let mut p = vec![
            0x45, 0, 0, 0, 0, 0, 0x40, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
        ];
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p.extend_from_slice(&4000u16.to_be_bytes());
        p.extend_from_slice(&7000u16.to_be_bytes());
        p.extend_from_slice(&((8 + payload) as u16).to_be_bytes());
        p.extend_from_slice(&[0, 0]);
        p.resize(total, 0x5a);
        w.write_packet(&PcapPacket::new(Duration::from_nanos(ts), total as u32, &p))
            .unwrap();
    }
    let bytes = w.into_writer();
    std::fs::write(path, &bytes).unwrap();
    bytes
}

/// 40 messages: sizes cycle through 30 (below the probe header), 100, 400, 1000; gaps cycle
/// through 20, 40, 60 ms.
fn game_like() -> Vec<(u64, usize)> {
    (0..40)
        .map(|i| {
            let gap = if i == 0 { 0 } else { [20, 40, 60][i % 3] * MS };
            (gap, [30, 100, 400, 1000][i % 4])
        })
        .collect()
}

#[test]
fn trace_stats_prints_and_writes_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("game.pcap");
    write_capture(&pcap, &game_like());
    let csv = dir.path().join("game.csv");
    let out = std::process::Command::new(cargo_bin("latlab"))
        .arg("trace-stats")
        .arg(&pcap)
        .arg("--csv")
        .arg(&csv)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("10.0.0.1:4000"), "{text}");
    assert!(text.contains("40 frames, 1 streams"), "{text}");
    let csv = std::fs::read_to_string(&csv).unwrap();
    // 39 gaps: 13 each of 20, 40, 60 ms (the first gap is 40).
    let row = csv.lines().nth(1).unwrap();
    assert!(
        row.starts_with("1,udp,10.0.0.1:4000,10.0.0.2:7000,40,382.5,30,1000,40.000,40.000,20.000,60.000,20.000,60.000,25.000,"),
        "{row}"
    );
}

#[test]
fn a_truncated_capture_ends_with_one_line_naming_the_file_and_the_byte() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("cut.pcap");
    let bytes = write_capture(&pcap, &game_like());
    std::fs::write(&pcap, &bytes[..bytes.len() - 7]).unwrap();
    // The last record: 16 bytes of record header and 28 + 1000 bytes of packet.
    let offset = bytes.len() - (16 + 28 + 1000);
    let needle = format!("{}: broken at byte {offset}", pcap.display());
    common::one_line_error(&["trace-stats", pcap.to_str().unwrap()], &needle);
    common::one_line_error(
        &[
            "gen",
            "--target",
            "127.0.0.1:9",
            "--trace",
            pcap.to_str().unwrap(),
        ],
        &needle,
    );
    let out = std::process::Command::new(cargo_bin("latlab"))
        .arg("trace-stats")
        .arg(&pcap)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    common::one_line_error(
        &["gen", "--target", "127.0.0.1:9", "--trace", "/no/such.pcap"],
        "/no/such.pcap",
    );
}

#[test]
fn gen_replays_the_captures_sizes_with_its_gaps() {
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("game.pcap");
    let packets = game_like();
    write_capture(&pcap, &packets);
    for speed in [1.0, 2.0] {
        let json = dir.path().join(format!("run-{speed}.json"));
        let recorder = common::Recorder::start();
        let out = std::process::Command::new(cargo_bin("latlab"))
            .args(["gen", "--target", &recorder.addr.to_string(), "--trace"])
            .arg(&pcap)
            .args(["--speed", &speed.to_string(), "--warmup", "1ms"])
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
        // Every message once, in order, at its size (30 raised to the 56-byte header).
        let sizes: Vec<usize> = seen.iter().map(|s| s.size).collect();
        let want: Vec<usize> = packets.iter().map(|p| p.1.max(56)).collect();
        assert_eq!(sizes, want, "speed {speed}");
        // Each was meant to leave at the capture's gaps over the speed from one start: the
        // intended send times the sender stamped (what it decided; a loaded machine delays
        // arrivals, not these), to the microsecond the speed's division may round to.
        let mut due = Vec::new();
        let mut at = 0.0;
        for p in &packets {
            at += p.0 as f64 / speed;
            due.push(at as u64);
        }
        common::sent_as_scheduled(&seen, &due, 1_000);
        let summary = common::read_json(&json);
        assert_eq!(summary["setup"]["pattern"], "trace");
        assert_eq!(summary["raised"], 10);
        assert_eq!(summary["setup"]["payload_bytes"], 1000);
        assert!(summary["setup"]["traffic"]
            .as_str()
            .unwrap()
            .ends_with(&format!("stream 1 10.0.0.1:4000→10.0.0.2:7000 x{speed}")));
    }
}

#[test]
fn trace_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("game.pcap");
    write_capture(&pcap, &game_like());
    let p = pcap.to_str().unwrap();
    let t = ["gen", "--target", "127.0.0.1:9"];
    common::one_line_error(
        &[&t[..], &["--trace", p, "--stream", "2"]].concat(),
        "--stream 2",
    );
    common::one_line_error(
        &[&t[..], &["--trace", p, "--speed", "0"]].concat(),
        "--speed",
    );
    common::one_line_error(
        &[&t[..], &["--trace", p, "--rate", "10"]].concat(),
        "cannot be used with",
    );
    common::one_line_error(
        &[&t[..], &["--trace", p, "--model", "wow"]].concat(),
        "cannot be used with",
    );
    common::one_line_error(
        &[&t[..], &["--rate", "10", "--stream", "1"]].concat(),
        "--trace",
    );
}

#[test]
fn the_game_server_studys_client_replays_a_capture_paced_to_each_load() {
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("game.pcap");
    write_capture(&pcap, &game_like());
    let out = dir.path().join("study");
    // 40 messages 40 ms apart on average: 25 a second. At a load of 100 a second the client
    // plays them four times as fast: the whole stream in 390 ms.
    common::succeeds(
        std::process::Command::new(cargo_bin("latlab"))
            .args(["study", "game-server", "--loopback", "--clients", "2"])
            .args(["--loads", "100", "--rcvbuf", "default", "--io", "socket"])
            .args(["--duration", "500ms", "--no-flood", "--trace"])
            .arg(&pcap)
            .arg("--out")
            .arg(&out),
    );
    let study = common::read_json(&out.join("study.json"));
    let name = study["parameters"]["traffic"].as_str().unwrap();
    assert!(name.contains("game.pcap"), "{study}");
    let point = common::read_json(&out.join("points/sweep-socket-c2-b208k-100pps.json"));
    assert_eq!(point["traffic"], format!("{name}*4.0000"), "{point}");
    // Every message due after the 50 ms warm-up went out (a few are due within it), and
    // every fourth of them is the 30-byte one, sent at the probe header's size.
    let sent = point["sent"].as_u64().unwrap();
    assert!((30..=39).contains(&sent), "{point}");
    assert!(point["raised"].as_u64().unwrap() >= 8, "{point}");
    assert!(point["complete"].as_u64().unwrap() > 0, "{point}");
}

#[test]
fn the_game_server_studys_traffic_flags_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let pcap = dir.path().join("game.pcap");
    write_capture(&pcap, &game_like());
    let pcap = pcap.to_str().unwrap();
    let study = ["study", "game-server", "--loopback"];
    common::one_line_error(
        &[&study[..], &["--trace", pcap, "--stream", "7"]].concat(),
        "--stream 7",
    );
    common::one_line_error(&[&study[..], &["--stream", "1"]].concat(), "--trace");
    common::one_line_error(
        &[&study[..], &["--model", "counter-strike", "--trace", pcap]].concat(),
        "--trace",
    );
    common::one_line_error(&[&study[..], &["--model", "quake"]].concat(), "quake");
}
