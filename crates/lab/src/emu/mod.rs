//! `latlab emu`: the link emulator bridging two interfaces over AF_PACKET (one loop, or a
//! pipeline of pinned RX and TX stages) or AF_XDP, from checked options to a report whose
//! `--json` file is written before it is returned.

pub mod api;
pub mod attach;
pub mod config;
pub mod flow;
pub mod knob;
pub mod metrics;
pub mod pcap;
pub mod preset;
pub mod report;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use latlab_engine::emulator::{self, EmulatorLive, EmulatorReport};
use latlab_engine::{PollMode, Stop};
use latlab_io::xdp::XdpSocket;

use crate::middle::PortSettings;
use latlab_link::Flows;

pub use latlab_io::packet::RxRing;

use crate::command::{watched, write_json, CommandError, Io, View};
use config::LinkSources;

/// How the AF_PACKET bridge is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EmuMode {
    /// The pipeline when 3 or more cores are free, else one loop.
    #[default]
    Auto,
    /// One loop for both directions.
    RunToCompletion,
    /// An RX stage and a TX stage on their own pinned cores, joined by lock-free rings.
    Pipeline,
}

/// How the run-to-completion loop waits for frames and departures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum EmuPoll {
    /// Spin when [`EmuPoll::SPIN_CPUS`] or more CPUs are allowed, else sleep.
    #[default]
    Auto,
    /// Spin: frames picked up within a microsecond, one core at 100%.
    Busy,
    /// Sleep until a frame arrives or shortly before the next departure, then spin the last
    /// stretch: no core of its own needed.
    Block,
}

impl EmuPoll {
    /// The CPUs [`EmuPoll::Auto`] needs before it spins: one for the emulator, and two for
    /// what sends and answers through it.
    pub const SPIN_CPUS: usize = 3;

    /// The wait of a loop allowed `cpus` CPUs.
    pub fn resolve(self, cpus: usize) -> PollMode {
        match self {
            EmuPoll::Busy => PollMode::Busy,
            EmuPoll::Block => PollMode::Block,
            EmuPoll::Auto if cpus >= EmuPoll::SPIN_CPUS => PollMode::Busy,
            EmuPoll::Auto => PollMode::Block,
        }
    }
}

/// How `poll` waits, for the line that starts the bridge.
fn waits(poll: PollMode) -> &'static str {
    match poll {
        PollMode::Busy => "spinning",
        PollMode::Block => "sleeping until due, then spinning the last microseconds",
    }
}

/// Everything `latlab emu` takes, checked.
#[derive(Clone, Debug)]
pub struct EmuOptions {
    /// First interface of the bridge (unused with [`EmuOptions::attach`]).
    pub iface_a: String,
    /// Second interface of the bridge (unused with [`EmuOptions::attach`]).
    pub iface_b: String,
    /// Splice the link into this namespace's veth instead ([`attach`]): side A is the
    /// namespace's (the container's), side B the bridge's.
    pub attach: Option<attach::Target>,
    /// The namespace both interfaces are in, where their sockets are opened (`None`: this
    /// one). The API and the files stay in this one.
    pub netns: Option<String>,
    /// The A→B links, validated: the default and the per-flow rules (`--flow`).
    pub a_to_b: Flows,
    /// The B→A links, validated.
    pub b_to_a: Flows,
    /// Largest frame bridged, bytes.
    pub frame_size: usize,
    /// Spin or sleep (run to completion only).
    pub poll: EmuPoll,
    /// One loop or a pipeline.
    pub mode: EmuMode,
    /// The AF_PACKET receive ring.
    pub rx_ring: RxRing,
    /// [`Io::Packet`] (AF_PACKET rings beside the kernel stack) or [`Io::Xdp`] (every frame of
    /// both interfaces taken before the kernel stack; run to completion only).
    pub io: Io,
    /// AF_XDP UMEM frames per interface, a power of two from 64 to 1048576.
    pub xdp_frames: u32,
    /// Stop after this long (else when the stop flag is raised).
    pub duration: Option<Duration>,
    /// Write the counters by cause and the release-error histograms to this JSON file.
    pub json: Option<PathBuf>,
    /// Serve the HTTP API ([`crate::emu::api`]) on this address (run to completion only).
    pub api: Option<SocketAddr>,
    /// Let the API listen on an address other than loopback.
    pub api_public: bool,
    /// Write what left each side to this pcapng file ([`crate::emu::pcap`]; run to completion
    /// only).
    pub pcap: Option<PathBuf>,
}

impl EmuOptions {
    /// Options for bridging `iface_a` and `iface_b` with the links `sources` make (file,
    /// flags, per-direction specs), and defaults for everything else; checked.
    pub fn new(
        iface_a: String,
        iface_b: String,
        sources: &LinkSources,
    ) -> Result<EmuOptions, CommandError> {
        let (a_to_b, b_to_a) = config::links(sources).map_err(CommandError::Usage)?;
        Ok(EmuOptions {
            iface_a,
            iface_b,
            attach: None,
            netns: None,
            a_to_b,
            b_to_a,
            frame_size: sources.frame_size,
            poll: EmuPoll::Auto,
            mode: EmuMode::Auto,
            rx_ring: RxRing::V2,
            io: Io::Packet,
            xdp_frames: 4096,
            duration: None,
            json: None,
            api: None,
            api_public: false,
            pcap: None,
        })
    }

    /// Checks that the flags go together (two different interfaces; AF_XDP runs to
    /// completion, on frames of at most 3840 bytes) and that the `--json` file can be
    /// written, before anything runs.
    pub fn check(&self) -> Result<(), CommandError> {
        if !matches!(self.io, Io::Packet | Io::Xdp) {
            return Err(CommandError::Options(format!(
                "--io {}: the emulator bridges frames over --io packet or xdp",
                self.io
            )));
        }
        if self.io == Io::Xdp {
            if self.mode == EmuMode::Pipeline {
                return Err(CommandError::Options(
                    "--mode pipeline needs --io packet: AF_XDP gives one socket per interface \
                     queue, which the pipeline's RX and TX stages cannot share; use --mode \
                     run-to-completion"
                        .into(),
                ));
            }
            if self.frame_size + 256 > 4096 {
                return Err(CommandError::Options(format!(
                    "--frame-size {} is too large for --io xdp (at most 3840 bytes)",
                    self.frame_size
                )));
            }
        }
        if self.attach.is_none() && self.iface_a == self.iface_b {
            return Err(CommandError::Usage(format!(
                "--iface-a and --iface-b are both {}: the bridge joins two different interfaces",
                self.iface_a
            )));
        }
        if let Some(path) = &self.json {
            crate::command::check_writable(path)?;
        }
        if let Some(path) = &self.pcap {
            crate::command::check_writable(path)?;
            if self.mode == EmuMode::Pipeline {
                return Err(CommandError::Usage(
                    "--pcap does not work with --mode pipeline: its TX stage keeps no copies; \
                     use --mode run-to-completion (or auto)"
                        .into(),
                ));
            }
        }
        if let Some(addr) = self.api {
            if !addr.ip().is_loopback() && !self.api_public {
                return Err(CommandError::Usage(format!(
                    "--api {addr}: not a loopback address; anyone who reaches it could change \
                     the link, so add --api-public to serve it there"
                )));
            }
            if self.mode == EmuMode::Pipeline {
                return Err(CommandError::Usage(
                    "--api does not work with --mode pipeline: its stages take no changes while \
                     running; use --mode run-to-completion (or auto)"
                        .into(),
                ));
            }
        }
        Ok(())
    }
}

/// What a bridge run did; its JSON file, if asked for, is already written.
#[derive(Clone, Debug)]
pub struct EmuReport {
    /// Counters and release errors per direction.
    pub report: EmulatorReport,
}

impl EmuReport {
    /// The lines printed at the end of a run.
    pub fn text(&self) -> String {
        crate::emu::report::summary_text(&self.report)
    }
}

/// Opens the sockets `options` name (splicing into the namespace of `--attach` first, and
/// putting its wiring back after), bridges until `stop` is raised or the duration is over,
/// writes the JSON file and returns the counters.
pub fn run(
    options: &EmuOptions,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<EmuReport, CommandError> {
    options.check()?;
    let Some(target) = &options.attach else {
        return run_bridge(options, stop, view);
    };
    let spliced = attach::Spliced::splice(target, options.frame_size)
        .map_err(|e| CommandError::Options(e.to_string()))?;
    view.started(&spliced.describe());
    let bridged = EmuOptions {
        iface_a: spliced.iface_a().to_string(),
        iface_b: spliced.iface_b().to_string(),
        attach: None,
        netns: Some(spliced.netns().to_string()),
        ..options.clone()
    };
    let report = run_bridge(&bridged, stop, view);
    let restored = spliced.restore();
    match (report, restored) {
        (Ok(report), Ok(())) => Ok(report),
        (report, Err(e)) => {
            if let Err(run) = report {
                view.note(&format!("latlab emu: {run}"));
            }
            Err(CommandError::Options(e.to_string()))
        }
        (Err(e), Ok(())) => Err(e),
    }
}

/// The bridge between the two interfaces `options` name.
fn run_bridge(
    options: &EmuOptions,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<EmuReport, CommandError> {
    let report = match options.io {
        Io::Xdp => run_xdp(options, stop, view),
        _ => run_packet(options, stop, view),
    }?;
    if let Some(path) = &options.json {
        write_json(path, &crate::emu::report::EmuJson::new(&report).to_value())?;
    }
    Ok(EmuReport { report })
}

/// What the bridge's ports are opened with: slots for `--frame-size`, frames as they were on
/// the wire whatever the senders' offloads.
fn ports(options: &EmuOptions) -> PortSettings {
    PortSettings::emulator(options.frame_size, options.rx_ring, options.xdp_frames)
}

/// Runs `open` in the namespace of [`EmuOptions::netns`] (on a thread of its own), or here.
fn in_netns<T: Send + 'static>(
    options: &EmuOptions,
    open: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    match &options.netns {
        Some(ns) => latlab_io::netns::run_in(ns, open)?,
        None => open(),
    }
}

/// The AF_PACKET bridge: one loop, or the pipeline.
fn run_packet(
    options: &EmuOptions,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<EmulatorReport, CommandError> {
    let ports = ports(options);
    let open = |flag: &str, ifname: &str| {
        let (ports, name) = (ports.clone(), ifname.to_string());
        in_netns(options, move || ports.open_packet(&name))
            .map_err(CommandError::setup(format!("{flag} {ifname}")))
    };
    let mut sock_a = open("--iface-a", &options.iface_a)?;
    let mut sock_b = open("--iface-b", &options.iface_b)?;
    let cpus = latlab_io::cpu::allowed_cpus().unwrap_or_default();
    let poll = options.poll.resolve(cpus.len());
    let pipeline = match options.mode {
        EmuMode::Pipeline => true,
        EmuMode::RunToCompletion => false,
        // The API and the capture are served by the one loop only, and only the one loop
        // sleeps.
        EmuMode::Auto => {
            cpus.len() >= 3
                && options.api.is_none()
                && options.pcap.is_none()
                && options.poll != EmuPoll::Block
        }
    };
    // The pipeline's TX stage writes through sockets of its own.
    let tx_sockets = if pipeline {
        Some((
            open("--iface-a", &options.iface_a)?,
            open("--iface-b", &options.iface_b)?,
        ))
    } else {
        None
    };
    view.started(&format!(
        "latlab emu: bridging {} and {} ({}); Ctrl-C stops",
        options.iface_a,
        options.iface_b,
        if pipeline {
            "pipeline: RX and TX stages on their own cores".to_string()
        } else {
            format!("run to completion: one loop, {}", waits(poll))
        }
    ));
    watched_bridge(options, stop, view, |live| match tx_sockets {
        Some((tx_a, tx_b)) => {
            let n = cpus.len();
            let stage_cpus = if n >= 2 {
                (Some(cpus[n - 2]), Some(cpus[n - 1]))
            } else {
                (None, None)
            };
            let sockets = emulator::PipelineSockets {
                rx_a: sock_a,
                rx_b: sock_b,
                tx_a,
                tx_b,
            };
            let (ab, ba) = (options.a_to_b.clone(), options.b_to_a.clone());
            emulator::run_pipeline(sockets, ab, ba, 4096, stage_cpus, stop, live)
        }
        None => one_loop(options, poll, &mut sock_a, &mut sock_b, stop, live),
    })
}

/// The run-to-completion bridge over one AF_XDP socket per interface, each fed every frame of
/// its interface by an XDP program.
fn run_xdp(
    options: &EmuOptions,
    stop: &Stop,
    view: &mut dyn View,
) -> Result<EmulatorReport, CommandError> {
    let ports = ports(options);
    let open = |flag: &str, ifname: &str| {
        let (ports, name) = (ports.clone(), ifname.to_string());
        in_netns(options, move || ports.open_xdp(&name))
            .map_err(CommandError::setup(format!("{flag} {ifname}")))
    };
    let mut sock_a = open("--iface-a", &options.iface_a)?;
    let mut sock_b = open("--iface-b", &options.iface_b)?;
    let describe = |s: &XdpSocket| {
        let (bind, attach) = s.mode();
        format!(
            "{}: {} mode, {} XDP",
            s.ifname(),
            format!("{bind:?}").to_lowercase(),
            format!("{attach:?}").to_lowercase()
        )
    };
    let cpus = latlab_io::cpu::allowed_cpus().unwrap_or_default().len();
    let poll = options.poll.resolve(cpus);
    view.started(&format!(
        "latlab emu: bridging {} and {} over AF_XDP ({}; {}), run to completion, {}; Ctrl-C stops",
        options.iface_a,
        options.iface_b,
        describe(&sock_a),
        describe(&sock_b),
        waits(poll),
    ));
    watched_bridge(options, stop, view, |live| {
        one_loop(options, poll, &mut sock_a, &mut sock_b, stop, live)
    })
}

/// Runs `bridge` with fresh live counters, which `view` shows while it runs, until `stop` is
/// raised or the duration is over. With `--api`, the API is served on a thread of its own for
/// as long as the bridge runs; with `--pcap`, another thread writes the capture from the
/// engine's tap ring and completes the file once the bridge has stopped.
fn watched_bridge(
    options: &EmuOptions,
    stop: &Stop,
    view: &mut dyn View,
    bridge: impl FnOnce(&EmulatorLive) -> std::io::Result<EmulatorReport>,
) -> Result<EmulatorReport, CommandError> {
    let api = options
        .api
        .map(|addr| {
            crate::emu::api::Api::bind(addr).map_err(CommandError::setup(format!("--api {addr}")))
        })
        .transpose()?;
    if let Some(api) = &api {
        view.started(&format!(
            "latlab emu: API on http://{}/conditions and /metrics",
            api.addr()
        ));
    }
    let live = EmulatorLive::default();
    let done = AtomicBool::new(false);
    let pcap_done = AtomicBool::new(false);
    let links = [options.a_to_b.clone(), options.b_to_a.clone()];
    let (report, pcap) = std::thread::scope(|s| {
        if let Some(api) = &api {
            let (live, done) = (&live, &done);
            s.spawn(move || api.serve(links, &live.control, done));
        }
        let pcap = options.pcap.as_ref().map(|path| {
            let (ring, records) = emulator::tap_ring(crate::emu::pcap::PCAP_RING_FRAMES);
            live.control.set_tap(ring);
            let ifaces = [options.iface_a.as_str(), options.iface_b.as_str()];
            let pcap_done = &pcap_done;
            s.spawn(move || crate::emu::pcap::write(path, ifaces, records, pcap_done))
        });
        let report = watched(
            options.duration,
            stop,
            view,
            || counters(&live),
            || bridge(&live),
        );
        done.store(true, Relaxed);
        pcap_done.store(true, std::sync::atomic::Ordering::Release);
        let pcap = pcap.map(|writer| writer.join());
        (report, pcap)
    });
    let report = report.map_err(|source| CommandError::Run {
        engine: "emulator",
        source,
    })?;
    if let (Some(path), Some(written)) = (&options.pcap, pcap) {
        written
            .map_err(|_| CommandError::Io(std::io::Error::other("the --pcap writer panicked")))?
            .map_err(CommandError::setup(format!("--pcap {}", path.display())))?;
    }
    Ok(report)
}

/// The run-to-completion loop over the two ports, with the links of `options`, waiting as
/// `poll` (resolved once, as the start line says).
fn one_loop<P: emulator::Port>(
    options: &EmuOptions,
    poll: PollMode,
    a: &mut P,
    b: &mut P,
    stop: &Stop,
    live: &EmulatorLive,
) -> std::io::Result<EmulatorReport> {
    let (ab, ba) = (options.a_to_b.clone(), options.b_to_a.clone());
    emulator::run(a, b, ab, ba, options.frame_size, poll, stop, live)
}

/// The live counters line of a running bridge.
fn counters(live: &EmulatorLive) -> String {
    let (x, y) = (&live.a_to_b, &live.b_to_a);
    format!(
        "A→B in {} out {} dropped {}   B→A in {} out {} dropped {}",
        x.arrived.load(Relaxed),
        x.sent.load(Relaxed),
        x.dropped.load(Relaxed),
        y.arrived.load(Relaxed),
        y.sent.load(Relaxed),
        y.dropped.load(Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_spins_only_with_three_cpus_or_more() {
        for (cpus, poll) in [
            (1, PollMode::Block),
            (2, PollMode::Block),
            (3, PollMode::Busy),
            (8, PollMode::Busy),
        ] {
            assert_eq!(EmuPoll::Auto.resolve(cpus), poll, "{cpus} CPUs");
        }
        assert_eq!(EmuPoll::Busy.resolve(1), PollMode::Busy);
        assert_eq!(EmuPoll::Block.resolve(8), PollMode::Block);
    }
}
