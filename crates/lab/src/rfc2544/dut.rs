//! The device under test in the lab's middle namespace: the kernel's IP forwarding, a Linux
//! bridge, `latlab fwd` or `latlab emu` (no impairment), with the DUT's receive work put on the
//! DUT's core by RPS on both of its veths.

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::Arc;
use std::thread::JoinHandle;

use latlab_engine::emulator::{self, EmulatorLive};
use latlab_engine::forwarder::{self, ForwarderConfig, ForwarderLive, FwdPoll};
use latlab_engine::{PollMode, Stop};
use latlab_io::packet::{PacketOptions, PacketSocket};
use latlab_io::port::FramePort;
use latlab_io::xdp::{Redirect, XdpOptions, XdpSocket};
use latlab_link::LinkConfig;

use crate::topology::{ip, ClientEmuServer, TopologyError};

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
}

impl Dut {
    /// The name used on the command line and in results.
    pub fn name(self) -> &'static str {
        match self {
            Dut::Kernel => "kernel",
            Dut::Bridge => "bridge",
            Dut::Fwd => "fwd",
            Dut::FwdXdp => "fwd-xdp",
            Dut::Emu => "emu",
        }
    }
}

impl std::str::FromStr for Dut {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        [Dut::Kernel, Dut::Bridge, Dut::Fwd, Dut::FwdXdp, Dut::Emu]
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| {
                format!("unknown DUT {s:?}: expected kernel, bridge, fwd, fwd-xdp or emu")
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

/// A running DUT; stopped (its thread joined) on [`RunningDut::stop`] or drop.
pub(super) struct RunningDut {
    stop: Arc<Stop>,
    thread: Option<JoinHandle<io::Result<serde_json::Value>>>,
}

impl RunningDut {
    /// Stops the DUT's loop (if it has one) and returns its report as JSON.
    pub(super) fn stop(mut self) -> io::Result<Option<serde_json::Value>> {
        self.stop.raise();
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

/// Sets the DUT up in `lab` and starts it on `cpu`; returns it, the path through it, and how
/// its receive work was placed.
pub(super) fn start(
    lab: &ClientEmuServer,
    dut: Dut,
    cpu: usize,
    fwd_batch: usize,
) -> Result<(RunningDut, Path, String), TopologyError> {
    let mac = |ns: &str, dev: &str| -> Result<[u8; 6], TopologyError> {
        parse_mac(&crate::topology::mac_of(ns, dev)?).ok_or_else(|| TopologyError::Command {
            command: format!("ip -n {ns} link show {dev}"),
            stderr: "no MAC address".into(),
        })
    };
    let client_mac = mac(lab.client.name(), "veth0")?;
    let rps = steer_receive_work(lab, cpu)?;
    let stop = Arc::new(Stop::new());
    let (thread, path) = match dut {
        Dut::Kernel => {
            let (src, dst) = route_through_kernel(lab)?;
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
                    run_fwd(a, b, s, fwd_batch)
                })?),
                Dut::FwdXdp => Some(spawn_loop(lab, cpu, &stop, open_xdp, move |a, b, s| {
                    run_fwd(a, b, s, fwd_batch)
                })?),
                _ => Some(spawn_loop(lab, cpu, &stop, open_packet, run_emu)?),
            };
            (thread, path)
        }
    };
    Ok((RunningDut { stop, thread }, path, rps))
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
    batch: usize,
) -> io::Result<serde_json::Value> {
    let config = ForwarderConfig {
        batch,
        poll: FwdPoll::Busy,
    };
    let r = forwarder::run(a, b, config, stop, &ForwarderLive::default())?;
    Ok(serde_json::json!({
        "a_to_b_forwarded": r.a_to_b.forwarded,
        "a_to_b_dropped": r.a_to_b.tx_full + r.a_to_b.too_long + r.a_to_b.runts,
        "kernel_drops": r.a_to_b.kernel_drops,
        "cycles": r.cycles,
    }))
}

fn run_emu<P: FramePort>(a: &mut P, b: &mut P, stop: &Stop) -> io::Result<serde_json::Value> {
    let none = LinkConfig {
        limit_frames: Some(100_000),
        ..LinkConfig::default()
    };
    let live = EmulatorLive::default();
    let r = emulator::run(a, b, none.clone(), none, 2048, PollMode::Busy, stop, &live)?;
    Ok(crate::emureport::report_json(&r))
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

/// Puts the receive work of both DUT veths on `cpu` with RPS (veth otherwise receives on the
/// sender's core, which would hand the kernel's forwarders a free core); says what was set.
fn steer_receive_work(lab: &ClientEmuServer, cpu: usize) -> Result<String, TopologyError> {
    let mask = format!("{:x}", 1u64 << cpu.min(63));
    for dev in [ClientEmuServer::EMU_A, ClientEmuServer::EMU_B] {
        // sysfs shows a namespace's devices only when mounted in it: `ip netns exec` does so.
        let file = format!("/sys/class/net/{dev}/queues/rx-0/rps_cpus");
        let out = Command::new("ip")
            .args(["netns", "exec", lab.emu.name(), "sh", "-c"])
            .arg(format!("echo {mask} > {file}"))
            .output()
            .map_err(|e| TopologyError::Command {
                command: format!("writing {file}"),
                stderr: e.to_string(),
            })?;
        if !out.status.success() {
            return Err(TopologyError::Command {
                command: format!("echo {mask} > {file} in {}", lab.emu.name()),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            });
        }
    }
    Ok(format!(
        "RPS: receive work of {} and {} on CPU {cpu} (rps_cpus {mask})",
        ClientEmuServer::EMU_A,
        ClientEmuServer::EMU_B
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

/// IPv4 forwarding in the DUT's namespace between 198.18.2.0/24 (client side) and
/// 198.18.1.0/24 (server side); returns the client's and the server's routed addresses.
fn route_through_kernel(lab: &ClientEmuServer) -> Result<(Ipv4Addr, Ipv4Addr), TopologyError> {
    let (c, e, s) = (lab.client.name(), lab.emu.name(), lab.server.name());
    ip(&[
        "-n",
        e,
        "addr",
        "add",
        "198.18.2.254/24",
        "dev",
        ClientEmuServer::EMU_A,
    ])?;
    ip(&[
        "-n",
        e,
        "addr",
        "add",
        "198.18.1.254/24",
        "dev",
        ClientEmuServer::EMU_B,
    ])?;
    ip(&["-n", c, "addr", "add", "198.18.2.1/24", "dev", "veth0"])?;
    ip(&["-n", s, "addr", "add", "198.18.1.2/24", "dev", "veth0"])?;
    ip(&[
        "-n",
        c,
        "route",
        "add",
        "198.18.1.0/24",
        "via",
        "198.18.2.254",
    ])?;
    ip(&[
        "-n",
        s,
        "route",
        "add",
        "198.18.2.0/24",
        "via",
        "198.18.1.254",
    ])?;
    // The DUT must know the server's MAC before the first trial (no ARP under load).
    let server_mac = crate::topology::mac_of(s, "veth0")?;
    ip(&[
        "-n",
        e,
        "neigh",
        "replace",
        "198.18.1.2",
        "lladdr",
        &server_mac,
        "dev",
        ClientEmuServer::EMU_B,
        "nud",
        "permanent",
    ])?;
    latlab_io::netns::run_in(e, || std::fs::write("/proc/sys/net/ipv4/ip_forward", "1"))
        .and_then(|r| r)
        .map_err(|err| TopologyError::Command {
            command: format!("ip_forward on in {e}"),
            stderr: err.to_string(),
        })?;
    Ok((Ipv4Addr::new(198, 18, 2, 1), Ipv4Addr::new(198, 18, 1, 2)))
}

fn parse_mac(text: &str) -> Option<[u8; 6]> {
    let mut mac = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut mac {
        *b = u8::from_str_radix(parts.next()?, 16).ok()?;
    }
    parts.next().is_none().then_some(mac)
}
