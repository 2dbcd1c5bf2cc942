//! Ethernet: any input either fails to parse or re-emits to the same bytes.
#![no_main]

use latlab_wire::ethernet::{Frame, Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let frame = Frame::new_unchecked(data);
    let Ok(repr) = Repr::parse(&frame) else {
        assert!(Frame::new_checked(data).is_err());
        return;
    };
    let frame = Frame::new_checked(data).expect("parsed frame passes check_len");
    let payload = frame.payload();

    let mut out = vec![0u8; repr.buffer_len(payload.len())];
    let mut emitted = Frame::new_unchecked(&mut out[..]);
    repr.emit(&mut emitted);
    emitted.payload_mut().copy_from_slice(payload);
    assert_eq!(out, data, "Ethernet re-emit changed bytes");

    let reparsed = Repr::parse(&Frame::new_checked(&out[..]).unwrap()).unwrap();
    assert_eq!(reparsed, repr);
});
