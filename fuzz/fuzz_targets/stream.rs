//! `latlab stream` messages: any input either fails to parse or re-emits to the same bytes
//! (emit never touches the padding); the frame prefix of any input parses or is refused
//! without a panic, and what it announces is never above the largest message.
#![no_main]

use latlab_wire::stream::{parse_frame_prefix, Packet, Repr, HEADER_LEN, MAX_MESSAGE_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(Some(len)) = parse_frame_prefix(data) {
        assert!(len <= MAX_MESSAGE_LEN);
    }
    let Ok(repr) = Repr::parse(&Packet::new_unchecked(data)) else {
        return;
    };
    let packet = Packet::new_checked(data).expect("a parsed message passes check_len");
    assert_eq!(packet.padding(), &data[HEADER_LEN..]);
    let mut out = data.to_vec();
    repr.emit(&mut Packet::new_unchecked(&mut out[..]));
    assert_eq!(out, data, "re-emit changed bytes");
    assert_eq!(
        Repr::parse(&Packet::new_checked(&out[..]).unwrap()),
        Ok(repr)
    );
});
