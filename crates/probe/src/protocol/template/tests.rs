use super::*;

fn request(seq: u64) -> Request {
    Request {
        flow: 0,
        seq,
        warmup: false,
    }
}

fn sent(seq: u64) -> Sent {
    Sent {
        seq,
        intended_ns: 0,
        actual_ns: 0,
        aux: 0,
    }
}

fn template(token: Option<(usize, usize)>, reply: Option<ReplyToken>) -> Template {
    Template::new(b"hello, template!....".to_vec(), token, reply).unwrap()
}

#[test]
fn flags_that_do_not_fit_are_refused() {
    let p = || b"12345678901234567890".to_vec();
    assert_eq!(
        Template::new(Vec::new(), None, None).unwrap_err(),
        TemplateError::Empty
    );
    assert_eq!(
        Template::new(p(), Some((30, 8)), None)
            .unwrap_err()
            .to_string(),
        "30:8 lies outside the 20-byte payload"
    );
    assert_eq!(
        Template::new(p(), Some((0, 17)), None).unwrap_err(),
        TemplateError::TokenLen(17)
    );
    assert_eq!(
        Template::new(p(), Some((0, 0)), None).unwrap_err(),
        TemplateError::TokenLen(0)
    );
    assert_eq!(
        Template::new(p(), Some((0, 4)), Some(ReplyToken::Any)).unwrap_err(),
        TemplateError::ShortAny
    );
    assert!(Template::new(p(), Some((12, 8)), None).is_ok());
}

#[test]
fn a_long_token_carries_the_whole_sequence_and_another_runs_is_not_read() {
    let t = template(Some((4, 12)), None);
    assert_eq!((t.id_space(), t.one_in_flight()), (None, false));
    let (mut req, mut rep) = t.split(7, &[]);
    let (_, mut other_run) = t.split(8, &[]);
    let mut buf = [0u8; 64];
    let w = req.write(request(1_234_567), &mut buf);
    assert_eq!(w.len, 20);
    assert_eq!(&buf[..4], b"hell");
    assert_eq!(&buf[16..20], b"....");
    let reply = buf[..20].to_vec();
    assert_eq!(rep.read(0, &reply), Ok(Read::Answer(Key::Seq(1_234_567))));
    assert_eq!(rep.judge(0, &sent(1_234_567), &reply).unwrap().outcome, 0);
    assert_eq!(other_run.read(0, &reply), Err("another run's token"));
    assert_eq!(
        rep.read(0, &reply[..10]),
        Err("shorter than its token's place")
    );
}

#[test]
fn a_short_token_names_a_slot_and_is_checked_whole() {
    let t = template(Some((0, 1)), None);
    assert_eq!(t.id_space(), Some(256));
    assert_eq!(template(Some((0, 3)), None).id_space(), Some(65_536));
    let (mut req, mut rep) = t.split(7, &[]);
    let mut buf = [0u8; 64];
    req.write(request(300), &mut buf);
    assert_eq!(buf[0], 44);
    assert_eq!(rep.read(0, &buf[..20]), Ok(Read::Answer(Key::Slot(44))));
    assert!(rep.judge(0, &sent(300), &buf[..20]).is_ok());
    assert_eq!(rep.judge(0, &sent(301), &buf[..20]), Err("another token"));
}

#[test]
fn a_token_moved_by_the_server_is_read_where_it_is_or_found() {
    let moved = template(Some((0, 8)), Some(ReplyToken::At(30)));
    let any = template(Some((0, 8)), Some(ReplyToken::Any));
    for t in [moved, any] {
        let (mut req, mut rep) = t.split(9, &[]);
        let mut buf = [0u8; 64];
        req.write(request(42), &mut buf);
        let mut reply = vec![b'x'; 30];
        reply.extend_from_slice(&buf[..8]);
        assert_eq!(rep.read(0, &reply), Ok(Read::Answer(Key::Seq(42))), "{t:?}");
    }
    let (_, mut rep) = template(Some((0, 8)), Some(ReplyToken::Any)).split(9, &[]);
    assert_eq!(rep.read(0, &[b'x'; 40]), Err("no token in it"));
}

#[test]
fn without_a_token_every_reply_is_the_oldest_request_s() {
    let t = template(None, None);
    assert!(t.one_in_flight());
    let (mut req, mut rep) = t.split(1, &[]);
    let mut buf = [0u8; 64];
    req.write(request(5), &mut buf);
    assert_eq!(&buf[..20], b"hello, template!....");
    assert_eq!(rep.read(0, b"anything"), Ok(Read::Answer(Key::Oldest)));
    assert_eq!(rep.judge(0, &sent(5), b"anything").unwrap().outcome, 0);
}
