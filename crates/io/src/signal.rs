//! What a process inherited about signals: whether one is ignored, as `nohup` ignores SIGHUP and
//! a non-interactive shell ignores SIGINT for a background job. A program that handles its
//! stopping signals leaves such a signal ignored, as it was asked to.

use std::io;

/// Whether `signal` is ignored (its disposition is `SIG_IGN`) now.
pub fn is_ignored(signal: i32) -> io::Result<bool> {
    // SAFETY: sigaction with a null new action only reads the current one into `old`, a
    // zeroed `sigaction` we own (all-zero bytes are a valid value of that C struct).
    let old = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(signal, std::ptr::null(), &mut old) != 0 {
            return Err(io::Error::last_os_error());
        }
        old
    };
    Ok(old.sa_sigaction == libc::SIG_IGN)
}

/// Makes the child `command` will start end (SIGKILL) when the thread that starts it ends, so
/// a peer started by a run that is killed does not outlive it. Start the child from a thread
/// that lives as long as the child should.
pub fn end_child_with_parent(command: &mut std::process::Command) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: prctl is async-signal-safe and changes only the child's own state.
    unsafe {
        command.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Sends `signal` to the process `pid`: a child this process started and has not yet waited
/// for (so its id cannot have been reused).
pub fn send(pid: u32, signal: i32) -> io::Result<()> {
    let pid = libc::pid_t::try_from(pid).map_err(|_| io::Error::other("no such process id"))?;
    // SAFETY: kill takes two integers and touches no memory of ours.
    if unsafe { libc::kill(pid, signal) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_with_its_default_action_is_not_ignored_and_a_bad_number_is_an_error() {
        // The test harness leaves SIGTERM to its default action.
        assert!(!is_ignored(libc::SIGTERM).unwrap());
        assert!(is_ignored(-1).is_err());
    }
}
