//! How a run shows where it is: a timed run (`gen`, each run of the demo) reports its start,
//! its progress and its end to a [`ProgressSink`], which the command line draws as a progress
//! bar.

use std::time::Duration;

pub use latlab_engine::generator::Progress;

/// Receives progress of each run of a sequence.
pub trait ProgressSink: Send {
    /// A run starts.
    fn start(&mut self, label: &str, total: Duration);
    /// Where the run is.
    fn update(&mut self, progress: &Progress);
    /// The run ended.
    fn finish(&mut self);
}
