//! The measuring clients of the game-server study: the generator with a fan-out meter.
//!
//! N joined sockets; the first sends the probes (flow 0) to the server, and every one of them
//! receives the copies the server makes. The run is [`latlab_probe::Run`] with
//! [`FanoutMeter`] (start time, stop rule, progress), driven by the generator's loop over one
//! kernel UDP port per client; an optional flooding client rides along in the same loop.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use latlab_game::{JoinEvent, Joiner};
use latlab_io::clock::now_ns;
use latlab_io::port::{
    DatagramRx, DatagramTx, NoStamp, PortSizes, SendFailures, SendQueue, UdpMode, UdpPort,
};
use latlab_io::udp::{wait_any_readable, UdpSocket};
use latlab_probe::{FanoutMeter, FanoutReport, ProbeConfig, Run, RunConfig, Sender};
use latlab_stats::stalls::{StallSource, Stalls};

use crate::generator::{self, Background, Drive, Progress, Threads, Wait};
use crate::{PollMode, Stop};

/// The clients' run has no interval log; its intervals are this long.
const INTERVAL_NS: u64 = 1_000_000_000;

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
                                    4 => "this host already holds as many clients as it allows; raise --max-clients-per-host",
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
                    "--server {server}: {pending} of {} clients could not join within {}: \
                     no game server answered (is `latlab serve` running there?)",
                    sockets.len(),
                    latlab_link::format_duration_ns(timeout.as_nanos() as u64)
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
    /// Probes the ports could not send to the server (counted as lost), by cause.
    pub send_failed: SendFailures,
    /// Flood packets the flooder's port could not send to the server, by cause (dropped; the
    /// flood goes on).
    pub flood_send_failed: SendFailures,
    /// Cut short by the stop flag.
    pub stopped_early: bool,
    /// The host's stalls of the clients' loop over the run ([`crate::stalls`]).
    pub host_stalls: Stalls,
}

/// Runs the measuring clients on `sockets` (all joined; the first one sends the probes) and,
/// optionally, a flooding client in the same loop.
pub fn run_clients(
    sockets: &[UdpSocket],
    config: &GameClientConfig,
    flood: Option<Flood<'_>>,
    stop: &Stop,
    progress: &mut (dyn FnMut(Progress) + Send),
) -> io::Result<GameClientResult> {
    let invalid = |e| io::Error::new(io::ErrorKind::InvalidInput, e);
    if sockets.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "at least one client socket is needed",
        ));
    }
    let mut probe = config.probe.clone();
    probe.flows = 1;
    let run_config = RunConfig {
        probe,
        grace_ns: config.grace_ns,
        interval_ns: INTERVAL_NS,
        live: false,
    };
    let clients = sockets.len() as u32;
    let run = Run::new(&run_config, now_ns(), |p| FanoutMeter::new(p, clients)).map_err(invalid)?;
    let longest = flood
        .as_ref()
        .map_or(0, |f| f.probe.payload_len)
        .max(run_config.probe.payload_len);
    let sizes = PortSizes::new(config.batch, longest.max(MIN_RX_SLOT));
    let mut flood_sent = 0u64;
    let mut flood_send_failed = SendFailures::default();
    let flood = match flood {
        Some(f) => {
            let mut cfg = f.probe.clone();
            cfg.flows = 1;
            cfg.start_ns = run.start_ns();
            Some(FloodClient {
                port: UdpPort::new(f.socket, UdpMode::Batched, sizes),
                sender: Sender::new(&cfg).map_err(invalid)?,
                scratch: vec![0u8; cfg.payload_len],
                server: config.server,
                batch: sizes.rx_batch,
                sent: &mut flood_sent,
                send_failed: &mut flood_send_failed,
            })
        }
        None => None,
    };
    // The probes leave through the first client's port (flow 0); copies are read from all.
    let mut ports: Vec<UdpPort<&UdpSocket>> = sockets
        .iter()
        .map(|s| UdpPort::new(s, UdpMode::Batched, sizes))
        .collect();
    let how = Drive {
        wait: Wait::Port,
        target: config.server,
        batch: sizes.rx_batch,
        poll: PollMode::Busy,
        switch: None,
        threads: Threads::OneLoop { cpu: config.cpu },
    };
    let mut send_failed = SendFailures::default();
    let mut host_stalls = Stalls::new(StallSource::Loop);
    let (outcome, stopped_early) = generator::drive_counting(
        &mut ports,
        how,
        run,
        flood,
        stop,
        progress,
        (&mut send_failed, &mut host_stalls),
    )?;
    Ok(GameClientResult {
        report: outcome.meter.report(&outcome.counts),
        start_ns: outcome.start_ns,
        achieved_pps: outcome.achieved_pps(),
        flood_sent,
        send_failed,
        flood_send_failed,
        stopped_early,
        host_stalls,
    })
}

/// Receive slots are at least this long, so foreign datagrams longer than ours are read whole.
const MIN_RX_SLOT: usize = 2048;

/// The flooding client while it runs: its own sender (its own run id, so its copies never
/// count as measurements) on its own port.
struct FloodClient<'a> {
    port: UdpPort<&'a UdpSocket>,
    sender: Sender,
    scratch: Vec<u8>,
    server: SocketAddr,
    batch: usize,
    sent: &'a mut u64,
    send_failed: &'a mut SendFailures,
}

impl Background for Option<FloodClient<'_>> {
    /// Sends the flood packets due at `now` (unstamped; one the server's address cannot take
    /// is counted by cause and dropped), then reads and throws away the copies the flooder
    /// receives.
    fn turn(&mut self, now: u64) -> io::Result<()> {
        let Some(f) = self.as_mut() else {
            return Ok(());
        };
        while !f.port.queue().is_full() {
            let Some(t) = f.sender.poll_transmit(now, &mut f.scratch) else {
                break;
            };
            if let Some(slot) = f.port.queue().push(f.server, t.len) {
                let n = slot.len();
                slot.copy_from_slice(&f.scratch[..n]);
            }
        }
        let failed = &mut *f.send_failed;
        *f.sent += f
            .port
            .flush(&mut NoStamp, |u| failed.count(u.failure))?
            .sent as u64;
        while f.port.recv(|_| {})? == f.batch {}
        Ok(())
    }
}
