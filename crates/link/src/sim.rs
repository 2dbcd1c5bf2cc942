//! A small network in virtual time for tests: two sides joined by a [`Pipe`] each way, carrying
//! UDP datagrams between sans-IO endpoints, with the emulator's own link model in between.
//!
//! Side A (say the clients) and side B (say a server) may each hold any number of addresses:
//! every datagram sent from one side crosses that side's pipe and is delivered on the other
//! side, to whoever its destination address belongs to. The clock moves only when asked,
//! from one event to the next, as in quinn-proto's test `Pair`: [`Network`] is the wire
//! ([`Network::send`], [`Network::poll_timeout`], [`Network::advance_to`],
//! [`Network::poll_delivery`]), [`Pair`] drives two [`Endpoint`]s over it.
//!
//! Each datagram crosses its pipe as a frame of [`HEADER_LEN`] + payload bytes (the header
//! holds both addresses and the send time), so the rate and the byte limit count it about as
//! an IPv4 UDP datagram on Ethernet (42 bytes of headers) would be counted. There is no
//! checksum: a bit flipped by [`LinkConfig::corrupt`] reaches the endpoint in the payload, or
//! garbles the addresses or the send time when it falls in the header. On top of the pipes, a
//! drop filter ([`Network::set_drop_filter`]) can lose chosen datagrams (the first Welcome,
//! every second request) where a test means a particular loss rather than a random one.
//!
//! ```
//! use latlab_link::sim::{Datagram, Network, Side};
//! use latlab_link::LinkConfig;
//!
//! let ten_ms = LinkConfig { delay_ns: 10_000_000, ..LinkConfig::default() };
//! let mut network = Network::new(0, ten_ms.clone(), ten_ms).unwrap();
//! let datagram = Datagram {
//!     from: "10.0.0.2:4000".parse().unwrap(),
//!     to: "10.0.0.1:7".parse().unwrap(),
//!     payload: b"ping".to_vec(),
//! };
//! network.send(Side::A, &datagram);
//! assert_eq!(network.poll_timeout(), Some(10_000_000));
//! network.advance_to(10_000_000);
//! let delivery = network.poll_delivery().unwrap();
//! assert_eq!((delivery.side, delivery.sent_ns, delivery.datagram), (Side::B, 0, datagram));
//! ```

use std::net::{IpAddr, Ipv6Addr, SocketAddr};

use crate::{ConfigError, Fate, LinkConfig, Pipe};

/// Bytes a datagram's frame carries besides its payload: source and destination (16-byte IP,
/// IPv4 as IPv4-mapped IPv6, and a 2-byte port each) and the send time (8 bytes).
pub const HEADER_LEN: usize = 2 * 18 + 8;

/// A UDP datagram: addresses and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Datagram {
    /// The sender's address.
    pub from: SocketAddr,
    /// The destination's address.
    pub to: SocketAddr,
    /// The UDP payload.
    pub payload: Vec<u8>,
}

/// A side of the network.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// Side A; its datagrams cross the A→B pipe.
    A,
    /// Side B; its datagrams cross the B→A pipe.
    B,
}

impl Side {
    /// The other side.
    pub fn other(self) -> Side {
        match self {
            Side::A => Side::B,
            Side::B => Side::A,
        }
    }

    fn index(self) -> usize {
        match self {
            Side::A => 0,
            Side::B => 1,
        }
    }
}

/// A datagram that crossed the network.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delivery {
    /// The side it arrived on.
    pub side: Side,
    /// What arrived (as sent, unless the link corrupted it).
    pub datagram: Datagram,
    /// When it was sent (ns).
    pub sent_ns: u64,
    /// When it arrived: its departure time from the pipe (ns), `≤` [`Network::now`].
    pub delivered_ns: u64,
}

/// A drop filter: returns true for the datagrams to lose.
type DropFilter = Box<dyn FnMut(&Datagram) -> bool>;

/// The wire between two sides: a pipe each way and a clock.
///
/// Call order: [`Network::send`] any number of times at [`Network::now`]; then
/// [`Network::poll_timeout`] for the next event, [`Network::advance_to`] that time (or any
/// later one), and [`Network::poll_delivery`] until `None`; repeat. Datagrams are delivered in
/// the order of their arrival times (A→B first at equal times; in order of sending within one
/// pipe at equal times).
pub struct Network {
    now: u64,
    /// A→B and B→A.
    pipes: [Pipe; 2],
    drop_filter: Option<DropFilter>,
    filtered: u64,
    /// Where a datagram's frame is written before the pipe copies it.
    frame: Vec<u8>,
}

impl std::fmt::Debug for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Network")
            .field("now", &self.now)
            .field("pipes", &self.pipes)
            .field("drop_filter", &self.drop_filter.is_some())
            .field("filtered", &self.filtered)
            .finish()
    }
}

impl Network {
    /// A network whose clock starts at `start_ns` (also the pipes' schedule time 0), with the
    /// conditions of each direction.
    pub fn new(
        start_ns: u64,
        a_to_b: LinkConfig,
        b_to_a: LinkConfig,
    ) -> Result<Network, ConfigError> {
        Ok(Network {
            now: start_ns,
            pipes: [Pipe::new(a_to_b, start_ns)?, Pipe::new(b_to_a, start_ns)?],
            drop_filter: None,
            filtered: 0,
            frame: Vec::new(),
        })
    }

    /// The network's clock (ns).
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Sends `datagram` from side `from` at [`Network::now`]: `None` if the drop filter lost
    /// it, else the fate the link gave it (dropped, or delivered at a departure time).
    pub fn send(&mut self, from: Side, datagram: &Datagram) -> Option<Fate> {
        if let Some(filter) = &mut self.drop_filter {
            if filter(datagram) {
                self.filtered += 1;
                return None;
            }
        }
        encode(&mut self.frame, datagram, self.now);
        Some(self.pipes[from.index()].handle_arrival(self.now, &self.frame))
    }

    /// When the next datagram arrives, `None` if none is on its way.
    pub fn poll_timeout(&self) -> Option<u64> {
        self.pipes.iter().filter_map(Pipe::poll_timeout).min()
    }

    /// Moves the clock to `now`; a time before the clock leaves it where it is.
    pub fn advance_to(&mut self, now: u64) {
        self.now = self.now.max(now);
    }

    /// The next datagram that has arrived by [`Network::now`], earliest first.
    pub fn poll_delivery(&mut self) -> Option<Delivery> {
        let due = |pipe: &Pipe| pipe.poll_timeout().filter(|&at| at <= self.now);
        let from = match (due(&self.pipes[0]), due(&self.pipes[1])) {
            (Some(a), Some(b)) if b < a => Side::B,
            (Some(_), _) => Side::A,
            (None, Some(_)) => Side::B,
            (None, None) => return None,
        };
        let departure = self.pipes[from.index()].poll_departure(self.now)?;
        let (datagram, sent_ns) = decode(departure.frame());
        Some(Delivery {
            side: from.other(),
            datagram,
            sent_ns,
            delivered_ns: departure.departure_ns(),
        })
    }

    /// The pipe that datagrams sent from `from` cross: its counters, what it holds.
    pub fn pipe(&self, from: Side) -> &Pipe {
        &self.pipes[from.index()]
    }

    /// Changes the conditions of the pipe from `from` at [`Network::now`], keeping the
    /// datagrams on their way (see [`Pipe::handle_config`]).
    pub fn handle_config(&mut self, from: Side, config: LinkConfig) -> Result<(), ConfigError> {
        self.pipes[from.index()].handle_config(self.now, config)
    }

    /// Loses every datagram sent from now on for which `filter` returns true, before it
    /// reaches a pipe (the pipes do not count it; [`Network::filtered`] does). Replaces the
    /// filter in place, if any.
    pub fn set_drop_filter(&mut self, filter: impl FnMut(&Datagram) -> bool + 'static) {
        self.drop_filter = Some(Box::new(filter));
    }

    /// Removes the drop filter.
    pub fn clear_drop_filter(&mut self) {
        self.drop_filter = None;
    }

    /// Datagrams the drop filter lost.
    pub fn filtered(&self) -> u64 {
        self.filtered
    }
}

/// A sans-IO endpoint that a [`Pair`] drives, in quinn's verb set.
pub trait Endpoint {
    /// A datagram arrived at `now`.
    fn handle_datagram(&mut self, now: u64, datagram: Datagram);
    /// The next datagram to send at `now`, if any.
    fn poll_transmit(&mut self, now: u64) -> Option<Datagram>;
    /// When the endpoint next wants [`Endpoint::handle_timeout`], if ever.
    fn poll_timeout(&self) -> Option<u64>;
    /// The time of [`Endpoint::poll_timeout`] came.
    fn handle_timeout(&mut self, now: u64);
}

/// Two endpoints, `a` on side A and `b` on side B, over a [`Network`].
#[derive(Debug)]
pub struct Pair<A, B> {
    /// The endpoint on side A.
    pub a: A,
    /// The endpoint on side B.
    pub b: B,
    /// The wire between them.
    pub network: Network,
}

/// Rounds of work at one instant after which a [`Pair`] gives up: an endpoint whose timeout
/// stays due after `handle_timeout`, or that never stops sending, would spin forever.
pub const MAX_ROUNDS_AT_ONE_INSTANT: usize = 1_000_000;

impl<A: Endpoint, B: Endpoint> Pair<A, B> {
    /// `a` and `b` joined by `network`.
    pub fn new(a: A, b: B, network: Network) -> Pair<A, B> {
        Pair { a, b, network }
    }

    /// Runs until nothing is left to happen at or before `until`, then sets the clock to
    /// `until`: each endpoint's datagrams are sent, arrivals handed over, timeouts served,
    /// and the clock jumps to the next event.
    ///
    /// # Panics
    ///
    /// If the endpoints keep working at one instant for [`MAX_ROUNDS_AT_ONE_INSTANT`]
    /// rounds (a timeout that stays due: a bug in an endpoint).
    pub fn drive_until(&mut self, until: u64) {
        loop {
            self.settle();
            let next = [
                self.network.poll_timeout(),
                self.a.poll_timeout(),
                self.b.poll_timeout(),
            ]
            .into_iter()
            .flatten()
            .min();
            match next {
                Some(at) if at <= until => self.network.advance_to(at),
                _ => break,
            }
        }
        self.network.advance_to(until);
    }

    /// Does everything due at the current instant, until nothing is.
    fn settle(&mut self) {
        for _ in 0..MAX_ROUNDS_AT_ONE_INSTANT {
            let now = self.network.now();
            let mut busy = false;
            for side in [Side::A, Side::B] {
                while let Some(datagram) = self.endpoint(side).poll_transmit(now) {
                    self.network.send(side, &datagram);
                    busy = true;
                }
            }
            while let Some(delivery) = self.network.poll_delivery() {
                self.endpoint(delivery.side)
                    .handle_datagram(now, delivery.datagram);
                busy = true;
            }
            for side in [Side::A, Side::B] {
                let endpoint = self.endpoint(side);
                if endpoint.poll_timeout().is_some_and(|at| at <= now) {
                    endpoint.handle_timeout(now);
                    busy = true;
                }
            }
            if !busy {
                return;
            }
        }
        panic!(
            "the endpoints were still busy after {MAX_ROUNDS_AT_ONE_INSTANT} rounds at one instant"
        );
    }

    fn endpoint(&mut self, side: Side) -> &mut dyn Endpoint {
        match side {
            Side::A => &mut self.a,
            Side::B => &mut self.b,
        }
    }
}

/// Writes `datagram`'s frame, sent at `sent_ns`, into `frame`.
fn encode(frame: &mut Vec<u8>, datagram: &Datagram, sent_ns: u64) {
    frame.clear();
    for addr in [datagram.from, datagram.to] {
        let ip = match addr.ip() {
            IpAddr::V4(v4) => v4.to_ipv6_mapped(),
            IpAddr::V6(v6) => v6,
        };
        frame.extend_from_slice(&ip.octets());
        frame.extend_from_slice(&addr.port().to_be_bytes());
    }
    frame.extend_from_slice(&sent_ns.to_be_bytes());
    frame.extend_from_slice(&datagram.payload);
}

/// Reads a frame written by [`encode`] (perhaps with a bit flipped): the datagram and its send
/// time. Frames come only from [`encode`], so they are at least [`HEADER_LEN`] long.
fn decode(frame: &[u8]) -> (Datagram, u64) {
    let addr = |at: usize| {
        let mut octets = [0u8; 16];
        octets.copy_from_slice(&frame[at..at + 16]);
        let ip = Ipv6Addr::from(octets);
        let ip = ip.to_ipv4_mapped().map_or(IpAddr::V6(ip), IpAddr::V4);
        SocketAddr::new(ip, u16::from_be_bytes([frame[at + 16], frame[at + 17]]))
    };
    let mut sent = [0u8; 8];
    sent.copy_from_slice(&frame[36..HEADER_LEN]);
    let datagram = Datagram {
        from: addr(0),
        to: addr(18),
        payload: frame[HEADER_LEN..].to_vec(),
    };
    (datagram, u64::from_be_bytes(sent))
}

#[cfg(test)]
mod tests;
