//! The one way frame ports are opened from a [`FrameIo`]: the `emu` and `fwd` commands on the
//! interfaces a user names, and every middle the lab starts on its two veths. What differs
//! between them is only the [`PortSettings`]: `latlab emu`'s (slots sized to its largest frame,
//! frames handed over as they were on the wire) or `latlab fwd`'s (2048-byte slots and UMEM
//! frames, frames as the kernel gives them).

use std::io;

use latlab_io::packet::{PacketOptions, PacketSocket, RxRing};
use latlab_io::port::FramePort;
use latlab_io::xdp::{Redirect, XdpOptions, XdpSocket};

use super::FrameIo;

/// The largest frame the lab's middles move: more than its 1500-byte-MTU veths carry, and the
/// most a 2048-byte AF_XDP UMEM frame receives (2048 less the kernel's 256 of headroom), so a
/// lab emulator's ports are those of `latlab emu --frame-size 1792`.
pub const LAB_MAX_FRAME: usize = 1792;

/// What the ports of each frame I/O are opened with.
#[derive(Clone, Debug)]
pub struct PortSettings {
    /// AF_PACKET's rings.
    pub packet: PacketOptions,
    /// AF_XDP's UMEM, fed every frame of the interface.
    pub xdp: XdpOptions,
    /// The largest frame the engine over these ports handles, bytes.
    pub max_frame: usize,
}

impl PortSettings {
    /// As `latlab emu` opens its ports for frames of at most `max_frame` bytes: ring slots
    /// and UMEM frames that hold one (the next power of two above it and the kernel's
    /// headers; UMEM frames of 2048 or 4096 bytes), frames handed over as they were on the
    /// wire whatever the senders' offloads (VLAN tags back, checksums finished, super-frames
    /// cut), `xdp_frames` UMEM frames per interface.
    pub fn emulator(max_frame: usize, rx_ring: RxRing, xdp_frames: u32) -> PortSettings {
        PortSettings {
            packet: PacketOptions {
                // Ring slots hold the frame plus the kernel's headers and must be a power of
                // two.
                frame_size: (max_frame.max(128) + 128).next_power_of_two(),
                rx_ring,
                wire_frames: true,
                ..PacketOptions::default()
            },
            xdp: XdpOptions {
                // A received frame gets frame_size − 256 bytes of a UMEM frame.
                frame_size: if max_frame + 256 > 2048 { 4096 } else { 2048 },
                frame_count: xdp_frames,
                ..XdpOptions::new(Redirect::Everything)
            },
            max_frame,
        }
    }

    /// As the lab's emulator middles open their ports: [`PortSettings::emulator`] for frames
    /// of [`LAB_MAX_FRAME`] bytes, with an AF_PACKET RX ring four times the default (16 MB,
    /// 8,192 slots of 2 KiB: 110 ms of 64-byte frames at 75 kpps), so a loop that is off its
    /// CPU for a while loses nothing: with 2,048 slots it lost frames at its ring far below its
    /// capacity (`rfc2544 --dut emu` at 64 bytes, three runs alternated: NDR 64–79 kpps, and
    /// 93–124 kpps with the larger ring; `bench/results/emu-rest-2026-11-27.md`).
    pub fn lab_emulator() -> PortSettings {
        let mut settings = PortSettings::emulator(LAB_MAX_FRAME, RxRing::V2, 4096);
        settings.packet.block_count *= 4;
        settings
    }

    /// As `latlab fwd` opens its ports: 2048-byte TPACKET_V2 slots, 4096 UMEM frames of 2048
    /// bytes, frames as the kernel hands them over.
    pub fn forwarder() -> PortSettings {
        PortSettings {
            packet: PacketOptions {
                frame_size: 2048,
                rx_ring: RxRing::V2,
                ..PacketOptions::default()
            },
            xdp: XdpOptions {
                frame_size: 2048,
                frame_count: 4096,
                ..XdpOptions::new(Redirect::Everything)
            },
            max_frame: 2048,
        }
    }

    /// One AF_PACKET port on `iface`.
    pub fn open_packet(&self, iface: &str) -> io::Result<PacketSocket> {
        PacketSocket::open(iface, &self.packet)
    }

    /// One AF_XDP port on `iface`, fed every frame of it.
    pub fn open_xdp(&self, iface: &str) -> io::Result<XdpSocket> {
        XdpSocket::open(iface, &self.xdp)
    }

    /// A port on each of `a` and `b` over `io`.
    pub fn open_pair(&self, io: FrameIo, (a, b): (&str, &str)) -> Result<FramePair, OpenError> {
        let named = |iface: &str, which: Which| {
            let iface = iface.to_string();
            move |source| OpenError {
                iface,
                which,
                source,
            }
        };
        Ok(match io {
            FrameIo::Packet => FramePair::Packet(
                self.open_packet(a).map_err(named(a, Which::A))?,
                self.open_packet(b).map_err(named(b, Which::B))?,
            ),
            FrameIo::Xdp => FramePair::Xdp(
                self.open_xdp(a).map_err(named(a, Which::A))?,
                self.open_xdp(b).map_err(named(b, Which::B))?,
            ),
        })
    }
}

/// Which of the two interfaces of a pair.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Which {
    /// The first (`--iface-a`; the client's side of a lab).
    A,
    /// The second (`--iface-b`; the server's side).
    B,
}

/// A port that could not be opened: on which interface, and why.
#[derive(Debug)]
pub struct OpenError {
    /// The interface's name.
    pub iface: String,
    /// Which of the pair it is.
    pub which: Which,
    /// What the kernel said.
    pub source: io::Error,
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "opening {}: {}", self.iface, self.source)
    }
}

impl std::error::Error for OpenError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl From<OpenError> for io::Error {
    fn from(e: OpenError) -> io::Error {
        io::Error::new(e.source.kind(), e.to_string())
    }
}

/// The two ports of a bridge or forwarder, of one frame I/O.
// Made once per run and moved once, into the loop that owns them: boxing would save no copy.
#[allow(clippy::large_enum_variant)]
#[derive(Debug)]
pub enum FramePair {
    /// Two AF_PACKET sockets.
    Packet(PacketSocket, PacketSocket),
    /// Two AF_XDP sockets.
    Xdp(XdpSocket, XdpSocket),
}

/// Something to do with two ports of any frame I/O (an engine loop, monomorphized for each).
pub trait OnPorts {
    /// What it gives back.
    type Output;
    /// Does it over `a` and `b`.
    fn on<P: FramePort + Send + 'static>(self, a: P, b: P) -> Self::Output;
}

impl FramePair {
    /// Runs `what` over the two ports.
    pub fn with<W: OnPorts>(self, what: W) -> W::Output {
        match self {
            FramePair::Packet(a, b) => what.on(a, b),
            FramePair::Xdp(a, b) => what.on(a, b),
        }
    }
}

/// What an AF_XDP datagram endpoint is opened with: the UDP port whose frames its program
/// takes (every other frame goes on to the kernel), its UMEM frames, and an optional
/// per-source limit in the program (a game server's).
#[derive(Clone, Copy, Debug)]
pub struct EndpointSettings {
    /// The UDP port taken.
    pub udp_port: u16,
    /// UMEM frames; `None`: io's default (4096).
    pub frames: Option<u32>,
    /// Frames of a source above this are dropped in the program, and counted.
    pub source_limit: Option<latlab_io::xdp::SourceLimit>,
}

impl EndpointSettings {
    /// An endpoint taking `udp_port`'s frames, with io's default UMEM and no limit.
    pub fn port(udp_port: u16) -> EndpointSettings {
        EndpointSettings {
            udp_port,
            frames: None,
            source_limit: None,
        }
    }
}

/// The one way an AF_XDP socket for a datagram endpoint (a reflector's, a server's, a
/// generator's or a blaster's) is opened on `iface`: the program redirects the frames of
/// `settings.udp_port` to it.
pub fn open_endpoint(iface: &str, settings: &EndpointSettings) -> io::Result<XdpSocket> {
    let defaults = XdpOptions::new(Redirect::Endpoint {
        udp_port: settings.udp_port,
    });
    let options = XdpOptions {
        frame_count: settings.frames.unwrap_or(defaults.frame_count),
        source_limit: settings.source_limit,
        ..defaults
    };
    XdpSocket::open(iface, &options)
}
