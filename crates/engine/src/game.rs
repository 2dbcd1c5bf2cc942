//! The model game server's loops and the clients that measure it.
//!
//! The server binds [`latlab_game::Server`] to a socket in one of two ways: one `recvfrom` and
//! one `sendto` per packet and copy, as a plain kernel-socket game server does (the paper's
//! Linux rows), or `recvmmsg`/`sendmmsg` batches. Per game packet it spins the emulated work on
//! the TSC, then sends a copy to every client of the sender's game.
//!
//! The clients ([`run_clients`], in `game/clients.rs`) are N sockets that join through the
//! handshake; the first of them sends probes on an open-loop schedule, and all N receive the
//! copies: the generator run with [`latlab_probe::FanoutMeter`], until the first and until the
//! last client has its copy.

use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use latlab_game::{Server, ServerConfig, ServerCounters, Verdict};
use latlab_io::clock::now_ns;
use latlab_io::tsc;
use latlab_io::udp::{RecvBatch, SendBatch, UdpSocket};

use crate::{PollMode, Stop};

mod clients;

pub use clients::{join_all, run_clients, Flood, GameClientConfig, GameClientResult};

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

/// The model game server on an AF_XDP socket whose program redirects the server's UDP port:
/// IPv4 and UDP are handled in user space, and each client's MAC address is learnt from the
/// frames it sends (a client is always heard before it is sent to: it joins first).
pub fn serve_xdp(
    socket: &mut latlab_io::xdp::XdpSocket,
    config: &GameServerConfig,
    stop: &Stop,
    live: &ServerLive,
) -> io::Result<ServerCounters> {
    use crate::frame;
    use std::collections::HashMap;
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
            let Some(d) = frame::parse_udp(frame) else {
                return;
            };
            let (from, ours, our_mac, payload) = (d.src, d.dst, d.dst_mac, d.payload);
            if macs.len() < max_macs || macs.contains_key(&SocketAddr::V4(from)) {
                macs.insert(SocketAddr::V4(from), d.src_mac);
            }
            let verdict = server.handle_datagram(now, SocketAddr::V4(from), payload);
            if let Verdict::FanOut { recipients } = verdict {
                tsc::spin_cycles(config.work_cycles);
                for to in recipients {
                    let (SocketAddr::V4(to4), Some(mac)) = (to, macs.get(to)) else {
                        live.unroutable.fetch_add(1, Ordering::Relaxed);
                        continue;
                    };
                    let i = push(&mut out, &mut used);
                    match frame::write_udp(&mut out[i].0, (our_mac, *mac), ours, *to4, payload) {
                        Some(len) => out[i].1 = len,
                        None => used -= 1,
                    }
                }
            }
            while let Some((to, len)) = server.poll_transmit(&mut answer) {
                let (SocketAddr::V4(to4), Some(mac)) = (to, macs.get(&to)) else {
                    live.unroutable.fetch_add(1, Ordering::Relaxed);
                    continue;
                };
                let i = push(&mut out, &mut used);
                match frame::write_udp(&mut out[i].0, (our_mac, *mac), ours, to4, &answer[..len]) {
                    Some(l) => out[i].1 = l,
                    None => used -= 1,
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
