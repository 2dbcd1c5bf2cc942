//! Ethernet II frames: destination and source MAC address, EtherType, payload.
//!
//! No 802.1Q tags, no length/type disambiguation: the two bytes after the
//! addresses are always read as an EtherType, and the payload is everything
//! after byte [`HEADER_LEN`] (any trailing padding or FCS is left to the
//! caller).

use core::fmt;

use crate::{Error, Result};

/// A 48-bit MAC address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Address(pub [u8; 6]);

impl Address {
    /// The broadcast address `ff:ff:ff:ff:ff:ff`.
    pub const BROADCAST: Address = Address([0xff; 6]);

    /// Builds an address from the first six bytes of `data`.
    ///
    /// # Panics
    /// Panics if `data` is shorter than six bytes.
    pub fn from_bytes(data: &[u8]) -> Address {
        let mut bytes = [0u8; 6];
        bytes.copy_from_slice(&data[..6]);
        Address(bytes)
    }

    /// The six address bytes.
    pub const fn as_bytes(&self) -> &[u8; 6] {
        &self.0
    }

    /// Whether this is the broadcast address.
    pub fn is_broadcast(&self) -> bool {
        *self == Self::BROADCAST
    }

    /// Whether the group bit (least significant bit of the first byte) is set.
    pub const fn is_multicast(&self) -> bool {
        self.0[0] & 0x01 != 0
    }

    /// Whether this is a unicast address.
    pub const fn is_unicast(&self) -> bool {
        !self.is_multicast()
    }
}

impl fmt::Display for Address {
    /// Lower-case hex, colon separated: `aa:bb:cc:dd:ee:ff`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = &self.0;
        write!(
            f,
            "{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}",
            b[0], b[1], b[2], b[3], b[4], b[5]
        )
    }
}

/// The EtherType field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EtherType {
    /// `0x0800`
    Ipv4,
    /// `0x0806`
    Arp,
    /// `0x86dd`
    Ipv6,
    /// Any other value. Never holds one of the values above.
    Unknown(u16),
}

impl From<u16> for EtherType {
    fn from(value: u16) -> Self {
        match value {
            0x0800 => EtherType::Ipv4,
            0x0806 => EtherType::Arp,
            0x86dd => EtherType::Ipv6,
            other => EtherType::Unknown(other),
        }
    }
}

impl From<EtherType> for u16 {
    fn from(value: EtherType) -> Self {
        match value {
            EtherType::Ipv4 => 0x0800,
            EtherType::Arp => 0x0806,
            EtherType::Ipv6 => 0x86dd,
            EtherType::Unknown(other) => other,
        }
    }
}

impl fmt::Display for EtherType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EtherType::Ipv4 => f.write_str("IPv4"),
            EtherType::Arp => f.write_str("ARP"),
            EtherType::Ipv6 => f.write_str("IPv6"),
            EtherType::Unknown(v) => write!(f, "0x{v:04x}"),
        }
    }
}

mod field {
    use crate::{Field, Rest};

    pub(crate) const DESTINATION: Field = 0..6;
    pub(crate) const SOURCE: Field = 6..12;
    pub(crate) const ETHERTYPE: Field = 12..14;
    pub(crate) const PAYLOAD: Rest = 14..;
}

/// Length of the Ethernet II header.
pub const HEADER_LEN: usize = field::PAYLOAD.start;

/// A read/write view of an Ethernet II frame.
///
/// Invariant after [`Frame::new_checked`] / [`Frame::check_len`]: the buffer
/// holds at least [`HEADER_LEN`] bytes, so no getter or setter can panic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without checking its length.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Returns [`Error::Truncated`] if the buffer is shorter than the header.
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

    /// Length of the header: always [`HEADER_LEN`].
    pub const fn header_len() -> usize {
        HEADER_LEN
    }

    /// Destination address.
    pub fn dst_addr(&self) -> Address {
        Address::from_bytes(&self.buffer.as_ref()[field::DESTINATION])
    }

    /// Source address.
    pub fn src_addr(&self) -> Address {
        Address::from_bytes(&self.buffer.as_ref()[field::SOURCE])
    }

    /// EtherType.
    pub fn ethertype(&self) -> EtherType {
        EtherType::from(crate::be::u16(self.buffer.as_ref(), field::ETHERTYPE))
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Frame<&'a T> {
    /// Everything after the header.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Sets the destination address.
    pub fn set_dst_addr(&mut self, value: Address) {
        self.buffer.as_mut()[field::DESTINATION].copy_from_slice(&value.0);
    }

    /// Sets the source address.
    pub fn set_src_addr(&mut self, value: Address) {
        self.buffer.as_mut()[field::SOURCE].copy_from_slice(&value.0);
    }

    /// Sets the EtherType.
    pub fn set_ethertype(&mut self, value: EtherType) {
        crate::be::set_u16(self.buffer.as_mut(), field::ETHERTYPE, value.into());
    }

    /// Mutable access to everything after the header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::PAYLOAD]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Frame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of an Ethernet II header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source MAC address.
    pub src_addr: Address,
    /// Destination MAC address.
    pub dst_addr: Address,
    /// EtherType of the payload.
    pub ethertype: EtherType,
}

impl Repr {
    /// Reads the header of `frame`; fails with [`Error::Truncated`] if the
    /// buffer is shorter than [`HEADER_LEN`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<Repr> {
        frame.check_len()?;
        Ok(Repr {
            src_addr: frame.src_addr(),
            dst_addr: frame.dst_addr(),
            ethertype: frame.ethertype(),
        })
    }

    /// Length of the header this `Repr` emits: [`HEADER_LEN`].
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Length of a frame carrying `payload_len` payload bytes.
    pub const fn buffer_len(&self, payload_len: usize) -> usize {
        HEADER_LEN + payload_len
    }

    /// Writes the header into `frame`; the payload is not touched.
    ///
    /// # Panics
    /// Panics if the buffer is shorter than [`HEADER_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, frame: &mut Frame<T>) {
        frame.set_dst_addr(self.dst_addr);
        frame.set_src_addr(self.src_addr);
        frame.set_ethertype(self.ethertype);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame from 02:00:00:00:00:01 to 02:00:00:00:00:02 carrying IPv4,
    /// with a 4-byte payload.
    const GOLDEN: [u8; 18] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, // dst
        0x02, 0x00, 0x00, 0x00, 0x00, 0x01, // src
        0x08, 0x00, // IPv4
        0xde, 0xad, 0xbe, 0xef, // payload
    ];

    fn golden_repr() -> Repr {
        Repr {
            src_addr: Address([0x02, 0, 0, 0, 0, 0x01]),
            dst_addr: Address([0x02, 0, 0, 0, 0, 0x02]),
            ethertype: EtherType::Ipv4,
        }
    }

    #[test]
    fn address_display() {
        let a = Address([0xaa, 0xbb, 0xcc, 0x0d, 0xee, 0x0f]);
        assert_eq!(a.to_string(), "aa:bb:cc:0d:ee:0f");
        assert!(Address::BROADCAST.is_broadcast());
        assert!(Address::BROADCAST.is_multicast());
        assert!(a.is_unicast());
    }

    #[test]
    fn ethertype_roundtrip() {
        for v in [0x0800u16, 0x0806, 0x86dd, 0x88cc, 0] {
            assert_eq!(u16::from(EtherType::from(v)), v);
        }
        assert_eq!(EtherType::from(0x86dd), EtherType::Ipv6);
        assert_eq!(EtherType::from(0x88cc).to_string(), "0x88cc");
    }

    #[test]
    fn parse_golden() {
        let frame = Frame::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(frame.dst_addr().to_string(), "02:00:00:00:00:02");
        assert_eq!(frame.src_addr().to_string(), "02:00:00:00:00:01");
        assert_eq!(frame.ethertype(), EtherType::Ipv4);
        assert_eq!(frame.payload(), &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(Repr::parse(&frame).unwrap(), golden_repr());
    }

    #[test]
    fn emit_golden() {
        let mut buf = [0u8; 18];
        buf[14..].copy_from_slice(&[0xde, 0xad, 0xbe, 0xef]);
        let repr = golden_repr();
        assert_eq!(repr.buffer_len(4), 18);
        let mut frame = Frame::new_unchecked(&mut buf[..]);
        repr.emit(&mut frame);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn setters() {
        let mut buf = GOLDEN;
        let mut frame = Frame::new_checked(&mut buf[..]).unwrap();
        frame.set_ethertype(EtherType::Unknown(0x1234));
        frame.payload_mut()[0] = 0;
        assert_eq!(frame.ethertype(), EtherType::Unknown(0x1234));
        let buf = frame.into_inner();
        assert_eq!(&buf[12..15], &[0x12, 0x34, 0x00]);
    }

    #[test]
    fn every_truncation_is_an_error() {
        for len in 0..HEADER_LEN {
            assert_eq!(Frame::new_checked(&GOLDEN[..len]), Err(Error::Truncated));
            let unchecked = Frame::new_unchecked(&GOLDEN[..len]);
            assert_eq!(Repr::parse(&unchecked), Err(Error::Truncated));
        }
        assert!(Frame::new_checked(&GOLDEN[..HEADER_LEN]).is_ok());
    }

    #[test]
    fn random_inputs_never_panic() {
        crate::testutil::random_inputs(0xe7e7, &GOLDEN[..12], |buf| {
            if let Ok(frame) = Frame::new_checked(&*buf) {
                let repr = Repr::parse(&frame).unwrap();
                let _ = (frame.payload(), repr.ethertype.to_string());
            }
            let _ = Repr::parse(&Frame::new_unchecked(&*buf));
        });
    }
}
