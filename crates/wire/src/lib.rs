//! Wire formats spoken by latlab: Ethernet II, IPv4, UDP, the three composed
//! ([`udp_frame`]), the latlab probe header that travels as UDP payload, the
//! messages of `latlab stream` with their framing on byte streams ([`stream`]), and what a
//! frame says about its flow (EtherType, addresses, protocol, ports: [`flow`]), which the
//! emulator's per-flow rules match on.
//!
//! Every format follows the same shape (borrowed from smoltcp's `wire`
//! module):
//!
//! * a zero-copy *view* over a byte buffer ([`ethernet::Frame`],
//!   [`ipv4::Packet`], [`udp::Packet`], [`probe::Packet`]) with
//!   `new_unchecked`, `new_checked`, `check_len`, `into_inner`, one getter per
//!   field and, for mutable buffers, one setter per field;
//! * a *representation* (`Repr`) holding the fields that matter, with
//!   `parse` (view → `Repr`, validating everything) and `emit`
//!   (`Repr` → bytes).
//!
//! # Guarantees
//!
//! * No `unsafe` code (`#![forbid(unsafe_code)]`).
//! * **Parsing never panics on any input.** `new_checked` and every
//!   `Repr::parse` return `Err(`[`Error`]`)` for truncated, inconsistent or
//!   corrupted bytes. Once `new_checked` (or `check_len`) has succeeded, every
//!   getter of that view is in bounds and cannot panic either.
//! * Views built with `new_unchecked` skip the length check; their getters
//!   may panic on short buffers. `Repr::parse` runs `check_len` itself, so it
//!   is safe to call on any view.
//! * `emit` panics only when handed a buffer shorter than the `Repr` says it
//!   needs (`buffer_len()`), which is a programming error, not an input error.
//! * All multi-byte integers are big-endian (network byte order).
//! * Parsing is allocation-free; so are emitting and stamping in place.
//!
//! # Example: a probe round trip
//!
//! ```
//! use latlab_wire::probe;
//!
//! // The meter builds a probe in a 64-byte datagram buffer.
//! let repr = probe::Repr {
//!     run_id: 0x5eed_1234,
//!     flow: 1,
//!     seq: 42,
//!     intended_send_ns: 1_700_000_000_000_000_000,
//!     actual_send_ns: 0,
//!     responder: None,
//!     responder_clock: probe::ResponderClock::NotAsked,
//! };
//! let mut buf = [0u8; 64];
//! let mut packet = probe::Packet::new_unchecked(&mut buf[..]);
//! repr.emit(&mut packet);
//! // Right before the send call, stamp the actual send time in place.
//! packet.set_actual_send_ns(1_700_000_000_000_000_250);
//!
//! // A responder stamps its receive/transmit times in place and echoes it.
//! assert!(probe::is_probe(&buf));
//! let mut echoed = probe::Packet::new_checked(&mut buf[..])?;
//! echoed.set_responder_stamps(1_700_000_000_000_010_000, 1_700_000_000_000_010_400);
//!
//! // The meter parses the echo.
//! let parsed = probe::Repr::parse(&probe::Packet::new_checked(&buf[..])?)?;
//! assert_eq!(parsed.seq, 42);
//! assert_eq!(parsed.actual_send_ns, 1_700_000_000_000_000_250);
//! assert_eq!(
//!     parsed.responder,
//!     Some((1_700_000_000_000_010_000, 1_700_000_000_000_010_400))
//! );
//! # Ok::<(), latlab_wire::Error>(())
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use core::fmt;

pub mod checksum;
pub mod dns;
pub mod ecn;
pub mod ethernet;
pub mod flow;
pub mod game;
pub mod ipv4;
pub mod memcached;
pub mod ntp;
pub mod offload;
pub mod probe;
pub mod quake3;
pub mod stream;
pub mod stun;
pub mod transport;
pub mod udp;
pub mod udp_frame;

/// Why a buffer could not be parsed.
///
/// Returned by `new_checked`, `check_len` and `Repr::parse` of every format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Error {
    /// The buffer is shorter than the fixed header, or shorter than a length
    /// field inside the header says it is (IHL, IPv4 total length, UDP
    /// length, probe header length).
    Truncated,
    /// The probe does not start with [`probe::MAGIC`].
    BadMagic,
    /// The version field names a version this crate does not speak (IPv4
    /// version other than 4, probe version other than [`probe::VERSION`]).
    UnsupportedVersion,
    /// The IPv4 header checksum or the UDP checksum does not verify.
    BadChecksum,
    /// A length field is below its format's minimum or contradicts another
    /// length field (IPv4 IHL < 5 or total length < header length, UDP
    /// length < 8, probe header length < 56).
    BadLength,
    /// The header is well-formed but describes something this crate does not
    /// handle (an IPv4 fragment).
    Malformed,
    /// The frame carries another protocol than the one asked for (an
    /// EtherType other than IPv4, an IPv4 protocol other than UDP).
    OtherProtocol,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let msg = match self {
            Error::Truncated => "buffer truncated",
            Error::BadMagic => "bad magic",
            Error::UnsupportedVersion => "unsupported version",
            Error::BadChecksum => "bad checksum",
            Error::BadLength => "bad length field",
            Error::Malformed => "malformed packet",
            Error::OtherProtocol => "another protocol",
        };
        f.write_str(msg)
    }
}

impl std::error::Error for Error {}

/// Result type of every fallible function of this crate.
pub type Result<T> = core::result::Result<T, Error>;

/// A byte range of a header field.
pub(crate) type Field = core::ops::Range<usize>;
/// Everything from an offset to the end of the buffer.
pub(crate) type Rest = core::ops::RangeFrom<usize>;

/// Big-endian field access. Callers guarantee the range is in bounds
/// (after `check_len`); out-of-bounds ranges panic like slice indexing.
pub(crate) mod be {
    use super::Field;

    pub(crate) fn u16(buf: &[u8], r: Field) -> u16 {
        let b = &buf[r];
        u16::from_be_bytes([b[0], b[1]])
    }

    pub(crate) fn u32(buf: &[u8], r: Field) -> u32 {
        let mut a = [0u8; 4];
        a.copy_from_slice(&buf[r]);
        u32::from_be_bytes(a)
    }

    pub(crate) fn u64(buf: &[u8], r: Field) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&buf[r]);
        u64::from_be_bytes(a)
    }

    pub(crate) fn set_u16(buf: &mut [u8], r: Field, v: u16) {
        buf[r].copy_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn set_u32(buf: &mut [u8], r: Field, v: u32) {
        buf[r].copy_from_slice(&v.to_be_bytes());
    }

    pub(crate) fn set_u64(buf: &mut [u8], r: Field, v: u64) {
        buf[r].copy_from_slice(&v.to_be_bytes());
    }
}

/// Deterministic pseudo-random inputs shared by the modules' robustness tests.
#[cfg(test)]
pub(crate) mod testutil {
    /// xorshift64* — tiny, deterministic, good enough to shake parsers.
    #[derive(Debug)]
    pub(crate) struct XorShift(pub(crate) u64);

    impl XorShift {
        pub(crate) fn next_u64(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            x.wrapping_mul(0x2545_f491_4f6c_dd1d)
        }
    }

    /// Calls `f` with 100 000 random buffers of length 0..200. One in four
    /// buffers starts with `prefix` (if it fits) so that parsers get past
    /// their first checks now and then.
    pub(crate) fn random_inputs(seed: u64, prefix: &[u8], mut f: impl FnMut(&mut [u8])) {
        let mut rng = XorShift(seed);
        let mut buf = [0u8; 200];
        for _ in 0..100_000 {
            let len = (rng.next_u64() % 200) as usize;
            for b in buf[..len].iter_mut() {
                *b = rng.next_u64() as u8;
            }
            if rng.next_u64() % 4 == 0 && prefix.len() <= len {
                buf[..prefix.len()].copy_from_slice(prefix);
            }
            f(&mut buf[..len]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_display() {
        assert_eq!(Error::Truncated.to_string(), "buffer truncated");
        assert_eq!(Error::BadChecksum.to_string(), "bad checksum");
    }

    /// A complete Ethernet + IPv4 + UDP frame carrying the 64-byte probe of
    /// PROBE_FORMAT.md: 02:00:00:00:00:01 → 02:00:00:00:00:02,
    /// 10.0.0.1:40000 → 10.0.0.2:7, TTL 64, DF. IPv4 checksum 0x268f and UDP
    /// checksum 0x8142 were computed independently with python3.
    const FRAME: [u8; 106] = [
        0x02, 0x00, 0x00, 0x00, 0x00, 0x02, 0x02, 0x00, 0x00, 0x00, 0x00, 0x01, 0x08, 0x00, 0x45,
        0x00, 0x00, 0x5c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x26, 0x8f, 0x0a, 0x00, 0x00, 0x01,
        0x0a, 0x00, 0x00, 0x02, 0x9c, 0x40, 0x00, 0x07, 0x00, 0x48, 0x81, 0x42, 0x4c, 0x4c, 0x50,
        0x42, 0x01, 0x01, 0x00, 0x38, 0xde, 0xad, 0xbe, 0xef, 0x00, 0x00, 0x00, 0x02, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x2a, 0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x00, 0x00, 0x17,
        0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x00, 0xfa, 0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x27, 0x10,
        0x17, 0x97, 0x9c, 0xfe, 0x36, 0x2a, 0x28, 0xa0, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5, 0xa5,
        0xa5,
    ];

    #[test]
    fn full_frame_golden_parse() {
        let eth = ethernet::Frame::new_checked(&FRAME[..]).unwrap();
        let eth_repr = ethernet::Repr::parse(&eth).unwrap();
        assert_eq!(eth_repr.ethertype, ethernet::EtherType::Ipv4);
        let ip = ipv4::Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(ip.checksum(), 0x268f);
        let ip_repr = ipv4::Repr::parse(&ip).unwrap();
        assert_eq!(ip_repr.protocol, ipv4::Protocol::Udp);
        assert_eq!(ip_repr.payload_len, 72);
        let udp = udp::Packet::new_checked(ip.payload()).unwrap();
        assert_eq!(udp.checksum(), 0x8142);
        let udp_repr = udp::Repr::parse(&udp, ip_repr.src_addr, ip_repr.dst_addr).unwrap();
        assert_eq!((udp_repr.src_port, udp_repr.dst_port), (40000, 7));
        assert!(probe::is_probe(udp.payload()));
        let probe_repr = probe::Repr::parse(&probe::Packet::new_checked(udp.payload()).unwrap());
        assert_eq!(probe_repr.unwrap().seq, 42);
    }

    #[test]
    fn full_frame_golden_emit() {
        use std::net::Ipv4Addr;
        let mut buf = [0u8; 106];
        let mut eth = ethernet::Frame::new_unchecked(&mut buf[..]);
        ethernet::Repr {
            src_addr: ethernet::Address([2, 0, 0, 0, 0, 1]),
            dst_addr: ethernet::Address([2, 0, 0, 0, 0, 2]),
            ethertype: ethernet::EtherType::Ipv4,
        }
        .emit(&mut eth);
        let (src, dst) = (Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2));
        let ip_repr = ipv4::Repr {
            src_addr: src,
            dst_addr: dst,
            protocol: ipv4::Protocol::Udp,
            payload_len: 72,
            ttl: 64,
        };
        let mut ip = ipv4::Packet::new_unchecked(eth.payload_mut());
        ip_repr.emit(&mut ip);
        let mut udp = udp::Packet::new_unchecked(ip.payload_mut());
        let udp_repr = udp::Repr {
            src_port: 40000,
            dst_port: 7,
            payload_len: 64,
        };
        udp_repr.emit(&mut udp, src, dst);
        let payload = udp.payload_mut();
        payload[probe::HEADER_LEN..].fill(0xa5);
        let t0 = 1_700_000_000_000_000_000;
        probe::Repr {
            run_id: 0xdead_beef,
            flow: 2,
            seq: 42,
            intended_send_ns: t0,
            actual_send_ns: t0 + 250,
            responder: Some((t0 + 10_000, t0 + 10_400)),
            responder_clock: probe::ResponderClock::NotAsked,
        }
        .emit(&mut probe::Packet::new_unchecked(payload));
        // The UDP checksum covers the payload: refill it now that it is final.
        udp.fill_checksum(src, dst);
        assert_eq!(buf, FRAME);
    }
}
