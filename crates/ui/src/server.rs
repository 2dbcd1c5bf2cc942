//! The HTTP server of a live page: one thread, requests answered one after another, each
//! guarded before the page's handler sees it.
//!
//! Guards, in order:
//! 1. `Host` must be the address served (`127.0.0.1:9200`; for a loopback address also
//!    `localhost:9200`): a page of another site that rebinds its name to this address is
//!    refused (403), so it can neither read nor change anything.
//! 2. `/api/…` needs the run's token, in the `X-Latlab-Token` header (the page reads it from
//!    the address latlab printed): a missing or wrong token is 403, and the handler is not
//!    called, so nothing changes. A cross-site form cannot set that header, and no answer has
//!    an `Access-Control-*` header, so a script of another origin cannot make a browser send
//!    it.
//! 3. A body is read up to [`MAX_BODY`] bytes (413 beyond).
//!
//! Every answer says `Cache-Control: no-store`, `Referrer-Policy: no-referrer` (the token is in
//! the page's address), `X-Content-Type-Options: nosniff`, and a content security policy that
//! lets the page load only its own scripts and styles and talk only to this server.

use std::io::Read;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tiny_http::{Header, Method, Response, Server};

use crate::assets;

/// Where `--ui` alone serves.
pub const DEFAULT_ADDR: &str = "127.0.0.1:9200";

/// Longest request body read, bytes.
pub const MAX_BODY: u64 = 64 * 1024;

/// The header the page sends its token in.
pub const TOKEN_HEADER: &str = "X-Latlab-Token";

/// Which page a server shows at `/`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Page {
    /// The emulator's control panel (`emu`, `run`, `shell`).
    Emulator,
    /// A generator run's live board (`gen`).
    Generator,
}

/// A request that passed the guards, as a page's handler sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UiRequest {
    /// `GET`, `POST`, `PUT`, …
    pub method: String,
    /// The path, without the query (`/api/state`).
    pub path: String,
    /// The query's `key=value` pairs, in order, not decoded beyond `+` and `%XX`.
    pub query: Vec<(String, String)>,
    /// The body, as text.
    pub body: String,
}

impl UiRequest {
    /// The value of query key `key`.
    pub fn query(&self, key: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A handler's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Its content type.
    pub content_type: &'static str,
    /// Its body.
    pub body: Vec<u8>,
}

impl Reply {
    /// `value` as JSON.
    pub fn json(status: u16, value: &serde_json::Value) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
        }
    }

    /// One line of text.
    pub fn text(status: u16, line: impl Into<String>) -> Reply {
        let mut body = line.into();
        body.push('\n');
        Reply {
            status,
            content_type: "text/plain; charset=utf-8",
            body: body.into_bytes(),
        }
    }

    /// 404, naming the path.
    pub fn not_found(path: &str) -> Reply {
        Reply::text(404, format!("{path}: no such resource"))
    }
}

/// A live page's server, listening, not yet serving.
pub struct UiServer {
    server: Server,
    addr: SocketAddr,
    token: String,
    hosts: Vec<String>,
}

impl std::fmt::Debug for UiServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UiServer")
            .field("addr", &self.addr)
            .finish()
    }
}

impl UiServer {
    /// Listens on `addr` with a fresh token (the caller checked that `addr` is loopback, or
    /// that the user asked for another).
    pub fn bind(addr: SocketAddr) -> std::io::Result<UiServer> {
        let server = Server::http(addr).map_err(std::io::Error::other)?;
        let addr = server
            .server_addr()
            .to_ip()
            .ok_or_else(|| std::io::Error::other("not an IP address"))?;
        let mut hosts = vec![addr.to_string()];
        if addr.ip().is_loopback() {
            hosts.push(format!("localhost:{}", addr.port()));
        }
        Ok(UiServer {
            server,
            addr,
            token: fresh_token()?,
            hosts,
        })
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The run's token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// The page's address, token included: what latlab prints once at start.
    pub fn url(&self) -> String {
        format!("http://{}/?token={}", self.addr, self.token)
    }

    /// Serves `page` until `done` is raised: the page's assets itself, every `/api/` request
    /// that passes the guards through `handler`. `tick` is called at least every 50 ms
    /// between requests (a page samples its charts there).
    pub fn serve(
        &self,
        page: Page,
        handler: &mut dyn FnMut(&UiRequest) -> Reply,
        tick: &mut dyn FnMut(),
        done: &AtomicBool,
    ) {
        while !done.load(Ordering::Relaxed) {
            match self.server.recv_timeout(Duration::from_millis(50)) {
                Ok(Some(request)) => self.answer(page, request, handler),
                Ok(None) => {}
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
            tick();
        }
    }

    fn answer(
        &self,
        page: Page,
        mut request: tiny_http::Request,
        handler: &mut dyn FnMut(&UiRequest) -> Reply,
    ) {
        let reply = self.guarded(page, &mut request, handler);
        let mut response = Response::from_data(reply.body).with_status_code(reply.status);
        for (name, value) in [
            ("Content-Type", reply.content_type),
            ("Cache-Control", "no-store"),
            ("Referrer-Policy", "no-referrer"),
            ("X-Content-Type-Options", "nosniff"),
            ("X-Frame-Options", "DENY"),
            (
                "Content-Security-Policy",
                "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; \
                 connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
            ),
        ] {
            response
                .add_header(Header::from_bytes(name, value).expect("a constant header is valid"));
        }
        // A client gone before its answer is its own business.
        let _ = request.respond(response);
    }

    fn guarded(
        &self,
        page: Page,
        request: &mut tiny_http::Request,
        handler: &mut dyn FnMut(&UiRequest) -> Reply,
    ) -> Reply {
        let host = header(request, "Host");
        if !host
            .as_deref()
            .is_some_and(|h| self.hosts.iter().any(|a| a == h))
        {
            return Reply::text(
                403,
                format!(
                    "Host {:?} is not this page's address ({})",
                    host.unwrap_or_default(),
                    self.hosts[0]
                ),
            );
        }
        let (path, query) = split_url(request.url());
        if !path.starts_with("/api/") {
            if *request.method() != Method::Get && *request.method() != Method::Head {
                return Reply::text(405, format!("{} is not allowed here", request.method()));
            }
            return assets::serve(page, &path).unwrap_or_else(|| Reply::not_found(&path));
        }
        let token = header(request, TOKEN_HEADER);
        if !token
            .as_deref()
            .is_some_and(|t| same_token(t.as_bytes(), self.token.as_bytes()))
        {
            return Reply::text(
                403,
                format!("{path}: missing or wrong token (the {TOKEN_HEADER} header)"),
            );
        }
        let mut body = String::new();
        if request
            .as_reader()
            .take(MAX_BODY + 1)
            .read_to_string(&mut body)
            .is_err()
        {
            return Reply::text(400, "the body is not UTF-8 text");
        }
        if body.len() as u64 > MAX_BODY {
            return Reply::text(413, format!("the body is longer than {MAX_BODY} bytes"));
        }
        handler(&UiRequest {
            method: request.method().to_string(),
            path,
            query,
            body,
        })
    }
}

fn header(request: &tiny_http::Request, name: &str) -> Option<String> {
    request
        .headers()
        .iter()
        .find(|h| h.field.as_str().as_str().eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str().to_string())
}

/// Compares in time that does not depend on where the two differ.
fn same_token(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// 128 bits from the system's random source, as hex.
fn fresh_token() -> std::io::Result<String> {
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// `/a/b?x=1&y=2` into its path and query pairs.
fn split_url(url: &str) -> (String, Vec<(String, String)>) {
    let (path, query) = url.split_once('?').unwrap_or((url, ""));
    let pairs = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect();
    (path.to_string(), pairs)
}

/// `+` and `%XX` decoded; a bad escape is kept as written, bytes that are not UTF-8 replaced.
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push(high << 4 | low);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests;
