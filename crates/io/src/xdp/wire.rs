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

#[cfg(test)]
mod tests {
    use super::*;
    use latlab_wire::checksum;
    use std::net::Ipv4Addr;

    /// An Ethernet + IPv4 + UDP frame whose checksum holds only the pseudo-header's sum, as an
    /// offloading sender leaves it; its IPv4 length says `claimed` payload bytes.
    fn unfinished_udp(payload: usize, claimed: usize) -> Vec<u8> {
        let mut f = vec![2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, 0x08, 0x00];
        let total = (28 + claimed) as u16;
        f.extend_from_slice(&[0x45, 0, (total >> 8) as u8, total as u8, 0, 1, 0x40, 0]);
        f.extend_from_slice(&[64, 17, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2]);
        let udp_len = (8 + claimed) as u16;
        let (src, dst) = (Ipv4Addr::new(198, 18, 0, 1), Ipv4Addr::new(198, 18, 0, 2));
        let pseudo = checksum::pseudo_header_v4(src, dst, 17, udp_len);
        f.extend_from_slice(&[0x9c, 0x40, 0x14, 0x51]);
        f.extend_from_slice(&udp_len.to_be_bytes());
        f.extend_from_slice(&pseudo.to_be_bytes());
        f.extend((0..payload).map(|i| i as u8));
        f
    }

    #[test]
    fn a_checksum_left_to_the_device_is_finished_in_a_copy_and_counted() {
        let mut wire = XdpWire::new("emu-a");
        let frame = unfinished_udp(100, 100);
        let finished = wire.frame(&frame).to_vec();
        assert_ne!(finished, frame);
        assert_eq!(check_transport_checksum(&finished), ChecksumState::Valid);
        assert_eq!(finished[..40], frame[..40], "only the checksum changed");
        // A finished frame goes on as it is.
        assert_eq!(wire.frame(&finished), &finished[..]);
        assert_eq!(wire.stats.checksums_finished, 1);
    }

    #[test]
    fn a_super_frame_cut_short_is_counted_and_named_once() {
        let mut wire = XdpWire::new("emu-a");
        let cut = unfinished_udp(1400, 60_000);
        assert_eq!(wire.frame(&cut), &cut[..]);
        assert!(wire.warned);
        assert_eq!(wire.frame(&cut), &cut[..]);
        assert_eq!(wire.stats.cut_super_frames, 2);
        assert_eq!(wire.stats.checksums_finished, 0);
    }
}
