//! The endpoint's half of the handshake: the stateless cookie a server answers a `Hello` with,
//! the connection it makes for a proven address (version 2's with a short id), and a
//! client's `Challenge` and `Accept`.

use std::net::{IpAddr, SocketAddr};

use latlab_wire::transport::{self as wire, Frame, HEADER_LEN, HELLO_MIN_LEN, VERSION_COMPACT};

use super::{Endpoint, MAX_QUEUED_ANSWERS};
use crate::connection::{Connection, State};
use crate::Event;

/// A handshake packet's origin and what its header said.
#[derive(Debug, Clone, Copy)]
pub(super) struct Handshake {
    pub(super) from: SocketAddr,
    pub(super) len: usize,
    pub(super) id: u64,
    /// It came in version 2's long header.
    pub(super) compact: bool,
}

impl Endpoint {
    fn cookie_mac(&self, from: SocketAddr, id: u64, epoch: u32) -> u64 {
        let mut input = [0u8; 16 + 2 + 8 + 4];
        let at = match from.ip() {
            IpAddr::V4(ip) => {
                input[..4].copy_from_slice(&ip.octets());
                4
            }
            IpAddr::V6(ip) => {
                input[..16].copy_from_slice(&ip.octets());
                16
            }
        };
        input[at..at + 2].copy_from_slice(&from.port().to_be_bytes());
        input[at + 2..at + 10].copy_from_slice(&id.to_be_bytes());
        input[at + 10..at + 14].copy_from_slice(&epoch.to_be_bytes());
        self.cookie_key.0.hash(&input[..at + 14])
    }

    fn epoch(&self, now: u64) -> u32 {
        (now / self.config.cookie_epoch_ns.max(1)) as u32
    }

    /// A short id no connection of this endpoint holds.
    fn fresh_short_id(&mut self) -> u32 {
        loop {
            let id = self.rng.next_u64() as u32;
            if !self.by_short_id.contains_key(&id) {
                return id;
            }
        }
    }

    pub(super) fn handle_handshake(&mut self, now: u64, hs: Handshake, frames: &[Frame<'_>]) {
        let Handshake {
            from,
            len,
            id,
            compact,
        } = hs;
        let drops = &mut self.stats.handshake_drops;
        let is_request = matches!(frames, [Frame::Hello { .. } | Frame::HelloCookie { .. }]);
        if compact && is_request && !self.config.recovery.compact {
            // A server that does not speak version 2 stays silent, as an older one would.
            drops.unsupported_version += 1;
            return;
        }
        // Version 2's Accept names the connection's short id; a server from before short ids
        // sends the Accept alone.
        let (frame, short_id) = match *frames {
            [frame] => (frame, None),
            [Frame::Accept, Frame::ShortId { id: short }] if compact => {
                (Frame::Accept, Some(short))
            }
            _ => {
                drops.malformed += 1;
                return;
            }
        };
        let answer = match frame {
            Frame::Hello { .. } => {
                if !self.config.accept_connections {
                    drops.not_a_server += 1;
                    return;
                }
                if len < HELLO_MIN_LEN {
                    drops.hello_too_short += 1;
                    return;
                }
                let epoch = self.epoch(now);
                let mac = self.cookie_mac(from, id, epoch);
                [Some(Frame::Challenge { epoch, mac }), None]
            }
            Frame::HelloCookie { epoch, mac } => {
                if !self.config.accept_connections {
                    drops.not_a_server += 1;
                    return;
                }
                if mac != self.cookie_mac(from, id, epoch) {
                    self.stats.handshake_drops.bad_cookie += 1;
                    return;
                }
                let current = self.epoch(now);
                if epoch != current && epoch.wrapping_add(1) != current {
                    self.stats.handshake_drops.expired_cookie += 1;
                    return;
                }
                let address_taken = compact
                    && self
                        .by_addr
                        .get(&from)
                        .is_some_and(|h| self.connections[h].id != id);
                let short_id = match self.by_id.get(&id) {
                    // Our Accept was lost: say it again.
                    Some(&h) if self.connections[&h].remote == from => {
                        self.connections[&h].short_id
                    }
                    Some(_) => {
                        self.stats.handshake_drops.id_in_use += 1;
                        return;
                    }
                    None if address_taken => {
                        self.stats.handshake_drops.id_in_use += 1;
                        return;
                    }
                    None => {
                        let mut connection =
                            Connection::new(now, id, from, State::Established, &self.config);
                        connection.compact = compact;
                        let short_id = compact.then(|| self.fresh_short_id());
                        connection.short_id = short_id;
                        let handle = self.insert(connection);
                        if let Some(short_id) = short_id {
                            self.by_addr.insert(from, handle);
                            self.by_short_id.insert(short_id, handle);
                        }
                        self.stats.accepted += 1;
                        self.events.push_back(Event::Accepted {
                            connection: handle,
                            remote: from,
                        });
                        short_id
                    }
                };
                [
                    Some(Frame::Accept),
                    short_id.map(|id| Frame::ShortId { id }),
                ]
            }
            Frame::Challenge { epoch, mac } => {
                match self.client_in_handshake(id, from) {
                    Some(c) => c.handle_challenge(now, epoch, mac, compact),
                    None => self.stats.handshake_drops.unexpected += 1,
                }
                return;
            }
            Frame::Accept => {
                match self.client_in_handshake(id, from) {
                    Some(c) if c.compact == compact => {
                        c.handle_accept(now);
                        c.short_id = short_id;
                        if compact {
                            let handle = self.by_id[&id];
                            self.by_addr.insert(from, handle);
                        }
                    }
                    _ => self.stats.handshake_drops.unexpected += 1,
                }
                return;
            }
            _ => {
                drops.malformed += 1;
                return;
            }
        };
        if self.answers.len() >= MAX_QUEUED_ANSWERS {
            self.stats.handshake_drops.answer_queue_full += 1;
            return;
        }
        let header = wire::Repr {
            ack_immediately: false,
            connection_id: id,
            packet_number: 0,
        };
        let answer = answer.iter().flatten();
        let mut bytes =
            vec![0u8; HEADER_LEN + answer.clone().map(Frame::buffer_len).sum::<usize>()];
        let version = if compact {
            VERSION_COMPACT
        } else {
            wire::VERSION
        };
        header.emit_version(&mut wire::Packet::new_unchecked(&mut bytes[..]), version);
        let mut at = HEADER_LEN;
        for frame in answer {
            at += frame.emit(&mut bytes[at..]);
        }
        debug_assert!(
            bytes.len() <= len,
            "an answer is never larger than its request"
        );
        self.answers.push_back((from, bytes));
    }

    fn client_in_handshake(&mut self, id: u64, from: SocketAddr) -> Option<&mut Connection> {
        let handle = *self.by_id.get(&id)?;
        let connection = self.connections.get_mut(&handle)?;
        (connection.remote == from
            && matches!(connection.state, State::Hello | State::Cookie { .. }))
        .then_some(connection)
    }
}
