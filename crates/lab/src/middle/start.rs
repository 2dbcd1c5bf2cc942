//! Starting a [`Middle`] in a lab's middle namespace and placing it: the one function
//! ([`start`]) behind `latlab rfc2544`'s DUTs, the forwarding study's, and the bridge the
//! emulator and timestamp studies and the demo measure through.

use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use latlab_engine::emulator::{self, EmulatorLive, EmulatorReport};
use latlab_engine::forwarder::{self, ForwarderConfig, ForwarderLive, ForwarderReport, FwdPoll};
use latlab_engine::{PollMode, Stop};
use latlab_io::port::FramePort;
use latlab_link::flow::Flows;
use latlab_link::LinkConfig;

use super::ports::{OnPorts, PortSettings};
use super::testpmd::{self, Testpmd, TestpmdCounts};
use super::{FrameIo, Middle, MiddleKind};
use crate::topology::{ip, set_net_sysfs, ClientEmuServer, TopologyError};

/// How an emulator in the middle runs.
#[derive(Clone, Debug)]
pub struct EmuSettings {
    /// The A→B (client → server) links.
    pub a_to_b: Flows,
    /// The B→A links.
    pub b_to_a: Flows,
    /// How it waits; `None`: spinning over AF_PACKET, blocking over AF_XDP (whose NAPI
    /// pollers share its core).
    pub poll: Option<PollMode>,
}

impl EmuSettings {
    /// No impairment: `latlab emu` as a DUT, its queues long enough for any burst it is sent.
    pub fn unimpaired() -> EmuSettings {
        let none = LinkConfig {
            limit_frames: Some(100_000),
            ..LinkConfig::default()
        };
        EmuSettings {
            a_to_b: none.clone().into(),
            b_to_a: none.into(),
            poll: None,
        }
    }
}

/// How each kind of middle runs, where it has settings.
#[derive(Clone, Debug)]
pub struct MiddleSettings {
    /// `latlab fwd`: its batch and how it waits.
    pub fwd: ForwarderConfig,
    /// `latlab emu`: its links and how it waits.
    pub emu: EmuSettings,
    /// testpmd: frames per receive call.
    pub testpmd_burst: usize,
}

impl Default for MiddleSettings {
    /// `latlab fwd`'s defaults (batches of 32, busy polling), an unimpaired emulator,
    /// testpmd's bursts of 32.
    fn default() -> MiddleSettings {
        MiddleSettings {
            fwd: ForwarderConfig {
                batch: 32,
                poll: FwdPoll::Busy,
            },
            emu: EmuSettings::unimpaired(),
            testpmd_burst: 32,
        }
    }
}

/// Where a middle runs and where its receive work goes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// The CPU its loop (or testpmd's forwarding lcore) is pinned to; `None`: where the
    /// scheduler puts it.
    pub cpu: Option<usize>,
    /// The CPU of the client's and server's receive work (and testpmd's main lcore).
    pub ends_cpu: Option<usize>,
    /// Put the receive work of the middle's veths on `cpu` (RPS; threaded NAPI pollers pinned
    /// there once an XDP program is on them) and the ends' on `ends_cpu`.
    pub steer: bool,
    /// The loop's timer slack, ns; `None`: the thread's default.
    pub timer_slack_ns: Option<u64>,
}

/// What a middle that runs in this process reported when it stopped.
#[derive(Clone, Debug)]
pub enum MiddleReport {
    /// `latlab fwd`'s counters and cycle accounting.
    Fwd(Box<ForwarderReport>),
    /// `latlab emu`'s counters and release errors, and what the middle's two interfaces
    /// counted while it ran (`None` if they could not be read).
    Emu(
        Box<EmulatorReport>,
        Option<super::interfaces::InterfaceCounts>,
    ),
    /// testpmd's totals.
    Testpmd(TestpmdCounts),
    /// The XDP forwarder's counts: A→B's program, B→A's.
    FwdXdpRedirect([latlab_io::xdp::ForwardCounts; 2]),
}

/// A running middle; stopped (its thread joined, its process ended) on
/// [`RunningMiddle::stop`] or drop.
pub struct RunningMiddle {
    middle: Middle,
    stop: Arc<Stop>,
    thread: Option<JoinHandle<io::Result<MiddleReport>>>,
    testpmd: Option<Testpmd>,
    /// `latlab fwd`'s live counters (`None` for the other kinds).
    fwd_live: Option<Arc<ForwarderLive>>,
    /// The XDP forwarder's programs, A→B and B→A (`None` for the other kinds).
    xdp_forward: Option<[latlab_io::xdp::XdpForward; 2]>,
    route: Option<(Ipv4Addr, Ipv4Addr)>,
    placed: String,
    /// The emulator's interfaces' counters from its start (`None` for the other kinds).
    interfaces: Option<super::interfaces::InterfaceWatch>,
}

impl std::fmt::Debug for RunningMiddle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningMiddle")
            .field("middle", &self.middle)
            .field("placed", &self.placed)
            .finish_non_exhaustive()
    }
}

impl RunningMiddle {
    /// A middle the lab does not run (external): nothing to stop.
    pub fn external() -> RunningMiddle {
        RunningMiddle::nothing_yet(Middle::EXTERNAL)
    }

    /// `middle` before anything of it runs.
    fn nothing_yet(middle: Middle) -> RunningMiddle {
        RunningMiddle {
            middle,
            stop: Arc::new(Stop::new()),
            thread: None,
            testpmd: None,
            fwd_live: None,
            xdp_forward: None,
            route: None,
            placed: String::new(),
            interfaces: None,
        }
    }

    /// The kernel's routed addresses of the client and the server, when the middle routes
    /// ([`Middle::KERNEL`]); `None` when it bridges.
    pub fn route(&self) -> Option<(Ipv4Addr, Ipv4Addr)> {
        self.route
    }

    /// How its receive work was placed (empty when it was not steered).
    pub fn placed(&self) -> &str {
        &self.placed
    }

    /// Starts `latlab fwd`'s report again from now, so that the report at
    /// [`RunningMiddle::stop`] covers only what follows (a window at saturation); nothing for
    /// a middle that is not `fwd`.
    pub fn restart_report(&self) {
        let Some(live) = &self.fwd_live else {
            return;
        };
        live.restart.store(true, Relaxed);
        // The loop lowers the flag at its next round (a loop that stopped never does: then its
        // report covers its whole run).
        let asked = Instant::now();
        while live.restart.load(Relaxed) && asked.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Stops the middle and returns its report (`None` for the kernel's, a bridge, external).
    pub fn stop(mut self) -> io::Result<Option<MiddleReport>> {
        self.stop.raise();
        if let Some(testpmd) = self.testpmd.take() {
            let counts = testpmd.stop().map_err(io::Error::other)?;
            return Ok(Some(MiddleReport::Testpmd(counts)));
        }
        if let Some([to_b, to_a]) = self.xdp_forward.take() {
            return Ok(Some(MiddleReport::FwdXdpRedirect([
                to_b.counts()?,
                to_a.counts()?,
            ])));
        }
        let report = match self.thread.take() {
            None => return Ok(None),
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other(format!("the {} thread panicked", self.middle)))??,
        };
        Ok(Some(match report {
            MiddleReport::Emu(r, _) => {
                let over_xdp = self.middle.io == FrameIo::Xdp;
                let counts = self
                    .interfaces
                    .as_ref()
                    .and_then(|w| w.since_open(over_xdp));
                MiddleReport::Emu(r, counts)
            }
            other => other,
        }))
    }
}

impl Drop for RunningMiddle {
    fn drop(&mut self) {
        self.stop.raise();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Builds `middle` in `lab`'s middle namespace with `settings` and starts it where
/// `placement` says: the kernel routing between two subnets of its own, a bridge joining the
/// two veths, `latlab fwd` or `latlab emu` on a thread of this process (its ports opened in the
/// namespace as the `fwd` and `emu` commands open theirs: [`PortSettings`]), or testpmd as a
/// child process. [`Middle::EXTERNAL`] is not the lab's to start.
pub fn start(
    lab: &ClientEmuServer,
    middle: Middle,
    settings: &MiddleSettings,
    placement: &Placement,
) -> Result<RunningMiddle, TopologyError> {
    let mut placed = String::new();
    if let (true, Some(cpu)) = (placement.steer, placement.cpu) {
        placed = lab.steer_receive_work(cpu, placement.ends_cpu)?;
    }
    let mut running = RunningMiddle::nothing_yet(middle);
    let failed = |command: &str| {
        let command = command.to_string();
        move |e: io::Error| TopologyError::Command {
            command,
            stderr: e.to_string(),
        }
    };
    match middle.kind {
        MiddleKind::Kernel => running.route = Some(lab.route_through_middle()?),
        MiddleKind::FwdXdpRedirect => running.xdp_forward = Some(xdp_forward(lab)?),
        MiddleKind::Bridge => bridge(lab)?,
        MiddleKind::External => {
            return Err(TopologyError::Command {
                command: "starting the middle".into(),
                stderr: "an external forwarder is started by its user, not the lab".into(),
            })
        }
        MiddleKind::Testpmd => {
            let driver = match middle.io {
                FrameIo::Packet => testpmd::Driver::AfPacket,
                FrameIo::Xdp => testpmd::Driver::AfXdp,
            };
            let ports = (ClientEmuServer::EMU_A, ClientEmuServer::EMU_B);
            let cpu = placement.cpu.unwrap_or(0);
            let cpus = (placement.ends_cpu.unwrap_or(cpu), cpu);
            let started =
                Testpmd::start(lab.emu.name(), ports, driver, cpus, settings.testpmd_burst)
                    .map_err(|stderr| TopologyError::Command {
                        command: "dpdk-testpmd".into(),
                        stderr,
                    })?;
            running.testpmd = Some(started);
        }
        MiddleKind::Fwd | MiddleKind::Emu => {
            let ports = if middle.kind == MiddleKind::Fwd {
                PortSettings::forwarder()
            } else {
                PortSettings::lab_emulator()
            };
            let (opener, io) = (ports.clone(), middle.io);
            let pair = latlab_io::netns::run_in(lab.emu.name(), move || {
                opener.open_pair(io, (ClientEmuServer::EMU_A, ClientEmuServer::EMU_B))
            })
            .map_err(failed("opening the middle's sockets"))?
            .map_err(|e| failed("opening the middle's sockets")(e.into()))?;
            if middle.kind == MiddleKind::Emu {
                // Where it loses frames: its interfaces' drops count among its causes.
                running.interfaces = latlab_io::netns::run_in(lab.emu.name(), || {
                    super::interfaces::InterfaceWatch::open(
                        ClientEmuServer::EMU_A,
                        ClientEmuServer::EMU_B,
                    )
                })
                .ok()
                .and_then(Result::ok);
            }
            let engine = if middle.kind == MiddleKind::Fwd {
                let live = Arc::<ForwarderLive>::default();
                running.fwd_live = Some(live.clone());
                Engine::Fwd(settings.fwd, live)
            } else {
                let poll = settings.emu.poll.unwrap_or(match middle.io {
                    FrameIo::Packet => PollMode::Busy,
                    FrameIo::Xdp => PollMode::Block,
                });
                Engine::Emu(Box::new(settings.emu.clone()), poll, ports.max_frame)
            };
            let loop_ = Loop {
                engine,
                stop: running.stop.clone(),
                placement: *placement,
            };
            let thread = std::thread::Builder::new()
                .name(format!("latlab-{}", middle.kind.name()))
                .spawn(move || pair.with(loop_))
                .map_err(failed("starting the middle's thread"))?;
            running.thread = Some(thread);
        }
    }
    let xdp_on_veths = middle.is_xdp() || middle.kind == MiddleKind::FwdXdpRedirect;
    if let (true, Some(cpu), true) = (placement.steer, placement.cpu, xdp_on_veths) {
        placed += &format!("; {}", napi_on(lab, cpu)?);
    }
    running.placed = placed;
    Ok(running)
}

/// The XDP forwarder between the middle's two veths, A→B and B→A, with what a redirect into a
/// veth needs to arrive: NAPI on the target's peer, here GRO on the client's and the server's
/// veth (the lab's offloads off already finish the senders' checksums).
fn xdp_forward(lab: &ClientEmuServer) -> Result<[latlab_io::xdp::XdpForward; 2], TopologyError> {
    for ns in [lab.client.name(), lab.server.name()] {
        latlab_io::netns::run_in(ns, || latlab_io::ethtool::set_gro("veth0", true))
            .and_then(|r| r)
            .map_err(|e| TopologyError::Command {
                command: format!("GRO on for veth0 in {ns}"),
                stderr: e.to_string(),
            })?;
    }
    let (a, b) = (ClientEmuServer::EMU_A, ClientEmuServer::EMU_B);
    latlab_io::netns::run_in(lab.emu.name(), move || -> io::Result<_> {
        Ok([
            latlab_io::xdp::XdpForward::attach(a, b)?,
            latlab_io::xdp::XdpForward::attach(b, a)?,
        ])
    })
    .and_then(|r| r)
    .map_err(|e| TopologyError::Command {
        command: "the XDP forwarder".into(),
        stderr: e.to_string(),
    })
}

/// The engine a middle's thread runs.
enum Engine {
    Fwd(ForwarderConfig, Arc<ForwarderLive>),
    Emu(Box<EmuSettings>, PollMode, usize),
}

/// A middle's loop over its two ports, placed as asked.
struct Loop {
    engine: Engine,
    stop: Arc<Stop>,
    placement: Placement,
}

impl OnPorts for Loop {
    type Output = io::Result<MiddleReport>;

    fn on<P: FramePort + Send + 'static>(self, mut a: P, mut b: P) -> io::Result<MiddleReport> {
        if let Some(cpu) = self.placement.cpu {
            latlab_io::cpu::pin_current_thread(cpu)?;
        }
        if let Some(ns) = self.placement.timer_slack_ns {
            latlab_io::cpu::set_timer_slack_ns(ns)?;
        }
        Ok(match self.engine {
            Engine::Fwd(config, live) => MiddleReport::Fwd(Box::new(forwarder::run(
                &mut a, &mut b, config, &self.stop, &live,
            )?)),
            Engine::Emu(emu, poll, max_frame) => MiddleReport::Emu(
                Box::new(emulator::run(
                    &mut a,
                    &mut b,
                    emu.a_to_b,
                    emu.b_to_a,
                    max_frame,
                    poll,
                    &self.stop,
                    &EmulatorLive::default(),
                )?),
                // The interfaces' counters are read in the lab's thread (`RunningMiddle::stop`).
                None,
            ),
        })
    }
}

/// Puts the receive work of the middle's veths, once an XDP program is on them, on `cpu`: a
/// veth with an XDP program receives in a NAPI poll that runs on the sender's core, where RPS
/// cannot move it, so the poll gets a thread of its own (threaded NAPI), pinned to `cpu`.
fn napi_on(lab: &ClientEmuServer, cpu: usize) -> Result<String, TopologyError> {
    let devs = [ClientEmuServer::EMU_A, ClientEmuServer::EMU_B];
    // The pollers are kernel threads named `napi/<device>-<id>`; this lab's are those that
    // appear when its devices go threaded.
    let pollers = || -> Vec<i32> {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        dir.filter_map(|e| {
            let pid: i32 = e.ok()?.file_name().to_str()?.parse().ok()?;
            let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
            devs.iter()
                .any(|d| comm.starts_with(&format!("napi/{d}-")))
                .then_some(pid)
        })
        .collect()
    };
    let before = pollers();
    for dev in devs {
        set_net_sysfs(lab.emu.name(), dev, "threaded", "1")?;
    }
    let since = Instant::now();
    let ours = loop {
        let ours: Vec<i32> = pollers()
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        if ours.len() >= devs.len() || since.elapsed() > Duration::from_secs(2) {
            break ours;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    if ours.is_empty() {
        return Err(TopologyError::Command {
            command: "threaded NAPI on emu-a and emu-b".into(),
            stderr: "no NAPI poller thread appeared".into(),
        });
    }
    for &pid in &ours {
        latlab_io::cpu::pin_thread(pid, cpu).map_err(|e| TopologyError::Command {
            command: format!("pinning NAPI poller {pid} to CPU {cpu}"),
            stderr: e.to_string(),
        })?;
    }
    Ok(format!(
        "threaded NAPI on {} and {}, {} poller threads pinned to CPU {cpu}",
        devs[0],
        devs[1],
        ours.len()
    ))
}

/// A Linux bridge `br0` in the middle namespace joining its two veths.
fn bridge(lab: &ClientEmuServer) -> Result<(), TopologyError> {
    let ns = lab.emu.name();
    ip(&["-n", ns, "link", "add", "br0", "type", "bridge"])?;
    for dev in [ClientEmuServer::EMU_A, ClientEmuServer::EMU_B] {
        ip(&["-n", ns, "link", "set", dev, "master", "br0"])?;
    }
    ip(&["-n", ns, "link", "set", "br0", "up"])?;
    Ok(())
}
