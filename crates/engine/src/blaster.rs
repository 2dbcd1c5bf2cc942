//! Raw UDP frames at a fixed size and rate through a frame port (an AF_PACKET or AF_XDP ring),
//! and a sink that counts them on a datagram port: the RFC 2544-style forwarding-rate
//! measurement, for frame sizes down to 64 bytes (too small to carry a latency probe).

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use latlab_io::clock::now_ns;
use latlab_io::port::{DatagramRx, FramePort, FrameQueued, PortSizes};
use latlab_wire::{ethernet, udp_frame};

use crate::Stop;

/// Bytes of Ethernet frame check sequence, counted in frame sizes but not written by software.
pub const FCS_LEN: usize = 4;
pub use latlab_wire::udp_frame::HEADERS_LEN;

/// Where a blasted frame goes.
#[derive(Clone, Copy, Debug)]
pub struct FrameAddrs {
    /// Source MAC.
    pub src_mac: [u8; 6],
    /// Next hop's MAC.
    pub dst_mac: [u8; 6],
    /// Source address and port.
    pub src: SocketAddr,
    /// Destination address and port.
    pub dst: SocketAddr,
}

/// Builds an Ethernet/IPv4/UDP frame of `frame_size` bytes on the wire (FCS included, as
/// RFC 2544 counts them: 64 … 1518), with correct checksums. The UDP payload is zeros.
pub fn udp_frame(addrs: &FrameAddrs, frame_size: usize) -> Result<Vec<u8>, String> {
    let (src, dst) = match (addrs.src, addrs.dst) {
        (SocketAddr::V4(s), SocketAddr::V4(d)) => (s, d),
        _ => return Err("raw frames are IPv4 only".into()),
    };
    if !(64..=1518).contains(&frame_size) {
        return Err(format!("frame size {frame_size} is outside 64..=1518"));
    }
    let len = frame_size - FCS_LEN;
    let mut frame = vec![0u8; len];
    let zeros = vec![0u8; len - HEADERS_LEN];
    udp_frame::Repr {
        src_mac: ethernet::Address(addrs.src_mac),
        dst_mac: ethernet::Address(addrs.dst_mac),
        src,
        dst,
        payload_len: zeros.len(),
    }
    .emit_into(&mut frame, &zeros)
    .map_err(|_| "the frame does not fit")?;
    Ok(frame)
}

/// How long a blast or burst waits, after its last frame, for the kernel to take the frames
/// still queued on the port's TX ring (a device that pushes back leaves some there).
pub const DRAIN_LIMIT: Duration = Duration::from_secs(1);

/// What a blast sent.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BlastResult {
    /// Frames the kernel took from the port's TX ring by the time the blast returned (the
    /// frames of its last flush included: it waits up to [`DRAIN_LIMIT`] for them).
    pub sent: u64,
    /// Frames queued that the kernel had still not taken after [`DRAIN_LIMIT`]: not in
    /// `sent`; they may leave with the port's next flush.
    pub unsent: u64,
    /// Frames the port refused as longer (or shorter) than it can ever send, e.g. over the
    /// interface's MTU: counted, and the blast goes on to its end.
    pub refused: u64,
    /// How long it took, ns, until the kernel had taken the last frame counted in `sent`.
    pub elapsed_ns: u64,
}

impl BlastResult {
    /// The rate the frames left at, frames per second (`sent` over `elapsed_ns`).
    pub fn rate_pps(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.sent as f64 * 1e9 / self.elapsed_ns as f64
        }
    }
}

/// Sends `frame` through the frame port `tx` (an AF_PACKET or AF_XDP socket) as fast as its
/// ring takes it (`rate_pps` = None) or at a fixed rate, for `duration`; then waits (up to
/// [`DRAIN_LIMIT`]) until the kernel has taken every frame still on the ring, so what it
/// counts as sent has left, and nothing of this blast leaves with the port's next one.
pub fn blast<P: FramePort>(
    tx: &mut P,
    frame: &[u8],
    rate_pps: Option<f64>,
    duration: Duration,
    stop: &Stop,
) -> io::Result<BlastResult> {
    blast_inner(
        tx,
        &mut frame.to_vec(),
        None,
        rate_pps,
        duration,
        stop,
        DRAIN_LIMIT,
    )
}

/// As [`blast`], writing into every frame, at byte `stamp_at`, the time it is queued on the
/// TX ring (`CLOCK_REALTIME` ns, little-endian u64; the frames of one loop turn are flushed
/// together right after): a receiver with the same clock takes each frame's one-way latency.
/// The frame's UDP checksum must be 0 (none), as [`stampable_udp_frame`] makes it, since the
/// stamp changes the payload. `stamp_at + 8` must be within the frame.
pub fn blast_stamped<P: FramePort>(
    tx: &mut P,
    frame: &[u8],
    stamp_at: usize,
    rate_pps: Option<f64>,
    duration: Duration,
    stop: &Stop,
) -> io::Result<BlastResult> {
    if stamp_at + 8 > frame.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "a stamp at byte {stamp_at} does not fit a {}-byte frame",
                frame.len()
            ),
        ));
    }
    blast_inner(
        tx,
        &mut frame.to_vec(),
        Some(stamp_at),
        rate_pps,
        duration,
        stop,
        DRAIN_LIMIT,
    )
}

/// [`udp_frame()`] with no UDP checksum (0: none, which IPv4 allows), so a stamp can be written
/// into its payload ([`blast_stamped`] at [`HEADERS_LEN`]).
pub fn stampable_udp_frame(addrs: &FrameAddrs, frame_size: usize) -> Result<Vec<u8>, String> {
    let mut frame = udp_frame(addrs, frame_size)?;
    // Ethernet 14 + IPv4 20 (no options) + the checksum's offset in the UDP header, 6.
    frame[40..42].copy_from_slice(&[0, 0]);
    Ok(frame)
}

fn blast_inner<P: FramePort>(
    tx: &mut P,
    frame: &mut [u8],
    stamp_at: Option<usize>,
    rate_pps: Option<f64>,
    duration: Duration,
    stop: &Stop,
    drain_limit: Duration,
) -> io::Result<BlastResult> {
    let start = now_ns();
    let end = start + duration.as_nanos() as u64;
    let (mut sent, mut refused) = (0u64, 0u64);
    loop {
        let now = now_ns();
        if now >= end || stop.is_raised() {
            break;
        }
        let allowed = match rate_pps {
            None => u64::MAX,
            Some(r) => ((now - start) as f64 * r / 1e9) as u64 + 1,
        };
        let mut queued = 0;
        while sent + refused + queued < allowed && queued < 256 {
            if let Some(at) = stamp_at {
                frame[at..at + 8].copy_from_slice(&now_ns().to_le_bytes());
            }
            match tx.try_queue_frame(frame)? {
                FrameQueued::Queued => queued += 1,
                FrameQueued::Full => break,
                FrameQueued::TooLong | FrameQueued::TooShort => {
                    refused += 1;
                    break;
                }
            }
        }
        if queued > 0 {
            tx.flush()?;
            sent += queued;
        } else {
            std::hint::spin_loop();
        }
    }
    let unsent = drain(tx, drain_limit)?;
    Ok(BlastResult {
        sent: sent.saturating_sub(unsent),
        unsent,
        refused,
        elapsed_ns: now_ns() - start,
    })
}

/// Flushes `tx` until the kernel has taken every queued frame or `limit` has passed; returns
/// how many it had still not taken.
fn drain<P: FramePort>(tx: &mut P, limit: Duration) -> io::Result<u64> {
    tx.flush()?;
    let deadline = now_ns() + limit.as_nanos() as u64;
    while tx.tx_unsent() > 0 && now_ns() < deadline {
        std::thread::sleep(Duration::from_micros(100));
        tx.flush()?;
    }
    Ok(tx.tx_unsent() as u64)
}

/// Sends `frames` copies of `frame` through `tx` back to back (as fast as its ring takes
/// them: a full ring is flushed and tried again), then waits (up to [`DRAIN_LIMIT`]) until the
/// kernel has taken them all: RFC 2544's back-to-back burst.
/// Stops early when `stop` is raised or a frame is refused as one the port can never send.
pub fn burst<P: FramePort>(
    tx: &mut P,
    frame: &[u8],
    frames: u64,
    stop: &Stop,
) -> io::Result<BlastResult> {
    burst_inner(tx, frame, frames, stop, DRAIN_LIMIT)
}

fn burst_inner<P: FramePort>(
    tx: &mut P,
    frame: &[u8],
    frames: u64,
    stop: &Stop,
    drain_limit: Duration,
) -> io::Result<BlastResult> {
    let start = now_ns();
    let (mut sent, mut refused) = (0u64, 0u64);
    while sent < frames && refused == 0 && !stop.is_raised() {
        match tx.try_queue_frame(frame)? {
            FrameQueued::Queued => sent += 1,
            FrameQueued::Full => tx.flush()?,
            FrameQueued::TooLong | FrameQueued::TooShort => refused += 1,
        }
    }
    let unsent = drain(tx, drain_limit)?;
    Ok(BlastResult {
        sent: sent.saturating_sub(unsent),
        unsent,
        refused,
        elapsed_ns: now_ns() - start,
    })
}

/// The batch memory a sink's port needs: 64 datagrams of up to 2048 bytes per call.
pub const SINK_SIZES: PortSizes = PortSizes {
    rx_batch: 64,
    tx_batch: 1,
    slot: 2048,
};

/// Counts the datagrams arriving on `port` until `stop` is raised; returns the count.
pub fn sink<P: DatagramRx>(port: &mut P, stop: &Stop) -> io::Result<u64> {
    let mut count = 0u64;
    while !stop.is_raised() {
        let n = port.recv(|_| {})?;
        count += n as u64;
        if n == 0 {
            port.wait_readable(Some(Duration::from_millis(5)))?;
        }
    }
    Ok(count)
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_wire::{ethernet, ipv4, udp};

    #[test]
    fn frames_have_the_rfc_2544_size_and_valid_checksums() {
        let addrs = FrameAddrs {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: "198.18.0.1:4000".parse().unwrap(),
            dst: "198.18.0.2:9".parse().unwrap(),
        };
        for size in [64, 128, 256, 512, 1024, 1280, 1518] {
            let f = udp_frame(&addrs, size).unwrap();
            assert_eq!(f.len() + FCS_LEN, size);
            let eth = ethernet::Frame::new_checked(&f[..]).unwrap();
            let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
            let r = ipv4::Repr::parse(&ip).unwrap();
            let u = udp::Packet::new_checked(ip.payload()).unwrap();
            let ur = udp::Repr::parse(&u, r.src_addr, r.dst_addr).unwrap();
            assert_eq!(
                (ur.dst_port, ur.payload_len),
                (9, size - FCS_LEN - HEADERS_LEN)
            );
        }
        assert!(udp_frame(&addrs, 63).is_err());
        assert!(udp_frame(&addrs, 1519).is_err());
    }

    /// A frame port whose interface takes frames of at most `mtu_limit` bytes.
    struct NarrowPort {
        mtu_limit: usize,
        queued: u64,
    }

    impl FramePort for NarrowPort {
        fn recv_frames(&mut self, _: &mut dyn FnMut(&[u8], u64)) -> io::Result<usize> {
            Ok(0)
        }

        fn try_queue_frame(&mut self, frame: &[u8]) -> io::Result<FrameQueued> {
            if frame.len() > self.mtu_limit {
                return Ok(FrameQueued::TooLong);
            }
            self.queued += 1;
            Ok(FrameQueued::Queued)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }

        fn kernel_drops(&self) -> u64 {
            0
        }

        fn wait_either(_: &mut Self, _: &mut Self, _: Duration) -> io::Result<()> {
            Ok(())
        }

        fn wait_readable(&mut self, _: Option<Duration>) -> io::Result<bool> {
            Ok(false)
        }

        fn timestamp_source(&self) -> latlab_io::port::TimestampSource {
            latlab_io::port::TimestampSource::UserSpace
        }
    }

    /// A port that keeps what it is given.
    struct KeepingPort(Vec<Vec<u8>>);

    impl FramePort for KeepingPort {
        fn recv_frames(&mut self, _: &mut dyn FnMut(&[u8], u64)) -> io::Result<usize> {
            Ok(0)
        }
        fn try_queue_frame(&mut self, frame: &[u8]) -> io::Result<FrameQueued> {
            self.0.push(frame.to_vec());
            Ok(FrameQueued::Queued)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
        fn kernel_drops(&self) -> u64 {
            0
        }
        fn wait_either(_: &mut Self, _: &mut Self, _: Duration) -> io::Result<()> {
            Ok(())
        }
        fn wait_readable(&mut self, _: Option<Duration>) -> io::Result<bool> {
            Ok(false)
        }
        fn timestamp_source(&self) -> latlab_io::port::TimestampSource {
            latlab_io::port::TimestampSource::UserSpace
        }
    }

    #[test]
    fn stamped_frames_carry_the_time_they_were_queued_and_still_parse() {
        let addrs = FrameAddrs {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: "198.18.0.1:4000".parse().unwrap(),
            dst: "198.18.0.2:9".parse().unwrap(),
        };
        let frame = stampable_udp_frame(&addrs, 64).unwrap();
        let mut port = KeepingPort(Vec::new());
        let before = now_ns();
        let r = blast_stamped(
            &mut port,
            &frame,
            HEADERS_LEN,
            Some(10_000.0),
            Duration::from_millis(20),
            &Stop::new(),
        )
        .unwrap();
        let after = now_ns();
        assert_eq!(r.sent as usize, port.0.len());
        // 200 frames at the rate; a loaded machine (the other tests of this binary run beside
        // it) falls behind, which this test does not judge.
        assert!(r.sent >= 20, "{r:?}");
        let mut last = 0;
        for f in &port.0 {
            let stamp = u64::from_le_bytes(f[HEADERS_LEN..HEADERS_LEN + 8].try_into().unwrap());
            assert!((before..=after).contains(&stamp) && stamp >= last);
            last = stamp;
            // Still a valid UDP datagram: a zero checksum means none.
            let eth = ethernet::Frame::new_checked(&f[..]).unwrap();
            let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
            let ipr = ipv4::Repr::parse(&ip).unwrap();
            let u = udp::Packet::new_checked(ip.payload()).unwrap();
            assert!(udp::Repr::parse(&u, ipr.src_addr, ipr.dst_addr).is_ok());
        }
        let short = blast_stamped(
            &mut port,
            &frame[..40],
            36,
            None,
            Duration::ZERO,
            &Stop::new(),
        );
        assert!(short.is_err());
    }

    /// A port whose kernel takes at most `per_flush` queued frames at each flush (0: never),
    /// as a device that pushes back does; its ring holds `ring` frames.
    struct PushingBackPort {
        per_flush: usize,
        ring: usize,
        queued: usize,
        taken: u64,
        /// Raises the stop once it has taken this many frames.
        stop_after: Option<(u64, std::sync::Arc<Stop>)>,
    }

    impl FramePort for PushingBackPort {
        fn recv_frames(&mut self, _: &mut dyn FnMut(&[u8], u64)) -> io::Result<usize> {
            Ok(0)
        }
        fn try_queue_frame(&mut self, _: &[u8]) -> io::Result<FrameQueued> {
            if self.queued == self.ring {
                return Ok(FrameQueued::Full);
            }
            self.queued += 1;
            Ok(FrameQueued::Queued)
        }
        fn flush(&mut self) -> io::Result<()> {
            let n = self.queued.min(self.per_flush);
            self.queued -= n;
            self.taken += n as u64;
            if let Some((enough, stop)) = &self.stop_after {
                if self.taken >= *enough {
                    stop.raise();
                }
            }
            Ok(())
        }
        fn tx_unsent(&mut self) -> usize {
            self.queued
        }
        fn kernel_drops(&self) -> u64 {
            0
        }
        fn wait_either(_: &mut Self, _: &mut Self, _: Duration) -> io::Result<()> {
            Ok(())
        }
        fn wait_readable(&mut self, _: Option<Duration>) -> io::Result<bool> {
            Ok(false)
        }
        fn timestamp_source(&self) -> latlab_io::port::TimestampSource {
            latlab_io::port::TimestampSource::UserSpace
        }
    }

    #[test]
    fn a_blast_returns_once_the_kernel_has_taken_its_frames_and_counts_only_those() {
        // The port takes 8 frames a flush of a ring of 256 and stops the blast once it took
        // four rings' worth (a count, not a time: however slowly the loop runs), and the drain
        // may take as long as it needs.
        let stop = std::sync::Arc::new(Stop::new());
        let mut port = PushingBackPort {
            per_flush: 8,
            ring: 256,
            queued: 0,
            taken: 0,
            stop_after: Some((1024, stop.clone())),
        };
        let r = blast_inner(
            &mut port,
            &mut [0u8; 60],
            None,
            None,
            Duration::from_secs(600),
            &stop,
            Duration::from_secs(600),
        )
        .unwrap();
        assert_eq!((r.unsent, port.queued), (0, 0), "{r:?}");
        assert_eq!(r.sent, port.taken);
        assert!(r.sent >= 1024, "{r:?}");
        assert!(r.rate_pps() > 0.0);
    }

    #[test]
    fn frames_the_kernel_never_takes_are_unsent_not_sent() {
        let mut port = PushingBackPort {
            per_flush: 0,
            ring: 100,
            queued: 0,
            taken: 0,
            stop_after: None,
        };
        let drain = Duration::from_millis(30);
        let r = blast_inner(
            &mut port,
            &mut [0u8; 60],
            None,
            None,
            Duration::from_millis(10),
            &Stop::new(),
            drain,
        )
        .unwrap();
        assert_eq!((r.sent, r.unsent), (0, 100));
        assert!(r.elapsed_ns >= 40_000_000, "{r:?}");
        let mut port = PushingBackPort {
            per_flush: 0,
            ring: 100,
            queued: 0,
            taken: 0,
            stop_after: None,
        };
        // A burst longer than the ring waits for room that never comes, until stopped.
        let stop = Stop::new();
        stop.raise();
        let r = burst_inner(&mut port, &[0u8; 60], 50, &stop, drain).unwrap();
        assert_eq!((r.sent, r.unsent), (0, 0));
        let r = burst_inner(&mut port, &[0u8; 60], 50, &Stop::new(), drain).unwrap();
        assert_eq!((r.sent, r.unsent), (0, 50));
    }

    #[test]
    fn a_burst_sends_exactly_its_frames_and_stops_at_a_frame_the_port_refuses() {
        let mut port = NarrowPort {
            mtu_limit: 1514,
            queued: 0,
        };
        let r = burst(&mut port, &[0u8; 100], 1000, &Stop::new()).unwrap();
        assert_eq!((r.sent, r.refused, port.queued), (1000, 0, 1000));
        let r = burst(&mut port, &[0u8; 1600], 1000, &Stop::new()).unwrap();
        assert_eq!((r.sent, r.refused), (0, 1));
    }

    #[test]
    fn a_frame_longer_than_the_interface_takes_is_counted_and_the_blast_runs_to_its_end() {
        let mut narrow = NarrowPort {
            mtu_limit: 1514,
            queued: 0,
        };
        let long = vec![0u8; 1600];
        let r = blast(
            &mut narrow,
            &long,
            Some(10_000.0),
            Duration::from_millis(50),
            &Stop::new(),
        )
        .unwrap();
        assert_eq!((r.sent, narrow.queued), (0, 0));
        // One refusal per frame the rate made due (500 in 50 ms, fewer when the loop was left
        // out near the end), and more than the first.
        assert!((2..=501).contains(&r.refused), "{r:?}");
        assert!(r.elapsed_ns >= 50_000_000);
    }
}
