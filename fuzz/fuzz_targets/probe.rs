//! Probe: `is_probe` agrees with `Repr::parse`; a parsed probe re-emitted
//! over a copy of the input parses to the same `Repr` and leaves every byte
//! past the 56-byte header untouched.
#![no_main]

use latlab_wire::probe::{self, Packet, Repr, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let parsed = Repr::parse(&Packet::new_unchecked(data));
    assert_eq!(probe::is_probe(data), parsed.is_ok());
    let Ok(repr) = parsed else {
        return;
    };
    let packet = Packet::new_checked(data).expect("parsed probe passes check_len");
    let _ = packet.padding();

    let mut out = data.to_vec();
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    assert_eq!(
        &out[HEADER_LEN..],
        &data[HEADER_LEN..],
        "emit touched padding"
    );
    // Emit writes header_len 56; data may have announced a longer header.
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
});
