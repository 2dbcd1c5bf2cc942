//! NTP reply: the header parses or is refused, never panics; a parsed header re-emits to its
//! own 48 bytes, the rest untouched; its timestamps convert across eras against any pivot;
//! `--protocol ntp`'s reply half reads and judges any datagram to an answer (its outcome one
//! of the protocol's, the server's time at most a second, none for a kiss) or a cause.
#![no_main]

use latlab_probe::protocol::ntp::Ntp;
use latlab_probe::protocol::{Protocol, Read, Sent};
use latlab_wire::ntp::{Packet, Repr, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parsed = Repr::parse(&Packet::new_unchecked(data));
    if let Ok(repr) = parsed {
        assert!(data.len() >= HEADER_LEN);
        let mut out = data.to_vec();
        repr.emit(&mut Packet::new_unchecked(&mut out[..]));
        assert_eq!(out, data, "a parsed header re-emits to its own bytes");
        let pivot = u64::from_be_bytes(data[40..48].try_into().unwrap());
        for t in [repr.reference, repr.origin, repr.receive, repr.transmit] {
            if let Some(ns) = t.to_unix_ns(pivot) {
                assert_eq!(
                    latlab_wire::ntp::Timestamp::from_unix_ns(ns).seconds(),
                    t.seconds()
                );
            }
        }
        let _ = repr.transmit.since_ns(repr.receive);
    }
    let (_, mut replies) = Ntp.split(7, &[]);
    match replies.read(0, data) {
        Ok(Read::Answer(_)) => {
            assert!(parsed.is_ok(), "an answer is an NTP packet");
            let sent = Sent {
                seq: 0,
                intended_ns: 0,
                actual_ns: 0,
                aux: 0,
            };
            let verdict = replies.judge(0, &sent, data).expect("read took it");
            assert!(verdict.outcome < Ntp.outcomes().len());
            assert!(verdict.server_ns.is_none_or(|ns| ns <= 1_000_000_000));
        }
        Ok(Read::Partial) => panic!("an NTP reply is one datagram"),
        Err(cause) => assert!(!cause.is_empty()),
    }
});
