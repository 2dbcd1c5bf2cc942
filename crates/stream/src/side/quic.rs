//! `quic`: QUIC through `quinn-proto` ([`QuicCore`], `crate::quic`), one bidirectional stream
//! with length-framed messages (`quic`) or unreliable datagrams the application sends again
//! (`quic:datagrams`). The sender opens its stream once the handshake has ended.

use std::io;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::{Boxes, Side};
use crate::quic::QuicCore;

/// QUIC through `quinn-proto` ([`QuicCore`]), its `Instant`s counted from `base`.
pub(super) struct QuicSide {
    core: QuicCore,
    base: Instant,
    sender: bool,
    opened: bool,
    failed: Option<String>,
    boxes: Boxes,
}

impl QuicSide {
    /// The side over `core`; a sender's first flight (its Initial) is sent at time 0.
    pub(super) fn new(core: QuicCore, base: Instant, sender: bool) -> QuicSide {
        let mut side = QuicSide {
            core,
            base,
            sender,
            opened: false,
            failed: None,
            boxes: Boxes::default(),
        };
        if sender {
            side.drive(0);
        }
        side
    }

    fn at(&self, now: u64) -> Instant {
        self.base + Duration::from_nanos(now)
    }

    /// Runs the connection at `now`; its datagrams and deliveries go to the boxes.
    fn drive(&mut self, now: u64) {
        let at = self.at(now);
        let Boxes { outbox, inbox } = &mut self.boxes;
        let driven = self
            .core
            .drive(at, &mut |m| inbox.push_back(m.to_vec()), &mut |d, to| {
                outbox.push_back((to, d.to_vec()));
                Ok(())
            });
        if let Err(e) = driven {
            self.failed.get_or_insert(e.to_string());
        }
        if self.sender && !self.opened && self.core.is_connected() {
            self.core.open_stream();
            self.opened = true;
        }
    }
}

impl Side for QuicSide {
    fn send(&mut self, now: u64, message: &[u8]) -> io::Result<()> {
        self.core.send(self.at(now), message)?;
        self.drive(now);
        Ok(())
    }
    fn handle_datagram(&mut self, now: u64, from: SocketAddr, data: &[u8]) {
        let at = self.at(now);
        let outbox = &mut self.boxes.outbox;
        let handled = self.core.handle(at, from, data, &mut |d, to| {
            outbox.push_back((to, d.to_vec()));
            Ok(())
        });
        if let Err(e) = handled {
            self.failed.get_or_insert(e.to_string());
        }
        self.drive(now);
    }
    fn handle_timeout(&mut self, now: u64) {
        self.drive(now);
    }
    fn poll_timeout(&mut self) -> Option<u64> {
        let at = self.core.next_timeout()?;
        Some(at.saturating_duration_since(self.base).as_nanos() as u64)
    }
    fn boxes(&mut self) -> &mut Boxes {
        &mut self.boxes
    }
    fn is_connected(&self) -> bool {
        self.core.is_connected() && (!self.sender || self.opened)
    }
    fn retransmissions(&self) -> (Option<u64>, Option<u64>) {
        (Some(self.core.retransmissions()), None)
    }
    fn failure(&self) -> Option<String> {
        self.failed.clone()
    }
    fn foreign(&self) -> u64 {
        self.core.foreign()
    }
    fn close(&mut self, now: u64) {
        self.core.close(self.at(now));
        self.drive(now);
    }
}
