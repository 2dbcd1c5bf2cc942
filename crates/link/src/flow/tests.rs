use latlab_wire::flow::FlowKey;
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use super::frames::{ethernet, ipv4, ipv6, ports, udp4};
use super::*;

fn rule(text: &str) -> FlowMatch {
    FlowMatch::parse("--flow", text).unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn error(text: &str) -> String {
    match FlowMatch::parse("--flow", text) {
        Ok(m) => panic!("{text:?} was taken as {m}"),
        Err(e) => e.to_string(),
    }
}

fn matches(text: &str, frame: &[u8]) -> bool {
    rule(text).matches(&FlowKey::read(frame))
}

#[test]
fn every_key_reads_and_prints_back_in_a_fixed_order() {
    for (text, printed) in [
        ("ether=ipv4", "ether=ipv4"),
        ("ether=IPv6", "ether=ipv6"),
        ("ether=arp", "ether=arp"),
        ("ether=0x88cc", "ether=0x88cc"),
        ("ether=0x0800", "ether=ipv4"),
        ("proto=udp", "proto=udp"),
        ("proto=tcp", "proto=tcp"),
        ("proto=icmp", "proto=icmp"),
        ("proto=icmpv6", "proto=icmpv6"),
        ("proto=sctp", "proto=sctp"),
        ("proto=17", "proto=udp"),
        ("proto=47", "proto=47"),
        ("src=10.0.0.0/8", "src=10.0.0.0/8"),
        ("src=10.1.2.3/8", "src=10.0.0.0/8"),
        ("dst=10.0.0.2", "dst=10.0.0.2"),
        ("dst=10.0.0.2/32", "dst=10.0.0.2"),
        ("src=fd00::/16", "src=fd00::/16"),
        ("dst=fd00::2", "dst=fd00::2"),
        ("src=0.0.0.0/0", "src=0.0.0.0/0"),
        ("sport=40000", "sport=40000"),
        ("dport=27000-27100", "dport=27000-27100"),
        ("port=7-7", "port=7"),
        (
            "port=1-2 dport=3 sport=4 dst=::1 src=::/0 proto=tcp ether=ipv6",
            "ether=ipv6 proto=tcp src=::/0 dst=::1 sport=4 dport=3 port=1-2",
        ),
    ] {
        let m = rule(text);
        assert_eq!(m.to_string(), printed, "{text}");
        assert_eq!(rule(printed), m, "{printed} reads back");
    }
}

#[test]
fn bad_text_is_refused_naming_the_flag_and_the_token() {
    for (text, needle) in [
        ("", "--flow: no match key: expected one or more of ether="),
        ("udp", "--flow udp: not key=value"),
        (
            "protocol=udp",
            "--flow protocol=udp: unknown match key: expected one of ether",
        ),
        (
            "ether=ip4",
            "--flow ether=ip4: expected ipv4, ipv6, arp or a number in hex",
        ),
        ("ether=0xfffff", "--flow ether=0xfffff: expected"),
        ("proto=quic", "--flow proto=quic: expected udp, tcp, icmp"),
        ("proto=256", "--flow proto=256: expected"),
        (
            "src=10.0.0",
            "--flow src=10.0.0: expected an address or a prefix",
        ),
        (
            "dst=10.0.0.0/33",
            "--flow dst=10.0.0.0/33: the prefix length must be 0 to 32",
        ),
        (
            "dst=fd00::/129",
            "--flow dst=fd00::/129: the prefix length must be 0 to 128",
        ),
        ("src=10.0.0.0/", "--flow src=10.0.0.0/: the prefix length"),
        (
            "sport=65536",
            "--flow sport=65536: expected a port or a range",
        ),
        ("dport=abc", "--flow dport=abc: expected a port or a range"),
        (
            "port=20-10",
            "--flow port=20-10: the range 20-10 runs backwards",
        ),
        ("port=1-", "--flow port=1-: expected a port"),
        ("dport=1 dport=2", "--flow dport=2: given twice"),
        ("ether=arp proto=udp", "--flow ether=arp: is not IP"),
        (
            "ether=ipv4 src=fd00::1",
            "--flow src=fd00::1: is IPv6 and ether=ipv4 is IPv4",
        ),
        (
            "src=10.0.0.1 dst=::1",
            "--flow dst=::1: is IPv6 and src=10.0.0.1 is IPv4",
        ),
        (
            "proto=icmp dport=7",
            "--flow dport=7: proto=icmp has no ports",
        ),
        ("proto=47 port=7", "--flow port=7: proto=47 has no ports"),
    ] {
        let message = error(text);
        assert!(message.starts_with(needle), "{text:?}: {message}");
        assert_eq!(message.lines().count(), 1, "{message}");
    }
}

#[test]
fn ipv4_frames_match_on_every_key_tagged_or_not() {
    let frame = udp4(40000, 27015, 0);
    for text in [
        "ether=ipv4",
        "proto=udp",
        "proto=17",
        "src=10.0.0.0/8",
        "src=10.0.0.1",
        "dst=10.0.0.2/31",
        "sport=40000",
        "dport=27015",
        "dport=27000-27100",
        "port=27015",
        "port=40000",
        "proto=udp src=10.0.0.1 dst=10.0.0.2 sport=40000 dport=27015",
    ] {
        assert!(matches(text, &frame), "{text}");
    }
    for text in [
        "ether=ipv6",
        "ether=arp",
        "proto=tcp",
        "src=10.0.0.2",
        "dst=192.168.0.0/16",
        "src=fd00::/8",
        "sport=27015",
        "dport=40000",
        "port=1-1000",
        "proto=udp dport=27016",
    ] {
        assert!(!matches(text, &frame), "{text}");
    }
    // The same packet behind a VLAN tag, and behind QinQ tags.
    let ip = &frame[14..];
    for tags in [&[(0x8100, 100)][..], &[(0x88a8, 10), (0x8100, 20)]] {
        let tagged = ethernet(tags, 0x0800, ip);
        assert!(
            matches("ether=ipv4 proto=udp dport=27015", &tagged),
            "{tags:?}"
        );
        assert!(
            !matches("ether=0x8100", &tagged),
            "the tag is not the EtherType"
        );
    }
}

#[test]
fn ipv4_options_ipv6_tcp_and_icmp_match_as_they_should() {
    let options = [0x94, 0x04, 0, 0]; // router alert
    let tcp = ipv4(
        [192, 168, 1, 5],
        [10, 0, 0, 2],
        &options,
        6,
        &ports(5000, 22, 12),
    );
    let tcp = ethernet(&[], 0x0800, &tcp);
    assert!(matches("proto=tcp dport=22 src=192.168.0.0/16", &tcp));
    assert!(matches("port=5000", &tcp));
    assert!(!matches("proto=udp", &tcp));

    let udp6 = ethernet(
        &[],
        0x86dd,
        &ipv6("fd00::1", "fd00:1::2", 17, &ports(5000, 27015, 8)),
    );
    assert!(matches("ether=ipv6 proto=udp dport=27015", &udp6));
    assert!(matches("src=fd00::/64 dst=fd00:1::/32", &udp6));
    assert!(!matches("dst=fd00::/32", &udp6));
    assert!(
        !matches("src=10.0.0.0/8", &udp6),
        "IPv4 prefixes never hold IPv6"
    );
    assert!(!matches("src=0.0.0.0/0", &udp6));
    assert!(matches("src=::/0", &udp6));

    let icmp4 = ethernet(
        &[],
        0x0800,
        &ipv4([10, 0, 0, 1], [10, 0, 0, 2], &[], 1, &[8; 8]),
    );
    let icmp6 = ethernet(&[], 0x86dd, &ipv6("fd00::1", "fd00::2", 58, &[128; 8]));
    for frame in [&icmp4, &icmp6] {
        assert!(matches("proto=icmp", frame));
        assert!(!matches("proto=udp", frame));
        assert!(!matches("port=0-65535", frame), "ICMP has no ports");
    }
    assert!(matches("proto=1", &icmp4) && !matches("proto=1", &icmp6));
    assert!(matches("proto=icmpv6", &icmp6) && !matches("proto=icmpv6", &icmp4));
}

#[test]
fn frames_too_short_or_not_ip_match_only_the_ethertype() {
    let arp = ethernet(&[], 0x0806, &[0; 28]);
    assert!(matches("ether=arp", &arp));
    assert!(!matches("proto=udp", &arp));
    assert!(!matches("src=0.0.0.0/0", &arp));
    let whole = udp4(40000, 27015, 0);
    for len in 0..whole.len() {
        let cut = &whole[..len];
        assert_eq!(matches("ether=ipv4", cut), len >= 14, "{len}");
        assert_eq!(matches("src=0.0.0.0/0", cut), len >= 34, "{len}");
        assert_eq!(matches("dport=27015", cut), len >= 38, "{len}");
    }
}

#[test]
fn random_frames_never_panic_and_ip_keys_need_an_ip_header() {
    let rules: Vec<FlowMatch> = [
        "ether=ipv4",
        "proto=udp dport=27015",
        "src=10.0.0.0/8 port=1-1024",
        "ether=ipv6 dst=fd00::/8",
        "proto=icmp",
    ]
    .iter()
    .map(|t| rule(t))
    .collect();
    let mut rng = SmallRng::seed_from_u64(7);
    let heads: [&[u8]; 3] = [
        &[0x08, 0x00, 0x45],
        &[0x81, 0x00, 0, 1, 0x86, 0xdd, 0x60],
        &[],
    ];
    for i in 0..50_000 {
        let len = rng.random_range(0..160);
        let mut frame: Vec<u8> = (0..len).map(|_| rng.random()).collect();
        let head = heads[i % heads.len()];
        if frame.len() >= 12 + head.len() {
            frame[12..12 + head.len()].copy_from_slice(head);
        }
        let key = FlowKey::read(&frame);
        for r in &rules[1..] {
            assert!(!r.matches(&key) || key.ip.is_some());
        }
        let _ = rules[0].matches(&key);
    }
}

#[test]
fn every_named_protocol_and_ethertype_parses() {
    use super::{ethertype, protocol_of, ETHER_NAMES, PROTOCOL_NAMES};
    for name in PROTOCOL_NAMES {
        assert!(protocol_of(name).is_ok(), "{name}");
    }
    for name in ETHER_NAMES {
        assert!(ethertype(name).is_ok(), "{name}");
    }
}
