//! The ECN field of an Ethernet frame's IP header (RFC 3168), read and set to CE in place, for
//! the emulator's queue disciplines: a frame that is ECN-capable (ECT(0) or ECT(1)) is marked
//! Congestion Experienced instead of being dropped.
//!
//! The IP header is found past any VLAN tags ([`crate::flow::network_header`]). IPv4: the low
//! two bits of the TOS byte, the header checksum updated incrementally (RFC 1624, eqn. 3);
//! IPv6: the low two bits of the traffic class. Any bytes are safe: a frame that is not IPv4 or
//! IPv6, or too short for its header, is [`Ecn::NotIp`] and never changed.

use crate::flow::{network_header, ETHERTYPE_IPV4, ETHERTYPE_IPV6};

/// The ECN codepoint of a frame (RFC 3168, section 5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ecn {
    /// Not IPv4 or IPv6 (or its header is cut short): no ECN field.
    NotIp,
    /// `00`: the sender does not speak ECN.
    NotEct,
    /// `10`: ECN-capable transport, ECT(0).
    Ect0,
    /// `01`: ECN-capable transport, ECT(1) (L4S).
    Ect1,
    /// `11`: Congestion Experienced.
    Ce,
}

impl Ecn {
    /// Whether a queue may mark the frame CE instead of dropping it: ECT(0), ECT(1), or CE
    /// already (marking it again changes nothing).
    pub fn is_capable(self) -> bool {
        matches!(self, Ecn::Ect0 | Ecn::Ect1 | Ecn::Ce)
    }

    fn from_bits(bits: u8) -> Ecn {
        match bits & 0b11 {
            0b00 => Ecn::NotEct,
            0b10 => Ecn::Ect0,
            0b01 => Ecn::Ect1,
            _ => Ecn::Ce,
        }
    }
}

/// Where the byte holding the ECN bits is, and how far they are shifted in it.
fn ecn_byte(frame: &[u8]) -> Option<(usize, u32)> {
    let (l3, ethertype) = network_header(frame)?;
    match ethertype {
        // Version/IHL, then TOS: DSCP (6) and ECN (2). The whole 20-byte header must be there
        // for its checksum to be updated.
        ETHERTYPE_IPV4 if frame.len() >= l3 + 20 && frame[l3] >> 4 == 4 => Some((l3 + 1, 0)),
        // Version (4), traffic class (8), flow label (20): the ECN bits are bits 4..6 of the
        // second byte.
        ETHERTYPE_IPV6 if frame.len() >= l3 + 40 && frame[l3] >> 4 == 6 => Some((l3 + 1, 4)),
        _ => None,
    }
}

/// The ECN codepoint of `frame`. Never panics.
#[inline]
pub fn read(frame: &[u8]) -> Ecn {
    match ecn_byte(frame) {
        Some((at, shift)) => Ecn::from_bits(frame[at] >> shift),
        None => Ecn::NotIp,
    }
}

/// Sets `frame`'s ECN field to CE if it is ECN-capable (see [`Ecn::is_capable`]), updating
/// an IPv4 header checksum; returns whether the frame is now marked. A frame that is not
/// capable is left as it is. Never panics.
pub fn mark_ce(frame: &mut [u8]) -> bool {
    let Some((at, shift)) = ecn_byte(frame) else {
        return false;
    };
    if !Ecn::from_bits(frame[at] >> shift).is_capable() {
        return false;
    }
    if shift == 4 {
        frame[at] |= 0b11 << 4;
        return true;
    }
    // IPv4: the 16-bit word of version/IHL and TOS changes from m to m'; the checksum at
    // bytes 10..12 of the header becomes ~(~HC + ~m + m') (RFC 1624, eqn. 3).
    let l3 = at - 1;
    let old = u16::from_be_bytes([frame[l3], frame[at]]);
    frame[at] |= 0b11;
    let new = u16::from_be_bytes([frame[l3], frame[at]]);
    let checksum = u16::from_be_bytes([frame[l3 + 10], frame[l3 + 11]]);
    let mut sum = u32::from(!checksum) + u32::from(!old) + u32::from(new);
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    frame[l3 + 10..l3 + 12].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum;

    /// An Ethernet frame with `tags` VLAN tags and an IPv4 header of TOS `tos` (checksum
    /// right), then 8 bytes of payload.
    fn v4(tags: usize, tos: u8) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        for _ in 0..tags {
            f.extend([0x81, 0x00, 0x00, 0x05]);
        }
        f.extend([0x08, 0x00]);
        let l3 = f.len();
        f.extend([0x45, tos, 0, 28, 0x12, 0x34, 0x40, 0, 64, 17, 0, 0]);
        f.extend([10, 0, 0, 1, 10, 0, 0, 2]);
        f.extend([0x9c, 0x40, 0x69, 0x87, 0, 8, 0, 0]);
        let sum = checksum::internet(&f[l3..l3 + 20]);
        f[l3 + 10..l3 + 12].copy_from_slice(&sum.to_be_bytes());
        f
    }

    fn v6(traffic_class: u8) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        f.extend([0x86, 0xdd]);
        f.extend([
            0x60 | (traffic_class >> 4),
            traffic_class << 4,
            0,
            0,
            0,
            8,
            17,
            64,
        ]);
        f.extend([0u8; 32]);
        f.extend([0u8; 8]);
        f
    }

    #[test]
    fn ipv4_ect_frames_are_marked_and_their_checksum_stays_right() {
        for (tos, before) in [
            (0x02, Ecn::Ect0),
            (0x01, Ecn::Ect1),
            (0xb8 | 0x02, Ecn::Ect0),
        ] {
            for tags in [0, 1, 2] {
                let mut f = v4(tags, tos);
                let l3 = 14 + 4 * tags;
                assert_eq!(read(&f), before);
                assert!(mark_ce(&mut f));
                assert_eq!(read(&f), Ecn::Ce);
                assert_eq!(f[l3 + 1], tos | 0b11, "DSCP kept");
                // A header with a right checksum sums to 0 (complemented).
                assert_eq!(checksum::internet(&f[l3..l3 + 20]), 0, "tos {tos:#x}");
            }
        }
    }

    #[test]
    fn the_incremental_checksum_matches_a_recomputed_one() {
        // TOS 0x02 → 0x03: the updated checksum is the one computed over the new header.
        let mut f = v4(0, 0x02);
        let mut expect = f.clone();
        expect[15] = 0x03;
        expect[24..26].copy_from_slice(&[0, 0]);
        let sum = checksum::internet(&expect[14..34]);
        expect[24..26].copy_from_slice(&sum.to_be_bytes());
        assert!(mark_ce(&mut f));
        assert_eq!(f, expect);
    }

    #[test]
    fn ipv6_ect_frames_are_marked_in_the_traffic_class() {
        let mut f = v6(0x02);
        assert_eq!(read(&f), Ecn::Ect0);
        assert!(mark_ce(&mut f));
        assert_eq!(read(&f), Ecn::Ce);
        assert_eq!((f[14], f[15]), (0x60, 0x30));
        let mut f = v6(0xb9); // DSCP 46, ECT(1)
        assert_eq!(read(&f), Ecn::Ect1);
        assert!(mark_ce(&mut f));
        assert_eq!((f[14], f[15]), (0x6b, 0xb0));
    }

    #[test]
    fn non_ect_and_non_ip_frames_are_left_alone() {
        let mut f = v4(0, 0xb8);
        let before = f.clone();
        assert_eq!(read(&f), Ecn::NotEct);
        assert!(!mark_ce(&mut f));
        assert_eq!(f, before);
        let mut arp = vec![0u8; 12];
        arp.extend([0x08, 0x06]);
        arp.extend([0x02; 28]);
        assert_eq!(read(&arp), Ecn::NotIp);
        assert!(!mark_ce(&mut arp));
        // An IPv4 EtherType with a header cut short, or a wrong version.
        let mut short = v4(0, 0x02);
        short.truncate(14 + 19);
        assert_eq!(read(&short), Ecn::NotIp);
        assert!(!mark_ce(&mut short));
        let mut wrong = v4(0, 0x02);
        wrong[14] = 0x65;
        assert_eq!(read(&wrong), Ecn::NotIp);
    }

    #[test]
    fn any_bytes_never_panic() {
        let mut x = 0x2545_f491_4f6c_dd1d_u64;
        for len in 0..200 {
            let mut f: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect();
            // Half of them with an IP EtherType, so the header path runs too.
            if len >= 14 && x % 2 == 0 {
                f[12..14].copy_from_slice(if x % 4 == 0 { &[8, 0] } else { &[0x86, 0xdd] });
            }
            let before = read(&f);
            let marked = mark_ce(&mut f);
            assert_eq!(marked, before.is_capable());
            if marked {
                assert_eq!(read(&f), Ecn::Ce);
            }
        }
    }
}
