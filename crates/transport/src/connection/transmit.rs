//! Building the next packet of a connection.

use latlab_wire::transport::{self as wire, Frame, HEADER_LEN, HELLO_MIN_LEN};

use super::{Connection, FragKey, Item, SentPacket, State};
use crate::config::Config;

/// Writes the header and `frames` into `buf`; returns the packet's length.
fn write_packet(buf: &mut [u8], header: wire::Repr, frames: &[Frame<'_>]) -> usize {
    header.emit(&mut wire::Packet::new_unchecked(&mut buf[..]));
    let mut at = HEADER_LEN;
    for frame in frames {
        at += frame.emit(&mut buf[at..]);
    }
    at
}

impl Connection {
    /// The next packet of this connection, written into `buf` (at most `buf.len()` bytes, at
    /// least 200): its length, or `None` if nothing is due.
    pub(crate) fn poll_transmit(
        &mut self,
        now: u64,
        buf: &mut [u8],
        config: &Config,
    ) -> Option<usize> {
        let handshake = |connection_id| wire::Repr {
            ack_immediately: false,
            connection_id,
            packet_number: 0,
        };
        match self.state {
            State::Drained => None,
            State::Hello | State::Cookie { .. } => {
                let at = self.handshake_at?;
                if at > now {
                    return None;
                }
                self.handshake_at = Some(now + self.handshake_rto);
                self.handshake_rto = self.handshake_rto.saturating_mul(2);
                let frame = match self.state {
                    State::Cookie { epoch, mac } => Frame::HelloCookie { epoch, mac },
                    _ => Frame::Hello {
                        padding: (HELLO_MIN_LEN - HEADER_LEN - 3) as u16,
                    },
                };
                let len = write_packet(buf, handshake(self.id), &[frame]);
                self.count_sent(len);
                Some(len)
            }
            State::Closing { code } => {
                let header = wire::Repr {
                    ack_immediately: false,
                    connection_id: self.id,
                    packet_number: self.next_pn,
                };
                self.next_pn += 1;
                let len = write_packet(buf, header, &[Frame::Close { code }]);
                self.count_sent(len);
                self.state = State::Drained;
                Some(len)
            }
            State::Established => self.poll_data(now, buf, config),
        }
    }

    fn count_sent(&mut self, len: usize) {
        self.stats.packets_sent += 1;
        self.stats.bytes_sent += len as u64;
    }

    fn poll_data(&mut self, now: u64, buf: &mut [u8], config: &Config) -> Option<usize> {
        let recovery = config.recovery;
        let ack_due = self.received.ack_deadline.is_some_and(|t| t <= now);
        // Drop queue heads that no longer need sending.
        let live = |c: &Connection, key: &FragKey| {
            c.outgoing
                .get(&(key.channel, key.message))
                .is_some_and(|m| !m.acked[usize::from(key.fragment)])
        };
        while self.retransmit.front().is_some_and(|k| !live(self, k)) {
            self.retransmit.pop_front();
        }
        while self.fresh.front().is_some_and(|k| !live(self, k)) {
            self.fresh.pop_front();
        }
        let may_send_new = !self.fresh.is_empty()
            && self.cc.can_send(
                self.bytes_in_flight,
                self.sent.len(),
                config.mtu,
                recovery.thin_packets,
            );
        if !self.fresh.is_empty() && !may_send_new {
            self.stats.window_limited += 1;
        }
        let has_eliciting =
            !self.retransmit.is_empty() || !self.controls.is_empty() || may_send_new;
        if !ack_due && !has_eliciting && !self.ping_due {
            return None;
        }
        let limit = buf.len();
        let mut header = wire::Repr {
            ack_immediately: self.sent.len() < recovery.thin_packets,
            connection_id: self.id,
            packet_number: self.next_pn,
        };
        let mut at = HEADER_LEN;
        // An ACK rides along only when one is owed (an ack-eliciting packet arrived since the
        // last): ACK-only packets from the peer are never acknowledged.
        let ack = self
            .received
            .ack_deadline
            .and_then(|_| self.received.ack(now));
        if let Some((ranges, delay_us)) = ack {
            at += Frame::Ack { delay_us, ranges }.emit(&mut buf[at..]);
            self.received.ack_deadline = None;
            self.received.unacked_eliciting = 0;
        }
        let mut items: Vec<Item> = Vec::new();
        let mut retransmitted = false;
        while let Some(&item) = self.controls.front() {
            let frame = match item {
                Item::Expired { channel, message } => Frame::Expired { channel, message },
                _ => Frame::Ping,
            };
            if at + frame.buffer_len() > limit {
                break;
            }
            at += frame.emit(&mut buf[at..]);
            items.push(item);
            self.controls.pop_front();
        }
        while let Some(&key) = self.retransmit.front() {
            if !live(self, &key) {
                self.retransmit.pop_front();
                continue;
            }
            let Some(len) = self.emit_fragment(key, &mut buf[at..]) else {
                break;
            };
            at += len;
            self.retransmit.pop_front();
            items.push(Item::Fragment(key));
            retransmitted = true;
        }
        let mut sent_new = false;
        if may_send_new {
            while let Some(&key) = self.fresh.front() {
                if !live(self, &key) {
                    self.fresh.pop_front();
                    continue;
                }
                let Some(len) = self.emit_fragment(key, &mut buf[at..]) else {
                    break;
                };
                at += len;
                self.fresh.pop_front();
                items.push(Item::Fragment(key));
                sent_new = true;
            }
        }
        if sent_new && recovery.rdb_bytes > 0 {
            at += self.bundle(&mut items, &mut buf[at..], recovery.rdb_bytes);
        }
        if items.is_empty() && self.ping_due {
            at += Frame::Ping.emit(&mut buf[at..]);
            items.push(Item::Ping);
        }
        if items.is_empty() && at == HEADER_LEN {
            return None;
        }
        if items.is_empty() {
            header.ack_immediately = false;
        }
        if retransmitted {
            header.ack_immediately = true;
        }
        header.emit(&mut wire::Packet::new_unchecked(&mut buf[..]));
        self.next_pn += 1;
        self.count_sent(at);
        if !items.is_empty() {
            self.ping_due = false;
            self.last_eliciting_sent = now;
            self.bytes_in_flight += at;
            for item in &items {
                if let Item::Fragment(key) = *item {
                    self.note_sent(now, key, config);
                }
            }
            self.sent.insert(
                header.packet_number,
                SentPacket {
                    sent: now,
                    size: at,
                    items,
                    later_acked: 0,
                },
            );
        }
        Some(at)
    }

    /// Redundant data bundling: copies of fragments sent before and not yet acknowledged
    /// ride along, oldest first, up to `cap` bytes of frames and the room left in `buf`.
    /// They are added to `items` as bundled (acknowledged with the packet, not sent again if
    /// it is lost). Returns the bytes written.
    fn bundle(&mut self, items: &mut Vec<Item>, buf: &mut [u8], cap: usize) -> usize {
        let mut written = 0;
        let mut candidates = Vec::new();
        for (&(channel, message), out) in &self.outgoing {
            if !out.kind.is_reliable() {
                continue;
            }
            for fragment in 0..out.fragments {
                let index = usize::from(fragment);
                if out.sends[index] > 0 && !out.acked[index] && !out.queued[index] {
                    candidates.push(FragKey {
                        channel,
                        message,
                        fragment,
                    });
                }
            }
        }
        for key in candidates {
            if items
                .iter()
                .any(|i| matches!(*i, Item::Fragment(k) | Item::Bundled(k) if k == key))
            {
                continue;
            }
            let room = (cap - written).min(buf.len() - written);
            let Some(len) = self.emit_fragment(key, &mut buf[written..written + room]) else {
                break;
            };
            written += len;
            self.stats.redundant_bytes += len as u64;
            if let Some(m) = self.outgoing.get_mut(&(key.channel, key.message)) {
                m.in_flight[usize::from(key.fragment)] += 1;
            }
            items.push(Item::Bundled(key));
        }
        written
    }

    /// Writes one fragment's `Data` frame into `buf` if it fits: its length.
    fn emit_fragment(&mut self, key: FragKey, buf: &mut [u8]) -> Option<usize> {
        let message = self.outgoing.get(&(key.channel, key.message))?;
        let frame = Frame::Data {
            channel: key.channel,
            kind: message.kind,
            message: key.message,
            fragment: key.fragment,
            fragments: message.fragments,
            payload: message.fragment(key.fragment),
        };
        if frame.buffer_len() > buf.len() {
            return None;
        }
        Some(frame.emit(buf))
    }

    /// Bookkeeping after a fragment went out: retransmission counters, the duplicate of an
    /// urgent message, and forgetting unreliable messages once fully sent.
    fn note_sent(&mut self, now: u64, key: FragKey, config: &Config) {
        let Some(message) = self.outgoing.get_mut(&(key.channel, key.message)) else {
            return;
        };
        let index = usize::from(key.fragment);
        message.queued[index] = false;
        message.sends[index] += 1;
        message.in_flight[index] += 1;
        if message.sends[index] > 1 {
            self.stats.retransmissions += 1;
        }
        if message.urgent && !message.duplicated && index + 1 == usize::from(message.fragments) {
            message.duplicated = true;
            let at = now + config.recovery.duplicate_spacing_ns;
            self.duplicates.insert((at, key.channel, key.message));
        }
        if !message.kind.is_reliable() && message.sends.iter().all(|&s| s > 0) {
            self.forget(key.channel, key.message);
        }
    }
}
