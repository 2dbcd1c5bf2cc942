//! `latlab gen --protocol stun` against coturn (`turnserver --stun-only`) in a namespace this
//! test made, and against a test server that maps every client to a wrong address (root; must
//! run under CI=true). Each test asserts on what happened, never on speed.

mod common;

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::servers::coturn::Coturn;
use latlab_lab::topology::ClientServer;
use serde_json::Value;

const SERVER: &str = "198.18.0.2:3478";

fn names(lab: &ClientServer) -> (&str, &str) {
    match lab {
        ClientServer::Namespaces { client, server, .. } => (client.name(), server.name()),
        _ => unreachable!("namespaces() builds namespaces"),
    }
}

fn lab_with_coturn() -> Option<(ClientServer, Coturn)> {
    if !common::namespaces_or_skip() {
        return None;
    }
    let lab = ClientServer::namespaces().unwrap();
    let coturn = Coturn::start(names(&lab).1, SERVER.parse().unwrap())?;
    Some((lab, coturn))
}

/// Runs `gen --protocol stun --target SERVER ARGS…` in the client namespace: its summary.
fn gen(lab: &ClientServer, args: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let mut all = vec!["--protocol", "stun", "--poll", "block", "--json"];
    all.push(json.to_str().unwrap());
    all.extend(args);
    common::gen_in(names(lab).0, SERVER, &all);
    common::read_json(&json)
}

fn count(s: &Value, path: &[&str]) -> u64 {
    let mut v = &s["protocol"];
    for p in path {
        v = &v[p];
    }
    v.as_u64()
        .unwrap_or_else(|| panic!("{path:?} in {}", s["protocol"]))
}

/// Every reply, warm-up included, has one of the four outcomes.
fn all_replies(s: &Value) -> u64 {
    count(s, &["answered"]) + s["warmup"]["received"].as_u64().unwrap()
}

#[test]
fn coturn_maps_every_request_to_the_clients_own_address() {
    let _turn = common::engines();
    let Some((lab, coturn)) = lab_with_coturn() else {
        return;
    };
    let s = gen(
        &lab,
        &[
            "--rate",
            "1000",
            "--duration",
            "1s",
            "--bind",
            "198.18.0.1",
            "--flows",
            "3",
        ],
    );
    let answered = count(&s, &["answered"]);
    assert!(answered > 0, "{}\n{}", s["protocol"], coturn.log());
    assert_eq!(
        count(&s, &["outcomes", "mapped ok"]),
        all_replies(&s),
        "{}",
        s["protocol"]
    );
    assert_eq!(count(&s, &["outcomes", "mapped mismatch"]), 0);
    assert!(
        s["protocol"].get("malformed").is_none(),
        "{}",
        s["protocol"]
    );
    assert!(s["protocol"].get("mismatch").is_none(), "{}", s["protocol"]);
}

#[test]
fn coturn_killed_mid_run_leaves_the_rest_unanswered_and_the_run_ends() {
    let _turn = common::engines();
    let Some((lab, mut coturn)) = lab_with_coturn() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let mut cmd = common::in_ns(names(&lab).0);
    cmd.args([
        "gen",
        "--target",
        SERVER,
        "--protocol",
        "stun",
        "--poll",
        "block",
    ])
    .args(["--rate", "1000", "--duration", "2s", "--json"])
    .arg(&json)
    .stdout(std::process::Stdio::null());
    let run = common::started(cmd, "latlab gen:");
    std::thread::sleep(Duration::from_millis(700));
    coturn.kill();
    let (status, stderr) = run.wait();
    assert!(status.success(), "{stderr}");
    let s = common::read_json(&json);
    assert!(count(&s, &["answered"]) > 0, "{}", s["protocol"]);
    assert!(count(&s, &["unanswered"]) > 0, "{}", s["protocol"]);
    assert_eq!(
        count(&s, &["outcomes", "mapped ok"]),
        all_replies(&s),
        "{}",
        s["protocol"]
    );
}

/// A STUN server in namespace `ns` that answers every Binding request with a success
/// mapping the client to 203.0.113.9 and its own port.
struct WrongMapper {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<u64>>,
}

impl WrongMapper {
    fn start(ns: &str, addr: SocketAddr) -> WrongMapper {
        let socket = latlab_io::netns::run_in(ns, move || UdpSocket::bind(addr))
            .unwrap()
            .unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let (mut buf, mut out, mut answered) = ([0u8; 1500], [0u8; 64], 0);
            while !stop.load(Ordering::Relaxed) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                let Ok(m) = latlab_wire::stun::Message::parse(&buf[..n]) else {
                    continue;
                };
                let wrong = SocketAddr::from(([203, 0, 113, 9], from.port()));
                let len = latlab_wire::stun::emit_binding_success(&m.id, wrong, &mut out).unwrap();
                let _ = socket.send_to(&out[..len], from);
                answered += 1;
            }
            answered
        });
        WrongMapper {
            done,
            thread: Some(thread),
        }
    }

    fn finish(mut self) -> u64 {
        self.done.store(true, Ordering::Relaxed);
        self.thread.take().unwrap().join().unwrap()
    }
}

impl Drop for WrongMapper {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn a_server_mapping_to_another_address_is_counted_as_a_mapped_mismatch() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientServer::namespaces().unwrap();
    let server = WrongMapper::start(names(&lab).1, SERVER.parse().unwrap());
    let s = gen(
        &lab,
        &["--rate", "1000", "--duration", "1s", "--bind", "198.18.0.1"],
    );
    let answered_by_server = server.finish();
    assert!(count(&s, &["answered"]) > 0);
    assert_eq!(
        count(&s, &["outcomes", "mapped mismatch"]),
        all_replies(&s),
        "{}",
        s["protocol"]
    );
    assert_eq!(count(&s, &["outcomes", "mapped ok"]), 0);
    // The check before the run asked once from its own socket: every other answer is a reply.
    assert!(answered_by_server >= all_replies(&s));
}
