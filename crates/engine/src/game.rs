//! The model game server's loop and the clients that measure it.
//!
//! The server binds [`latlab_game::Server`] to any datagram port ([`serve_port`]): one
//! `recvfrom` and one `sendto` per packet and copy, as a plain kernel-socket game server does
//! (the paper's Linux rows), `recvmmsg`/`sendmmsg` batches ([`serve`]), or AF_XDP with IPv4
//! and UDP in user space ([`serve_xdp`]). Per game packet it spins the emulated work on the
//! TSC, then sends a copy to every client of the sender's game.
//!
//! The clients ([`run_clients`], in `game/clients.rs`) are N sockets that join through the
//! handshake; the first of them sends probes on an open-loop schedule, and all N receive the
//! copies: the generator run with [`latlab_probe::FanoutMeter`], until the first and until the
//! last client has its copy.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use latlab_game::{Server, ServerConfig, ServerCounters, Verdict};
use latlab_io::clock::now_ns;
use latlab_io::port::{
    flush_or_drop, Datagram, DatagramPort, NoStamp, PortSizes, SendFailure, SendQueue,
    TimestampSource, UdpMode, UdpPort, Unsent, XdpEndpoint,
};
use latlab_io::tsc;
use latlab_io::udp::UdpSocket;
use latlab_stats::stalls::{HostStalls, Stalls};

use crate::stalls::{StallSampler, StallWatch};
use crate::{poll_now, LiveSendFailures, PollMode, PollSwitch, Stop};

mod clients;

pub use clients::{join_all, run_clients, Flood, GameClientConfig, GameClientResult};

/// How the server moves packets: the `--io` choice of latlab (socket, batched or xdp here).
/// `Socket` is one `recvfrom` and one `sendto` per datagram; `Batched` is `recvmmsg` and
/// `sendmmsg`; `Xdp` is AF_XDP, run with [`serve_xdp`].
pub use latlab_io::Io as ServerIo;

/// The `--io` values the game server runs on.
pub const SERVER_IOS: [ServerIo; 3] = [ServerIo::Socket, ServerIo::Batched, ServerIo::Xdp];

/// Parses a game server's `--io` value: socket, batched or xdp.
pub fn parse_server_io(text: &str) -> Result<ServerIo, String> {
    ServerIo::parse_among(text, &SERVER_IOS, "server I/O")
}

/// How a game server runs.
#[derive(Clone, Debug)]
pub struct GameServerConfig {
    /// Packet I/O.
    pub io: ServerIo,
    /// Emulated work per game packet, in TSC cycles.
    pub work_cycles: u64,
    /// Datagrams per batch (batched I/O).
    pub batch: usize,
    /// Sleep until packets arrive, or spin.
    pub poll: PollMode,
    /// When set, the mode is read from it at every turn instead of `poll` (default none).
    pub switch: Option<PollSwitch>,
    /// The game core's configuration.
    pub game: ServerConfig,
    /// Datagrams from this address are counted in [`ServerLive::from_counted`] (the game
    /// study's flooding client: what of its flood the server received). Default none.
    pub count_from: Option<SocketAddr>,
}

impl Default for GameServerConfig {
    fn default() -> Self {
        GameServerConfig {
            io: ServerIo::Socket,
            work_cycles: 150,
            batch: 32,
            poll: PollMode::Block,
            switch: None,
            game: ServerConfig::default(),
            count_from: None,
        }
    }
}

/// Live counters of a running server, for a terminal display.
#[derive(Debug, Default)]
pub struct ServerLive {
    /// Datagrams received.
    pub received: AtomicU64,
    /// Copies sent.
    pub copies: AtomicU64,
    /// Clients in the table.
    pub clients: AtomicU64,
    /// Datagrams dropped, whatever the cause.
    pub dropped: AtomicU64,
    /// Copies not sent because no MAC address is known for the recipient (AF_XDP only).
    pub unroutable: AtomicU64,
    /// Copies and answers the kernel refused for their destination (unreachable, port 0, …):
    /// dropped, and the server goes on.
    pub send_failed: AtomicU64,
    /// Every copy and answer not sent for its destination, by cause (`unroutable` and
    /// `send_failed` together).
    pub send_failures: LiveSendFailures,
    /// Datagrams received from [`GameServerConfig::count_from`].
    pub from_counted: AtomicU64,
    /// The host's stalls of the server's loop, set when it ends ([`crate::stalls`]).
    stalls: Mutex<Option<Stalls>>,
    /// What the kernel dropped at the server's port, read when it ends.
    kernel_drops: Mutex<Option<u64>>,
}

impl ServerLive {
    /// The host's stalls over the server's run, once it has ended: the gaps of its turns that
    /// handled no packet (a turn's own work, W cycles a copy, is not a stall), and while it
    /// blocks, a sampler's late wake-ups on its CPU. `None` before the end.
    pub fn host_stalls(&self) -> Option<HostStalls> {
        let stalls = self.stalls.lock().unwrap_or_else(|e| e.into_inner());
        stalls.as_ref().map(Stalls::report)
    }

    /// Datagrams the kernel dropped at the server's port before the server read them, read
    /// when it ends: its UDP socket's drops (a full receive buffer, `SO_MEMINFO`), or its
    /// AF_XDP socket's (a full RX ring, an empty fill ring, `XDP_STATISTICS`). `None` before
    /// the end, or when the port could not tell.
    pub fn kernel_drops(&self) -> Option<u64> {
        *self.kernel_drops.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Serves on the kernel UDP `socket` (`config.io` socket or batched) until `stop` is raised;
/// returns the core's counters.
pub fn serve(
    socket: &UdpSocket,
    config: &GameServerConfig,
    stop: &Stop,
    live: &ServerLive,
) -> io::Result<ServerCounters> {
    let mode = match config.io {
        ServerIo::Socket => UdpMode::Single,
        ServerIo::Batched => UdpMode::Batched,
        ServerIo::Xdp => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the AF_XDP server runs on an AF_XDP socket: use serve_xdp",
            ))
        }
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the game server does not run on --io {other}"),
            ))
        }
    };
    let mut port = UdpPort::new(socket, mode, port_sizes(config));
    serve_port(&mut port, config, stop, live)
}

/// The batch memory of a server's port: `config.batch` datagrams in (one with
/// [`ServerIo::Socket`]), at least 64 copies out, slots one byte longer than the largest
/// datagram accepted so longer ones show.
fn port_sizes(config: &GameServerConfig) -> PortSizes {
    PortSizes {
        rx_batch: config.batch.max(1),
        tx_batch: config.batch.max(64),
        slot: config.game.max_datagram + 1,
    }
}

fn publish(server: &Server, live: &ServerLive) {
    let c = server.counters();
    live.received.store(c.received, Ordering::Relaxed);
    live.copies.store(c.copies, Ordering::Relaxed);
    live.clients
        .store(server.clients() as u64, Ordering::Relaxed);
    let dropped = c.malformed
        + c.oversized
        + c.unknown_sender
        + c.bad_cookie
        + c.expired
        + c.table_full
        + c.rate_limited
        + c.short_join
        + c.host_full;
    live.dropped.store(dropped, Ordering::Relaxed);
}

/// The datagrams of one receive call, copied out of the port so that copies can be sent (and
/// the port's queue flushed) while they are handled.
struct Inbox {
    slot: usize,
    data: Vec<u8>,
    lens: Vec<usize>,
    from: Vec<SocketAddr>,
    truncated: Vec<bool>,
    count: usize,
    /// The receive stamp of the first datagram.
    first_rx_ns: u64,
}

impl Inbox {
    fn new(capacity: usize, slot: usize) -> Inbox {
        Inbox {
            slot,
            data: vec![0; capacity * slot],
            lens: vec![0; capacity],
            from: vec![SocketAddr::from(([0, 0, 0, 0], 0)); capacity],
            truncated: vec![false; capacity],
            count: 0,
            first_rx_ns: 0,
        }
    }

    fn push(&mut self, d: Datagram<'_>) {
        let i = self.count;
        if i >= self.lens.len() {
            return;
        }
        if i == 0 {
            self.first_rx_ns = d.rx_ns;
        }
        let len = d.data.len().min(self.slot);
        self.data[i * self.slot..i * self.slot + len].copy_from_slice(&d.data[..len]);
        self.lens[i] = len;
        self.from[i] = d.from;
        self.truncated[i] = d.truncated;
        self.count += 1;
    }

    fn get(&self, i: usize) -> (&[u8], SocketAddr, bool) {
        let start = i * self.slot;
        (
            &self.data[start..start + self.lens[i]],
            self.from[i],
            self.truncated[i],
        )
    }
}

/// Counts a copy or answer the port could not send.
fn count_unsent(live: &ServerLive, unsent: Unsent) {
    live.send_failures.count(unsent.failure);
    match unsent.failure {
        SendFailure::NoLinkAddress => live.unroutable.fetch_add(1, Ordering::Relaxed),
        _ => live.send_failed.fetch_add(1, Ordering::Relaxed),
    };
}

/// Sends everything queued; what a full socket does not take after a few tries is dropped (the
/// kernel would drop it too), so receiving never stalls behind sending.
fn flush_all<P: DatagramPort>(port: &mut P, live: &ServerLive) -> io::Result<()> {
    flush_or_drop(port, 64, NoStamp, |u| count_unsent(live, u)).map(drop)
}

/// Queues `data` to `to`, flushing first when the queue is full.
#[inline]
fn queue_copy<P: DatagramPort>(
    port: &mut P,
    to: SocketAddr,
    data: &[u8],
    live: &ServerLive,
) -> io::Result<()> {
    if port.queue().is_full() {
        flush_all(port, live)?;
    }
    if let Some(out) = port.queue().push(to, data.len()) {
        out.copy_from_slice(data);
    }
    Ok(())
}

/// Longest sleep of a blocking server between looks at its stop flag.
const IDLE_WAIT: Duration = Duration::from_millis(50);

/// Receive calls a stopped server makes at most to read what its port still holds.
pub const DRAIN_CALLS: u32 = 64;

/// Meets the core's timer at `now` (it removes the clients that fell idle) and returns how
/// long until it is due again, if it is set.
fn expire_idle(server: &mut Server, now: u64) -> Option<Duration> {
    let at = server.poll_timeout()?;
    if at <= now {
        server.handle_timeout(now);
    }
    let at = server.poll_timeout()?;
    Some(Duration::from_nanos(at.saturating_sub(now)))
}

/// The game server over any datagram port until `stop` is raised: per game packet it spins
/// the emulated work on the TSC, then queues a copy to every client of the sender's game;
/// answers to handshakes follow; the queue is flushed after each receive call (and whenever
/// it fills). The core's idle timer is met before each batch and while no packet comes.
/// Once `stop` is raised it reads and handles what the port still holds (at most
/// [`DRAIN_CALLS`] receive calls), then records the port's kernel drops in `live`. Returns the
/// core's counters.
pub fn serve_port<P: DatagramPort>(
    port: &mut P,
    config: &GameServerConfig,
    stop: &Stop,
    live: &ServerLive,
) -> io::Result<ServerCounters> {
    let mut server = Server::new(config.game.clone());
    let slot = config.game.max_datagram + 1;
    let mut inbox = Inbox::new(config.batch.max(1), slot);
    // Stands in for a datagram longer than its slot: the core counts it as oversized.
    let oversized = vec![0u8; slot];
    let mut answer = [0u8; 128];
    let mut since_publish = 0usize;
    // A port that stamps in user space read the clock right after its receive call: that is
    // the core's `now`, without reading the clock again.
    let stamped_on_read = port.timestamp_source() == TimestampSource::UserSpace;
    // A server that blocks cannot time itself: a sampler on its CPU watches for it.
    let sampler = match poll_now(config.poll, config.switch.as_ref()) {
        PollMode::Block => Some(StallSampler::start(crate::stalls::pinned_cpu())?),
        PollMode::Busy => None,
    };
    let mut watch = StallWatch::new(now_ns());
    let mut draining = 0;
    loop {
        // Stopped: what the port already holds is read and handled, so that every datagram
        // that reached the server before the stop is counted; a port that never runs dry (a
        // flood) is left after DRAIN_CALLS receive calls.
        if stop.is_raised() {
            if draining == DRAIN_CALLS {
                break;
            }
            draining += 1;
        }
        inbox.count = 0;
        port.recv(|d| {
            // A frame that was no UDP datagram to us (AF_XDP) is not the server's.
            if !d.unparsed {
                inbox.push(d);
            }
        })?;
        // The turn's gap since the last one ended: one receive call and the loop, unless the
        // host took the CPU away.
        let turn_ns = now_ns();
        watch.tick(turn_ns);
        if inbox.count == 0 {
            if draining > 0 {
                break;
            }
            // The clock is read only when the core has a timer set.
            let until_timeout = match server.poll_timeout() {
                Some(_) => expire_idle(&mut server, turn_ns),
                None => None,
            };
            publish(&server, live);
            if poll_now(config.poll, config.switch.as_ref()) == PollMode::Block {
                let wait = until_timeout.map_or(IDLE_WAIT, |ns| IDLE_WAIT.min(ns));
                port.wait_readable(Some(wait))?;
                // A frame may have ended the wait early: the wait is not a stall.
                watch.resumed(now_ns());
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        let now = if stamped_on_read {
            inbox.first_rx_ns
        } else {
            turn_ns
        };
        expire_idle(&mut server, now);
        for i in 0..inbox.count {
            let (data, from, truncated) = inbox.get(i);
            if config.count_from == Some(from) {
                live.from_counted.fetch_add(1, Ordering::Relaxed);
            }
            let data = if truncated { &oversized[..] } else { data };
            if let Verdict::FanOut { recipients } = server.handle_datagram(now, from, data) {
                tsc::spin_cycles(config.work_cycles);
                for to in recipients {
                    queue_copy(port, *to, data, live)?;
                }
            }
            while let Some((to, len)) = server.poll_transmit(&mut answer) {
                queue_copy(port, to, &answer[..len], live)?;
            }
        }
        flush_all(port, live)?;
        // The batch's work and sends are the server's own time, not the host's.
        watch.resumed(now_ns());
        since_publish += inbox.count;
        if since_publish >= 1024 {
            since_publish = 0;
            publish(&server, live);
        }
    }
    publish(&server, live);
    let mut stalls = watch.finish(now_ns());
    if let Some(sampler) = sampler {
        stalls.merge(&sampler.finish());
    }
    *live.stalls.lock().unwrap_or_else(|e| e.into_inner()) = Some(stalls);
    *live.kernel_drops.lock().unwrap_or_else(|e| e.into_inner()) = port.kernel_drops();
    Ok(server.counters().clone())
}

/// The model game server on an AF_XDP socket whose program redirects the server's UDP port
/// `udp_port`: IPv4 and UDP are handled in user space, and each client's MAC address is learnt
/// from the frames it sends (a client is always heard before it is sent to: it joins first).
pub fn serve_xdp(
    socket: latlab_io::xdp::XdpSocket,
    udp_port: u16,
    config: &GameServerConfig,
    stop: &Stop,
    live: &ServerLive,
) -> io::Result<ServerCounters> {
    let mut port = XdpEndpoint::new(socket, udp_port, port_sizes(config))?;
    // Bounded: entries beyond a few per table slot are not learnt.
    port.set_max_peers(config.game.max_clients.saturating_mul(4).max(64));
    serve_port(&mut port, config, stop, live)
}
