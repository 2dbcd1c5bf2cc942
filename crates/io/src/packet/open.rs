//! Opening an AF_PACKET socket: its ring sizes checked, the `TPACKET` version set, the RX and
//! TX rings made and mapped, the socket bound to the interface, and the interface's MTU read,
//! with errors that name the interface and the step.

use super::*;

impl PacketSocket {
    /// Opens an AF_PACKET `SOCK_RAW` socket for every protocol (`ETH_P_ALL`) bound to the
    /// interface `ifname` of the calling thread's network namespace, with RX and TX rings of
    /// the version [`PacketOptions::rx_ring`] chooses and the switches of `options`. The socket is bound only after the rings exist,
    /// so no frame of another interface is ever queued on it.
    ///
    /// Errors name the interface and the step that failed: `eth9: no such interface`,
    /// `eth0: setsockopt PACKET_RX_RING: …`, `eth0: not permitted: AF_PACKET needs CAP_NET_RAW
    /// (run as root)`, or the option at fault (`InvalidInput`).
    pub fn open(ifname: &str, options: &PacketOptions) -> io::Result<PacketSocket> {
        let layout = Layout::new(options).map_err(|msg| {
            io::Error::new(io::ErrorKind::InvalidInput, format!("{ifname}: {msg}"))
        })?;
        let ifindex = interface_index(ifname)?;
        let fd = packet_socket(ifname)?;
        let raw = fd.as_raw_fd();
        let ring = options.rx_ring;
        let version_step = match ring {
            RxRing::V2 => "setsockopt PACKET_VERSION TPACKET_V2",
            RxRing::V3 => "setsockopt PACKET_VERSION TPACKET_V3",
        };
        sockopt::set(
            raw,
            libc::SOL_PACKET,
            libc::PACKET_VERSION,
            &ring.tpacket_version(),
        )
        .map_err(at(ifname, version_step))?;
        // A frame the kernel cannot send is skipped instead of stopping the TX ring for good.
        sockopt::set(raw, libc::SOL_PACKET, libc::PACKET_LOSS, &1 as &libc::c_int)
            .map_err(at(ifname, "setsockopt PACKET_LOSS"))?;
        if options.wire_frames {
            // Both before the rings, which the kernel requires of PACKET_VNET_HDR.
            sockopt::set(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_VNET_HDR,
                &1 as &libc::c_int,
            )
            .map_err(at(ifname, "setsockopt PACKET_VNET_HDR"))?;
            sockopt::set(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_COPY_THRESH,
                &1 as &libc::c_int,
            )
            .map_err(at(ifname, "setsockopt PACKET_COPY_THRESH"))?;
            // Room for whole copies of super-frames; the kernel caps it at rmem_max.
            let _ = socket2::SockRef::from(&fd).set_recv_buffer_size(4 << 20);
        }
        // V2 takes a `tpacket_req`, V3 a `tpacket_req3`, for both rings.
        match ring {
            RxRing::V2 => sockopt::set(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_RX_RING,
                &layout.rx_req(),
            ),
            RxRing::V3 => sockopt::set(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_RX_RING,
                &layout.rx_req3(),
            ),
        }
        .map_err(at(ifname, "setsockopt PACKET_RX_RING"))?;
        match ring {
            RxRing::V2 => sockopt::set(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_TX_RING,
                &layout.tx_req(),
            ),
            RxRing::V3 => sockopt::set(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_TX_RING,
                &layout.tx_req3(),
            ),
        }
        .map_err(at(ifname, "setsockopt PACKET_TX_RING"))?;
        let map_len = layout.map_len();
        // SAFETY: a fresh shared mapping of the socket's rings, of exactly the size the kernel
        // expects (both rings); it is not aliased by anything in this process.
        let map = unsafe {
            libc::mmap(
                ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                raw,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(at(ifname, "mmap rings")(io::Error::last_os_error()));
        }
        // From here on, dropping `socket` unmaps and closes.
        let mut socket = PacketSocket {
            ifname: ifname.to_owned(),
            ifindex,
            ring,
            map: map.cast(),
            map_len,
            rx_unit_size: match ring {
                RxRing::V2 => layout.frame_size,
                RxRing::V3 => layout.rx_block_size,
            },
            rx_unit_count: match ring {
                RxRing::V2 => layout.rx_frame_count(),
                RxRing::V3 => layout.rx_block_count,
            },
            rx_next: 0,
            tx_offset: layout.rx_block_size * layout.rx_block_count,
            tx_block_size: layout.tx_block_size,
            tx_frame_size: layout.frame_size,
            tx_frames_per_block: layout.tx_block_size / layout.frame_size,
            tx_capacity: layout.tx_capacity(),
            tx_head: 0,
            tx_pending: 0,
            tx_tail: 0,
            tx_untaken: 0,
            tx_mtu_limit: 0,
            corrupt_blocks: Cell::new(0),
            tx_refused: Cell::new(0),
            restorer: options.wire_frames.then(Default::default),
            fd,
        };
        if options.qdisc_bypass {
            sockopt::set(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_QDISC_BYPASS,
                &1 as &libc::c_int,
            )
            .map_err(at(ifname, "setsockopt PACKET_QDISC_BYPASS"))?;
        }
        if options.ignore_outgoing {
            sockopt::set(
                raw,
                libc::SOL_PACKET,
                libc::PACKET_IGNORE_OUTGOING,
                &1 as &libc::c_int,
            )
            .map_err(at(ifname, "setsockopt PACKET_IGNORE_OUTGOING"))?;
        }
        socket.bind()?;
        if options.promiscuous {
            let mreq = libc::packet_mreq {
                mr_ifindex: ifindex as libc::c_int,
                mr_type: libc::PACKET_MR_PROMISC as libc::c_ushort,
                mr_alen: 0,
                mr_address: [0; 8],
            };
            sockopt::set(raw, libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)
                .map_err(at(ifname, "setsockopt PACKET_ADD_MEMBERSHIP promiscuous"))?;
        }
        socket.tx_mtu_limit = socket.read_mtu_limit()?;
        Ok(socket)
    }

    pub(super) fn bind(&self) -> io::Result<()> {
        // SAFETY: sockaddr_ll is plain data; all zeroes is valid.
        let mut addr: libc::sockaddr_ll = unsafe { zeroed() };
        addr.sll_family = libc::AF_PACKET as libc::c_ushort;
        addr.sll_protocol = (libc::ETH_P_ALL as u16).to_be();
        addr.sll_ifindex = self.ifindex as libc::c_int;
        // SAFETY: `addr` is a valid sockaddr_ll of the size passed, alive during the call.
        let rc = unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                (&addr as *const libc::sockaddr_ll).cast(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if rc != 0 {
            return Err(at(&self.ifname, "bind")(io::Error::last_os_error()));
        }
        Ok(())
    }

    /// MTU + Ethernet header of the interface, read through the socket (so in its namespace).
    pub(super) fn read_mtu_limit(&self) -> io::Result<usize> {
        Ok(crate::iface::mtu(self.fd.as_raw_fd(), &self.ifname)? + ETH_HLEN)
    }
}

/// The ring sizes `open` asks for, checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Layout {
    rx_block_size: usize,
    rx_block_count: usize,
    frame_size: usize,
    block_timeout_ms: u32,
    tx_block_size: usize,
    tx_block_count: usize,
}

impl Layout {
    pub(super) fn new(o: &PacketOptions) -> Result<Layout, String> {
        let page = page_size();
        if !o.frame_size.is_power_of_two() || o.frame_size < 128 {
            return Err(format!(
                "frame_size {} is not a power of two of at least 128",
                o.frame_size
            ));
        }
        if !o.block_size.is_power_of_two() || o.block_size < page || o.block_size < o.frame_size {
            return Err(format!(
                "block_size {} is not a power of two of at least the page size ({page}) and \
                 frame_size ({})",
                o.block_size, o.frame_size
            ));
        }
        if o.block_count == 0 || o.tx_frames == 0 {
            return Err("block_count and tx_frames must be at least 1".to_owned());
        }
        // Both powers of two, so a TX block holds a whole number of slots.
        let tx_block_size = page.max(o.frame_size);
        let layout = Layout {
            rx_block_size: o.block_size,
            rx_block_count: o.block_count,
            frame_size: o.frame_size,
            block_timeout_ms: o.block_timeout_ms,
            tx_block_size,
            tx_block_count: o.tx_frames.div_ceil(tx_block_size / o.frame_size),
        };
        let fits = |n: usize| u32::try_from(n).is_ok();
        let rx_bytes = o.block_size.checked_mul(o.block_count);
        let tx_bytes = tx_block_size.checked_mul(layout.tx_block_count);
        match (rx_bytes, tx_bytes) {
            (Some(rx), Some(tx))
                if fits(o.block_size)
                    && fits(layout.rx_frame_count())
                    && fits(layout.tx_capacity())
                    && rx.checked_add(tx).is_some() => {}
            _ => return Err("the rings are too large".to_owned()),
        }
        Ok(layout)
    }

    pub(super) fn rx_frame_count(&self) -> usize {
        self.rx_block_size / self.frame_size * self.rx_block_count
    }

    pub(super) fn tx_capacity(&self) -> usize {
        self.tx_block_size / self.frame_size * self.tx_block_count
    }

    pub(super) fn map_len(&self) -> usize {
        self.rx_block_size * self.rx_block_count + self.tx_block_size * self.tx_block_count
    }

    // `new` checked that every size and count fits a u32.
    /// The V2 RX ring: `frame_size` slots, whole ones in each block.
    pub(super) fn rx_req(&self) -> libc::tpacket_req {
        libc::tpacket_req {
            tp_block_size: self.rx_block_size as u32,
            tp_block_nr: self.rx_block_count as u32,
            tp_frame_size: self.frame_size as u32,
            tp_frame_nr: self.rx_frame_count() as u32,
        }
    }

    pub(super) fn tx_req(&self) -> libc::tpacket_req {
        libc::tpacket_req {
            tp_block_size: self.tx_block_size as u32,
            tp_block_nr: self.tx_block_count as u32,
            tp_frame_size: self.frame_size as u32,
            tp_frame_nr: self.tx_capacity() as u32,
        }
    }

    pub(super) fn rx_req3(&self) -> libc::tpacket_req3 {
        libc::tpacket_req3 {
            tp_block_size: self.rx_block_size as u32,
            tp_block_nr: self.rx_block_count as u32,
            tp_frame_size: self.frame_size as u32,
            tp_frame_nr: self.rx_frame_count() as u32,
            tp_retire_blk_tov: self.block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        }
    }

    /// The V3 TX ring takes no timeout, private area or feature word (the kernel refuses
    /// them).
    pub(super) fn tx_req3(&self) -> libc::tpacket_req3 {
        libc::tpacket_req3 {
            tp_block_size: self.tx_block_size as u32,
            tp_block_nr: self.tx_block_count as u32,
            tp_frame_size: self.frame_size as u32,
            tp_frame_nr: self.tx_capacity() as u32,
            tp_retire_blk_tov: 0,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        }
    }
}

/// An AF_PACKET raw socket that receives nothing until it is bound (protocol 0).
pub(super) fn packet_socket(ifname: &str) -> io::Result<OwnedFd> {
    // SAFETY: plain socket(2) call; the result is checked before use.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        let err = io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("{ifname}: not permitted: AF_PACKET needs CAP_NET_RAW (run as root)"),
            ),
            _ => at(ifname, "socket AF_PACKET")(err),
        });
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}
