//! The long-running commands as the command line calls them: checked options in, a report out
//! whose `--json` file is on disk when it is returned.

use std::path::Path;
use std::time::Duration;

use latlab_lab::command::{Io, Quiet, ServerIo, Stop, View};
use latlab_lab::cores::PollChoice;
use latlab_lab::echo::EchoOptions;
use latlab_lab::serve::ServeOptions;

fn read_json(path: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// Records what a command shows.
#[derive(Default)]
struct Shown {
    started: Vec<String>,
    stopped: bool,
}

impl View for Shown {
    fn started(&mut self, line: &str) {
        self.started.push(line.to_string());
    }
    fn counters(&mut self, _line: &str) {}
    fn stopped(&mut self) {
        self.stopped = true;
    }
}

#[test]
fn echo_stops_after_its_duration_with_its_json_written() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("echo.json");
    let options = EchoOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        io: Io::Socket,
        iface: None,
        xdp_frames: 4096,
        rcvbuf: None,
        poll: PollChoice::Block,
        batch: 32,
        stamp: true,
        cpu: None,
        duration: Some(Duration::from_millis(300)),
        json: Some(json.clone()),
    };
    let mut shown = Shown::default();
    let report = latlab_lab::echo::run(&options, &Stop::new(), &mut shown).unwrap();
    assert_eq!(shown.started.len(), 1);
    assert!(
        shown.started[0].starts_with("latlab echo: listening on 127.0.0.1:"),
        "{:?}",
        shown.started
    );
    assert!(shown.stopped);
    assert_eq!(report.counters.received, 0);
    let text = report.text();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("received 0  reflected 0  malformed 0  oversized 0  send-dropped 0")
    );
    // Blocking, its stalls were a sampler's on its CPU.
    let stalls = lines.next().unwrap_or_default();
    assert!(stalls.starts_with("host stalls: "), "{text}");
    assert!(stalls.ends_with("sampler)"), "{text}");
    assert_eq!(report.json["host_stalls"]["source"], "sampler");
    assert_eq!(read_json(&json), report.json);
    assert_eq!(report.json["listen"], "127.0.0.1:0");
}

#[test]
fn serve_stops_when_its_stop_flag_is_raised_with_its_json_written() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("serve.json");
    let options = ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        io: ServerIo::Batched,
        iface: None,
        xdp_frames: 4096,
        rcvbuf: None,
        work_cycles: 150,
        max_clients: 64,
        rate_limit: None,
        idle_timeout: Some(Duration::from_secs(10)),
        max_clients_per_host: None,
        poll: PollChoice::Block,
        cpu: None,
        duration: None,
        json: Some(json.clone()),
    };
    let stop = Stop::new();
    let report = std::thread::scope(|s| {
        s.spawn(|| {
            std::thread::sleep(Duration::from_millis(300));
            stop.raise();
        });
        latlab_lab::serve::run(&options, &stop, &mut Quiet).unwrap()
    });
    assert_eq!(read_json(&json), report.json);
    assert_eq!(report.json["io"], "batched");
    assert_eq!(report.json["received"], 0);
    // The JSON, then the host's stalls of the server's loop (its sampler: it blocked).
    let stalls = report
        .host_stalls
        .as_ref()
        .expect("the server's loop was watched");
    assert_eq!(report.json["host_stalls"]["source"], "sampler");
    assert_eq!(
        report.text(),
        format!("{:#}\n{}", report.json, stalls.line())
    );
}

#[test]
fn serve_over_af_xdp_without_an_interface_is_refused_before_anything_opens() {
    let options = ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        io: ServerIo::Xdp,
        iface: None,
        xdp_frames: 4096,
        rcvbuf: None,
        work_cycles: 150,
        max_clients: 64,
        rate_limit: None,
        idle_timeout: Some(Duration::from_secs(10)),
        max_clients_per_host: None,
        poll: PollChoice::Block,
        cpu: None,
        duration: Some(Duration::from_millis(100)),
        json: None,
    };
    let error = latlab_lab::serve::run(&options, &Stop::new(), &mut Quiet).unwrap_err();
    assert_eq!(
        error.to_string(),
        "--io xdp needs --iface: the interface whose frames AF_XDP takes"
    );
}
