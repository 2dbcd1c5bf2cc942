//! What a [`PacketSocket`] is opened with ([`PacketOptions`]) and what it counts ([`PacketStats`]).

use super::*;

/// Sizes and switches of a [`PacketSocket`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PacketOptions {
    /// Which RX ring, and so which `TPACKET` version for both rings. Default [`RxRing::V2`].
    pub rx_ring: RxRing,
    /// Bytes per RX block: a power of two, a multiple of the page size, at least `frame_size`.
    /// With V3 a block is handed over when full or timed out, so smaller blocks hand frames
    /// over sooner under load; 64 KiB holds ~40 full-size or ~450 minimum-size frames. With V2
    /// a block is only the kernel's unit of allocation, holding `block_size / frame_size`
    /// slots. Default 64 KiB.
    pub block_size: usize,
    /// RX blocks in the ring (at least 1). Default 64, so 4 MiB of ring (2048 V2 slots).
    pub block_count: usize,
    /// Bytes per ring slot including its header: a power of two from 128 up, at most
    /// `block_size`. Every TX slot is this size, and with V2 every RX slot. The largest frame
    /// sent is `frame_size - 32` with V2 (`tpacket2_hdr`), `frame_size - 48` with V3
    /// (`tpacket3_hdr`); with V2 a received frame longer than `frame_size - 66` is truncated.
    /// Default 2048 (frames up to 1982 bytes either way, enough for a 1500-byte MTU with VLAN
    /// tag).
    pub frame_size: usize,
    /// The kernel's V3 RX block retire timer in milliseconds (`tp_retire_blk_tov`): a partly
    /// filled block is handed over when the timer finds it. 0 lets the kernel choose from the
    /// link speed (several milliseconds). Unused with V2. Default 1, the smallest.
    pub block_timeout_ms: u32,
    /// TX ring slots (at least 1), rounded up to fill whole pages
    /// ([`PacketSocket::tx_capacity`]). Default 1024.
    pub tx_frames: usize,
    /// Put the interface in promiscuous mode while the socket is open (`PACKET_MR_PROMISC`),
    /// so a real NIC does not filter frames for other MAC addresses. Default true.
    pub promiscuous: bool,
    /// Send straight to the device, past the qdisc (`PACKET_QDISC_BYPASS`). Frames sent this way
    /// are also not seen by other packet sockets on the interface. Default true.
    pub qdisc_bypass: bool,
    /// Do not receive frames leaving the interface (`PACKET_IGNORE_OUTGOING`): a bridge must not
    /// read back what it or anyone else on the host sends. Default true.
    pub ignore_outgoing: bool,
    /// Hand over received frames as they were on the wire (`restore`): VLAN tags put back,
    /// checksums the sender left to the device finished, super-frames (GSO) cut into
    /// segments, frames longer than a V2 slot read whole. For a bridge. Default false.
    pub wire_frames: bool,
}

impl Default for PacketOptions {
    fn default() -> PacketOptions {
        PacketOptions {
            rx_ring: RxRing::V2,
            block_size: 1 << 16,
            block_count: 64,
            frame_size: 2048,
            block_timeout_ms: 1,
            tx_frames: 1024,
            promiscuous: true,
            qdisc_bypass: true,
            ignore_outgoing: true,
            wire_frames: false,
        }
    }
}

/// Counters of a [`PacketSocket`] since the previous [`PacketSocket::statistics`] call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PacketStats {
    /// Frames that reached the socket, dropped ones included (the kernel's `tp_packets`).
    pub packets: u64,
    /// Frames dropped because no RX block (V3) or slot (V2) was free (`tp_drops`).
    pub drops: u64,
    /// Times the V3 RX ring was found full and frozen until user space returned a block
    /// (`tp_freeze_q_cnt`). Always 0 with V2, whose kernel counters have no such field.
    pub freeze_count: u64,
    /// V3 RX blocks whose offsets pointed outside the block (their frames from the bad one on
    /// were not read), and V2 RX slots whose frame would lie outside the slot (not read).
    /// Always 0 unless the kernel and this code disagree about the ring layout.
    pub corrupt_blocks: u64,
    /// Frames the device refused while [`PacketSocket::flush_tx`] handed them over (`ENOBUFS`:
    /// on veth the peer is down or has a smaller MTU; with `qdisc_bypass` on a NIC its queue
    /// was full). Each was lost; the kernel may lose a few more without saying so.
    pub tx_refused: u64,
}
