use super::*;
use crate::testutil::random_inputs;

/// chronyd 4.3 (`local stratum 8`, `-x`) answering a client request whose transmit
/// timestamp was 0x1122334455667788, captured on loopback on 2026-12-02.
const CHRONY_REPLY: [u8; 48] = [
    0x24, 0x08, 0x00, 0xe7, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x7f, 0x7f, 0x01, 0x01,
    0xee, 0xba, 0x2a, 0x42, 0x97, 0xb2, 0x20, 0xf1, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88,
    0xee, 0xba, 0x2a, 0x43, 0xf4, 0x01, 0xf3, 0x61, 0xee, 0xba, 0x2a, 0x43, 0xf4, 0x0c, 0x90, 0xd2,
];

/// The request that reply answers: LI 0, VN 4, mode 3 (0x23), then zeros and the token.
const REQUEST: [u8; 48] = {
    let mut b = [0u8; 48];
    b[0] = 0x23;
    let t = 0x1122_3344_5566_7788u64.to_be_bytes();
    let mut i = 0;
    while i < 8 {
        b[40 + i] = t[i];
        i += 1;
    }
    b
};

#[test]
fn a_client_request_is_byte_for_byte_what_chrony_answered() {
    let mut buf = [0xffu8; 48];
    let repr = Repr::client(Timestamp(0x1122_3344_5566_7788));
    repr.emit(&mut Packet::new_unchecked(&mut buf[..]));
    assert_eq!(buf, REQUEST);
    assert_eq!(repr.buffer_len(), HEADER_LEN);
    assert_eq!(
        Repr::parse(&Packet::new_checked(&buf[..]).unwrap()),
        Ok(repr)
    );
}

#[test]
fn chronys_reply_parses_field_by_field() {
    let packet = Packet::new_checked(&CHRONY_REPLY[..]).unwrap();
    let r = Repr::parse(&packet).unwrap();
    assert_eq!((r.leap, r.version, r.mode), (0, 4, Mode::Server));
    assert_eq!((r.stratum, r.poll, r.precision), (8, 0, -25));
    assert_eq!((r.root_delay, r.root_dispersion), (0, 0));
    assert_eq!(&r.reference_id, &[127, 127, 1, 1]);
    assert_eq!(r.origin, Timestamp(0x1122_3344_5566_7788));
    // 0xeeba2a43 s after 1900 is 2026-12-02 05:25:23 UTC.
    let t2 = r.receive.to_unix_ns(1_796_000_000_000_000_000).unwrap();
    assert_eq!(t2 / 1_000_000_000, 1_796_189_123);
    // T3 − T2: 0xa9d71 / 2^32 s = 162 µs (rounded down to the ns).
    assert_eq!(r.transmit.since_ns(r.receive), 161_972);
    assert!(packet.trailer().is_empty());
    let mut out = [0u8; 48];
    r.emit(&mut Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, CHRONY_REPLY);
}

#[test]
fn extension_fields_after_the_header_are_tolerated() {
    let mut long = CHRONY_REPLY.to_vec();
    long.extend_from_slice(&[0x01, 0x04, 0x00, 0x08, 1, 2, 3, 4]);
    let packet = Packet::new_checked(&long[..]).unwrap();
    assert_eq!(packet.trailer().len(), 8);
    assert_eq!(
        Repr::parse(&packet),
        Repr::parse(&Packet::new_checked(&CHRONY_REPLY[..]).unwrap())
    );
}

#[test]
fn short_bytes_and_unknown_versions_are_refused() {
    for len in 0..HEADER_LEN {
        assert_eq!(
            Packet::new_checked(&CHRONY_REPLY[..len]),
            Err(Error::Truncated)
        );
        assert_eq!(
            Repr::parse(&Packet::new_unchecked(&CHRONY_REPLY[..len])),
            Err(Error::Truncated)
        );
    }
    for version in [0u8, 5, 7] {
        let mut b = CHRONY_REPLY;
        b[0] = (b[0] & !0x38) | (version << 3);
        assert_eq!(
            Repr::parse(&Packet::new_checked(&b[..]).unwrap()),
            Err(Error::UnsupportedVersion)
        );
    }
}

#[test]
fn modes_round_trip_through_their_three_bits() {
    for v in 0..8u8 {
        assert_eq!(u8::from(Mode::from(v)), v);
    }
    assert_eq!(Mode::from(0x24), Mode::Server);
    assert_eq!(Mode::from(7), Mode::Other(7));
}

#[test]
fn timestamps_take_the_era_nearest_their_pivot() {
    let ns = 1_796_189_123_123_456_789u64;
    let t = Timestamp::from_unix_ns(ns);
    assert_eq!(t.seconds(), 0xeeba_2a43);
    let back = t.to_unix_ns(ns).unwrap();
    assert!(ns - back < 2, "{ns} came back as {back}");
    // Era 1 begins 2036-02-07 06:28:16 UTC (Unix 2 085 978 496): seconds 0 again.
    let era1 = 2_085_978_496u64 * 1_000_000_000;
    assert_eq!(Timestamp::from_unix_ns(era1), Timestamp(0));
    assert_eq!(Timestamp(0).to_unix_ns(era1 - 1_000_000_000), Some(era1));
    assert_eq!(Timestamp(0).to_unix_ns(era1 + 5), Some(era1));
    // Just before era 1, read from just after it: still before.
    let before = Timestamp(0xffff_ffff_0000_0000);
    assert_eq!(before.to_unix_ns(era1 + 1), Some(era1 - 1_000_000_000));
    // 1970 is nearer 2036 than 1900: seconds 0 is read as 2036.
    assert_eq!(Timestamp(0).to_unix_ns(0), Some(era1));
    // Past u64 nanoseconds there is no answer.
    assert_eq!(Timestamp(0).to_unix_ns(u64::MAX), None);
}

#[test]
fn differences_cross_the_end_of_an_era() {
    let before = Timestamp(0xffff_ffff_8000_0000); // half a second before era 1
    let after = Timestamp(0x0000_0000_8000_0000); // half a second into it
    assert_eq!(after.since_ns(before), 1_000_000_000);
    assert_eq!(before.since_ns(after), -1_000_000_000);
    assert_eq!(after.since_ns(after), 0);
}

#[test]
fn random_bytes_never_panic() {
    random_inputs(0x4e54_5034, &CHRONY_REPLY[..4], |buf| {
        if let Ok(repr) = Repr::parse(&Packet::new_unchecked(&*buf)) {
            let mut out = vec![0u8; buf.len()];
            repr.emit(&mut Packet::new_unchecked(&mut out[..]));
            assert_eq!(&out[..HEADER_LEN], &buf[..HEADER_LEN]);
            let _ = repr.receive.to_unix_ns(u64::from_le_bytes([buf[0]; 8]));
            let _ = repr.transmit.since_ns(repr.receive);
        }
    });
}
