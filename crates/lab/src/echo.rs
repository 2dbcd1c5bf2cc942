//! `latlab echo`: the probe reflector on a kernel UDP socket or an AF_XDP socket, from checked
//! options to a report whose `--json` file is written before it is returned.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::middle::ports::{open_endpoint, EndpointSettings};
use latlab_engine::reflector::{self, ReflectorConfig, ReflectorCounters, ReflectorReport};
use latlab_engine::Stop;
use latlab_io::port::{SendFailures, XdpEndpoint};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_io::udpmib::UdpMib;

use crate::losses::UdpJson;

use crate::command::{watched, write_json, CommandError, Io, View};
use crate::cores::{PollChoice, Role, Seat};

/// Everything `latlab echo` takes, checked.
#[derive(Clone, Debug)]
pub struct EchoOptions {
    /// Address and port to listen on.
    pub listen: SocketAddr,
    /// The socket kind: [`Io::Socket`] (a kernel UDP socket with `recvmmsg`/`sendmmsg`
    /// batches) or [`Io::Xdp`] (the listening port's frames taken before the kernel's stack).
    pub io: Io,
    /// The AF_XDP interface; `Some` exactly when `io` is [`Io::Xdp`].
    pub iface: Option<String>,
    /// AF_XDP UMEM frames, a power of two from 64 to 1048576.
    pub xdp_frames: u32,
    /// `SO_RCVBUF` of the kernel socket, bytes; the system's default when `None`.
    pub rcvbuf: Option<usize>,
    /// Spin or sleep; [`PollChoice::Auto`]: as the core plan says ([`crate::cores`]).
    pub poll: PollChoice,
    /// Datagrams per batch call, 1..=1024.
    pub batch: usize,
    /// Write the reflector's receive and transmit times into the probes.
    pub stamp: bool,
    /// Pin the reflector to this CPU (with `auto`: spin there if nobody claimed it, else
    /// block there).
    pub cpu: Option<usize>,
    /// Stop after this long (else when the stop flag is raised).
    pub duration: Option<Duration>,
    /// Write the final counters to this JSON file.
    pub json: Option<PathBuf>,
}

impl EchoOptions {
    /// Checks that the flags go together (a kernel socket or AF_XDP, which needs an
    /// interface) and that the `--json` file can be written, before anything runs.
    pub fn check(&self) -> Result<(), CommandError> {
        if let Some(path) = &self.json {
            crate::command::check_writable(path)?;
        }
        match (self.io, &self.iface) {
            (Io::Socket, _) | (Io::Xdp, Some(_)) => Ok(()),
            (Io::Xdp, None) => Err(CommandError::Options(
                "--io xdp needs --iface: the interface whose frames AF_XDP takes".into(),
            )),
            (other, _) => Err(CommandError::Options(format!(
                "--io {other}: echo runs on --io socket or xdp"
            ))),
        }
    }
}

/// What a reflector run did; its JSON file, if asked for, is already written.
#[derive(Clone, Debug)]
pub struct EchoReport {
    /// The final counters.
    pub counters: ReflectorReport,
    /// The AF_XDP interface, or `None` for a kernel socket.
    pub xdp_iface: Option<String>,
    /// The UDP MIB of the reflector's namespace over the run (namespace-wide: exact in a
    /// namespace of its own); `None` when it could not be read.
    pub udp: Option<UdpJson>,
    /// The host's stalls of the reflector's loop over the run ([`latlab_stats::stalls`]).
    pub host_stalls: Option<latlab_stats::stalls::HostStalls>,
    /// The JSON written to `--json` (also made when no file was asked for).
    pub json: serde_json::Value,
}

impl EchoReport {
    /// The line printed at the end of a run.
    pub fn text(&self) -> String {
        let r = &self.counters;
        let mut line = match self.xdp_iface {
            None => format!(
                "received {}  reflected {}  malformed {}  oversized {}  send-dropped {}",
                r.received, r.reflected, r.malformed, r.oversized, r.send_dropped
            ),
            Some(_) => format!(
                "received {}  reflected {}  malformed {}  send-dropped {}",
                r.received, r.reflected, r.malformed, r.send_dropped
            ),
        };
        if r.send_failed.total() > 0 {
            line.push_str(&format!("  ({})", failures_text(&r.send_failed)));
        }
        // Shown only when there is something to show: the line of a quiet run stays short.
        if let Some(n) = r.kernel_drops.filter(|&n| n > 0) {
            line.push_str(&format!("  kernel-dropped {n}"));
        }
        if let Some(u) = self.udp.filter(|u| u.no_ports + u.in_errors > 0) {
            line.push_str(&format!(
                "  (namespace UDP: no-ports {}, in-errors {}, rcvbuf-errors {})",
                u.no_ports, u.in_errors, u.rcvbuf_errors
            ));
        }
        if let Some(stalls) = &self.host_stalls {
            line.push('\n');
            line.push_str(&stalls.line());
        }
        line
    }
}

/// Opens the socket `options` name, reflects until `stop` is raised or the duration is over,
/// writes the JSON file and returns the counters.
pub fn run(
    options: &EchoOptions,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<EchoReport, CommandError> {
    options.check()?;
    let seat = Seat::take(Role::Loop, "latlab echo", options.poll, options.cpu);
    let config = ReflectorConfig {
        batch: options.batch,
        poll: seat.poll(),
        switch: Some(seat.switch().clone()),
        stamp: options.stamp,
        // Named to every generator that asks, so that one on this host (in any namespace or
        // container of it) takes the clock as shared and reports one-way delays.
        clock: latlab_io::clock::clock_identity(),
        ..ReflectorConfig::default()
    };
    let counters = Arc::new(ReflectorCounters::default());
    let live = Arc::clone(&counters);
    let listen = options.listen;
    // This process's namespace, the reflector's: what its UDP stack dropped, read around
    // the run.
    let mib = UdpMib::open().ok();
    let udp_before = mib.as_ref().and_then(|m| m.read().ok());
    let placed = |e: std::io::Error| CommandError::Run {
        engine: "reflector placement",
        source: e,
    };
    let (counters, json) = match (options.io, &options.iface) {
        (Io::Xdp, Some(iface)) => {
            let endpoint = EndpointSettings {
                frames: Some(options.xdp_frames),
                ..EndpointSettings::port(listen.port())
            };
            let socket = open_endpoint(iface, &endpoint)
                .map_err(CommandError::setup(format!("--iface {iface}")))?;
            let (bind, attach) = socket.mode();
            view.started(&format!(
                "latlab echo: AF_XDP on {iface}, UDP port {} ({bind:?} bind, {attach:?} XDP \
                 program, {}); Ctrl-C stops",
                listen.port(),
                seat.placement().line()
            ));
            let show = || {
                let r = counters.snapshot();
                format!(
                    "received {}  reflected {}  malformed {}",
                    r.received, r.reflected, r.malformed
                )
            };
            let mut port = XdpEndpoint::new(socket, listen.port(), config.port_sizes())
                .map_err(CommandError::setup(format!("--iface {iface}")))?;
            seat.run(|| {
                watched(options.duration, stop, view, show, || {
                    reflector::run(&mut port, &config, stop, &counters)
                })
            })
            .map_err(placed)?
            .map_err(|source| CommandError::Run {
                engine: "AF_XDP reflector",
                source,
            })?;
            drop(port);
            let r = counters.snapshot();
            let json = serde_json::json!({
                "listen": listen.to_string(),
                "io": "xdp",
                "iface": iface,
                "received": r.received,
                "reflected": r.reflected,
                "malformed": r.malformed,
                "send_dropped": r.send_dropped,
                "send_failed": failures_json(&r.send_failed),
                "kernel_drops": r.kernel_drops,
            });
            (r, json)
        }
        _ => {
            let opts = UdpOptions {
                rcvbuf: options.rcvbuf,
                rx_timestamps: true,
                ..UdpOptions::default()
            };
            let socket = UdpSocket::bind(listen, &opts)
                .map_err(CommandError::setup(format!("--listen {listen}")))?;
            let _ = latlab_io::cpu::set_timer_slack_ns(1);
            let source = socket.rx_timestamp_source().name();
            view.started(&format!(
                "latlab echo: listening on {} (timestamps {source}; {}); Ctrl-C stops",
                socket.local_addr()?,
                seat.placement().line(),
            ));
            let show = || {
                let r = counters.snapshot();
                format!(
                    "received {}  reflected {}  malformed {}  oversized {}",
                    r.received, r.reflected, r.malformed, r.oversized
                )
            };
            seat.run(|| {
                watched(options.duration, stop, view, show, || {
                    reflector::run_udp(&socket, &config, stop, &counters)
                })
            })
            .map_err(placed)?
            .map_err(|source| CommandError::Run {
                engine: "reflector",
                source,
            })?;
            let r = counters.snapshot();
            let json = serde_json::json!({
                "listen": listen.to_string(),
                "received": r.received,
                "reflected": r.reflected,
                "malformed": r.malformed,
                "oversized": r.oversized,
                "send_dropped": r.send_dropped,
                "send_failed": failures_json(&r.send_failed),
                "kernel_drops": r.kernel_drops,
                "timestamp_source": source,
            });
            (r, json)
        }
    };
    let udp = mib
        .zip(udp_before)
        .and_then(|(m, before)| Some(UdpJson::from(m.read().ok()?.since(&before))));
    let mut json = json;
    json["placement"] = seat.placement().to_value();
    json["udp"] = serde_json::to_value(udp).map_err(std::io::Error::other)?;
    let host_stalls = live.host_stalls();
    json["host_stalls"] = serde_json::to_value(&host_stalls).map_err(std::io::Error::other)?;
    if let Some(path) = &options.json {
        write_json(path, &json)?;
    }
    Ok(EchoReport {
        counters,
        xdp_iface: match options.io {
            Io::Xdp => options.iface.clone(),
            _ => None,
        },
        udp,
        host_stalls,
        json,
    })
}

/// Datagrams not sent, by cause, as written to `--json`: every cause by its name
/// (`invalid_destination`, `unreachable`, `not_permitted`, …), zeros included.
pub(crate) fn failures_json(failed: &SendFailures) -> serde_json::Value {
    failed
        .iter()
        .map(|(failure, n)| (failure.name().to_string(), serde_json::Value::from(n)))
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// The causes with a count, for a terminal: `unreachable 2, not_permitted 1`.
pub(crate) fn failures_text(failed: &SendFailures) -> String {
    failed
        .iter()
        .filter(|&(_, n)| n > 0)
        .map(|(failure, n)| format!("{} {n}", failure.name()))
        .collect::<Vec<_>>()
        .join(", ")
}
