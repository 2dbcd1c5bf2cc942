//! Building the next packet of a connection.

use latlab_wire::transport::compact::ShortHeader;
use latlab_wire::transport::{self as wire, Frame, HEADER_LEN, HELLO_MIN_LEN, VERSION_COMPACT};

use super::{Connection, FragKey, Item, SentPacket, State};
use crate::config::{Config, Feedback};

/// `Hello`s that ask for the compact format before a client falls back to version 1.
const COMPACT_HELLOS: u32 = 3;

/// Writes a long header of `version` and `frames` into `buf`; returns the packet's length.
fn write_packet(buf: &mut [u8], header: wire::Repr, version: u8, frames: &[Frame<'_>]) -> usize {
    header.emit_version(&mut wire::Packet::new_unchecked(&mut buf[..]), version);
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
                let (frame, compact) = match self.state {
                    State::Cookie { epoch, mac } => {
                        (Frame::HelloCookie { epoch, mac }, self.compact)
                    }
                    _ => {
                        self.hello_attempts += 1;
                        let hello = Frame::Hello {
                            padding: (HELLO_MIN_LEN - HEADER_LEN - 3) as u16,
                        };
                        let ask = config.recovery.compact && self.hello_attempts <= COMPACT_HELLOS;
                        (hello, ask)
                    }
                };
                let version = if compact {
                    VERSION_COMPACT
                } else {
                    wire::VERSION
                };
                let len = write_packet(buf, handshake(self.id), version, &[frame]);
                self.count_sent(len);
                Some(len)
            }
            State::Closing { code } => {
                let header = wire::Repr {
                    ack_immediately: false,
                    connection_id: self.id,
                    packet_number: self.next_pn,
                };
                let close = Frame::Close { code };
                let len = if self.compact {
                    let at = self.short_header(false).emit(buf);
                    at + close.emit_compact(&mut buf[at..])
                } else {
                    write_packet(buf, header, wire::VERSION, &[close])
                };
                self.next_pn += 1;
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

    /// Writes `frame` in the connection's format; its length.
    pub(super) fn emit_frame(&self, frame: &Frame<'_>, buf: &mut [u8]) -> usize {
        if self.compact {
            frame.emit_compact(buf)
        } else {
            frame.emit(buf)
        }
    }

    pub(super) fn frame_len(&self, frame: &Frame<'_>) -> usize {
        if self.compact {
            frame.compact_len()
        } else {
            frame.buffer_len()
        }
    }

    fn poll_data(&mut self, now: u64, buf: &mut [u8], config: &Config) -> Option<usize> {
        let recovery = config.recovery;
        let nack_mode = recovery.feedback == Feedback::Nack;
        let nacks = self.due_nacks(now, config);
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
        while self.copies.front().is_some_and(|k| !live(self, k)) {
            self.copies.pop_front();
        }
        let (flight_bytes, flight_packets) = self.flight(now, nack_mode);
        let may_send_new = !self.fresh.is_empty()
            && self.cc.can_send(
                flight_bytes,
                flight_packets,
                config.mtu,
                recovery.thin_packets,
            );
        if !self.fresh.is_empty() && !may_send_new {
            self.stats.window_limited += 1;
        }
        let has_eliciting = !self.retransmit.is_empty()
            || !self.copies.is_empty()
            || !self.controls.is_empty()
            || !nacks.is_empty()
            || may_send_new;
        if !ack_due && !has_eliciting && !self.ping_due {
            return None;
        }
        let limit = buf.len();
        let mut header = wire::Repr {
            ack_immediately: !nack_mode && self.sent.len() < recovery.thin_packets,
            connection_id: self.id,
            packet_number: self.next_pn,
        };
        let short = self.short_header(false);
        let mut at = if self.compact {
            short.buffer_len()
        } else {
            HEADER_LEN
        };
        let header_len = at;
        // An ACK rides along only when one is owed (an ack-eliciting packet arrived since the
        // last): ACK-only packets from the peer are never acknowledged.
        let ack = self
            .received
            .ack_deadline
            .and_then(|_| self.received.ack(now));
        let mut ack_largest = None;
        let mut acks_data = false;
        if let Some((ranges, delay_us)) = ack {
            at += self.emit_frame(&Frame::Ack { delay_us, ranges }, &mut buf[at..]);
            self.received.ack_deadline = None;
            self.received.unacked_eliciting = 0;
            ack_largest = ranges.largest();
            acks_data = std::mem::take(&mut self.received.data_since_ack);
        } else if self.received.ack_deadline.is_some() {
            // Nothing above what the peer has seen: no ACK is owed.
            self.received.ack_deadline = None;
            self.received.unacked_eliciting = 0;
        }
        let mut items: Vec<Item> = Vec::new();
        let mut retransmitted = false;
        self.stats.nacks_sent += nacks.len() as u64;
        for item in nacks.into_iter().rev() {
            self.controls.push_front(item);
        }
        while let Some(&item) = self.controls.front() {
            let frame = match item {
                Item::Expired { channel, message } => Frame::Expired { channel, message },
                Item::Nack {
                    channel,
                    first,
                    count,
                } => Frame::Nack {
                    channel,
                    first,
                    count,
                },
                _ => Frame::Ping,
            };
            if at + self.frame_len(&frame) > limit {
                break;
            }
            at += self.emit_frame(&frame, &mut buf[at..]);
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
        while let Some(&key) = self.copies.front() {
            if !live(self, &key) {
                self.copies.pop_front();
                continue;
            }
            let xored = self
                .xor_copies(key.channel, config)
                .then(|| self.emit_xor(key, &mut buf[at..]))
                .flatten();
            let (len, item) = match xored {
                Some(len) => (len, Item::Xor(key)),
                None => match self.emit_fragment(key, &mut buf[at..]) {
                    Some(len) => (len, Item::Fragment(key)),
                    None => break,
                },
            };
            at += len;
            self.copies.pop_front();
            items.push(item);
            // A blind copy asks for no ACK of its own under NACK feedback.
            retransmitted |= !nack_mode;
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
        // Under NACK feedback an ACK of data asks to be acknowledged (a PING): its sender then
        // knows what the peer has seen, and learns the round trip.
        let ping = self.ping_due || (nack_mode && acks_data);
        if items.is_empty() && ping {
            at += self.emit_frame(&Frame::Ping, &mut buf[at..]);
            items.push(Item::Ping);
        }
        if items.is_empty() && at == header_len {
            return None;
        }
        if nack_mode {
            // Feedback (NACKs, ACKs of data) asks for an ACK at once; data does not.
            let data = items
                .iter()
                .any(|i| matches!(i, Item::Fragment(_) | Item::Bundled(_) | Item::Xor(_)));
            header.ack_immediately = !data && !items.is_empty();
        }
        if items.is_empty() {
            header.ack_immediately = false;
        }
        if retransmitted && !nack_mode {
            header.ack_immediately = true;
        }
        // The first packet from a new address asks the server to say at once that it found
        // the connection there, so the short id stops soon.
        if self.announce_from == Some(header.packet_number) && !items.is_empty() {
            header.ack_immediately = true;
        }
        if self.compact {
            let short = ShortHeader {
                ack_immediately: header.ack_immediately,
                ..short
            };
            short.emit(buf);
        } else {
            header.emit(&mut wire::Packet::new_unchecked(&mut buf[..]));
        }
        self.next_pn += 1;
        self.count_sent(at);
        if !items.is_empty() {
            self.ping_due = false;
            self.last_eliciting_sent = now;
            self.bytes_in_flight += at;
            for item in &items {
                match *item {
                    Item::Fragment(key) => self.note_sent(now, key, config),
                    Item::Xor(key) => self.note_xor_sent(key),
                    _ => {}
                }
            }
            self.sent.insert(
                header.packet_number,
                SentPacket {
                    sent: now,
                    size: at,
                    items,
                    later_acked: 0,
                    ack_largest,
                    asked_now: header.ack_immediately,
                },
            );
        }
        Some(at)
    }

    /// Bytes and packets in flight as the congestion window sees them. Under NACK feedback
    /// ACKs come a second apart, so what an ACK at once would have left in flight counts: the
    /// packets sent within the last SRTT (a thin stream stays thin).
    fn flight(&self, now: u64, nack_mode: bool) -> (usize, usize) {
        if !nack_mode {
            return (self.bytes_in_flight, self.sent.len());
        }
        let since = now.saturating_sub(self.rtt.srtt().unwrap_or(0));
        self.sent
            .values()
            .rev()
            .take_while(|p| p.sent >= since)
            .fold((0, 0), |(bytes, n), p| (bytes + p.size, n + 1))
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
        if self.frame_len(&frame) > buf.len() {
            return None;
        }
        Some(self.emit_frame(&frame, buf))
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
        message.prior_sent[index] = message.last_sent[index];
        message.last_sent[index] = now;
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
