//! One trial: raw UDP frames from the client's AF_PACKET or AF_XDP ring at a rate for a
//! duration, on the source's own core, counted by a UDP socket in the server (or, for an external
//! DUT, by an AF_PACKET socket on the interface the frames leave it by).

use std::io;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use latlab_bench::TrialCounts;
use latlab_engine::blaster;
use latlab_engine::Stop;
use latlab_io::ifstats::DevStats;
use latlab_io::packet::PacketSocket;
use latlab_io::port::{DatagramRx, FramePort, UdpMode, UdpPort};
use latlab_io::udp::UdpSocket;
use latlab_stats::LatencyHistogram;
use latlab_wire::ethernet::EtherType;
use latlab_wire::ipv4::Protocol;
use latlab_wire::udp_frame;

/// The sink counts until no frame came for this long after the source stopped (frames still
/// in the DUT, or in the sink's socket buffer)…
const QUIET: Duration = Duration::from_millis(150);
/// …or at most this long after the source stopped.
const MAX_DRAIN: Duration = Duration::from_secs(3);

/// One trial as run.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct TrialRecord {
    /// `source_max`, `ndr`, `pdr` or `loss` (`throughput`: the trial a search ended on).
    pub search: String,
    /// The rate asked for, frames per second (`None`: as fast as the source goes, or a burst).
    pub rate_pps: Option<u64>,
    /// The burst's length, frames (back-to-back trials only).
    pub burst_frames: Option<u64>,
    /// Frames sent.
    pub sent: u64,
    /// Frames received.
    pub received: u64,
    /// The rate the source reached.
    pub achieved_pps: f64,
    /// The source fell more than 2% short of the rate asked for.
    pub source_short: bool,
    /// Frames the source's interface dropped (on veth: the DUT's input ring full), part of
    /// `sent − received`; absent where not read (and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_entering: Option<u64>,
    /// Frames the sink's socket dropped (its receive buffer full), part of `sent − received`;
    /// absent where not read (an external DUT's sink, older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped_at_sink: Option<u64>,
}

/// What one trial measured.
#[derive(Clone, Copy, Debug)]
pub(super) struct TrialRun {
    /// Frames sent and received.
    pub(super) counts: TrialCounts,
    /// How long the source sent, ns.
    pub(super) elapsed_ns: u64,
    /// Frames the source's interface dropped over the trial (`tx_dropped`: on veth, frames
    /// the DUT's side could not take, its input ring full); `None` where it was not read.
    pub(super) dropped_entering: Option<u64>,
    /// Frames the sink's socket dropped (its receive buffer full); `None` where not read.
    pub(super) dropped_at_sink: Option<u64>,
}

impl TrialRun {
    /// The rate the source reached, frames per second.
    pub(super) fn achieved_pps(&self) -> f64 {
        if self.elapsed_ns == 0 {
            0.0
        } else {
            self.counts.sent as f64 * 1e9 / self.elapsed_ns as f64
        }
    }
}

/// What a trial sends.
#[derive(Clone, Copy, Debug)]
pub(super) enum Load {
    /// At this rate (`None`: as fast as the ring takes frames) for the trial's duration.
    Rate(Option<f64>),
    /// This many frames back to back.
    Burst(u64),
    /// At this rate for the trial's duration, each frame stamped with its send time (the
    /// frame must be a [`blaster::stampable_udp_frame`]), for the latency of every frame.
    Stamped(f64),
}

/// Sends `frame` through `tx` as `load` says (for `duration` when it is a rate) from a thread
/// pinned to `source_cpu`, while `sink` counts what arrives until it has gone quiet (and, with
/// [`Load::Stamped`], records each frame's one-way latency into `latency`: the sink's kernel
/// receive stamp less the frame's send stamp; both hosts share `CLOCK_REALTIME`).
#[allow(clippy::too_many_arguments)]
pub(super) fn run<P: FramePort>(
    tx: &mut P,
    sink: &Sink,
    frame: &[u8],
    load: Load,
    duration: Duration,
    source: (Option<usize>, Option<&DevStats>),
    stop: &Stop,
    latency: Option<&mut LatencyHistogram>,
) -> io::Result<TrialRun> {
    run_then(
        tx,
        sink,
        frame,
        load,
        duration,
        (source, stop),
        latency,
        || {},
    )
}

/// As [`run`], calling `at_source_end` once the source has sent (or failed), before the sink
/// drains: the moment to read what the DUT did while it was loaded. With the source
/// interface's counters, the frames it dropped over the trial are its `dropped_entering`.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_then<P: FramePort>(
    tx: &mut P,
    sink: &Sink,
    frame: &[u8],
    load: Load,
    duration: Duration,
    ((source_cpu, source_stats), stop): ((Option<usize>, Option<&DevStats>), &Stop),
    latency: Option<&mut LatencyHistogram>,
    at_source_end: impl FnOnce(),
) -> io::Result<TrialRun> {
    let source_done = AtomicBool::new(false);
    let entering_before = source_stats.and_then(|s| s.read().ok());
    std::thread::scope(|s| {
        let counter = s.spawn(|| {
            // The sink shares the source's core: the DUT's core is the DUT's alone.
            if let Some(cpu) = source_cpu {
                latlab_io::cpu::pin_current_thread(cpu)?;
            }
            count_until_quiet(sink, &source_done, latency)
        });
        let source = s.spawn(|| {
            if let Some(cpu) = source_cpu {
                latlab_io::cpu::pin_current_thread(cpu)?;
            }
            // The blaster returns once the kernel has taken this trial's frames, so none of
            // them leaves with the next trial's first flush.
            match load {
                Load::Rate(rate_pps) => blaster::blast(tx, frame, rate_pps, duration, stop),
                Load::Burst(frames) => blaster::burst(tx, frame, frames, stop),
                Load::Stamped(rate) => {
                    let at = blaster::HEADERS_LEN;
                    blaster::blast_stamped(tx, frame, at, Some(rate), duration, stop)
                }
            }
        });
        let sent = source
            .join()
            .map_err(|_| io::Error::other("the source thread panicked"));
        at_source_end();
        source_done.store(true, Ordering::Relaxed);
        let (received, dropped_at_sink) = counter
            .join()
            .map_err(|_| io::Error::other("the sink thread panicked"))??;
        let sent = sent??;
        // Read once the sink went quiet: every drop of the trial has happened.
        let entering_after = source_stats.and_then(|s| s.read().ok());
        let dropped_entering = entering_before
            .zip(entering_after)
            .map(|(b, a)| a.since(&b).tx_dropped);
        Ok(TrialRun {
            counts: TrialCounts {
                sent: sent.sent,
                received,
            },
            elapsed_ns: sent.elapsed_ns,
            dropped_entering,
            dropped_at_sink,
        })
    })
}

/// Where a trial's frames are counted.
pub(super) enum Sink {
    /// A UDP socket in the server namespace (the DUTs the lab builds).
    Udp(UdpSocket),
    /// An AF_PACKET socket on the interface the frames leave the DUT by (an external DUT):
    /// only the blaster's frames, UDP to `dst`, count; anything else on that interface is
    /// left alone.
    Frames {
        /// The socket; only the counting thread of a trial takes it.
        port: Box<Mutex<PacketSocket>>,
        /// The blaster's destination.
        dst: SocketAddrV4,
    },
}

/// The UDP payload of `frame` when it is one of the blaster's frames to `dst`.
fn blasted_payload(frame: &[u8], dst: SocketAddrV4) -> Option<&[u8]> {
    let f = udp_frame::Frame::new_checked(frame).ok()?;
    let ours = f.ethernet().ethertype() == EtherType::Ipv4
        && f.ipv4().protocol() == Protocol::Udp
        && f.dst() == dst;
    ours.then(|| f.payload())
}

/// Counts what arrives at `sink` until the source is done and the sink has been quiet for
/// [`QUIET`] (or [`MAX_DRAIN`] passed), so no frame of this trial is left to be counted in the
/// next one.
fn count_until_quiet(
    sink: &Sink,
    source_done: &AtomicBool,
    mut latency: Option<&mut LatencyHistogram>,
) -> io::Result<(u64, Option<u64>)> {
    // Records the one-way latency of a datagram whose payload starts with its send stamp.
    let mut stamp = |data: &[u8], rx_ns: u64| {
        let Some(h) = latency.as_deref_mut() else {
            return;
        };
        // A datagram too short for a stamp, or stamped after it arrived, is not timed.
        let sent = data.get(..8).map(|b| {
            let mut bytes = [0u8; 8];
            bytes.copy_from_slice(b);
            u64::from_le_bytes(bytes)
        });
        if let Some(sent) = sent.filter(|&s| s > 0 && s <= rx_ns) {
            h.record(rx_ns - sent);
        }
    };
    match sink {
        Sink::Udp(socket) => {
            let mut port = UdpPort::new(socket, UdpMode::Batched, blaster::SINK_SIZES);
            let before = port.kernel_drops();
            let received = until_quiet(source_done, |wait| {
                if wait {
                    port.wait_readable(Some(Duration::from_millis(5)))?;
                    return Ok(0);
                }
                port.recv(|d| stamp(d.data, d.rx_ns))
            })?;
            let drops = before
                .zip(port.kernel_drops())
                .map(|(b, a)| a.saturating_sub(b));
            Ok((received, drops))
        }
        Sink::Frames { port, dst } => {
            let mut port = port
                .lock()
                .map_err(|_| io::Error::other("the sink's socket was poisoned"))?;
            until_quiet(source_done, |wait| {
                if wait {
                    port.wait_readable(Some(Duration::from_millis(5)))?;
                    return Ok(0);
                }
                let mut ours = 0;
                port.recv_frames(&mut |frame, rx_ns| {
                    if let Some(payload) = blasted_payload(frame, *dst) {
                        ours += 1;
                        stamp(payload, rx_ns);
                    }
                })?;
                Ok(ours)
            })
            // The interface's socket sees every frame on it, not only the blaster's: its drops
            // are not the trial's.
            .map(|received| (received, None))
        }
    }
}

/// The counting loop: `recv(false)` takes what is ready and says how much of it counts,
/// `recv(true)` waits a little for more.
fn until_quiet(
    source_done: &AtomicBool,
    mut recv: impl FnMut(bool) -> io::Result<usize>,
) -> io::Result<u64> {
    let mut count = 0u64;
    let mut last = Instant::now();
    let mut done_at = None;
    loop {
        let n = recv(false)?;
        count += n as u64;
        let now = Instant::now();
        if n > 0 {
            last = now;
        }
        if done_at.is_none() && source_done.load(Ordering::Relaxed) {
            done_at = Some(now);
        }
        if let Some(done) = done_at {
            let quiet = now.duration_since(last.max(done)) >= QUIET;
            if quiet || now.duration_since(done) >= MAX_DRAIN {
                return Ok(count);
            }
        }
        if n == 0 {
            recv(true)?;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_engine::blaster::{stampable_udp_frame, FrameAddrs};

    #[test]
    fn only_the_blasters_frames_to_its_destination_count() {
        let dst = SocketAddrV4::new([198, 19, 0, 1].into(), 9);
        let addrs = |dst: SocketAddrV4| FrameAddrs {
            src_mac: [2, 0, 0, 0, 0, 1],
            dst_mac: [2, 0, 0, 0, 0, 2],
            src: "198.18.0.1:4000".parse().unwrap(),
            dst: dst.into(),
        };
        let frame = stampable_udp_frame(&addrs(dst), 64).unwrap();
        assert!(blasted_payload(&frame, dst).is_some_and(|p| p.len() >= 8));
        let elsewhere = stampable_udp_frame(&addrs(SocketAddrV4::new(*dst.ip(), 10)), 64).unwrap();
        assert_eq!(blasted_payload(&elsewhere, dst), None);
        let mut arp = frame.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(blasted_payload(&arp, dst), None);
        assert_eq!(
            blasted_payload(&frame[..20], dst),
            None,
            "a runt is not counted"
        );
        assert_eq!(blasted_payload(&[], dst), None);
    }
}
