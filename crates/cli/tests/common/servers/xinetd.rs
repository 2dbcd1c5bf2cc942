//! xinetd's own UDP echo service (RFC 862, `echo-dgram`), in a namespace.

use std::net::{Ipv4Addr, SocketAddr};
use std::process::{Command, Stdio};

use crate::common::Reaped;

/// xinetd serving UDP echo on `addr:port` inside a namespace; stopped by its id on drop.
pub(crate) struct Xinetd {
    child: Reaped,
    _dir: tempfile::TempDir,
}

impl Xinetd {
    /// Starts xinetd in `ns` with the echo service only, bound to `addr:port`, and waits until
    /// it answers; `None` (a skip outside CI, a failure under it) without xinetd.
    pub(crate) fn start(ns: &str, addr: Ipv4Addr, port: u16) -> Option<Xinetd> {
        if !super::installed("xinetd") {
            latlab_io::precondition::missing("xinetd is not installed (apt install xinetd)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("xinetd.conf");
        // `cps` high: xinetd would otherwise turn a service off above 50 "connections" (here,
        // datagrams) a second.
        std::fs::write(
            &conf,
            format!(
                "defaults\n{{\n}}\nservice echo\n{{\n  type = INTERNAL UNLISTED\n  \
                 id = echo-dgram\n  socket_type = dgram\n  protocol = udp\n  user = root\n  \
                 wait = yes\n  bind = {addr}\n  port = {port}\n  cps = 1000000 1\n  \
                 disable = no\n}}\n"
            ),
        )
        .unwrap();
        let child = Command::new("ip")
            .args([
                "netns",
                "exec",
                ns,
                "xinetd",
                "-dontfork",
                "-stayalive",
                "-f",
            ])
            .arg(&conf)
            .arg("-pidfile")
            .arg(dir.path().join("pid"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut server = Xinetd {
            child: Reaped::new(child),
            _dir: dir,
        };
        let hello = b"latlab: are you there?";
        let to = SocketAddr::from((addr, port));
        if let Err(why) = super::wait_for_udp(ns, to, hello, |r| r == hello, &mut server.child) {
            panic!("xinetd's echo did not answer: {why}");
        }
        Some(server)
    }
}
