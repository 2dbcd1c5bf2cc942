//! The model game server's loops and the clients that measure it.
//!
//! The server binds [`latlab_game::Server`] to a socket in one of two ways: one `recvfrom` and
//! one `sendto` per packet and copy, as a plain kernel-socket game server does (the paper's
//! Linux rows), or `recvmmsg`/`sendmmsg` batches. Per game packet it spins the emulated work on
//! the TSC, then sends a copy to every client of the sender's game.
//!
//! The clients are N sockets that join through the handshake; the first of them sends probes
//! on an open-loop schedule, and all N receive the copies, metered by
//! [`latlab_probe::FanoutMeter`] until the first and until the last client has its copy.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use latlab_game::{JoinEvent, Joiner, Server, ServerConfig, ServerCounters, Verdict};
use latlab_io::clock::now_ns;
use latlab_io::udp::{wait_any_readable, RecvBatch, SendBatch, UdpSocket};
use latlab_io::{cpu, tsc};
use latlab_probe::{FanoutMeter, FanoutReport, ProbeConfig, Sender};
use latlab_wire::probe;

use crate::generator::Progress;
use crate::{PollMode, Stop};

/// How the server moves packets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ServerIo {
    /// One system call per packet received and per copy sent.
    #[default]
    Socket,
    /// `recvmmsg` and `sendmmsg` batches.
    Batched,
    /// AF_XDP: frames taken before the kernel's stack; run with [`serve_xdp`].
    Xdp,
}

impl std::str::FromStr for ServerIo {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "socket" => Ok(ServerIo::Socket),
            "batched" => Ok(ServerIo::Batched),
            "xdp" => Ok(ServerIo::Xdp),
            other => Err(format!(
                "unknown server I/O {other:?}: expected socket, batched or xdp"
            )),
        }
    }
}

impl ServerIo {
    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            ServerIo::Socket => "socket",
            ServerIo::Batched => "batched",
            ServerIo::Xdp => "xdp",
        }
    }
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
    /// The game core's configuration.
    pub game: ServerConfig,
}

impl Default for GameServerConfig {
    fn default() -> Self {
        GameServerConfig {
            io: ServerIo::Socket,
            work_cycles: 150,
            batch: 32,
            poll: PollMode::Block,
            game: ServerConfig::default(),
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
}

/// Serves on `socket` until `stop` is raised; returns the core's counters.
pub fn serve(
    socket: &UdpSocket,
    config: &GameServerConfig,
    stop: &Stop,
    live: &ServerLive,
) -> io::Result<ServerCounters> {
    let mut server = Server::new(config.game.clone());
    match config.io {
        ServerIo::Socket => serve_socket(socket, config, &mut server, stop, live)?,
        ServerIo::Batched => serve_batched(socket, config, &mut server, stop, live)?,
        ServerIo::Xdp => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the AF_XDP server runs on an AF_XDP socket: use serve_xdp",
            ))
        }
    }
    Ok(server.counters().clone())
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
        + c.short_join;
    live.dropped.store(dropped, Ordering::Relaxed);
}

fn serve_socket(
    socket: &UdpSocket,
    config: &GameServerConfig,
    server: &mut Server,
    stop: &Stop,
    live: &ServerLive,
) -> io::Result<()> {
    let mut buf = vec![0u8; config.game.max_datagram + 1];
    let mut answer = [0u8; 128];
    let mut since_publish = 0u32;
    while !stop.is_raised() {
        let (n, from) = match socket.recv_from_one(&mut buf) {
            Ok(x) => x,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                publish(server, live);
                if config.poll == PollMode::Block {
                    socket.wait_readable(Some(Duration::from_millis(50)))?;
                }
                continue;
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(e),
        };
        let now = now_ns();
        if let Verdict::FanOut { recipients } = server.handle_datagram(now, from, &buf[..n]) {
            tsc::spin_cycles(config.work_cycles);
            for to in recipients {
                // A client that went away answers with ICMP; the others still get their copy.
                let _ = socket.send_one(&buf[..n], Some(*to));
            }
        }
        while let Some((to, len)) = server.poll_transmit(&mut answer) {
            let _ = socket.send_one(&answer[..len], Some(to));
        }
        since_publish += 1;
        if since_publish >= 1024 {
            since_publish = 0;
            publish(server, live);
        }
    }
    publish(server, live);
    Ok(())
}

fn serve_batched(
    socket: &UdpSocket,
    config: &GameServerConfig,
    server: &mut Server,
    stop: &Stop,
    live: &ServerLive,
) -> io::Result<()> {
    let slot = config.game.max_datagram + 1;
    let mut rx = RecvBatch::new(config.batch, slot);
    let mut tx = SendBatch::new(config.batch.max(64), slot);
    let mut answer = [0u8; 128];
    while !stop.is_raised() {
        let n = socket.recv_batch(&mut rx)?;
        if n == 0 {
            publish(server, live);
            if config.poll == PollMode::Block {
                socket.wait_readable(Some(Duration::from_millis(50)))?;
            }
            continue;
        }
        let now = now_ns();
        for pkt in rx.iter() {
            let data = if pkt.truncated {
                &pkt.data[..0]
            } else {
                pkt.data
            };
            let verdict = if pkt.truncated {
                // Longer than any datagram the core accepts: let it count the cause.
                server.handle_datagram(now, pkt.from, &vec![0u8; slot])
            } else {
                server.handle_datagram(now, pkt.from, data)
            };
            if let Verdict::FanOut { recipients } = verdict {
                tsc::spin_cycles(config.work_cycles);
                for to in recipients {
                    if tx.is_full() {
                        flush_all(socket, &mut tx)?;
                    }
                    if let Some(out) = tx.push(data.len(), Some(*to)) {
                        out.copy_from_slice(data);
                    }
                }
            }
            while let Some((to, len)) = server.poll_transmit(&mut answer) {
                if tx.is_full() {
                    flush_all(socket, &mut tx)?;
                }
                if let Some(out) = tx.push(len, Some(to)) {
                    out.copy_from_slice(&answer[..len]);
                }
            }
        }
        flush_all(socket, &mut tx)?;
    }
    publish(server, live);
    Ok(())
}

/// Sends everything queued; what a full socket does not take after a few tries is dropped (the
/// kernel would drop it too), so receiving never stalls behind sending.
fn flush_all(socket: &UdpSocket, tx: &mut SendBatch) -> io::Result<()> {
    for _ in 0..64 {
        socket.send_batch(tx)?;
        if tx.is_empty() {
            return Ok(());
        }
    }
    tx.clear();
    Ok(())
}

/// Joins every socket to the game server at `server`, all in game `game`.
pub fn join_all(
    sockets: &[UdpSocket],
    server: SocketAddr,
    game: u32,
    timeout: Duration,
) -> io::Result<()> {
    let deadline = now_ns() + timeout.as_nanos() as u64;
    let seed = now_ns();
    let mut joiners: Vec<Joiner> = (0..sockets.len())
        .map(|i| {
            Joiner::new(
                seed.wrapping_mul(0x9e37_79b9_7f4a_7c15)
                    .wrapping_add(i as u64),
                game,
            )
        })
        .collect();
    let mut buf = [0u8; 2048];
    loop {
        let now = now_ns();
        let mut pending = 0;
        for (socket, joiner) in sockets.iter().zip(joiners.iter_mut()) {
            if joiner.is_joined() {
                continue;
            }
            pending += 1;
            if joiner.poll_timeout().is_some_and(|t| t <= now) {
                joiner.handle_timeout(now);
            }
            while let Some(n) = joiner.poll_transmit(now, &mut buf) {
                socket.send_one(&buf[..n], Some(server))?;
            }
            loop {
                match socket.recv_one(&mut buf) {
                    Ok(n) => {
                        if let JoinEvent::Rejected(reason) = joiner.handle_datagram(now, &buf[..n])
                        {
                            return Err(io::Error::other(format!(
                                "the game server at {server} refused a client (reason {reason}: {})",
                                match reason {
                                    1 => "its client table is full; raise --max-clients",
                                    2 => "bad cookie",
                                    3 => "expired cookie",
                                    _ => "unknown",
                                }
                            )));
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                        return Err(io::Error::new(
                            e.kind(),
                            format!("--server {server}: port unreachable: no game server there"),
                        ))
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        if pending == 0 {
            return Ok(());
        }
        if now >= deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "--server {server}: {pending} of {} clients could not join within {timeout:?}: \
                     no game server answered (is `latlab serve` running there?)",
                    sockets.len()
                ),
            ));
        }
        let socks: Vec<&UdpSocket> = sockets.iter().collect();
        wait_any_readable(&socks, Some(Duration::from_millis(10)))?;
    }
}

/// A flooding client: a joined socket that sends game packets far above a fair rate.
#[derive(Debug)]
pub struct Flood<'a> {
    /// Its socket (joined).
    pub socket: &'a UdpSocket,
    /// Its schedule (a run of its own, so its copies never count as measurements).
    pub probe: ProbeConfig,
}

/// How the measuring clients run.
#[derive(Clone, Debug)]
pub struct GameClientConfig {
    /// The probes: sent by the first client, flow 0 only.
    pub probe: ProbeConfig,
    /// The game server.
    pub server: SocketAddr,
    /// Datagrams per batch call.
    pub batch: usize,
    /// How long to wait for copies after the last probe.
    pub grace_ns: u64,
    /// CPU to pin the client loop to.
    pub cpu: Option<usize>,
}

/// What the clients measured.
#[derive(Clone, Debug)]
pub struct GameClientResult {
    /// Copies, completeness and latencies.
    pub report: FanoutReport,
    /// When the first probe was due.
    pub start_ns: u64,
    /// Probes per second that actually left.
    pub achieved_pps: f64,
    /// Flood packets sent, when there was a flood.
    pub flood_sent: u64,
    /// Cut short by the stop flag.
    pub stopped_early: bool,
}

/// Runs the measuring clients on `sockets` (all joined; the first one sends the probes) and,
/// optionally, a flooding client in the same loop.
pub fn run_clients(
    sockets: &[UdpSocket],
    config: &GameClientConfig,
    flood: Option<Flood<'_>>,
    stop: &Stop,
    progress: &mut dyn FnMut(Progress),
) -> io::Result<GameClientResult> {
    if let Some(cpu) = config.cpu {
        cpu::pin_current_thread(cpu)?;
    }
    let _ = cpu::set_timer_slack_ns(1);
    let mut probe_cfg = config.probe.clone();
    probe_cfg.flows = 1;
    probe_cfg.start_ns = now_ns() + 5_000_000;
    let invalid = |e| io::Error::new(io::ErrorKind::InvalidInput, e);
    let mut sender = Sender::new(&probe_cfg).map_err(invalid)?;
    let mut meter = FanoutMeter::new(&probe_cfg, sockets.len() as u32);
    let mut flood = match flood {
        Some(f) => {
            let mut cfg = f.probe.clone();
            cfg.flows = 1;
            cfg.start_ns = probe_cfg.start_ns;
            Some((
                f.socket,
                Sender::new(&cfg).map_err(invalid)?,
                vec![0u8; cfg.payload_len],
                SendBatch::new(config.batch, cfg.payload_len),
            ))
        }
        None => None,
    };
    let mut flood_sent = 0u64;
    let len = probe_cfg.payload_len;
    let mut scratch = vec![0u8; len];
    let mut tx = SendBatch::new(config.batch, len);
    let mut rx = RecvBatch::new(config.batch, len.max(2048));
    let (mut first_send, mut last_send, mut sent_total) = (None::<u64>, 0u64, 0u64);
    let mut done_at: Option<u64> = None;
    let mut next_progress = 0u64;
    let stopped_early = loop {
        if stop.is_raised() {
            break true;
        }
        let now = now_ns();
        while !tx.is_full() {
            let Some(t) = sender.poll_transmit(now, &mut scratch) else {
                break;
            };
            if let Some(slot) = tx.push(t.len, Some(config.server)) {
                slot.copy_from_slice(&scratch[..t.len]);
            }
        }
        if !tx.is_empty() {
            let t = now_ns();
            for i in 0..tx.len() {
                if let Some(slot) = tx.slot_mut(i) {
                    probe::Packet::new_unchecked(slot).set_actual_send_ns(t);
                }
            }
            let n = sockets[0].send_batch(&mut tx)?;
            if n > 0 {
                first_send.get_or_insert(t);
                last_send = t;
                sent_total += n as u64;
            }
        }
        if let Some((socket, fsender, fscratch, ftx)) = flood.as_mut() {
            while !ftx.is_full() {
                let Some(t) = fsender.poll_transmit(now, fscratch) else {
                    break;
                };
                if let Some(slot) = ftx.push(t.len, Some(config.server)) {
                    slot.copy_from_slice(&fscratch[..t.len]);
                }
            }
            flood_sent += socket.send_batch(ftx)? as u64;
        }
        for (i, socket) in sockets.iter().enumerate() {
            loop {
                let got = socket.recv_batch(&mut rx)?;
                for pkt in rx.iter() {
                    meter.handle_response(i, pkt.rx_ns, pkt.data);
                }
                if got < rx.capacity() {
                    break;
                }
            }
        }
        if let Some((socket, ..)) = flood.as_ref() {
            // The flooder receives copies too; they are read and thrown away.
            while socket.recv_batch(&mut rx)? == rx.capacity() {}
        }
        if now >= next_progress {
            next_progress = now + 100_000_000;
            progress(Progress {
                elapsed_ns: now
                    .saturating_sub(probe_cfg.start_ns)
                    .min(probe_cfg.duration_ns),
                total_ns: probe_cfg.duration_ns,
                sent: sent_total,
                received: meter.copies_received(),
            });
        }
        let sending = sender.poll_timeout().is_some() || !tx.is_empty();
        if done_at.is_none() && !sending {
            done_at = Some(now);
        }
        if let Some(t) = done_at {
            let expected = sent_total * sockets.len() as u64;
            if now >= t + config.grace_ns || meter.distinct_copies() >= expected {
                break false;
            }
        }
    };
    let span = last_send.saturating_sub(first_send.unwrap_or(last_send));
    Ok(GameClientResult {
        report: meter.report(&sender.counts()),
        start_ns: probe_cfg.start_ns,
        achieved_pps: if sent_total < 2 || span == 0 {
            0.0
        } else {
            (sent_total - 1) as f64 * 1e9 / span as f64
        },
        flood_sent,
        stopped_early,
    })
}

/// The model game server on an AF_XDP socket whose program redirects the server's UDP port:
/// IPv4 and UDP are handled in user space, and each client's MAC address is learnt from the
/// frames it sends (a client is always heard before it is sent to: it joins first).
pub fn serve_xdp(
    socket: &mut latlab_io::xdp::XdpSocket,
    config: &GameServerConfig,
    stop: &Stop,
    live: &ServerLive,
) -> io::Result<ServerCounters> {
    use latlab_wire::{ethernet, udp_frame};
    use std::collections::HashMap;
    use std::net::SocketAddrV4;
    let mut server = Server::new(config.game.clone());
    // Bounded: entries beyond a few per table slot are not learnt.
    let max_macs = config.game.max_clients.saturating_mul(4).max(64);
    let mut macs: HashMap<SocketAddr, [u8; 6]> = HashMap::new();
    let mut out: Vec<(Vec<u8>, usize)> = Vec::new();
    let mut answer = [0u8; 128];
    while !stop.is_raised() {
        if config.poll == PollMode::Block
            && !socket.wait_readable(Some(Duration::from_millis(50)))?
        {
            publish(&server, live);
            continue;
        }
        let mut used = 0usize;
        let push = |out: &mut Vec<(Vec<u8>, usize)>, used: &mut usize| -> usize {
            if *used == out.len() {
                out.push((vec![0u8; 2048], 0));
            }
            *used += 1;
            *used - 1
        };
        let now = now_ns();
        let n = socket.recv_batch(|frame| {
            let received = udp_frame::Frame::new_unchecked(frame);
            let Ok(d) = udp_frame::Repr::parse(&received) else {
                return;
            };
            let (from, ours, our_mac, payload) = (d.src, d.dst, d.dst_mac, received.payload());
            if macs.len() < max_macs || macs.contains_key(&SocketAddr::V4(from)) {
                macs.insert(SocketAddr::V4(from), d.src_mac.0);
            }
            // The frame from us to the client at `to` (MAC `mac`) carrying `payload_len` bytes.
            let to_client = |to: SocketAddrV4, mac: [u8; 6], payload_len: usize| udp_frame::Repr {
                src_mac: our_mac,
                dst_mac: ethernet::Address(mac),
                src: ours,
                dst: to,
                payload_len,
            };
            let verdict = server.handle_datagram(now, SocketAddr::V4(from), payload);
            if let Verdict::FanOut { recipients } = verdict {
                tsc::spin_cycles(config.work_cycles);
                for to in recipients {
                    let (SocketAddr::V4(to4), Some(mac)) = (to, macs.get(to)) else {
                        live.unroutable.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let i = push(&mut out, &mut used);
                    match to_client(*to4, *mac, payload.len()).emit_into(&mut out[i].0, payload) {
                        Ok(len) => out[i].1 = len,
                        Err(_) => used -= 1,
                    }
                }
            }
            while let Some((to, len)) = server.poll_transmit(&mut answer) {
                let (SocketAddr::V4(to4), Some(mac)) = (to, macs.get(&to)) else {
                    live.unroutable.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let i = push(&mut out, &mut used);
                match to_client(to4, *mac, len).emit_into(&mut out[i].0, &answer[..len]) {
                    Ok(l) => out[i].1 = l,
                    Err(_) => used -= 1,
                }
            }
        })?;
        if n == 0 {
            std::hint::spin_loop();
            continue;
        }
        for (frame, len) in &out[..used] {
            if !socket.send(&frame[..*len])? {
                socket.flush_tx()?;
                let _ = socket.send(&frame[..*len])?;
            }
        }
        socket.flush_tx()?;
        publish(&server, live);
    }
    publish(&server, live);
    Ok(server.counters().clone())
}
