//! `latlab emu`: the link emulator bridging two interfaces over AF_PACKET (one loop, or a
//! pipeline of pinned RX and TX stages) or AF_XDP, from checked options to a report whose
//! `--json` file is written before it is returned.

pub mod api;
pub mod attach;
pub mod config;
pub mod contention;
pub mod flow;
pub mod knob;
pub mod metrics;
pub mod pcap;
pub mod preset;
pub mod report;
pub mod steer;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use latlab_engine::emulator::{self, EmulatorLive, EmulatorReport};
use latlab_engine::{PollMode, Stop};
use latlab_io::xdp::XdpSocket;

use crate::middle::PortSettings;
use latlab_link::Flows;

pub use latlab_io::packet::RxRing;

use crate::command::{watched_noting, write_json, CommandError, Io, View};
use crate::cores::{self, Placement, PollChoice, Role, Seat};
use config::LinkSources;
use contention::{Contention, ContentionWatch};

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
    /// As the core plan says ([`crate::cores`]): spin pinned on a CPU of its own, claimed
    /// first, when two or more CPUs are allowed, else sleep; without the plan's claims, spin
    /// only with [`EmuPoll::SPIN_CPUS`] or more.
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

    /// The core plan's name for this choice.
    pub fn choice(self) -> PollChoice {
        match self {
            EmuPoll::Auto => PollChoice::Auto,
            EmuPoll::Busy => PollChoice::Busy,
            EmuPoll::Block => PollChoice::Block,
        }
    }

    /// The wait of a loop allowed `cpus` CPUs when no core plan is at hand (the studies'
    /// bridges, which give the cores out themselves).
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
    /// Where the bridge's loop ran and why (the core plan).
    pub placement: Placement,
    /// Contention found on its CPU from its release errors (at most one; empty when none).
    pub contention: Vec<Contention>,
}

impl EmuReport {
    /// The lines printed at the end of a run.
    pub fn text(&self) -> String {
        let mut text = crate::emu::report::summary_text(&self.report);
        for c in &self.contention {
            text.push_str(&format!("{}\n", c.note));
        }
        text
    }

    /// The `--json` report: [`crate::emu::report::EmuJson`]'s, with the placement and the
    /// contention found (`[]` when none).
    pub fn to_value(&self) -> serde_json::Value {
        let mut value = crate::emu::report::EmuJson::new(&self.report).to_value();
        value["placement"] = self.placement.to_value();
        value["contention"] =
            serde_json::to_value(&self.contention).expect("contention notices are plain data");
        value
    }
}

/// What a bridge did and where it ran.
struct Bridged {
    report: EmulatorReport,
    placement: Placement,
    contention: Vec<Contention>,
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
    let bridged = match options.io {
        Io::Xdp => run_xdp(options, stop, view),
        _ => run_packet(options, stop, view),
    }?;
    let report = EmuReport {
        report: bridged.report,
        placement: bridged.placement,
        contention: bridged.contention,
    };
    if let Some(path) = &options.json {
        write_json(path, &report.to_value())?;
    }
    Ok(report)
}

/// The emulator's seat in the core plan (its one loop's CPU, claimed first).
fn seat(options: &EmuOptions) -> Seat {
    Seat::take(Role::Emulator, "latlab emu", options.poll.choice(), None)
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
) -> Result<Bridged, CommandError> {
    let ports = ports(options);
    let open = |flag: &str, ifname: &str| {
        let (ports, name) = (ports.clone(), ifname.to_string());
        in_netns(options, move || ports.open_packet(&name))
            .map_err(CommandError::setup(format!("{flag} {ifname}")))
    };
    let mut sock_a = open("--iface-a", &options.iface_a)?;
    let mut sock_b = open("--iface-b", &options.iface_b)?;
    let cpus = latlab_io::cpu::allowed_cpus().unwrap_or_default();
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
    let n = cpus.len();
    let stage_cpus = if n >= 2 {
        (Some(cpus[n - 2]), Some(cpus[n - 1]))
    } else {
        (None, None)
    };
    let (seat, _stage_claims) = match tx_sockets {
        Some(_) => {
            let (placement, claims) = pipeline_placement(stage_cpus);
            (Err(placement), claims)
        }
        None => (Ok(seat(options)), Vec::new()),
    };
    let poll = seat.as_ref().map_or(PollMode::Busy, Seat::poll);
    // A loop the plan placed spinning on a CPU takes its interfaces' receive work there.
    let _steered = match (&seat, options.poll) {
        (Ok(seat), EmuPoll::Auto) if poll == PollMode::Busy => seat.cpu().map(|cpu| {
            let ifaces = [options.iface_a.as_str(), options.iface_b.as_str()];
            let net = std::path::Path::new("/sys/class/net");
            let (steered, said) = steer::Steered::receive_work(net, &ifaces, cpu);
            seat.add_reason(&said);
            steered
        }),
        _ => None,
    };
    view.started(&format!(
        "latlab emu: bridging {} and {} ({}); Ctrl-C stops",
        options.iface_a,
        options.iface_b,
        match &seat {
            Err(_) => "pipeline: RX and TX stages on their own cores".to_string(),
            Ok(seat) => format!(
                "run to completion: one loop, {}; {}",
                waits(poll),
                seat.placement().line()
            ),
        }
    ));
    watched_bridge(options, &seat, stop, view, |live| match tx_sockets {
        Some((tx_a, tx_b)) => {
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
) -> Result<Bridged, CommandError> {
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
    let seat = seat(options);
    let poll = seat.poll();
    view.started(&format!(
        "latlab emu: bridging {} and {} over AF_XDP ({}; {}), run to completion, {}; {}; \
         Ctrl-C stops",
        options.iface_a,
        options.iface_b,
        describe(&sock_a),
        describe(&sock_b),
        waits(poll),
        seat.placement().line()
    ));
    watched_bridge(options, &Ok(seat), stop, view, |live| {
        one_loop(options, poll, &mut sock_a, &mut sock_b, stop, live)
    })
}

/// Runs `bridge` with fresh live counters, which `view` shows while it runs, until `stop` is
/// raised or the duration is over. With `--api`, the API is served on a thread of its own for
/// as long as the bridge runs; with `--pcap`, another thread writes the capture from the
/// engine's tap ring and completes the file once the bridge has stopped.
///
/// The one loop runs where `seat` places it; a spinning one watches its own release errors
/// ([`ContentionWatch`]) and notes contention on its CPU once. A pipeline (`Err`: its
/// placement) places its stages itself.
fn watched_bridge(
    options: &EmuOptions,
    seat: &Result<Seat, Placement>,
    stop: &Stop,
    view: &mut dyn View,
    bridge: impl FnOnce(&EmulatorLive) -> std::io::Result<EmulatorReport>,
) -> Result<Bridged, CommandError> {
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
    let watch = Mutex::new(match seat {
        Ok(seat) if seat.poll() == PollMode::Busy => Some(ContentionWatch::new(seat.cpu())),
        _ => None,
    });
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
        let started = Instant::now();
        let show = || {
            let note = lock(&watch).as_mut().and_then(|w| {
                let snap = live.control.snapshot(Duration::from_millis(20))?;
                let mut errors = snap.a_to_b.report.release_error.clone();
                errors.merge(&snap.b_to_a.report.release_error).ok()?;
                let found = w.handle_cumulative(started.elapsed(), &errors)?;
                Some(found.note.clone())
            });
            (counters(&live), note)
        };
        let watched = || watched_noting(options.duration, stop, view, show, || bridge(&live));
        let report = match seat {
            Ok(seat) => seat.run(watched).and_then(|r| r),
            Err(_) => watched(),
        };
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
    let contention = lock(&watch)
        .as_ref()
        .map_or_else(Vec::new, |w| w.found().to_vec());
    let placement = match seat {
        Ok(seat) => seat.placement(),
        Err(placement) => placement.clone(),
    };
    Ok(Bridged {
        report,
        placement,
        contention,
    })
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The pipeline's placement, not planned: its stages on the last two CPUs, claimed as the
/// emulator's where they can be (the claims are held for as long as the returned locks).
fn pipeline_placement(
    stages: (Option<usize>, Option<usize>),
) -> (Placement, Vec<latlab_io::lock::OwnerLock>) {
    let dir = cores::claims_dir();
    let claims: Vec<_> = [stages.0, stages.1]
        .into_iter()
        .flatten()
        .filter_map(|cpu| cores::take_claim(&dir, cpu, Role::Emulator, "latlab emu").ok()?)
        .collect();
    let placement = Placement {
        poll: PollMode::Busy.name().into(),
        cpu: stages.1,
        reason: match stages {
            (Some(rx), Some(tx)) => format!(
                "pipeline: RX stage on CPU {rx}, TX stage on CPU {tx}, {} of 2 claimed",
                claims.len()
            ),
            _ => "pipeline: stages not pinned".into(),
        },
        changes: Vec::new(),
    };
    (placement, claims)
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
