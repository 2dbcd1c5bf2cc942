//! `latlab stream`: one thin stream of messages over a real transport, from a sender to a
//! receiver over real sockets, with the application latency of every message and what the
//! transport put on the wire.
//!
//! `stream recv` listens on one address and port: a TCP listener for control connections (and
//! a `tcp` run's data connection) and a UDP socket for the UDP-based transports. It serves one
//! `stream send` run after another; a bad control connection, a garbage datagram or a run that
//! breaks off is counted and logged, and the receiver goes on. `stream send` starts a run over
//! a control connection ([`control`]), sends messages open-loop on a fixed schedule (each
//! stamped with its *intended* send time, so a transport that holds the application back shows
//! as latency), ends it, and gets the receiver's histogram and counters back; the sender writes
//! the results ([`StreamSummary`]).
//!
//! Transports are behind one trait, [`transport::Endpoint`]: `udp`, `tcp` (congestion control,
//! thin-stream options), `enet`, `kcp`, `quic` (stream or datagrams). `udt` and `sctp` are
//! refused with the reason. Guarantees: bytes from the network never panic the receiver nor
//! stop it; a reliable transport that loses a message makes the run fail, said as such.

#![forbid(unsafe_code)]

pub mod control;
mod driver;
pub mod endpoint;
pub mod enet;
pub mod message;
pub mod plan;
pub mod quic;
pub mod recv;
pub mod send;
mod side;
pub mod sim;
pub mod summary;
pub mod tcp;
pub mod transport;
pub mod wire;

pub use recv::{RecvCommand, RecvReport};
pub use send::SendCommand;
pub use summary::{StreamSummary, WireReport};
pub use transport::{Endpoint, TcpOptions, TransportSpec};
