//! The model game server: client table, join handshake, fan-out.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use latlab_wire::game::{self as msg, MessageType, RejectReason, JOIN_REQUEST_LEN};
use latlab_wire::probe;

use crate::cookie::{CookieKey, KeyedState};
use crate::idle::IdleList;
mod rate_limit;
use rate_limit::RateLimit;

/// What a [`Server`] is built from.
#[derive(Clone, PartialEq)]
pub struct ServerConfig {
    /// Most clients the table holds; the next join is refused with
    /// `Reject(TableFull)`. Default 64. Slots are numbered `0..max_clients`.
    pub max_clients: usize,
    /// Per-client game packet rate in packets per second (a token bucket
    /// that refills continuously from `now`), or `None` for no limit
    /// (the default). 0, a negative rate or NaN let only the first burst
    /// through; +inf is no limit.
    pub rate_limit_pps: Option<f64>,
    /// Depth of the token bucket: how many game packets a client may send at
    /// one instant. Default 32. 0 drops every game packet when the limit is on.
    pub rate_burst: u32,
    /// Cookie epoch length in ns; a cookie is valid in the epoch it was made
    /// in and the next, so for between one and two epochs. Default 10 s.
    /// 0 is taken as 1.
    pub cookie_lifetime_ns: u64,
    /// SipHash key of the cookies and of the table hasher. The engine draws
    /// it at random; tests pass a constant.
    pub secret: [u8; 16],
    /// Datagrams longer than this are dropped as [`DropCause::Oversized`]
    /// before anything else is looked at. Default 1472 (an Ethernet MTU of
    /// UDP payload over IPv4).
    pub max_datagram: usize,
    /// Most handshake answers waiting for [`Server::poll_transmit`]; when
    /// full, the oldest is dropped and counted in
    /// [`ServerCounters::answers_dropped`]. Default 256.
    pub max_queued_answers: usize,
    /// A client not heard from for this long (ns) is removed from the table by
    /// [`Server::handle_timeout`] and counted in [`ServerCounters::idle_expired`]; its slot
    /// goes to the next client. What counts as hearing from a client: a game packet from its
    /// address (rate-limited or not) or a valid `JoinConfirm` from it. `None` (the default):
    /// clients stay until they leave. `latlab serve` sets 10 s.
    pub idle_timeout_ns: Option<u64>,
    /// Most clients one host may hold in the table; its next join is refused with
    /// `Reject(HostFull)` and counted as [`DropCause::HostFull`]. A host is an IPv4 address
    /// (an IPv4-mapped IPv6 address counts as its IPv4 address) or an IPv6 /64 (the block one
    /// host is usually given). `None` (the default): no cap below `max_clients`.
    pub max_clients_per_host: Option<usize>,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            max_clients: 64,
            rate_limit_pps: None,
            rate_burst: 32,
            cookie_lifetime_ns: 10_000_000_000,
            secret: [0; 16],
            max_datagram: 1472,
            max_queued_answers: 256,
            idle_timeout_ns: None,
            max_clients_per_host: None,
        }
    }
}

impl std::fmt::Debug for ServerConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerConfig")
            .field("max_clients", &self.max_clients)
            .field("rate_limit_pps", &self.rate_limit_pps)
            .field("rate_burst", &self.rate_burst)
            .field("cookie_lifetime_ns", &self.cookie_lifetime_ns)
            .field("secret", &"<redacted>")
            .field("max_datagram", &self.max_datagram)
            .field("max_queued_answers", &self.max_queued_answers)
            .field("idle_timeout_ns", &self.idle_timeout_ns)
            .field("max_clients_per_host", &self.max_clients_per_host)
            .finish()
    }
}

/// Why a datagram was dropped. Each cause has a counter in
/// [`ServerCounters`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DropCause {
    /// Neither a probe nor a well-formed game message for the server (this
    /// includes server-to-client messages such as a `Challenge`).
    Malformed,
    /// Longer than [`ServerConfig::max_datagram`].
    Oversized,
    /// A probe from an address not in the table, or a `Leave` whose address,
    /// nonce and game do not name a client in the table.
    UnknownSender,
    /// A `JoinConfirm` whose MAC is not the one the server would have given
    /// its source address (forged, or sent from another address than the
    /// request). Not answered.
    BadCookie,
    /// A `JoinConfirm` with a valid MAC from an epoch older than the previous
    /// one. Answered with `Reject(Expired)`.
    Expired,
    /// A valid `JoinConfirm` while the table is full. Answered with
    /// `Reject(TableFull)`.
    TableFull,
    /// A probe from a client whose token bucket is empty.
    RateLimited,
    /// A `JoinRequest` shorter than [`JOIN_REQUEST_LEN`]. Not answered.
    ShortJoin,
    /// A valid `JoinConfirm` from a new address of a host that already holds
    /// [`ServerConfig::max_clients_per_host`] clients. Answered with `Reject(HostFull)`.
    HostFull,
}

/// What to do with one datagram, as decided by [`Server::handle_datagram`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict<'a> {
    /// A game packet from a joined client: send the datagram, unchanged, to
    /// each of these (the sender's game, the sender included, as in the
    /// paper), in join order.
    FanOut {
        /// The clients of the sender's game.
        recipients: &'a [SocketAddr],
    },
    /// A handshake message was handled; answers (if any) wait in
    /// [`Server::poll_transmit`].
    Handshake,
    /// Dropped and counted by cause. `TableFull` and `Expired` still queue a
    /// `Reject` for the client.
    Dropped(DropCause),
}

/// Running totals of a [`Server`]. Every datagram counts in `received`; a
/// dropped one also in exactly the counter of its [`DropCause`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ServerCounters {
    /// Datagrams handed to [`Server::handle_datagram`].
    pub received: u64,
    /// Game packets fanned out.
    pub game_packets: u64,
    /// Copies to send for those (sum of the recipient list lengths).
    pub copies: u64,
    /// Clients added to the table.
    pub joins: u64,
    /// Clients removed from the table by a `Leave`.
    pub leaves: u64,
    /// Clients removed from the table because they were not heard from for
    /// [`ServerConfig::idle_timeout_ns`].
    pub idle_expired: u64,
    /// Drops by [`DropCause::Malformed`].
    pub malformed: u64,
    /// Drops by [`DropCause::Oversized`].
    pub oversized: u64,
    /// Drops by [`DropCause::UnknownSender`].
    pub unknown_sender: u64,
    /// Drops by [`DropCause::BadCookie`].
    pub bad_cookie: u64,
    /// Drops by [`DropCause::Expired`].
    pub expired: u64,
    /// Drops by [`DropCause::TableFull`].
    pub table_full: u64,
    /// Drops by [`DropCause::RateLimited`].
    pub rate_limited: u64,
    /// Drops by [`DropCause::ShortJoin`].
    pub short_join: u64,
    /// Drops by [`DropCause::HostFull`].
    pub host_full: u64,
    /// Handshake answers dropped unsent because the answer queue was full.
    pub answers_dropped: u64,
}

/// One row of the client table.
#[derive(Clone, Debug)]
struct Client {
    game: u32,
    slot: u32,
    client_nonce: u64,
    /// Theoretical arrival time of the rate limiter (GCRA), ns.
    next_conforming_ns: u64,
}

/// The model game server.
///
/// Call order: [`handle_datagram`](Self::handle_datagram) for each datagram
/// received (sending the datagram to every recipient of a
/// [`Verdict::FanOut`]), then [`poll_transmit`](Self::poll_transmit) until it
/// returns `None` and send what it wrote; whenever `now` reaches
/// [`poll_timeout`](Self::poll_timeout), call
/// [`handle_timeout`](Self::handle_timeout) (it removes the clients that fell
/// idle). Without [`ServerConfig::idle_timeout_ns`] the server has no timers.
///
/// Invariants: at most `max_clients` clients, and at most
/// `max_clients_per_host` of one host; every client is in exactly one
/// game's recipient list, once, and each list holds only clients of the
/// table; every client is in the idle list, once; the answer queue holds at
/// most `max_queued_answers` entries.
#[derive(Debug)]
pub struct Server {
    config: ServerConfig,
    cookie: CookieKey,
    rate_limit: Option<RateLimit>,
    clients: HashMap<SocketAddr, Client, KeyedState>,
    /// Recipients of each game with at least one client, in join order.
    games: HashMap<u32, Vec<SocketAddr>, KeyedState>,
    /// Slots given back by leaving clients; the lowest is reused first.
    free_slots: BinaryHeap<Reverse<u32>>,
    /// Lowest slot never handed out.
    next_slot: u32,
    /// The clients, least recently heard from first.
    idle: IdleList,
    /// Clients in the table per host (see [`host_of`]); hosts with none are not listed.
    hosts: HashMap<IpAddr, usize, KeyedState>,
    answers: VecDeque<(SocketAddr, msg::Repr)>,
    counters: ServerCounters,
}

impl Server {
    /// A server with an empty table.
    pub fn new(config: ServerConfig) -> Server {
        let cookie = CookieKey::new(&config.secret);
        let table_hasher = cookie.table_hasher();
        let capacity = config.max_clients.min(1024);
        Server {
            rate_limit: config
                .rate_limit_pps
                .map(|pps| RateLimit::new(pps, config.rate_burst)),
            clients: HashMap::with_capacity_and_hasher(capacity, table_hasher.clone()),
            games: HashMap::with_hasher(table_hasher.clone()),
            free_slots: BinaryHeap::new(),
            next_slot: 0,
            idle: IdleList::new(),
            hosts: HashMap::with_hasher(table_hasher),
            answers: VecDeque::with_capacity(config.max_queued_answers.min(1024)),
            counters: ServerCounters::default(),
            cookie,
            config,
        }
    }

    /// Decides what to do with one datagram `data` from `from`, received at
    /// `now` (ns).
    ///
    /// In order: longer than `max_datagram` → `Oversized`; a probe (a game
    /// packet) → `FanOut` if `from` is a client whose bucket has a token,
    /// else `UnknownSender` / `RateLimited`; a game message → the handshake
    /// (see [`DropCause`] for its drops); anything else → `Malformed`.
    pub fn handle_datagram(&mut self, now: u64, from: SocketAddr, data: &[u8]) -> Verdict<'_> {
        self.counters.received += 1;
        if data.len() > self.config.max_datagram {
            return self.drop(DropCause::Oversized);
        }
        if probe::is_probe(data) {
            return self.handle_game_packet(now, from);
        }
        if msg::message_type(data) == Some(MessageType::JoinRequest)
            && data.len() < JOIN_REQUEST_LEN
        {
            return self.drop(DropCause::ShortJoin);
        }
        match msg::Repr::parse_bytes(data) {
            Ok(msg::Repr::JoinRequest { client_nonce, game }) => {
                self.handle_join_request(now, from, client_nonce, game)
            }
            Ok(msg::Repr::JoinConfirm {
                client_nonce,
                game,
                epoch,
                mac,
            }) => self.handle_join_confirm(now, from, client_nonce, game, epoch, mac),
            Ok(msg::Repr::Leave { client_nonce, game }) => {
                self.handle_leave(from, client_nonce, game)
            }
            Ok(
                msg::Repr::Challenge { .. } | msg::Repr::Welcome { .. } | msg::Repr::Reject { .. },
            )
            | Err(_) => self.drop(DropCause::Malformed),
        }
    }

    /// Writes the next queued handshake answer into `buf` and returns its
    /// destination and length, or `None` when the queue is empty. Answers
    /// are at most [`msg::MAX_ANSWER_LEN`] (32) bytes.
    ///
    /// # Panics
    /// Panics if `buf` is shorter than the answer (give it 32 bytes or more).
    pub fn poll_transmit(&mut self, buf: &mut [u8]) -> Option<(SocketAddr, usize)> {
        let (to, answer) = self.answers.pop_front()?;
        Some((to, answer.emit_bytes(buf)))
    }

    /// When [`handle_timeout`](Self::handle_timeout) is next due: when the
    /// least recently heard client falls idle. `None` without an idle timeout
    /// or with an empty table.
    pub fn poll_timeout(&self) -> Option<u64> {
        let timeout = self.config.idle_timeout_ns?;
        let (_, heard_ns) = self.idle.oldest()?;
        Some(heard_ns.saturating_add(timeout))
    }

    /// Removes every client not heard from since `now - idle_timeout_ns` (or
    /// earlier), counting each in [`ServerCounters::idle_expired`]. Their slots
    /// are free for the next joins. A no-op before [`poll_timeout`](Self::poll_timeout).
    pub fn handle_timeout(&mut self, now: u64) {
        let Some(timeout) = self.config.idle_timeout_ns else {
            return;
        };
        while let Some((addr, heard_ns)) = self.idle.oldest() {
            if heard_ns.saturating_add(timeout) > now {
                break;
            }
            self.remove_client(addr);
            self.counters.idle_expired += 1;
        }
    }

    /// Running totals.
    pub fn counters(&self) -> &ServerCounters {
        &self.counters
    }

    /// Clients in the table, all games together.
    pub fn clients(&self) -> usize {
        self.clients.len()
    }

    /// The clients of `game`, in join order (empty for a game nobody is in).
    pub fn recipients(&self, game: u32) -> &[SocketAddr] {
        self.games.get(&game).map_or(&[], Vec::as_slice)
    }

    /// Whether `addr` is in the table.
    pub fn is_client(&self, addr: SocketAddr) -> bool {
        self.clients.contains_key(&addr)
    }

    /// Clients in the table from the host of `addr` (its IPv4 address, or its IPv6 /64).
    pub fn clients_of_host(&self, addr: SocketAddr) -> usize {
        self.hosts.get(&host_of(addr)).copied().unwrap_or(0)
    }

    /// The configuration the server was built with.
    pub fn config(&self) -> &ServerConfig {
        &self.config
    }

    /// The cookie epoch `now` falls in.
    pub fn epoch(&self, now: u64) -> u32 {
        // Truncation wraps after 2^32 epochs (1361 years at 10 s); validity
        // is checked with wrapping arithmetic, so wrap-around is harmless.
        (now / self.config.cookie_lifetime_ns.max(1)) as u32
    }

    fn handle_game_packet(&mut self, now: u64, from: SocketAddr) -> Verdict<'_> {
        let Some(client) = self.clients.get_mut(&from) else {
            return self.drop(DropCause::UnknownSender);
        };
        // Heard from, even when rate-limited: a flooding client is not idle.
        self.idle.heard(client.slot, now);
        if let Some(limit) = &self.rate_limit {
            if !limit.admit(&mut client.next_conforming_ns, now) {
                return self.drop(DropCause::RateLimited);
            }
        }
        let game = client.game;
        let recipients = self.games.get(&game).map_or(&[][..], Vec::as_slice);
        debug_assert!(recipients.contains(&from), "client missing from its game");
        self.counters.game_packets += 1;
        self.counters.copies += recipients.len() as u64;
        Verdict::FanOut { recipients }
    }

    /// Stateless: answers with a cookie for `from` and remembers nothing.
    fn handle_join_request(
        &mut self,
        now: u64,
        from: SocketAddr,
        client_nonce: u64,
        game: u32,
    ) -> Verdict<'static> {
        let epoch = self.epoch(now);
        let mac = self.cookie.mac(from, epoch, client_nonce, game);
        self.queue_answer(
            from,
            msg::Repr::Challenge {
                client_nonce,
                game,
                epoch,
                mac,
            },
        );
        Verdict::Handshake
    }

    fn handle_join_confirm(
        &mut self,
        now: u64,
        from: SocketAddr,
        client_nonce: u64,
        game: u32,
        epoch: u32,
        mac: u64,
    ) -> Verdict<'static> {
        if self.cookie.mac(from, epoch, client_nonce, game) != mac {
            return self.drop(DropCause::BadCookie);
        }
        let current = self.epoch(now);
        if epoch != current && epoch != current.wrapping_sub(1) {
            self.queue_answer(
                from,
                msg::Repr::Reject {
                    client_nonce,
                    reason: RejectReason::Expired,
                },
            );
            return self.drop(DropCause::Expired);
        }
        let new_client = !self.clients.contains_key(&from);
        if new_client
            && self
                .config
                .max_clients_per_host
                .is_some_and(|cap| self.clients_of_host(from) >= cap)
        {
            self.queue_answer(
                from,
                msg::Repr::Reject {
                    client_nonce,
                    reason: RejectReason::HostFull,
                },
            );
            return self.drop(DropCause::HostFull);
        }
        if new_client && self.clients.len() >= self.config.max_clients {
            self.queue_answer(
                from,
                msg::Repr::Reject {
                    client_nonce,
                    reason: RejectReason::TableFull,
                },
            );
            return self.drop(DropCause::TableFull);
        }
        let slot = match self.clients.get_mut(&from) {
            // Already in the table (a retransmitted confirm, or the same
            // socket joining anew): keep the slot, take the new nonce/game.
            Some(client) => {
                let (slot, old_game) = (client.slot, client.game);
                client.client_nonce = client_nonce;
                client.game = game;
                if old_game != game {
                    self.remove_recipient(old_game, from);
                    self.games.entry(game).or_default().push(from);
                }
                self.idle.heard(slot, now);
                slot
            }
            None => {
                let slot = self.take_slot();
                self.clients.insert(
                    from,
                    Client {
                        game,
                        slot,
                        client_nonce,
                        next_conforming_ns: 0,
                    },
                );
                self.games.entry(game).or_default().push(from);
                self.idle.insert(slot, from, now);
                *self.hosts.entry(host_of(from)).or_default() += 1;
                self.counters.joins += 1;
                slot
            }
        };
        self.queue_answer(
            from,
            msg::Repr::Welcome {
                client_nonce,
                game,
                slot,
            },
        );
        Verdict::Handshake
    }

    /// Removes the client at `from` if nonce and game match; no answer.
    fn handle_leave(&mut self, from: SocketAddr, client_nonce: u64, game: u32) -> Verdict<'static> {
        match self.clients.get(&from) {
            Some(client) if client.client_nonce == client_nonce && client.game == game => {
                self.remove_client(from);
                self.counters.leaves += 1;
                Verdict::Handshake
            }
            _ => self.drop(DropCause::UnknownSender),
        }
    }

    /// Takes `addr` out of the table, its game, the idle list and its host's count, and
    /// frees its slot.
    fn remove_client(&mut self, addr: SocketAddr) {
        let Some(client) = self.clients.remove(&addr) else {
            return;
        };
        self.remove_recipient(client.game, addr);
        self.idle.remove(client.slot);
        self.free_slots.push(Reverse(client.slot));
        let host = host_of(addr);
        if let Some(count) = self.hosts.get_mut(&host) {
            *count -= 1;
            if *count == 0 {
                self.hosts.remove(&host);
            }
        }
    }

    fn take_slot(&mut self) -> u32 {
        match self.free_slots.pop() {
            Some(Reverse(slot)) => slot,
            None => {
                let slot = self.next_slot;
                self.next_slot = self.next_slot.saturating_add(1);
                slot
            }
        }
    }

    fn remove_recipient(&mut self, game: u32, addr: SocketAddr) {
        if let Some(list) = self.games.get_mut(&game) {
            // `remove`, not `swap_remove`: keep the join order.
            if let Some(i) = list.iter().position(|&a| a == addr) {
                list.remove(i);
            }
            if list.is_empty() {
                self.games.remove(&game);
            }
        }
    }

    fn queue_answer(&mut self, to: SocketAddr, answer: msg::Repr) {
        debug_assert!(answer.buffer_len() <= msg::MAX_ANSWER_LEN);
        if self.config.max_queued_answers == 0 {
            self.counters.answers_dropped += 1;
            return;
        }
        if self.answers.len() >= self.config.max_queued_answers {
            self.answers.pop_front();
            self.counters.answers_dropped += 1;
        }
        self.answers.push_back((to, answer));
    }

    fn drop(&mut self, cause: DropCause) -> Verdict<'static> {
        let c = &mut self.counters;
        match cause {
            DropCause::Malformed => c.malformed += 1,
            DropCause::Oversized => c.oversized += 1,
            DropCause::UnknownSender => c.unknown_sender += 1,
            DropCause::BadCookie => c.bad_cookie += 1,
            DropCause::Expired => c.expired += 1,
            DropCause::TableFull => c.table_full += 1,
            DropCause::RateLimited => c.rate_limited += 1,
            DropCause::ShortJoin => c.short_join += 1,
            DropCause::HostFull => c.host_full += 1,
        }
        Verdict::Dropped(cause)
    }
}

/// The host an address belongs to, for [`ServerConfig::max_clients_per_host`]: the IPv4
/// address (also of an IPv4-mapped IPv6 address), or the /64 of an IPv6 address.
fn host_of(addr: SocketAddr) -> IpAddr {
    match addr.ip() {
        IpAddr::V4(v4) => IpAddr::V4(v4),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let prefix = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(prefix))
            }
        },
    }
}
