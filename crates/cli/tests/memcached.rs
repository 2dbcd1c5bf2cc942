//! `latlab gen --protocol memcached` against a real memcached (`memcached -U`) in a namespace
//! this test made, and against test servers that answer badly (root; must run under CI=true).
//! Each test asserts on what happened (outcomes, causes, counts that add up), never on speed.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::servers::memcached::Memcached;
use latlab_lab::topology::ClientServer;
use latlab_probe::protocol::memcached::MAX_PENDING;
use serde_json::Value;

const SERVER: &str = "198.18.0.2:11211";

/// The lab and a memcached in its server namespace, or `None` (skipped).
fn lab_with_memcached() -> Option<(ClientServer, Memcached)> {
    if !common::namespaces_or_skip() {
        return None;
    }
    let lab = ClientServer::namespaces().unwrap();
    let (_, server) = names(&lab);
    let memcached = Memcached::start(server, SERVER.parse().unwrap())?;
    Some((lab, memcached))
}

fn names(lab: &ClientServer) -> (&str, &str) {
    match lab {
        ClientServer::Namespaces { client, server, .. } => (client.name(), server.name()),
        _ => unreachable!("namespaces() builds namespaces"),
    }
}

/// Runs `gen --protocol memcached --target SERVER ARGS…` in the client namespace: its
/// summary.json.
fn gen(lab: &ClientServer, args: &[&str]) -> Value {
    let (client, _) = names(lab);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let mut all = vec!["--protocol", "memcached", "--poll", "block", "--json"];
    all.push(json.to_str().unwrap());
    all.extend(args);
    common::gen_in(client, SERVER, &all);
    common::read_json(&json)
}

fn count(summary: &Value, path: &[&str]) -> u64 {
    let mut v = &summary["protocol"];
    for p in path {
        v = &v[p];
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("{path:?} in {}", summary["protocol"]))
}

/// Outcomes over every reply, warm-up included, equal the answered requests of both parts.
fn outcomes_add_up(s: &Value) {
    let sum: u64 = ["hit", "miss", "stored", "not stored", "error"]
        .iter()
        .map(|o| count(s, &["outcomes", o]))
        .sum();
    let warmup = s["warmup"]["received"].as_u64().unwrap();
    assert_eq!(sum, count(s, &["answered"]) + warmup, "{}", s["protocol"]);
}

#[test]
fn gets_hit_once_the_warm_up_has_set_every_key() {
    let _turn = common::engines();
    let Some((lab, _memcached)) = lab_with_memcached() else {
        return;
    };
    let s = gen(
        &lab,
        &[
            "--rate",
            "1000",
            "--duration",
            "1s",
            "--warmup",
            "300ms",
            "--keys",
            "200",
            "--set-ratio",
            "0",
        ],
    );
    outcomes_add_up(&s);
    let answered = count(&s, &["answered"]);
    assert!(answered > 0);
    assert_eq!(
        count(&s, &["outcomes", "hit"]),
        answered,
        "{}",
        s["protocol"]
    );
    assert_eq!(count(&s, &["outcomes", "miss"]), 0);
    assert_eq!(
        count(&s, &["outcomes", "stored"]),
        s["warmup"]["received"].as_u64().unwrap()
    );
    assert!(
        s["protocol"].get("malformed").is_none(),
        "{}",
        s["protocol"]
    );
    assert!(s["protocol"].get("mismatch").is_none(), "{}", s["protocol"]);
}

#[test]
fn with_a_set_ratio_of_one_every_request_is_stored() {
    let _turn = common::engines();
    let Some((lab, _memcached)) = lab_with_memcached() else {
        return;
    };
    let s = gen(
        &lab,
        &[
            "--rate",
            "1000",
            "--duration",
            "500ms",
            "--warmup",
            "0",
            "--set-ratio",
            "1",
        ],
    );
    outcomes_add_up(&s);
    assert!(count(&s, &["answered"]) > 0);
    assert_eq!(count(&s, &["outcomes", "stored"]), count(&s, &["answered"]));
}

#[test]
fn a_cold_cache_misses_and_hits_misses_and_sets_add_up_to_the_answers() {
    let _turn = common::engines();
    let Some((lab, _memcached)) = lab_with_memcached() else {
        return;
    };
    // No warm-up (a cold cache): the keys a get asks for were set only if a measured set
    // came first.
    let s = gen(
        &lab,
        &[
            "--rate",
            "1000",
            "--duration",
            "1s",
            "--warmup",
            "0",
            "--keys",
            "300",
            "--set-ratio",
            "0.3",
            "--flows",
            "2",
        ],
    );
    outcomes_add_up(&s);
    let hit = count(&s, &["outcomes", "hit"]);
    let miss = count(&s, &["outcomes", "miss"]);
    let stored = count(&s, &["outcomes", "stored"]);
    assert_eq!(hit + miss + stored, count(&s, &["answered"]));
    assert!(miss > 0 && stored > 0, "{}", s["protocol"]);
}

#[test]
fn a_value_in_several_datagrams_is_put_back_together() {
    let _turn = common::engines();
    let Some((lab, _memcached)) = lab_with_memcached() else {
        return;
    };
    // memcached sends at most 1400 bytes a datagram: a hit of 3000 bytes comes in three.
    let s = gen(
        &lab,
        &[
            "--rate",
            "500",
            "--duration",
            "1s",
            "--warmup",
            "200ms",
            "--keys",
            "20",
            "--set-ratio",
            "0",
            "--value-size",
            "3000",
        ],
    );
    outcomes_add_up(&s);
    let answered = count(&s, &["answered"]);
    assert!(answered > 0);
    assert_eq!(
        count(&s, &["outcomes", "hit"]),
        answered,
        "{}",
        s["protocol"]
    );
    assert!(
        s["protocol"].get("malformed").is_none(),
        "{}",
        s["protocol"]
    );
}

#[test]
fn memcached_killed_mid_run_leaves_the_rest_unanswered_and_the_run_ends() {
    let _turn = common::engines();
    let Some((lab, mut memcached)) = lab_with_memcached() else {
        return;
    };
    let (client, _) = names(&lab);
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let mut cmd = common::in_ns(client);
    cmd.args([
        "gen",
        "--target",
        SERVER,
        "--protocol",
        "memcached",
        "--poll",
        "block",
    ])
    .args([
        "--rate",
        "1000",
        "--duration",
        "2s",
        "--warmup",
        "0",
        "--json",
    ])
    .arg(&json)
    .stdout(std::process::Stdio::null());
    let run = common::started(cmd, "latlab gen:");
    std::thread::sleep(Duration::from_millis(700));
    assert!(memcached.id() > 0);
    memcached.kill();
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
    let s = common::read_json(&json);
    assert!(count(&s, &["answered"]) > 0, "{}", s["protocol"]);
    assert!(count(&s, &["unanswered"]) > 0, "{}", s["protocol"]);
    outcomes_add_up(&s);
}

/// A UDP server in namespace `ns` at `addr` that answers each request with what `answer`
/// makes of it, until dropped.
struct TestServer {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl TestServer {
    fn start(ns: &str, addr: SocketAddr, answer: fn(&[u8]) -> Vec<Vec<u8>>) -> TestServer {
        let socket = latlab_io::netns::run_in(ns, move || UdpSocket::bind(addr))
            .unwrap()
            .unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 65_536];
            while !stop.load(Ordering::Relaxed) {
                if let Ok((n, from)) = socket.recv_from(&mut buf) {
                    for d in answer(&buf[..n]) {
                        let _ = socket.send_to(&d, from);
                    }
                }
            }
        });
        TestServer {
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The first of three datagrams promised, never the other two.
fn first_of_three(request: &[u8]) -> Vec<Vec<u8>> {
    let mut d = request[..2].to_vec();
    d.extend(b"\x00\x00\x00\x03\x00\x00VALUE key:1 0 3000\r\n");
    d.extend([b'v'; 1000]);
    vec![d]
}

#[test]
fn a_server_promising_more_datagrams_than_it_sends_is_counted_and_the_run_goes_on() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientServer::namespaces().unwrap();
    let (_, server) = names(&lab);
    let _server = TestServer::start(server, SERVER.parse().unwrap(), first_of_three);
    let s = gen(
        &lab,
        &[
            "--rate",
            "1000",
            "--duration",
            "1s",
            "--warmup",
            "0",
            "--set-ratio",
            "0",
        ],
    );
    let sent = s["sent"].as_u64().unwrap();
    assert_eq!(count(&s, &["answered"]), 0);
    assert_eq!(count(&s, &["unanswered"]), sent);
    // Each incomplete reply is dropped and counted once a newer one needs its room; the last
    // 64 being put together when the run ends are not counted.
    let incomplete = count(&s, &["malformed", "incomplete reply"]);
    assert_eq!(incomplete, sent - MAX_PENDING as u64, "{}", s["protocol"]);
}
