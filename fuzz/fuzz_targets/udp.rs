//! UDP: the first 8 input bytes are the IPv4 source and destination address
//! (for the pseudo-header), the rest is the datagram. A parsed datagram
//! re-emits to one with the same `Repr` and payload; if the input carried a
//! (valid, non-zero) checksum, re-emitting reproduces it byte for byte.
#![no_main]

use std::net::Ipv4Addr;

use latlab_wire::udp::{Packet, Repr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let src = Ipv4Addr::new(data[0], data[1], data[2], data[3]);
    let dst = Ipv4Addr::new(data[4], data[5], data[6], data[7]);
    let data = &data[8..];

    let Ok(repr) = Repr::parse(&Packet::new_unchecked(data), src, dst) else {
        return;
    };
    let packet = Packet::new_checked(data).expect("parsed datagram passes check_len");
    let payload = packet.payload();
    assert_eq!(payload.len(), repr.payload_len);

    let mut out = vec![0u8; repr.buffer_len()];
    out[repr.header_len()..].copy_from_slice(payload);
    repr.emit(&mut Packet::new_unchecked(&mut out[..]), src, dst);

    let emitted = Packet::new_checked(&out[..]).expect("emitted datagram passes check_len");
    assert_ne!(emitted.checksum(), 0, "emit must always fill a checksum");
    assert_eq!(Repr::parse(&emitted, src, dst), Ok(repr));
    assert_eq!(emitted.payload(), payload);
    if packet.checksum() != 0 {
        assert_eq!(&out[..], &data[..out.len()], "UDP re-emit changed bytes");
    }
});
