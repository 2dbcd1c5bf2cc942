//! memcached (`memcached -U PORT -p 0`: UDP only) in a namespace, one worker thread, run as
//! `nobody`; stopped by its process id when the value drops.

use std::net::{SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::Reaped;

/// A memcached this test started.
pub(crate) struct Memcached {
    child: Reaped,
    /// Where it listens (UDP).
    pub(crate) addr: SocketAddr,
}

impl Memcached {
    /// Starts memcached in namespace `ns` on `addr` (UDP only) and waits until it answers;
    /// `None` (a skip, a failure under CI) when memcached is not installed.
    pub(crate) fn start(ns: &str, addr: SocketAddr) -> Option<Memcached> {
        if !which("memcached") {
            latlab_io::precondition::missing("memcached is not installed");
            return None;
        }
        let spawned = Command::new("ip")
            .args(["netns", "exec", ns, "memcached", "-U"])
            .arg(addr.port().to_string())
            .args(["-p", "0", "-l"])
            .arg(addr.ip().to_string())
            .args(["-t", "1", "-u", "nobody"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut server = Memcached {
            child: Reaped::new(spawned),
            addr,
        };
        if let Err(why) = server.wait_answering(ns) {
            panic!("memcached did not answer: {why}");
        }
        Some(server)
    }

    /// The process id (memcached's own: `ip netns exec` execs it).
    pub(crate) fn id(&self) -> u32 {
        self.child.id()
    }

    /// Stops it now (SIGKILL), as a crash would.
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends `version` from a socket in `ns` until memcached answers (up to 20 s: an event,
    /// not a speed), or it exits.
    fn wait_answering(&mut self, ns: &str) -> Result<(), String> {
        let addr = self.addr;
        let socket = latlab_io::netns::run_in(ns, || UdpSocket::bind("0.0.0.0:0"))
            .unwrap()
            .unwrap();
        socket
            .set_read_timeout(Some(Duration::from_millis(100)))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        let mut buf = [0u8; 1500];
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Err(format!("it exited: {status}"));
            }
            let _ = socket.send_to(b"\x00\x01\x00\x00\x00\x01\x00\x00version\r\n", addr);
            if let Ok((n, _)) = socket.recv_from(&mut buf) {
                if buf[8..n].starts_with(b"VERSION") {
                    return Ok(());
                }
            }
        }
        Err("no answer within 20 s".into())
    }
}

/// Whether `program` is on the PATH.
pub(crate) fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}
