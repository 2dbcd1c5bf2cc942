//! The core plan at the defaults (issue 22): `latlab emu`, `echo` and `gen` started by hand,
//! each its own process in the namespaces of a `client — emu — server` lab, give the CPUs out
//! among themselves, as each one's `--json` report says (root; must run under CI=true).
//!
//! Each test runs its processes on two CPUs (`taskset`) and with a claims folder of its own
//! (`LATLAB_CPU_CLAIMS`), so the plan they make is the same on any machine and meets no other
//! latlab process of the host.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use assert_cmd::cargo::cargo_bin;
use latlab_lab::cores::CLAIMS_ENV;
use latlab_lab::topology::ClientEmuServer;

/// Two CPUs this test's processes run on, or `None` (skipped) on a machine with one.
fn two_cpus() -> Option<[usize; 2]> {
    let cpus = latlab_io::cpu::allowed_cpus().unwrap();
    match cpus.as_slice() {
        [.., a, b] => Some([*a, *b]),
        _ => {
            latlab_io::precondition::missing("one CPU: no plan to make");
            None
        }
    }
}

/// `taskset -c A,B ip netns exec NS latlab ARGS…` with the claims in `claims`.
fn latlab_in(ns: &str, cpus: [usize; 2], claims: &Path, args: &[&str]) -> Command {
    latlab_after(&[], ns, cpus, claims, args)
}

/// [`latlab_in`] started through `before` (a program and its arguments, which then runs
/// `taskset …`).
fn latlab_after(
    before: &[&str],
    ns: &str,
    cpus: [usize; 2],
    claims: &Path,
    args: &[&str],
) -> Command {
    let mut c = match before.split_first() {
        Some((program, rest)) => {
            let mut c = Command::new(program);
            c.args(rest).arg("taskset");
            c
        }
        None => Command::new("taskset"),
    };
    c.args(["-c", &format!("{},{}", cpus[0], cpus[1])])
        .args(["ip", "netns", "exec", ns])
        .arg(cargo_bin("latlab"))
        .args(args)
        .env(CLAIMS_ENV, claims)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    c
}

fn finished(child: Child, what: &str) -> String {
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{what}: {stderr}");
    stderr
}

/// Stops a server [`common::started`] with SIGTERM, which writes its report (exit 143), and
/// returns its standard error.
fn stopped(server: common::Started, what: &str) -> String {
    server.signal("TERM");
    let (status, stderr) = server.wait();
    assert_eq!(status.code(), Some(143), "{what}: {stderr}");
    stderr
}

/// Waits until a thread of process `pid` may run on CPU `cpu` alone, and returns its id; `tid`
/// names the one thread to look at. Up to 60 s, which only a loop that never moved reaches.
fn pinned_to(pid: u32, tid: Option<u64>, cpu: usize) -> u64 {
    let want = cpu.to_string();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).unwrap();
        let pinned = tasks.filter_map(|t| t.ok()).find_map(|t| {
            let id: u64 = t.file_name().to_str()?.parse().ok()?;
            let status = std::fs::read_to_string(t.path().join("status")).ok()?;
            let on = status
                .lines()
                .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))?
                .trim();
            (on == want && tid.is_none_or(|t| t == id)).then_some(id)
        });
        if let Some(id) = pinned {
            return id;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no thread of {pid} ({tid:?}) on CPU {cpu} alone"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `(poll, cpu)` of a report's placement.
fn placed(report: &serde_json::Value) -> (String, Option<u64>) {
    let p = &report["placement"];
    (p["poll"].as_str().unwrap().to_string(), p["cpu"].as_u64())
}

/// Whether a report's loop ran in `SCHED_FIFO`.
fn realtime(report: &serde_json::Value) -> bool {
    report["placement"]["realtime"].as_bool().unwrap()
}

#[test]
fn at_the_defaults_the_emulator_takes_a_cpu_of_its_own_and_gen_and_echo_block_off_it() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let Some(cpus) = two_cpus() else { return };
    let lab = ClientEmuServer::build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let claims = dir.path().join("claims");
    let json = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (emu_json, echo_json, gen_json) = (json("emu.json"), json("echo.json"), json("gen.json"));
    let emu = latlab_in(
        lab.emu.name(),
        cpus,
        &claims,
        &[
            "emu",
            "--iface-a",
            "emu-a",
            "--iface-b",
            "emu-b",
            "--delay",
            "1ms",
            "--json",
            &emu_json,
        ],
    );
    // Each one starts once the one before has taken its CPU (its start line), and the two
    // servers run until the run is over.
    let emu = common::started(emu, "bridging");
    let target = format!("{}:7777", lab.server_addr);
    let echo = latlab_in(
        lab.server.name(),
        cpus,
        &claims,
        &[
            "echo", "--listen", &target, "--rcvbuf", "4M", "--json", &echo_json,
        ],
    );
    let echo = common::started(echo, "latlab echo:");
    // Room in the sockets and time for the answers: on a busy machine the blocking loops on
    // the CPU the emulator leaves wait their turn (send lag in the 100s of ms was seen), and
    // this test is about where each loop runs, not about how soon it gets a CPU. The run ends
    // as soon as every answer is in.
    let gen = latlab_in(
        lab.client.name(),
        cpus,
        &claims,
        &[
            "gen",
            "--target",
            &target,
            "--rate",
            "2k",
            "--duration",
            "1s",
            "--rcvbuf",
            "4M",
            "--grace",
            "20s",
            "--json",
            &gen_json,
        ],
    )
    .spawn()
    .unwrap();
    let gen_err = finished(gen, "gen");
    let echo_err = stopped(echo, "echo");
    let emu_err = stopped(emu, "emu");
    let (emu, echo, gen) = (
        common::read_json(emu_json.as_ref()),
        common::read_json(echo_json.as_ref()),
        common::read_json(gen_json.as_ref()),
    );
    // The emulator came first: it takes the higher CPU, claimed, asleep between frames at
    // realtime priority (the tests run as root), and says so.
    let cpu = |n: usize| Some(n as u64);
    assert_eq!(placed(&emu), ("block".into(), cpu(cpus[1])), "{emu_err}");
    assert!(realtime(&emu), "{emu}");
    assert!(
        emu_err.contains(&format!(
            "asleep between frames at realtime priority, pinned to CPU {}",
            cpus[1]
        )),
        "{emu_err}"
    );
    // Taking the last free CPU would leave none to the blocking loops and the kernel: echo
    // and gen block, kept off the emulator's CPU.
    assert_eq!(placed(&echo), ("block".into(), cpu(cpus[0])), "{echo_err}");
    assert_eq!(placed(&gen), ("block".into(), cpu(cpus[0])), "{gen_err}");
    let reason = echo["placement"]["reason"].as_str().unwrap();
    assert!(
        reason.starts_with(&format!("emulator on CPU {}", cpus[1])),
        "{reason}"
    );
    // Nothing gave way, and the run went through the emulator whole.
    for report in [&emu, &echo, &gen] {
        assert_eq!(report["placement"]["changes"], serde_json::json!([]));
    }
    assert_eq!(gen["received"], gen["sent"], "{gen}");
    assert_eq!(emu["a_to_b"]["released_early"], 0);
    assert!(emu["contention"].as_array().is_some(), "{emu}");
}

#[test]
fn a_generator_spinning_before_the_emulator_gives_it_its_cpu_and_goes_on_blocking() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let Some(cpus) = two_cpus() else { return };
    let lab = ClientEmuServer::build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let claims = dir.path().join("claims");
    let json = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let (emu_json, gen_json) = (json("emu.json"), json("gen.json"));
    let target = format!("{}:7777", lab.server_addr);
    // The reflector blocks (explicit), so the generator finds both CPUs free and spins on the
    // higher; it cannot reach the reflector until the emulator bridges.
    let echo = latlab_in(
        lab.server.name(),
        cpus,
        &claims,
        &["echo", "--listen", &target, "--poll", "block"],
    );
    let echo = common::started(echo, "latlab echo:");
    // The generator runs until the test stops it, once it gave way.
    let gen = latlab_in(
        lab.client.name(),
        cpus,
        &claims,
        &[
            "gen",
            "--target",
            &target,
            "--rate",
            "1k",
            "--duration",
            "10m",
            "--no-check",
            "--json",
            &gen_json,
        ],
    );
    let gen = common::started(gen, "latlab gen:");
    // Its loop spins pinned to the higher CPU before the emulator starts.
    let spinning = pinned_to(gen.id(), None, cpus[1]);
    let emu = latlab_in(
        lab.emu.name(),
        cpus,
        &claims,
        &[
            "emu",
            "--iface-a",
            "emu-a",
            "--iface-b",
            "emu-b",
            "--json",
            &emu_json,
        ],
    );
    let emu = common::started(emu, "bridging");
    // Giving way pins the generator's loop to the CPU the emulator left: wait for that (an
    // event, not a time), then let probes cross the bridge for a moment.
    pinned_to(gen.id(), Some(spinning), cpus[0]);
    std::thread::sleep(Duration::from_millis(500));
    let gen_err = stopped(gen, "gen");
    stopped(emu, "emu");
    stopped(echo, "echo");
    let (emu, gen) = (
        common::read_json(emu_json.as_ref()),
        common::read_json(gen_json.as_ref()),
    );
    let cpu = |n: usize| Some(n as u64);
    assert_eq!(placed(&gen), ("busy".into(), cpu(cpus[1])), "{gen_err}");
    // The emulator took the generator's CPU rather than leave no CPU free...
    assert_eq!(placed(&emu), ("block".into(), cpu(cpus[1])), "{emu}");
    assert!(realtime(&emu), "{emu}");
    let reason = emu["placement"]["reason"].as_str().unwrap();
    assert!(reason.contains("its loop gives way"), "{reason}");
    // ...and the generator gave way within its watch, blocking on the other CPU.
    let changes = gen["placement"]["changes"].as_array().unwrap();
    assert_eq!(changes.len(), 1, "{gen}");
    let change = changes[0].as_str().unwrap();
    assert!(
        change.contains(&format!(
            "an emulator claimed CPU {}: blocking on CPU {}",
            cpus[1], cpus[0]
        )),
        "{change}"
    );
    // Probes sent once the bridge was up came back; those sent before it were lost.
    let (sent, received) = (
        gen["sent"].as_u64().unwrap(),
        gen["received"].as_u64().unwrap(),
    );
    assert!(received > 0, "{gen}");
    assert_eq!(gen["lost"].as_u64().unwrap(), sent - received, "{gen}");
}

/// A loop that is not latlab spins on the emulator's CPU. The emulator here may not run
/// realtime (`CAP_SYS_NICE` dropped before it starts), so the plan has it spin there as an
/// ordinary thread, as it does for a user without the capability: it notices from its own
/// release errors, says so once on its standard error naming the CPU, and `--json` records it.
#[test]
fn an_emulator_sharing_its_cpu_with_a_stranger_says_so_once() {
    let _turn = common::engines();
    if !common::namespaces_or_skip() {
        return;
    }
    let Some(cpus) = two_cpus() else { return };
    let lab = ClientEmuServer::build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let claims = dir.path().join("claims");
    let emu_json = dir.path().join("emu.json");
    let emu_json = emu_json.to_str().unwrap();
    let emu = latlab_after(
        &["setpriv", "--bounding-set", "-sys_nice"],
        lab.emu.name(),
        cpus,
        &claims,
        &[
            "emu",
            "--iface-a",
            "emu-a",
            "--iface-b",
            "emu-b",
            "--json",
            emu_json,
        ],
    );
    let emu = common::started(emu, "bridging");
    // The stranger: a shell spinning on the CPU the emulator claims, ended by its id.
    let stranger = Stranger(
        Command::new("taskset")
            .args([
                "-c",
                &cpus[1].to_string(),
                "sh",
                "-c",
                "while :; do :; done",
            ])
            .spawn()
            .unwrap(),
    );
    let target = format!("{}:7777", lab.server_addr);
    let mut echo = common::in_ns(lab.server.name());
    echo.args(["echo", "--listen", &target, "--poll", "block"])
        .stdout(Stdio::null());
    let echo = common::started(echo, "latlab echo:");
    // Probes flow until the emulator has said so (it looks once a second, and a starved one
    // may miss a look): an event, up to 60 s. Probes lost to it are no failure here.
    let notice = format!("CPU {}: the emulator is running late", cpus[1]);
    let mut gen = common::in_ns(lab.client.name());
    gen.args([
        "gen",
        "--target",
        &target,
        "--rate",
        "5k",
        "--duration",
        "10m",
    ])
    .args(["--poll", "block"])
    .stdout(Stdio::null());
    let gen = common::started(gen, "latlab gen:");
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !emu.stderr().contains(&notice) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    stopped(gen, "gen");
    let emu_err = stopped(emu, "emu");
    drop(stranger);
    stopped(echo, "echo");
    let report = common::read_json(emu_json.as_ref());
    assert_eq!(placed(&report), ("busy".into(), Some(cpus[1] as u64)));
    assert!(!realtime(&report), "{report}");
    let found = report["contention"].as_array().unwrap();
    assert_eq!(found.len(), 1, "{report}");
    assert_eq!(found[0]["cpu"], cpus[1]);
    assert!(found[0]["p99_ns"].as_u64().unwrap() > 50_000, "{report}");
    assert_eq!(emu_err.matches(&notice).count(), 1, "{emu_err}");
}

/// A process this test started, ended (by its id) when the test ends, failed or not.
struct Stranger(Child);

impl Drop for Stranger {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_explicit_busy_gen_spins_on_a_cpu_the_reflector_left_and_cpu_pins_it() {
    common::one_line_error(
        &[
            "gen",
            "--target",
            "127.0.0.1:9",
            "--rate",
            "1k",
            "--poll",
            "busy",
            "--cpu",
            "0",
            "--threads",
            "2",
        ],
        "--cpu 0 pins the one loop: --threads 2 places its two threads itself",
    );
    let _turn = common::engines();
    let Some([a, b]) = two_cpus() else { return };
    let dir = tempfile::tempdir().unwrap();
    let claims = dir.path().join("claims");
    let on_two = |args: &[&str]| {
        let mut c = Command::new("taskset");
        c.args(["-c", &format!("{a},{b}")])
            .arg(cargo_bin("latlab"))
            .args(args)
            .env(CLAIMS_ENV, &claims)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        c
    };
    // The reflector at its defaults spins on the higher CPU.
    let mut echo = on_two(&["echo", "--listen", "127.0.0.1:0", "--duration", "20s"])
        .spawn()
        .unwrap();
    let started = {
        use std::io::BufRead;
        let mut stderr = std::io::BufReader::new(echo.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        std::thread::spawn(move || std::io::copy(&mut stderr, &mut std::io::sink()));
        line
    };
    assert!(
        started.contains(&format!("spinning on CPU {b} ")),
        "{started}"
    );
    let target = started
        .split_whitespace()
        .skip_while(|w| *w != "on")
        .nth(1)
        .unwrap()
        .to_string();
    let gen = |name: &str, extra: &[&str]| {
        let json = dir.path().join(name);
        let child = on_two(&["gen", "--target", &target, "--rate", "1k"])
            .args(["--duration", "300ms", "--json"])
            .arg(&json)
            .args(extra)
            .spawn()
            .unwrap();
        finished(child, name);
        common::read_json(&json)
    };
    // An explicit busy loop takes the CPU nobody claimed, never the reflector's.
    let busy = gen("busy.json", &["--poll", "busy"]);
    assert_eq!(placed(&busy), ("busy".into(), Some(a as u64)), "{busy}");
    assert_eq!(
        busy["placement"]["reason"],
        format!("--poll busy given; a loop spinning on CPU {b}; CPU {a} free, claimed")
    );
    // --cpu pins it where it says.
    let pinned = gen("pinned.json", &["--poll", "block", "--cpu", &a.to_string()]);
    assert_eq!(
        placed(&pinned),
        ("block".into(), Some(a as u64)),
        "{pinned}"
    );
    let _ = latlab_io::signal::send(echo.id(), 15);
    let _ = echo.wait();
}
