//! The kernel's view of where a datagram goes, for endpoints that write their own Ethernet
//! headers (AF_XDP): the interface's own MAC address, the next hop towards a destination
//! (routing table), and that hop's MAC address (neighbour table).
//!
//! Tables are read from `/proc/thread-self/net`, so a thread that entered a namespace with
//! [`crate::netns::run_in`] sees that namespace's tables (`/proc/net` would show the
//! process's).

use std::fs;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;

use socket2::{Domain, Socket, Type};

/// The MAC address of interface `ifname` (`SIOCGIFHWADDR`).
pub fn interface_mac(ifname: &str) -> io::Result<[u8; 6]> {
    crate::iface::interface_index(ifname)?;
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, None)?;
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(ifname.bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: SIOCGIFHWADDR reads the name from `req` and writes a sockaddr into it; `req`
    // lives until the call returns.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFHWADDR as _, &mut req) };
    if rc != 0 {
        return Err(crate::iface::at(ifname, "SIOCGIFHWADDR")(
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: after a successful SIOCGIFHWADDR the union holds `ifru_hwaddr`.
    let data = unsafe { req.ifr_ifru.ifru_hwaddr.sa_data };
    let mut mac = [0u8; 6];
    for (m, d) in mac.iter_mut().zip(data) {
        *m = d as u8;
    }
    Ok(mac)
}

/// The next hop towards `dst` out of `ifname`: `dst` itself when it is on a connected subnet,
/// the gateway of the longest matching route otherwise. `NotFound` when no route of `ifname`
/// covers `dst`.
pub fn next_hop(ifname: &str, dst: Ipv4Addr) -> io::Result<Ipv4Addr> {
    let table = fs::read_to_string("/proc/thread-self/net/route")?;
    next_hop_in(&table, ifname, dst).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!("{ifname}: no route to {dst} through this interface"),
        )
    })
}

/// The MAC address the neighbour table holds for `ip` on `ifname`, if it holds a complete one.
pub fn neighbour_mac(ifname: &str, ip: Ipv4Addr) -> io::Result<Option<[u8; 6]>> {
    let table = fs::read_to_string("/proc/thread-self/net/arp")?;
    Ok(neighbour_in(&table, ifname, ip))
}

/// An IPv4 address as `/proc/net/route` prints it: the 32 bits in memory order, as a native
/// integer in hex.
fn route_addr(hex: &str) -> Option<Ipv4Addr> {
    let n = u32::from_str_radix(hex, 16).ok()?;
    Some(Ipv4Addr::from(n.to_ne_bytes()))
}

/// [`next_hop`] over the text of `/proc/net/route`.
fn next_hop_in(table: &str, ifname: &str, dst: Ipv4Addr) -> Option<Ipv4Addr> {
    const RTF_UP: u32 = 0x1;
    const RTF_GATEWAY: u32 = 0x2;
    let mut best: Option<(u32, Ipv4Addr)> = None;
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8 || f[0] != ifname {
            continue;
        }
        let (Some(dest), Some(gateway), Ok(flags), Some(mask)) = (
            route_addr(f[1]),
            route_addr(f[2]),
            u32::from_str_radix(f[3], 16),
            route_addr(f[7]),
        ) else {
            continue;
        };
        let mask = u32::from(mask);
        if flags & RTF_UP == 0 || u32::from(dst) & mask != u32::from(dest) & mask {
            continue;
        }
        if best.is_some_and(|(m, _)| m.count_ones() >= mask.count_ones()) {
            continue;
        }
        let hop = if flags & RTF_GATEWAY != 0 {
            gateway
        } else {
            dst
        };
        best = Some((mask, hop));
    }
    best.map(|(_, hop)| hop)
}

/// [`neighbour_mac`] over the text of `/proc/net/arp`.
fn neighbour_in(table: &str, ifname: &str, ip: Ipv4Addr) -> Option<[u8; 6]> {
    const ATF_COM: u32 = 0x2;
    for line in table.lines().skip(1) {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 6 || f[5] != ifname || f[0].parse::<Ipv4Addr>().ok() != Some(ip) {
            continue;
        }
        let flags = u32::from_str_radix(f[2].trim_start_matches("0x"), 16).ok()?;
        if flags & ATF_COM == 0 {
            return None;
        }
        return parse_mac(f[3]);
    }
    None
}

/// `aa:bb:cc:dd:ee:ff`.
fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for m in mac.iter_mut() {
        *m = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROUTE: &str = "\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
veth0\t00000000\t0101A8C0\t0003\t0\t0\t0\t00000000\t0\t0\t0
veth0\t0001A8C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
veth0\t000112C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
veth0\t000212C6\t FE0112C6\t0003\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth9\t000312C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
";

    #[test]
    fn next_hops_follow_the_longest_matching_route_of_the_interface() {
        let hop = |dst: &str| next_hop_in(ROUTE, "veth0", dst.parse().unwrap());
        // On link (198.18.1.0/24): the destination itself.
        assert_eq!(hop("198.18.1.2"), Some("198.18.1.2".parse().unwrap()));
        // 198.18.2.0/24 via 198.18.1.254, which beats the default route.
        assert_eq!(hop("198.18.2.7"), Some("198.18.1.254".parse().unwrap()));
        // Anything else: the default gateway 192.168.1.1.
        assert_eq!(hop("10.0.0.1"), Some("192.168.1.1".parse().unwrap()));
        // A route of another interface does not count.
        assert_eq!(
            next_hop_in(ROUTE, "eth9", "198.18.1.2".parse().unwrap()),
            None
        );
    }

    const ARP: &str = "\
IP address       HW type     Flags       HW address            Mask     Device
198.18.0.2       0x1         0x2         aa:bb:cc:00:11:22     *        veth0
198.18.0.3       0x1         0x0         00:00:00:00:00:00     *        veth0
198.18.0.2       0x1         0x2         de:ad:be:ef:00:01     *        eth9
";

    #[test]
    fn only_complete_neighbour_entries_of_the_interface_count() {
        let mac = |ip: &str, dev: &str| neighbour_in(ARP, dev, ip.parse().unwrap());
        assert_eq!(
            mac("198.18.0.2", "veth0"),
            Some([0xaa, 0xbb, 0xcc, 0, 0x11, 0x22])
        );
        assert_eq!(
            mac("198.18.0.2", "eth9"),
            Some([0xde, 0xad, 0xbe, 0xef, 0, 1])
        );
        assert_eq!(mac("198.18.0.3", "veth0"), None, "incomplete");
        assert_eq!(mac("198.18.0.9", "veth0"), None, "absent");
        assert_eq!(parse_mac("aa:bb"), None);
        assert_eq!(parse_mac("aa:bb:cc:dd:ee:ff:00"), None);
    }

    #[test]
    fn the_loopback_mac_is_read_and_a_missing_interface_is_named() {
        assert_eq!(interface_mac("lo").unwrap(), [0; 6]);
        assert_eq!(
            interface_mac("latlab-nosuch0").unwrap_err().to_string(),
            "latlab-nosuch0: no such interface"
        );
    }
}
