//! `latlab run -- CMD`: CMD behind the emulated link, in namespaces these tests make. Each test
//! runs latlab inside a "host" namespace of its own (`nsenter --net=… latlab run …`), so the
//! host side's interface, the NAT table and forwarding are made there, never in the machine's
//! own namespace, and the host's state (links, addresses, routes, nftables, forwarding) is
//! compared before and after.

mod common;

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{engines, namespaces_or_skip};
use latlab_lab::topology::{ip, namespace_exists, Namespace};

/// `nsenter --net=/run/netns/NS latlab`: latlab in the network namespace `ns` and the machine's
/// mount namespace, as on a host (`ip netns exec` would give it mounts of its own, which take
/// the namespaces it makes with them when it is killed); nsenter execs latlab, so the child's
/// id is latlab's own.
fn in_ns(ns: &str) -> Command {
    let mut c = Command::new("nsenter");
    c.arg(format!("--net=/run/netns/{ns}"))
        .arg(assert_cmd::cargo::cargo_bin("latlab"));
    c
}

/// A namespace standing for the host, made by this test, removed on drop.
fn make_ns(role: &str) -> Namespace {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Namespace::create(&format!("latlab-{}-t{n}-{role}", std::process::id())).unwrap()
}

/// What `latlab run` may change in `ns`, and must have put back when it ends.
fn state(ns: &str) -> Vec<String> {
    let mut state = vec![
        ip(&["-n", ns, "-d", "-j", "link", "show"]).unwrap(),
        // IPv4 only: an IPv6 link-local address of the test's own may still be tentative.
        ip(&["-n", ns, "-4", "-j", "addr", "show"]).unwrap(),
        ip(&["-n", ns, "-4", "-j", "route", "show", "table", "all"]).unwrap(),
        // What was set, not what the neighbour cache learnt meanwhile.
        ip(&["-n", ns, "-j", "neigh", "show", "nud", "permanent"]).unwrap(),
    ];
    let exec = |args: &[&str]| {
        let out = Command::new("ip")
            .args(["netns", "exec", ns])
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    state.push(exec(&["cat", "/proc/sys/net/ipv4/ip_forward"]));
    if Command::new("nft").arg("--version").output().is_ok() {
        state.push(exec(&["nft", "list", "ruleset"]));
    }
    state
}

/// Checks that `ns` is as `before` says, naming the part that differs.
fn assert_as_before(ns: &str, before: &[String]) {
    let now = state(ns);
    for (i, (a, b)) in before.iter().zip(&now).enumerate() {
        assert_eq!(a, b, "part {i} of the host's state changed");
    }
}

/// `latlab run ARGS` in `host`, to its end.
fn run_in(host: &Namespace, args: &[&str]) -> std::process::Output {
    in_ns(host.name()).arg("run").args(args).output().unwrap()
}

/// The namespace named in a run's start line.
fn run_namespace(stderr: &str) -> String {
    stderr
        .lines()
        .find_map(|l| l.split(" in namespace ").nth(1))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no start line in {stderr}"))
        .to_string()
}

/// A sockperf server in `ns` on `port`, ended on drop.
struct Sockperf(std::process::Child);

impl Sockperf {
    fn start(ns: &str, port: u16) -> Option<Sockperf> {
        if !latlab_io::precondition::met(
            latlab_lab::command::debian_tool("sockperf", &["--version"], &["sockperf"]).err(),
        ) {
            return None;
        }
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "sockperf", "server", "-i", "0.0.0.0"])
            .args(["-p", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(1000));
        Some(Sockperf(child))
    }
}

impl Drop for Sockperf {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// sockperf's median latency (half the round trip), µs, from its output.
fn sockperf_p50_us(out: &str) -> f64 {
    out.lines()
        .find_map(|l| l.split("percentile 50.000 = ").nth(1))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no median in sockperf's output:\n{out}"))
}

#[test]
fn a_delay_is_added_to_what_cmd_measures_and_the_host_is_left_as_it_was() {
    if !namespaces_or_skip() {
        return;
    }
    let _turn = engines();
    let host = make_ns("host");
    let Some(_server) = Sockperf::start(host.name(), 11111) else {
        return;
    };
    let before = state(host.name());
    let json = tempfile::tempdir().unwrap();
    let json = json.path().join("emu.json");
    let out = run_in(
        &host,
        &[
            "--delay",
            "10ms",
            "--json",
            json.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "sockperf ping-pong -i $LATLAB_HOST -p 11111 -t 2 --mps 200 2>&1",
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // sockperf reports half the round trip: 10 ms each way, plus the veths' own and what a
    // loaded machine adds; a delay applied twice would make it 40 ms.
    let rtt_ms = 2.0 * sockperf_p50_us(&stdout) / 1000.0;
    assert!((20.0..39.0).contains(&rtt_ms), "round trip {rtt_ms} ms");
    let report = common::read_json(&json);
    // Ping-pong: one message in flight, 20 ms each, for 2 s: how many fit is the machine's.
    assert!(report["a_to_b"]["sent"].as_u64().unwrap() > 0, "{report}");
    assert!(
        stderr.contains("up: delay=10ms; down: delay=10ms"),
        "{stderr}"
    );
    assert!(stderr.contains("(LATLAB_HOST)"), "{stderr}");
    assert!(!namespace_exists(&run_namespace(&stderr)));
    assert_as_before(host.name(), &before);
}

#[test]
fn cmd_exit_status_is_latlabs_and_127_when_it_cannot_start() {
    if !namespaces_or_skip() {
        return;
    }
    let _turn = engines();
    let host = make_ns("host");
    let before = state(host.name());
    let out = run_in(
        &host,
        &["--", "sh", "-c", "test -n \"$LATLAB_ADDR\" && exit 7"],
    );
    assert_eq!(out.status.code(), Some(7));
    // A program that cannot be found is refused in one line, as a shell says it, before
    // anything is built (no start line, no namespace).
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain");
    std::fs::write(&plain, "").unwrap();
    let plain = plain.to_str().unwrap();
    for (cmd, line) in [
        (
            "nosuchcmd",
            "error: nosuchcmd: command not found".to_string(),
        ),
        (
            "/no/such/program",
            "error: /no/such/program: no such file or directory".to_string(),
        ),
        (plain, format!("error: {plain}: not an executable file")),
    ] {
        let out = run_in(&host, &["--", cmd]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(127), "{stderr}");
        assert_eq!(stderr.trim_end(), line);
    }
    assert_as_before(host.name(), &before);
}

#[test]
fn shell_runs_the_users_shell_behind_the_link() {
    if !namespaces_or_skip() {
        return;
    }
    let _turn = engines();
    let host = make_ns("host");
    let mut shell = in_ns(host.name())
        .args(["shell", "--delay", "1ms"])
        .env("SHELL", "/bin/sh")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write;
    shell
        .stdin
        .take()
        .unwrap()
        .write_all(b"ip -4 -o addr show dev veth0; echo host=$LATLAB_HOST; exit 3\n")
        .unwrap();
    let out = shell.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stdout}");
    // Its own lines are `latlab shell`'s: the start line and the end line.
    let own: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("latlab "))
        .collect();
    assert_eq!(own.len(), 2, "{stderr}");
    assert!(
        own.iter().all(|l| l.starts_with("latlab shell: ")),
        "{stderr}"
    );
    assert!(stdout.contains("inet 198.19."), "{stdout}");
    assert!(stdout.contains("host=198.19."), "{stdout}");
}

#[test]
fn runs_at_once_get_subnets_of_their_own_and_a_subnet_in_use_is_refused() {
    if !namespaces_or_skip() {
        return;
    }
    let _turn = engines();
    let host = make_ns("host");
    let before = state(host.name());
    let script = "echo $LATLAB_ADDR; sleep 1";
    let runs: Vec<_> = (0..2)
        .map(|_| {
            in_ns(host.name())
                .args(["run", "--", "sh", "-c", script])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let addrs: Vec<String> = runs
        .into_iter()
        .map(|r| {
            let out = r.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8_lossy(&out.stdout).trim().to_string()
        })
        .collect();
    assert_ne!(addrs[0], addrs[1]);
    assert!(addrs.iter().all(|a| a.starts_with("198.19.")), "{addrs:?}");
    ip(&[
        "-n",
        host.name(),
        "link",
        "add",
        "d0",
        "type",
        "veth",
        "peer",
        "name",
        "d1",
    ])
    .unwrap();
    ip(&[
        "-n",
        host.name(),
        "addr",
        "add",
        "198.19.9.1/24",
        "dev",
        "d0",
    ])
    .unwrap();
    let out = run_in(&host, &["--subnet", "198.19.9.4/30", "--", "true"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("--subnet 198.19.9.4/30: 198.19.9.0/24 is already"),
        "{stderr}"
    );
    ip(&["-n", host.name(), "link", "del", "d0"]).unwrap();
    assert_as_before(host.name(), &before);
}

/// Starts `latlab run ARGS -- sleep 30` in `host` and returns it with the namespace its start
/// line names, once it has started.
fn started(host: &Namespace, args: &[&str]) -> (std::process::Child, String) {
    let mut child = in_ns(host.name())
        .arg("run")
        .args(args)
        .args(["--", "sleep", "30"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let line = lines.next().unwrap().unwrap();
    // Keep reading, so a later line never blocks latlab on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, run_namespace(&line))
}

fn signal(pid: u32, name: &str) {
    let sent = Command::new("kill")
        .args(["-s", name, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

#[test]
fn sigterm_ends_cmd_and_kill_9_leaves_what_latlab_clean_removes() {
    if !namespaces_or_skip() {
        return;
    }
    let _turn = engines();
    let host = make_ns("host");
    let nat = Command::new("nft").arg("--version").output().is_ok();
    if !nat {
        latlab_io::precondition::missing("nftables' nft is not installed");
    }
    let before = state(host.name());

    let (mut run, ns) = started(&host, &["--delay", "1ms"]);
    assert!(namespace_exists(&ns));
    signal(run.id(), "TERM");
    let status = run.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(143),
        "sleep ended by the SIGTERM passed on"
    );
    assert!(!namespace_exists(&ns));
    assert_as_before(host.name(), &before);

    let args: &[&str] = if nat { &["--nat"] } else { &[] };
    let (mut run, ns) = started(&host, args);
    assert_ne!(state(host.name()), before, "the run's interface is there");
    signal(run.id(), "KILL");
    run.wait().unwrap();
    assert!(namespace_exists(&ns), "kill -9 leaves the namespace");
    let out = in_ns(host.name()).arg("clean").output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(stdout.contains(&ns), "{stdout}");
    if nat {
        assert!(stdout.contains("nftables table"), "{stdout}");
        assert!(stdout.contains("ip_forward back"), "{stdout}");
    }
    assert!(!namespace_exists(&ns));
    // The kernel destroys a deleted namespace's interfaces a moment later.
    let deadline = Instant::now() + Duration::from_secs(30);
    while state(host.name()) != before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_as_before(host.name(), &before);
}

#[test]
fn nat_reaches_a_namespace_beyond_the_host() {
    if !namespaces_or_skip() {
        return;
    }
    if Command::new("nft").arg("--version").output().is_err() {
        latlab_io::precondition::missing("nftables' nft is not installed");
        return;
    }
    let _turn = engines();
    let host = make_ns("host");
    let outside = make_ns("outside");
    ip(&[
        "-n",
        host.name(),
        "link",
        "add",
        "out",
        "type",
        "veth",
        "peer",
        "name",
        "out",
        "netns",
        outside.name(),
    ])
    .unwrap();
    for (ns, addr) in [(&host, "198.18.200.1/30"), (&outside, "198.18.200.2/30")] {
        ip(&["-n", ns.name(), "addr", "add", addr, "dev", "out"]).unwrap();
        ip(&["-n", ns.name(), "link", "set", "out", "up"]).unwrap();
    }
    let Some(_server) = Sockperf::start(outside.name(), 11112) else {
        return;
    };
    let before = state(host.name());
    let ping = "sockperf ping-pong -i 198.18.200.2 -p 11112 -t 1 --mps 100 2>&1";
    // The outside has no route back to the run's subnet: only the masquerade answers.
    let out = run_in(&host, &["--", "sh", "-c", ping]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("No messages were received"));
    let out = run_in(&host, &["--nat", "--delay", "5ms", "--", "sh", "-c", ping]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // 5 ms each way: the median round trip is at least 10 ms, plus the veths' own and what a
    // loaded machine adds; a delay applied twice would make it 20 ms.
    let rtt_ms = 2.0 * sockperf_p50_us(&stdout) / 1000.0;
    assert!((10.0..19.0).contains(&rtt_ms), "round trip {rtt_ms} ms");
    assert_as_before(host.name(), &before);
}

#[test]
fn kill_9_at_any_stage_of_the_setup_leaves_what_latlab_clean_removes() {
    if !namespaces_or_skip() {
        return;
    }
    let nat = Command::new("nft").arg("--version").output().is_ok();
    if !nat {
        latlab_io::precondition::missing("nftables' nft is not installed");
    }
    let _turn = engines();
    let host = make_ns("host");
    let before = state(host.name());
    let args: &[&str] = if nat { &["--nat"] } else { &[] };
    // From before the first namespace to after CMD started: each kill lands at another step.
    for after_ms in [0, 5, 15, 30, 60, 120, 250] {
        let mut run = in_ns(host.name())
            .arg("run")
            .args(args)
            .args(["--", "sleep", "30"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(after_ms));
        signal(run.id(), "KILL");
        run.wait().unwrap();
        let out = in_ns(host.name()).arg("clean").output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while state(host.name()) != before && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        assert_as_before(host.name(), &before);
    }
}

#[test]
fn sigint_to_latlab_alone_is_passed_on_and_the_run_exits_130_and_cleans_up() {
    if !namespaces_or_skip() {
        return;
    }
    let _turn = engines();
    let host = make_ns("host");
    let before = state(host.name());
    // Sent to latlab's PID only, not to its process group: CMD would not see it unless latlab
    // passed it on, and sleep would run its 30 s and exit 0.
    let (mut run, ns) = started(&host, &["--delay", "1ms"]);
    assert!(namespace_exists(&ns));
    let sent = Instant::now();
    signal(run.id(), "INT");
    let status = run.wait().unwrap();
    assert_eq!(
        status.code(),
        Some(130),
        "sleep ended by the SIGINT passed on"
    );
    assert!(
        sent.elapsed() < Duration::from_secs(25),
        "CMD ran to its end"
    );
    assert!(!namespace_exists(&ns));
    assert_as_before(host.name(), &before);
}

#[test]
fn latlab_exits_with_128_and_the_signal_when_cmd_exits_0_after_it() {
    use latlab_emu::run::{exit_code, Received};
    let int = Received {
        number: 2,
        reached_cmd: true,
    };
    let term = Received {
        number: 15,
        reached_cmd: false,
    };
    assert_eq!(exit_code(0, None), 0);
    assert_eq!(exit_code(0, Some(int)), 130);
    assert_eq!(exit_code(0, Some(term)), 143);
    // CMD's own non-zero status stands: what ended it, or its own error.
    assert_eq!(exit_code(130, Some(int)), 130);
    assert_eq!(exit_code(1, Some(term)), 1);
    assert_eq!(exit_code(7, None), 7);
}

/// A direction of a run's end line, `up 7 frames in, 5 out, 0 dropped, 2 still queued at
/// exit (release error p50 …)`: (in, copies, out, dropped, queued).
fn end_counts(line: &str, direction: &str) -> (u64, u64, u64, u64, u64) {
    let part = line
        .split(&[':', ';'][..])
        .map(str::trim)
        .find(|p| p.starts_with(&format!("{direction} ")))
        .unwrap_or_else(|| panic!("no {direction} in {line}"));
    let number_before = |word: &str| -> u64 {
        let at = part
            .find(word)
            .unwrap_or_else(|| panic!("no {word:?} in {part}"));
        let n = part[..at].split_whitespace().last().unwrap();
        n.trim_start_matches("(+").parse().unwrap()
    };
    let copies = if part.contains(" copies)") {
        number_before(" copies)")
    } else {
        0
    };
    (
        number_before(" frames in"),
        copies,
        number_before(" out,"),
        number_before(" dropped,"),
        number_before(" still queued at exit"),
    )
}

#[test]
fn the_end_line_counts_what_was_still_queued_and_adds_up() {
    if !namespaces_or_skip() {
        return;
    }
    let _turn = engines();
    let host = make_ns("host");
    // Five datagrams to the host, and CMD ends at once: 2 s of delay holds them in the link.
    let script = "for i in 1 2 3 4 5; do echo x > /dev/udp/$LATLAB_HOST/9; done";
    let out = run_in(&host, &["--delay", "2s", "--", "bash", "-c", script]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let end = stderr.trim_end().lines().last().unwrap();
    assert!(end.starts_with("latlab run: up "), "{stderr}");
    for direction in ["up", "down"] {
        let (arrived, copies, sent, dropped, queued) = end_counts(end, direction);
        assert_eq!(
            arrived + copies,
            sent + dropped + queued,
            "{direction}: {end}"
        );
    }
    let (arrived, _, _, _, queued) = end_counts(end, "up");
    assert!(queued >= 5 && arrived >= 5, "{end}");
}

#[test]
fn run_api_prints_its_address_and_a_cleared_direction_says_so() {
    if !namespaces_or_skip() {
        return;
    }
    let _turn = engines();
    let host = make_ns("host");
    let mut child = in_ns(host.name())
        .args(["run", "--delay", "1ms", "--api", "127.0.0.1:0"])
        .args(["--", "sleep", "30"])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut next_line = || lines.next().unwrap().unwrap();
    let start = next_line();
    assert!(
        start.starts_with("latlab run: sleep in namespace "),
        "{start}"
    );
    // As `latlab emu --api` says it, with the run's name.
    let api = next_line();
    let addr = api
        .strip_prefix("latlab run: API on http://")
        .and_then(|rest| rest.strip_suffix("/conditions and /metrics"))
        .unwrap_or_else(|| panic!("{api}"))
        .to_string();
    let addr: std::net::SocketAddr = addr.parse().unwrap();
    assert_ne!(addr.port(), 0, "{api}");
    let status = latlab_io::netns::run_in(host.name(), move || {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let body = "delay=0ms";
        write!(
            s,
            "PUT /conditions/b-to-a HTTP/1.1\r\nHost: run\r\nConnection: close\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    })
    .unwrap();
    assert!(status.starts_with("HTTP/1.1 200"), "{status}");
    let changed = std::iter::repeat_with(&mut next_line)
        .find(|l| l.contains("b_to_a"))
        .unwrap();
    assert!(
        changed.ends_with("b_to_a cleared (no conditions)"),
        "{changed}"
    );
    signal(child.id(), "TERM");
    let rest: Vec<String> = lines.map(|l| l.unwrap()).collect();
    assert_eq!(child.wait().unwrap().code(), Some(143), "{rest:?}");
}

#[test]
fn a_delay_trace_sets_the_round_trips_cmd_measures() {
    if !namespaces_or_skip() {
        return;
    }
    let _turn = engines();
    let host = make_ns("host");
    let _echo = common::echo_in(host.name(), "0.0.0.0:7777", &[]);
    let dir = tempfile::tempdir().unwrap();
    // 5 ms each way for a second, then 40 ms for a second, stepwise, repeated.
    let trace = dir.path().join("delays.txt");
    std::fs::write(&trace, "# TIME_MS DELAY_MS\n0 5\n1000 40\n").unwrap();
    let json = dir.path().join("gen.json");
    let gen = format!(
        "{} gen --target $LATLAB_HOST:7777 --rate 200 --duration 4s --poll block --json {}",
        assert_cmd::cargo::cargo_bin("latlab").display(),
        json.display()
    );
    let trace_arg = trace.to_str().unwrap();
    let out = run_in(
        &host,
        &[
            "--delay-trace",
            trace_arg,
            "--delay-trace-step",
            "1s",
            "--delay-trace-mode",
            "step",
            "--",
            "sh",
            "-c",
            &gen,
        ],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("delay-trace={trace_arg}")),
        "{stderr}"
    );
    let summary = common::read_json(&json);
    let ms = |key: &str| summary["latency_ns"][key].as_f64().unwrap() / 1e6;
    // Four seconds are two periods: the fastest round trips are the low level's (5 ms each
    // way), a tenth of them at least the high level's (40 ms each way). A machine's delays
    // only add to both; a trace not applied, or applied once, would stay under 80 ms.
    assert!(
        ms("min") >= 10.0,
        "fastest {} ms, 2 × 5 ms in the trace",
        ms("min")
    );
    assert!(
        ms("min") < 45.0,
        "fastest {} ms: the 5 ms level never showed",
        ms("min")
    );
    assert!(
        ms("p90") >= 80.0,
        "p90 {} ms, 2 × 40 ms in the trace",
        ms("p90")
    );
}
