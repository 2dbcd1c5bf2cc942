//! Golden bytes captured from memcached 1.6.18 (`memcached -U`), and every error by name.

use super::*;

/// `set key:7 0 0 5` answered.
const STORED: &[u8] = b"\x01\x02\x00\x00\x00\x01\x00\x00STORED\r\n";
/// `get key:7` answered: a hit.
const HIT: &[u8] = b"\x02\x03\x00\x00\x00\x01\x00\x00VALUE key:7 0 5\r\nhello\r\nEND\r\n";
/// `get key:8` answered: a miss.
const MISS: &[u8] = b"\x03\x04\x00\x00\x00\x01\x00\x00END\r\n";
/// `bogus` answered.
const ERROR: &[u8] = b"\x04\x05\x00\x00\x00\x01\x00\x00ERROR\r\n";
/// `set key:9 0 0 3` followed by 6 bytes of data answered (then `ERROR` for the rest).
const CLIENT_ERROR: &[u8] = b"\x05\x06\x00\x00\x00\x01\x00\x00CLIENT_ERROR bad data chunk\r\n";

fn reply(datagram: &[u8]) -> Result<(Frame, Reply<'_>), Error> {
    let (frame, text) = Frame::parse(datagram)?;
    Ok((frame, parse_reply(text)?))
}

#[test]
fn replies_captured_from_memcached_parse() {
    let one = |request_id| Frame {
        request_id,
        sequence: 0,
        total: 1,
    };
    assert_eq!(reply(STORED), Ok((one(0x0102), Reply::Stored)));
    assert_eq!(
        reply(HIT),
        Ok((
            one(0x0203),
            Reply::Value {
                key: b"key:7",
                flags: 0,
                data: b"hello",
                cas: None
            }
        ))
    );
    assert_eq!(reply(MISS), Ok((one(0x0304), Reply::End)));
    assert_eq!(reply(ERROR), Ok((one(0x0405), Reply::Error)));
    assert_eq!(
        reply(CLIENT_ERROR),
        Ok((one(0x0506), Reply::ClientError(b"bad data chunk")))
    );
}

#[test]
fn a_reply_of_two_datagrams_reads_once_put_together() {
    // memcached's reply to `get key:10` for 1500 bytes of `v`: 1400 + 144 bytes.
    let mut text = b"VALUE key:10 0 1500\r\n".to_vec();
    text.extend(std::iter::repeat_n(b'v', 1500));
    text.extend(b"\r\nEND\r\n");
    let mut first = b"\x07\x08\x00\x00\x00\x02\x00\x00".to_vec();
    first.extend(&text[..1392]);
    let mut second = b"\x07\x08\x00\x01\x00\x02\x00\x00".to_vec();
    second.extend(&text[1392..]);
    assert_eq!((first.len(), second.len()), (1400, 144));
    let (f1, t1) = Frame::parse(&first).unwrap();
    let (f2, t2) = Frame::parse(&second).unwrap();
    assert_eq!((f1.sequence, f1.total, f2.sequence, f2.total), (0, 2, 1, 2));
    assert_eq!(parse_reply(t1), Err(Error::ShortData));
    let whole = [t1, t2].concat();
    match parse_reply(&whole) {
        Ok(Reply::Value { key, data, .. }) => {
            assert_eq!(key, b"key:10");
            assert_eq!(data.len(), 1500);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn requests_are_written_as_memcached_reads_them() {
    let mut buf = [0u8; 64];
    let n = emit_get(0x0203, b"key:7", &mut buf).unwrap();
    assert_eq!(&buf[..n], b"\x02\x03\x00\x00\x00\x01\x00\x00get key:7\r\n");
    let n = emit_set(0x0102, b"key:7", 0, b"hello", &mut buf).unwrap();
    assert_eq!(
        &buf[..n],
        b"\x01\x02\x00\x00\x00\x01\x00\x00set key:7 0 0 5\r\nhello\r\n"
    );
    assert_eq!(set_len(5, 0, 5), n);
    assert_eq!(
        set_len(5, 4_000_000_000, 12_345),
        8 + 4 + 5 + 1 + 10 + 3 + 5 + 2 + 12_345 + 2
    );
    assert_eq!(
        emit_set(1, b"key:7", 0, &[0; 60], &mut buf),
        Err(Error::BadRequest)
    );
    for key in [&b""[..], b"a b", b"a\r\n", &[b'k'; 251]] {
        assert_eq!(emit_get(1, key, &mut [0u8; 300]), Err(Error::BadRequest));
    }
}

#[test]
fn every_error_is_its_own() {
    let frame = |b: &[u8]| Frame::parse(b).map(|_| ());
    assert_eq!(
        frame(b"\x00\x01\x00\x00\x00\x01\x00"),
        Err(Error::ShortFrame)
    );
    assert_eq!(
        frame(b"\x00\x01\x00\x00\x00\x00\x00\x00"),
        Err(Error::ZeroTotal)
    );
    assert_eq!(
        frame(b"\x00\x01\x00\x02\x00\x02\x00\x00"),
        Err(Error::SequencePastTotal)
    );
    assert_eq!(
        frame(b"\x00\x01\x00\x00\x00\x01\x00\x01"),
        Err(Error::ReservedNotZero)
    );
    let cases: [(&[u8], Error); 14] = [
        (b"STORED", Error::NoLineEnd),
        (b"STORED\r\nX", Error::TrailingBytes),
        (b"HELLO\r\n", Error::UnknownReply),
        (b"VALUE k 0\r\n", Error::BadValueLine),
        (b"VALUE  0 1\r\nx\r\nEND\r\n", Error::BadValueLine),
        (b"VALUE k 0 1 2 3\r\nx\r\nEND\r\n", Error::BadValueLine),
        (b"VALUE k x 1\r\nx\r\nEND\r\n", Error::BadFlags),
        (b"VALUE k 4294967296 1\r\nx\r\nEND\r\n", Error::BadFlags),
        (b"VALUE k 0 -1\r\nx\r\nEND\r\n", Error::BadByteCount),
        (b"VALUE k 0 1 c\r\nx\r\nEND\r\n", Error::BadCas),
        (b"VALUE k 0 4\r\nx\r\nEND\r\n", Error::DataNotTerminated),
        (b"VALUE k 0 20\r\nx\r\nEND\r\n", Error::ShortData),
        (b"VALUE k 0 1\r\nx\r\nEN\r\n", Error::NoEnd),
        (b"VALUE k 0 1\r\nx\r\nEND\r\nEND\r\n", Error::TrailingBytes),
    ];
    for (text, error) in cases {
        assert_eq!(
            parse_reply(text),
            Err(error),
            "{:?}",
            String::from_utf8_lossy(text)
        );
    }
    assert_eq!(
        parse_reply(b"VALUE k 7 1 99\r\nx\r\nEND\r\n"),
        Ok(Reply::Value {
            key: b"k",
            flags: 7,
            data: b"x",
            cas: Some(99)
        })
    );
    assert_eq!(
        parse_reply(b"SERVER_ERROR out of memory\r\n"),
        Ok(Reply::ServerError(b"out of memory"))
    );
    assert_eq!(
        parse_reply(b"CLIENT_ERROR x\r\nEND\r\n"),
        Err(Error::TrailingBytes)
    );
}

#[test]
fn any_bytes_parse_or_fail_without_panicking() {
    crate::testutil::random_inputs(11, b"\x00\x01\x00\x00\x00\x01\x00\x00VALUE k 0 ", |buf| {
        if let Ok((_, text)) = Frame::parse(buf) {
            let _ = parse_reply(text);
        }
        let _ = parse_reply(buf);
    });
}
