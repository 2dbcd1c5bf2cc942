//! Transport packets: `parse_packet` never panics; every frame of a parsed packet re-emits to
//! exactly the bytes it was parsed from (the format is canonical), and parses back to itself.
#![no_main]

use latlab_wire::transport::{self, Frame, Frames, HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut frames = Vec::new();
    if transport::parse_packet(data, |f| frames.push(f)).is_err() {
        // The frame walker alone must not panic either.
        for _ in Frames::new(data) {}
        return;
    }
    let mut out = vec![0u8; data.len()];
    let mut at = HEADER_LEN;
    for frame in &frames {
        let len = frame.emit(&mut out[at..]);
        assert_eq!(len, frame.buffer_len());
        assert_eq!(Frame::parse(&out[at..at + len]), Ok((*frame, len)));
        at += len;
    }
    assert_eq!(at, data.len(), "frames cover the whole packet");
    assert_eq!(
        &out[HEADER_LEN..],
        &data[HEADER_LEN..],
        "emit is not canonical"
    );
});
