//! memcached replies: any bytes, cut into datagrams on up to four flows, go through the frame
//! header, the reassembly of multi-datagram replies and the reply parser without a panic; a
//! reply read whole names a request ID of the 16-bit space, and judging it against any
//! request gives an outcome memcached has or a cause.
#![no_main]

use std::net::SocketAddr;

use latlab_probe::protocol::memcached::{Memcached, OUTCOMES};
use latlab_probe::protocol::{Key, Protocol, Read, Sent};
use latlab_wire::memcached::{parse_reply, Frame};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok((_, text)) = Frame::parse(data) {
        let _ = parse_reply(text);
    }
    let protocol = Memcached {
        keys: 100,
        set_ratio: 0.5,
        value_size: 10,
    };
    let locals: [SocketAddr; 4] = [SocketAddr::from(([127, 0, 0, 1], 1)); 4];
    let (_, mut replies) = protocol.split(1, &locals);
    // Each datagram: two bytes of length (big-endian), a byte of flow and aux, its bytes.
    let mut rest = data;
    while let [hi, lo, tag, tail @ ..] = rest {
        let n = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (datagram, after) = tail.split_at(n);
        rest = after;
        let flow = u32::from(tag % 4);
        match replies.read(flow, datagram) {
            Ok(Read::Answer(Key::Slot(id))) => {
                assert!(id < 1 << 16);
                let sent = Sent {
                    seq: id + (1 << 16),
                    intended_ns: 0,
                    actual_ns: 0,
                    aux: u32::from(tag / 4) | if tag & 0x80 != 0 { 1 << 31 } else { 0 },
                };
                if let Ok(v) = replies.judge(flow, &sent, datagram) {
                    assert!(v.outcome < OUTCOMES.len());
                }
            }
            Ok(Read::Answer(other)) => panic!("memcached names a slot, not {other:?}"),
            Ok(Read::Partial) | Err(_) => {}
        }
    }
});
