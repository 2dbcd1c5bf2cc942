//! `latlab[:POLICY]`: latlab's own transport (crates/transport), messages on its
//! reliable-ordered channel, loss recovery by the policy named (`latlab:thin`,
//! `latlab:rack:rdb=600`, `latlab:tcp-like`; `latlab` alone is `thin`, the crate's default).
//!
//! Garbage and packets of another connection (on the receiver's shared socket) are counted by
//! the endpoint and dropped. Over a socket the sender is handed over once its handshake has
//! ended (as QUIC's, ENet's and TCP's are), so no message waits for the connection's setup.

use std::io;
use std::net::SocketAddr;

use latlab_transport::{Config, ConnectionHandle, Endpoint as Transport, Event, Recovery};

use super::{Boxes, Side};

/// The channel messages go on: reliable-ordered in [`Config::default`]'s channel list.
const CHANNEL: u8 = 0;

/// latlab's transport, messages on its reliable-ordered channel.
pub(super) struct LatlabSide {
    transport: Transport,
    /// The sender's connection from the start; the receiver's once the sender's is accepted.
    connection: Option<ConnectionHandle>,
    /// The sender's handshake has ended.
    connected: bool,
    /// Why the connection closed, when it did.
    closed: Option<String>,
    /// Messages go as urgent (`latlab:…,urgent`): twice, unless the first is acknowledged in
    /// time.
    urgent: bool,
    /// The connection's retransmissions and spurious ones when it was last seen (a closed
    /// connection's counters are gone from the endpoint).
    counts: (Option<u64>, Option<u64>),
    buf: Vec<u8>,
    boxes: Boxes,
}

impl LatlabSide {
    /// The sending side, its connection to `to` started at time 0.
    pub(super) fn sender(run: u32, recovery: Recovery, urgent: bool, to: SocketAddr) -> LatlabSide {
        let config = Config {
            recovery,
            ..Config::default()
        };
        let mut side = LatlabSide::new(Transport::new(config, u64::from(run)));
        side.urgent = urgent;
        side.connection = Some(side.transport.connect(0, to));
        side.flush(0);
        side
    }

    /// The receiving side, answering with `recovery` too (its acknowledgements and
    /// keep-alives are the only thing it sends).
    pub(super) fn receiver(run: u32, recovery: Recovery) -> LatlabSide {
        let config = Config {
            recovery,
            ..Config::server()
        };
        LatlabSide::new(Transport::new(config, u64::from(run).rotate_left(32) | 1))
    }

    fn new(transport: Transport) -> LatlabSide {
        LatlabSide {
            transport,
            connection: None,
            connected: false,
            closed: None,
            urgent: false,
            counts: (None, None),
            buf: vec![0; 65_536],
            boxes: Boxes::default(),
        }
    }

    /// Keeps the connection's retransmission counts while the endpoint still has them.
    fn remember_counts(&mut self) {
        if let Some(stats) = self
            .connection
            .and_then(|c| self.transport.connection_stats(c))
        {
            self.counts = (
                Some(stats.retransmissions),
                Some(stats.spurious_retransmissions),
            );
        }
    }

    /// Takes what the endpoint has to send and to tell after an input at `now`.
    fn flush(&mut self, now: u64) {
        while let Some(t) = self.transport.poll_transmit(now, &mut self.buf) {
            self.boxes
                .outbox
                .push_back((t.to, self.buf[..t.len].to_vec()));
        }
        // Closing events take the connection's counters with them: keep them first.
        self.remember_counts();
        while let Some(event) = self.transport.poll_event() {
            match event {
                Event::Message { data, .. } => self.boxes.inbox.push_back(data.to_vec()),
                // One sender per run: a later connection (a sender that started again) takes
                // over.
                Event::Accepted { connection, .. } => self.connection = Some(connection),
                Event::Connected { .. } => self.connected = true,
                Event::Closed { reason, .. } => self.closed = Some(format!("{reason:?}")),
                Event::Expired { .. } => {}
            }
        }
    }
}

impl Side for LatlabSide {
    fn send(&mut self, now: u64, message: &[u8]) -> io::Result<()> {
        if let Some(why) = self.failure() {
            return Err(io::Error::other(why));
        }
        let connection = self
            .connection
            .ok_or_else(|| io::Error::other("latlab: the receiving side does not send"))?;
        let sent = if self.urgent {
            self.transport
                .send_urgent(now, connection, CHANNEL, message)
        } else {
            self.transport.send(now, connection, CHANNEL, message)
        };
        sent.map_err(|e| io::Error::other(format!("latlab: {e}")))?;
        self.flush(now);
        Ok(())
    }
    fn handle_datagram(&mut self, now: u64, from: SocketAddr, data: &[u8]) {
        self.transport.handle_datagram(now, from, data);
        self.flush(now);
    }
    fn handle_timeout(&mut self, now: u64) {
        self.transport.handle_timeout(now);
        self.flush(now);
    }
    fn poll_timeout(&mut self) -> Option<u64> {
        self.transport.poll_timeout()
    }
    fn boxes(&mut self) -> &mut Boxes {
        &mut self.boxes
    }
    fn is_connected(&self) -> bool {
        self.connected
    }
    fn retransmissions(&self) -> (Option<u64>, Option<u64>) {
        self.counts
    }
    fn failure(&self) -> Option<String> {
        self.closed
            .as_ref()
            .map(|why| format!("latlab: the connection closed: {why}"))
    }
    fn handshake_failure(&self) -> Option<String> {
        self.closed
            .as_ref()
            .map(|why| format!("latlab: the handshake failed: {why}"))
    }
    fn foreign(&self) -> u64 {
        let s = self.transport.stats();
        s.garbage + s.foreign
    }
    fn close(&mut self, now: u64) {
        self.remember_counts();
        if let Some(connection) = self.connection {
            self.transport.close(now, connection, 0);
            self.flush(now);
        }
    }
}
