//! `latlab emu --api`: the emulator changed and watched over HTTP while `latlab gen` measures
//! through it, between the namespaces of a `client — emu — server` lab (root; must run under
//! CI=true).

mod common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::json;
use latlab_lab::topology::ClientEmuServer;

const API: &str = "127.0.0.1:9100";

#[test]
fn the_api_refuses_an_address_beyond_loopback_and_the_pipeline_as_pcap_does() {
    let base = ["emu", "--iface-a", "a0", "--iface-b", "b0"];
    common::one_line_error(
        &[&base[..], &["--api", "0.0.0.0:9100"]].concat(),
        "--api-public",
    );
    common::one_line_error(
        &[&base[..], &["--api", API, "--mode", "pipeline"]].concat(),
        "--mode pipeline",
    );
    common::one_line_error(&[&base[..], &["--api", "nowhere"]].concat(), "--api");
    common::one_line_error(
        &[&base[..], &["--pcap", "x.pcapng", "--mode", "pipeline"]].concat(),
        "--pcap does not work with --mode pipeline",
    );
    common::one_line_error(
        &[&base[..], &["--pcap", "/nonexistent/x.pcapng"]].concat(),
        "/nonexistent",
    );
    let out = assert_cmd::Command::new(assert_cmd::cargo::cargo_bin("latlab"))
        .args([&base[..], &["--api", "0.0.0.0:9100"]].concat())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_put_changes_the_delay_mid_run_over_af_packet() {
    api_changes_a_running_bridge(&["--io", "packet"]);
}

#[test]
fn a_put_changes_the_delay_mid_run_over_af_xdp() {
    api_changes_a_running_bridge(&["--io", "xdp", "--xdp-frames", "512"]);
}

#[test]
fn a_queue_discipline_is_taken_from_the_flags_and_shown_and_changed_over_the_api() {
    let base = ["emu", "--iface-a", "a0", "--iface-b", "b0"];
    common::one_line_error(
        &[&base[..], &["--aqm", "codel"]].concat(),
        "--aqm: needs a --rate",
    );
    common::one_line_error(
        &[
            &base[..],
            &["--rate", "10mbit", "--aqm", "fq_codel", "--quantum", "8"],
        ]
        .concat(),
        "--quantum: 8 bytes is outside 64 bytes..=65536 bytes",
    );
    common::one_line_error(&[&base[..], &["--aqm", "red"]].concat(), "--aqm");
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let mut cmd = common::in_ns(lab.emu.name());
    cmd.args(["emu", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(["--aqm", "codel", "--rate", "10mbit", "--ecn", "--api", API])
        .stdout(Stdio::piped());
    // Runs until stopped below; the API answers once its line is out.
    let emu = common::started(cmd, "API on");
    let ns = lab.emu.name().to_string();
    let (status, body) = request(&ns, "GET", "/conditions", "");
    assert_eq!(status, 200, "{body}");
    let conditions = json(&body);
    for direction in ["a_to_b", "b_to_a"] {
        let d = &conditions[direction];
        assert_eq!(d["spec"], "rate=10mbit aqm=codel ecn=on", "{conditions}");
        assert_eq!(d["aqm"]["discipline"], "codel");
        assert_eq!(d["aqm"]["target_ns"], 5_000_000, "CoDel's default");
        assert_eq!(d["aqm"]["interval_ns"], 100_000_000);
        assert_eq!(d["aqm"]["ecn"], true);
    }
    // Out of range: 400, naming the key; a discipline changed while it runs.
    let (status, body) = request(&ns, "PUT", "/conditions/a-to-b", "aqm=fq_codel flows=0");
    assert_eq!(status, 400, "{body}");
    assert!(
        body.contains("body: flows: ") && !body.contains("--"),
        "{body}"
    );
    let (status, body) = request(&ns, "PUT", "/conditions/a-to-b", "aqm=pie max_burst=50ms");
    assert_eq!(status, 200, "{body}");
    let conditions = json(&request(&ns, "GET", "/conditions", "").1);
    let a = &conditions["a_to_b"];
    assert_eq!(
        a["spec"], "rate=10mbit aqm=pie max-burst=50ms ecn=on",
        "{conditions}"
    );
    assert_eq!(a["aqm"]["target_ns"], 15_000_000, "PIE's default");
    assert_eq!(conditions["b_to_a"]["aqm"]["discipline"], "codel");
    let (status, metrics) = request(&ns, "GET", "/metrics", "");
    assert_eq!(status, 200);
    for name in [
        "latlab_emu_sojourn_seconds_count{direction=\"a_to_b\"}",
        "latlab_emu_aqm_marked_frames_total{direction=\"b_to_a\"}",
        "latlab_emu_dropped_frames_total{direction=\"a_to_b\",cause=\"aqm\"}",
    ] {
        assert!(metrics.contains(name), "{name} missing:\n{metrics}");
    }
    // The exit summary has each direction's discipline.
    emu.signal("TERM");
    let (status, summary, stderr) = emu.wait_output();
    assert_eq!(status.code(), Some(143), "{stderr}");
    let aqm = "  aqm: dropped 0, overflow 0, marked 0";
    assert_eq!(
        summary.lines().filter(|l| l.starts_with(aqm)).count(),
        2,
        "{summary}"
    );
}

/// One HTTP/1.1 request to the API inside namespace `ns`: the status and the body.
fn request(ns: &str, method: &str, path: &str, body: &str) -> (u16, String) {
    common::api_request(ns, API, method, path, body)
}

/// `latlab gen` from the client for `ms` at 1 kpps; its JSON report.
fn gen(lab: &ClientEmuServer, dir: &Path, name: &str, ms: u64) -> serde_json::Value {
    let path = dir.join(name);
    let out = common::in_ns(lab.client.name())
        .args(["gen", "--target", &format!("{}:7777", lab.server_addr)])
        .args([
            "--rate",
            "1k",
            "--duration",
            &format!("{ms}ms"),
            "--poll",
            "block",
        ])
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

/// The samples of a metrics exposition whose labels are exactly `labels`, by metric name.
fn samples(text: &str, labels: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (name, rest) = series.split_once('{')?;
            (rest.strip_suffix('}')? == labels).then(|| (name.to_string(), value.parse().unwrap()))
        })
        .collect()
}

/// The fastest round trip of a run, ms: the delay the bridge applied shows in it however
/// loaded the machine (one unhurried probe of a thousand is enough), unlike the median.
fn fastest_ms(run: &serde_json::Value) -> f64 {
    run["latency_ns"]["min"].as_f64().unwrap() / 1e6
}

fn api_changes_a_running_bridge(io: &[&str]) {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientEmuServer::build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let emu_json = dir.path().join("emu.json");
    let pcap = dir.path().join("emu.pcapng");
    let mut cmd = common::in_ns(lab.emu.name());
    cmd.args(["emu", "--iface-a", "emu-a", "--iface-b", "emu-b"])
        .args(["--delay", "1ms", "--api", API])
        .arg("--pcap")
        .arg(&pcap)
        .args(io)
        .arg("--json")
        .arg(&emu_json)
        .stdout(Stdio::null());
    let emu = common::started(cmd, "API on");
    let target = format!("{}:7777", lab.server_addr);
    let mut echo = common::in_ns(lab.server.name());
    echo.args(["echo", "--listen", &target, "--poll", "block"])
        .stdout(Stdio::null());
    let echo = common::started(echo, "latlab echo:");
    let ns = lab.emu.name().to_string();
    // The probes that came back, each of which crossed the bridge both ways.
    let mut came_back = 0;
    let mut count = |run: &serde_json::Value| {
        came_back += run["received"].as_u64().unwrap() + run["warmup"]["received"].as_u64().unwrap()
    };

    let (status, body) = request(&ns, "GET", "/conditions", "");
    assert_eq!(status, 200, "{body}");
    let before = json(&body);
    assert_eq!(before["a_to_b"]["spec"], "delay=1ms", "{before}");
    assert_eq!(before["b_to_a"]["delay_ns"], 1_000_000, "{before}");
    // A bad body: 400, one line naming the key, nothing changed.
    let (status, body) = request(&ns, "PUT", "/conditions/a-to-b", "delay=5ms loss=lots");
    assert_eq!((status, body.trim().lines().count()), (400, 1), "{body}");
    assert!(body.contains("body: loss: "), "{body}");
    assert!(!body.contains("--"), "the body's key, not a flag: {body}");
    assert_eq!(json(&request(&ns, "GET", "/conditions", "").1), before);

    // The fastest round trip tells the link's delay: at least twice the delay, and, however
    // slow the machine, well short of the next setting's.
    let slow = gen(&lab, dir.path(), "before.json", 1000);
    count(&slow);
    assert!(
        (2.0..10.0).contains(&fastest_ms(&slow)),
        "fastest round trip {} ms at 1 ms each way",
        fastest_ms(&slow)
    );

    // The change lands in the middle of a run: no probe lost or reordered across it. A flood
    // of requests on the API meanwhile, for as long as the run lasts, does not disturb the
    // bridge.
    let running = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let flooding = std::sync::Arc::clone(&running);
    let (across, flood) = std::thread::scope(|s| {
        let run = s.spawn(|| {
            let run = gen(&lab, dir.path(), "across.json", 1500);
            running.store(false, std::sync::atomic::Ordering::Relaxed);
            run
        });
        let flood = s.spawn(|| {
            latlab_io::netns::run_in(&ns, move || {
                let mut answered = 0u32;
                while flooding.load(std::sync::atomic::Ordering::Relaxed) && answered < 20_000 {
                    let path = ["/metrics", "/conditions"][answered as usize % 2];
                    let mut s = TcpStream::connect(API).unwrap();
                    write!(
                        s,
                        "GET {path} HTTP/1.1\r\nHost: emu\r\nConnection: close\r\n\r\n"
                    )
                    .unwrap();
                    let mut answer = Vec::new();
                    s.read_to_end(&mut answer).unwrap();
                    assert!(answer.starts_with(b"HTTP/1.1 200"));
                    answered += 1;
                }
                answered
            })
            .unwrap()
        });
        std::thread::sleep(Duration::from_millis(600));
        for path in ["/conditions/a-to-b", "/conditions/b-to-a"] {
            let (status, body) = request(&ns, "PUT", path, "delay=5ms");
            assert_eq!(status, 200, "{body}");
            assert_eq!(json(&body)["spec"], "delay=5ms");
        }
        (run.join().unwrap(), flood.join().unwrap())
    });
    assert!(flood > 0, "no request answered during the run");
    count(&across);
    assert_eq!(across["reordered"], 0, "{across}");

    let fast = gen(&lab, dir.path(), "after.json", 1000);
    count(&fast);
    assert!(
        (10.0..40.0).contains(&fastest_ms(&fast)),
        "fastest round trip {} ms at 5 ms each way",
        fastest_ms(&fast)
    );

    // Watched: the metrics add up, and to the report at exit.
    std::thread::sleep(Duration::from_millis(200));
    let (status, metrics) = request(&ns, "GET", "/metrics", "");
    assert_eq!(status, 200);
    let mut scraped = BTreeMap::new();
    for d in ["a_to_b", "b_to_a"] {
        let m = samples(&metrics, &format!("direction=\"{d}\""));
        let dropped: f64 = metrics
            .lines()
            .filter(|l| {
                l.starts_with(&format!(
                    "latlab_emu_dropped_frames_total{{direction=\"{d}\""
                ))
            })
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
            .sum();
        assert_eq!(
            m["latlab_emu_arrived_frames_total"] + m["latlab_emu_duplicated_frames_total"],
            m["latlab_emu_forwarded_frames_total"] + dropped + m["latlab_emu_queue_frames"],
            "{metrics}"
        );
        assert_eq!(m["latlab_emu_config_changes_total"], 1.0);
        assert_eq!(
            m["latlab_emu_release_error_seconds_count"],
            m["latlab_emu_forwarded_frames_total"]
        );
        assert!(
            m["latlab_emu_forwarded_frames_total"] >= came_back as f64,
            "{came_back} probes came back: {metrics}"
        );
        scraped.insert(d, m);
    }
    // Both run until stopped: SIGTERM writes the emulator's report and exits 143.
    emu.signal("TERM");
    echo.signal("TERM");
    let (status, stderr) = emu.wait();
    assert_eq!(status.code(), Some(143), "{stderr}");
    let (status, echo_stderr) = echo.wait();
    assert_eq!(status.code(), Some(143), "{echo_stderr}");
    let report = common::read_json(&emu_json);
    for d in ["a_to_b", "b_to_a"] {
        let m = &scraped[d];
        let r = &report[d];
        // Only the odd frame of the namespaces' own (neighbour discovery) may pass after the
        // scrape.
        let arrived = r["arrived"].as_f64().unwrap();
        let sent = r["sent"].as_f64().unwrap();
        assert!(
            (0.0..=4.0).contains(&(arrived - m["latlab_emu_arrived_frames_total"])),
            "{r}"
        );
        assert!(
            (0.0..=4.0).contains(&(sent - m["latlab_emu_forwarded_frames_total"])),
            "{r}"
        );
        assert!(r["bytes"]["sent"].as_f64().unwrap() >= m["latlab_emu_forwarded_bytes_total"]);
    }
    // No probe lost across the change; where one went, if it did, the emulator's causes and
    // the run's own counters say.
    assert_eq!(
        across["lost"], 0,
        "{across}\nemulator: a_to_b {} b_to_a {}",
        report["a_to_b"]["lost_by_cause"], report["b_to_a"]["lost_by_cause"]
    );
    let changes = report["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 2, "{report}");
    for (change, d) in changes.iter().zip(["a_to_b", "b_to_a"]) {
        assert_eq!(change["direction"], d);
        assert_eq!(change["spec"], "delay=5ms");
        let at = change["at_s"].as_f64().unwrap();
        assert!(at >= 1.0, "{change}");
    }
    assert_eq!(stderr.matches("set to delay=5ms").count(), 2, "{stderr}");
    check_capture(&pcap, &report, came_back);
}

/// The capture holds every frame sent that its ring had room for, on the interface it left
/// on, each stamped with its departure and carrying its arrival and intended departure.
fn check_capture(path: &Path, report: &serde_json::Value, came_back: u64) {
    use pcap_file::pcapng::{Block, PcapNgReader};
    let mut reader = PcapNgReader::new(std::fs::File::open(path).unwrap()).unwrap();
    let mut interfaces = 0;
    let mut frames = [0u64; 2];
    while let Some(block) = reader.next_block() {
        match block.unwrap() {
            Block::InterfaceDescription(_) => interfaces += 1,
            Block::EnhancedPacket(p) => {
                frames[p.interface_id as usize] += 1;
                let comment = p
                    .options
                    .iter()
                    .find_map(|o| match o {
                        pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption::Comment(c) => {
                            Some(c.to_string())
                        }
                        _ => None,
                    })
                    .unwrap();
                let times: Vec<u64> = comment
                    .split(' ')
                    .map(|kv| kv.split_once('=').unwrap().1.parse().unwrap())
                    .collect();
                let (arrival, intended) = (times[0], times[1]);
                let departure = p.timestamp.as_nanos() as u64;
                assert!(intended >= arrival + 1_000_000, "{comment}");
                assert!(departure >= intended, "{comment}, departure {departure}");
                assert!(departure - arrival < 1_000_000_000, "{comment}");
            }
            _ => {}
        }
    }
    assert_eq!(interfaces, 2);
    // Interface 0 is A: frames that travelled B to A.
    let sent = |d: &str| report[d]["sent"].as_u64().unwrap();
    let dropped = report["pcap_dropped"].as_u64().unwrap();
    assert_eq!(
        frames[0] + frames[1] + dropped,
        sent("a_to_b") + sent("b_to_a")
    );
    assert!(
        frames[1] + dropped >= came_back && frames[0] + dropped >= came_back,
        "{frames:?}, {dropped} not captured, {came_back} probes came back"
    );
}
