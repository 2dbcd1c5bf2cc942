//! unbound, answering from local zones only (it never asks another server): `lab.test.` is a
//! static zone (`a.lab.test. A 10.0.0.1`, `b.lab.test. AAAA 2001:db8::1`, a TXT and an MX;
//! any other name in it is NXDOMAIN), `refused.test.` is refused, and every other name is
//! NXDOMAIN from a static root zone.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};

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
        // A query for `a.lab.test. A`, ID 0x1111.
        let query = [
            0x11, 0x11, 1, 0, 0, 1, 0, 0, 0, 0, 0, 0, 1, b'a', 3, b'l', b'a', b'b', 4, b't', b'e',
            b's', b't', 0, 0, 1, 0, 1,
        ];
        let target = SocketAddr::from((to, port));
        let answer = |reply: &[u8]| reply.starts_with(&[0x11, 0x11]);
        if let Err(why) = super::wait_for_udp(ns, target, &query, answer, &mut unbound.child) {
            panic!("unbound did not answer: {why}");
        }
        Some(unbound)
    }

    /// Stops it now (SIGKILL, waited for).
    pub(crate) fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
