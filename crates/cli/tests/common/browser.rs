//! A real browser for the tests of the pages latlab serves: Debian's `chromium`, headless,
//! driven through Debian's `chromedriver` (WebDriver) with the fantoccini client. The API is
//! blocking (the tests are plain `#[test]` functions): a current-thread tokio runtime inside the
//! [`Browser`] runs each call to its end. Every error a method meets is a panic that names the
//! method and its selector. A missing `chromium` or `chromedriver` is a skip outside CI and a
//! failure under `CI=true` (`latlab_io::precondition`).
//!
//! A page under test should name an icon (`<link rel="icon" href="data:,">`): otherwise
//! Chromium asks for `/favicon.ico`, and a 404 there is a console error.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::elements::Element;
use fantoccini::wd::{Capabilities, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use crate::common::servers;

/// Debian's Chromium, the browser every session starts.
const CHROMIUM: &str = "/usr/bin/chromium";

/// Debian's WebDriver server for it (package `chromium-driver`).
const CHROMEDRIVER: &str = "chromedriver";

/// How long chromedriver may take to answer `/status` as ready, or a session to open or close:
/// an event, not a speed (only a broken driver or browser waits that long).
const START: Duration = Duration::from_secs(30);

/// How often [`Browser::wait_until`] looks again.
const POLL: Duration = Duration::from_millis(50);

/// A headless Chromium session, with the chromedriver that runs it. Dropping it ends the
/// session (chromedriver then ends the browser's processes), stops chromedriver by its process
/// id and waits for it, and deletes the browser's profile folder.
pub(crate) struct Browser {
    client: Option<Client>,
    runtime: tokio::runtime::Runtime,
    driver: Driver,
    profile: PathBuf,
    /// Holds the profile (`profile/`) and chromedriver's log (`chromedriver.log`).
    dir: tempfile::TempDir,
}

/// The chromedriver child this test started: killed (by its process id) and waited for on drop.
struct Driver {
    child: Child,
    log: PathBuf,
}

impl Driver {
    /// The end of chromedriver's log, for a failure's message.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// chromedriver's browser log (`POST /session/{id}/se/log {"type":"browser"}`): the console
/// messages since the last time it was read, which it then forgets.
#[derive(Debug)]
struct BrowserLog;

impl WebDriverCompatibleCommand for BrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (http::Method, Option<String>) {
        (
            http::Method::POST,
            Some(r#"{"type":"browser"}"#.to_string()),
        )
    }
}

impl Browser {
    /// Starts chromedriver on a free loopback port, waits until it says it is ready, and opens
    /// a headless session with a fresh profile, its browser log kept at every level. `None`
    /// (after saying the test is skipped, or failing under CI) when `/usr/bin/chromium` or
    /// `chromedriver` is not installed.
    pub(crate) fn start() -> Option<Browser> {
        if !Path::new(CHROMIUM).is_file() {
            latlab_io::precondition::missing(format!("no {CHROMIUM} (Debian's chromium)"));
            return None;
        }
        if !servers::installed(CHROMEDRIVER) {
            latlab_io::precondition::missing("no chromedriver (Debian's chromium-driver)");
            return None;
        }
        let dir = tempfile::tempdir().expect("Browser::start: a temporary folder");
        let profile = dir.path().join("profile");
        let log = dir.path().join("chromedriver.log");
        // A port the kernel just handed out and took back: free unless another program takes
        // it in the moment between.
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("Browser::start: a free loopback port")
            .port();
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("Browser::start: running {CHROMEDRIVER}: {e}"));
        let mut driver = Driver { child, log };
        wait_for_driver(port, &mut driver);

        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("Browser::start: a tokio runtime");
        let capabilities = capabilities(&profile);
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let url = format!("http://127.0.0.1:{port}");
        let connected = runtime.block_on(async {
            tokio::time::timeout(
                START,
                ClientBuilder::new(connector)
                    .capabilities(capabilities)
                    .connect(&url),
            )
            .await
        });
        let client = match connected {
            Ok(Ok(client)) => client,
            Ok(Err(e)) => panic!(
                "Browser::start: no session from chromedriver at {url}: {e}\n{}",
                driver.log_tail()
            ),
            Err(_) => panic!(
                "Browser::start: no session from chromedriver at {url} within {START:?}\n{}",
                driver.log_tail()
            ),
        };
        Some(Browser {
            client: Some(client),
            runtime,
            driver,
            profile,
            dir,
        })
    }

    /// The browser's profile folder (`--user-data-dir`), on the command line of every process
    /// of the session's browser.
    pub(crate) fn profile(&self) -> &Path {
        &self.profile
    }

    /// Loads `url` and waits until it has loaded.
    pub(crate) fn goto(&self, url: &str) {
        self.runtime
            .block_on(self.client().goto(url))
            .unwrap_or_else(|e| panic!("Browser::goto({url}): {e}"));
    }

    /// Sets the window's outer size to `width` × `height` pixels.
    pub(crate) fn window_size(&self, width: u32, height: u32) {
        self.runtime
            .block_on(self.client().set_window_size(width, height))
            .unwrap_or_else(|e| panic!("Browser::window_size({width}, {height}): {e}"));
    }

    /// The rendered text of the first element that `css` selects.
    pub(crate) fn text(&self, css: &str) -> String {
        let element = self.find("text", css);
        self.runtime
            .block_on(element.text())
            .unwrap_or_else(|e| panic!("Browser::text({css:?}): {e}"))
    }

    /// The `value` property of the first element that `css` selects (an input's or a select's
    /// current value, not its `value` attribute).
    pub(crate) fn value(&self, css: &str) -> String {
        let element = self.find("value", css);
        self.runtime
            .block_on(element.prop("value"))
            .unwrap_or_else(|e| panic!("Browser::value({css:?}): {e}"))
            .unwrap_or_else(|| panic!("Browser::value({css:?}): the element has no value"))
    }

    /// Clicks the first element that `css` selects (as a user would: it must be visible and
    /// not covered).
    pub(crate) fn click(&self, css: &str) {
        let element = self.find("click", css);
        self.runtime
            .block_on(element.click())
            .unwrap_or_else(|e| panic!("Browser::click({css:?}): {e}"));
    }

    /// Sets the value of the first element that `css` selects (an `<input>` of type range,
    /// number or text, or a `<select>`) and dispatches `input` and `change` on it, as a user's
    /// change does. Fails if the element then holds another value (a range clamps and rounds
    /// to its step; a select has no such option).
    pub(crate) fn set_value(&self, css: &str, value: &str) {
        let held = self.execute(
            "const [css, value] = arguments;
             const e = document.querySelector(css);
             if (e === null) return null;
             e.value = value;
             e.dispatchEvent(new Event('input', { bubbles: true }));
             e.dispatchEvent(new Event('change', { bubbles: true }));
             return String(e.value);",
            vec![json!(css), json!(value)],
        );
        match held.as_str() {
            None => panic!("Browser::set_value({css:?}, {value:?}): no element matches"),
            Some(held) if held != value => {
                panic!("Browser::set_value({css:?}, {value:?}): the element holds {held:?}")
            }
            Some(_) => {}
        }
    }

    /// Runs `js` as a function's body in the page, with `args` as its `arguments`, and returns
    /// what it returns (`null` when it returns nothing).
    pub(crate) fn execute(&self, js: &str, args: Vec<Value>) -> Value {
        self.runtime
            .block_on(self.client().execute(js, args))
            .unwrap_or_else(|e| panic!("Browser::execute({js:?}): {e}"))
    }

    /// Evaluates the JavaScript expression `condition` every 50 ms until it is true and returns
    /// how long that took from the call; `Err` (with the condition and its last error, if it
    /// threw) when it is still not true after `timeout`. An expression that throws counts as
    /// false (the element it reads may not be there yet).
    pub(crate) fn wait_until(
        &self,
        condition: &str,
        timeout: Duration,
    ) -> Result<Duration, String> {
        let script = format!("return !!({condition});");
        let start = Instant::now();
        loop {
            let last_error = match self
                .runtime
                .block_on(self.client().execute(&script, Vec::new()))
            {
                Ok(Value::Bool(true)) => return Ok(start.elapsed()),
                Ok(_) => None,
                Err(e) => Some(e.to_string()),
            };
            if start.elapsed() >= timeout {
                let threw = last_error
                    .map(|e| format!(" (it threw: {e})"))
                    .unwrap_or_default();
                return Err(format!(
                    "Browser::wait_until: {condition:?} still not true after {timeout:?}{threw}"
                ));
            }
            std::thread::sleep(POLL);
        }
    }

    /// The console messages of level SEVERE (`console.error`, uncaught exceptions, failed
    /// loads) since the last call, read from chromedriver's browser log.
    pub(crate) fn console_errors(&self) -> Vec<String> {
        let log = self
            .runtime
            .block_on(self.client().issue_cmd(BrowserLog))
            .unwrap_or_else(|e| panic!("Browser::console_errors: {e}"));
        let entries = log
            .as_array()
            .unwrap_or_else(|| panic!("Browser::console_errors: the log is not a list: {log}"));
        entries
            .iter()
            .filter(|entry| entry["level"] == "SEVERE")
            .map(|entry| entry["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Writes a PNG of the window's viewport to `path`.
    pub(crate) fn screenshot(&self, path: &Path) {
        let png = self
            .runtime
            .block_on(self.client().screenshot())
            .unwrap_or_else(|e| panic!("Browser::screenshot({}): {e}", path.display()));
        std::fs::write(path, png)
            .unwrap_or_else(|e| panic!("Browser::screenshot({}): {e}", path.display()));
    }

    /// The open session (open from [`Browser::start`] until the drop).
    fn client(&self) -> &Client {
        self.client.as_ref().expect("the session is open")
    }

    /// The first element that `css` selects, for `method`.
    fn find(&self, method: &str, css: &str) -> Element {
        self.runtime
            .block_on(self.client().find(Locator::Css(css)))
            .unwrap_or_else(|e| panic!("Browser::{method}({css:?}): {e}"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(client) = self.client.take() {
            let _ = self
                .runtime
                .block_on(async { tokio::time::timeout(START, client.close()).await });
        }
        let _ = self.driver.child.kill();
        let _ = self.driver.child.wait();
        // Ending the session ends the browser; should it not have (a session that would not
        // close), end what is left of it, the processes started with this session's profile,
        // and wait until they are gone: on a busy machine a process still exiting (or one
        // killed a moment ago) is listed for a while. Bounded, so that a test never hangs here.
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            let left = processes_with(&self.profile);
            if left.is_empty() || Instant::now() >= until {
                break;
            }
            for pid in left {
                let _ = Command::new("kill").args(["-s", "KILL", &pid]).status();
            }
            std::thread::sleep(POLL);
        }
    }
}

/// The process ids (as `pgrep` prints them) of the processes that have `needle` on their
/// command line.
pub(crate) fn processes_with(needle: &Path) -> Vec<String> {
    let out = Command::new("pgrep")
        .arg("-f")
        .arg("--")
        .arg(needle)
        .output()
        .expect("running pgrep");
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .map(str::to_string)
        .collect()
}

/// The session's capabilities: headless Chromium with a fresh profile at `profile`, none of its
/// own traffic (updates, sync, QUIC: on a closed network its connections are refused and
/// logged), its browser log at every level.
fn capabilities(profile: &Path) -> Capabilities {
    let args = [
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ]
    .map(str::to_string)
    .into_iter()
    .chain([format!("--user-data-dir={}", profile.display())])
    .collect::<Vec<_>>();
    match json!({
        "browserName": "chrome",
        "goog:chromeOptions": { "binary": CHROMIUM, "args": args },
        "goog:loggingPrefs": { "browser": "ALL" },
    }) {
        Value::Object(capabilities) => capabilities,
        _ => unreachable!("an object"),
    }
}

/// Asks chromedriver on `port` for `/status` every 50 ms until it says it is ready; fails if it
/// exits first or is not ready within [`START`].
fn wait_for_driver(port: u16, driver: &mut Driver) {
    let deadline = Instant::now() + START;
    loop {
        if let Some(status) = driver
            .child
            .try_wait()
            .expect("Browser::start: chromedriver")
        {
            panic!(
                "Browser::start: chromedriver exited ({status}) before it was ready\n{}",
                driver.log_tail()
            );
        }
        if ready(port) {
            return;
        }
        if Instant::now() >= deadline {
            panic!(
                "Browser::start: chromedriver on port {port} not ready within {START:?}\n{}",
                driver.log_tail()
            );
        }
        std::thread::sleep(POLL);
    }
}

/// Whether the WebDriver server on `port` answers `GET /status` with `"ready": true`.
fn ready(port: u16) -> bool {
    let Ok(mut stream) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
    let request = "GET /status HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    // The JSON document, whatever the framing around it.
    let body = match (answer.find('{'), answer.rfind('}')) {
        (Some(start), Some(end)) if start < end => &answer[start..=end],
        _ => return false,
    };
    serde_json::from_str::<Value>(body).is_ok_and(|status| status["value"]["ready"] == true)
}

/// The folder for screenshots: `LATLAB_SCREENSHOTS` if set, else a temporary one (held by the
/// second value).
pub(crate) fn screenshots() -> (PathBuf, Option<tempfile::TempDir>) {
    match std::env::var_os("LATLAB_SCREENSHOTS") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            std::fs::create_dir_all(&dir).unwrap();
            (dir, None)
        }
        None => {
            let temp = tempfile::tempdir().unwrap();
            (temp.path().to_path_buf(), Some(temp))
        }
    }
}

/// Checks that `path` holds a PNG (its 8-byte signature) of more than 1 KB.
pub(crate) fn is_png(path: &Path) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        bytes.get(..8),
        Some(&b"\x89PNG\r\n\x1a\n"[..]),
        "{} is not a PNG",
        path.display()
    );
    assert!(
        bytes.len() > 1024,
        "{}: {} bytes",
        path.display(),
        bytes.len()
    );
}
