//! IPv4 UDP in Ethernet frames, for the engines that write their own headers (AF_XDP and the
//! AF_PACKET blaster): finding the datagram in a received frame and writing one into a buffer.

use std::net::SocketAddrV4;

use latlab_wire::{ethernet, ipv4, udp};

/// Ethernet (14) + IPv4 without options (20) + UDP (8).
pub const HEADERS_LEN: usize = 14 + 20 + 8;

/// An IPv4 UDP datagram found in an Ethernet frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpInFrame<'a> {
    /// The frame's source MAC.
    pub src_mac: [u8; 6],
    /// The frame's destination MAC.
    pub dst_mac: [u8; 6],
    /// Source address and port.
    pub src: SocketAddrV4,
    /// Destination address and port.
    pub dst: SocketAddrV4,
    /// The UDP payload.
    pub payload: &'a [u8],
}

/// The IPv4 UDP datagram in `frame`, or `None` when `frame` is not one with a valid IPv4
/// header. The UDP checksum is not verified: a sender on the same host (a veth peer) leaves
/// it for an offload to finish, so it arrives unfinished.
pub fn parse_udp(frame: &[u8]) -> Option<UdpInFrame<'_>> {
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

/// Writes an Ethernet/IPv4/UDP frame from `from` to `to` carrying `payload` into the start of
/// `out`, with correct checksums; returns its length, or `None` when `out` is too short.
pub fn write_udp(
    out: &mut [u8],
    (src_mac, dst_mac): ([u8; 6], [u8; 6]),
    from: SocketAddrV4,
    to: SocketAddrV4,
    payload: &[u8],
) -> Option<usize> {
    let len = HEADERS_LEN + payload.len();
    let out = out.get_mut(..len)?;
    ethernet::Repr {
        src_addr: ethernet::Address(src_mac),
        dst_addr: ethernet::Address(dst_mac),
        ethertype: ethernet::EtherType::Ipv4,
    }
    .emit(&mut ethernet::Frame::new_unchecked(&mut out[..]));
    ipv4::Repr {
        src_addr: *from.ip(),
        dst_addr: *to.ip(),
        protocol: ipv4::Protocol::Udp,
        payload_len: 8 + payload.len(),
        ttl: 64,
    }
    .emit(&mut ipv4::Packet::new_unchecked(&mut out[14..]));
    out[HEADERS_LEN..].copy_from_slice(payload);
    // The UDP checksum covers the payload, so it is made after the payload is in place.
    udp::Repr {
        src_port: from.port(),
        dst_port: to.port(),
        payload_len: payload.len(),
    }
    .emit(
        &mut udp::Packet::new_unchecked(&mut out[34..]),
        *from.ip(),
        *to.ip(),
    );
    Some(len)
}

/// Makes the UDP checksum of the frame `write_udp` wrote into `frame` again, after its payload
/// changed.
pub fn refill_udp_checksum(frame: &mut [u8]) {
    if frame.len() < HEADERS_LEN {
        return;
    }
    let ip = ipv4::Packet::new_unchecked(&frame[14..34]);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    udp::Packet::new_unchecked(&mut frame[34..]).fill_checksum(src, dst);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_written_frame_parses_back_with_valid_checksums() {
        let from: SocketAddrV4 = "198.18.0.1:4000".parse().unwrap();
        let to: SocketAddrV4 = "198.18.0.2:7777".parse().unwrap();
        let macs = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
        let mut out = [0u8; 128];
        let len = write_udp(&mut out, macs, from, to, b"hello").unwrap();
        assert_eq!(len, HEADERS_LEN + 5);
        let d = parse_udp(&out[..len]).unwrap();
        assert_eq!(
            (d.src_mac, d.dst_mac, d.src, d.dst, d.payload),
            (macs.0, macs.1, from, to, &b"hello"[..])
        );
        let ip = ipv4::Packet::new_checked(&out[14..len]).unwrap();
        assert!(udp::Packet::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(*from.ip(), *to.ip()));
        // A changed payload gets its checksum back.
        out[HEADERS_LEN] = b'j';
        refill_udp_checksum(&mut out[..len]);
        let ip = ipv4::Packet::new_checked(&out[14..len]).unwrap();
        assert!(udp::Packet::new_checked(ip.payload())
            .unwrap()
            .verify_checksum(*from.ip(), *to.ip()));
        assert_eq!(write_udp(&mut out[..20], macs, from, to, b"hello"), None);
    }

    #[test]
    fn frames_that_are_not_ipv4_udp_are_not_parsed() {
        let from: SocketAddrV4 = "198.18.0.1:4000".parse().unwrap();
        let to: SocketAddrV4 = "198.18.0.2:7777".parse().unwrap();
        let mut out = [0u8; 128];
        let len = write_udp(&mut out, ([0; 6], [0; 6]), from, to, b"x").unwrap();
        let mut arp = out;
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(parse_udp(&arp[..len]), None);
        let mut tcp = out;
        tcp[23] = 6;
        assert_eq!(
            parse_udp(&tcp[..len]),
            None,
            "protocol (and checksum) changed"
        );
        assert_eq!(parse_udp(&out[..20]), None);
    }
}
