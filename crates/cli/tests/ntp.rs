//! `latlab gen --protocol ntp` against chronyd serving NTP in a namespace, and against a
//! server on loopback whose replies are wrong in the ways a reply can be.

mod common;

use std::net::{Ipv4Addr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::servers::chrony::Chrony;
use latlab_lab::topology::ClientServer;
use latlab_wire::ntp::{Mode, Packet, Repr, Timestamp};

/// The namespaces of a client—server topology, or `None` (skipped) when there are none.
fn topology() -> Option<(ClientServer, String, String)> {
    if !common::namespaces_or_skip() {
        return None;
    }
    let topo = ClientServer::namespaces().unwrap();
    let ClientServer::Namespaces { client, server, .. } = &topo else {
        unreachable!("namespaces() builds namespaces")
    };
    let (c, s) = (client.name().to_string(), server.name().to_string());
    Some((topo, c, s))
}

/// `latlab gen --protocol ntp` arguments writing results to `out`.
fn gen_args(rate: &str, duration: &str, out: &Path) -> Vec<String> {
    [
        "--protocol",
        "ntp",
        "--rate",
        rate,
        "--duration",
        duration,
        "--poll",
        "block",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .chain([out.display().to_string()])
    .collect()
}

fn protocol(out: &Path) -> serde_json::Value {
    common::read_json(&out.join("summary.json"))["protocol"].clone()
}

fn n(v: &serde_json::Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("{v} is not a count"))
}

#[test]
fn chrony_answers_every_request_synchronized_and_its_own_time_is_part_of_the_round_trip() {
    let Some((_topo, client, server)) = topology() else {
        return;
    };
    let Some(chrony) = Chrony::start(&server, Ipv4Addr::new(198, 18, 0, 2), 123) else {
        return;
    };
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let text = common::gen_in(
        &client,
        &chrony.addr.to_string(),
        &gen_args("1000", "1s", &out),
    );
    let summary = common::read_json(&out.join("summary.json"));
    let p = &summary["protocol"];
    assert_eq!(p["name"], "ntp");
    let sent = n(&summary["sent"]);
    assert!(sent > 0);
    assert_eq!(n(&p["answered"]), sent, "{text}\n{}", chrony.log());
    assert_eq!(n(&p["unanswered"]), 0);
    for key in ["late", "duplicate", "wrong_id", "wrong_source"] {
        assert_eq!(n(&p[key]), 0, "{key}: {p}");
    }
    assert!(
        p.get("malformed").is_none() && p.get("mismatch").is_none(),
        "{p}"
    );
    // Every reply (warm-up included) said synchronized.
    let warmup = n(&summary["warmup"]["received"]);
    assert_eq!(n(&p["outcomes"]["synchronized"]), sent + warmup, "{p}");
    assert_eq!(n(&p["outcomes"]["unsynchronized"]), 0);
    // The server's own time, one per answer, is within the round trip from the actual send.
    let server_time = &p["server_time_ns"];
    assert_eq!(n(&server_time["count"]), sent);
    assert_eq!(n(&p["path_ns"]["count"]), sent);
    let round_trip = &summary["latency_from_actual_send_ns"];
    for q in ["p50", "p90", "max"] {
        assert!(
            n(&server_time[q]) <= n(&round_trip[q]),
            "server {q} {} > round trip {}",
            server_time[q],
            round_trip[q]
        );
    }
    assert!(text.contains("ntp: "), "{text}");
    assert!(text.contains("server's own time p50"), "{text}");
}

#[test]
fn chronyd_killed_mid_run_leaves_the_rest_unanswered_and_nothing_else() {
    let Some((_topo, client, server)) = topology() else {
        return;
    };
    let Some(chrony) = Chrony::start(&server, Ipv4Addr::new(198, 18, 0, 2), 123) else {
        return;
    };
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let mut cmd = common::in_ns(&client);
    cmd.args(["gen", "--target", &chrony.addr.to_string()])
        .args(gen_args("500", "2s", &out))
        .stdout(std::process::Stdio::piped());
    // The run starts once the check before it had an answer: chronyd answered.
    let gen = common::started(cmd, "latlab gen:");
    std::thread::sleep(Duration::from_millis(500));
    common::signal_pid(chrony.id(), "KILL");
    let (status, stdout, stderr) = gen.wait_output();
    assert!(status.success(), "{stderr}");
    let summary = common::read_json(&out.join("summary.json"));
    let p = &summary["protocol"];
    let sent = n(&summary["sent"]);
    // Requests sent after the kill are the unanswered ones; every request is one or the other.
    assert!(n(&p["unanswered"]) > 0, "{stdout}");
    assert_eq!(n(&p["answered"]) + n(&p["unanswered"]), sent, "{stdout}");
    for key in ["late", "duplicate", "wrong_id", "wrong_source"] {
        assert_eq!(n(&p[key]), 0, "{key}: {p}");
    }
    assert!(p.get("malformed").is_none(), "{p}");
}

/// A server on loopback whose `k`-th reply is right, then of the wrong mode, then with a zero
/// origin, then with T3 before T2, then with T3 two seconds after T2, and again.
struct BadServer {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl BadServer {
    fn start() -> BadServer {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let done = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            let mut k = 0u64;
            while !done.load(Ordering::Relaxed) {
                let Ok((len, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                let Ok(request) = Repr::parse(&Packet::new_unchecked(&buf[..len])) else {
                    continue;
                };
                let now = latlab_io::clock::now_ns();
                let mut reply = Repr {
                    mode: Mode::Server,
                    stratum: 3,
                    reference_id: [192, 0, 2, 1],
                    origin: request.transmit,
                    receive: Timestamp::from_unix_ns(now),
                    transmit: Timestamp::from_unix_ns(now + 5_000),
                    ..Repr::client(Timestamp(0))
                };
                match k % 5 {
                    0 => {}
                    1 => reply.mode = Mode::SymmetricPassive,
                    2 => reply.origin = Timestamp(0),
                    3 => reply.transmit = Timestamp::from_unix_ns(now - 5_000),
                    _ => reply.transmit = Timestamp::from_unix_ns(now + 2_000_000_000),
                }
                k += 1;
                let mut out = [0u8; 48];
                reply.emit(&mut Packet::new_unchecked(&mut out[..]));
                let _ = socket.send_to(&out, from);
            }
        });
        BadServer {
            addr,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for BadServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn wrong_replies_are_counted_by_cause_and_add_up() {
    let bad = BadServer::start();
    let _turn = common::engines();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let run = common::succeeds(
        std::process::Command::new(assert_cmd::cargo::cargo_bin("latlab"))
            .args(["gen", "--target", &bad.addr.to_string()])
            .args(gen_args("500", "1s", &out)),
    );
    let text = String::from_utf8_lossy(&run.stdout);
    let summary = common::read_json(&out.join("summary.json"));
    let p = protocol(&out);
    let malformed = &p["malformed"];
    let causes = [
        "not a server reply",
        "zero origin",
        "server times out of order",
    ];
    let bad_replies: u64 = causes.iter().map(|c| n(&malformed[c])).sum();
    for c in causes {
        assert!(n(&malformed[c]) > 0, "{c}: {p}");
    }
    // Each kind is a fifth of the replies, T3 before and long after T2 both out of order.
    let replies = n(&p["outcomes"]["synchronized"]) + bad_replies;
    let out_of_order = n(&malformed["server times out of order"]);
    assert!(
        out_of_order.abs_diff(2 * n(&malformed["zero origin"])) <= 2,
        "{p}"
    );
    assert!(
        replies.abs_diff(5 * n(&malformed["zero origin"])) <= 5,
        "{p}"
    );
    // What was sent is answered or not, and only the right replies answer.
    let sent = n(&summary["sent"]);
    assert_eq!(n(&p["answered"]) + n(&p["unanswered"]), sent);
    assert!(n(&p["answered"]) > 0 && n(&p["unanswered"]) > 0);
    assert!(text.contains("malformed: "), "{text}");
    assert!(text.contains("zero origin"), "{text}");
}
