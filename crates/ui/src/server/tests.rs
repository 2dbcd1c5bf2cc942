use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::AtomicBool;

use super::*;

/// One HTTP/1.1 request with `headers`: the status and the body of the answer, and whether
/// any header of the answer is a CORS one.
fn request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
) -> (u16, String, bool) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut head =
        format!("{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: 2\r\n");
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    write!(s, "{head}\r\n{{}}").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    let cors = head.to_ascii_lowercase().contains("access-control-");
    (status, body.to_string(), cors)
}

#[test]
fn guards_refuse_another_host_and_a_missing_or_wrong_token_before_the_handler() {
    let server = UiServer::bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = server.addr();
    let host = addr.to_string();
    let token = server.token().to_string();
    assert_eq!(token.len(), 32);
    assert!(server.url().ends_with(&format!("/?token={token}")));
    let done = AtomicBool::new(false);
    let calls = std::sync::Mutex::new(Vec::new());
    std::thread::scope(|s| {
        s.spawn(|| {
            let mut handler = |r: &UiRequest| {
                calls.lock().unwrap().push(r.clone());
                Reply::json(200, &serde_json::json!({"ok": true}))
            };
            server.serve(Page::Generator, &mut handler, &mut || {}, &done)
        });
        let good = [("Host", host.as_str()), (TOKEN_HEADER, token.as_str())];
        let (status, body, cors) = request(addr, "POST", "/api/x?a=1&b=%41+c", &good);
        assert_eq!((status, body.as_str(), cors), (200, "{\"ok\":true}", false));
        let localhost = format!("localhost:{}", addr.port());
        let (status, _, _) = request(
            addr,
            "GET",
            "/api/x",
            &[("Host", &localhost), (TOKEN_HEADER, &token)],
        );
        assert_eq!(status, 200, "localhost names a loopback address too");
        for (what, headers) in [
            (
                "rebound name",
                vec![
                    ("Host", "evil.example:9200"),
                    (TOKEN_HEADER, token.as_str()),
                ],
            ),
            ("no Host", vec![(TOKEN_HEADER, token.as_str())]),
            ("no token", vec![("Host", host.as_str())]),
            (
                "wrong token",
                vec![
                    ("Host", host.as_str()),
                    (TOKEN_HEADER, "0123456789abcdef0123456789abcdef"),
                ],
            ),
            (
                "short token",
                vec![("Host", host.as_str()), (TOKEN_HEADER, &token[..31])],
            ),
        ] {
            let (status, body, cors) = request(addr, "POST", "/api/x", &headers);
            assert_eq!((status, cors), (403, false), "{what}: {body}");
        }
        // The page itself needs the right Host, not the token (it carries it in its address).
        let (status, body, _) = request(addr, "GET", "/", &[("Host", host.as_str())]);
        assert_eq!(status, 200);
        assert!(body.contains("/gen.js"), "{body}");
        assert_eq!(
            request(addr, "GET", "/emu.js", &[("Host", host.as_str())]).0,
            404
        );
        assert_eq!(
            request(addr, "POST", "/", &[("Host", host.as_str())]).0,
            405
        );
        assert_eq!(
            request(addr, "GET", "/", &[("Host", "evil.example")]).0,
            403
        );
        done.store(true, Ordering::Relaxed);
    });
    let calls = calls.into_inner().unwrap();
    assert_eq!(
        calls.len(),
        2,
        "only the two good requests reached the handler"
    );
    assert_eq!(calls[0].path, "/api/x");
    assert_eq!(calls[0].query("b"), Some("A c"));
    assert_eq!(calls[0].body, "{}");
}

#[test]
fn a_query_is_decoded_and_bad_escapes_are_kept() {
    let (path, q) = split_url("/api/file?name=%2Ftmp%2Fa+b.json&x=%zz&%E2%82%AC");
    assert_eq!(path, "/api/file");
    assert_eq!(
        q,
        vec![
            ("name".into(), "/tmp/a b.json".into()),
            ("x".into(), "%zz".into()),
            ("€".into(), String::new()),
        ]
    );
    assert_eq!(decode("%"), "%");
    assert_eq!(decode("%4"), "%4");
    assert_eq!(decode("€%FF"), "€\u{fffd}");
}

#[test]
fn tokens_compare_whole() {
    assert!(same_token(b"abc", b"abc"));
    assert!(!same_token(b"abc", b"abd"));
    assert!(!same_token(b"abc", b"ab"));
    assert_ne!(fresh_token().unwrap(), fresh_token().unwrap());
}
