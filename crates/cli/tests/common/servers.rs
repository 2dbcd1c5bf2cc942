//! Real servers nobody here wrote, each started by a test inside a namespace it made, from
//! Debian's packages, with its configuration in a temporary folder; each is stopped (by its
//! process id) when the value that holds it drops. A missing binary is a skip outside CI and a
//! failure under `CI=true` (`latlab_io::precondition`).

pub(crate) mod chrony;
pub(crate) mod coturn;
pub(crate) mod memcached;
pub(crate) mod quake3;
pub(crate) mod unbound;
pub(crate) mod xinetd;

use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

use crate::common::Reaped;

/// Whether `program` is on the PATH.
pub(crate) fn installed(program: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
}

/// Sends `request` every 100 ms from a socket made inside namespace `ns` to `to` until a reply
/// from `to` that `good` accepts comes back (`Ok`), `server` exits, or 30 s pass (an event,
/// not a speed: only a server that did not start waits that long).
pub(crate) fn wait_for_udp(
    ns: &str,
    to: SocketAddr,
    request: &[u8],
    good: impl Fn(&[u8]) -> bool,
    server: &mut Reaped,
) -> Result<(), String> {
    let socket = latlab_io::netns::run_in(ns, || UdpSocket::bind("0.0.0.0:0"))
        .and_then(|s| s)
        .map_err(|e| format!("a socket in namespace {ns}: {e}"))?;
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = vec![0u8; 65_536];
    while Instant::now() < deadline {
        if let Some(status) = server.try_wait().unwrap() {
            return Err(format!("it exited: {status}"));
        }
        let _ = socket.send_to(request, to);
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            if from == to && good(&buf[..n]) {
                return Ok(());
            }
        }
    }
    Err(format!("no answer at {to} in namespace {ns} within 30 s"))
}
