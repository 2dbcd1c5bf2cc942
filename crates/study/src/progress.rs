//! How a study reports its progress: the point being measured and the lines worth showing.

/// Progress of a whole study. The CLI draws it as a progress bar on a terminal (and prints the
/// notes); tests and other callers may record or ignore it.
pub trait StudyProgress {
    /// A point starts: its description, how many points are done and how many there are at
    /// most.
    fn point(&mut self, describe: &str, done: usize, total: usize);
    /// A line for the user: the lab that was built, a row left out and why, a resumed point.
    fn note(&mut self, line: &str);
    /// The study ended.
    fn finish(&mut self);
}

/// Progress that shows nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct Silent;

impl StudyProgress for Silent {
    fn point(&mut self, _describe: &str, _done: usize, _total: usize) {}
    fn note(&mut self, _line: &str) {}
    fn finish(&mut self) {}
}
