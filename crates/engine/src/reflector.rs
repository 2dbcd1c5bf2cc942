//! The reflector: echoes latlab probes back to their sender.

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use latlab_io::clock::now_ns;

use latlab_io::port::{
    flush_or_drop, DatagramPort, NoStamp, PortSizes, SendFailures, SendQueue, UdpMode, UdpPort,
    Unsent,
};
use latlab_io::udp::UdpSocket;
use latlab_stats::stalls::{HostStalls, Stalls};
use latlab_wire::probe;

use crate::stalls::{StallSampler, StallWatch};
use crate::{poll_now, LiveSendFailures, PollMode, PollSwitch, Stop};

/// How the reflector runs.
#[derive(Clone, Debug)]
pub struct ReflectorConfig {
    /// Datagrams per `recvmmsg`/`sendmmsg` call.
    pub batch: usize,
    /// Busy polling or blocking.
    pub poll: PollMode,
    /// When set, the mode is read from it at every turn instead of `poll` (default none).
    pub switch: Option<PollSwitch>,
    /// Write the reflector's receive and transmit times into the probe (bytes 40..56).
    pub stamp: bool,
    /// The identity of the clock the stamps are in
    /// ([`latlab_io::clock::clock_identity`]), written into every stamped probe whose header
    /// asks for it (`responder_clock`, bytes 56..64 of a header of 64 bytes or more); `None`
    /// names no clock (default).
    pub clock: Option<u64>,
    /// Largest datagram accepted; longer ones are counted as oversized and dropped.
    pub max_datagram: usize,
}

impl Default for ReflectorConfig {
    fn default() -> Self {
        ReflectorConfig {
            batch: 32,
            poll: PollMode::Busy,
            switch: None,
            stamp: true,
            clock: None,
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
    /// Probes that could not be sent back, because the socket stayed full or the kernel
    /// refused their sender's address: dropped.
    pub send_dropped: AtomicU64,
    /// Of `send_dropped`, the probes whose sender's address the port could not send to
    /// (port 0, unreachable, a broadcast, …), by cause.
    pub send_failed: LiveSendFailures,
    /// Datagrams the kernel dropped for the reflector's socket before it could read them
    /// (a full receive buffer; AF_XDP: no free frame or a full RX ring), as last read from
    /// the port, plus one; 0 until read, or when the port does not count them.
    kernel_drops_plus_one: AtomicU64,
    /// The host's stalls of the reflector's loop, set when it ends ([`crate::stalls`]).
    stalls: Mutex<Option<Stalls>>,
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
    /// Dropped on a full socket, or refused for their destination.
    pub send_dropped: u64,
    /// Of `send_dropped`, refused for their destination, by cause.
    pub send_failed: SendFailures,
    /// Dropped by the kernel before the reflector could read them; `None` when the port does
    /// not count them.
    pub kernel_drops: Option<u64>,
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
            send_failed: self.send_failed.snapshot(),
            kernel_drops: self
                .kernel_drops_plus_one
                .load(Ordering::Relaxed)
                .checked_sub(1),
        }
    }

    /// The host's stalls over the reflector's run, once it has ended: its own turns' gaps
    /// when it spun, a sampler's on its CPU when it blocked; `None` while it runs.
    pub fn host_stalls(&self) -> Option<HostStalls> {
        let stalls = self.stalls.lock().unwrap_or_else(|e| e.into_inner());
        stalls.as_ref().map(Stalls::report)
    }

    /// Reads the kernel's drop counter of `port` into the counters.
    fn read_kernel_drops<P: DatagramPort>(&self, port: &P) {
        if let Some(n) = port.kernel_drops() {
            self.kernel_drops_plus_one
                .store(n.saturating_add(1), Ordering::Relaxed);
        }
    }
}

impl ReflectorConfig {
    /// The batch memory of the reflector's port: `batch` datagrams each way, slots one byte
    /// longer than the largest datagram accepted, so longer ones show.
    pub fn port_sizes(&self) -> PortSizes {
        PortSizes::new(self.batch, self.max_datagram + 1)
    }
}

/// Reflects probes arriving on the kernel UDP `socket` in `recvmmsg`/`sendmmsg` batches (what
/// `latlab echo --io socket` runs) until `stop` is raised: [`run`] over a batched
/// [`UdpPort`].
pub fn run_udp(
    socket: &UdpSocket,
    config: &ReflectorConfig,
    stop: &Stop,
    counters: &ReflectorCounters,
) -> io::Result<()> {
    let mut port = UdpPort::new(socket, UdpMode::Batched, config.port_sizes());
    run(&mut port, config, stop, counters)
}

/// Reflects probes arriving on `port` until `stop` is raised: every valid probe goes back to
/// its sender, stamped (when `config.stamp`) with its receive stamp from the port and its
/// transmit time, written as it leaves, and with `config.clock` when its header asks which
/// clock that is. Over a kernel UDP socket use
/// [`UdpPort`] in batched mode with [`ReflectorConfig::port_sizes`];
/// over AF_XDP, an [`XdpEndpoint`](latlab_io::port::XdpEndpoint) (IPv4 and UDP in user space,
/// each reply to the MAC address its probe came from).
pub fn run<P: DatagramPort>(
    port: &mut P,
    config: &ReflectorConfig,
    stop: &Stop,
    counters: &ReflectorCounters,
) -> io::Result<()> {
    let max = config.max_datagram;
    let stamp = config.stamp;
    let clock = config.clock;
    // The kernel's drop counter costs a system call: it is read every few thousand turns of
    // the loop, whenever a blocking wait finds nothing, and at the end.
    let mut turns = 0u32;
    counters.read_kernel_drops(port);
    // A loop that blocks cannot time itself: a sampler on its CPU watches for it.
    let sampler = match config.poll {
        PollMode::Block => Some(StallSampler::start(crate::stalls::pinned_cpu())?),
        PollMode::Busy => None,
    };
    let mut watch = StallWatch::new(now_ns());
    while !stop.is_raised() {
        watch.tick(now_ns());
        turns = turns.wrapping_add(1);
        if turns % 4096 == 0 {
            counters.read_kernel_drops(port);
        }
        if poll_now(config.poll, config.switch.as_ref()) == PollMode::Block {
            let readable = port.wait_readable(Some(Duration::from_millis(50)))?;
            watch.resumed(now_ns());
            if !readable {
                counters.read_kernel_drops(port);
                continue;
            }
        }
        let (mut malformed, mut oversized, mut no_room) = (0u64, 0u64, 0u64);
        let n = port.recv_with_queue(|pkt, queue| {
            if pkt.truncated || pkt.data.len() > max {
                oversized += 1;
                return;
            }
            // The whole header is checked (magic, version, lengths), not only the length: a
            // reflector must never echo a datagram that is not a probe. A frame that was no
            // UDP datagram at all (AF_XDP) comes empty and is counted here too.
            if !probe::is_probe(pkt.data) {
                malformed += 1;
                return;
            }
            // The queue has as many slots as a receive call hands datagrams: always room.
            let Some(out) = queue.push(pkt.from, pkt.data.len()) else {
                no_room += 1;
                return;
            };
            out.copy_from_slice(pkt.data);
            if stamp {
                let mut out = probe::Packet::new_unchecked(out);
                out.set_responder_stamps(pkt.rx_ns, 0);
                if let Some(clock) = clock {
                    // Writes only into a header with room for it: a 56-byte header's next
                    // bytes are the sender's padding.
                    out.set_responder_clock(clock);
                }
            }
        })?;
        if n == 0 {
            std::hint::spin_loop();
            continue;
        }
        // A full socket gets a few tries, then the rest is dropped and counted: the reflector
        // never stalls its receive side behind its send side. A probe whose sender cannot be
        // sent to (port 0, an unreachable or broadcast address) is dropped and counted by
        // cause the same way, and the reflector goes on.
        let failed = |u: Unsent| counters.send_failed.count(u.failure);
        let (sent, dropped) = if stamp {
            let stamp_tx = |payload: &mut [u8], tx_ns: u64| {
                let mut p = probe::Packet::new_unchecked(payload);
                let rx_ns = p.responder_rx_ns();
                p.set_responder_stamps(rx_ns, tx_ns);
            };
            flush_or_drop(port, 64, stamp_tx, failed)?
        } else {
            flush_or_drop(port, 64, NoStamp, failed)?
        };
        counters.received.fetch_add(n as u64, Ordering::Relaxed);
        counters.reflected.fetch_add(sent, Ordering::Relaxed);
        counters
            .send_dropped
            .fetch_add(dropped + no_room, Ordering::Relaxed);
        counters.malformed.fetch_add(malformed, Ordering::Relaxed);
        counters.oversized.fetch_add(oversized, Ordering::Relaxed);
    }
    counters.read_kernel_drops(port);
    let mut stalls = watch.finish(now_ns());
    if let Some(sampler) = sampler {
        stalls.merge(&sampler.finish());
    }
    *counters.stalls.lock().unwrap_or_else(|e| e.into_inner()) = Some(stalls);
    Ok(())
}
