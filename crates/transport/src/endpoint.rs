//! The endpoint: demultiplexes datagrams by connection id (version 2's short packets by
//! remote address, or by short id when the client's address changed), answers handshakes
//! statelessly (`endpoint/handshake.rs`), and hands out packets, timers and events in quinn's
//! verb set.
//!
//! # What an unauthenticated connection can and cannot resist
//!
//! Nothing on the wire is authenticated. A packet whose number lies further above the highest
//! received than a genuine peer's can ([`MAX_PACKET_NUMBER_JUMP`]; for a short header a
//! quarter of its truncation window, [`compact::max_jump`]) is refused whole and counted
//! (`ConnectionStats::packets_far`): a forged, corrupted or stale number far from the window
//! changes nothing, and only a packet that parsed whole moves the window. A short packet with
//! a short id from a new address moves its connection there only if its number is within that
//! window and above every number received (so a replayed or reordered older packet never
//! moves it back), and the address is no other connection's: a blind attacker must guess the
//! 32-bit id and a number in the window. Whoever sees the traffic (the id travels in the
//! `Accept` and while a client announces a new address) can forge packets inside the window,
//! which do what their frames say, and can move the connection to another address, towards
//! which the server then sends its stream: no more than the connection's window holds, but
//! nothing here stops it.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;

use latlab_wire::transport::compact::{self, decode_packet_number};
use latlab_wire::transport::{self as wire, VERSION_COMPACT};
use siphasher::sip::SipHasher24;

use crate::connection::{ConnEvent, Connection, State};
use crate::recv::Delivery;
use crate::{
    Config, ConnectionHandle, ConnectionStats, EndpointStats, Event, MessageId, SendError, Transmit,
};
use handshake::Handshake;

/// Handshake answers waiting to be sent; more are dropped (counted).
const MAX_QUEUED_ANSWERS: usize = 256;

/// splitmix64: the endpoint's deterministic randomness.
#[derive(Debug)]
struct SplitMix(u64);

impl SplitMix {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The server's cookie key; its `Debug` does not show it.
struct CookieKey(SipHasher24);

impl std::fmt::Debug for CookieKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CookieKey(..)")
    }
}

/// Furthest a packet's number may lie above the highest received (above 0 before any): a
/// genuine peer never jumps this far (65,536 packets in a row lost), so a number beyond it
/// (forged, corrupted or stale) is refused. A short header's own bound
/// ([`compact::max_jump`]) is tighter below 3 bytes of packet number.
pub const MAX_PACKET_NUMBER_JUMP: u64 = 1 << 16;

/// Shortest buffer [`Endpoint::poll_transmit`] takes.
pub const MIN_TRANSMIT_BUF: usize = 200;

/// A latlab transport endpoint: any number of connections over one UDP socket, sans-IO.
///
/// Call order, as quinn-proto's `Endpoint`/`Connection`: hand every datagram that arrives to
/// [`Endpoint::handle_datagram`]; after any call, drain [`Endpoint::poll_transmit`] (send
/// each packet) and [`Endpoint::poll_event`]; sleep until [`Endpoint::poll_timeout`] and then
/// call [`Endpoint::handle_timeout`]. Time is `now` in ns from any fixed origin, never going
/// back; the endpoint reads no clock and draws its randomness from the seed.
#[derive(Debug)]
pub struct Endpoint {
    config: Config,
    rng: SplitMix,
    cookie_key: CookieKey,
    connections: BTreeMap<ConnectionHandle, Connection>,
    by_id: HashMap<u64, ConnectionHandle>,
    /// Established compact connections by remote address (their packets carry no id).
    by_addr: HashMap<SocketAddr, ConnectionHandle>,
    /// Compact connections this server accepted, by the short id it gave them.
    by_short_id: HashMap<u32, ConnectionHandle>,
    next_handle: u64,
    answers: VecDeque<(SocketAddr, Vec<u8>)>,
    events: VecDeque<Event>,
    stats: EndpointStats,
    /// Round robin: the connection polled first by the next `poll_transmit`.
    turn: u64,
}

impl Endpoint {
    /// An endpoint with `config`; `seed` draws connection ids and the cookie key.
    ///
    /// # Panics
    ///
    /// If `config.mtu` is below 200 or there are more than 256 channels.
    pub fn new(config: Config, seed: u64) -> Endpoint {
        assert!(
            config.mtu >= MIN_TRANSMIT_BUF,
            "mtu {} is below {MIN_TRANSMIT_BUF}",
            config.mtu
        );
        assert!(config.channels.len() <= 256, "at most 256 channels");
        let mut rng = SplitMix(seed);
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&rng.next_u64().to_le_bytes());
        key[8..].copy_from_slice(&rng.next_u64().to_le_bytes());
        Endpoint {
            config,
            rng,
            cookie_key: CookieKey(SipHasher24::new_with_key(&key)),
            connections: BTreeMap::new(),
            by_id: HashMap::new(),
            by_addr: HashMap::new(),
            by_short_id: HashMap::new(),
            next_handle: 0,
            answers: VecDeque::new(),
            events: VecDeque::new(),
            stats: EndpointStats::default(),
            turn: 0,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Opens a connection to `remote`; [`Event::Connected`] follows once the server accepted.
    /// Messages may be sent at once; they leave after the handshake.
    pub fn connect(&mut self, now: u64, remote: SocketAddr) -> ConnectionHandle {
        let id = loop {
            let id = self.rng.next_u64();
            if id != 0 && !self.by_id.contains_key(&id) {
                break id;
            }
        };
        self.insert(Connection::new(now, id, remote, State::Hello, &self.config))
    }

    fn insert(&mut self, connection: Connection) -> ConnectionHandle {
        let handle = ConnectionHandle(self.next_handle);
        self.next_handle += 1;
        self.by_id.insert(connection.id, handle);
        self.connections.insert(handle, connection);
        handle
    }

    /// Sends `data` on `channel` of `connection`.
    pub fn send(
        &mut self,
        now: u64,
        connection: ConnectionHandle,
        channel: u8,
        data: &[u8],
    ) -> Result<MessageId, SendError> {
        self.send_inner(now, connection, channel, data, false)
    }

    /// Like [`Endpoint::send`], but the message is urgent: it goes out twice, the second copy
    /// [`Recovery::duplicate_spacing_ns`](crate::Recovery::duplicate_spacing_ns) after the
    /// first unless acknowledged by then (when the policy's `duplicate_urgent` is on).
    pub fn send_urgent(
        &mut self,
        now: u64,
        connection: ConnectionHandle,
        channel: u8,
        data: &[u8],
    ) -> Result<MessageId, SendError> {
        self.send_inner(now, connection, channel, data, true)
    }

    fn send_inner(
        &mut self,
        now: u64,
        handle: ConnectionHandle,
        channel: u8,
        data: &[u8],
        urgent: bool,
    ) -> Result<MessageId, SendError> {
        let config = &self.config;
        let connection = self
            .connections
            .get_mut(&handle)
            .ok_or(SendError::UnknownConnection)?;
        if !connection.is_open() {
            return Err(SendError::Closed);
        }
        if usize::from(channel) >= config.channels.len() {
            return Err(SendError::UnknownChannel(channel));
        }
        let max = config
            .max_message_len
            .min(Connection::fragment_len(config.mtu) * usize::from(u16::MAX));
        if data.len() > max {
            return Err(SendError::TooLong {
                len: data.len(),
                max,
            });
        }
        if connection.outgoing_bytes() + data.len() > config.max_send_buffer_bytes {
            return Err(SendError::BufferFull);
        }
        connection.stats.messages_sent += 1;
        let number = connection.send(now, channel, data, urgent, config);
        Ok(MessageId(number))
    }

    /// Closes `connection` with the application's `code`: a CLOSE frame goes out once (if it
    /// is lost, the peer's idle timeout closes its side) and [`Event::Closed`] follows.
    pub fn close(&mut self, _now: u64, connection: ConnectionHandle, code: u16) {
        if let Some(c) = self.connections.get_mut(&connection) {
            c.close(code);
        }
        self.collect_events();
    }

    /// The remote address of `connection`.
    pub fn remote(&self, connection: ConnectionHandle) -> Option<SocketAddr> {
        self.connections.get(&connection).map(|c| c.remote)
    }

    /// Tells a client's `connection` that its own address changed (it sends from a new socket
    /// or port, or learnt of a NAT rebinding). A compact connection then puts the short id the
    /// server gave it in its short headers, from a PING sent at once, until the server
    /// acknowledges one of them: the server finds the connection by the id and moves it to the
    /// new address. Returns whether the connection will announce its address: not for a
    /// version 1 connection (tied to its address), a server's, one not yet established, or
    /// one whose server gave no short id. (A client that is not told, as when a NAT moves it,
    /// announces on its own after two timeouts in a row with nothing acknowledged.)
    pub fn local_address_changed(&mut self, connection: ConnectionHandle) -> bool {
        self.connections
            .get_mut(&connection)
            .is_some_and(Connection::local_address_changed)
    }

    /// Counters of the endpoint.
    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    /// Counters and estimates of `connection`, `None` once it is gone.
    pub fn connection_stats(&self, connection: ConnectionHandle) -> Option<ConnectionStats> {
        self.connections
            .get(&connection)
            .map(|c| c.stats_now(&self.config))
    }

    /// Hands over a datagram that arrived at `now` from `from`. Garbage, foreign connection
    /// ids and bad handshakes are counted ([`EndpointStats`]) and dropped; nothing here
    /// panics or creates state for an unproven address.
    pub fn handle_datagram(&mut self, now: u64, from: SocketAddr, bytes: &[u8]) {
        self.stats.packets_received += 1;
        self.stats.bytes_received += bytes.len() as u64;
        if compact::is_short(bytes) {
            self.handle_short(now, from, bytes);
            self.collect_events();
            return;
        }
        let mut frames = Vec::new();
        let Ok((version, header)) = wire::parse_long_packet(bytes, |f| frames.push(f)) else {
            self.stats.garbage += 1;
            return;
        };
        let compact = version == VERSION_COMPACT;
        if header.connection_id == 0 || frames.is_empty() || (compact && header.packet_number != 0)
        {
            self.stats.garbage += 1;
            return;
        }
        if header.packet_number == 0 {
            let hs = Handshake {
                from,
                len: bytes.len(),
                id: header.connection_id,
                compact,
            };
            self.handle_handshake(now, hs, &frames);
        } else {
            match self.by_id.get(&header.connection_id) {
                Some(&handle) if self.connections[&handle].remote == from => {
                    let connection = self.connections.get_mut(&handle).expect("indexed");
                    let largest = connection.received.largest().unwrap_or(0);
                    if header.packet_number > largest.saturating_add(MAX_PACKET_NUMBER_JUMP) {
                        connection.stats.packets_far += 1;
                        self.collect_events();
                        return;
                    }
                    connection.stats.packets_received += 1;
                    connection.stats.bytes_received += bytes.len() as u64;
                    connection.handle_packet(now, header, &frames, &self.config);
                }
                _ => self.stats.foreign += 1,
            }
        }
        self.collect_events();
    }

    /// A short-header packet: its connection is the one of its source address, or the one
    /// its short id names (which may move there).
    fn handle_short(&mut self, now: u64, from: SocketAddr, bytes: &[u8]) {
        let mut frames = Vec::new();
        let Ok(short) = compact::parse_short_packet(bytes, |f| frames.push(f)) else {
            self.stats.garbage += 1;
            return;
        };
        let known = match short.short_id {
            Some(id) => self.by_short_id.get(&id),
            None => self.by_addr.get(&from),
        };
        let Some(&handle) = known else {
            self.stats.foreign += 1;
            return;
        };
        let connection = self.connections.get_mut(&handle).expect("indexed");
        let largest = connection.received.largest();
        let pn = decode_packet_number(u64::from(short.truncated), short.pn_len, largest);
        let jump = compact::max_jump(short.pn_len).min(MAX_PACKET_NUMBER_JUMP);
        if pn > largest.unwrap_or(0).saturating_add(jump) {
            connection.stats.packets_far += 1;
            return;
        }
        if frames.is_empty() || pn == 0 {
            connection.stats.packets_refused += 1;
            return;
        }
        if from != connection.remote {
            let newest = largest.is_none_or(|l| pn > l) && pn > connection.moved_at;
            let taken = self.by_addr.get(&from).is_some_and(|&h| h != handle);
            if !newest || taken || connection.state != State::Established {
                connection.stats.moves_refused += 1;
                return;
            }
            if self.by_addr.get(&connection.remote) == Some(&handle) {
                self.by_addr.remove(&connection.remote);
            }
            self.by_addr.insert(from, handle);
            connection.remote = from;
            connection.moved_at = pn;
            connection.stats.address_moves += 1;
        }
        connection.stats.packets_received += 1;
        connection.stats.bytes_received += bytes.len() as u64;
        let header = wire::Repr {
            ack_immediately: short.ack_immediately,
            connection_id: connection.id,
            packet_number: pn,
        };
        connection.handle_packet(now, header, &frames, &self.config);
    }

    /// Writes the next packet due into `buf` (which should hold [`Config::mtu`] bytes; a
    /// shorter one limits the packet): where it goes and how long it is, or `None` if
    /// nothing is due at `now`.
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than [`MIN_TRANSMIT_BUF`] bytes.
    pub fn poll_transmit(&mut self, now: u64, buf: &mut [u8]) -> Option<Transmit> {
        assert!(
            buf.len() >= MIN_TRANSMIT_BUF,
            "poll_transmit needs a buffer of at least {MIN_TRANSMIT_BUF} bytes"
        );
        if let Some((to, bytes)) = self.answers.pop_front() {
            buf[..bytes.len()].copy_from_slice(&bytes);
            self.stats.packets_sent += 1;
            self.stats.bytes_sent += bytes.len() as u64;
            return Some(Transmit {
                to,
                len: bytes.len(),
            });
        }
        let limit = buf.len().min(self.config.mtu);
        let handles: Vec<ConnectionHandle> = self
            .connections
            .range(ConnectionHandle(self.turn)..)
            .chain(self.connections.range(..ConnectionHandle(self.turn)))
            .map(|(&h, _)| h)
            .collect();
        for handle in handles {
            let connection = self.connections.get_mut(&handle).expect("listed");
            if let Some(len) = connection.poll_transmit(now, &mut buf[..limit], &self.config) {
                self.turn = handle.0 + 1;
                self.stats.packets_sent += 1;
                self.stats.bytes_sent += len as u64;
                let to = connection.remote;
                self.collect_events();
                return Some(Transmit { to, len });
            }
        }
        self.collect_events();
        None
    }

    /// The earliest time [`Endpoint::handle_timeout`] is wanted, if ever.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.connections
            .values()
            .filter_map(|c| c.poll_timeout(&self.config))
            .min()
    }

    /// Serves every timer due at `now`: retransmission timeouts, loss timers, delayed ACKs,
    /// deadlines, duplicates, keep-alives and idle timeouts.
    pub fn handle_timeout(&mut self, now: u64) {
        for connection in self.connections.values_mut() {
            connection.handle_timeout(now, &self.config);
        }
        self.collect_events();
    }

    /// The next event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// Moves the connections' events to the endpoint's queue and forgets drained connections.
    fn collect_events(&mut self) {
        let mut gone = Vec::new();
        for (&handle, connection) in &mut self.connections {
            while let Some(event) = connection.events.pop_front() {
                self.events.push_back(match event {
                    ConnEvent::Connected => Event::Connected { connection: handle },
                    ConnEvent::Delivered(Delivery::Message {
                        channel,
                        message,
                        data,
                    }) => Event::Message {
                        connection: handle,
                        channel,
                        message: MessageId(message),
                        data,
                    },
                    ConnEvent::Delivered(Delivery::Expired { channel, message })
                    | ConnEvent::Expired { channel, message } => Event::Expired {
                        connection: handle,
                        channel,
                        message: MessageId(message),
                    },
                    ConnEvent::Closed(reason) => Event::Closed {
                        connection: handle,
                        reason,
                    },
                });
            }
            if connection.state == State::Drained {
                gone.push(handle);
            }
        }
        for handle in gone {
            if let Some(connection) = self.connections.remove(&handle) {
                self.by_id.remove(&connection.id);
                if self.by_addr.get(&connection.remote) == Some(&handle) {
                    self.by_addr.remove(&connection.remote);
                }
                if let Some(id) = connection.short_id {
                    if self.by_short_id.get(&id) == Some(&handle) {
                        self.by_short_id.remove(&id);
                    }
                }
            }
        }
    }
}

mod handshake;
