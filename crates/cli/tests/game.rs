//! `latlab serve` and `latlab study game-server` as a user runs them.

mod common;

use std::process::Command;

use assert_cmd::cargo::cargo_bin;

#[test]
fn bad_serve_and_study_flags_name_themselves() {
    common::one_line_error(&["serve", "--listen", "127.0.0.1:0", "--io", "xdp"], "--io");
    common::one_line_error(
        &["serve", "--listen", "127.0.0.1:0", "--io", "dpdk"],
        "--io",
    );
    common::one_line_error(&["serve", "--listen", "nowhere"], "--listen");
    common::one_line_error(
        &["serve", "--listen", "127.0.0.1:0", "--max-clients", "0"],
        "--max-clients",
    );
    common::one_line_error(
        &["serve", "--listen", "127.0.0.1:0", "--rate-limit", "-1"],
        "--rate-limit",
    );
    common::one_line_error(&["study", "game-server", "--loads", "100k..10k"], "--loads");
    common::one_line_error(&["study", "game-server", "--loads", "fast"], "--loads");
    common::one_line_error(&["study", "game-server", "--clients", "0"], "--clients");
    common::one_line_error(&["study", "game-server", "--rcvbuf", "lots"], "--rcvbuf");
    common::one_line_error(&["study", "game-server", "--io", "carrier-pigeon"], "--io");
}

#[test]
fn a_bad_idle_timeout_or_host_cap_names_its_flag() {
    common::one_line_error(
        &["serve", "--listen", "127.0.0.1:0", "--idle-timeout", "soon"],
        "--idle-timeout",
    );
    common::one_line_error(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--max-clients-per-host",
            "0",
        ],
        "--max-clients-per-host",
    );
}

#[test]
fn serve_stops_after_its_duration_and_reports_its_counters() {
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("serve.json");
    let out = assert_cmd::Command::new(cargo_bin("latlab"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--io",
            "batched",
            "--duration",
            "300ms",
        ])
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let counters = common::read_json(&json);
    assert_eq!(counters["io"], "batched");
    assert_eq!(counters["received"], 0);
}

#[test]
fn a_two_point_study_in_namespaces_writes_its_report_and_resumes() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    // The studies' pids: the namespaces each makes are named after it.
    let pids = std::cell::RefCell::new(Vec::new());
    let run = |resume: bool| {
        let mut cmd = Command::new(cargo_bin("latlab"));
        cmd.args([
            "study",
            "game-server",
            "--clients",
            "4",
            "--loads",
            "2k,4k",
            "--rcvbuf",
            "default",
        ])
        .args(["--io", "socket", "--duration", "400ms", "--no-flood"])
        .arg("--out")
        .arg(&out);
        if resume {
            cmd.arg("--resume");
        }
        let child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        pids.borrow_mut().push(child.id());
        child.wait_with_output().unwrap()
    };
    let first = run(false);
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(first.status.success(), "{stderr}");
    assert!(stderr.contains("veth"), "{stderr}");
    let points: Vec<_> = std::fs::read_dir(out.join("points"))
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    // Two sweep points and Table I's three.
    assert_eq!(points.len(), 5, "{points:?}");
    let sweep = common::read_json(&out.join("points/sweep-socket-c4-b208k-2000pps.json"));
    assert!(sweep["complete"].as_u64().unwrap() > 0, "{sweep}");
    assert_eq!(sweep["server"]["joins"], 4);
    for f in [
        "report.md",
        "table1.md",
        "table1.csv",
        "fig2-latency-vs-load.svg",
        "fig3-histogram.svg",
        "fig4-buffers.svg",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("Table I") || report.contains("table"),
        "{report}"
    );
    // A rerun without --resume refuses to touch the folder; with it, nothing is measured again.
    let again = run(false);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("--resume"));
    let resumed = run(true);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    assert_eq!(stderr.matches("skipped").count(), 5, "{stderr}");
    // None of the namespaces the three studies made is left (other namespaces on the machine
    // are not theirs).
    let after = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let after = String::from_utf8_lossy(&after.stdout);
    for pid in pids.borrow().iter() {
        let prefix = format!("latlab-{pid}-");
        assert!(
            !after.lines().any(|l| l.starts_with(&prefix)),
            "namespaces left behind: {after}"
        );
    }
}

#[test]
fn report_draws_a_study_folder_again_as_the_study_wrote_it() {
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    common::succeeds(
        std::process::Command::new(cargo_bin("latlab"))
            .args(["study", "game-server", "--loopback", "--clients", "4"])
            .args(["--loads", "2k", "--rcvbuf", "default", "--io", "socket"])
            .args(["--duration", "300ms", "--no-flood", "--out"])
            .arg(&out),
    );
    let written = common::artefacts(&out);
    for f in [
        "study.json",
        "report.md",
        "table1.csv",
        "fig3-histogram.svg",
    ] {
        assert!(written.contains_key(f), "{f} missing: {:?}", written.keys());
    }
    assert_eq!(
        common::read_json(&out.join("study.json"))["kind"],
        "game-server"
    );
    assert!(common::report_redraws_as_written(&out).contains("report.md"));
    // A study has no CCDF runs to plot: --plot says so in one line and writes nothing.
    let plot = dir.path().join("plot.svg");
    let refused = assert_cmd::Command::new(cargo_bin("latlab"))
        .arg("report")
        .arg(&out)
        .arg("--plot")
        .arg(&plot)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--plot"), "{stderr}");
    assert!(!plot.exists());
}

#[test]
fn a_game_server_study_in_two_shards_measures_each_point_once() {
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    // Two receive buffers, one I/O mode: two units, one per shard.
    let shard = |which: &str| {
        assert_cmd::Command::new(cargo_bin("latlab"))
            .args(["study", "game-server", "--loopback", "--clients", "4"])
            .args(["--loads", "1k", "--rcvbuf", "default,64k", "--io", "socket"])
            .args([
                "--duration",
                "300ms",
                "--no-flood",
                "--shard",
                which,
                "--out",
            ])
            .arg(&out)
            .output()
            .unwrap()
    };
    let points = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(out.join("points"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".json"))
            .collect();
        names.sort();
        names
    };
    let first = shard("2/2");
    assert!(
        first.status.success(),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let after_first = points();
    assert!(!after_first.is_empty());
    assert!(
        after_first
            .iter()
            .all(|p| p.contains("64k") || p.contains("65536")),
        "{after_first:?}"
    );
    assert!(!out.join("report.md").exists());
    let second = shard("1/2");
    assert!(
        second.status.success(),
        "{}",
        String::from_utf8_lossy(&second.stderr)
    );
    let all = points();
    // The second shard measured the other buffer's points and drew the report.
    assert_eq!(all.len(), 2 * after_first.len(), "{all:?}");
    assert!(out.join("report.md").is_file());
    assert!(String::from_utf8_lossy(&second.stdout).contains("report: "));
}
