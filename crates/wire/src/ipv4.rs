//! IPv4 headers (RFC 791), options allowed.
//!
//! The payload starts at IHL × 4 and ends at the total length; anything in
//! the buffer past the total length (e.g. Ethernet padding) is ignored.
//! [`Repr::parse`] verifies the header checksum and rejects fragments;
//! [`Repr::emit`] always writes a 20-byte header without options, with DF
//! set and a valid checksum.

use core::fmt;
use std::net::Ipv4Addr;

use crate::{be, checksum, Error, Result};

/// The IPv4 protocol field (the next header).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// ICMP, `1`.
    Icmp,
    /// TCP, `6`.
    Tcp,
    /// UDP, `17`.
    Udp,
    /// Any other value. Never holds one of the values above.
    Unknown(u8),
}

impl From<u8> for Protocol {
    fn from(value: u8) -> Self {
        match value {
            1 => Protocol::Icmp,
            6 => Protocol::Tcp,
            17 => Protocol::Udp,
            other => Protocol::Unknown(other),
        }
    }
}

impl From<Protocol> for u8 {
    fn from(value: Protocol) -> Self {
        match value {
            Protocol::Icmp => 1,
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Unknown(other) => other,
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Protocol::Icmp => f.write_str("ICMP"),
            Protocol::Tcp => f.write_str("TCP"),
            Protocol::Udp => f.write_str("UDP"),
            Protocol::Unknown(v) => write!(f, "0x{v:02x}"),
        }
    }
}

mod field {
    use crate::Field;

    pub(crate) const VER_IHL: usize = 0;
    pub(crate) const DSCP_ECN: usize = 1;
    pub(crate) const LENGTH: Field = 2..4;
    pub(crate) const IDENT: Field = 4..6;
    pub(crate) const FLG_OFF: Field = 6..8;
    pub(crate) const TTL: usize = 8;
    pub(crate) const PROTOCOL: usize = 9;
    pub(crate) const CHECKSUM: Field = 10..12;
    pub(crate) const SRC_ADDR: Field = 12..16;
    pub(crate) const DST_ADDR: Field = 16..20;
}

/// Length of an IPv4 header without options (IHL = 5).
pub const HEADER_LEN: usize = field::DST_ADDR.end;

/// Largest payload a single IPv4 packet with a 20-byte header can carry.
pub const MAX_PAYLOAD_LEN: usize = u16::MAX as usize - HEADER_LEN;

const FLAG_DF: u16 = 0x4000;
const FLAG_MF: u16 = 0x2000;
const OFFSET_MASK: u16 = 0x1fff;

/// A read/write view of an IPv4 packet.
///
/// Invariant after [`Packet::new_checked`] / [`Packet::check_len`]:
/// `20 <= header_len() <= total_len() <= buffer length`, so every getter,
/// [`Packet::payload`] and [`Packet::verify_checksum`] are in bounds.
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

    /// Checks the length fields against each other and the buffer:
    ///
    /// * buffer shorter than 20 bytes or than IHL × 4 → [`Error::Truncated`];
    /// * IHL < 5 → [`Error::BadLength`];
    /// * total length < IHL × 4 → [`Error::BadLength`];
    /// * total length > buffer → [`Error::Truncated`].
    ///
    /// The version and checksum are not looked at; [`Repr::parse`] does that.
    pub fn check_len(&self) -> Result<()> {
        let len = self.buffer.as_ref().len();
        if len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let header_len = usize::from(self.header_len());
        if header_len < HEADER_LEN {
            return Err(Error::BadLength);
        }
        if len < header_len {
            return Err(Error::Truncated);
        }
        let total_len = usize::from(self.total_len());
        if total_len < header_len {
            return Err(Error::BadLength);
        }
        if total_len > len {
            return Err(Error::Truncated);
        }
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Version field (4 for IPv4).
    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// Header length in bytes (IHL × 4), options included.
    pub fn header_len(&self) -> u8 {
        (self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    /// Differentiated services code point.
    pub fn dscp(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] >> 2
    }

    /// Explicit congestion notification bits.
    pub fn ecn(&self) -> u8 {
        self.buffer.as_ref()[field::DSCP_ECN] & 0x03
    }

    /// Total length (header + payload) in bytes.
    pub fn total_len(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Identification.
    pub fn ident(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::IDENT)
    }

    /// Don't Fragment flag.
    pub fn dont_frag(&self) -> bool {
        be::u16(self.buffer.as_ref(), field::FLG_OFF) & FLAG_DF != 0
    }

    /// More Fragments flag.
    pub fn more_frags(&self) -> bool {
        be::u16(self.buffer.as_ref(), field::FLG_OFF) & FLAG_MF != 0
    }

    /// Fragment offset in bytes (the field × 8).
    pub fn frag_offset(&self) -> u16 {
        (be::u16(self.buffer.as_ref(), field::FLG_OFF) & OFFSET_MASK) << 3
    }

    /// Time to live.
    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    /// Protocol of the payload.
    pub fn protocol(&self) -> Protocol {
        Protocol::from(self.buffer.as_ref()[field::PROTOCOL])
    }

    /// Header checksum field.
    pub fn checksum(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Source address.
    pub fn src_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(be::u32(self.buffer.as_ref(), field::SRC_ADDR))
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Ipv4Addr {
        Ipv4Addr::from(be::u32(self.buffer.as_ref(), field::DST_ADDR))
    }

    /// Whether the header checksum (over IHL × 4 bytes, options included)
    /// is correct.
    pub fn verify_checksum(&self) -> bool {
        let header_len = usize::from(self.header_len());
        checksum::data(&self.buffer.as_ref()[..header_len]) == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// Option bytes: from byte 20 up to IHL × 4 (empty without options).
    pub fn options(&self) -> &'a [u8] {
        let header_len = usize::from(self.header_len());
        &self.buffer.as_ref()[HEADER_LEN..header_len]
    }

    /// The payload: from IHL × 4 up to the total length.
    pub fn payload(&self) -> &'a [u8] {
        let range = usize::from(self.header_len())..usize::from(self.total_len());
        &self.buffer.as_ref()[range]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the version field.
    pub fn set_version(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0x0f) | (value << 4);
    }

    /// Sets the header length in bytes; it is stored as `value / 4`.
    pub fn set_header_len(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::VER_IHL];
        *b = (*b & 0xf0) | ((value / 4) & 0x0f);
    }

    /// Sets the DSCP (6 bits).
    pub fn set_dscp(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & 0x03) | (value << 2);
    }

    /// Sets the ECN bits (2 bits).
    pub fn set_ecn(&mut self, value: u8) {
        let b = &mut self.buffer.as_mut()[field::DSCP_ECN];
        *b = (*b & !0x03) | (value & 0x03);
    }

    /// Sets the total length.
    pub fn set_total_len(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Sets the identification.
    pub fn set_ident(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::IDENT, value);
    }

    /// Clears the flags and the fragment offset.
    pub fn clear_flags(&mut self) {
        be::set_u16(self.buffer.as_mut(), field::FLG_OFF, 0);
    }

    fn update_flg_off(&mut self, f: impl FnOnce(u16) -> u16) {
        let raw = be::u16(self.buffer.as_ref(), field::FLG_OFF);
        be::set_u16(self.buffer.as_mut(), field::FLG_OFF, f(raw));
    }

    /// Sets or clears Don't Fragment.
    pub fn set_dont_frag(&mut self, value: bool) {
        self.update_flg_off(|raw| if value { raw | FLAG_DF } else { raw & !FLAG_DF });
    }

    /// Sets or clears More Fragments.
    pub fn set_more_frags(&mut self, value: bool) {
        self.update_flg_off(|raw| if value { raw | FLAG_MF } else { raw & !FLAG_MF });
    }

    /// Sets the fragment offset in bytes (stored divided by 8).
    pub fn set_frag_offset(&mut self, value: u16) {
        self.update_flg_off(|raw| (raw & !OFFSET_MASK) | ((value >> 3) & OFFSET_MASK));
    }

    /// Sets the time to live.
    pub fn set_ttl(&mut self, value: u8) {
        self.buffer.as_mut()[field::TTL] = value;
    }

    /// Sets the protocol.
    pub fn set_protocol(&mut self, value: Protocol) {
        self.buffer.as_mut()[field::PROTOCOL] = value.into();
    }

    /// Sets the checksum field as is (see [`fill_checksum`](Self::fill_checksum)).
    pub fn set_checksum(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, value: Ipv4Addr) {
        be::set_u32(self.buffer.as_mut(), field::SRC_ADDR, value.into());
    }

    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, value: Ipv4Addr) {
        be::set_u32(self.buffer.as_mut(), field::DST_ADDR, value.into());
    }

    /// Computes the header checksum over IHL × 4 bytes and stores it.
    /// Call it after every other header field is final.
    pub fn fill_checksum(&mut self) {
        self.set_checksum(0);
        let header_len = usize::from(self.header_len());
        let sum = checksum::internet(&self.buffer.as_ref()[..header_len]);
        self.set_checksum(sum);
    }

    /// Mutable access to the payload (IHL × 4 up to the total length).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = usize::from(self.header_len())..usize::from(self.total_len());
        &mut self.buffer.as_mut()[range]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of an IPv4 header that latlab cares about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source address.
    pub src_addr: Ipv4Addr,
    /// Destination address.
    pub dst_addr: Ipv4Addr,
    /// Protocol of the payload.
    pub protocol: Protocol,
    /// Payload length in bytes (total length − header length).
    /// At most [`MAX_PAYLOAD_LEN`] for [`emit`](Self::emit).
    pub payload_len: usize,
    /// Time to live.
    pub ttl: u8,
}

impl Repr {
    /// Parses and validates an IPv4 header.
    ///
    /// Fails with [`Error::Truncated`] / [`Error::BadLength`] as
    /// [`Packet::check_len`] does, [`Error::UnsupportedVersion`] if the
    /// version is not 4, [`Error::BadChecksum`] if the header checksum is
    /// wrong and [`Error::Malformed`] for a fragment (MF set or non-zero
    /// offset). Options are skipped.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(packet: &Packet<&T>) -> Result<Repr> {
        if packet.buffer.as_ref().len() < HEADER_LEN {
            return Err(Error::Truncated);
        }
        if packet.version() != 4 {
            return Err(Error::UnsupportedVersion);
        }
        packet.check_len()?;
        if !packet.verify_checksum() {
            return Err(Error::BadChecksum);
        }
        if packet.more_frags() || packet.frag_offset() != 0 {
            return Err(Error::Malformed);
        }
        Ok(Repr {
            src_addr: packet.src_addr(),
            dst_addr: packet.dst_addr(),
            protocol: packet.protocol(),
            payload_len: usize::from(packet.total_len()) - usize::from(packet.header_len()),
            ttl: packet.ttl(),
        })
    }

    /// Length of the header [`emit`](Self::emit) writes: [`HEADER_LEN`].
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Length of the whole packet: header + payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes a 20-byte header (no options, DSCP/ECN 0, identification 0,
    /// DF set) with a valid checksum. The payload is not touched.
    ///
    /// # Panics
    /// Panics if the buffer is shorter than [`HEADER_LEN`] or if
    /// `payload_len` exceeds [`MAX_PAYLOAD_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, packet: &mut Packet<T>) {
        let total_len =
            u16::try_from(self.buffer_len()).expect("IPv4 payload_len exceeds MAX_PAYLOAD_LEN");
        packet.set_version(4);
        packet.set_header_len(HEADER_LEN as u8);
        packet.set_dscp(0);
        packet.set_ecn(0);
        packet.set_total_len(total_len);
        packet.set_ident(0);
        packet.clear_flags();
        packet.set_dont_frag(true);
        packet.set_ttl(self.ttl);
        packet.set_protocol(self.protocol);
        packet.set_src_addr(self.src_addr);
        packet.set_dst_addr(self.dst_addr);
        packet.fill_checksum();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 10.0.0.1 → 10.0.0.2, UDP, TTL 64, DF, ident 0, 12-byte payload.
    /// Checksum 0x26cb computed independently (python3, RFC 1071).
    const GOLDEN: [u8; 32] = [
        0x45, 0x00, 0x00, 0x20, // ver/ihl, tos, total len 32
        0x00, 0x00, 0x40, 0x00, // ident, DF
        0x40, 0x11, 0x26, 0xcb, // ttl 64, udp, checksum
        0x0a, 0x00, 0x00, 0x01, // src
        0x0a, 0x00, 0x00, 0x02, // dst
        0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
    ];

    fn golden_repr() -> Repr {
        Repr {
            src_addr: Ipv4Addr::new(10, 0, 0, 1),
            dst_addr: Ipv4Addr::new(10, 0, 0, 2),
            protocol: Protocol::Udp,
            payload_len: 12,
            ttl: 64,
        }
    }

    #[test]
    fn wikipedia_checksum_example() {
        // The header from Wikipedia's "IPv4 header checksum" article.
        let mut header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        let mut packet = Packet::new_unchecked(&mut header[..]);
        assert!(packet.verify_checksum());
        packet.set_checksum(0);
        packet.fill_checksum();
        assert_eq!(packet.checksum(), 0xb861);
    }

    #[test]
    fn parse_golden() {
        let packet = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(packet.version(), 4);
        assert_eq!(packet.header_len(), 20);
        assert_eq!(packet.total_len(), 32);
        assert!(packet.dont_frag());
        assert!(!packet.more_frags());
        assert_eq!(packet.frag_offset(), 0);
        assert_eq!(packet.checksum(), 0x26cb);
        assert!(packet.verify_checksum());
        assert_eq!(packet.options(), &[] as &[u8]);
        assert_eq!(packet.payload(), &GOLDEN[20..]);
        assert_eq!(Repr::parse(&packet).unwrap(), golden_repr());
    }

    #[test]
    fn emit_golden() {
        let mut buf = [0xffu8; 32];
        buf[20..].copy_from_slice(&GOLDEN[20..]);
        let repr = golden_repr();
        assert_eq!(repr.buffer_len(), 32);
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn trailing_bytes_are_ignored() {
        let mut buf = [0u8; 40];
        buf[..32].copy_from_slice(&GOLDEN);
        let packet = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.payload().len(), 12);
        assert_eq!(Repr::parse(&packet).unwrap(), golden_repr());
    }

    #[test]
    fn options_are_skipped() {
        // IHL 6 with one 4-byte option (NOP NOP NOP EOL), checksum refilled.
        let mut buf = [0u8; 36];
        buf[..20].copy_from_slice(&GOLDEN[..20]);
        buf[20..24].copy_from_slice(&[1, 1, 1, 0]);
        buf[24..].copy_from_slice(&GOLDEN[20..]);
        let mut packet = Packet::new_unchecked(&mut buf[..]);
        packet.set_header_len(24);
        packet.set_total_len(36);
        packet.fill_checksum();
        let packet = Packet::new_checked(&buf[..]).unwrap();
        assert_eq!(packet.options(), &[1, 1, 1, 0]);
        assert_eq!(packet.payload(), &GOLDEN[20..]);
        assert_eq!(Repr::parse(&packet).unwrap(), golden_repr());
    }

    #[test]
    fn rejects_bad_fields() {
        let check = |f: &dyn Fn(&mut Packet<&mut [u8]>), refill: bool, want: Error| {
            let mut buf = GOLDEN;
            let mut packet = Packet::new_unchecked(&mut buf[..]);
            f(&mut packet);
            if refill {
                packet.fill_checksum();
            }
            assert_eq!(Repr::parse(&Packet::new_unchecked(&buf[..])), Err(want));
        };
        check(&|p| p.set_version(6), true, Error::UnsupportedVersion);
        check(&|p| p.set_header_len(16), false, Error::BadLength);
        check(&|p| p.set_header_len(0), false, Error::BadLength);
        check(&|p| p.set_header_len(60), false, Error::Truncated);
        check(&|p| p.set_total_len(19), true, Error::BadLength);
        check(&|p| p.set_total_len(33), true, Error::Truncated);
        check(&|p| p.set_ttl(63), false, Error::BadChecksum);
        check(&|p| p.set_more_frags(true), true, Error::Malformed);
        check(&|p| p.set_frag_offset(8), true, Error::Malformed);
    }

    #[test]
    fn every_bit_flip_is_detected() {
        for bit in 0..HEADER_LEN * 8 {
            let mut buf = GOLDEN;
            buf[bit / 8] ^= 1 << (bit % 8);
            assert!(
                Repr::parse(&Packet::new_unchecked(&buf[..])).is_err(),
                "bit {bit}"
            );
        }
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..GOLDEN.len() {
            assert_eq!(
                Packet::new_checked(&GOLDEN[..len]),
                Err(Error::Truncated),
                "len {len}"
            );
            let unchecked = Packet::new_unchecked(&GOLDEN[..len]);
            assert_eq!(Repr::parse(&unchecked), Err(Error::Truncated), "len {len}");
        }
    }

    #[test]
    fn setters_roundtrip() {
        let mut buf = GOLDEN;
        let mut p = Packet::new_unchecked(&mut buf[..]);
        p.set_dscp(46);
        p.set_ecn(2);
        p.set_ident(0xbeef);
        p.set_frag_offset(1480);
        p.set_more_frags(true);
        p.set_dont_frag(false);
        p.set_protocol(Protocol::Unknown(99));
        assert_eq!((p.dscp(), p.ecn(), p.ident()), (46, 2, 0xbeef));
        assert_eq!(p.frag_offset(), 1480);
        assert!(p.more_frags() && !p.dont_frag());
        assert_eq!(p.protocol(), Protocol::Unknown(99));
        assert_eq!(p.version(), 4);
        assert_eq!(p.header_len(), 20);
        for v in 0..=255u8 {
            assert_eq!(u8::from(Protocol::from(v)), v);
        }
    }

    #[test]
    fn random_inputs_never_panic() {
        crate::testutil::random_inputs(0x1b4, &GOLDEN[..4], |buf| {
            if let Ok(packet) = Packet::new_checked(&*buf) {
                let _ = (packet.payload(), packet.options(), packet.verify_checksum());
                let _ = Repr::parse(&packet);
            }
            let _ = Repr::parse(&Packet::new_unchecked(&*buf));
        });
    }
}
