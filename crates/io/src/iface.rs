//! Interfaces by name: their index, and errors that name them and the step that failed.

use std::io;

/// The size of a memory page.
pub(crate) fn page_size() -> usize {
    // SAFETY: sysconf only reads a system constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(size).unwrap_or(4096)
}

/// Wraps an error with the interface and the step that failed, keeping its kind.
pub(crate) fn at<'a>(ifname: &'a str, step: &'a str) -> impl FnOnce(io::Error) -> io::Error + 'a {
    move |e| io::Error::new(e.kind(), format!("{ifname}: {step}: {e}"))
}

/// The index of interface `ifname`; a missing one is `NotFound` and says so.
pub(crate) fn interface_index(ifname: &str) -> io::Result<u32> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ || ifname.contains('\0') {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{ifname:?}: not an interface name"),
        ));
    }
    let name = std::ffi::CString::new(ifname)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name contains NUL"))?;
    // SAFETY: `name` is a NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 {
        let err = io::Error::last_os_error();
        return Err(if err.raw_os_error() == Some(libc::ENODEV) {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{ifname}: no such interface"),
            )
        } else {
            at(ifname, "if_nametoindex")(err)
        });
    }
    Ok(index)
}
