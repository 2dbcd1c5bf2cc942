//! The messages `latlab stream` sends, and their framing on byte streams.
//!
//! A message is a 24-byte header — magic `LLSM`, the run's id, the sequence number and the
//! *application send time* (ns of `CLOCK_REALTIME`, the intended time of the schedule) — padded
//! with zeros to the message size. On a byte stream (TCP, a QUIC stream) each message goes in a
//! frame: a 4-byte big-endian length, then the message. Parsing never panics: bytes that are
//! not a message are an error the receiver counts.

/// Bytes of the message header; the smallest message size.
pub const HEADER_LEN: usize = 24;
/// The largest message: what one UDP datagram carries.
pub const MAX_LEN: usize = 65_507;
/// Bytes of a frame's length prefix on a byte stream.
pub const FRAME_PREFIX: usize = 4;

const MAGIC: [u8; 4] = *b"LLSM";

/// One message's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message {
    /// The run it belongs to (the receiver ignores other runs' messages).
    pub run: u32,
    /// Its place in the schedule, from 0.
    pub seq: u64,
    /// When the application meant to send it, ns since the Unix epoch (`CLOCK_REALTIME`).
    pub sent_ns: u64,
}

/// Why bytes are not a message of this run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum MessageError {
    /// Shorter than the header.
    #[error("shorter than the {HEADER_LEN}-byte header")]
    Short,
    /// The first four bytes are not `LLSM`.
    #[error("not a latlab stream message")]
    NotAMessage,
}

impl Message {
    /// Writes the header into the start of `buf` and zeros the rest (the padding).
    ///
    /// # Panics
    /// When `buf` is shorter than [`HEADER_LEN`]: message sizes are checked before a run.
    pub fn emit(&self, buf: &mut [u8]) {
        buf[..4].copy_from_slice(&MAGIC);
        buf[4..8].copy_from_slice(&self.run.to_be_bytes());
        buf[8..16].copy_from_slice(&self.seq.to_be_bytes());
        buf[16..24].copy_from_slice(&self.sent_ns.to_be_bytes());
        buf[HEADER_LEN..].fill(0);
    }

    /// Reads the header of `bytes` (any bytes: never panics).
    pub fn parse(bytes: &[u8]) -> Result<Message, MessageError> {
        let header: &[u8; HEADER_LEN] = bytes
            .get(..HEADER_LEN)
            .and_then(|h| h.try_into().ok())
            .ok_or(MessageError::Short)?;
        if header[..4] != MAGIC {
            return Err(MessageError::NotAMessage);
        }
        let word = |range: std::ops::Range<usize>| {
            let mut b = [0u8; 8];
            b[8 - range.len()..].copy_from_slice(&header[range]);
            u64::from_be_bytes(b)
        };
        Ok(Message {
            run: word(4..8) as u32,
            seq: word(8..16),
            sent_ns: word(16..24),
        })
    }
}

/// Appends `message` to `out` as one frame: its length (4 bytes, big-endian), then its bytes.
pub fn frame(message: &[u8], out: &mut Vec<u8>) {
    debug_assert!(message.len() <= MAX_LEN);
    out.extend_from_slice(&(message.len() as u32).to_be_bytes());
    out.extend_from_slice(message);
}

/// A frame whose length prefix is out of range: the byte stream is not latlab's, and nothing
/// after it can be trusted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("a frame of {0} bytes (at most {MAX_LEN})")]
pub struct FrameError(pub u32);

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
        let Some(prefix) = rest.get(..FRAME_PREFIX) else {
            return Ok(None);
        };
        let len = u32::from_be_bytes([prefix[0], prefix[1], prefix[2], prefix[3]]);
        if len as usize > MAX_LEN {
            return Err(FrameError(len));
        }
        let end = FRAME_PREFIX + len as usize;
        if rest.len() < end {
            return Ok(None);
        }
        let at = self.start + FRAME_PREFIX;
        self.start += end;
        Ok(Some(&self.buf[at..at + len as usize]))
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
        let mut buf = [0xffu8; 32];
        let m = Message {
            run: 0x0102_0304,
            seq: 5,
            sent_ns: 0x1122_3344_5566_7788,
        };
        m.emit(&mut buf);
        assert_eq!(
            buf,
            [
                b'L', b'L', b'S', b'M', 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 5, 0x11, 0x22, 0x33, 0x44,
                0x55, 0x66, 0x77, 0x88, 0, 0, 0, 0, 0, 0, 0, 0
            ]
        );
        assert_eq!(Message::parse(&buf), Ok(m));
        assert_eq!(Message::parse(&buf[..HEADER_LEN]), Ok(m));
    }

    #[test]
    fn bytes_that_are_not_a_message_are_refused_not_panicked_on() {
        assert_eq!(Message::parse(&[]), Err(MessageError::Short));
        assert_eq!(Message::parse(b"LLSM"), Err(MessageError::Short));
        assert_eq!(Message::parse(&[0u8; 64]), Err(MessageError::NotAMessage));
        for len in 0..40 {
            let junk: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            let _ = Message::parse(&junk);
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
        assert_eq!(d.next_frame(), Err(FrameError(65_536)));
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
            let _ = Message::parse(&bytes);
            let mut d = Deframer::new();
            for piece in bytes.chunks(1 + (next() % 17) as usize) {
                d.push(piece);
                while let Ok(Some(m)) = d.next_frame() {
                    assert!(m.len() <= MAX_LEN);
                    let _ = Message::parse(m);
                }
            }
        }
    }
}
