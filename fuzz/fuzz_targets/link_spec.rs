//! The emulator's link settings as text, where they come from outside: a body sent to the
//! control API (`PUT /a_to_b`, `emuapi::merged`), a `--flow 'MATCH / SPEC'` rule, a
//! `--schedule` file's content, a flow match. Nothing panics; settings the API accepted are
//! written back as a spec (`spec_text`, what `GET` and the report show) that the API accepts
//! again, to the same text.
#![no_main]

use latlab_emu::api::{merged, spec_text};
use latlab_link::{FlowMatch, LinkConfig, Schedule};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = FlowMatch::parse("--flow", text);
    let _ = Schedule::parse(text);
    let _ = latlab_emu::flow::parse("--flow", text);
    let Ok(config) = merged(&LinkConfig::default(), true, text) else {
        return;
    };
    let spec = spec_text(&config);
    if spec.is_empty() {
        return;
    }
    let again = merged(&LinkConfig::default(), true, &spec)
        .unwrap_or_else(|e| panic!("{text:?} was taken, its spec {spec:?} is refused: {e}"));
    assert_eq!(spec_text(&again), spec, "from {text:?}");
});
