//! `latlab[:POLICY]`: latlab's own transport (crates/transport) over a UDP socket, messages on
//! its reliable-ordered channel, loss recovery by the policy named (`latlab:thin`,
//! `latlab:rack:rdb=600`, `latlab:tcp-like`; `latlab` alone is `thin`, the crate's default).
//!
//! The sans-IO endpoint gets the socket's datagrams with the time they were read
//! (`CLOCK_REALTIME` ns), and everything it wants sent goes out at once; the wait in `poll`
//! ends at the endpoint's own next timer. The sender is returned once its handshake has ended
//! (as QUIC's, ENet's and TCP's are), so no message waits for the connection's setup. Garbage and
//! packets of another connection on the shared receiver socket are counted by the endpoint
//! and dropped.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use latlab_transport::{Config, ConnectionHandle, Endpoint as Transport, Event, Recovery};

use super::endpoint::Endpoint;
use super::wire::{CountingSocket, WireCounts};

/// The channel messages go on: reliable-ordered in [`Config::default`]'s channel list.
const CHANNEL: u8 = 0;

/// How long the sender waits for its handshake to end (a lost packet's timer starts at 1 s
/// and doubles).
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Either side of a `latlab` run.
#[derive(Debug)]
pub struct LatlabEndpoint {
    transport: Transport,
    socket: CountingSocket,
    /// The sender's connection from the start; the receiver's once the sender's is accepted.
    connection: Option<ConnectionHandle>,
    /// The sender's handshake has ended.
    connected: bool,
    /// Why the connection closed, when it did.
    closed: Option<String>,
    /// The connection's retransmissions when it was last seen (a closed connection's
    /// counters are gone from the endpoint).
    retransmissions: Option<u64>,
    /// Its spurious retransmissions, kept as the retransmissions are.
    spurious: Option<u64>,
    /// Messages go as urgent: twice, unless the first is acknowledged in time.
    urgent: bool,
    rx: Vec<u8>,
    tx: Vec<u8>,
}

impl LatlabEndpoint {
    /// The sending side, towards `target`, recovering losses by `recovery`, each message sent
    /// as urgent when `urgent` is.
    pub fn sender(
        target: SocketAddr,
        run: u32,
        recovery: Recovery,
        urgent: bool,
    ) -> io::Result<LatlabEndpoint> {
        let config = Config {
            recovery,
            ..Config::default()
        };
        let mut transport = Transport::new(config, u64::from(run));
        let connection = transport.connect(latlab_io::clock::now_ns(), target);
        let mut e = LatlabEndpoint {
            transport,
            socket: CountingSocket::towards(target)?,
            connection: Some(connection),
            closed: None,
            connected: false,
            retransmissions: None,
            spurious: None,
            urgent,
            rx: vec![0; 65_536],
            tx: vec![0; 65_536],
        };
        // The handshake ends before the first message is due, as for QUIC, ENet and TCP: a
        // lost handshake packet (its timer starts at 1 s) is the connection's setup time, not
        // the latency of the stream's messages.
        let until = std::time::Instant::now() + HANDSHAKE_TIMEOUT;
        while !e.connected {
            if let Some(why) = &e.closed {
                return Err(io::Error::other(format!(
                    "latlab: the handshake failed: {why}"
                )));
            }
            if std::time::Instant::now() >= until {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("latlab: no connection to {target} within {HANDSHAKE_TIMEOUT:?}"),
                ));
            }
            e.poll(Duration::from_millis(5), &mut |_| {})?;
        }
        Ok(e)
    }

    /// The receiving side, on the receiver's socket, answering with `recovery` too (its
    /// acknowledgements and keep-alives are the only thing it sends).
    pub fn receiver(socket: UdpSocket, run: u32, recovery: Recovery) -> io::Result<LatlabEndpoint> {
        let config = Config {
            recovery,
            ..Config::server()
        };
        Ok(LatlabEndpoint {
            transport: Transport::new(config, u64::from(run).rotate_left(32) | 1),
            socket: CountingSocket::new(socket)?,
            connection: None,
            closed: None,
            connected: false,
            retransmissions: None,
            spurious: None,
            urgent: false,
            rx: vec![0; 65_536],
            tx: vec![0; 65_536],
        })
    }

    /// Keeps the connection's retransmission count while the endpoint still has it.
    fn remember_retransmissions(&mut self) {
        if let Some(stats) = self
            .connection
            .and_then(|c| self.transport.connection_stats(c))
        {
            self.retransmissions = Some(stats.retransmissions);
            self.spurious = Some(stats.spurious_retransmissions);
        }
    }

    /// Sends everything the endpoint has to send now.
    fn transmit(&mut self, now: u64) -> io::Result<()> {
        while let Some(t) = self.transport.poll_transmit(now, &mut self.tx) {
            self.socket.send_to(&self.tx[..t.len], t.to)?;
        }
        Ok(())
    }
}

impl Endpoint for LatlabEndpoint {
    fn send(&mut self, message: &[u8]) -> io::Result<()> {
        if let Some(why) = &self.closed {
            return Err(io::Error::other(format!(
                "latlab: the connection closed: {why}"
            )));
        }
        let connection = self
            .connection
            .ok_or_else(|| io::Error::other("latlab: the receiving side does not send"))?;
        let now = latlab_io::clock::now_ns();
        let sent = if self.urgent {
            self.transport
                .send_urgent(now, connection, CHANNEL, message)
        } else {
            self.transport.send(now, connection, CHANNEL, message)
        };
        sent.map_err(|e| io::Error::other(format!("latlab: {e}")))?;
        self.transmit(now)
    }

    fn poll(&mut self, wait: Duration, deliver: &mut dyn FnMut(&[u8])) -> io::Result<()> {
        let now = latlab_io::clock::now_ns();
        self.transmit(now)?;
        let wait = match self.transport.poll_timeout() {
            Some(at) => wait.min(Duration::from_nanos(at.saturating_sub(now))),
            None => wait,
        };
        if self.socket.wait(wait)? {
            while let Some((n, from)) = self.socket.recv_from(&mut self.rx)? {
                let now = latlab_io::clock::now_ns();
                self.transport.handle_datagram(now, from, &self.rx[..n]);
            }
        }
        let now = latlab_io::clock::now_ns();
        if self.transport.poll_timeout().is_some_and(|at| at <= now) {
            self.transport.handle_timeout(now);
        }
        // Closing events take the connection's counters with them: keep them first.
        self.remember_retransmissions();
        while let Some(event) = self.transport.poll_event() {
            match event {
                Event::Message { data, .. } => deliver(&data),
                Event::Accepted { connection, .. } => {
                    // One sender per run: a later connection (a sender that started again)
                    // takes over.
                    self.connection = Some(connection);
                }
                Event::Closed { reason, .. } => self.closed = Some(format!("{reason:?}")),
                Event::Connected { .. } => self.connected = true,
                Event::Expired { .. } => {}
            }
        }
        self.transmit(now)
    }

    fn wire(&mut self) -> WireCounts {
        let mut counts = self.socket.sent();
        self.remember_retransmissions();
        counts.retransmissions = self.retransmissions;
        counts.spurious_retransmissions = self.spurious;
        counts
    }

    fn foreign(&self) -> u64 {
        let s = self.transport.stats();
        s.garbage + s.foreign
    }

    fn close(&mut self) {
        self.remember_retransmissions();
        if let Some(connection) = self.connection {
            let now = latlab_io::clock::now_ns();
            self.transport.close(now, connection, 0);
            let _ = self.transmit(now);
        }
    }
}
