//! A delivery trace in mahimahi's format, from a file a user gives (`trace=FILE`): any bytes
//! read or are refused naming a line, never a panic; a trace that reads gives opportunities
//! whose instants never go back, and that repeat with its period.
#![no_main]

use latlab_link::trace::{DeliveryTrace, Opportunities};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let trace = match DeliveryTrace::parse(text) {
        Ok(trace) => trace,
        Err(e) => {
            assert!(e.line >= 1, "{text:?}: {e}");
            return;
        }
    };
    assert!(trace.period_ns() > 0 && trace.mean_rate_bps() > 0.0);
    let n = trace.opportunities();
    let mut walk = Opportunities::new(trace.clone(), 7);
    let mut last = 0;
    let first: Vec<u64> = (0..n.min(64)).map(|_| walk.take()).collect();
    for &at in &first {
        assert!(at >= last, "{text:?}: an opportunity went back");
        last = at;
    }
    // One period later, the same instants shifted by the period.
    let mut again = Opportunities::new(trace.clone(), 7 + trace.period_ns());
    for &at in &first {
        assert_eq!(again.take(), at + trace.period_ns(), "{text:?}");
    }
    let mut skipped = Opportunities::new(trace, 7);
    skipped.skip_before(last);
    assert!(skipped.next_ns() >= last, "{text:?}");
});
