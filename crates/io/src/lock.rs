//! Ownership locks: an exclusive `flock(2)` held on a file or folder for as long as the thing it
//! stands for is in use.
//!
//! The kernel releases the lock when the last descriptor of the open file goes, however the
//! process ends (`kill -9` included), so a lock that can be taken says its owner is gone, and one
//! that cannot says its owner is alive, in whatever PID namespace it runs. Descriptors are opened
//! close-on-exec: a child process never inherits, and so never prolongs, a lock.
//!
//! Two opens of the same file are two owners, also inside one process: a process cannot take a
//! lock that another of its own [`OwnerLock`]s holds.
//!
//! ```no_run
//! use latlab_io::lock::OwnerLock;
//! use std::path::Path;
//! let held = OwnerLock::create(Path::new("/run/latlab/demo.lock"))?.expect("no other owner");
//! // ... the thing the lock stands for is in use ...
//! held.remove()?; // it is gone: remove the lock file, then let go of the lock
//! # Ok::<(), std::io::Error>(())
//! ```

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

/// An exclusive lock held on a file or folder; released when dropped (or when the process ends).
#[derive(Debug)]
pub struct OwnerLock {
    file: File,
    path: PathBuf,
}

impl OwnerLock {
    /// Takes the lock on the file at `path`, creating the file (and its folder) when missing.
    /// `Ok(None)` when another owner holds it.
    pub fn create(path: &Path) -> io::Result<Option<OwnerLock>> {
        if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(folder).map_err(|e| named(folder, e))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .map_err(|e| named(path, e))?;
        OwnerLock::take(file, path)
    }

    /// Takes the lock on the file or folder at `path`, which must exist. `Ok(None)` when
    /// another owner holds it.
    pub fn open(path: &Path) -> io::Result<Option<OwnerLock>> {
        // A read-only open works on folders as on files, and flock needs no more.
        let file = File::open(path).map_err(|e| named(path, e))?;
        OwnerLock::take(file, path)
    }

    /// Takes the lock on `file`, open at `path`. `Ok(None)` when another owner holds it.
    pub fn take(file: File, path: &Path) -> io::Result<Option<OwnerLock>> {
        if try_lock(&file).map_err(|e| named(path, e))? {
            Ok(Some(OwnerLock {
                file,
                path: path.to_path_buf(),
            }))
        } else {
            Ok(None)
        }
    }

    /// The path the lock was taken on.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file that holds the lock.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// Removes the lock file, then lets go of the lock: for when the thing it stood for is gone.
    /// A file already removed is not an error.
    pub fn remove(self) -> io::Result<()> {
        match std::fs::remove_file(&self.path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(named(&self.path, e)),
            _ => Ok(()),
        }
    }
}

/// Takes an exclusive lock on `file` without waiting: `Ok(true)` when taken (or already held
/// through this same open file), `Ok(false)` when another open file holds it.
pub fn try_lock(file: &File) -> io::Result<bool> {
    loop {
        // SAFETY: flock takes a descriptor that `file` keeps open for the call, and flags.
        let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        if rc == 0 {
            return Ok(true);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EWOULDBLOCK) => return Ok(false),
            Some(libc::EINTR) => continue,
            _ => return Err(e),
        }
    }
}

fn named(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A path in a folder of this test's own, which the test removes.
    fn temp_path(test: &str, name: &str) -> PathBuf {
        std::env::temp_dir()
            .join(format!("latlab-io-lock-{}-{test}", std::process::id()))
            .join(name)
    }

    #[test]
    fn a_held_lock_cannot_be_taken_until_its_owner_lets_go() {
        let path = temp_path("held", "held.lock");
        let held = OwnerLock::create(&path)
            .unwrap()
            .expect("nobody holds it yet");
        assert!(
            OwnerLock::create(&path).unwrap().is_none(),
            "a second owner, even in this process, is refused"
        );
        drop(held);
        let again = OwnerLock::create(&path)
            .unwrap()
            .expect("free once dropped");
        again.remove().unwrap();
        assert!(!path.exists(), "remove takes the lock file away");
        let _ = std::fs::remove_dir(path.parent().unwrap());
    }

    #[test]
    fn a_folder_can_be_locked_like_a_file() {
        let dir = temp_path("folder", "folder");
        std::fs::create_dir_all(&dir).unwrap();
        let held = OwnerLock::open(&dir).unwrap().expect("nobody holds it yet");
        assert!(OwnerLock::open(&dir).unwrap().is_none());
        drop(held);
        assert!(OwnerLock::open(&dir).unwrap().is_some());
        std::fs::remove_dir(&dir).unwrap();
        let _ = std::fs::remove_dir(dir.parent().unwrap());
    }

    #[test]
    fn a_missing_path_is_an_error_naming_it() {
        let e = OwnerLock::open(Path::new("/nonexistent/latlab.lock")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/latlab.lock"), "{e}");
    }
}
