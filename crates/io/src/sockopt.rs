//! `setsockopt` and `getsockopt` for option values of any plain type, shared by every socket
//! kind of the crate.

use std::io;
use std::mem::size_of;
use std::os::fd::RawFd;

/// `setsockopt(fd, level, name, value)`.
pub(crate) fn set<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &T,
) -> io::Result<()> {
    // SAFETY: we pass a pointer to a live `T` and its exact size.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (value as *const T).cast(),
            size_of::<T>() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `getsockopt(fd, level, name)` into `value`; returns how many bytes the kernel wrote (at most
/// `size_of::<T>()`). `T` must be plain data that any bytes the kernel writes leave valid.
pub(crate) fn get<T>(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: &mut T,
) -> io::Result<usize> {
    let mut len = size_of::<T>() as libc::socklen_t;
    // SAFETY: `value` is writable for `len` bytes and outlives the call; the kernel writes at
    // most `len` bytes.
    let rc = unsafe { libc::getsockopt(fd, level, name, (value as *mut T).cast(), &mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(len as usize)
}
