//! coturn (`turnserver`) as a plain STUN server in a namespace: `--stun-only`, no TLS, DTLS or
//! CLI, no configuration file from /etc (`-c /dev/null`), its log and pid file in a temporary
//! folder, its SQLite user database there too; stopped by its process id when the value drops.

use std::net::SocketAddr;
use std::process::{Command, Stdio};

use crate::common::Reaped;

/// A coturn this test started.
pub(crate) struct Coturn {
    child: Reaped,
    /// Where it listens (UDP).
    pub(crate) addr: SocketAddr,
    /// Its log, pid file and database.
    pub(crate) dir: tempfile::TempDir,
}

impl Coturn {
    /// Starts coturn in namespace `ns` on `addr` and waits until it answers a Binding
    /// request; `None` (a skip, a failure under CI) when coturn is not installed.
    pub(crate) fn start(ns: &str, addr: SocketAddr) -> Option<Coturn> {
        if !super::installed("turnserver") {
            latlab_io::precondition::missing("coturn's turnserver is not installed");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let spawned = Command::new("ip")
            .args(["netns", "exec", ns, "turnserver", "-c", "/dev/null"])
            .args(["--listening-ip", &addr.ip().to_string()])
            .args(["--listening-port", &addr.port().to_string()])
            .args([
                "--stun-only",
                "--no-tls",
                "--no-dtls",
                "--no-cli",
                "--simple-log",
            ])
            .arg("--log-file")
            .arg(dir.path().join("turn.log"))
            .arg("--pidfile")
            .arg(dir.path().join("turn.pid"))
            .arg("--userdb")
            .arg(dir.path().join("turndb"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut server = Coturn {
            child: Reaped::new(spawned),
            addr,
            dir,
        };
        let mut request = [0u8; 20];
        latlab_wire::stun::emit_binding_request(&[7; 12], &mut request).unwrap();
        let answer = |reply: &[u8]| latlab_wire::stun::Message::parse(reply).is_ok();
        if let Err(why) = super::wait_for_udp(ns, addr, &request, answer, &mut server.child) {
            panic!("coturn did not answer: {why}\n{}", server.log());
        }
        Some(server)
    }

    /// What it logged so far.
    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("turn.log")).unwrap_or_default()
    }

    /// Stops it now (SIGKILL), as a crash would.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
