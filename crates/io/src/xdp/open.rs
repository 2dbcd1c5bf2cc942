//! Opening an AF_XDP socket: attaching its program, mapping the UMEM and the four rings,
//! binding to the queue (zero-copy when the driver can) and entering the program's map, with
//! errors that name the interface and the step.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;

use super::ring::{Ring, DESC_SIZE};
use super::{BindMode, Umem, XdpOptions, XdpProgram, XdpSocket};
use crate::iface::{at, interface_index};
use crate::sockopt;

/// How long a bind waits for a queue still held by a socket closed a moment ago.
const BUSY_WAIT: std::time::Duration = std::time::Duration::from_millis(500);

impl XdpSocket {
    /// Attaches the program of `options` to `ifname` (of the calling thread's namespace),
    /// opens an AF_XDP socket on queue [`XdpOptions::queue_id`] with its UMEM and rings, binds
    /// it (zero-copy if the driver can, else copy) and puts it in the program's `XSKMAP`.
    ///
    /// Errors name the interface and the step: `veth-b: an XDP program is already attached
    /// (another latlab?)`, `veth-b: queue 0 already has an AF_XDP socket (another latlab?)`,
    /// `veth-b: not permitted: …` (not root) or `veth-b: this kernel has no AF_XDP sockets …`,
    /// both suggesting the kernel path (`--io socket`, or `--io packet` for emu), or the option at fault (`InvalidInput`).
    pub fn open(ifname: &str, options: &XdpOptions) -> io::Result<XdpSocket> {
        options.check().map_err(|msg| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{ifname}: {msg}"))
        })?;
        let ifindex = interface_index(ifname)?;
        let program = XdpProgram::attach_limited(ifname, options.program, options.source_limit)?;
        let fd = xdp_socket(ifname)?;
        let raw = fd.as_raw_fd();
        // AF_XDP sockets take no interface ioctls: the MTU is asked through a UDP socket made
        // here, so in the interface's namespace whatever thread asks later.
        let ioctl_fd = OwnedFd::from(
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::DGRAM, None)
                .map_err(at(ifname, "socket for interface ioctls"))?,
        );

        let frame_size = options.frame_size;
        let ring_size = options.frame_count / 2;
        let umem_len = frame_size as usize * options.frame_count as usize;
        // SAFETY: a fresh private anonymous mapping that nothing else aliases.
        let umem_ptr = unsafe {
            libc::mmap(
                ptr::null_mut(),
                umem_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE,
                -1,
                0,
            )
        };
        if umem_ptr == libc::MAP_FAILED {
            return Err(at(ifname, "mmap UMEM")(io::Error::last_os_error()));
        }
        let umem = Umem {
            ptr: umem_ptr.cast(),
            len: umem_len,
        };
        // SAFETY: xdp_umem_reg is plain data; all zeroes is valid.
        let mut reg: libc::xdp_umem_reg = unsafe { zeroed() };
        reg.addr = umem.ptr as u64;
        reg.len = umem_len as u64;
        reg.chunk_size = frame_size;
        reg.headroom = 0;
        sockopt::set(raw, libc::SOL_XDP, libc::XDP_UMEM_REG, &reg)
            .map_err(at(ifname, "setsockopt XDP_UMEM_REG"))?;
        for (name, step) in [
            (libc::XDP_UMEM_FILL_RING, "setsockopt XDP_UMEM_FILL_RING"),
            (
                libc::XDP_UMEM_COMPLETION_RING,
                "setsockopt XDP_UMEM_COMPLETION_RING",
            ),
            (libc::XDP_RX_RING, "setsockopt XDP_RX_RING"),
            (libc::XDP_TX_RING, "setsockopt XDP_TX_RING"),
        ] {
            sockopt::set(raw, libc::SOL_XDP, name, &ring_size).map_err(at(ifname, step))?;
        }
        let offsets = mmap_offsets(raw).map_err(at(ifname, "getsockopt XDP_MMAP_OFFSETS"))?;
        let fill = Ring::map(
            raw,
            libc::XDP_UMEM_PGOFF_FILL_RING as libc::off_t,
            &offsets.fr,
            ring_size,
            8,
        )
        .map_err(at(ifname, "mmap fill ring"))?
        .into_producer();
        let completion = Ring::map(
            raw,
            libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t,
            &offsets.cr,
            ring_size,
            8,
        )
        .map_err(at(ifname, "mmap completion ring"))?
        .into_consumer();
        let rx = Ring::map(
            raw,
            libc::XDP_PGOFF_RX_RING,
            &offsets.rx,
            ring_size,
            DESC_SIZE,
        )
        .map_err(at(ifname, "mmap RX ring"))?
        .into_consumer();
        let tx = Ring::map(
            raw,
            libc::XDP_PGOFF_TX_RING,
            &offsets.tx,
            ring_size,
            DESC_SIZE,
        )
        .map_err(at(ifname, "mmap TX ring"))?
        .into_producer();

        let tx_base = u64::from(ring_size) * u64::from(frame_size);
        let mut socket = XdpSocket {
            ifname: ifname.to_owned(),
            queue_id: options.queue_id,
            bind_mode: BindMode::Copy,
            frame_size,
            tx_base,
            tx_mtu_limit: 0,
            ioctl_fd,
            fill,
            completion,
            rx,
            tx,
            fill_pending: (0..u64::from(ring_size))
                .map(|i| i * u64::from(frame_size))
                .collect(),
            tx_free: (0..u64::from(ring_size))
                .map(|i| tx_base + i * u64::from(frame_size))
                .collect(),
            corrupt_descs: 0,
            wire: super::wire::XdpWire::new(ifname),
            fd,
            program,
            umem,
        };
        socket.refill();
        socket.bind_mode = socket.bind(ifindex, options.force_copy)?;
        socket
            .program
            .insert_socket(options.queue_id, socket.fd.as_fd())?;
        Ok(socket)
    }

    /// Binds to the queue: zero-copy first unless `force_copy`, copy when the driver cannot.
    fn bind(&self, ifindex: u32, force_copy: bool) -> io::Result<BindMode> {
        let try_bind = |flags: u16| {
            // SAFETY: sockaddr_xdp is plain data; all zeroes is valid.
            let mut addr: libc::sockaddr_xdp = unsafe { zeroed() };
            addr.sxdp_family = libc::AF_XDP as u16;
            addr.sxdp_flags = flags | libc::XDP_USE_NEED_WAKEUP;
            addr.sxdp_ifindex = ifindex;
            addr.sxdp_queue_id = self.queue_id;
            // SAFETY: `addr` is a valid sockaddr_xdp of the size passed, alive during the call.
            let rc = unsafe {
                libc::bind(
                    self.fd.as_raw_fd(),
                    (&addr as *const libc::sockaddr_xdp).cast(),
                    size_of::<libc::sockaddr_xdp>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        };
        let busy = |err: io::Error| {
            if err.raw_os_error() == Some(libc::EBUSY) {
                io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{}: queue {} already has an AF_XDP socket (another latlab?)",
                        self.ifname, self.queue_id
                    ),
                )
            } else {
                err
            }
        };
        // The kernel frees the buffer pool of a closed AF_XDP socket from a work queue, so a
        // queue whose socket was closed a moment ago (the point before, in a study) can still
        // be busy: wait for it a little before saying another socket has it.
        let retry_busy = |flags: u16| {
            let deadline = std::time::Instant::now() + BUSY_WAIT;
            loop {
                match try_bind(flags) {
                    Err(err)
                        if err.raw_os_error() == Some(libc::EBUSY)
                            && std::time::Instant::now() < deadline =>
                    {
                        std::thread::sleep(std::time::Duration::from_millis(5));
                    }
                    other => return other,
                }
            }
        };
        if !force_copy {
            match retry_busy(libc::XDP_ZEROCOPY) {
                Ok(()) => return Ok(BindMode::ZeroCopy),
                Err(err) if err.raw_os_error() == Some(libc::EBUSY) => return Err(busy(err)),
                // No zero-copy in this driver (EOPNOTSUPP), or not on this queue: copy.
                Err(_) => {}
            }
        }
        retry_busy(libc::XDP_COPY)
            .map_err(busy)
            .map_err(|e| match e.kind() {
                io::ErrorKind::AlreadyExists => e,
                _ => at(&self.ifname, "bind AF_XDP (copy mode)")(e),
            })?;
        Ok(BindMode::Copy)
    }
}

/// A fresh AF_XDP socket, with errors that say why AF_XDP cannot be had.
fn xdp_socket(ifname: &str) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!(
                    "{ifname}: not permitted: AF_XDP needs CAP_NET_RAW (run as root, or use \
                     the kernel path: --io socket, or --io packet for emu)"
                ),
            ),
            Some(libc::EAFNOSUPPORT) => io::Error::new(
                io::ErrorKind::Unsupported,
                format!(
                    "{ifname}: this kernel has no AF_XDP sockets (CONFIG_XDP_SOCKETS); use \
                     the kernel path: --io socket, or --io packet for emu"
                ),
            ),
            _ => at(ifname, "socket AF_XDP")(err),
        });
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Where the indices and descriptors of each ring lie in its mapping (`XDP_MMAP_OFFSETS`).
fn mmap_offsets(fd: RawFd) -> io::Result<libc::xdp_mmap_offsets> {
    // SAFETY: xdp_mmap_offsets is plain data; all zeroes is valid.
    let mut off: libc::xdp_mmap_offsets = unsafe { zeroed() };
    let len = sockopt::get(fd, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS, &mut off)?;
    if len != size_of::<libc::xdp_mmap_offsets>() {
        // A kernel before 5.4 writes the layout without `flags` (no need-wakeup).
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "the kernel's rings have no flags word (Linux 5.4 or later needed)",
        ));
    }
    Ok(off)
}
