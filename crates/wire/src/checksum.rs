//! Internet checksum (RFC 1071) helpers shared by [`ipv4`](crate::ipv4) and
//! [`udp`](crate::udp).
//!
//! Sums are *ones-complement sums folded to 16 bits, not yet complemented*:
//! combine partial sums with [`combine`], and complement (`!sum`) once at the
//! end to get the value that goes on the wire. A buffer that already carries
//! a correct checksum sums to `0xffff`.

use std::net::Ipv4Addr;

/// Folds a wide accumulator into a 16-bit ones-complement sum.
const fn fold(mut sum: u64) -> u16 {
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    sum as u16
}

/// Ones-complement sum of `data` taken as big-endian 16-bit words; an odd
/// trailing byte is padded with a zero byte on the right.
pub fn data(data: &[u8]) -> u16 {
    let mut sum: u64 = 0;
    let mut chunks = data.chunks_exact(2);
    for c in &mut chunks {
        sum += u64::from(u16::from_be_bytes([c[0], c[1]]));
    }
    if let [last] = chunks.remainder() {
        sum += u64::from(u16::from_be_bytes([*last, 0]));
    }
    fold(sum)
}

/// Ones-complement sum of several partial sums.
pub fn combine(sums: &[u16]) -> u16 {
    fold(sums.iter().map(|&s| u64::from(s)).sum())
}

/// The ones-complement sum of `data`, complemented: the value to store in a
/// checksum field that was zero while summing.
pub fn internet(bytes: &[u8]) -> u16 {
    !data(bytes)
}

/// Ones-complement sum of the IPv4 pseudo-header used by UDP and TCP:
/// source address, destination address, a zero byte, the protocol number and
/// the upper-layer length.
pub fn pseudo_header_v4(src: Ipv4Addr, dst: Ipv4Addr, protocol: u8, length: u16) -> u16 {
    let mut buf = [0u8; 12];
    buf[0..4].copy_from_slice(&src.octets());
    buf[4..8].copy_from_slice(&dst.octets());
    buf[9] = protocol;
    buf[10..12].copy_from_slice(&length.to_be_bytes());
    data(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3 example: words 0001 f203 f4f5 f6f7 sum to ddf2.
        assert_eq!(
            data(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0xddf2
        );
        assert_eq!(
            internet(&[0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7]),
            0x220d
        );
    }

    #[test]
    fn odd_length_pads_right() {
        assert_eq!(data(&[0x12]), 0x1200);
        assert_eq!(data(&[0x12, 0x34, 0x56]), 0x1234 + 0x5600);
        assert_eq!(data(&[]), 0);
    }

    #[test]
    fn carries_fold() {
        assert_eq!(data(&[0xff, 0xff, 0x00, 0x01]), 0x0001);
        assert_eq!(combine(&[0xffff, 0x0002]), 0x0002);
        assert_eq!(combine(&[]), 0);
    }

    #[test]
    fn large_buffer_does_not_overflow() {
        let big = vec![0xffu8; 1 << 20];
        assert_eq!(data(&big), 0xffff);
    }

    #[test]
    fn pseudo_header_matches_manual_sum() {
        let s = pseudo_header_v4(
            Ipv4Addr::new(10, 0, 0, 1),
            Ipv4Addr::new(10, 0, 0, 2),
            17,
            72,
        );
        assert_eq!(s, combine(&[0x0a00, 0x0001, 0x0a00, 0x0002, 17, 72]));
    }
}
