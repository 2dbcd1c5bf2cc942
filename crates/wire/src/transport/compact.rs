//! The compact format of latlab's transport (version [`VERSION_COMPACT`]), negotiated in the
//! handshake beside the 20-byte format of version 1.
//!
//! The handshake keeps the long header of [`super::Packet`] with its version byte set to
//! [`VERSION_COMPACT`] (a server that does not speak it drops such a `Hello`, and the client
//! falls back to version 1); the server's `Accept` packet carries a `ShortId` frame after the
//! `Accept`: 4 bytes that name the connection should the client's address change. Once a
//! connection is established every packet has the *short header*: no magic and no connection
//! id (the UDP 4-tuple names the connection), and the packet number truncated to 1–4 bytes,
//! decoded against the highest one received ([`decode_packet_number`], RFC 9000's appendix
//! A.3):
//!
//! | offset | size | field                                                               |
//! |-------:|-----:|---------------------------------------------------------------------|
//! | 0      | 1    | `1 I 0 0 0 A L L`: bit 7 set (a long header's first byte is `'L'`, bit 7 clear), I [`SHORT_HAS_ID`], A [`SHORT_ACK_IMMEDIATELY`], LL packet-number length − 1 |
//! | 1      | 4    | only with I: the connection's short id (from the `ShortId` frame)    |
//! | 1 or 5 | 1–4  | the packet number's low bytes                                       |
//!
//! A client whose address changed (a new socket, a NAT rebinding it was told of) sets I and
//! sends the short id until the server acknowledges a packet sent since: the server finds the
//! connection by the id and moves it to the packet's address. The sender takes enough bytes of
//! packet number that *four times* its distance above the largest acknowledged fits
//! ([`packet_number_len`]), so a genuine number is never more than a quarter of its window
//! ([`max_jump`]) above the highest received, and a receiver refuses any that is.
//!
//! Frames follow, with integers as QUIC's variable-length integers ([`varint`]: 1, 2, 4 or 8
//! bytes, the shortest form only):
//!
//! | type          | frame      | body                                                        |
//! |--------------:|------------|-------------------------------------------------------------|
//! | 5             | `Ack`      | v: largest, v: delay µs, 1: ranges k (1..=8), v: first range length, then k−1 × (v: gap, v: length) |
//! | 6             | `Data`     | as version 1, for fragments of a message in two or more (count ≥ 2) |
//! | `0x20 + kind` | `Data`     | a whole message: 1: channel, v: message, v: length n, n: payload |
//! | 7, 8          | `Ping`, `Close` | as version 1                                           |
//! | 9             | `Expired`  | 1: channel, v: message                                      |
//! | 10            | `Nack`     | 1: channel, v: first message, 1: count (≥ 1)                |
//! | `0x30 + kind` | `Xor`      | 1: channel, v: message, 1: back, v: length, v: older length, payload ([`super::xor`]) |
//!
//! A whole 100-byte message thus costs 2 bytes of header (while fewer than 64 packets are
//! unacknowledged) and 6 of frame, against 20 and 13 in version 1. Parsing never panics and the
//! format is canonical (the shortest varints, a whole message always in the short `Data`
//! form), so a parsed frame re-emits to the bytes it came from.

use super::frame::{ChannelKind, Frame, FrameType, Frames, DATA_HEADER_LEN};
use super::xor;
use super::{AckRanges, MAX_ACK_RANGES};
use crate::{Error, Result};

/// The version byte of a compact connection's handshake packets.
pub const VERSION_COMPACT: u8 = 2;
/// Short header flag: the receiver should acknowledge at once.
pub const SHORT_ACK_IMMEDIATELY: u8 = 0x04;
/// Short header flag: the connection's 4-byte short id follows the first byte.
pub const SHORT_HAS_ID: u8 = 0x40;
/// Bits of a short header's first byte that must be 0.
const SHORT_RESERVED: u8 = 0x38;
/// Bit 7 of the first byte: a short header (a long header starts with `'L'`).
pub const SHORT_FORM: u8 = 0x80;
/// Longest short header (with a short id and 4 bytes of packet number).
pub const MAX_SHORT_HEADER_LEN: usize = 9;

/// Type byte of a whole message's `Data` frame: this plus its channel kind.
const SHORT_DATA: u8 = 0x20;

/// Whether `bytes` start with a short header (the first byte's bit 7).
pub fn is_short(bytes: &[u8]) -> bool {
    bytes.first().is_some_and(|b| b & SHORT_FORM != 0)
}

/// QUIC's variable-length integers (RFC 9000 section 16), shortest form only.
pub mod varint {
    use crate::{Error, Result};

    /// Largest value a varint holds (2^62 − 1).
    pub const MAX: u64 = (1 << 62) - 1;

    /// Bytes the shortest encoding of `value` takes.
    pub const fn len(value: u64) -> usize {
        if value < 1 << 6 {
            1
        } else if value < 1 << 14 {
            2
        } else if value < 1 << 30 {
            4
        } else {
            8
        }
    }

    /// Reads the varint at `at`: its value and the offset after it. A longer form than
    /// needed is [`Error::Malformed`].
    pub fn read(bytes: &[u8], at: usize) -> Result<(u64, usize)> {
        let first = *bytes.get(at).ok_or(Error::Truncated)?;
        let n = 1usize << (first >> 6);
        let raw = bytes.get(at..at + n).ok_or(Error::Truncated)?;
        let mut value = u64::from(first & 0x3f);
        for &b in &raw[1..] {
            value = value << 8 | u64::from(b);
        }
        if len(value) != n {
            return Err(Error::Malformed);
        }
        Ok((value, at + n))
    }

    /// Writes `value` at `at` in its shortest form; returns the offset after it.
    ///
    /// # Panics
    ///
    /// If `value` is above [`MAX`] or the buffer is too short: programming errors.
    pub fn write(buf: &mut [u8], at: usize, value: u64) -> usize {
        assert!(value <= MAX, "varint {value} above 2^62 − 1");
        let n = len(value);
        let code = n.trailing_zeros() as u8;
        for i in 0..n {
            buf[at + i] = (value >> (8 * (n - 1 - i))) as u8;
        }
        buf[at] |= code << 6;
        at + n
    }
}

/// Bytes of the truncated packet number for `packet_number` when the peer has acknowledged
/// up to `largest_acked` (`None`: nothing yet): enough that four times the distance fits
/// (RFC 9000 asks for twice; the other half is the receiver's margin, [`max_jump`]).
pub fn packet_number_len(packet_number: u64, largest_acked: Option<u64>) -> usize {
    let unacked = match largest_acked {
        Some(acked) => packet_number.saturating_sub(acked),
        None => packet_number.saturating_add(1),
    };
    let range = unacked.saturating_mul(4);
    match range {
        r if r < 1 << 8 => 1,
        r if r < 1 << 16 => 2,
        r if r < 1 << 24 => 3,
        _ => 4,
    }
}

/// Furthest a genuine packet number sent in `len` bytes lies above the highest the receiver
/// has (a quarter of the window, since the sender's largest acknowledged is at most that
/// highest): one further is forged, corrupted or stale, and refused. A forged number within
/// it shifts the decoding by less than a quarter window, so the next genuine packets of the
/// same length still decode to their own numbers.
pub const fn max_jump(len: usize) -> u64 {
    1u64 << (8 * len as u32 - 2)
}

/// The full packet number a truncated one of `len` bytes stands for, the closest to one past
/// `largest` (the highest received; `None` before any): RFC 9000, appendix A.3.
pub fn decode_packet_number(truncated: u64, len: usize, largest: Option<u64>) -> u64 {
    let expected = largest.map_or(0, |l| l.saturating_add(1));
    let win = 1u64 << (8 * len as u32);
    let half = win / 2;
    let mask = win - 1;
    let candidate = (expected & !mask) | (truncated & mask);
    if candidate.saturating_add(half) <= expected && candidate < u64::MAX - win {
        candidate + win
    } else if candidate > expected.saturating_add(half) && candidate >= win {
        candidate - win
    } else {
        candidate
    }
}

/// A short header: flags, the short id while the client announces a new address, and the
/// packet number's low bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShortHeader {
    /// Ask the receiver for an immediate ACK.
    pub ack_immediately: bool,
    /// The connection's short id ([`SHORT_HAS_ID`]): the client's address changed.
    pub short_id: Option<u32>,
    /// Bytes of packet number on the wire, 1..=4.
    pub pn_len: usize,
    /// The packet number's low `pn_len` bytes.
    pub truncated: u32,
}

impl ShortHeader {
    /// The header of `packet_number` sent with `largest_acked` acknowledged by the peer, with
    /// no short id.
    pub fn new(ack_immediately: bool, packet_number: u64, largest_acked: Option<u64>) -> Self {
        let pn_len = packet_number_len(packet_number, largest_acked);
        let mask = (1u64 << (8 * pn_len)) - 1;
        ShortHeader {
            ack_immediately,
            short_id: None,
            pn_len,
            truncated: (packet_number & mask) as u32,
        }
    }

    /// Parses the header at the start of `bytes`: it and its length. Errors: not a short
    /// header or reserved bits set ([`Error::Malformed`]), too short ([`Error::Truncated`]).
    pub fn parse(bytes: &[u8]) -> Result<(ShortHeader, usize)> {
        let first = *bytes.first().ok_or(Error::Truncated)?;
        if first & SHORT_FORM == 0 || first & SHORT_RESERVED != 0 {
            return Err(Error::Malformed);
        }
        let be = |raw: &[u8]| raw.iter().fold(0u32, |v, &b| v << 8 | u32::from(b));
        let (short_id, at) = if first & SHORT_HAS_ID != 0 {
            (Some(be(bytes.get(1..5).ok_or(Error::Truncated)?)), 5)
        } else {
            (None, 1)
        };
        let pn_len = usize::from(first & 0x03) + 1;
        let raw = bytes.get(at..at + pn_len).ok_or(Error::Truncated)?;
        let header = ShortHeader {
            ack_immediately: first & SHORT_ACK_IMMEDIATELY != 0,
            short_id,
            pn_len,
            truncated: be(raw),
        };
        Ok((header, at + pn_len))
    }

    /// Header length.
    pub const fn buffer_len(&self) -> usize {
        let id = if self.short_id.is_some() { 4 } else { 0 };
        1 + id + self.pn_len
    }

    /// Writes the header; returns its length. Panics if `buf` is shorter.
    pub fn emit(&self, buf: &mut [u8]) -> usize {
        let flag = if self.ack_immediately {
            SHORT_ACK_IMMEDIATELY
        } else {
            0
        };
        buf[0] = SHORT_FORM | flag | (self.pn_len as u8 - 1);
        let mut at = 1;
        if let Some(id) = self.short_id {
            buf[0] |= SHORT_HAS_ID;
            buf[1..5].copy_from_slice(&id.to_be_bytes());
            at = 5;
        }
        for i in 0..self.pn_len {
            buf[at + i] = (self.truncated >> (8 * (self.pn_len - 1 - i))) as u8;
        }
        at + self.pn_len
    }
}

fn byte(bytes: &[u8], at: usize) -> Result<u8> {
    bytes.get(at).copied().ok_or(Error::Truncated)
}

fn u32_varint(bytes: &[u8], at: usize) -> Result<(u32, usize)> {
    let (v, at) = varint::read(bytes, at)?;
    Ok((u32::try_from(v).map_err(|_| Error::Malformed)?, at))
}

impl<'a> Frame<'a> {
    /// Parses the compact frame at the start of `bytes`: the frame and its length. Errors as
    /// [`Frame::parse`], and [`Error::Malformed`] for a handshake frame, a longer varint than
    /// needed, or a whole message in the fragment form.
    pub fn parse_compact(bytes: &'a [u8]) -> Result<(Frame<'a>, usize)> {
        let ty = byte(bytes, 0)?;
        if ty & 0xf0 == SHORT_DATA {
            let kind = ChannelKind::from_u8(ty & 0x0f).ok_or(Error::Malformed)?;
            let channel = byte(bytes, 1)?;
            let (message, at) = u32_varint(bytes, 2)?;
            let (len, at) = varint::read(bytes, at)?;
            let end = usize::try_from(len)
                .ok()
                .and_then(|n| at.checked_add(n))
                .ok_or(Error::Malformed)?;
            if len > u64::from(u16::MAX) {
                return Err(Error::Malformed);
            }
            let payload = bytes.get(at..end).ok_or(Error::Truncated)?;
            let frame = Frame::Data {
                channel,
                kind,
                message,
                fragment: 0,
                fragments: 1,
                payload,
            };
            return Ok((frame, end));
        }
        if ty & 0xf0 == xor::SHORT_XOR {
            return xor::parse_compact(bytes);
        }
        match FrameType::from_u8(ty).ok_or(Error::Malformed)? {
            FrameType::Hello
            | FrameType::Challenge
            | FrameType::HelloCookie
            | FrameType::Accept
            | FrameType::ShortId => Err(Error::Malformed),
            FrameType::Data => {
                let (frame, len) = Frame::parse(bytes)?;
                match frame {
                    Frame::Data { fragments, .. } if fragments >= 2 => Ok((frame, len)),
                    _ => Err(Error::Malformed),
                }
            }
            FrameType::Ping | FrameType::Close => Frame::parse(bytes),
            FrameType::Expired => {
                let channel = byte(bytes, 1)?;
                let (message, at) = u32_varint(bytes, 2)?;
                Ok((Frame::Expired { channel, message }, at))
            }
            FrameType::Nack => {
                let channel = byte(bytes, 1)?;
                let (first, at) = u32_varint(bytes, 2)?;
                let count = byte(bytes, at)?;
                if count == 0 {
                    return Err(Error::Malformed);
                }
                Ok((
                    Frame::Nack {
                        channel,
                        first,
                        count,
                    },
                    at + 1,
                ))
            }
            FrameType::Ack => Self::parse_compact_ack(bytes),
            // Only in the kind-carrying form below.
            FrameType::Xor => Err(Error::Malformed),
        }
    }

    fn parse_compact_ack(bytes: &'a [u8]) -> Result<(Frame<'a>, usize)> {
        let (largest, at) = varint::read(bytes, 1)?;
        let (delay, at) = varint::read(bytes, at)?;
        let delay_us = u32::try_from(delay).map_err(|_| Error::Malformed)?;
        let count = usize::from(byte(bytes, at)?);
        if count == 0 || count > MAX_ACK_RANGES {
            return Err(Error::Malformed);
        }
        let (first, mut at) = varint::read(bytes, at + 1)?;
        let mut ranges = AckRanges::new();
        let smallest = largest.checked_sub(first).ok_or(Error::Malformed)?;
        ranges.push(smallest, largest);
        for _ in 1..count {
            let (gap, next) = varint::read(bytes, at)?;
            let (len, next) = varint::read(bytes, next)?;
            at = next;
            ranges.push_gap(gap, len)?;
        }
        Ok((Frame::Ack { delay_us, ranges }, at))
    }

    /// Length of the frame in the compact format.
    pub fn compact_len(&self) -> usize {
        let v = |x: u64| varint::len(x);
        match *self {
            Frame::Data {
                fragments: 1,
                message,
                payload,
                ..
            } => 2 + v(u64::from(message)) + v(payload.len() as u64) + payload.len(),
            Frame::Expired { message, .. } => 2 + v(u64::from(message)),
            Frame::Nack { first, .. } => 3 + v(u64::from(first)),
            Frame::Xor { .. } => xor::compact_len(self),
            Frame::Ack { delay_us, ranges } => {
                let list = ranges.as_slice();
                let (first_lo, largest) = list[0];
                let mut n = 2 + v(largest) + v(u64::from(delay_us)) + v(largest - first_lo);
                for pair in list.windows(2) {
                    let ((prev_lo, _), (lo, hi)) = (pair[0], pair[1]);
                    n += v(prev_lo - hi - 1) + v(hi - lo);
                }
                n
            }
            _ => self.buffer_len(),
        }
    }

    /// Writes the frame in the compact format at the start of `buf`; returns its length.
    ///
    /// # Panics
    ///
    /// If `buf` is shorter than [`Frame::compact_len`], for a handshake frame, an ACK without
    /// a range, or a payload longer than 65 535 bytes: programming errors.
    pub fn emit_compact(&self, buf: &mut [u8]) -> usize {
        let len = self.compact_len();
        let buf = &mut buf[..len];
        match *self {
            Frame::Hello { .. }
            | Frame::Challenge { .. }
            | Frame::HelloCookie { .. }
            | Frame::Accept
            | Frame::ShortId { .. } => panic!("handshake frames have no compact form"),
            Frame::Data {
                channel,
                kind,
                message,
                fragments: 1,
                payload,
                ..
            } => {
                assert!(
                    payload.len() <= usize::from(u16::MAX),
                    "payload fits 16 bits"
                );
                buf[0] = SHORT_DATA | kind as u8;
                buf[1] = channel;
                let at = varint::write(buf, 2, u64::from(message));
                let at = varint::write(buf, at, payload.len() as u64);
                buf[at..].copy_from_slice(payload);
            }
            Frame::Data { .. } | Frame::Ping | Frame::Close { .. } => {
                self.emit(buf);
            }
            Frame::Expired { channel, message } => {
                buf[0] = FrameType::Expired as u8;
                buf[1] = channel;
                varint::write(buf, 2, u64::from(message));
            }
            Frame::Nack {
                channel,
                first,
                count,
            } => {
                assert!(count > 0, "a NACK names at least one message");
                buf[0] = FrameType::Nack as u8;
                buf[1] = channel;
                let at = varint::write(buf, 2, u64::from(first));
                buf[at] = count;
            }
            Frame::Xor { .. } => xor::emit_compact(self, buf),
            Frame::Ack { delay_us, ranges } => {
                let list = ranges.as_slice();
                let (first_lo, largest) = list[0];
                buf[0] = FrameType::Ack as u8;
                let at = varint::write(buf, 1, largest);
                let at = varint::write(buf, at, u64::from(delay_us));
                buf[at] = list.len() as u8;
                let mut at = varint::write(buf, at + 1, largest - first_lo);
                for pair in list.windows(2) {
                    let ((prev_lo, _), (lo, hi)) = (pair[0], pair[1]);
                    at = varint::write(buf, at, prev_lo - hi - 1);
                    at = varint::write(buf, at, hi - lo);
                }
            }
        }
        len
    }
}

/// The classic `Data` frame's header length, for a caller sizing fragments.
pub const FRAGMENT_HEADER_LEN: usize = DATA_HEADER_LEN;

impl<'a> Frames<'a> {
    /// The compact frames of a short packet's payload (the bytes after the short header);
    /// after the first error the iterator yields that error and stops.
    pub fn compact(payload: &'a [u8]) -> Frames<'a> {
        Frames::with(payload, Frame::parse_compact)
    }
}

/// Parses a whole short packet: its header and every frame, so a packet with one bad frame is
/// refused whole. Calls `each` for each frame in order; the packet number is still truncated.
pub fn parse_short_packet<'a>(
    bytes: &'a [u8],
    mut each: impl FnMut(Frame<'a>),
) -> Result<ShortHeader> {
    let (header, len) = ShortHeader::parse(bytes)?;
    for frame in Frames::compact(&bytes[len..]) {
        frame?;
    }
    for frame in Frames::compact(&bytes[len..]).flatten() {
        each(frame);
    }
    Ok(header)
}

#[cfg(test)]
mod tests;
