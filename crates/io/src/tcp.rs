//! TCP socket knobs and counters that the standard library and socket2 do not reach, for the
//! thin-stream transports of `latlab stream`: `TCP_INFO` (what a connection put on the wire and
//! how much it retransmitted, and how many of those the receiver said it already had),
//! `TCP_CONGESTION`, `TCP_THIN_LINEAR_TIMEOUTS`, `TCP_RTO_MIN_US`, and a wait on several
//! descriptors at once.
//!
//! Every function takes anything with a file descriptor and never keeps it.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use crate::sockopt;

/// What `TCP_INFO` says about one connection, the fields a thin-stream comparison needs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Segments sent, retransmissions and pure acknowledgements included (`tcpi_segs_out`).
    pub segs_out: u64,
    /// Segments received (`tcpi_segs_in`).
    pub segs_in: u64,
    /// Payload bytes sent, retransmitted bytes included (`tcpi_bytes_sent`).
    pub bytes_sent: u64,
    /// Payload bytes retransmitted (`tcpi_bytes_retrans`).
    pub bytes_retrans: u64,
    /// Payload bytes received (`tcpi_bytes_received`).
    pub bytes_received: u64,
    /// Segments retransmitted over the connection's life (`tcpi_total_retrans`).
    pub total_retrans: u64,
    /// DSACK blocks received (`tcpi_dsack_dups`): segments the receiver said it already had,
    /// so retransmissions that were not needed (or, rarer, copies the network itself made).
    pub dsack_dups: u64,
    /// Whether TCP timestamps were negotiated: each segment then carries a 12-byte option.
    pub timestamps: bool,
    /// The smoothed round-trip time, microseconds (`tcpi_rtt`).
    pub rtt_us: u32,
    /// The current retransmission timeout, microseconds (`tcpi_rto`).
    pub rto_us: u32,
    /// Segments sent and not yet acknowledged (`tcpi_unacked`).
    pub unacked: u32,
    /// Bytes written by the application and not yet sent (`tcpi_notsent_bytes`).
    pub notsent_bytes: u32,
}

/// `TCPI_OPT_TIMESTAMPS` of `tcpi_options`.
const TCPI_OPT_TIMESTAMPS: u8 = 1;

/// Reads `TCP_INFO` of a connected TCP socket.
pub fn tcp_info(socket: &impl AsRawFd) -> io::Result<TcpInfo> {
    // SAFETY: `tcp_info` is plain integers, for which all zero bytes are a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    sockopt::get(
        socket.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_INFO,
        &mut info,
    )?;
    Ok(TcpInfo {
        segs_out: u64::from(info.tcpi_segs_out),
        segs_in: u64::from(info.tcpi_segs_in),
        bytes_sent: info.tcpi_bytes_sent,
        bytes_retrans: info.tcpi_bytes_retrans,
        bytes_received: info.tcpi_bytes_received,
        total_retrans: u64::from(info.tcpi_total_retrans),
        dsack_dups: u64::from(info.tcpi_dsack_dups),
        timestamps: info.tcpi_options & TCPI_OPT_TIMESTAMPS != 0,
        rtt_us: info.tcpi_rtt,
        rto_us: info.tcpi_rto,
        unacked: info.tcpi_unacked,
        notsent_bytes: info.tcpi_notsent_bytes,
    })
}

/// Sets `TCP_CONGESTION` (`reno`, `cubic`, `bbr`, … as the kernel names them).
pub fn set_congestion(socket: &impl AsRawFd, name: &str) -> io::Result<()> {
    let fd = socket.as_raw_fd();
    let bytes = name.as_bytes();
    // SAFETY: we pass a pointer to `bytes` and its exact length; the kernel only reads them.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            bytes.as_ptr().cast(),
            bytes.len() as libc::socklen_t,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Reads `TCP_CONGESTION`: the congestion control the socket runs.
pub fn congestion(socket: &impl AsRawFd) -> io::Result<String> {
    let mut name = [0u8; 16];
    let len = sockopt::get(
        socket.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_CONGESTION,
        &mut name,
    )?;
    let name = &name[..len.min(name.len())];
    let end = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    Ok(String::from_utf8_lossy(&name[..end]).into_owned())
}

/// Sets `TCP_THIN_LINEAR_TIMEOUTS`: while fewer than four segments are in flight, the
/// retransmission timeout is not doubled for the first six timeouts (RFC 6298's backoff
/// left out for thin streams).
pub fn set_thin_linear_timeouts(socket: &impl AsRawFd, on: bool) -> io::Result<()> {
    let value = libc::c_int::from(on);
    sockopt::set(
        socket.as_raw_fd(),
        libc::IPPROTO_TCP,
        libc::TCP_THIN_LINEAR_TIMEOUTS,
        &value,
    )
}

/// `TCP_RTO_MIN_US` of `<linux/tcp.h>` (Linux 6.16 on), which libc does not have yet: the
/// socket's minimum retransmission timeout, an `int` in microseconds.
const TCP_RTO_MIN_US: libc::c_int = 45;

/// The most [`set_rto_min`] takes: the kernel's default minimum RTO, `TCP_RTO_MIN` (200 ms).
pub const RTO_MIN_MAX: Duration = Duration::from_millis(200);

/// Sets `TCP_RTO_MIN_US`: this socket's minimum retransmission timeout, instead of the
/// namespace's `net.ipv4.tcp_rto_min_us`. The kernel holds it in whole ticks (rounded up) and
/// takes from two ticks up to [`RTO_MIN_MAX`], `EINVAL` outside; kernels before 6.16 answer
/// `ENOPROTOOPT`.
pub fn set_rto_min(socket: &impl AsRawFd, rto_min: Duration) -> io::Result<()> {
    let us = libc::c_int::try_from(rto_min.as_micros())
        .map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    sockopt::set(socket.as_raw_fd(), libc::IPPROTO_TCP, TCP_RTO_MIN_US, &us)
}

/// Reads `TCP_RTO_MIN_US`: the socket's minimum retransmission timeout, as the kernel holds it
/// (whole ticks).
pub fn rto_min(socket: &impl AsRawFd) -> io::Result<Duration> {
    let mut us: libc::c_int = 0;
    sockopt::get(
        socket.as_raw_fd(),
        libc::IPPROTO_TCP,
        TCP_RTO_MIN_US,
        &mut us,
    )?;
    Ok(Duration::from_micros(u64::try_from(us).unwrap_or(0)))
}

/// What this kernel says to a minimum RTO set per socket ([`try_rto_min`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RtoMinSupport {
    /// `TCP_RTO_MIN_US` takes the value.
    Taken,
    /// The kernel has no `TCP_RTO_MIN_US` (before 6.16: `ENOPROTOOPT`).
    Missing,
    /// `TCP_RTO_MIN_US` refuses the value (`EINVAL`): the kernel takes from `least` up to
    /// [`RTO_MIN_MAX`].
    OutOfRange {
        /// The least value the kernel takes: just over one of its ticks, which it rounds up
        /// to the two ticks it asks for at least.
        least: Duration,
    },
}

/// Tries `rto_min` as `TCP_RTO_MIN_US` on a throwaway TCP socket (so before anything connects);
/// when the kernel refuses it, finds by bisection on that socket the least value it takes.
pub fn try_rto_min(rto_min: Duration) -> io::Result<RtoMinSupport> {
    let probe = socket2::Socket::new(
        socket2::Domain::IPV4,
        socket2::Type::STREAM,
        Some(socket2::Protocol::TCP),
    )?;
    let takes = |value: Duration| match set_rto_min(&probe, value) {
        Ok(()) => Ok(true),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => Ok(false),
        Err(e) => Err(e),
    };
    match set_rto_min(&probe, rto_min) {
        Ok(()) => return Ok(RtoMinSupport::Taken),
        Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => return Ok(RtoMinSupport::Missing),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {}
        Err(e) => return Err(e),
    }
    // Taken values are those from the least one up: 0 µs never is, the maximum always is.
    let (mut refused, mut taken) = (0u64, RTO_MIN_MAX.as_micros() as u64);
    if !takes(Duration::from_micros(taken))? {
        return Err(io::Error::other(format!(
            "TCP_RTO_MIN_US refuses even {RTO_MIN_MAX:?}"
        )));
    }
    while taken - refused > 1 {
        let mid = refused + (taken - refused) / 2;
        if takes(Duration::from_micros(mid))? {
            taken = mid;
        } else {
            refused = mid;
        }
    }
    Ok(RtoMinSupport::OutOfRange {
        least: Duration::from_micros(taken),
    })
}

/// Waits until one of `fds` can be read (or has an error or hang-up pending) or `timeout`
/// passes (`None`: no limit); returns which can, in order (all `false` on timeout or when a
/// signal ended the wait).
pub fn wait_readable(fds: &[RawFd], timeout: Option<Duration>) -> io::Result<Vec<bool>> {
    Ok(crate::poll::wait_in(fds, timeout)?
        .into_iter()
        .map(|revents| revents != 0)
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    #[test]
    fn tcp_info_counts_the_bytes_a_connection_sent_and_received() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(&[7u8; 1000]).unwrap();
        let mut got = [0u8; 1000];
        server.read_exact(&mut got).unwrap();
        let sent = tcp_info(&client).unwrap();
        let received = tcp_info(&server).unwrap();
        assert_eq!(sent.bytes_sent, 1000);
        assert_eq!(received.bytes_received, 1000);
        assert!(sent.segs_out >= 2, "SYN and at least one data segment");
        assert_eq!(sent.total_retrans, 0);
        assert_eq!(sent.dsack_dups, 0, "nothing was sent twice");
    }

    #[test]
    fn congestion_control_and_thin_timeouts_can_be_set() {
        let socket = TcpStream::connect(
            TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap(),
        )
        .unwrap();
        set_congestion(&socket, "reno").unwrap();
        assert_eq!(congestion(&socket).unwrap(), "reno");
        assert!(set_congestion(&socket, "no-such-cc").is_err());
        set_thin_linear_timeouts(&socket, true).unwrap();
    }

    #[test]
    fn the_minimum_rto_is_set_per_socket_and_reads_back() {
        let socket = TcpStream::connect(
            TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap(),
        )
        .unwrap();
        // 40 ms is a whole number of ticks at every usual HZ (100, 250, 300, 1000).
        match set_rto_min(&socket, Duration::from_millis(40)) {
            Err(e) if e.raw_os_error() == Some(libc::ENOPROTOOPT) => {
                // Needs Linux 6.16 for the option itself; before it, the fallback is checked:
                // reading it fails the same way and the probe says the kernel has none.
                assert_eq!(
                    rto_min(&socket).unwrap_err().raw_os_error(),
                    Some(libc::ENOPROTOOPT)
                );
                assert_eq!(
                    try_rto_min(Duration::from_millis(40)).unwrap(),
                    RtoMinSupport::Missing
                );
                eprintln!("this kernel has no TCP_RTO_MIN_US (Linux 6.16 on): checked its absence");
                return;
            }
            r => r.unwrap(),
        }
        assert_eq!(rto_min(&socket).unwrap(), Duration::from_millis(40));
        set_rto_min(&socket, RTO_MIN_MAX).unwrap();
        assert_eq!(rto_min(&socket).unwrap(), RTO_MIN_MAX);
        for refused in [Duration::ZERO, RTO_MIN_MAX + Duration::from_millis(1)] {
            let e = set_rto_min(&socket, refused).unwrap_err();
            assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{refused:?}");
        }
        // A refused value leaves the last one in place.
        assert_eq!(rto_min(&socket).unwrap(), RTO_MIN_MAX);
    }

    #[test]
    fn a_minimum_rto_out_of_the_kernels_range_is_found_with_the_least_it_takes() {
        if try_rto_min(Duration::from_millis(40)).unwrap() == RtoMinSupport::Missing {
            // Needs Linux 6.16; before it, no value is out of range: every one is Missing (no
            // bisection against a kernel that answers ENOPROTOOPT to all of them).
            for value in [
                Duration::from_micros(1),
                RTO_MIN_MAX + Duration::from_micros(1),
            ] {
                assert_eq!(try_rto_min(value).unwrap(), RtoMinSupport::Missing);
            }
            eprintln!("this kernel has no TCP_RTO_MIN_US (Linux 6.16 on): checked its absence");
            return;
        }
        assert_eq!(
            try_rto_min(Duration::from_millis(40)).unwrap(),
            RtoMinSupport::Taken
        );
        let RtoMinSupport::OutOfRange { least } = try_rto_min(Duration::from_micros(1)).unwrap()
        else {
            panic!("1 us is less than two ticks of any kernel");
        };
        // Just over one tick: HZ is between 100 and 1000.
        let tick = least - Duration::from_micros(1);
        assert!(
            (Duration::from_millis(1)..=Duration::from_millis(10)).contains(&tick),
            "{least:?}"
        );
        assert_eq!(try_rto_min(least).unwrap(), RtoMinSupport::Taken);
        assert_eq!(
            try_rto_min(tick).unwrap(),
            RtoMinSupport::OutOfRange { least }
        );
        assert_eq!(
            try_rto_min(RTO_MIN_MAX + Duration::from_micros(1)).unwrap(),
            RtoMinSupport::OutOfRange { least }
        );
    }

    #[test]
    fn wait_readable_says_which_descriptor_has_data() {
        let a = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        b.send_to(b"x", a.local_addr().unwrap()).unwrap();
        let fds = [a.as_raw_fd(), b.as_raw_fd()];
        let ready = wait_readable(&fds, Some(Duration::from_secs(1))).unwrap();
        assert_eq!(ready, vec![true, false]);
        let mut buf = [0u8; 4];
        a.recv(&mut buf).unwrap();
        let ready = wait_readable(&fds, Some(Duration::from_millis(1))).unwrap();
        assert_eq!(ready, vec![false, false]);
    }
}
