use super::*;
use crate::testutil::random_inputs;

/// OpenArena 0.8.8's dedicated server (Debian's ioquake3 engine, map aggressor) answering
/// `getinfo abc123`, captured on loopback on 2026-12-02.
const OPENARENA_REPLY: &[u8] = b"\xff\xff\xff\xffinfoResponse\n\\voip\\opus\\g_needpass\\0\\pure\\1\
\\gametype\\0\\sv_maxclients\\8\\g_humanplayers\\0\\clients\\0\\mapname\\aggressor\\hostname\\noname\
\\protocol\\71\\gamename\\Quake3Arena\\challenge\\abc123";

#[test]
fn a_getinfo_query_is_the_marker_the_command_and_the_challenge() {
    let mut buf = [0u8; 32];
    let len = emit_getinfo(b"abc123", &mut buf).unwrap();
    assert_eq!(&buf[..len], b"\xff\xff\xff\xffgetinfo abc123");
    assert_eq!(len, getinfo_len(b"abc123"));
    let query = OutOfBand::parse(&buf[..len]).unwrap();
    assert_eq!((query.command, query.body), (GETINFO, &b"abc123"[..]));
}

#[test]
fn challenges_the_engine_would_not_echo_are_refused() {
    let mut buf = [0u8; 256];
    for bad in [
        &b""[..],
        b"a b",
        b"a\\b",
        b"a;b",
        b"a\"b",
        b"\x01",
        &[b'a'; 129],
    ] {
        assert_eq!(
            emit_getinfo(bad, &mut buf),
            Err(Error::Malformed),
            "{bad:?}"
        );
    }
    assert!(emit_getinfo(&[b'f'; 128], &mut buf).is_ok());
    assert_eq!(emit_getinfo(b"abc", &mut buf[..14]), Err(Error::Truncated));
}

#[test]
fn openarenas_info_response_gives_its_pairs() {
    let packet = OutOfBand::parse(OPENARENA_REPLY).unwrap();
    assert_eq!(packet.command, INFO_RESPONSE);
    let info = packet.info_response().unwrap();
    assert_eq!(info.pairs().count(), 12);
    assert_eq!(info.get(b"challenge"), Some(&b"abc123"[..]));
    assert_eq!(info.get(b"mapname"), Some(&b"aggressor"[..]));
    assert_eq!(info.get(b"hostname"), Some(&b"noname"[..]));
    assert_eq!(info.get(b"gamename"), Some(&b"Quake3Arena"[..]));
    assert_eq!(info.number(b"clients"), Some(0));
    assert_eq!(info.number(b"sv_maxclients"), Some(8));
    assert_eq!(info.get(b"nothere"), None);
    assert_eq!(info.number(b"mapname"), None);
}

#[test]
fn a_trailing_newline_is_dropped_and_an_odd_info_string_refused() {
    let info = Info::parse(b"\\a\\1\\b\\2\n\0").unwrap();
    assert_eq!(info.as_bytes(), b"\\a\\1\\b\\2");
    assert_eq!(info.get(b"b"), Some(&b"2"[..]));
    assert_eq!(Info::parse(b"").unwrap().pairs().count(), 0);
    assert_eq!(Info::parse(b"\\a\\").unwrap().get(b"a"), Some(&b""[..]));
    for bad in [
        &b"a\\1"[..],
        b"\\a",
        b"\\a\\1\\b",
        b"\\\\1",
        b"\\a\\1\n\\b\\2",
    ] {
        assert_eq!(Info::parse(bad), Err(Error::Malformed), "{bad:?}");
    }
}

#[test]
fn other_packets_are_named() {
    assert_eq!(OutOfBand::parse(b"\xff\xff\xff"), Err(Error::Truncated));
    assert_eq!(
        OutOfBand::parse(b"\x01\x00\x00\x00hello"),
        Err(Error::BadMagic)
    );
    let status = OutOfBand::parse(b"\xff\xff\xff\xffstatusResponse\n\\a\\b\n0 0 \"x\"\n").unwrap();
    assert_eq!(status.command, b"statusResponse");
    assert_eq!(status.info_response(), Err(Error::OtherProtocol));
    let bare = OutOfBand::parse(b"\xff\xff\xff\xffinfoResponse").unwrap();
    assert_eq!(bare.body, b"");
    assert_eq!(bare.info_response().unwrap().pairs().count(), 0);
}

#[test]
fn random_bytes_never_panic() {
    random_inputs(0x5133_4133, &OPENARENA_REPLY[..20], |buf| {
        if let Ok(packet) = OutOfBand::parse(buf) {
            assert!(packet.command.len() + 4 <= buf.len());
            if let Ok(info) = packet.info_response() {
                for (k, _) in info.pairs() {
                    assert!(!k.is_empty());
                }
                let _ = info.number(b"clients");
            }
        }
    });
}
