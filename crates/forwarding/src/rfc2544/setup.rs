//! What a run measures through ([`Setup`]): for the DUTs the lab builds, the `client — dut —
//! server` namespaces with the DUT started and a UDP sink in the server ([`lab`]); for an
//! external DUT, the user's two interfaces (`super::external`).

use latlab_engine::blaster::FrameAddrs;
use latlab_io::udp::{UdpOptions, UdpSocket};

use super::trial::Sink;
use super::{dut, Rfc2544Options};
use latlab_lab::command::CommandError;
use latlab_lab::topology::ClientEmuServer;

/// The sink socket's receive buffer: it shares the source's CPU, and a stall of the guest or of
/// its thread must not turn into losses of the tester's own (32 MB: ~40,000 frames, a quarter
/// of a second at 160 kpps).
const SINK_RCVBUF: usize = 32 << 20;

/// What a run measures through: the DUT running, the frames' addresses, the sink, where the
/// source sends from, and how it is all placed.
pub(super) struct Setup {
    /// The lab's namespaces (none for an external DUT), removed when dropped.
    pub(super) lab: Option<ClientEmuServer>,
    pub(super) running: latlab_lab::middle::RunningMiddle,
    pub(super) addrs: FrameAddrs,
    pub(super) sink: Sink,
    /// The namespace the source sends from (`None`: this process's own) and its interface.
    pub(super) source_at: (Option<String>, String),
    /// Where the DUT's receive work runs (`receive_work` in the results).
    pub(super) placement: String,
    /// The topology, for the results.
    pub(super) topology: String,
}

/// Builds the `client — dut — server` lab, starts the DUT on `dut_cpu` and binds the sink in
/// the server.
pub(super) fn lab(
    options: &Rfc2544Options,
    dut_cpu: usize,
    source_cpu: Option<usize>,
) -> Result<Setup, CommandError> {
    let setup = |what: &str| {
        let what = what.to_string();
        move |e: String| CommandError::Setup {
            context: what,
            source: std::io::Error::other(e),
        }
    };
    if let Some(why) = latlab_lab::topology::why_no_namespaces() {
        return Err(setup("the client — dut — server namespaces")(why));
    }
    let dut_flag = format!("--dut {}", options.dut.name());
    if let Some(why) = options.dut.unavailable() {
        return Err(setup(&dut_flag)(why));
    }
    let _ = latlab_lab::clean::remove_stale_namespaces();
    let lab = ClientEmuServer::build().map_err(|e| setup("building the lab")(e.to_string()))?;
    let (running, path, placement) = dut::start(&lab, options, dut_cpu, source_cpu)
        .map_err(|e| setup(&dut_flag)(e.to_string()))?;
    let sink = latlab_io::netns::run_in(lab.server.name(), move || {
        let options = UdpOptions {
            rcvbuf: Some(SINK_RCVBUF),
            rx_timestamps: true,
            ..UdpOptions::default()
        };
        UdpSocket::bind(
            std::net::SocketAddr::from(([0, 0, 0, 0], dut::SINK_PORT)),
            &options,
        )
    })
    .and_then(|r| r)
    .map_err(CommandError::setup("the sink in the server"))?;
    Ok(Setup {
        running,
        addrs: FrameAddrs {
            src_mac: path.client_mac,
            dst_mac: path.next_hop,
            src: path.src,
            dst: path.dst,
        },
        sink: Sink::Udp(sink),
        source_at: (Some(lab.client.name().to_string()), "veth0".to_string()),
        placement,
        topology: lab.describe(),
        lab: Some(lab),
    })
}

/// Runs `f` in namespace `ns` (`None`: this thread's own).
pub(super) fn in_namespace<T: Send + 'static>(
    ns: Option<&str>,
    f: impl FnOnce() -> std::io::Result<T> + Send + 'static,
) -> std::io::Result<T> {
    match ns {
        Some(ns) => latlab_io::netns::run_in(ns, f).and_then(|r| r),
        None => f(),
    }
}
