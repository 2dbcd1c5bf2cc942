//! Where a bridge run lost frames, by cause, per direction: what the link model dropped (as
//! asked), what the emulator itself dropped, what its sockets' kernel rings dropped before it
//! could read them, what the interfaces dropped on the way in (a full backlog, for instance)
//! and on the way out (on veth: the far end could not take them), and what was still held at
//! exit. The interfaces' counters are read when the bridge starts and when it stops, in the
//! emulator's namespace; the sum is every frame that reached the emulator's receiving
//! interface and did not leave its sending one.

use latlab_engine::emulator::DirectionReport;
use latlab_io::ifstats::DevCounters;
use serde::{Deserialize, Serialize};

/// Both interfaces' counters over the run, as `--json` shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InterfacesJson {
    /// Interface A's.
    pub a: InterfaceJson,
    /// Interface B's.
    pub b: InterfaceJson,
}

/// One interface's counters over the run, as `--json` shows them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct InterfaceJson {
    /// Frames received.
    pub rx_packets: u64,
    /// Frames dropped on receive (driver, backlog, missed).
    pub rx_dropped: u64,
    /// Frames sent.
    pub tx_packets: u64,
    /// Frames dropped on transmit.
    pub tx_dropped: u64,
}

impl From<DevCounters> for InterfaceJson {
    fn from(c: DevCounters) -> InterfaceJson {
        InterfaceJson {
            rx_packets: c.rx_packets,
            rx_dropped: c.rx_dropped,
            tx_packets: c.tx_packets,
            tx_dropped: c.tx_dropped,
        }
    }
}

/// The frames one direction lost, by where they were lost. `total` is their sum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LossesJson {
    /// Dropped on the way in by the receiving interface (its `rx_dropped`: a full backlog,
    /// the driver; less the socket's drops where it counts those too); `None` when the
    /// interfaces' counters could not be read.
    pub interface_rx: Option<u64>,
    /// Dropped by the kernel before the emulator's socket could read them: a full AF_PACKET
    /// ring (`tp_drops`), or AF_XDP's full RX ring and empty fill ring (`rx_ring_full` +
    /// `rx_dropped`; each apart in the direction's `socket`).
    pub socket_rx: u64,
    /// Refused by the kernel at the sending socket after the emulator queued them, before
    /// the interface saw them (AF_XDP's invalid TX descriptors).
    pub socket_tx: u64,
    /// Dropped by the link model as configured (loss, queue limits, a queue discipline, runts,
    /// oversized frames): the impairment asked for.
    pub link: u64,
    /// Dropped by the emulator itself: its TX ring full, too long or too short for the far
    /// interface, no buffer slot.
    pub emulator: u64,
    /// Still held when the emulator stopped.
    pub queued_at_exit: u64,
    /// Dropped by the sending interface after the emulator had sent them (its `tx_dropped`:
    /// on veth, the far end's backlog was full); `None` without the interfaces' counters.
    pub interface_tx: Option<u64>,
    /// Every frame lost between the receiving interface and the wire beyond the sending one.
    pub total: u64,
}

impl LossesJson {
    /// The losses of direction `d`, received on the interface that counted `rx` and sent on
    /// the one that counted `tx`; `rx_has_socket`: `rx`'s drops include the socket's (each
    /// frame is counted once, at the socket).
    pub fn new(
        d: &DirectionReport,
        rx: Option<DevCounters>,
        tx: Option<DevCounters>,
        rx_has_socket: bool,
    ) -> Self {
        let link = d.link.dropped() + d.link.aqm_drop + d.link.aqm_overflow;
        let emulator = d.tx_ring_full + d.tx_too_long + d.tx_too_short + d.queue_slots_full;
        let interface_rx = rx.map(|c| match rx_has_socket {
            true => c.rx_dropped.saturating_sub(d.kernel_drops),
            false => c.rx_dropped,
        });
        let interface_tx = tx.map(|c| c.tx_dropped);
        LossesJson {
            interface_rx,
            socket_rx: d.kernel_drops,
            socket_tx: d.socket.tx_invalid,
            link,
            emulator,
            queued_at_exit: d.queued_at_exit,
            interface_tx,
            total: interface_rx.unwrap_or(0)
                + d.kernel_drops
                + d.socket.tx_invalid
                + link
                + emulator
                + d.queued_at_exit
                + interface_tx.unwrap_or(0),
        }
    }
}

/// What the kernel counted at one direction's sockets, as `--json` shows them: the receiving
/// socket's losses by cause and events, the sending socket's refusals and events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SocketJson {
    /// Frames lost before the emulator read them: AF_PACKET's full ring (`tp_drops`);
    /// AF_XDP's `rx_dropped` (no free frame in the fill ring, or too long for a UMEM frame).
    pub rx_dropped: u64,
    /// Frames lost to a full AF_XDP RX ring (`rx_ring_full`).
    pub rx_ring_full: u64,
    /// Times the kernel found the AF_XDP fill ring empty (`rx_fill_ring_empty_descs`):
    /// events; their frames are in `rx_dropped`.
    pub rx_fill_ring_empty_descs: u64,
    /// TX descriptors the kernel refused (AF_XDP's `tx_invalid_descs`): frames lost.
    pub tx_invalid_descs: u64,
    /// Times the kernel, woken to send, found the AF_XDP TX ring empty
    /// (`tx_ring_empty_descs`): events, not frames lost.
    pub tx_ring_empty_descs: u64,
}

impl From<latlab_io::port::SocketCounters> for SocketJson {
    fn from(c: latlab_io::port::SocketCounters) -> SocketJson {
        SocketJson {
            rx_dropped: c.rx_dropped,
            rx_ring_full: c.rx_ring_full,
            rx_fill_ring_empty_descs: c.rx_fill_ring_empty,
            tx_invalid_descs: c.tx_invalid,
            tx_ring_empty_descs: c.tx_ring_empty,
        }
    }
}
