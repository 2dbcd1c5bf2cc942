//! The latlab probe header, carried as the UDP payload of every probe.
//!
//! Layout (all integers big-endian; see `PROBE_FORMAT.md` in this crate for
//! the full specification and the responder rules):
//!
//! | offset | size | field              |
//! |-------:|-----:|--------------------|
//! | 0      | 4    | magic `"LLPB"`     |
//! | 4      | 1    | version (1)        |
//! | 5      | 1    | flags (bit 0: responder stamped) |
//! | 6      | 2    | header_len (56)    |
//! | 8      | 4    | run_id             |
//! | 12     | 4    | flow               |
//! | 16     | 8    | seq                |
//! | 24     | 8    | intended_send_ns   |
//! | 32     | 8    | actual_send_ns     |
//! | 40     | 8    | responder_rx_ns    |
//! | 48     | 8    | responder_tx_ns    |
//! | 56     | 8    | responder_clock (only when header_len >= 64) |
//! | 56.. or 64.. | | padding            |
//!
//! Timestamps are nanoseconds since the Unix epoch (CLOCK_REALTIME) in the
//! clock of whoever wrote them. A responder echoes the whole datagram,
//! changing nothing but bytes 40..56 and flag bit 0, and, in a header of 64
//! bytes or more, bytes 56..64 and flag bit 1: the identity of the clock it
//! stamps with, so that a sender can tell whether the two read one clock.

use crate::{be, Error, Result};

/// The four bytes every probe starts with.
pub const MAGIC: [u8; 4] = *b"LLPB";

/// The only probe version this crate reads and writes.
pub const VERSION: u8 = 1;

/// Length of a version-1 probe header. A probe datagram is at least this
/// long; bytes past the header are padding.
pub const HEADER_LEN: usize = 56;

/// Length of a header that carries the `responder_clock` field: a sender that
/// wants to know which clock the responder stamps with writes a header_len of
/// at least this (bytes 56..64 zero), and a responder that knows answers there.
pub const CLOCK_HEADER_LEN: usize = 64;

/// Flag bit 0: the responder wrote `responder_rx_ns` and `responder_tx_ns`.
pub const FLAG_RESPONDER_STAMPED: u8 = 0x01;

/// Flag bit 1: the responder wrote the identity of the clock it stamps with
/// into `responder_clock` (bytes 56..64). Meaningful only in a header of
/// [`CLOCK_HEADER_LEN`] bytes or more; ignored in a shorter one. Bits 2–7 are
/// reserved: sent as 0, ignored when parsing.
pub const FLAG_RESPONDER_CLOCK: u8 = 0x02;

mod field {
    use crate::Field;

    pub(crate) const MAGIC: Field = 0..4;
    pub(crate) const VERSION: usize = 4;
    pub(crate) const FLAGS: usize = 5;
    pub(crate) const HEADER_LEN: Field = 6..8;
    pub(crate) const RUN_ID: Field = 8..12;
    pub(crate) const FLOW: Field = 12..16;
    pub(crate) const SEQ: Field = 16..24;
    pub(crate) const INTENDED_SEND_NS: Field = 24..32;
    pub(crate) const ACTUAL_SEND_NS: Field = 32..40;
    pub(crate) const RESPONDER_RX_NS: Field = 40..48;
    pub(crate) const RESPONDER_TX_NS: Field = 48..56;
    pub(crate) const RESPONDER_CLOCK: Field = 56..64;
}

/// Cheap test whether `bytes` looks like a version-1 probe: long enough,
/// right magic, right version and a header length within bounds. Does not
/// build a [`Repr`]; a `true` here means [`Repr::parse`] succeeds.
pub fn is_probe(bytes: &[u8]) -> bool {
    bytes.len() >= HEADER_LEN
        && bytes[field::MAGIC] == MAGIC
        && bytes[field::VERSION] == VERSION
        && (HEADER_LEN..=bytes.len()).contains(&usize::from(be::u16(bytes, field::HEADER_LEN)))
}

/// A read/write view of a probe datagram (the UDP payload).
///
/// Invariant after [`Packet::new_checked`] / [`Packet::check_len`]:
/// `56 <= header_len() <= buffer length`, so every getter, setter and
/// [`Packet::padding`] are in bounds. Magic and version are *not* checked
/// there; [`Repr::parse`] and [`is_probe`] check them.
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

    /// Buffer shorter than [`HEADER_LEN`] or than the header_len field →
    /// [`Error::Truncated`]; header_len field below [`HEADER_LEN`] →
    /// [`Error::BadLength`].
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN {
            Err(Error::BadLength)
        } else if header_len > len {
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
    pub fn magic(&self) -> [u8; 4] {
        let mut m = [0u8; 4];
        m.copy_from_slice(&self.buffer.as_ref()[field::MAGIC]);
        m
    }

    /// Version (should be [`VERSION`]).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VERSION]
    }

    /// Raw flags byte, reserved bits included.
    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[field::FLAGS]
    }

    /// Whether [`FLAG_RESPONDER_STAMPED`] is set.
    pub fn responder_stamped(&self) -> bool {
        self.flags() & FLAG_RESPONDER_STAMPED != 0
    }

    /// Header length field in bytes (56 for version 1).
    pub fn header_len(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::HEADER_LEN)
    }

    /// Run identifier, random per run.
    pub fn run_id(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::RUN_ID)
    }

    /// Flow number within the run.
    pub fn flow(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::FLOW)
    }

    /// Sequence number within the flow.
    pub fn seq(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::SEQ)
    }

    /// When the schedule said the probe was due (sender clock, ns).
    pub fn intended_send_ns(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::INTENDED_SEND_NS)
    }

    /// When the sender handed the probe to the stack (sender clock, ns).
    pub fn actual_send_ns(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::ACTUAL_SEND_NS)
    }

    /// Responder receive time (responder clock, ns; 0 = not stamped).
    pub fn responder_rx_ns(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::RESPONDER_RX_NS)
    }

    /// Responder transmit time (responder clock, ns; 0 = not stamped).
    pub fn responder_tx_ns(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::RESPONDER_TX_NS)
    }

    /// `Some((rx, tx))` if the responder-stamped flag is set, else `None`.
    pub fn responder_stamps(&self) -> Option<(u64, u64)> {
        self.responder_stamped()
            .then(|| (self.responder_rx_ns(), self.responder_tx_ns()))
    }

    /// Whether the header has room for `responder_clock`: header_len is at
    /// least [`CLOCK_HEADER_LEN`] (so the sender asked which clock the
    /// responder stamps with).
    pub fn has_clock_field(&self) -> bool {
        usize::from(self.header_len()) >= CLOCK_HEADER_LEN
    }

    /// What the header says of the responder's clock: not asked (a header
    /// shorter than [`CLOCK_HEADER_LEN`]), asked and not answered (flag bit 1
    /// clear), or the identity the responder named.
    pub fn responder_clock(&self) -> ResponderClock {
        if !self.has_clock_field() {
            ResponderClock::NotAsked
        } else if self.flags() & FLAG_RESPONDER_CLOCK == 0 {
            ResponderClock::Asked
        } else {
            ResponderClock::Named(be::u64(self.buffer.as_ref(), field::RESPONDER_CLOCK))
        }
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Everything after the header (from the header_len field to the end).
    pub fn padding(&self) -> &'a [u8] {
        &self.buffer.as_ref()[usize::from(self.header_len())..]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Writes [`MAGIC`].
    pub fn set_magic(&mut self) {
        self.buffer.as_mut()[field::MAGIC].copy_from_slice(&MAGIC);
    }

    /// Sets the version byte.
    pub fn set_version(&mut self, value: u8) {
        self.buffer.as_mut()[field::VERSION] = value;
    }

    /// Sets the raw flags byte.
    pub fn set_flags(&mut self, value: u8) {
        self.buffer.as_mut()[field::FLAGS] = value;
    }

    /// Sets the header length field.
    pub fn set_header_len(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::HEADER_LEN, value);
    }

    /// Sets the run identifier.
    pub fn set_run_id(&mut self, value: u32) {
        be::set_u32(self.buffer.as_mut(), field::RUN_ID, value);
    }

    /// Sets the flow number.
    pub fn set_flow(&mut self, value: u32) {
        be::set_u32(self.buffer.as_mut(), field::FLOW, value);
    }

    /// Sets the sequence number.
    pub fn set_seq(&mut self, value: u64) {
        be::set_u64(self.buffer.as_mut(), field::SEQ, value);
    }

    /// Sets the intended send time.
    pub fn set_intended_send_ns(&mut self, value: u64) {
        be::set_u64(self.buffer.as_mut(), field::INTENDED_SEND_NS, value);
    }

    /// Stamps the actual send time in place (hot path: right before send).
    pub fn set_actual_send_ns(&mut self, value: u64) {
        be::set_u64(self.buffer.as_mut(), field::ACTUAL_SEND_NS, value);
    }

    /// Sets the responder receive time alone (flag untouched).
    pub fn set_responder_rx_ns(&mut self, value: u64) {
        be::set_u64(self.buffer.as_mut(), field::RESPONDER_RX_NS, value);
    }

    /// Sets the responder transmit time alone (flag untouched).
    pub fn set_responder_tx_ns(&mut self, value: u64) {
        be::set_u64(self.buffer.as_mut(), field::RESPONDER_TX_NS, value);
    }

    /// Responder side: writes both stamps and sets
    /// [`FLAG_RESPONDER_STAMPED`], keeping the other flag bits as they are.
    pub fn set_responder_stamps(&mut self, rx_ns: u64, tx_ns: u64) {
        self.set_responder_rx_ns(rx_ns);
        self.set_responder_tx_ns(tx_ns);
        let flags = self.flags();
        self.set_flags(flags | FLAG_RESPONDER_STAMPED);
    }

    /// Responder side: names the clock its stamps come from (bytes 56..64, and
    /// [`FLAG_RESPONDER_CLOCK`]) when the header has room for it
    /// ([`Packet::has_clock_field`]); returns whether it did. A header without
    /// the field is left as it is: its bytes 56..64 are the sender's padding.
    pub fn set_responder_clock(&mut self, clock: u64) -> bool {
        if !self.has_clock_field() {
            return false;
        }
        be::set_u64(self.buffer.as_mut(), field::RESPONDER_CLOCK, clock);
        let flags = self.flags();
        self.set_flags(flags | FLAG_RESPONDER_CLOCK);
        true
    }

    /// Zeroes both stamps and clears [`FLAG_RESPONDER_STAMPED`].
    pub fn clear_responder_stamps(&mut self) {
        self.set_responder_rx_ns(0);
        self.set_responder_tx_ns(0);
        let flags = self.flags();
        self.set_flags(flags & !FLAG_RESPONDER_STAMPED);
    }

    /// Mutable access to the padding (from the header_len field to the end).
    pub fn padding_mut(&mut self) -> &mut [u8] {
        let header_len = usize::from(self.header_len());
        &mut self.buffer.as_mut()[header_len..]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The contents of a probe header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Repr {
    /// Random per run; lets a meter drop responses from other runs.
    pub run_id: u32,
    /// Flow number within the run.
    pub flow: u32,
    /// Sequence number within the flow.
    pub seq: u64,
    /// When the schedule said the probe was due (sender clock, ns since the
    /// Unix epoch).
    pub intended_send_ns: u64,
    /// When the sender handed the probe to the stack (sender clock, ns).
    pub actual_send_ns: u64,
    /// `(responder_rx_ns, responder_tx_ns)` in the responder's clock, present
    /// iff flag bit 0 is set.
    pub responder: Option<(u64, u64)>,
    /// Whether the header carries `responder_clock`, and what it says.
    pub responder_clock: ResponderClock,
}

/// The `responder_clock` field of a probe header: which clock the responder's
/// stamps come from.
///
/// The identity is an opaque 64-bit value: two stamps are in one clock when
/// their writers name the same identity. latlab's reflector names the
/// `CLOCK_REALTIME` of its kernel (`latlab_io::clock::clock_identity`); a
/// sender compares it with its own and never takes the clock as shared on
/// anything else (a different identity, or no answer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ResponderClock {
    /// A header of 56 to 63 bytes: no room, not asked. The version-1 probes
    /// of senders that predate the field are all of this kind.
    #[default]
    NotAsked,
    /// A header of 64 bytes or more, flag bit 1 clear: the sender asked and
    /// the responder did not answer (a responder that predates the field, or
    /// one that does not stamp).
    Asked,
    /// Flag bit 1 set in a header of 64 bytes or more: the responder's clock.
    Named(u64),
}

impl Repr {
    /// Parses a probe.
    ///
    /// Errors, in the order checked: buffer shorter than [`HEADER_LEN`] →
    /// [`Error::Truncated`]; magic ≠ [`MAGIC`] → [`Error::BadMagic`];
    /// version ≠ [`VERSION`] → [`Error::UnsupportedVersion`]; header_len
    /// field < 56 → [`Error::BadLength`]; header_len field > buffer →
    /// [`Error::Truncated`]. Reserved flag bits are ignored; the stamps are
    /// read only when flag bit 0 is set, the responder's clock only in a
    /// header of [`CLOCK_HEADER_LEN`] bytes or more with flag bit 1 set.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        if packet.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if packet.magic() != MAGIC {
            return Err(Error::BadMagic);
        }
        if packet.version() != VERSION {
            return Err(Error::UnsupportedVersion);
        }
        packet.check_len()?;
        Ok(Repr {
            run_id: packet.run_id(),
            flow: packet.flow(),
            seq: packet.seq(),
            intended_send_ns: packet.intended_send_ns(),
            actual_send_ns: packet.actual_send_ns(),
            responder: packet.responder_stamps(),
            responder_clock: packet.responder_clock(),
        })
    }

    /// Length of the header [`emit`](Self::emit) writes: [`HEADER_LEN`], or
    /// [`CLOCK_HEADER_LEN`] when it carries `responder_clock`.
    pub const fn header_len(&self) -> usize {
        match self.responder_clock {
            ResponderClock::NotAsked => HEADER_LEN,
            ResponderClock::Asked | ResponderClock::Named(_) => CLOCK_HEADER_LEN,
        }
    }

    /// Smallest buffer a probe fits in: [`Repr::header_len`] (padding is up
    /// to the caller).
    pub const fn buffer_len(&self) -> usize {
        self.header_len()
    }

    /// Writes the header (magic, version 1, flags, header_len 56 or 64, all
    /// fields; stamps as 0 and flag bit 0 clear when `responder` is `None`;
    /// with `responder_clock` not [`ResponderClock::NotAsked`], bytes 56..64
    /// as the identity, or 0 with flag bit 1 clear when only asked). Bytes
    /// past the header (padding) are never touched.
    ///
    /// # Panics
    /// Panics if the buffer is shorter than [`Repr::buffer_len`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        packet.set_magic();
        packet.set_version(VERSION);
        packet.set_header_len(self.header_len() as u16);
        packet.set_run_id(self.run_id);
        packet.set_flow(self.flow);
        packet.set_seq(self.seq);
        packet.set_intended_send_ns(self.intended_send_ns);
        packet.set_actual_send_ns(self.actual_send_ns);
        packet.set_flags(0);
        match self.responder {
            Some((rx, tx)) => packet.set_responder_stamps(rx, tx),
            None => packet.clear_responder_stamps(),
        }
        match self.responder_clock {
            ResponderClock::NotAsked => {}
            ResponderClock::Asked => {
                be::set_u64(packet.buffer.as_mut(), field::RESPONDER_CLOCK, 0);
            }
            ResponderClock::Named(clock) => {
                packet.set_responder_clock(clock);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The 64-byte example from PROBE_FORMAT.md: stamped by the responder,
    /// 8 bytes of 0xa5 padding.
    const GOLDEN: [u8; 64] = [
        0x4c, 0x4c, 0x50, 0x42, 0x01, 0x01, 0x00, 0x38, // LLPB v1 flags=1 len=56
        0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x02, // run_id, flow
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, // seq 42
        0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x00, 0x00, // intended
        0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x00, 0xfa, // actual (+250)
        0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x27, 0x10, // responder rx (+10000)
        0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x28, 0xa0, // responder tx (+10400)
        0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, // padding
    ];

    const T0: u64 = 1_700_000_000_000_000_000;

    fn golden_repr() -> Repr {
        Repr {
            run_id: 0xdead_beef,
            flow: 2,
            seq: 42,
            intended_send_ns: T0,
            actual_send_ns: T0 + 250,
            responder: Some((T0 + 10_000, T0 + 10_400)),
            responder_clock: ResponderClock::NotAsked,
        }
    }

    /// The 72-byte example with the responder's clock from PROBE_FORMAT.md:
    /// the golden probe sent with a 64-byte header (asking which clock the
    /// responder stamps with), answered with clock `0x0123456789abcdef`.
    const GOLDEN_CLOCK: [u8; 72] = [
        0x4c, 0x4c, 0x50, 0x42, 0x01, 0x03, 0x00, 0x40, // LLPB v1 flags=3 len=64
        0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x02, // run_id, flow
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, // seq 42
        0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x00, 0x00, // intended
        0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x00, 0xfa, // actual (+250)
        0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x27, 0x10, // responder rx (+10000)
        0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x28, 0xa0, // responder tx (+10400)
        0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, // responder clock
        0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, // padding
    ];

    const CLOCK: u64 = 0x0123_4567_89ab_cdef;

    #[test]
    fn golden_with_the_responders_clock() {
        let packet = Packet::new_checked(&GOLDEN_CLOCK[..]).unwrap();
        assert!(is_probe(&GOLDEN_CLOCK));
        assert_eq!(packet.header_len(), 64);
        assert!(packet.has_clock_field());
        assert_eq!(packet.responder_clock(), ResponderClock::Named(CLOCK));
        assert_eq!(packet.padding(), &[0xa5; 8]);
        let named = Repr {
            responder_clock: ResponderClock::Named(CLOCK),
            ..golden_repr()
        };
        assert_eq!(Repr::parse(&packet).unwrap(), named);
        let mut buf = [0xa5u8; 72];
        named.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, GOLDEN_CLOCK);
        // The sender's probe asked; the responder stamps and names its clock in place.
        let asked = Repr {
            responder: None,
            responder_clock: ResponderClock::Asked,
            ..golden_repr()
        };
        let mut buf = [0xa5u8; 72];
        let mut packet = Packet::new_unchecked(&mut buf[..]);
        asked.emit(&mut packet);
        assert_eq!(packet.flags(), 0);
        assert_eq!(packet.responder_clock(), ResponderClock::Asked);
        assert_eq!(&buf[56..64], &[0; 8]);
        let mut packet = Packet::new_checked(&mut buf[..]).unwrap();
        packet.set_responder_stamps(T0 + 10_000, T0 + 10_400);
        assert!(packet.set_responder_clock(CLOCK));
        assert_eq!(buf, GOLDEN_CLOCK);
    }

    #[test]
    fn a_responder_that_predates_the_clock_leaves_the_question_unanswered() {
        // It stamps bytes 40..56 and flag bit 0 only (PROBE_FORMAT.md's responder rules).
        let asked = Repr {
            responder: None,
            responder_clock: ResponderClock::Asked,
            ..golden_repr()
        };
        let mut buf = [0xa5u8; 72];
        asked.emit(&mut Packet::new_unchecked(&mut buf[..]));
        Packet::new_checked(&mut buf[..])
            .unwrap()
            .set_responder_stamps(1, 2);
        let echoed = Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap();
        assert_eq!(echoed.responder, Some((1, 2)));
        assert_eq!(echoed.responder_clock, ResponderClock::Asked);
    }

    #[test]
    fn a_header_without_the_field_never_carries_a_clock() {
        // The 56-byte golden probe: bytes 56..64 are the sender's padding, never written.
        let mut buf = GOLDEN;
        let mut packet = Packet::new_checked(&mut buf[..]).unwrap();
        assert!(!packet.has_clock_field());
        assert!(!packet.set_responder_clock(CLOCK));
        assert_eq!(buf, GOLDEN);
        // Flag bit 1 in a header too short for the field is ignored, in 56 to 63 bytes.
        for header_len in [56u16, 60, 63] {
            let mut buf = GOLDEN;
            buf[5] |= FLAG_RESPONDER_CLOCK;
            Packet::new_unchecked(&mut buf[..]).set_header_len(header_len);
            let packet = Packet::new_checked(&buf[..]).unwrap();
            assert_eq!(packet.responder_clock(), ResponderClock::NotAsked);
            assert_eq!(
                Repr::parse(&packet).unwrap().responder_clock,
                ResponderClock::NotAsked
            );
        }
        // A header that claims the field but is longer than the datagram is truncated.
        let mut buf = GOLDEN_CLOCK;
        Packet::new_unchecked(&mut buf[..]).set_header_len(73);
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&buf[..])),
            Err(Error::Truncated)
        );
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&GOLDEN_CLOCK[..60])),
            Err(Error::Truncated)
        );
    }

    #[test]
    fn golden_constants() {
        assert_eq!(T0, 0x1797_9cfe_362a_0000);
        assert_eq!(&GOLDEN[..4], b"LLPB");
    }

    #[test]
    fn parse_golden() {
        assert!(is_probe(&GOLDEN));
        let packet = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(packet.magic(), MAGIC);
        assert_eq!(packet.version(), 1);
        assert_eq!(packet.flags(), FLAG_RESPONDER_STAMPED);
        assert_eq!(packet.header_len(), 56);
        assert_eq!(packet.run_id(), 0xdead_beef);
        assert_eq!(packet.flow(), 2);
        assert_eq!(packet.seq(), 42);
        assert_eq!(packet.intended_send_ns(), T0);
        assert_eq!(packet.actual_send_ns(), T0 + 250);
        assert_eq!(packet.responder_rx_ns(), T0 + 10_000);
        assert_eq!(packet.responder_tx_ns(), T0 + 10_400);
        assert_eq!(packet.padding(), &[0xa5; 8]);
        assert_eq!(Repr::parse(&packet).unwrap(), golden_repr());
    }

    #[test]
    fn emit_golden_keeps_padding() {
        let mut buf = [0xa5u8; 64];
        golden_repr().emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn stamping_in_place() {
        let mut unstamped = golden_repr();
        unstamped.responder = None;
        unstamped.actual_send_ns = 0;
        let mut buf = [0xa5u8; 64];
        let mut packet = Packet::new_unchecked(&mut buf[..]);
        unstamped.emit(&mut packet);
        assert_eq!(packet.flags(), 0);
        assert_eq!(packet.responder_stamps(), None);
        assert_eq!((packet.responder_rx_ns(), packet.responder_tx_ns()), (0, 0));
        packet.set_actual_send_ns(T0 + 250);
        packet.set_responder_stamps(T0 + 10_000, T0 + 10_400);
        assert_eq!(buf, GOLDEN);
        let mut packet = Packet::new_checked(&mut buf[..]).unwrap();
        packet.clear_responder_stamps();
        assert_eq!(packet.responder_stamps(), None);
        assert_eq!(&buf[40..56], &[0; 16]);
    }

    #[test]
    fn reserved_flags_ignored_and_kept() {
        let mut buf = GOLDEN;
        buf[5] = 0xf0;
        let repr = Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap();
        assert_eq!(repr.responder, None);
        let mut packet = Packet::new_unchecked(&mut buf[..]);
        packet.set_responder_stamps(1, 2);
        assert_eq!(packet.flags(), 0xf1);
        let repr = Repr::parse(&Packet::new_checked(&buf[..]).unwrap()).unwrap();
        assert_eq!(repr.responder, Some((1, 2)));
    }

    #[test]
    fn roundtrip_many() {
        let mut rng = crate::testutil::XorShift(77);
        for _ in 0..1000 {
            let repr = Repr {
                run_id: rng.next_u64() as u32,
                flow: rng.next_u64() as u32,
                seq: rng.next_u64(),
                intended_send_ns: rng.next_u64(),
                actual_send_ns: rng.next_u64(),
                responder: (rng.next_u64() % 2 == 0).then(|| (rng.next_u64(), rng.next_u64())),
                responder_clock: match rng.next_u64() % 3 {
                    0 => ResponderClock::NotAsked,
                    1 => ResponderClock::Asked,
                    _ => ResponderClock::Named(rng.next_u64()),
                },
            };
            let header = repr.buffer_len();
            let len = header + (rng.next_u64() % 1400) as usize;
            let mut buf = vec![0x5au8; len];
            repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
            assert!(is_probe(&buf));
            assert_eq!(
                Repr::parse(&Packet::new_checked(&buf[..]).unwrap()),
                Ok(repr)
            );
            assert!(buf[header..].iter().all(|&b| b == 0x5a));
        }
    }

    #[test]
    fn longer_header_len_is_accepted() {
        let mut buf = GOLDEN;
        Packet::new_unchecked(&mut buf[..]).set_header_len(60);
        let packet = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.padding(), &[0xa5; 4]);
        assert_eq!(Repr::parse(&packet).unwrap(), golden_repr());
        assert!(is_probe(&buf));
    }

    #[test]
    fn rejects_bad_fields() {
        let check = |at: usize, value: u8, want: Error| {
            let mut buf = GOLDEN;
            buf[at] = value;
            assert_eq!(Repr::parse(&Packet::new_unchecked(&buf[..])), Err(want));
            assert!(!is_probe(&buf));
        };
        check(0, b'X', Error::BadMagic);
        check(3, b'b', Error::BadMagic);
        check(4, 0, Error::UnsupportedVersion);
        check(4, 2, Error::UnsupportedVersion);
        check(7, 55, Error::BadLength);
        check(7, 65, Error::Truncated);
        check(6, 1, Error::Truncated);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..HEADER_LEN {
            assert_eq!(Packet::new_checked(&GOLDEN[..len]), Err(Error::Truncated));
            assert_eq!(
                Repr::parse(&Packet::new_unchecked(&GOLDEN[..len])),
                Err(Error::Truncated)
            );
            assert!(!is_probe(&GOLDEN[..len]));
        }
        for len in HEADER_LEN..=GOLDEN.len() {
            assert!(Repr::parse(&Packet::new_unchecked(&GOLDEN[..len])).is_ok());
        }
    }

    #[test]
    fn random_inputs_never_panic() {
        crate::testutil::random_inputs(0x11b, &GOLDEN[..8], |buf| {
            let looks = is_probe(buf);
            let parsed = Repr::parse(&Packet::new_unchecked(&*buf));
            assert_eq!(looks, parsed.is_ok());
            if let Ok(mut packet) = Packet::new_checked(&mut *buf) {
                packet.set_responder_stamps(1, 2);
                packet.set_actual_send_ns(3);
                let asked = packet.has_clock_field();
                assert_eq!(packet.set_responder_clock(4), asked);
                let _ = packet.responder_clock();
                let _ = packet.padding_mut();
            }
        });
    }
}
