//! Interfaces by name: their index, and errors that name them and the step that failed.

use std::io;
use std::os::fd::RawFd;

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

/// The MTU of interface `ifname`, asked through the socket `fd` (so in the socket's
/// namespace).
pub(crate) fn mtu(fd: RawFd, ifname: &str) -> io::Result<usize> {
    // SAFETY: ifreq is plain data; all zeroes is valid.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    if ifname.len() >= req.ifr_name.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{ifname:?}: not an interface name"),
        ));
    }
    for (dst, src) in req.ifr_name.iter_mut().zip(ifname.bytes()) {
        *dst = src as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads the NUL-terminated name from `req` (checked to fit with its
    // terminating zero above) and writes an int into it; `req` outlives the call.
    let rc = unsafe { libc::ioctl(fd, libc::SIOCGIFMTU as _, &mut req) };
    if rc != 0 {
        return Err(at(ifname, "ioctl SIOCGIFMTU")(io::Error::last_os_error()));
    }
    // SAFETY: SIOCGIFMTU succeeded, so it wrote the `ifru_mtu` member of the union.
    let mtu = unsafe { req.ifr_ifru.ifru_mtu };
    Ok(usize::try_from(mtu).unwrap_or(0))
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
