//! latlab's own transport (`latlab-transport`): one packet per UDP datagram, a 20-byte header
//! followed by frames. All integers are big-endian.
//!
//! | offset | size | field                                                   |
//! |-------:|-----:|---------------------------------------------------------|
//! | 0      | 2    | magic `"LT"`                                            |
//! | 2      | 1    | version ([`VERSION`])                                   |
//! | 3      | 1    | flags: bit 0 [`FLAG_ACK_IMMEDIATELY`], the others 0     |
//! | 4      | 8    | connection id (chosen by the client, never 0)           |
//! | 12     | 8    | packet number (never reused within a connection)        |
//! | 20     | ..   | frames, back to back, up to the end of the datagram     |
//!
//! Version 2 ([`VERSION_COMPACT`], [`compact`]) keeps this header for its handshake only (its
//! `Accept` packet adds a `ShortId` frame); its established connections send a 2–5 byte short
//! header (6–9 bytes while the client announces a new address) and compact frames.
//!
//! Each frame starts with its type byte ([`FrameType`]); see [`Frame`] for the bodies. The
//! handshake (`Hello`, `Challenge`, `HelloCookie`, `Accept`) travels in packets with packet
//! number 0; a `Hello` packet is padded to at least [`HELLO_MIN_LEN`] bytes so that no answer
//! (at most [`MAX_HANDSHAKE_ANSWER_LEN`] bytes) is larger than the request that caused it.
//!
//! [`Packet`] is the view of the header, [`Repr`] its representation, and [`Frames`] walks
//! the frames of a payload, each parsed into a [`Frame`]. Parsing never panics: any bytes give
//! `Ok` or an [`Error`]. The format is canonical: reserved bits, padding and
//! unused values are refused, so a parsed frame re-emits to the bytes it came from.

use crate::{be, Error, Result};

pub mod compact;
mod frame;
pub mod xor;

pub use compact::VERSION_COMPACT;
pub use frame::{AckRanges, ChannelKind, Frame, FrameType, Frames, MAX_ACK_RANGES};

/// The two bytes every transport packet starts with.
pub const MAGIC: [u8; 2] = *b"LT";
/// The only version this crate reads and writes.
pub const VERSION: u8 = 1;
/// Header length; frames start here.
pub const HEADER_LEN: usize = 20;
/// Flag bit: the receiver should acknowledge this packet at once, without delaying the ACK.
pub const FLAG_ACK_IMMEDIATELY: u8 = 0x01;
/// Smallest packet that may carry a `Hello`.
pub const HELLO_MIN_LEN: usize = 96;
/// Largest packet a server sends in answer to a handshake packet (a `Challenge`).
pub const MAX_HANDSHAKE_ANSWER_LEN: usize = HEADER_LEN + frame::CHALLENGE_LEN;

// Anti-amplification, checked at compile time: the largest handshake answer is no longer than
// the shortest packet that can cause one (a HelloCookie causes an Accept, a Hello a Challenge).
// Version 2's Accept packet carries a ShortId frame after the Accept.
const _: () = assert!(
    MAX_HANDSHAKE_ANSWER_LEN <= HELLO_MIN_LEN
        && HEADER_LEN + frame::ACCEPT_LEN + frame::SHORT_ID_LEN
            <= HEADER_LEN + frame::CHALLENGE_LEN
);

mod field {
    use crate::Field;

    pub(crate) const MAGIC: Field = 0..2;
    pub(crate) const VERSION: usize = 2;
    pub(crate) const FLAGS: usize = 3;
    pub(crate) const CONNECTION_ID: Field = 4..12;
    pub(crate) const PACKET_NUMBER: Field = 12..20;
}

/// A read/write view of a transport packet.
///
/// Invariant after [`Packet::new_checked`]: the buffer holds at least [`HEADER_LEN`] bytes,
/// so every getter and setter is in bounds. Magic, version and flags are checked by
/// [`Repr::parse`].
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
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// The magic bytes (should be [`MAGIC`]).
    pub fn magic(&self) -> [u8; 2] {
        let b = &self.buffer.as_ref()[field::MAGIC];
        [b[0], b[1]]
    }

    /// Version (should be [`VERSION`]).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// Flag byte.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Connection id.
    pub fn connection_id(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::CONNECTION_ID)
    }

    /// Packet number.
    pub fn packet_number(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::PACKET_NUMBER)
    }

    /// The frames: everything after the header.
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes magic, version and flags.
    pub fn set_header(&mut self, flags: u8) {
        let buf = self.buffer.as_mut();
        buf[field::MAGIC].copy_from_slice(&MAGIC);
        buf[field::VERSION] = VERSION;
        buf[field::FLAGS] = flags;
    }

    /// Sets the connection id.
    pub fn set_connection_id(&mut self, value: u64) {
        be::set_u64(self.buffer.as_mut(), field::CONNECTION_ID, value);
    }

    /// Sets the packet number.
    pub fn set_packet_number(&mut self, value: u64) {
        be::set_u64(self.buffer.as_mut(), field::PACKET_NUMBER, value);
    }

    /// The frames, writable.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[HEADER_LEN..]
    }
}

/// The header of a transport packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Ask the receiver for an immediate ACK ([`FLAG_ACK_IMMEDIATELY`]).
    pub ack_immediately: bool,
    /// Connection id.
    pub connection_id: u64,
    /// Packet number.
    pub packet_number: u64,
}

impl Repr {
    /// Parses the header: [`Error::Truncated`] if short, [`Error::BadMagic`],
    /// [`Error::UnsupportedVersion`], [`Error::Malformed`] for unknown flag bits.
    pub fn parse<T: AsRef<[u8]>>(packet: &Packet<T>) -> Result<Repr> {
        packet.check_len()?;
        if packet.magic() != MAGIC {
            return Err(Error::BadMagic);
        }
        if packet.version() != VERSION {
            return Err(Error::UnsupportedVersion);
        }
        if packet.flags() & !FLAG_ACK_IMMEDIATELY != 0 {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            ack_immediately: packet.flags() & FLAG_ACK_IMMEDIATELY != 0,
            connection_id: packet.connection_id(),
            packet_number: packet.packet_number(),
        })
    }

    /// Header length ([`HEADER_LEN`]).
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN
    }

    /// Writes the header. Panics if the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let flags = if self.ack_immediately {
            FLAG_ACK_IMMEDIATELY
        } else {
            0
        };
        packet.set_header(flags);
        packet.set_connection_id(self.connection_id);
        packet.set_packet_number(self.packet_number);
    }

    /// Writes the header with another version byte ([`VERSION_COMPACT`]'s handshake).
    pub fn emit_version<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>, version: u8) {
        self.emit(packet);
        packet.buffer.as_mut()[field::VERSION] = version;
    }
}

/// Parses a whole long-header packet of version 1 or of [`VERSION_COMPACT`] (whose long
/// header only carries its handshake): the version, the header and every frame, as
/// [`parse_packet`] does.
pub fn parse_long_packet<'a>(bytes: &'a [u8], each: impl FnMut(Frame<'a>)) -> Result<(u8, Repr)> {
    let packet = Packet::new_checked(bytes)?;
    if packet.version() != VERSION_COMPACT {
        return parse_packet(bytes, each).map(|repr| (VERSION, repr));
    }
    // The same layout as version 1's: read it as such.
    let mut header = [0u8; HEADER_LEN];
    header.copy_from_slice(&bytes[..HEADER_LEN]);
    header[field::VERSION] = VERSION;
    let repr = Repr::parse(&Packet::new_unchecked(&header[..]))?;
    for frame in Frames::new(&bytes[HEADER_LEN..]) {
        frame?;
    }
    Frames::new(&bytes[HEADER_LEN..]).flatten().for_each(each);
    Ok((VERSION_COMPACT, repr))
}

/// Parses a whole packet: its header and every frame, so a packet with one bad frame is
/// refused whole. Calls `each` for each frame in order.
pub fn parse_packet<'a>(bytes: &'a [u8], mut each: impl FnMut(Frame<'a>)) -> Result<Repr> {
    let repr = Repr::parse(&Packet::new_checked(bytes)?)?;
    for frame in Frames::new(&bytes[HEADER_LEN..]) {
        frame?;
    }
    for frame in Frames::new(&bytes[HEADER_LEN..]).flatten() {
        each(frame);
    }
    Ok(repr)
}

#[cfg(test)]
mod tests;
