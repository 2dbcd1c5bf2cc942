//! What a frame says about its flow, for steering frames to per-flow impairments: the EtherType
//! behind any VLAN tags and, for IPv4 and IPv6, the addresses, the protocol and the ports.
//!
//! [`FlowKey::read`] takes any bytes and never fails: what a frame does not carry (it is too
//! short, not IP, or its IP header does not hold together) is `None`. It reads in place, with
//! no allocation, so an engine can ask it of every frame.
//!
//! What it reads:
//!
//! - **EtherType**: the two bytes after the MAC addresses; while they are a tag protocol
//!   identifier (802.1Q `0x8100`, 802.1ad `0x88a8`, the pre-standard QinQ `0x9100`), the 4-byte
//!   tag is skipped, so a tagged or QinQ frame shows the EtherType of what it carries. A frame
//!   shorter than that has none.
//! - **IPv4** (`0x0800`): version 4, a header length (IHL) of at least 20 bytes, the whole
//!   header within the frame. Options are respected: the transport header starts IHL × 4 bytes
//!   in. A total length below the header length makes the header unreadable (`ip: None`).
//! - **IPv6** (`0x86dd`): version 6 and the fixed 40-byte header. Extension headers are not
//!   walked: the protocol is the fixed header's Next Header, so a packet with extension
//!   headers shows the first one's number (0 hop-by-hop, 43 routing, 44 fragment, 60
//!   destination options) and no ports.
//! - **Ports**: for the protocols whose header starts with the source and destination port
//!   (TCP, UDP, DCCP, SCTP, UDP-Lite), when those 4 bytes lie within both the IP packet (its
//!   length field) and the frame. An IPv4 fragment other than the first has no ports.
//!
//! ```
//! use latlab_wire::flow::FlowKey;
//!
//! // 802.1Q-tagged IPv4/UDP from 10.0.0.1:40000 to 10.0.0.2:27015.
//! let mut frame = vec![0u8; 12];
//! frame.extend([0x81, 0x00, 0x00, 0x64, 0x08, 0x00]);
//! frame.extend([0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2]);
//! frame.extend([0x9c, 0x40, 0x69, 0x87, 0, 8, 0, 0]);
//! let key = FlowKey::read(&frame);
//! assert_eq!(key.ethertype, Some(0x0800));
//! let ip = key.ip.unwrap();
//! assert_eq!((ip.protocol, ip.ports), (17, Some((40000, 27015))));
//! assert_eq!(ip.dst, "10.0.0.2".parse::<std::net::IpAddr>().unwrap());
//! ```

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::offload::{TPID_8021AD, TPID_8021Q};

/// The pre-standard QinQ tag protocol identifier, still sent by some switches.
pub const TPID_QINQ_OLD: u16 = 0x9100;
/// EtherType of IPv4.
pub const ETHERTYPE_IPV4: u16 = 0x0800;
/// EtherType of IPv6.
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
/// EtherType of ARP.
pub const ETHERTYPE_ARP: u16 = 0x0806;

/// IP protocol numbers of ICMP, TCP, UDP, DCCP, ICMPv6, SCTP and UDP-Lite.
pub mod protocol {
    /// ICMP (for IPv4).
    pub const ICMP: u8 = 1;
    /// TCP.
    pub const TCP: u8 = 6;
    /// UDP.
    pub const UDP: u8 = 17;
    /// DCCP.
    pub const DCCP: u8 = 33;
    /// ICMPv6.
    pub const ICMPV6: u8 = 58;
    /// SCTP.
    pub const SCTP: u8 = 132;
    /// UDP-Lite.
    pub const UDPLITE: u8 = 136;
}

/// Whether packets of `protocol` start with a source and a destination port.
pub fn has_ports(protocol: u8) -> bool {
    use protocol::*;
    matches!(protocol, TCP | UDP | DCCP | SCTP | UDPLITE)
}

/// What a frame says about its flow (see the module's description for what is read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowKey {
    /// The EtherType behind any VLAN tags; `None` for a frame too short to hold one.
    pub ethertype: Option<u16>,
    /// The IP header's fields, for an IPv4 or IPv6 packet whose header could be read.
    pub ip: Option<IpFlow>,
}

/// The flow fields of an IP packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IpFlow {
    /// Source address (IPv4 or IPv6, as the EtherType says).
    pub src: IpAddr,
    /// Destination address, of the same family as `src`.
    pub dst: IpAddr,
    /// The IPv4 protocol field, or the IPv6 fixed header's Next Header.
    pub protocol: u8,
    /// `(source, destination)` port, for a protocol that has them ([`has_ports`]) and a
    /// transport header whose first 4 bytes are there; `None` otherwise.
    pub ports: Option<(u16, u16)>,
}

impl FlowKey {
    /// Reads the flow fields of `frame`, an Ethernet frame as on the wire. Never panics.
    #[inline]
    pub fn read(frame: &[u8]) -> FlowKey {
        let Some((l3, ethertype)) = network_header(frame) else {
            return FlowKey::default();
        };
        let ip = match ethertype {
            ETHERTYPE_IPV4 => ipv4(frame, l3),
            ETHERTYPE_IPV6 => ipv6(frame, l3),
            _ => None,
        };
        FlowKey {
            ethertype: Some(ethertype),
            ip,
        }
    }
}

/// Where the network header starts in `frame` (an Ethernet frame as on the wire), and its
/// EtherType, past any 802.1Q / 802.1ad tags; `None` for a frame too short to say. Never
/// panics.
#[inline]
pub fn network_header(frame: &[u8]) -> Option<(usize, u16)> {
    let mut at = 12;
    loop {
        let ethertype = be16(frame, at)?;
        if matches!(ethertype, TPID_8021Q | TPID_8021AD | TPID_QINQ_OLD) {
            at += 4;
            continue;
        }
        return Some((at + 2, ethertype));
    }
}

/// The IPv4 header at `l3`.
fn ipv4(frame: &[u8], l3: usize) -> Option<IpFlow> {
    let h = frame.get(l3..l3 + 20)?;
    let ihl = usize::from(h[0] & 0x0f) * 4;
    let total = usize::from(u16::from_be_bytes([h[2], h[3]]));
    if h[0] >> 4 != 4 || ihl < 20 || total < ihl || frame.len() < l3 + ihl {
        return None;
    }
    let later_fragment = u16::from_be_bytes([h[6], h[7]]) & 0x1fff != 0;
    let addr = |at: usize| IpAddr::V4(Ipv4Addr::new(h[at], h[at + 1], h[at + 2], h[at + 3]));
    let protocol = h[9];
    let end = frame.len().min(l3 + total);
    let ports = if later_fragment {
        None
    } else {
        ports(frame, l3 + ihl, end, protocol)
    };
    Some(IpFlow {
        src: addr(12),
        dst: addr(16),
        protocol,
        ports,
    })
}

/// The IPv6 fixed header at `l3`.
fn ipv6(frame: &[u8], l3: usize) -> Option<IpFlow> {
    let h = frame.get(l3..l3 + 40)?;
    if h[0] >> 4 != 6 {
        return None;
    }
    let payload = usize::from(u16::from_be_bytes([h[4], h[5]]));
    let addr = |at: usize| {
        let mut bytes = [0u8; 16];
        bytes.copy_from_slice(&h[at..at + 16]);
        IpAddr::V6(Ipv6Addr::from(bytes))
    };
    let protocol = h[6];
    let end = frame.len().min(l3 + 40 + payload);
    Some(IpFlow {
        src: addr(8),
        dst: addr(24),
        protocol,
        ports: ports(frame, l3 + 40, end, protocol),
    })
}

/// The ports at `l4`, if `protocol` has them and they lie before `end`.
fn ports(frame: &[u8], l4: usize, end: usize, protocol: u8) -> Option<(u16, u16)> {
    if !has_ports(protocol) || l4 + 4 > end {
        return None;
    }
    Some((be16(frame, l4)?, be16(frame, l4 + 2)?))
}

fn be16(bytes: &[u8], at: usize) -> Option<u16> {
    let b = bytes.get(at..at + 2)?;
    Some(u16::from_be_bytes([b[0], b[1]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MACS: [u8; 12] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];

    /// An IPv4 frame: `tags` (TPID, TCI) after the MACs, then the header with `options` (a
    /// multiple of 4 bytes), protocol `proto`, and `l4` as payload.
    fn v4(tags: &[(u16, u16)], options: &[u8], proto: u8, l4: &[u8]) -> Vec<u8> {
        let mut f = MACS.to_vec();
        for (tpid, tci) in tags {
            f.extend(tpid.to_be_bytes());
            f.extend(tci.to_be_bytes());
        }
        f.extend(ETHERTYPE_IPV4.to_be_bytes());
        let ihl = (20 + options.len()) / 4;
        let total = (ihl * 4 + l4.len()) as u16;
        f.push(0x40 | ihl as u8);
        f.push(0);
        f.extend(total.to_be_bytes());
        f.extend([0, 0, 0x40, 0, 64, proto, 0, 0]);
        f.extend([10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend(options);
        f.extend(l4);
        f
    }

    /// An IPv6 frame with next header `next` and `l4` as payload.
    fn v6(next: u8, l4: &[u8]) -> Vec<u8> {
        let mut f = MACS.to_vec();
        f.extend(ETHERTYPE_IPV6.to_be_bytes());
        f.extend([0x60, 0, 0, 0]);
        f.extend((l4.len() as u16).to_be_bytes());
        f.extend([next, 64]);
        f.extend("fd00::1".parse::<Ipv6Addr>().unwrap().octets());
        f.extend("fd00::2".parse::<Ipv6Addr>().unwrap().octets());
        f.extend(l4);
        f
    }

    /// A UDP (or TCP: the ports lead either) header from 40000 to 27015.
    const PORTS: [u8; 8] = [0x9c, 0x40, 0x69, 0x87, 0, 8, 0, 0];

    fn ip(key: FlowKey) -> IpFlow {
        key.ip.expect("an IP packet")
    }

    #[test]
    fn untagged_ipv4_udp_gives_its_addresses_protocol_and_ports() {
        let key = FlowKey::read(&v4(&[], &[], protocol::UDP, &PORTS));
        assert_eq!(key.ethertype, Some(ETHERTYPE_IPV4));
        let ip = ip(key);
        assert_eq!(ip.src, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!(ip.dst, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)));
        assert_eq!((ip.protocol, ip.ports), (17, Some((40000, 27015))));
    }

    #[test]
    fn vlan_and_qinq_tags_are_skipped_to_the_ethertype() {
        for tags in [
            &[(TPID_8021Q, 100)][..],
            &[(TPID_8021AD, 10), (TPID_8021Q, 20)],
            &[(TPID_QINQ_OLD, 1), (TPID_8021Q, 4094)],
        ] {
            let key = FlowKey::read(&v4(tags, &[], protocol::TCP, &PORTS));
            assert_eq!(key.ethertype, Some(ETHERTYPE_IPV4), "{tags:?}");
            assert_eq!(ip(key).ports, Some((40000, 27015)));
        }
        // A tag and nothing after it: no EtherType at all.
        let mut cut = MACS.to_vec();
        cut.extend([0x81, 0x00, 0x00, 0x64]);
        assert_eq!(FlowKey::read(&cut), FlowKey::default());
    }

    #[test]
    fn ipv4_options_move_the_transport_header() {
        // Two 4-byte options (NOPs and an end of list): IHL 7, the ports 28 bytes in.
        let options = [1, 1, 1, 1, 1, 1, 1, 0];
        let key = FlowKey::read(&v4(&[], &options, protocol::UDP, &PORTS));
        assert_eq!(ip(key).ports, Some((40000, 27015)));
    }

    #[test]
    fn icmp_and_other_protocols_have_no_ports() {
        let echo = [8, 0, 0, 0, 0, 1, 0, 1];
        let icmp = ip(FlowKey::read(&v4(&[], &[], protocol::ICMP, &echo)));
        assert_eq!((icmp.protocol, icmp.ports), (1, None));
        let gre = ip(FlowKey::read(&v4(&[], &[], 47, &PORTS)));
        assert_eq!((gre.protocol, gre.ports), (47, None));
    }

    #[test]
    fn ipv6_reads_the_fixed_header_only() {
        let udp = ip(FlowKey::read(&v6(protocol::UDP, &PORTS)));
        assert_eq!(udp.src, "fd00::1".parse::<IpAddr>().unwrap());
        assert_eq!(udp.dst, "fd00::2".parse::<IpAddr>().unwrap());
        assert_eq!((udp.protocol, udp.ports), (17, Some((40000, 27015))));
        let icmp = ip(FlowKey::read(&v6(protocol::ICMPV6, &[128, 0, 0, 0])));
        assert_eq!((icmp.protocol, icmp.ports), (58, None));
        // A fragment header (44) in front of UDP: not walked, so no ports.
        let mut fragment = vec![protocol::UDP, 0, 0, 0, 0, 0, 0, 1];
        fragment.extend(PORTS);
        let fragmented = ip(FlowKey::read(&v6(44, &fragment)));
        assert_eq!((fragmented.protocol, fragmented.ports), (44, None));
    }

    #[test]
    fn a_later_ipv4_fragment_has_no_ports_and_the_first_has() {
        let mut first = v4(&[], &[], protocol::UDP, &PORTS);
        first[20] = 0x20; // more fragments, offset 0
        assert_eq!(ip(FlowKey::read(&first)).ports, Some((40000, 27015)));
        let mut later = first.clone();
        later[21] = 0x10; // offset 16 × 8 bytes
        assert_eq!(ip(FlowKey::read(&later)).ports, None);
    }

    #[test]
    fn short_and_inconsistent_headers_are_not_ip_and_ports_stay_within_the_packet() {
        let whole = v4(&[], &[], protocol::UDP, &PORTS);
        // Every prefix: an EtherType from 14 bytes, IP from 34, ports from 38.
        for len in 0..whole.len() {
            let key = FlowKey::read(&whole[..len]);
            assert_eq!(key.ethertype.is_some(), len >= 14, "{len}");
            assert_eq!(key.ip.is_some(), len >= 34, "{len}");
            assert_eq!(key.ip.and_then(|ip| ip.ports).is_some(), len >= 38, "{len}");
        }
        let mut bad_version = whole.clone();
        bad_version[14] = 0x65;
        assert_eq!(FlowKey::read(&bad_version).ip, None);
        let mut short_ihl = whole.clone();
        short_ihl[14] = 0x44;
        assert_eq!(FlowKey::read(&short_ihl).ip, None);
        // A total length of 22 bytes: the packet ends before the destination port.
        let mut short_total = whole.clone();
        short_total[17] = 22;
        assert_eq!(ip(FlowKey::read(&short_total)).ports, None);
        // Ethernet padding past the IPv6 payload length is not read as ports.
        let mut padded = v6(protocol::UDP, &[]);
        padded.extend([0xff; 8]);
        assert_eq!(ip(FlowKey::read(&padded)).ports, None);
        // ARP is not IP.
        let mut arp = MACS.to_vec();
        arp.extend(ETHERTYPE_ARP.to_be_bytes());
        arp.extend([0u8; 28]);
        let key = FlowKey::read(&arp);
        assert_eq!((key.ethertype, key.ip), (Some(ETHERTYPE_ARP), None));
    }

    #[test]
    fn random_bytes_never_panic_and_what_is_read_holds_together() {
        let prefixes: [&[u8]; 3] = [
            &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00, 0x45],
            &[
                2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x81, 0x00, 0, 1, 0x86, 0xdd, 0x60,
            ],
            &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x88, 0xa8],
        ];
        for (seed, prefix) in prefixes.into_iter().enumerate() {
            crate::testutil::random_inputs(seed as u64 + 1, prefix, |frame| {
                let key = FlowKey::read(frame);
                if let Some(ip) = key.ip {
                    let v4 = key.ethertype == Some(ETHERTYPE_IPV4);
                    assert!(v4 || key.ethertype == Some(ETHERTYPE_IPV6));
                    assert_eq!(ip.src.is_ipv4(), v4);
                    assert_eq!(ip.dst.is_ipv4(), v4);
                    assert!(ip.ports.is_none() || has_ports(ip.protocol));
                }
            });
        }
    }
}
