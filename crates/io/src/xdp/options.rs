//! What an [`XdpSocket`] is opened with ([`XdpOptions`], [`BindMode`]) and what it counts
//! ([`XdpStats`]).

use super::*;

/// Whether the kernel copies frames between the driver and the UMEM.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BindMode {
    /// `XDP_ZEROCOPY`: the driver DMAs straight into the UMEM.
    ZeroCopy,
    /// `XDP_COPY`: the kernel copies each frame (every driver; the only mode on veth).
    Copy,
}

/// Sizes and switches of an [`XdpSocket`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpOptions {
    /// The program attached to the interface, choosing which frames come to the socket.
    pub program: Redirect,
    /// Bytes per UMEM frame: 2048 or 4096. A received frame gets `frame_size - 256` bytes (the
    /// kernel keeps 256 bytes of headroom); a sent frame may fill a whole one. Default 2048.
    pub frame_size: u32,
    /// UMEM frames, a power of two from 2 to 2^20: half receive, half send; each ring holds
    /// `frame_count / 2` entries. Default 4096 (8 MiB of UMEM with 2048-byte frames).
    pub frame_count: u32,
    /// The interface RX queue served. Default 0 (veth has one queue per direction).
    pub queue_id: u32,
    /// Bind in copy mode without trying zero-copy first. Default false.
    pub force_copy: bool,
    /// A per-source token bucket in the program ([`Redirect::Endpoint`] only): frames of a
    /// source above it are dropped before they reach the socket, and counted
    /// ([`XdpSocket::source_drops`]). Default none.
    pub source_limit: Option<SourceLimit>,
}

impl XdpOptions {
    /// The default sizes with `program`.
    pub fn new(program: Redirect) -> XdpOptions {
        XdpOptions {
            program,
            frame_size: 2048,
            frame_count: 4096,
            queue_id: 0,
            force_copy: false,
            source_limit: None,
        }
    }

    pub(super) fn check(&self) -> Result<(), String> {
        if self.frame_size != 2048 && self.frame_size != 4096 {
            return Err(format!(
                "frame_size {} is neither 2048 nor 4096",
                self.frame_size
            ));
        }
        if !self.frame_count.is_power_of_two() || !(2..=1 << 20).contains(&self.frame_count) {
            return Err(format!(
                "frame_count {} is not a power of two from 2 to 2^20",
                self.frame_count
            ));
        }
        Ok(())
    }
}

/// Counters of an [`XdpSocket`] since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpStats {
    /// Frames the kernel dropped for the socket (`rx_dropped`): no free frame in the fill
    /// ring, or too long for a UMEM frame. Not those of a full RX ring ([`Self::rx_ring_full`]),
    /// on kernels that count those apart (5.9 and later). Frames lost and counted: the sum of
    /// this and `rx_ring_full`.
    pub rx_dropped: u64,
    /// RX frames the kernel could not place (`rx_invalid_descs`).
    pub rx_invalid_descs: u64,
    /// TX descriptors the kernel refused: frame too long for the device, or outside the UMEM
    /// (`tx_invalid_descs`).
    pub tx_invalid_descs: u64,
    /// Frames dropped because the RX ring was full (`rx_ring_full`).
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty (`rx_fill_ring_empty_descs`); the frames
    /// lost then are in [`Self::rx_dropped`] as well, so do not add the two.
    pub rx_fill_ring_empty: u64,
    /// Times the kernel, woken to send, found the TX ring empty (`tx_ring_empty_descs`).
    pub tx_ring_empty: u64,
    /// Descriptors the kernel found in the rings pointing outside their part of the UMEM;
    /// never read. Always 0 unless the kernel and this code disagree about the layout.
    pub corrupt_descs: u64,
}
