//! unbound, answering from local zones only (it never asks another server): `lab.test.` is a
//! static zone (`a.lab.test. A 10.0.0.1`, `b.lab.test. AAAA 2001:db8::1`, a TXT and an MX;
//! any other name in it is NXDOMAIN), `refused.test.` is refused, and every other name is
//! NXDOMAIN from a static root zone.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::common::Reaped;

/// A name of `lab.test.` and its data, as the zone holds them.
pub(crate) const RECORDS: [&str; 4] = [
    "a.lab.test. A 10.0.0.1",
    "b.lab.test. AAAA 2001:db8::1",
    "t.lab.test. TXT \"latlab\"",
    "lab.test. MX 10 a.lab.test.",
];

/// unbound running in a namespace, stopped (by its process id) on drop.
pub(crate) struct Unbound {
    child: Reaped,
    _dir: tempfile::TempDir,
}

impl Unbound {
    /// Starts unbound in namespace `ns` on `addr:port` (`0.0.0.0` for every address of the
    /// namespace), and waits until it answers a query there; `None` (after
    /// `precondition::missing`) when unbound is not installed.
    pub(crate) fn start(ns: &str, addr: Ipv4Addr, port: u16) -> Option<Unbound> {
        if !latlab_io::precondition::met(
            latlab_lab::command::debian_tool("unbound", &["-V"], &["unbound"]).err(),
        ) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let mut conf = format!(
            "server:\n  do-daemonize: no\n  chroot: \"\"\n  username: \"\"\n  use-syslog: no\n  \
             logfile: \"\"\n  pidfile: \"\"\n  directory: \"{dir}\"\n  do-ip6: no\n  \
             num-threads: 1\n  module-config: \"iterator\"\n  interface: {addr}\n  \
             port: {port}\n  access-control: 198.18.0.0/24 allow\n  \
             access-control: 198.19.0.0/16 allow\n  access-control: 127.0.0.0/8 allow\n  \
             local-zone: \".\" static\n  local-zone: \"lab.test.\" static\n  \
             local-zone: \"refused.test.\" refuse\n",
            dir = dir.path().display()
        );
        for record in RECORDS {
            conf.push_str(&format!("  local-data: '{record}'\n"));
        }
        let path = dir.path().join("unbound.conf");
        std::fs::write(&path, conf).unwrap();
        let child = Command::new("ip")
            .args(["netns", "exec", ns, "unbound", "-d", "-c"])
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut unbound = Unbound {
            child: Reaped::new(child),
            _dir: dir,
        };
        let to = if addr.is_unspecified() {
            Ipv4Addr::LOCALHOST
        } else {
            addr
        };
        let target = SocketAddr::from((to, port));
        let answered = latlab_io::netns::run_in(ns, move || answers(target)).unwrap();
        if !answered {
            let status = unbound.child.try_wait().unwrap();
            panic!("unbound did not answer on {target} within 30 s (exit {status:?})");
        }
        Some(unbound)
    }

    /// Stops it now (SIGKILL, waited for).
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether a query for `a.lab.test. A` to `target` gets an answer within 30 s: asked every
/// 100 ms (only a broken start waits that long).
fn answers(target: SocketAddr) -> bool {
    let socket = UdpSocket::bind("0.0.0.0:0").unwrap();
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let query = [
        0x11, 0x11, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, b'a', 3, b'l', b'a', b'b', 4, b't', b'e',
        b's', b't', 0, 0, 1, 0, 1,
    ];
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = [0u8; 512];
    while Instant::now() < deadline {
        let _ = socket.send_to(&query, target);
        if let Ok((n, _)) = socket.recv_from(&mut buf) {
            if n >= 2 && buf[..2] == [0x11, 0x11] {
                return true;
            }
        }
    }
    false
}
