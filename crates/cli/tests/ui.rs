//! `--ui`: the emulator's control panel and the generator's live board, in a real browser
//! (Debian's headless Chromium through chromedriver, `common::browser`), against `latlab run`
//! in a namespace standing for the host, made here (root; must run under CI=true).
//!
//! Screenshots go to the folder `LATLAB_SCREENSHOTS` names (CI keeps it), else a temporary one.
//! The time from an API change to its display is written there too (`ui-latency.txt`): a
//! figure for a person, never asserted on.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::browser::{is_png, screenshots, Browser};
use common::{engines, namespaces_or_skip};
use latlab_lab::topology::Namespace;
use serde_json::Value;

/// Long enough for anything that happens at all: an event, not a speed.
const EVENT: Duration = Duration::from_secs(30);

#[test]
fn ui_flags_are_checked_before_anything_starts() {
    let base = ["emu", "--iface-a", "a0", "--iface-b", "b0"];
    common::one_line_error(
        &[&base[..], &["--ui", "0.0.0.0:9200"]].concat(),
        "--ui-public",
    );
    common::one_line_error(
        &[&base[..], &["--ui", "127.0.0.1:9300", "--mode", "pipeline"]].concat(),
        "--ui does not work with --mode pipeline",
    );
    common::one_line_error(
        &[
            &base[..],
            &["--ui", "127.0.0.1:9300", "--api", "127.0.0.1:9300"],
        ]
        .concat(),
        "two ports",
    );
    common::one_line_error(
        &[
            "gen",
            "--target",
            "127.0.0.1:9",
            "--rate",
            "100",
            "--ui",
            "0.0.0.0:0",
        ],
        "--ui-public",
    );
    common::one_line_error(&["run", "--ui", "nowhere", "--", "true"], "--ui");
}

/// One HTTP/1.1 request: the status and the body of the answer.
fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (u16, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(EVENT)).unwrap();
    let mut head = format!(
        "{method} {path} HTTP/1.1\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    write!(s, "{head}\r\n{body}").unwrap();
    let mut answer = String::new();
    s.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    (status, answer.split_once("\r\n\r\n").unwrap().1.to_string())
}

/// `latlab gen` to `target` for `seconds` at 200/s (no reachability check: the cable may be
/// pulled); its summary.
fn gen(target: &str, seconds: &str) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("summary.json");
    let out = Command::new(assert_cmd::cargo::cargo_bin("latlab"))
        .args([
            "gen",
            "--target",
            target,
            "--rate",
            "200",
            "--duration",
            seconds,
        ])
        .args(["--grace", "500ms", "--no-check", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

/// The panel's `/api/state`, with its token.
fn state(panel: SocketAddr, token: &str) -> Value {
    let host = panel.to_string();
    let (status, body) = http(
        panel,
        "GET",
        "/api/state",
        &[("Host", &host), ("X-Latlab-Token", token)],
        "",
    );
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

fn conditions(api: SocketAddr) -> Value {
    let (status, body) = http(api, "GET", "/conditions", &[("Host", "api")], "");
    assert_eq!(status, 200, "{body}");
    serde_json::from_str(&body).unwrap()
}

/// The drops to outages (a pulled cable is one until put back) `latlab run`'s panel has
/// counted up (up, down).
fn outage_drops(panel: SocketAddr, token: &str) -> [u64; 2] {
    let s = state(panel, token);
    [0, 1].map(|d| s["totals"][d]["drops"]["outage"].as_u64().unwrap())
}

fn make_ns() -> Namespace {
    Namespace::create(&format!("latlab-{}-ui-host", std::process::id())).unwrap()
}

#[test]
fn the_panel_changes_the_link_as_a_person_would_and_refuses_what_it_must() {
    if !namespaces_or_skip() {
        return;
    }
    let _turn = engines();
    let host = make_ns();
    // `latlab run -- latlab echo`: the echo server behind the link is latlab's own binary.
    let mut run = Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", host.name()))
        .arg(assert_cmd::cargo::cargo_bin("latlab"))
        .args([
            "run",
            "--delay",
            "5ms",
            "--ui",
            "127.0.0.1:0",
            "--api",
            "127.0.0.1:0",
            "--",
        ])
        .arg(assert_cmd::cargo::cargo_bin("latlab"))
        .args(["echo", "--listen", "0.0.0.0:7777"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(run.stderr.take().unwrap()).lines();
    let (mut cmd_addr, mut api, mut url) = (None, None, None);
    for line in lines.by_ref() {
        let line = line.unwrap();
        if let Some(rest) = line.split(" in namespace ").nth(1) {
            cmd_addr = rest
                .split(" at ")
                .nth(1)
                .and_then(|r| r.split(';').next())
                .map(String::from);
        }
        if let Some(rest) = line.split("API on http://").nth(1) {
            api = rest
                .split('/')
                .next()
                .map(|a| a.parse::<SocketAddr>().unwrap());
        }
        if let Some(rest) = line.split("control panel on ").nth(1) {
            url = Some(rest.trim().to_string());
        }
        if cmd_addr.is_some() && api.is_some() && url.is_some() {
            break;
        }
    }
    // Keep reading, so a later line never blocks latlab on a full pipe.
    let rest = std::thread::spawn(move || lines.map_while(Result::ok).collect::<Vec<_>>());
    let (cmd_addr, api, url) = (cmd_addr.unwrap(), api.unwrap(), url.unwrap());
    let panel: SocketAddr = url
        .strip_prefix("http://")
        .and_then(|r| r.split('/').next())
        .unwrap()
        .parse()
        .unwrap();
    let token = url.split("token=").nth(1).unwrap().to_string();
    assert_eq!(token.len(), 32, "{url}");
    let target = format!("{cmd_addr}:7777");
    let (shots, _temp) = screenshots();
    let run_id = run.id();
    let checked = latlab_io::netns::run_in(host.name(), move || {
        let Some(browser) = Browser::start() else {
            return;
        };
        browser.window_size(1280, 720);
        browser.goto(&url);
        browser
            .wait_until("document.getElementById('status').textContent === 'running' && document.getElementById('a_to_b-delay')", EVENT)
            .unwrap();
        assert_eq!(
            browser.value("#a_to_b-delay"),
            "5",
            "the form shows the link as set"
        );
        // Before: 5 ms each way.
        let before = gen(&target, "1s");
        let fastest = before["latency_ns"]["min"].as_u64().unwrap();
        assert!((10_000_000..80_000_000).contains(&fastest), "{fastest}");

        // The delay slider moved and applied: both directions in one change.
        browser.set_value("#a_to_b-delay-range", "40");
        browser.set_value("#b_to_a-delay", "40");
        browser.click("#apply");
        browser
            .wait_until(
                "document.getElementById('apply-result').textContent.startsWith('applied')",
                EVENT,
            )
            .unwrap();
        let now = conditions(api);
        assert_eq!(now["a_to_b"]["delay_ns"], 40_000_000, "{now}");
        assert_eq!(now["b_to_a"]["delay_ns"], 40_000_000, "{now}");
        let after = gen(&target, "1s");
        assert!(
            after["latency_ns"]["min"].as_u64().unwrap() >= 80_000_000,
            "{after}"
        );
        let by_ui = state(panel, &token)["changes"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["by"] == "ui")
            .count();
        assert_eq!(
            by_ui, 2,
            "one change of both directions, logged as the page's"
        );

        // Pull the cable: every frame dropped, as an outage, until it is put back.
        let dropped = outage_drops(panel, &token);
        browser.click("#cable");
        browser
            .wait_until(
                "document.getElementById('status').textContent === 'cable pulled'",
                EVENT,
            )
            .unwrap();
        let cut = gen(&target, "1s");
        assert_eq!(cut["received"], 0, "{cut}");
        let sent = cut["sent"].as_u64().unwrap() + cut["warmup"]["sent"].as_u64().unwrap_or(0);
        // The panel's counts are a second old at most: wait for them to catch up.
        let counted = (0..EVENT.as_secs() * 10).find_map(|_| {
            let now = outage_drops(panel, &token);
            let more = now[0] + now[1] - dropped[0] - dropped[1];
            std::thread::sleep(Duration::from_millis(100));
            (more >= sent).then_some(more)
        });
        assert!(
            counted.is_some(),
            "every probe the generator sent ({sent}) is counted as dropped by the outage: \
             {dropped:?} → {:?}",
            outage_drops(panel, &token)
        );
        browser.click("#cable");
        browser
            .wait_until(
                "document.getElementById('status').textContent === 'running'",
                EVENT,
            )
            .unwrap();
        let back = gen(&target, "1s");
        assert_eq!(back["lost"], 0, "{back}");

        // A change made through the API shows on the open page; five times, each timed from
        // the API's answer to the page showing it (a figure for a person, not asserted on).
        let mut shown = Vec::new();
        for ms in [11, 9, 13, 8, 7] {
            let (status, body) = http(
                api,
                "PUT",
                "/conditions/a-to-b",
                &[("Host", "api")],
                &format!("delay={ms}ms"),
            );
            assert_eq!(status, 200, "{body}");
            let took = browser
                .wait_until(
                    &format!(
                        "document.getElementById('a_to_b-in-force').textContent.includes('delay={ms}ms') && \
                         document.getElementById('a_to_b-delay').value === '{ms}'"
                    ),
                    EVENT,
                )
                .unwrap();
            shown.push(took.as_millis());
        }
        let log = browser.text("#log");
        assert!(log.contains("api") && log.contains("delay=7ms"), "{log}");

        // A refused value shows its error beside its field, and nothing changes either way.
        let before = conditions(api);
        browser.set_value("#a_to_b-loss-model", "gemodel");
        browser.set_value("#a_to_b-loss-params", "200,1,1,1");
        browser.set_value("#b_to_a-delay", "90");
        browser.click("#apply");
        browser
            .wait_until(
                "document.getElementById('err-a_to_b-loss').textContent !== ''",
                EVENT,
            )
            .unwrap();
        let error = browser.text("#err-a_to_b-loss");
        assert!(error.contains("loss"), "{error}");
        assert_eq!(conditions(api), before, "neither direction changed");

        // Requests without the token, or for another Host, are refused and change nothing.
        let host = panel.to_string();
        let body = r#"{"a_to_b":"delay=1ms","b_to_a":"delay=1ms"}"#;
        for headers in [
            vec![("Host", host.as_str())],
            vec![("Host", host.as_str()), ("X-Latlab-Token", "0000")],
            vec![("Host", "evil.example"), ("X-Latlab-Token", token.as_str())],
        ] {
            let (status, answer) = http(panel, "POST", "/api/apply", &headers, body);
            assert_eq!(status, 403, "{headers:?}: {answer}");
        }
        assert_eq!(conditions(api), before);

        // Live charts: points come while traffic flows; then the page is photographed.
        browser.click("#revert");
        let traffic = std::thread::spawn({
            let target = target.clone();
            move || gen(&target, "4s")
        });
        browser.wait_until("document.querySelectorAll('#c-fps path').length >= 2 && document.getElementById('r-fps').textContent.includes('frames/s')", EVENT).unwrap();
        std::thread::sleep(Duration::from_secs(3));
        traffic.join().unwrap();
        // Chromium logs the refused apply's 400 as a failed load; nothing else may be there.
        let errors = browser.console_errors();
        assert!(
            errors
                .iter()
                .all(|e| e.contains("/api/apply") && e.contains("400")),
            "{errors:?}"
        );
        let wide = shots.join("ui-emulator-1280x720.png");
        browser.screenshot(&wide);
        is_png(&wide);
        browser.window_size(1280, 2400);
        let full = shots.join("ui-emulator-full.png");
        browser.screenshot(&full);
        is_png(&full);
        browser.window_size(390, 844);
        let phone = shots.join("ui-emulator-390x844.png");
        browser.screenshot(&phone);
        is_png(&phone);
        let fits = "document.documentElement.scrollWidth <= window.innerWidth + 1";
        if let Err(e) = browser.wait_until(fits, EVENT) {
            let wide = browser.execute(
                "return [...document.querySelectorAll('body *')]\
                 .filter((e) => e.getBoundingClientRect().right > window.innerWidth + 1)\
                 .slice(0, 8).map((e) => e.tagName + '#' + e.id + '.' + e.className);",
                Vec::new(),
            );
            panic!("{e}: wider than a phone: {wide}");
        }
        std::fs::write(
            shots.join("ui-latency.txt"),
            format!("API changes shown on the page after (ms): {shown:?}\n"),
        )
        .unwrap();
    });
    let _ = Command::new("kill")
        .args(["-TERM", &run_id.to_string()])
        .status();
    let status = run.wait().unwrap();
    let rest = rest.join().unwrap();
    checked.unwrap();
    assert_eq!(status.code(), Some(143), "{rest:?}");
}

#[test]
fn the_generator_board_draws_the_run_as_it_grows_and_keeps_it_after() {
    let _turn = engines();
    // The browser first: the run is shown while it goes on, so its start must not eat the run.
    let Some(browser) = Browser::start() else {
        return;
    };
    let (shots, _temp) = screenshots();
    browser.window_size(1280, 720);
    let bin = assert_cmd::cargo::cargo_bin("latlab");
    let mut echo = Command::new(&bin);
    echo.args(["echo", "--listen", "127.0.0.1:0", "--poll", "block"]);
    let echo = common::started(echo, "listening on");
    let target = echo.word_after("listening on ");
    let out = tempfile::tempdir().unwrap();
    let dir = out.path().join("run");
    let mut gen = Command::new(&bin);
    gen.args([
        "gen",
        "--target",
        &target,
        "--rate",
        "500",
        "--duration",
        "10s",
    ])
    .args(["--poll", "block", "--ui", "127.0.0.1:0", "--out"])
    .arg(&dir)
    .stdout(Stdio::null());
    let gen = common::started(gen, "live page on");
    let url = gen.word_after("live page on ");
    browser.goto(&url);
    // Percentiles with their intervals, the CCDF and the series, while the run goes on.
    browser
        .wait_until(
            "document.getElementById('status').textContent === 'running' && \
             document.querySelector('#percentiles tbody tr td') && \
             document.querySelector('#percentiles tbody tr td').textContent.match(/[µm]s$/) && \
             document.querySelectorAll('#ccdf path').length >= 1 && \
             document.querySelectorAll('#series path').length >= 3",
            EVENT,
        )
        .unwrap();
    let p50 = browser.text("#percentiles tbody tr");
    assert!(p50.starts_with("p50"), "{p50}");
    assert!(p50.contains('–'), "an interval beside the value: {p50}");
    let counts = browser.text("#counts");
    assert!(counts.contains("sender lag p99"), "{counts}");
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    let live = shots.join("ui-gen-live.png");
    browser.screenshot(&live);
    is_png(&live);
    // After the run: its final figures and the files it wrote, still served.
    browser
        .wait_until(
            "document.getElementById('status').textContent === 'finished' && \
             [...document.querySelectorAll('#files a')].some((a) => a.textContent.endsWith('summary.json'))",
            EVENT,
        )
        .unwrap();
    let last = browser
        .text("#final")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(last.contains("sent") && last.contains("p99"), "{last}");
    let written: Value =
        serde_json::from_slice(&std::fs::read(dir.join("summary.json")).unwrap()).unwrap();
    assert!(
        last.contains(&format!("sent {}", written["sent"])),
        "the page's figures are the file's: {last} / sent {}",
        written["sent"]
    );
    let samples = browser.text("#samples");
    assert!(
        samples.starts_with(&format!("{} answers", written["received"])),
        "after the run, the percentiles are of every answer: {samples}"
    );
    let served = browser.execute(
        "const name = [...document.querySelectorAll('#files a')].map((a) => a.textContent)\
           .find((n) => n.endsWith('summary.json'));\
         const token = new URLSearchParams(location.search).get('token');\
         return fetch('/api/file?name=' + encodeURIComponent(name), \
           { headers: { 'X-Latlab-Token': token } }).then((r) => r.json());",
        Vec::new(),
    );
    assert_eq!(served["sent"], written["sent"], "{served}");
    assert_eq!(browser.console_errors(), Vec::<String>::new());
    let done = shots.join("ui-gen-finished.png");
    browser.screenshot(&done);
    is_png(&done);
    drop(browser);
    gen.signal("TERM");
    let (status, stderr) = gen.wait();
    assert!(stderr.contains("its page stays on"), "{stderr}");
    assert!(status.code().is_some(), "{stderr}");
    echo.signal("TERM");
}
