//! `latlab serve`: the model game server on a kernel UDP socket or an AF_XDP socket, from
//! checked options to a report whose `--json` file is written before it is returned.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::game::{GameServerConfig, ServerIo, ServerLive};
use latlab_engine::Stop;
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_io::udpmib::UdpMib;
use latlab_io::xdp::{SourceDrops, SourceLimit, XdpSocket};
use latlab_stats::stalls::HostStalls;

use crate::middle::ports::{open_endpoint, EndpointSettings};

use crate::command::{watched, write_json, CommandError, View};
use crate::cores::{PollChoice, Role, Seat};
use crate::echo::failures_json;
use crate::losses::UdpJson;

/// Everything `latlab serve` takes, checked.
#[derive(Clone, Debug)]
pub struct ServeOptions {
    /// Address and port to serve on.
    pub listen: SocketAddr,
    /// Packet I/O.
    pub io: ServerIo,
    /// The AF_XDP interface; `Some` exactly when `io` is [`ServerIo::Xdp`].
    pub iface: Option<String>,
    /// AF_XDP UMEM frames, a power of two from 64 to 1048576.
    pub xdp_frames: u32,
    /// `SO_RCVBUF`, bytes (kernel sockets); the system's default when `None`.
    pub rcvbuf: Option<usize>,
    /// Emulated work per game packet, in TSC cycles.
    pub work_cycles: u64,
    /// Size of the client table, 1..=65535.
    pub max_clients: usize,
    /// Per-client packet-rate limit, packets per second: kept by the game core's token
    /// buckets and, over AF_XDP, by a per-source bucket in the XDP program too (as deep as
    /// the core's), which drops a flooding source's excess before it reaches user space.
    pub rate_limit: Option<f64>,
    /// A client not heard from for this long is removed from the table; `None`: never.
    pub idle_timeout: Option<Duration>,
    /// Most clients one host (an IPv4 address, an IPv6 /64) may hold; `None`: no cap below
    /// `max_clients`.
    pub max_clients_per_host: Option<usize>,
    /// Sleep or spin; [`PollChoice::Auto`]: as the core plan says ([`crate::cores`]).
    pub poll: PollChoice,
    /// Pin the server to this CPU (with `auto`: spin there if nobody claimed it, else block
    /// there).
    pub cpu: Option<usize>,
    /// Stop after this long (else when the stop flag is raised).
    pub duration: Option<Duration>,
    /// Write the final counters to this JSON file.
    pub json: Option<PathBuf>,
}

impl ServeOptions {
    /// Checks that the flags go together (AF_XDP needs an interface) and that the `--json`
    /// file can be written, before anything runs.
    pub fn check(&self) -> Result<(), CommandError> {
        if let Some(path) = &self.json {
            crate::command::check_writable(path)?;
        }
        if self.io == ServerIo::Xdp && self.iface.is_none() {
            return Err(CommandError::Options(
                "--io xdp needs --iface: the interface whose frames AF_XDP takes".into(),
            ));
        }
        Ok(())
    }
}

/// What a server run did; its JSON file, if asked for, is already written.
#[derive(Clone, Debug)]
pub struct ServeReport {
    /// The final counters, as written to `--json` (and printed).
    pub json: serde_json::Value,
    /// The host's stalls of the server's loop over the run.
    pub host_stalls: Option<HostStalls>,
}

impl ServeReport {
    /// The text printed at the end of a run: the JSON, pretty, and the host's stalls in a line.
    pub fn text(&self) -> String {
        match &self.host_stalls {
            Some(stalls) => format!("{:#}\n{}", self.json, stalls.line()),
            None => format!("{:#}", self.json),
        }
    }
}

/// The game server's two kinds of socket.
enum ServeSocket {
    Udp(UdpSocket),
    Xdp(Box<XdpSocket>),
}

/// Opens the socket `options` name, serves until `stop` is raised or the duration is over,
/// writes the JSON file and returns the counters.
pub fn run(
    options: &ServeOptions,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<ServeReport, CommandError> {
    options.check()?;
    let listen = options.listen;
    let socket = match (&options.iface, options.io) {
        (Some(iface), ServerIo::Xdp) => {
            let endpoint = EndpointSettings {
                frames: Some(options.xdp_frames),
                // As deep as the game core's buckets: the program drops nothing the core would pass.
                source_limit: options.rate_limit.and_then(|pps| {
                    SourceLimit::with_burst(pps, latlab_game::ServerConfig::default().rate_burst)
                }),
                ..EndpointSettings::port(listen.port())
            };
            let s = open_endpoint(iface, &endpoint)
                .map_err(CommandError::setup(format!("--iface {iface}")))?;
            ServeSocket::Xdp(Box::new(s))
        }
        _ => {
            let opts = UdpOptions {
                rcvbuf: options.rcvbuf,
                ..UdpOptions::default()
            };
            let s = UdpSocket::bind(listen, &opts)
                .map_err(CommandError::setup(format!("--listen {listen}")))?;
            ServeSocket::Udp(s)
        }
    };
    // The XDP program's drops, read while it runs and at the end.
    let xdp_drops: Option<SourceDrops> = match &socket {
        ServeSocket::Xdp(s) => s.source_drops().map_err(CommandError::setup(
            "--rate-limit over --io xdp".to_string(),
        ))?,
        ServeSocket::Udp(_) => None,
    };
    let read_xdp_drops = || xdp_drops.as_ref().and_then(|d| d.read().ok());
    let seat = Seat::take(Role::Loop, "latlab serve", options.poll, options.cpu);
    let mut secret = [0u8; 16];
    secret[..8].copy_from_slice(&latlab_io::clock::now_ns().to_le_bytes());
    secret[8..].copy_from_slice(&latlab_io::tsc::read().to_le_bytes());
    let config = GameServerConfig {
        io: options.io,
        work_cycles: options.work_cycles,
        batch: 32,
        poll: seat.poll(),
        switch: Some(seat.switch().clone()),
        game: latlab_game::ServerConfig {
            max_clients: options.max_clients,
            rate_limit_pps: options.rate_limit,
            idle_timeout_ns: options
                .idle_timeout
                .map(|d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)),
            max_clients_per_host: options.max_clients_per_host,
            secret,
            ..latlab_game::ServerConfig::default()
        },
        count_from: None,
    };
    view.started(&match &socket {
        ServeSocket::Udp(s) => format!(
            "latlab serve: listening on {} ({} I/O, SO_RCVBUF {} bytes, {} cycles of work; \
             {}); Ctrl-C stops",
            s.local_addr()?,
            options.io.name(),
            s.recv_buffer_size()?,
            options.work_cycles,
            seat.placement().line()
        ),
        ServeSocket::Xdp(s) => format!(
            "latlab serve: AF_XDP on {}, UDP port {} ({:?}, {} cycles of work; {}); Ctrl-C \
             stops",
            s.ifname(),
            listen.port(),
            s.mode(),
            options.work_cycles,
            seat.placement().line()
        ),
    });
    let live = Arc::new(ServerLive::default());
    // This process's namespace, the server's: what its UDP stack dropped, read around the run.
    let mib = UdpMib::open().ok();
    let udp_before = mib.as_ref().and_then(|m| m.read().ok());
    let show = || {
        let mut line = format!(
            "clients {}  received {}  copies sent {}  dropped {}",
            live.clients.load(Relaxed),
            live.received.load(Relaxed),
            live.copies.load(Relaxed),
            live.dropped.load(Relaxed)
        );
        if let Some(n) = read_xdp_drops() {
            line.push_str(&format!("  rate-limited in XDP {n}"));
        }
        line
    };
    let c = seat
        .run(|| {
            watched(options.duration, stop, view, show, || match socket {
                ServeSocket::Udp(s) => latlab_engine::game::serve(&s, &config, stop, &live),
                ServeSocket::Xdp(s) => {
                    latlab_engine::game::serve_xdp(*s, listen.port(), &config, stop, &live)
                }
            })
        })
        .map_err(|source| CommandError::Run {
            engine: "game server placement",
            source,
        })?
        .map_err(|source| CommandError::Run {
            engine: "game server",
            source,
        })?;
    let mut json = serde_json::json!({
        "listen": listen.to_string(),
        "io": options.io.name(),
        "received": c.received,
        "game_packets": c.game_packets,
        "copies": c.copies,
        "joins": c.joins,
        "leaves": c.leaves,
        "idle_expired": c.idle_expired,
        "dropped": {
            "malformed": c.malformed,
            "oversized": c.oversized,
            "unknown_sender": c.unknown_sender,
            "bad_cookie": c.bad_cookie,
            "expired": c.expired,
            "table_full": c.table_full,
            "rate_limited": c.rate_limited,
            "short_join": c.short_join,
            "host_full": c.host_full,
        },
        "send_failed": failures_json(&live.send_failures.snapshot()),
        // Datagrams the XDP program dropped for a source above --rate-limit, before user
        // space saw them (not in `received`); null without the program's limit.
        "xdp_rate_limited": read_xdp_drops(),
        // Datagrams the kernel dropped at the server's socket before the server read them
        // (not in `received`): the UDP socket's full receive buffer, or over AF_XDP the full
        // RX ring and the empty fill ring; read at the end.
        "kernel_drops": live.kernel_drops(),
        "placement": seat.placement().to_value(),
    });
    let udp = mib
        .zip(udp_before)
        .and_then(|(m, before)| Some(UdpJson::from(m.read().ok()?.since(&before))));
    let host_stalls = live.host_stalls();
    json["udp"] = serde_json::to_value(udp).map_err(std::io::Error::other)?;
    json["host_stalls"] = serde_json::to_value(&host_stalls).map_err(std::io::Error::other)?;
    if let Some(path) = &options.json {
        write_json(path, &json)?;
    }
    Ok(ServeReport { json, host_stalls })
}
