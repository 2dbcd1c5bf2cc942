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
    let emu_stop = Arc::new(Stop::new());
    let links = (a_to_b, b_to_a);
    let emu = match io {
        Io::Packet => spawn_bridge(
            lab,
            |name| PacketSocket::open(name, &PacketOptions::default()),
            2048,
            links,
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
/// bridge (run to completion, busy polling) on a thread of its own until `stop` is raised.
fn spawn_bridge<P: emulator::Port + 'static>(
    lab: &ClientEmuServer,
    open: fn(&str) -> io::Result<P>,
    max_frame: usize,
    (a_to_b, b_to_a): (LinkConfig, LinkConfig),
    stop: Arc<Stop>,
) -> io::Result<std::thread::JoinHandle<io::Result<emulator::EmulatorReport>>> {
    let (mut a, mut b) = latlab_io::netns::run_in(lab.emu.name(), move || -> io::Result<_> {
        Ok((open(ClientEmuServer::EMU_A)?, open(ClientEmuServer::EMU_B)?))
    })??;
    std::thread::Builder::new()
        .name("latlab-emu".into())
        .spawn(move || {
            emulator::run(
                &mut a,
                &mut b,
                a_to_b,
                b_to_a,
                max_frame,
                PollMode::Busy,
                &stop,
                &EmulatorLive::default(),
            )
        })
}
