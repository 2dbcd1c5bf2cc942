//! The device under test: one of the lab's middles ([`latlab_lab::middle`]: the kernel's IP
//! forwarding, a Linux bridge, `latlab fwd`, `latlab emu` with no impairment, testpmd), started
//! in the lab's middle namespace on the DUT's CPU with its receive work there too, and the path
//! the blasted frames take through it.

use std::net::SocketAddr;

use latlab_lab::middle::{self, EmuSettings, MiddleSettings, Placement, RunningMiddle};
use latlab_lab::topology::{ClientEmuServer, TopologyError};

/// Which forwarder is measured: one of the lab's middles, or an external one.
pub use latlab_lab::middle::Middle as Dut;

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

/// The sink's UDP port in the server.
pub(super) const SINK_PORT: u16 = 9;

/// Starts `options.dut` in `lab` on `cpu` (the client's and the server's receive work on
/// `ends_cpu`): [`middle::start`] with the DUT's settings; returns it, the path through it,
/// and how its receive work was placed.
pub(super) fn start(
    lab: &ClientEmuServer,
    options: &super::Rfc2544Options,
    cpu: usize,
    ends_cpu: Option<usize>,
) -> Result<(RunningMiddle, Path, String), TopologyError> {
    let mac = |ns: &str, dev: &str| -> Result<[u8; 6], TopologyError> {
        latlab_lab::units::parse_mac(&latlab_lab::topology::mac_of(ns, dev)?).map_err(|_| {
            TopologyError::Command {
                command: format!("ip -n {ns} link show {dev}"),
                stderr: "no MAC address".into(),
            }
        })
    };
    let client_mac = mac(lab.client.name(), "veth0")?;
    let settings = MiddleSettings {
        fwd: latlab_engine::forwarder::ForwarderConfig {
            batch: options.fwd_batch,
            poll: options.poll(),
        },
        emu: EmuSettings::unimpaired(),
        testpmd_burst: options.fwd_batch,
    };
    let placement = Placement {
        cpu: Some(cpu),
        ends_cpu,
        steer: true,
        timer_slack_ns: None,
    };
    let running = middle::start(lab, options.dut, &settings, &placement)?;
    let path = match running.route() {
        Some((src, dst)) => Path {
            src: SocketAddr::from((src, 4000)),
            dst: SocketAddr::from((dst, SINK_PORT)),
            next_hop: mac(lab.emu.name(), ClientEmuServer::EMU_A)?,
            client_mac,
        },
        None => Path {
            src: SocketAddr::from((lab.client_addr, 4000)),
            dst: SocketAddr::from((lab.server_addr, SINK_PORT)),
            next_hop: mac(lab.server.name(), "veth0")?,
            client_mac,
        },
    };
    let placed = running.placed().to_string();
    Ok((running, path, placed))
}
