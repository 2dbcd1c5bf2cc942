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

/// Slots in the AF_PACKET RX ring of each of an emulator's sockets (`latlab emu`'s and the
/// lab's emulator middles'): 8 ms of frames at 1 Mpps, more than this kind of host's veth
/// carries (the blaster's 0.76–1.1 Mpps of 64-byte frames), so a loop that is off its CPU for
/// two 4 ms scheduler ticks at that rate loses nothing at its ring; at the 35 kpps of 1.4 KB
/// frames of `bench/emu-memory.sh` it is 230 ms. At 10 Gb/s line rate it is 10 ms of
/// 1,500-byte frames, 0.55 ms of 64-byte ones. With 2,048 slots the lab's emulator lost
/// frames at its ring far below its capacity (`rfc2544 --dut emu` at 64 bytes, three runs
/// alternated: NDR 64–79 kpps, and 93–124 kpps with 8,192; and `latlab emu`'s old 1,024
/// slots lost 3.4% of the memory bench's burst there; `bench/results/emu-rest-2026-11-27.md`).
pub const EMU_RX_SLOTS: usize = 8192;

/// The most memory one of those rings takes: 32 MiB, 8,192 slots of 4 KiB (`latlab emu`'s
/// default `--frame-size` 2048, whose slots are 4 KiB); a ring of larger slots (jumbo frames)
/// has fewer. The ring is mapped into the process, so it counts in its RSS from the start:
/// 32 MiB per interface at the default frame size, 16 MiB at the lab's (2 KiB slots), against
/// 4 MiB each before.
pub const EMU_RX_RING_BYTES: usize = 32 << 20;

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
    /// cut), an RX ring of [`EMU_RX_SLOTS`] slots (at most [`EMU_RX_RING_BYTES`]),
    /// `xdp_frames` UMEM frames per interface.
    pub fn emulator(max_frame: usize, rx_ring: RxRing, xdp_frames: u32) -> PortSettings {
        // Ring slots hold the frame plus the kernel's headers and must be a power of two.
        let frame_size = (max_frame.max(128) + 128).next_power_of_two();
        let defaults = PacketOptions::default();
        let block_size = defaults.block_size.max(frame_size);
        let ring_bytes = (EMU_RX_SLOTS * frame_size).min(EMU_RX_RING_BYTES);
        PortSettings {
            packet: PacketOptions {
                frame_size,
                block_size,
                block_count: (ring_bytes / block_size).max(1),
                rx_ring,
                wire_frames: true,
                ..defaults
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
    /// of [`LAB_MAX_FRAME`] bytes (an RX ring of 16 MiB, 8,192 slots of 2 KiB: 110 ms of
    /// 64-byte frames at 75 kpps).
    pub fn lab_emulator() -> PortSettings {
        PortSettings::emulator(LAB_MAX_FRAME, RxRing::V2, 4096)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The RX ring's slots: [`EMU_RX_SLOTS`] at the default frame size and the lab's, fewer
    /// for jumbo frames, whose ring stays at [`EMU_RX_RING_BYTES`].
    fn rx_slots(max_frame: usize) -> (usize, usize) {
        let p = PortSettings::emulator(max_frame, RxRing::V2, 4096).packet;
        let bytes = p.block_size * p.block_count;
        (bytes / p.frame_size, bytes)
    }

    #[test]
    fn an_emulators_rx_ring_holds_8192_frames_in_at_most_32_mib() {
        assert_eq!(rx_slots(2048), (8192, 32 << 20));
        assert_eq!(rx_slots(LAB_MAX_FRAME), (8192, 16 << 20));
        assert_eq!(rx_slots(1500), (8192, 16 << 20));
        assert_eq!(rx_slots(9000), (2048, 32 << 20));
        let lab = PortSettings::lab_emulator().packet;
        assert_eq!(
            lab.block_size * lab.block_count / lab.frame_size,
            EMU_RX_SLOTS
        );
    }
}
