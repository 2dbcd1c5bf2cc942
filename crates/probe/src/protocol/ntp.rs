//! `--protocol ntp`: NTPv4 client requests (RFC 5905, mode 3) to any NTP server.
//!
//! A request is the 48-byte header with LI 0, VN 4, mode 3 and every field zero but the
//! transmit timestamp, which holds a token instead of a time: the run's 24-bit tag above the
//! request's sequence number (40 bits, XORed with a mask of the run). A server copies it into
//! its reply's origin timestamp (RFC 5905 §8), which names the request ([`Key::Seq`]); a tag
//! of another run names none (`wrong id`). The tag is never zero, so neither is the token.
//!
//! The reply's receive (T2) and transmit (T3) timestamps are the server's own clock: T3 − T2
//! is its time with the request ([`Verdict::server_ns`]), which the report prints apart from
//! the path's round trip. Its clock need not agree with latlab's: only the difference is read.
//!
//! Outcomes: `synchronized`; `unsynchronized` (leap 3, stratum 16, or a stratum 0 without a
//! kiss code: chronyd answers so before it has a reference); `kiss-o'-death RATE`, `DENY`,
//! `RSTR` and `other` (stratum 0 with an ASCII kiss code in the reference ID, §7.4).

use std::net::SocketAddr;

use latlab_wire::ntp::{self, Mode, Packet, Repr, Timestamp};

use super::token::RunKey;
use super::{Cause, Key, Protocol, Read, Replies, Request, Requests, Sent, Verdict, Written};

/// What this protocol mixes into its run's key.
const SALT: u64 = 0x4e54_5076_3400_0000;

/// T3 − T2 above this is no server's time with one request.
const MAX_SERVER_NS: i64 = 1_000_000_000;

/// The outcomes, in [`Verdict::outcome`]'s order.
const OUTCOMES: [&str; 6] = [
    "synchronized",
    "unsynchronized",
    "kiss-o'-death RATE",
    "kiss-o'-death DENY",
    "kiss-o'-death RSTR",
    "kiss-o'-death other",
];

/// NTP client requests.
#[derive(Clone, Copy, Debug, Default)]
pub struct Ntp;

impl Protocol for Ntp {
    fn name(&self) -> &'static str {
        "ntp"
    }

    fn max_request_len(&self) -> usize {
        ntp::HEADER_LEN
    }

    fn outcomes(&self) -> &'static [&'static str] {
        &OUTCOMES
    }

    fn split(&self, run_id: u32, _locals: &[SocketAddr]) -> (Box<dyn Requests>, Box<dyn Replies>) {
        let key = RunKey::new(run_id, SALT);
        (Box::new(NtpRequests { key }), Box::new(NtpReplies { key }))
    }
}

#[derive(Debug)]
struct NtpRequests {
    key: RunKey,
}

impl Requests for NtpRequests {
    fn write(&mut self, request: Request, buf: &mut [u8]) -> Written {
        let repr = Repr::client(Timestamp(self.key.token(request.seq)));
        repr.emit(&mut Packet::new_unchecked(&mut buf[..ntp::HEADER_LEN]));
        Written {
            len: ntp::HEADER_LEN,
            aux: 0,
        }
    }
}

#[derive(Debug)]
struct NtpReplies {
    key: RunKey,
}

impl Replies for NtpReplies {
    fn read(&mut self, _flow: u32, payload: &[u8]) -> Result<Read, Cause> {
        let reply = Repr::parse(&Packet::new_unchecked(payload)).map_err(|_| "not ntp")?;
        if reply.mode != Mode::Server {
            return Err("not a server reply");
        }
        if reply.origin.0 == 0 {
            return Err("zero origin");
        }
        if kiss_code(&reply).is_none() {
            server_ns(&reply)?;
        }
        // Another run's token names a sequence number no request of this run has.
        Ok(Read::Answer(Key::Seq(
            self.key.seq(reply.origin.0).unwrap_or(u64::MAX),
        )))
    }

    fn judge(&mut self, _flow: u32, _sent: &Sent, payload: &[u8]) -> Result<Verdict, Cause> {
        let reply = Repr::parse(&Packet::new_unchecked(payload)).map_err(|_| "not ntp")?;
        if let Some(code) = kiss_code(&reply) {
            let outcome = match &code {
                b"RATE" => 2,
                b"DENY" => 3,
                b"RSTR" => 4,
                _ => 5,
            };
            return Ok(Verdict {
                outcome,
                server_ns: None,
            });
        }
        let unsynchronized = reply.leap == 3 || reply.stratum == 0 || reply.stratum >= 16;
        Ok(Verdict {
            outcome: usize::from(unsynchronized),
            server_ns: Some(server_ns(&reply)?),
        })
    }
}

/// The kiss code of a kiss-o'-death reply: stratum 0 and four ASCII capitals or digits in the
/// reference ID (RFC 5905 §7.4).
fn kiss_code(reply: &Repr) -> Option<[u8; 4]> {
    let code = reply.reference_id;
    let ascii = code
        .iter()
        .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    (reply.stratum == 0 && ascii).then_some(code)
}

/// T3 − T2, or why it is no server's time.
fn server_ns(reply: &Repr) -> Result<u64, Cause> {
    let ns = reply.transmit.since_ns(reply.receive);
    if !(0..=MAX_SERVER_NS).contains(&ns) {
        return Err("server times out of order");
    }
    Ok(ns as u64)
}

#[cfg(test)]
mod tests;
