//! Network namespaces: run a closure inside a named namespace (`/run/netns/NAME`) or one open
//! at any path (`/proc/PID/ns/net`), tell namespaces apart ([`NetnsId`]), and delete one.
//!
//! Sockets belong to the namespace they were created in, whichever thread uses them later, so
//! the usual pattern is to create sockets with [`run_in`] and drive them from anywhere.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// The folder of the named namespaces, as `ip netns` makes them.
pub const DIR: &str = "/run/netns";

/// The path of a named namespace as `ip netns` makes it.
pub fn path(name: &str) -> PathBuf {
    PathBuf::from(DIR).join(name)
}

/// Deletes the named namespace as `ip netns del` does: detaches its bind mount and removes its
/// file (the namespace itself lives on while a process or socket still uses it). No child
/// process is started, so no signal meant for this process can cut the deletion short.
pub fn delete(name: &str) -> io::Result<()> {
    let path = path(name);
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a NUL in a namespace name"))?;
    // SAFETY: umount2 takes a NUL-terminated path that `c_path` keeps alive for the call, and
    // flags.
    let rc = unsafe { libc::umount2(c_path.as_ptr(), libc::MNT_DETACH) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        // EINVAL: not a mount point (a namespace file whose mount never happened); the file
        // still goes.
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(io::Error::new(
                e.kind(),
                format!("network namespace {name:?}: {e}"),
            ));
        }
    }
    std::fs::remove_file(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("network namespace {name:?}: {e}")))
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
    run_in_file(file, name, f)
}

/// Runs `f` on a new thread that has entered the network namespace open at `ns` (a
/// `/run/netns/NAME`, a `/proc/PID/ns/net`), and returns its result. The calling thread
/// stays in its own namespace; processes started from `f` run in `ns`.
pub fn run_in_path<T, F>(ns: &Path, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    let file = File::open(ns).map_err(|e| {
        io::Error::new(e.kind(), format!("network namespace {}: {e}", ns.display()))
    })?;
    run_in_file(file, &ns.display().to_string(), f)
}

/// The identity of a network namespace: the device and inode of its file, which every path
/// to it (`/run/netns/NAME`, `/proc/PID/ns/net`) shares and no other namespace has while it
/// lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct NetnsId {
    /// The device of the namespace file system.
    pub dev: u64,
    /// The namespace's inode number.
    pub ino: u64,
}

/// The identity of the network namespace at `ns`.
pub fn id(ns: &Path) -> io::Result<NetnsId> {
    use std::os::unix::fs::MetadataExt;
    let meta = std::fs::metadata(ns).map_err(|e| {
        io::Error::new(e.kind(), format!("network namespace {}: {e}", ns.display()))
    })?;
    Ok(NetnsId {
        dev: meta.dev(),
        ino: meta.ino(),
    })
}

/// A path to the network namespace of the calling thread that other processes can open while
/// the thread lives: `/proc/PID/task/TID/ns/net` (`/proc/thread-self` names the opener's own
/// thread, so it cannot be handed to a child process).
pub fn current_thread_path() -> io::Result<PathBuf> {
    let task = std::fs::read_link("/proc/thread-self")?;
    Ok(Path::new("/proc").join(task).join("ns/net"))
}

fn run_in_file<T, F>(file: File, name: &str, f: F) -> io::Result<T>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
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

/// Starts `command` inside the network namespace `name` (its child enters the namespace between
/// `fork` and `exec`); with `death_signal`, the child gets that signal when the thread that
/// started it ends (`PR_SET_PDEATHSIG`), so it does not outlive a parent killed with
/// `kill -9`. An error starting it (no such program, not executable) is `spawn`'s.
pub fn spawn_in(
    name: &str,
    command: &mut std::process::Command,
    death_signal: Option<i32>,
) -> io::Result<std::process::Child> {
    use std::os::unix::process::CommandExt;
    let file = File::open(path(name))
        .map_err(|e| io::Error::new(e.kind(), format!("network namespace {name:?}: {e}")))?;
    let fd = file.as_raw_fd();
    // SAFETY: the closure runs in the child between fork and exec and makes only two system
    // calls (setns, prctl), both async-signal-safe; `fd` stays open in the parent (`file`
    // lives until `spawn` has returned) and so in the child, which the exec then closes
    // (close-on-exec).
    unsafe {
        command.pre_exec(move || {
            if libc::setns(fd, libc::CLONE_NEWNET) != 0 {
                return Err(io::Error::last_os_error());
            }
            if let Some(signal) = death_signal {
                if libc::prctl(libc::PR_SET_PDEATHSIG, signal as libc::c_ulong) != 0 {
                    return Err(io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    let child = command.spawn();
    drop(file);
    child
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
    fn a_deleted_namespace_is_gone_and_a_missing_one_is_an_error_naming_it() {
        let name = format!("latlab-io-delete-{}", std::process::id());
        let added = std::process::Command::new("ip")
            .args(["netns", "add", &name])
            .status();
        if !added.is_ok_and(|s| s.success()) {
            crate::precondition::missing("`ip netns add` does not work here");
            return;
        }
        delete(&name).unwrap();
        assert!(!path(&name).exists());
        let e = delete(&name).unwrap_err();
        assert!(e.to_string().contains(&name), "{e}");
    }

    #[test]
    fn the_current_thread_path_names_this_namespace_for_other_processes() {
        let here = current_thread_path().unwrap();
        assert!(here.starts_with(format!("/proc/{}/task/", std::process::id())));
        assert_eq!(
            id(&here).unwrap(),
            id(Path::new("/proc/self/ns/net")).unwrap()
        );
        let other = run_in_path(&here, || id(Path::new("/proc/thread-self/ns/net")))
            .unwrap()
            .unwrap();
        assert_eq!(
            other,
            id(&here).unwrap(),
            "entering its own namespace stays in it"
        );
        let e = id(Path::new("/proc/0/ns/net")).unwrap_err();
        assert!(e.to_string().contains("/proc/0/ns/net"), "{e}");
    }

    #[test]
    fn a_missing_namespace_is_an_error_naming_it() {
        let err = run_in("latlab-no-such-namespace", || ()).unwrap_err();
        assert!(
            err.to_string().contains("latlab-no-such-namespace"),
            "{err}"
        );
    }
}
