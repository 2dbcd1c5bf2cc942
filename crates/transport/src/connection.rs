//! One connection: its handshake state, the sending half (messages, packets in flight, loss
//! recovery, RDB, duplication, congestion) and, through [`Receiver`], the receiving half.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::SocketAddr;

use latlab_wire::transport::{self as wire, ChannelKind, Frame, HEADER_LEN};

use crate::config::{Config, Copies, Feedback, COPIES_AUTO_PACKETS};
use crate::recv::{Delivery, Received, Receiver, Refused};
use crate::rtt::{Congestion, RttEstimator, INITIAL_RTO_NS};
use crate::{CloseReason, ConnectionStats};

/// Where a connection is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum State {
    /// Client: Hello sent, waiting for a Challenge.
    Hello,
    /// Client: HelloCookie sent, waiting for an Accept.
    Cookie { epoch: u32, mac: u64 },
    /// Both sides may send data.
    Established,
    /// Closed locally: the CLOSE frame is still to be sent.
    Closing { code: u16 },
    /// Done; the endpoint forgets it once its events are taken.
    Drained,
}

/// What a connection tells the endpoint.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum ConnEvent {
    Connected,
    Delivered(Delivery),
    Expired { channel: u8, message: u32 },
    Closed(CloseReason),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct FragKey {
    channel: u8,
    message: u32,
    fragment: u16,
}

/// A message the sender still holds.
#[derive(Debug)]
struct OutMessage {
    kind: ChannelKind,
    data: Vec<u8>,
    fragments: u16,
    fragment_len: usize,
    acked: Vec<bool>,
    queued: Vec<bool>,
    sends: Vec<u32>,
    /// When each fragment last went out (a NACK's repair waits half an SRTT after it).
    last_sent: Vec<u64>,
    /// When each fragment went out before that (0: not twice yet); with `nack-early` a
    /// NACK's repair waits half an SRTT after it.
    prior_sent: Vec<u64>,
    /// Copies of each fragment in packets neither acknowledged nor declared lost.
    in_flight: Vec<u32>,
    unacked: u16,
    /// The deadline passed while a copy was in flight: never sent again, and reported
    /// expired once no copy can arrive any more.
    expired: bool,
    expires: Option<u64>,
    urgent: bool,
    duplicated: bool,
}

impl OutMessage {
    /// Whether some fragment can no longer arrive: not acknowledged and no copy in flight.
    fn cannot_arrive(&self) -> bool {
        (0..self.acked.len()).any(|i| !self.acked[i] && self.in_flight[i] == 0)
    }

    fn fragment(&self, fragment: u16) -> &[u8] {
        let start = usize::from(fragment) * self.fragment_len;
        &self.data[start..(start + self.fragment_len).min(self.data.len())]
    }
}

/// What a packet in flight carried that must be sent again if it is lost.
#[derive(Debug, Clone, Copy)]
enum Item {
    Fragment(FragKey),
    /// A redundant copy (RDB): acknowledged with the packet, never sent again for it.
    Bundled(FragKey),
    /// A blind copy sent as the XOR of the fragment's message and the one before: its ACK
    /// says nothing of either; its loss counts as the copy's.
    Xor(FragKey),
    Expired {
        channel: u8,
        message: u32,
    },
    Ping,
    /// A NACK: sent again (for the messages still missing) if its packet is lost.
    Nack {
        channel: u8,
        first: u32,
        count: u8,
    },
}

#[derive(Debug)]
struct SentPacket {
    sent: u64,
    size: usize,
    items: Vec<Item>,
    /// The largest packet number of the ACK frame it carried: once it is acknowledged, the
    /// peer has seen that ACK ([`Feedback::Nack`] then reports only what lies above).
    ack_largest: Option<u64>,
    /// It asked for an immediate ACK.
    asked_now: bool,
    /// Ack-eliciting packets sent after this one that were acknowledged.
    later_acked: u64,
}

/// Fragments requeued because a packet was declared lost, kept to spot a spurious
/// retransmission when that packet is acknowledged after all.
#[derive(Debug)]
struct LostPacket {
    items: Vec<Item>,
}

/// Lost packets remembered for spurious-retransmission accounting.
const KEPT_LOST: usize = 1024;

#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) id: u64,
    pub(crate) remote: SocketAddr,
    pub(crate) state: State,
    /// Version 2's compact format (short headers, compact frames) once established.
    pub(crate) compact: bool,
    /// Version 2: the short id the server gave the connection (`path.rs`).
    pub(crate) short_id: Option<u32>,
    /// Client: the first packet number sent since its address changed; short headers carry
    /// the short id until the server acknowledges one at or above it.
    announce_from: Option<u64>,
    /// Server: the packet number that last moved the connection to a new address (0: none).
    pub(crate) moved_at: u64,
    /// Client: `Hello`s sent (the fourth and later ask for version 1).
    hello_attempts: u32,
    pub(crate) stats: ConnectionStats,
    pub(crate) events: VecDeque<ConnEvent>,
    next_pn: u64,
    next_message: Vec<u32>,
    outgoing: BTreeMap<(u8, u32), OutMessage>,
    outgoing_bytes: usize,
    fresh: VecDeque<FragKey>,
    retransmit: VecDeque<FragKey>,
    /// Blind copies due (urgent duplicates, [`Copies`]).
    copies: VecDeque<FragKey>,
    controls: VecDeque<Item>,
    sent: BTreeMap<u64, SentPacket>,
    lost: BTreeMap<u64, LostPacket>,
    bytes_in_flight: usize,
    expiries: BTreeSet<(u64, u8, u32)>,
    duplicates: BTreeSet<(u64, u8, u32)>,
    rtt: RttEstimator,
    cc: Congestion,
    backoff: u64,
    timeouts_in_a_row: u32,
    rack_timer: Option<u64>,
    pub(crate) received: Received,
    receiver: Receiver,
    /// [`Feedback::Nack`]: each channel's arrivals, to tell when a message is late.
    watches: Vec<feedback::Watch>,
    /// Messages NACKed and not yet arrived, whose NACK is not known lost: when they may be
    /// NACKed again (one timeout after, should the repair be lost; doubled for each NACK
    /// already sent) and how many were.
    nack_pending: BTreeMap<(u8, u32), (u64, u32)>,
    /// XOR copies: the sender's channel ticks, what the receiver solves them with (`xor.rs`).
    xors: xor::XorState,
    /// Largest of our packet numbers the peer acknowledged.
    largest_acked: Option<u64>,
    /// Packets acknowledged since one was declared lost ([`Copies::Auto`]).
    packets_since_loss: u64,
    last_received: u64,
    last_eliciting_sent: u64,
    ping_due: bool,
    /// Client handshake: when the Hello or HelloCookie goes out again, and its backoff.
    handshake_at: Option<u64>,
    handshake_rto: u64,
    started: u64,
}

impl Connection {
    pub(crate) fn new(
        now: u64,
        id: u64,
        remote: SocketAddr,
        state: State,
        config: &Config,
    ) -> Connection {
        Connection {
            id,
            remote,
            state,
            compact: state == State::Established && config.recovery.compact,
            short_id: None,
            announce_from: None,
            moved_at: 0,
            hello_attempts: 0,
            stats: ConnectionStats::default(),
            events: VecDeque::new(),
            next_pn: 1,
            next_message: vec![0; config.channels.len()],
            outgoing: BTreeMap::new(),
            outgoing_bytes: 0,
            fresh: VecDeque::new(),
            retransmit: VecDeque::new(),
            copies: VecDeque::new(),
            controls: VecDeque::new(),
            sent: BTreeMap::new(),
            lost: BTreeMap::new(),
            bytes_in_flight: 0,
            expiries: BTreeSet::new(),
            duplicates: BTreeSet::new(),
            rtt: RttEstimator::new(),
            cc: Congestion::new(config.mtu),
            backoff: 1,
            timeouts_in_a_row: 0,
            rack_timer: None,
            received: Received::default(),
            watches: vec![feedback::Watch::default(); config.channels.len()],
            nack_pending: BTreeMap::new(),
            xors: xor::XorState::new(config.channels.len()),
            largest_acked: None,
            packets_since_loss: 0,
            receiver: Receiver::new(
                config.channels.iter().map(|c| c.kind),
                config.max_reassembly_bytes,
                Self::fragment_len(config.mtu),
            ),
            last_received: now,
            last_eliciting_sent: now,
            ping_due: false,
            handshake_at: (state == State::Hello).then_some(now),
            handshake_rto: INITIAL_RTO_NS,
            started: now,
        }
    }

    /// Bytes of a fragment's payload so that a packet with a full ACK and one `Data` frame
    /// fits in `mtu`.
    pub(crate) fn fragment_len(mtu: usize) -> usize {
        mtu - HEADER_LEN - Frame::ack_len(wire::MAX_ACK_RANGES) - Frame::data_len(0)
    }

    fn is_established(&self) -> bool {
        self.state == State::Established
    }

    pub(crate) fn is_open(&self) -> bool {
        !matches!(self.state, State::Closing { .. } | State::Drained)
    }

    /// Queues a message; the caller checked the channel, the length and the buffer.
    pub(crate) fn send(
        &mut self,
        now: u64,
        channel: u8,
        data: &[u8],
        urgent: bool,
        config: &Config,
    ) -> u32 {
        let channel_config = config.channels[usize::from(channel)];
        let number = self.next_message[usize::from(channel)];
        self.next_message[usize::from(channel)] = number.wrapping_add(1);
        let fragment_len = Self::fragment_len(config.mtu);
        let fragments = data.len().div_ceil(fragment_len).max(1);
        // Fits: max_message_len is checked against 65 535 fragments by the endpoint.
        let fragments = u16::try_from(fragments).unwrap_or(u16::MAX);
        let kind = channel_config.kind;
        let expires = (kind == ChannelKind::Deadline).then(|| now + channel_config.deadline_ns);
        self.note_send_tick(now, channel, kind);
        let urgent = (config.recovery.duplicate_urgent
            && (urgent
                || (kind == ChannelKind::Deadline
                    && self
                        .rtt
                        .srtt()
                        .is_some_and(|srtt| 2 * channel_config.deadline_ns < 3 * srtt))))
            || (kind.is_reliable() && self.copies_active(config));
        if let Some(at) = expires {
            self.expiries.insert((at, channel, number));
        }
        for fragment in 0..fragments {
            self.fresh.push_back(FragKey {
                channel,
                message: number,
                fragment,
            });
        }
        self.outgoing_bytes += data.len();
        let n = usize::from(fragments);
        self.outgoing.insert(
            (channel, number),
            OutMessage {
                kind,
                data: data.to_vec(),
                fragments,
                fragment_len,
                acked: vec![false; n],
                queued: vec![true; n],
                sends: vec![0; n],
                last_sent: vec![0; n],
                prior_sent: vec![0; n],
                in_flight: vec![0; n],
                unacked: fragments,
                expired: false,
                expires,
                urgent,
                duplicated: false,
            },
        );
        number
    }

    /// The counters with the current estimates filled in.
    pub(crate) fn stats_now(&self, config: &Config) -> ConnectionStats {
        ConnectionStats {
            srtt_ns: self.rtt.srtt(),
            rttvar_ns: self.rtt.rttvar(),
            rto_ns: self.rtt.rto(self.rto_floor(config)) * self.backoff,
            congestion_window: self.cc.window,
            bytes_in_flight: self.bytes_in_flight,
            packets_in_flight: self.sent.len(),
            ..self.stats
        }
    }

    /// Whether every reliable message gets a blind copy now.
    pub(super) fn copies_active(&self, config: &Config) -> bool {
        match config.recovery.copies {
            Copies::Off => false,
            Copies::On => true,
            Copies::Auto => self.packets_since_loss < COPIES_AUTO_PACKETS,
        }
    }

    pub(crate) fn outgoing_bytes(&self) -> usize {
        self.outgoing_bytes
    }

    pub(crate) fn close(&mut self, code: u16) {
        if self.is_open() {
            self.state = State::Closing { code };
            self.events.push_back(ConnEvent::Closed(CloseReason::Local));
        }
    }

    fn drain(&mut self, reason: CloseReason) {
        if self.is_open() {
            self.events.push_back(ConnEvent::Closed(reason));
        }
        self.state = State::Drained;
    }

    // ---- handshake ------------------------------------------------------------------

    /// The server's cookie arrived in a packet of `compact`'s version, which the connection
    /// keeps.
    pub(crate) fn handle_challenge(&mut self, now: u64, epoch: u32, mac: u64, compact: bool) {
        if self.state == State::Hello {
            self.state = State::Cookie { epoch, mac };
            self.compact = compact;
            self.handshake_at = Some(now);
            self.last_received = now;
        }
    }

    pub(crate) fn handle_accept(&mut self, now: u64) {
        if matches!(self.state, State::Hello | State::Cookie { .. }) {
            self.state = State::Established;
            self.handshake_at = None;
            self.last_received = now;
            self.last_eliciting_sent = now;
            self.events.push_back(ConnEvent::Connected);
        }
    }

    // ---- receiving --------------------------------------------------------------------

    /// A packet of this connection arrived (its header and frames already parsed).
    pub(crate) fn handle_packet(
        &mut self,
        now: u64,
        header: wire::Repr,
        frames: &[Frame<'_>],
        config: &Config,
    ) {
        if !matches!(self.state, State::Established | State::Closing { .. }) {
            self.stats.packets_refused += 1;
            return;
        }
        let eliciting = frames.iter().any(|f| !matches!(f, Frame::Ack { .. }));
        let nack_mode = config.recovery.feedback == Feedback::Nack;
        let mut take = true;
        for frame in frames {
            if let Frame::Data { channel, kind, .. } | Frame::Xor { channel, kind, .. } = *frame {
                let ok = config
                    .channels
                    .get(usize::from(channel))
                    .is_some_and(|c| c.kind == kind);
                take &= ok;
            }
        }
        if !take {
            self.stats.packets_refused += 1;
            return;
        }
        self.last_received = now;
        let Some(gap) = self.received.insert(header.packet_number, now) else {
            self.stats.duplicate_packets += 1;
            // A repeated datagram never forces an ACK under NACK feedback.
            if eliciting && !nack_mode {
                // Our ACK may have been lost: say again what arrived.
                self.received.ack_deadline = Some(now);
            }
            return;
        };
        let mut refused = false;
        for frame in frames {
            match *frame {
                Frame::Ack { delay_us, ranges } => {
                    self.handle_ack(now, delay_us, &ranges, config);
                    self.note_announce_acked(&ranges);
                }
                Frame::Data {
                    channel,
                    kind,
                    message,
                    fragment,
                    fragments,
                    payload,
                } => {
                    if nack_mode && kind.is_reliable() {
                        self.note_arrival(now, channel, message);
                    }
                    self.received.data_since_ack = true;
                    let result = self.receiver.handle_data(
                        channel,
                        kind,
                        message,
                        fragment,
                        fragments,
                        payload,
                        &mut self.stats,
                    );
                    refused |= result == Err(Refused::NoRoom);
                    if result.is_ok() && fragments == 1 && kind.is_reliable() {
                        self.keep_whole(now, channel, message, payload, config);
                    }
                }
                Frame::Xor { .. } => {
                    self.received.data_since_ack = true;
                    self.handle_xor(now, frame, config);
                }
                Frame::Expired { channel, message } => {
                    self.receiver.handle_expired(channel, message)
                }
                Frame::Close { code } => self.drain(CloseReason::Remote(code)),
                Frame::Nack {
                    channel,
                    first,
                    count,
                } => self.handle_nack(now, channel, first, count, config),
                _ => {}
            }
        }
        if refused {
            // Forget the packet number so that the packet is not acknowledged and comes again.
            self.received.remove(header.packet_number);
            self.stats.reassembly_refused += 1;
        }
        while let Some(delivery) = self.receiver.delivered.pop_front() {
            self.stats.messages_received += 1;
            self.events.push_back(ConnEvent::Delivered(delivery));
        }
        if eliciting && !refused {
            self.received.unacked_eliciting += 1;
            let immediate = header.ack_immediately
                || (!nack_mode && (gap || self.received.unacked_eliciting >= 2));
            let at = if immediate {
                now
            } else if nack_mode {
                now + config.recovery.ack_every_ns
            } else {
                now + config.max_ack_delay_ns
            };
            let deadline = self.received.ack_deadline.map_or(at, |d| d.min(at));
            self.received.ack_deadline = Some(deadline);
        }
    }

    /// Keep-alive counts from the last packet heard or the last ack-eliciting one sent.
    fn last_activity(&self) -> u64 {
        self.last_received.max(self.last_eliciting_sent)
    }

    // ---- timers -----------------------------------------------------------------------

    pub(crate) fn poll_timeout(&self, config: &Config) -> Option<u64> {
        let mut at: Option<u64> = None;
        let mut consider = |t: Option<u64>| {
            if let Some(t) = t {
                at = Some(at.map_or(t, |a| a.min(t)));
            }
        };
        match self.state {
            State::Drained => return None,
            State::Closing { .. } => return None,
            State::Hello | State::Cookie { .. } => {
                consider(self.handshake_at);
                consider(Some(self.started + config.idle_timeout_ns));
                return at;
            }
            State::Established => {}
        }
        consider(self.rto_deadline(config));
        consider(self.rack_timer);
        consider(self.received.ack_deadline);
        consider(self.expiries.first().map(|&(t, _, _)| t));
        consider(self.duplicates.first().map(|&(t, _, _)| t));
        consider(self.next_nack_at(config));
        consider(Some(self.last_received + config.idle_timeout_ns));
        if !self.ping_due {
            consider(Some(self.last_activity() + config.keep_alive_ns));
        }
        at
    }

    pub(crate) fn handle_timeout(&mut self, now: u64, config: &Config) {
        match self.state {
            State::Drained | State::Closing { .. } => return,
            State::Hello | State::Cookie { .. } => {
                if now >= self.started + config.idle_timeout_ns {
                    self.drain(CloseReason::HandshakeTimeout);
                }
                return;
            }
            State::Established => {}
        }
        if now >= self.last_received + config.idle_timeout_ns {
            self.drain(CloseReason::IdleTimeout);
            return;
        }
        if self.rto_deadline(config).is_some_and(|t| t <= now) {
            self.on_rto(now, config);
            self.announce_after_silence();
        }
        if self.rack_timer.is_some_and(|t| t <= now) {
            self.detect_losses(now, config);
        }
        while let Some(&(at, channel, number)) = self.expiries.first() {
            if at > now {
                break;
            }
            self.expiries.pop_first();
            if let Some(message) = self.outgoing.get_mut(&(channel, number)) {
                message.expired = true;
                self.expire_if_lost(channel, number);
            }
        }
        while let Some(&(at, channel, number)) = self.duplicates.first() {
            if at > now {
                break;
            }
            self.duplicates.pop_first();
            let Some(message) = self.outgoing.get(&(channel, number)) else {
                continue;
            };
            for fragment in 0..message.fragments {
                let key = FragKey {
                    channel,
                    message: number,
                    fragment,
                };
                self.queue_copy(key);
            }
            self.stats.duplicated_messages += 1;
        }
        if now >= self.last_activity() + config.keep_alive_ns {
            self.ping_due = true;
        }
    }
}

mod ack;
mod feedback;
mod path;
mod recovery;
mod transmit;
mod xor;
