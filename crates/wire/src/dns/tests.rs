use super::*;

/// unbound 1.17.1's answer to `a.lab.test. A` (ID 0xabcd) from a static local zone holding
/// `a.lab.test. A 10.0.0.1`: QR AA RD RA, one answer whose name is a pointer to the question's.
const UNBOUND_A: &str = "abcd858000010001000000000161036c616204746573740000010001\
                         c00c0001000100000e1000040a000001";
/// unbound's REFUSED for `x.refused.test. A` (ID 0xabce), `local-zone: refused.test. refuse`.
const UNBOUND_REFUSED: &str = "abce858500010000000000000178077265667573656404746573740000010001";
/// unbound's NXDOMAIN for `b.lab.test. A` (ID 0xabcf).
const UNBOUND_NXDOMAIN: &str = "abcf858300010000000000000162036c616204746573740000010001";

fn hex(s: &str) -> Vec<u8> {
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn name(text: &str) -> Name {
    Name::from_text(text).unwrap()
}

#[test]
fn a_query_is_the_bytes_unbound_answered() {
    let n = name("a.lab.test");
    let q = Query {
        id: 0xabcd,
        name: &n,
        qtype: TYPE_A,
        edns: None,
    };
    let mut buf = [0u8; 64];
    let len = q.emit(&mut buf);
    assert_eq!(
        &buf[..len],
        &hex("abcd010000010000000000000161036c616204746573740000010001")[..]
    );
}

#[test]
fn an_edns_query_ends_in_an_opt_record_with_its_payload_size() {
    let n = name("a.lab.test.");
    let q = Query {
        id: 1,
        name: &n,
        qtype: 28,
        edns: Some(1232),
    };
    let mut buf = [0xffu8; 64];
    let len = q.emit(&mut buf);
    assert_eq!(len, 12 + 12 + 4 + 11);
    assert_eq!(&buf[10..12], &[0, 1], "ARCOUNT 1");
    assert_eq!(&buf[24..28], &[0, 28, 0, 1]);
    assert_eq!(&buf[28..len], &[0, 0, 41, 0x04, 0xd0, 0, 0, 0, 0, 0, 0]);
}

#[test]
fn unbounds_answers_read_as_header_and_question() {
    let r = Response::parse(&hex(UNBOUND_A)).unwrap();
    let h = r.header;
    assert_eq!(
        (h.id, h.qr, h.opcode, h.aa, h.tc, h.rd, h.ra),
        (0xabcd, true, 0, true, false, true, true)
    );
    assert_eq!(
        (h.rcode, h.qdcount, h.ancount, h.nscount, h.arcount),
        (0, 1, 1, 0, 0)
    );
    let q = r.question.unwrap();
    assert_eq!((q.name, q.qtype, q.qclass), (name("a.lab.test"), 1, 1));
    assert_eq!(q.name.to_string(), "a.lab.test.");
    // The answer's name is a pointer to the question's.
    assert_eq!(
        Name::read(&hex(UNBOUND_A), 28).unwrap(),
        (name("a.lab.test"), 30)
    );

    assert_eq!(
        Response::parse(&hex(UNBOUND_REFUSED)).unwrap().header.rcode,
        RCODE_REFUSED
    );
    let nx = Response::parse(&hex(UNBOUND_NXDOMAIN)).unwrap();
    assert_eq!(nx.header.rcode, RCODE_NXDOMAIN);
    assert_eq!(nx.question.unwrap().name, name("b.lab.test"));
}

/// RFC 1035 4.1.4's example: F.ISI.ARPA at 20, FOO.F.ISI.ARPA at 40 as `FOO` and a pointer
/// to 20, ARPA at 64 as a pointer to 26, the root at 92.
#[test]
fn rfc_1035s_compression_example_reads() {
    let mut m = vec![0u8; 100];
    m[20..32].copy_from_slice(&[1, b'F', 3, b'I', b'S', b'I', 4, b'A', b'R', b'P', b'A', 0]);
    m[40..46].copy_from_slice(&[3, b'F', b'O', b'O', 0xc0, 20]);
    m[64..66].copy_from_slice(&[0xc0, 26]);
    m[92] = 0;
    assert_eq!(Name::read(&m, 20).unwrap(), (name("F.ISI.ARPA"), 32));
    assert_eq!(Name::read(&m, 40).unwrap(), (name("FOO.F.ISI.ARPA"), 46));
    assert_eq!(Name::read(&m, 64).unwrap(), (name("ARPA"), 66));
    assert_eq!(Name::read(&m, 92).unwrap(), (Name::ROOT, 93));
    assert!(name("foo.f.isi.arpa").eq_ignore_case(&Name::read(&m, 40).unwrap().0));
    assert_ne!(name("foo.f.isi.arpa"), Name::read(&m, 40).unwrap().0);
}

#[test]
fn bad_names_are_each_their_own_error() {
    let mut header = hex(UNBOUND_NXDOMAIN)[..12].to_vec();
    let with = |name: &[u8]| {
        let mut m = header.clone();
        m.extend_from_slice(name);
        m.extend_from_slice(&[0, 1, 0, 1]);
        Response::parse(&m)
    };
    // A pointer to itself, and one past the datagram.
    assert_eq!(with(&[0xc0, 12]), Err(Error::PointerForward));
    assert_eq!(with(&[0xff, 0xff]), Err(Error::PointerForward));
    // `a` then a pointer back to `a`: a loop (both pointers point back).
    assert_eq!(with(&[1, b'a', 0xc0, 12]), Err(Error::PointerLoop));
    assert_eq!(
        with(&[1, b'a', 1, b'b', 0xc0, 14, 0]),
        Err(Error::PointerLoop)
    );
    // Label lengths 64 and 128 (the reserved label types).
    assert_eq!(with(&[64, b'a']), Err(Error::LabelTooLong));
    assert_eq!(with(&[0x80, 1]), Err(Error::LabelTooLong));
    // 5 labels of 63 bytes: 320 bytes.
    let mut long = Vec::new();
    for _ in 0..5 {
        long.push(63);
        long.extend_from_slice(&[b'x'; 63]);
    }
    long.push(0);
    assert_eq!(with(&long), Err(Error::NameTooLong));
    // Cut short: inside a label, before the root, in a pointer.
    assert_eq!(
        Response::parse(&[&header[..], &[3, b'a']].concat()),
        Err(Error::TruncatedName)
    );
    assert_eq!(
        Response::parse(&[&header[..], &[1, b'a']].concat()),
        Err(Error::TruncatedName)
    );
    assert_eq!(
        Response::parse(&[&header[..], &[0xc0]].concat()),
        Err(Error::TruncatedName)
    );
    assert_eq!(
        Response::parse(&[&header[..], &[0, 0, 1]].concat()),
        Err(Error::TruncatedQuestion)
    );
    assert_eq!(Response::parse(&header[..11]), Err(Error::Truncated));
    // QDCOUNT 0: no question to read.
    header[5] = 0;
    assert_eq!(Response::parse(&header).unwrap().question, None);
}

#[test]
fn a_name_at_the_longest_reads_and_one_byte_more_does_not() {
    // 3 labels of 63 and one of 61: 3*64 + 62 + 1 = 255 bytes.
    let text = format!("{0}.{0}.{0}.{1}", "x".repeat(63), "y".repeat(61));
    let n = name(&text);
    assert_eq!(n.as_bytes().len(), 255);
    assert_eq!(Name::read(n.as_bytes(), 0).unwrap(), (n, 255));
    let over = format!("{0}.{0}.{0}.{1}", "x".repeat(63), "y".repeat(62));
    assert_eq!(Name::from_text(&over), Err(Error::NameTooLong));
}

#[test]
fn text_names_are_checked() {
    assert_eq!(Name::from_text("."), Ok(Name::ROOT));
    assert_eq!(Name::ROOT.to_string(), ".");
    assert_eq!(Name::from_text(""), Err(Error::BadText));
    assert_eq!(Name::from_text("a..b"), Err(Error::BadText));
    assert_eq!(Name::from_text("a b"), Err(Error::BadText));
    assert_eq!(Name::from_text(&"x".repeat(64)), Err(Error::LabelTooLong));
}

#[test]
fn types_read_by_name_and_as_typennn() {
    for (n, c) in TYPES {
        assert_eq!(type_from_name(n), Some(c));
        assert_eq!(type_name(c).to_string(), n);
    }
    assert_eq!(type_from_name("aaaa"), Some(28));
    assert_eq!(type_from_name("TYPE65"), Some(65));
    assert_eq!(type_from_name("type1234"), Some(1234));
    assert_eq!(type_name(1234).to_string(), "TYPE1234");
    for bad in ["", "TYPE", "TYPE70000", "TYPE-1", "AAA", "TYPE1x"] {
        assert_eq!(type_from_name(bad), None, "{bad}");
    }
}
