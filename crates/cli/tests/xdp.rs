//! `latlab echo --io xdp` between two namespaces (root; must run under CI=true).

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;
use latlab_lab::topology::ClientServer;

/// What `ip link` shows of veth0 in namespace `ns`, and whether an XDP program is attached.
fn veth0_xdp(ns: &str) -> (bool, String) {
    let out = Command::new("ip")
        .args(["-n", ns, "link", "show", "dev", "veth0"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (text.split_whitespace().any(|w| w.starts_with("xdp")), text)
}

#[test]
fn echo_over_af_xdp_answers_gen_and_detaches_its_program() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientServer::namespaces().unwrap();
    let ClientServer::Namespaces {
        client,
        server,
        server_addr,
        ..
    } = &lab
    else {
        unreachable!("namespaces() builds namespaces")
    };
    let dir = tempfile::tempdir().unwrap();
    let run_json = dir.path().join("run.json");
    let echo_json = dir.path().join("echo.json");
    let target = format!("{server_addr}:7777");
    // It runs until the test stops it, once gen is done.
    let mut echo = common::in_ns(server.name());
    echo.args([
        "echo", "--io", "xdp", "--iface", "veth0", "--listen", &target,
    ])
    .arg("--json")
    .arg(&echo_json)
    .stdout(Stdio::null());
    let echo = common::started(echo, "latlab echo:");
    assert!(veth0_xdp(server.name()).0, "the program is attached");
    let gen = common::in_ns(client.name())
        .args([
            "gen",
            "--target",
            &target,
            "--rate",
            "2k",
            "--duration",
            "1s",
            "--poll",
            "block",
        ])
        .arg("--json")
        .arg(&run_json)
        .output()
        .unwrap();
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    echo.signal("TERM");
    let (status, stderr) = echo.wait();
    assert_eq!(status.code(), Some(143), "{stderr}");
    let run = common::read_json(&run_json);
    let (sent, received) = (
        run["sent"].as_u64().unwrap(),
        run["received"].as_u64().unwrap(),
    );
    // Copy mode on veth drops a few in a hundred on a loaded machine; a broken path, all.
    assert!(
        received >= sent / 2,
        "{received} of {sent} came back over AF_XDP"
    );
    let counters = common::read_json(&echo_json);
    assert_eq!(counters["io"], "xdp");
    assert!(counters["reflected"].as_u64().unwrap() >= received);
    let (attached, text) = veth0_xdp(server.name());
    assert!(!attached, "no program left attached: {text}");
}

#[test]
fn gen_over_af_xdp_measures_a_kernel_echo_and_detaches_its_program() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientServer::namespaces().unwrap();
    let ClientServer::Namespaces {
        client,
        server,
        server_addr,
        ..
    } = &lab
    else {
        unreachable!("namespaces() builds namespaces")
    };
    let dir = tempfile::tempdir().unwrap();
    let run_json = dir.path().join("run.json");
    let target = format!("{server_addr}:7777");
    let mut echo = common::in_ns(server.name())
        .args(["echo", "--listen", &target, "--duration", "4s"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // The static neighbour entry of the lab goes, so the generator must have the kernel
    // resolve the echo's MAC address itself.
    let flushed = Command::new("ip")
        .args([
            "-n",
            client.name(),
            "neigh",
            "flush",
            "dev",
            "veth0",
            "nud",
            "all",
        ])
        .status()
        .unwrap();
    assert!(flushed.success());
    let gen = common::in_ns(client.name())
        .args([
            "gen",
            "--io",
            "xdp",
            "--iface",
            "veth0",
            "--target",
            &target,
            "--rate",
            "5k",
            "--duration",
            "1s",
            "--flows",
            "2",
            "--no-check",
        ])
        .arg("--json")
        .arg(&run_json)
        .output()
        .unwrap();
    assert!(
        gen.status.success(),
        "{}",
        String::from_utf8_lossy(&gen.stderr)
    );
    assert!(echo.wait().unwrap().success());
    let run = common::read_json(&run_json);
    let (sent, received) = (
        run["sent"].as_u64().unwrap(),
        run["received"].as_u64().unwrap(),
    );
    // 5,000 probes, the first 500 as warm-up; a slow machine may leave some unsent.
    assert_eq!(sent + run["unsent"].as_u64().unwrap(), 4500, "{run}");
    assert!(sent > 0, "{run}");
    // Probes do come back through the program, and every one that did not is counted lost.
    // How many a copy-mode AF_XDP socket loses while its loop waits for a busy CPU depends on
    // the machine (4% with the other core busy compiling): a benchmark's figure, not this
    // test's.
    assert!(
        received > 0,
        "none came back to the AF_XDP generator: {run}"
    );
    assert_eq!(run["lost"].as_u64().unwrap(), sent - received, "{run}");
    assert_eq!(run["timestamp_source"], "xdp-program", "{run}");
    assert_eq!(run["malformed"]["not_a_probe"], 0, "{run}");
    let p50 = run["latency_ns"]["p50"].as_f64().unwrap();
    // The XDP program's stamps and the generator's clock agree: a round trip is positive and
    // shorter than the run and its grace.
    let max = run["latency_ns"]["max"].as_f64().unwrap();
    assert!(
        p50 > 0.0 && p50 <= max && max < 1.5e9,
        "p50 {p50} ns, max {max} ns"
    );
    let (attached, text) = veth0_xdp(client.name());
    assert!(!attached, "no program left attached: {text}");
}

#[test]
fn xdp_without_an_interface_says_what_is_missing() {
    let out = assert_cmd::Command::new(cargo_bin("latlab"))
        .args(["echo", "--io", "xdp", "--listen", "127.0.0.1:7777"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains("--iface"), "{stderr}");
    common::one_line_error(
        &[
            "gen",
            "--io",
            "xdp",
            "--target",
            "127.0.0.1:7777",
            "--rate",
            "1k",
        ],
        "--iface",
    );
}

#[test]
fn an_xdp_echo_stopped_by_sigint_leaves_no_program_attached() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientServer::namespaces().unwrap();
    let ClientServer::Namespaces {
        server,
        server_addr,
        ..
    } = &lab
    else {
        unreachable!("namespaces() builds namespaces")
    };
    let target = format!("{server_addr}:7777");
    let mut echo = Command::new("ip")
        .args(["netns", "exec", server.name()])
        .arg(cargo_bin("latlab"))
        .args([
            "echo", "--io", "xdp", "--iface", "veth0", "--listen", &target,
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let attached = || veth0_xdp(server.name()).0;
    let mut seen = false;
    // However slowly a loaded machine starts it (a minute at most).
    for _ in 0..1200 {
        std::thread::sleep(Duration::from_millis(50));
        if attached() {
            seen = true;
            break;
        }
    }
    assert!(seen, "the echo attached its program");
    // `ip netns exec` execs latlab, so the child's id is latlab's own.
    let sent = Command::new("kill")
        .args(["-INT", &echo.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    // Stopped by Ctrl-C: 128 + SIGINT.
    assert_eq!(echo.wait().unwrap().code(), Some(130));
    assert!(!attached(), "the program is gone after Ctrl-C");
}

#[test]
fn the_game_study_runs_the_af_xdp_server_row() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("study");
    let run = assert_cmd::Command::new(cargo_bin("latlab"))
        .args([
            "study",
            "game-server",
            "--clients",
            "4",
            "--loads",
            "2k",
            "--rcvbuf",
            "default",
        ])
        .args(["--io", "xdp", "--duration", "400ms", "--no-flood"])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let point = common::read_json(&out.join("points/sweep-xdp-c4-b208k-2000pps.json"));
    assert_eq!(point["io"], "xdp");
    assert_eq!(point["server"]["joins"], 4, "the handshake ran over AF_XDP");
    let sent = point["sent"].as_u64().unwrap();
    assert!(
        point["complete"].as_u64().unwrap() >= sent * 99 / 100,
        "{point}"
    );
    assert!(std::fs::read_to_string(out.join("table1.md"))
        .unwrap()
        .contains("| xdp |"));
}

#[test]
fn without_privileges_xdp_says_why_and_which_io_works_instead() {
    // Run as user `nobody` with no capabilities (needs root to switch, and util-linux's
    // setpriv); as a plain user the tests already run without privileges.
    let as_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0"));
    let setpriv = latlab_io::precondition::need_program("setpriv", "util-linux");
    let prefix: Vec<String> = if as_root && setpriv.is_none() {
        [
            "setpriv",
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "--inh-caps=-all",
        ]
        .map(String::from)
        .to_vec()
    } else if !as_root {
        Vec::new()
    } else {
        latlab_io::precondition::missing(setpriv.unwrap_or_default());
        return;
    };
    // emu bridges Ethernet-like interfaces only (loopback is refused before any privilege is
    // needed): as root, a veth pair of the test's own, unplugged and removed at the end.
    let veth = as_root.then(HostVeth::new);
    let emu_iface = veth.as_ref().map(|v| v.0.clone());
    let emu_peer = veth.as_ref().map(|v| v.1.clone());
    let emu_flag = emu_iface.as_ref().map(|i| format!("--iface-a {i}"));
    let mut cases = vec![(
        vec![
            "echo",
            "--io",
            "xdp",
            "--iface",
            "lo",
            "--listen",
            "127.0.0.1:7777",
        ],
        "--iface lo",
    )];
    if let (Some(iface), Some(peer), Some(flag)) = (&emu_iface, &emu_peer, &emu_flag) {
        // --iface-a fails first, when its socket opens: the claims on both interfaces, which
        // come before, cannot be written without privileges, and say nothing of it.
        cases.push((
            vec!["emu", "--io", "xdp", "--iface-a", iface, "--iface-b", peer],
            flag,
        ));
    }
    for (args, flag) in cases {
        let mut cmd = Command::new(prefix.first().map_or(cargo_bin("latlab"), |p| p.into()));
        if !prefix.is_empty() {
            cmd.args(&prefix[1..]).arg(cargo_bin("latlab"));
        }
        let out = cmd.args(&args).output().unwrap();
        assert!(
            !out.status.success(),
            "{args:?} succeeded without privileges"
        );
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
        for needle in [
            flag,
            "not permitted",
            "run as root",
            "--io socket",
            "--io packet",
        ] {
            assert!(stderr.contains(needle), "{needle:?} missing: {stderr}");
        }
    }
}

/// A veth pair in this namespace, named after the test's pid, with nothing on it (no address,
/// down): an Ethernet-like interface for a command that must fail before it sends anything;
/// deleted when dropped.
struct HostVeth(String, String);

impl HostVeth {
    fn new() -> HostVeth {
        let name = format!("lxp{}", std::process::id());
        let peer = format!("lxq{}", std::process::id());
        common::succeeds(
            Command::new("ip").args(["link", "add", &name, "type", "veth", "peer", "name", &peer]),
        );
        HostVeth(name, peer)
    }
}

impl Drop for HostVeth {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

/// Issue 10, item 5: over xdp a flooding source reached user space whatever `--rate-limit`
/// said. Now the program drops its excess and `serve --json` counts it: what the server
/// received and what the program dropped add up to what was sent.
#[test]
fn serve_over_xdp_drops_a_flood_above_the_rate_limit_in_the_program_and_counts_it() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let lab = ClientServer::namespaces().unwrap();
    let ClientServer::Namespaces {
        client,
        server,
        server_addr,
        client_addr,
        ..
    } = &lab
    else {
        unreachable!("namespaces() builds namespaces")
    };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("serve.json");
    let listen = format!("{server_addr}:7000");
    // It runs until the test stops it, once every datagram was sent.
    let mut cmd = common::in_ns(server.name());
    cmd.args([
        "serve",
        "--io",
        "xdp",
        "--iface",
        "veth0",
        "--listen",
        &listen,
        "--rate-limit",
        "1k",
    ])
    .arg("--json")
    .arg(&json)
    .stdout(Stdio::null());
    let serve = common::started(cmd, "latlab serve:");
    // 20,000 64-byte datagrams from one socket, 20 at a time with 1 ms sleeps between: a
    // second or more, however fast the machine.
    let to: std::net::SocketAddr = listen.parse().unwrap();
    let from = std::net::SocketAddr::new((*client_addr).into(), 0);
    let (sent, took) = latlab_io::netns::run_in(client.name(), move || {
        let socket = std::net::UdpSocket::bind(from).unwrap();
        let start = std::time::Instant::now();
        let mut sent = 0u64;
        for _ in 0..1000 {
            for _ in 0..20 {
                if socket.send_to(&[0u8; 64], to).is_ok() {
                    sent += 1;
                }
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        (sent, start.elapsed())
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    serve.signal("TERM");
    let (status, stderr) = serve.wait();
    assert_eq!(status.code(), Some(143), "{stderr}");
    let counters = common::read_json(&json);
    let received = counters["received"].as_u64().unwrap();
    let in_xdp = counters["xdp_rate_limited"].as_u64().unwrap();
    // At most the limit's 1k a second over the time they took, and its burst.
    let allowed = 1000.0 * took.as_secs_f64() + 300.0;
    assert!(
        (received as f64) <= allowed,
        "{received} of {sent} reached user space in {took:?}"
    );
    assert!(in_xdp > 0, "{counters:#}");
    // Nothing else on the link sends to the port: every datagram is one or the other.
    assert_eq!(received + in_xdp, sent, "{counters:#}");
}
