//! What the long-running commands (`echo`, `serve`, `emu`) share: the error type, the live
//! view the command line implements, the watcher that stops a run after its duration, and the
//! few engine and system types a command line needs to name (the stop flag, and
//! [`signal::is_ignored`] for the signals that raise it).
//!
//! A command opens its sockets, says on what it runs through [`View::started`], shows its
//! counters through [`View::counters`] about once a second while the engine runs, writes
//! its `--json` file, and only then returns its report: the caller prints after the files are
//! on disk.

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use latlab_engine::game::{parse_server_io, ServerIo, SERVER_IOS};
pub use latlab_engine::{PollMode, Stop};
pub use latlab_io::signal;
pub use latlab_io::Io;
pub use latlab_probe::model::TrafficModel;
pub use latlab_probe::{Pattern, MAX_RATE_PPS};
pub use latlab_stats::read_ccdf_csv;

pub use crate::error::{check_writable, CommandError};
pub use crate::progress::{Progress, Quiet, View};

/// Runs `engine` on this thread while a watcher thread raises `stop` once `duration` has
/// passed and passes the line `show` makes to `view` once a second. `stop` is raised when the
/// engine returns, so the watcher ends with it; `view.stopped()` is called after both.
pub fn watched<T>(
    duration: Option<Duration>,
    stop: &Stop,
    view: &mut dyn View,
    show: impl Fn() -> String + Send,
    engine: impl FnOnce() -> T,
) -> T {
    watched_noting(duration, stop, view, move || (show(), None), engine)
}

/// [`watched`], whose `show` may also hand over a note (a notice found while it looked),
/// shown once through the view's `note`.
pub fn watched_noting<T>(
    duration: Option<Duration>,
    stop: &Stop,
    view: &mut dyn View,
    mut show: impl FnMut() -> (String, Option<String>) + Send,
    engine: impl FnOnce() -> T,
) -> T {
    let out = std::thread::scope(|s| {
        let shown = &mut *view;
        let watcher = s.spawn(move || {
            crate::cores::seat::place_helper_thread();
            let start = Instant::now();
            let mut ticks = 0u32;
            while !stop.is_raised() {
                std::thread::sleep(Duration::from_millis(100));
                ticks += 1;
                if duration.is_some_and(|d| start.elapsed() >= d) {
                    stop.raise();
                }
                if ticks % 10 == 0 {
                    let (line, note) = show();
                    if let Some(note) = note {
                        shown.note(&note);
                    }
                    shown.counters(&line);
                }
            }
        });
        let out = engine();
        stop.raise();
        // The watcher only sleeps and calls the view; a panic there is the view's own.
        let _ = watcher.join();
        out
    });
    view.stopped();
    out
}

/// Resolves an `ADDR:PORT` given to `flag`.
pub fn resolve(flag: &str, text: &str) -> Result<SocketAddr, CommandError> {
    let mut addrs = text.to_socket_addrs().map_err(CommandError::setup(format!(
        "{flag} {text:?} is not an ADDR:PORT"
    )))?;
    addrs
        .next()
        .ok_or_else(|| CommandError::Options(format!("{flag} {text:?} resolves to no address")))
}

/// The results folder a command writes when not told where: `latlab-results/<kind>-<secs>`.
pub fn default_out(kind: &str) -> PathBuf {
    let secs = latlab_io::clock::now_ns() / 1_000_000_000;
    PathBuf::from("latlab-results").join(format!("{kind}-{secs}"))
}

/// Writes `value` as pretty JSON and a newline to `path`, whole or not at all.
pub fn write_json(path: &Path, value: &serde_json::Value) -> io::Result<()> {
    crate::results::write_atomic(path, format!("{value:#}\n").as_bytes())
}

/// Whether the peer program `binary` runs here (started with `probe` as its arguments); when it
/// does not, installs `packages` from Debian's packages with `apt-get` and asks again. `Err`
/// says why it cannot be had.
pub fn debian_tool(binary: &str, probe: &[&str], packages: &[&str]) -> Result<(), String> {
    use std::process::{Command, Stdio};
    let found = || {
        Command::new(binary)
            .args(probe)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok()
    };
    if found() {
        return Ok(());
    }
    let installed = Command::new("apt-get")
        .args(["install", "-y", "-qq", "--no-install-recommends"])
        .args(packages)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if installed && found() {
        Ok(())
    } else {
        Err(format!(
            "{binary} is not installed and `apt-get install {}` did not install it",
            packages.join(" ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Recorded {
        lines: Vec<String>,
        stopped: bool,
    }

    impl View for Recorded {
        fn started(&mut self, line: &str) {
            self.lines.push(line.to_string());
        }
        fn counters(&mut self, line: &str) {
            self.lines.push(line.to_string());
        }
        fn stopped(&mut self) {
            self.stopped = true;
        }
    }

    #[test]
    fn a_watched_run_is_stopped_after_its_duration_and_shows_its_counters() {
        let stop = Stop::new();
        let mut view = Recorded::default();
        let spins = watched(
            // Counters every tenth 100 ms tick: once in 1.9 s, however late the sleeps.
            Some(Duration::from_millis(1900)),
            &stop,
            &mut view,
            || "counters".to_string(),
            || {
                let mut spins = 0u64;
                while !stop.is_raised() {
                    std::thread::sleep(Duration::from_millis(5));
                    spins += 1;
                }
                spins
            },
        );
        assert!(spins > 0);
        assert!(stop.is_raised());
        assert_eq!(view.lines, vec!["counters".to_string()]);
        assert!(view.stopped);
    }

    #[test]
    fn an_address_that_is_not_one_names_its_flag() {
        let e = resolve("--listen", "nowhere").unwrap_err();
        assert_eq!(e.to_string(), "--listen \"nowhere\" is not an ADDR:PORT");
    }

    #[test]
    fn an_output_in_a_missing_folder_is_refused() {
        let e = check_writable(Path::new("/no/such/folder/out.json")).unwrap_err();
        assert_eq!(
            e.to_string(),
            "/no/such/folder/out.json: folder /no/such/folder does not exist"
        );
        assert!(check_writable(Path::new("out.json")).is_ok());
    }

    #[test]
    fn an_output_where_no_file_can_be_made_is_refused_before_the_run() {
        // /proc takes no new files, even from root.
        let e = check_writable(Path::new("/proc/latlab-out.json")).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("/proc/latlab-out.json: cannot write in folder /proc: "),
            "{e}"
        );
        let dir = tempfile::tempdir().unwrap();
        let e = check_writable(dir.path()).unwrap_err();
        assert!(e.to_string().ends_with("is a folder, not a file"), "{e}");
        // The check leaves nothing behind.
        assert!(check_writable(&dir.path().join("out.json")).is_ok());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
