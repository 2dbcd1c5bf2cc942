//! Capture reader (`latlab trace-stats`, `latlab gen --trace`): `parse_capture` never panics
//! on any bytes; a capture it accepts has at most as many packets as frames, and every
//! statistic of its streams is computed without a panic and within the packets' own bounds, and
//! so is the replay of its busiest stream.
#![no_main]

use std::path::Path;

use latlab_lab::trace::{capture, replay, stats_of, streams};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(capture) = capture::parse_capture(data) else {
        return;
    };
    assert!(capture.packets.len() as u64 + capture.skipped <= capture.frames);
    let all = streams(&capture.packets);
    for row in stats_of(&capture) {
        assert!(row.size_min <= row.size_max);
        assert!(row.stream >= 1 && row.stream <= all.len());
        if let (Some(min), Some(max)) = (row.gap_min_ms, row.gap_max_ms) {
            assert!(min <= max);
        }
    }
    // The replay `gen --trace` would send: one message per packet of the busiest stream's
    // busier direction, whatever the clock in the file did.
    if let Some(busiest) = all
        .iter()
        .map(|s| s.directions[0].len().max(s.directions[1].len()))
        .max()
    {
        let r = replay(Path::new("fuzz.pcap"), &capture, None, 1.0).expect("a stream to replay");
        assert!(r.messages.len() <= busiest);
    }
});
