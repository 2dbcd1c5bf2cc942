//! The one [`View`] of the command line, on stderr: the start line of a command and, on a
//! terminal, its counters redrawn in place; a progress bar per timed run longer than two
//! seconds and one bar for a whole study (on a terminal only); notes printed above any bar.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};
use latlab_lab::progress::{Progress, View};

/// What a command shows on stderr.
#[derive(Debug)]
pub(crate) struct Terminal {
    terminal: bool,
    /// The bar of the timed run going on.
    run: Option<ProgressBar>,
    /// The bar of the study going on.
    study: Option<ProgressBar>,
}

impl Terminal {
    pub(crate) fn new() -> Terminal {
        Terminal {
            terminal: std::io::stderr().is_terminal(),
            run: None,
            study: None,
        }
    }

    fn bar(template: &str, length: u64) -> ProgressBar {
        let bar = ProgressBar::new(length);
        // The templates are constants known to be valid.
        let style = ProgressStyle::with_template(template)
            .expect("valid progress template")
            .progress_chars("=> ");
        bar.set_style(style);
        bar
    }
}

impl View for Terminal {
    fn note(&mut self, line: &str) {
        match self.run.as_ref().or(self.study.as_ref()) {
            Some(bar) => bar.suspend(|| eprintln!("{line}")),
            None => eprintln!("{line}"),
        }
    }

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

    fn run_started(&mut self, label: &str, total: Duration) {
        if !self.terminal || total <= Duration::from_secs(2) {
            self.run = None;
            return;
        }
        let bar = Terminal::bar(
            "{prefix:>18} [{bar:30.cyan/blue}] {elapsed}/{duration}  {msg}",
            total.as_millis() as u64,
        );
        bar.set_prefix(label.to_string());
        self.run = Some(bar);
    }

    fn run_progress(&mut self, p: &Progress) {
        if let Some(bar) = &self.run {
            bar.set_position(p.elapsed_ns / 1_000_000);
            bar.set_message(format!("sent {}  received {}", p.sent, p.received));
        }
    }

    fn run_finished(&mut self) {
        if let Some(bar) = self.run.take() {
            bar.finish_and_clear();
        }
    }

    fn point(&mut self, describe: &str, done: usize, total: usize) {
        if !self.terminal {
            return;
        }
        let bar = self.study.get_or_insert_with(|| {
            Terminal::bar(
                "[{bar:30.cyan/blue}] {pos}/{len} points, {eta} left  {msg}",
                total as u64,
            )
        });
        bar.set_length(total as u64);
        bar.set_position(done as u64);
        bar.set_message(describe.to_string());
    }

    fn finish(&mut self) {
        if let Some(bar) = self.study.take() {
            bar.finish_and_clear();
        }
    }
}
