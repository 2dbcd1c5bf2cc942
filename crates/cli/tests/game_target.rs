//! `latlab study game-server --target`: the load sweep against a server latlab did not
//! start, here a UDP echo server of this test's own that answers at most a fixed number of
//! requests a second and drops the rest.

mod common;

use std::net::UdpSocket;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use assert_cmd::cargo::cargo_bin;

/// Requests a second the capped server answers.
const CAPACITY: f64 = 600.0;

/// An RFC 862 echo server on loopback that answers at most [`CAPACITY`] datagrams a second
/// (a token bucket 20 deep) and drops the rest; stops and joins on drop.
struct CappedEcho {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    answered: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl CappedEcho {
    fn start() -> CappedEcho {
        CappedEcho::on(UdpSocket::bind("127.0.0.1:0").unwrap())
    }

    fn on(socket: UdpSocket) -> CappedEcho {
        socket
            .set_read_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let addr = socket.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let answered = Arc::new(AtomicU64::new(0));
        let dropped = Arc::new(AtomicU64::new(0));
        let thread = {
            let (stop, answered, dropped) = (stop.clone(), answered.clone(), dropped.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 2048];
                let (depth, mut tokens, mut last) = (20.0, 20.0, Instant::now());
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, from)) = socket.recv_from(&mut buf) else {
                        continue;
                    };
                    let now = Instant::now();
                    tokens = f64::min(
                        depth,
                        tokens + now.duration_since(last).as_secs_f64() * CAPACITY,
                    );
                    last = now;
                    if tokens >= 1.0 {
                        tokens -= 1.0;
                        if socket.send_to(&buf[..n], from).is_ok() {
                            answered.fetch_add(1, Ordering::Relaxed);
                        }
                    } else {
                        dropped.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        };
        CappedEcho {
            addr,
            stop,
            answered,
            dropped,
            thread: Some(thread),
        }
    }
}

impl Drop for CappedEcho {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn study(target: &str, out: &std::path::Path, resume: bool) -> std::process::Output {
    let mut cmd = std::process::Command::new(cargo_bin("latlab"));
    cmd.args(["study", "game-server", "--target", target])
        .args(["--protocol", "echo", "--loads", "200,400,800,1600"])
        .args(["--duration", "400ms", "--out"])
        .arg(out);
    if resume {
        cmd.arg("--resume");
    }
    cmd.output().unwrap()
}

fn json(path: &std::path::Path) -> serde_json::Value {
    common::read_json(path)
}

#[test]
fn the_study_finds_a_capped_servers_first_drop_draws_table_one_and_resumes() {
    let _turn = common::engines();
    let server = CappedEcho::start();
    let target = server.addr.to_string();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let run = study(&target, &out, false);
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");

    // The sweep's points, in load order, each adding up.
    let sweep: Vec<serde_json::Value> = [200, 400, 800, 1600]
        .iter()
        .map(|l| out.join(format!("points/target-sweep-echo-{l}pps.json")))
        .filter(|p| p.is_file())
        .map(|p| json(&p))
        .collect();
    let mut answered_in_points = 0;
    for p in &sweep {
        assert_eq!(p["target"], target.as_str());
        assert_eq!(p["protocol"], "echo");
        let (sent, answered, unanswered) = (
            p["sent"].as_u64().unwrap(),
            p["answered"].as_u64().unwrap(),
            p["unanswered"].as_u64().unwrap(),
        );
        assert!(sent > 0, "{p}");
        assert_eq!(answered + unanswered, sent, "{p}");
        answered_in_points += answered;
    }
    // 1600/s is more than twice what the server answers: the sweep reaches a first drop,
    // whose load is a sweep load, and it goes no further than one load past it.
    let loss = |p: &serde_json::Value| p["loss_ratio"].as_f64().unwrap();
    let drop_at = sweep
        .iter()
        .position(|p| loss(p) > 0.05)
        .expect("a load above the server's cap drops");
    let first_drop = sweep[drop_at]["load_pps"].as_f64().unwrap();
    assert!(sweep.len() <= drop_at + 2, "past the drop: {sweep:?}");
    assert!(sweep[..drop_at].iter().all(|p| loss(p) <= 0.05));

    // Table I at 20, 90 and 110% of it.
    for (fraction, pct) in [(0.2, 20), (0.9, 90), (1.1, 110)] {
        let load = (first_drop * fraction).round();
        let p = json(&out.join(format!("points/target-table-echo-{load}pps.json")));
        assert_eq!(p["phase"], "table");
        assert_eq!(p["load_fraction"].as_f64(), Some(fraction), "{pct}%");
        assert_eq!(
            p["answered"].as_u64().unwrap() + p["unanswered"].as_u64().unwrap(),
            p["sent"].as_u64().unwrap()
        );
        answered_in_points += p["answered"].as_u64().unwrap();
    }
    // The server answered every answer the points counted (and the check's, and warm-up's).
    assert!(server.answered.load(Ordering::Relaxed) >= answered_in_points);
    assert!(server.dropped.load(Ordering::Relaxed) > 0);

    for f in [
        "study.json",
        "report.md",
        "table1.md",
        "table1.csv",
        "fig2-latency-vs-load.svg",
        "fig3-ccdf.svg",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains(&format!("- server: {target}")), "{report}");
    assert!(report.contains("- protocol: echo"), "{report}");
    assert!(report.contains("- link: none emulated"), "{report}");
    assert!(
        report.contains(&format!("First drop: **{first_drop:.0} requests/s**")),
        "{report}"
    );
    let table = std::fs::read_to_string(out.join("table1.md")).unwrap();
    assert_eq!(table.lines().count(), 5, "{table}");
    let parameters = &json(&out.join("study.json"))["parameters"];
    assert_eq!(parameters["--target"], target.as_str());
    assert_eq!(parameters["--protocol"], "echo");

    // latlab report draws the same files again from the points.
    assert!(common::report_redraws_as_written(&out).contains("report.md"));

    // --resume measures nothing again.
    let resumed = study(&target, &out, true);
    let stderr = String::from_utf8_lossy(&resumed.stderr);
    assert!(resumed.status.success(), "{stderr}");
    let points = std::fs::read_dir(out.join("points"))
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "json")
        })
        .count();
    assert_eq!(
        stderr.matches("is done, skipped").count(),
        points,
        "{stderr}"
    );
    // Resuming it in another protocol is refused, in one line, exit 2.
    let other = std::process::Command::new(cargo_bin("latlab"))
        .args([
            "study",
            "game-server",
            "--target",
            &target,
            "--protocol",
            "latlab",
        ])
        .args(["--loads", "200", "--duration", "400ms", "--resume", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&other.stderr);
    assert_eq!(other.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--protocol echo, not latlab"), "{stderr}");
}

#[test]
fn a_target_study_against_nothing_fails_at_once_with_the_reason() {
    // A port nobody listens on: the check before the sweep fails, and no point is written.
    let free = UdpSocket::bind("127.0.0.1:0").unwrap();
    let target = free.local_addr().unwrap().to_string();
    drop(free);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let run = study(&target, &out, false);
    assert_eq!(run.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains(&target), "{stderr}");
    let written = std::fs::read_dir(out.join("points")).map_or(0, |d| d.count());
    assert_eq!(written, 0);
}

#[test]
fn flags_that_do_not_go_with_a_target_exit_2_in_one_line() {
    let t = ["study", "game-server", "--target", "127.0.0.1:9"];
    for (extra, needle) in [
        (
            &["--clients", "4"][..],
            "--clients does not go with --target",
        ),
        (
            &["--rcvbuf", "64k"][..],
            "--rcvbuf does not go with --target",
        ),
        (&["--io", "socket"][..], "--io does not go with --target"),
        (&["--work-cycles", "10"][..], "--work-cycles"),
        (&["--no-flood"][..], "--no-flood"),
        (&["--loopback"][..], "--loopback"),
        (&["--model", "fixed:100@50ms"][..], "--model"),
        (
            &["--protocol", "gopher"][..],
            "\"gopher\" is not a protocol",
        ),
        (
            &["--protocol", "echo", "--keys", "3"][..],
            "--keys is a flag of --protocol memcached",
        ),
        (
            &["--link", "delay=10ms"][..],
            "--link: the study runs behind the link in a namespace of its own, where 127.0.0.1",
        ),
    ] {
        let args: Vec<&str> = t.iter().chain(extra).copied().collect();
        common::one_line_error(&args, needle);
        let code = std::process::Command::new(cargo_bin("latlab"))
            .args(&args)
            .env_remove("LATLAB_HOST")
            .output()
            .unwrap()
            .status
            .code();
        assert_eq!(code, Some(2), "{args:?}");
    }
    // The protocol flags need a target; --link needs one too.
    for (args, needle) in [
        (
            &["study", "game-server", "--protocol", "dns"][..],
            "--protocol needs --target",
        ),
        (
            &["study", "game-server", "--query", "a.example"][..],
            "--query needs --target",
        ),
        (
            &["study", "game-server", "--link", "delay=1ms"][..],
            "--target",
        ),
    ] {
        common::one_line_error(args, needle);
        let code = std::process::Command::new(cargo_bin("latlab"))
            .args(args)
            .output()
            .unwrap()
            .status
            .code();
        assert_eq!(code, Some(2), "{args:?}");
    }
}

/// `latlab study game-server` as `latlab run`'s CMD, behind an emulated 5 ms each way, against
/// the capped server at an address of the host side of the link: `--link` names that link, and
/// every answer took both delays.
#[test]
fn under_latlab_run_the_link_is_in_the_path_and_named_in_the_report() {
    if !common::namespaces_or_skip() {
        return;
    }
    let _turn = common::engines();
    let (host, server) = server_in_a_host_namespace();
    let target = server.addr;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let script = format!(
        "exec {} study game-server --target {target} --protocol echo \
         --link delay=5ms --loads 200,1600 --duration 300ms --out {}",
        cargo_bin("latlab").display(),
        out.display()
    );
    let run = std::process::Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", host.name()))
        .arg(cargo_bin("latlab"))
        .args(["run", "--delay", "5ms", "--", "sh", "-c", &script])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(
        report.contains("- link: delay=5ms (emulated by the `latlab run`"),
        "{report}"
    );
    let point = json(&out.join("points/target-sweep-echo-200pps.json"));
    assert_eq!(point["link"], "delay=5ms");
    assert!(point["answered"].as_u64().unwrap() > 0, "{point}");
    // No answer came back sooner than the link's two delays (less the histogram's bucket).
    let min = point["latency_ns"]["min"].as_u64().unwrap();
    assert!(min >= 9_900_000, "min {min} ns: {point}");
    assert_eq!(
        json(&out.join("study.json"))["parameters"]["--link"],
        "delay=5ms"
    );
}

/// A "host" namespace of this test's own, with the capped server on 198.18.99.1 (on its
/// loopback device; bound to it, so that its answers leave from it whatever the route).
fn server_in_a_host_namespace() -> (latlab_lab::topology::Namespace, CappedEcho) {
    static N: AtomicU64 = AtomicU64::new(0);
    let host = latlab_lab::topology::Namespace::create(&format!(
        "latlab-{}-g{}-host",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ))
    .unwrap();
    latlab_lab::topology::ip(&[
        "-n",
        host.name(),
        "addr",
        "add",
        "198.18.99.1/32",
        "dev",
        "lo",
    ])
    .unwrap();
    let socket = latlab_io::netns::run_in(host.name(), || UdpSocket::bind("198.18.99.1:0"))
        .unwrap()
        .unwrap();
    (host, CappedEcho::on(socket))
}

/// `--link SPEC` outside `latlab run`: the study runs itself again behind `latlab run`'s link,
/// and reaches the server at an address of this host through it.
#[test]
fn with_link_the_study_puts_itself_behind_the_emulated_link() {
    if !common::namespaces_or_skip() {
        return;
    }
    let _turn = common::engines();
    let (host, server) = server_in_a_host_namespace();
    let target = format!("198.18.99.1:{}", server.addr.port());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let run = std::process::Command::new("nsenter")
        .arg(format!("--net=/run/netns/{}", host.name()))
        .arg(cargo_bin("latlab"))
        .args([
            "study",
            "game-server",
            "--target",
            &target,
            "--protocol",
            "echo",
        ])
        .args([
            "--link",
            "delay=5ms",
            "--loads",
            "200,1600",
            "--duration",
            "300ms",
        ])
        .arg("--out")
        .arg(&out)
        .env_remove("LATLAB_HOST")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(run.status.success(), "{stderr}");
    let point = json(&out.join("points/target-sweep-echo-200pps.json"));
    assert_eq!(point["link"], "delay=5ms");
    assert_eq!(point["target"], target.as_str());
    assert!(point["answered"].as_u64().unwrap() > 0, "{point}");
    let min = point["latency_ns"]["min"].as_u64().unwrap();
    assert!(min >= 9_900_000, "min {min} ns: {point}");
    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("- link: delay=5ms"), "{report}");
}

/// A SIGTERM sent to the study alone (not to its process group) while it runs itself behind
/// `--link` reaches the study behind the link: it ends as a stopped study does, exit 143, with
/// the points it finished written whole.
#[test]
fn sigterm_to_a_study_behind_its_link_stops_the_study_behind_it() {
    if !common::namespaces_or_skip() {
        return;
    }
    let _turn = common::engines();
    let (host, server) = server_in_a_host_namespace();
    let target = format!("198.18.99.1:{}", server.addr.port());
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let mut cmd = std::process::Command::new("nsenter");
    cmd.arg(format!("--net=/run/netns/{}", host.name()))
        .arg(cargo_bin("latlab"))
        .args(["study", "game-server", "--target", &target])
        .args(["--protocol", "echo", "--link", "delay=1ms"])
        .args([
            "--loads",
            "100,200,300,400,500,600,700,800",
            "--duration",
            "1s",
        ])
        .arg("--out")
        .arg(&out)
        .env_remove("LATLAB_HOST")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let child = common::Reaped::new(cmd.spawn().unwrap());
    // The first point is written (an event, waited for up to 60 s), then the signal goes.
    let first = out.join("points/target-sweep-echo-100pps.json");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !first.exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "no first point in 60 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    common::signal_pid(child.id(), "TERM");
    let output = child.into_inner().wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(143), "{stderr}");
    // Every point file there is whole; the last load was never reached.
    let points: Vec<_> = std::fs::read_dir(out.join("points"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    for p in &points {
        if p.extension().is_some_and(|e| e == "json") {
            let point = json(p);
            assert_eq!(point["link"], "delay=1ms", "{point}");
        }
    }
    assert!(
        !out.join("points/target-sweep-echo-800pps.json").exists(),
        "{points:?}"
    );
}
