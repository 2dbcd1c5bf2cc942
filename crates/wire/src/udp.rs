//! UDP headers (RFC 768) with the IPv4 pseudo-header checksum.
//!
//! The payload runs from byte 8 to the UDP length field; bytes in the buffer
//! past it are ignored. A checksum field of 0 means "no checksum" and always
//! verifies; a computed checksum of 0 is sent as `0xffff`.

use std::net::Ipv4Addr;

use crate::{be, checksum, Error, Result};

mod field {
    use crate::Field;

    pub(crate) const SRC_PORT: Field = 0..2;
    pub(crate) const DST_PORT: Field = 2..4;
    pub(crate) const LENGTH: Field = 4..6;
    pub(crate) const CHECKSUM: Field = 6..8;
}

/// Length of the UDP header.
pub const HEADER_LEN: usize = field::CHECKSUM.end;

/// Largest payload the 16-bit length field can describe.
pub const MAX_PAYLOAD_LEN: usize = u16::MAX as usize - HEADER_LEN;

/// IP protocol number of UDP, used in the pseudo-header.
const PROTOCOL_UDP: u8 = 17;

/// A read/write view of a UDP datagram.
///
/// Invariant after [`Packet::new_checked`] / [`Packet::check_len`]:
/// `8 <= len() <= buffer length`, so every getter, [`Packet::payload`] and
/// [`Packet::verify_checksum`] are in bounds.
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

    /// Checks the length field against the buffer: buffer shorter than 8
    /// bytes or than the length field → [`Error::Truncated`]; length field
    /// below 8 → [`Error::BadLength`].
    pub fn check_len(&self) -> Result<()> {
        let buffer_len = self.buffer.as_ref().len();
        if buffer_len < HEADER_LEN {
            return Err(Error::Truncated);
        }
        let len = usize::from(self.len());
        if len < HEADER_LEN {
            Err(Error::BadLength)
        } else if len > buffer_len {
            Err(Error::Truncated)
        } else {
            Ok(())
        }
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Source port.
    pub fn src_port(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::SRC_PORT)
    }

    /// Destination port.
    pub fn dst_port(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::DST_PORT)
    }

    /// Length field: header + payload, in bytes.
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::LENGTH)
    }

    /// Checksum field (0 = none).
    pub fn checksum(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::CHECKSUM)
    }

    /// Whether the checksum is correct for a datagram sent from `src_addr`
    /// to `dst_addr`. A checksum field of 0 ("none") always verifies.
    pub fn verify_checksum(&self, src_addr: Ipv4Addr, dst_addr: Ipv4Addr) -> bool {
        if self.checksum() == 0 {
            return true;
        }
        let len = self.len();
        let sum = checksum::combine(&[
            checksum::pseudo_header_v4(src_addr, dst_addr, PROTOCOL_UDP, len),
            checksum::data(&self.buffer.as_ref()[..usize::from(len)]),
        ]);
        sum == 0xffff
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Packet<&'a T> {
    /// The payload: from byte 8 up to the length field.
    pub fn payload(&self) -> &'a [u8] {
        &self.buffer.as_ref()[HEADER_LEN..usize::from(self.len())]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Packet<T> {
    /// Sets the source port.
    pub fn set_src_port(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::SRC_PORT, value);
    }

    /// Sets the destination port.
    pub fn set_dst_port(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::DST_PORT, value);
    }

    /// Sets the length field.
    pub fn set_len(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::LENGTH, value);
    }

    /// Sets the checksum field as is (see [`fill_checksum`](Self::fill_checksum)).
    pub fn set_checksum(&mut self, value: u16) {
        be::set_u16(self.buffer.as_mut(), field::CHECKSUM, value);
    }

    /// Computes the checksum over the pseudo-header, header and payload (up
    /// to the length field) and stores it; a computed 0 is stored as
    /// `0xffff`. Call it after the payload and every other field are final.
    pub fn fill_checksum(&mut self, src_addr: Ipv4Addr, dst_addr: Ipv4Addr) {
        self.set_checksum(0);
        let len = self.len();
        let sum = checksum::combine(&[
            checksum::pseudo_header_v4(src_addr, dst_addr, PROTOCOL_UDP, len),
            checksum::data(&self.buffer.as_ref()[..usize::from(len)]),
        ]);
        let value = match !sum {
            0 => 0xffff,
            v => v,
        };
        self.set_checksum(value);
    }

    /// Mutable access to the payload (byte 8 up to the length field).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let len = usize::from(self.len());
        &mut self.buffer.as_mut()[HEADER_LEN..len]
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Packet<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The fields of a UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// Payload length in bytes (length field − 8). At most
    /// [`MAX_PAYLOAD_LEN`] for [`emit`](Self::emit).
    pub payload_len: usize,
}

impl Repr {
    /// Parses a UDP header carried from `src_addr` to `dst_addr` (needed for
    /// the pseudo-header).
    ///
    /// Fails with [`Error::Truncated`] / [`Error::BadLength`] as
    /// [`Packet::check_len`] does, and with [`Error::BadChecksum`] if a
    /// non-zero checksum does not verify. Destination port 0 is accepted.
    pub fn parse<T: AsRef<[u8]> + ?Sized>(
        packet: &Packet<&T>,
        src_addr: Ipv4Addr,
        dst_addr: Ipv4Addr,
    ) -> Result<Repr> {
        packet.check_len()?;
        if !packet.verify_checksum(src_addr, dst_addr) {
            return Err(Error::BadChecksum);
        }
        Ok(Repr {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            payload_len: usize::from(packet.len()) - HEADER_LEN,
        })
    }

    /// Length of the header: [`HEADER_LEN`].
    pub const fn header_len(&self) -> usize {
        HEADER_LEN
    }

    /// Length of the whole datagram: header + payload.
    pub const fn buffer_len(&self) -> usize {
        HEADER_LEN + self.payload_len
    }

    /// Writes the header and fills the checksum over the `payload_len`
    /// payload bytes that are in the buffer *now*: write the payload first
    /// (at byte [`HEADER_LEN`]), or write it afterwards through
    /// [`Packet::payload_mut`] and call [`Packet::fill_checksum`] again.
    ///
    /// # Panics
    /// Panics if the buffer is shorter than [`buffer_len`](Self::buffer_len)
    /// or if `payload_len` exceeds [`MAX_PAYLOAD_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut Packet<T>,
        src_addr: Ipv4Addr,
        dst_addr: Ipv4Addr,
    ) {
        let len =
            u16::try_from(self.buffer_len()).expect("UDP payload_len exceeds MAX_PAYLOAD_LEN");
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_len(len);
        packet.fill_checksum(src_addr, dst_addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
    const DST: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

    /// 10.0.0.1:40000 → 10.0.0.2:7, payload "latlab!" (odd length on
    /// purpose). Checksum 0xec55 computed independently (python3).
    const GOLDEN: [u8; 15] = [
        0x9c, 0x40, 0x00, 0x07, 0x00, 0x0f, 0xec, 0x55, b'l', b'a', b't', b'l', b'a', b'b', b'!',
    ];

    fn golden_repr() -> Repr {
        Repr {
            src_port: 40000,
            dst_port: 7,
            payload_len: 7,
        }
    }

    #[test]
    fn parse_golden() {
        let packet = Packet::new_checked(&GOLDEN[..]).unwrap();
        assert_eq!(packet.src_port(), 40000);
        assert_eq!(packet.dst_port(), 7);
        assert_eq!(packet.len(), 15);
        assert_eq!(packet.checksum(), 0xec55);
        assert!(packet.verify_checksum(SRC, DST));
        assert!(!packet.verify_checksum(DST, Ipv4Addr::new(10, 0, 0, 3)));
        assert_eq!(packet.payload(), b"latlab!");
        assert_eq!(Repr::parse(&packet, SRC, DST).unwrap(), golden_repr());
    }

    #[test]
    fn emit_golden() {
        let mut buf = [0u8; 15];
        buf[8..].copy_from_slice(b"latlab!");
        let repr = golden_repr();
        assert_eq!(repr.buffer_len(), 15);
        repr.emit(&mut Packet::new_unchecked(&mut buf[..]), SRC, DST);
        assert_eq!(buf, GOLDEN);
    }

    #[test]
    fn zero_checksum_means_none() {
        let mut buf = GOLDEN;
        buf[6] = 0;
        buf[7] = 0;
        buf[8] = b'L';
        let packet = Packet::new_checked(&buf[..]).unwrap();
        assert!(packet.verify_checksum(SRC, DST));
        assert!(Repr::parse(&packet, SRC, DST).is_ok());
    }

    #[test]
    fn computed_zero_is_sent_as_ffff() {
        // Two payload bytes chosen so that the ones-complement sum is 0xffff,
        // i.e. the computed checksum is 0.
        let mut buf = [0u8; 10];
        let mut packet = Packet::new_unchecked(&mut buf[..]);
        packet.set_src_port(1234);
        packet.set_dst_port(5678);
        packet.set_len(10);
        packet.fill_checksum(SRC, DST);
        let word = packet.checksum();
        packet.payload_mut().copy_from_slice(&word.to_be_bytes());
        packet.fill_checksum(SRC, DST);
        assert_eq!(packet.checksum(), 0xffff);
        assert!(packet.verify_checksum(SRC, DST));
        let sum = checksum::combine(&[
            checksum::pseudo_header_v4(SRC, DST, PROTOCOL_UDP, 10),
            checksum::data(&{
                let mut b = buf;
                b[6] = 0;
                b[7] = 0;
                b
            }),
        ]);
        assert_eq!(!sum, 0);
    }

    #[test]
    fn bad_checksum_detected() {
        for i in 0..GOLDEN.len() {
            let mut buf = GOLDEN;
            buf[i] ^= 0x10;
            let result = Repr::parse(&Packet::new_unchecked(&buf[..]), SRC, DST);
            assert!(result.is_err(), "byte {i}");
            if i != 4 && i != 5 {
                assert_eq!(result, Err(Error::BadChecksum), "byte {i}");
            }
        }
    }

    #[test]
    fn length_checks() {
        let mut buf = GOLDEN;
        Packet::new_unchecked(&mut buf[..]).set_len(7);
        assert_eq!(Packet::new_checked(&buf[..]), Err(Error::BadLength));
        Packet::new_unchecked(&mut buf[..]).set_len(16);
        assert_eq!(Packet::new_checked(&buf[..]), Err(Error::Truncated));
        // Bytes past the length field are ignored.
        let mut long = [0xaau8; 20];
        long[..15].copy_from_slice(&GOLDEN);
        let packet = Packet::new_checked(&long[..]).unwrap();
        assert_eq!(packet.payload(), b"latlab!");
        assert_eq!(Repr::parse(&packet, SRC, DST).unwrap(), golden_repr());
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
            assert_eq!(
                Repr::parse(&unchecked, SRC, DST),
                Err(Error::Truncated),
                "len {len}"
            );
        }
    }

    #[test]
    fn random_inputs_never_panic() {
        crate::testutil::random_inputs(0x0d9, &[], |buf| {
            if let Ok(packet) = Packet::new_checked(&*buf) {
                let _ = (packet.payload(), packet.verify_checksum(SRC, DST));
            }
            if let Ok(repr) = Repr::parse(&Packet::new_unchecked(&*buf), SRC, DST) {
                assert!(repr.buffer_len() <= buf.len());
            }
            // Make the length field plausible so deeper paths get exercised.
            if buf.len() >= HEADER_LEN {
                let len = buf.len() as u16;
                let mut packet = Packet::new_unchecked(&mut *buf);
                packet.set_len(len);
                packet.fill_checksum(SRC, DST);
                let repr = Repr::parse(&Packet::new_unchecked(&*buf), SRC, DST).unwrap();
                assert_eq!(repr.buffer_len(), buf.len());
            }
        });
    }
}
