//! The stopping signals: SIGINT (Ctrl-C), SIGTERM and SIGHUP, handled alike by every command.
//!
//! The first one raises the stop flag every command watches; the command stops, writes what it
//! measured, and drops what it made (namespaces, partial results) on its way out, and `main`
//! then exits with 128 + the signal's number (130, 143, 129). A signal that comes after the
//! first changes nothing but a line on stderr: the clean-up under way is never cut short. Only
//! `kill -9` can stop latlab before it has cleaned up; `latlab clean` removes what that leaves.
//! Started under `nohup` (SIGHUP ignored), latlab keeps ignoring SIGHUP.

use std::io::Write;
use std::sync::atomic::{AtomicI32, Ordering};

use latlab_lab::command::{signal, Stop};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::exfiltrator::WithOrigin;
use signal_hook::iterator::SignalsInfo;
use signal_hook::low_level::siginfo::Cause;

/// The first stopping signal received; 0 while none was.
static RECEIVED: AtomicI32 = AtomicI32::new(0);

/// The first stopping signal a process sent (with `kill`), not the kernel (a terminal's Ctrl-C
/// or hang-up, which reach the whole foreground process group); 0 while none was.
static SENT: AtomicI32 = AtomicI32::new(0);

/// A stopping signal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Signal(i32);

impl Signal {
    /// What a user calls it: `Ctrl-C` for SIGINT, else its name.
    pub(crate) fn name(self) -> &'static str {
        match self.0 {
            SIGINT => "Ctrl-C",
            SIGTERM => "SIGTERM",
            SIGHUP => "SIGHUP",
            _ => "a signal",
        }
    }

    /// Its number.
    pub(crate) fn number(self) -> i32 {
        self.0
    }

    /// The exit code of a run it stopped: 128 + its number, as a shell reports a process the
    /// signal killed.
    pub(crate) fn exit_code(self) -> i32 {
        128 + self.0
    }
}

/// Handles SIGINT, SIGTERM and SIGHUP from now on: the first raises `stop`, the others are only
/// told about. A SIGHUP ignored when latlab started (`nohup`) stays ignored.
pub(crate) fn watch(stop: &'static Stop) -> std::io::Result<()> {
    let mut handled = vec![SIGINT, SIGTERM];
    if !signal::is_ignored(SIGHUP)? {
        handled.push(SIGHUP);
    }
    let mut signals = SignalsInfo::<WithOrigin>::new(handled)?;
    std::thread::Builder::new()
        .name("latlab-signals".into())
        .spawn(move || {
            for origin in signals.forever() {
                let number = origin.signal;
                if matches!(origin.cause, Cause::Sent(_)) {
                    let _ = SENT.compare_exchange(0, number, Ordering::SeqCst, Ordering::SeqCst);
                }
                let first = RECEIVED
                    .compare_exchange(0, number, Ordering::SeqCst, Ordering::SeqCst)
                    .is_ok();
                stop.raise();
                if !first {
                    // Never a panic here, whatever became of stderr (a closed terminal).
                    let _ = writeln!(
                        std::io::stderr(),
                        "latlab: {} again: still stopping; namespaces and partial files are removed first",
                        Signal(number).name()
                    );
                }
            }
        })?;
    Ok(())
}

/// The first stopping signal received, if one was.
pub(crate) fn received() -> Option<Signal> {
    match RECEIVED.load(Ordering::SeqCst) {
        0 => None,
        n => Some(Signal(n)),
    }
}

/// The first stopping signal a process sent with `kill` (to latlab's PID, or to its process
/// group), if one was; a terminal's Ctrl-C is the kernel's, not counted here.
pub(crate) fn sent_by_a_process() -> Option<Signal> {
    match SENT.load(Ordering::SeqCst) {
        0 => None,
        n => Some(Signal(n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_signal_exits_as_a_shell_reports_it() {
        assert_eq!(Signal(SIGINT).exit_code(), 130);
        assert_eq!(Signal(SIGTERM).exit_code(), 143);
        assert_eq!(Signal(SIGHUP).exit_code(), 129);
        assert_eq!(Signal(SIGINT).name(), "Ctrl-C");
    }
}
