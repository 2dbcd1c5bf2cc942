//! Interfaces by name: their index, what kind of link they are, and errors that name them and
//! the step that failed.

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

/// What kind of link an interface is, read in the calling thread's network namespace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkKind {
    /// Its index in that namespace.
    pub index: u32,
    /// Its link-layer type (`ARPHRD_*`, as `/sys/class/net/IF/type` shows it): 1 for Ethernet
    /// and the virtual links that carry Ethernet frames (veth, bridge, dummy, macvlan).
    pub link_type: u16,
    /// It is a loopback interface (`IFF_LOOPBACK`).
    pub loopback: bool,
}

impl LinkKind {
    /// Whether frames between it and another such interface can be bridged at layer 2: an
    /// Ethernet-like link that is not a loopback.
    pub fn bridgeable(&self) -> bool {
        self.link_type == libc::ARPHRD_ETHER && !self.loopback
    }
}

/// What kind of link `ifname` is (asked through ioctls, so in the calling thread's namespace,
/// unlike `/sys/class/net`, which shows the namespace sysfs was mounted in).
pub fn link_kind(ifname: &str) -> io::Result<LinkKind> {
    let index = interface_index(ifname)?;
    // SAFETY: socket takes three integers; the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(at(ifname, "socket")(io::Error::last_os_error()));
    }
    let asked = (|| {
        // SAFETY: ifreq is plain data; all zeroes is valid.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        // interface_index checked that the name fits with its terminating zero.
        for (dst, src) in req.ifr_name.iter_mut().zip(ifname.bytes()) {
            *dst = src as libc::c_char;
        }
        // SAFETY: SIOCGIFFLAGS reads the NUL-terminated name from `req` and writes a short
        // into it; `req` outlives the call.
        if unsafe { libc::ioctl(fd, libc::SIOCGIFFLAGS as _, &mut req) } != 0 {
            return Err(at(ifname, "ioctl SIOCGIFFLAGS")(io::Error::last_os_error()));
        }
        // SAFETY: SIOCGIFFLAGS succeeded, so it wrote the `ifru_flags` member of the union.
        let flags = unsafe { req.ifr_ifru.ifru_flags };
        // SAFETY: as above; SIOCGIFHWADDR writes a sockaddr into the union.
        if unsafe { libc::ioctl(fd, libc::SIOCGIFHWADDR as _, &mut req) } != 0 {
            return Err(at(ifname, "ioctl SIOCGIFHWADDR")(io::Error::last_os_error()));
        }
        // SAFETY: SIOCGIFHWADDR succeeded, so it wrote the `ifru_hwaddr` member.
        let family = unsafe { req.ifr_ifru.ifru_hwaddr.sa_family };
        Ok(LinkKind {
            index,
            link_type: family,
            loopback: i32::from(flags) & libc::IFF_LOOPBACK != 0,
        })
    })();
    // SAFETY: `fd` is the socket opened above, closed once.
    unsafe { libc::close(fd) };
    asked
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_a_link_that_cannot_be_bridged() {
        let lo = link_kind("lo").unwrap();
        assert!(lo.loopback, "{lo:?}");
        assert_eq!(lo.link_type, libc::ARPHRD_LOOPBACK);
        assert!(!lo.bridgeable());
        let e = link_kind("latlab-none0").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(e.to_string().contains("latlab-none0"), "{e}");
    }
}
