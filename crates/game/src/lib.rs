//! latlab-game: the model game server of latlab, sans-IO.
//!
//! The server is the one of Emmerich et al., section IV-C: it keeps a list of
//! connected clients and, for every game packet it receives, sends a copy to
//! every client in the list — here, every client of the sender's game, the
//! sender included, since several small games may share one server (by
//! default everybody is in game 0). Game packets are latlab probes
//! ([`latlab_wire::probe`]), so the meter at each client can time every copy.
//! The emulated processing work (W CPU cycles per packet) is the engine's
//! business, not this crate's.
//!
//! - [`Server`]: the client table, the join handshake and the fan-out
//!   decision for each datagram.
//! - [`Joiner`]: the client side of the join handshake, one per client socket.
//!
//! This crate never touches a socket, a thread or the clock: every call takes
//! `now` in nanoseconds (the idle timeout is a deadline from
//! [`Server::poll_timeout`] that the caller meets with
//! [`Server::handle_timeout`]), and the only secret (the cookie key) comes in through
//! [`ServerConfig::secret`].
//!
//! # Guarantees
//!
//! * **No fan-out to an address that did not prove it owns it.** A client
//!   joins with a stateless cookie handshake (as in netcode.io and QUIC's
//!   Retry): `JoinRequest` → `Challenge` carrying a SipHash-2-4 MAC over the
//!   client's address → `JoinConfirm` echoing it from that address. Only a
//!   `JoinConfirm` with a valid MAC for its source address adds a table entry,
//!   so a spoofed source address never receives copies.
//! * **No amplification.** A `JoinRequest` must be padded to 64 bytes; every
//!   answer (`Challenge` 32 B, `Welcome` 24 B, `Reject` 24 B) is at most as
//!   long as the datagram that caused it, goes back to that datagram's source,
//!   and at most one answer is queued per datagram. Forged cookies are not
//!   answered at all.
//! * **Bounded memory.** The table holds at most
//!   [`ServerConfig::max_clients`] clients, the answer queue at most
//!   [`ServerConfig::max_queued_answers`] answers (drop-oldest), and a
//!   `JoinRequest` never creates state.
//! * **No host can lock the others out.** A client not heard from for
//!   [`ServerConfig::idle_timeout_ns`] is removed by
//!   [`Server::handle_timeout`] (counted in [`ServerCounters::idle_expired`])
//!   and its slot reused; one host (an IPv4 address or an IPv6 /64) holds at
//!   most [`ServerConfig::max_clients_per_host`] clients, and its next join is
//!   refused (counted as [`DropCause::HostFull`]).
//! * **Bytes from the network never panic.** Every datagram yields a
//!   [`Verdict`]; every drop is counted by cause in [`ServerCounters`].
//! * **No allocation per game packet:** [`Verdict::FanOut`] borrows the
//!   game's recipient list.
//!
//! # Example: two clients join, one probe fans out
//!
//! ```
//! use std::net::SocketAddr;
//! use latlab_game::{Joiner, Server, ServerConfig, Verdict};
//! use latlab_wire::probe;
//!
//! let mut server = Server::new(ServerConfig { secret: [7; 16], ..ServerConfig::default() });
//! let addrs: [SocketAddr; 2] = ["10.0.0.2:4000".parse().unwrap(), "10.0.0.3:4000".parse().unwrap()];
//! let mut joiners = [Joiner::new(0x1111, 0), Joiner::new(0x2222, 0)];
//! let now = 1_000_000;
//! let (mut up, mut down) = ([0u8; 64], [0u8; 64]);
//!
//! // Each client: JoinRequest → Challenge, JoinConfirm → Welcome.
//! for (addr, joiner) in addrs.iter().zip(&mut joiners) {
//!     while !joiner.is_joined() {
//!         let n = joiner.poll_transmit(now, &mut up).expect("a join message is due");
//!         server.handle_datagram(now, *addr, &up[..n]);
//!         let (to, m) = server.poll_transmit(&mut down).expect("the server answers");
//!         assert_eq!(to, *addr);
//!         joiner.handle_datagram(now, &down[..m]);
//!     }
//! }
//! assert_eq!(server.clients(), 2);
//!
//! // A probe from the first client is sent to both, the sender included.
//! let mut packet = [0u8; 128];
//! probe::Repr { run_id: 1, flow: 0, seq: 0, intended_send_ns: now, ..Default::default() }
//!     .emit(&mut probe::Packet::new_unchecked(&mut packet[..]));
//! match server.handle_datagram(now, addrs[0], &packet) {
//!     Verdict::FanOut { recipients } => assert_eq!(recipients, &addrs[..]),
//!     other => panic!("expected a fan-out, got {other:?}"),
//! }
//! assert_eq!(server.counters().copies, 2);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod cookie;
mod idle;
mod joiner;
mod server;

pub use joiner::{JoinEvent, Joiner, RETRANSMIT_NS};
pub use latlab_wire::game::RejectReason;
pub use server::{DropCause, Server, ServerConfig, ServerCounters, Verdict};

#[cfg(test)]
mod tests;
