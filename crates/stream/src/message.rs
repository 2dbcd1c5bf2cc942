//! The messages `latlab stream` sends, and their framing on byte streams.
//!
//! The format is [`latlab_wire::stream`]: a 24-byte header — magic `LLSM`, the run's id, the
//! sequence number and the *application send time* (ns of `CLOCK_REALTIME`, the intended time
//! of the schedule) — padded with zeros to the message size; on a byte stream (TCP, a QUIC
//! stream) each message goes in a frame, a 4-byte big-endian length and then the message.
//! This module adds what a sender and a receiver do with it: [`emit`] a message into a buffer,
//! [`parse`] any bytes (never panics), [`frame`] a message onto a stream, and cut a stream back
//! into messages ([`Deframer`]), whatever pieces it arrives in.

use latlab_wire::stream::{self as wire, Packet};

pub use latlab_wire::stream::{
    Repr as Message, FRAME_PREFIX_LEN as FRAME_PREFIX, HEADER_LEN, MAX_MESSAGE_LEN as MAX_LEN,
};

/// Why bytes are not a message: shorter than the header, or not starting with `LLSM`.
pub type MessageError = latlab_wire::Error;

/// Writes `message`'s header into the start of `buf` (the padding after it is left as it is).
///
/// # Panics
/// When `buf` is shorter than [`HEADER_LEN`]: message sizes are checked before a run.
pub fn emit(message: &Message, buf: &mut [u8]) {
    message.emit(&mut Packet::new_unchecked(buf));
}

/// Reads the header of `bytes` (any bytes: never panics).
pub fn parse(bytes: &[u8]) -> Result<Message, MessageError> {
    Message::parse(&Packet::new_unchecked(bytes))
}

/// Appends `message` to `out` as one frame: its length (4 bytes, big-endian), then its bytes.
pub fn frame(message: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&wire::frame_prefix(message.len()));
    out.extend_from_slice(message);
}

/// A frame whose length prefix is out of range: the byte stream is not latlab's, and nothing
/// after it can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a frame longer than {MAX_LEN} bytes")]
pub struct FrameError;

/// Cuts a byte stream back into the frames [`frame`] made, whatever pieces it arrives in.
#[derive(Debug, Default)]
pub struct Deframer {
    buf: Vec<u8>,
    /// Where the next frame starts in `buf`.
    start: usize,
}

impl Deframer {
    /// An empty deframer.
    pub fn new() -> Deframer {
        Deframer::default()
    }

    /// Appends bytes as they came off the stream.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.start > 0 && self.start == self.buf.len() {
            self.buf.clear();
            self.start = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole frame's message, `Ok(None)` until one has arrived whole.
    pub fn next_frame(&mut self) -> Result<Option<&[u8]>, FrameError> {
        if self.start > 4096 && self.start * 2 > self.buf.len() {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let rest = &self.buf[self.start..];
        let Some(len) = wire::parse_frame_prefix(rest).map_err(|_| FrameError)? else {
            return Ok(None);
        };
        let end = FRAME_PREFIX + len;
        if rest.len() < end {
            return Ok(None);
        }
        let at = self.start + FRAME_PREFIX;
        self.start += end;
        Ok(Some(&self.buf[at..at + len]))
    }

    /// Bytes held that do not yet make a whole frame.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.start
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_its_header_padded_to_its_size() {
        let mut buf = [0u8; 32];
        let m = Message {
            run: 0x0102_0304,
            seq: 5,
            sent_ns: 0x1122_3344_5566_7788,
        };
        emit(&m, &mut buf);
        assert_eq!(
            buf,
            [
                b'L', b'L', b'S', b'M', 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 5, 0x11, 0x22, 0x33, 0x44,
                0x55, 0x66, 0x77, 0x88, 0, 0, 0, 0, 0, 0, 0, 0
            ]
        );
        assert_eq!(parse(&buf), Ok(m));
        assert_eq!(parse(&buf[..HEADER_LEN]), Ok(m));
    }

    #[test]
    fn bytes_that_are_not_a_message_are_refused_not_panicked_on() {
        assert_eq!(parse(&[]), Err(MessageError::Truncated));
        assert_eq!(parse(b"LLSM"), Err(MessageError::Truncated));
        assert_eq!(parse(&[0u8; 64]), Err(MessageError::BadMagic));
        for len in 0..40 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let _ = parse(&junk);
        }
    }

    #[test]
    fn frames_come_back_whole_whatever_pieces_the_stream_cuts_them_into() {
        let messages: Vec<Vec<u8>> = (0..50u8).map(|i| vec![i; 24 + i as usize]).collect();
        let mut stream = Vec::new();
        for m in &messages {
            frame(m, &mut stream);
        }
        for piece in [1, 3, 7, 100, stream.len()] {
            let mut d = Deframer::new();
            let mut got = Vec::new();
            for chunk in stream.chunks(piece) {
                d.push(chunk);
                while let Some(m) = d.next_frame().unwrap() {
                    got.push(m.to_vec());
                }
            }
            assert_eq!(got, messages, "pieces of {piece} bytes");
            assert_eq!(d.pending(), 0);
        }
    }

    #[test]
    fn a_length_prefix_beyond_the_largest_message_ends_the_stream() {
        let mut d = Deframer::new();
        d.push(&[0, 1, 0, 0, 9, 9]);
        assert_eq!(d.next_frame(), Err(FrameError));
        let mut d = Deframer::new();
        d.push(&[0, 0, 0, 2, 9]);
        assert_eq!(d.next_frame(), Ok(None));
        d.push(&[8]);
        assert_eq!(d.next_frame(), Ok(Some(&[9u8, 8][..])));
    }

    #[test]
    fn any_bytes_in_any_pieces_give_frames_or_an_error_never_a_panic() {
        // A small linear congruential generator: the same bytes on every run.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut next = move || {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            (x >> 33) as u32
        };
        for _ in 0..2_000 {
            let len = (next() % 300) as usize;
            let mut bytes: Vec<u8> = (0..len).map(|_| next() as u8).collect();
            // Small length prefixes now and then, so whole frames come out too.
            if len >= 4 && next() % 2 == 0 {
                bytes[..4].copy_from_slice(&(next() % 64).to_be_bytes());
            }
            let _ = parse(&bytes);
            let mut d = Deframer::new();
            for piece in bytes.chunks(1 + (next() % 17) as usize) {
                d.push(piece);
                while let Ok(Some(m)) = d.next_frame() {
                    assert!(m.len() <= MAX_LEN);
                    let _ = parse(m);
                }
            }
        }
    }
}
