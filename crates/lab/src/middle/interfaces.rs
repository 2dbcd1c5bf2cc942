//! The counters of a bridge's two interfaces over its run, read in the emulator's namespace
//! as it starts and as it stops: what `latlab emu` (`latlab_emu::losses`) and the lab's
//! emulator middle ([`super::start()`]) count their interfaces' drops among a run's losses by.

use latlab_io::ifstats::{DevCounters, DevStats};

/// The counters of the bridge's two interfaces, from when [`InterfaceWatch::open`] read them.
#[derive(Debug)]
pub struct InterfaceWatch {
    stats: [DevStats; 2],
    start: [DevCounters; 2],
}

impl InterfaceWatch {
    /// Opens and reads the counters of `a` and `b` in the calling thread's namespace.
    pub fn open(a: &str, b: &str) -> std::io::Result<InterfaceWatch> {
        let stats = [DevStats::open(a)?, DevStats::open(b)?];
        let start = [stats[0].read()?, stats[1].read()?];
        Ok(InterfaceWatch { stats, start })
    }

    /// What each interface counted since [`InterfaceWatch::open`]; `None` if one can no longer
    /// be read (it went away). `over_xdp`: the bridge's sockets were AF_XDP's (see
    /// [`InterfaceCounts::rx_dropped_has_socket_drops`]).
    pub fn since_open(&self, over_xdp: bool) -> Option<InterfaceCounts> {
        Some(InterfaceCounts {
            a: self.stats[0].read().ok()?.since(&self.start[0]),
            b: self.stats[1].read().ok()?.since(&self.start[1]),
            rx_dropped_has_socket_drops: over_xdp,
        })
    }
}

/// What a bridge's two interfaces counted over its run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InterfaceCounts {
    /// Interface A's counters.
    pub a: DevCounters,
    /// Interface B's counters.
    pub b: DevCounters,
    /// The interfaces' `rx_dropped` already counts what the sockets' rings dropped: over
    /// AF_XDP a veth counts a frame its program could not redirect into a full socket as a
    /// drop of its own (AF_PACKET's ring drops are the socket's alone).
    pub rx_dropped_has_socket_drops: bool,
}
