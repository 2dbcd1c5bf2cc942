//! The `Xor` frame: two whole messages of one reliable channel in the room of one.
//!
//! A blind copy of message `n` that carries `n ⊕ (n − back)` instead of `n` alone costs the
//! same bytes (the longer payload, two lengths) and is a third chance for the older message: a
//! receiver that has either message recovers the other. Payloads are XORed byte by byte, the
//! shorter one padded with zeros.
//!
//! | version | type byte          | body                                                    |
//! |---------|--------------------|---------------------------------------------------------|
//! | 1       | 12                 | 1: channel, 1: kind, 4: message, 1: back (≥ 1), 2: length, 2: older length, max of the two: payload |
//! | 2       | [`SHORT_XOR`] + kind | 1: channel, v: message, 1: back (≥ 1), v: length, v: older length, max of the two: payload |
//!
//! In version 2 an XOR copy of two 100-byte messages costs 3 bytes more than a plain copy.
//!
//! The kind must be a reliable one, `back` at most `message`, and the lengths at most 65 535.

use super::compact::varint;
use super::frame::{ChannelKind, Frame};
use crate::{Error, Result};

/// Version 2's type byte of an `Xor` frame: this plus the channel kind.
pub const SHORT_XOR: u8 = 0x30;

/// Bytes before the payload in version 1.
pub(crate) const XOR_HEADER_LEN: usize = 12;

/// Writes `a ⊕ b` into `out` (`out.len()` is the longer of the two; the shorter is padded
/// with zeros).
pub fn xor_into(out: &mut [u8], a: &[u8], b: &[u8]) {
    for (i, byte) in out.iter_mut().enumerate() {
        *byte = a.get(i).copied().unwrap_or(0) ^ b.get(i).copied().unwrap_or(0);
    }
}

/// Recovers one message of an `Xor` frame from the other: `known` is the message the
/// receiver has, `want_len` the length of the one it lacks. `None` if `known`'s length is not
/// the one the frame names for it.
pub fn recover(payload: &[u8], known: &[u8], known_len: u16, want_len: u16) -> Option<Vec<u8>> {
    if known.len() != usize::from(known_len) {
        return None;
    }
    let mut out = vec![0u8; payload.len()];
    xor_into(&mut out, payload, known);
    out.truncate(usize::from(want_len));
    Some(out)
}

/// The checks both versions share: a reliable kind, an older message that exists, and a
/// payload as long as the longer message.
fn check(kind: ChannelKind, message: u32, back: u8, len: u64, older_len: u64) -> Result<usize> {
    if !kind.is_reliable() || back == 0 || u32::from(back) > message {
        return Err(Error::Malformed);
    }
    if len > u64::from(u16::MAX) || older_len > u64::from(u16::MAX) {
        return Err(Error::Malformed);
    }
    Ok(len.max(older_len) as usize)
}

fn kind_at(bytes: &[u8], at: usize) -> Result<ChannelKind> {
    let byte = *bytes.get(at).ok_or(Error::Truncated)?;
    ChannelKind::from_u8(byte).ok_or(Error::Malformed)
}

fn frame<'a>(
    bytes: &'a [u8],
    head: (u8, ChannelKind, u32, u8),
    lens: (u64, u64),
    at: usize,
) -> Result<(Frame<'a>, usize)> {
    let (channel, kind, message, back) = head;
    let n = check(kind, message, back, lens.0, lens.1)?;
    let end = at.checked_add(n).ok_or(Error::Malformed)?;
    let payload = bytes.get(at..end).ok_or(Error::Truncated)?;
    let frame = Frame::Xor {
        channel,
        kind,
        message,
        back,
        len: lens.0 as u16,
        older_len: lens.1 as u16,
        payload,
    };
    Ok((frame, end))
}

/// Parses a version 1 `Xor` frame (type byte included).
pub(crate) fn parse(bytes: &[u8]) -> Result<(Frame<'_>, usize)> {
    let head = bytes.get(..XOR_HEADER_LEN).ok_or(Error::Truncated)?;
    let kind = kind_at(head, 2)?;
    let message = u32::from_be_bytes([head[3], head[4], head[5], head[6]]);
    let len = u16::from_be_bytes([head[8], head[9]]);
    let older = u16::from_be_bytes([head[10], head[11]]);
    frame(
        bytes,
        (head[1], kind, message, head[7]),
        (u64::from(len), u64::from(older)),
        XOR_HEADER_LEN,
    )
}

/// Parses a version 2 `Xor` frame (type byte included).
pub(crate) fn parse_compact(bytes: &[u8]) -> Result<(Frame<'_>, usize)> {
    let ty = *bytes.first().ok_or(Error::Truncated)?;
    let kind = ChannelKind::from_u8(ty & 0x0f).ok_or(Error::Malformed)?;
    let channel = *bytes.get(1).ok_or(Error::Truncated)?;
    let (message, at) = varint::read(bytes, 2)?;
    let message = u32::try_from(message).map_err(|_| Error::Malformed)?;
    let back = *bytes.get(at).ok_or(Error::Truncated)?;
    let (len, at) = varint::read(bytes, at + 1)?;
    let (older, at) = varint::read(bytes, at)?;
    frame(bytes, (channel, kind, message, back), (len, older), at)
}

/// The fields of an `Xor` frame, for the emitters.
type Fields<'a> = (u8, ChannelKind, u32, u8, u16, u16, &'a [u8]);

fn fields<'a>(frame: &Frame<'a>) -> Fields<'a> {
    match *frame {
        Frame::Xor {
            channel,
            kind,
            message,
            back,
            len,
            older_len,
            payload,
        } => (channel, kind, message, back, len, older_len, payload),
        _ => unreachable!("only Xor frames come here"),
    }
}

/// Length of an `Xor` frame in version 1.
pub(crate) fn len(frame: &Frame<'_>) -> usize {
    XOR_HEADER_LEN + fields(frame).6.len()
}

/// Length of an `Xor` frame in version 2.
pub(crate) fn compact_len(frame: &Frame<'_>) -> usize {
    let (_, _, message, _, len, older, payload) = fields(frame);
    let v = varint::len;
    3 + v(u64::from(message)) + v(u64::from(len)) + v(u64::from(older)) + payload.len()
}

fn assert_valid(fields: &Fields<'_>) {
    let (_, kind, message, back, len, older, payload) = *fields;
    assert!(
        kind.is_reliable() && back >= 1 && u32::from(back) <= message,
        "an Xor frame pairs two messages of a reliable channel"
    );
    assert_eq!(
        payload.len(),
        usize::from(len.max(older)),
        "Xor payload length"
    );
}

/// Writes a version 1 `Xor` frame (`buf` is exactly [`len`] long, type byte written).
pub(crate) fn emit(frame: &Frame<'_>, buf: &mut [u8]) {
    let f = fields(frame);
    assert_valid(&f);
    let (channel, kind, message, back, len, older, payload) = f;
    buf[1] = channel;
    buf[2] = kind as u8;
    buf[3..7].copy_from_slice(&message.to_be_bytes());
    buf[7] = back;
    buf[8..10].copy_from_slice(&len.to_be_bytes());
    buf[10..12].copy_from_slice(&older.to_be_bytes());
    buf[XOR_HEADER_LEN..].copy_from_slice(payload);
}

/// Writes a version 2 `Xor` frame (`buf` is exactly [`compact_len`] long).
pub(crate) fn emit_compact(frame: &Frame<'_>, buf: &mut [u8]) {
    let f = fields(frame);
    assert_valid(&f);
    let (channel, kind, message, back, len, older, payload) = f;
    buf[0] = SHORT_XOR | kind as u8;
    buf[1] = channel;
    let at = varint::write(buf, 2, u64::from(message));
    buf[at] = back;
    let at = varint::write(buf, at + 1, u64::from(len));
    let at = varint::write(buf, at, u64::from(older));
    buf[at..].copy_from_slice(payload);
}
