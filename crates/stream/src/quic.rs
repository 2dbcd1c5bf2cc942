//! `quic`: QUIC through `quinn-proto` (quinn's sans-IO state machine, rustls with ring): one
//! bidirectional stream with length-framed messages (`quic`), or unreliable datagrams that the
//! application sends again after about an RTO without an application acknowledgement
//! (`quic:datagrams`). `QuicCore` is the state without a socket; `side::quic` puts it behind
//! the `Side` every driver runs.
//!
//! The receiver makes a self-signed certificate ([`Identity`]) when it starts and hands its DER
//! to each sender over the control connection; the sender trusts that certificate and no
//! other. Retransmissions are QUIC's packets declared lost (their frames go again in new
//! packets), plus the application's datagram resends.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Dir, EndpointConfig, Event,
    ServerConfig, StreamEvent, StreamId,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::message::{self, frame, Deframer};

/// The name the certificate is made for and the sender asks for.
const SERVER_NAME: &str = "latlab-stream";

/// The receiver's self-signed certificate and its key, made once when it starts.
#[derive(Clone)]
pub struct Identity {
    certificate: Vec<u8>,
    key: Vec<u8>,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity").finish_non_exhaustive()
    }
}

impl Identity {
    /// A new self-signed certificate for the name the sender asks for (`latlab-stream`).
    pub fn generate() -> io::Result<Identity> {
        let made = rcgen::generate_simple_self_signed(vec![SERVER_NAME.to_string()])
            .map_err(|e| io::Error::other(format!("quic: making a certificate: {e}")))?;
        Ok(Identity {
            certificate: made.cert.der().to_vec(),
            key: made.key_pair.serialize_der(),
        })
    }

    /// The certificate, DER, for the sender to pin.
    pub fn certificate(&self) -> &[u8] {
        &self.certificate
    }

    fn server_config(&self) -> io::Result<ServerConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(tls_error)?
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(self.certificate.clone())],
                PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key.clone())),
            )
            .map_err(tls_error)?;
        let crypto =
            QuicServerConfig::try_from(tls).map_err(|e| io::Error::other(format!("quic: {e}")))?;
        Ok(ServerConfig::with_crypto(Arc::new(crypto)))
    }
}

fn tls_error(e: rustls::Error) -> io::Error {
    io::Error::other(format!("quic: tls: {e}"))
}

/// A client configuration that trusts `certificate` (DER) and nothing else.
fn client_config(certificate: &[u8]) -> io::Result<ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from(certificate.to_vec()))
        .map_err(tls_error)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(tls_error)?
        .with_root_certificates(roots)
        .with_no_client_auth();
    let crypto =
        QuicClientConfig::try_from(tls).map_err(|e| io::Error::other(format!("quic: {e}")))?;
    Ok(ClientConfig::new(Arc::new(crypto)))
}

/// A datagram sent and not yet acknowledged by the application at the other end.
#[derive(Debug)]
struct Unacked {
    message: Bytes,
    sent: Instant,
}

/// Where the QUIC state machine's datagrams go: a socket, or a virtual-time network.
pub(crate) type Out<'a> = dyn FnMut(&[u8], SocketAddr) -> io::Result<()> + 'a;

/// Either side of a `quic` run without its socket: the QUIC endpoint and connection, the
/// stream or the datagrams with their application retransmissions. Every call takes the time
/// and where to put what it sends, so the same state runs over a socket and in virtual time
/// (behind `side::quic`).
pub(crate) struct QuicCore {
    endpoint: quinn_proto::Endpoint,
    conn: Option<(ConnectionHandle, Connection)>,
    sender: bool,
    datagrams: bool,
    connected: bool,
    /// Why the connection ended, once it has: sending then fails; polling goes on quietly
    /// (the receiver closes after its results, while the sender still polls).
    lost: Option<String>,
    stream: Option<StreamId>,
    /// Framed bytes the stream has not taken yet (flow control).
    pending: Vec<u8>,
    deframer: Deframer,
    unacked: BTreeMap<u64, Unacked>,
    app_resends: u64,
    foreign: u64,
    send_buf: Vec<u8>,
}

impl QuicCore {
    /// The sending side: its connection to `target` started at `now`, trusting only
    /// `certificate`.
    pub(crate) fn sender(
        now: Instant,
        target: SocketAddr,
        certificate: &[u8],
        datagrams: bool,
    ) -> io::Result<QuicCore> {
        let endpoint =
            quinn_proto::Endpoint::new(Arc::new(EndpointConfig::default()), None, true, None);
        let mut core = QuicCore::new(endpoint, true, datagrams);
        let conn = core
            .endpoint
            .connect(now, client_config(certificate)?, target, SERVER_NAME)
            .map_err(|err| io::Error::other(format!("quic: {err}")))?;
        core.conn = Some(conn);
        Ok(core)
    }

    /// The receiving side: accepts the first connection.
    pub(crate) fn receiver(identity: &Identity, datagrams: bool) -> io::Result<QuicCore> {
        let endpoint = quinn_proto::Endpoint::new(
            Arc::new(EndpointConfig::default()),
            Some(Arc::new(identity.server_config()?)),
            true,
            None,
        );
        Ok(QuicCore::new(endpoint, false, datagrams))
    }

    fn new(endpoint: quinn_proto::Endpoint, sender: bool, datagrams: bool) -> QuicCore {
        QuicCore {
            endpoint,
            conn: None,
            sender,
            datagrams,
            connected: false,
            lost: None,
            stream: None,
            pending: Vec::new(),
            deframer: Deframer::new(),
            unacked: BTreeMap::new(),
            app_resends: 0,
            foreign: 0,
            send_buf: Vec::new(),
        }
    }

    /// Whether the handshake has ended.
    pub(crate) fn is_connected(&self) -> bool {
        self.connected
    }

    /// The sender's stream, opened once the handshake has ended (`quic` without datagrams).
    pub(crate) fn open_stream(&mut self) {
        if let (false, Some((_, conn))) = (self.datagrams, &mut self.conn) {
            self.stream = conn.streams().open(Dir::Bi);
        }
    }

    /// Hands the datagram `data` from `from`, arrived at `now`, to the QUIC endpoint.
    pub(crate) fn handle(
        &mut self,
        now: Instant,
        from: SocketAddr,
        data: &[u8],
        out: &mut Out<'_>,
    ) -> io::Result<()> {
        let data = BytesMut::from(data);
        self.send_buf.clear();
        match self
            .endpoint
            .handle(now, from, None, None, data, &mut self.send_buf)
        {
            Some(DatagramEvent::ConnectionEvent(ch, event)) => match &mut self.conn {
                Some((own, conn)) if *own == ch => conn.handle_event(event),
                _ => self.foreign += 1,
            },
            Some(DatagramEvent::NewConnection(incoming)) => {
                if self.sender || self.conn.is_some() {
                    self.foreign += 1;
                    let t = self.endpoint.refuse(incoming, &mut self.send_buf);
                    return out(&self.send_buf[..t.size], t.destination);
                }
                match self
                    .endpoint
                    .accept(incoming, now, &mut self.send_buf, None)
                {
                    Ok((ch, conn)) => self.conn = Some((ch, conn)),
                    Err(e) => {
                        self.foreign += 1;
                        if let Some(t) = e.response {
                            out(&self.send_buf[..t.size], t.destination)?;
                        }
                    }
                }
            }
            Some(DatagramEvent::Response(t)) => out(&self.send_buf[..t.size], t.destination)?,
            None => self.foreign += 1,
        }
        Ok(())
    }

    /// About an RTO for the application's datagram resends: twice the smoothed RTT, at least
    /// 10 ms.
    fn resend_after(conn: &Connection) -> Duration {
        (conn.rtt() * 2).max(Duration::from_millis(10))
    }

    /// Runs the connection after new input: timers, events, reads, application
    /// retransmissions, then everything it has to send.
    pub(crate) fn drive(
        &mut self,
        now: Instant,
        deliver: &mut dyn FnMut(&[u8]),
        out: &mut Out<'_>,
    ) -> io::Result<()> {
        let Some((ch, conn)) = &mut self.conn else {
            return Ok(());
        };
        if conn.poll_timeout().is_some_and(|at| at <= now) {
            conn.handle_timeout(now);
        }
        while let Some(event) = conn.poll_endpoint_events() {
            if let Some(back) = self.endpoint.handle_event(*ch, event) {
                conn.handle_event(back);
            }
        }
        while let Some(event) = conn.poll() {
            match event {
                Event::Connected => self.connected = true,
                Event::Stream(StreamEvent::Opened { dir: Dir::Bi }) => {
                    if let Some(id) = conn.streams().accept(Dir::Bi) {
                        self.stream.get_or_insert(id);
                    }
                }
                Event::ConnectionLost { reason } => self.lost = Some(reason.to_string()),
                _ => {}
            }
        }
        // The stream: what arrived, and what waits for flow-control credit.
        if let Some(id) = self.stream {
            if let Ok(mut chunks) = conn.recv_stream(id).read(true) {
                while let Ok(Some(chunk)) = chunks.next(usize::MAX) {
                    self.deframer.push(&chunk.bytes);
                }
                let _ = chunks.finalize();
            }
            loop {
                match self.deframer.next_frame() {
                    Ok(Some(message)) => deliver(message),
                    Ok(None) => break,
                    Err(_) => {
                        self.foreign += self.deframer.pending() as u64;
                        self.deframer = Deframer::new();
                        break;
                    }
                }
            }
            if !self.pending.is_empty() {
                if let Ok(n) = conn.send_stream(id).write(&self.pending) {
                    self.pending.drain(..n);
                }
            }
        }
        // Datagrams: messages (the receiver acknowledges each one) or acknowledgements.
        while let Some(datagram) = conn.datagrams().recv() {
            if self.sender {
                if let Some(seq) = datagram.get(..8).and_then(|b| <[u8; 8]>::try_from(b).ok()) {
                    self.unacked.remove(&u64::from_be_bytes(seq));
                }
            } else {
                if let Ok(m) = message::parse(&datagram) {
                    let _ = conn
                        .datagrams()
                        .send(Bytes::copy_from_slice(&m.seq.to_be_bytes()), true);
                }
                deliver(&datagram);
            }
        }
        if self.sender && self.datagrams && self.connected {
            let rto = QuicCore::resend_after(conn);
            for u in self.unacked.values_mut() {
                if now.duration_since(u.sent) >= rto
                    && conn.datagrams().send(u.message.clone(), false).is_ok()
                {
                    u.sent = now;
                    self.app_resends += 1;
                }
            }
        }
        loop {
            self.send_buf.clear();
            let Some(t) = conn.poll_transmit(now, 1, &mut self.send_buf) else {
                break;
            };
            out(&self.send_buf[..t.size], t.destination)?;
        }
        Ok(())
    }

    /// When the connection next wants [`QuicCore::drive`] without new input: its own timer,
    /// or the first application resend that falls due.
    pub(crate) fn next_timeout(&mut self) -> Option<Instant> {
        let (_, conn) = self.conn.as_mut()?;
        let timer = conn.poll_timeout();
        let resend = match (
            self.sender && self.datagrams && self.connected,
            self.unacked.values().map(|u| u.sent).min(),
        ) {
            (true, Some(first)) => Some(first + QuicCore::resend_after(conn)),
            _ => None,
        };
        timer.into_iter().chain(resend).min()
    }

    /// Queues `message` at `now` (on the stream, or as a datagram kept until the far side
    /// acknowledges it); [`QuicCore::drive`] sends it.
    pub(crate) fn send(&mut self, now: Instant, message: &[u8]) -> io::Result<()> {
        if let Some(reason) = &self.lost {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("quic: connection lost: {reason}"),
            ));
        }
        let Some((_, conn)) = &mut self.conn else {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                "quic: no connection",
            ));
        };
        if self.datagrams {
            let seq = message::parse(message)
                .map_err(|e| io::Error::other(format!("quic:datagrams: {e}")))?
                .seq;
            let max = conn.datagrams().max_size().unwrap_or(0);
            if message.len() > max {
                return Err(io::Error::other(format!(
                    "quic:datagrams: a {}-byte message does not fit the largest datagram \
                     ({max} bytes)",
                    message.len()
                )));
            }
            let message = Bytes::copy_from_slice(message);
            // A full datagram queue is a loss the resend timer recovers.
            let _ = conn.datagrams().send(message.clone(), false);
            self.unacked.insert(seq, Unacked { message, sent: now });
        } else if let Some(id) = self.stream {
            frame(message, &mut self.pending);
            if let Ok(n) = conn.send_stream(id).write(&self.pending) {
                self.pending.drain(..n);
            }
        }
        Ok(())
    }

    /// Retransmissions: QUIC's packets declared lost, and the application's datagram resends.
    pub(crate) fn retransmissions(&self) -> u64 {
        let lost = self
            .conn
            .as_ref()
            .map_or(0, |(_, c)| c.stats().path.lost_packets);
        lost + self.app_resends
    }

    /// Datagrams and stream bytes that were not this connection's, counted and dropped.
    pub(crate) fn foreign(&self) -> u64 {
        self.foreign
    }

    /// Closes the connection at `now` (then [`QuicCore::drive`] sends the close).
    pub(crate) fn close(&mut self, now: Instant) {
        if let Some((_, conn)) = &mut self.conn {
            conn.close(now, 0u32.into(), Bytes::new());
        }
    }
}
