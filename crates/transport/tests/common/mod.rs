//! The test harness: two latlab transport endpoints over `latlab_link::sim`, in virtual time.
#![allow(dead_code)]

use std::net::SocketAddr;

use latlab_link::sim::{self, Datagram, Network, Pair};
use latlab_link::LinkConfig;
use latlab_transport::{
    Config, ConnectionHandle, ConnectionStats, Endpoint, Event, MessageId, Recovery,
};
use latlab_wire::transport::compact::{is_short, parse_short_packet, ShortHeader};
use latlab_wire::transport::{parse_long_packet, Frame};

/// Calls `each` for every frame of a packet of either format (nothing for garbage).
pub(crate) fn each_frame<'a>(bytes: &'a [u8], each: impl FnMut(Frame<'a>)) {
    if is_short(bytes) {
        let _ = parse_short_packet(bytes, each);
    } else {
        let _ = parse_long_packet(bytes, each);
    }
}

/// Whether a packet carries a copy of message `number` of `channel` (fragment `fragment`, or
/// any).
pub(crate) fn carries(bytes: &[u8], channel: u8, number: u32, fragment: Option<u16>) -> bool {
    let mut hit = false;
    each_frame(bytes, |f| {
        if let Frame::Data {
            channel: c,
            message,
            fragment: i,
            ..
        } = f
        {
            hit |= c == channel && message == number && fragment.is_none_or(|x| x == i);
        }
    });
    hit
}

pub(crate) const MS: u64 = 1_000_000;

/// The client's (or with `server`, the server's) configuration under recovery policy `policy`.
pub(crate) fn config(policy: &str, server: bool) -> Config {
    let base = if server {
        Config::server()
    } else {
        Config::default()
    };
    Config {
        recovery: policy.parse::<Recovery>().unwrap(),
        ..base
    }
}

/// Message `i` of a thin stream is sent at `1 s + i·100 ms`.
pub(crate) fn sent_at(i: u64) -> u64 {
    1000 * MS + i * 100 * MS
}

/// Sends the stream's messages `from..to` of 100 bytes on channel 0 at their times.
pub(crate) fn send(lab: &mut Lab, from: u64, to: u64) {
    for i in from..to {
        lab.send_at(sent_at(i), 0, &[i as u8; 100]);
    }
}

/// Messages `from..to` each arrived the path's 50 ms after they were sent.
pub(crate) fn on_time(lab: &Lab, from: u32, to: u32) {
    for i in from..to {
        assert_eq!(
            lab.server().delivered_at(0, i),
            Some(sent_at(u64::from(i)) + 50 * MS),
            "message {i}"
        );
    }
}

/// Runs until 3 s after the last of `count` messages; all arrived.
pub(crate) fn finish(lab: &mut Lab, count: u64) {
    lab.run_until(sent_at(count) + 3000 * MS);
    assert_eq!(lab.server().messages(0).len(), count as usize, "all arrive");
}

/// A short packet as the server would send it, with packet number `pn` in 4 bytes.
pub(crate) fn forged(pn: u64, frames: &[Frame<'_>]) -> Vec<u8> {
    let header = ShortHeader {
        ack_immediately: false,
        short_id: None,
        pn_len: 4,
        truncated: pn as u32,
    };
    short_packet(header, frames)
}

/// A compact packet with `header` carrying `frames`, as a forger would build it.
pub(crate) fn short_packet(header: ShortHeader, frames: &[Frame<'_>]) -> Vec<u8> {
    let mut bytes =
        vec![0u8; header.buffer_len() + frames.iter().map(Frame::compact_len).sum::<usize>()];
    let mut at = header.emit(&mut bytes);
    for frame in frames {
        at += frame.emit_compact(&mut bytes[at..]);
    }
    bytes
}

pub(crate) fn client_addr() -> SocketAddr {
    "10.0.0.1:5000".parse().unwrap()
}

pub(crate) fn server_addr() -> SocketAddr {
    "10.0.0.2:7000".parse().unwrap()
}

/// An endpoint at one address that records every event with the time it came out, and that
/// may also send a flood of junk datagrams from another address.
pub(crate) struct Node {
    pub(crate) endpoint: Endpoint,
    pub(crate) addr: SocketAddr,
    pub(crate) events: Vec<(u64, Event)>,
    buf: Vec<u8>,
    /// Junk sent every `flood_every` ns from `flood_from` until `flood_until`.
    pub(crate) flood: Option<Flood>,
}

pub(crate) struct Flood {
    pub(crate) from: SocketAddr,
    pub(crate) every_ns: u64,
    pub(crate) until_ns: u64,
    pub(crate) next_ns: u64,
    pub(crate) sent: u64,
}

impl Node {
    pub(crate) fn new(config: Config, seed: u64, addr: SocketAddr) -> Node {
        Node {
            endpoint: Endpoint::new(config, seed),
            addr,
            events: Vec::new(),
            buf: vec![0; 1500],
            flood: None,
        }
    }

    fn collect(&mut self, now: u64) {
        while let Some(event) = self.endpoint.poll_event() {
            self.events.push((now, event));
        }
    }

    /// Time each message of `channel` was delivered, with its number and bytes.
    pub(crate) fn messages(&self, channel: u8) -> Vec<(u64, u32, Vec<u8>)> {
        self.events
            .iter()
            .filter_map(|(at, e)| match e {
                Event::Message {
                    channel: c,
                    message,
                    data,
                    ..
                } if *c == channel => Some((*at, message.0, data.clone())),
                _ => None,
            })
            .collect()
    }

    /// When message `number` of `channel` was delivered.
    pub(crate) fn delivered_at(&self, channel: u8, number: u32) -> Option<u64> {
        self.messages(channel)
            .into_iter()
            .find(|m| m.1 == number)
            .map(|m| m.0)
    }

    pub(crate) fn expired(&self) -> Vec<(u64, u8, u32)> {
        self.events
            .iter()
            .filter_map(|(at, e)| match e {
                Event::Expired {
                    channel, message, ..
                } => Some((*at, *channel, message.0)),
                _ => None,
            })
            .collect()
    }

    fn junk(&mut self, n: u64) -> Vec<u8> {
        if n % 2 == 0 {
            // Garbage: not a transport packet at all.
            vec![0xa5; 60 + (n % 40) as usize]
        } else {
            // A well-formed data packet for a connection id nobody holds.
            let mut bytes = vec![0u8; 40];
            bytes[..4].copy_from_slice(&[b'L', b'T', 1, 0]);
            bytes[4..12].copy_from_slice(&(n | 1 << 40).to_be_bytes());
            bytes[12..20].copy_from_slice(&n.to_be_bytes());
            bytes[20] = 7; // PING
            bytes.truncate(21);
            bytes
        }
    }
}

impl sim::Endpoint for Node {
    fn handle_datagram(&mut self, now: u64, datagram: Datagram) {
        self.endpoint
            .handle_datagram(now, datagram.from, &datagram.payload);
        self.collect(now);
    }

    fn poll_transmit(&mut self, now: u64) -> Option<Datagram> {
        if let Some(flood) = &mut self.flood {
            if flood.next_ns <= now && flood.next_ns < flood.until_ns {
                flood.next_ns += flood.every_ns;
                flood.sent += 1;
                let (from, n) = (flood.from, flood.sent);
                let payload = self.junk(n);
                let to = self.endpoint.config().accept_connections.then(client_addr);
                return Some(Datagram {
                    from,
                    to: to.unwrap_or_else(server_addr),
                    payload,
                });
            }
        }
        let transmit = self.endpoint.poll_transmit(now, &mut self.buf);
        self.collect(now);
        let transmit = transmit?;
        Some(Datagram {
            from: self.addr,
            to: transmit.to,
            payload: self.buf[..transmit.len].to_vec(),
        })
    }

    fn poll_timeout(&self) -> Option<u64> {
        let flood = self
            .flood
            .as_ref()
            .filter(|f| f.next_ns < f.until_ns)
            .map(|f| f.next_ns);
        [self.endpoint.poll_timeout(), flood]
            .into_iter()
            .flatten()
            .min()
    }

    fn handle_timeout(&mut self, now: u64) {
        self.endpoint.handle_timeout(now);
        self.collect(now);
    }
}

/// A client (side A) and a server (side B), joined by links of the given one-way delays.
pub(crate) struct Lab {
    pub(crate) pair: Pair<Node, Node>,
    pub(crate) connection: ConnectionHandle,
}

pub(crate) fn one_way(delay_ms: u64) -> LinkConfig {
    LinkConfig {
        delay_ns: delay_ms * MS,
        ..LinkConfig::default()
    }
}

/// Both ends under recovery policy `policy`, 50 ms each way, connected.
pub(crate) fn lab_under(policy: &str) -> Lab {
    Lab::connect(
        config(policy, false),
        config(policy, true),
        one_way(50),
        one_way(50),
    )
}

impl Lab {
    /// Connects at time 0 and runs until the client is connected.
    pub(crate) fn connect(
        client: Config,
        server: Config,
        a_to_b: LinkConfig,
        b_to_a: LinkConfig,
    ) -> Lab {
        let mut a = Node::new(client, 1, client_addr());
        let b = Node::new(server, 2, server_addr());
        let connection = a.endpoint.connect(0, server_addr());
        let network = Network::new(0, a_to_b, b_to_a).unwrap();
        let mut lab = Lab {
            pair: Pair::new(a, b, network),
            connection,
        };
        for step in 1..=1000 {
            lab.pair.drive_until(step * 10 * MS);
            if lab
                .client()
                .events
                .iter()
                .any(|(_, e)| matches!(e, Event::Connected { .. }))
            {
                return lab;
            }
        }
        panic!("not connected after 10 s");
    }

    pub(crate) fn client(&self) -> &Node {
        &self.pair.a
    }

    pub(crate) fn server(&self) -> &Node {
        &self.pair.b
    }

    /// The server's handle of the connection.
    /// The client's connection counters now.
    pub(crate) fn client_stats(&self) -> ConnectionStats {
        let stats = self.pair.a.endpoint.connection_stats(self.connection);
        stats.unwrap()
    }

    /// The server's connection counters now.
    pub(crate) fn server_stats(&self) -> ConnectionStats {
        let on_server = self.connection_on_server();
        self.pair.b.endpoint.connection_stats(on_server).unwrap()
    }

    pub(crate) fn connection_on_server(&self) -> ConnectionHandle {
        self.server()
            .events
            .iter()
            .find_map(|(_, e)| match e {
                Event::Accepted { connection, .. } => Some(*connection),
                _ => None,
            })
            .expect("accepted")
    }

    pub(crate) fn now(&self) -> u64 {
        self.pair.network.now()
    }

    /// Runs until `at`, then the client sends `data` on `channel` at `at`.
    pub(crate) fn send_at(&mut self, at: u64, channel: u8, data: &[u8]) -> MessageId {
        self.pair.drive_until(at);
        self.pair
            .a
            .endpoint
            .send(at, self.connection, channel, data)
            .unwrap()
    }

    pub(crate) fn run_until(&mut self, at: u64) {
        self.pair.drive_until(at);
    }

    /// Loses the first `copies` datagrams from the client that carry message `number` of
    /// `channel` (whole or any fragment `fragment`, if given).
    pub(crate) fn lose_copies(
        &mut self,
        channel: u8,
        number: u32,
        fragment: Option<u16>,
        copies: u32,
    ) {
        let mut seen = 0;
        let client = client_addr();
        self.pair.network.set_drop_filter(move |d: &Datagram| {
            if d.from != client || seen >= copies {
                return false;
            }
            let hit = carries(&d.payload, channel, number, fragment);
            seen += u32::from(hit);
            hit
        });
    }
}
