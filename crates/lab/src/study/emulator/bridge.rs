//! `latlab emu` bridging the lab's emulator namespace while a measurement runs (the
//! emulator study's points and the demo's emulated-link run).

use std::io;
use std::sync::Arc;

use latlab_engine::emulator::{self, EmulatorLive};
use latlab_engine::{PollMode, Stop};
use latlab_io::packet::{PacketOptions, PacketSocket};
use latlab_io::Io;
use latlab_link::LinkConfig;

use crate::topology::ClientEmuServer;

/// Runs `f` while `latlab emu` bridges the lab's emulator namespace (run to completion, busy
/// polling) over `io` (packet: AF_PACKET rings; xdp: AF_XDP sockets fed every frame), then
/// stops the bridge; returns `f`'s result and the bridge's report as JSON. An emulator that cannot open its sockets fails before `f` runs.
pub(crate) fn with_emulator<T, E: From<io::Error>>(
    lab: &ClientEmuServer,
    io: Io,
    a_to_b: LinkConfig,
    b_to_a: LinkConfig,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<(T, serde_json::Value), E> {
    let bridge = Bridge {
        io,
        poll: PollMode::Busy,
        cpu: None,
        timer_slack_ns: None,
    };
    with_bridge(lab, bridge, a_to_b, b_to_a, f)
}

/// How the bridge runs: over which I/O, polling how, pinned to which CPU (`None`: where the
/// scheduler puts it), with which timer slack (`None`: the thread's default).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bridge {
    pub(crate) io: Io,
    pub(crate) poll: PollMode,
    pub(crate) cpu: Option<usize>,
    pub(crate) timer_slack_ns: Option<u64>,
}

/// [`with_emulator`] with the bridge run as `bridge` says.
pub(crate) fn with_bridge<T, E: From<io::Error>>(
    lab: &ClientEmuServer,
    bridge: Bridge,
    a_to_b: LinkConfig,
    b_to_a: LinkConfig,
    f: impl FnOnce() -> Result<T, E>,
) -> Result<(T, serde_json::Value), E> {
    let Bridge {
        io,
        poll,
        cpu,
        timer_slack_ns,
    } = bridge;
    let emu_stop = Arc::new(Stop::new());
    let links = (a_to_b, b_to_a);
    let emu = match io {
        Io::Packet => spawn_bridge(
            lab,
            |name| PacketSocket::open(name, &PacketOptions::default()),
            2048,
            links,
            (poll, cpu, timer_slack_ns),
            emu_stop.clone(),
        )?,
        Io::Xdp => spawn_bridge(
            lab,
            |name| {
                use latlab_io::xdp::{Redirect, XdpOptions, XdpSocket};
                XdpSocket::open(name, &XdpOptions::new(Redirect::Everything))
            },
            // A received frame gets a 2048-byte UMEM frame less the kernel's 256 of headroom.
            1792,
            links,
            (poll, cpu, timer_slack_ns),
            emu_stop.clone(),
        )?,
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the emulator bridges frames over --io packet or xdp, not {other}"),
            )
            .into())
        }
    };
    let out = f();
    emu_stop.raise();
    let report = emu
        .join()
        .map_err(|_| io::Error::other("the emulator thread panicked"))
        .and_then(|r| r)?;
    Ok((out?, crate::emureport::report_json(&report)))
}

/// Whether the bridge's AF_XDP sockets can be opened in the lab (they are closed again).
pub(super) fn xdp_bridge_opens(lab: &ClientEmuServer) -> io::Result<()> {
    use latlab_io::xdp::{Redirect, XdpOptions, XdpSocket};
    latlab_io::netns::run_in(lab.emu.name(), || -> io::Result<()> {
        let opts = XdpOptions::new(Redirect::Everything);
        XdpSocket::open(ClientEmuServer::EMU_A, &opts)?;
        XdpSocket::open(ClientEmuServer::EMU_B, &opts)?;
        Ok(())
    })?
}

/// Opens both bridged interfaces of the lab's emulator namespace with `open` and runs the
/// bridge (run to completion, polling as `poll` says, pinned to `cpu` and with timer slack
/// `slack` if they are given) on a thread of its own until `stop` is raised.
fn spawn_bridge<P: emulator::Port + 'static>(
    lab: &ClientEmuServer,
    open: fn(&str) -> io::Result<P>,
    max_frame: usize,
    (a_to_b, b_to_a): (LinkConfig, LinkConfig),
    (poll, cpu, slack): (PollMode, Option<usize>, Option<u64>),
    stop: Arc<Stop>,
) -> io::Result<std::thread::JoinHandle<io::Result<emulator::EmulatorReport>>> {
    let (mut a, mut b) = latlab_io::netns::run_in(lab.emu.name(), move || -> io::Result<_> {
        Ok((open(ClientEmuServer::EMU_A)?, open(ClientEmuServer::EMU_B)?))
    })??;
    std::thread::Builder::new()
        .name("latlab-emu".into())
        .spawn(move || {
            if let Some(cpu) = cpu {
                latlab_io::cpu::pin_current_thread(cpu)?;
            }
            if let Some(ns) = slack {
                latlab_io::cpu::set_timer_slack_ns(ns)?;
            }
            emulator::run(
                &mut a,
                &mut b,
                a_to_b,
                b_to_a,
                max_frame,
                poll,
                &stop,
                &EmulatorLive::default(),
            )
        })
}
