//! How a running command, run or study shows itself: one trait, [`View`], which the command
//! line implements once (a bar or a redrawn counters line on a terminal, lines on stderr) and
//! tests implement to record what was shown.
//!
//! Every method has a default that shows nothing, so a view draws only what it cares about,
//! and each caller calls only the methods of what it is:
//! - a command whose engine runs until stopped (`echo`, `serve`, `emu`, `fwd`): [`View::started`]
//!   once with what it runs on, [`View::counters`] about once a second, [`View::stopped`];
//! - a timed run (`gen`, each run of the demo): [`View::run_started`] with its length,
//!   [`View::run_progress`], [`View::run_finished`];
//! - a study: [`View::point`] as each point starts, [`View::finish`] at its end;
//! - all of them: [`View::note`], a line for the user (the lab that was built, a point kept
//!   from an earlier run, a peer left out and why).
//!
//! Any `FnMut(&str)` closure is a view that prints its notes and nothing else.

use std::time::Duration;

pub use latlab_engine::generator::Progress;

/// What a running command, run or study shows. Everything is called from the command's own
/// threads, never after the command has returned.
pub trait View: Send {
    /// A line for the user.
    fn note(&mut self, _line: &str) {}
    /// A command has its sockets and starts: `line` says on what (one line).
    fn started(&mut self, line: &str) {
        self.note(line);
    }
    /// The counters of the running engine, about once a second.
    fn counters(&mut self, _line: &str) {}
    /// The engine has stopped; no more counters will be shown.
    fn stopped(&mut self) {}
    /// A timed run starts: its label and how long it sends.
    fn run_started(&mut self, _label: &str, _total: Duration) {}
    /// Where the timed run is.
    fn run_progress(&mut self, _progress: &Progress) {}
    /// The timed run ended.
    fn run_finished(&mut self) {}
    /// A point of a study starts: its description, how many points are done and how many
    /// there are at most.
    fn point(&mut self, _describe: &str, _done: usize, _total: usize) {}
    /// The study ended.
    fn finish(&mut self) {}
}

/// A [`View`] that shows nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quiet;

impl View for Quiet {}

/// A closure given the notes.
impl<F: FnMut(&str) + Send> View for F {
    fn note(&mut self, line: &str) {
        self(line);
    }
}
