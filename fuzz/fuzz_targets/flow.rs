//! Flow keys: any bytes give a key without panicking; what is read holds together (IP only for
//! an IPv4 or IPv6 EtherType, addresses of that family, ports only for a protocol that has
//! them), and a frame cut shorter never reads more than the whole frame did.
#![no_main]

use latlab_wire::flow::{has_ports, FlowKey, ETHERTYPE_IPV4, ETHERTYPE_IPV6};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let key = FlowKey::read(data);
    if let Some(ip) = key.ip {
        let v4 = key.ethertype == Some(ETHERTYPE_IPV4);
        assert!(v4 || key.ethertype == Some(ETHERTYPE_IPV6));
        assert_eq!((ip.src.is_ipv4(), ip.dst.is_ipv4()), (v4, v4));
        assert!(ip.ports.is_none() || has_ports(ip.protocol));
    }
    if let Some(cut) = data.len().checked_sub(1) {
        let shorter = FlowKey::read(&data[..cut]);
        assert!(key.ethertype.is_some() || shorter.ethertype.is_none());
        assert!(key.ip.is_some() || shorter.ip.is_none());
    }
});
