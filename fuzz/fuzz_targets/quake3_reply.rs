//! Quake III reply: any datagram is an out-of-band packet or refused, never a panic; an
//! infoResponse's pairs have keys and re-join to its info string; `--protocol quake3`'s reply
//! half reads and judges any datagram to an answer (its outcome one of the protocol's) or a
//! cause, and a challenge it wrote comes back as the query it names.
#![no_main]

use latlab_probe::protocol::quake3::Quake3;
use latlab_probe::protocol::{Key, Protocol, Read, Request, Sent};
use latlab_wire::quake3::OutOfBand;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parsed = OutOfBand::parse(data);
    if let Ok(packet) = parsed {
        assert!(packet.command.len() + packet.body.len() < data.len());
        if let Ok(info) = packet.info_response() {
            let mut joined = Vec::new();
            for (k, v) in info.pairs() {
                assert!(!k.is_empty());
                joined.push(b'\\');
                joined.extend_from_slice(k);
                joined.push(b'\\');
                joined.extend_from_slice(v);
            }
            assert_eq!(joined, info.as_bytes());
        }
    }
    let (mut requests, mut replies) = Quake3.split(7, &[]);
    match replies.read(0, data) {
        Ok(Read::Answer(_)) => {
            assert!(parsed.is_ok());
            let sent = Sent {
                seq: 0,
                intended_ns: 0,
                actual_ns: 0,
                aux: 0,
            };
            let verdict = replies.judge(0, &sent, data).expect("read took it");
            assert!(verdict.outcome < Quake3.outcomes().len());
        }
        Ok(Read::Partial) => panic!("an infoResponse is one datagram"),
        Err(cause) => assert!(!cause.is_empty()),
    }
    // The query for a sequence number the input picks, answered, names it again.
    let seq = data
        .iter()
        .fold(0u64, |a, b| a.rotate_left(8) ^ u64::from(*b))
        & ((1 << 40) - 1);
    let mut query = [0u8; 64];
    let len = requests
        .write(
            Request {
                flow: 0,
                seq,
                warmup: false,
            },
            &mut query,
        )
        .len;
    let mut reply = b"\xff\xff\xff\xffinfoResponse\n\\clients\\0\\challenge\\".to_vec();
    reply.extend_from_slice(&query[12..len]);
    assert_eq!(replies.read(0, &reply), Ok(Read::Answer(Key::Seq(seq))));
});
