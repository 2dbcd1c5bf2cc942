//! The sans-IO sides of the transports that have one: latlab's `Endpoint`, `Kcp` over an
//! in-memory output, [`QuicCore`] and plain UDP, each behind one [`Side`] trait, with what it
//! sends and delivers kept in its [`Boxes`] for whoever drives it.
//!
//! Two drivers run every side, and nothing else does: [`crate::driver::Driver`] over a real
//! socket (io's `DatagramPort`, through [`crate::wire::CountingSocket`]) for `latlab stream`,
//! and `stream::sim`'s hosts over `latlab_link::sim` in virtual time for the transports
//! study. A side never reads a clock: every call takes `now`, ns since the side's `base`.
//! TCP and ENet (whose library keeps its own clock and socket) have no side and run only on
//! sockets.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::time::Instant;

use crate::quic::{Identity, QuicCore};
use crate::TransportSpec;

mod kcp;
mod latlab;
mod quic;
mod udp;

/// What a side has to send (datagrams with their destinations) and has delivered (messages),
/// taken by its driver after every call.
#[derive(Debug, Default)]
pub(crate) struct Boxes {
    /// Datagrams to send.
    pub(crate) outbox: VecDeque<(SocketAddr, Vec<u8>)>,
    /// Messages delivered to the application.
    pub(crate) inbox: VecDeque<Vec<u8>>,
}

/// One side of one stream, sans-IO: everything it wants sent goes to `outbox`, every message
/// it delivers to `inbox`.
pub(crate) trait Side: Send {
    /// The application hands over `message` at `now`.
    fn send(&mut self, now: u64, message: &[u8]) -> io::Result<()>;
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
    /// Why the handshake failed, when the transport gave up before it ended.
    fn handshake_failure(&self) -> Option<String> {
        self.failure()
    }
    /// Datagrams that were not this side's transport's (garbage, another run's), counted and
    /// dropped.
    fn foreign(&self) -> u64;
    /// Ends the connection politely at `now`: what that sends goes to the outbox.
    fn close(&mut self, now: u64);
}

/// The sending side of one stream of `spec` towards `to`; `certificate` is the receiver's
/// (QUIC), `base` the instant its time 0 stands for.
pub(crate) fn sender(
    spec: &TransportSpec,
    run: u32,
    to: SocketAddr,
    certificate: Option<&[u8]>,
    base: Instant,
) -> io::Result<Box<dyn Side>> {
    Ok(match spec {
        TransportSpec::Udp => Box::new(udp::UdpSide::new(Some(to))),
        TransportSpec::Latlab { recovery, urgent } => {
            Box::new(latlab::LatlabSide::sender(run, *recovery, *urgent, to))
        }
        TransportSpec::Kcp { fast } => Box::new(kcp::KcpSide::new(run, *fast, Some(to))?),
        TransportSpec::Quic { datagrams } => Box::new(quic::QuicSide::new(
            QuicCore::sender(base, to, certificate.unwrap_or_default(), *datagrams)?,
            base,
            true,
        )),
        TransportSpec::Tcp(_) | TransportSpec::Enet { .. } => return Err(no_side(spec)),
    })
}

/// The receiving side of one stream of `spec`; `identity` is its QUIC certificate.
pub(crate) fn receiver(
    spec: &TransportSpec,
    run: u32,
    identity: Option<&Identity>,
    base: Instant,
) -> io::Result<Box<dyn Side>> {
    Ok(match spec {
        TransportSpec::Udp => Box::new(udp::UdpSide::new(None)),
        TransportSpec::Latlab { recovery, .. } => {
            Box::new(latlab::LatlabSide::receiver(run, *recovery))
        }
        TransportSpec::Kcp { fast } => Box::new(kcp::KcpSide::new(run, *fast, None)?),
        TransportSpec::Quic { datagrams } => {
            let identity = identity
                .ok_or_else(|| io::Error::other("quic: the receiver has no certificate"))?;
            Box::new(quic::QuicSide::new(
                QuicCore::receiver(identity, *datagrams)?,
                base,
                false,
            ))
        }
        TransportSpec::Tcp(_) | TransportSpec::Enet { .. } => return Err(no_side(spec)),
    })
}

/// The sender and receiver sides of one stream of `spec`, for a run in virtual time.
pub(crate) fn sides(
    spec: &TransportSpec,
    run: u32,
    to: SocketAddr,
    identity: Option<&Identity>,
    base: Instant,
) -> io::Result<(Box<dyn Side>, Box<dyn Side>)> {
    let certificate = identity.map(Identity::certificate);
    Ok((
        sender(spec, run, to, certificate, base)?,
        receiver(spec, run, identity, base)?,
    ))
}

fn no_side(spec: &TransportSpec) -> io::Error {
    io::Error::other(format!(
        "{spec} has no sans-IO side; it runs on sockets only"
    ))
}
