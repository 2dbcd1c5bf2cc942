//! `--protocol quake3`: `getinfo` queries to a Quake III engine server (ioquake3, OpenArena),
//! the connectionless query a server browser sends.
//!
//! A query's challenge is 16 lowercase hex digits: the run's 24-bit tag above the request's
//! sequence number (40 bits, XORed with a mask of the run). Hex passes the engine's
//! tokenizer and `Info_SetValueForKey` untouched, and 16 characters are far below the 128
//! the engine keeps ([`quake3::MAX_CHALLENGE_LEN`]: OpenArena's server echoes 128 whole and
//! does not answer a query with 129). The server echoes it as the info
//! string's `challenge` ([`Key::Seq`]); a tag of another run names no request (`wrong id`).
//!
//! Outcomes: `info`, and `info, server full` when the reply's `clients` (bots included) has
//! reached its `sv_maxclients`.
//!
//! # The engine's rate limit: respected or named
//!
//! ioquake3's `SVC_Info` answers a source address through a leaky bucket of 10 that drains
//! one query a second (`SVC_RateLimitAddress(from, 10, 1000)`), then all addresses through
//! one of 10 draining one every 100 ms (`SVC_RateLimit(&outboundLeakyBucket, 10, 100)`), and
//! drops what overflows without a word. Measured against OpenArena's server: of 50 queries
//! at once 10 are answered; at 5/s for 10 s, 19 of 50; at 1.5/s for 20 s, 29 of 30. A run
//! at most [`PER_ADDRESS_PPS`] from its one source address *respects* the limit: every query
//! is answered, and an unanswered one is loss. Above it, [`Quake3::limit_note`] *names* the
//! limiter in the report: what is unanswered beyond the first 10 plus one a second is the
//! server's own drop, not the path's loss.

use std::net::SocketAddr;

use latlab_wire::quake3::{self, OutOfBand};

use super::token::RunKey;
use super::{Cause, Key, Protocol, Read, Replies, Request, Requests, Sent, Verdict, Written};

/// Queries a second one source address may send before ioquake3 drops some (after a burst of
/// [`BURST`]).
pub const PER_ADDRESS_PPS: f64 = 1.0;

/// Queries from all addresses a second the engine answers at most.
pub const ALL_ADDRESSES_PPS: f64 = 10.0;

/// Queries the engine answers at once before its rate limit drains.
pub const BURST: u32 = 10;

/// Hex digits of a challenge.
const CHALLENGE_LEN: usize = 16;

const OUTCOMES: [&str; 2] = ["info", "info, server full"];

/// `getinfo` queries.
#[derive(Clone, Copy, Debug, Default)]
pub struct Quake3;

impl Protocol for Quake3 {
    fn name(&self) -> &'static str {
        "quake3"
    }

    fn max_request_len(&self) -> usize {
        quake3::getinfo_len(&[0; CHALLENGE_LEN])
    }

    fn outcomes(&self) -> &'static [&'static str] {
        &OUTCOMES
    }

    fn split(&self, run_id: u32, _locals: &[SocketAddr]) -> (Box<dyn Requests>, Box<dyn Replies>) {
        let key = Challenges::new(run_id);
        (
            Box::new(Quake3Requests { key }),
            Box::new(Quake3Replies { key }),
        )
    }

    fn limit_note(&self, pps_per_address: f64) -> Option<String> {
        if pps_per_address <= PER_ADDRESS_PPS {
            return None;
        }
        let global = if pps_per_address > ALL_ADDRESSES_PPS {
            format!(
                ", and {ALL_ADDRESSES_PPS:.0}/s from all addresses (SVC_RateLimit), which \
                 this run alone overflows"
            )
        } else {
            String::new()
        };
        Some(format!(
            "limit: {pps_per_address:.1} queries/s from one address is over the engine's \
             getinfo limit of {PER_ADDRESS_PPS:.0}/s per address after a burst of {BURST} \
             (SVC_RateLimitAddress){global}: the server drops the queries above it without \
             answering, so the unanswered beyond {BURST} plus {PER_ADDRESS_PPS:.0} a second \
             are its limiter, not loss on the path"
        ))
    }
}

/// A run's challenges: its [`RunKey`]'s tokens as hex digits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Challenges(RunKey);

impl Challenges {
    fn new(run_id: u32) -> Challenges {
        Challenges(RunKey::new(run_id, 0x5133_4133_0000_0000))
    }

    /// The challenge of request `seq` (its low 40 bits), 16 hex digits.
    fn challenge(self, seq: u64) -> [u8; CHALLENGE_LEN] {
        let token = self.0.token(seq);
        let mut out = [0u8; CHALLENGE_LEN];
        for (i, b) in out.iter_mut().enumerate() {
            let nibble = (token >> (4 * (CHALLENGE_LEN - 1 - i))) & 0xf;
            *b = b"0123456789abcdef"[nibble as usize];
        }
        out
    }

    /// The sequence number `challenge` holds: `Ok(None)` for another run's,
    /// `Err` for one no run of latlab writes.
    fn seq(self, challenge: &[u8]) -> Result<Option<u64>, Cause> {
        let not_ours = "challenge not latlab's";
        if challenge.len() != CHALLENGE_LEN {
            return Err(not_ours);
        }
        let mut token = 0u64;
        for b in challenge {
            let nibble = match b {
                b'0'..=b'9' => b - b'0',
                b'a'..=b'f' => b - b'a' + 10,
                _ => return Err(not_ours),
            };
            token = (token << 4) | u64::from(nibble);
        }
        Ok(self.0.seq(token))
    }
}

#[derive(Debug)]
struct Quake3Requests {
    key: Challenges,
}

impl Requests for Quake3Requests {
    fn write(&mut self, request: Request, buf: &mut [u8]) -> Written {
        let challenge = self.key.challenge(request.seq);
        let len = quake3::emit_getinfo(&challenge, buf).expect("hex fits the request buffer");
        Written { len, aux: 0 }
    }
}

#[derive(Debug)]
struct Quake3Replies {
    key: Challenges,
}

/// The info string of `payload`, or why it is none.
fn info(payload: &[u8]) -> Result<quake3::Info<'_>, Cause> {
    let packet = OutOfBand::parse(payload).map_err(|_| "not out-of-band")?;
    packet.info_response().map_err(|e| match e {
        latlab_wire::Error::OtherProtocol => "not an infoResponse",
        _ => "malformed info string",
    })
}

impl Replies for Quake3Replies {
    fn read(&mut self, _flow: u32, payload: &[u8]) -> Result<Read, Cause> {
        let info = info(payload)?;
        let challenge = info.get(b"challenge").ok_or("no challenge")?;
        // Another run's challenge names a sequence number no request of this run has.
        let seq = self.key.seq(challenge)?.unwrap_or(u64::MAX);
        Ok(Read::Answer(Key::Seq(seq)))
    }

    fn judge(&mut self, _flow: u32, _sent: &Sent, payload: &[u8]) -> Result<Verdict, Cause> {
        let info = info(payload)?;
        let full = match (info.number(b"clients"), info.number(b"sv_maxclients")) {
            (Some(clients), Some(max)) => max > 0 && clients >= max,
            _ => false,
        };
        Ok(Verdict {
            outcome: usize::from(full),
            server_ns: None,
        })
    }
}

#[cfg(test)]
mod tests;
