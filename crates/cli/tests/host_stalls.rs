//! The host's stall floor in a run's results: a loop stopped by SIGSTOP for 100 ms records a
//! stall of at least 50 ms (gen's own loop; echo's and serve's loops spinning, their samplers
//! when they block), and a gate on a tail the stall explains is inconclusive, not failed. In a namespace
//! the test made (root; must run under CI=true). Asserts on what was recorded, never on speed.

mod common;

use std::process::Command;
use std::time::Duration;

/// The namespace's UDP datagrams received so far (`InDatagrams`).
fn udp_in(ns: &str) -> u64 {
    let out =
        common::succeeds(Command::new("ip").args(["netns", "exec", ns, "cat", "/proc/net/snmp"]));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut udp = text.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next().unwrap(), udp.next().unwrap());
    let at = names
        .split_whitespace()
        .position(|n| n == "InDatagrams")
        .unwrap();
    values.split_whitespace().nth(at).unwrap().parse().unwrap()
}

/// Stops `pid` for 100 ms.
fn stop_for_100ms(pid: u32) {
    common::signal_pid(pid, "STOP");
    std::thread::sleep(Duration::from_millis(100));
    common::signal_pid(pid, "CONT");
}

/// A result's `host_stalls`, checked to hold a stall of 50 ms or more and to add up.
fn has_the_stall(json: &serde_json::Value, source: &str) -> serde_json::Value {
    let stalls = json["host_stalls"].clone();
    assert_eq!(stalls["source"], source, "{stalls}");
    assert!(
        stalls["longest_ns"].as_u64().unwrap() >= 50_000_000,
        "{stalls}"
    );
    assert!(stalls["over_1ms"].as_u64().unwrap() >= 1, "{stalls}");
    let in_buckets: u64 = stalls["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert_eq!(
        in_buckets,
        stalls["over_10us"].as_u64().unwrap(),
        "{stalls}"
    );
    stalls
}

#[test]
fn a_generator_stopped_for_100ms_records_the_stall_and_a_gate_on_that_tail_is_inconclusive() {
    let _turn = common::engines();
    let Some((_lab, ns, addr)) = common::server_namespace() else {
        return;
    };
    let target = format!("{addr}:7777");
    let echo = common::echo_in(&ns, &target, &["--poll", "block"]);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("gen.json");
    let mut cmd = common::in_ns(&ns);
    cmd.args(["gen", "--target", &target, "--no-check", "--poll", "block"])
        .args([
            "--rate",
            "1k",
            "--duration",
            "3s",
            "--assert",
            "max<=5ms",
            "--json",
        ])
        .arg(&json)
        .stdout(std::process::Stdio::piped());
    let gen = common::started(cmd, "latlab gen:");
    // Probes going both ways: gen's loop is running.
    common::wait_for("gen's probes", || udp_in(&ns) >= 200);
    stop_for_100ms(gen.id());
    let (status, stdout, stderr) = gen.wait_output();
    // Inconclusive (4), not failed (3): the probes due while it was stopped left 100 ms late,
    // and the host (here, the signal) stalled gen's loop as long.
    assert_eq!(status.code(), Some(4), "{stdout}\n{stderr}");
    let summary = common::read_json(&json);
    has_the_stall(&summary, "loop");
    let verdict = &summary["assertions"][0];
    assert_eq!(verdict["verdict"], "inconclusive", "{verdict}");
    assert!(verdict["estimate"].as_f64().unwrap() > 5e6, "{verdict}");
    let message = verdict["message"].as_str().unwrap();
    assert!(
        message.contains("the host stalled as long as this tail"),
        "{message}"
    );
    let line = stdout
        .lines()
        .find(|l| l.starts_with("host stalls: "))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("longest "), "{line}");
    echo.signal("TERM");
    echo.wait();
}

#[test]
fn a_reflector_stopped_for_100ms_records_the_stall_spinning_or_blocking() {
    let _turn = common::engines();
    let Some((_lab, ns, addr)) = common::server_namespace() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (poll, source) in [("busy", "loop"), ("block", "sampler")] {
        let json = dir.path().join(format!("echo-{poll}.json"));
        let target = format!("{addr}:7777");
        let json_arg = json.display().to_string();
        let echo = common::echo_in(&ns, &target, &["--poll", poll, "--json", &json_arg]);
        // It answers: its loop (and, blocking, its sampler) is running.
        common::gen_in(&ns, &target, &["--rate", "1k", "--duration", "200ms"]);
        stop_for_100ms(echo.id());
        echo.signal("TERM");
        let (status, stderr) = echo.wait();
        assert_eq!(status.code(), Some(143), "{stderr}");
        let stalls = has_the_stall(&common::read_json(&json), source);
        assert!(stalls["observed_s"].as_f64().unwrap() > 0.1, "{stalls}");
    }
}

#[test]
fn a_game_server_stopped_for_100ms_records_the_stall_spinning_or_blocking() {
    let _turn = common::engines();
    let Some((_lab, ns, addr)) = common::server_namespace() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for (poll, source) in [("busy", "loop"), ("block", "sampler")] {
        let json = dir.path().join(format!("serve-{poll}.json"));
        let listen = format!("{addr}:7000");
        let mut cmd = common::in_ns(&ns);
        cmd.args(["serve", "--listen", &listen, "--poll", poll, "--json"])
            .arg(&json)
            .stdout(std::process::Stdio::piped());
        let serve = common::started(cmd, "latlab serve:");
        // A datagram the server reads (and drops, counted) once its loop runs.
        let before = udp_in(&ns);
        common::succeeds(Command::new("ip").args([
            "netns",
            "exec",
            &ns,
            "bash",
            "-c",
            &format!("printf x > /dev/udp/{addr}/7000"),
        ]));
        common::wait_for("the server's loop to read a datagram", || {
            udp_in(&ns) > before && common::rx_queue(&ns, 7000) == Some(0)
        });
        stop_for_100ms(serve.id());
        serve.signal("TERM");
        let (status, stdout, stderr) = serve.wait_output();
        assert_eq!(status.code(), Some(143), "{stderr}");
        let report = common::read_json(&json);
        let stalls = has_the_stall(&report, source);
        assert!(stalls["observed_s"].as_f64().unwrap() > 0.1, "{stalls}");
        assert_eq!(report["received"], 1, "{report}");
        assert_eq!(report["kernel_drops"], 0, "{report}");
        assert!(
            stdout.lines().any(|l| l.starts_with("host stalls: ")),
            "{stdout}"
        );
    }
}
