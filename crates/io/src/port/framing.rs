//! IPv4 UDP in Ethernet frames for the AF_XDP endpoint: finding the datagram in a received
//! frame, and writing the headers of one to send around a payload already in place.

use std::net::{Ipv4Addr, SocketAddrV4};

use latlab_wire::{ethernet, ipv4, udp};

/// Ethernet (14) + IPv4 without options (20) + UDP (8): where a sent datagram's payload starts.
pub(crate) const HEADERS_LEN: usize = 14 + 20 + 8;
const IP_AT: usize = 14;
const UDP_AT: usize = 34;

/// An IPv4 UDP datagram found in an Ethernet frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct UdpInFrame<'a> {
    pub(crate) src_mac: [u8; 6],
    pub(crate) dst_mac: [u8; 6],
    pub(crate) src: SocketAddrV4,
    pub(crate) dst: SocketAddrV4,
    pub(crate) payload: &'a [u8],
}

/// The IPv4 UDP datagram in `frame`, or `None` when `frame` is not one with a valid IPv4
/// header. The UDP checksum is not verified: a sender on the same host (a veth peer) leaves
/// it for an offload to finish, so it arrives unfinished.
pub(crate) fn parse_udp(frame: &[u8]) -> Option<UdpInFrame<'_>> {
    let eth = ethernet::Frame::new_checked(frame).ok()?;
    let eth_repr = ethernet::Repr::parse(&eth).ok()?;
    if eth_repr.ethertype != ethernet::EtherType::Ipv4 {
        return None;
    }
    let ip = ipv4::Packet::new_checked(eth.payload()).ok()?;
    let ip_repr = ipv4::Repr::parse(&ip).ok()?;
    if ip_repr.protocol != ipv4::Protocol::Udp {
        return None;
    }
    let u = udp::Packet::new_checked(ip.payload()).ok()?;
    Some(UdpInFrame {
        src_mac: eth_repr.src_addr.0,
        dst_mac: eth_repr.dst_addr.0,
        src: SocketAddrV4::new(ip_repr.src_addr, u.src_port()),
        dst: SocketAddrV4::new(ip_repr.dst_addr, u.dst_port()),
        payload: u.payload(),
    })
}

/// Writes the Ethernet, IPv4 (with its checksum) and UDP headers (without its checksum) of a
/// datagram from `from` to `to` in front of the `payload_len` bytes at [`HEADERS_LEN`] of
/// `frame`; returns the frame's length. `frame` holds at least that many bytes.
pub(crate) fn write_headers(
    frame: &mut [u8],
    (src_mac, dst_mac): ([u8; 6], [u8; 6]),
    from: SocketAddrV4,
    to: SocketAddrV4,
    payload_len: usize,
) -> usize {
    let len = HEADERS_LEN + payload_len;
    ethernet::Repr {
        src_addr: ethernet::Address(src_mac),
        dst_addr: ethernet::Address(dst_mac),
        ethertype: ethernet::EtherType::Ipv4,
    }
    .emit(&mut ethernet::Frame::new_unchecked(&mut frame[..IP_AT]));
    ipv4::Repr {
        src_addr: *from.ip(),
        dst_addr: *to.ip(),
        protocol: ipv4::Protocol::Udp,
        payload_len: 8 + payload_len,
        ttl: 64,
    }
    .emit(&mut ipv4::Packet::new_unchecked(&mut frame[IP_AT..len]));
    let mut u = udp::Packet::new_unchecked(&mut frame[UDP_AT..len]);
    u.set_src_port(from.port());
    u.set_dst_port(to.port());
    u.set_len((8 + payload_len) as u16);
    len
}

/// Makes the UDP checksum of the frame `write_headers` wrote, once its payload is final.
pub(crate) fn fill_udp_checksum(frame: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr) {
    udp::Packet::new_unchecked(&mut frame[UDP_AT..]).fill_checksum(src, dst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_headers_parse_back_with_valid_checksums() {
        let from: SocketAddrV4 = "198.18.0.1:4000".parse().unwrap();
        let to: SocketAddrV4 = "198.18.0.2:7777".parse().unwrap();
        let macs = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let mut frame = [0u8; 128];
        frame[HEADERS_LEN..HEADERS_LEN + 5].copy_from_slice(b"hello");
        let len = write_headers(&mut frame, macs, from, to, 5);
        fill_udp_checksum(&mut frame[..len], *from.ip(), *to.ip());
        let d = parse_udp(&frame[..len]).unwrap();
        assert_eq!(
            (d.src_mac, d.dst_mac, d.src, d.dst, d.payload),
            (macs.0, macs.1, from, to, &b"hello"[..])
        );
        let ip = ipv4::Packet::new_checked(&frame[14..len]).unwrap();
        assert!(ip.verify_checksum());
        assert!(udp::Packet::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(*from.ip(), *to.ip()));
        let mut arp = frame;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(parse_udp(&arp[..len]), None);
        assert_eq!(parse_udp(&frame[..20]), None);
    }
}
