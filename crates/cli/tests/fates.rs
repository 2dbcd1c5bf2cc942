//! `--record-fates` and `--replay-fates` through `latlab run`: a fixed count of probes sent by
//! `latlab gen` behind a lossy link to `latlab echo` on the host side, recorded, then replayed
//! with another seed: the same probes lost, by count (gen's) and by position (`latlab fates`'s
//! comparison). Bad fate files are refused before anything runs.

mod common;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{engines, namespaces_or_skip};
use latlab_lab::topology::Namespace;

/// `nsenter --net=/run/netns/NS latlab`: latlab in the namespace `ns` and the machine's mount
/// namespace (as `tests/run.rs` runs `latlab run`).
fn in_ns(ns: &str) -> Command {
    let mut c = Command::new("nsenter");
    c.arg(format!("--net=/run/netns/{ns}"))
        .arg(assert_cmd::cargo::cargo_bin("latlab"));
    c
}

fn latlab() -> Command {
    Command::new(assert_cmd::cargo::cargo_bin("latlab"))
}

/// Whether a UDP socket in `ns` is bound to `port`.
fn listening(ns: &str, port: u16) -> bool {
    let out = Command::new("ip")
        .args(["netns", "exec", ns, "cat", "/proc/net/udp"])
        .output()
        .unwrap();
    let needle = format!(":{port:04X} ");
    String::from_utf8_lossy(&out.stdout).contains(&needle)
}

const LINK: [&str; 2] = ["--loss-model", "gemodel:5%,45%,100%,0"];
const PROBES: u64 = 400;

/// `latlab run` in `host` with the lossy link, `extra` flags and gen behind it sending
/// [`PROBES`] probes to the echo on the host; returns gen's lost count and the run's stderr.
fn run_gen(host: &str, subnet: &str, extra: &[&str], json: &Path) -> (u64, String) {
    let target = format!("{}.1:7777", subnet.trim_end_matches(".0/30"));
    let out = in_ns(host)
        .arg("run")
        .args(["--subnet", subnet, "--poll", "block"])
        .args(LINK)
        .args(extra)
        .args([
            "--",
            &assert_cmd::cargo::cargo_bin("latlab").display().to_string(),
        ])
        .args([
            "gen",
            "--target",
            &target,
            "--rate",
            "200",
            "--duration",
            "2s",
        ])
        .args([
            "--warmup",
            "0s",
            "--no-check",
            "--poll",
            "block",
            "--grace",
            "1s",
        ])
        .arg("--json")
        .arg(json)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    let report = common::read_json(json);
    assert_eq!(report["sent"].as_u64(), Some(PROBES), "{report}");
    (report["lost"].as_u64().unwrap(), stderr)
}

/// The line of `latlab fates A B`'s output about `flow` in `direction`.
fn flow_line<'a>(compared: &'a str, direction: &str, flow: &str) -> &'a str {
    compared
        .lines()
        .find(|l| l.starts_with(&format!("{direction} {flow}:")))
        .unwrap_or_else(|| panic!("no {direction} {flow} in:\n{compared}"))
}

#[test]
fn a_recorded_run_replayed_with_another_seed_loses_the_same_probes() {
    if !namespaces_or_skip() {
        return;
    }
    let _turn = engines();
    let host = Namespace::create(&format!("latlab-{}-fates-host", std::process::id())).unwrap();
    let echo = in_ns(host.name())
        .args(["echo", "--listen", "0.0.0.0:7777", "--poll", "block"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let _echo = common::Reaped::new(echo);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !listening(host.name(), 7777) {
        assert!(Instant::now() < deadline, "the echo never bound its port");
        std::thread::sleep(Duration::from_millis(20));
    }
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str| dir.path().join(name);
    let (first, second) = (file("run1.fates"), file("run2.fates"));
    let (other, unreplayed) = (file("other.fates"), file("gen.json"));
    let subnet = "198.19.231.0/30";

    let (lost1, _) = run_gen(
        host.name(),
        subnet,
        &["--seed", "1", "--record-fates", first.to_str().unwrap()],
        &file("gen1.json"),
    );
    let (lost2, stderr) = run_gen(
        host.name(),
        subnet,
        &[
            "--seed",
            "9",
            "--replay-fates",
            first.to_str().unwrap(),
            "--record-fates",
            second.to_str().unwrap(),
        ],
        &file("gen2.json"),
    );
    // The model alone with seed 9 loses other probes.
    let (lost3, _) = run_gen(
        host.name(),
        subnet,
        &["--seed", "9", "--record-fates", other.to_str().unwrap()],
        &unreplayed,
    );
    assert!(lost1 > 10, "a 10% loss lost {lost1} of {PROBES}");
    assert_eq!(lost2, lost1, "the replay lost another count:\n{stderr}");
    assert!(stderr.contains("replayed fates: A→B "), "{stderr}");

    let summary = latlab().arg("fates").arg(&first).output().unwrap();
    let summary = String::from_utf8_lossy(&summary.stdout).into_owned();
    assert!(
        summary.contains(&format!("  ipv4/udp#0: {PROBES} frames")),
        "{summary}"
    );

    let compared = latlab()
        .arg("fates")
        .arg(&first)
        .arg(&second)
        .output()
        .unwrap();
    let compared = String::from_utf8_lossy(&compared.stdout).into_owned();
    for direction in ["a_to_b", "b_to_a"] {
        let line = flow_line(&compared, direction, "ipv4/udp#0");
        assert!(line.contains(": same fates,"), "{line}");
    }
    // The probes lost going up, and the answers lost coming down, add up to gen's count.
    let dropped = |line: &str| -> u64 {
        line.split(" frames, ")
            .nth(1)
            .and_then(|rest| rest.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no drop count in {line}"))
    };
    let up = flow_line(&compared, "a_to_b", "ipv4/udp#0");
    assert!(
        up.contains(&format!("same fates, {PROBES} frames, ")),
        "{up}"
    );
    let down = flow_line(&compared, "b_to_a", "ipv4/udp#0");
    assert_eq!(dropped(up) + dropped(down), lost1, "{compared}");

    let without = latlab()
        .arg("fates")
        .arg(&first)
        .arg(&other)
        .output()
        .unwrap();
    let without_out = String::from_utf8_lossy(&without.stdout).into_owned();
    assert_eq!(without.status.code(), Some(1), "{without_out}");
    let up = flow_line(&without_out, "a_to_b", "ipv4/udp#0");
    assert!(
        up.contains("first difference at position"),
        "{up} (gen lost {lost3})"
    );
}

#[test]
fn bad_fate_files_are_refused_before_anything_runs_naming_the_file_and_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.fates");
    let refused = |path: &Path, args: &[&str]| -> String {
        let out = latlab()
            .args([
                "emu",
                "--iface-a",
                "nonexistent-a",
                "--iface-b",
                "nonexistent-b",
            ])
            .args(args)
            .arg("--replay-fates")
            .arg(path)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(stderr.contains(&path.display().to_string()), "{stderr}");
        stderr
    };
    let out = latlab()
        .args([
            "emu",
            "--iface-a",
            "x-a",
            "--iface-b",
            "x-b",
            "--replay-fates",
        ])
        .arg(&missing)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("missing.fates"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");

    let garbage = dir.path().join("garbage.fates");
    std::fs::write(&garbage, b"not a fate file at all").unwrap();
    assert!(refused(&garbage, &[]).contains("byte 0: magic"));

    // A whole file with no frames, written by hand as the format says: 2 directions.
    let mut bytes = b"LATFATES\x01\x02".to_vec();
    bytes.extend(b"\x06a_to_b\x00\x06b_to_a\x00");
    let whole = [bytes.clone(), vec![255, 0, 0]].concat();
    let file = dir.path().join("whole.fates");
    std::fs::write(&file, &whole).unwrap();
    let summary = latlab().arg("fates").arg(&file).output().unwrap();
    assert!(summary.status.success(), "{summary:?}");
    assert!(String::from_utf8_lossy(&summary.stdout).starts_with("0 frames recorded"));

    let cut = dir.path().join("cut.fates");
    std::fs::write(&cut, &bytes).unwrap();
    assert!(refused(&cut, &[]).contains(&format!("byte {}: record 0 tag", bytes.len())));

    let mut version = whole.clone();
    version[8] = 7;
    std::fs::write(&file, &version).unwrap();
    assert!(refused(&file, &[]).contains("byte 8: version: version 7"));

    // Recorded without rules, replayed on a run with one: another flow layout.
    std::fs::write(&file, &whole).unwrap();
    let stderr = refused(&file, &["--flow", "proto=udp / delay=1ms"]);
    assert!(stderr.contains("directions[0].rules"), "{stderr}");
}
