//! The messages of `latlab stream`: a 24-byte header at the start of every message a thin
//! stream sends, over whatever transport carries it, and the 4-byte length prefix that frames
//! messages on a byte stream (TCP, a QUIC stream).
//!
//! Layout (all integers big-endian):
//!
//! | offset | size | field                                  |
//! |-------:|-----:|----------------------------------------|
//! | 0      | 4    | magic `"LLSM"`                         |
//! | 4      | 4    | run                                    |
//! | 8      | 8    | seq                                    |
//! | 16     | 8    | sent_ns (the application's intended send time, `CLOCK_REALTIME`) |
//! | 24..   |      | padding, up to the message size        |
//!
//! On a byte stream each message is preceded by its length (`u32`, at most
//! [`MAX_MESSAGE_LEN`]).

use crate::{be, Error, Result};

/// The four bytes every message starts with.
pub const MAGIC: [u8; 4] = *b"LLSM";

/// Length of the header; the smallest message.
pub const HEADER_LEN: usize = 24;

/// The largest message: what one UDP datagram over IPv4 carries.
pub const MAX_MESSAGE_LEN: usize = 65_507;

/// Length of the prefix that frames a message on a byte stream.
pub const FRAME_PREFIX_LEN: usize = 4;

mod field {
    use crate::Field;

    pub(crate) const MAGIC: Field = 0..4;
    pub(crate) const RUN: Field = 4..8;
    pub(crate) const SEQ: Field = 8..16;
    pub(crate) const SENT_NS: Field = 16..24;
}

/// A read/write view of a message.
///
/// Invariant after [`Packet::new_checked`] / [`Packet::check_len`]: the buffer holds at least
/// [`HEADER_LEN`] bytes, so every getter and setter is in bounds. The magic is *not* checked
/// there; [`Repr::parse`] checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Packet<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Packet<T> {
        Packet { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Packet<T>> {
        let packet = Self::new_unchecked(buffer);
        packet.check_len()?;
        Ok(packet)
    }

    /// Shorter than [`HEADER_LEN`] → [`Error::Truncated`].
    pub fn check_len(&self) -> Result<()> {
        if self.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The magic bytes (should be [`MAGIC`]).
    pub fn magic(&self) -> [u8; 4] {
        let mut m = [0u8; 4];
        m.copy_from_slice(&self.buffer.as_ref()[field::MAGIC]);
        m
    }

    /// The run the message belongs to.
    pub fn run(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::RUN)
    }

    /// Its place in the run's schedule, from 0.
    pub fn seq(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::SEQ)
    }

    /// When the sending application meant to send it, ns since the Unix epoch.
    pub fn sent_ns(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::SENT_NS)
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Everything after the header.
    pub fn padding(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes [`MAGIC`].
    pub fn set_magic(&mut self) {
        self.buffer.as_mut()[field::MAGIC].copy_from_slice(&MAGIC);
    }

    /// Sets the run.
    pub fn set_run(&mut self, value: u32) {
        be::set_u32(self.buffer.as_mut(), field::RUN, value);
    }

    /// Sets the sequence number.
    pub fn set_seq(&mut self, value: u64) {
        be::set_u64(self.buffer.as_mut(), field::SEQ, value);
    }

    /// Sets the intended send time.
    pub fn set_sent_ns(&mut self, value: u64) {
        be::set_u64(self.buffer.as_mut(), field::SENT_NS, value);
    }
}

/// A message header's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Repr {
    /// The run it belongs to.
    pub run: u32,
    /// Its place in the schedule, from 0.
    pub seq: u64,
    /// The intended send time, ns since the Unix epoch (`CLOCK_REALTIME`).
    pub sent_ns: u64,
}

impl Repr {
    /// Parses a message: [`Error::Truncated`] below [`HEADER_LEN`] bytes, [`Error::BadMagic`]
    /// without [`MAGIC`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.magic() != MAGIC {
            return Err(Error::BadMagic);
        }
        Ok(Repr {
            run: packet.run(),
            seq: packet.seq(),
            sent_ns: packet.sent_ns(),
        })
    }

    /// Bytes of the header this writes.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header; the padding is left as it is.
    ///
    /// # Panics
    /// When the buffer is shorter than [`HEADER_LEN`] (a programming error).
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_magic();
        packet.set_run(self.run);
        packet.set_seq(self.seq);
        packet.set_sent_ns(self.sent_ns);
    }
}

/// The prefix that frames a message of `len` bytes on a byte stream.
///
/// # Panics
/// When `len` is above [`MAX_MESSAGE_LEN`] (a programming error: sizes are checked before).
pub fn frame_prefix(len: usize) -> [u8; FRAME_PREFIX_LEN] {
    assert!(len <= MAX_MESSAGE_LEN, "a message of {len} bytes");
    (len as u32).to_be_bytes()
}

/// The length a frame prefix announces: `Ok(None)` while fewer than [`FRAME_PREFIX_LEN`]
/// bytes have arrived, [`Error::BadLength`] above [`MAX_MESSAGE_LEN`] (the stream is not
/// latlab's).
pub fn parse_frame_prefix(bytes: &[u8]) -> Result<Option<usize>> {
    let Some(prefix) = bytes.get(..FRAME_PREFIX_LEN) else {
        return Ok(None);
    };
    let len = be::u32(prefix, 0..FRAME_PREFIX_LEN) as usize;
    if len > MAX_MESSAGE_LEN {
        return Err(Error::BadLength);
    }
    Ok(Some(len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::random_inputs;

    /// Run 0x01020304, seq 5, sent at 0x1122334455667788 ns, 8 bytes of padding.
    const GOLDEN: [u8; 32] = [
        b'L', b'L', b'S', b'M', 0x01, 0x02, 0x03, 0x04, 0, 0, 0, 0, 0, 0, 0, 5, 0x11, 0x22, 0x33,
        0x44, 0x55, 0x66, 0x77, 0x88, 0, 0, 0, 0, 0, 0, 0, 0,
    ];

    const REPR: Repr = Repr {
        run: 0x0102_0304,
        seq: 5,
        sent_ns: 0x1122_3344_5566_7788,
    };

    #[test]
    fn a_message_is_its_header_then_its_padding() {
        let mut buf = [0u8; 32];
        REPR.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, GOLDEN);
        let packet = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(Repr::parse(&packet), Ok(REPR));
        assert_eq!(packet.padding(), &[0u8; 8]);
        assert_eq!(Repr::parse(&Packet::new_unchecked(&GOLDEN[..24])), Ok(REPR));
        assert_eq!(REPR.buffer_len(), HEADER_LEN);
    }

    #[test]
    fn emit_leaves_the_padding_alone() {
        let mut buf = [0xabu8; 30];
        REPR.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(&buf[..24], &GOLDEN[..24]);
        assert_eq!(&buf[24..], &[0xab; 6]);
    }

    #[test]
    fn short_or_foreign_bytes_are_refused() {
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&GOLDEN[..23])),
            Err(Error::Truncated)
        );
        let mut foreign = GOLDEN;
        foreign[0] = b'X';
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&foreign[..])),
            Err(Error::BadMagic)
        );
    }

    #[test]
    fn frame_prefixes_announce_lengths_up_to_one_datagram() {
        assert_eq!(frame_prefix(100), [0, 0, 0, 100]);
        assert_eq!(parse_frame_prefix(&[0, 0, 0, 100, 9]), Ok(Some(100)));
        assert_eq!(parse_frame_prefix(&[0, 0, 0]), Ok(None));
        assert_eq!(
            parse_frame_prefix(&frame_prefix(MAX_MESSAGE_LEN)),
            Ok(Some(MAX_MESSAGE_LEN))
        );
        assert_eq!(parse_frame_prefix(&[0, 1, 0, 0]), Err(Error::BadLength));
    }

    #[test]
    fn random_bytes_never_panic_and_what_parses_re_emits_the_same() {
        random_inputs(0x5eed_57ea, &MAGIC, |buf| {
            let _ = parse_frame_prefix(buf);
            let Ok(repr) = Repr::parse(&Packet::new_unchecked(&*buf)) else {
                return;
            };
            let mut out = buf.to_vec();
            repr.emit(&mut Packet::new_unchecked(&mut out[..]));
            assert_eq!(&out[..], &*buf);
        });
    }
}
