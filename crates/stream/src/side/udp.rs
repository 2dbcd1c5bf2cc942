//! `udp`: one message per datagram, no recovery. The baseline the other transports' bytes on
//! the wire are compared against.

use std::io;
use std::net::SocketAddr;

use super::{Boxes, Side};

/// Plain UDP: one datagram per message, no recovery; every datagram is handed over (the
/// command tells messages from garbage).
pub(super) struct UdpSide {
    /// Where messages go; `None` on the receiving side.
    peer: Option<SocketAddr>,
    boxes: Boxes,
}

impl UdpSide {
    pub(super) fn new(peer: Option<SocketAddr>) -> UdpSide {
        UdpSide {
            peer,
            boxes: Boxes::default(),
        }
    }
}

impl Side for UdpSide {
    fn send(&mut self, _now: u64, message: &[u8]) -> io::Result<()> {
        let peer = self
            .peer
            .ok_or_else(|| io::Error::other("udp: the receiving side does not send"))?;
        self.boxes.outbox.push_back((peer, message.to_vec()));
        Ok(())
    }
    fn handle_datagram(&mut self, _now: u64, _from: SocketAddr, data: &[u8]) {
        self.boxes.inbox.push_back(data.to_vec());
    }
    fn handle_timeout(&mut self, _now: u64) {}
    fn poll_timeout(&mut self) -> Option<u64> {
        None
    }
    fn boxes(&mut self) -> &mut Boxes {
        &mut self.boxes
    }
    fn is_connected(&self) -> bool {
        true
    }
    fn retransmissions(&self) -> (Option<u64>, Option<u64>) {
        // UDP has no retransmissions to tell of (the virtual-time study shows its none as 0).
        (None, None)
    }
    fn failure(&self) -> Option<String> {
        None
    }
    fn foreign(&self) -> u64 {
        0
    }
    fn close(&mut self, _now: u64) {}
}
