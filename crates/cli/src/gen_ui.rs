//! `latlab gen --ui ADDR`: the run's live board in a browser ([`latlab_ui::GenBoard`]),
//! served on a thread of its own (placed off the generator's CPU) while the run goes on, and
//! after it, with the final figures and links to the files written, until Ctrl-C.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use latlab_lab::command::CommandError;
use latlab_lab::gen::GenReport;
use latlab_lab::progress::{Progress, View};
use latlab_ui::{GenBoard, Page, UiServer};

/// A view that shows everything on `inner` and hands the run's progress to `board`.
pub(crate) struct Teed<'a, V: View> {
    pub(crate) inner: &'a mut V,
    pub(crate) board: &'a GenBoard,
}

impl<V: View> View for Teed<'_, V> {
    fn note(&mut self, line: &str) {
        self.inner.note(line);
    }
    fn run_started(&mut self, label: &str, total: Duration) {
        self.board.started(label, total.as_nanos() as u64);
        self.inner.run_started(label, total);
    }
    fn run_progress(&mut self, p: &Progress) {
        self.board.progress(p);
        self.inner.run_progress(p);
    }
    fn run_finished(&mut self) {
        self.inner.run_finished();
    }
}

/// Binds the board's server on `addr` (loopback unless `public`).
pub(crate) fn bind(addr: SocketAddr, public: bool) -> Result<UiServer, CommandError> {
    if !addr.ip().is_loopback() && !public {
        return Err(CommandError::Usage(format!(
            "--ui {addr}: not a loopback address; add --ui-public to serve the page there"
        )));
    }
    UiServer::bind(addr).map_err(CommandError::setup(format!("--ui {addr}")))
}

/// Serves `board` on `server` until `done` is raised.
pub(crate) fn serve(server: &UiServer, board: &GenBoard, done: &AtomicBool) {
    latlab_lab::cores::seat::place_helper_thread();
    server.serve(Page::Generator, &mut |r| board.handle(r), &mut || {}, done);
}

/// The files a finished run wrote, by the names the page links them with.
pub(crate) fn written(report: &GenReport, given: &[Option<&Path>]) -> Vec<(String, PathBuf)> {
    let mut files: Vec<(String, PathBuf)> = given
        .iter()
        .flatten()
        .filter(|p| p.is_file())
        .map(|p| (p.display().to_string(), p.to_path_buf()))
        .collect();
    if let Some(dir) = &report.out {
        if let Ok(entries) = std::fs::read_dir(dir) {
            let mut inside: Vec<PathBuf> = entries
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_file())
                .collect();
            inside.sort();
            files.extend(inside.into_iter().map(|p| (p.display().to_string(), p)));
        }
    }
    files
}

/// Waits, after the run, until `stop` says so (Ctrl-C, SIGTERM) or `done` is raised.
pub(crate) fn linger(stop: &latlab_lab::command::Stop, done: &AtomicBool) {
    while !stop.is_raised() && !done.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
    }
}
