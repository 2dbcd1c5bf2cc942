//! STUN responses: any bytes parse as a message (its attributes walked) or fail without a
//! panic; the receive half of `--protocol stun` reads them to a sequence number or a cause,
//! and judges what it read with one of its outcomes.
#![no_main]

use std::net::SocketAddr;

use latlab_probe::protocol::stun::{Stun, OUTCOMES};
use latlab_probe::protocol::{Key, Protocol, Read, Sent};
use latlab_wire::stun::Message;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Message::parse(data) {
        for a in m.attributes() {
            let a = a.expect("a parsed message's attributes are whole");
            assert!(a.value.len() <= data.len());
        }
        let _ = m.binding_response();
    }
    let locals: [SocketAddr; 2] = [
        SocketAddr::from(([127, 0, 0, 1], 57009)),
        SocketAddr::from(([0, 0, 0, 0], 57009)),
    ];
    // The run id whose transaction IDs a seed was captured with is unknown to the fuzzer:
    // run id 0 and the answer's own bytes both get tried.
    for run_id in [0, 1] {
        let (_, mut replies) = Stun.split(run_id, &locals);
        for flow in 0..2 {
            if let Ok(Read::Answer(key)) = replies.read(flow, data) {
                let Key::Seq(seq) = key else {
                    panic!("stun names a sequence number, not {key:?}");
                };
                let sent = Sent {
                    seq,
                    intended_ns: 0,
                    actual_ns: 0,
                    aux: 0,
                };
                let v = replies.judge(flow, &sent, data).expect("read, then judged");
                assert!(v.outcome < OUTCOMES.len());
            }
        }
    }
});
