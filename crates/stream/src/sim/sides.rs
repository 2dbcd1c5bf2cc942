//! The sides of a virtual-time stream: each transport's state machine (latlab's `Endpoint`,
//! `Kcp` over an in-memory output, [`QuicCore`], plain UDP) behind one [`Side`] trait, with
//! what it sends and delivers kept in its [`Boxes`] for the host that drives it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::{Duration, Instant};

use latlab_transport::{Config, ConnectionHandle, Endpoint as Transport, Event, Recovery};

use crate::quic::{Identity, QuicCore};
use crate::TransportSpec;

/// What a side has to send (datagrams with their destinations) and has delivered (messages),
/// taken by its host after every call.
#[derive(Debug, Default)]
pub(super) struct Boxes {
    /// Datagrams to send.
    pub(super) outbox: VecDeque<(SocketAddr, Vec<u8>)>,
    /// Messages delivered to the application.
    pub(super) inbox: VecDeque<Vec<u8>>,
}

/// The sender and receiver sides of one stream of `spec`.
pub(super) fn sides(
    spec: &TransportSpec,
    run: u32,
    to: SocketAddr,
    identity: Option<&Identity>,
    base: Instant,
) -> io::Result<(Box<dyn Side>, Box<dyn Side>)> {
    let pair: (Box<dyn Side>, Box<dyn Side>) = match spec {
        TransportSpec::Udp => (
            Box::new(UdpSide::new(Some(to))),
            Box::new(UdpSide::new(None)),
        ),
        TransportSpec::Latlab { recovery, urgent } => (
            Box::new(LatlabSide::sender(run, *recovery, *urgent, to)),
            Box::new(LatlabSide::receiver(run, *recovery)),
        ),
        TransportSpec::Kcp { fast } => (
            Box::new(KcpSide::new(run, *fast, Some(to))?),
            Box::new(KcpSide::new(run, *fast, None)?),
        ),
        TransportSpec::Quic { datagrams } => {
            let identity = identity.expect("made for quic");
            (
                Box::new(QuicSide::new(
                    QuicCore::sender(base, to, identity.certificate(), *datagrams)?,
                    base,
                    true,
                )),
                Box::new(QuicSide::new(
                    QuicCore::receiver(identity, *datagrams)?,
                    base,
                    false,
                )),
            )
        }
        TransportSpec::Tcp(_) | TransportSpec::Enet { .. } => {
            unreachable!("refused by why_not_virtual")
        }
    };
    Ok(pair)
}

/// One side of one stream, sans-IO: everything it wants sent goes to `outbox`, every message
/// it delivers to `inbox`.
pub(super) trait Side {
    /// The application hands over `message` at `now`.
    fn send(&mut self, now: u64, message: &[u8]) -> Result<(), String>;
    /// A datagram from `from` arrived at `now`.
    fn handle_datagram(&mut self, now: u64, from: SocketAddr, data: &[u8]);
    /// The time [`Side::poll_timeout`] named came.
    fn handle_timeout(&mut self, now: u64);
    /// When the side next wants [`Side::handle_timeout`].
    fn poll_timeout(&mut self) -> Option<u64>;
    /// What it has to send and has delivered.
    fn boxes(&mut self) -> &mut Boxes;
    /// Whether the handshake has ended (the schedule starts then).
    fn is_connected(&self) -> bool;
    /// Retransmissions and spurious ones, where the transport tells.
    fn retransmissions(&self) -> (Option<u64>, Option<u64>);
    /// Why the transport gave up, when it did.
    fn failure(&self) -> Option<String>;
}

/// Plain UDP: one datagram per message, no recovery.
struct UdpSide {
    peer: Option<SocketAddr>,
    boxes: Boxes,
}

impl UdpSide {
    fn new(peer: Option<SocketAddr>) -> UdpSide {
        UdpSide {
            peer,
            boxes: Boxes::default(),
        }
    }
}

impl Side for UdpSide {
    fn send(&mut self, _now: u64, message: &[u8]) -> Result<(), String> {
        let peer = self.peer.ok_or("udp: the receiving side does not send")?;
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
        (Some(0), Some(0))
    }
    fn failure(&self) -> Option<String> {
        None
    }
}

/// latlab's transport, messages on its reliable-ordered channel (as `stream::latlab`).
struct LatlabSide {
    transport: Transport,
    connection: Option<ConnectionHandle>,
    connected: bool,
    closed: Option<String>,
    /// Messages go as urgent (`latlab:…,urgent`).
    urgent: bool,
    counts: (Option<u64>, Option<u64>),
    buf: Vec<u8>,
    boxes: Boxes,
}

impl LatlabSide {
    fn sender(run: u32, recovery: Recovery, urgent: bool, to: SocketAddr) -> LatlabSide {
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

    fn receiver(run: u32, recovery: Recovery) -> LatlabSide {
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

    /// Takes what the endpoint has to send and to tell after an input at `now`.
    fn flush(&mut self, now: u64) {
        while let Some(t) = self.transport.poll_transmit(now, &mut self.buf) {
            self.boxes
                .outbox
                .push_back((t.to, self.buf[..t.len].to_vec()));
        }
        if let Some(stats) = self
            .connection
            .and_then(|c| self.transport.connection_stats(c))
        {
            self.counts = (
                Some(stats.retransmissions),
                Some(stats.spurious_retransmissions),
            );
        }
        while let Some(event) = self.transport.poll_event() {
            match event {
                Event::Message { data, .. } => self.boxes.inbox.push_back(data.to_vec()),
                Event::Accepted { connection, .. } => self.connection = Some(connection),
                Event::Connected { .. } => self.connected = true,
                Event::Closed { reason, .. } => self.closed = Some(format!("{reason:?}")),
                Event::Expired { .. } => {}
            }
        }
    }
}

impl Side for LatlabSide {
    fn send(&mut self, now: u64, message: &[u8]) -> Result<(), String> {
        let connection = self
            .connection
            .ok_or("latlab: the receiving side does not send")?;
        let sent = if self.urgent {
            self.transport.send_urgent(now, connection, 0, message)
        } else {
            self.transport.send(now, connection, 0, message)
        };
        sent.map_err(|e| format!("latlab: {e}"))?;
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
}

/// KCP's output in virtual time: each write is one datagram, kept until the side takes it.
struct KcpOutput(Rc<RefCell<VecDeque<Vec<u8>>>>);

impl io::Write for KcpOutput {
    fn write(&mut self, datagram: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().push_back(datagram.to_vec());
        Ok(datagram.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// KCP in message mode with `stream::kcp`'s settings; its clock is virtual milliseconds.
struct KcpSide {
    kcp: kcp::Kcp<KcpOutput>,
    written: Rc<RefCell<VecDeque<Vec<u8>>>>,
    run: u32,
    /// The far side; the receiver learns it from the first datagram of its run.
    peer: Option<SocketAddr>,
    /// KCP's clock at the last call, ms.
    now_ms: u32,
    failed: Option<String>,
    buf: Vec<u8>,
    boxes: Boxes,
}

impl KcpSide {
    fn new(run: u32, fast: bool, peer: Option<SocketAddr>) -> io::Result<KcpSide> {
        let written = Rc::new(RefCell::new(VecDeque::new()));
        let mut kcp = kcp::Kcp::new(run, KcpOutput(written.clone()));
        crate::kcp::configure(&mut kcp, fast);
        kcp.update(0)
            .map_err(|e| io::Error::other(format!("kcp: {e}")))?;
        Ok(KcpSide {
            kcp,
            written,
            run,
            peer,
            now_ms: 0,
            failed: None,
            buf: vec![0; 65_536],
            boxes: Boxes::default(),
        })
    }

    /// Updates KCP at `now` (ns) and takes what it wrote and delivered.
    fn update(&mut self, now: u64) {
        self.now_ms = (now / 1_000_000) as u32;
        if let Err(e) = self.kcp.update(self.now_ms) {
            self.failed.get_or_insert(format!("kcp: {e}"));
        }
        let written: Vec<Vec<u8>> = self.written.borrow_mut().drain(..).collect();
        if let Some(peer) = self.peer {
            self.boxes
                .outbox
                .extend(written.into_iter().map(|d| (peer, d)));
        }
        while let Ok(n) = self.kcp.recv(&mut self.buf) {
            self.boxes.inbox.push_back(self.buf[..n].to_vec());
        }
    }
}

impl Side for KcpSide {
    fn send(&mut self, now: u64, message: &[u8]) -> Result<(), String> {
        // Queued: KCP sends it at its next flush, as over a socket.
        self.kcp.send(message).map_err(|e| format!("kcp: {e}"))?;
        self.update(now);
        Ok(())
    }
    fn handle_datagram(&mut self, now: u64, from: SocketAddr, data: &[u8]) {
        let ours = data.len() >= kcp::KCP_OVERHEAD
            && kcp::get_conv(data) == self.run
            && self.peer.is_none_or(|p| p == from);
        if !ours {
            return;
        }
        self.peer.get_or_insert(from);
        let _ = self.kcp.input(data);
        self.update(now);
    }
    fn handle_timeout(&mut self, now: u64) {
        self.update(now);
    }
    fn poll_timeout(&mut self) -> Option<u64> {
        // KCP counts whole milliseconds: a flush it owes "now" comes at the next one.
        let at = self.kcp.check(self.now_ms);
        let ahead = (at.wrapping_sub(self.now_ms) as i32).max(1) as u64;
        Some((u64::from(self.now_ms) + ahead) * 1_000_000)
    }
    fn boxes(&mut self) -> &mut Boxes {
        &mut self.boxes
    }
    fn is_connected(&self) -> bool {
        true
    }
    fn retransmissions(&self) -> (Option<u64>, Option<u64>) {
        // KCP keeps its retransmission count to itself.
        (None, None)
    }
    fn failure(&self) -> Option<String> {
        self.failed.clone()
    }
}

/// QUIC through `quinn-proto` ([`QuicCore`]), its `Instant`s counted from `base`.
struct QuicSide {
    core: QuicCore,
    base: Instant,
    sender: bool,
    opened: bool,
    failed: Option<String>,
    boxes: Boxes,
}

impl QuicSide {
    /// The side over `core`; a sender's first flight (its Initial) is sent at time 0.
    fn new(core: QuicCore, base: Instant, sender: bool) -> QuicSide {
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
    fn send(&mut self, now: u64, message: &[u8]) -> Result<(), String> {
        self.core
            .send(self.at(now), message)
            .map_err(|e| e.to_string())?;
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
}
