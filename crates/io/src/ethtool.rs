//! Interface offloads through the ethtool ioctl (no `ethtool` binary needed).
//!
//! A layer-2 bridge in user space must see frames as they would be on a wire: with transmit
//! checksum offload a sender's frames carry unfinished checksums, and with segmentation offload
//! (TSO/GSO) or receive coalescing (GRO) a "frame" can be 64 KiB long. [`disable_offloads`]
//! turns all of these off on an interface of the calling thread's network namespace.

use std::io;
use std::os::fd::AsRawFd;

use socket2::{Domain, Socket, Type};

const SIOCETHTOOL: libc::c_ulong = 0x8946;

/// The legacy ethtool commands latlab uses: (get, set, name).
const OFFLOADS: [(u32, u32, &str); 4] = [
    (0x16, 0x17, "tx-checksum"),          // ETHTOOL_GTXCSUM / ETHTOOL_STXCSUM
    (0x1e, 0x1f, "tcp-segmentation"),     // ETHTOOL_GTSO / ETHTOOL_STSO
    (0x23, 0x24, "generic-segmentation"), // ETHTOOL_GGSO / ETHTOOL_SGSO
    (0x2b, 0x2c, "generic-receive"),      // ETHTOOL_GGRO / ETHTOOL_SGRO
];

#[repr(C)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

fn ioctl(ifname: &str, value: &mut EthtoolValue) -> io::Result<()> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{ifname:?} is not an interface name"),
        ));
    }
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, None)?;
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(ifname.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_data = (value as *mut EthtoolValue).cast();
    // SAFETY: SIOCETHTOOL reads the name from `req` and reads/writes the EthtoolValue its data
    // pointer points at; both live until the call returns.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), SIOCETHTOOL as _, &mut req) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{ifname}: ethtool: {e}")));
    }
    Ok(())
}

/// Which offloads are on: (name, on) for tx-checksum, tcp-segmentation, generic-segmentation and
/// generic-receive.
pub fn offloads(ifname: &str) -> io::Result<Vec<(&'static str, bool)>> {
    OFFLOADS
        .iter()
        .map(|&(get, _, name)| {
            let mut v = EthtoolValue { cmd: get, data: 0 };
            ioctl(ifname, &mut v).map(|()| (name, v.data != 0))
        })
        .collect()
}

/// Turns transmit checksum, segmentation and receive-coalescing offloads off on `ifname`, so
/// every frame on it is a finished frame of at most its MTU. Offloads the driver cannot change
/// are left as they are when already off.
pub fn disable_offloads(ifname: &str) -> io::Result<()> {
    for &(get, set, name) in &OFFLOADS {
        let mut v = EthtoolValue { cmd: set, data: 0 };
        if let Err(e) = ioctl(ifname, &mut v) {
            let mut now = EthtoolValue { cmd: get, data: 0 };
            if ioctl(ifname, &mut now).is_ok() && now.data == 0 {
                continue;
            }
            return Err(io::Error::new(
                e.kind(),
                format!("{ifname}: turning {name} off: {e}"),
            ));
        }
    }
    Ok(())
}

/// Turns receive coalescing (GRO) on or off on `ifname`. On a veth, GRO on gives the
/// interface a NAPI instance of its own, which threaded NAPI needs.
pub fn set_gro(ifname: &str, on: bool) -> io::Result<()> {
    let (_, set, _) = OFFLOADS[3];
    ioctl(
        ifname,
        &mut EthtoolValue {
            cmd: set,
            data: u32::from(on),
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_interface_is_an_error_naming_it() {
        let err = offloads("latlab-none0").unwrap_err();
        assert!(err.to_string().contains("latlab-none0"), "{err}");
        assert!(disable_offloads("").is_err());
    }

    #[test]
    fn loopback_offloads_can_be_read() {
        let list = offloads("lo").unwrap();
        assert_eq!(list.len(), 4);
    }
}
