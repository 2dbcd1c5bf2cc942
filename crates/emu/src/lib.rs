//! latlab-emu: the link emulator's commands, on the kit (`latlab-lab`).
//!
//! `latlab emu`: the link emulator bridging two interfaces over AF_PACKET (one loop, or a
//! pipeline of pinned RX and TX stages) or AF_XDP, from checked options to a report whose
//! `--json` file is written before it is returned ([`fn@run`]); its one table of knobs
//! ([`knob`]), presets ([`preset`]), flags, specs and TOML ([`config`], [`flow`]), its control
//! API ([`api`], [`metrics`]), `--pcap` ([`pcap`]), `--attach` ([`attach`]) and its report
//! ([`report`]). `latlab run` and `latlab shell` ([`mod@run`]) put a program behind it.
#![forbid(unsafe_code)]

pub mod api;
pub mod attach;
pub mod claim;
pub mod conditions;
pub mod config;
pub mod contention;
pub mod fates;
pub mod flow;
pub mod knob;
pub mod losses;
pub mod metrics;
mod options;
pub mod panel;
pub mod pcap;
pub mod preset;
pub mod report;
pub mod run;
pub mod steer;

use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use latlab_engine::emulator::{self, EmulatorLive, EmulatorReport};
use latlab_engine::{PollMode, Stop};
use latlab_io::xdp::XdpSocket;

use latlab_lab::middle::PortSettings;

pub use latlab_io::packet::RxRing;

use contention::{Contention, ContentionWatch};
use latlab_lab::command::{watched_noting, write_json, CommandError, Io, View};
use latlab_lab::cores::{self, Placement, Role, Seat};
use latlab_lab::middle::interfaces::{InterfaceCounts, InterfaceWatch};
use losses::LossesJson;
pub use options::{EmuMode, EmuOptions, EmuPoll};

/// How `poll` waits, for the line that starts the bridge.
fn waits(poll: PollMode) -> &'static str {
    match poll {
        PollMode::Busy => "spinning",
        PollMode::Block => "sleeping until due, then spinning the last microseconds",
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
    /// What interface A and interface B counted while the bridge ran (`None` if their
    /// counters could not be read).
    pub interfaces: Option<InterfaceCounts>,
    /// Whether the frames were given a fate file's fates (`--replay-fates`).
    pub replayed: bool,
}

impl EmuReport {
    /// The lines printed at the end of a run.
    pub fn text(&self) -> String {
        let mut text = crate::report::summary_text(&self.report);
        for (name, losses) in ["A→B", "B→A"].into_iter().zip(self.losses()) {
            let n = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
            if losses.total > losses.link + losses.queued_at_exit {
                text.push_str(&format!(
                    "{name} lost on its way through: interface rx {}, socket rx {}, emulator {}, \
                     socket tx {}, interface tx {}\n",
                    n(losses.interface_rx),
                    losses.socket_rx,
                    losses.emulator,
                    losses.socket_tx,
                    n(losses.interface_tx),
                ));
            }
        }
        for c in &self.contention {
            text.push_str(&format!("{}\n", c.note));
        }
        if let Some(fates) = &self.report.fates {
            text.push_str(&crate::fates::report_lines(fates, self.replayed));
        }
        text
    }

    /// The `--json` report: [`crate::report::EmuJson`]'s, with the placement and the
    /// contention found (`[]` when none).
    pub fn to_value(&self) -> serde_json::Value {
        let mut value =
            crate::report::EmuJson::with_interfaces(&self.report, self.interfaces).to_value();
        value["placement"] = self.placement.to_value();
        value["contention"] =
            serde_json::to_value(&self.contention).expect("contention notices are plain data");
        value
    }

    /// Each direction's losses by cause, A→B then B→A.
    pub fn losses(&self) -> [LossesJson; 2] {
        // A→B frames come in on A and leave on B; B→A the other way.
        let (a, b) = (self.interfaces.map(|i| i.a), self.interfaces.map(|i| i.b));
        let has_socket = self
            .interfaces
            .is_some_and(|i| i.rx_dropped_has_socket_drops);
        [
            LossesJson::new(&self.report.a_to_b, a, b, has_socket),
            LossesJson::new(&self.report.b_to_a, b, a, has_socket),
        ]
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
    // Held until the bridge is done: a second emulator on either interface is refused.
    let _claims = claim::claim(options, &mut |line| view.note(line))?;
    // The interfaces' own counters, read in their namespace; a bridge whose interfaces have
    // none readable is reported without them.
    let watch = {
        let (a, b) = (options.iface_a.clone(), options.iface_b.clone());
        in_netns(options, move || InterfaceWatch::open(&a, &b)).ok()
    };
    let bridged = match options.io {
        Io::Xdp => run_xdp(options, stop, view),
        _ => run_packet(options, stop, view),
    }?;
    let report = EmuReport {
        report: bridged.report,
        placement: bridged.placement,
        contention: bridged.contention,
        interfaces: watch.and_then(|w| w.since_open(options.io == Io::Xdp)),
        replayed: options.replay_fates.is_some(),
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
                && options.ui.is_none()
                && options.pcap.is_none()
                && options.record_fates.is_none()
                && options.replay_fates.is_none()
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
            crate::api::Api::bind(addr).map_err(CommandError::setup(format!("--api {addr}")))
        })
        .transpose()?;
    if let Some(api) = &api {
        // A note, not the bridge's start: `latlab run` starts CMD on that one.
        view.note(&format!(
            "latlab emu: API on http://{}/conditions and /metrics",
            api.addr()
        ));
    }
    let names = match options.ui_title {
        "latlab emu" => ["A→B", "B→A"],
        _ => ["up", "down"],
    };
    let panel = options
        .ui
        .map(|addr| {
            crate::panel::Panel::bind(addr, options.ui_title, names)
                .map_err(CommandError::setup(format!("--ui {addr}")))
        })
        .transpose()?;
    if let Some(panel) = &panel {
        view.note(&format!("latlab emu: control panel on {}", panel.url()));
    }
    let live = EmulatorLive::default();
    let watch = Mutex::new(match seat {
        Ok(seat) if seat.poll() == PollMode::Busy || seat.placement().realtime => {
            Some(ContentionWatch::new(seat.cpu()))
        }
        _ => None,
    });
    let done = AtomicBool::new(false);
    let pcap_done = AtomicBool::new(false);
    let conditions =
        crate::conditions::SharedConditions::new([options.a_to_b.clone(), options.b_to_a.clone()]);
    let fates_done = AtomicBool::new(false);
    let unqueued = std::sync::atomic::AtomicU64::new(0);
    let (report, pcap, fates) = std::thread::scope(|s| {
        if let Some(api) = &api {
            let (live, done, conditions) = (&live, &done, &conditions);
            s.spawn(move || api.serve(conditions, &live.control, done));
        }
        if let Some(panel) = &panel {
            let (live, done, conditions) = (&live, &done, &conditions);
            s.spawn(move || panel.serve(conditions, &live.control, done));
        }
        let pcap = options.pcap.as_ref().map(|path| {
            let (ring, records) = emulator::tap_ring(crate::pcap::PCAP_RING_FRAMES);
            live.control.set_tap(ring);
            let ifaces = [options.iface_a.as_str(), options.iface_b.as_str()];
            let pcap_done = &pcap_done;
            let control = &live.control;
            s.spawn(move || {
                let events = || control.events();
                crate::pcap::write(path, ifaces, records, pcap_done, &events)
            })
        });
        let fate_writer = fates(options, &live, s, &fates_done, &unqueued);
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
        let missing = report
            .as_ref()
            .ok()
            .and_then(|r| r.fates)
            .map_or(0, |f| f.unqueued);
        unqueued.store(missing, std::sync::atomic::Ordering::Release);
        fates_done.store(true, std::sync::atomic::Ordering::Release);
        let pcap = pcap.map(|writer| writer.join());
        let fates = fate_writer.map(|writer| writer.join());
        (report, pcap, fates)
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
    if let (Some(path), Some(written)) = (&options.record_fates, fates) {
        written
            .map_err(|_| {
                CommandError::Io(std::io::Error::other("the --record-fates writer panicked"))
            })?
            .map_err(CommandError::setup(format!(
                "--record-fates {}",
                path.display()
            )))?;
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

/// With `--record-fates` or `--replay-fates`: the engine's fate settings set on `live`, and
/// the thread that writes the records, spawned in `s` (it finishes once `done` is raised,
/// with `unqueued` records missing).
fn fates<'s>(
    options: &'s EmuOptions,
    live: &EmulatorLive,
    s: &'s std::thread::Scope<'s, '_>,
    done: &'s AtomicBool,
    unqueued: &'s std::sync::atomic::AtomicU64,
) -> Option<std::thread::ScopedJoinHandle<'s, std::io::Result<u64>>> {
    let replay = options
        .replay_fates
        .as_ref()
        .map(|r| latlab_link::fates::replay::Replay::new(&r.file));
    if options.record_fates.is_none() && replay.is_none() {
        return None;
    }
    let (record, writer) = match &options.record_fates {
        Some(path) => {
            let (ring, records) = emulator::fate_ring(crate::fates::FATE_RING_RECORDS);
            let header = crate::fates::header([&options.a_to_b, &options.b_to_a]);
            let writer =
                s.spawn(move || crate::fates::write(path, &header, records, done, unqueued));
            (Some(ring), Some(writer))
        }
        None => (None, None),
    };
    live.control
        .set_fates(emulator::FateSettings { record, replay });
    writer
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
        realtime: false,
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
