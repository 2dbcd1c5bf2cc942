//! DNS replies: any bytes parse as a response or give an error, never a panic or a hang; a
//! parsed question's name is at most 255 bytes; `gen --protocol dns`'s receive half reads and
//! judges any bytes against a fixed query without panicking, and what it reads names a slot
//! of the 65,536-slot ledger.
#![no_main]

use latlab_probe::protocol::dns::{Dns, Query};
use latlab_probe::protocol::{Key, Protocol, Read, Sent};
use latlab_wire::dns::{Name, Response, MAX_NAME_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(response) = Response::parse(data) {
        if let Some(q) = response.question {
            assert!(q.name.as_bytes().len() <= MAX_NAME_LEN);
            // What was read reads again from its own wire form.
            let (again, end) =
                Name::read(q.name.as_bytes(), 0).expect("a read name is well-formed");
            assert_eq!((again, end), (q.name, q.name.as_bytes().len()));
        }
    }
    let dns = Dns::new(
        vec![
            Query::parse("a.lab.test").unwrap(),
            Query::parse("b.lab.test/AAAA").unwrap(),
        ],
        Some(1232),
    )
    .expect("two queries");
    let (_, mut replies) = dns.split(1, &[]);
    if let Ok(read) = replies.read(0, data) {
        match read {
            Read::Answer(Key::Slot(id)) => assert!(id < 65_536),
            other => panic!("dns reads only slots: {other:?}"),
        }
        for aux in [0, 1, 7] {
            let sent = Sent {
                seq: 3,
                intended_ns: 1,
                actual_ns: 2,
                aux,
            };
            if let Ok(v) = replies.judge(0, &sent, data) {
                assert!(v.outcome < dns.outcomes().len());
            }
        }
    }
});
