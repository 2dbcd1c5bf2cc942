//! memcached (`memcached -U PORT -p 0`: UDP only) in a namespace, one worker thread, run as
//! `nobody`; stopped by its process id when the value drops.

use std::net::SocketAddr;
use std::process::{Command, Stdio};

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
        if !super::installed("memcached") {
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
        // `version` in one datagram: request ID 0, sequence 0, one datagram.
        let version = b"\x00\x01\x00\x00\x00\x01\x00\x00version\r\n";
        let answer = |reply: &[u8]| reply.get(8..).is_some_and(|r| r.starts_with(b"VERSION"));
        if let Err(why) = super::wait_for_udp(ns, addr, version, answer, &mut server.child) {
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
}
