//! AF_PACKET sockets with memory-mapped `TPACKET` rings: every frame of one interface in,
//! whole Ethernet frames out, for the link emulator's layer-2 bridge.
//!
//! One [`PacketSocket`] per interface does both directions, on one file descriptor and one
//! mapping (RX ring first, TX ring after it):
//! - **RX** is one of two rings, chosen by [`PacketOptions::rx_ring`]:
//!   - [`RxRing::V2`] (the default) is the frame-based `TPACKET_V2` ring: one slot of
//!     [`PacketOptions::frame_size`] bytes per frame, each handed to user space as soon as the
//!     kernel has written it, so a lone frame is readable microseconds after it arrived.
//!   - [`RxRing::V3`] is the block-based `TPACKET_V3` ring. The kernel packs frames into a
//!     block and hands the whole block over when the next frame does not fit, or when its
//!     periodic retire timer ([`PacketOptions::block_timeout_ms`]) finds the block partly
//!     filled. At low rates a frame therefore waits in the ring up to about twice that timeout
//!     before user space can see it.
//!
//!   Either way, take the kernel timestamp handed with every frame, not the time it was read,
//!   as its arrival time.
//! - **TX** is the frame-based TX ring of the same `TPACKET` version (the kernel allows one
//!   version per socket, and the RX ring chooses it): fixed slots of
//!   [`PacketOptions::frame_size`] bytes, each a `tpacket2_hdr` (V2) or a `tpacket3_hdr` (V3,
//!   Linux 4.11 and later) followed by the frame. [`PacketSocket::queue_tx`] fills slots and
//!   [`PacketSocket::flush_tx`] makes the kernel send all of them with one system call; both
//!   behave the same with either version.
//!
//! Guarantees:
//! - no call blocks but [`PacketSocket::wait_readable`]; a full TX ring is `Ok(false)`, an empty
//!   RX ring `Ok(0)`;
//! - everything the kernel writes into the shared rings is read with bounds checks: a V3 block
//!   whose offsets point outside it is handed back to the kernel from the bad frame on, a V2
//!   slot whose frame would lie outside it is handed back unread; either is counted in
//!   [`PacketStats::corrupt_blocks`], and nothing is read out of bounds;
//! - a frame the kernel would refuse to send (longer than a slot, or than the interface's MTU
//!   plus the Ethernet header) is refused by [`PacketSocket::queue_tx`] with an error instead of
//!   being dropped silently;
//! - with [`PacketOptions::ignore_outgoing`] (the default) the socket receives only frames that
//!   come in on the interface, none that leave it, its own included.
//!
//! ```no_run
//! use latlab_io::packet::{PacketOptions, PacketSocket};
//! use std::time::Duration;
//! let mut rx = PacketSocket::open("veth0", &PacketOptions::default())?;
//! let mut tx = PacketSocket::open("veth1", &PacketOptions::default())?;
//! loop {
//!     rx.wait_readable(Some(Duration::from_millis(10)))?;
//!     rx.recv_batch(|frame, _rx_ns, _truncated| {
//!         // A full TX ring drops the frame here; a real bridge flushes and retries.
//!         let _ = tx.queue_tx(frame);
//!     })?;
//!     tx.flush_tx()?;
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

use std::cell::Cell;

mod open;
mod options;
mod restore;
mod ring;
mod rx;
pub use options::{PacketOptions, PacketStats};

pub use crate::port::WireFrameStats;

use ring::{rx_unit_is_ours, tx_slot_status};

use crate::iface::{at, interface_index, page_size};
use crate::port::FrameQueued;
use crate::sockopt;
use std::io;
use std::mem::{offset_of, size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::sync::atomic::{fence, Ordering};
use std::time::Duration;

/// Where the block status word sits in a `tpacket_block_desc`.
const BLOCK_STATUS: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, block_status);
/// Where the number of frames sits in a `tpacket_block_desc`.
const BLOCK_NUM_PKTS: usize =
    offset_of!(libc::tpacket_block_desc, hdr) + offset_of!(libc::tpacket_hdr_v1, num_pkts);
/// Where the offset of the first frame sits in a `tpacket_block_desc`.
const BLOCK_FIRST_PKT: usize = offset_of!(libc::tpacket_block_desc, hdr)
    + offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt);

/// Size of a `tpacket3_hdr` (48 bytes).
const HDR3_LEN: usize = size_of::<libc::tpacket3_hdr>();
/// Size of a `tpacket2_hdr` (32 bytes).
const HDR2_LEN: usize = size_of::<libc::tpacket2_hdr>();
/// Where a frame starts in a V3 TX slot: after the `tpacket3_hdr`, aligned to 16 bytes, which
/// is where the kernel looks (`TPACKET3_HDRLEN - sizeof(struct sockaddr_ll)`).
const TX_DATA_OFFSET_V3: usize = libc::TPACKET3_HDRLEN - size_of::<libc::sockaddr_ll>();
/// Where a frame starts in a V2 TX slot: after the `tpacket2_hdr`, aligned to 16 bytes
/// (`TPACKET2_HDRLEN - sizeof(struct sockaddr_ll)`).
const TX_DATA_OFFSET_V2: usize = libc::TPACKET2_HDRLEN - size_of::<libc::sockaddr_ll>();

/// The Ethernet header the kernel adds to the MTU when it checks a frame's length.
const ETH_HLEN: usize = 14;
/// An 802.1Q tag, which the kernel allows on top of MTU + header.
const VLAN_HLEN: usize = 4;
const ETH_P_8021Q: u16 = 0x8100;

/// Whether a frame can leave through a socket's TX ring.
enum TxLength {
    /// It fits a slot and the MTU.
    Fits,
    /// Shorter than an Ethernet header.
    Short,
    /// Longer than a TX slot.
    LongerThanSlot,
    /// Longer than the MTU allows: this many bytes.
    LongerThanMtu(usize),
}

/// Which `TPACKET` ring receives, and so which version the socket (and its TX ring) uses.
///
/// The trade-off is hand-over latency against wake-ups: V2 hands over each frame at once, V3
/// batches frames into blocks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum RxRing {
    /// `TPACKET_V2`: one slot of [`PacketOptions::frame_size`] bytes per frame, handed to user
    /// space as soon as the kernel has written it, so a frame is readable within microseconds
    /// of its arrival at any rate. The bridge's choice: it must see frames in time to emulate
    /// delays below a millisecond. At high rates every frame is its own hand-over (more
    /// wake-ups and status writes than V3), and a frame longer than a slot less 66 bytes is
    /// truncated.
    #[default]
    V2,
    /// `TPACKET_V3`: frames packed into blocks of [`PacketOptions::block_size`] bytes, a block
    /// handed over when full or when its retire timer finds it partly filled. Fewer wake-ups
    /// and denser rings at high rates; at low rates a frame reaches user space up to about
    /// twice [`PacketOptions::block_timeout_ms`] (1 ms at least) after it arrived.
    V3,
}

impl RxRing {
    fn tpacket_version(self) -> libc::c_int {
        match self {
            RxRing::V2 => libc::tpacket_versions::TPACKET_V2 as libc::c_int,
            RxRing::V3 => libc::tpacket_versions::TPACKET_V3 as libc::c_int,
        }
    }

    /// Where the status word of an RX unit (V2 slot, V3 block) sits.
    fn rx_status_offset(self) -> usize {
        match self {
            RxRing::V2 => offset_of!(libc::tpacket2_hdr, tp_status),
            RxRing::V3 => BLOCK_STATUS,
        }
    }

    /// Where a frame starts in a TX slot.
    fn tx_data_offset(self) -> usize {
        match self {
            RxRing::V2 => TX_DATA_OFFSET_V2,
            RxRing::V3 => TX_DATA_OFFSET_V3,
        }
    }

    /// Where `tp_status`, `tp_len` and `tp_snaplen` sit in a TX slot's header.
    fn tx_fields(self) -> TxFields {
        match self {
            RxRing::V2 => TxFields {
                status: offset_of!(libc::tpacket2_hdr, tp_status),
                len: offset_of!(libc::tpacket2_hdr, tp_len),
                snaplen: offset_of!(libc::tpacket2_hdr, tp_snaplen),
            },
            RxRing::V3 => TxFields {
                status: offset_of!(libc::tpacket3_hdr, tp_status),
                len: offset_of!(libc::tpacket3_hdr, tp_len),
                snaplen: offset_of!(libc::tpacket3_hdr, tp_snaplen),
            },
        }
    }
}

/// Offsets of the u32 header fields a TX slot is filled through.
#[derive(Clone, Copy, Debug)]
struct TxFields {
    status: usize,
    len: usize,
    snaplen: usize,
}

/// An AF_PACKET socket bound to one interface, with an RX ring and a TX ring of one `TPACKET`
/// version ([`RxRing`]) mapped into this process. Unmaps the rings and closes the socket on
/// drop.
#[derive(Debug)]
pub struct PacketSocket {
    ifname: String,
    ifindex: u32,
    ring: RxRing,
    /// The mapping: the RX ring (`rx_unit_count * rx_unit_size` bytes), then the TX ring.
    map: *mut u8,
    map_len: usize,
    /// Bytes of an RX unit, the part of the ring the kernel hands over at once: a block with
    /// V3, a frame slot with V2. Units lie back to back (V2 slots never span blocks).
    rx_unit_size: usize,
    rx_unit_count: usize,
    /// The RX unit to look at next; the kernel fills units in this same order.
    rx_next: usize,
    tx_offset: usize,
    tx_block_size: usize,
    tx_frame_size: usize,
    tx_frames_per_block: usize,
    tx_capacity: usize,
    /// The TX slot to fill next; the kernel sends slots in this same order.
    tx_head: usize,
    /// Slots queued since the last successful flush.
    tx_pending: usize,
    /// The oldest queued slot the kernel has not taken yet: where the kernel's own TX head is,
    /// since both go through the slots in the same order.
    tx_tail: usize,
    /// Slots from `tx_tail` on that are queued and not yet taken by the kernel.
    tx_untaken: usize,
    /// The longest untagged frame the interface takes (MTU + Ethernet header) when last read.
    tx_mtu_limit: usize,
    corrupt_blocks: Cell<u64>,
    tx_refused: Cell<u64>,
    /// With [`PacketOptions::wire_frames`].
    restorer: Option<restore::Restorer>,
    fd: OwnedFd,
}

// SAFETY: the mapping is owned by this value alone (nothing else holds `map`), and the kernel
// side of it is reached through the file descriptor, which may be used from any thread.
unsafe impl Send for PacketSocket {}

impl PacketSocket {
    /// The interface index the socket is bound to.
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The interface name the socket was opened on.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// How many frames the TX ring holds ([`PacketOptions::tx_frames`] rounded up to whole
    /// pages).
    pub fn tx_capacity(&self) -> usize {
        self.tx_capacity
    }

    /// The RX ring the socket was opened with, whose `TPACKET` version both rings use.
    pub fn rx_ring(&self) -> RxRing {
        self.ring
    }

    /// The longest frame a TX slot holds: `frame_size` minus the header (32 bytes with V2, 48
    /// with V3).
    pub fn max_tx_frame(&self) -> usize {
        self.tx_frame_size - self.tx_data_offset()
    }

    /// Whether the next RX unit holds frames for [`PacketSocket::recv_batch`].
    fn rx_ready(&self) -> bool {
        rx_unit_is_ours(self.rx_unit(self.rx_next), self.ring.rx_status_offset())
    }

    /// Blocks until a received frame is ready (V3: a block) or `timeout` passes (`None`: no
    /// limit); `Ok(true)` when [`PacketSocket::recv_batch`] has frames to hand. Returns at once
    /// when one is already waiting; a signal ends the wait with `Ok(false)`. A pending socket error (the
    /// interface went down: `ENETDOWN`) is returned as an error, and cleared.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        if self.rx_ready() {
            return Ok(true);
        }
        let revents = crate::poll::wait_in(&[self.fd.as_raw_fd()], timeout)
            .map_err(at(&self.ifname, "ppoll"))?[0];
        if revents & libc::POLLERR != 0 {
            // Reading SO_ERROR clears it, so the next wait does not fail again for it.
            if let Some(err) = socket2::SockRef::from(&self.fd).take_error()? {
                return Err(at(&self.ifname, "socket error")(err));
            }
        }
        Ok(self.rx_ready() || revents != 0)
    }

    /// Copies `frame` (a whole Ethernet frame, without FCS) into the next free TX slot and
    /// marks it for sending; nothing leaves until [`PacketSocket::flush_tx`]. `Ok(false)` when
    /// every slot is queued or still being sent: flush and retry, or drop the frame.
    ///
    /// A frame shorter than an Ethernet header, or longer than a slot ([`PacketSocket::max_tx_frame`]) or than the interface's MTU
    /// plus the Ethernet header (4 bytes more with an 802.1Q tag) is refused with
    /// `InvalidInput`: the kernel would drop it. The MTU is read again before refusing, so a
    /// raised MTU takes effect. ([`PacketSocket::try_queue_tx`] says so without an error.)
    pub fn queue_tx(&mut self, frame: &[u8]) -> io::Result<bool> {
        match self.tx_length(frame)? {
            TxLength::Fits => self.queue_fitting(frame),
            TxLength::Short => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: frame of {} bytes is shorter than an Ethernet header",
                    self.ifname,
                    frame.len()
                ),
            )),
            TxLength::LongerThanSlot => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: frame of {} bytes does not fit a TX slot of {} bytes (frame_size {})",
                    self.ifname,
                    frame.len(),
                    self.max_tx_frame(),
                    self.tx_frame_size
                ),
            )),
            TxLength::LongerThanMtu(limit) => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: frame of {} bytes is longer than the MTU allows ({limit} bytes)",
                    self.ifname,
                    frame.len()
                ),
            )),
        }
    }

    /// As [`PacketSocket::queue_tx`], but a frame that can never leave through this socket
    /// (shorter than an Ethernet header, longer than a slot or than the MTU allows) is not an
    /// error: it is refused as [`FrameQueued::TooShort`] or [`FrameQueued::TooLong`], for the
    /// caller to count and drop.
    pub fn try_queue_tx(&mut self, frame: &[u8]) -> io::Result<FrameQueued> {
        Ok(match self.tx_length(frame)? {
            TxLength::Fits => match self.queue_fitting(frame)? {
                true => FrameQueued::Queued,
                false => FrameQueued::Full,
            },
            TxLength::Short => FrameQueued::TooShort,
            TxLength::LongerThanSlot | TxLength::LongerThanMtu(_) => FrameQueued::TooLong,
        })
    }

    /// Whether `frame` can leave through this socket; the MTU is read again before a frame is
    /// found too long for it.
    fn tx_length(&mut self, frame: &[u8]) -> io::Result<TxLength> {
        if frame.len() < ETH_HLEN {
            return Ok(TxLength::Short);
        }
        if frame.len() > self.max_tx_frame() {
            return Ok(TxLength::LongerThanSlot);
        }
        let tagged = frame[12..14] == ETH_P_8021Q.to_be_bytes();
        let extra = if tagged { VLAN_HLEN } else { 0 };
        if frame.len() > self.tx_mtu_limit + extra {
            self.tx_mtu_limit = self.read_mtu_limit()?;
            let limit = self.tx_mtu_limit + extra;
            if frame.len() > limit {
                return Ok(TxLength::LongerThanMtu(limit));
            }
        }
        Ok(TxLength::Fits)
    }

    /// Queues a frame [`PacketSocket::tx_length`] found fitting.
    fn queue_fitting(&mut self, frame: &[u8]) -> io::Result<bool> {
        let slot = self.tx_slot(self.tx_head);
        let fields = self.ring.tx_fields();
        if tx_slot_status(slot, fields) & (libc::TP_STATUS_SEND_REQUEST | libc::TP_STATUS_SENDING)
            != 0
        {
            return Ok(false);
        }
        // The kernel's last use of the slot happens before our writes into it.
        fence(Ordering::Acquire);
        let data_at = self.tx_data_offset();
        let header_at = self.ring.tx_data_offset();
        let len = (data_at - header_at + frame.len()) as u32;
        // SAFETY: the slot is ours (neither requested nor being sent) and spans `frame_size`
        // bytes inside the mapping; the empty virtio_net_hdr (if any) and the frame fit after
        // the header (`tx_length`, which both
        // callers run first, checked it against `max_tx_frame`), and the
        // header fields written are u32s at their aligned offsets.
        unsafe {
            ptr::write_bytes(slot.add(header_at), 0, data_at - header_at);
            ptr::copy_nonoverlapping(frame.as_ptr(), slot.add(data_at), frame.len());
            let field = |offset: usize| slot.add(offset).cast::<u32>();
            if self.ring == RxRing::V3 {
                ptr::write_volatile(field(offset_of!(libc::tpacket3_hdr, tp_next_offset)), 0);
            }
            ptr::write_volatile(field(fields.len), len);
            ptr::write_volatile(field(fields.snaplen), len);
        }
        // The frame and its length are visible before the kernel can see the request.
        fence(Ordering::Release);
        // SAFETY: the status word lies inside the slot, 4-byte aligned (slots are 16-byte
        // aligned); volatile because the kernel reads it concurrently.
        unsafe {
            ptr::write_volatile(
                slot.add(fields.status).cast::<u32>(),
                libc::TP_STATUS_SEND_REQUEST,
            )
        };
        self.tx_head = (self.tx_head + 1) % self.tx_capacity;
        self.tx_pending += 1;
        self.tx_untaken += 1;
        Ok(true)
    }

    /// Tells the kernel to send every queued frame (`send(fd, NULL, 0, MSG_DONTWAIT)`), without
    /// blocking; returns how many frames were queued since the previous flush.
    ///
    /// Frames the kernel cannot take now (out of socket buffer, `EAGAIN`) stay queued and go
    /// with the next flush, which tries again even when nothing new was queued. A frame the
    /// device refuses (`ENOBUFS`) would be retried by the kernel forever and stop the ring, so
    /// it is dropped (its slot is marked malformed, which the kernel skips because the socket
    /// sets `PACKET_LOSS`; with V3 the kernel logs "variable sized slot not supported" once per
    /// boot) and counted in [`PacketStats::tx_refused`]; the frames after it are still sent.
    pub fn flush_tx(&mut self) -> io::Result<usize> {
        if self.tx_pending == 0 && self.tx_untaken == 0 {
            return Ok(0);
        }
        // Each refusal drops one slot, so this ends after at most one pass over the ring.
        for _ in 0..=self.tx_capacity {
            // SAFETY: with a TX ring, a null buffer of length 0 asks the kernel to send the
            // ring's requested slots; it reads nothing through the null pointer.
            let rc = unsafe { libc::send(self.fd.as_raw_fd(), ptr::null(), 0, libc::MSG_DONTWAIT) };
            self.advance_tx_tail();
            if rc >= 0 {
                break;
            }
            let err = io::Error::last_os_error();
            match err.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted => break,
                _ if err.raw_os_error() == Some(libc::ENOBUFS) && self.tx_untaken > 0 => {
                    self.tx_refused.set(self.tx_refused.get() + 1);
                    self.drop_refused_slot();
                }
                _ => return Err(at(&self.ifname, "send (TX ring)")(err)),
            }
        }
        Ok(std::mem::take(&mut self.tx_pending))
    }

    /// Frames queued for sending that the kernel has not taken yet (a flush left them queued).
    pub fn tx_unsent(&self) -> usize {
        self.tx_untaken
    }

    /// Moves `tx_tail` past the slots the kernel has taken (they no longer request sending).
    fn advance_tx_tail(&mut self) {
        let fields = self.ring.tx_fields();
        while self.tx_untaken > 0
            && tx_slot_status(self.tx_slot(self.tx_tail), fields) & libc::TP_STATUS_SEND_REQUEST
                == 0
        {
            self.tx_tail = (self.tx_tail + 1) % self.tx_capacity;
            self.tx_untaken -= 1;
        }
    }

    /// Makes the kernel skip the slot it stopped at by giving it a header the kernel rejects
    /// as malformed, which `PACKET_LOSS` turns into "mark available and go on" (silently): with
    /// V3 a non-zero `tp_next_offset`, with V2 a `tp_len` of `u32::MAX`, which the kernel reads
    /// as the negative `int` -1 (`tpacket_parse_header`).
    fn drop_refused_slot(&mut self) {
        let slot = self.tx_slot(self.tx_tail);
        let (field, value) = match self.ring {
            RxRing::V2 => (offset_of!(libc::tpacket2_hdr, tp_len), u32::MAX),
            RxRing::V3 => (offset_of!(libc::tpacket3_hdr, tp_next_offset), 1),
        };
        // SAFETY: the kernel reads TX slots only inside `send`, which only this socket (borrowed
        // mutably) calls, so the slot can be changed between calls; the field is a u32 at its
        // aligned offset inside the slot.
        unsafe { ptr::write_volatile(slot.add(field).cast::<u32>(), value) };
        fence(Ordering::Release);
    }

    /// The kernel's counters for this socket since the previous call (`PACKET_STATISTICS`,
    /// which resets them), and the corrupt blocks or slots [`PacketSocket::recv_batch`] met.
    /// With V2 the kernel fills only `tp_packets` and `tp_drops`.
    pub fn statistics(&self) -> io::Result<PacketStats> {
        // SAFETY: tpacket_stats_v3 is plain data; all zeroes is valid. With V2 the kernel
        // writes only its first two fields (`tpacket_stats`), which are the same.
        let mut st: libc::tpacket_stats_v3 = unsafe { zeroed() };
        sockopt::get(
            self.fd.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_STATISTICS,
            &mut st,
        )
        .map_err(at(&self.ifname, "getsockopt PACKET_STATISTICS"))?;
        Ok(PacketStats {
            packets: st.tp_packets.into(),
            drops: st.tp_drops.into(),
            freeze_count: st.tp_freeze_q_cnt.into(),
            corrupt_blocks: self.corrupt_blocks.take(),
            tx_refused: self.tx_refused.take(),
        })
    }

    fn rx_unit(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.rx_unit_count);
        // SAFETY: unit i < rx_unit_count lies inside the RX part of the mapping: V3 blocks lie
        // back to back, and so do V2 slots, since a block holds a whole number of them.
        unsafe { self.map.add(i * self.rx_unit_size) }
    }

    fn tx_slot(&self, i: usize) -> *mut u8 {
        debug_assert!(i < self.tx_capacity);
        let block = i / self.tx_frames_per_block;
        let within = i % self.tx_frames_per_block;
        let offset = self.tx_offset + block * self.tx_block_size + within * self.tx_frame_size;
        debug_assert!(offset + self.tx_frame_size <= self.map_len);
        // SAFETY: slot i < tx_capacity lies inside the TX part of the mapping, laid out as the
        // kernel does it (frames never span blocks).
        unsafe { self.map.add(offset) }
    }
}

impl Drop for PacketSocket {
    fn drop(&mut self) {
        // SAFETY: `map` and `map_len` describe the mapping made in `open`, which nothing
        // borrows any more (every slice into it ends with the call that made it).
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
        // `fd` closes after this, which also ends promiscuous mode.
    }
}

/// Blocks until one of `sockets` has a received frame ready (V3: a block) or `timeout` passes;
/// `Ok(true)` when one is ready. For a bridge that serves two interfaces from one thread.
pub fn wait_any_readable(sockets: &[&PacketSocket], timeout: Option<Duration>) -> io::Result<bool> {
    if sockets.iter().any(|s| s.rx_ready()) {
        return Ok(true);
    }
    let fds: Vec<RawFd> = sockets.iter().map(|s| s.fd.as_raw_fd()).collect();
    Ok(crate::poll::wait_in(&fds, timeout)?.iter().any(|r| *r != 0))
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::open::Layout;
    use super::ring::{read_slot, walk_block, RxFrame};
    use super::*;

    /// A block the size of `len` with the given frames, laid out as the kernel does.
    fn block(len: usize, frames: &[&[u8]]) -> Vec<u8> {
        let mut b = vec![0u8; len];
        let first = 48usize;
        b[BLOCK_NUM_PKTS..BLOCK_NUM_PKTS + 4].copy_from_slice(&(frames.len() as u32).to_ne_bytes());
        b[BLOCK_FIRST_PKT..BLOCK_FIRST_PKT + 4].copy_from_slice(&(first as u32).to_ne_bytes());
        let mut offset = first;
        for (i, data) in frames.iter().enumerate() {
            let mac = 82usize;
            let next = if i + 1 == frames.len() {
                0
            } else {
                (mac + data.len()).next_multiple_of(16)
            };
            let put = |b: &mut Vec<u8>, at: usize, v: u32| {
                b[offset + at..offset + at + 4].copy_from_slice(&v.to_ne_bytes())
            };
            put(
                &mut b,
                offset_of!(libc::tpacket3_hdr, tp_next_offset),
                next as u32,
            );
            put(&mut b, offset_of!(libc::tpacket3_hdr, tp_sec), 7);
            put(&mut b, offset_of!(libc::tpacket3_hdr, tp_nsec), i as u32);
            put(
                &mut b,
                offset_of!(libc::tpacket3_hdr, tp_snaplen),
                data.len() as u32,
            );
            put(
                &mut b,
                offset_of!(libc::tpacket3_hdr, tp_len),
                data.len() as u32 + 1,
            );
            let m = offset + offset_of!(libc::tpacket3_hdr, tp_mac);
            b[m..m + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
            b[offset + mac..offset + mac + data.len()].copy_from_slice(data);
            offset += next;
        }
        b
    }

    /// A frame handed by `walk_block`: bytes, stamp, truncated.
    type Handed = (Vec<u8>, u64, bool);

    fn walk(b: &[u8]) -> (Result<usize, usize>, Vec<Handed>) {
        let mut got = Vec::new();
        let r = walk_block(b, &mut |f: &RxFrame<'_>| {
            got.push((f.data.to_vec(), f.rx_ns, f.truncated))
        });
        (r, got)
    }

    /// A V2 RX slot of `len` bytes holding `data` at `mac`, as the kernel lays it out, with a
    /// frame of `data.len() + 1` bytes on the wire.
    fn slot(len: usize, mac: usize, data: &[u8]) -> Vec<u8> {
        let mut s = vec![0u8; len];
        let put =
            |s: &mut Vec<u8>, at: usize, v: u32| s[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        put(
            &mut s,
            offset_of!(libc::tpacket2_hdr, tp_status),
            libc::TP_STATUS_USER,
        );
        put(
            &mut s,
            offset_of!(libc::tpacket2_hdr, tp_len),
            data.len() as u32 + 1,
        );
        put(
            &mut s,
            offset_of!(libc::tpacket2_hdr, tp_snaplen),
            data.len() as u32,
        );
        put(&mut s, offset_of!(libc::tpacket2_hdr, tp_sec), 7);
        put(&mut s, offset_of!(libc::tpacket2_hdr, tp_nsec), 42);
        let m = offset_of!(libc::tpacket2_hdr, tp_mac);
        s[m..m + 2].copy_from_slice(&(mac as u16).to_ne_bytes());
        s[mac..mac + data.len()].copy_from_slice(data);
        s
    }

    /// What `read_slot` hands: bytes, stamp, truncated.
    fn read(s: &[u8]) -> Option<Handed> {
        read_slot(s).map(|f| (f.data.to_vec(), f.rx_ns, f.truncated))
    }

    #[test]
    fn the_tx_frame_starts_where_the_kernel_looks() {
        assert_eq!(HDR3_LEN, 48);
        assert_eq!(TX_DATA_OFFSET_V3, 48);
        assert_eq!(RxRing::V3.tx_data_offset(), 48);
        assert_eq!(HDR2_LEN, 32);
        assert_eq!(TX_DATA_OFFSET_V2, 32);
        assert_eq!(RxRing::V2.tx_data_offset(), 32);
        assert_eq!(BLOCK_STATUS, 8);
        assert_eq!(RxRing::V2.rx_status_offset(), 0);
        assert_eq!(RxRing::V2.tx_fields().status, 0);
        assert_eq!(RxRing::V3.tx_fields().status, 20);
    }

    #[test]
    fn a_v2_slot_hands_its_frame_with_a_nanosecond_stamp() {
        // 66: where `tpacket_rcv` puts an Ethernet frame in a V2 slot.
        let s = slot(2048, 66, b"a frame");
        assert_eq!(read(&s), Some((b"a frame".to_vec(), 7_000_000_042, true)));
        // A frame that fills the slot to its last byte.
        let s = slot(2048, 66, &[5u8; 2048 - 66]);
        assert_eq!(read(&s).map(|f| f.0.len()), Some(2048 - 66));
    }

    #[test]
    fn a_v2_slot_whose_frame_lies_outside_it_is_not_read() {
        let mac_at = offset_of!(libc::tpacket2_hdr, tp_mac);
        let snaplen_at = offset_of!(libc::tpacket2_hdr, tp_snaplen);
        // The frame one byte past the end.
        let mut s = slot(2048, 66, b"one");
        s[snaplen_at..snaplen_at + 4].copy_from_slice(&(2048u32 - 66 + 1).to_ne_bytes());
        assert_eq!(read(&s), None);
        // A length that overflows.
        s[snaplen_at..snaplen_at + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(read(&s), None);
        // A frame start past the end, and one inside the header.
        let mut s = slot(2048, 66, b"one");
        s[mac_at..mac_at + 2].copy_from_slice(&u16::MAX.to_ne_bytes());
        assert_eq!(read(&s), None);
        s[mac_at..mac_at + 2].copy_from_slice(&16u16.to_ne_bytes());
        assert_eq!(read(&s), None);
        // A slot too short for its own header.
        assert_eq!(read(&s[..20]), None);
    }

    #[test]
    fn a_block_hands_its_frames_in_order() {
        let b = block(4096, &[b"first", b"second frame", b"3"]);
        let (r, got) = walk(&b);
        assert_eq!(r, Ok(3));
        assert_eq!(got[0], (b"first".to_vec(), 7_000_000_000, true));
        assert_eq!(got[1].0, b"second frame");
        assert_eq!(got[2], (b"3".to_vec(), 7_000_000_002, true));
    }

    #[test]
    fn an_offset_outside_the_block_stops_the_walk() {
        let mut b = block(4096, &[b"one", b"two"]);
        // The first frame's successor points past the end.
        b[48..52].copy_from_slice(&4000u32.to_ne_bytes());
        assert_eq!(
            walk(&b),
            (Err(1), vec![(b"one".to_vec(), 7_000_000_000, true)])
        );
        // A frame length reaching past the end.
        let mut b = block(4096, &[b"one"]);
        let at = 48 + offset_of!(libc::tpacket3_hdr, tp_snaplen);
        b[at..at + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(walk(&b).0, Err(0));
        // A first offset past the end, and a frame count far beyond what the block holds.
        let mut b = block(4096, &[b"one"]);
        b[BLOCK_FIRST_PKT..BLOCK_FIRST_PKT + 4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(walk(&b).0, Err(0));
        let mut b = block(4096, &[b"one"]);
        b[BLOCK_NUM_PKTS..BLOCK_NUM_PKTS + 4].copy_from_slice(&1000u32.to_ne_bytes());
        assert_eq!(walk(&b).0, Err(1));
    }

    #[test]
    fn options_are_checked_before_anything_is_opened() {
        let bad = PacketOptions {
            frame_size: 1500,
            ..PacketOptions::default()
        };
        let err = PacketSocket::open("lo", &bad).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("frame_size 1500"), "{err}");
        let layout = Layout::new(&PacketOptions {
            tx_frames: 3,
            ..PacketOptions::default()
        })
        .unwrap();
        assert_eq!(layout.tx_capacity() % (page_size() / 2048), 0);
        assert!(layout.tx_capacity() >= 3);
    }
}
