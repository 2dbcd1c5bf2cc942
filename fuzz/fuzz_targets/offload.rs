//! Offload metadata and frames: the first 10 bytes are taken as a `virtio_net_hdr`, the next
//! 4 as an out-of-band VLAN tag (when the first of them is odd), the rest as the frame.
//! Nothing panics; `finish` emits as many frames as it says; every segment of a super-frame
//! carries IP lengths of its own (never longer than the frame); a checksum finished without
//! metadata verifies.
#![no_main]

use latlab_wire::offload::{
    check_transport_checksum, finish_unfinished_checksum, ChecksumState, Finisher, Offload, VlanTag,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if data.len() < 14 {
        return;
    }
    let (hdr, rest) = data.split_at(10);
    let (tag, frame) = rest.split_at(4);
    let tag = (tag[0] & 1 == 1).then(|| VlanTag {
        tpid: u16::from_be_bytes([tag[0] & 0xfe, tag[1]]),
        tci: u16::from_be_bytes([tag[2], tag[3]]),
    });
    if let Ok(offload) = Offload::from_virtio(hdr) {
        let mut finisher = Finisher::new();
        let mut segments = Vec::new();
        if let Ok(done) = finisher.finish(frame, tag, offload, |f| segments.push(f.to_vec())) {
            assert_eq!(done.frames, segments.len());
            if done.segmented {
                for s in &segments {
                    let state = check_transport_checksum(s);
                    assert_ne!(state, ChecksumState::LongerThanFrame);
                }
            }
        }
    }
    let mut copy = frame.to_vec();
    if finish_unfinished_checksum(&mut copy) == ChecksumState::Finished {
        assert_eq!(check_transport_checksum(&copy), ChecksumState::Valid);
    }
});
