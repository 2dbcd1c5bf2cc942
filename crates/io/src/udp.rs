//! UDP sockets with batched I/O (`recvmmsg`/`sendmmsg`), kernel software timestamps and busy
//! polling.
//!
//! A [`RecvBatch`] and a [`SendBatch`] own fixed slots of memory allocated once; the batch calls
//! fill or drain them without allocating. Sockets are always non-blocking: a batch call on a
//! socket with nothing to read (or no room to write) moves zero datagrams and returns `Ok(0)`.
//! [`UdpSocket::wait_readable`] blocks, for the engines' blocking mode.

use std::io;
use std::mem::{size_of, zeroed};
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Duration;

use socket2::{Domain, Protocol, Socket, Type};

use crate::clock::timespec_ns;

mod batch;
pub use batch::{Received, RecvBatch, SendBatch};

/// Where the receive timestamps of a socket come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimestampSource {
    /// The kernel stamps each datagram when its network stack receives it (`SO_TIMESTAMPING`,
    /// software). Excludes the time the datagram waits in the socket buffer.
    KernelSoftware,
    /// User space reads the clock after the receive call returns. Includes the wait in the
    /// socket buffer and the time to wake the reader.
    UserSpace,
    /// latlab's XDP program stamps each frame as the driver hands it over, before any queue
    /// (AF_XDP; a frame the driver gave no room for the stamp is stamped as read instead).
    XdpProgram,
}

impl TimestampSource {
    /// Every source, as results files may name them (`timestamp_source`).
    pub const ALL: [TimestampSource; 3] = [
        TimestampSource::KernelSoftware,
        TimestampSource::UserSpace,
        TimestampSource::XdpProgram,
    ];

    /// The name written into results files.
    pub fn name(self) -> &'static str {
        match self {
            TimestampSource::KernelSoftware => "kernel-software",
            TimestampSource::UserSpace => "user-space",
            TimestampSource::XdpProgram => "xdp-program",
        }
    }
}

/// Options applied when a socket is bound.
#[derive(Clone, Debug, Default)]
pub struct UdpOptions {
    /// `SO_RCVBUF` in bytes (the kernel doubles it and caps it at `rmem_max`; root uses
    /// `SO_RCVBUFFORCE` to pass the cap). `None` keeps the system default.
    pub rcvbuf: Option<usize>,
    /// `SO_SNDBUF` in bytes, as `rcvbuf`.
    pub sndbuf: Option<usize>,
    /// `SO_BUSY_POLL` in microseconds: the kernel polls the device queue this long in a receive
    /// call before sleeping. `None` leaves it off.
    pub busy_poll_us: Option<u32>,
    /// Ask for kernel software receive timestamps.
    pub rx_timestamps: bool,
    /// Ask for kernel software transmit timestamps, read with [`UdpSocket::read_tx_timestamps`].
    pub tx_timestamps: bool,
}

/// A non-blocking UDP socket with batched receive and send.
#[derive(Debug)]
pub struct UdpSocket {
    socket: Socket,
    rx_source: TimestampSource,
    tx_timestamps: bool,
}

impl UdpSocket {
    /// Creates a socket, applies `options` and binds it to `addr`.
    pub fn bind(addr: SocketAddr, options: &UdpOptions) -> io::Result<UdpSocket> {
        let socket = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
        socket.set_nonblocking(true)?;
        if let Some(bytes) = options.rcvbuf {
            set_buffer(&socket, libc::SO_RCVBUFFORCE, bytes)
                .or_else(|_| socket.set_recv_buffer_size(bytes))?;
        }
        if let Some(bytes) = options.sndbuf {
            set_buffer(&socket, libc::SO_SNDBUFFORCE, bytes)
                .or_else(|_| socket.set_send_buffer_size(bytes))?;
        }
        if let Some(us) = options.busy_poll_us {
            setsockopt_int(
                &socket,
                libc::SOL_SOCKET,
                libc::SO_BUSY_POLL,
                us as libc::c_int,
            )?;
        }
        let mut flags: libc::c_uint = 0;
        if options.rx_timestamps {
            flags |= libc::SOF_TIMESTAMPING_RX_SOFTWARE | libc::SOF_TIMESTAMPING_SOFTWARE;
        }
        if options.tx_timestamps {
            flags |= libc::SOF_TIMESTAMPING_TX_SOFTWARE
                | libc::SOF_TIMESTAMPING_SOFTWARE
                | libc::SOF_TIMESTAMPING_OPT_ID
                | libc::SOF_TIMESTAMPING_OPT_TSONLY;
        }
        let mut stamped = false;
        if flags != 0 {
            stamped = setsockopt_int(
                &socket,
                libc::SOL_SOCKET,
                libc::SO_TIMESTAMPING,
                flags as libc::c_int,
            )
            .is_ok();
        }
        socket.bind(&addr.into())?;
        Ok(UdpSocket {
            socket,
            rx_source: if stamped && options.rx_timestamps {
                TimestampSource::KernelSoftware
            } else {
                TimestampSource::UserSpace
            },
            tx_timestamps: stamped && options.tx_timestamps,
        })
    }

    /// A socket already bound by the standard library (a clone of a server's shared
    /// socket, say), made non-blocking; its receive stamps are taken in user space.
    pub fn from_std(socket: std::net::UdpSocket) -> io::Result<UdpSocket> {
        let socket = Socket::from(socket);
        socket.set_nonblocking(true)?;
        Ok(UdpSocket {
            socket,
            rx_source: TimestampSource::UserSpace,
            tx_timestamps: false,
        })
    }

    /// Connects the socket, so batches without a destination go to `addr` and only datagrams
    /// from `addr` are received.
    pub fn connect(&self, addr: SocketAddr) -> io::Result<()> {
        self.socket.connect(&addr.into())
    }

    /// The address the socket is bound to.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket
            .local_addr()?
            .as_socket()
            .ok_or_else(|| io::Error::other("socket has no IP address"))
    }

    /// The receive buffer size the kernel granted, in bytes.
    pub fn recv_buffer_size(&self) -> io::Result<usize> {
        self.socket.recv_buffer_size()
    }

    /// The send buffer size the kernel granted, in bytes.
    pub fn send_buffer_size(&self) -> io::Result<usize> {
        self.socket.send_buffer_size()
    }

    /// Datagrams the kernel dropped for this socket since it was made, before it could read
    /// them: a full receive buffer, no memory, a bad checksum (the socket's `sk_drops`, read
    /// with `SO_MEMINFO` at any time; the count `SO_RXQ_OVFL` would attach to the next
    /// datagram read).
    pub fn kernel_drops(&self) -> io::Result<u64> {
        // SK_MEMINFO_VARS: nine values, the drops counter the last.
        let mut info = [0u32; 9];
        crate::sockopt::get(
            self.socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_MEMINFO,
            &mut info,
        )?;
        Ok(u64::from(info[libc::SK_MEMINFO_DROPS as usize]))
    }

    /// Where the receive timestamps of this socket come from.
    pub fn rx_timestamp_source(&self) -> TimestampSource {
        self.rx_source
    }

    /// Whether the kernel reports transmit timestamps on this socket.
    pub fn tx_timestamps(&self) -> bool {
        self.tx_timestamps
    }

    /// Blocks until a datagram can be read or `timeout` passes (`None`: no limit); `Ok(true)`
    /// when readable. The timeout has nanosecond resolution (`ppoll`); how late the thread
    /// wakes depends on its timer slack ([`crate::cpu::set_timer_slack_ns`]).
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        wait_any_readable(&[self], timeout).map(|r| r.is_some())
    }

    /// Receives up to `batch.capacity()` datagrams in one `recvmmsg` call without blocking.
    /// Returns how many arrived (0 when none were waiting); read them with [`RecvBatch::iter`].
    pub fn recv_batch(&self, batch: &mut RecvBatch) -> io::Result<usize> {
        batch.prepare();
        // SAFETY: `prepare` pointed every header at buffers owned by `batch`, which outlives
        // the call; the count passed is the number of headers.
        let rc = unsafe {
            libc::recvmmsg(
                self.socket.as_raw_fd(),
                batch.hdrs.as_mut_ptr(),
                batch.hdrs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if rc < 0 {
            batch.count = 0;
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                // A previous send's ICMP error (port unreachable) surfaces here: not fatal.
                io::ErrorKind::ConnectionRefused => Ok(0),
                _ => Err(err),
            };
        }
        let user_ns = crate::clock::now_ns();
        batch.finish(rc as usize, self.rx_source, user_ns);
        Ok(batch.count)
    }

    /// Sends the datagrams queued in `batch` with `sendmmsg`, without blocking. Returns how many
    /// left; those are removed from the batch, the rest stay queued for the next call.
    pub fn send_batch(&self, batch: &mut SendBatch) -> io::Result<usize> {
        if batch.len == 0 {
            return Ok(0);
        }
        batch.prepare();
        // SAFETY: `prepare` pointed the first `batch.len` headers at buffers and addresses
        // owned by `batch`, which outlives the call.
        let rc = unsafe {
            libc::sendmmsg(
                self.socket.as_raw_fd(),
                batch.hdrs.as_mut_ptr(),
                batch.len as libc::c_uint,
                libc::MSG_DONTWAIT,
            )
        };
        if rc < 0 {
            let err = io::Error::last_os_error();
            return match err.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(0),
                // ICMP port unreachable from an earlier datagram: the peer is not there (yet).
                io::ErrorKind::ConnectionRefused => Ok(0),
                _ => Err(err),
            };
        }
        let sent = rc as usize;
        batch.consume(sent);
        Ok(sent)
    }

    /// Receives one datagram into `buf` without blocking. Unlike the batch calls, every error
    /// is returned as it is, `WouldBlock` and `ConnectionRefused` (an ICMP port unreachable
    /// for a connected socket) included.
    pub fn recv_one(&self, buf: &mut [u8]) -> io::Result<usize> {
        use std::io::Read;
        (&self.socket).read(buf)
    }

    /// Receives one datagram into `buf` with its sender, without blocking: one `recvfrom` per
    /// datagram, as a plain kernel-socket server does. `WouldBlock` when nothing waits.
    pub fn recv_from_one(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        // SAFETY: sockaddr_storage is plain data; all zeroes is valid.
        let mut storage: libc::sockaddr_storage = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        // SAFETY: `buf` is valid for `buf.len()` bytes and `storage` for `len` bytes; both
        // outlive the call.
        let rc = unsafe {
            libc::recvfrom(
                self.socket.as_raw_fd(),
                buf.as_mut_ptr().cast(),
                buf.len(),
                libc::MSG_DONTWAIT,
                (&mut storage as *mut libc::sockaddr_storage).cast(),
                &mut len,
            )
        };
        if rc < 0 {
            return Err(io::Error::last_os_error());
        }
        let from =
            socket_addr(&storage).ok_or_else(|| io::Error::other("sender has no IP address"))?;
        Ok((rc as usize, from))
    }

    /// The socket itself, for the ports.
    pub(crate) fn raw(&self) -> &Socket {
        &self.socket
    }

    /// Sends one datagram to `addr` (or to the connected peer when `None`).
    pub fn send_one(&self, data: &[u8], addr: Option<SocketAddr>) -> io::Result<usize> {
        match addr {
            Some(a) => self.socket.send_to(data, &a.into()),
            None => self.socket.send(data),
        }
    }

    /// Reads the transmit timestamps the kernel queued since the last call into `out`, as
    /// (datagram counter since the socket was created, kernel software timestamp in ns).
    /// Returns how many were read.
    pub fn read_tx_timestamps(&self, out: &mut Vec<(u32, u64)>) -> io::Result<usize> {
        let mut n = 0;
        loop {
            let mut control = [0u64; 64];
            // SAFETY: msghdr is plain data; all zeroes is a valid empty header.
            let mut msg: libc::msghdr = unsafe { zeroed() };
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = size_of::<[u64; 64]>() as _;
            // SAFETY: `msg` points at `control`, which lives until the end of this iteration.
            let rc = unsafe {
                libc::recvmsg(
                    self.socket.as_raw_fd(),
                    &mut msg,
                    libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
                )
            };
            if rc < 0 {
                let err = io::Error::last_os_error();
                return match err.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => Ok(n),
                    _ => Err(err),
                };
            }
            let mut stamp = None;
            let mut id = None;
            // SAFETY: `msg` was filled by recvmsg; the CMSG macros walk its control buffer
            // within `msg_controllen`, and each data read is bounded by the header's type.
            unsafe {
                let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
                while !cmsg.is_null() {
                    let level = (*cmsg).cmsg_level;
                    let kind = (*cmsg).cmsg_type;
                    if level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPING {
                        let ts: [libc::timespec; 3] =
                            std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                        stamp = Some(timespec_ns(&ts[0]));
                    } else if (level == libc::SOL_IP && kind == libc::IP_RECVERR)
                        || (level == libc::SOL_IPV6 && kind == libc::IPV6_RECVERR)
                    {
                        let ee: libc::sock_extended_err =
                            std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast());
                        if ee.ee_origin == libc::SO_EE_ORIGIN_TIMESTAMPING {
                            id = Some(ee.ee_data);
                        }
                    }
                    cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
                }
            }
            if let (Some(id), Some(ns)) = (id, stamp) {
                out.push((id, ns));
                n += 1;
            }
        }
    }
}

/// Blocks until one of `sockets` can be read or `timeout` passes; returns the index of a
/// readable one, `None` on timeout or when a signal interrupted the wait.
pub fn wait_any_readable(
    sockets: &[&UdpSocket],
    timeout: Option<Duration>,
) -> io::Result<Option<usize>> {
    let fds: Vec<RawFd> = sockets.iter().map(|s| s.as_raw_fd()).collect();
    Ok(crate::poll::wait_in(&fds, timeout)?
        .iter()
        .position(|r| *r != 0))
}

impl UdpSocket {
    /// Sets the IPv4 TOS byte its datagrams carry (`IP_TOS`): DSCP and the ECN field, as
    /// `0x01` for ECT(1), the L4S identifier (RFC 9331).
    pub fn set_tos_v4(&self, tos: u32) -> io::Result<()> {
        self.socket.set_tos_v4(tos)
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

fn setsockopt_int(
    socket: &Socket,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    crate::sockopt::set(socket.as_raw_fd(), level, name, &value)
}

fn set_buffer(socket: &Socket, force_opt: libc::c_int, bytes: usize) -> io::Result<()> {
    let bytes = bytes.min(i32::MAX as usize) as libc::c_int;
    setsockopt_int(socket, libc::SOL_SOCKET, force_opt, bytes)
}

/// Reads an IPv4 or IPv6 socket address the kernel wrote into `storage`.
pub(crate) fn socket_addr(storage: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match storage.ss_family as libc::c_int {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in, which it is large and
            // aligned enough for.
            let sin =
                unsafe { &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
            Some(SocketAddr::from((ip, u16::from_be(sin.sin_port))))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6, as above.
            let sin6 = unsafe {
                &*(storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
            };
            let ip = std::net::Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(SocketAddr::from((ip, u16::from_be(sin6.sin6_port))))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(options: &UdpOptions) -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), options).unwrap();
        let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), options).unwrap();
        (a, b)
    }

    /// How long to wait for a datagram that normally comes in microseconds: long, because the
    /// wait only runs out when something is broken, and a loaded guest can stall for a while.
    const PATIENCE: Duration = Duration::from_secs(30);

    fn recv_all(sock: &UdpSocket, batch: &mut RecvBatch, want: usize) -> Vec<(Vec<u8>, u64)> {
        let mut got = Vec::new();
        while got.len() < want {
            assert!(sock.wait_readable(Some(PATIENCE)).unwrap());
            sock.recv_batch(batch).unwrap();
            got.extend(batch.iter().map(|r| (r.data.to_vec(), r.rx_ns)));
        }
        got
    }

    #[test]
    fn a_batch_sent_arrives_whole_and_in_order() {
        let (a, b) = pair(&UdpOptions::default());
        let to = b.local_addr().unwrap();
        let mut send = SendBatch::new(8, 64);
        for i in 0..8u8 {
            send.push(10 + i as usize, Some(to)).unwrap().fill(i);
        }
        assert!(
            send.push(1, Some(to)).is_none(),
            "a full batch takes no more"
        );
        assert_eq!(a.send_batch(&mut send).unwrap(), 8);
        assert!(send.is_empty());
        let mut recv = RecvBatch::new(16, 64);
        let got = recv_all(&b, &mut recv, 8);
        for (i, (data, _)) in got.iter().enumerate() {
            assert_eq!(data.len(), 10 + i);
            assert!(data.iter().all(|&x| x == i as u8));
        }
    }

    #[test]
    fn an_empty_socket_reads_zero_without_blocking() {
        let (_a, b) = pair(&UdpOptions::default());
        let mut recv = RecvBatch::new(4, 64);
        assert_eq!(b.recv_batch(&mut recv).unwrap(), 0);
        assert!(!b.wait_readable(Some(Duration::from_millis(1))).unwrap());
    }

    #[test]
    fn an_oversized_datagram_is_cut_and_flagged() {
        let (a, b) = pair(&UdpOptions::default());
        a.send_one(&[7u8; 200], Some(b.local_addr().unwrap()))
            .unwrap();
        let mut recv = RecvBatch::new(4, 64);
        assert!(b.wait_readable(Some(PATIENCE)).unwrap());
        assert_eq!(b.recv_batch(&mut recv).unwrap(), 1);
        let r = recv.iter().next().unwrap();
        assert!(r.truncated);
        assert_eq!(r.data.len(), 64);
        assert_eq!(r.from, a.local_addr().unwrap());
    }

    #[test]
    fn kernel_receive_stamps_fall_between_send_and_read() {
        let opts = UdpOptions {
            rx_timestamps: true,
            ..UdpOptions::default()
        };
        let (a, b) = pair(&opts);
        assert_eq!(b.rx_timestamp_source(), TimestampSource::KernelSoftware);
        // The kernel turns receive stamping on lazily (a deferred static key, set by a kernel
        // worker that a busy machine may run late): until it is on, a datagram is stamped when
        // it is read. Datagrams read 20 ms after they were sent, until one carries a stamp from
        // its arrival, not from the read.
        let deadline = std::time::Instant::now() + PATIENCE;
        let mut recv = RecvBatch::new(4, 64);
        loop {
            let before = crate::clock::now_ns();
            a.send_one(b"stamp me", Some(b.local_addr().unwrap()))
                .unwrap();
            std::thread::sleep(Duration::from_millis(20));
            let got = recv_all(&b, &mut recv, 1);
            let after = crate::clock::now_ns();
            let stamp = got[0].1;
            assert!(stamp >= before && stamp <= after);
            if after - stamp >= 15_000_000 {
                break;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "stamp {stamp} read at {after}: still stamped on reading"
            );
        }
    }

    #[test]
    fn kernel_transmit_stamps_are_reported_with_their_counter() {
        let opts = UdpOptions {
            tx_timestamps: true,
            ..UdpOptions::default()
        };
        let (a, b) = pair(&opts);
        assert!(a.tx_timestamps());
        let before = crate::clock::now_ns();
        a.connect(b.local_addr().unwrap()).unwrap();
        let mut send = SendBatch::new(4, 16);
        for _ in 0..3 {
            send.push(16, None).unwrap();
        }
        assert_eq!(a.send_batch(&mut send).unwrap(), 3);
        let mut stamps = Vec::new();
        let deadline = std::time::Instant::now() + PATIENCE;
        while stamps.len() < 3 && std::time::Instant::now() < deadline {
            a.read_tx_timestamps(&mut stamps).unwrap();
            if stamps.len() < 3 {
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        let ids: Vec<u32> = stamps.iter().map(|s| s.0).collect();
        assert_eq!(ids, vec![0, 1, 2]);
        assert!(stamps.iter().all(|s| s.1 >= before));
    }

    #[test]
    fn one_datagram_at_a_time_comes_with_its_sender() {
        let (a, b) = pair(&UdpOptions::default());
        let mut buf = [0u8; 32];
        assert_eq!(
            b.recv_from_one(&mut buf).unwrap_err().kind(),
            io::ErrorKind::WouldBlock
        );
        a.send_one(b"hi", Some(b.local_addr().unwrap())).unwrap();
        assert!(b.wait_readable(Some(PATIENCE)).unwrap());
        let (n, from) = b.recv_from_one(&mut buf).unwrap();
        assert_eq!((&buf[..n], from), (&b"hi"[..], a.local_addr().unwrap()));
    }

    #[test]
    fn partial_sends_keep_the_rest_in_order() {
        let mut send = SendBatch::new(4, 8);
        for i in 0..4u8 {
            send.push(1 + i as usize, None).unwrap().fill(i);
        }
        send.consume(3);
        assert_eq!(send.len(), 1);
        assert_eq!(send.lens[0], 4);
        assert_eq!(&send.data[..4], &[3, 3, 3, 3]);
    }

    #[test]
    fn a_full_receive_buffer_counts_every_datagram_it_dropped() {
        let tiny = UdpOptions {
            rcvbuf: Some(1),
            ..UdpOptions::default()
        };
        let b = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &tiny).unwrap();
        let a = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &UdpOptions::default()).unwrap();
        a.connect(b.local_addr().unwrap()).unwrap();
        assert_eq!(b.kernel_drops().unwrap(), 0);
        for _ in 0..50 {
            a.send_one(&[1u8; 200], None).unwrap();
        }
        // Whatever the buffer took is read; the rest the kernel dropped and counted (a look
        // again after a pause allows for a late softirq).
        let mut read = 0u64;
        let mut recv = RecvBatch::new(64, 256);
        for _ in 0..200 {
            read += b.recv_batch(&mut recv).unwrap() as u64;
            if read + b.kernel_drops().unwrap() == 50 {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let dropped = b.kernel_drops().unwrap();
        assert_eq!(read + dropped, 50, "read {read}, dropped {dropped}");
        assert!(dropped > 0 && read > 0, "read {read}, dropped {dropped}");
    }

    #[test]
    fn buffer_sizes_are_applied() {
        let opts = UdpOptions {
            rcvbuf: Some(64 * 1024),
            ..UdpOptions::default()
        };
        let s = UdpSocket::bind("127.0.0.1:0".parse().unwrap(), &opts).unwrap();
        // The kernel doubles the requested size for its bookkeeping.
        assert_eq!(s.recv_buffer_size().unwrap(), 128 * 1024);
    }
}
