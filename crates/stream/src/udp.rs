//! `udp`: one message per datagram, no recovery. The baseline the other transports' bytes on
//! the wire are compared against.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use super::endpoint::Endpoint;
use super::wire::{CountingSocket, WireCounts};

/// Either side of a `udp` run.
#[derive(Debug)]
pub struct UdpEndpoint {
    socket: CountingSocket,
    /// Where messages go; `None` on the receiving side.
    peer: Option<SocketAddr>,
    buf: Vec<u8>,
}

impl UdpEndpoint {
    /// The sending side, towards `target`.
    pub fn sender(target: SocketAddr) -> io::Result<UdpEndpoint> {
        Ok(UdpEndpoint {
            socket: CountingSocket::towards(target)?,
            peer: Some(target),
            buf: vec![0; 65_536],
        })
    }

    /// The receiving side, on the receiver's socket.
    pub fn receiver(socket: UdpSocket) -> io::Result<UdpEndpoint> {
        Ok(UdpEndpoint {
            socket: CountingSocket::new(socket)?,
            peer: None,
            buf: vec![0; 65_536],
        })
    }
}

impl Endpoint for UdpEndpoint {
    fn send(&mut self, message: &[u8]) -> io::Result<()> {
        if let Some(peer) = self.peer {
            self.socket.send_to(message, peer)?;
        }
        Ok(())
    }

    fn poll(&mut self, wait: Duration, deliver: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        if self.socket.wait(wait)? {
            while let Some((n, _)) = self.socket.recv_from(&mut self.buf)? {
                deliver(&self.buf[..n]);
            }
        }
        Ok(())
    }

    fn wire(&mut self) -> WireCounts {
        self.socket.sent()
    }

    fn foreign(&self) -> u64 {
        // Every datagram is handed over; the command tells messages from garbage.
        0
    }

    fn close(&mut self) {}
}
