//! The forwarding-rate points of the emulator study: raw UDP frames at the RFC 2544 sizes
//! from an AF_PACKET ring, through the kernel, the bridge over AF_PACKET and the bridge over
//! AF_XDP, counted by a socket in the server.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use latlab_engine::Stop;
use latlab_io::packet::{PacketOptions, PacketSocket};
use latlab_io::port::{UdpMode, UdpPort};
use latlab_io::udp::{UdpOptions, UdpSocket};
use latlab_io::Io;
use latlab_link::LinkConfig;

use super::bridge::{with_emulator, xdp_bridge_opens};
use super::{RatePoint, FRAME_SIZES};
use crate::points::PointsDir;
use crate::StudyError;
use latlab_lab::progress::View;
use latlab_lab::topology::ClientEmuServer;

fn parse_mac(text: &str) -> Result<[u8; 6], StudyError> {
    latlab_lab::units::parse_mac(text).map_err(|e| StudyError::Io(io::Error::other(e)))
}

/// Forwarding rate at every RFC 2544 frame size, one way (client → server), through the kernel
/// and through the emulator at delay 0.
pub(super) fn measure_rates(
    lab: &ClientEmuServer,
    duration: Duration,
    share: crate::shard::Share,
    stop: &Stop,
    progress: &mut dyn View,
    points: &PointsDir,
) -> Result<(), StudyError> {
    use latlab_engine::blaster::{self, FrameAddrs};
    let client_mac = parse_mac(&latlab_lab::topology::mac_of(lab.client.name(), "veth0")?)?;
    let server_mac = parse_mac(&latlab_lab::topology::mac_of(lab.server.name(), "veth0")?)?;
    let emu_a_mac = parse_mac(&latlab_lab::topology::mac_of(
        lab.emu.name(),
        ClientEmuServer::EMU_A,
    )?)?;
    let sink_socket = Arc::new(latlab_io::netns::run_in(lab.server.name(), || {
        UdpSocket::bind(
            SocketAddr::from(([0, 0, 0, 0], 9)),
            &UdpOptions {
                rcvbuf: Some(4 << 20),
                ..UdpOptions::default()
            },
        )
    })??);
    let paths = ["kernel", "emu", "emu-xdp"];
    let plan: Vec<(&str, usize)> = paths
        .iter()
        .flat_map(|p| FRAME_SIZES.iter().map(move |s| (*p, *s)))
        .enumerate()
        .filter(|&(i, _)| share.owns(i))
        .map(|(_, point)| point)
        .collect();
    let total = plan.len();
    let mut xdp_checked = false;
    let mut xdp_refused = false;
    for (i, (path, size)) in plan.into_iter().enumerate() {
        if stop.is_raised() {
            break;
        }
        if path == "emu-xdp" && !xdp_checked {
            xdp_checked = true;
            if let Err(why) = xdp_bridge_opens(lab) {
                // No AF_XDP here (privileges, kernel): the row is left out, not the study.
                progress.note(&format!("the AF_XDP forwarding row is skipped: {why}"));
                xdp_refused = true;
            }
        }
        if path == "emu-xdp" && xdp_refused {
            continue;
        }
        let key = format!("rate-{path}-{size}");
        if points.resumed::<RatePoint>(&key).is_some() {
            progress.note(&format!("{key}: measured before, kept"));
            continue;
        }
        let describe = format!("forwarding rate, {path}, {size}-byte frames");
        progress.point(&describe, i, total);
        progress.note(&format!("measuring {describe}"));
        let addrs = if path == "kernel" {
            FrameAddrs {
                src_mac: client_mac,
                dst_mac: emu_a_mac,
                src: "198.18.2.1:4000".parse().map_err(io::Error::other)?,
                dst: "198.18.1.2:9".parse().map_err(io::Error::other)?,
            }
        } else {
            FrameAddrs {
                src_mac: client_mac,
                dst_mac: server_mac,
                src: SocketAddr::from((lab.client_addr, 4000)),
                dst: SocketAddr::from((lab.server_addr, 9)),
            }
        };
        let frame = blaster::udp_frame(&addrs, size).map_err(io::Error::other)?;
        let mut tx = latlab_io::netns::run_in(lab.client.name(), || {
            PacketSocket::open("veth0", &PacketOptions::default())
        })??;
        let sink_stop = Arc::new(Stop::new());
        let counter = {
            let (sock, s) = (sink_socket.clone(), sink_stop.clone());
            std::thread::spawn(move || {
                let mut port = UdpPort::new(&*sock, UdpMode::Batched, blaster::SINK_SIZES);
                blaster::sink(&mut port, &s)
            })
        };
        let blast = |tx: &mut PacketSocket| -> Result<blaster::BlastResult, StudyError> {
            let r = blaster::blast(tx, &frame, None, duration, stop)?;
            std::thread::sleep(Duration::from_millis(300));
            Ok(r)
        };
        let (result, emulator) = if path == "kernel" {
            (blast(&mut tx), None)
        } else {
            let no_delay = LinkConfig {
                limit_frames: Some(100_000),
                ..LinkConfig::default()
            };
            let io = if path == "emu" { Io::Packet } else { Io::Xdp };
            match with_emulator(lab, io, no_delay.clone(), no_delay, || blast(&mut tx)) {
                Ok((r, e)) => (Ok(r), Some(e)),
                Err(e) => (Err(e), None),
            }
        };
        sink_stop.raise();
        let received = counter
            .join()
            .map_err(|_| io::Error::other("the sink thread panicked"))??;
        let r = result?;
        let point = RatePoint {
            path: path.to_string(),
            frame_size: size,
            sent: r.sent,
            received,
            elapsed_ns: r.elapsed_ns,
            emulator,
        };
        points.write_measured(&key, &point, None, stop)?;
    }
    Ok(())
}
