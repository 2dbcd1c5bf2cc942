//! AF_XDP sockets: frames of one interface queue straight into this process's memory (UMEM),
//! past the kernel's network stack, with an XDP program that chooses which frames.
//!
//! One [`XdpSocket`] serves queue [`XdpOptions::queue_id`] of one interface:
//! - an [`XdpProgram`] (eBPF assembled here, loaded with `bpf()`) is attached to the
//!   interface through a `bpf_link` and redirects frames into the socket through an
//!   `XSKMAP`. [`Redirect::Endpoint`] takes only IPv4 UDP datagrams to one port and passes
//!   everything else (ARP above all) to the kernel stack; [`Redirect::Everything`] takes every
//!   frame, for a bridge; either stamps each frame it takes with its arrival time, handed to
//!   user space in the frame's XDP metadata ([`XdpSocket::recv_batch_stamped`]);
//! - the UMEM is [`XdpOptions::frame_count`] frames of [`XdpOptions::frame_size`] bytes: the
//!   first half for receiving (handed to the kernel through the fill ring, back through the RX
//!   ring), the second half for sending (TX ring out, completion ring back);
//! - the socket binds in zero-copy mode when the driver can, else in copy mode (veth: copy),
//!   and uses `XDP_USE_NEED_WAKEUP`, so the kernel is called only when it asks to be.
//!
//! Guarantees:
//! - no call blocks but [`XdpSocket::wait_readable`]; no free TX frame is `Ok(false)`, an
//!   empty RX ring `Ok(0)`;
//! - everything the kernel writes into shared memory is checked before use: ring indices
//!   claiming more entries than a ring holds are clamped, and a descriptor whose frame lies
//!   outside its half of the UMEM or crosses a frame boundary is not read; it is counted in
//!   [`XdpStats::corrupt_descs`];
//! - dropping the socket (or the process dying) closes the link, which detaches the program:
//!   nothing is left on the interface.
//!
//! ```no_run
//! use latlab_io::xdp::{Redirect, XdpOptions, XdpSocket};
//! use std::time::Duration;
//! let mut sock = XdpSocket::open("veth0", &XdpOptions::new(Redirect::Endpoint { udp_port: 7777 }))?;
//! let mut frames = Vec::new();
//! loop {
//!     sock.wait_readable(Some(Duration::from_millis(10)))?;
//!     sock.recv_batch(|frame| frames.push(frame.to_vec()))?;
//!     for frame in frames.drain(..) {
//!         // A real endpoint swaps the addresses first; no free frame drops this one.
//!         let _ = sock.send(&frame)?;
//!     }
//!     sock.flush_tx()?;
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

mod bpf;
mod open;
mod options;
mod ring;
mod wire;
pub use options::{BindMode, XdpOptions, XdpStats};

use std::io;
use std::mem::zeroed;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::ptr;
use std::time::Duration;

use crate::iface::at;
use crate::sockopt;
pub use bpf::{
    AttachMode, ForwardCounter, ForwardCounts, Redirect, SourceDrops, SourceLimit, XdpForward,
    XdpProgram, SOURCES, SOURCE_BURST,
};
use ring::Ring;

/// The UMEM mapping, unmapped on drop (after the socket that registered it has closed).
#[derive(Debug)]
struct Umem {
    ptr: *mut u8,
    len: usize,
}

impl Drop for Umem {
    fn drop(&mut self) {
        // SAFETY: `ptr` and `len` describe the anonymous mapping made in `open`; every slice
        // into it ends with the call that made it.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// An AF_XDP socket bound to one queue of one interface, with its UMEM, its four rings and
/// the XDP program that feeds it. Everything is undone on drop: rings unmapped, socket
/// closed, program detached, UMEM unmapped.
#[derive(Debug)]
pub struct XdpSocket {
    ifname: String,
    queue_id: u32,
    bind_mode: BindMode,
    frame_size: u32,
    /// UMEM addresses below this are RX frames, from it on TX frames.
    tx_base: u64,
    fill: Ring,
    completion: Ring,
    rx: Ring,
    tx: Ring,
    /// RX frames read and waiting for room in the fill ring (normally empty: the fill ring
    /// holds every RX frame).
    fill_pending: Vec<u64>,
    /// TX frames free to fill.
    tx_free: Vec<u64>,
    corrupt_descs: u64,
    /// Checksums finished and cut super-frames counted ([`wire`]).
    wire: wire::XdpWire,
    /// The interface's MTU plus the Ethernet header, as last read (0 until a frame needed it).
    tx_mtu_limit: usize,
    /// A UDP socket in the interface's namespace, to read its MTU with (AF_XDP sockets take
    /// no interface ioctls).
    ioctl_fd: OwnedFd,
    // Drop order: rings (above), then the socket, then the program, then the UMEM.
    fd: OwnedFd,
    program: XdpProgram,
    umem: Umem,
}

// SAFETY: the mappings are owned by this value alone, and the kernel side is reached through
// the file descriptors, which may be used from any thread.
unsafe impl Send for XdpSocket {}

/// The shortest frame sent: an Ethernet header.
const ETH_HLEN: usize = 14;

impl XdpSocket {
    /// The interface name the socket was opened on.
    pub fn ifname(&self) -> &str {
        &self.ifname
    }

    /// The per-source limit its program keeps ([`XdpOptions::source_limit`]), if any.
    pub fn source_limit(&self) -> Option<SourceLimit> {
        self.program.source_limit()
    }

    /// A handle on the count of frames the program dropped for a source above its limit,
    /// readable from any thread while the socket runs; `None` without a limit.
    pub fn source_drops(&self) -> io::Result<Option<SourceDrops>> {
        self.program.drops()
    }

    /// How the socket is bound, and how its program is attached.
    pub fn mode(&self) -> (BindMode, AttachMode) {
        (self.bind_mode, self.program.mode())
    }

    /// What was done to make received frames wire frames ([`crate::port::FramePort`]'s
    /// receive finishes checksums the sender left to the device).
    pub fn wire_stats(&self) -> crate::port::WireFrameStats {
        self.wire.stats
    }

    pub(crate) fn take_wire(&mut self) -> wire::XdpWire {
        std::mem::take(&mut self.wire)
    }

    pub(crate) fn put_wire(&mut self, wire: wire::XdpWire) {
        self.wire = wire;
    }

    /// The program feeding the socket.
    pub fn program(&self) -> &XdpProgram {
        &self.program
    }

    /// The longest frame [`XdpSocket::send`] takes: a whole UMEM frame.
    pub fn max_tx_frame(&self) -> usize {
        self.frame_size as usize
    }

    /// Whether `frame` is within the interface's MTU plus the Ethernet header (4 bytes more
    /// with an 802.1Q tag). A longer frame would be put on the TX ring and dropped by the
    /// device without a count (veth drops it as its peer receives it), so a bridge checks
    /// first. The MTU is read again before a frame is found too long, so a raised MTU takes
    /// effect.
    pub fn fits_mtu(&mut self, frame: &[u8]) -> io::Result<bool> {
        let tagged = frame.get(12..14) == Some(&[0x81, 0x00][..]);
        let extra = if tagged { 4 } else { 0 };
        if frame.len() > self.tx_mtu_limit + extra {
            self.tx_mtu_limit =
                crate::iface::mtu(self.ioctl_fd.as_raw_fd(), &self.ifname)? + ETH_HLEN;
        }
        Ok(frame.len() <= self.tx_mtu_limit + extra)
    }

    /// Hands every frame now in the RX ring to `f` (whole Ethernet frames, in arrival order)
    /// and gives their UMEM frames back to the kernel through the fill ring; returns how many
    /// frames were handed. Never blocks; `Ok(0)` when none is ready. At most one ring's worth
    /// per call.
    pub fn recv_batch(&mut self, mut f: impl FnMut(&[u8])) -> io::Result<usize> {
        self.recv_batch_stamped(|frame, _| f(frame))
    }

    /// As [`XdpSocket::recv_batch`], with each frame's arrival time: taken by the XDP program
    /// as it started on the frame, in `CLOCK_REALTIME` ns (as [`crate::clock::now_ns`]), or
    /// `None` when the frame came without it (a driver with no room for XDP metadata).
    pub fn recv_batch_stamped(&mut self, f: impl FnMut(&[u8], Option<u64>)) -> io::Result<usize> {
        self.recv_batch_stamped_max(usize::MAX, f)
    }

    /// As [`XdpSocket::recv_batch_stamped`], handing at most `max` frames; the rest wait in
    /// the RX ring for the next call.
    pub fn recv_batch_stamped_max(
        &mut self,
        max: usize,
        f: impl FnMut(&[u8], Option<u64>),
    ) -> io::Result<usize> {
        self.recv_batch_timed(max, f).map(|batch| batch.frames)
    }

    /// As [`XdpSocket::recv_batch_stamped_max`], with the TSC cycles ([`crate::tsc`]) spent
    /// giving the frames back after handing them (releasing the RX ring, refilling the fill
    /// ring, waking the driver when it asks), for a forwarder's cycle accounting.
    pub fn recv_batch_timed(
        &mut self,
        max: usize,
        mut f: impl FnMut(&[u8], Option<u64>),
    ) -> io::Result<crate::port::RecvBatch> {
        let want = self.rx.size().min(u32::try_from(max).unwrap_or(u32::MAX));
        let ready = self.rx.peek(want);
        let start = self.rx.local();
        // The program stamps with the host's CLOCK_MONOTONIC (never shifted by a time
        // namespace); results are in CLOCK_REALTIME, which no time namespace shifts either.
        let realtime_minus_monotonic = if ready > 0 {
            crate::clock::now_ns().wrapping_sub(crate::clock::host_monotonic_ns())
        } else {
            0
        };
        let mut handed = 0;
        for k in 0..ready {
            let desc = self.rx.read_desc(start.wrapping_add(k));
            match self.rx_frame(desc.addr, desc.len) {
                Some((frame_start, data_at)) => {
                    // SAFETY: `rx_frame` checked that the frame lies inside one RX frame of the
                    // UMEM; the kernel handed it over through the RX ring (acquire in `peek`)
                    // and does not write it until it comes back through the fill ring.
                    let data = unsafe {
                        std::slice::from_raw_parts(
                            self.umem.ptr.add(data_at as usize),
                            desc.len as usize,
                        )
                    };
                    let stamp = (data_at - frame_start >= bpf::META_LEN as u64)
                        .then(|| {
                            // SAFETY: the metadata lies in the same RX frame, just before the
                            // data (checked above); the kernel wrote it with the frame.
                            let meta = unsafe {
                                std::slice::from_raw_parts(
                                    self.umem.ptr.add(data_at as usize - bpf::META_LEN),
                                    bpf::META_LEN,
                                )
                            };
                            read_stamp(meta)
                        })
                        .flatten()
                        .map(|mono| mono.wrapping_add(realtime_minus_monotonic));
                    f(data, stamp);
                    handed += 1;
                    self.fill_pending.push(frame_start);
                }
                None => {
                    self.corrupt_descs += 1;
                    // The frame it came in, if it is one of ours, is not lost.
                    let frame_start = desc.addr - desc.addr % u64::from(self.frame_size);
                    if desc.addr < self.tx_base {
                        self.fill_pending.push(frame_start);
                    }
                }
            }
        }
        let release_start = crate::tsc::read();
        self.rx.release(ready);
        self.refill();
        if self.fill.needs_wakeup() && ready > 0 {
            // SAFETY: a zero-length receive with no buffer and no address only wakes the
            // driver up to fill the RX ring; the kernel writes nothing.
            unsafe {
                libc::recvfrom(
                    self.fd.as_raw_fd(),
                    ptr::null_mut(),
                    0,
                    libc::MSG_DONTWAIT,
                    ptr::null_mut(),
                    ptr::null_mut(),
                )
            };
        }
        Ok(crate::port::RecvBatch {
            frames: handed,
            release_cycles: crate::tsc::read().wrapping_sub(release_start),
        })
    }

    /// Where the RX frame of a descriptor starts and where its data starts, or `None` when the
    /// data would not lie inside one frame of the RX half of the UMEM.
    fn rx_frame(&self, addr: u64, len: u32) -> Option<(u64, u64)> {
        let frame_size = u64::from(self.frame_size);
        let frame_start = addr - addr % frame_size;
        let end = addr.checked_add(u64::from(len))?;
        (addr < self.tx_base && end <= frame_start + frame_size).then_some((frame_start, addr))
    }

    /// Puts every pending RX frame the fill ring has room for into it.
    fn refill(&mut self) {
        let n = self.fill.reserve(self.fill_pending.len() as u32);
        let start = self.fill.local();
        for k in 0..n {
            // `n <= fill_pending.len()` (reserve never gives more than asked).
            let Some(addr) = self.fill_pending.pop() else {
                break;
            };
            self.fill.write_addr(start.wrapping_add(k), addr);
        }
        self.fill.submit(n);
    }

    /// Copies `frame` (a whole Ethernet frame, without FCS) into a free TX frame and puts it on
    /// the TX ring; it leaves with the next [`XdpSocket::flush_tx`] (or sooner in zero-copy
    /// mode). `Ok(false)` when no TX frame is free: flush and retry, or drop the frame.
    /// A frame shorter than an Ethernet header or longer than a UMEM frame is refused with
    /// `InvalidInput`; one longer than the MTU allows is counted by the kernel in
    /// [`XdpStats::tx_invalid_descs`] and dropped.
    pub fn send(&mut self, frame: &[u8]) -> io::Result<bool> {
        if frame.len() < ETH_HLEN || frame.len() > self.max_tx_frame() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{}: frame of {} bytes is outside {ETH_HLEN}..={} (frame_size {})",
                    self.ifname,
                    frame.len(),
                    self.max_tx_frame(),
                    self.frame_size
                ),
            ));
        }
        if self.tx_free.is_empty() {
            self.reap_completions();
        }
        if self.tx_free.is_empty() || self.tx.reserve(1) == 0 {
            return Ok(false);
        }
        // Not empty: checked just above.
        let Some(addr) = self.tx_free.pop() else {
            return Ok(false);
        };
        debug_assert!(
            addr >= self.tx_base && addr + u64::from(self.frame_size) <= self.umem.len as u64
        );
        // SAFETY: `addr` is the start of a TX frame of the UMEM that the kernel does not own
        // (it is on the free list: never submitted, or back through the completion ring), and
        // the frame fits in it (checked above).
        unsafe {
            ptr::copy_nonoverlapping(
                frame.as_ptr(),
                self.umem.ptr.add(addr as usize),
                frame.len(),
            )
        };
        let i = self.tx.local();
        self.tx.write_desc(
            i,
            libc::xdp_desc {
                addr,
                len: frame.len() as u32,
                options: 0,
            },
        );
        self.tx.submit(1);
        Ok(true)
    }

    /// Makes the kernel send what [`XdpSocket::send`] queued (a `sendto` wake-up when the
    /// kernel asks for one: always in copy mode, which sends at most 32 frames per call, so
    /// this calls it until the TX ring is empty or the device pushes back), then takes the
    /// sent frames back from the completion ring. Returns how many frames came back. Never
    /// blocks.
    pub fn flush_tx(&mut self) -> io::Result<usize> {
        let mut completed = self.reap_completions();
        // Each call takes at least one frame or fails, so this ends.
        for _ in 0..=self.tx.size() {
            if self.tx.unconsumed() == 0 || !self.tx.needs_wakeup() {
                break;
            }
            // SAFETY: a zero-length send with no buffer and no address only wakes the kernel
            // up to send the TX ring; it reads nothing through the null pointers.
            let rc = unsafe {
                libc::sendto(
                    self.fd.as_raw_fd(),
                    ptr::null(),
                    0,
                    libc::MSG_DONTWAIT,
                    ptr::null(),
                    0,
                )
            };
            completed += self.reap_completions();
            if rc >= 0 {
                continue;
            }
            let err = io::Error::last_os_error();
            match err.raw_os_error() {
                // More than a batch left (copy mode), or interrupted: go on.
                Some(libc::EAGAIN) | Some(libc::EINTR) => continue,
                // The device is busy or out of buffers: the rest goes with the next flush.
                Some(libc::EBUSY) | Some(libc::ENOBUFS) => break,
                _ => return Err(at(&self.ifname, "sendto (TX wake-up)")(err)),
            }
        }
        Ok(completed)
    }

    /// Frames on the TX ring that the kernel has not taken yet (a flush stopped when the device
    /// pushed back; they leave with a later [`XdpSocket::flush_tx`]).
    pub fn tx_unsent(&mut self) -> usize {
        self.tx.unconsumed() as usize
    }

    /// Takes sent frames back from the completion ring onto the TX free list.
    fn reap_completions(&mut self) -> usize {
        let n = self.completion.peek(self.completion.size());
        let start = self.completion.local();
        let frame_size = u64::from(self.frame_size);
        let mut reaped = 0;
        for k in 0..n {
            let addr = self.completion.read_addr(start.wrapping_add(k));
            let frame_start = addr - addr % frame_size;
            let ours = frame_start >= self.tx_base
                && frame_start + frame_size <= self.umem.len as u64
                && self.tx_free.len() < self.tx.size() as usize;
            if ours {
                self.tx_free.push(frame_start);
                reaped += 1;
            } else {
                self.corrupt_descs += 1;
            }
        }
        self.completion.release(n);
        reaped
    }

    /// Whether the RX ring holds frames for [`XdpSocket::recv_batch`].
    fn rx_ready(&mut self) -> bool {
        self.rx.peek(1) > 0
    }

    /// Blocks until a received frame is ready or `timeout` passes (`None`: no limit);
    /// `Ok(true)` when [`XdpSocket::recv_batch`] has frames to hand. Returns at once when one
    /// is already waiting; a signal ends the wait with `Ok(false)`.
    pub fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        if self.rx_ready() {
            return Ok(true);
        }
        crate::poll::wait_in(&[self.fd.as_raw_fd()], timeout).map_err(at(&self.ifname, "ppoll"))?;
        Ok(self.rx_ready())
    }

    /// A waiter on this socket's RX ring for another thread (see [`XdpWaiter`]).
    pub fn waiter(&self) -> io::Result<XdpWaiter> {
        Ok(XdpWaiter {
            ifname: self.ifname.clone(),
            fd: self.fd.try_clone().map_err(at(&self.ifname, "dup"))?,
        })
    }

    /// The kernel's counters for this socket since it was opened (`XDP_STATISTICS`), and the
    /// corrupt descriptors met.
    pub fn statistics(&self) -> io::Result<XdpStats> {
        // SAFETY: xdp_statistics is plain data; all zeroes is valid.
        let mut st: libc::xdp_statistics = unsafe { zeroed() };
        sockopt::get(
            self.fd.as_raw_fd(),
            libc::SOL_XDP,
            libc::XDP_STATISTICS,
            &mut st,
        )
        .map_err(at(&self.ifname, "getsockopt XDP_STATISTICS"))?;
        Ok(XdpStats {
            rx_dropped: st.rx_dropped,
            rx_invalid_descs: st.rx_invalid_descs,
            tx_invalid_descs: st.tx_invalid_descs,
            rx_ring_full: st.rx_ring_full,
            rx_fill_ring_empty: st.rx_fill_ring_empty_descs,
            tx_ring_empty: st.tx_ring_empty_descs,
            corrupt_descs: self.corrupt_descs,
        })
    }
}

/// Waits for an [`XdpSocket`]'s RX ring from another thread than the one that owns the
/// socket: a second descriptor of the same socket, so a receive thread can sleep in `ppoll`
/// without holding the socket a send thread needs.
#[derive(Debug)]
pub struct XdpWaiter {
    ifname: String,
    fd: OwnedFd,
}

impl XdpWaiter {
    /// Blocks until the socket's RX ring holds a frame or `timeout` passes (`None`: no limit);
    /// `Ok(true)` when one is ready. A signal ends the wait with `Ok(false)`.
    pub fn wait_readable(&self, timeout: Option<Duration>) -> io::Result<bool> {
        let revents = crate::poll::wait_in(&[self.fd.as_raw_fd()], timeout)
            .map_err(at(&self.ifname, "ppoll"))?[0];
        Ok(revents & libc::POLLIN != 0)
    }
}

/// The arrival stamp in the metadata the XDP program wrote in front of a frame, if it is there.
fn read_stamp(meta: &[u8]) -> Option<u64> {
    let stamp = u64::from_ne_bytes(meta.get(..8)?.try_into().ok()?);
    let magic = u32::from_ne_bytes(meta.get(8..12)?.try_into().ok()?);
    (magic == bpf::STAMP_MAGIC).then_some(stamp)
}

/// Blocks until one of `sockets` has a received frame ready or `timeout` passes (`None`: no
/// limit); `Ok(true)` when one is ready. For a bridge that serves two interfaces from one
/// thread. A signal ends the wait with `Ok(false)`.
pub fn wait_any_readable(
    sockets: &mut [&mut XdpSocket],
    timeout: Option<Duration>,
) -> io::Result<bool> {
    if sockets.iter_mut().any(|s| s.rx_ready()) {
        return Ok(true);
    }
    let fds: Vec<RawFd> = sockets.iter().map(|s| s.fd.as_raw_fd()).collect();
    crate::poll::wait_in(&fds, timeout)?;
    Ok(sockets.iter_mut().any(|s| s.rx_ready()))
}

impl AsRawFd for XdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_are_checked_before_anything_is_opened() {
        let bad = XdpOptions {
            frame_size: 1500,
            ..XdpOptions::new(Redirect::Everything)
        };
        let err = XdpSocket::open("lo", &bad).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(
            err.to_string(),
            "lo: frame_size 1500 is neither 2048 nor 4096"
        );
        let bad = XdpOptions {
            frame_count: 3000,
            ..XdpOptions::new(Redirect::Everything)
        };
        assert!(XdpSocket::open("lo", &bad)
            .unwrap_err()
            .to_string()
            .contains("frame_count 3000"));
    }

    #[test]
    fn a_missing_interface_is_named() {
        let err = XdpSocket::open(
            "latlab-nosuch0",
            &XdpOptions::new(Redirect::Endpoint { udp_port: 1 }),
        )
        .unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::NotFound);
        assert_eq!(err.to_string(), "latlab-nosuch0: no such interface");
    }
}
