//! The device under test in the lab's middle namespace: the kernel's IP forwarding, a Linux
//! bridge, `latlab fwd` or `latlab emu` (no impairment), with the DUT's receive work put on the
//! DUT's core by RPS on both of its veths.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::thread::JoinHandle;

use latlab_engine::emulator::{self, EmulatorLive};
use latlab_engine::forwarder::{self, ForwarderConfig, ForwarderLive, FwdPoll};
use latlab_engine::{PollMode, Stop};
use latlab_io::packet::{PacketOptions, PacketSocket};
use latlab_io::port::FramePort;
use latlab_io::xdp::{Redirect, XdpOptions, XdpSocket};
use latlab_link::LinkConfig;

use super::testpmd::{self, Driver, Testpmd};
use latlab_lab::topology::{ip, set_net_sysfs, ClientEmuServer, TopologyError};

/// Which forwarder is measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dut {
    /// The kernel's IPv4 forwarding between two subnets.
    Kernel,
    /// A Linux bridge joining the two veths.
    Bridge,
    /// `latlab fwd` over AF_PACKET.
    Fwd,
    /// `latlab fwd` over AF_XDP.
    FwdXdp,
    /// `latlab emu` with no impairment, over AF_PACKET, run to completion.
    Emu,
    /// `latlab emu` with no impairment, over AF_XDP, run to completion.
    EmuXdp,
    /// DPDK's testpmd (`io` forwarding) over its AF_PACKET driver.
    Testpmd,
    /// DPDK's testpmd over its AF_XDP driver.
    TestpmdXdp,
    /// A forwarder the user started between two interfaces of this host (`--iface-a`,
    /// `--iface-b`); the lab builds nothing.
    External,
}

impl Dut {
    /// Every DUT the lab builds (not [`Dut::External`], which the user starts).
    pub const ALL: [Dut; 8] = [
        Dut::Kernel,
        Dut::Bridge,
        Dut::Fwd,
        Dut::FwdXdp,
        Dut::Emu,
        Dut::EmuXdp,
        Dut::Testpmd,
        Dut::TestpmdXdp,
    ];

    /// Why this DUT cannot run here, if it cannot (testpmd missing and not installable).
    pub fn unavailable(self) -> Option<String> {
        match self {
            Dut::Testpmd | Dut::TestpmdXdp => testpmd::available().err(),
            _ => None,
        }
    }

    /// How `latlab fwd` waits for frames unless told: over AF_XDP it blocks, as its veths'
    /// NAPI pollers share its core and a spinning loop would starve them; over AF_PACKET it
    /// spins (the receive work comes by softirq, which preempts it).
    pub fn default_poll(self) -> FwdPoll {
        match self {
            Dut::FwdXdp => FwdPoll::Block,
            _ => FwdPoll::Busy,
        }
    }

    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Dut::Kernel => "kernel",
            Dut::Bridge => "bridge",
            Dut::Fwd => "fwd",
            Dut::FwdXdp => "fwd-xdp",
            Dut::Emu => "emu",
            Dut::EmuXdp => "emu-xdp",
            Dut::Testpmd => "testpmd",
            Dut::TestpmdXdp => "testpmd-xdp",
            Dut::External => "external",
        }
    }
}

impl std::str::FromStr for Dut {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let every = Dut::ALL.into_iter().chain([Dut::External]);
        every.clone().find(|d| d.name() == s).ok_or_else(|| {
            let names: Vec<&str> = every.map(|d| d.name()).collect();
            format!("unknown DUT {s:?}: expected one of {}", names.join(", "))
        })
    }
}

/// Where the blasted frames go: the addresses of the path through the DUT.
#[derive(Clone, Copy, Debug)]
pub(super) struct Path {
    /// The client's source address.
    pub(super) src: SocketAddr,
    /// The sink's address in the server.
    pub(super) dst: SocketAddr,
    /// The next hop's MAC: the DUT's interface for the kernel, the server's for the others.
    pub(super) next_hop: [u8; 6],
    /// The client's MAC.
    pub(super) client_mac: [u8; 6],
}

/// A running DUT; stopped (its thread joined, its process ended) on [`RunningDut::stop`] or
/// drop.
pub(super) struct RunningDut {
    stop: Arc<Stop>,
    thread: Option<JoinHandle<io::Result<serde_json::Value>>>,
    testpmd: Option<Testpmd>,
    /// `latlab fwd`'s live counters (`None` for the other DUTs).
    fwd_live: Option<Arc<ForwarderLive>>,
}

impl RunningDut {
    /// An external DUT: nothing of the lab's runs.
    pub(super) fn external() -> RunningDut {
        RunningDut {
            stop: Arc::new(Stop::new()),
            thread: None,
            testpmd: None,
            fwd_live: None,
        }
    }

    /// Starts `latlab fwd`'s report again from now, so that the report at [`RunningDut::stop`]
    /// covers only what follows (a window at saturation); nothing for a DUT that is not `fwd`.
    pub(super) fn restart_report(&self) {
        let Some(live) = &self.fwd_live else {
            return;
        };
        live.restart
            .store(true, std::sync::atomic::Ordering::Relaxed);
        // The loop lowers the flag at its next round (a DUT that stopped never does: then its
        // report covers its whole run).
        let asked = std::time::Instant::now();
        while live.restart.load(std::sync::atomic::Ordering::Relaxed)
            && asked.elapsed() < std::time::Duration::from_secs(1)
        {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }

    /// Stops the DUT's loop (if it has one) and returns its report as JSON.
    pub(super) fn stop(mut self) -> io::Result<Option<serde_json::Value>> {
        self.stop.raise();
        if let Some(testpmd) = self.testpmd.take() {
            let counts = testpmd.stop().map_err(io::Error::other)?;
            return Ok(Some(serde_json::json!({ "testpmd": counts })));
        }
        match self.thread.take() {
            None => Ok(None),
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other("the DUT's thread panicked"))?
                .map(Some),
        }
    }
}

impl Drop for RunningDut {
    fn drop(&mut self) {
        self.stop.raise();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The sink's UDP port in the server.
pub(super) const SINK_PORT: u16 = 9;

/// Sets `options.dut` up in `lab` and starts it on `cpu` (the client's and the server's receive work
/// on `ends_cpu`); returns it, the path through it, and how
/// its receive work was placed.
pub(super) fn start(
    lab: &ClientEmuServer,
    options: &super::Rfc2544Options,
    cpu: usize,
    ends_cpu: Option<usize>,
) -> Result<(RunningDut, Path, String), TopologyError> {
    let (dut, fwd_batch, fwd_poll) = (options.dut, options.fwd_batch, options.poll());
    let mac = |ns: &str, dev: &str| -> Result<[u8; 6], TopologyError> {
        latlab_lab::units::parse_mac(&latlab_lab::topology::mac_of(ns, dev)?).map_err(|_| {
            TopologyError::Command {
                command: format!("ip -n {ns} link show {dev}"),
                stderr: "no MAC address".into(),
            }
        })
    };
    let client_mac = mac(lab.client.name(), "veth0")?;
    let rps = lab.steer_receive_work(cpu, ends_cpu)?;
    let stop = Arc::new(Stop::new());
    let mut testpmd = None;
    let fwd_live = matches!(dut, Dut::Fwd | Dut::FwdXdp).then(Arc::<ForwarderLive>::default);
    let live = fwd_live.clone().unwrap_or_default();
    let (thread, path) = match dut {
        Dut::Kernel => {
            let (src, dst) = lab.route_through_middle()?;
            let path = Path {
                src: SocketAddr::from((src, 4000)),
                dst: SocketAddr::from((dst, SINK_PORT)),
                next_hop: mac(lab.emu.name(), ClientEmuServer::EMU_A)?,
                client_mac,
            };
            (None, path)
        }
        other => {
            let path = Path {
                src: SocketAddr::from((lab.client_addr, 4000)),
                dst: SocketAddr::from((lab.server_addr, SINK_PORT)),
                next_hop: mac(lab.server.name(), "veth0")?,
                client_mac,
            };
            let thread = match other {
                Dut::Bridge => {
                    bridge(lab)?;
                    None
                }
                Dut::Fwd => Some(spawn_loop(lab, cpu, &stop, open_packet, move |a, b, s| {
                    run_fwd(a, b, s, (fwd_batch, fwd_poll), &live)
                })?),
                Dut::FwdXdp => Some(spawn_loop(lab, cpu, &stop, open_xdp, move |a, b, s| {
                    run_fwd(a, b, s, (fwd_batch, fwd_poll), &live)
                })?),
                Dut::Testpmd | Dut::TestpmdXdp => {
                    let driver = if dut == Dut::Testpmd {
                        Driver::AfPacket
                    } else {
                        Driver::AfXdp
                    };
                    let ports = (ClientEmuServer::EMU_A, ClientEmuServer::EMU_B);
                    let cpus = (ends_cpu.unwrap_or(cpu), cpu);
                    let started = Testpmd::start(lab.emu.name(), ports, driver, cpus, fwd_batch)
                        .map_err(|stderr| TopologyError::Command {
                            command: "dpdk-testpmd".into(),
                            stderr,
                        })?;
                    testpmd = Some(started);
                    None
                }
                Dut::EmuXdp => Some(spawn_loop(lab, cpu, &stop, open_xdp, |a, b, s| {
                    run_emu(a, b, s, PollMode::Block)
                })?),
                _ => Some(spawn_loop(lab, cpu, &stop, open_packet, |a, b, s| {
                    run_emu(a, b, s, PollMode::Busy)
                })?),
            };
            (thread, path)
        }
    };
    let running = RunningDut {
        stop,
        thread,
        testpmd,
        fwd_live,
    };
    let mut placed = rps;
    if matches!(dut, Dut::FwdXdp | Dut::EmuXdp | Dut::TestpmdXdp) {
        placed += &format!("; {}", napi_on(lab, cpu)?);
    }
    Ok((running, path, placed))
}

fn open_packet(name: &str) -> io::Result<PacketSocket> {
    PacketSocket::open(name, &PacketOptions::default())
}

fn open_xdp(name: &str) -> io::Result<XdpSocket> {
    XdpSocket::open(name, &XdpOptions::new(Redirect::Everything))
}

fn run_fwd<P: FramePort>(
    a: &mut P,
    b: &mut P,
    stop: &Stop,
    (batch, poll): (usize, FwdPoll),
    live: &ForwarderLive,
) -> io::Result<serde_json::Value> {
    let config = ForwarderConfig { batch, poll };
    let r = forwarder::run(a, b, config, stop, live)?;
    Ok(serde_json::json!({
        "a_to_b_forwarded": r.a_to_b.forwarded,
        "a_to_b_dropped": r.a_to_b.tx_full + r.a_to_b.too_long + r.a_to_b.runts,
        "kernel_drops": r.a_to_b.kernel_drops,
        "cycles": r.cycles,
    }))
}

/// `latlab emu` with no impairment: spinning over AF_PACKET; blocking over AF_XDP, whose NAPI
/// pollers share its core.
fn run_emu<P: FramePort>(
    a: &mut P,
    b: &mut P,
    stop: &Stop,
    poll: PollMode,
) -> io::Result<serde_json::Value> {
    let none = LinkConfig {
        limit_frames: Some(100_000),
        ..LinkConfig::default()
    };
    let live = EmulatorLive::default();
    let r = emulator::run(a, b, none.clone(), none, 2048, poll, stop, &live)?;
    Ok(latlab_lab::emu::report::report_json(&r))
}

/// Opens both DUT interfaces with `open` in the DUT's namespace and runs `forward` over them
/// on a thread pinned to `cpu` until `stop`.
fn spawn_loop<P: FramePort + 'static>(
    lab: &ClientEmuServer,
    cpu: usize,
    stop: &Arc<Stop>,
    open: fn(&str) -> io::Result<P>,
    forward: impl FnOnce(&mut P, &mut P, &Stop) -> io::Result<serde_json::Value> + Send + 'static,
) -> Result<JoinHandle<io::Result<serde_json::Value>>, TopologyError> {
    let opened = latlab_io::netns::run_in(lab.emu.name(), move || -> io::Result<_> {
        Ok((open(ClientEmuServer::EMU_A)?, open(ClientEmuServer::EMU_B)?))
    })
    .and_then(|r| r);
    let (mut a, mut b) = opened.map_err(|e| TopologyError::Command {
        command: "opening the DUT's sockets".into(),
        stderr: e.to_string(),
    })?;
    let stop = stop.clone();
    std::thread::Builder::new()
        .name("latlab-dut".into())
        .spawn(move || {
            latlab_io::cpu::pin_current_thread(cpu)?;
            forward(&mut a, &mut b, &stop)
        })
        .map_err(|e| TopologyError::Command {
            command: "starting the DUT's thread".into(),
            stderr: e.to_string(),
        })
}

/// Puts the receive work of the DUT's veths, once an XDP program is on them, on `cpu`: a veth
/// with an XDP program receives in a NAPI poll that runs on the sender's core, where RPS
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
    let since = std::time::Instant::now();
    let ours = loop {
        let ours: Vec<i32> = pollers()
            .into_iter()
            .filter(|p| !before.contains(p))
            .collect();
        if ours.len() >= devs.len() || since.elapsed() > std::time::Duration::from_secs(2) {
            break ours;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
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

/// A Linux bridge `br0` in the DUT's namespace joining its two veths.
fn bridge(lab: &ClientEmuServer) -> Result<(), TopologyError> {
    let ns = lab.emu.name();
    ip(&["-n", ns, "link", "add", "br0", "type", "bridge"])?;
    for dev in [ClientEmuServer::EMU_A, ClientEmuServer::EMU_B] {
        ip(&["-n", ns, "link", "set", dev, "master", "br0"])?;
    }
    ip(&["-n", ns, "link", "set", "br0", "up"])?;
    Ok(())
}
