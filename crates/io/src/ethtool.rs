//! Interface offloads through the ethtool ioctl (no `ethtool` binary needed).
//!
//! A layer-2 bridge in user space must see frames as they would be on a wire: with transmit
//! checksum offload a sender's frames carry unfinished checksums, and with segmentation offload
//! (TSO/GSO) or receive coalescing (GRO) a "frame" can be 64 KiB long. [`disable_offloads`]
//! turns all of these off on an interface of the calling thread's network namespace.
//!
//! [`driver_stats`] reads an interface's driver statistics (what `ethtool -S` shows), where a
//! driver counts what no generic counter does: a veth counts there the frames an XDP redirect
//! handed it that its peer's XDP ring had no room for ([`xdp_xmit_errors`]).

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
    let socket = Socket::new(Domain::IPV4, Type::DGRAM, None)?;
    // SAFETY: an EthtoolValue is a whole legacy command: the kernel reads and writes its
    // eight bytes and no more.
    unsafe { ioctl_on(&socket, ifname, (value as *mut EthtoolValue).cast()) }
}

/// Runs the ethtool command at `data` on `ifname` of `socket`'s namespace.
///
/// # Safety
/// `data` points at a command the kernel may read and write whole: its header and every
/// element its header says follow it.
unsafe fn ioctl_on(socket: &Socket, ifname: &str, data: *mut libc::c_void) -> io::Result<()> {
    if ifname.is_empty() || ifname.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{ifname:?} is not an interface name"),
        ));
    }
    // SAFETY: ifreq is plain data; all zeroes is a valid value.
    let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
    for (dst, src) in req.ifr_name.iter_mut().zip(ifname.bytes()) {
        *dst = src as libc::c_char;
    }
    req.ifr_ifru.ifru_data = data.cast();
    // SAFETY: SIOCETHTOOL reads the name from `req` and the command its data pointer points
    // at, which the caller vouches for; both live until the call returns.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), SIOCETHTOOL as _, &mut req) };
    if rc != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{ifname}: ethtool: {e}")));
    }
    Ok(())
}

/// `ETHTOOL_GSSET_INFO`, `ETHTOOL_GSTRINGS`, `ETHTOOL_GSTATS` and the statistics set.
const GSSET_INFO: u32 = 0x37;
const GSTRINGS: u32 = 0x1b;
const GSTATS: u32 = 0x1d;
const SS_STATS: u32 = 1;
/// Each statistic's name takes this many bytes, NUL-padded.
const GSTRING_LEN: usize = 32;
/// More statistics than any driver has: a count above it is refused, not allocated.
const MAX_STATS: usize = 1 << 16;

/// The driver statistics of `ifname` of the calling thread's namespace, as `ethtool -S`
/// shows them: (name, value) in the driver's order. Empty for a driver that keeps none
/// (loopback); an error naming the interface if there is none.
pub fn driver_stats(ifname: &str) -> io::Result<Vec<(String, u64)>> {
    driver_stats_on(&Socket::new(Domain::IPV4, Type::DGRAM, None)?, ifname)
}

/// [`driver_stats`] of `ifname` of `socket`'s namespace, whichever thread asks.
pub fn driver_stats_on(socket: &Socket, ifname: &str) -> io::Result<Vec<(String, u64)>> {
    // ethtool_sset_info: cmd, reserved, the sets asked (u64), then one count per set given.
    let mut info = [0u64; 3];
    info[0] = u64::from(GSSET_INFO);
    info[1] = 1 << SS_STATS;
    // SAFETY: the header (16 bytes) and the one count the single set asked for fit in 24.
    unsafe { ioctl_on(socket, ifname, info.as_mut_ptr().cast())? };
    if info[1] & (1 << SS_STATS) == 0 {
        return Ok(Vec::new());
    }
    let n = (info[2] & 0xffff_ffff) as usize;
    if n > MAX_STATS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{ifname}: ethtool says it has {n} statistics"),
        ));
    }
    // ethtool_gstrings: cmd, string_set, len (u32 each), then len names of 32 bytes.
    let mut names = vec![0u32; 3 + n * GSTRING_LEN / 4];
    names[..3].copy_from_slice(&[GSTRINGS, SS_STATS, n as u32]);
    // SAFETY: room for the header and the n names the header says follow.
    unsafe { ioctl_on(socket, ifname, names.as_mut_ptr().cast())? };
    // ethtool_stats: cmd, n_stats (u32 each), then n_stats u64 values.
    let mut values = vec![0u64; 1 + n];
    values[0] = u64::from(GSTATS) | (n as u64) << 32;
    // SAFETY: room for the header and the n values it says follow.
    unsafe { ioctl_on(socket, ifname, values.as_mut_ptr().cast())? };
    let got = (names[2] as usize).min(n).min((values[0] >> 32) as usize);
    let bytes: Vec<u8> = names[3..].iter().flat_map(|w| w.to_ne_bytes()).collect();
    Ok(bytes
        .chunks(GSTRING_LEN)
        .take(got)
        .zip(&values[1..])
        .map(|(name, &value)| {
            let end = name.iter().position(|&b| b == 0).unwrap_or(GSTRING_LEN);
            (String::from_utf8_lossy(&name[..end]).into_owned(), value)
        })
        .collect())
}

/// The frames an XDP redirect handed the veth `ifname` (of `socket`'s namespace) that it
/// could not pass on, its peer's XDP ring being full: the sum of its `*_xdp_xmit_errors`
/// statistics. `None` for a driver that does not count them.
pub fn xdp_xmit_errors(socket: &Socket, ifname: &str) -> io::Result<Option<u64>> {
    Ok(sum_xdp_xmit_errors(&driver_stats_on(socket, ifname)?))
}

fn sum_xdp_xmit_errors(stats: &[(String, u64)]) -> Option<u64> {
    let mut errors = stats
        .iter()
        .filter(|(name, _)| name.ends_with("xdp_xmit_errors"))
        .map(|(_, v)| *v)
        .peekable();
    errors.peek()?;
    Some(errors.sum())
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
    fn driver_statistics_are_read_by_name_and_xdp_errors_summed_over_queues() {
        // Loopback keeps no driver statistics: an empty list, not an error.
        assert_eq!(driver_stats("lo").unwrap(), Vec::new());
        let err = driver_stats("latlab-none0").unwrap_err();
        assert!(err.to_string().contains("latlab-none0"), "{err}");
        let stats = |list: &[(&str, u64)]| -> Vec<(String, u64)> {
            list.iter().map(|&(n, v)| (n.to_string(), v)).collect()
        };
        let veth = stats(&[
            ("peer_ifindex", 7),
            ("rx_queue_0_xdp_packets", 9),
            ("tx_queue_0_xdp_xmit", 100),
            ("tx_queue_0_xdp_xmit_errors", 3),
            ("tx_queue_1_xdp_xmit_errors", 4),
        ]);
        assert_eq!(sum_xdp_xmit_errors(&veth), Some(7));
        assert_eq!(sum_xdp_xmit_errors(&stats(&[("rx_packets", 1)])), None);
    }

    #[test]
    fn loopback_offloads_can_be_read() {
        let list = offloads("lo").unwrap();
        assert_eq!(list.len(), 4);
    }
}
