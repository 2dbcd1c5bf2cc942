//! `latlab emu` as a user runs it: between the namespaces of a `client — emu — server` lab,
//! with `latlab echo` and `latlab gen` on either side (root; must run under CI=true).

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;
use latlab_lab::topology::ClientEmuServer;

#[test]
fn bad_emulator_options_name_themselves() {
    let base = ["emu", "--iface-a", "lo", "--iface-b", "lo"];
    common::one_line_error(&[&base[..], &["--loss", "120%"]].concat(), "--loss");
    common::one_line_error(&[&base[..], &["--delay", "soon"]].concat(), "--delay");
    common::one_line_error(
        &[&base[..], &["--loss-model", "gemodel:2"]].concat(),
        "--loss-model",
    );
    common::one_line_error(&[&base[..], &["--rate", "fast"]].concat(), "--rate");
    common::one_line_error(&[&base[..], &["--a-to-b", "delay"]].concat(), "--a-to-b");
    common::one_line_error(&[&base[..], &["--b-to-a", "wobble=1"]].concat(), "wobble");
    for (rule, token) in [
        ("proto=udp dport=27015", "--flow \"proto=udp dport=27015\""),
        ("dport=abc / loss=1%", "--flow dport=abc"),
        ("wobble=1 / loss=1%", "--flow wobble=1"),
        ("proto=icmp port=7 /", "--flow port=7"),
        ("dir=sideways port=7 /", "--flow dir=sideways"),
        ("proto=udp / loss=120%", "--flow proto=udp: loss: 120%"),
        ("proto=udp / limit=0", "--flow proto=udp: --limit"),
    ] {
        common::one_line_error(&[&base[..], &["--flow", rule]].concat(), token);
    }
    common::one_line_error(
        &[&base[..], &["--config", "/nonexistent.toml"]].concat(),
        "--config",
    );
    common::one_line_error(
        &["emu", "--iface-a", "latlab-none0", "--iface-b", "lo"],
        "--iface-a",
    );
    common::one_line_error(
        &[&base[..], &["--io", "xdp", "--mode", "pipeline"]].concat(),
        "--mode pipeline",
    );
    common::one_line_error(&[&base[..], &["--io", "dpdk"]].concat(), "--io");
    common::one_line_error(
        &[&base[..], &["--io", "xdp", "--xdp-frames", "100"]].concat(),
        "--xdp-frames",
    );
}

#[test]
fn bad_values_in_files_and_specs_name_the_file_the_line_and_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let base = [
        "emu",
        "--iface-a",
        "latlab-none0",
        "--iface-b",
        "latlab-none1",
    ];
    let table = dir.path().join("jitter.txt");
    std::fs::write(&table, "0.5\n-0.5\nthree\n").unwrap();
    let table = table.to_str().unwrap();
    common::one_line_error(
        &[&base[..], &["--jitter", "1ms", "--dist-table", table]].concat(),
        &format!("--dist-table {table} line 3: value: cannot read \"three\""),
    );
    let config = dir.path().join("link.toml");
    std::fs::write(&config, "loss = \"1%\"\n\n[a_to_b]\ndelay = 5\n").unwrap();
    let config = config.to_str().unwrap();
    common::one_line_error(
        &[&base[..], &["--config", config]].concat(),
        &format!("--config {config} line 4: [a_to_b] delay: "),
    );
    std::fs::write(config, "delay = \"soon\"\n").unwrap();
    common::one_line_error(
        &[&base[..], &["--config", config]].concat(),
        &format!("--config {config} line 1: delay: "),
    );
    common::one_line_error(
        &[&base[..], &["--a-to-b", "delay=5"]].concat(),
        "--a-to-b: delay: ",
    );
}

/// The lab's emulator namespace running `latlab emu` between its two interfaces until stopped;
/// its first line on stderr (the started line) read.
fn emu_in(lab: &ClientEmuServer) -> (common::Reaped, String) {
    use std::io::BufRead as _;
    let child = common::in_ns(lab.emu.name())
        .args(["emu", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(["--poll", "block", "--mode", "run-to-completion"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut child = common::Reaped::new(child);
    let mut stderr = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
    (child, line)
}

/// Runs latlab in `ns` with `args`; it must fail with one line on stderr, which is returned.
fn one_line_failure_in(ns: &str, args: &[&str]) -> String {
    let out = common::in_ns(ns).args(args).output().unwrap();
    assert!(!out.status.success(), "{args:?} succeeded");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    stderr
}

#[test]
fn a_second_emu_on_the_same_interfaces_is_refused_naming_the_first_which_goes_on() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let (mut first, started) = emu_in(&lab);
    assert!(
        first.try_wait().unwrap().is_none(),
        "the first emu: {started}"
    );
    let second = [
        "emu",
        "--iface-a",
        "emu-b",
        "--iface-b",
        "emu-a",
        "--poll",
        "block",
    ];
    let refused = one_line_failure_in(lab.emu.name(), &second);
    assert!(
        refused.contains(&format!("already bridged by latlab emu pid {}", first.id())),
        "{refused}"
    );
    assert!(first.try_wait().unwrap().is_none(), "the first goes on");

    // Killed outright, the first leaves its claim file, with a dead pid: it does not block.
    let _ = first.kill();
    let _ = first.wait();
    let (mut third, started) = emu_in(&lab);
    assert!(
        third.try_wait().unwrap().is_none(),
        "after a dead one: {started}"
    );
    let refused = one_line_failure_in(lab.emu.name(), &second);
    assert!(
        refused.contains(&format!("pid {}", third.id())),
        "the live one is named: {refused}"
    );
    let stopped = Command::new("kill")
        .args(["-s", "TERM", &third.id().to_string()])
        .status()
        .unwrap();
    assert!(stopped.success());
    assert_eq!(third.wait().unwrap().code(), Some(143));
}

#[test]
fn loopback_and_links_that_are_not_ethernet_are_refused_naming_them() {
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let refused = one_line_failure_in(
        lab.emu.name(),
        &["emu", "--iface-a", "emu-a", "--iface-b", "lo"],
    );
    assert!(
        refused.contains("--iface-b lo: is a loopback interface, which cannot be bridged"),
        "{refused}"
    );
    // A TUN device carries IP packets, not Ethernet frames (link type 65534); it goes with
    // the lab's namespace.
    let made = Command::new("ip")
        .args([
            "-n",
            lab.emu.name(),
            "tuntap",
            "add",
            "dev",
            "latlabtun0",
            "mode",
            "tun",
        ])
        .status()
        .unwrap();
    assert!(made.success());
    let refused = one_line_failure_in(
        lab.emu.name(),
        &["emu", "--iface-a", "latlabtun0", "--iface-b", "emu-b"],
    );
    assert!(
        refused.contains("--iface-a latlabtun0: is not an Ethernet-like link (link type 65534)"),
        "{refused}"
    );
}

#[test]
fn emu_between_namespaces_adds_its_delay_and_reports_at_exit() {
    emu_between_namespaces(&["--rx-ring", "v2"], 2);
}

#[test]
fn emu_with_a_tpacket_v3_ring_still_keeps_a_2ms_delay() {
    // V3 hands frames over up to ~1.6 ms late, but departures count from the kernel's arrival
    // stamp, so a delay longer than that is still kept.
    emu_between_namespaces(&["--rx-ring", "v3"], 2);
}

#[test]
fn emu_over_af_xdp_keeps_a_1ms_delay() {
    // Every frame of both interfaces is taken by an XDP program before the kernel stack; the
    // client's ARP and the probes cross the bridge all the same.
    emu_between_namespaces(&["--io", "xdp", "--xdp-frames", "512"], 1);
}

/// Bridges client and server with `extra` options and a delay of `delay_ms` each way; checks
/// the round trip and the emulator's report.
fn emu_between_namespaces(extra: &[&str], delay_ms: u64) {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let delay = format!("{delay_ms}ms");
    let args = [&["--delay", &delay][..], extra].concat();
    let in_emu = common::in_ns(lab.emu.name());
    let (_, run, report) = probes_through(&lab, in_emu, &args, Duration::ZERO);
    holds_its_delay(&run, &report, delay_ms);
    for dir in ["a_to_b", "b_to_a"] {
        let d = &report[dir];
        assert!(
            d["link"]["delivered"].as_u64().unwrap() >= came_back(&run),
            "{d}"
        );
        assert_eq!(d["dropped_by_emulator"]["tx_ring_full"], 0);
    }
}

/// The probes of `run` that came back, warm-up's too: each crossed the bridge both ways.
fn came_back(run: &serde_json::Value) -> u64 {
    let n = run["received"].as_u64().unwrap() + run["warmup"]["received"].as_u64().unwrap();
    assert!(n > 0, "no probe came back: {run}");
    n
}

/// The emulator kept a delay of `delay_ms` each way, checked from what it decided and from the
/// probes' stamps, not from how fast a loaded guest ran: no frame left before it was due (the
/// emulator's count), so no round trip took less than twice the delay; and the fastest of
/// about a thousand round trips took less than three times it, so the delay was not applied
/// twice (one unhurried probe of the thousand is enough, however loaded the machine).
fn holds_its_delay(run: &serde_json::Value, report: &serde_json::Value, delay_ms: u64) {
    for dir in ["a_to_b", "b_to_a"] {
        let d = &report[dir];
        assert_eq!(d["released_early"], 0, "{d}");
        assert!(
            d["release_error_ns"]["count"].as_u64().unwrap() >= came_back(run),
            "{d}"
        );
    }
    let rtt = 2 * delay_ms * 1_000_000;
    let latency = &run["latency_ns"];
    let min = latency["min"].as_u64().unwrap();
    assert!(
        (rtt..rtt + delay_ms * 1_000_000).contains(&min),
        "fastest round trip {min} ns, {rtt} ns configured: {latency}"
    );
}

/// Runs `latlab emu ARGS` between the lab's namespaces, started by `launcher` (a command that
/// runs latlab in the emulator's namespace) beside an echo in the server, and sends 1 s of
/// probes at 1 kpps from the client; both run until the probes are done and then `idle`
/// longer, and are stopped by SIGTERM (exit 143). Returns the emulator's standard error, the
/// probes' run JSON and the emulator's `--json`.
fn probes_through(
    lab: &ClientEmuServer,
    mut launcher: Command,
    args: &[&str],
    idle: Duration,
) -> (String, serde_json::Value, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let emu_json = dir.path().join("emu.json");
    let run_json = dir.path().join("run.json");
    launcher
        .args(["emu", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(args)
        .arg("--json")
        .arg(&emu_json)
        .stdout(Stdio::null());
    let emu = common::started(launcher, "bridging");
    let target = format!("{}:7777", lab.server_addr);
    let echo = echo_started(lab, &target);
    let json = run_json.to_str().unwrap();
    let probes = [
        "--rate",
        "1k",
        "--duration",
        "1s",
        "--poll",
        "block",
        "--json",
        json,
    ];
    common::gen_in(lab.client.name(), &target, &probes);
    std::thread::sleep(idle);
    stop(echo);
    let stderr = stop(emu);
    let run = common::read_json(&run_json);
    (stderr, run, common::read_json(&emu_json))
}

/// `latlab echo` on `target` in the lab's server, once it listens; it runs until [`stop`].
fn echo_started(lab: &ClientEmuServer, target: &str) -> common::Started {
    let mut echo = common::in_ns(lab.server.name());
    echo.args(["echo", "--listen", target, "--poll", "block"])
        .stdout(Stdio::null());
    common::started(echo, "latlab echo:")
}

/// Stops a server with SIGTERM, which writes its report (exit 143); its standard error.
fn stop(server: common::Started) -> String {
    server.signal("TERM");
    let (status, stderr) = server.wait();
    assert_eq!(status.code(), Some(143), "{stderr}");
    stderr
}

/// On one CPU, `--poll auto` (the default) sleeps until a frame or a departure is due and
/// spins the last stretch: it says so, keeps its delay, reports the spin it learned, and uses
/// a fraction of the core a spinning loop would.
#[test]
fn emu_on_one_cpu_sleeps_until_due_and_keeps_its_delay() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let mut on_cpu_0 = Command::new("taskset");
    on_cpu_0
        .args(["-c", "0", "ip", "netns", "exec", lab.emu.name()])
        .arg(cargo_bin("latlab"));
    // Two seconds idle after the probes: most of the run has no frame to wait for.
    let idle = Duration::from_secs(2);
    let (stderr, run, report) = probes_through(&lab, on_cpu_0, &["--delay", "1ms"], idle);
    assert!(
        stderr.contains("one loop, sleeping until due, then spinning the last microseconds"),
        "{stderr}"
    );
    holds_its_delay(&run, &report, 1);
    let cpu = &report["cpu"];
    assert_eq!(cpu["threads"], 1, "{cpu}");
    let spin = cpu["spin_ns"]
        .as_u64()
        .expect("a blocking loop reports its spin");
    // The spin it reports is the one learned from its own sleeps: the latest wake-up of the
    // last 32 timed sleeps plus the margin, within the bounds (not the first guess, which
    // stays in the window until 32 sleeps were timed).
    let sleeps = &cpu["sleeps"];
    let timed = sleeps["timed"].as_u64().unwrap();
    let latest = sleeps["latest_late_ns"].as_u64().unwrap();
    assert!(timed >= latlab_engine::wait::WINDOW as u64, "{cpu}");
    assert_eq!(
        spin,
        latlab_engine::wait::SleepReport::spin_for(latest),
        "{cpu}"
    );
    // It slept: 2 kpps of frames for 1 s, then 2 s without, leave most of the run idle, and a loop that
    // sleeps until due is away sleeping for most of it (a spinning one never is). From the
    // loop's own account of its sleeps, not from the CPU time a loaded guest gave it.
    let slept = sleeps["slept_ns"].as_u64().unwrap();
    let elapsed = cpu["elapsed_ns"].as_u64().unwrap();
    assert!(slept > elapsed / 2 && slept <= elapsed, "{cpu}");
    // It sent every frame it passed on, timing its sends apart from its sleeps: some time in
    // them, never more than the run's time left over from sleeping.
    let sends = cpu["send_ns"].as_u64().unwrap();
    assert!(sends > 0 && sends <= elapsed - slept, "{cpu}");
}

/// Two reflectors on two ports behind `latlab emu --flow 'proto=udp dport=7777 / delay=5ms'`:
/// the round trip to port 7777 gets 5 ms (its requests match; the answers, from that port, do
/// not), the one to port 7778 nothing; the report counts the rule's frames apart. (The
/// pipeline with rules is tested in latlab-lab's `tests/emulator.rs`, unpinned: pinned to both
/// cores of a 2-core machine it starves gen and echo of time.)
#[test]
fn a_flow_rule_delays_one_port_and_not_the_other() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let emu_json = dir.path().join("emu.json");
    let emu_out = dir.path().join("emu.txt");
    let mut emu = common::in_ns(lab.emu.name());
    emu.args(["emu", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(["--flow", "proto=udp dport=7777 / delay=5ms"])
        .arg("--json")
        .arg(&emu_json)
        .stdout(std::fs::File::create(&emu_out).unwrap());
    let emu = common::started(emu, "bridging");
    let targets = [7777, 7778].map(|port| format!("{}:{port}", lab.server_addr));
    let echoes = targets.clone().map(|target| echo_started(&lab, &target));
    // The fastest round trip of a run to `target`, and how many of its probes came back.
    let fastest = |target: &str| {
        let json = dir.path().join("run.json");
        let args = [
            "--rate",
            "1k",
            "--duration",
            "700ms",
            "--poll",
            "block",
            "--json",
        ];
        let args = [&args[..], &[json.to_str().unwrap()]].concat();
        common::gen_in(lab.client.name(), target, &args);
        let run = common::read_json(&json);
        (run["latency_ns"]["min"].as_f64().unwrap(), came_back(&run))
    };
    let ((slow, slow_back), (fast, fast_back)) = (fastest(&targets[0]), fastest(&targets[1]));
    for echo in echoes {
        stop(echo);
    }
    stop(emu);
    // The fastest round trip of each port (see holds_its_delay): 5 ms and some, not twice
    // it; and under a millisecond where nothing was added.
    assert!(
        (5.0e6..7.5e6).contains(&slow),
        "port 7777: fastest round trip {slow} ns, 5 ms added"
    );
    assert!(
        fast < 1.0e6,
        "port 7778: fastest round trip {fast} ns, nothing added"
    );

    let report = common::read_json(&emu_json);
    let flows = |dir: &str| report[dir]["flows"].as_array().unwrap().clone();
    let (out_flows, back_flows) = (flows("a_to_b"), flows("b_to_a"));
    assert_eq!(out_flows[0]["match"], "proto=udp dport=7777");
    assert_eq!(out_flows[0]["spec"], "delay=5ms");
    assert!(
        out_flows[0]["forwarded"].as_u64().unwrap() >= slow_back,
        "{slow_back} came back: {out_flows:?}"
    );
    assert_eq!(out_flows[1]["match"], serde_json::Value::Null);
    assert!(
        out_flows[1]["forwarded"].as_u64().unwrap() >= fast_back,
        "port 7778's probes: {fast_back} came back: {out_flows:?}"
    );
    assert_eq!(
        back_flows[0]["arrived"], 0,
        "answers come from port 7777, not to it"
    );
    for dir in ["a_to_b", "b_to_a"] {
        let d = &report[dir];
        let sum: u64 = flows(dir)
            .iter()
            .map(|f| f["forwarded"].as_u64().unwrap())
            .sum();
        assert_eq!(sum, d["sent"].as_u64().unwrap(), "{dir}: the flows add up");
    }
    let summary = std::fs::read_to_string(&emu_out).unwrap();
    assert!(
        summary.contains("  flow proto=udp dport=7777 (delay=5ms): arrived "),
        "{summary}"
    );
}

#[test]
fn a_short_emulator_study_writes_its_report() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let run = assert_cmd::Command::new(cargo_bin("latlab"))
        .args([
            "study",
            "emulator",
            "--duration",
            "600ms",
            "--rates",
            "1k",
            "--delays",
            "1ms",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // Kernel forwarding, the emulator at delay 0 and at 1 ms, two loss models, and the
    // forwarding rate of the three paths (kernel, bridge over AF_PACKET, bridge over AF_XDP)
    // at seven frame sizes.
    assert_eq!(
        std::fs::read_dir(out.join("points")).unwrap().count(),
        5 + 21
    );
    let xdp = common::read_json(&out.join("points/rate-emu-xdp-64.json"));
    assert!(xdp["received"].as_u64().unwrap() > 0, "{xdp}");
    // The drops each bridge counts are frames really lost, never counted twice. The ring also
    // drops the odd frame of the namespaces' own (neighbour discovery, IPv6 router
    // solicitations) when it is full, which the source did not send: a few at most.
    for path in ["emu", "emu-xdp"] {
        let point = common::read_json(&out.join(format!("points/rate-{path}-64.json")));
        let lost = point["sent"].as_u64().unwrap() - point["received"].as_u64().unwrap();
        let counted = point["emulator"]["a_to_b"]["dropped_by_emulator"]["kernel_rx_ring"]
            .as_u64()
            .unwrap();
        assert!(
            counted <= lost + 4,
            "{path}: {counted} drops counted, {lost} lost"
        );
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    for section in [
        "Added latency at delay 0",
        "Accuracy",
        "Loss models",
        "emu-xdp forwarded [kpps]",
        "| 1000.00 µs | 1000 |",
    ] {
        assert!(report.contains(section), "{section} missing:\n{report}");
    }
    let point = common::read_json(&out.join("points/emu-d1000000ns-1000pps.json"));
    // 1 ms one way: no round trip under 1 ms, and the fastest under 2 ms (the delay taken
    // twice), however loaded the machine (see holds_its_delay).
    let min = point["run"]["latency_ns"]["min"].as_u64().unwrap();
    assert!(
        (1_000_000..1_900_000).contains(&min),
        "1 ms one way: fastest round trip {min} ns"
    );
    assert!(std::fs::read_to_string(out.join("accuracy.svg"))
        .unwrap()
        .starts_with("<svg"));
}

#[test]
fn report_draws_an_emulator_study_again_as_the_study_wrote_it() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    common::succeeds(
        std::process::Command::new(cargo_bin("latlab"))
            .args(["study", "emulator", "--duration", "600ms", "--rates", "1k"])
            .args(["--delays", "100us", "--rate-duration", "100ms", "--out"])
            .arg(&out),
    );
    let written = common::artefacts(&out);
    for f in ["study.json", "report.md", "accuracy.svg", "per-packet.svg"] {
        assert!(written.contains_key(f), "{f} missing: {:?}", written.keys());
    }
    assert_eq!(
        common::read_json(&out.join("study.json"))["kind"],
        "emulator"
    );
    common::report_redraws_as_written(&out);
}

#[test]
fn a_delay_on_one_direction_shows_in_that_one_way_delay_only() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    // emu-a faces the client: a→b is the way out, b→a the way back.
    let mut emu = common::in_ns(lab.emu.name());
    emu.args(["emu", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(["--a-to-b", "delay=2ms"])
        .stdout(Stdio::null());
    let emu = common::started(emu, "bridging");
    let target = format!("{}:7777", lab.server_addr);
    let echo = echo_started(&lab, &target);
    let run = |clock: &str, out: &std::path::Path| {
        let args = ["--rate", "1k", "--duration", "700ms", "--poll", "block"];
        let out = out.to_str().unwrap();
        let args = [&args[..], &["--clock", clock, "--out", out]].concat();
        common::gen_in(lab.client.name(), &target, &args)
    };
    let table = run("shared", &out);
    let separate = dir.path().join("separate");
    run("separate", &separate);
    stop(echo);
    stop(emu);

    let summary = common::read_json(&out.join("summary.json"));
    assert_eq!(summary["clock"], "shared", "{summary}");
    // The fastest of each (see holds_its_delay): the 2 ms on the way out only.
    let fastest = |key: &str| summary[key]["min"].as_f64().unwrap();
    let (forward, back, rtt) = (
        fastest("forward_ns"),
        fastest("return_ns"),
        fastest("latency_ns"),
    );
    assert!((2.0e6..3.0e6).contains(&forward), "out {forward} ns");
    assert!(back < 1.0e6, "back {back} ns");
    // A round trip is its two ways: the fastest one is no faster than the fastest of each.
    assert!(forward + back <= rtt * 1.01, "{forward} + {back} > {rtt}");
    for file in [
        "forward.hlog",
        "return.hlog",
        "forward_ccdf.csv",
        "return_ccdf.csv",
    ] {
        assert!(out.join(file).is_file(), "{file} missing");
    }
    assert!(table.contains("one way out"), "{table}");

    // With separate clocks there is no one-way figure at all.
    let summary = common::read_json(&separate.join("summary.json"));
    assert_eq!(summary["clock"], "separate");
    assert!(summary.get("forward_ns").is_none(), "{summary}");
    assert!(!separate.join("forward.hlog").exists());
}

#[test]
fn an_emulator_study_run_as_three_shards_writes_what_one_process_writes() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let study = |out: &std::path::Path, shard: &str| {
        std::process::Command::new(cargo_bin("latlab"))
            .args(["study", "emulator", "--duration", "300ms", "--rates", "1k"])
            .args(["--delays", "100us", "--rate-duration", "100ms"])
            .args(["--shard", shard, "--out"])
            .arg(out)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let finished = |child: std::process::Child| {
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let whole = dir.path().join("whole");
    finished(study(&whole, "1/1"));

    let sharded = dir.path().join("sharded");
    let first = finished(study(&sharded, "1/3"));
    assert!(first.contains("shards 2/3, 3/3"), "{first}");
    assert!(
        !sharded.join("report.md").exists(),
        "drawn before every shard was done"
    );
    // latlab report draws what is there, and says what is missing.
    let report = assert_cmd::Command::new(cargo_bin("latlab"))
        .arg("report")
        .arg(&sharded)
        .output()
        .unwrap();
    assert!(report.status.success());
    let said = String::from_utf8_lossy(&report.stdout);
    assert!(said.contains("missing: shards 2/3, 3/3"), "{said}");
    // The other two in parallel: whichever ends last draws the report, and one of them only
    // when both end at once.
    let (second, third) = (study(&sharded, "2/3"), study(&sharded, "3/3"));
    let said = finished(second) + &finished(third);
    assert_eq!(said.matches("report: ").count(), 1, "{said}");
    // The claim names the one that drew it: one of those two (the first found shards missing).
    let drawer = common::read_json(&sharded.join("shards/report.json"));
    assert!(
        [2, 3].contains(&drawer["index"].as_u64().unwrap()),
        "{drawer}"
    );

    let files = |out: &std::path::Path| -> Vec<String> {
        common::artefacts(out)
            .into_keys()
            .filter(|name| !name.starts_with("shards/"))
            .collect()
    };
    assert_eq!(files(&sharded), files(&whole));
    let points = |out: &std::path::Path| -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(out.join("points"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    };
    assert_eq!(points(&sharded), points(&whole));

    // A shard started with other options is refused, naming the difference.
    let other = assert_cmd::Command::new(cargo_bin("latlab"))
        .args(["study", "emulator", "--duration", "1s", "--rates", "1k"])
        .args(["--delays", "100us", "--rate-duration", "100ms"])
        .args(["--shard", "2/3", "--out"])
        .arg(&sharded)
        .output()
        .unwrap();
    assert_eq!(other.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&other.stderr).contains("--duration"));
}
