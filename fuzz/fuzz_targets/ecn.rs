//! ECN marking: any bytes read without panicking; a frame is marked exactly when it is
//! ECN-capable, reads CE afterwards, and changes only in its ECN bits and (IPv4) its header
//! checksum, which stays right if it was right before.
#![no_main]

use latlab_wire::checksum;
use latlab_wire::ecn::{self, Ecn};
use latlab_wire::flow::{network_header, ETHERTYPE_IPV4};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let before = ecn::read(data);
    let mut frame = data.to_vec();
    let marked = ecn::mark_ce(&mut frame);
    assert_eq!(marked, before.is_capable());
    if !marked {
        assert_eq!(frame, data);
        return;
    }
    assert_eq!(ecn::read(&frame), Ecn::Ce);
    let (l3, ethertype) = network_header(data).expect("a marked frame has an IP header");
    let mut changed: Vec<usize> = (0..data.len()).filter(|&i| frame[i] != data[i]).collect();
    if ethertype == ETHERTYPE_IPV4 {
        let header = l3..l3 + 20;
        changed.retain(|&i| i != l3 + 10 && i != l3 + 11);
        let ihl = usize::from(data[l3] & 0x0f) * 4;
        if ihl == 20 && checksum::internet(&data[header.clone()]) == 0 {
            assert_eq!(checksum::internet(&frame[header]), 0);
        }
    }
    assert!(changed.iter().all(|&i| i == l3 + 1), "{changed:?}");
});
