use super::*;
use crate::testutil::random_inputs;

/// 02:00:00:00:00:01 → 02:00:00:00:00:02, 198.18.0.1:4000 → 198.18.0.2:7777,
/// payload "hello", IPv4 without options, TTL 64, DF, identification 0. IPv4
/// checksum 0xaea4 and UDP checksum 0x01d9 computed independently (python3).
const GOLDEN: [u8; 47] = [
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45, 0x00,
    0x00, 0x21, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xae, 0xa4, 0xc6, 0x12, 0x00, 0x01, 0xc6, 0x12,
    0x00, 0x02, 0x0f, 0xa0, 0x1e, 0x61, 0x00, 0x0d, 0x01, 0xd9, 0x68, 0x65, 0x6c, 0x6c, 0x6f,
];

/// The same datagram behind an IPv4 header with a Router Alert option (IHL 6,
/// identification 0x1234, no DF), and Ethernet padding up to 60 bytes. IPv4
/// checksum 0x4768 computed independently (python3); the UDP checksum does
/// not cover IPv4 options, so it is GOLDEN's.
const WITH_OPTIONS: [u8; 60] = [
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x46, 0x00,
    0x00, 0x25, 0x12, 0x34, 0x00, 0x00, 0x40, 0x11, 0x47, 0x68, 0xc6, 0x12, 0x00, 0x01, 0xc6, 0x12,
    0x00, 0x02, 0x94, 0x04, 0x00, 0x00, 0x0f, 0xa0, 0x1e, 0x61, 0x00, 0x0d, 0x01, 0xd9, 0x68, 0x65,
    0x6c, 0x6c, 0x6f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

/// WITH_OPTIONS carrying "jello": UDP checksum 0xffd8 computed independently
/// (python3).
const WITH_OPTIONS_JELLO: [u8; 60] = [
    0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x46, 0x00,
    0x00, 0x25, 0x12, 0x34, 0x00, 0x00, 0x40, 0x11, 0x47, 0x68, 0xc6, 0x12, 0x00, 0x01, 0xc6, 0x12,
    0x00, 0x02, 0x94, 0x04, 0x00, 0x00, 0x0f, 0xa0, 0x1e, 0x61, 0x00, 0x0d, 0xff, 0xd8, 0x6a, 0x65,
    0x6c, 0x6c, 0x6f, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
];

fn golden_repr() -> Repr {
    Repr {
        src_mac: ethernet::Address([2, 0, 0, 0, 0, 1]),
        dst_mac: ethernet::Address([2, 0, 0, 0, 0, 2]),
        src: "198.18.0.1:4000".parse().unwrap(),
        dst: "198.18.0.2:7777".parse().unwrap(),
        payload_len: 5,
    }
}

/// Whether the UDP checksum of `frame` verifies for its IPv4 addresses.
fn udp_checksum_verifies(frame: &[u8]) -> bool {
    let frame = Frame::new_checked(frame).unwrap();
    let ip = frame.ipv4();
    frame.udp().checksum() != 0 && frame.udp().verify_checksum(ip.src_addr(), ip.dst_addr())
}

#[test]
fn a_written_frame_is_the_golden_bytes() {
    let mut out = [0u8; 64];
    let len = golden_repr().emit_into(&mut out, b"hello").unwrap();
    assert_eq!(len, HEADERS_LEN + 5);
    assert_eq!(len, golden_repr().buffer_len());
    assert_eq!(out[..len], GOLDEN);
    assert!(out[len..].iter().all(|&b| b == 0), "nothing past the frame");
}

#[test]
fn the_golden_frame_parses_to_its_addresses_and_payload() {
    let frame = Frame::new_unchecked(&GOLDEN[..]);
    assert_eq!(Repr::parse(&frame), Ok(golden_repr()));
    assert_eq!(frame.payload(), b"hello");
    assert_eq!(frame.src(), golden_repr().src);
    assert_eq!(frame.dst(), golden_repr().dst);
    assert_eq!(frame.src_mac(), golden_repr().src_mac);
    assert_eq!(frame.dst_mac(), golden_repr().dst_mac);
    assert_eq!(frame.ipv4().checksum(), 0xaea4);
    assert_eq!(frame.udp().checksum(), 0x01d9);
    assert!(Frame::new_checked(&GOLDEN[..]).is_ok());
}

#[test]
fn a_frame_with_ipv4_options_parses_to_the_payload_after_the_options() {
    let frame = Frame::new_unchecked(&WITH_OPTIONS[..]);
    assert_eq!(Repr::parse(&frame), Ok(golden_repr()));
    assert_eq!(frame.ipv4().header_len(), 24);
    assert_eq!(frame.ipv4().options(), [0x94, 0x04, 0x00, 0x00]);
    assert_eq!(frame.payload(), b"hello", "Ethernet padding is not payload");
    assert_eq!(frame.udp().as_ref().len(), 13);
    assert!(udp_checksum_verifies(&WITH_OPTIONS));
}

#[test]
fn the_udp_checksum_is_refilled_behind_ipv4_options() {
    let mut buf = WITH_OPTIONS;
    let mut frame = Frame::new_checked(&mut buf[..]).unwrap();
    frame.payload_mut()[0] = b'j';
    frame.fill_udp_checksum();
    assert_eq!(buf, WITH_OPTIONS_JELLO);
    assert!(udp_checksum_verifies(&buf));
    // The IPv4 header (and its checksum) is untouched.
    assert_eq!(buf[..38], WITH_OPTIONS[..38]);
}

#[test]
fn the_udp_checksum_is_refilled_after_a_written_payload_changed() {
    let mut out = [0u8; 64];
    let len = golden_repr().emit_into(&mut out, b"jello").unwrap();
    let mut frame = Frame::new_checked(&mut out[..len]).unwrap();
    frame.payload_mut().copy_from_slice(b"hello");
    frame.fill_udp_checksum();
    assert_eq!(out[..len], GOLDEN);
}

#[test]
fn every_ipv4_header_length_is_respected() {
    for options_len in (0..=40).step_by(4) {
        let ihl = 5 + options_len / 4;
        let mut buf = vec![0u8; HEADERS_LEN + options_len + 5];
        let mut plain = [0u8; HEADERS_LEN + 5];
        golden_repr().emit_into(&mut plain, b"hello").unwrap();
        // The plain frame with `options_len` NOP options spliced in.
        buf[..34].copy_from_slice(&plain[..34]);
        buf[34..34 + options_len].fill(0x01);
        buf[34 + options_len..].copy_from_slice(&plain[34..]);
        let mut ip = ipv4::Packet::new_unchecked(&mut buf[14..]);
        ip.set_header_len((ihl * 4) as u8);
        ip.set_total_len((ihl * 4 + 8 + 5) as u16);
        ip.fill_checksum();

        let frame = Frame::new_unchecked(&buf[..]);
        assert_eq!(Repr::parse(&frame), Ok(golden_repr()), "IHL {ihl}");
        assert_eq!(frame.payload(), b"hello", "IHL {ihl}");
        assert!(udp_checksum_verifies(&buf), "IHL {ihl}");

        let mut frame = Frame::new_checked(&mut buf[..]).unwrap();
        frame.payload_mut().copy_from_slice(b"world");
        frame.fill_udp_checksum();
        assert!(udp_checksum_verifies(&buf), "IHL {ihl}: refilled");
        assert_eq!(&buf[buf.len() - 5..], b"world");
    }
}

#[test]
fn every_truncation_is_an_error() {
    for frame in [&GOLDEN[..], &WITH_OPTIONS[..51]] {
        for len in 0..frame.len() {
            let short = Frame::new_unchecked(&frame[..len]);
            assert_eq!(Repr::parse(&short), Err(Error::Truncated), "{len} bytes");
            assert_eq!(Frame::new_checked(&frame[..len]), Err(Error::Truncated));
        }
    }
}

#[test]
fn frames_that_are_not_ipv4_udp_are_errors() {
    let parse = |buf: &[u8]| Repr::parse(&Frame::new_unchecked(buf));
    // Changes one thing of GOLDEN; `refill` makes the IPv4 checksum right again.
    let changed = |at: usize, value: u8, refill: bool| {
        let mut buf = GOLDEN;
        buf[at] = value;
        if refill {
            ipv4::Packet::new_unchecked(&mut buf[14..]).fill_checksum();
        }
        buf
    };
    let arp = changed(13, 0x06, false);
    assert_eq!(parse(&arp), Err(Error::OtherProtocol));
    let tcp = changed(23, 6, true);
    assert_eq!(parse(&tcp), Err(Error::OtherProtocol));
    let bad_checksum = changed(25, 0xa5, false);
    assert_eq!(parse(&bad_checksum), Err(Error::BadChecksum));
    let ipv6_version = changed(14, 0x65, true);
    assert_eq!(parse(&ipv6_version), Err(Error::UnsupportedVersion));
    let ihl_4 = changed(14, 0x44, true);
    assert_eq!(parse(&ihl_4), Err(Error::BadLength));
    let fragment = changed(21, 0x01, true);
    assert_eq!(parse(&fragment), Err(Error::Malformed));
    let total_len_below_header = changed(17, 19, true);
    assert_eq!(parse(&total_len_below_header), Err(Error::BadLength));
    let udp_len_past_ip = changed(39, 14, false);
    assert_eq!(parse(&udp_len_past_ip), Err(Error::Truncated));
    let udp_len_below_header = changed(39, 7, false);
    assert_eq!(parse(&udp_len_below_header), Err(Error::BadLength));
}

#[test]
fn the_udp_checksum_is_not_verified_when_parsing() {
    // A veth peer leaves the checksum for an offload that never runs.
    let mut buf = GOLDEN;
    buf[40..42].copy_from_slice(&[0x12, 0x34]);
    let frame = Frame::new_unchecked(&buf[..]);
    assert_eq!(Repr::parse(&frame), Ok(golden_repr()));
    assert_eq!(frame.payload(), b"hello");
}

#[test]
fn a_udp_length_shorter_than_the_ipv4_payload_ends_the_payload() {
    let mut buf = GOLDEN;
    buf[39] = 8 + 3;
    let frame = Frame::new_unchecked(&buf[..]);
    let repr = Repr::parse(&frame).unwrap();
    assert_eq!((repr.payload_len, frame.payload()), (3, &b"hel"[..]));
}

#[test]
fn emit_into_refuses_short_buffers_and_payloads_of_another_length() {
    let mut out = [0xeeu8; 64];
    assert_eq!(
        golden_repr().emit_into(&mut out[..46], b"hello"),
        Err(Error::Truncated)
    );
    assert_eq!(
        golden_repr().emit_into(&mut out, b"hell"),
        Err(Error::BadLength)
    );
    let too_long = Repr {
        payload_len: MAX_PAYLOAD_LEN + 1,
        ..golden_repr()
    };
    let mut big = vec![0u8; too_long.buffer_len()];
    let payload = vec![0u8; MAX_PAYLOAD_LEN + 1];
    assert_eq!(
        too_long.emit_into(&mut big, &payload),
        Err(Error::BadLength)
    );
    assert!(out.iter().all(|&b| b == 0xee), "out is untouched on error");
}

#[test]
fn the_largest_payload_is_written_and_parsed() {
    let repr = Repr {
        payload_len: MAX_PAYLOAD_LEN,
        ..golden_repr()
    };
    let mut out = vec![0u8; repr.buffer_len()];
    let payload = vec![0x5a; MAX_PAYLOAD_LEN];
    assert_eq!(repr.emit_into(&mut out, &payload), Ok(repr.buffer_len()));
    let frame = Frame::new_unchecked(&out[..]);
    assert_eq!(Repr::parse(&frame), Ok(repr));
    assert_eq!(frame.ipv4().total_len(), u16::MAX);
    assert!(udp_checksum_verifies(&out));
}

#[test]
fn a_reply_swaps_both_layers_and_keeps_the_length() {
    let reply = golden_repr().reply();
    assert_eq!(
        (reply.src_mac, reply.dst_mac),
        (golden_repr().dst_mac, golden_repr().src_mac)
    );
    assert_eq!(
        (reply.src, reply.dst),
        (golden_repr().dst, golden_repr().src)
    );
    assert_eq!(reply.payload_len, 5);
    assert_eq!(reply.reply(), golden_repr());
}

#[test]
fn random_bytes_never_panic_and_what_parses_reads_consistently() {
    // The prefix runs up to the UDP checksum, so that some inputs parse.
    let mut parsed = 0;
    random_inputs(0x0f7a_3e11, &GOLDEN[..40], |buf| {
        let frame = Frame::new_unchecked(&*buf);
        let Ok(repr) = Repr::parse(&frame) else {
            return;
        };
        parsed += 1;
        assert!(Frame::new_checked(&*buf).is_ok());
        assert_eq!(frame.payload().len(), repr.payload_len);
        assert_eq!((frame.src(), frame.dst()), (repr.src, repr.dst));
        let mut frame = Frame::new_unchecked(&mut *buf);
        frame.fill_udp_checksum();
        assert!(udp_checksum_verifies(buf));
    });
    assert!(parsed > 1000, "only {parsed} inputs parsed");
}

// Moved from latlab-engine's `frame` module, which this module replaces.

#[test]
fn a_written_frame_parses_back_with_valid_checksums() {
    let from: SocketAddrV4 = "198.18.0.1:4000".parse().unwrap();
    let to: SocketAddrV4 = "198.18.0.2:7777".parse().unwrap();
    let macs = ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]);
    let repr = Repr {
        src_mac: ethernet::Address(macs.0),
        dst_mac: ethernet::Address(macs.1),
        src: from,
        dst: to,
        payload_len: 5,
    };
    let mut out = [0u8; 128];
    let len = repr.emit_into(&mut out, b"hello").unwrap();
    assert_eq!(len, HEADERS_LEN + 5);
    let d = Frame::new_unchecked(&out[..len]);
    let parsed = Repr::parse(&d).unwrap();
    assert_eq!(
        (
            parsed.src_mac.0,
            parsed.dst_mac.0,
            parsed.src,
            parsed.dst,
            d.payload()
        ),
        (macs.0, macs.1, from, to, &b"hello"[..])
    );
    let ip = ipv4::Packet::new_checked(&out[14..len]).unwrap();
    assert!(udp::Packet::new_checked(ip.payload())
        .unwrap()
        .verify_checksum(*from.ip(), *to.ip()));
    // A changed payload gets its checksum back.
    out[HEADERS_LEN] = b'j';
    Frame::new_checked(&mut out[..len])
        .unwrap()
        .fill_udp_checksum();
    let ip = ipv4::Packet::new_checked(&out[14..len]).unwrap();
    assert!(udp::Packet::new_checked(ip.payload())
        .unwrap()
        .verify_checksum(*from.ip(), *to.ip()));
    assert_eq!(
        repr.emit_into(&mut out[..20], b"hello"),
        Err(Error::Truncated)
    );
}

#[test]
fn frames_that_are_not_ipv4_udp_are_not_parsed() {
    let repr = Repr {
        src_mac: ethernet::Address([0; 6]),
        dst_mac: ethernet::Address([0; 6]),
        src: "198.18.0.1:4000".parse().unwrap(),
        dst: "198.18.0.2:7777".parse().unwrap(),
        payload_len: 1,
    };
    let mut out = [0u8; 128];
    let len = repr.emit_into(&mut out, b"x").unwrap();
    let parse = |buf: &[u8]| Repr::parse(&Frame::new_unchecked(buf)).ok();
    let mut arp = out;
    arp[12..14].copy_from_slice(&[0x08, 0x06]);
    assert_eq!(parse(&arp[..len]), None);
    let mut tcp = out;
    tcp[23] = 6;
    assert_eq!(parse(&tcp[..len]), None, "protocol (and checksum) changed");
    assert_eq!(parse(&out[..20]), None);
}
