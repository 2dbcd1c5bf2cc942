//! Ethernet II frames carrying IPv4 carrying UDP: the three views composed.
//!
//! This is what the engines that write their own headers (AF_XDP and the
//! AF_PACKET blaster) put on the wire and read back. A [`Frame`] is an
//! [`ethernet::Frame`] whose payload is an [`ipv4::Packet`] whose payload is a
//! [`udp::Packet`]; each layer is found where the layer below says it is:
//!
//! * the IPv4 header starts after the 14-byte Ethernet header and is IHL × 4
//!   bytes long, options included;
//! * the IPv4 packet ends at its total length (Ethernet padding after it is
//!   ignored);
//! * the UDP datagram starts after the IPv4 header and ends at its own length
//!   field, which must fit in the IPv4 payload.
//!
//! [`Repr::parse`] also checks what makes the frame one of ours to read: the
//! EtherType is IPv4, the IPv4 header is version 4 with a correct checksum and
//! is not a fragment, the protocol is UDP. It does **not** verify the UDP
//! checksum: a sender on the same host (a veth peer) leaves it for an offload
//! to finish, so it arrives unfinished.
//!
//! [`Repr::emit`] writes an IPv4 header without options (so the payload
//! starts at [`HEADERS_LEN`]), TTL 64 and DF, with both checksums.
//! [`Frame::fill_udp_checksum`] makes the UDP checksum again after the payload
//! changed in place (a transmit stamp), wherever the IPv4 header put the
//! datagram.
//!
//! Like every view of this crate: parsing and emitting allocate nothing, and
//! no bytes from the network make anything here panic.
//!
//! ```
//! use latlab_wire::ethernet::Address;
//! use latlab_wire::udp_frame::{Frame, Repr, HEADERS_LEN};
//!
//! let repr = Repr {
//!     src_mac: Address([2, 0, 0, 0, 0, 1]),
//!     dst_mac: Address([2, 0, 0, 0, 0, 2]),
//!     src: "198.18.0.1:4000".parse().unwrap(),
//!     dst: "198.18.0.2:7777".parse().unwrap(),
//!     payload_len: 5,
//! };
//! let mut buf = [0u8; 128];
//! let len = repr.emit_into(&mut buf, b"hello")?;
//! assert_eq!(len, HEADERS_LEN + 5);
//!
//! let frame = Frame::new_unchecked(&buf[..len]);
//! assert_eq!(Repr::parse(&frame)?, repr);
//! assert_eq!(frame.payload(), b"hello");
//! # Ok::<(), latlab_wire::Error>(())
//! ```

use std::net::SocketAddrV4;

use crate::{ethernet, ipv4, udp, Error, Result};

/// Length of the three headers when the IPv4 header has no options:
/// Ethernet (14) + IPv4 (20) + UDP (8). [`Repr::emit`] always writes this many.
pub const HEADERS_LEN: usize = ethernet::HEADER_LEN + ipv4::HEADER_LEN + udp::HEADER_LEN;

/// Largest UDP payload [`Repr::emit`] can write (the IPv4 total length is 16 bits).
pub const MAX_PAYLOAD_LEN: usize = ipv4::MAX_PAYLOAD_LEN - udp::HEADER_LEN;

/// Time to live of the frames [`Repr::emit`] writes.
const TTL: u8 = 64;

/// Where the IPv4 packet starts in the frame.
const IP_START: usize = ethernet::HEADER_LEN;

/// A read/write view of an Ethernet frame carrying an IPv4 packet carrying a
/// UDP datagram.
///
/// Invariant after [`Frame::new_checked`] / [`Frame::check_len`] (and after
/// [`Repr::parse`] returned `Ok`): `14 + 20 <= 14 + IHL × 4`,
/// `14 + IHL × 4 + 8 <= 14 + IHL × 4 + UDP length <= 14 + total length <=
/// buffer length`, so every getter, [`Frame::payload`] and
/// [`Frame::fill_udp_checksum`] are in bounds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> Frame<T> {
    /// Wraps a buffer without checking it.
    pub const fn new_unchecked(buffer: T) -> Frame<T> {
        Frame { buffer }
    }

    /// Wraps a buffer after [`check_len`](Self::check_len).
    pub fn new_checked(buffer: T) -> Result<Frame<T>> {
        let frame = Self::new_unchecked(buffer);
        frame.check_len()?;
        Ok(frame)
    }

    /// Checks the length fields of the three layers against each other and
    /// the buffer, as [`ethernet::Frame::check_len`],
    /// [`ipv4::Packet::check_len`] (on the Ethernet payload) and
    /// [`udp::Packet::check_len`] (on the IPv4 payload) do:
    /// [`Error::Truncated`] or [`Error::BadLength`].
    ///
    /// The EtherType, protocol, version and checksums are not looked at;
    /// [`Repr::parse`] does that.
    pub fn check_len(&self) -> Result<()> {
        let eth = ethernet::Frame::new_checked(self.buffer.as_ref())?;
        let ip = ipv4::Packet::new_checked(eth.payload())?;
        udp::Packet::new_checked(ip.payload())?;
        Ok(())
    }

    /// Gives the buffer back.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    /// Where the UDP datagram starts: after the IPv4 header, options included.
    fn udp_start(&self) -> usize {
        IP_START + usize::from(self.ipv4().header_len())
    }

    /// Where the UDP datagram ends: at its length field.
    fn udp_end(&self) -> usize {
        let start = self.udp_start();
        start + usize::from(udp::Packet::new_unchecked(&self.buffer.as_ref()[start..]).len())
    }

    /// The Ethernet layer: the whole buffer.
    pub fn ethernet(&self) -> ethernet::Frame<&[u8]> {
        ethernet::Frame::new_unchecked(self.buffer.as_ref())
    }

    /// The IPv4 layer: everything after the Ethernet header (the packet's
    /// own payload ends at its total length).
    pub fn ipv4(&self) -> ipv4::Packet<&[u8]> {
        ipv4::Packet::new_unchecked(&self.buffer.as_ref()[IP_START..])
    }

    /// The UDP layer: from the end of the IPv4 header to the end of the IPv4
    /// packet.
    pub fn udp(&self) -> udp::Packet<&[u8]> {
        let ip_end = IP_START + usize::from(self.ipv4().total_len());
        udp::Packet::new_unchecked(&self.buffer.as_ref()[self.udp_start()..ip_end])
    }

    /// Source MAC address.
    pub fn src_mac(&self) -> ethernet::Address {
        self.ethernet().src_addr()
    }

    /// Destination MAC address.
    pub fn dst_mac(&self) -> ethernet::Address {
        self.ethernet().dst_addr()
    }

    /// Source IPv4 address and UDP port.
    pub fn src(&self) -> SocketAddrV4 {
        SocketAddrV4::new(self.ipv4().src_addr(), self.udp().src_port())
    }

    /// Destination IPv4 address and UDP port.
    pub fn dst(&self) -> SocketAddrV4 {
        SocketAddrV4::new(self.ipv4().dst_addr(), self.udp().dst_port())
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Frame<&'a T> {
    /// The UDP payload: from the end of the UDP header to the UDP length.
    pub fn payload(&self) -> &'a [u8] {
        let range = self.udp_start() + udp::HEADER_LEN..self.udp_end();
        &self.buffer.as_ref()[range]
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Frame<T> {
    /// Mutable access to the UDP payload. After changing it, call
    /// [`fill_udp_checksum`](Self::fill_udp_checksum).
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let range = self.udp_start() + udp::HEADER_LEN..self.udp_end();
        &mut self.buffer.as_mut()[range]
    }

    /// Makes the UDP checksum again over the IPv4 pseudo-header, the UDP
    /// header and the payload as they are now (IPv4 options are skipped, not
    /// summed). The IPv4 header checksum does not cover the payload and is
    /// left as it is.
    pub fn fill_udp_checksum(&mut self) {
        let ip = self.ipv4();
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        let range = self.udp_start()..self.udp_end();
        udp::Packet::new_unchecked(&mut self.buffer.as_mut()[range]).fill_checksum(src, dst);
    }
}

impl<T: AsRef<[u8]>> AsRef<[u8]> for Frame<T> {
    fn as_ref(&self) -> &[u8] {
        self.buffer.as_ref()
    }
}

/// The addresses of an IPv4 UDP datagram in an Ethernet frame, and the
/// length of its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Repr {
    /// Source MAC address.
    pub src_mac: ethernet::Address,
    /// Destination MAC address.
    pub dst_mac: ethernet::Address,
    /// Source IPv4 address and UDP port.
    pub src: SocketAddrV4,
    /// Destination IPv4 address and UDP port.
    pub dst: SocketAddrV4,
    /// UDP payload length in bytes. At most [`MAX_PAYLOAD_LEN`] for
    /// [`emit`](Self::emit).
    pub payload_len: usize,
}

impl Repr {
    /// Parses and validates the three layers of `frame`, in order:
    ///
    /// * [`Error::Truncated`] if the buffer is shorter than an Ethernet header;
    /// * [`Error::OtherProtocol`] if the EtherType is not IPv4;
    /// * any error of [`ipv4::Repr::parse`] (length fields, version,
    ///   header checksum, fragments);
    /// * [`Error::OtherProtocol`] if the IPv4 protocol is not UDP;
    /// * any error of [`udp::Packet::check_len`] on the IPv4 payload.
    ///
    /// The UDP checksum is not verified (see the [module](self) doc). After
    /// `Ok`, `frame` passes [`Frame::check_len`].
    pub fn parse<T: AsRef<[u8]> + ?Sized>(frame: &Frame<&T>) -> Result<Repr> {
        let eth = ethernet::Frame::new_checked(frame.buffer)?;
        if eth.ethertype() != ethernet::EtherType::Ipv4 {
            return Err(Error::OtherProtocol);
        }
        let ip = ipv4::Packet::new_unchecked(eth.payload());
        let ip_repr = ipv4::Repr::parse(&ip)?;
        if ip_repr.protocol != ipv4::Protocol::Udp {
            return Err(Error::OtherProtocol);
        }
        let datagram = udp::Packet::new_checked(ip.payload())?;
        Ok(Repr {
            src_mac: eth.src_addr(),
            dst_mac: eth.dst_addr(),
            src: SocketAddrV4::new(ip_repr.src_addr, datagram.src_port()),
            dst: SocketAddrV4::new(ip_repr.dst_addr, datagram.dst_port()),
            payload_len: usize::from(datagram.len()) - udp::HEADER_LEN,
        })
    }

    /// The same datagram sent back: source and destination swapped at both
    /// layers, same payload length.
    pub const fn reply(&self) -> Repr {
        Repr {
            src_mac: self.dst_mac,
            dst_mac: self.src_mac,
            src: self.dst,
            dst: self.src,
            payload_len: self.payload_len,
        }
    }

    /// Length of the headers [`emit`](Self::emit) writes: [`HEADERS_LEN`].
    pub const fn header_len(&self) -> usize {
        HEADERS_LEN
    }

    /// Length of the whole frame: headers + payload.
    pub const fn buffer_len(&self) -> usize {
        HEADERS_LEN + self.payload_len
    }

    /// Writes the Ethernet header, an IPv4 header without options (TTL 64,
    /// DF, identification 0) and the UDP header; `emit_payload` writes the
    /// `payload_len` payload bytes, and then the UDP checksum is made over
    /// them, once.
    ///
    /// # Panics
    /// Panics if the buffer is shorter than [`buffer_len`](Self::buffer_len)
    /// or if `payload_len` exceeds [`MAX_PAYLOAD_LEN`].
    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        frame: &mut Frame<T>,
        emit_payload: impl FnOnce(&mut [u8]),
    ) {
        let (src, dst) = (*self.src.ip(), *self.dst.ip());
        let mut eth = ethernet::Frame::new_unchecked(frame.buffer.as_mut());
        ethernet::Repr {
            src_addr: self.src_mac,
            dst_addr: self.dst_mac,
            ethertype: ethernet::EtherType::Ipv4,
        }
        .emit(&mut eth);
        let mut ip = ipv4::Packet::new_unchecked(eth.payload_mut());
        let udp_repr = udp::Repr {
            src_port: self.src.port(),
            dst_port: self.dst.port(),
            payload_len: self.payload_len,
        };
        ipv4::Repr {
            src_addr: src,
            dst_addr: dst,
            protocol: ipv4::Protocol::Udp,
            payload_len: udp_repr.buffer_len(),
            ttl: TTL,
        }
        .emit(&mut ip);
        let datagram = ip.payload_mut();
        emit_payload(&mut datagram[udp::HEADER_LEN..]);
        // Last: the UDP checksum covers the payload.
        udp_repr.emit(&mut udp::Packet::new_unchecked(datagram), src, dst);
    }

    /// Writes this frame carrying `payload` into the start of `out` (see
    /// [`emit`](Self::emit)) and returns its length,
    /// [`buffer_len`](Self::buffer_len).
    ///
    /// Fails with [`Error::BadLength`] if `payload` is not `payload_len` bytes
    /// long or is longer than [`MAX_PAYLOAD_LEN`], and with
    /// [`Error::Truncated`] if `out` is shorter than the frame; `out` is not
    /// touched then.
    pub fn emit_into(&self, out: &mut [u8], payload: &[u8]) -> Result<usize> {
        if payload.len() != self.payload_len || payload.len() > MAX_PAYLOAD_LEN {
            return Err(Error::BadLength);
        }
        let len = self.buffer_len();
        let out = out.get_mut(..len).ok_or(Error::Truncated)?;
        self.emit(&mut Frame::new_unchecked(out), |p| {
            p.copy_from_slice(payload)
        });
        Ok(len)
    }
}

#[cfg(test)]
mod tests;
