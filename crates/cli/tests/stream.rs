//! `latlab stream` from the command line: flags, and a receiver and a sender as two processes
//! on loopback.

mod common;

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};

use assert_cmd::cargo::cargo_bin;

fn fails(args: &[&str], code: i32, needle: &str) {
    let out = assert_cmd::Command::new(cargo_bin("latlab"))
        .args(args)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{args:?}: {stderr}");
    assert!(
        stderr.contains(needle),
        "{args:?}: {stderr:?} lacks {needle:?}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn bad_flags_end_with_one_line_naming_the_flag() {
    let send = [
        "stream",
        "send",
        "--target",
        "127.0.0.1:9",
        "--duration",
        "1s",
    ];
    let with = |extra: &[&'static str]| [&send[..], extra].concat();
    fails(&with(&["--transport", "sctp"]), 2, "--transport");
    // The reason is what this kernel answers to an SCTP socket (the lab's own tests hold it
    // against a probe of their own).
    let sctp = latlab_stream::transport::sctp_refusal();
    fails(&with(&["--transport", "sctp"]), 2, &sctp);
    fails(&with(&["--transport", "udt"]), 2, "no maintained UDT crate");
    fails(&with(&["--transport", "tcp:cc=vegas"]), 2, "--transport");
    fails(&with(&["--transport", "kcp:mode=turbo"]), 2, "--transport");
    fails(&with(&["--transport", "udp", "--size", "10"]), 2, "--size");
    fails(
        &with(&["--transport", "udp", "--interval", "1us"]),
        2,
        "--interval",
    );
    fails(
        &with(&["--transport", "udp", "--grace", "2m"]),
        2,
        "--grace",
    );
    fails(
        &[
            "stream",
            "send",
            "--target",
            "127.0.0.1:9",
            "--transport",
            "udp",
        ],
        2,
        "--duration",
    );
    fails(
        &[
            "stream",
            "recv",
            "--listen",
            "127.0.0.1:0",
            "--transport",
            "sctp",
        ],
        2,
        "--transport",
    );
    fails(
        &[
            "stream",
            "recv",
            "--listen",
            "127.0.0.1:0",
            "--transport",
            "udp",
            "--runs",
            "0",
        ],
        2,
        "--runs",
    );
    // Values that only fail together end with 1, as gen's do.
    fails(
        &with(&["--transport", "udp", "--interval", "2s"]),
        1,
        "--duration",
    );
    fails(
        &[
            "stream",
            "send",
            "--target",
            "127.0.0.1:9",
            "--transport",
            "tcp:thin,rto_min=250ms",
            "--duration",
            "1s",
        ],
        2,
        "rto_min=250ms: out of range: TCP_RTO_MIN_US takes more than one kernel tick",
    );
}

/// A `latlab stream recv` child process; killed (by its own id) on drop if still running.
struct RecvProcess {
    child: Child,
    addr: SocketAddr,
    /// Its stderr, kept open: it logs every run there.
    _stderr: BufReader<std::process::ChildStderr>,
}

impl RecvProcess {
    fn start(args: &[&str]) -> RecvProcess {
        let mut child = Command::new(cargo_bin("latlab"))
            .args(["stream", "recv", "--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        stderr.read_line(&mut line).unwrap();
        let addr = line
            .split_whitespace()
            .skip_while(|w| *w != "on")
            .nth(1)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(|| panic!("no address in {line:?}"));
        RecvProcess {
            child,
            addr,
            _stderr: stderr,
        }
    }
}

impl Drop for RecvProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn a_sender_and_a_receiver_on_loopback_write_their_results() {
    let dir = tempfile::tempdir().unwrap();
    let recv_json = dir.path().join("recv.json");
    let mut recv = RecvProcess::start(&[
        "--transport",
        "enet",
        "--runs",
        "1",
        "--json",
        recv_json.to_str().unwrap(),
    ]);
    let target = recv.addr.to_string();
    // A sender of another transport is refused, and the receiver goes on.
    fails(
        &[
            "stream",
            "send",
            "--target",
            &target,
            "--transport",
            "kcp",
            "--duration",
            "1s",
        ],
        1,
        "refused the run: this receiver runs --transport enet, not kcp:mode=fast",
    );
    let json = dir.path().join("send.json");
    let hlog = dir.path().join("send.hlog");
    let out = assert_cmd::Command::new(cargo_bin("latlab"))
        .args(["stream", "send", "--target", &target, "--transport", "enet"])
        .args(["--size", "100", "--interval", "2ms", "--duration", "600ms"])
        .args([
            "--json",
            json.to_str().unwrap(),
            "--hlog",
            hlog.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("wire vs plain UDP"), "{stdout}");
    let s = common::read_json(&json);
    assert_eq!(s["transport"], "enet");
    assert_eq!(s["sent"], 300);
    assert_eq!(s["delivered"], 300);
    assert_eq!(s["lost"], 0);
    assert_eq!(s["failure"], serde_json::Value::Null);
    assert_eq!(s["latency_ns"]["count"], 300);
    assert!(s["wire"]["forward"]["packets"].as_u64().unwrap() >= 300);
    assert!(s["wire"]["reverse"]["packets"].as_u64().unwrap() > 0);
    assert!(!s["ccdf"].as_array().unwrap().is_empty());
    let intervals = latlab_stats::hlog::read_hlog(std::fs::File::open(&hlog).unwrap()).unwrap();
    assert_eq!(intervals.len(), 1);
    assert_eq!(intervals[0].histogram.len(), 300);
    // One run served (the refused one is not a run): the receiver exits by itself.
    let status = recv.child.wait().unwrap();
    assert!(status.success());
    let r = common::read_json(&recv_json);
    assert_eq!(r["runs"].as_array().unwrap().len(), 1, "{r}");
    assert_eq!(r["bad_connections"], 1, "{r}");
}

#[test]
fn ctrl_c_ends_a_send_early_with_what_it_measured_and_exit_130() {
    let dir = tempfile::tempdir().unwrap();
    let recv = RecvProcess::start(&["--transport", "tcp", "--runs", "1"]);
    let json = dir.path().join("send.json");
    let send = Command::new(cargo_bin("latlab"))
        .args(["stream", "send", "--target", &recv.addr.to_string()])
        .args([
            "--transport",
            "tcp",
            "--interval",
            "5ms",
            "--duration",
            "30s",
        ])
        .args(["--json", json.to_str().unwrap()])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The sender prints nothing as it starts: 3 s is many times what a loaded machine takes to
    // connect and send its first message (5 ms apart).
    std::thread::sleep(std::time::Duration::from_secs(3));
    let sent = Command::new("kill")
        .args(["-s", "INT", &send.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let out = send.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(stderr.contains("stopped early by Ctrl-C"), "{stderr}");
    let s = common::read_json(&json);
    assert_eq!(s["stopped_early"], true);
    let sent = s["sent"].as_u64().unwrap();
    assert!((1..6000).contains(&sent), "{sent}");
    assert_eq!(s["delivered"].as_u64().unwrap(), sent, "{s}");
    assert_eq!(s["failure"], serde_json::Value::Null);
}

#[test]
fn a_sender_follows_a_traffic_model_with_its_sizes_and_gaps() {
    let dir = tempfile::tempdir().unwrap();
    let recv = RecvProcess::start(&["--transport", "udp", "--runs", "2"]);
    let target = recv.addr.to_string();
    let send = |model: &str, json: &std::path::Path| {
        let out = assert_cmd::Command::new(cargo_bin("latlab"))
            .args(["stream", "send", "--target", &target, "--transport", "udp"])
            .args(["--model", model, "--duration", "1s", "--json"])
            .arg(json)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        common::read_json(json)
    };
    // One size at one interval: 100 messages of 100 bytes in a second.
    let fixed = send("fixed:100@10ms", &dir.path().join("fixed.json"));
    assert_eq!(fixed["traffic"], "fixed:100@10ms", "{fixed}");
    assert_eq!(
        (fixed["sent"].as_u64(), fixed["size"].as_u64()),
        (Some(100), Some(100))
    );
    assert_eq!(fixed["interval_ns"], 10_000_000);
    // World of Warcraft twenty times as fast: about 64 messages a second, averaging 26 bytes,
    // many below the 24-byte header (sent at 24 and counted).
    let wow = send("wow*20", &dir.path().join("wow.json"));
    assert_eq!(wow["traffic"], "wow*20", "{wow}");
    let sent = wow["sent"].as_u64().unwrap();
    assert!((20..200).contains(&sent), "{wow}");
    assert_eq!(wow["delivered"], sent, "{wow}");
    assert!(wow["raised"].as_u64().unwrap() > 0, "{wow}");
    assert!(wow["size"].as_u64().unwrap() < 100, "{wow}");
    // Plain UDP puts exactly each message and its headers on the wire: its bytes are the
    // baseline to the byte, whatever the sizes.
    assert_eq!(wow["wire"]["bytes_ratio"], 1.0, "{wow}");
    fails(
        &[
            "stream",
            "send",
            "--target",
            &target,
            "--transport",
            "udp",
            "--model",
            "wow",
            "--size",
            "100",
            "--duration",
            "1s",
        ],
        2,
        "--size",
    );
}

/// A `gen --out` folder of `n` round trips of 1 µs to `n` µs, as `latlab compare` reads one.
fn gen_folder(dir: &std::path::Path, n: u64) {
    use latlab_lab::results::{
        ccdf_csv, histograms_bytes, summary_json, RunHistograms, RunSummary, HISTOGRAMS,
    };
    let mut latency = latlab_stats::LatencyHistogram::new();
    for i in 1..=n {
        latency.record(i * 1_000);
    }
    let summary = RunSummary::synthetic("1000 pps", &latency, n, 1_000.0);
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("summary.json"), summary_json(&summary)).unwrap();
    std::fs::write(dir.join("ccdf.csv"), ccdf_csv(&latency).unwrap()).unwrap();
    let histograms = RunHistograms {
        latency,
        ..RunHistograms::default()
    };
    let bytes = histograms_bytes(&histograms, 0, "test").unwrap();
    std::fs::write(dir.join(HISTOGRAMS), bytes).unwrap();
}

#[test]
fn two_stream_folders_are_compared_and_each_is_checked() {
    let dir = tempfile::tempdir().unwrap();
    let recv = RecvProcess::start(&["--transport", "udp", "--runs", "2"]);
    let target = recv.addr.to_string();
    let send = |out: &std::path::Path| {
        let run = assert_cmd::Command::new(cargo_bin("latlab"))
            .args(["stream", "send", "--target", &target, "--transport", "udp"])
            .args(["--interval", "2ms", "--duration", "1s", "--out"])
            .arg(out)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{}",
            String::from_utf8_lossy(&run.stderr)
        );
    };
    let (base, new) = (dir.path().join("base"), dir.path().join("new"));
    send(&base);
    send(&new);
    let names: Vec<String> = common::artefacts(&new).into_keys().collect();
    assert_eq!(names, ["ccdf.csv", "latency.hlog", "stream.json"]);
    assert_eq!(common::read_json(&new.join("stream.json"))["sent"], 500);
    // A folder that exists is refused before anything is sent.
    fails(
        &[
            "stream",
            "send",
            "--target",
            &target,
            "--transport",
            "udp",
            "--duration",
            "1s",
            "--out",
            new.to_str().unwrap(),
        ],
        1,
        "exists already: pick another --out",
    );
    let plot = dir.path().join("both.svg");
    let compared = assert_cmd::Command::new(cargo_bin("latlab"))
        .arg("compare")
        .args([&base, &new])
        .arg("--plot")
        .arg(&plot)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&compared.stdout);
    assert!(
        compared.status.success(),
        "{}",
        String::from_utf8_lossy(&compared.stderr)
    );
    assert!(stdout.contains("NEW's p50 is "), "{stdout}");
    assert!(stdout.contains("NEW's p99 is "), "{stdout}");
    let svg = std::fs::read_to_string(&plot).unwrap();
    assert!(
        svg.contains("BASE: udp") && svg.contains("NEW: udp"),
        "{svg}"
    );
    // A gen folder against a stream folder: refused naming NEW.
    let gen = dir.path().join("gen");
    gen_folder(&gen, 1_000);
    fails(
        &["compare", gen.to_str().unwrap(), new.to_str().unwrap()],
        2,
        &format!(
            "{}: a stream folder, and BASE {} a gen folder: compare folders of one kind",
            new.display(),
            gen.display()
        ),
    );
    // `latlab check` reads a stream folder as `stream send --assert` decides it.
    let checked = assert_cmd::Command::new(cargo_bin("latlab"))
        .arg("check")
        .arg(&new)
        .args(["--assert", "loss<=50%", "--assert", "achieved>=100"])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert_eq!(checked.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains("PASS loss<=50%: loss 0.000% ["), "{stdout}");
    assert!(stdout.contains("PASS achieved>=100"), "{stdout}");
    fails(
        &[
            "check",
            new.to_str().unwrap(),
            "--assert",
            "forward.p99<=1ms",
        ],
        2,
        "a stream's latency is one-way already",
    );
}
