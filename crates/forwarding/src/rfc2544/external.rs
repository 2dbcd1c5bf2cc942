//! An external DUT: a forwarder the user started between two interfaces of this host
//! (`--iface-a`, where the blaster's frames leave, and `--iface-b`, where they come back). The
//! lab builds nothing: the source sends on `--iface-a` and an AF_PACKET socket on `--iface-b`
//! counts the blaster's frames (UDP to the destination address and the sink's port) and
//! nothing else, so other traffic on that interface neither counts nor is disturbed.
//!
//! The frames go to `--dst-mac` (the DUT's MAC on `--iface-a`'s side for a router; by default a
//! locally administered address that no host answers to, which an L2 forwarder passes on and
//! this host's own stack drops as another host's) and to `--dst-ip` (by default 198.19.0.1, in
//! RFC 2544's benchmarking range 198.18.0.0/15), from 198.18.0.1.

use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Mutex;

use latlab_engine::blaster::FrameAddrs;
use latlab_io::packet::{PacketOptions, PacketSocket};

use latlab_lab::middle::RunningMiddle;

use super::dut;
use super::trial::Sink;
use super::{Rfc2544Options, Setup};
use latlab_lab::command::CommandError;

/// The blaster's default destination MAC for an external DUT: locally administered, unicast.
pub(super) const DEFAULT_DST_MAC: [u8; 6] = [0x02, 0x1a, 0x7a, 0xb0, 0x00, 0x02];
/// The blaster's source address for an external DUT.
pub(super) const SRC: SocketAddrV4 = SocketAddrV4::new(Ipv4Addr::new(198, 18, 0, 1), 4000);
/// The blaster's default destination address for an external DUT.
pub(super) const DEFAULT_DST_IP: Ipv4Addr = Ipv4Addr::new(198, 19, 0, 1);

/// Opens the sink on `--iface-b` and finds the source's MAC on `--iface-a`; errors name the
/// flag.
pub(super) fn setup(options: &Rfc2544Options) -> Result<Setup, CommandError> {
    let (Some(a), Some(b)) = (&options.iface_a, &options.iface_b) else {
        return Err(CommandError::Usage(
            "--dut external needs --iface-a and --iface-b".into(),
        ));
    };
    let src_mac = latlab_io::neigh::interface_mac(a)
        .map_err(CommandError::setup(&format!("--iface-a {a}")))?;
    let port = PacketSocket::open(b, &PacketOptions::default()).map_err(CommandError::setup(
        &format!("--iface-b {b}: the sink's socket"),
    ))?;
    let dst = SocketAddrV4::new(options.dst_ip, dut::SINK_PORT);
    Ok(Setup {
        lab: None,
        running: RunningMiddle::external(),
        source_at: (None, a.clone()),
        placement: "external DUT: its cores and receive work are as its owner set them".into(),
        topology: format!("this host's {a} (source) — external DUT — this host's {b} (sink)"),
        addrs: FrameAddrs {
            src_mac,
            dst_mac: options.dst_mac,
            src: SocketAddr::V4(SRC),
            dst: SocketAddr::V4(dst),
        },
        sink: Sink::Frames {
            port: Box::new(Mutex::new(port)),
            dst,
        },
    })
}
