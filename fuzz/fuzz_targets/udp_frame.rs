//! Ethernet + IPv4 + UDP composed: parse never panics, agrees with
//! `check_len` and with the three layers parsed one by one; a parsed frame
//! re-emits (IPv4 without options) to one that parses to the same `Repr` and
//! payload with both checksums valid; refilling the UDP checksum in place
//! (behind any IPv4 options) gives one that verifies.
#![no_main]

use latlab_wire::udp_frame::{Frame, Repr};
use latlab_wire::{ethernet, ipv4, udp};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let frame = Frame::new_unchecked(data);
    let Ok(repr) = Repr::parse(&frame) else {
        return;
    };
    let frame = Frame::new_checked(data).expect("parsed frame passes check_len");
    let payload = frame.payload();
    assert_eq!(payload.len(), repr.payload_len);
    assert_eq!((frame.src(), frame.dst()), (repr.src, repr.dst));
    assert_eq!(
        (frame.src_mac(), frame.dst_mac()),
        (repr.src_mac, repr.dst_mac)
    );

    // The same frame, layer by layer.
    let eth = ethernet::Frame::new_checked(data).expect("layer 2");
    let ip = ipv4::Packet::new_checked(eth.payload()).expect("layer 3");
    let ip_repr = ipv4::Repr::parse(&ip).expect("layer 3 parses");
    let datagram = udp::Packet::new_checked(ip.payload()).expect("layer 4");
    assert_eq!(ip_repr.src_addr, *repr.src.ip());
    assert_eq!(datagram.payload(), payload);

    // Re-emitted without options: same Repr, same payload, checksums valid.
    let mut out = vec![0u8; repr.buffer_len()];
    assert_eq!(repr.emit_into(&mut out, payload), Ok(repr.buffer_len()));
    let emitted = Frame::new_unchecked(&out[..]);
    assert_eq!(Repr::parse(&emitted), Ok(repr));
    assert_eq!(emitted.payload(), payload);
    assert!(emitted
        .udp()
        .verify_checksum(*repr.src.ip(), *repr.dst.ip()));
    assert_ne!(emitted.udp().checksum(), 0);

    // Refilled in place, wherever the datagram sits.
    let mut copy = data.to_vec();
    Frame::new_checked(&mut copy[..])
        .unwrap()
        .fill_udp_checksum();
    let refilled = Frame::new_checked(&copy[..]).unwrap();
    assert!(refilled
        .udp()
        .verify_checksum(*repr.src.ip(), *repr.dst.ip()));
    assert_ne!(refilled.udp().checksum(), 0);
    assert_eq!(Repr::parse(&refilled), Ok(repr));
});
