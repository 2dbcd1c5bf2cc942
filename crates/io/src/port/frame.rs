//! The frame port: whole Ethernet frames in and out of one interface, for a bridge (the link
//! emulator) and the raw-frame blaster. Implemented by an AF_PACKET socket (frames stamped by
//! the kernel as they enter the ring) and by an AF_XDP socket whose program redirects every
//! frame of the interface (frames stamped by that program as the driver hands them over).

use std::io;
use std::time::Duration;

use crate::clock::now_ns;
use crate::packet::PacketSocket;
use crate::udp::TimestampSource;
use crate::xdp::XdpSocket;

/// Bytes of an Ethernet header: the shortest frame a port sends.
const ETH_HLEN: usize = 14;

/// What [`FramePort::try_queue_frame`] did with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameQueued {
    /// On the TX queue: it leaves with the next flush.
    Queued,
    /// The TX queue has no room now: flush and retry, or drop the frame.
    Full,
    /// Longer than the port can ever send (the interface's MTU, or a TX slot or UMEM frame):
    /// drop it and count it; the port goes on.
    TooLong,
    /// Shorter than an Ethernet header: drop it and count it; the port goes on.
    TooShort,
}

/// What one capped receive ([`FramePort::recv_frames_max`]) did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecvBatch {
    /// Frames handed over.
    pub frames: usize,
    /// TSC cycles ([`crate::tsc`]) the port spent giving the frames' buffers back to the
    /// kernel after handing them (ring slots returned, fill ring refilled); 0 for a port
    /// whose buffers are not the kernel's.
    pub release_cycles: u64,
}

/// What a port did to make received frames what they were on the wire (a bridge must forward
/// those, whatever offloads the sender used), counted since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireFrameStats {
    /// Frames whose VLAN tag (taken out by the kernel) was put back (AF_PACKET).
    pub tags_restored: u64,
    /// Frames whose TCP/UDP checksum the sender had left to the device, finished here.
    pub checksums_finished: u64,
    /// Super-frames (GSO) cut into segments (AF_PACKET).
    pub super_frames: u64,
    /// The segments they became.
    pub segments: u64,
    /// Frames longer than a ring slot read whole from the socket's queue (AF_PACKET).
    pub read_whole: u64,
    /// Frames whose metadata did not fit them (or a segmentation type that cannot be done
    /// here, such as UFO): handed on as they came (AF_PACKET). By cause in
    /// [`WireFrameStats::unfinished_by`].
    pub unfinished: u64,
    /// [`WireFrameStats::unfinished`] by cause.
    pub unfinished_by: UnfinishedCauses,
    /// Frames longer than a ring slot whose whole copy was not there (the socket's receive
    /// buffer was full): handed on cut (AF_PACKET).
    pub truncated: u64,
    /// Frames whose IP header says they are longer than the frame that arrived: super-frames
    /// cut short on their way to AF_XDP, which no receiver can use. Handed on as they came;
    /// the sender's side must segment them (`ethtool -K IF tso off gso off`).
    pub cut_super_frames: u64,
}

/// Why frames with offload metadata could not be finished (each handed on as it came).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnfinishedCauses {
    /// The `virtio_net_hdr` was missing or asked for what cannot be done here (UFO, an unknown
    /// segmentation type, a zero segment size).
    pub metadata: u64,
    /// The frame was cut short on its way (a ring slot), so it cannot be finished.
    pub cut: u64,
    /// An offset from the metadata or a length from the frame's own headers lies outside the
    /// frame, or a header is shorter than its format allows.
    pub headers: u64,
    /// The segmentation type does not match the frame's EtherType.
    pub protocol: u64,
}

/// What the kernel counted at a frame port's socket since it was opened: the frames it lost
/// there, by cause, and the events that explain them. Read once, at the end of a run
/// ([`FramePort::socket_counters`]; AF_PACKET's kernel counters start again after each read).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SocketCounters {
    /// Frames lost before the port could read them: AF_PACKET's full ring (`tp_drops`);
    /// AF_XDP's `rx_dropped` (no free frame in the fill ring, or too long for a UMEM frame).
    pub rx_dropped: u64,
    /// Frames lost to a full AF_XDP RX ring (`rx_ring_full`); 0 over AF_PACKET, whose full
    /// ring is `rx_dropped`.
    pub rx_ring_full: u64,
    /// Times the kernel found the AF_XDP fill ring empty (`rx_fill_ring_empty_descs`): events,
    /// not frames (the frames lost then are in `rx_dropped`).
    pub rx_fill_ring_empty: u64,
    /// Frames queued for sending that the kernel refused at the socket, before any device saw
    /// them: AF_XDP's invalid TX descriptors (`tx_invalid_descs`). Lost. (What a veth refuses
    /// from AF_PACKET is the interface's `tx_dropped`, not counted here.)
    pub tx_invalid: u64,
    /// Times the kernel, woken to send, found the AF_XDP TX ring empty
    /// (`tx_ring_empty_descs`): events, not frames lost.
    pub tx_ring_empty: u64,
}

impl SocketCounters {
    /// The frames lost on receive, each counted once.
    pub fn rx_lost(&self) -> u64 {
        self.rx_dropped + self.rx_ring_full
    }
}

/// One interface as a bridge uses it: frames in with their arrival stamps, frames out through a
/// TX queue.
pub trait FramePort: Send {
    /// Hands every frame now ready to `f(frame, arrival_ns)` (`CLOCK_REALTIME` ns, as
    /// [`now_ns`]); returns how many. Never blocks.
    fn recv_frames(&mut self, f: &mut dyn FnMut(&[u8], u64)) -> io::Result<usize>;
    /// As [`FramePort::recv_frames`], handing at most `max` frames (the rest wait for the next
    /// call), and timing the return of their buffers to the kernel: a forwarder's batch size
    /// and its buffer-management step. AF_PACKET (V2 exactly; V3 by whole blocks) and AF_XDP
    /// cap and time; the default, for ports whose buffers are not the kernel's, hands every
    /// ready frame and reports no release cycles.
    fn recv_frames_max(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], u64),
    ) -> io::Result<RecvBatch> {
        let _ = max;
        Ok(RecvBatch {
            frames: self.recv_frames(f)?,
            release_cycles: 0,
        })
    }
    /// Queues `frame` for sending, or says why not: no room now ([`FrameQueued::Full`]), or
    /// a frame this port can never send ([`FrameQueued::TooLong`], [`FrameQueued::TooShort`]),
    /// which is not an error: one frame never stops a port. `Err` only when the socket
    /// itself failed.
    fn try_queue_frame(&mut self, frame: &[u8]) -> io::Result<FrameQueued>;
    /// Queues `frame` for sending; `Ok(false)` when it was not queued: no room now, or a frame
    /// the port can never send ([`FramePort::try_queue_frame`] says which).
    fn queue_frame(&mut self, frame: &[u8]) -> io::Result<bool> {
        Ok(self.try_queue_frame(frame)? == FrameQueued::Queued)
    }
    /// Sends what was queued.
    fn flush(&mut self) -> io::Result<()>;
    /// Frames queued that the kernel has not taken yet (a flush can leave some when the device
    /// pushes back; they leave with a later flush). 0 for a port that sends at once.
    fn tx_unsent(&mut self) -> usize {
        0
    }
    /// Frames the kernel dropped before this port could read them.
    fn kernel_drops(&self) -> u64;
    /// What the kernel counted at the port's socket, by cause; by default only
    /// [`FramePort::kernel_drops`], as `rx_dropped`. Call it once, instead of `kernel_drops`.
    fn socket_counters(&self) -> SocketCounters {
        SocketCounters {
            rx_dropped: self.kernel_drops(),
            ..SocketCounters::default()
        }
    }
    /// Blocks until `a` or `b` has a frame or `timeout` passes.
    fn wait_either(a: &mut Self, b: &mut Self, timeout: Duration) -> io::Result<()>
    where
        Self: Sized;
    /// Blocks until a frame is ready or `timeout` passes (`None`: no limit); `Ok(true)` when
    /// one is.
    fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool>;
    /// Where the arrival stamps come from.
    fn timestamp_source(&self) -> TimestampSource;
    /// What the port did to make received frames wire frames.
    fn wire_frame_stats(&self) -> WireFrameStats {
        WireFrameStats::default()
    }
}

impl FramePort for PacketSocket {
    fn recv_frames(&mut self, f: &mut dyn FnMut(&[u8], u64)) -> io::Result<usize> {
        self.recv_batch(|frame, rx_ns, _truncated| f(frame, rx_ns))
    }

    fn recv_frames_max(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], u64),
    ) -> io::Result<RecvBatch> {
        self.recv_batch_max(max, |frame, rx_ns, _truncated| f(frame, rx_ns))
    }

    fn try_queue_frame(&mut self, frame: &[u8]) -> io::Result<FrameQueued> {
        self.try_queue_tx(frame)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_tx().map(drop)
    }

    fn tx_unsent(&mut self) -> usize {
        PacketSocket::tx_unsent(self)
    }

    fn kernel_drops(&self) -> u64 {
        self.statistics().map(|s| s.drops).unwrap_or(0)
    }

    fn wait_either(a: &mut Self, b: &mut Self, timeout: Duration) -> io::Result<()> {
        crate::packet::wait_any_readable(&[&*a, &*b], Some(timeout)).map(drop)
    }

    fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        PacketSocket::wait_readable(self, timeout)
    }

    fn timestamp_source(&self) -> TimestampSource {
        TimestampSource::KernelSoftware
    }

    fn wire_frame_stats(&self) -> WireFrameStats {
        PacketSocket::wire_frame_stats(self)
    }
}

impl FramePort for XdpSocket {
    fn recv_frames(&mut self, f: &mut dyn FnMut(&[u8], u64)) -> io::Result<usize> {
        // The XDP program's stamp; a frame without one is stamped as read. Checksums left to
        // the device are finished (`xdp/wire.rs`).
        let mut wire = self.take_wire();
        let n = self.recv_batch_stamped(|frame, stamp| {
            let frame = wire.frame(frame);
            f(frame, stamp.unwrap_or_else(now_ns))
        });
        self.put_wire(wire);
        n
    }

    fn recv_frames_max(
        &mut self,
        max: usize,
        f: &mut dyn FnMut(&[u8], u64),
    ) -> io::Result<RecvBatch> {
        // As `recv_frames`: checksums left to the device are finished.
        let mut wire = self.take_wire();
        let batch = self.recv_batch_timed(max, |frame, stamp| {
            let frame = wire.frame(frame);
            f(frame, stamp.unwrap_or_else(now_ns))
        });
        self.put_wire(wire);
        batch
    }

    fn try_queue_frame(&mut self, frame: &[u8]) -> io::Result<FrameQueued> {
        if frame.len() < ETH_HLEN {
            return Ok(FrameQueued::TooShort);
        }
        if frame.len() > self.max_tx_frame() || !self.fits_mtu(frame)? {
            return Ok(FrameQueued::TooLong);
        }
        Ok(match self.send(frame)? {
            true => FrameQueued::Queued,
            false => FrameQueued::Full,
        })
    }

    fn flush(&mut self) -> io::Result<()> {
        self.flush_tx().map(drop)
    }

    fn tx_unsent(&mut self) -> usize {
        XdpSocket::tx_unsent(self)
    }

    fn kernel_drops(&self) -> u64 {
        // `rx_dropped` already holds the frames lost to an empty fill ring (the kernel counts
        // those in `rx_fill_ring_empty` too); a full RX ring is counted apart.
        self.statistics()
            .map(|s| s.rx_dropped + s.rx_ring_full)
            .unwrap_or(0)
    }

    fn socket_counters(&self) -> SocketCounters {
        let s = self.statistics().unwrap_or_default();
        SocketCounters {
            rx_dropped: s.rx_dropped,
            rx_ring_full: s.rx_ring_full,
            rx_fill_ring_empty: s.rx_fill_ring_empty,
            tx_invalid: s.tx_invalid_descs,
            tx_ring_empty: s.tx_ring_empty,
        }
    }

    fn wait_either(a: &mut Self, b: &mut Self, timeout: Duration) -> io::Result<()> {
        crate::xdp::wait_any_readable(&mut [a, b], Some(timeout)).map(drop)
    }

    fn wait_readable(&mut self, timeout: Option<Duration>) -> io::Result<bool> {
        XdpSocket::wait_readable(self, timeout)
    }

    fn timestamp_source(&self) -> TimestampSource {
        TimestampSource::XdpProgram
    }

    fn wire_frame_stats(&self) -> WireFrameStats {
        self.wire_stats()
    }
}
