//! The frames of a transport packet: their types, bodies, parser and emitter.
//!
//! | type | frame         | body after the type byte (size: field)                                   |
//! |-----:|---------------|---------------------------------------------------------------------------|
//! | 1    | `Hello`       | 2: padding length n, n: zero bytes                                        |
//! | 2    | `Challenge`   | 4: epoch, 8: mac                                                          |
//! | 3    | `HelloCookie` | 4: epoch, 8: mac (echoed from the `Challenge`)                            |
//! | 4    | `Accept`      | (none)                                                                    |
//! | 5    | `Ack`         | 8: largest, 4: ack delay µs, 1: ranges k (1..=8), 4: first range length, then k−1 × (4: gap, 4: length) |
//! | 6    | `Data`        | 1: channel, 1: kind, 4: message, 2: fragment index, 2: fragment count, 2: length n, n: payload |
//! | 7    | `Ping`        | (none)                                                                    |
//! | 8    | `Close`       | 2: code                                                                   |
//! | 9    | `Expired`     | 1: channel, 4: message                                                    |
//! | 10   | `Nack`        | 1: channel, 4: first message, 1: count (≥ 1)                              |
//! | 11   | `ShortId`     | 4: the connection's short id (only after `Accept`, in version 2's handshake) |
//! | 12   | `Xor`         | two messages XORed, a blind copy that is a third chance for the older (see `xor.rs`) |
//!
//! An ACK range covers packet numbers `smallest..=largest`; the first range ends at `largest`
//! and is `length` long below it (`smallest = largest − length`); each next range lies `gap`
//! (≥ 1) missing packet numbers below the previous one's smallest and is `length` long.

use super::xor;
use crate::{Error, Result};

/// Most ranges an ACK frame carries.
pub const MAX_ACK_RANGES: usize = 8;

pub(crate) const CHALLENGE_LEN: usize = 13;
pub(crate) const ACCEPT_LEN: usize = 1;
pub(crate) const SHORT_ID_LEN: usize = 5;
pub(crate) const DATA_HEADER_LEN: usize = 13;
const NACK_LEN: usize = 7;

/// The type byte of a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum FrameType {
    /// Client → server, first packet: "I want to connect".
    Hello = 1,
    /// Server → client: a stateless cookie bound to the client's address.
    Challenge = 2,
    /// Client → server: the cookie echoed.
    HelloCookie = 3,
    /// Server → client: the connection exists.
    Accept = 4,
    /// Selective acknowledgement.
    Ack = 5,
    /// A message or a fragment of one.
    Data = 6,
    /// Keep-alive; asks for an ACK.
    Ping = 7,
    /// The sender closes the connection.
    Close = 8,
    /// The sender dropped a deadline message that was out of time.
    Expired = 9,
    /// The receiver misses messages: send them again.
    Nack = 10,
    /// Server → client, beside `Accept` in version 2: the short id that names the
    /// connection when the client's address changes.
    ShortId = 11,
    /// Two whole messages of a reliable channel XORed: a blind copy of the newer that is a
    /// third chance for the older.
    Xor = 12,
}

impl FrameType {
    /// The type a byte names, `None` if unknown.
    pub const fn from_u8(value: u8) -> Option<FrameType> {
        Some(match value {
            1 => FrameType::Hello,
            2 => FrameType::Challenge,
            3 => FrameType::HelloCookie,
            4 => FrameType::Accept,
            5 => FrameType::Ack,
            6 => FrameType::Data,
            7 => FrameType::Ping,
            8 => FrameType::Close,
            9 => FrameType::Expired,
            10 => FrameType::Nack,
            11 => FrameType::ShortId,
            12 => FrameType::Xor,
            _ => return None,
        })
    }
}

/// The delivery semantics of a channel, carried in each `Data` frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ChannelKind {
    /// Every message arrives, in the order sent.
    ReliableOrdered = 1,
    /// Every message arrives, as soon as it is whole.
    ReliableUnordered = 2,
    /// Sent once; may be lost.
    Unreliable = 3,
    /// Sent once; only a message newer than every one delivered before is delivered.
    Sequenced = 4,
    /// Reliable until the message is older than its deadline, then dropped.
    Deadline = 5,
}

impl ChannelKind {
    /// The kind a byte names, `None` if unknown.
    pub const fn from_u8(value: u8) -> Option<ChannelKind> {
        Some(match value {
            1 => ChannelKind::ReliableOrdered,
            2 => ChannelKind::ReliableUnordered,
            3 => ChannelKind::Unreliable,
            4 => ChannelKind::Sequenced,
            5 => ChannelKind::Deadline,
            _ => return None,
        })
    }

    /// Whether lost messages of this kind are sent again.
    pub const fn is_reliable(self) -> bool {
        !matches!(self, ChannelKind::Unreliable | ChannelKind::Sequenced)
    }
}

/// Up to [`MAX_ACK_RANGES`] ranges of packet numbers, highest first, separated by at least
/// one missing packet number. No allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct AckRanges {
    /// `(smallest, largest)`, inclusive; only the first `len` are used.
    ranges: [(u64, u64); MAX_ACK_RANGES],
    len: u8,
}

impl Default for AckRanges {
    fn default() -> Self {
        AckRanges::new()
    }
}

impl AckRanges {
    /// No range.
    pub const fn new() -> AckRanges {
        AckRanges {
            ranges: [(0, 0); MAX_ACK_RANGES],
            len: 0,
        }
    }

    /// Appends `smallest..=largest` below the ranges held: false (and nothing changes) if it is
    /// full, if `smallest > largest`, or if the range does not lie at least one packet number
    /// below the last one.
    pub fn push(&mut self, smallest: u64, largest: u64) -> bool {
        if usize::from(self.len) == MAX_ACK_RANGES || smallest > largest {
            return false;
        }
        if let Some(&(prev_smallest, _)) = self.as_slice().last() {
            if largest
                .checked_add(1)
                .is_none_or(|next| next >= prev_smallest)
            {
                return false;
            }
        }
        self.ranges[usize::from(self.len)] = (smallest, largest);
        self.len += 1;
        true
    }

    /// Appends the range an ACK frame encodes as a `gap` of missing numbers (at least one, the
    /// encoded value being one less) below the last range held and the `len` numbers below its
    /// top: a malformed frame if there is no range yet, the gap is 0, the range would go below
    /// 0, or [`AckRanges::push`] refuses it.
    pub(crate) fn push_gap(&mut self, gap: u64, len: u64) -> Result<()> {
        let &(smallest, _) = self.as_slice().last().ok_or(Error::Malformed)?;
        if gap == 0 {
            return Err(Error::Malformed);
        }
        let hi = gap
            .checked_add(1)
            .and_then(|below| smallest.checked_sub(below))
            .ok_or(Error::Malformed)?;
        let lo = hi.checked_sub(len).ok_or(Error::Malformed)?;
        if !self.push(lo, hi) {
            return Err(Error::Malformed);
        }
        Ok(())
    }

    /// The ranges, highest first.
    pub fn as_slice(&self) -> &[(u64, u64)] {
        &self.ranges[..usize::from(self.len)]
    }

    /// The largest packet number acknowledged, `None` if empty.
    pub fn largest(&self) -> Option<u64> {
        self.as_slice().first().map(|&(_, largest)| largest)
    }

    /// Whether `packet_number` is in a range.
    pub fn contains(&self, packet_number: u64) -> bool {
        self.as_slice()
            .iter()
            .any(|&(lo, hi)| (lo..=hi).contains(&packet_number))
    }

    /// Number of ranges.
    pub fn len(&self) -> usize {
        usize::from(self.len)
    }

    /// Whether there is no range.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One frame, parsed (borrowing its payload from the packet) or about to be emitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Frame<'a> {
    /// Client's first packet, padded with `padding` zero bytes.
    Hello {
        /// Number of zero bytes after the length field.
        padding: u16,
    },
    /// The server's stateless cookie.
    Challenge {
        /// The server's time epoch the cookie was made in.
        epoch: u32,
        /// Keyed hash over the client's address, connection id and epoch.
        mac: u64,
    },
    /// The client echoes the cookie.
    HelloCookie {
        /// Echoed epoch.
        epoch: u32,
        /// Echoed mac.
        mac: u64,
    },
    /// The server accepted the connection.
    Accept,
    /// Selective acknowledgement.
    Ack {
        /// Time between receiving the largest packet acknowledged and sending this ACK (µs).
        delay_us: u32,
        /// The packet numbers received (not empty).
        ranges: AckRanges,
    },
    /// A message, or fragment `fragment` of `fragments` of one.
    Data {
        /// Channel id.
        channel: u8,
        /// The channel's kind.
        kind: ChannelKind,
        /// Message number within the channel.
        message: u32,
        /// Fragment index, `< fragments`.
        fragment: u16,
        /// Fragment count, ≥ 1.
        fragments: u16,
        /// The bytes of this fragment.
        payload: &'a [u8],
    },
    /// Keep-alive.
    Ping,
    /// Connection closed by the sender.
    Close {
        /// Application's reason.
        code: u16,
    },
    /// Message `message` of deadline channel `channel` was dropped by its sender.
    Expired {
        /// Channel id.
        channel: u8,
        /// Message number.
        message: u32,
    },
    /// The receiver misses messages `first..first + count` of `channel` (those the sender
    /// still holds go again, within its budget).
    Nack {
        /// Channel id.
        channel: u8,
        /// The first message missing.
        first: u32,
        /// How many from `first` (≥ 1).
        count: u8,
    },
    /// The short id the server gave a compact connection (version 2's `Accept` packet).
    ShortId {
        /// The id, carried in a short header whose client's address changed.
        id: u32,
    },
    /// Whole messages `message` and `message − back` of reliable `channel`, XORed: whoever
    /// has one recovers the other.
    Xor {
        /// Channel id.
        channel: u8,
        /// The channel's kind (a reliable one).
        kind: ChannelKind,
        /// The newer message.
        message: u32,
        /// How far back the older one is (1..=`message`).
        back: u8,
        /// The newer message's length.
        len: u16,
        /// The older message's length.
        older_len: u16,
        /// The two payloads XORed, the shorter padded with zeros: the longer's length.
        payload: &'a [u8],
    },
}

/// Reads `N` bytes at `at`, or [`Error::Truncated`].
fn take<const N: usize>(bytes: &[u8], at: usize) -> Result<[u8; N]> {
    let slice = bytes.get(at..at + N).ok_or(Error::Truncated)?;
    let mut out = [0u8; N];
    out.copy_from_slice(slice);
    Ok(out)
}

impl<'a> Frame<'a> {
    /// The frame's type.
    pub fn frame_type(&self) -> FrameType {
        match self {
            Frame::Hello { .. } => FrameType::Hello,
            Frame::Challenge { .. } => FrameType::Challenge,
            Frame::HelloCookie { .. } => FrameType::HelloCookie,
            Frame::Accept => FrameType::Accept,
            Frame::Ack { .. } => FrameType::Ack,
            Frame::Data { .. } => FrameType::Data,
            Frame::Ping => FrameType::Ping,
            Frame::Close { .. } => FrameType::Close,
            Frame::Expired { .. } => FrameType::Expired,
            Frame::Nack { .. } => FrameType::Nack,
            Frame::ShortId { .. } => FrameType::ShortId,
            Frame::Xor { .. } => FrameType::Xor,
        }
    }

    /// Parses the frame at the start of `bytes`: the frame and its length. Errors:
    /// [`Error::Truncated`] (cut short), [`Error::Malformed`] (unknown type or kind, nonzero
    /// padding, a fragment index not below the count, a NACK of no message, ACK ranges that overlap, underflow or
    /// number 0 or more than [`MAX_ACK_RANGES`]).
    pub fn parse(bytes: &'a [u8]) -> Result<(Frame<'a>, usize)> {
        let ty = *bytes.first().ok_or(Error::Truncated)?;
        let ty = FrameType::from_u8(ty).ok_or(Error::Malformed)?;
        let u16_at = |at| take::<2>(bytes, at).map(u16::from_be_bytes);
        let u32_at = |at| take::<4>(bytes, at).map(u32::from_be_bytes);
        let u64_at = |at| take::<8>(bytes, at).map(u64::from_be_bytes);
        Ok(match ty {
            FrameType::Hello => {
                let padding = u16_at(1)?;
                let end = 3 + usize::from(padding);
                let pad = bytes.get(3..end).ok_or(Error::Truncated)?;
                if pad.iter().any(|&b| b != 0) {
                    return Err(Error::Malformed);
                }
                (Frame::Hello { padding }, end)
            }
            FrameType::Challenge | FrameType::HelloCookie => {
                let (epoch, mac) = (u32_at(1)?, u64_at(5)?);
                let frame = if ty == FrameType::Challenge {
                    Frame::Challenge { epoch, mac }
                } else {
                    Frame::HelloCookie { epoch, mac }
                };
                (frame, CHALLENGE_LEN)
            }
            FrameType::Accept => (Frame::Accept, ACCEPT_LEN),
            FrameType::Ack => Self::parse_ack(bytes)?,
            FrameType::Data => {
                let kind = ChannelKind::from_u8(take::<1>(bytes, 2)?[0]).ok_or(Error::Malformed)?;
                let (fragment, fragments) = (u16_at(7)?, u16_at(9)?);
                if fragment >= fragments {
                    return Err(Error::Malformed);
                }
                let end = DATA_HEADER_LEN + usize::from(u16_at(11)?);
                let frame = Frame::Data {
                    channel: bytes[1],
                    kind,
                    message: u32_at(3)?,
                    fragment,
                    fragments,
                    payload: bytes.get(DATA_HEADER_LEN..end).ok_or(Error::Truncated)?,
                };
                (frame, end)
            }
            FrameType::Ping => (Frame::Ping, 1),
            FrameType::Close => (Frame::Close { code: u16_at(1)? }, 3),
            FrameType::Expired => {
                let message = u32_at(2)?;
                let frame = Frame::Expired {
                    channel: bytes[1],
                    message,
                };
                (frame, 6)
            }
            FrameType::Nack => {
                let (first, count) = (u32_at(2)?, take::<1>(bytes, 6)?[0]);
                if count == 0 {
                    return Err(Error::Malformed);
                }
                let channel = bytes[1];
                (
                    Frame::Nack {
                        channel,
                        first,
                        count,
                    },
                    NACK_LEN,
                )
            }
            FrameType::ShortId => (Frame::ShortId { id: u32_at(1)? }, SHORT_ID_LEN),
            FrameType::Xor => xor::parse(bytes)?,
        })
    }

    fn parse_ack(bytes: &'a [u8]) -> Result<(Frame<'a>, usize)> {
        let u32_at = |at| take::<4>(bytes, at).map(u32::from_be_bytes);
        let largest = u64::from_be_bytes(take::<8>(bytes, 1)?);
        let delay_us = u32_at(9)?;
        let count = usize::from(take::<1>(bytes, 13)?[0]);
        if count == 0 || count > MAX_ACK_RANGES {
            return Err(Error::Malformed);
        }
        let mut ranges = AckRanges::new();
        let first = u64::from(u32_at(14)?);
        let smallest = largest.checked_sub(first).ok_or(Error::Malformed)?;
        ranges.push(smallest, largest);
        let mut at = 18;
        for _ in 1..count {
            let (gap, len) = (u64::from(u32_at(at)?), u64::from(u32_at(at + 4)?));
            at += 8;
            ranges.push_gap(gap, len)?;
        }
        Ok((Frame::Ack { delay_us, ranges }, at))
    }

    /// Length of the frame on the wire.
    pub fn buffer_len(&self) -> usize {
        match self {
            Frame::Hello { padding } => 3 + usize::from(*padding),
            Frame::Challenge { .. } | Frame::HelloCookie { .. } => CHALLENGE_LEN,
            Frame::Accept | Frame::Ping => 1,
            Frame::Ack { ranges, .. } => Self::ack_len(ranges.len()),
            Frame::Data { payload, .. } => DATA_HEADER_LEN + payload.len(),
            Frame::Close { .. } => 3,
            Frame::Expired { .. } => 6,
            Frame::Nack { .. } => NACK_LEN,
            Frame::ShortId { .. } => SHORT_ID_LEN,
            Frame::Xor { .. } => xor::len(self),
        }
    }

    /// Length of an ACK frame with `ranges` ranges (1..=[`MAX_ACK_RANGES`]).
    pub const fn ack_len(ranges: usize) -> usize {
        18 + 8 * ranges.saturating_sub(1)
    }

    /// Length of a `Data` frame carrying `payload_len` bytes.
    pub const fn data_len(payload_len: usize) -> usize {
        DATA_HEADER_LEN + payload_len
    }

    /// Writes the frame at the start of `buf` and returns its length.
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than [`Frame::buffer_len`], if an ACK has no range or a range
    /// length or gap that does not fit in 32 bits, or a `Data` payload is longer than 65 535
    /// bytes: programming errors, not input errors.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let len = self.buffer_len();
        let buf = &mut buf[..len];
        buf[0] = self.frame_type() as u8;
        match *self {
            Frame::Hello { padding } => {
                buf[1..3].copy_from_slice(&padding.to_be_bytes());
                buf[3..].fill(0);
            }
            Frame::Challenge { epoch, mac } | Frame::HelloCookie { epoch, mac } => {
                buf[1..5].copy_from_slice(&epoch.to_be_bytes());
                buf[5..13].copy_from_slice(&mac.to_be_bytes());
            }
            Frame::Accept | Frame::Ping => {}
            Frame::Ack { delay_us, ranges } => {
                let list = ranges.as_slice();
                let (first_lo, largest) = list[0];
                buf[1..9].copy_from_slice(&largest.to_be_bytes());
                buf[9..13].copy_from_slice(&delay_us.to_be_bytes());
                buf[13] = list.len() as u8;
                let narrow = |v: u64| u32::try_from(v).expect("ACK range or gap fits in 32 bits");
                buf[14..18].copy_from_slice(&narrow(largest - first_lo).to_be_bytes());
                let mut at = 18;
                for pair in list.windows(2) {
                    let ((prev_lo, _), (lo, hi)) = (pair[0], pair[1]);
                    buf[at..at + 4].copy_from_slice(&narrow(prev_lo - hi - 1).to_be_bytes());
                    buf[at + 4..at + 8].copy_from_slice(&narrow(hi - lo).to_be_bytes());
                    at += 8;
                }
            }
            Frame::Data {
                channel,
                kind,
                message,
                fragment,
                fragments,
                payload,
            } => {
                buf[1] = channel;
                buf[2] = kind as u8;
                buf[3..7].copy_from_slice(&message.to_be_bytes());
                buf[7..9].copy_from_slice(&fragment.to_be_bytes());
                buf[9..11].copy_from_slice(&fragments.to_be_bytes());
                let n = u16::try_from(payload.len()).expect("Data payload fits in 16 bits");
                buf[11..13].copy_from_slice(&n.to_be_bytes());
                buf[13..].copy_from_slice(payload);
            }
            Frame::Close { code } => buf[1..3].copy_from_slice(&code.to_be_bytes()),
            Frame::Expired { channel, message } => {
                buf[1] = channel;
                buf[2..6].copy_from_slice(&message.to_be_bytes());
            }
            Frame::Nack {
                channel,
                first,
                count,
            } => {
                assert!(count > 0, "a NACK names at least one message");
                buf[1] = channel;
                buf[2..6].copy_from_slice(&first.to_be_bytes());
                buf[6] = count;
            }
            Frame::ShortId { id } => buf[1..5].copy_from_slice(&id.to_be_bytes()),
            Frame::Xor { .. } => xor::emit(self, buf),
        }
        len
    }
}

/// Iterator over the frames of a packet payload. After the first error it yields that error
/// and stops.
#[derive(Debug, Clone)]
pub struct Frames<'a> {
    rest: &'a [u8],
    failed: bool,
    /// How one frame is read: [`Frame::parse`], or [`Frame::parse_compact`] for version 2's
    /// short packets ([`Frames::compact`]).
    parse: fn(&'a [u8]) -> Result<(Frame<'a>, usize)>,
}

impl<'a> Frames<'a> {
    /// Frames of `payload` (the bytes after the header).
    pub fn new(payload: &'a [u8]) -> Frames<'a> {
        Frames::with(payload, Frame::parse)
    }

    /// Frames of `payload` read by `parse`.
    pub(super) fn with(
        payload: &'a [u8],
        parse: fn(&'a [u8]) -> Result<(Frame<'a>, usize)>,
    ) -> Frames<'a> {
        Frames {
            rest: payload,
            failed: false,
            parse,
        }
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.rest.is_empty() || self.failed {
            return None;
        }
        match (self.parse)(self.rest) {
            Ok((frame, len)) => {
                self.rest = &self.rest[len..];
                Some(Ok(frame))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
