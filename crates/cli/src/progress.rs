//! Progress bars on a terminal, for runs longer than two seconds; nothing otherwise.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use latlab_lab::command::{LiveView, Progress};
use latlab_study::demo::ProgressSink;

/// A progress bar per run, drawn on stderr.
#[derive(Debug, Default)]
pub(crate) struct Bar {
    bar: Option<ProgressBar>,
}

impl Bar {
    pub(crate) fn new() -> Bar {
        Bar::default()
    }
}

impl ProgressSink for Bar {
    fn start(&mut self, label: &str, total: Duration) {
        if !std::io::stderr().is_terminal() || total <= Duration::from_secs(2) {
            self.bar = None;
            return;
        }
        let bar = ProgressBar::new(total.as_millis() as u64);
        // The template is a constant known to be valid.
        let style = ProgressStyle::with_template(
            "{prefix:>18} [{bar:30.cyan/blue}] {elapsed}/{duration}  {msg}",
        )
        .expect("valid progress template")
        .progress_chars("=> ");
        bar.set_style(style);
        bar.set_prefix(label.to_string());
        self.bar = Some(bar);
    }

    fn update(&mut self, p: &Progress) {
        if let Some(bar) = &self.bar {
            bar.set_position(p.elapsed_ns / 1_000_000);
            bar.set_message(format!("sent {}  received {}", p.sent, p.received));
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// One bar for a whole study: the point being measured and the time left.
#[derive(Debug)]
pub(crate) struct StudyBar {
    bar: Option<ProgressBar>,
}

impl StudyBar {
    pub(crate) fn new() -> StudyBar {
        StudyBar { bar: None }
    }
}

impl latlab_study::StudyProgress for StudyBar {
    fn point(&mut self, describe: &str, done: usize, total: usize) {
        if !std::io::stderr().is_terminal() {
            return;
        }
        let bar = self.bar.get_or_insert_with(|| {
            let bar = ProgressBar::new(total as u64);
            // The template is a constant known to be valid.
            let style = ProgressStyle::with_template(
                "[{bar:30.cyan/blue}] {pos}/{len} points, {eta} left  {msg}",
            )
            .expect("valid progress template")
            .progress_chars("=> ");
            bar.set_style(style);
            bar
        });
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(describe.to_string());
    }

    fn note(&mut self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

    fn finish(&mut self) {
        if let Some(bar) = self.bar.take() {
            bar.finish_and_clear();
        }
    }
}

/// The live view of `echo`, `serve` and `emu`: the start line on stderr, and on a terminal
/// the counters line redrawn in place, ended with a newline when the run stops.
#[derive(Debug)]
pub(crate) struct Counters {
    terminal: bool,
}

impl Counters {
    pub(crate) fn new() -> Counters {
        Counters {
            terminal: std::io::stderr().is_terminal(),
        }
    }
}

impl LiveView for Counters {
    fn started(&mut self, line: &str) {
        eprintln!("{line}");
    }

    fn counters(&mut self, line: &str) {
        if self.terminal {
            eprint!("\r  {line}   ");
        }
    }

    fn stopped(&mut self) {
        if self.terminal {
            eprintln!();
        }
    }
}
