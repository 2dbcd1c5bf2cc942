//! Hand-built frames for the tests of the rules and their pipes.

/// Destination and source MAC addresses.
const MACS: [u8; 12] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];

/// An Ethernet frame: `tags` (TPID, TCI) after the MACs, then `ethertype` and `payload`.
pub(crate) fn ethernet(tags: &[(u16, u16)], ethertype: u16, payload: &[u8]) -> Vec<u8> {
    let mut f = MACS.to_vec();
    for (tpid, tci) in tags {
        f.extend(tpid.to_be_bytes());
        f.extend(tci.to_be_bytes());
    }
    f.extend(ethertype.to_be_bytes());
    f.extend(payload);
    f
}

/// An IPv4 packet from `src` to `dst` with `options` (a multiple of 4 bytes), protocol
/// `proto`, and `l4` after the header.
pub(crate) fn ipv4(src: [u8; 4], dst: [u8; 4], options: &[u8], proto: u8, l4: &[u8]) -> Vec<u8> {
    let ihl = (20 + options.len()) / 4;
    let total = (ihl * 4 + l4.len()) as u16;
    let mut p = vec![0x40 | ihl as u8, 0];
    p.extend(total.to_be_bytes());
    p.extend([0, 0, 0x40, 0, 64, proto, 0, 0]);
    p.extend(src);
    p.extend(dst);
    p.extend(options);
    p.extend(l4);
    p
}

/// An IPv6 packet from `src` to `dst` with next header `next` and `l4` as payload.
pub(crate) fn ipv6(src: &str, dst: &str, next: u8, l4: &[u8]) -> Vec<u8> {
    let addr = |a: &str| a.parse::<std::net::Ipv6Addr>().unwrap().octets();
    let mut p = vec![0x60, 0, 0, 0];
    p.extend((l4.len() as u16).to_be_bytes());
    p.extend([next, 64]);
    p.extend(addr(src));
    p.extend(addr(dst));
    p.extend(l4);
    p
}

/// A UDP or TCP header's first 8 bytes, with the ports (the rest zero), and `pad` zero bytes.
pub(crate) fn ports(sport: u16, dport: u16, pad: usize) -> Vec<u8> {
    let mut l4 = sport.to_be_bytes().to_vec();
    l4.extend(dport.to_be_bytes());
    l4.extend(vec![0; 4 + pad]);
    l4
}

/// An untagged IPv4/UDP frame from 10.0.0.1:`sport` to 10.0.0.2:`dport` with 22 bytes of
/// payload (64 bytes in all); `first` is its first payload byte, to tell frames apart.
pub(crate) fn udp4(sport: u16, dport: u16, first: u8) -> Vec<u8> {
    let mut l4 = ports(sport, dport, 22);
    l4[8] = first;
    let ip = ipv4([10, 0, 0, 1], [10, 0, 0, 2], &[], 17, &l4);
    ethernet(&[], 0x0800, &ip)
}
