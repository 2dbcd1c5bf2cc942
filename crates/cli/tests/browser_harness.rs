//! The browser harness's own tests (`common::browser`): a headless Chromium loads pages this
//! test serves, takes a value and a click, reports a console error, writes a screenshot, and
//! leaves no process behind. Screenshots go to the folder `LATLAB_SCREENSHOTS` names (CI keeps
//! it), else to a temporary folder.

mod common;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use common::browser::{is_png, processes_with, screenshots, Browser};

/// A range, a button that writes the range's value into `#out`, and no console error.
const FORM: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>form</title></head>
<body>
<input id="level" type="range" min="0" max="100" step="1" value="10">
<button id="show" onclick="document.getElementById('out').textContent = document.getElementById('level').value">show</button>
<span id="out">none</span>
</body></html>"#;

/// A page that writes one console error as it loads.
const ERROR: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><link rel="icon" href="data:,"><title>error</title></head>
<body><script>console.error("x");</script><p>error</p></body></html>"#;

/// An HTTP server on `127.0.0.1:0` that serves [`FORM`] at `/` and [`ERROR`] at `/error`
/// (anything else: 404) until it drops.
struct Site {
    base: String,
    server: Arc<tiny_http::Server>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Site {
    fn start() -> Site {
        let server = Arc::new(tiny_http::Server::http("127.0.0.1:0").unwrap());
        let base = format!("http://{}", server.server_addr().to_ip().unwrap());
        let serving = Arc::clone(&server);
        let thread = std::thread::spawn(move || {
            let html: tiny_http::Header = "Content-Type: text/html; charset=utf-8".parse().unwrap();
            for request in serving.incoming_requests() {
                let page = match request.url() {
                    "/" => Some(FORM),
                    "/error" => Some(ERROR),
                    _ => None,
                };
                let _ = match page {
                    Some(page) => request
                        .respond(tiny_http::Response::from_string(page).with_header(html.clone())),
                    None => request.respond(tiny_http::Response::empty(404)),
                };
            }
        });
        Site {
            base,
            server,
            thread: Some(thread),
        }
    }

    /// The address of `path` on this site.
    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Drops `browser` and checks that no process with its profile on its command line is left.
fn ends_cleanly(browser: Browser) {
    let profile: PathBuf = browser.profile().to_path_buf();
    assert!(
        !processes_with(&profile).is_empty(),
        "no process runs with the profile {} while the session is open",
        profile.display()
    );
    drop(browser);
    let left = processes_with(&profile);
    assert!(
        left.is_empty(),
        "processes left with {}: {left:?}",
        profile.display()
    );
}

#[test]
fn a_range_set_and_a_click_show_in_the_page() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let site = Site::start();
    browser.window_size(800, 600);
    browser.goto(&site.url("/"));
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    assert_eq!(browser.text("#out"), "none");
    assert_eq!(browser.value("#level"), "10");

    browser.set_value("#level", "42");
    assert_eq!(browser.value("#level"), "42");
    browser.click("#show");
    browser
        .wait_until(
            "document.querySelector('#out').textContent === '42'",
            Duration::from_secs(30),
        )
        .unwrap();
    assert_eq!(browser.text("#out"), "42");
    assert_eq!(
        browser.execute("return arguments[0] + 1;", vec![serde_json::json!(41)]),
        serde_json::json!(42)
    );
    let never = browser.wait_until("document.title === 'other'", Duration::from_millis(200));
    assert!(never.unwrap_err().contains("still not true"));
    let failed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        browser.click("#absent");
    }))
    .unwrap_err();
    let message = failed.downcast_ref::<String>().unwrap();
    assert!(
        message.starts_with("Browser::click(\"#absent\"): "),
        "{message}"
    );

    let (dir, _temp) = screenshots();
    let png = dir.join("browser_harness_form.png");
    browser.screenshot(&png);
    is_png(&png);
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    ends_cleanly(browser);
}

#[test]
fn a_console_error_is_seen() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let site = Site::start();
    browser.goto(&site.url("/error"));
    assert_eq!(browser.text("p"), "error");
    let errors = browser.console_errors();
    assert!(
        errors.iter().any(|e| e.ends_with("\"x\"")),
        "console errors: {errors:?}"
    );
    // The log is read once: the next read has only what came after.
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    ends_cleanly(browser);
}
