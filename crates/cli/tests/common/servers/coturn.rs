//! coturn (`turnserver`) as a plain STUN server in a namespace: `--stun-only`, no TLS, DTLS or
//! CLI, no configuration file from /etc (`-c /dev/null`), its log and pid file in a temporary
//! folder, its SQLite user database there too; stopped by its process id when the value drops.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::servers::memcached::which;
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
        if !which("turnserver") {
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
        if let Err(why) = server.wait_answering(ns) {
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

    /// Sends a Binding request from a socket in `ns` until coturn answers (up to 20 s: an
    /// event, not a speed), or it exits.
    fn wait_answering(&mut self, ns: &str) -> Result<(), String> {
        let addr = self.addr;
        let socket = latlab_io::netns::run_in(ns, || UdpSocket::bind("0.0.0.0:0"))
            .unwrap()
            .unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let mut request = [0u8; 20];
        latlab_wire::stun::emit_binding_request(&[7; 12], &mut request).unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut buf = [0u8; 1500];
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Err(format!("it exited: {status}"));
            }
            let _ = socket.send_to(&request, addr);
            if let Ok((n, _)) = socket.recv_from(&mut buf) {
                if latlab_wire::stun::Message::parse(&buf[..n]).is_ok() {
                    return Ok(());
                }
            }
        }
        Err("no answer within 20 s".into())
    }
}
