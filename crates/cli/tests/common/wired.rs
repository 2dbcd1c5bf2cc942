//! The wiring the `--attach` tests splice into (`tests/attach.rs`): a "host" namespace with a
//! Linux bridge and a "container" on it, snapshots of both as `ip` and `bridge` show them, and
//! latlab run in the host's network namespace alone.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use latlab_lab::topology::{ip, unique_prefix, Namespace};
use serde_json::Value;

/// The bridge's address in the host namespace, and the container's.
pub(crate) const BRIDGE_ADDR: &str = "198.18.5.1";
pub(crate) const CONTAINER_ADDR: &str = "198.18.5.2";

/// A host namespace with bridge `br0` (198.18.5.1/24) and a container namespace whose `eth0`
/// (198.18.5.2/24) is a veth whose peer `h0` is a port of `br0` (with hairpin on, a setting a
/// new port does not have); and, on the same bridge, another port `n0` the splice must not
/// touch.
pub(crate) struct Wired {
    pub(crate) host: Namespace,
    pub(crate) container: Namespace,
}

impl Wired {
    pub(crate) fn build() -> Wired {
        let prefix = unique_prefix();
        let host = Namespace::create(&format!("{prefix}-host")).unwrap();
        let container = Namespace::create(&format!("{prefix}-cont")).unwrap();
        let (h, c) = (host.name(), container.name());
        for args in [
            vec!["-n", h, "link", "add", "br0", "type", "bridge"],
            vec!["-n", h, "addr", "add", "198.18.5.1/24", "dev", "br0"],
            vec!["-n", h, "link", "set", "br0", "up"],
            vec![
                "-n", h, "link", "add", "h0", "type", "veth", "peer", "name", "eth0", "netns", c,
            ],
            vec!["-n", h, "link", "set", "h0", "master", "br0"],
            vec![
                "-n",
                h,
                "link",
                "set",
                "dev",
                "h0",
                "type",
                "bridge_slave",
                "hairpin",
                "on",
            ],
            vec!["-n", h, "link", "set", "h0", "up"],
            vec![
                "-n", h, "link", "add", "n0", "type", "veth", "peer", "name", "n1",
            ],
            vec!["-n", h, "link", "set", "n0", "master", "br0"],
            vec!["-n", h, "link", "set", "n0", "up"],
            vec!["-n", c, "addr", "add", "198.18.5.2/24", "dev", "eth0"],
            vec!["-n", c, "link", "set", "eth0", "up"],
        ] {
            ip(&args).unwrap();
        }
        Wired { host, container }
    }

    /// Everything the splice may change, as `ip` and `bridge` show it; timers left out (they
    /// run on their own).
    pub(crate) fn snapshot(&self) -> Value {
        let (h, c) = (self.host.name(), self.container.name());
        let mut all = serde_json::Map::new();
        for (key, program, args) in [
            ("host link", "ip", vec!["-n", h, "-d", "-j", "link"]),
            ("host addr", "ip", vec!["-n", h, "-j", "addr"]),
            (
                "host route",
                "ip",
                vec!["-n", h, "-j", "route", "show", "table", "all"],
            ),
            (
                "host route6",
                "ip",
                vec!["-n", h, "-6", "-j", "route", "show", "table", "all"],
            ),
            ("host bridge", "bridge", vec!["-n", h, "-d", "-j", "link"]),
            ("container link", "ip", vec!["-n", c, "-d", "-j", "link"]),
            ("container addr", "ip", vec!["-n", c, "-j", "addr"]),
            (
                "container route",
                "ip",
                vec!["-n", c, "-j", "route", "show", "table", "all"],
            ),
        ] {
            let out = Command::new(program).args(&args).output().unwrap();
            assert!(out.status.success(), "{program} {args:?}");
            let mut v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
            drop_timers(&mut v);
            all.insert(key.to_string(), v);
        }
        Value::Object(all)
    }

    /// The snapshot once every IPv6 address is past duplicate address detection (at most
    /// 30 s): the wiring as it stays.
    pub(crate) fn settled(&self) -> Value {
        let start = Instant::now();
        loop {
            let now = self.snapshot();
            if !now.to_string().contains("tentative") || start.elapsed() > Duration::from_secs(30) {
                return now;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits (at most 30 s: IPv6 addresses come back tentative, and duplicate address
    /// detection takes its time on a loaded machine) until the wiring is `before`.
    pub(crate) fn back_to(&self, before: &Value, after: &str) {
        let start = Instant::now();
        loop {
            let differs = difference(before, &self.snapshot());
            if differs.is_empty() {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the wiring after {after} differs from before (before → after):\n{differs}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// `latlab emu ARGS` in the host namespace, with stderr piped.
    pub(crate) fn emu(&self, args: &[&str]) -> Command {
        let mut cmd = latlab_in(self.host.name());
        cmd.arg("emu")
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    /// Whether the host side is spliced out: `h0` is no longer in the host namespace.
    pub(crate) fn spliced(&self) -> bool {
        ip(&["-n", self.host.name(), "link", "show", "dev", "h0"]).is_err()
    }
}

/// `nsenter --net=/run/netns/NS latlab`: latlab in the network namespace `ns` alone (`ip netns
/// exec` would give it a mount namespace of its own too, which `--attach` refuses); nsenter
/// execs latlab, so the child's id is latlab's own.
pub(crate) fn latlab_in(ns: &str) -> Command {
    let mut c = Command::new("nsenter");
    c.arg(format!("--net=/run/netns/{ns}"))
        .arg(assert_cmd::cargo::cargo_bin("latlab"));
    c
}

/// Every leaf of `v` by its path, for a difference that reads.
fn leaves(v: &Value, path: String, out: &mut std::collections::BTreeMap<String, String>) {
    match v {
        Value::Object(map) => map
            .iter()
            .for_each(|(k, v)| leaves(v, format!("{path}.{k}"), out)),
        // Interfaces, addresses and routes by what names them, not by where they are listed
        // (a route table is a set; routes put back are listed in another order).
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| {
            let name: Vec<&str> = ["ifname", "dst", "dev", "table", "local"]
                .iter()
                .filter_map(|k| v.get(*k).and_then(Value::as_str))
                .collect();
            let name = match name.is_empty() {
                true => i.to_string(),
                false => name.join(" "),
            };
            leaves(v, format!("{path}[{name}]"), out)
        }),
        other => {
            out.insert(path, other.to_string());
        }
    }
}

/// The leaves of `a` and `b` that differ, one a line; empty when the two are the same wiring.
fn difference(a: &Value, b: &Value) -> String {
    let (mut x, mut y) = (Default::default(), Default::default());
    leaves(a, String::new(), &mut x);
    leaves(b, String::new(), &mut y);
    let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
    keys.into_iter()
        .filter(|k| x.get(*k) != y.get(*k))
        .map(|k| format!("{k}: {:?} → {:?}", x.get(k), y.get(k)))
        .collect::<Vec<_>>()
        .join("\n")
}

fn drop_timers(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| !k.ends_with("_timer"));
            map.values_mut().for_each(drop_timers);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_timers),
        _ => {}
    }
}

/// Whether the tests can run: namespaces, iproute2's `bridge` and util-linux's `nsenter`.
pub(crate) fn can_run() -> bool {
    use latlab_io::precondition::{met, need_program};
    super::namespaces_or_skip()
        && met(need_program("bridge", "iproute2"))
        && met(need_program("nsenter", "util-linux"))
}

/// A running `latlab emu --attach`, stopped with SIGTERM (which puts the wiring back) if a
/// test ends before it has.
pub(crate) struct Running(pub(crate) Child);

impl Running {
    /// Sends it `signal` (`TERM`, `INT`).
    pub(crate) fn signal(&self, signal: &str) {
        let sent = Command::new("kill")
            .args(["-s", signal, &self.0.id().to_string()])
            .status()
            .unwrap();
        assert!(sent.success(), "kill -s {signal}");
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            self.signal("TERM");
            let _ = self.0.wait();
        }
    }
}

/// Starts `cmd` and waits (at most 60 s) for the line that says the bridge runs; the rest of
/// stderr is read on a thread.
pub(crate) fn started(mut cmd: Command) -> Running {
    let mut child = Running(cmd.spawn().unwrap());
    let stderr = child.0.stderr.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let start = Instant::now();
    let mut seen = Vec::new();
    while start.elapsed() < Duration::from_secs(60) {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(line) if line.contains("bridging") => return child,
            Ok(line) => seen.push(line),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    drop(child);
    panic!("latlab emu --attach did not start: {seen:?}");
}

/// Waits (at most 60 s: an event, which only a broken stop reaches) for `child` to exit; its
/// exit code.
pub(crate) fn exit_code(child: &mut Running) -> Option<i32> {
    let start = Instant::now();
    loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            return status.code();
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "latlab did not exit"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}
