//! A fate file's bytes (`--replay-fates FILE`, `latlab fates FILE`), whatever they are: nothing
//! panics, and a file that reads is written back to the same bytes and summarised and
//! replayed without panicking.
#![no_main]

use latlab_link::fates::replay::Replay;
use latlab_link::fates::summary::{compare, summary};
use latlab_link::fates::{FateFile, FateWriter};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = FateFile::parse(data) else {
        return;
    };
    let mut w = FateWriter::new(Vec::new(), &file.header).expect("a Vec takes every byte");
    for f in &file.frames {
        w.frame(f).expect("a Vec takes every byte");
    }
    let (bytes, _) = w.finish(file.unqueued).expect("a Vec takes every byte");
    let again = FateFile::parse(&bytes).expect("what was written reads back");
    assert_eq!(again, file);
    let _ = summary(&file);
    let _ = compare(&file, &again, ["a", "b"]);
    let mut replay = Replay::new(&file);
    for f in &file.frames {
        let _ = replay.take(usize::from(f.direction), f.flow, f.position);
    }
});
