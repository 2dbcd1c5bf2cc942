use super::*;
use crate::testutil::random_inputs;
use crate::Result;

const HEADER: [u8; 20] = [
    b'L', b'T', 1, 1, 0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef, 0, 0, 0, 0, 0, 0, 0x01, 0x02,
];

fn packet_bytes(frames: &[Frame<'_>]) -> Vec<u8> {
    let len = HEADER_LEN + frames.iter().map(Frame::buffer_len).sum::<usize>();
    let mut buf = vec![0u8; len];
    Repr {
        ack_immediately: true,
        connection_id: 0xdead_beef,
        packet_number: 0x0102,
    }
    .emit(&mut Packet::new_unchecked(&mut buf[..]));
    let mut at = HEADER_LEN;
    for frame in frames {
        at += frame.emit(&mut buf[at..]);
    }
    buf
}

fn parsed(bytes: &[u8]) -> (Repr, Vec<Frame<'_>>) {
    let mut frames = Vec::new();
    let repr = parse_packet(bytes, |f| frames.push(f)).unwrap();
    (repr, frames)
}

/// Emits `frame` in a packet, checks the bytes after the header against `golden`, and parses
/// them back to the same frame.
fn golden(frame: Frame<'_>, golden: &[u8]) {
    let bytes = packet_bytes(&[frame]);
    assert_eq!(bytes[..HEADER_LEN], HEADER);
    assert_eq!(&bytes[HEADER_LEN..], golden, "{frame:?}");
    let (repr, frames) = parsed(&bytes);
    assert_eq!(repr.packet_number, 0x0102);
    assert!(repr.ack_immediately);
    assert_eq!(frames, vec![frame]);
}

#[test]
fn hello_golden() {
    golden(Frame::Hello { padding: 4 }, &[1, 0, 4, 0, 0, 0, 0]);
}

#[test]
fn challenge_and_hello_cookie_golden() {
    let mac = 0x0102_0304_0506_0708;
    let body = [0, 0, 0, 7, 1, 2, 3, 4, 5, 6, 7, 8];
    golden(
        Frame::Challenge { epoch: 7, mac },
        &[[2].as_slice(), &body].concat(),
    );
    golden(
        Frame::HelloCookie { epoch: 7, mac },
        &[[3].as_slice(), &body].concat(),
    );
}

#[test]
fn accept_ping_close_expired_golden() {
    golden(Frame::Accept, &[4]);
    golden(Frame::ShortId { id: 0x0102_0304 }, &[11, 1, 2, 3, 4]);
    assert_eq!(Frame::parse(&[11, 1, 2, 3]), Err(Error::Truncated));
    golden(Frame::Ping, &[7]);
    golden(Frame::Close { code: 0x0203 }, &[8, 2, 3]);
    golden(
        Frame::Expired {
            channel: 4,
            message: 0x0a0b_0c0d,
        },
        &[9, 4, 0x0a, 0x0b, 0x0c, 0x0d],
    );
}

#[test]
fn ack_with_three_ranges_golden() {
    // Received 8..=10, 5, 1..=2: largest 10, first range 2 long, then gap 2 (6, 7 missing)
    // and a range of length 0, then gap 2 (3, 4 missing) and length 1.
    let mut ranges = AckRanges::new();
    assert!(ranges.push(8, 10) && ranges.push(5, 5) && ranges.push(1, 2));
    assert!(
        !ranges.push(0, 0),
        "0 touches 1..=2: no missing packet between"
    );
    golden(
        Frame::Ack {
            delay_us: 250,
            ranges,
        },
        &[
            5, 0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 250, 3, 0, 0, 0, 2, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0,
            0, 2, 0, 0, 0, 1,
        ],
    );
    assert!(ranges.contains(5) && !ranges.contains(6) && ranges.contains(1));
}

#[test]
fn data_golden() {
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
}

#[test]
fn several_frames_round_trip() {
    let mut ranges = AckRanges::new();
    ranges.push(3, 3);
    let frames = [
        Frame::Ack {
            delay_us: 0,
            ranges,
        },
        Frame::Data {
            channel: 0,
            kind: ChannelKind::ReliableOrdered,
            message: 1,
            fragment: 0,
            fragments: 1,
            payload: &[0xaa; 100],
        },
        Frame::Ping,
    ];
    let bytes = packet_bytes(&frames);
    assert_eq!(parsed(&bytes).1, frames);
}

#[test]
fn bad_packets_are_typed_errors() {
    let mut ok = packet_bytes(&[Frame::Ping]);
    assert_eq!(parse_packet(&ok[..19], |_| {}), Err(Error::Truncated));
    ok[3] = 0x80;
    assert_eq!(parse_packet(&ok, |_| {}), Err(Error::Malformed));
    ok[3] = 0;
    ok[2] = 2;
    assert_eq!(parse_packet(&ok, |_| {}), Err(Error::UnsupportedVersion));
    ok[0] = b'X';
    assert_eq!(parse_packet(&ok, |_| {}), Err(Error::BadMagic));

    fn frame(bytes: &[u8]) -> Result<Frame<'_>> {
        Frame::parse(bytes).map(|(f, _)| f)
    }
    assert_eq!(frame(&[0]), Err(Error::Malformed), "unknown type");
    assert_eq!(
        frame(&[1, 0, 2, 0, 1]),
        Err(Error::Malformed),
        "nonzero padding"
    );
    assert_eq!(frame(&[1, 0, 2, 0]), Err(Error::Truncated));
    let data = [6, 0, 1, 0, 0, 0, 1, 0, 2, 0, 2, 0, 0];
    assert_eq!(frame(&data), Err(Error::Malformed), "fragment 2 of 2");
    let data = [6, 0, 9, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0];
    assert_eq!(frame(&data), Err(Error::Malformed), "unknown kind");
    let data = [6, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0, 5, 1];
    assert_eq!(frame(&data), Err(Error::Truncated), "payload cut short");
    // ACK whose first range runs below packet number 0.
    let ack = [5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 2];
    assert_eq!(frame(&ack), Err(Error::Malformed));
    let no_ranges = [5, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(frame(&no_ranges), Err(Error::Malformed));
    // A second range with gap 0 would touch the first.
    let gap0 = [
        5, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0,
    ];
    assert_eq!(frame(&gap0), Err(Error::Malformed));
    // One bad frame after a good one refuses the whole packet.
    let mut two = packet_bytes(&[Frame::Ping]);
    two.push(0xff);
    assert_eq!(
        parse_packet(&two, |_| panic!("no frame")),
        Err(Error::Malformed)
    );
}

#[test]
fn handshake_answers_are_never_larger_than_hello() {
    let answer = packet_bytes(&[Frame::Challenge { epoch: 1, mac: 2 }]);
    assert_eq!(answer.len(), MAX_HANDSHAKE_ANSWER_LEN);
    assert!(answer.len() <= HELLO_MIN_LEN);
    assert!(packet_bytes(&[Frame::Accept]).len() <= answer.len());
}

#[test]
fn random_bytes_never_panic_and_parsed_frames_re_emit() {
    random_inputs(0x7a45, &HEADER, |buf| {
        let mut frames = Vec::new();
        if parse_packet(buf, |f| frames.push(f)).is_ok() {
            let again = packet_bytes(&frames);
            assert_eq!(&again[HEADER_LEN..], &buf[HEADER_LEN..]);
        }
        for frame in Frames::new(buf).map_while(|f| f.ok()) {
            let mut out = vec![0u8; frame.buffer_len()];
            frame.emit(&mut out);
            assert_eq!(Frame::parse(&out), Ok((frame, out.len())));
        }
    });
}

#[test]
fn xor_golden_and_recovery() {
    let (newer, older) = (b"abcd".as_slice(), b"xy".as_slice());
    let mut payload = [0u8; 4];
    xor::xor_into(&mut payload, newer, older);
    assert_eq!(payload, [b'a' ^ b'x', b'b' ^ b'y', b'c', b'd']);
    let frame = Frame::Xor {
        channel: 2,
        kind: ChannelKind::ReliableOrdered,
        message: 0x0102_0304,
        back: 1,
        len: 4,
        older_len: 2,
        payload: &payload,
    };
    golden(
        frame,
        &[[12, 2, 1, 1, 2, 3, 4, 1, 0, 4, 0, 2].as_slice(), &payload].concat(),
    );
    // Whoever has one message recovers the other, at its own length.
    assert_eq!(xor::recover(&payload, newer, 4, 2), Some(older.to_vec()));
    assert_eq!(xor::recover(&payload, older, 2, 4), Some(newer.to_vec()));
    // A known message of another length than the frame names is no key.
    assert_eq!(xor::recover(&payload, b"xyz", 2, 4), None);
}

#[test]
fn xor_refuses_what_pairs_no_two_messages() {
    let ok = [12u8, 2, 1, 0, 0, 0, 5, 1, 0, 1, 0, 1, 9];
    assert_eq!(Frame::parse(&ok).map(|(_, n)| n), Ok(13));
    let with = |at: usize, value: u8| {
        let mut b = ok;
        b[at] = value;
        Frame::parse(&b).map(|(_, n)| n)
    };
    // back 0, back past the first message, an unreliable kind, an unknown kind.
    assert_eq!(with(7, 0), Err(Error::Malformed));
    assert_eq!(with(7, 6), Err(Error::Malformed));
    assert_eq!(
        with(2, ChannelKind::Unreliable as u8),
        Err(Error::Malformed)
    );
    assert_eq!(with(2, 9), Err(Error::Malformed));
    // The payload is as long as the longer message.
    assert_eq!(with(9, 2), Err(Error::Truncated));
    assert_eq!(Frame::parse(&ok[..12]), Err(Error::Truncated));
}
