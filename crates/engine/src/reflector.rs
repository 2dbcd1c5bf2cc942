//! The reflector: echoes latlab probes back to their sender.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use latlab_io::clock::now_ns;
use latlab_io::udp::{RecvBatch, SendBatch, UdpSocket};
use latlab_wire::probe;

use crate::{PollMode, Stop};

/// How the reflector runs.
#[derive(Clone, Debug)]
pub struct ReflectorConfig {
    /// Datagrams per `recvmmsg`/`sendmmsg` call.
    pub batch: usize,
    /// Busy polling or blocking.
    pub poll: PollMode,
    /// Write the reflector's receive and transmit times into the probe (bytes 40..56).
    pub stamp: bool,
    /// Largest datagram accepted; longer ones are counted as oversized and dropped.
    pub max_datagram: usize,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        ReflectorConfig {
            batch: 32,
            poll: PollMode::Busy,
            stamp: true,
            max_datagram: 9216,
        }
    }
}

/// Live counters of a reflector, readable from other threads while it runs.
#[derive(Debug, Default)]
pub struct ReflectorCounters {
    /// Datagrams received.
    pub received: AtomicU64,
    /// Probes sent back.
    pub reflected: AtomicU64,
    /// Datagrams that were not latlab probes: dropped.
    pub malformed: AtomicU64,
    /// Datagrams longer than the largest accepted: dropped.
    pub oversized: AtomicU64,
    /// Probes that could not be sent back because the socket stayed full: dropped.
    pub send_dropped: AtomicU64,
}

/// A snapshot of [`ReflectorCounters`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReflectorReport {
    /// Datagrams received.
    pub received: u64,
    /// Probes sent back.
    pub reflected: u64,
    /// Not latlab probes.
    pub malformed: u64,
    /// Too long.
    pub oversized: u64,
    /// Dropped on a full socket.
    pub send_dropped: u64,
}

impl ReflectorCounters {
    /// The counters' values now.
    pub fn snapshot(&self) -> ReflectorReport {
        ReflectorReport {
            received: self.received.load(Ordering::Relaxed),
            reflected: self.reflected.load(Ordering::Relaxed),
            malformed: self.malformed.load(Ordering::Relaxed),
            oversized: self.oversized.load(Ordering::Relaxed),
            send_dropped: self.send_dropped.load(Ordering::Relaxed),
        }
    }
}

/// Reflects probes arriving on `socket` until `stop` is raised.
pub fn run(
    socket: &UdpSocket,
    config: &ReflectorConfig,
    stop: &Stop,
    counters: &ReflectorCounters,
) -> io::Result<()> {
    // One byte more than the largest accepted datagram shows which ones were longer.
    let slot = config.max_datagram + 1;
    let mut rx = RecvBatch::new(config.batch, slot);
    let mut tx = SendBatch::new(config.batch, slot);
    while !stop.is_raised() {
        if config.poll == PollMode::Block
            && !socket.wait_readable(Some(Duration::from_millis(50)))?
        {
            continue;
        }
        let n = socket.recv_batch(&mut rx)?;
        if n == 0 {
            std::hint::spin_loop();
            continue;
        }
        counters.received.fetch_add(n as u64, Ordering::Relaxed);
        let (mut malformed, mut oversized) = (0, 0);
        for pkt in rx.iter() {
            if pkt.truncated || pkt.data.len() > config.max_datagram {
                oversized += 1;
                continue;
            }
            if probe::Packet::new_checked(pkt.data).is_err() {
                malformed += 1;
                continue;
            }
            // The batch has as many slots as the receive batch, so there is always room.
            let Some(out) = tx.push(pkt.data.len(), Some(pkt.from)) else {
                break;
            };
            out.copy_from_slice(pkt.data);
            if config.stamp {
                probe::Packet::new_unchecked(out).set_responder_stamps(pkt.rx_ns, 0);
            }
        }
        if config.stamp {
            let tx_ns = now_ns();
            for i in 0..tx.len() {
                if let Some(slot) = tx.slot_mut(i) {
                    let mut p = probe::Packet::new_unchecked(slot);
                    let rx_ns = p.responder_rx_ns();
                    p.set_responder_stamps(rx_ns, tx_ns);
                }
            }
        }
        let queued = tx.len() as u64;
        let mut sent = 0u64;
        // A full socket buffer gets a few tries, then the rest is dropped and counted: the
        // reflector never stalls its receive side behind its send side.
        for _ in 0..64 {
            sent += socket.send_batch(&mut tx)? as u64;
            if tx.is_empty() {
                break;
            }
        }
        tx.clear();
        counters.reflected.fetch_add(sent, Ordering::Relaxed);
        counters
            .send_dropped
            .fetch_add(queued - sent, Ordering::Relaxed);
        counters.malformed.fetch_add(malformed, Ordering::Relaxed);
        counters.oversized.fetch_add(oversized, Ordering::Relaxed);
    }
    Ok(())
}
