//! What runs in the middle of a lab, between the client and the server: the kernel's IP
//! forwarding, a Linux bridge, `latlab fwd`, `latlab emu`, DPDK's testpmd, or a forwarder the
//! user started (external). One type, [`Middle`]: its [`MiddleKind`] and, for what moves
//! frames in user space, its [`FrameIo`]. [`start`] builds it in a lab's middle namespace and
//! places it (its CPU, its receive work); [`ports`] is the one way the frame ports of a
//! middle (and of the `emu` and `fwd` commands) are opened, and [`interfaces`] how an emulator's
//! two interfaces' counters are watched over its run.

use std::fmt;
use std::str::FromStr;

use latlab_engine::forwarder::FwdPoll;
use latlab_io::Io;

pub mod interfaces;
pub mod ports;
mod start;
pub mod testpmd;

pub use ports::{FramePair, OnPorts, OpenError, PortSettings};
pub use start::{start, EmuSettings, MiddleReport, MiddleSettings, Placement, RunningMiddle};

/// What runs in the middle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MiddleKind {
    /// The kernel's IPv4 forwarding between two subnets.
    Kernel,
    /// A Linux bridge joining the two veths.
    Bridge,
    /// `latlab fwd`, the L2 forwarder.
    Fwd,
    /// `latlab fwd --io xdp-redirect`: an XDP program on each veth redirecting every frame to
    /// the other, frames never leaving the kernel.
    FwdXdpRedirect,
    /// `latlab emu`, the link emulator (with no impairment when a DUT).
    Emu,
    /// DPDK's testpmd (`io` forwarding).
    Testpmd,
    /// A forwarder the user started between two interfaces of this host; the lab builds
    /// nothing.
    External,
}

impl MiddleKind {
    /// Whether it moves frames in user space over a [`FrameIo`] (the others are the kernel's,
    /// or not the lab's).
    pub const fn has_io(self) -> bool {
        matches!(
            self,
            MiddleKind::Fwd | MiddleKind::Emu | MiddleKind::Testpmd
        )
    }

    fn name(self) -> &'static str {
        match self {
            MiddleKind::Kernel => "kernel",
            MiddleKind::Bridge => "bridge",
            MiddleKind::Fwd => "fwd",
            MiddleKind::FwdXdpRedirect => "fwd-xdp-redirect",
            MiddleKind::Emu => "emu",
            MiddleKind::Testpmd => "testpmd",
            MiddleKind::External => "external",
        }
    }
}

/// How a middle that moves frames in user space reaches its interfaces.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FrameIo {
    /// AF_PACKET rings beside the kernel stack (testpmd: DPDK's `net_af_packet`).
    Packet,
    /// AF_XDP, every frame of the interface taken before the kernel stack (testpmd: DPDK's
    /// `net_af_xdp`).
    Xdp,
}

impl FrameIo {
    /// The frame I/O `io` names, if it is one (`--io packet` or `xdp`).
    pub fn of(io: Io) -> Option<FrameIo> {
        match io {
            Io::Packet => Some(FrameIo::Packet),
            Io::Xdp => Some(FrameIo::Xdp),
            _ => None,
        }
    }

    /// The `--io` choice it is.
    pub fn io(self) -> Io {
        match self {
            FrameIo::Packet => Io::Packet,
            FrameIo::Xdp => Io::Xdp,
        }
    }
}

/// What runs in the middle of a lab, and over which frame I/O (for the kinds that have one;
/// the others carry [`FrameIo::Packet`], which nothing reads, so each middle has one value).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Middle {
    kind: MiddleKind,
    io: FrameIo,
}

impl Middle {
    /// The kernel's IP forwarding.
    pub const KERNEL: Middle = Middle::of(MiddleKind::Kernel, FrameIo::Packet);
    /// A Linux bridge.
    pub const BRIDGE: Middle = Middle::of(MiddleKind::Bridge, FrameIo::Packet);
    /// `latlab fwd` over AF_PACKET.
    pub const FWD: Middle = Middle::of(MiddleKind::Fwd, FrameIo::Packet);
    /// `latlab fwd` over AF_XDP.
    pub const FWD_XDP: Middle = Middle::of(MiddleKind::Fwd, FrameIo::Xdp);
    /// `latlab fwd --io xdp-redirect`: forwarding by XDP redirect, in the kernel.
    pub const FWD_XDP_REDIRECT: Middle = Middle::of(MiddleKind::FwdXdpRedirect, FrameIo::Packet);
    /// `latlab emu` over AF_PACKET.
    pub const EMU: Middle = Middle::of(MiddleKind::Emu, FrameIo::Packet);
    /// `latlab emu` over AF_XDP.
    pub const EMU_XDP: Middle = Middle::of(MiddleKind::Emu, FrameIo::Xdp);
    /// testpmd over its AF_PACKET driver.
    pub const TESTPMD: Middle = Middle::of(MiddleKind::Testpmd, FrameIo::Packet);
    /// testpmd over its AF_XDP driver.
    pub const TESTPMD_XDP: Middle = Middle::of(MiddleKind::Testpmd, FrameIo::Xdp);
    /// A forwarder the user started.
    pub const EXTERNAL: Middle = Middle::of(MiddleKind::External, FrameIo::Packet);

    /// Every middle the lab builds (not [`Middle::EXTERNAL`], which the user starts).
    pub const ALL: [Middle; 9] = [
        Middle::KERNEL,
        Middle::BRIDGE,
        Middle::FWD,
        Middle::FWD_XDP,
        Middle::FWD_XDP_REDIRECT,
        Middle::EMU,
        Middle::EMU_XDP,
        Middle::TESTPMD,
        Middle::TESTPMD_XDP,
    ];

    /// `kind` over `io` (ignored for the kinds without one).
    pub const fn of(kind: MiddleKind, io: FrameIo) -> Middle {
        let io = if kind.has_io() { io } else { FrameIo::Packet };
        Middle { kind, io }
    }

    /// What it is.
    pub fn kind(self) -> MiddleKind {
        self.kind
    }

    /// How it reaches its interfaces.
    pub fn io(self) -> FrameIo {
        self.io
    }

    /// One line on what it is, for `--help`.
    pub fn help(self) -> &'static str {
        match (self.kind, self.io) {
            (MiddleKind::Kernel, _) => "The kernel's IP forwarding between two subnets",
            (MiddleKind::Bridge, _) => "A Linux bridge",
            (MiddleKind::Fwd, FrameIo::Packet) => "latlab fwd over AF_PACKET",
            (MiddleKind::Fwd, FrameIo::Xdp) => "latlab fwd over AF_XDP",
            (MiddleKind::FwdXdpRedirect, _) => {
                "latlab fwd --io xdp-redirect: XDP programs redirecting in the kernel"
            }
            (MiddleKind::Emu, FrameIo::Packet) => "latlab emu, no impairment, over AF_PACKET",
            (MiddleKind::Emu, FrameIo::Xdp) => "latlab emu, no impairment, over AF_XDP",
            (MiddleKind::Testpmd, FrameIo::Packet) => "DPDK's testpmd over its AF_PACKET driver",
            (MiddleKind::Testpmd, FrameIo::Xdp) => "DPDK's testpmd over its AF_XDP driver",
            (MiddleKind::External, _) => {
                "A forwarder you started between --iface-a and --iface-b of this host"
            }
        }
    }

    /// The name used on the command line and in results: the kind, and `-xdp` over AF_XDP.
    pub fn name(self) -> &'static str {
        match (self.kind, self.io) {
            (MiddleKind::Fwd, FrameIo::Xdp) => "fwd-xdp",
            (MiddleKind::Emu, FrameIo::Xdp) => "emu-xdp",
            (MiddleKind::Testpmd, FrameIo::Xdp) => "testpmd-xdp",
            (kind, _) => kind.name(),
        }
    }

    /// Whether it runs over AF_XDP.
    pub fn is_xdp(self) -> bool {
        self.kind.has_io() && self.io == FrameIo::Xdp
    }

    /// Why this middle cannot run here, if it cannot (testpmd missing and not installable).
    pub fn unavailable(self) -> Option<String> {
        match self.kind {
            MiddleKind::Testpmd => testpmd::available().err(),
            _ => None,
        }
    }

    /// How `latlab fwd` waits for frames unless told: over AF_XDP it blocks, as its veths'
    /// NAPI pollers share its core and a spinning loop would starve them; over AF_PACKET it
    /// spins (the receive work comes by softirq, which preempts it).
    pub fn default_poll(self) -> FwdPoll {
        match (self.kind, self.io) {
            (MiddleKind::Fwd, FrameIo::Xdp) => FwdPoll::Block,
            _ => FwdPoll::Busy,
        }
    }
}

impl fmt::Display for Middle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Middle {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let every = Middle::ALL.into_iter().chain([Middle::EXTERNAL]);
        every.clone().find(|d| d.name() == s).ok_or_else(|| {
            let names: Vec<&str> = every.map(|d| d.name()).collect();
            format!("unknown DUT {s:?}: expected one of {}", names.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_middle_has_one_name_that_reads_back_as_it() {
        let every: Vec<Middle> = Middle::ALL.into_iter().chain([Middle::EXTERNAL]).collect();
        for m in &every {
            assert_eq!(m.name().parse::<Middle>(), Ok(*m));
        }
        let names: std::collections::HashSet<&str> = every.iter().map(|m| m.name()).collect();
        assert_eq!(names.len(), every.len());
        // A kind without frame I/O is one middle whatever I/O it is asked over.
        assert_eq!(Middle::of(MiddleKind::Kernel, FrameIo::Xdp), Middle::KERNEL);
        assert!(!Middle::BRIDGE.is_xdp() && Middle::TESTPMD_XDP.is_xdp());
        assert_eq!(
            "fwd-dpdk".parse::<Middle>().unwrap_err(),
            "unknown DUT \"fwd-dpdk\": expected one of kernel, bridge, fwd, fwd-xdp, \
             fwd-xdp-redirect, emu, emu-xdp, testpmd, testpmd-xdp, external"
        );
    }
}
