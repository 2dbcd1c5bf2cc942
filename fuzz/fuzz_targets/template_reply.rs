//! Template replies: `gen --protocol template`'s receive half reads and judges any bytes,
//! for every kind of token (long, short, moved, searched for, none), without panicking; what
//! it reads is the key its kind of token gives.
#![no_main]

use latlab_probe::protocol::template::{ReplyToken, Template};
use latlab_probe::protocol::{Key, Protocol, Read, Sent};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let payload = b"0123456789abcdefghij".to_vec();
    let kinds = [
        (Some((4, 12)), None),
        (Some((18, 2)), None),
        (Some((0, 8)), Some(ReplyToken::At(30))),
        (Some((2, 16)), Some(ReplyToken::Any)),
        (None, None),
    ];
    for (token, reply) in kinds {
        let t = Template::new(payload.clone(), token, reply).expect("fits the payload");
        let (_, mut replies) = t.split(0x1234, &[]);
        let Ok(Read::Answer(key)) = replies.read(0, data) else {
            continue;
        };
        match (token, key) {
            (None, Key::Oldest) => {}
            (Some((_, len)), Key::Slot(slot)) if len < 8 => {
                assert!(slot < t.id_space().expect("a short token has an id space"))
            }
            (Some((_, len)), Key::Seq(_)) if len >= 8 => {}
            other => panic!("{other:?}"),
        }
        let sent = Sent {
            seq: 5,
            intended_ns: 1,
            actual_ns: 2,
            aux: 0,
        };
        if let Ok(v) = replies.judge(0, &sent, data) {
            assert_eq!(v.outcome, 0);
        }
    }
});
