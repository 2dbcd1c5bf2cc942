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

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

/// Waits until a server in namespace `ns` answers `request` at `addr:port` with a reply that
/// `good` accepts, asking from a socket made inside the namespace. Up to 30 s, which only a
/// server that did not start reaches.
pub(crate) fn wait_for_udp(
    ns: &str,
    addr: Ipv4Addr,
    port: u16,
    request: &[u8],
    good: impl Fn(&[u8]) -> bool,
) {
    let socket = latlab_io::netns::run_in(ns, move || UdpSocket::bind((addr, 0)))
        .and_then(|s| s)
        .expect("a socket in the server's namespace");
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let to = SocketAddr::from((addr, port));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut buf = vec![0u8; 65_536];
    while Instant::now() < deadline {
        let _ = socket.send_to(request, to);
        if let Ok((n, from)) = socket.recv_from(&mut buf) {
            if from == to && good(&buf[..n]) {
                return;
            }
        }
    }
    panic!("nothing answered at {to} in namespace {ns} within 30 s");
}
