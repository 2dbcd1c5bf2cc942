//! Probe: `is_probe` agrees with `Repr::parse`; a parsed probe re-emitted
//! over a copy of the input parses to the same `Repr` and leaves every byte
//! past its header (56 bytes, or 64 with the responder's clock) untouched;
//! stamping and naming the responder's clock in place change only their own
//! bytes and flag bits.
#![no_main]

use latlab_wire::probe::{self, Packet, Repr, ResponderClock};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parsed = Repr::parse(&Packet::new_unchecked(data));
    assert_eq!(probe::is_probe(data), parsed.is_ok());
    let Ok(repr) = parsed else {
        return;
    };
    let packet = Packet::new_checked(data).expect("parsed probe passes check_len");
    let _ = packet.padding();
    let header = repr.header_len();
    assert!(header <= data.len(), "a parsed header fits its datagram");

    let mut out = data.to_vec();
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    assert_eq!(&out[header..], &data[header..], "emit touched padding");
    // Emit writes header_len 56 or 64; data may have announced a longer header.
    assert_eq!(
        Repr::parse(&Packet::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );

    // Stamping in place keeps everything but bytes 40..56 and flag bit 0.
    let mut stamped = data.to_vec();
    Packet::new_checked(&mut stamped[..])
        .unwrap()
        .set_responder_stamps(1, 2);
    assert_eq!(&stamped[..5], &data[..5]);
    assert_eq!(stamped[5] & !1, data[5] & !1);
    assert_eq!(&stamped[6..40], &data[6..40]);
    assert_eq!(&stamped[56..], &data[56..]);
    let restamped = Repr::parse(&Packet::new_checked(&stamped[..]).unwrap()).unwrap();
    assert_eq!(restamped.responder, Some((1, 2)));
    assert_eq!(restamped.seq, repr.seq);

    // Naming the clock writes bytes 56..64 and flag bit 1 of a header with room for them,
    // and nothing at all in one without.
    let mut named = stamped.clone();
    let wrote = Packet::new_checked(&mut named[..])
        .unwrap()
        .set_responder_clock(7);
    assert_eq!(wrote, repr.responder_clock != ResponderClock::NotAsked);
    let renamed = Repr::parse(&Packet::new_checked(&named[..]).unwrap()).unwrap();
    if wrote {
        assert_eq!(named[5] & !2, stamped[5] & !2);
        assert_eq!(&named[..5], &stamped[..5]);
        assert_eq!(&named[6..56], &stamped[6..56]);
        assert_eq!(&named[64..], &stamped[64..]);
        assert_eq!(renamed.responder_clock, ResponderClock::Named(7));
    } else {
        assert_eq!(named, stamped);
        assert_eq!(renamed.responder_clock, ResponderClock::NotAsked);
    }
});
