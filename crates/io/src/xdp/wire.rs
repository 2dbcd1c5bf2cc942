//! Frames read over AF_XDP made what they were on the wire, as far as the frames themselves
//! allow: AF_XDP hands over no offload metadata.
//!
//! A sender with checksum offload on leaves its TCP/UDP checksum holding only the
//! pseudo-header's sum; such a checksum is recognised from the frame and finished
//! ([`latlab_wire::offload::finish_unfinished_checksum`]), in a copy, so frames that need
//! nothing are handed on without one. A super-frame (segmentation offload) reaches AF_XDP cut
//! to a UMEM frame, or not at all (the kernel drops it): nothing in user space can make it
//! whole. One that arrives cut is recognised (its IP header says it is longer than the frame),
//! counted, and named once on stderr with the fix, on the sender's side.

use latlab_wire::offload::{check_transport_checksum, finish_unfinished_checksum, ChecksumState};

use crate::port::WireFrameStats;

/// The per-socket state: a buffer for the frames whose checksum is finished, and the counts.
#[derive(Debug, Default)]
pub(crate) struct XdpWire {
    ifname: String,
    copy: Vec<u8>,
    pub(crate) stats: WireFrameStats,
    warned: bool,
}

impl XdpWire {
    pub(crate) fn new(ifname: &str) -> XdpWire {
        XdpWire {
            ifname: ifname.to_owned(),
            ..XdpWire::default()
        }
    }

    /// `frame` as it was on the wire: itself, or a copy with its checksum finished.
    pub(crate) fn frame<'a>(&'a mut self, frame: &'a [u8]) -> &'a [u8] {
        match check_transport_checksum(frame) {
            ChecksumState::Finished => {
                self.copy.clear();
                self.copy.extend_from_slice(frame);
                finish_unfinished_checksum(&mut self.copy);
                self.stats.checksums_finished += 1;
                &self.copy
            }
            ChecksumState::LongerThanFrame => {
                self.stats.cut_super_frames += 1;
                if !self.warned {
                    self.warned = true;
                    eprintln!(
                        "latlab: {}: a TCP/UDP frame arrived cut short (its IP header says the \
                         packet is longer): a super-frame from segmentation offload, which AF_XDP \
                         cannot take whole. Turn segmentation off where it is sent, e.g. \
                         `ethtool -K IF tso off gso off` on the interface that sends into {}, \
                         or bridge with --io packet; such frames are counted as \
                         cut_super_frames",
                        self.ifname, self.ifname
                    );
                }
                frame
            }
            _ => frame,
        }
    }
}
