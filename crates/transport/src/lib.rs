//! latlab's own reliable transport for thin streams (game traffic), sans-IO.
//!
//! A thin stream sends small messages far apart, so it rarely has the later packets in flight
//! that TCP's loss detection needs, and its worst-case latency — what players feel — is set
//! by the retransmission timeout. This crate keeps that worst case low (see Harcsik et al.,
//! and RFC 6298, RFC 8985):
//!
//! * a **stateless-cookie handshake** ([`latlab_wire::transport`]): a server keeps no state
//!   and sends nothing larger than the request until the client proves its address;
//! * **channels** ([`ChannelKind`]): reliable-ordered, reliable-unordered, unreliable,
//!   sequenced (only the newest is delivered) and deadline (reliable until the message is
//!   older than its deadline, then dropped and reported by [`Event::Expired`] on both sides);
//! * **selective ACKs** sent at once while the sender has few packets in flight (it sets the
//!   ack-immediately flag) or when a packet opens a gap; an RTT estimate (RFC 6298) for which
//!   Karn's rule holds by construction: packet numbers are never reused, so each ACK names the
//!   one transmission it answers;
//! * **loss recovery policies** ([`Recovery`], parsed from text such as
//!   `thin:min-rto=50ms,rdb=600`): `tcp-like`, `thin` (linear timeouts, retransmit on the
//!   first SACK gap), `rack` (time threshold), redundant data bundling on top, and proactive
//!   duplication of urgent messages;
//! * **congestion control** that never holds a thin stream (fewer than
//!   [`Recovery::thin_packets`] in flight) but halves a window-limited sender's window once per
//!   round trip on loss and collapses it on persistent congestion;
//! * **fragmentation** of messages over the MTU and reassembly within a memory bound;
//! * **counters** ([`ConnectionStats`], [`EndpointStats`]).
//!
//! # Guarantees
//!
//! No socket, clock or thread: time comes in as `now` (ns) and randomness from a seed, so a
//! run is reproducible. Bytes from the network never panic: garbage, foreign connection ids
//! and bad handshakes are counted and dropped, and cost an established connection nothing.
//! No `unsafe`.
//!
//! # Example: a client and a server exchange one message
//!
//! ```
//! use latlab_transport::{Config, Endpoint, Event};
//!
//! let (client_addr, server_addr) = ("10.0.0.1:5000".parse().unwrap(), "10.0.0.2:7000".parse().unwrap());
//! let mut client = Endpoint::new(Config::default(), 1);
//! let mut server = Endpoint::new(Config::server(), 2);
//! let connection = client.connect(0, server_addr);
//! client.send(0, connection, 0, b"hello").unwrap(); // channel 0: reliable-ordered
//!
//! // A perfect network with 10 ms one-way delay, in virtual time.
//! let mut now = 0;
//! let mut in_flight: Vec<(u64, bool, Vec<u8>)> = Vec::new(); // (arrival, to server, bytes)
//! let mut buf = [0u8; 1200];
//! let mut got = None;
//! while got.is_none() && now < 1_000_000_000 {
//!     while let Some(t) = client.poll_transmit(now, &mut buf) {
//!         in_flight.push((now + 10_000_000, true, buf[..t.len].to_vec()));
//!     }
//!     while let Some(t) = server.poll_transmit(now, &mut buf) {
//!         in_flight.push((now + 10_000_000, false, buf[..t.len].to_vec()));
//!     }
//!     in_flight.sort_by_key(|p| p.0);
//!     let next = [in_flight.first().map(|p| p.0), client.poll_timeout(), server.poll_timeout()];
//!     now = next.into_iter().flatten().min().unwrap().max(now);
//!     while in_flight.first().is_some_and(|p| p.0 <= now) {
//!         let (_, to_server, bytes) = in_flight.remove(0);
//!         if to_server {
//!             server.handle_datagram(now, client_addr, &bytes);
//!         } else {
//!             client.handle_datagram(now, server_addr, &bytes);
//!         }
//!     }
//!     client.handle_timeout(now);
//!     server.handle_timeout(now);
//!     while let Some(event) = server.poll_event() {
//!         if let Event::Message { data, .. } = event {
//!             got = Some((now, data));
//!         }
//!     }
//! }
//! // Hello, Challenge, HelloCookie, Accept, then the message: 5 one-way trips.
//! assert_eq!(got, Some((50_000_000, b"hello".to_vec())));
//! assert!(matches!(client.poll_event(), Some(Event::Connected { .. })));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::net::SocketAddr;

mod config;
mod connection;
mod endpoint;
mod recv;
mod rtt;

pub use config::{
    ChannelConfig, ChannelKind, Config, Copies, Feedback, LossRule, ParseRecoveryError, Recovery,
    XorCopies, COPIES_AUTO_PACKETS,
};
pub use endpoint::{Endpoint, MAX_PACKET_NUMBER_JUMP, MIN_TRANSMIT_BUF};

/// Names a connection of an [`Endpoint`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnectionHandle(pub u64);

/// Number of a message within its channel (0, 1, 2, ... in the order sent).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MessageId(pub u32);

/// A packet [`Endpoint::poll_transmit`] wrote: send the first `len` bytes of the buffer to `to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Destination.
    pub to: SocketAddr,
    /// Bytes written.
    pub len: usize,
}

/// Why a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloseReason {
    /// [`Endpoint::close`] was called.
    Local,
    /// The peer closed with this code.
    Remote(u16),
    /// Nothing was heard for [`Config::idle_timeout_ns`].
    IdleTimeout,
    /// The server did not accept within [`Config::idle_timeout_ns`].
    HandshakeTimeout,
}

/// What an [`Endpoint`] tells its user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// Client: the server accepted `connection`.
    Connected {
        /// The connection.
        connection: ConnectionHandle,
    },
    /// Server: a client proved its address and `connection` exists.
    Accepted {
        /// The new connection.
        connection: ConnectionHandle,
        /// The client's address.
        remote: SocketAddr,
    },
    /// A whole message arrived.
    Message {
        /// Its connection.
        connection: ConnectionHandle,
        /// Its channel.
        channel: u8,
        /// Its number within the channel.
        message: MessageId,
        /// Its bytes.
        data: Vec<u8>,
    },
    /// A deadline-channel message was dropped for being late: on the sender when its deadline
    /// passed, on the receiver when told so before the message arrived.
    Expired {
        /// Its connection.
        connection: ConnectionHandle,
        /// Its channel.
        channel: u8,
        /// Its number.
        message: MessageId,
    },
    /// The connection is gone.
    Closed {
        /// The connection.
        connection: ConnectionHandle,
        /// Why.
        reason: CloseReason,
    },
}

/// Why [`Endpoint::send`] refused a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The handle names no connection (never made, or closed and forgotten).
    #[error("no such connection")]
    UnknownConnection,
    /// The connection is closing.
    #[error("connection closed")]
    Closed,
    /// The channel id is not configured.
    #[error("no channel {0}")]
    UnknownChannel(u8),
    /// The message is longer than [`Config::max_message_len`] (or 65 535 fragments).
    #[error("message of {len} bytes is longer than {max}")]
    TooLong {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The connection holds [`Config::max_send_buffer_bytes`] of unacknowledged messages.
    #[error("send buffer full")]
    BufferFull,
}

/// Counters and estimates of one connection.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ConnectionStats {
    /// Packets sent (handshake included).
    pub packets_sent: u64,
    /// UDP payload bytes sent.
    pub bytes_sent: u64,
    /// Packets received.
    pub packets_received: u64,
    /// UDP payload bytes received.
    pub bytes_received: u64,
    /// Messages accepted by `send`.
    pub messages_sent: u64,
    /// Messages delivered to the application.
    pub messages_received: u64,
    /// Fragments sent again (after a loss, a timeout, or as an urgent duplicate).
    pub retransmissions: u64,
    /// Fragments sent again whose earlier copy was acknowledged after all.
    pub spurious_retransmissions: u64,
    /// Bytes of `Data` frames bundled redundantly (RDB).
    pub redundant_bytes: u64,
    /// Urgent messages sent a second time (blind copies included).
    pub duplicated_messages: u64,
    /// NACK frames received.
    pub nacks_received: u64,
    /// Fragments sent again because a NACK asked (within the half-SRTT budget).
    pub nack_repairs: u64,
    /// NACK frames sent.
    pub nacks_sent: u64,
    /// Blind copies sent as the XOR of a message and the one before it.
    pub xor_copies: u64,
    /// Messages recovered from an XOR copy and the other message in it.
    pub xor_recovered: u64,
    /// Packets declared lost.
    pub packets_lost: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Packets received twice.
    pub duplicate_packets: u64,
    /// Message copies received after the message was delivered.
    pub duplicate_messages: u64,
    /// Sequenced messages older than one delivered, dropped.
    pub sequenced_dropped: u64,
    /// Deadline messages this side dropped for being late.
    pub expired: u64,
    /// Packets refused (bad channel, before the handshake ended, no frame).
    pub packets_refused: u64,
    /// Packets refused whole because their number lay further above the highest received
    /// than a genuine peer's can (forged, corrupted or stale): they change nothing.
    pub packets_far: u64,
    /// Server: times a packet with the connection's short id from a new address moved the
    /// connection there.
    pub address_moves: u64,
    /// Server: packets with the connection's short id from another address that were dropped
    /// without moving it (not the newest received, or the address is another connection's).
    pub moves_refused: u64,
    /// Packets refused for lack of reassembly memory (not acknowledged; they come again).
    pub reassembly_refused: u64,
    /// Times new data waited for the congestion window.
    pub window_limited: u64,
    /// Smoothed RTT (ns), `None` before the first sample.
    pub srtt_ns: Option<u64>,
    /// RTT variation (ns).
    pub rttvar_ns: u64,
    /// Current retransmission timeout (ns), backoff included.
    pub rto_ns: u64,
    /// Congestion window (bytes).
    pub congestion_window: usize,
    /// Bytes in flight.
    pub bytes_in_flight: usize,
    /// Ack-eliciting packets in flight.
    pub packets_in_flight: usize,
}

/// Handshake packets dropped, by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HandshakeDrops {
    /// A `Hello` shorter than the minimum (it could amplify).
    pub hello_too_short: u64,
    /// A cookie whose MAC does not verify (forged, or replayed from another address or id).
    pub bad_cookie: u64,
    /// A genuine cookie from an epoch too old.
    pub expired_cookie: u64,
    /// A good cookie for a connection id another address holds.
    pub id_in_use: u64,
    /// A `Hello` or cookie sent to an endpoint that does not accept connections.
    pub not_a_server: u64,
    /// A `Hello` or cookie asking for the compact format of a server that does not speak it.
    pub unsupported_version: u64,
    /// A `Challenge` or `Accept` no connection waits for.
    pub unexpected: u64,
    /// A handshake packet with other frames, or a non-handshake frame with packet number 0.
    pub malformed: u64,
    /// Answers dropped because too many were waiting to be sent.
    pub answer_queue_full: u64,
}

/// Counters of an endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EndpointStats {
    /// Datagrams handed to `handle_datagram`.
    pub packets_received: u64,
    /// Their bytes.
    pub bytes_received: u64,
    /// Packets written by `poll_transmit`.
    pub packets_sent: u64,
    /// Their bytes.
    pub bytes_sent: u64,
    /// Datagrams that are not transport packets.
    pub garbage: u64,
    /// Packets for a connection id (or short id) this endpoint does not hold, or from an
    /// address no compact connection has, or a version 1 packet from another address.
    pub foreign: u64,
    /// Connections accepted.
    pub accepted: u64,
    /// Handshake packets dropped, by cause.
    pub handshake_drops: HandshakeDrops,
}
