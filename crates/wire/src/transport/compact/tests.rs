use super::*;
use crate::testutil::random_inputs;
use crate::transport::{parse_long_packet, Packet, Repr, HEADER_LEN, VERSION};

/// A short packet: `header` then `frames`, compact.
fn short_bytes(header: ShortHeader, frames: &[Frame<'_>]) -> Vec<u8> {
    let len = header.buffer_len() + frames.iter().map(Frame::compact_len).sum::<usize>();
    let mut buf = vec![0u8; len];
    let mut at = header.emit(&mut buf);
    for frame in frames {
        at += frame.emit_compact(&mut buf[at..]);
    }
    assert_eq!(at, len);
    buf
}

/// Emits `frame` compact after a 2-byte short header, checks the frame's bytes against
/// `golden`, and parses the packet back to the same frame.
fn golden(frame: Frame<'_>, golden: &[u8]) {
    let header = ShortHeader::new(false, 0x0142, Some(0x0140));
    let bytes = short_bytes(header, &[frame]);
    assert_eq!(bytes[..2], [0x80, 0x42]);
    assert_eq!(&bytes[2..], golden, "{frame:?}");
    let mut frames = Vec::new();
    assert_eq!(parse_short_packet(&bytes, |f| frames.push(f)), Ok(header));
    assert_eq!(frames, vec![frame]);
}

#[test]
fn varints_golden_and_shortest_only() {
    for (value, bytes) in [
        (0u64, vec![0x00]),
        (37, vec![0x25]),
        (100, vec![0x40, 0x64]),
        (15_293, vec![0x7b, 0xbd]),
        (494_878_333, vec![0x9d, 0x7f, 0x3e, 0x7d]),
        (
            151_288_809_941_952_652,
            vec![0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c],
        ),
    ] {
        let mut buf = vec![0u8; bytes.len()];
        assert_eq!(varint::write(&mut buf, 0, value), bytes.len());
        assert_eq!(buf, bytes, "{value}");
        assert_eq!(varint::read(&bytes, 0), Ok((value, bytes.len())));
    }
    // 37 in two bytes: not the shortest form.
    assert_eq!(varint::read(&[0x40, 0x25], 0), Err(Error::Malformed));
    assert_eq!(varint::read(&[0x40], 0), Err(Error::Truncated));
}

#[test]
fn short_header_golden() {
    // Packet 0x0142 with 0x0140 acknowledged: twice the distance fits one byte.
    let header = ShortHeader::new(true, 0x0142, Some(0x0140));
    let mut buf = [0u8; 2];
    assert_eq!(header.emit(&mut buf), 2);
    assert_eq!(buf, [0x84, 0x42]);
    assert_eq!(ShortHeader::parse(&buf), Ok((header, 2)));
    // 200 unacknowledged packets need two bytes; so do 64 (four times the distance fits).
    let header = ShortHeader::new(false, 1200, Some(1000));
    let mut buf = [0u8; 3];
    assert_eq!(header.emit(&mut buf), 3);
    assert_eq!(buf, [0x81, 0x04, 0xb0]);
    assert_eq!(ShortHeader::new(false, 1063, Some(1000)).pn_len, 1);
    assert_eq!(ShortHeader::new(false, 1064, Some(1000)).pn_len, 2);
    assert_eq!(
        ShortHeader::parse(&[0x88, 0]),
        Err(Error::Malformed),
        "reserved bit"
    );
    assert_eq!(
        ShortHeader::parse(&[0x4c, 0]),
        Err(Error::Malformed),
        "a long header"
    );
    assert_eq!(ShortHeader::parse(&[0x81, 0]), Err(Error::Truncated));
}

#[test]
fn short_header_with_the_short_id_golden() {
    // A client whose address changed: flag I (0x40), the id, then the packet number.
    let header = ShortHeader {
        short_id: Some(0xdead_beef),
        ..ShortHeader::new(true, 0x0142, Some(0x0140))
    };
    let mut buf = [0u8; 6];
    assert_eq!(header.buffer_len(), 6);
    assert_eq!(header.emit(&mut buf), 6);
    assert_eq!(buf, [0xc4, 0xde, 0xad, 0xbe, 0xef, 0x42]);
    assert_eq!(ShortHeader::parse(&buf), Ok((header, 6)));
    // The longest header: the id and 4 bytes of packet number.
    let header = ShortHeader {
        short_id: Some(1),
        ..ShortHeader::new(false, 1 << 30, Some(0))
    };
    let mut buf = [0u8; MAX_SHORT_HEADER_LEN];
    assert_eq!(header.emit(&mut buf), MAX_SHORT_HEADER_LEN);
    assert_eq!(buf, [0xc3, 0, 0, 0, 1, 0x40, 0, 0, 0]);
    assert_eq!(ShortHeader::parse(&buf), Ok((header, 9)));
    // Cut inside the id, or inside the packet number after it.
    assert_eq!(ShortHeader::parse(&[0xc0, 1, 2]), Err(Error::Truncated));
    assert_eq!(
        ShortHeader::parse(&[0xc1, 1, 2, 3, 4, 5]),
        Err(Error::Truncated)
    );
    for reserved in [0x08, 0x10, 0x20] {
        assert_eq!(
            ShortHeader::parse(&[0x80 | reserved, 0]),
            Err(Error::Malformed)
        );
    }
}

#[test]
fn a_genuine_number_lies_within_a_quarter_window_of_the_highest_received() {
    assert_eq!([1, 2, 3, 4].map(max_jump), [64, 16_384, 1 << 22, 1 << 30]);
    // Whatever was acknowledged (at most the receiver's highest), the sender's length keeps
    // its number within max_jump of that highest.
    for acked in [0u64, 5, 1000, 70_000] {
        for pn in acked + 1..acked + 70_000 {
            let len = packet_number_len(pn, Some(acked));
            assert!(pn - acked <= max_jump(len), "pn {pn} acked {acked}");
        }
    }
    // A forged number one quarter window ahead leaves the next genuine ones decodable.
    let highest = 1000;
    let forged = highest + max_jump(1);
    for genuine in highest - 60..highest + 60 {
        let h = ShortHeader::new(false, genuine, Some(highest - 1));
        assert_eq!(h.pn_len, 1);
        let decoded = decode_packet_number(u64::from(h.truncated), 1, Some(forged));
        assert_eq!(decoded, genuine);
    }
}

#[test]
fn truncated_packet_numbers_decode_against_the_highest_seen() {
    // RFC 9000 A.3's example: highest 0xa82f30ea, 2 bytes 0x9b32 → 0xa82f9b32.
    assert_eq!(
        decode_packet_number(0x9b32, 2, Some(0xa82f_30ea)),
        0xa82f_9b32
    );
    // Wrapping past a byte boundary, both ways.
    assert_eq!(decode_packet_number(0x02, 1, Some(0x1fe)), 0x202);
    assert_eq!(decode_packet_number(0xfe, 1, Some(0x201)), 0x1fe);
    // Far from the window: the closest candidate, never a panic.
    assert_eq!(decode_packet_number(0x80, 1, Some(0)), 0x80);
    assert_eq!(decode_packet_number(0xff, 1, None), 0xff);
    assert_eq!(
        decode_packet_number(0xffff_ffff, 4, Some(u64::MAX - 1)),
        u64::MAX
    );
    assert_eq!(decode_packet_number(0, 4, Some(u64::MAX)), !0xffff_ffff_u64);
    for pn in [1u64, 63, 64, 255, 256, 70_000, 1 << 40] {
        for acked in [
            pn.saturating_sub(1),
            pn.saturating_sub(100),
            pn.saturating_sub(40_000),
        ] {
            let h = ShortHeader::new(false, pn, Some(acked));
            let decoded = decode_packet_number(u64::from(h.truncated), h.pn_len, Some(acked));
            assert_eq!(decoded, pn, "pn {pn} acked {acked}");
        }
    }
}

#[test]
fn a_whole_message_is_six_bytes_of_frame() {
    let payload = [0xaa; 100];
    golden(
        Frame::Data {
            channel: 0,
            kind: ChannelKind::ReliableOrdered,
            message: 300,
            fragment: 0,
            fragments: 1,
            payload: &payload,
        },
        &[[0x21, 0, 0x41, 0x2c, 0x40, 100].as_slice(), &payload].concat(),
    );
}

#[test]
fn fragments_keep_the_version_1_frame() {
    golden(
        Frame::Data {
            channel: 2,
            kind: ChannelKind::Deadline,
            message: 9,
            fragment: 1,
            fragments: 3,
            payload: b"hey",
        },
        &[6, 2, 5, 0, 0, 0, 9, 0, 1, 0, 3, 0, 3, b'h', b'e', b'y'],
    );
    // A whole message in the fragment form is not canonical here.
    let whole = [6, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0];
    assert_eq!(Frame::parse_compact(&whole), Err(Error::Malformed));
}

#[test]
fn ack_nack_expired_ping_close_golden() {
    let mut ranges = AckRanges::new();
    assert!(ranges.push(8, 10) && ranges.push(5, 5) && ranges.push(1, 2));
    golden(
        Frame::Ack {
            delay_us: 250,
            ranges,
        },
        &[5, 10, 0x40, 250, 3, 2, 2, 0, 2, 1],
    );
    golden(
        Frame::Nack {
            channel: 0,
            first: 70,
            count: 2,
        },
        &[10, 0, 0x40, 70, 2],
    );
    golden(
        Frame::Expired {
            channel: 4,
            message: 9,
        },
        &[9, 4, 9],
    );
    golden(Frame::Ping, &[7]);
    golden(Frame::Close { code: 0x0203 }, &[8, 2, 3]);
}

#[test]
fn nack_in_version_1_golden() {
    let frame = Frame::Nack {
        channel: 1,
        first: 0x0102_0304,
        count: 3,
    };
    let mut buf = [0u8; 7];
    assert_eq!(frame.emit(&mut buf), 7);
    assert_eq!(buf, [10, 1, 1, 2, 3, 4, 3]);
    assert_eq!(Frame::parse(&buf), Ok((frame, 7)));
    assert_eq!(
        Frame::parse(&[10, 1, 0, 0, 0, 0, 0]),
        Err(Error::Malformed),
        "count 0"
    );
}

#[test]
fn handshake_frames_have_no_short_form() {
    for bytes in [
        &[1u8, 0, 0][..],
        &[4],
        &[2; 13],
        &[3; 13],
        &[11, 0, 0, 0, 1],
    ] {
        assert_eq!(Frame::parse_compact(bytes), Err(Error::Malformed));
    }
}

#[test]
fn the_compact_handshake_is_version_1_with_its_version_byte() {
    let repr = Repr {
        ack_immediately: false,
        connection_id: 7,
        packet_number: 0,
    };
    let mut bytes = vec![0u8; HEADER_LEN + 1];
    repr.emit_version(&mut Packet::new_unchecked(&mut bytes[..]), VERSION_COMPACT);
    Frame::Accept.emit(&mut bytes[HEADER_LEN..]);
    assert_eq!(bytes[..4], [b'L', b'T', 2, 0]);
    let mut frames = Vec::new();
    let parsed = parse_long_packet(&bytes, |f| frames.push(f));
    assert_eq!(parsed, Ok((VERSION_COMPACT, repr)));
    assert_eq!(frames, vec![Frame::Accept]);
    // Version 1 reads as before through the same call; version 3 is refused.
    bytes[2] = VERSION;
    assert_eq!(parse_long_packet(&bytes, |_| {}), Ok((VERSION, repr)));
    bytes[2] = 3;
    assert_eq!(
        parse_long_packet(&bytes, |_| {}),
        Err(Error::UnsupportedVersion)
    );
    assert!(!is_short(&bytes) && is_short(&[0x80]));
}

#[test]
fn the_compact_accept_carries_the_short_id_golden() {
    let repr = Repr {
        ack_immediately: false,
        connection_id: 7,
        packet_number: 0,
    };
    let frames = [Frame::Accept, Frame::ShortId { id: 0x0102_0304 }];
    let mut bytes = vec![0u8; HEADER_LEN + 6];
    repr.emit_version(&mut Packet::new_unchecked(&mut bytes[..]), VERSION_COMPACT);
    let mut at = HEADER_LEN;
    for frame in frames {
        at += frame.emit(&mut bytes[at..]);
    }
    assert_eq!(bytes[HEADER_LEN..], [4, 11, 1, 2, 3, 4]);
    let mut parsed = Vec::new();
    assert_eq!(
        parse_long_packet(&bytes, |f| parsed.push(f)),
        Ok((VERSION_COMPACT, repr))
    );
    assert_eq!(parsed, frames);
    // No larger than the HelloCookie that draws it.
    assert!(bytes.len() <= HEADER_LEN + 13);
    assert_eq!(
        parse_long_packet(&bytes[..bytes.len() - 1], |_| {}),
        Err(Error::Truncated)
    );
}

#[test]
fn random_bytes_never_panic_and_parsed_frames_re_emit() {
    random_inputs(0xc0de, &[0x80, 0x01], |buf| {
        let mut frames = Vec::new();
        if let Ok(header) = parse_short_packet(buf, |f| frames.push(f)) {
            let again = short_bytes(header, &frames);
            assert_eq!(again, buf);
        }
        for frame in Frames::compact(buf).map_while(|f| f.ok()) {
            let mut out = vec![0u8; frame.compact_len()];
            frame.emit_compact(&mut out);
            assert_eq!(Frame::parse_compact(&out), Ok((frame, out.len())));
        }
    });
}

#[test]
fn xor_compact_golden() {
    let payload = [1u8, 2, 3];
    let frame = Frame::Xor {
        channel: 0,
        kind: ChannelKind::ReliableOrdered,
        message: 70,
        back: 1,
        len: 3,
        older_len: 100,
        payload: &[0; 100],
    };
    let mut body = vec![0x31, 0, 0x40, 70, 1, 3, 0x40, 100];
    body.extend([0; 100]);
    golden(frame, &body);
    let short = Frame::Xor {
        channel: 0,
        kind: ChannelKind::ReliableOrdered,
        message: 70,
        back: 1,
        len: 3,
        older_len: 3,
        payload: &payload,
    };
    golden(short, &[0x31, 0, 0x40, 70, 1, 3, 3, 1, 2, 3]);
    // Back past the channel's first message, a longer varint than needed, an unreliable
    // kind, or version 1's type byte.
    for bad in [
        [0x31, 0, 3, 4, 0, 0].as_slice(),
        &[0x31, 0, 0x40, 3, 1, 0, 0],
        &[0x33, 0, 3, 1, 0, 0],
        &[12, 0, 1, 3, 1, 0, 0],
    ] {
        assert_eq!(Frame::parse_compact(bad), Err(Error::Malformed), "{bad:?}");
    }
}
