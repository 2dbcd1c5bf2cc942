//! Compact transport packets (version 2's short header and frames): `parse_short_packet` never
//! panics; every frame of a parsed packet re-emits to exactly the bytes it was parsed from (the
//! format is canonical), and parses back to itself; the truncated packet number decodes
//! against any highest packet number without a panic, and so does the window test on it; a
//! header with the short id re-emits it.
#![no_main]

use latlab_wire::transport::compact::{self, ShortHeader};
use latlab_wire::transport::Frames;
use latlab_wire::transport::Frame;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut frames = Vec::new();
    let Ok(header) = compact::parse_short_packet(data, |f| frames.push(f)) else {
        // The frame walker alone must not panic either.
        for _ in Frames::compact(data) {}
        return;
    };
    let largest = data
        .iter()
        .take(8)
        .fold(0u64, |v, &b| v << 8 | u64::from(b));
    for highest in [None, Some(0), Some(largest), Some(u64::MAX)] {
        let pn = compact::decode_packet_number(u64::from(header.truncated), header.pn_len, highest);
        // The receiver's window test, as the endpoint does it.
        let _far = pn > highest.unwrap_or(0).saturating_add(compact::max_jump(header.pn_len));
    }
    let mut out = vec![0u8; data.len()];
    let mut at = ShortHeader::emit(&header, &mut out);
    for frame in &frames {
        let len = frame.emit_compact(&mut out[at..]);
        assert_eq!(len, frame.compact_len());
        assert_eq!(Frame::parse_compact(&out[at..at + len]), Ok((*frame, len)));
        at += len;
    }
    assert_eq!(at, data.len(), "frames cover the whole packet");
    assert_eq!(out, data, "emit is not canonical");
});
