//! IPv4: parse never panics; a parsed header re-emits (without options) to a
//! header that parses to the same `Repr` with the same payload.
#![no_main]

use latlab_wire::ipv4::{Packet, Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let packet = Packet::new_unchecked(data);
    let Ok(repr) = Repr::parse(&packet) else {
        return;
    };
    let packet = Packet::new_checked(data).expect("parsed packet passes check_len");
    assert!(packet.verify_checksum());
    let payload = packet.payload();
    assert_eq!(payload.len(), repr.payload_len);

    let mut out = vec![0u8; repr.buffer_len()];
    let mut emitted = Packet::new_unchecked(&mut out[..]);
    repr.emit(&mut emitted);
    emitted.payload_mut().copy_from_slice(payload);

    let emitted = Packet::new_checked(&out[..]).expect("emitted packet passes check_len");
    assert_eq!(Repr::parse(&emitted), Ok(repr));
    assert_eq!(emitted.payload(), payload);
});
