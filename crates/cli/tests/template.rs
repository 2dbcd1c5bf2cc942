//! `latlab gen --protocol template` against a UDP server of the test's own on loopback, which
//! moves the token, hides it in a longer reply, or answers slowly and in order.

mod common;

use std::net::UdpSocket;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{engines, read_json};
use serde_json::Value;

/// What the server does with a request.
#[derive(Clone, Copy)]
enum Mode {
    /// Sends it back as it came.
    Echo,
    /// 30 bytes of its own, then the request's first 8 bytes (where the token is).
    Moved,
    /// 5 bytes of its own, then the whole request.
    Hidden,
    /// Waits 20 ms, then sends it back (one at a time, in order).
    Slow,
}

struct Server {
    port: u16,
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(mode: Mode) -> Server {
        let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let port = socket.local_addr().unwrap().port();
        let done = Arc::new(AtomicBool::new(false));
        let stop = done.clone();
        let thread = std::thread::spawn(move || {
            let mut buf = vec![0u8; 2048];
            while !stop.load(Ordering::Relaxed) {
                let Ok((n, from)) = socket.recv_from(&mut buf) else {
                    continue;
                };
                let request = &buf[..n];
                let reply = match mode {
                    Mode::Echo => request.to_vec(),
                    Mode::Moved => [&[b'x'; 30][..], &request[..8]].concat(),
                    Mode::Hidden => [&b"hdr:!"[..], request].concat(),
                    Mode::Slow => {
                        std::thread::sleep(Duration::from_millis(20));
                        request.to_vec()
                    }
                };
                let _ = socket.send_to(&reply, from);
            }
        });
        Server {
            port,
            done,
            thread: Some(thread),
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

const PAYLOAD: &str = "00112233 44556677 8899aabb ccddeeff 01020304";

fn gen_template(server: &Server, args: &[&str], json: &Path) -> (String, Value) {
    let out = std::process::Command::new(assert_cmd::cargo::cargo_bin("latlab"))
        .args(["gen", "--target", &format!("127.0.0.1:{}", server.port)])
        .args([
            "--protocol",
            "template",
            "--poll",
            "block",
            "--payload",
            PAYLOAD,
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
    assert!(out.status.success(), "{text}");
    (text, read_json(json))
}

fn adds_up(summary: &Value) {
    let p = &summary["protocol"];
    assert_eq!(
        p["answered"].as_u64().unwrap() + p["unanswered"].as_u64().unwrap(),
        summary["sent"].as_u64().unwrap(),
        "{summary:#}"
    );
    let came_back =
        summary["received"].as_u64().unwrap() + summary["warmup"]["received"].as_u64().unwrap();
    assert_eq!(
        p["outcomes"]["answered"].as_u64().unwrap(),
        came_back,
        "{p:#}"
    );
}

#[test]
fn a_token_is_read_where_the_reply_has_it_or_searched_for() {
    let _turn = engines();
    let dir = tempfile::tempdir().unwrap();
    let cases: [(Mode, &[&str]); 4] = [
        (Mode::Echo, &["--token", "4:8"]),
        (Mode::Echo, &["--token", "18:2"]),
        (Mode::Moved, &["--token", "0:8", "--reply-token", "30:8"]),
        (Mode::Hidden, &["--token", "6:12", "--reply-token", "any"]),
    ];
    for (i, (mode, flags)) in cases.into_iter().enumerate() {
        let server = Server::start(mode);
        let json = dir.path().join(format!("{i}.json"));
        let mut args = vec!["--rate", "500", "--duration", "1s"];
        args.extend_from_slice(flags);
        let (text, summary) = gen_template(&server, &args, &json);
        adds_up(&summary);
        let p = &summary["protocol"];
        assert!(p["answered"].as_u64().unwrap() > 0, "{flags:?}: {text}");
        for zero in ["wrong_id", "duplicate", "late", "busy"] {
            assert_eq!(p[zero], 0, "{flags:?} {zero}: {p:#}");
        }
        assert!(p["malformed"].is_null(), "{flags:?}: {p:#}");
        assert_eq!(p["schedule"], "open-loop", "{flags:?}");
    }
}

#[test]
fn without_a_token_one_request_is_in_flight_per_flow_and_the_rest_are_busy() {
    let _turn = engines();
    let dir = tempfile::tempdir().unwrap();
    // Answers in order, each after 20 ms: 200 requests a second are due 5 ms apart.
    let server = Server::start(Mode::Slow);
    let json = dir.path().join("slow.json");
    let (text, summary) = gen_template(&server, &["--rate", "200", "--duration", "1s"], &json);
    adds_up(&summary);
    let p = &summary["protocol"];
    assert!(p["busy"].as_u64().unwrap() > 0, "{p:#}");
    assert!(p["answered"].as_u64().unwrap() > 0, "{p:#}");
    assert_eq!(p["schedule"], "open-loop across flows only");
    assert!(text.contains("open-loop across flows only"), "{text}");
}

#[test]
fn a_bad_payload_or_token_is_one_line_naming_it_and_exits_2() {
    let base = [
        "gen",
        "--target",
        "127.0.0.1:9",
        "--rate",
        "10",
        "--protocol",
        "template",
    ];
    let cases: [(&[&str], &str); 7] = [
        (
            &["--payload", "abc"],
            "--payload \"abc\": 3 hex digits, an odd number",
        ),
        (
            &["--payload", "zz"],
            "--payload \"zz\": \"zz\" is not a hex byte",
        ),
        (&[], "--payload HEX or --payload-file FILE"),
        (
            &["--payload", PAYLOAD, "--token", "30:8"],
            "--token 30:8 lies outside the 20-byte payload",
        ),
        (
            &["--payload", PAYLOAD, "--token", "0:17"],
            "--token 0:17: a token is 1 to 16 bytes",
        ),
        (
            &["--payload", PAYLOAD, "--reply-token", "any"],
            "--reply-token any needs --token",
        ),
        (
            &[
                "--payload",
                PAYLOAD,
                "--token",
                "0:2",
                "--reply-token",
                "any",
            ],
            "--reply-token any needs a token of 8 bytes or more",
        ),
    ];
    for (args, needle) in cases {
        let all: Vec<&str> = base.iter().chain(args.iter()).copied().collect();
        common::one_line_error(&all, needle);
        let code = std::process::Command::new(assert_cmd::cargo::cargo_bin("latlab"))
            .args(&all)
            .output()
            .unwrap()
            .status
            .code();
        assert_eq!(code, Some(2), "{all:?}");
    }
}
