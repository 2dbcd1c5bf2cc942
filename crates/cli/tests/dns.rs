//! `latlab gen --protocol dns` against unbound (started by each test in a namespace of its
//! own, answering from local zones only), against a UDP server of the test's own that
//! answers wrongly in every way it can, and through `latlab run`'s emulated link.

mod common;

use std::net::{Ipv4Addr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::servers::unbound::Unbound;
use common::{engines, in_ns, namespaces_or_skip, read_json, Reaped};
use latlab_lab::topology::{ClientServer, Namespace};
use serde_json::Value;

const SERVER: &str = "198.18.0.2:53";

/// The namespace pair and unbound in its server side on 198.18.0.2:53.
fn lab() -> Option<(ClientServer, Unbound)> {
    if !namespaces_or_skip() {
        return None;
    }
    let pair = ClientServer::namespaces().unwrap();
    let ClientServer::Namespaces { server, .. } = &pair else {
        unreachable!("namespaces() builds namespaces")
    };
    let unbound = Unbound::start(server.name(), Ipv4Addr::new(198, 18, 0, 2), 53)?;
    Some((pair, unbound))
}

fn client(pair: &ClientServer) -> &str {
    match pair {
        ClientServer::Namespaces { client, .. } => client.name(),
        ClientServer::Loopback { .. } => unreachable!("the tests build namespaces"),
    }
}

/// `latlab gen --protocol dns` in `ns` towards `target` with `args`, its summary written to
/// `json`: the exit code, what it printed and the summary.
fn gen_dns(ns: Option<&str>, target: &str, args: &[&str], json: &Path) -> (i32, String, Value) {
    let mut cmd = match ns {
        Some(ns) => in_ns(ns),
        None => std::process::Command::new(assert_cmd::cargo::cargo_bin("latlab")),
    };
    let out = cmd
        .args([
            "gen",
            "--target",
            target,
            "--protocol",
            "dns",
            "--poll",
            "block",
        ])
        .args(args)
        .arg("--json")
        .arg(json)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let code = out.status.code().unwrap_or(-1);
    assert!(json.exists(), "no summary written (exit {code}):\n{text}");
    (code, text, read_json(json))
}

fn outcome(summary: &Value, name: &str) -> u64 {
    summary["protocol"]["outcomes"][name].as_u64().unwrap()
}

/// Every reply that came back, as counted: outcomes (warm-up included) and the rest.
fn answered_with_warmup(summary: &Value) -> u64 {
    summary["received"].as_u64().unwrap() + summary["warmup"]["received"].as_u64().unwrap()
}

fn sum_outcomes(summary: &Value) -> u64 {
    summary["protocol"]["outcomes"]
        .as_object()
        .unwrap()
        .values()
        .map(|v| v.as_u64().unwrap())
        .sum()
}

/// The requests sent and answered add up: answered + unanswered = sent, and every answer
/// (warm-up included) has an outcome.
fn adds_up(summary: &Value) {
    let p = &summary["protocol"];
    assert_eq!(
        p["answered"].as_u64().unwrap() + p["unanswered"].as_u64().unwrap(),
        summary["sent"].as_u64().unwrap(),
        "{summary:#}"
    );
    assert_eq!(
        sum_outcomes(summary),
        answered_with_warmup(summary),
        "{p:#}"
    );
}

#[test]
fn noerror_nxdomain_and_refused_are_counted_per_query_and_add_up() {
    let _turn = engines();
    let Some((pair, _unbound)) = lab() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let args = [
        "--query",
        "a.lab.test",
        "--query",
        "nope.lab.test/A",
        "--query",
        "x.refused.test",
        "--rate",
        "600",
        "--duration",
        "1s",
    ];
    let (code, text, summary) = gen_dns(Some(client(&pair)), SERVER, &args, &json);
    assert_eq!(code, 0, "{text}");
    adds_up(&summary);
    for name in ["NOERROR", "NXDOMAIN", "REFUSED"] {
        assert!(outcome(&summary, name) > 0, "no {name}: {text}");
    }
    // Each query went a third of the time; unbound answers them all, so whatever was lost
    // on the way, no answer is of another outcome.
    assert_eq!(
        outcome(&summary, "SERVFAIL") + outcome(&summary, "other"),
        0
    );
    assert_eq!(outcome(&summary, "truncated"), 0);
    let p = &summary["protocol"];
    for zero in ["wrong_id", "duplicate", "wrong_source", "late"] {
        assert_eq!(p[zero], 0, "{zero}: {p:#}");
    }
    assert!(text.contains("dns: "), "{text}");
    assert!(text.contains("NXDOMAIN "), "{text}");
}

#[test]
fn a_queries_file_with_edns_gets_its_answers() {
    let _turn = engines();
    let Some((pair, _unbound)) = lab() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("queries.txt");
    std::fs::write(
        &file,
        "; dnsperf's data file\na.lab.test A\n\n# the others\nb.lab.test AAAA\nt.lab.test TXT\nlab.test MX\n",
    )
    .unwrap();
    let json = dir.path().join("summary.json");
    let args = [
        "--queries",
        file.to_str().unwrap(),
        "--edns",
        "1232",
        "--rate",
        "400",
        "--duration",
        "1s",
    ];
    let (code, text, summary) = gen_dns(Some(client(&pair)), SERVER, &args, &json);
    assert_eq!(code, 0, "{text}");
    adds_up(&summary);
    assert!(outcome(&summary, "NOERROR") > 0, "{text}");
    assert_eq!(
        outcome(&summary, "NOERROR"),
        sum_outcomes(&summary),
        "every name of the file is in the zone: {text}"
    );
}

#[test]
fn unbound_stopped_mid_run_leaves_the_rest_unanswered_and_the_run_ends() {
    let _turn = engines();
    let Some((pair, mut unbound)) = lab() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let mut cmd = in_ns(client(&pair));
    cmd.args([
        "gen",
        "--target",
        SERVER,
        "--protocol",
        "dns",
        "--poll",
        "block",
    ])
    .args(["--query", "a.lab.test", "--rate", "500", "--duration", "2s"])
    .arg("--json")
    .arg(&json)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    let gen = Reaped::new(cmd.spawn().unwrap());
    // The run sends for 2 s (after its check that unbound answers): unbound goes well
    // before its end, whenever the run started.
    std::thread::sleep(Duration::from_millis(700));
    unbound.kill();
    let out = gen.into_inner().wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let summary = read_json(&json);
    adds_up(&summary);
    assert!(
        summary["protocol"]["unanswered"].as_u64().unwrap() > 0,
        "{summary:#}"
    );
    assert_eq!(summary["lost"], summary["protocol"]["unanswered"]);
}

#[test]
fn gates_decide_a_dns_runs_exit_code() {
    let _turn = engines();
    let Some((pair, _unbound)) = lab() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let base = ["--query", "a.lab.test", "--rate", "500", "--duration", "1s"];
    for (gate, want) in [("p99<=10s", 0), ("p99<=1ns", 3), ("loss<=100%", 0)] {
        let json = dir.path().join(format!("{want}.json"));
        let mut args = base.to_vec();
        args.extend(["--assert", gate]);
        let (code, text, summary) = gen_dns(Some(client(&pair)), SERVER, &args, &json);
        assert_eq!(code, want, "--assert {gate}: {text}");
        adds_up(&summary);
    }
}

#[test]
fn a_bad_query_or_queries_file_is_one_line_naming_it_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("q.txt");
    std::fs::write(&file, "a.lab.test A\n; fine\nb.lab.test BOGUS\n").unwrap();
    let f = file.to_str().unwrap();
    let target = [
        "gen",
        "--target",
        "127.0.0.1:9",
        "--rate",
        "10",
        "--protocol",
        "dns",
    ];
    let cases: [(&[&str], String); 5] = [
        (
            &["--queries", f],
            format!("--queries {f} line 3: \"b.lab.test BOGUS\": unknown type \"BOGUS\""),
        ),
        (
            &["--query", "a.lab.test/BOGUS"],
            "--query \"a.lab.test/BOGUS\": unknown type \"BOGUS\"".into(),
        ),
        (
            &["--query", "a..test"],
            "--query \"a..test\": bad name text".into(),
        ),
        (&[], "--query NAME[/TYPE] or --queries FILE".into()),
        (
            &["--query", "a.lab.test", "--edns", "100"],
            "--edns 100: below 512".into(),
        ),
    ];
    for (args, needle) in cases {
        let all: Vec<&str> = target.iter().chain(args.iter()).copied().collect();
        common::one_line_error(&all, &needle);
        let code = std::process::Command::new(assert_cmd::cargo::cargo_bin("latlab"))
            .args(&all)
            .output()
            .unwrap()
            .status
            .code();
        assert_eq!(code, Some(2), "{all:?}");
    }
}

/// A DNS server on loopback that answers the `k`th query it gets as `k % 8` says: garbage,
/// another ID, twice, 64 KB long, from another socket, with a compression loop, or right.
struct Liar {
    port: u16,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Liar {
    fn start() -> Liar {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        let other = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let port = socket.local_addr().unwrap().port();
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 2048];
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                let mut good = buf[..n].to_vec();
                good[2] |= 0x80;
                let reply = |bytes: &[u8]| {
                    let _ = socket.send_to(bytes, from);
                };
                match k % 8 {
                    0 => reply(b"\xde\xad\xbe"),
                    1 => {
                        good[0] ^= 0x80;
                        reply(&good);
                    }
                    2 => {
                        reply(&good);
                        reply(&good);
                    }
                    3 => {
                        good.resize(65_000, 0);
                        reply(&good);
                    }
                    4 => {
                        let _ = other.send_to(&good, from);
                    }
                    5 => {
                        let mut looped = good[..12].to_vec();
                        looped.extend_from_slice(&[1, b'a', 0xc0, 12, 0, 1, 0, 1]);
                        reply(&looped);
                    }
                    _ => reply(&good),
                }
                k += 1;
            }
        });
        Liar {
            port,
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for Liar {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn every_wrong_answer_is_counted_under_its_cause_and_the_run_goes_on() {
    let _turn = engines();
    let liar = Liar::start();
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let target = format!("127.0.0.1:{}", liar.port);
    let args = ["--query", "a.lab.test", "--rate", "400", "--duration", "1s"];
    let (code, text, summary) = gen_dns(None, &target, &args, &json);
    assert_eq!(code, 0, "{text}");
    let p = &summary["protocol"];
    let count = |v: &Value| v.as_u64().unwrap_or(0);
    assert!(
        count(&p["malformed"]["shorter than a dns header"]) > 0,
        "{p:#}"
    );
    assert!(count(&p["malformed"]["compression loop"]) > 0, "{p:#}");
    assert!(count(&p["wrong_id"]) > 0, "{p:#}");
    assert!(count(&p["duplicate"]) > 0, "{p:#}");
    assert!(count(&p["wrong_source"]) > 0, "{p:#}");
    // The right answers, the 64 KB ones and the first of each pair are answers: 4 in 8.
    assert!(count(&p["answered"]) > 0, "{p:#}");
    adds_up(&summary);
    assert_eq!(outcome(&summary, "NOERROR"), sum_outcomes(&summary));
    let unanswered = count(&p["unanswered"]);
    assert!(
        unanswered > 0,
        "half the queries get no answer of theirs: {p:#}"
    );
    assert!(text.contains("compression loop"), "{text}");
}

#[test]
fn through_an_emulated_link_the_fastest_answer_takes_both_delays() {
    if !namespaces_or_skip() {
        return;
    }
    let _turn = engines();
    let host = Namespace::create(&format!("latlab-{}-dns-host", std::process::id())).unwrap();
    let Some(_unbound) = Unbound::start(host.name(), Ipv4Addr::UNSPECIFIED, 53) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let latlab = assert_cmd::cargo::cargo_bin("latlab");
    let script = format!(
        "{} gen --protocol dns --target $LATLAB_HOST:53 --query a.lab.test --rate 100 \
         --duration 1s --poll block --json {}",
        latlab.display(),
        json.display()
    );
    let out = std::process::Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", host.name()))
        .arg(&latlab)
        .args(["run", "--delay", "20ms", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("up: delay=20ms; down: delay=20ms"),
        "{stderr}"
    );
    let summary = read_json(&json);
    adds_up(&summary);
    assert!(outcome(&summary, "NOERROR") > 0, "{summary:#}");
    // The run's own results name the link it went through (`LATLAB_LINK`).
    assert_eq!(
        summary["setup"]["link"], "up: delay=20ms; down: delay=20ms",
        "{summary:#}"
    );
    let min = summary["latency_ns"]["min"].as_f64().unwrap();
    assert!(min >= 40e6, "the fastest answer took {min} ns");
}
