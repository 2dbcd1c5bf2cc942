//! One trial: raw UDP frames from the client's AF_PACKET ring at a rate for a duration, on the
//! source's own core, counted by a UDP socket in the server.

use std::io;
use std::time::Duration;

use latlab_bench::TrialCounts;
use latlab_engine::blaster;
use latlab_engine::Stop;
use latlab_io::packet::PacketSocket;
use latlab_io::port::{UdpMode, UdpPort};
use latlab_io::udp::UdpSocket;

/// How long the sink keeps counting after the source stopped: frames still in the DUT.
const DRAIN: Duration = Duration::from_millis(200);

/// What one trial measured.
#[derive(Clone, Copy, Debug)]
pub(super) struct TrialRun {
    /// Frames sent and received.
    pub(super) counts: TrialCounts,
    /// How long the source sent, ns.
    pub(super) elapsed_ns: u64,
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

/// Sends `frame` through `tx` at `rate_pps` (`None`: as fast as the ring takes it) for
/// `duration` from a thread pinned to `source_cpu`, while `sink` counts what arrives.
pub(super) fn run(
    tx: &mut PacketSocket,
    sink: &UdpSocket,
    frame: &[u8],
    rate_pps: Option<f64>,
    duration: Duration,
    source_cpu: Option<usize>,
    stop: &Stop,
) -> io::Result<TrialRun> {
    let sink_stop = Stop::new();
    std::thread::scope(|s| {
        let counter = s.spawn(|| {
            let mut port = UdpPort::new(sink, UdpMode::Batched, blaster::SINK_SIZES);
            blaster::sink(&mut port, &sink_stop)
        });
        let source = s.spawn(|| {
            if let Some(cpu) = source_cpu {
                latlab_io::cpu::pin_current_thread(cpu)?;
            }
            blaster::blast(tx, frame, rate_pps, duration, stop)
        });
        let sent = source
            .join()
            .map_err(|_| io::Error::other("the source thread panicked"));
        std::thread::sleep(DRAIN);
        sink_stop.raise();
        let received = counter
            .join()
            .map_err(|_| io::Error::other("the sink thread panicked"))??;
        let sent = sent??;
        Ok(TrialRun {
            counts: TrialCounts {
                sent: sent.sent,
                received,
            },
            elapsed_ns: sent.elapsed_ns,
        })
    })
}
