//! Game handshake: `Repr::parse` never panics; a parsed message is a game
//! message of the type it says, `new_checked` accepts it, and re-emitting it
//! over a copy of the input reproduces its first `buffer_len()` bytes exactly
//! (the format is canonical) and touches nothing after them.
#![no_main]

use latlab_wire::game::{self, Packet, Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = game::message_type(data);
    let parsed = Repr::parse(&Packet::new_unchecked(data));
    let Ok(repr) = parsed else {
        return;
    };
    assert!(game::is_game_message(data));
    assert_eq!(game::message_type(data), Some(repr.message_type()));
    let packet = Packet::new_checked(data).expect("parsed message passes check_len");
    assert_eq!(packet.client_nonce(), repr.client_nonce());

    let len = repr.buffer_len();
    assert!(len <= data.len());
    let mut out = data.to_vec();
    assert_eq!(repr.emit_bytes(&mut out), len);
    assert_eq!(&out[..len], &data[..len], "emit is not canonical");
    assert_eq!(&out[len..], &data[len..], "emit wrote past buffer_len");
    assert_eq!(
        Repr::parse(&Packet::new_checked(&out[..len]).unwrap()),
        Ok(repr)
    );
});
