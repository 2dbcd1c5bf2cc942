//! Network namespaces: run a closure inside a named namespace (`/run/netns/NAME`).
//!
//! Sockets belong to the namespace they were created in, whichever thread uses them later, so
//! the usual pattern is to create sockets with [`run_in`] and drive them from anywhere.

use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::path::PathBuf;

/// The folder of the named namespaces, as `ip netns` makes them.
pub const DIR: &str = "/run/netns";

/// The path of a named namespace as `ip netns` makes it.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from(DIR).join(name)
}

/// Runs `f` on a new thread that has entered the network namespace `name`, and returns its
/// result. The calling thread stays in its own namespace.
pub fn run_in<T, F>(name: &str, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let file = File::open(path(name))
        .map_err(|e| io::Error::new(e.kind(), format!("network namespace {name:?}: {e}")))?;
    let handle = std::thread::Builder::new()
        .name(format!("netns-{name}"))
        .spawn(move || -> io::Result<T> {
            enter(&file)?;
            Ok(f())
        })?;
    handle
        .join()
        .map_err(|_| io::Error::other("thread inside the namespace panicked"))?
}

/// Moves the calling thread into the network namespace open as `file`.
pub fn enter(file: &File) -> io::Result<()> {
    // SAFETY: setns takes a file descriptor we own for the duration of the call and a flag.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_namespace_is_an_error_naming_it() {
        let err = run_in("latlab-no-such-namespace", || ()).unwrap_err();
        assert!(
            err.to_string().contains("latlab-no-such-namespace"),
            "{err}"
        );
    }
}
